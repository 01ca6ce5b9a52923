"""experiments.ch04_gating: each result's findings hold on made-up numbers that show them, and each
fails alone just past its threshold; the steps to learn and the least passing bias on made-up
inputs; each experiment runs at a tiny size (the training loop is lib.part2_recurrent.gating's, tested in
tests/lib/part2_recurrent/test_gating.py)."""

import math
from dataclasses import replace

import pytest
import torch

from experiments.ch04_gating import (
    ClosedGate,
    ForgetBiasReach,
    GradientReach,
    KeepGateReach,
    MemorySweep,
    UpdateGateDecay,
    _steps_to_learn,
    closed_forget_gate,
    forget_bias_reach,
    gradient_reach,
    keep_gate_reach,
    memory_sweep,
    update_gate_decay,
)
from lib.part2_recurrent.gating import MemoryClassifier, MemoryRun

pytestmark = pytest.mark.usefixtures("one_thread")


def verdicts(result):
    return [bool(finding.holds(result)) for finding in result.FINDINGS]


def curve(first, at_40, last=1.0, steps=51):
    """A made-up curve of norms: ``first`` at k = 0, ``at_40`` at k = 40."""
    norms = torch.full((steps,), last, dtype=torch.float64)
    norms[0], norms[40] = first, at_40
    return norms


def test_update_gate_decay_findings():
    open_gate = curve(UpdateGateDecay.kept(0) * 1.1, UpdateGateDecay.kept(40) * 0.9)
    shut = curve(1e-20, 1e-5)
    assert all(verdicts(UpdateGateDecay({-3.0: shut, 0.0: shut, 3.0: open_gate})))
    leaky = curve(1e-10, 1e-5)
    wrong = UpdateGateDecay({-3.0: shut, 0.0: leaky, 3.0: curve(0.5, 0.5)})
    assert verdicts(wrong) == [False, False]


def test_keep_gate_reach_findings():
    shut, wide = curve(1e-12, 1e-2, steps=61), curve(4.0, 0.5, steps=61)
    wide[50] = 0.5
    norms = {("rnn", None): shut, ("gru", 0.0): shut, ("gru", 5.0): wide,
             ("lstm", 0.0): shut, ("lstm", 5.0): wide}
    assert all(verdicts(KeepGateReach(norms)))
    narrow = curve(0.05, 1.0, steps=61)
    narrow[50] = 1.0
    norms = {**norms, ("rnn", None): curve(1e-8, 1e-2, steps=61), ("lstm", 5.0): narrow}
    assert verdicts(KeepGateReach(norms)) == [False, False, False]


def sweep(rnn_10, rnn_40, gated, learned_10, learned_40, replaced=3):
    accuracy = {("rnn", 10): rnn_10, ("rnn", 40): rnn_40,
                ("gru", 10): gated, ("gru", 40): gated, ("lstm", 10): gated, ("lstm", 40): gated}
    learned = {(kind, T): steps for kind in ("gru", "lstm")
               for T, steps in ((10, learned_10), (40, learned_40))}
    return MemorySweep(accuracy, learned, {key: made_up_run(key[0], replaced) for key in RUNS})


RUNS = [(kind, T, seed) for kind in ("rnn", "gru", "lstm") for T in (10, 40) for seed in range(3)]
MODEL = MemoryClassifier("rnn", 6, 2, 4)


def made_up_run(kind, replaced=3, steps=300, test_size=1000, seen_in_test=False):
    """A run of 300 steps tested on 1,000 sequences, none of them a training sequence."""
    train = torch.zeros(4, 3, dtype=torch.int8)
    test = torch.ones(test_size, 3, dtype=torch.int8)
    if seen_in_test:
        test[-1] = train[0]
    return MemoryRun(kind, 10, 1.0, [0.0] * steps, MODEL, MODEL, train, test, replaced)


def test_memory_sweep_findings():
    assert all(verdicts(sweep([1.0, 0.95, 0.5], [0.26] * 3, [1.0] * 3, [90] * 3, [180] * 3)))
    against = sweep([1.0, 0.8, 0.3], [0.26, 0.5, 0.2], [1.0, 0.9, 1.0], [90, 200, 90],
                    [180, 150, math.inf], replaced=21)
    assert verdicts(against) == [True, False, False, False, False, False, False]


def test_closed_gate_and_gradient_reach_findings():
    assert verdicts(ClosedGate([0.26, 0.24])) == [True]
    assert verdicts(ClosedGate([0.26, 0.9])) == [False]
    def reach(rnn_first, gated_first, trained_first):
        untrained_rnn = curve(rnn_first, 1.0, steps=43)
        untrained_rnn[41] = 1e-1
        return GradientReach({
            ("rnn", "untrained"): [untrained_rnn], ("rnn", "trained"): [curve(1e-6, 1, steps=43)],
            ("gru", "untrained"): [curve(0.5, 1, steps=43)], ("gru", "trained"): [curve(1, 1, steps=43)],
            ("lstm", "untrained"): [curve(gated_first, 1, steps=43)],
            ("lstm", "trained"): [curve(trained_first, 1, steps=43)],
        })
    for r in (reach(1e-30, 2.0, 3.0),):  # the first step is norms[1]; curve() sets norms[0]
        for kind_when, curves in r.curves.items():
            curves[0][1] = curves[0][0]
        assert all(verdicts(r))
    against = reach(1e-3, 50.0, 1e-3)
    for curves in against.curves.values():
        curves[0][1] = curves[0][0]
    assert verdicts(against) == [False, False, False, False, True]


def test_forget_bias_reach_findings_on_a_made_up_measure():
    """ρ grows with the bias and falls steadily with the length, so the least passing bias
    grows steadily with T, which the chapter's first finding denies."""
    def rho(bias, length, seed=None):
        scale = 1.0 if seed is None else 0.2 + 0.3 * seed
        return scale * math.exp(3 * (bias - 2.0)) * 0.1 * (1.0 + (55 - length) / 40)
    result = forget_bias_reach(rho, 0.1)
    assert verdicts(result)[0] is False
    assert all(a <= b for a, b in zip(list(result.least.values()), list(result.least.values())[1:]))
    with pytest.raises(AssertionError, match="not monotone"):
        result.check()
    lengths = list(range(20, 61))
    shown = ForgetBiasReach(
        lengths, 0.1,
        {1.0: [0.01] * 41, 2.0: [0.2] * 20 + [0.05] * 21, 3.0: [0.9] * 41, "ln 2T": [1.2] * 41},
        {n: 2.5 if n in (20, 51) else 2.0 for n in lengths}, 0.07, [0.05] + [0.2] * 9)
    assert all(verdicts(shown))


def test_the_experiments_at_a_tiny_size():
    decay = update_gate_decay(torch.randn(1, 50, 3, dtype=torch.float64))
    assert list(decay.norms) == [-3.0, 0.0, 3.0] and decay.norms[0.0].shape == (51,)
    reach = keep_gate_reach(torch.randn(2, 60, 6, dtype=torch.float64), hidden_size=4)
    assert len(reach.norms) == 5 and reach.norms["lstm", 5.0].shape == (61,)
    tiny = dict(steps=2, hidden_size=16, test_size=8)  # fewer steps than the window of 20
    swept = memory_sweep((0,), lengths=(10, 40), **tiny)
    assert swept.learned["gru", 10] == [math.inf]
    assert set(swept.accuracy) == {(k, T) for k in ("rnn", "gru", "lstm") for T in (10, 40)}
    assert set(swept.learned) == {(k, T) for k in ("gru", "lstm") for T in (10, 40)}
    assert len(closed_forget_gate((0, 1), **tiny).accuracy) == 2
    grads = gradient_reach(swept, (0,))  # the untrained models have the sweep's 16 units
    assert swept.runs["lstm", 40, 0].untrained.recurrent.hidden_size == 16
    assert grads.curves["lstm", "trained"][0].shape == (43,)
    remember = forget_bias_reach(lambda b, n, seed=None: b / n, 0.05, lengths=range(20, 23))
    assert remember.lengths == [20, 21, 22] and len(remember.other_models) == 10


def test_steps_to_learn_is_the_last_step_of_the_first_window_below_a_tenth():
    # the window of steps 30..49 (counting from 1) holds one loss of 1: mean 0.05
    assert _steps_to_learn([1.0] * 30 + [0.0] * 50) == 49
    assert _steps_to_learn([0.0] * 20) == 20
    assert _steps_to_learn([1.0] * 5 + [0.0] * 15) == math.inf  # mean 0.25
    assert _steps_to_learn([0.0] * 19) == math.inf  # fewer losses than the window


def test_the_least_passing_bias_is_found_to_a_hundredth():
    """ρ = b - T/40 passes the least ρ of 1 from b = 1 + T/40 on."""
    result = forget_bias_reach(lambda b, n, seed=None: b - n / 40, 1.0, lengths=range(20, 41, 10))
    for n, least in result.least.items():
        assert 1 + n / 40 <= least <= 1 + n / 40 + 0.01


# Each finding fails just past its threshold, and only it.


def says(cls):
    return [finding.says for finding in cls.FINDINGS]


def test_update_gate_decay_findings_fail_one_at_a_time():
    kept, shut = UpdateGateDecay.kept, curve(1e-20, 1e-5)
    agreeing = UpdateGateDecay({-3.0: shut, 0.0: shut, 3.0: curve(kept(0) * 1.29, kept(40) * 0.71)})
    assert agreeing.failing() == []
    for first, at_40 in ((kept(0) * 1.31, kept(40)), (kept(0), kept(40) * 0.69)):
        result = replace(agreeing, norms={**agreeing.norms, 3.0: curve(first, at_40)})
        assert result.failing() == [says(UpdateGateDecay)[0]]
    for bias in (-3.0, 0.0):
        result = replace(agreeing, norms={**agreeing.norms, bias: curve(1e-14, 1e-5)})
        assert result.failing() == [says(UpdateGateDecay)[1]]


def test_keep_gate_reach_findings_fail_one_at_a_time():
    def norms(first, at_50=0.5):
        made_up = curve(first, 0.5, steps=61)
        made_up[50] = at_50
        return made_up
    shut, wide = norms(1e-12, 1e-2), norms(4.0)
    agreeing = KeepGateReach({("rnn", None): shut, ("gru", 0.0): shut, ("gru", 5.0): wide,
                              ("lstm", 0.0): shut, ("lstm", 5.0): wide})
    assert agreeing.failing() == []
    changed = lambda key, value: replace(agreeing, norms={**agreeing.norms, key: value})
    for key in (("rnn", None), ("gru", 0.0), ("lstm", 0.0)):
        assert changed(key, norms(1e-10, 1e-2)).failing() == [says(KeepGateReach)[0]]
    for kind in ("gru", "lstm"):
        assert changed((kind, 5.0), norms(0.099, 0.01)).failing() == [says(KeepGateReach)[1]]
    assert changed(("lstm", 5.0), norms(1.0, 0.5)).failing() == [says(KeepGateReach)[2]]


def test_memory_sweep_findings_fail_one_at_a_time():
    agreeing = sweep([1.0, 0.95, 0.5], [0.26] * 3, [1.0] * 3, [90] * 3, [180] * 3)
    assert agreeing.failing() == []
    said = says(MemorySweep)

    def with_run(key, **changes):
        return replace(agreeing, runs={**agreeing.runs, key: made_up_run(key[0], **changes)})

    def with_accuracy(key, values):
        return replace(agreeing, accuracy={**agreeing.accuracy, key: values})

    def with_learned(key, values):
        return replace(agreeing, learned={**agreeing.learned, key: values})

    assert with_run(("gru", 40, 2), seen_in_test=True).failing() == [said[0]]
    assert with_run(("rnn", 10, 1), replaced=20).failing() == []
    assert with_run(("rnn", 10, 1), replaced=21).failing() == [said[1]]
    assert with_run(("rnn", 10, 1), test_size=999).failing() == [said[1]]  # not 1,000
    assert with_accuracy(("rnn", 10), [1.0, 0.89, 0.5]).failing() == [said[2]]
    assert with_accuracy(("rnn", 10), [1.0, 0.95, 0.39]).failing() == [said[2]]
    assert with_accuracy(("rnn", 40), [0.26, 0.26, 0.35]).failing() == [said[3]]
    assert with_accuracy(("gru", 40), [1.0, 1.0, 0.94]).failing() == [said[4]]
    assert with_learned(("lstm", 40), [180, 180, 300]).failing() == []
    assert with_learned(("lstm", 40), [180, 180, 301]).failing() == [said[5]]
    assert with_run(("lstm", 40, 0), steps=299).failing() == [said[5]]  # not 300 steps
    assert with_learned(("gru", 40), [180, 180, 90]).failing() == [said[6]]


def test_closed_gate_finding_fails_at_35_percent():
    assert ClosedGate([0.26, 0.349]).failing() == []
    assert ClosedGate([0.26, 0.35]).failing() == says(ClosedGate)


def test_gradient_reach_findings_fail_one_at_a_time():
    def norms(at_1, at_41=1.0):
        made_up = torch.ones(43, dtype=torch.float64)
        made_up[1], made_up[41] = at_1, at_41
        return [made_up]
    agreeing = GradientReach({
        ("rnn", "untrained"): norms(1e-6, 0.1), ("rnn", "trained"): norms(1e-6),
        ("gru", "untrained"): norms(0.5), ("gru", "trained"): norms(1.0),
        ("lstm", "untrained"): norms(2.0), ("lstm", "trained"): norms(3.0),
    })
    assert agreeing.failing() == []
    said = says(GradientReach)
    changed = lambda key, value: replace(agreeing, curves={**agreeing.curves, key: value})
    assert changed(("rnn", "untrained"), norms(1e-5, 1.0)).failing() == [said[0]]
    assert changed(("rnn", "untrained"), norms(1e-6, 1e-2)).failing() == [said[1]]
    for kind in ("gru", "lstm"):
        for value in (0.1, 30.0):
            assert changed((kind, "untrained"), norms(value)).failing() == [said[2]]
        for value in (0.01, 100.0):
            assert changed((kind, "trained"), norms(value)).failing() == [said[3]]
    assert changed(("rnn", "trained"), norms(1e-3)).failing() == [said[4]]


def test_forget_bias_reach_findings_fail_one_at_a_time():
    lengths = list(range(20, 61))
    agreeing = ForgetBiasReach(
        lengths, 0.1,
        {1.0: [0.01] * 41, 2.0: [0.2] * 20 + [0.05] * 21, 3.0: [0.9] * 41, "ln 2T": [1.2] * 41},
        {n: 2.5 if n in (20, 51) else 2.0 for n in lengths}, 0.07, [0.05] + [0.2] * 9)
    assert agreeing.failing() == []
    said = says(ForgetBiasReach)

    def with_rho(bias, values):
        return replace(agreeing, rho={**agreeing.rho, bias: values})

    for n in (20, 51):
        assert replace(agreeing, least={**agreeing.least, n: 2.04}).failing() == [said[0]]
    assert replace(agreeing, least={**agreeing.least, 30: 3.0}).failing() == [said[1]]
    sigma_1 = 1 / (1 + math.exp(-1.0))
    assert with_rho(1.0, [sigma_1**20] + [0.01] * 40).failing() == [said[2]]  # ρ = σ(1)^20
    assert with_rho("ln 2T", [1.0] * 41).failing() == [said[3]]
    assert with_rho(1.0, [0.01] * 5 + [0.1] + [0.01] * 35).failing() == [said[4]]
    assert with_rho(2.0, [0.2] * 41).failing() == [said[5]]
    assert with_rho(2.0, [0.09] * 41).failing() == [said[5]]
    assert replace(agreeing, reach_55=0.1).failing() == [said[6]]
    assert replace(agreeing, other_models=[0.05] + [0.15] * 9).failing() == [said[7]]
    assert replace(agreeing, other_models=[0.1] + [0.5] * 9).failing() == [said[7]]
    assert replace(agreeing, other_models=[0.05] + [0.2] * 8).failing() == [said[7]]  # not ten
    assert with_rho(3.0, [0.9] * 40 + [0.09]).failing()[-1] == said[8]
    assert with_rho("ln 2T", [1.2] * 40 + [0.09]).failing() == [said[8]]
    # findings 5 and 9 both name the lengths from 20 to 60
    short = replace(agreeing, lengths=lengths[:-1], rho={b: v[:-1] for b, v in agreeing.rho.items()})
    assert short.failing() == [said[4], said[8]]


def test_the_forget_bias_findings_hold_for_the_checkers_measure():
    """The findings that the solution of exercise ``ex-gate-remember`` (chapter 4, cells
    ``ex-gate-remember-solution-start`` and ``ex-gate-remember-glue``) draws from the checker's
    measure. They are fixed arithmetic (seeded, float64) and give away the exercise's answer, so a
    test checks them rather than a visible cell outside the solution."""
    from courseware.checks.gating import LEAST_REACH, first_step_reach

    assert forget_bias_reach(first_step_reach, LEAST_REACH).failing() == []
