"""Learning-rate schedules: the factor of the base learning rate at step ``t``.

A schedule is a function of the step number ``t`` (0 for the first update) that returns
a multiplier of the optimiser's base learning rate ``α``; the step then uses
``α_t = α · factor(t)``. Each function here equals one of ``torch.optim.lr_scheduler``'s
classes step by step (the tests run them side by side), so it can also be handed to
``torch.optim.lr_scheduler.LambdaLR`` as its ``lr_lambda`` (fix the other arguments
with :func:`functools.partial`):

* :func:`step_decay` — ``StepLR``: divide by a constant every ``step_size`` steps;
* :func:`cosine` — ``CosineAnnealingLR`` (Loshchilov & Hutter's SGDR without restarts):
  half a cosine from 1 down to ``min_factor`` over ``total`` steps;
* :func:`warmup_then_decay` — ``SequentialLR`` of a ``LinearLR`` warm-up and a linear
  (``LinearLR``) or cosine (``CosineAnnealingLR``) decay, as in Goyal et al.'s
  large-batch training and most Transformer recipes.

After ``total`` steps :func:`cosine` and :func:`warmup_then_decay` stay at
``min_factor``; ``CosineAnnealingLR`` would follow the cosine back up (the tests check
the two up to ``total`` only).

References
----------
.. [1] I. Loshchilov, F. Hutter. "SGDR: Stochastic Gradient Descent with Warm
   Restarts". ICLR 2017.
.. [2] P. Goyal, P. Dollár, R. Girshick, P. Noordhuis, L. Wesolowski, A. Kyrola,
   A. Tulloch, Y. Jia, K. He. "Accurate, Large Minibatch SGD: Training ImageNet in
   1 Hour". arXiv:1706.02677, 2017.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

from lib.checked import Finite, Fraction, NonNegativeInt, PositiveInt

__all__ = [
    "step_decay",
    "cosine",
    "warmup_then_decay",
    "DECAYS",
]

Decay = Literal["linear", "cosine"]
DECAYS = get_args(Decay)


def step_decay(
    t: NonNegativeInt, step_size: PositiveInt, gamma: Fraction = 0.1
) -> Finite:
    """``γ^⌊t / step_size⌋``: the factor drops by ``γ`` every ``step_size`` steps, as
    ``StepLR(optimizer, step_size, gamma)`` after ``t`` calls of its ``step()``."""
    return gamma ** (t // step_size)


def cosine(t: NonNegativeInt, total: PositiveInt, min_factor: Fraction = 0.0) -> Finite:
    """``m + (1 - m)(1 + cos(π t / T)) / 2``: from 1 at ``t = 0`` to ``m`` at ``t = T``.

    As ``CosineAnnealingLR(optimizer, T_max=total, eta_min=min_factor * lr)`` for
    ``t <= total``; afterwards the factor stays at ``min_factor`` (PyTorch's rises).
    """
    t = min(t, total)  # after total steps, stay at min_factor
    return min_factor + (1 - min_factor) * (1 + math.cos(math.pi * t / total)) / 2


def warmup_then_decay(
    t: NonNegativeInt,
    warmup: PositiveInt,
    total: PositiveInt,
    start_factor: Fraction = 0.1,
    decay: Decay = "cosine",
    min_factor: Fraction = 0.0,
) -> Finite:
    """A linear warm-up from ``start_factor`` to 1 over ``warmup`` steps, then a linear
    or cosine decay to ``min_factor`` at step ``total``, where it stays.

    As ``SequentialLR`` of ``LinearLR(start_factor, total_iters=warmup)`` and, from
    step ``warmup``, ``LinearLR(1, min_factor)`` or ``CosineAnnealingLR``.
    """
    if total <= warmup:
        raise ValueError(
            f"total must be an int >= {warmup + 1} (warmup + 1); found {total}"
        )
    if start_factor == 0:
        raise ValueError(
            "start_factor must be > 0 (a first step of size 0 is wasted); found 0"
        )
    if t < warmup:
        return start_factor + (1 - start_factor) * t / warmup
    if decay == "cosine":
        return cosine(t - warmup, total - warmup, min_factor)
    return 1 - (1 - min_factor) * min(t - warmup, total - warmup) / (total - warmup)
