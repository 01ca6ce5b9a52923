"""The checkers of chapter 2: right answers pass however they are written; wrong ones
fail with a message that says what is wrong."""
import math

import pytest
import torch

from courseware.checks import CHECKS, CheckFailed
from courseware.checks.optim import check_radam_path


def test_checker_is_registered_under_its_name():
    assert CHECKS["check_radam_path"] is check_radam_path


def radam_loop(grads, lr, beta1, beta2, eps, threshold=5.0, rectify=True, eps_like_adam=False,
               v_correction=True, early_correction=True, from_the_start=False, eps_in="denominator"):
    """From the statement, one step at a time; the keywords make the classic mistakes."""
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    rho_inf = 2 / (1 - beta2) - 1
    path = []
    for t in range(1, len(grads) + 1):
        g = grads[t - 1]
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat = m / (1 - beta1**t)
        rho = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
        if rho > threshold or from_the_start:
            r = torch.tensor((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho),
                             dtype=grads.dtype).sqrt() if rectify else 1.0  # NaN for 2 < ρ < 4
            if eps_like_adam:
                adaptive = 1 / ((v / (1 - beta2**t)).sqrt() + eps)
            elif eps_in == "root":
                adaptive = math.sqrt(1 - beta2**t) / (v + eps).sqrt()
            elif eps_in == "nowhere":  # the paper's l_t
                adaptive = ((1 - beta2**t) / v).sqrt()
            else:
                adaptive = (math.sqrt(1 - beta2**t) if v_correction else 1.0) / (v.sqrt() + eps)
            w = w - lr * r * m_hat * adaptive
        else:
            w = w - lr * (m_hat if early_correction else m)
        path.append(w)
    return torch.stack(path)


def radam_via_torch(grads, lr, beta1, beta2, eps):
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    opt = torch.optim.RAdam([w], lr=lr, betas=(beta1, beta2), eps=eps)
    path = []
    for g in grads:
        w.grad = g.clone()
        opt.step()
        path.append(w.clone())
    return torch.stack(path)


def radam_vectorised(grads, lr, beta1, beta2, eps):
    """Every step at once: closed forms of the averages (m_t = (1-β₁) Σ_τ β₁^(t-τ) g_τ, likewise v_t,
    via cumulative sums), ρ_t and r_t as columns, the phase chosen by torch.where."""
    t = torch.arange(1, len(grads) + 1, dtype=grads.dtype)[:, None]  # (T, 1)
    m = (1 - beta1) * beta1**t * torch.cumsum(grads / beta1**t, dim=0)
    v = (1 - beta2) * beta2**t * torch.cumsum(grads**2 / beta2**t, dim=0)
    m_hat = m / (1 - beta1**t)
    rho_inf = 2 / (1 - beta2) - 1
    rho = rho_inf - 2 * t * beta2**t / (1 - beta2**t)  # (T, 1)
    r = ((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)).clamp(min=0).sqrt()
    adaptive = r * m_hat * (1 - beta2**t).sqrt() / (v.sqrt() + eps)
    return -lr * torch.cumsum(torch.where(rho > 5, adaptive, m_hat), dim=0)


def radam_float32(grads, lr, beta1, beta2, eps):
    """The loop in float32 (the scalars ρ_t and r_t in Python's double precision)."""
    return radam_loop(grads.float(), lr, beta1, beta2, eps)


@pytest.mark.parametrize("answer", [radam_loop, radam_via_torch, radam_vectorised, radam_float32])
def test_accepts_right_answers_written_differently(answer, capsys):
    check_radam_path(answer)
    assert capsys.readouterr().out.startswith("✓ RAdam's path agrees with torch.optim.RAdam")


def adam_path(grads, lr, beta1, beta2, eps):
    """Plain Adam, its moments written as explicit weighted sums rather than the recursion."""
    steps = []
    for t in range(1, len(grads) + 1):
        weights = torch.arange(t - 1, -1, -1, dtype=grads.dtype)[:, None]  # (t, 1): ages t-1 .. 0
        m_hat = ((1 - beta1) * beta1**weights * grads[:t]).sum(0) / (1 - beta1**t)
        v_hat = ((1 - beta2) * beta2**weights * grads[:t] ** 2).sum(0) / (1 - beta2**t)
        steps.append(-lr * m_hat / (v_hat.sqrt() + eps))
    return torch.stack(steps).cumsum(0)  # (T, D)


WRONG = [
    (adam_path, "that is Adam's path"),
    (lambda *a: radam_loop(*a, threshold=4.0), "you switched at ρ_t > 4"),
    (lambda *a: radam_loop(*a, rectify=False), "you left out the rectification"),
    (lambda *a: radam_loop(*a, eps_like_adam=True), "you added it to √v̂_t, as Adam does"),
    (lambda *a: radam_loop(*a, v_correction=False), "you left out the bias correction of v"),
    (lambda *a: radam_loop(*a, early_correction=False), "your momentum steps used m_t"),
    (lambda *a: radam_loop(*a, from_the_start=True), "while ρ_t ≤ 5 take the momentum step"),
    (lambda *a: radam_loop(*a, eps_in="root"), "you put it inside, √\\(1 - β₂\\^t\\) / √\\(v_t \\+ ε\\)"),
    (lambda *a: radam_loop(*a, eps_in="nowhere"), "you left out ε: the paper's l_t"),
]


@pytest.mark.parametrize(
    ("answer", "message"),
    WRONG + [
        (lambda *a: torch.cat([torch.zeros(1, a[0].shape[1], dtype=a[0].dtype), radam_loop(*a)]),
         "leave out the starting point"),
        (lambda *a: radam_loop(*a)[-1], "not only the last"),
        (lambda *a: radam_loop(*a) + 1e-3, "first differs from RAdam's after step 1 \\(a momentum step"),
        (lambda *a: torch.cat([radam_loop(*a)[:6], radam_loop(*a)[6:] + 1e-3]),
         "after step 7 \\(a rectified adaptive step"),
        (lambda *a: (torch.cat([radam_loop(*a)[:6], radam_loop(*a)[6:] + 1e-3])).float(),
         "after step 7 \\(a rectified adaptive step"),
        (lambda *a: [radam_loop(*a)], "must return a torch.Tensor; it returned list"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_radam_path(answer)


def test_the_cases_show_both_phases_and_every_threshold():
    """Each case reaches the adaptive phase, has a step with 4 < ρ_t ≤ 5 (where switching at 4
    shows), and no ρ_t within rounding of 5; every fourth repeats one gradient; ε varies."""
    cases = check_radam_path.make_cases(torch.Generator().manual_seed(0))
    assert any(torch.equal(grads, grads[:1].expand_as(grads)) for grads, *_ in cases), "a constant-gradient case"
    assert {eps for *_, eps in cases} == {1e-8, 1e-3, 0.1}
    for grads, lr, beta1, beta2, eps in cases:
        rho_inf = 2 / (1 - beta2) - 1
        rho = [rho_inf - 2 * t * beta2**t / (1 - beta2**t) for t in range(1, len(grads) + 1)]
        assert rho[-1] > 5 and any(4 < r <= 5 for r in rho) and min(abs(r - 5) for r in rho) > 1e-3
        assert len(grads) != grads.shape[1]


def test_results_survive_torch_save_and_the_judge_runs_apart(tmp_path):
    cases = check_radam_path.make_cases(torch.Generator().manual_seed(0))
    torch.save([radam_loop(*args) for args in cases], tmp_path / "results.pt")
    check_radam_path.judge(cases, torch.load(tmp_path / "results.pt", weights_only=True))
    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_radam_path.judge(cases, ["NotImplementedError: write it"] * len(cases))


# ---- check_momentum_lr_limit -------------------------------------------------------------------

def test_momentum_limit_checker_is_registered_and_matches_the_measured_limit():
    from courseware.checks import check_momentum_lr_limit
    from lib.part1_blocks.optim import SGD, SURFACES, trajectory

    assert CHECKS["check_momentum_lr_limit"] is check_momentum_lr_limit
    # The experiment behind the exercise: on the chapter's quadratic (curvatures 1 and 20) SGD with
    # momentum β converges just below 2(1 + β)/20 and diverges just above it.
    for beta in (0.0, 0.5, 0.9):
        limit = 2 * (1 + beta) / 20
        below = trajectory(SGD, SURFACES["quadratic"], 400, lr=0.98 * limit, momentum=beta)
        above = trajectory(SGD, SURFACES["quadratic"], 400, lr=1.02 * limit, momentum=beta)
        assert below[-1].norm() < 0.1 * below[0].norm() and above[-1].norm() > 10 * above[0].norm()


@pytest.mark.parametrize("answer", [
    lambda curvatures, beta: 2 * (1 + beta) / curvatures.max(),
    lambda curvatures, beta: (2 + 2 * beta) / curvatures.sort().values[-1],
    lambda curvatures, beta: torch.tensor(2 * (1 + beta) / max(curvatures.tolist()), dtype=torch.float32),
])
def test_momentum_limit_accepts_right_answers(answer, capsys):
    from courseware.checks import check_momentum_lr_limit

    check_momentum_lr_limit(answer)
    assert capsys.readouterr().out.startswith("✓")


@pytest.mark.parametrize("answer, message", [
    (lambda c, beta: 2 / c.max(), "limit without momentum"),
    (lambda c, beta: 2 * (1 - beta) / c.max(), "does not shrink the limit by 1 - β"),
    (lambda c, beta: 2 * (1 + beta) / c.min(), "largest curvature, is the first to diverge"),
    (lambda c, beta: (1 + beta) / c.max(), "half of the limit"),
    (lambda c, beta: 2 * (1 + beta) / c[-1], "for curvatures"),  # a slip or the value, by draw
    (lambda c, beta: 2 * (1 + beta) / c, "expected a scalar"),
    (lambda c, beta: float(2 * (1 + beta) / c.max()), "must return a torch.Tensor"),
])
def test_momentum_limit_names_each_wrong_answer(answer, message):
    from courseware.checks import check_momentum_lr_limit

    with pytest.raises(CheckFailed, match=message):
        check_momentum_lr_limit(answer)


# ---- check_momentum_rate -------------------------------------------------------------------------

def momentum_rate_by_roots(curvatures, lr, beta):
    """Another right answer, from the statement's characteristic polynomial: the roots of
    z² - (1 + β - αλ) z + β by the quadratic formula in complex arithmetic, one direction at a time."""
    import cmath

    rate = 0.0
    for curvature in curvatures.tolist():
        trace = 1 + beta - lr * curvature
        root = cmath.sqrt(trace * trace - 4 * beta)
        rate = max(rate, abs((trace + root) / 2), abs((trace - root) / 2))
    return torch.tensor(rate, dtype=torch.float64)


def momentum_rate_by_numpy_roots(curvatures, lr, beta):
    """Another right answer: numpy.roots of each direction's characteristic polynomial (the
    eigenvalues of its companion matrix, not of R), the largest modulus over all of them."""
    import numpy as np

    moduli = [np.abs(np.roots([1.0, -(1 + beta - lr * curvature), beta])).max()
              for curvature in curvatures.tolist()]
    return torch.tensor(max(moduli), dtype=torch.float64)


def test_momentum_rate_checker_is_registered_and_matches_lib():
    from courseware.checks import check_momentum_rate
    from courseware.checks.optim import momentum_rate_cases, _momentum_rate
    from lib.part1_blocks.heavy_ball import direction_rates

    assert CHECKS["check_momentum_rate"] is check_momentum_rate
    for curvatures, lr, beta in momentum_rate_cases(torch.Generator().manual_seed(3)):
        assert torch.isclose(_momentum_rate(curvatures, lr, beta), direction_rates(curvatures, lr, beta).max())


@pytest.mark.parametrize("answer", [
    momentum_rate_by_roots,
    lambda c, lr, beta: torch.linalg.eigvals(torch.stack([
        torch.stack([torch.full_like(c, beta), c], -1),
        torch.stack([torch.full_like(c, -lr * beta), 1 - lr * c], -1)], -2)).abs().max(),
    lambda c, lr, beta: momentum_rate_by_roots(c, lr, beta).float(),
])
def test_momentum_rate_accepts_right_answers(answer, capsys):
    from courseware.checks import check_momentum_rate

    check_momentum_rate(answer)
    assert capsys.readouterr().out.startswith("✓")


MOMENTUM_RATE_WRONG = [
    (lambda c, lr, beta: (1 - lr * c).abs().max(), "gradient descent's rate"),
    (lambda c, lr, beta: torch.tensor(math.sqrt(beta), dtype=torch.float64), "only of directions whose roots are complex"),
    (lambda c, lr, beta: torch.tensor(min(float(momentum_rate_by_roots(c[i:i + 1], lr, beta)) for i in range(len(c))),
                                      dtype=torch.float64), "the slowest direction sets the pace"),
    (lambda c, lr, beta: momentum_rate_by_roots(c, lr * (1 - beta), beta), "not by α\\(1 - β\\)"),
    (lambda c, lr, beta: signed_larger_root(c, lr, beta), "not the larger signed root.*\\|1 \\+ β - αλ\\|"),
]


def signed_larger_root(curvatures, lr, beta):
    """A wrong answer: the larger signed root (T + √D)/2 of z² - T z + β without |·| (√β where
    the roots are complex), which misses a steep direction's negative root."""
    rate = -math.inf
    for curvature in curvatures.tolist():
        trace = 1 + beta - lr * curvature
        discriminant = trace * trace - 4 * beta
        rate = max(rate, (trace + math.sqrt(discriminant)) / 2 if discriminant >= 0 else math.sqrt(beta))
    return torch.tensor(rate, dtype=torch.float64)


def _matrices(c, lr, beta, step):
    return torch.stack([torch.stack([torch.full_like(c, beta), c], -1),
                        torch.stack([torch.full_like(c, step), 1 - lr * c * (step != -lr)], -1)], -2)


@pytest.mark.parametrize("answer, message", [
    (lambda c, lr, beta: torch.linalg.eigvals(_matrices(c, lr, beta, -lr * beta)).real.abs().max(),
     "modulus of the eigenvalues' real part"),
    (lambda c, lr, beta: torch.linalg.eigvals(_matrices(c, lr, beta, -lr)).abs().max(), "old buffer"),
    (lambda c, lr, beta: momentum_rate_by_roots(c, lr, beta) * (1 + 1e-5), "your rate is .*; expected"),
])
def test_momentum_rate_names_more_wrong_answers(answer, message):
    from courseware.checks import check_momentum_rate

    with pytest.raises(CheckFailed, match=message):
        check_momentum_rate(answer)


@pytest.mark.parametrize("answer, message", MOMENTUM_RATE_WRONG + [
    (lambda c, lr, beta: torch.stack([momentum_rate_by_roots(c[i:i + 1], lr, beta) for i in range(len(c))]),
     "expected a scalar"),
    (lambda c, lr, beta: float(momentum_rate_by_roots(c, lr, beta)), "must return a torch.Tensor"),
])
def test_momentum_rate_names_each_wrong_answer(answer, message):
    from courseware.checks import check_momentum_rate

    with pytest.raises(CheckFailed, match=message):
        check_momentum_rate(answer)


# ---- the fairness table (tests/courseware/test_exercise_fairness.py) ------------------------------------
def momentum_limit_by_bisection(curvatures, beta):
    """Another right answer, from the statement's definition: the learning rate above which
    SGD(momentum=beta) diverges, found by bisection on the recursion's roots. Each coordinate
    follows w_(t+1) = (1 + β - lr λ) w_t - β w_(t-1), which converges exactly when both roots of
    its companion matrix lie inside the unit circle."""
    def converges(lr):
        for curvature in curvatures.tolist():
            companion = torch.tensor([[1 + beta - lr * curvature, -beta], [1.0, 0.0]], dtype=torch.float64)
            if torch.linalg.eigvals(companion).abs().max() >= 1:
                return False
        return True

    low, high = 0.0, 1.0  # converges at low (in the limit), diverges at high
    while converges(high):
        low, high = high, 2 * high
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if converges(middle) else (low, middle)
    return torch.tensor(low, dtype=torch.float64)


FAIRNESS = {
    "check_radam_path": {
        "right": [radam_vectorised, radam_float32],
        "wrong": WRONG,
    },
    "check_momentum_lr_limit": {
        "right": [momentum_limit_by_bisection],
        "wrong": [
            (lambda c, beta: 2 / c.max(), "limit without momentum"),
            (lambda c, beta: 2 * (1 - beta) / c.max(), "does not shrink the limit by 1 - β"),
            (lambda c, beta: 2 * (1 + beta) / c.min(), "largest curvature, is the first to diverge"),
            (lambda c, beta: (1 + beta) / c.max(), "half of the limit"),
        ],
    },
    "check_momentum_rate": {
        "right": [momentum_rate_by_roots, momentum_rate_by_numpy_roots],
        "wrong": MOMENTUM_RATE_WRONG,
    },
}
