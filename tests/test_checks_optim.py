"""The checker of chapter 2: right answers pass however they are written; wrong ones
fail with a message that says what is wrong."""
import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_adam_path


def test_checker_is_registered_under_its_name():
    assert CHECKS["check_adam_path"] is check_adam_path


def adam_loop(grads, lr, beta1, beta2, eps, correct=True, eps_inside=False, shift=0):
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    m, v = torch.zeros_like(w), torch.zeros_like(w)
    path = []
    for t in range(1, len(grads) + 1):
        g = grads[t - 1]
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        m_hat = m / (1 - beta1 ** (t + shift)) if correct else m
        v_hat = v / (1 - beta2 ** (t + shift)) if correct else v
        w = w - lr * m_hat / ((v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps)
        path.append(w)
    return torch.stack(path)


def adam_via_torch(grads, lr, beta1, beta2, eps):
    w = torch.zeros(grads.shape[1], dtype=grads.dtype)
    opt = torch.optim.Adam([w], lr=lr, betas=(beta1, beta2), eps=eps)
    path = []
    for g in grads:
        w.grad = g.clone()
        opt.step()
        path.append(w.clone())
    return torch.stack(path)


def adam_vectorised(grads, lr, beta1, beta2, eps):
    # Closed forms of the averages: m_t = (1-β₁) Σ_τ β₁^(t-τ) g_τ, likewise v_t, via cumulative sums.
    t = torch.arange(1, len(grads) + 1, dtype=grads.dtype)[:, None]  # (T, 1)
    m = (1 - beta1) * beta1**t * torch.cumsum(grads / beta1**t, dim=0)
    v = (1 - beta2) * beta2**t * torch.cumsum(grads**2 / beta2**t, dim=0)
    steps = (m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + eps)
    return -lr * torch.cumsum(steps, dim=0)


@pytest.mark.parametrize("answer", [adam_loop, adam_via_torch, adam_vectorised])
def test_accepts_right_answers_written_differently(answer, capsys):
    check_adam_path(answer)
    assert capsys.readouterr().out.startswith("✓ Adam's path agrees with lib.optim.Adam")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda *a: adam_loop(*a, correct=False), "you left out the bias correction"),
        (lambda *a: adam_loop(*a, eps_inside=True), "ε goes outside the square root"),
        (lambda *a: adam_loop(*a, shift=1), "you used t \\+ 1"),
        (lambda *a: adam_loop(*a, shift=-1), "1 - β\\^t uses t = 1 on the first step"),
        (lambda *a: torch.cat([torch.zeros(1, a[0].shape[1], dtype=a[0].dtype), adam_loop(*a)]),
         "leave out the starting point"),
        (lambda *a: adam_loop(*a)[-1], "not only the last"),
        (lambda *a: adam_loop(*a) + 1e-3, "first differs from Adam's after step 1"),
        (lambda *a: [adam_loop(*a)], "must return a torch.Tensor; it returned list"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_adam_path(answer)


def test_results_survive_torch_save_and_the_judge_runs_apart(tmp_path):
    cases = check_adam_path.make_cases(torch.Generator().manual_seed(0))
    assert any(torch.equal(grads, grads[:1].expand_as(grads)) for grads, *_ in cases), "a constant-gradient case"
    torch.save([adam_loop(*args) for args in cases], tmp_path / "results.pt")
    check_adam_path.judge(cases, torch.load(tmp_path / "results.pt", weights_only=True))
    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_adam_path.judge(cases, ["NotImplementedError: write it"] * len(cases))


# ---- check_momentum_lr_limit -------------------------------------------------------------------

def test_momentum_limit_checker_is_registered_and_matches_the_measured_limit():
    from lib.checks import check_momentum_lr_limit
    from lib.optim import SGD, SURFACES, trajectory

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
    from lib.checks import check_momentum_lr_limit

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
    from lib.checks import check_momentum_lr_limit

    with pytest.raises(CheckFailed, match=message):
        check_momentum_lr_limit(answer)


# ---- the fairness table (tests/test_exercise_fairness.py) ------------------------------------
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
    "check_adam_path": {
        "right": [adam_vectorised],
        "wrong": [
            (lambda *a: adam_loop(*a, correct=False), "you left out the bias correction"),
            (lambda *a: adam_loop(*a, eps_inside=True), "ε goes outside the square root"),
            (lambda *a: adam_loop(*a, shift=1), "you used t \\+ 1"),
            (lambda *a: adam_loop(*a, shift=-1), "1 - β\\^t uses t = 1 on the first step"),
        ],
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
}
