"""Recall the first symbol of a sequence after many distractors: chapter 4's
long-range memory task.

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
from jaxtyping import Float, Int64
from torch import Tensor

from lib.checked import NonNegativeInt, PositiveInt

__all__ = ["MemoryTask"]


@dataclass(frozen=True)
class MemoryTask:
    """Remember the first symbol of a sequence across ``length`` distractors.

    A sequence has ``length + 2`` steps: a symbol ``y`` out of ``symbols`` (marked by a
    "store" flag), ``length`` random symbols of the same alphabet (distractors,
    unmarked), then an empty step marked "recall", at which the model must output
    ``y``. Guessing is right with probability ``1 / symbols``. Each step is a one-hot
    symbol (zeros at the recall step) followed by the two flags.
    """

    length: NonNegativeInt  # T
    symbols: PositiveInt = 4  # K

    def __post_init__(self):
        if self.symbols < 2:
            raise ValueError(f"symbols must be an int >= 2; found {self.symbols}")

    @property
    def input_size(self) -> int:
        return self.symbols + 2

    def batch(
        self, batch_size: PositiveInt, generator: Optional[torch.Generator] = None
    ) -> tuple[Float[Tensor, "B steps width"], Int64[Tensor, "B"]]:
        """A batch of fresh sequences ``x``, (B, T + 2, K + 2), and their answers ``y``,
        the first symbols."""
        K, T = self.symbols, self.length
        # y, then the distractors
        symbols = torch.randint(
            0, K, (batch_size, T + 1), generator=generator
        )  # (B, T + 1)
        x = torch.zeros(batch_size, T + 2, K + 2)  # (B, T + 2, K + 2)
        x[:, : T + 1, :K] = F.one_hot(symbols, K).float()
        x[:, 0, K] = 1.0  # store
        x[:, T + 1, K + 1] = 1.0  # recall
        return x, symbols[:, 0]
