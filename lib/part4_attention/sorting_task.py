"""Sort a list of numbers by pointing at its positions: chapter 10's pointer-network
task.

The output vocabulary of this task is the set of input positions, so its size changes
with the input: the setting for which Vinyals et al. (2015) made the attention
distribution itself the output (:class:`lib.part4_attention.pointer.PointerNetwork`).

References
----------
.. [1] O. Vinyals, M. Fortunato, N. Jaitly. "Pointer Networks". NeurIPS 2015.
   arXiv:1506.03134.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lib.checked import NonNegativeInt, PositiveInt
from lib.part4_attention.pairs import SequencePairs

__all__ = ["SortingTask"]


@dataclass(frozen=True)
class SortingTask:
    """Sort ``length`` numbers drawn uniformly from [0, 1): output their positions,
    smallest first.

    For ``0.6, 0.1, 0.4`` the output is ``2, 3, 1`` (positions counted from 1; the
    tensors count from 0). :meth:`sample` returns
    :class:`lib.part4_attention.pairs.SequencePairs` whose src holds the numbers, tgt_in
    the previous pointer (``-1`` = start) and tgt_out the pointers to predict.
    """

    length: PositiveInt = 5

    def __post_init__(self):
        if self.length < 2:
            raise ValueError(f"length must be an int >= 2; found {self.length}")

    def sample(self, n: PositiveInt, seed: NonNegativeInt = 0) -> SequencePairs:
        """``n`` random lists and their sorting permutations."""
        generator = torch.Generator().manual_seed(seed)
        values = torch.rand(n, self.length, generator=generator)  # (n, length)
        # c_1 .. c_n, the position of the i-th smallest
        order = values.argsort(dim=1)  # (n, length)
        start = torch.full((n, 1), -1)
        lens = torch.full((n,), self.length)
        return SequencePairs(values, lens, torch.cat((start, order[:, :-1]), 1), order)
