"""Learning-rate schedules: the factor that multiplies the base learning rate at step ``t``.

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
  (``LinearLR``) or cosine (``CosineAnnealingLR``) decay, as in Goyal et al.'s large-batch
  training and most Transformer recipes.

After ``total`` steps :func:`cosine` and :func:`warmup_then_decay` stay at ``min_factor``;
``CosineAnnealingLR`` would follow the cosine back up (the tests check the two up to
``total`` only).

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
from typing import Callable, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from lib.optim import SGD, fit
from lib.validation import require_callable, require_choice, require_int, require_number

__all__ = ["step_decay", "cosine", "warmup_then_decay", "DECAYS", "excess_loss_by_schedule"]

DECAYS = ("linear", "cosine")


def step_decay(t: int, step_size: int, gamma: float = 0.1) -> float:
    """``γ^⌊t / step_size⌋``: the factor drops by ``γ`` every ``step_size`` steps.

    As ``torch.optim.lr_scheduler.StepLR(optimizer, step_size, gamma)`` after ``t``
    calls of its ``step()``.

    Parameters
    ----------
    t : int
        The step, 0 for the first update.
    step_size : int
        Steps between two drops.
    gamma : float
        The factor of each drop, in ``[0, 1]``.

    Returns
    -------
    float
        The multiplier of the base learning rate.

    Shapes
    ------
    scalars in, a scalar out
    """
    require_int("t", t, 0), require_int("step_size", step_size), require_number("gamma", gamma, 0.0, 1.0)
    return gamma ** (t // step_size)


def cosine(t: int, total: int, min_factor: float = 0.0) -> float:
    """``m + (1 - m)(1 + cos(π t / T)) / 2``: from 1 at ``t = 0`` to ``m`` at ``t = T``.

    As ``torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total,
    eta_min=min_factor * lr)`` for ``t <= total``; afterwards the factor stays at
    ``min_factor`` (PyTorch's would rise again).

    Parameters
    ----------
    t : int
        The step, 0 for the first update.
    total : int
        ``T``, the step at which the factor reaches ``min_factor``.
    min_factor : float
        ``m``, the final factor, in ``[0, 1]``.

    Returns
    -------
    float
        The multiplier of the base learning rate.

    Shapes
    ------
    scalars in, a scalar out
    """
    require_int("t", t, 0), require_int("total", total), require_number("min_factor", min_factor, 0.0, 1.0)
    return min_factor + (1 - min_factor) * (1 + math.cos(math.pi * min(t, total) / total)) / 2


def _check_warmup(t: int, warmup: int, total: int, start_factor: float, decay: str, min_factor: float) -> None:
    require_int("t", t, 0), require_int("warmup", warmup), require_int("total", total, warmup + 1)
    require_number("start_factor", start_factor, 0.0, 1.0), require_choice("decay", decay, DECAYS)
    require_number("min_factor", min_factor, 0.0, 1.0)
    if start_factor == 0:
        raise ValueError("start_factor must be > 0 (a first step of size 0 is wasted); found 0")


def warmup_then_decay(t: int, warmup: int, total: int, start_factor: float = 0.1, decay: str = "cosine",
                      min_factor: float = 0.0) -> float:
    """A linear warm-up from ``start_factor`` to 1 over ``warmup`` steps, then a decay to
    ``min_factor`` at step ``total``.

    With ``W = warmup``, ``T = total``, ``s = start_factor``, ``m = min_factor`` and
    ``p = (t - W) / (T - W)``::

        factor(t) = s + (1 - s) t / W                 for t < W
                  = 1 - (1 - m) p                     for W <= t <= T, decay="linear"
                  = m + (1 - m)(1 + cos(π p)) / 2     for W <= t <= T, decay="cosine"
                  = m                                 for t > T

    As ``SequentialLR`` of ``LinearLR(start_factor=s, total_iters=W)`` and, from step
    ``W``, ``LinearLR(1, m, total_iters=T - W)`` or ``CosineAnnealingLR(T_max=T - W,
    eta_min=m · lr)``.

    Parameters
    ----------
    t : int
        The step, 0 for the first update.
    warmup : int
        ``W``, the length of the warm-up.
    total : int
        ``T > W``, the step at which the decay ends.
    start_factor : float
        ``s``, the factor of the first step, in ``(0, 1]``.
    decay : {"linear", "cosine"}
        The shape of the decay.
    min_factor : float
        ``m``, the final factor, in ``[0, 1]``.

    Returns
    -------
    float
        The multiplier of the base learning rate.

    Shapes
    ------
    scalars in, a scalar out
    """
    _check_warmup(t, warmup, total, start_factor, decay, min_factor)
    if t < warmup:
        return start_factor + (1 - start_factor) * t / warmup
    if decay == "cosine":
        return cosine(t - warmup, total - warmup, min_factor)
    return 1 - (1 - min_factor) * min(t - warmup, total - warmup) / (total - warmup)


def excess_loss_by_schedule(schedules: Mapping[str, Callable[[int], float]], seeds: Sequence[int], steps: int,
                            lr: float = 0.1, batch_size: int = 8, loss_every: int = 10, n: int = 512,
                            dim: int = 10, noise: float = 0.5) -> dict[tuple[str, int], list[float]]:
    """Chapter 2's schedule experiment: mini-batch SGD on noisy linear data, excess loss per schedule.

    For each seed, draw ``n`` inputs ``x`` with ``dim`` standard-normal features, a
    standard-normal weight vector ``w`` and ``y = x w + noise · ε``, and find the
    least-squares optimum of the mean squared error with ``torch.linalg.lstsq``. Then, for
    each schedule, fit a bias-free ``nn.Linear(dim, 1)`` (initialised after
    ``torch.manual_seed(seed)``) with :class:`lib.optim.SGD` at base rate ``lr`` times
    the schedule (``LambdaLR``) by :func:`lib.optim.fit`, mini-batches drawn by a
    generator seeded with ``seed + 10``. Every schedule of a seed sees the same data,
    initial weights and batches.

    Parameters
    ----------
    schedules : mapping of str to callable
        Name -> multiplier ``λ(t)`` of the base rate (a ``LambdaLR`` ``lr_lambda``).
    seeds : sequence of int
        Each seeds the data, the initial weights and (plus 10) the batches.
    steps : int
        SGD updates per run; ``loss_every`` must divide it.
    lr : float
        The base learning rate.
    batch_size, loss_every, n, dim : int
    noise : float
        Standard deviation of the noise added to the targets.

    Returns
    -------
    dict
        ``(name, seed) -> excess losses``: the full-data loss minus the least-squares
        optimum before training and after every ``loss_every``-th step
        (``steps // loss_every + 1`` floats).

    Shapes
    ------
    x : (n, dim), y : (n, 1) for each seed
    """
    if not isinstance(schedules, Mapping) or not schedules:
        raise TypeError(f"schedules must be a non-empty mapping of name -> lr_lambda; found {schedules!r}")
    for name, schedule in schedules.items():
        require_callable(f"schedules[{name!r}]", schedule)
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise TypeError(f"seeds must be a non-empty sequence of ints; found {seeds!r}")
    for seed in seeds:
        require_int("seed", seed, 0)
    require_int("steps", steps), require_int("batch_size", batch_size), require_int("loss_every", loss_every)
    require_int("n", n, 2), require_int("dim", dim)
    require_number("lr", lr, 0.0), require_number("noise", noise, 0.0)
    excess = {}
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(n, dim, generator=generator)  # (n, dim)
        y = x @ torch.randn(dim, 1, generator=generator)  # (n, 1)
        y += noise * torch.randn(n, 1, generator=generator)
        best = F.mse_loss(x @ torch.linalg.lstsq(x, y).solution, y).item()
        for name, schedule in schedules.items():
            torch.manual_seed(seed)
            model = nn.Linear(dim, 1, bias=False)
            optimizer = SGD(model.parameters(), lr=lr)
            losses = fit(model, optimizer, x, y, F.mse_loss, steps=steps, batch_size=batch_size,
                         generator=torch.Generator().manual_seed(seed + 10), loss_every=loss_every,
                         scheduler=LambdaLR(optimizer, schedule))
            excess[name, seed] = [loss - best for loss in losses]
    return excess
