"""Reverse or copy a string of digits: the sequence-to-sequence tasks of chapters 10
and 11.

To reverse, output position ``t`` must read source position ``n - 1 - t``:
attention can look there directly, while a recurrent encoder without attention
must carry the whole string in one vector. To copy (:class:`CopyTask`), output
position ``t`` reads source position ``t``: the alignment is the diagonal that
Luong et al.'s (2015) local-m attention assumes, where reversal's is the
anti-diagonal. The tasks follow the copy and reversal tasks used to probe
sequence-to-sequence models since Sutskever et al. (2014), who reversed the
*source* to shorten the paths it has to learn.

References
----------
.. [1] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks". NeurIPS 2014. arXiv:1409.3215.
.. [2] M.-T. Luong, H. Pham, C. D. Manning. "Effective Approaches to
   Attention-based Neural Machine Translation". EMNLP 2015. arXiv:1508.04025.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool
from torch import Tensor

from lib.checked import NonNegativeInt, PositiveInt, each
from lib.part4_attention.pairs import SequencePairs

__all__ = ["ReversalTask", "CopyTask"]


@dataclass(frozen=True)
class ReversalTask:
    """Reverse a string of ``min_len`` to ``max_len`` digits: ``3 1 4`` -> ``4 1 3``.

    Source and target share a vocabulary: ``pad``, ``bos`` and ``eos`` are 0, 1 and 2
    (in some order), then the digits 0-9 are ids 3-12.
    """

    min_len: PositiveInt = 4
    max_len: PositiveInt = 8
    pad: NonNegativeInt = 0
    bos: NonNegativeInt = 1
    eos: NonNegativeInt = 2
    vocab_size: PositiveInt = 13

    def __post_init__(self):
        if self.max_len < self.min_len:
            raise ValueError(
                f"max_len must be an int >= min_len = {self.min_len}; "
                f"found {self.max_len}"
            )
        if self.vocab_size < 13:
            raise ValueError(
                f"vocab_size must be an int >= 13; found {self.vocab_size}"
            )
        if sorted((self.pad, self.bos, self.eos)) != [0, 1, 2]:
            raise ValueError(
                "pad, bos and eos must be 0, 1 and 2 in some order (the digits "
                f"start at 3); found pad = {self.pad}, bos = {self.bos}, "
                f"eos = {self.eos}"
            )

    def digits(self, tokens: each(NonNegativeInt)) -> str:
        """Token ids to a digit string (special tokens are dropped)."""
        if max(tokens, default=0) >= 13:
            raise ValueError(
                f"tokens must be ids below 13 (9 is id 12); found {max(tokens)}"
            )
        return "".join(str(t - 3) for t in tokens if t >= 3)

    def encode(self, digits: str) -> list[int]:
        """A digit string to token ids."""
        if not digits.isdigit():
            raise ValueError(f"digits must be a string of 0-9; found {digits!r}")
        return [int(c) + 3 for c in digits]

    def _target(self, tokens: list[int]) -> list[int]:
        """The output for a source (token ids, no padding): the source reversed."""
        return list(reversed(tokens))

    def _gold_position(self, t: Tensor, n: Tensor) -> Tensor:
        """The source position output position ``t`` reads (from 0): ``n - 1 - t``."""
        return n - 1 - t

    def gold_alignment(self, data: SequencePairs) -> Bool[Tensor, "N T S"]:
        """The known alignment of ``data``: ``[i, t, s]`` is True when output ``t`` of
        example ``i`` is the digit at source position ``s`` (from 0). Reversing a string
        of ``n`` digits, output ``t < n`` reads ``n - 1 - t``; the end-of-sequence step
        ``t = n`` and the padding read no digit, so their rows are all False."""
        n, width = data.src_lens[:, None], data.tgt_out.shape[1]  # (N, 1)
        t = torch.arange(width)[None]  # (1, T)
        gold = self._gold_position(t, n).masked_fill(t >= n, -1)  # (N, T); -1: none
        positions = torch.arange(data.src.shape[1])  # (S,)
        return gold[..., None] == positions  # (N, T, S)

    def pairs(self, sources: each(each(NonNegativeInt))) -> SequencePairs:
        """Pad the sources (token ids) and build their targets (reversed, or copied by
        :class:`CopyTask`)."""
        n, width = len(sources), self.max_len
        src = torch.full((n, width), self.pad)  # (N, S)
        tgt_in = torch.full((n, width + 1), self.pad)  # (N, T)
        tgt_out = torch.full((n, width + 1), self.pad)  # (N, T)
        for i, tokens in enumerate(sources):
            if not self.min_len <= len(tokens) <= self.max_len:
                raise ValueError(
                    f"sources must have {self.min_len} to {self.max_len} tokens; "
                    f"found {len(tokens)}"
                )
            if not 3 <= min(tokens) <= max(tokens) < self.vocab_size:
                raise ValueError(
                    f"sources must hold digit ids, 3 to {self.vocab_size - 1}; "
                    f"found {min(tokens)} to {max(tokens)}"
                )
            target = self._target(list(tokens))
            src[i, : len(tokens)] = torch.tensor(tokens)
            tgt_in[i, : len(tokens) + 1] = torch.tensor([self.bos, *target])
            tgt_out[i, : len(tokens) + 1] = torch.tensor([*target, self.eos])
        lens = torch.tensor([len(tokens) for tokens in sources], dtype=torch.long)
        return SequencePairs(src, lens, tgt_in, tgt_out)

    def split(
        self, n_train: PositiveInt, n_test: PositiveInt, seed: NonNegativeInt = 0
    ) -> tuple[SequencePairs, SequencePairs]:
        """Random training and test sets, lengths and digits uniform; the test strings
        are distinct and none occurs in the training set."""
        generator = torch.Generator().manual_seed(seed)
        train = [self._draw(generator) for _ in range(n_train)]
        seen, test = set(train), []
        while len(test) < n_test:
            candidate = self._draw(generator)
            if candidate not in seen:
                test.append(candidate)
                seen.add(candidate)
        return self.pairs(train), self.pairs(test)

    def _draw(self, generator: torch.Generator) -> tuple[int, ...]:
        length = int(
            torch.randint(self.min_len, self.max_len + 1, (), generator=generator)
        )
        return tuple((torch.randint(10, (length,), generator=generator) + 3).tolist())


@dataclass(frozen=True)
class CopyTask(ReversalTask):
    """Copy a string of ``min_len`` to ``max_len`` digits: ``3 1 4`` -> ``3 1 4``.

    The same vocabulary, strings and splits as :class:`ReversalTask` (the same seed
    draws the same sources); only the target differs. Output position ``t`` reads
    source position ``t``: a monotone, diagonal alignment.
    """

    def _target(self, tokens: list[int]) -> list[int]:
        """The output for a source (token ids, no padding): the source itself."""
        return list(tokens)

    def _gold_position(self, t: Tensor, n: Tensor) -> Tensor:
        """The source position output position ``t`` reads (from 0): ``t`` itself."""
        return t.expand(len(n), -1)
