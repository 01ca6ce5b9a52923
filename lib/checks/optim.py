"""Checkers for the exercises of chapter 2 (optimisers)."""
from __future__ import annotations

import torch

from lib.checks.core import Check, Slip
from lib.optim import Adam


def adam_path_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(grads, lr, beta1, beta2, eps)`` for :data:`check_adam_path`.

    ``grads`` has shape ``(T, D)`` with ``T != D``: the gradient fed to Adam at each of
    ``T`` steps (up to 40, so that the bias correction still matters at the end).
    Every fourth case repeats one gradient, where Adam's step is exactly ``lr``;
    ``eps`` is large in some cases, so that putting it inside the square root shows.
    """
    cases = []
    for trial in range(trials):
        steps, dim = (int(n) for n in torch.randperm(6, generator=generator)[:2] + 2)
        steps *= 5
        grads = torch.randn(steps, dim, generator=generator, dtype=torch.float64)
        if trial % 4 == 3:
            grads = grads[:1].expand(steps, dim).clone()
        beta1 = float(torch.empty(()).uniform_(0.5, 0.95, generator=generator))
        beta2 = float(torch.empty(()).uniform_(0.9, 0.999, generator=generator))
        lr = float(torch.empty(()).uniform_(1e-3, 0.1, generator=generator))
        eps = (1e-8, 1e-3, 0.1)[trial % 3]
        cases.append((grads, lr, beta1, beta2, eps))
    return cases


def _adam_path(grads, lr, beta1, beta2, eps, correct=True, eps_inside=False, shift=0):
    """The parameters after each step, from w_0 = 0; the keywords switch on the usual slips."""
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    path = []
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat, v_hat = (m / (1 - beta1 ** (t + shift)), v / (1 - beta2 ** (t + shift))) if correct else (m, v)
        w = w - lr * m_hat / ((v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps)
        path.append(w)
    return torch.stack(path)  # (T, D)


def _reference(grads, lr, beta1, beta2, eps):
    """The same path from :class:`lib.optim.Adam` itself."""
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    optimizer = Adam([w], lr=lr, betas=(beta1, beta2), eps=eps)
    path = []
    for g in grads:
        w.grad = g.clone()
        optimizer.step()
        path.append(w.clone())
    return torch.stack(path)  # (T, D)


def _first_difference(found: torch.Tensor, expected: torch.Tensor, *case) -> str:
    bad_step = int((found - expected).abs().amax(dim=1).gt(1e-10).nonzero()[0])
    return (f"your path first differs from Adam's after step {bad_step + 1} "
            f"(by up to {(found[bad_step] - expected[bad_step]).abs().max():.3g})")


def _path_shape_hint(shape: tuple, grads, *hyperparameters) -> str:
    if shape == (grads.shape[0] + 1, grads.shape[1]):
        return ": leave out the starting point w_0 = 0"
    return ": return the parameters after every step, not only the last" if shape == (grads.shape[1],) else ""


check_adam_path = Check(
    "Adam's path agrees with lib.optim.Adam on 12 fresh gradient sequences",
    adam_path_cases, _reference,
    describe=lambda grads, *hyperparameters: f"grads of shape {tuple(grads.shape)}",
    compared_with="Adam's", noun="path", layout="(T, D)",
    slips=(
        Slip(lambda *case: _adam_path(*case, correct=False),
             "you left out the bias correction m̂ = m / (1 - β₁^t), v̂ = v / (1 - β₂^t)"),
        Slip(lambda *case: _adam_path(*case, eps_inside=True), "ε goes outside the square root: m̂ / (√v̂ + ε)"),
        Slip(lambda *case: _adam_path(*case, shift=1),
             "the bias correction uses the number of the step, t = 1 on the first step (you used t + 1)"),
    ),
    shape_hint=_path_shape_hint,
    nan_hint="; if already at step 1, check the bias correction: 1 - β^t uses t = 1 on the first step, never 0",
    mismatch=_first_difference, tolerance=dict(atol=1e-10, rtol=0.0),
    forbidden=("torch.optim",),
)


def momentum_limit_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh inputs ``(curvatures, beta)`` for :data:`check_momentum_lr_limit`.

    ``curvatures`` holds 2 to 6 distinct positive curvatures (float64, in random order, so
    that the largest is not always last); ``beta`` lies in ``[0.3, 0.99]``, where every slip
    below gives a clearly different number.
    """
    cases = []
    for _ in range(trials):
        dim = int(torch.randint(2, 7, (), generator=generator))
        curvatures = torch.empty(dim, dtype=torch.float64).uniform_(0.5, 50.0, generator=generator)
        beta = float(torch.empty(()).uniform_(0.3, 0.99, generator=generator))
        cases.append((curvatures, beta))
    return cases


def _momentum_limit(curvatures: torch.Tensor, beta: float, factor: float = 1.0, smallest: bool = False):
    """``2 (1 + β) / λ_max`` times ``factor`` (``λ_min`` if ``smallest``): the answer and its slips."""
    curvature = curvatures.min() if smallest else curvatures.max()
    return factor * 2 * (1 + beta) / curvature


check_momentum_lr_limit = Check(
    "the stability limit agrees with 2(1 + β)/λ_max on 10 fresh quadratics",
    momentum_limit_cases, _momentum_limit,
    describe=lambda curvatures, beta: f"curvatures {[round(c, 2) for c in curvatures.tolist()]}, β = {beta:.2f}",
    compared_with="the limit", noun="learning rate", layout=" (a 0-dimensional tensor)",
    slips=(
        Slip(lambda curvatures, beta: _momentum_limit(curvatures, beta, 1 / (1 + beta)),
             "that is the limit without momentum, 2/λ_max; run the experiment with β = 0.9: "
             "momentum lets a larger learning rate converge"),
        Slip(lambda curvatures, beta: _momentum_limit(curvatures, beta, (1 - beta) / (1 + beta)),
             "momentum does not shrink the limit by 1 - β: PyTorch's buffer is 1/(1 - β) times larger "
             "for a steady gradient, but a diverging coordinate's gradient flips sign at every step"),
        Slip(lambda curvatures, beta: _momentum_limit(curvatures, beta, smallest=True),
             "the steepest direction, the largest curvature, is the first to diverge"),
        Slip(lambda curvatures, beta: _momentum_limit(curvatures, beta, 0.5),
             "half of the limit: at lr · λ = 1 + β the steep coordinate still converges; it diverges "
             "beyond lr · λ = 2(1 + β)"),
    ),
    tolerance=dict(atol=1e-9, rtol=1e-9),
)
