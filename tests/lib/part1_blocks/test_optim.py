"""Tests for lib/part1_blocks/optim.py.

Each optimiser runs beside its ``torch.optim`` namesake for 50 steps on the same
parameters (two groups with different learning rates) and the same loss, in
float64, for several hyper-parameter settings; the textbook forms are checked
against their own equations written out as loops.
"""
import copy
import math

import pytest
import torch

from lib.part1_blocks.optim import (
    NADAM_SCHEDULES,
    OPTIMIZERS,
    SGD,
    SURFACES,
    TEMPLATE_NAMES,
    Adadelta,
    Adagrad,
    Adam,
    AdamW,
    Moment,
    MomentOptimizer,
    NAdam,
    RMSprop,
    fit,
    lookahead_momentum,
    nadam_momentum,
    reddi_problem,
    spirals,
    template,
    trajectory,
)

STEPS = 50
# The issue asks for 1e-6; in float64 the optimisers agree to rounding, so the
# tests hold them to 1e-12 (the largest difference seen is about 7e-16).
TOLERANCE = 1e-12

SETTINGS = {
    "SGD": [
        dict(lr=0.05),
        dict(lr=0.05, momentum=0.9),
        dict(lr=0.05, momentum=0.9, dampening=0.5, weight_decay=0.1),
        dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
        dict(lr=0.02, momentum=0.5, maximize=True),
    ],
    "Adagrad": [
        dict(lr=0.1),
        dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.5, eps=1e-6),
        dict(lr=0.3, maximize=True),
    ],
    "RMSprop": [
        dict(lr=0.01),
        dict(lr=0.01, centered=True),
        dict(lr=0.01, alpha=0.9, momentum=0.9, centered=True, weight_decay=0.1),
        dict(lr=0.005, momentum=0.5, eps=1e-3),
    ],
    "Adadelta": [
        dict(),
        dict(lr=0.5, rho=0.95, eps=1e-5, weight_decay=0.1),
        dict(lr=2.0, rho=0.5, maximize=True),
    ],
    "Adam": [
        dict(lr=0.01),
        dict(lr=0.01, amsgrad=True, weight_decay=0.1),
        dict(lr=0.01, betas=(0.5, 0.9), weight_decay=0.1, decoupled_weight_decay=True),
        dict(lr=0.05, betas=(0.0, 0.99), eps=1e-3),
    ],
    "AdamW": [
        dict(lr=0.01),
        dict(lr=0.01, amsgrad=True, weight_decay=0.3),
        dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.0),
    ],
    "NAdam": [
        dict(lr=0.01),
        dict(lr=0.01, weight_decay=0.1),
        dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, decoupled_weight_decay=True, momentum_decay=0.1),
    ],
}
CASES = [(name, s) for name, settings in SETTINGS.items() for s in settings]


@pytest.fixture
def float64_default():
    """PyTorch keeps some scalars (NAdam's product of momenta) in the default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def problem(seed=0, steps=STEPS):
    """Two parameters and a loss whose gradient depends on them and on the step."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(3, 4, generator=g, dtype=torch.float64)
    b = torch.randn(5, generator=g, dtype=torch.float64)
    data = torch.randn(steps, 3, 4, generator=g, dtype=torch.float64)

    def loss(t, p1, p2):
        # Bounded in p1 (sin) and in p2 (tanh), so maximize=True stays finite too.
        return (torch.sin(p1) * data[t]).sum() + 0.1 * torch.tanh(p1**2).sum() \
            + torch.tanh((p2 - 1) ** 2).sum() + data[t, 0, 0] * torch.tanh(p2).sum()

    return a, b, loss


def run(optimizer_class, settings, steps=STEPS, seed=0, use_closure=False):
    """Final parameters after ``steps`` steps, with two groups (the second at half the lr)."""
    a, b, loss = problem(seed, steps)
    p1, p2 = a.clone().requires_grad_(), b.clone().requires_grad_()
    lr = settings["lr"] if "lr" in settings else optimizer_class([torch.zeros(1)]).defaults["lr"]
    opt = optimizer_class([{"params": [p1]}, {"params": [p2], "lr": 0.5 * lr}], **settings)
    for t in range(steps):
        def closure():
            opt.zero_grad()
            value = loss(t, p1, p2)
            value.backward()
            return value

        if use_closure:
            opt.step(closure)
        else:
            closure()
            opt.step()
    return torch.cat([p1.detach().flatten(), p2.detach().flatten()]), opt


@pytest.mark.parametrize(("name", "settings"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_torch_for_50_steps(name, settings, float64_default):
    ours, _ = run(OPTIMIZERS[name], settings)
    reference, _ = run(getattr(torch.optim, name), settings)
    assert (ours - reference).abs().max() <= TOLERANCE
    start, _, _ = problem()
    assert (ours[:12] - start.flatten()).abs().max() > 1e-3, "the parameters must actually move"


def test_nadam_matches_torch_to_1e6_with_float32_scalars():
    # With the default dtype float32, torch.optim.NAdam keeps Π μ_i in float32
    # (we keep a Python float): the runs then agree to about 2e-10, within the 1e-6 asked.
    ours, _ = run(NAdam, dict(lr=0.01))
    reference, _ = run(torch.optim.NAdam, dict(lr=0.01))
    assert (ours - reference).abs().max() <= 1e-6


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop"])
def test_step_with_closure_returns_the_loss_and_matches_torch(name, float64_default):
    settings = SETTINGS[name][1]
    ours, _ = run(OPTIMIZERS[name], settings, use_closure=True)
    reference, _ = run(getattr(torch.optim, name), settings, use_closure=True)
    assert (ours - reference).abs().max() <= TOLERANCE
    p = torch.ones(2, requires_grad=True)
    opt = OPTIMIZERS[name]([p], lr=0.1)

    def closure():
        opt.zero_grad()
        value = (p**2).sum()
        value.backward()
        return value

    assert opt.step(closure).item() == 2.0
    assert opt.step() is None


def test_zero_grad_and_parameters_without_gradients_behave_as_in_torch():
    used, unused = torch.ones(3, requires_grad=True), torch.ones(2, requires_grad=True)
    opt = Adam([used, unused], lr=0.1)
    (used**2).sum().backward()
    opt.step()
    assert torch.equal(unused, torch.ones(2)), "a parameter without .grad must not move"
    assert unused not in opt.state
    opt.zero_grad()
    assert used.grad is None  # set_to_none=True, torch's default
    (used**2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert torch.equal(used.grad, torch.zeros(3))


def test_state_dict_round_trip_continues_identically(float64_default):
    def make():
        a, b, loss = problem()
        return a.clone().requires_grad_(), loss

    p, loss = make()
    opt = NAdam([p], lr=0.01, weight_decay=0.1)
    for t in range(10):
        opt.zero_grad()
        loss(t, p, torch.zeros(5)).backward()
        opt.step()
    saved_p, saved_state = p.detach().clone(), copy.deepcopy(opt.state_dict())  # as torch.save would
    q = saved_p.clone().requires_grad_()
    restored = NAdam([q], lr=0.5)  # the loaded state brings back lr=0.01
    restored.load_state_dict(saved_state)
    assert restored.param_groups[0]["lr"] == 0.01
    for t in range(10, 20):
        for param, optimizer in ((p, opt), (q, restored)):
            optimizer.zero_grad()
            loss(t, param, torch.zeros(5)).backward()
            optimizer.step()
    assert torch.equal(p, q)


def test_learning_rate_schedulers_drive_our_optimisers_as_torch_ones(float64_default):
    finals = []
    for cls in (SGD, torch.optim.SGD):
        p = torch.ones(2, requires_grad=True)
        opt = cls([p], lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5)
        for _ in range(20):
            opt.zero_grad()
            (p**2).sum().backward()
            opt.step()
            scheduler.step()
        finals.append(p.detach().clone())
    assert torch.equal(*finals)


def test_swapping_in_a_training_loop_gives_identical_losses(float64_default):
    inputs, labels = spirals(30, generator=torch.Generator().manual_seed(0))
    curves = []
    for cls in (Adam, torch.optim.Adam):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
        curves.append(fit(model, cls(model.parameters(), lr=0.01), inputs.double(), labels,
                          torch.nn.functional.cross_entropy, steps=30, batch_size=16,
                          generator=torch.Generator().manual_seed(1)))
    assert len(curves[0]) == 31
    assert max(abs(x - y) for x, y in zip(*curves)) <= TOLERANCE
    assert curves[0][-1] < curves[0][0]


# ---------------------------------------------------------------------------
# Textbook forms, each against its own equations.
# ---------------------------------------------------------------------------


def test_adadelta_with_lr_one_is_zeilers_update():
    # Zeiler (2012), Algorithm 1: no learning rate; RMS of past updates over RMS of gradients.
    a, b, loss = problem()
    w = a.clone().requires_grad_()
    opt = Adadelta([w], rho=0.95, eps=1e-6)
    x, eg2, edx2 = a.clone(), torch.zeros_like(a), torch.zeros_like(a)
    for t in range(STEPS):
        opt.zero_grad()
        loss(t, w, b).backward()
        opt.step()
        xg = x.clone().requires_grad_()
        g = torch.autograd.grad(loss(t, xg, b), xg)[0]
        eg2 = 0.95 * eg2 + 0.05 * g**2
        dx = -torch.sqrt(edx2 + 1e-6) / torch.sqrt(eg2 + 1e-6) * g
        edx2 = 0.95 * edx2 + 0.05 * dx**2
        x = x + dx
    torch.testing.assert_close(w.detach(), x, atol=1e-13, rtol=0)


def test_nadam_constant_momentum_is_the_textbook_formula():
    a, b, loss = problem()
    w = a.clone().requires_grad_()
    beta1, beta2, lr, eps = 0.9, 0.999, 0.01, 1e-8
    opt = NAdam([w], lr=lr, betas=(beta1, beta2), eps=eps, momentum_schedule="constant")
    x, m, v = a.clone(), torch.zeros_like(a), torch.zeros_like(a)
    for t in range(1, STEPS + 1):
        opt.zero_grad()
        loss(t - 1, w, b).backward()
        opt.step()
        xg = x.clone().requires_grad_()
        g = torch.autograd.grad(loss(t - 1, xg, b), xg)[0]
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        direction = beta1 * m / (1 - beta1 ** (t + 1)) + (1 - beta1) * g / (1 - beta1**t)
        x = x - lr * direction / (torch.sqrt(v / (1 - beta2**t)) + eps)
    torch.testing.assert_close(w.detach(), x, atol=1e-13, rtol=0)


def test_nadam_momentum_schedule_warms_up_towards_beta1():
    assert nadam_momentum(1, 0.9, 0.004) == pytest.approx(0.9 * (1 - 0.5 * 0.96**0.004))
    assert nadam_momentum(1, 0.9, 0.004) == pytest.approx(0.45007, abs=1e-5)
    assert nadam_momentum(10**6, 0.9, 0.004) == pytest.approx(0.9)
    assert nadam_momentum(7, 0.9, 0.004, "constant") == 0.9


@pytest.mark.parametrize("beta", [0.5, 0.9])
def test_lookahead_momentum_is_torch_nesterov_in_other_coordinates(beta, float64_default):
    # The notes' Nesterov (gradient at the look-ahead point) and torch's rewritten form
    # visit the same points: torch stores the look-ahead point w_t - lr β m_t.
    surface, lr, steps = SURFACES["rosenbrock"], 2e-3, 40
    path = lookahead_momentum(surface.grad, torch.tensor(surface.start), lr, beta, steps)
    m = torch.zeros(2)
    lookahead = [path[0]]
    for t in range(1, steps + 1):
        m = beta * m + (1 - beta) * surface.grad(path[t - 1] - lr * beta * m)
        lookahead.append(path[t] - lr * beta * m)
    torch_path = trajectory(torch.optim.SGD, surface, steps, lr=lr * (1 - beta), momentum=beta, nesterov=True)
    torch.testing.assert_close(torch_path, torch.stack(lookahead), atol=1e-12, rtol=0)


def test_lookahead_differs_from_plain_momentum():
    surface = SURFACES["quadratic"]
    start = torch.tensor(surface.start, dtype=torch.float64)
    nesterov = lookahead_momentum(surface.grad, start, 0.05, 0.9, 20)
    plain = trajectory(SGD, surface, 20, lr=0.05 * 0.1, momentum=0.9)
    assert (nesterov[-1] - plain[-1]).abs().max() > 1e-3


# ---------------------------------------------------------------------------
# The template: each classic optimiser is one choice of (φ, ψ).
# ---------------------------------------------------------------------------

TEMPLATE_EQUIVALENTS = {
    "SGD": (dict(lr=0.05, eps=0.0), torch.optim.SGD, dict(lr=0.05)),
    # The averaged momentum is torch's undamped buffer times (1 - β): scale the lr.
    "momentum": (dict(lr=0.5, eps=0.0), torch.optim.SGD, dict(lr=0.5 * 0.1, momentum=0.9)),
    "AdaGrad": (dict(lr=0.1, eps=1e-10), torch.optim.Adagrad, dict(lr=0.1)),
    "RMSProp": (dict(lr=0.01, eps=1e-8), torch.optim.RMSprop, dict(lr=0.01, alpha=0.999)),
    "Adam": (dict(lr=0.01, eps=1e-8), torch.optim.Adam, dict(lr=0.01)),
    "NAdam": (dict(lr=0.01, eps=1e-8), NAdam, dict(lr=0.01, momentum_schedule="constant")),
}


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_template_reproduces_each_classic_optimiser(name, float64_default):
    template_settings, reference_class, reference_settings = TEMPLATE_EQUIVALENTS[name]
    phi, psi = template(name, beta1=0.9, beta2=0.999)

    def make(params, lr, eps):
        return MomentOptimizer(params, lr=lr, phi=phi, psi=psi, eps=eps)

    ours, _ = run(make, template_settings)
    reference, _ = run(reference_class, reference_settings)
    assert (ours - reference).abs().max() <= TOLERANCE


def test_template_momentum_equals_torch_momentum_with_scaled_lr(float64_default):
    phi, psi = template("momentum", beta1=0.9)
    surface = SURFACES["rosenbrock"]
    ours = trajectory(MomentOptimizer, surface, 50, lr=0.01, phi=phi, psi=psi, eps=0.0)
    reference = trajectory(torch.optim.SGD, surface, 50, lr=0.01 * (1 - 0.9), momentum=0.9)
    torch.testing.assert_close(ours, reference, atol=1e-12, rtol=0)


def test_moment_running_statistics_by_hand():
    grads = [torch.tensor([2.0]), torch.tensor([-1.0]), torch.tensor([4.0])]
    total = Moment("g²", decay=1.0, weight=1.0)  # AdaGrad: 4, 4 + 1, 4 + 1 + 16
    average = Moment("g", decay=0.5, weight=0.5, bias_correction=True)
    buffers = torch.zeros(1), torch.zeros(1)
    sums, means = [], []
    for t, g in enumerate(grads, start=1):
        sums.append(total.update(buffers[0], g, t).item())
        means.append(average.update(buffers[1], g, t).item())
    assert sums == [4.0, 5.0, 21.0]
    # EMA 1.0, 0.0, 2.0 divided by 1 - 0.5^t = 0.5, 0.75, 0.875
    assert means == pytest.approx([2.0, 0.0, 2.0 / 0.875])


def test_moment_update_checks_its_arguments():
    # update is the public entry and is checked; MomentOptimizer calls the unchecked
    # body (_advance) after step() has checked every parameter and gradient
    average = Moment("g", 0.9, 0.1, True)
    with pytest.raises(TypeError, match=r"(?s)parameter 'step'.*Actual value: 0.*is_at_least_1"):
        average.update(torch.zeros(2), torch.ones(2), 0)  # 1 - 0.9^0 = 0: inf before
    with pytest.raises(TypeError, match=r"(?s)parameter 'grad'.*Actual value: f32\[1\]"):
        Moment("g", 0.9, 0.1).update(torch.zeros(2), torch.ones(1), 1)  # broadcast before


# ---------------------------------------------------------------------------
# Adam's numbers in the chapter.
# ---------------------------------------------------------------------------


def test_adam_first_step_moves_each_coordinate_by_lr():
    # Bias correction makes m̂_1 = g_1 and v̂_1 = g_1², so the first step is lr · sign(g_1).
    w = torch.tensor([1.0, 1.0, 1.0], dtype=torch.float64, requires_grad=True)
    opt = Adam([w], lr=0.1, eps=0.0)
    w.grad = torch.tensor([0.5, -1e-3, 200.0], dtype=torch.float64)
    opt.step()
    torch.testing.assert_close(w.detach(), torch.tensor([0.9, 1.1, 0.9], dtype=torch.float64))
    state = opt.state[w]
    torch.testing.assert_close(state["exp_avg"], 0.1 * w.grad)  # m_1 = (1 - β₁) g_1, 10x too small
    torch.testing.assert_close(state["exp_avg_sq"], 0.001 * w.grad**2)


def test_adam_step_for_a_constant_gradient_is_lr_because_v_is_a_second_moment_not_a_variance():
    # The notes call √v̂ the gradient's standard deviation. For a constant gradient the
    # variance is 0, yet Adam steps by exactly lr: v̂ is the mean of g², not the variance.
    w = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = Adam([w], lr=0.01, eps=0.0)
    for t in range(1, 26):
        w.grad = torch.tensor([3.0], dtype=torch.float64)
        opt.step()
        assert w.item() == pytest.approx(-0.01 * t, rel=1e-12)


def test_adamw_decay_is_decoupled_from_the_adaptive_step():
    # No loss gradient at all: AdamW shrinks w geometrically by (1 - lr λ); Adam with
    # L2 turns λ w into a normalised step of size about lr, whatever the size of w.
    for start in (10.0, 0.1):
        w1 = torch.tensor([start], dtype=torch.float64, requires_grad=True)
        w2 = torch.tensor([start], dtype=torch.float64, requires_grad=True)
        decoupled, coupled = AdamW([w1], lr=0.01, weight_decay=0.1), Adam([w2], lr=0.01, weight_decay=0.1)
        for _ in range(5):
            w1.grad, w2.grad = torch.zeros_like(w1), torch.zeros_like(w2)
            decoupled.step()
            coupled.step()
        assert w1.item() == pytest.approx(start * (1 - 0.01 * 0.1) ** 5, rel=1e-12)
        assert w2.item() == pytest.approx(start - 5 * 0.01, abs=1e-3)


def test_adam_fails_on_reddis_problem_and_amsgrad_does_not():
    c = 3.0
    grad = reddi_problem(c)
    finals = {}
    for amsgrad in (False, True):
        x = torch.zeros(1, dtype=torch.float64)
        opt = Adam([x], lr=0.5, betas=(0.0, 1 / (1 + c * c)), amsgrad=amsgrad)
        for t in range(1, 3001):
            opt.param_groups[0]["lr"] = 0.5 / math.sqrt(t)
            x.grad = grad(t, x)
            opt.step()
            x.clamp_(-1.0, 1.0)  # the feasible set [-1, 1]
        finals[amsgrad] = x.item()
    assert finals[False] == 1.0, "Adam ends at the worst point"
    assert finals[True] < -0.99, "AMSGrad approaches the optimum -1"


# ---------------------------------------------------------------------------
# Test problems.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SURFACES))
def test_surface_gradients_match_autograd_and_vanish_at_the_minimum(name):
    surface = SURFACES[name]
    points = torch.randn(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
    (autograd,) = torch.autograd.grad(surface.f(points).sum(), points)
    torch.testing.assert_close(surface.grad(points.detach()), autograd)
    minimum = torch.tensor(surface.minimum, dtype=torch.float64)
    assert surface.f(minimum) == 0 and torch.equal(surface.grad(minimum), torch.zeros(2, dtype=torch.float64))


def test_trajectory_shape_and_divergence_cut():
    surface = SURFACES["quadratic"]
    path = trajectory(SGD, surface, 60, lr=0.09)
    assert path.shape == (61, 2) and path.dtype == torch.float64
    assert torch.equal(path[0], torch.tensor(surface.start, dtype=torch.float64))
    assert surface.f(path[-1]) < 0.01 * surface.f(path[0])
    diverged = trajectory(SGD, surface, 2000, lr=0.2)  # lr > 2/20: unstable along y
    assert len(diverged) < 2001 and torch.isfinite(diverged).all()


def test_spirals_and_fit():
    inputs, labels = spirals(50, classes=3, generator=torch.Generator().manual_seed(0))
    assert inputs.shape == (150, 2) and labels.shape == (150,)
    assert labels.bincount().tolist() == [50, 50, 50]
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 3)
    losses = fit(model, SGD(model.parameters(), lr=0.5), inputs, labels,
                 torch.nn.functional.cross_entropy, steps=5)
    assert len(losses) == 6 and losses[-1] < losses[0]


def test_fit_loss_every_records_the_same_losses_and_trains_the_same():
    inputs, labels = spirals(30, classes=3, generator=torch.Generator().manual_seed(0))
    runs = []
    for every in (1, 3):
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 3)
        losses = fit(model, SGD(model.parameters(), lr=0.5), inputs, labels, torch.nn.functional.cross_entropy,
                     steps=6, batch_size=8, generator=torch.Generator().manual_seed(1), loss_every=every)
        runs.append((losses, model.weight.detach().clone()))
    (all_losses, weight), (some_losses, same_weight) = runs
    assert len(some_losses) == 3 and some_losses == all_losses[::3]
    assert torch.equal(weight, same_weight)


@pytest.mark.parametrize(("every", "error", "message"), [
    (0, TypeError, r"(?s)parameter 'loss_every'.*Actual value: 0.*is_at_least_1"),
    (True, TypeError, r"(?s)parameter 'loss_every'.*Actual value: True.*is_at_least_1"),
    (2.0, TypeError, r"(?s)parameter 'loss_every'.*Actual value: 2\.0.*Integral"),
    (4, ValueError, "loss_every must divide steps; found steps=6, loss_every=4")])
def test_fit_rejects_a_bad_loss_every(every, error, message):
    model = torch.nn.Linear(2, 3)
    with pytest.raises(error, match=message):
        fit(model, SGD(model.parameters(), lr=0.1), torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
            torch.nn.functional.cross_entropy, steps=6, loss_every=every)


def test_fit_with_a_scheduler_uses_its_rate_at_every_step():
    # Full-batch SGD on a linear model, by hand: update t uses lr · factor(t), as StepLR sets it.
    inputs, labels = spirals(20, classes=3, generator=torch.Generator().manual_seed(0))
    models = []
    for by_hand in (False, True):
        torch.manual_seed(0)
        models.append(torch.nn.Linear(2, 3).double())
    model, reference = models
    optimizer = SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
    fit(model, optimizer, inputs.double(), labels, torch.nn.functional.cross_entropy, steps=5, scheduler=scheduler)
    for t in range(5):
        reference.zero_grad()
        torch.nn.functional.cross_entropy(reference(inputs.double()), labels).backward()
        with torch.no_grad():
            for param in reference.parameters():
                param -= 0.5 * 0.1 ** (t // 2) * param.grad
    for ours, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-14)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * 0.1**2)  # after 5 scheduler steps


def test_fit_rejects_a_scheduler_of_another_optimizer():
    model = torch.nn.Linear(2, 3)
    other = SGD(torch.nn.Linear(2, 3).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="scheduler must drive the optimizer"):
        fit(model, SGD(model.parameters(), lr=0.1), torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
            torch.nn.functional.cross_entropy, steps=2, scheduler=torch.optim.lr_scheduler.StepLR(other, 1))
    with pytest.raises(TypeError, match=r"(?s)parameter 'scheduler'.*Actual value: 0\.5.*LRScheduler"):
        fit(model, SGD(model.parameters(), lr=0.1), torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
            torch.nn.functional.cross_entropy, steps=2, scheduler=0.5)


def test_trajectory_from_another_start():
    surface = SURFACES["quadratic"]
    default = trajectory(SGD, surface, 5, lr=0.05)
    assert torch.equal(trajectory(SGD, surface, 5, start=surface.start, lr=0.05), default)
    moved = trajectory(SGD, surface, 5, start=torch.tensor([1.0, -1.0]), lr=0.05)
    assert moved.dtype == torch.float64 and moved[0].tolist() == [1.0, -1.0]
    # gradient descent on 0.5 (x^2 + 20 y^2) multiplies x by 1 - lr and y by 1 - 20 lr at each step
    assert torch.allclose(moved[-1], torch.tensor([0.95**5, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="start must be two finite numbers"):
        trajectory(SGD, surface, 5, start=(1.0, 2.0, 3.0), lr=0.05)
    with pytest.raises(TypeError, match=r"(?s)parameter 'steps'.*Actual value: -1.*is_at_least_0"):  # was a path
        trajectory(SGD, surface, -1, lr=0.05)


@pytest.mark.parametrize(("hyper", "message"), [
    (dict(lr="0.5"), r"lr must be a finite number >= 0; found '0.5'"),  # was "'<' not supported"
    (dict(lr=math.nan), r"lr must be a finite number >= 0; found nan"),  # was a path of 1 point
    (dict(lr=True), r"lr must be a finite number >= 0; found True"),  # was a path, lr = 1
    (dict(lr=0.1, momentum=-0.5), r"momentum must be a finite number >= 0; found -0.5"),
    (dict(lr=0.1, eps=math.inf), r"eps must be a finite number >= 0; found inf"),
    (dict(lr=0.1, alpha=1.0), r"alpha must be a number in \[0, 1\); found 1.0"),
    (dict(lr=0.1, rho=1.5), r"rho must be a number in \[0, 1\]; found 1.5"),
    (dict(lr=0.1, betas=(0.9, math.nan)), r"betas must be numbers in \[0, 1\); found \(0.9, nan\)"),
])
@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.RMSprop, torch.optim.Adam])
def test_trajectory_checks_the_hyper_parameters_it_passes_on(hyper, message, optimizer):
    """torch.optim's classes check few of their arguments: the fuzz got a 1-point path for
    lr=nan from torch.optim.SGD, so trajectory checks them by the rules of this module's."""
    with pytest.raises(TypeError, match=message):
        trajectory(optimizer, SURFACES["quadratic"], 3, **hyper)


def test_trajectory_passes_good_hyper_parameters_on_unchanged():
    surface = SURFACES["quadratic"]
    for optimizer, hyper in ((torch.optim.SGD, dict(lr=torch.tensor(0.05), momentum=0.9, nesterov=True)),
                             (torch.optim.Adam, dict(lr=0.1, betas=(0.0, 0.99), amsgrad=True)),
                             (torch.optim.Adadelta, dict(lr=1.0, rho=1.0))):
        w = torch.tensor(surface.start, dtype=torch.float64)
        reference, path = optimizer([w], **hyper), [w.clone()]
        for _ in range(4):
            w.grad = surface.grad(w)
            reference.step()
            path.append(w.clone())
        assert torch.equal(trajectory(optimizer, surface, 4, **hyper), torch.stack(path))


@pytest.mark.parametrize(("argument", "value", "error", "message"), [
    ("inputs", torch.zeros(4, 2, dtype=torch.float16), TypeError,
     r"inputs must have the model's dtype torch.float32; found torch.float16"),  # was "mat1 and mat2"
    ("targets", torch.zeros(4, dtype=torch.bool), TypeError, r"targets must be class ids or numbers; found torch.bool"),
    ("targets", torch.zeros(4), ValueError,  # was torch's "expected target dtype to be Long"
     r"loss_fn\(model\(inputs\), targets\) failed for inputs and targets of shapes \(4, 2\) and \(4,\), "
     r"dtypes torch.float32 and torch.float32: expected .* Long"),
    ("inputs", torch.zeros(4, 5), ValueError, r"loss_fn\(model\(inputs\), targets\) failed .* shapes \(4, 5\) and \(4,\)"),
])
def test_fit_names_inputs_or_targets_the_model_or_loss_cannot_take(argument, value, error, message):
    model = torch.nn.Linear(2, 3)
    call = {"inputs": torch.zeros(4, 2), "targets": torch.zeros(4, dtype=torch.long), argument: value}
    with pytest.raises(error, match=message):
        fit(model, SGD(model.parameters(), lr=0.1), loss_fn=torch.nn.functional.cross_entropy, steps=2, **call)


def test_fit_takes_what_the_model_and_loss_take():
    """The checks do not narrow fit: ids into an embedding, float targets (class
    probabilities, regression values), a float64 model."""
    torch.manual_seed(0)
    embedding = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Flatten())
    ids, probabilities = torch.tensor([[0], [1], [4]]), torch.softmax(torch.randn(3, 3), -1)
    assert len(fit(embedding, SGD(embedding.parameters(), lr=0.1), ids, probabilities,
                   torch.nn.functional.cross_entropy, steps=2)) == 3
    line = torch.nn.Linear(2, 1).double()
    assert len(fit(line, SGD(line.parameters(), lr=0.1), torch.zeros(4, 2, dtype=torch.float64),
                   torch.zeros(4, 1, dtype=torch.float64), torch.nn.functional.mse_loss, steps=1)) == 2


# ---------------------------------------------------------------------------
# Errors name what was expected and what was found.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda p: SGD(p, lr=-0.1), TypeError, r"(?s)parameter 'lr'.*Actual value: -0\.1.*is_at_least_0"),
        (lambda p: SGD(p, lr="fast"), TypeError, r"(?s)parameter 'lr'.*Actual value: 'fast'.*is_at_least_0"),
        (lambda p: SGD(p, lr=torch.tensor(-0.1)), TypeError, r"(?s)parameter 'lr'.*Actual value: f32\[\].*holds_one"),
        (lambda p: SGD(p, nesterov=True), ValueError, "nesterov needs momentum > 0"),
        (lambda p: Adam(p, betas=(0.9, 1.0)), TypeError, r"(?s)parameter 'betas'.*Actual value: \(0\.9, 1\.0\).*is_a_rate"),
        (lambda p: Adam(p, betas=(0.9, 0.99, 0.9)), ValueError, r"betas must be a pair \(beta1, beta2\); found \(0\.9"),
        (lambda p: Adam(p, betas=0.9), TypeError, r"(?s)parameter 'betas'.*Actual value: 0\.9.*Sequence"),
        (lambda p: Adadelta(p, rho=1.5), TypeError, r"(?s)parameter 'rho'.*Actual value: 1\.5.*is_a_fraction"),
        (lambda p: NAdam(p, momentum_schedule="fast"), TypeError,
         r"(?s)parameter 'momentum_schedule'.*Actual value: 'fast'.*Literal\['warmup'"),
        (lambda p: MomentOptimizer(p, lr=0.1, phi="g", psi=Moment("1")), TypeError,
         r"(?s)parameter 'phi'.*Actual value: 'g'.*Moment"),
        (lambda p: SGD(p[0]), TypeError, "params must be an iterable of tensors or of parameter groups.*found Tensor"),
        (lambda p: SGD("abc"), TypeError, r"(?s)parameter 'params'.*Actual value: 'abc'.*Iterable"),
    ],
)
def test_bad_arguments_are_rejected_with_a_clear_message(make, error, message):
    with pytest.raises(error, match=message):
        make([torch.zeros(2, requires_grad=True)])


def test_bad_moments_and_templates_are_rejected():
    with pytest.raises(TypeError, match=r"(?s)parameter 'feature'.*Actual value: 'g³'.*Literal\['g'"):
        Moment("g³")
    with pytest.raises(ValueError, match="nesterov needs feature 'g'"):
        Moment("g", 0.9, 0.1, nesterov=True)
    for decay in (1.0, -0.5):  # 1 divided by 1 - 1^t = 0 (inf, then weights that never moved)
        with pytest.raises(ValueError, match=rf"bias_correction needs a decay in \[0, 1\); found decay={decay}"):
            Moment("g²", decay, 1.0, True)
    with pytest.raises(ValueError, match=r"grad_fn must return a gradient of w's shape \(2,\); found \(1,\)"):
        lookahead_momentum(lambda w: w[:1], torch.ones(2), 0.1, 0.9, 3)  # broadcast before
    for alpha in (1.5, 1.0):  # 1.5: NaN weights before; 1.0: v stays 0, steps of g / eps
        with pytest.raises(TypeError, match=rf"(?s)parameter 'alpha'.*Actual value: {alpha}.*is_a_rate"):
            RMSprop([torch.zeros(2, requires_grad=True)], alpha=alpha)
    with pytest.raises(TypeError, match=r"(?s)parameter 'name'.*Actual value: 'Adamax'.*Literal\['SGD'"):
        template("Adamax")
    with pytest.raises(ValueError, match="c must be > 2"):
        reddi_problem(2.0)
    assert NADAM_SCHEDULES == ("warmup", "constant")


def test_sparse_gradients_are_refused():
    p = torch.zeros(3, requires_grad=True)
    p.grad = torch.zeros(3).to_sparse()
    with pytest.raises(TypeError, match="supports dense real tensors; found a sparse one"):
        Adagrad([p]).step()


@pytest.mark.parametrize("cls", [SGD, Adagrad, RMSprop, Adadelta, Adam, AdamW, NAdam])
def test_defaults_are_torchs(cls):
    ours = cls([torch.zeros(1, requires_grad=True)]).defaults
    reference = getattr(torch.optim, cls.__name__)([torch.zeros(1, requires_grad=True)]).defaults
    for key, value in ours.items():
        if key in reference:
            assert reference[key] == value, f"{cls.__name__}.{key}: ours {value}, torch {reference[key]}"


# ---------------------------------------------------------------------------
# torch.optim's constructor conventions: foreach=, tensor lr and betas (issue 22).
# ---------------------------------------------------------------------------


def run_one_group(optimizer_class, settings, steps=10):
    a, b, loss = problem(0, steps)
    p1, p2 = a.clone().requires_grad_(), b.clone().requires_grad_()
    opt = optimizer_class([p1, p2], **settings)
    for t in range(steps):
        opt.zero_grad()
        loss(t, p1, p2).backward()
        opt.step()
    return torch.cat([p1.detach().flatten(), p2.detach().flatten()])


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("foreach", [None, False, True])
def test_foreach_is_accepted_and_the_result_is_torchs(name, foreach, float64_default):
    ours = run_one_group(OPTIMIZERS[name], dict(foreach=foreach))
    reference = run_one_group(getattr(torch.optim, name), dict(foreach=foreach))
    assert (ours - reference).abs().max() <= TOLERANCE


@pytest.mark.parametrize("name", list(SETTINGS))
def test_tensor_lr_and_betas_are_read_as_numbers_like_torch(name, float64_default):
    settings = dict(lr=torch.tensor(0.01))
    if "betas" in OPTIMIZERS[name]([torch.zeros(1)]).defaults:
        settings["betas"] = (torch.tensor(0.8), torch.tensor(0.95))
    ours = run_one_group(OPTIMIZERS[name], settings)
    reference = run_one_group(getattr(torch.optim, name), settings)
    assert (ours - reference).abs().max() <= TOLERANCE


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, True])
@pytest.mark.parametrize("name", list(SETTINGS))
def test_non_finite_or_bool_hyperparameters_are_rejected(name, value):
    with pytest.raises(TypeError, match=rf"(?s)parameter 'lr'.*Actual value: {value}.*is_at_least_0"):
        OPTIMIZERS[name]([torch.zeros(2, requires_grad=True)], lr=value)


def test_integer_parameters_and_empty_data_are_refused_by_name():
    w = torch.zeros(2, dtype=torch.long)
    w.grad = torch.ones(2, dtype=torch.long)
    with pytest.raises(TypeError, match="SGD supports dense real tensors; found a torch.int64 one"):
        SGD([w]).step()
    model = torch.nn.Linear(2, 3)
    with pytest.raises(ValueError, match="inputs must hold at least one example; found N = 0"):
        fit(model, SGD(model.parameters(), lr=0.1), torch.zeros(0, 2), torch.zeros(0, dtype=torch.long),
            torch.nn.functional.cross_entropy, steps=2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*Actual value: i64\[3\].*N=4"):
        fit(model, SGD(model.parameters(), lr=0.1), torch.zeros(4, 2), torch.zeros(3, dtype=torch.long),
            torch.nn.functional.cross_entropy, steps=2)


def test_surface_gradients_refuse_points_that_are_not_pairs():
    for surface in SURFACES.values():
        with pytest.raises(ValueError, match=r"w must have shape \(\.\.\., 2\); found \(3,\)"):
            surface.grad(torch.zeros(3))
        with pytest.raises(TypeError, match=r"(?s)parameter 'w'.*Actual value: f32\[3\]"):
            surface.f(torch.zeros(3))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_an_empty_parameter_list_is_named(name):
    """torch's "optimizer got an empty parameter list" names no argument; a generator of
    parameters still works, read once as torch reads it."""
    with pytest.raises(ValueError, match=r"^params must hold a tensor or a parameter group; found none$"):
        OPTIMIZERS[name]([])
    with pytest.raises(ValueError, match=r"^params must hold .* found none$"):
        OPTIMIZERS[name](p for p in ())
    model = torch.nn.Linear(2, 3)
    assert len(OPTIMIZERS[name](model.parameters()).param_groups[0]["params"]) == 2
