"""experiments.ch01_activations_losses: each finding holds on a result that shows it and,
just past its threshold, a made-up result fails exactly that finding; each run works at a
tiny size."""
from dataclasses import replace

import pytest
import torch

from experiments import ch01_activations_losses as ch01
from experiments.ch01_activations_losses import LARGE, LEAKY, MODERATE, SHIFTED


def says(cls, k):
    return [cls.FINDINGS[k].says]


def gradients(**rows):
    """Five seeds that agree; ``rows`` replace a row's layers for every seed."""
    norms = {"sigmoid": [1e-13, 1.0], "tanh": [0.01, 0.04],
             "relu": [1e-6, 3e-6], "relu (He)": [1.0, 3.0], **rows}
    return ch01.GradientSweep(tuple(range(5)), {r: [n] * 5 for r, n in norms.items()})


def test_gradient_findings_fail_just_past_their_thresholds():
    agreeing = gradients()
    assert agreeing.failing() == []
    # one seed 1.01 orders of magnitude off the first
    norms = {**agreeing.norms, "sigmoid": [[1e-13, 1.0]] * 4 + [[10**-14.01, 1.0]]}
    assert replace(agreeing, norms=norms).failing() == says(ch01.GradientSweep, 0)
    assert gradients(tanh=[0.01, 0.0601]).failing() == says(ch01.GradientSweep, 1)
    # the same shape as He's, but its largest gradient at 1e-4
    lecun = gradients(relu=[1e-4 / 3, 1e-4])
    assert lecun.failing() == says(ch01.GradientSweep, 2)
    he = gradients(**{"relu": [1e-6, 12.01e-6], "relu (He)": [1.0, 12.01]})
    assert he.failing() == says(ch01.GradientSweep, 3)
    # one layer's ratio 2e-9 off the common factor
    assert gradients(relu=[1e-6, 3e-6 * (1 + 2e-9)]).failing() == says(
        ch01.GradientSweep, 4
    )
    # every finding names 5 seeds
    four = ch01.GradientSweep(tuple(range(4)), {r: n[:4] for r, n in agreeing.norms.items()})
    assert four.failing() == [f.says for f in ch01.GradientSweep.FINDINGS]


def dying(**changes):
    seeds = (0, 1, 2)
    dead = {}
    for run, when, layer, value in [
        (MODERATE, "before", 0, 0.0), (MODERATE, "before", 1, 0.1),
        (MODERATE, "after", 0, 0.0), (MODERATE, "after", 1, 0.15),
        (LARGE, "before", 0, 0.0), (LARGE, "before", 1, 0.1),
        (LARGE, "after", 0, 0.3), (LARGE, "after", 1, 0.9),
        (SHIFTED, "before", 0, 0.2), (SHIFTED, "before", 1, 0.98),
        (SHIFTED, "after", 0, 0.2), (SHIFTED, "after", 1, 1.0),
        (LEAKY, "before", 0, 0.0), (LEAKY, "before", 1, 0.0),
        (LEAKY, "after", 0, 0.0), (LEAKY, "after", 1, 0.0),
    ]:
        dead[run, when, layer] = [value] * 3
    first = {run: [4.0] * 3 for run in ch01.DYING_RUNS}
    final = {MODERATE: [0.1] * 3, LARGE: [3.8] * 3, SHIFTED: [3.8] * 3, LEAKY: [1.0] * 3}
    result = ch01.DyingUnits(seeds, dead, {run: [0] * 3 for run in ch01.DYING_RUNS},
                             first, final, [False] * 29 + [True])
    return replace(result, **changes)


def dead(run, when, layer, values):
    return {"dead": {**dying().dead, (run, when, layer): values}}


def loss(which, run, values):
    return {which: {**getattr(dying(), which), run: values}}


@pytest.mark.parametrize("k, changes", [
    (0, dead(MODERATE, "after", 0, [0.0, 0.0, 0.11])),
    (0, dead(MODERATE, "after", 1, [0.15, 0.15, 0.26])),
    (0, loss("final_loss", MODERATE, [0.1, 0.1, 0.41])),  # not tenfold below 4.0
    (1, dead(MODERATE, "after", 1, [0.15, 0.15, 0.1])),  # as many as before
    (2, dead(LARGE, "after", 1, [0.9, 0.9, 0.49])),
    (2, dead(LARGE, "after", 0, [0.3, 0.3, 0.0])),  # as many as with lr 0.05
    # lr 0.3 ends below 5 times lr 0.05's 0.77 (whose first loss is 10, so it fell tenfold)
    (2, {**loss("final_loss", MODERATE, [0.77] * 3), **loss("first_loss", MODERATE, [10.0] * 3)}),
    (3, dead(SHIFTED, "before", 1, [0.98, 0.98, 0.89])),
    (3, dead(SHIFTED, "after", 1, [1.0, 1.0, 0.79])),
    (3, {"revived": {**dying().revived, SHIFTED: [0, 1, 0]}}),
    (4, dead(LEAKY, "after", 1, [0.0, 0.0, 1 / 64])),
    (4, loss("final_loss", LEAKY, [1.0, 1.91, 1.91])),  # above half of 3.8 twice
    # a diverged lr 0.3 run is left out, but Leaky ReLU then wins on only one seed
    (4, loss("final_loss", LARGE, [float("nan"), float("nan"), 3.8])),
    (5, {"diverging": [False] * 30}),
    (5, {"diverging": [False] * 28 + [True]}),  # one of 29, not of 30
])
def test_each_dying_finding_fails_just_past_its_threshold(k, changes):
    assert dying().failing() == []
    assert dying(**changes).failing() == says(ch01.DyingUnits, k)


def test_the_leaky_finding_names_three_seeds():
    two = {key: values[:2] for key, values in dying().dead.items()}
    runs = {which: {run: v[:2] for run, v in getattr(dying(), which).items()}
            for which in ("revived", "first_loss", "final_loss")}
    assert dying(seeds=(0, 1), dead=two, **runs).failing() == says(ch01.DyingUnits, 4)


def selu(**rows):
    """Three seeds that agree; ``rows`` replace an activation's statistics for every seed."""
    falling = [[0.0, 0.04], [0.0, 0.0016], [0.0, 0.000064]]
    stats = {"selu": [[0.0, 1.0], [0.01, 1.05], [-0.02, 0.95]], "tanh": falling,
             "relu": [[m, v / 100] for m, v in falling], **rows}
    return ch01.SeluSweep(
        (0, 1, 2), {name: [torch.tensor(s, dtype=torch.float64)] * 3 for name, s in stats.items()}
    )


@pytest.mark.parametrize("k, rows", [
    (0, {"selu": [[0.0, 1.0], [0.051, 1.0]]}),
    (0, {"selu": [[0.0, 1.0], [0.0, 1.101]]}),
    (1, {"tanh": [[0.011, 0.04], [0.0, 0.0016], [0.0, 0.000064]]}),
    (1, {"tanh": [[0.0, 0.04], [0.0, 0.04], [0.0, 0.000064]]}),  # not falling at layer 2
    (1, {"tanh": [[0.0, 0.2], [0.0, 0.1], [0.0, 0.05]]}),
    (2, {"relu": [[0.0, 0.1], [0.0, 0.01], [0.0, 1.1e-3]]}),
    (2, {"relu": [[0.0, 1e-4], [0.0, 1e-4], [0.0, 1e-5]]}),  # not falling at layer 2
])
def test_each_selu_finding_fails_just_past_its_threshold(k, rows):
    assert selu().failing() == []
    assert selu(**rows).failing() == says(ch01.SeluSweep, k)


def test_the_selu_findings_name_three_seeds():
    two = replace(selu(), seeds=(0, 1), stats={n: s[:2] for n, s in selu().stats.items()})
    assert two.failing() == [f.says for f in ch01.SeluSweep.FINDINGS]


def test_the_runs_work_at_a_tiny_size():
    sweep = ch01.gradient_sweep(seeds=(0, 1), depth=3, width=8)
    assert sweep.seeds == (0, 1) and [len(n) for n in sweep.norms["tanh"]] == [3, 3]
    stats = ch01.selu_sweep(seeds=(0,), depth=2, width=8, batch=16)
    assert stats.seeds == (0,) and stats.stats["selu"][0].shape == (2, 2)
    units = ch01.dying_units(seeds=(0,), divergence_seeds=2, steps=5)
    assert len(units.dead[LEAKY, "after", 1]) == 1 and len(units.diverging) == 2


@pytest.mark.parametrize("result", [gradients(), dying(), selu()], ids=type)
def test_check_prints_every_finding_ticked(result, capsys):
    result.check()
    assert capsys.readouterr().out.count("✓ ") == len(result.FINDINGS)
