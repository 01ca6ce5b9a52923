"""Checkers for the exercises of chapter 2 (optimisers)."""
from __future__ import annotations

import math

import torch

from courseware.checks.core import Check, Slip, tolerance_for

RADAM_TOLERANCE = dict(atol=1e-10, rtol=0.0)  # for float64 paths; float32 ones earn FLOAT32_TOLERANCE


def radam_path_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(grads, lr, beta1, beta2, eps)`` for :data:`check_radam_path`.

    ``grads`` has shape ``(T, D)`` with ``T`` from 10 to 35 and ``T != D``: the gradient fed to
    RAdam at each of ``T`` steps, enough for both of its phases (plain momentum steps while
    ``ρ_t <= 5``, up to step 5, then rectified adaptive steps). For every ``β₂`` drawn, ``ρ_5`` lies
    in ``(4, 5)`` (so that switching at ``ρ_t > 4`` shows) and ``ρ_6 > 5.3``. Every fourth case
    repeats one gradient; ``eps`` is 0.1 in the first case and every third one after it, so that where
    it is added (or whether it is left out) shows at once.
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
        eps = (0.1, 1e-8, 1e-3)[trial % 3]  # ε = 0.1 first: where ε goes shows on the first case
        cases.append((grads, lr, beta1, beta2, eps))
    return cases


def _rho(t: int, beta2: float) -> tuple[float, float]:
    """``(ρ_t, ρ_∞)``: the length of the simple moving average that RAdam equates with ``v_t``."""
    rho_inf = 2 / (1 - beta2) - 1
    return rho_inf - 2 * t * beta2**t / (1 - beta2**t), rho_inf


def _radam_path(grads, lr, beta1, beta2, eps, threshold=5.0, rectify=True, root=True, eps_like_adam=False,
                v_correction=True, m_correction=True, early_correction=True, early="momentum", eps_in="denominator"):
    """The parameters after each step, from w_0 = 0; the keywords switch on the usual slips."""
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    path = []
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m_hat = m / (1 - beta1**t) if m_correction else m
        rho, rho_inf = _rho(t, beta2)
        if rho > threshold:
            ratio = (rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)
            r = (math.sqrt(ratio) if root else ratio) if rectify else 1.0
            if eps_like_adam:
                step = m_hat / ((v / (1 - beta2**t)).sqrt() + eps)
            elif eps_in == "root":
                step = m_hat * math.sqrt(1 - beta2**t) / (v + eps).sqrt()
            elif eps_in == "nowhere":
                step = m_hat * ((1 - beta2**t) / v).sqrt()
            else:
                step = m_hat * (math.sqrt(1 - beta2**t) if v_correction else 1.0) / (v.sqrt() + eps)
            w = w - lr * r * step
        elif early == "adam":
            w = w - lr * m_hat / ((v / (1 - beta2**t)).sqrt() + eps)
        else:
            w = w - lr * (m_hat if early_correction else m)
        path.append(w)
    return torch.stack(path)  # (T, D)


def _reference(grads, lr, beta1, beta2, eps):
    """The same path from :class:`torch.optim.RAdam`."""
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    optimizer = torch.optim.RAdam([w], lr=lr, betas=(beta1, beta2), eps=eps)
    path = []
    for g in grads:
        w.grad = g.clone()
        optimizer.step()
        path.append(w.clone())
    return torch.stack(path)  # (T, D)


def _adam_path(grads, lr, beta1, beta2, eps):
    """Adam's path from w_0 = 0 (what a student who wrote the chapter's Adam returns)."""
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    path = []
    for t, g in enumerate(grads, start=1):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        w = w - lr * (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + eps)
        path.append(w)
    return torch.stack(path)  # (T, D)


def _first_difference(found: torch.Tensor, expected: torch.Tensor, grads, lr, beta1, beta2, eps) -> str:
    # found arrives cast to float64; a float32 result is one that survives the round trip through float32,
    # and its rounding (up to ~1e-8) must not be taken for the first wrong step.
    returned = found.float() if torch.equal(found, found.float().to(found.dtype)) else found
    allowed = tolerance_for(returned, RADAM_TOLERANCE)
    outside = ((found - expected).abs() > allowed["atol"] + allowed["rtol"] * expected.abs()).any(dim=1)
    bad_step = int(outside.nonzero()[0]) + 1 if outside.any() else 1
    phase = ("a momentum step, ρ_t ≤ 5" if _rho(bad_step, beta2)[0] <= 5
             else "a rectified adaptive step, ρ_t > 5")
    return (f"your path first differs from RAdam's after step {bad_step} ({phase}), "
            f"by up to {(found[bad_step - 1] - expected[bad_step - 1]).abs().max():.3g}")


def _path_shape_hint(shape: tuple, grads, *hyperparameters) -> str:
    if shape == (grads.shape[0] + 1, grads.shape[1]):
        return ": leave out the starting point w_0 = 0"
    return ": return the parameters after every step, not only the last" if shape == (grads.shape[1],) else ""


check_radam_path = Check(
    "RAdam's path agrees with torch.optim.RAdam on 12 fresh gradient sequences",
    radam_path_cases, _reference,
    describe=lambda grads, lr, beta1, beta2, eps: f"grads of shape {tuple(grads.shape)}, β₂ = {beta2:.4f}, ε = {eps:g}",
    compared_with="RAdam's", noun="path", layout="(T, D)",
    slips=(
        Slip(_adam_path, "that is Adam's path: RAdam takes plain momentum steps α m̂_t while ρ_t ≤ 5, "
                         "and multiplies each adaptive step after that by r_t"),
        Slip(lambda *case: _radam_path(*case, threshold=4.0),
             "the adaptive steps start once ρ_t > 5; you switched at ρ_t > 4, the threshold of the paper's "
             "Algorithm 2 (PyTorch, and the exercise, use 5)"),
        Slip(lambda *case: _radam_path(*case, rectify=False),
             "you left out the rectification: multiply each adaptive step by r_t, which starts small and "
             "grows towards 1"),
        Slip(lambda *case: _radam_path(*case, root=False),
             "r_t is the square root of (ρ_t - 4)(ρ_t - 2)ρ_∞ / ((ρ_∞ - 4)(ρ_∞ - 2)ρ_t); you left out the root"),
        Slip(lambda *case: _radam_path(*case, eps_like_adam=True),
             "ε is added to √v_t before the bias correction, √(1 - β₂^t) / (√v_t + ε), as torch.optim.RAdam "
             "does; you added it to √v̂_t, as Adam does"),
        Slip(lambda *case: _radam_path(*case, eps_in="root"),
             "ε is added outside the square root, √(1 - β₂^t) / (√v_t + ε), as torch.optim.RAdam does; "
             "you put it inside, √(1 - β₂^t) / √(v_t + ε)"),
        Slip(lambda *case: _radam_path(*case, eps_in="nowhere"),
             "you left out ε: the paper's l_t = √((1 - β₂^t) / v_t) has none, but torch.optim.RAdam (and the "
             "exercise) divide by √v_t + ε, as in √(1 - β₂^t) / (√v_t + ε)"),
        Slip(lambda *case: _radam_path(*case, v_correction=False),
             "you left out the bias correction of v: the adaptive step is multiplied by √(1 - β₂^t)"),
        Slip(lambda *case: _radam_path(*case, early_correction=False),
             "while ρ_t ≤ 5 the step is α m̂_t, with the bias-corrected m̂_t = m_t / (1 - β₁^t); "
             "your momentum steps used m_t"),
        Slip(lambda *case: _radam_path(*case, m_correction=False),
             "you left out the bias correction of m in both phases: use m̂_t = m_t / (1 - β₁^t)"),
        Slip(lambda *case: _radam_path(*case, early="adam"),
             "while ρ_t ≤ 5 RAdam does not divide by the second moment at all: the step is α m̂_t "
             "(you took Adam's step there)"),
    ),
    shape_hint=_path_shape_hint,
    nan_hint=("; while ρ_t ≤ 5 take the momentum step α m̂_t, since r_t is not defined there (for 2 < ρ_t < 4 "
              "its square root is of a negative number); and t = 1 on the first step, never 0"),
    mismatch=_first_difference, tolerance=RADAM_TOLERANCE,
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


def momentum_rate_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh inputs ``(curvatures, lr, beta)`` for :data:`check_momentum_rate`.

    ``curvatures`` holds 2 to 6 distinct positive curvatures (float64, random order) from 0.5
    to 50; ``beta`` lies in ``[0.3, 0.9]`` and ``lr`` in ``[0.05, 1.1) · 2(1 + β)/λ_max``, so that a
    few runs diverge (rate above 1). In the first half of the cases the right answer and the first
    four slips in ``_RATE_SLIPS`` are five clearly different numbers (so each of them gets its own
    message at once). In the second half at least one direction has complex roots (rate √β) and
    the right answer differs from every slip that is not √β; in the last case but one a steep
    direction's negative root (modulus above √β) sets the rate, so the signed larger root
    (T + √D)/2 is wrong there, and in the last a complex pair sets it, so |Re z| is wrong there.
    """
    cases = []
    while len(cases) < trials:
        dim = int(torch.randint(2, 7, (), generator=generator))
        curvatures = torch.empty(dim, dtype=torch.float64).uniform_(0.5, 50.0, generator=generator)
        beta = float(torch.empty(()).uniform_(0.3, 0.9, generator=generator))
        limit = 2 * (1 + beta) / float(curvatures.max())
        lr = float(torch.empty(()).uniform_(0.05, 1.1, generator=generator)) * limit
        root = math.sqrt(beta)
        band = ((1 - root) ** 2 < lr * curvatures) & (lr * curvatures < (1 + root) ** 2)  # complex roots
        if len(cases) < trials // 2 and band.any():
            # Rejected before any rate is computed, as the comparison below would reject it: a
            # direction's two roots multiply to det R = β, so its larger modulus is at least √β, with
            # equality exactly for a complex pair. Where a direction has complex roots the SMALLEST
            # rate (the fastest direction, slowest=False) is therefore √β, the always-complex slip.
            continue
        values = [float(_momentum_rate(curvatures, lr, beta, **wrong)) for wrong in ({}, *_RATE_SLIPS)]
        if len(cases) < trials // 2:  # the answer and the first four slips pairwise apart
            first = values[:5]
            keep = all(abs(a - b) > 1e-3 for i, a in enumerate(first) for b in first[i + 1:])
        else:
            keep = bool(band.any()) and all(abs(values[0] - value) > 1e-3 for value in values[1:]
                                            if abs(value - root) > 1e-12)
            if len(cases) == trials - 2:  # a steep direction's negative root sets the rate
                keep = keep and abs(values[0] - values[5]) > 1e-3
            if len(cases) == trials - 1:  # a complex pair sets the rate (√β, not |Re z|)
                real = float(_momentum_rate(curvatures, lr, beta, **_REAL_PART))
                keep = keep and abs(values[0] - real) > 1e-3
        if keep:
            cases.append((curvatures, lr, beta))
    return cases


_RATE_SLIPS = (dict(beta_is_zero=True), dict(always_complex=True), dict(slowest=False),
               dict(notes_lr=True), dict(signed_root=True), dict(old_buffer=True))
_REAL_PART = dict(real_part=True)  # equals the answer wherever real roots set the rate


def _momentum_rate(curvatures: torch.Tensor, lr: float, beta: float, beta_is_zero: bool = False,
                   always_complex: bool = False, slowest: bool = True, notes_lr: bool = False,
                   signed_root: bool = False, real_part: bool = False, old_buffer: bool = False):
    """The largest spectral radius of ``R = [[β, λ], [-αβ, 1 - αλ]]`` over the directions, from
    ``torch.linalg.eigvals``; the keywords give the usual slips."""
    if always_complex:
        return torch.tensor(math.sqrt(beta), dtype=torch.float64)
    if signed_root:  # the larger signed root (T + √D)/2, √β where the roots are complex
        trace = 1 + beta - lr * curvatures
        discriminant = trace**2 - 4 * beta
        larger = (trace + discriminant.clamp(min=0).sqrt()) / 2
        return torch.where(discriminant >= 0, larger, math.sqrt(beta)).max()
    beta = 0.0 if beta_is_zero else beta
    lr = lr * (1 - beta) if notes_lr else lr
    step = torch.full_like(curvatures, -lr) if old_buffer else torch.full_like(curvatures, -lr * beta)
    rows = [torch.stack([torch.full_like(curvatures, beta), curvatures], -1),
            torch.stack([step, 1 - lr * curvatures * (not old_buffer)], -1)]
    eigenvalues = torch.linalg.eigvals(torch.stack(rows, -2))
    radius = (eigenvalues.real.abs() if real_part else eigenvalues.abs()).amax(-1)  # (D,)
    return radius.max() if slowest else radius.min()


check_momentum_rate = Check(
    "the rate agrees with the spectral radius of R on 10 fresh quadratics",
    momentum_rate_cases, _momentum_rate,
    describe=lambda curvatures, lr, beta: (f"curvatures {[round(c, 2) for c in curvatures.tolist()]}, "
                                           f"α = {lr:.4f}, β = {beta:.2f}"),
    compared_with="the rate", noun="rate", layout=" (a 0-dimensional tensor)",
    slips=(
        Slip(lambda *case: _momentum_rate(*case, beta_is_zero=True),
             "that is gradient descent's rate max |1 - αλ|: with momentum each direction's rate is the "
             "larger modulus of the roots of z² - (1 + β - αλ) z + β"),
        Slip(lambda *case: _momentum_rate(*case, always_complex=True),
             "√β is the rate only of directions whose roots are complex; for curvatures outside "
             "(1 - √β)²/α < λ < (1 + √β)²/α the roots are real and the larger one has modulus above √β"),
        Slip(lambda *case: _momentum_rate(*case, slowest=False),
             "the slowest direction sets the pace: take the largest rate over the directions, not the smallest"),
        Slip(lambda *case: _momentum_rate(*case, notes_lr=True),
             "PyTorch's SGD steps by α times its buffer, not by α(1 - β): the notes' average is the one "
             "scaled by 1 - β"),
        Slip(lambda *case: _momentum_rate(*case, signed_root=True),
             "the rate is the larger modulus |z| of the roots, not the larger signed root (T + √D)/2: "
             "where αλ > 1 + β the trace T = 1 + β - αλ is negative, and a steep direction's negative "
             "root (T - √D)/2 has the larger modulus, (|1 + β - αλ| + √D)/2"),
        Slip(lambda *case: _momentum_rate(*case, real_part=True),
             "that is the modulus of the eigenvalues' real part: a complex pair z = a ± ib has modulus "
             "√(a² + b²) = √β, take the absolute value of the complex eigenvalue itself"),
        Slip(lambda *case: _momentum_rate(*case, old_buffer=True),
             "PyTorch updates the buffer before the step: b_(t+1) = β b_t + λ w_t, then "
             "w_(t+1) = w_t - α b_(t+1), so R = [[β, λ], [-αβ, 1 - αλ]]; you stepped with the old "
             "buffer b_t"),
    ),
    tolerance=dict(atol=1e-7, rtol=1e-7),
    forbidden=("lib.part1_blocks.heavy_ball",),
)
