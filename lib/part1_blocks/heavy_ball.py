"""Why momentum works: convergence rates of gradient descent and heavy-ball momentum.

On a quadratic ``R(w) = ½ Σ_i λ_i (w_i - w*_i)²`` (in the eigenbasis of its Hessian)
every eigen-direction evolves on its own. With PyTorch's momentum (``torch.optim.SGD``
and :class:`lib.part1_blocks.optim.SGD`, no dampening), ``b_t = β b_{t-1} + g_t`` and
``w_t = w_{t-1} - α b_t``, the error ``x = w_i - w*_i`` and the buffer ``b`` of one
direction obey::

    (b_t, x_t) = R (b_{t-1}, x_{t-1}),   R = [[β, λ], [-αβ, 1 - αλ]]

(Goh 2017, section "The Dynamics of Momentum"; ``b_0 = 0`` gives PyTorch's
``b_1 = g_1``). The error
shrinks like ``ρ(R)^t``, with ``ρ`` the spectral radius: the larger modulus of the roots
of ``z² - (1 + β - αλ) z + β``. Their product is ``β``, so complex roots have modulus
``√β``. ``β = 0`` is gradient descent, with rate ``|1 - αλ|``.

Polyak (1964) chose the learning rate and momentum that make the
slowest direction fastest: with ``m`` and ``L`` the smallest and largest curvatures and
``κ = L / m``, ``α = 4 / (√L + √m)²`` and ``β = ((√κ - 1) / (√κ + 1))²`` give every
direction the rate ``(√κ - 1) / (√κ + 1)``, against ``(κ - 1) / (κ + 1)`` for gradient
descent at its best learning rate ``2 / (L + m)`` (Goh 2017, "Optimal parameters").
The steps needed to shrink the error by a factor ``e`` grow like ``√κ / 2`` instead
of ``κ / 2``.

References
----------
.. [1] B. T. Polyak. "Some methods of speeding up the convergence of iteration
   methods". USSR Computational Mathematics and Mathematical Physics 4(5), 1964.
.. [2] G. Goh. "Why Momentum Really Works". Distill, 2017. doi:10.23915/distill.00006.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from jaxtyping import Float
from torch import Tensor

from lib.checked import DecayRate, NonNegative, NonNegativeInt, PositiveInt
from lib.part1_blocks.optim import SGD

__all__ = [
    "iteration_matrix",
    "direction_rates",
    "polyak_optimum",
    "gd_optimum",
    "quadratic_run",
    "measured_rates",
    "steps_per_e_fold",
]

UNDERFLOW = (
    1e-200  # errors below this are left out of a fitted rate (float64 ends ~1e-308)
)


def _check_curvatures(curvatures: Tensor) -> None:
    if not torch.isfinite(curvatures).all():
        raise ValueError(f"curvatures must be finite; found {curvatures.tolist()}")
    if curvatures.numel() == 0 or not (curvatures > 0).all():
        raise ValueError(
            "curvatures must hold at least one number, all of them positive; "
            f"found {curvatures.tolist()}"
        )


def iteration_matrix(
    curvatures: Float[Tensor, "D"], lr: NonNegative, beta: DecayRate
) -> Float[Tensor, "D 2 2"]:
    """``R_i = [[β, λ_i], [-αβ, 1 - αλ_i]]``: one step of ``SGD(lr=α, momentum=β)``
    on eigen-direction ``i``, acting on its (buffer, error) pair."""
    _check_curvatures(curvatures)
    row_b = torch.stack([torch.full_like(curvatures, beta), curvatures], dim=-1)
    row_x = torch.stack(
        [torch.full_like(curvatures, -lr * beta), 1 - lr * curvatures], -1
    )
    return torch.stack([row_b, row_x], dim=-2)  # (D, 2, 2)


def direction_rates(
    curvatures: Float[Tensor, "D"], lr: NonNegative, beta: DecayRate
) -> Float[Tensor, "D"]:
    """The spectral radius of each ``R_i``, in closed form: the larger modulus of the
    roots of ``z² - (1 + β - αλ_i) z + β``; ``√β`` when they are complex."""
    _check_curvatures(curvatures)
    trace = 1 + beta - lr * curvatures  # (D,): the sum of the two roots
    discriminant = trace**2 - 4 * beta
    real = (trace.abs() + discriminant.clamp(min=0).sqrt()) / 2  # two real roots
    return torch.where(discriminant < 0, math.sqrt(beta), real)


def polyak_optimum(curvatures: Float[Tensor, "D"]) -> tuple[float, float, float]:
    """Polyak's ``(α, β, rate)``: ``α = 4/(√L + √m)²``, ``β = ((√L - √m)/(√L + √m))²``,
    ``rate = √β``, for the extreme curvatures ``m`` and ``L``."""
    _check_curvatures(curvatures)
    low, high = math.sqrt(curvatures.min()), math.sqrt(curvatures.max())
    lr = (2 / (high + low)) ** 2
    rate = (high - low) / (high + low)  # (√κ - 1)/(√κ + 1)
    return lr, rate**2, rate


def gd_optimum(curvatures: Float[Tensor, "D"]) -> tuple[float, float]:
    """Gradient descent's best ``(α, rate)``: ``α = 2/(L + m)``,
    ``rate = (κ-1)/(κ+1)``."""
    _check_curvatures(curvatures)
    low, high = float(curvatures.min()), float(curvatures.max())
    return 2 / (high + low), (high - low) / (high + low)


def quadratic_run(
    curvatures: Float[Tensor, "D"],
    lr: NonNegative,
    beta: DecayRate,
    steps: PositiveInt,
    start: Optional[Float[Tensor, "D"]] = None,
) -> Float[Tensor, "path D"]:
    """The errors ``w_t - w*`` of ``SGD(lr, momentum=beta)`` on ``½ Σ λ_i w_i²``, from
    ``start`` (all ones by default), one row per step from ``t = 0``; float64. A run
    that overflows is cut at its first non-finite point."""
    _check_curvatures(curvatures)
    curvatures = curvatures.double()
    w = torch.ones_like(curvatures) if start is None else start.double().clone()
    if w.shape != curvatures.shape:
        raise ValueError(
            f"start must have the shape of curvatures {tuple(curvatures.shape)}; "
            f"found {tuple(w.shape)}"
        )
    optimizer = SGD([w], lr=lr, momentum=beta)
    path = [w.clone()]
    for _ in range(steps):
        w.grad = curvatures * w  # the gradient of ½ Σ λ_i w_i²
        optimizer.step()
        if not torch.isfinite(w).all():
            break
        path.append(w.clone())
    return torch.stack(path)  # (<= steps + 1, D)


def measured_rates(
    errors: Float[Tensor, "T D"], start: NonNegativeInt = 0
) -> Float[Tensor, "D"]:
    """The geometric rate at which each column of ``errors`` (``w_t - w*`` per
    eigen-direction, one row per step) shrinks, fitted from row ``start`` on.

    An oscillating error passes near 0, so the fit uses ``√(x_t² + x_{t-1}²)``, whose
    logarithm is fitted by a straight line (least squares) over the rows where it lies
    between :data:`UNDERFLOW` and its inverse; the rate is ``exp(slope)`` (above 1 for a
    run that diverges).
    """
    if not 0 <= start < errors.shape[0] - 4:
        raise ValueError(
            "start must leave at least 5 rows of errors (4 points of the envelope); "
            f"found start={start} with {errors.shape[0]} rows"
        )
    x = errors[start:].double()
    envelope = (x[1:] ** 2 + x[:-1] ** 2).sqrt()  # (T - start - 1, D)
    rates = []
    for column in envelope.T:
        kept = ((column > UNDERFLOW) & (column < 1 / UNDERFLOW)).nonzero().flatten()
        if len(kept) < 4:
            raise ValueError(
                "errors must stay within [1e-200, 1e200] for at least 4 steps in every "
                f"direction; found {len(kept)} in one"
            )
        t = kept.double()
        y = column[kept].log()
        slope = ((t - t.mean()) * (y - y.mean())).sum() / ((t - t.mean()) ** 2).sum()
        rates.append(slope.exp())
    return torch.stack(rates)


def steps_per_e_fold(rate: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """``-1 / ln(rate)``: the steps after which an error shrinking at ``rate`` per step
    is ``e`` times smaller (``≈ κ/2`` for gradient descent, ``√κ/2`` for momentum)."""
    if not ((rate > 0) & (rate < 1)).all():
        raise ValueError(f"rate must lie in (0, 1); found {rate.tolist()}")
    return -1 / rate.log()
