"""experiments.ch02_optimisers: each result's findings hold on numbers that show them and
fail on numbers that do not; each experiment runs at a tiny size; the schedules' excess
loss is the experiment written out by hand (moved here from tests/test_schedules.py with
the function, once lib.schedules.excess_loss_by_schedule)."""
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from experiments import ch02_optimisers as ch02
from lib.optim import spirals
from lib.schedules import cosine, step_decay, warmup_then_decay


def finding(result_class, opening):
    """The finding of ``result_class`` whose sentence starts with ``opening``."""
    (match,) = [f for f in result_class.FINDINGS if f.says.startswith(opening)]
    return match


# ---------------------------------------------------------------------------
# Findings on made-up results
# ---------------------------------------------------------------------------


def variants(full_after_3, mini, rises):
    """Two seeds; mini-batches of 32 end each epoch at ``mini``, the single examples'
    last epoch goes up ``rises`` times."""
    wiggle = [0.9, 1.0] * rises + [0.8] * (33 - 2 * rises)
    return ch02.GradientDescentVariants(
        epoch_losses={key: losses for s in (0, 1) for key, losses in (
            ((None, s), [0.8, 0.3, 0.2, full_after_3]), ((32, s), mini), ((1, s), mini))},
        last_epoch={(1, s): wiggle for s in (0, 1)},
        seeds=(0, 1),
    )


def test_the_gradient_descent_findings_hold_on_a_run_that_shows_them(capsys):
    variants(0.15, [0.8, 0.09, 0.085, 0.08], rises=6).check()
    assert capsys.readouterr().out.count("✓") == 3


@pytest.mark.parametrize("run, failing", [
    (variants(0.05, [0.8, 0.09, 0.085, 0.08], 6), "After 3 epochs, full-batch"),
    (variants(0.35, [0.8, 0.3, 0.1, 0.08], 6), "Mini-batches of 32 make"),
    (variants(0.15, [0.8, 0.09, 0.085, 0.08], 4), "With single examples"),
])
def test_each_gradient_descent_finding_fails_on_a_run_that_contradicts_it(run, failing):
    with pytest.raises(AssertionError, match=rf"{failing}[^;]*\(cells gd-variants-read\)$"):
        run.check()


def surfaces(rosenbrock_adam):
    distances = {("rosenbrock", name): [1.5] * 3 for name in ch02.ON_SURFACES}
    distances["rosenbrock", "Adam"] = rosenbrock_adam
    return ch02.SurfaceRace(paths={}, distances=distances)


def test_the_surface_finding_on_adam_needs_a_twofold_change_between_starts():
    twofold = finding(ch02.SurfaceRace, "On Rosenbrock, Adam's final distance").holds
    assert twofold(surfaces([0.1, 0.19, 0.25]))
    assert not twofold(surfaces([0.1, 0.15, 0.19]))


def test_the_surface_finding_on_momentum_overshooting_reads_both_coordinates():
    overshoots = finding(ch02.SurfaceRace, "On the quadratic, momentum overshoots").holds
    path = torch.tensor([[-4.5, 1.0], [0.5, -0.2], [0.0, 0.0]], dtype=torch.float64)
    one_sided = torch.tensor([[-4.5, 1.0], [-0.5, -0.2], [0.0, 0.0]], dtype=torch.float64)
    race = ch02.SurfaceRace(paths={("quadratic", "momentum"): [path] * 3}, distances={})
    assert overshoots(race)
    race.paths["quadratic", "momentum"][1] = one_sided
    assert not overshoots(race)


def spiral_race(sgd, adamw):
    """Two seeds; every optimiser but SGD and AdamW at 99% and a final loss of 0.03."""
    accuracy = {(name, s): 0.99 for name in ch02.ON_SPIRALS for s in (0, 1)}
    curves = {(name, s): [1.0, 0.03] for name in ch02.ON_SPIRALS for s in (0, 1)}
    for s in (0, 1):
        accuracy["SGD", s] = sgd
        accuracy["AdamW", s] = adamw
    return ch02.SpiralRace(curves, accuracy, seeds=(0, 1))


def test_the_spiral_findings_hold_on_a_run_that_shows_them():
    spiral_race(sgd=0.75, adamw=0.985).check()


@pytest.mark.parametrize("run, failing", [
    (spiral_race(sgd=0.9, adamw=0.985), "Plain SGD stays below 85%"),
    (spiral_race(sgd=0.75, adamw=0.96), "Every optimiser with momentum"),
])
def test_a_spiral_finding_fails_on_a_run_that_contradicts_it(run, failing):
    with pytest.raises(AssertionError, match=failing):
        run.check()


def strategies(*accuracies):
    results = {(strategy, 0): (0.02, 0.04, accuracy)
               for strategy, accuracy in zip(ch02.STRATEGIES, accuracies)}
    return ch02.GeneralisationStrategies(results, seeds=(0,))


def test_the_strategies_finding_needs_98_percent_within_2_points():
    strategies(0.99, 0.985, 0.995).check()
    with pytest.raises(AssertionError, match="within 2 points"):
        strategies(0.99, 0.995, 0.97).check()
    assert strategies(0.99, 0.995, 0.97).gaps == pytest.approx([0.025])


def schedules(step, cos, warm, best_constant=0.002, constant_at_150=0.05):
    """One seed: the excess loss after 150 and 300 steps of each schedule."""
    ends = {"constant": 0.05, "best constant": best_constant,
            "step decay": step, "cosine": cos, "warm-up + cosine": warm}
    excess = {(name, 0): [1.0] * 15 + [constant_at_150 if name == "constant" else 0.1]
              + [end] * 15 for name, end in ends.items()}
    median_final = {0.1: 0.05, 0.03: 0.01, 0.01: 0.002, 0.003: 0.2}
    return ch02.ScheduleRace(excess, median_final, best_rate=0.01,
                             decays=("step decay", "cosine", "warm-up + cosine"), seeds=(0,))


def test_the_schedule_findings_hold_on_a_run_that_shows_them(capsys):
    run = schedules(step=0.0015, cos=0.0025, warm=0.0016)
    run.check()
    assert capsys.readouterr().out.count("✓") == len(ch02.ScheduleRace.FINDINGS)
    assert run.gains["step decay"] == [pytest.approx(0.05 / 0.0015)]
    assert run.cosine_ratio == pytest.approx([1.25, 0.8])


@pytest.mark.parametrize("run, failing", [
    (schedules(step=0.02, cos=0.0025, warm=0.0016), "Every decaying schedule ends"),
    (schedules(step=0.0015, cos=0.0025, warm=0.0060), "Warm-up changes little"),
    (schedules(step=0.0019, cos=0.0025, warm=0.0016), "Step decay from the base rate"),
    (schedules(step=0.0015, cos=0.0025, warm=0.0016, constant_at_150=0.06),
     "The constant rate's excess loss"),
    (schedules(step=0.0015, cos=0.0025, warm=0.0024), "Cosine and warm-up + cosine"),
])
def test_each_schedule_finding_fails_on_a_run_that_contradicts_it(run, failing):
    assert not finding(ch02.ScheduleRace, failing).holds(run)


# ---------------------------------------------------------------------------
# The experiments at a tiny size
# ---------------------------------------------------------------------------


def test_gradient_descent_variants_runs_one_epoch():
    run = ch02.gradient_descent_variants(seeds=(0,), epochs=1)
    assert set(run.epoch_losses) == {(None, 0), (32, 0), (1, 0)}
    assert all(len(losses) == 2 for losses in run.epoch_losses.values())
    assert len(run.last_epoch[1, 0]) == 33  # the loss every 16 steps of 512, and before
    assert run.epoch_losses[32, 0][1] < run.epoch_losses[32, 0][0]


def test_surface_race_runs_a_few_steps_from_three_starts():
    run = ch02.surface_race(steps={"quadratic": 5, "rosenbrock": 3})
    assert set(run.paths) == {(s, name) for s in ("quadratic", "rosenbrock")
                              for name in ch02.ON_SURFACES}
    assert [path.shape for path in run.paths["quadratic", "Adam"]] == [(6, 2)] * 3
    assert [path.shape for path in run.paths["rosenbrock", "GD"]] == [(4, 2)] * 3
    start = torch.tensor(ch02.SURFACES["quadratic"].start, dtype=torch.float64)
    assert torch.equal(run.paths["quadratic", "GD"][0][0], start)
    assert not torch.equal(run.paths["quadratic", "GD"][1][0], start)


def test_spiral_race_trains_every_optimiser_from_one_seed():
    inputs, labels = spirals(10, generator=torch.Generator().manual_seed(0))
    run = ch02.spiral_race(inputs, labels, seeds=(0,), steps=20)
    assert set(run.accuracy) == {(name, 0) for name in ch02.ON_SPIRALS}
    assert all(len(curve) == 3 for curve in run.curves.values())
    assert all(0 <= accuracy <= 1 for accuracy in run.accuracy.values())


def test_spiral_net_starts_from_the_seed_s_weights():
    first, again, other = ch02.spiral_net(1), ch02.spiral_net(1), ch02.spiral_net(2)
    assert torch.equal(first[0].weight, again[0].weight)
    assert not torch.equal(first[0].weight, other[0].weight)


def test_generalisation_strategies_run_for_one_seed():
    run = ch02.generalisation_strategies(seeds=(0,))
    assert set(run.results) == {(strategy, 0) for strategy in ch02.STRATEGIES}
    assert all(0 <= accuracy <= 1 for _, _, accuracy in run.results.values())


def test_schedule_race_picks_the_best_constant_rate_of_the_grid():
    decays = {"step decay": partial(step_decay, step_size=10, gamma=0.1),
              "cosine": partial(cosine, total=20),
              "warm-up + cosine": partial(warmup_then_decay, warmup=5, total=20)}
    run = ch02.schedule_race(decays, seeds=(0, 1), steps=20)
    assert run.best_rate == min(ch02.RATES, key=run.median_final.get)
    assert all(len(run.excess[name, s]) == 3
               for name in ("constant", "best constant", *decays) for s in (0, 1))


def _excess_by_hand(schedules, seed, steps):
    """The experiment written out with torch.optim.SGD, as chapter 2's cell once did."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 3, generator=generator)  # (64, 3)
    y = x @ torch.randn(3, 1, generator=generator) + 0.5 * torch.randn(64, 1, generator=generator)  # (64, 1)
    best = float(((x @ torch.linalg.lstsq(x, y).solution - y) ** 2).mean())
    curves = {}
    for name, schedule in schedules.items():
        torch.manual_seed(seed)
        model = nn.Linear(3, 1, bias=False)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = LambdaLR(optimizer, schedule)
        batches = torch.Generator().manual_seed(seed + 10)
        curve = [float(F.mse_loss(model(x), y).detach()) - best]
        for step in range(1, steps + 1):
            rows = torch.randint(64, (4,), generator=batches)
            optimizer.zero_grad()
            F.mse_loss(model(x[rows]), y[rows]).backward()
            optimizer.step()
            scheduler.step()
            if step % 5 == 0:
                curve.append(float(F.mse_loss(model(x), y).detach()) - best)
        curves[name] = curve
    return curves


def test_the_excess_loss_is_the_experiment_written_out_and_repeats_per_seed():
    schedules = {"constant": lambda t: 1.0, "cosine": partial(cosine, total=20)}
    kwargs = dict(steps=20, batch_size=4, loss_every=5, n=64, dim=3)
    excess = ch02._excess_loss(schedules, (0, 1), **kwargs)
    assert set(excess) == {(name, seed) for name in schedules for seed in (0, 1)}
    for seed in (0, 1):
        for name, curve in _excess_by_hand(schedules, seed, 20).items():
            assert len(excess[name, seed]) == 5
            assert excess[name, seed] == pytest.approx(curve, rel=1e-5, abs=1e-7)
    again = ch02._excess_loss(schedules, (1,), **kwargs)[("cosine", 1)]  # lstsq may round differently
    assert again == pytest.approx(excess["cosine", 1], rel=1e-6)
    assert excess["cosine", 0] != excess["cosine", 1]
    assert min(min(curve) for curve in excess.values()) > -1e-6  # lstsq is the optimum

