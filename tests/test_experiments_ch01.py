"""experiments.ch01_activations_losses: each finding holds on a result that shows it and
fails on one that contradicts it (made-up numbers), and each run works at a tiny size."""
import math
from dataclasses import replace

import pytest
import torch

from experiments import ch01_activations_losses as ch01
from experiments.ch01_activations_losses import LARGE, LEAKY, MODERATE, SHIFTED


def failing(result):
    """The sentences of the findings that do not hold for ``result``."""
    return [f.says for f in result.FINDINGS if not f.holds(result)]


def gradients(**rows):
    norms = {"sigmoid": [[1e-13, 1.0]], "tanh": [[0.01, 0.04]],
             "relu": [[1e-6, 3e-6]], "relu (He)": [[1.0, 3.0]]}
    return ch01.GradientSweep({**norms, **rows})


def test_gradient_findings_hold_on_agreeing_numbers_and_fail_on_others():
    assert failing(gradients()) == []
    assert len(failing(gradients(tanh=[[0.01, 0.1]]))) == 1  # a factor 10 apart
    # a second seed 3 orders of magnitude off the first
    assert len(failing(gradients(sigmoid=[[1e-13, 1.0], [1e-10, 1.0]]))) == 1
    # the He row no longer a multiple of the LeCun row
    assert len(failing(gradients(**{"relu (He)": [[1.0, 2.0]]}))) == 1


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


def test_dying_findings_hold_on_agreeing_numbers_and_fail_on_others():
    assert failing(dying()) == []
    assert len(failing(dying(diverging=[False] * 30))) == 1
    assert len(failing(dying(revived={run: [0, 1, 0] for run in ch01.DYING_RUNS}))) == 1
    # a diverged lr 0.3 run is left out, but Leaky ReLU then wins on only one seed
    losses = {**dying().final_loss, LARGE: [math.nan, math.nan, 3.8]}
    assert failing(dying(final_loss=losses)) == [ch01.DyingUnits.FINDINGS[4].says]


def selu(**rows):
    layers = torch.arange(3, dtype=torch.float64)
    falling = torch.stack([torch.zeros(3), 0.04 ** (1 + layers)], dim=1)  # (3, 2)
    stats = {"selu": [torch.tensor([[0.0, 1.0], [0.01, 1.05], [-0.02, 0.95]])],
             "tanh": [falling], "relu": [falling / 100]}
    return ch01.SeluSweep({**stats, **rows})


def test_selu_findings_hold_on_agreeing_numbers_and_fail_on_others():
    assert failing(selu()) == []
    assert len(failing(selu(selu=[torch.tensor([[0.0, 1.0], [0.0, 1.2]])]))) == 1
    rising = torch.tensor([[0.0, 0.01], [0.0, 0.02]])
    assert len(failing(selu(tanh=[rising], relu=[rising / 100]))) == 2


def test_the_runs_work_at_a_tiny_size():
    sweep = ch01.gradient_sweep(seeds=(0, 1), depth=3, width=8)
    assert [len(n) for n in sweep.norms["tanh"]] == [3, 3]
    stats = ch01.selu_sweep(seeds=(0,), depth=2, width=8, batch=16)
    assert stats.stats["selu"][0].shape == (2, 2)
    units = ch01.dying_units(seeds=(0,), divergence_seeds=2)
    assert len(units.dead[LEAKY, "after", 1]) == 1 and len(units.diverging) == 2


@pytest.mark.parametrize("result", [gradients(), dying(), selu()], ids=type)
def test_check_prints_every_finding_ticked(result, capsys):
    result.check()
    assert capsys.readouterr().out.count("✓ ") == len(result.FINDINGS)
