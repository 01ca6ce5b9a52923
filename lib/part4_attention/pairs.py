"""Source and target sequences of a sequence-to-sequence task, and the loop that trains
a model on them with teacher forcing (Williams and Zipser, 1989), Adam (Kingma and Ba,
2015) and cross-entropy.

:class:`SequencePairs` holds the padded pairs every task of this part produces (dates,
sorting, reversal); :func:`train_seq2seq` trains any model that maps
``(src, tgt_in, src_lens)`` to next-token logits, as chapter 10's
:class:`lib.part4_attention.seq2seq.Seq2Seq` and chapter 11's
:class:`lib.part4_attention.transformer.Seq2SeqTransformer` do.

Conventions: batch-first tensors. ``N`` pairs, ``S`` source and ``T`` target
positions, ``V`` the target vocabulary.

References
----------
.. [1] R. J. Williams, D. Zipser. "A Learning Algorithm for Continually Running
   Fully Recurrent Neural Networks". Neural Computation 1(2), 1989.
.. [2] D. P. Kingma, J. Ba. "Adam: A Method for Stochastic Optimization".
   ICLR 2015. arXiv:1412.6980.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Int, Shaped
from torch import Tensor, nn

from lib.checked import AnyInt, NonNegativeInt, Positive, PositiveInt
from lib.training import TrainingLog

__all__ = ["SequencePairs", "train_seq2seq"]


@dataclass(frozen=True)
class SequencePairs:
    """Padded source and target sequences of a sequence-to-sequence task: ``tgt_in`` is
    ``bos`` then the target (teacher forcing), ``tgt_out`` the target then ``eos``."""

    src: Shaped[Tensor, "N S"]  # token ids, or numbers (the sorting task's)
    src_lens: Int[Tensor, "N"]
    tgt_in: Int[Tensor, "N T"]
    tgt_out: Int[Tensor, "N T"]

    def __len__(self) -> int:
        return self.src.shape[0]

    def __post_init__(self):
        if len(self.src_lens) and not (
            0 <= self.src_lens.min() <= self.src_lens.max() <= self.src.shape[1]
        ):
            raise ValueError(
                f"src_lens must lie in [0, S = {self.src.shape[1]}]; "
                f"found {self.src_lens.min()} to {self.src_lens.max()}"
            )

    def __getitem__(self, index: slice | Int[Tensor, "M"]) -> SequencePairs:
        return SequencePairs(
            self.src[index],
            self.src_lens[index],
            self.tgt_in[index],
            self.tgt_out[index],
        )


def train_seq2seq(
    model: nn.Module,
    data: SequencePairs,
    epochs: PositiveInt,
    batch_size: PositiveInt = 64,
    lr: Positive = 3e-3,
    pad: AnyInt = 0,
    seed: NonNegativeInt = 0,
) -> TrainingLog:
    """Train ``model(src, tgt_in, src_lens) -> logits (B, T, V)`` with teacher forcing,
    Adam and cross-entropy that ignores padded targets; each epoch visits the pairs
    once in a seeded random order (``pad=-1`` when every id is a real target)."""
    if len(data) == 0:
        raise ValueError("data must hold at least one pair; found 0")
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    log = TrainingLog()
    model.train()
    for _ in range(epochs):
        start, total, count = time.perf_counter(), 0.0, 0
        order = torch.randperm(len(data), generator=generator)
        for first in range(0, len(data), batch_size):
            batch = data[order[first : first + batch_size]]
            logits = model(batch.src, batch.tgt_in, batch.src_lens)  # (B, T, V)
            loss = F.cross_entropy(
                logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=pad
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total, count = total + loss.item() * len(batch), count + len(batch)
        log.seconds.append(time.perf_counter() - start)
        log.losses.append(total / count)
    model.eval()
    return log
