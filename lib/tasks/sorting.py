"""Sort a list of numbers by pointing at its positions: chapter 10's pointer-network task.

The output vocabulary of this task is the set of input positions, so its size
changes with the input: the setting for which Vinyals et al. (2015) made the
attention distribution itself the output (:class:`lib.pointer.PointerNetwork`).

References
----------
.. [1] O. Vinyals, M. Fortunato, N. Jaitly. "Pointer Networks". NeurIPS 2015.
   arXiv:1506.03134.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from lib.training import SequencePairs
from lib.validation import require_int

__all__ = ["SortingTask"]


@dataclass(frozen=True)
class SortingTask:
    """Sort ``length`` numbers drawn uniformly from [0, 1): output their positions, smallest first.

    For ``0.6, 0.1, 0.4`` the output is ``2, 3, 1`` (positions counted from 1;
    the tensors count from 0). A pointer network reads the numbers and points
    at one input position per step.

    Shapes
    ------
    :meth:`sample` returns :class:`lib.training.SequencePairs` with
    src (N, n) float numbers, src_lens (N,), tgt_in (N, n) the previous
    pointer (``-1`` = start) and tgt_out (N, n) the pointers to predict.
    """

    length: int = 5

    def __post_init__(self):
        require_int("length", self.length, 2)

    def sample(self, n: int, seed: int = 0) -> SequencePairs:
        """``n`` random lists and their sorting permutations."""
        require_int("n", n)
        generator = torch.Generator().manual_seed(seed)
        values = torch.rand(n, self.length, generator=generator)  # (N, n)
        order = values.argsort(dim=1)  # (N, n): c_1 .. c_n, the position of the i-th smallest
        start = torch.full((n, 1), -1)
        return SequencePairs(values, torch.full((n,), self.length), torch.cat((start, order[:, :-1]), 1), order)
