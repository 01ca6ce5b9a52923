"""Recall the first symbol of a sequence after many distractors: chapter 4's long-range memory task.

The answer is given at the first step and asked for at the last, so the
gradient that teaches a network to keep it must flow back through every step in
between: the setting in which the gradients of a plain RNN vanish (Bengio et
al., 1994) and the gates of an LSTM (Hochreiter and Schmidhuber, 1997) keep the
symbol. It is a small version of the long-time-lag tasks of their paper.

References
----------
.. [1] Y. Bengio, P. Simard, P. Frasconi. "Learning Long-Term Dependencies with
   Gradient Descent is Difficult". IEEE Transactions on Neural Networks 5(2), 1994.
.. [2] S. Hochreiter, J. Schmidhuber. "Long Short-Term Memory". Neural
   Computation 9(8), 1997.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from lib.validation import require_int

__all__ = ["MemoryTask"]


@dataclass(frozen=True)
class MemoryTask:
    """Remember the first symbol of a sequence across ``length`` distractors.

    A sequence has ``length + 2`` steps: a symbol ``y`` out of ``symbols``
    (marked by a "store" flag), ``length`` random symbols of the same alphabet
    (distractors, unmarked), then an empty step marked "recall", at which the
    model must output ``y``. Guessing is right with probability ``1 / symbols``.

    Each step is a vector of ``symbols + 2`` numbers: a one-hot symbol (zeros at
    the recall step), then the two flags.

    Parameters
    ----------
    length : int
        ``T``, the number of distractors, >= 0.
    symbols : int
        ``K`` >= 2.
    """

    length: int
    symbols: int = 4

    def __post_init__(self):
        require_int("length", self.length, 0), require_int("symbols", self.symbols, 2)

    @property
    def input_size(self) -> int:
        return self.symbols + 2

    def batch(self, batch_size: int, generator: Optional[torch.Generator] = None) -> tuple[Tensor, Tensor]:
        """A batch of fresh sequences and their answers.

        Returns
        -------
        x : Tensor
        y : LongTensor
            The first symbol of each sequence.

        Shapes
        ------
        x : (B, T + 2, K + 2)
        y : (B,)
        """
        require_int("batch_size", batch_size)
        K, T = self.symbols, self.length
        symbols = torch.randint(0, K, (batch_size, T + 1), generator=generator)  # (B, T + 1): y, then distractors
        x = torch.zeros(batch_size, T + 2, K + 2)  # (B, T + 2, K + 2)
        x[:, : T + 1, :K] = F.one_hot(symbols, K).float()
        x[:, 0, K] = 1.0  # store
        x[:, T + 1, K + 1] = 1.0  # recall
        return x, symbols[:, 0]
