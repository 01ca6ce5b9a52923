"""Reverse or copy a string of digits: the sequence-to-sequence tasks of chapters 10 and 11.

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
from typing import Sequence

import torch

from lib.training import SequencePairs
from lib.validation import require_int, require_special_ids

__all__ = ["ReversalTask", "CopyTask"]


@dataclass(frozen=True)
class ReversalTask:
    """Reverse a string of ``min_len`` to ``max_len`` digits: ``3 1 4`` -> ``4 1 3``.

    The vocabulary is shared by source and target: ``pad = 0``, ``bos = 1``,
    ``eos = 2``, then the digits 0-9 as ids 3-12. To reverse, output position
    ``t`` must read source position ``n - 1 - t``: attention can look there
    directly, a recurrent encoder must carry the whole string in one vector.
    """

    min_len: int = 4
    max_len: int = 8
    pad: int = 0
    bos: int = 1
    eos: int = 2
    vocab_size: int = 13

    def __post_init__(self):
        require_int("min_len", self.min_len), require_int("max_len", self.max_len, self.min_len), require_int(
            "vocab_size", self.vocab_size, 13), require_special_ids(pad=self.pad, bos=self.bos, eos=self.eos)

    def digits(self, tokens: Sequence[int]) -> str:
        """Token ids to a digit string (special tokens are dropped)."""
        return "".join(str(t - 3) for t in tokens if t >= 3)

    def encode(self, digits: str) -> list[int]:
        """A digit string to token ids."""
        if not digits.isdigit():
            raise ValueError(f"digits must be a string of 0-9; found {digits!r}")
        return [int(c) + 3 for c in digits]

    def _target(self, tokens: Sequence[int]) -> list[int]:
        """The output for a source (token ids, no padding): the source reversed."""
        return list(reversed(tokens))

    def pairs(self, sources: Sequence[Sequence[int]]) -> SequencePairs:
        """Pad the given sources (token ids) and build their targets (reversed, or copied by :class:`CopyTask`)."""
        n, width = len(sources), self.max_len
        src = torch.full((n, width), self.pad)
        tgt_in = torch.full((n, width + 1), self.pad)
        tgt_out = torch.full((n, width + 1), self.pad)
        for i, tokens in enumerate(sources):
            if not self.min_len <= len(tokens) <= self.max_len:
                raise ValueError(f"sources must have {self.min_len} to {self.max_len} tokens; found {len(tokens)}")
            target = self._target(tokens)
            src[i, : len(tokens)] = torch.tensor(tokens)
            tgt_in[i, : len(tokens) + 1] = torch.tensor([self.bos, *target])
            tgt_out[i, : len(tokens) + 1] = torch.tensor([*target, self.eos])
        lens = torch.tensor([len(tokens) for tokens in sources])
        return SequencePairs(src, lens, tgt_in, tgt_out)

    def split(self, n_train: int, n_test: int, seed: int = 0) -> tuple[SequencePairs, SequencePairs]:
        """Random training and test sets; no test string occurs in the training set.

        Returns
        -------
        train, test : SequencePairs
            Lengths uniform in ``[min_len, max_len]``, digits uniform.
        """
        require_int("n_train", n_train), require_int("n_test", n_test)
        generator = torch.Generator().manual_seed(seed)
        train = [self._draw(generator) for _ in range(n_train)]
        seen, test = set(train), []
        while len(test) < n_test:
            candidate = self._draw(generator)
            if candidate not in seen:
                test.append(candidate)
                seen.add(candidate)  # the test strings are distinct too
        return self.pairs(train), self.pairs(test)

    def _draw(self, generator: torch.Generator) -> tuple[int, ...]:
        length = int(torch.randint(self.min_len, self.max_len + 1, (), generator=generator))
        return tuple((torch.randint(10, (length,), generator=generator) + 3).tolist())


@dataclass(frozen=True)
class CopyTask(ReversalTask):
    """Copy a string of ``min_len`` to ``max_len`` digits: ``3 1 4`` -> ``3 1 4``.

    The same vocabulary, strings and splits as :class:`ReversalTask` (the same
    seed draws the same sources); only the target differs. Output position
    ``t`` reads source position ``t``: a monotone, diagonal alignment.
    """

    def _target(self, tokens: Sequence[int]) -> list[int]:
        """The output for a source (token ids, no padding): the source itself."""
        return list(tokens)
