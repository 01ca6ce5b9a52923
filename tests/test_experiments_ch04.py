"""experiments.ch04_gating: each result's findings hold on made-up numbers that show them and
fail on numbers that contradict them; the memory-task run solves a short gap reproducibly and never
tests on a training sequence; each experiment runs at a tiny size."""

import math

import pytest
import torch

from experiments.ch04_gating import (
    ClosedGate,
    ForgetBiasReach,
    GradientReach,
    KeepGateReach,
    MemorySweep,
    UpdateGateDecay,
    _train_memory_task,
    closed_forget_gate,
    forget_bias_reach,
    gradient_reach,
    keep_gate_reach,
    memory_sweep,
    update_gate_decay,
)
from lib.gating import sequence_symbols
from lib.tasks import MemoryTask


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
    run = _train_memory_task("rnn", 3, steps=2, test_size=8)
    run.replaced = replaced
    return MemorySweep(accuracy, learned, {("rnn", 3, 0): run})


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
        {n: 2.5 if n in (20, 51) else 2.0 for n in lengths}, 0.07, [0.05, 0.2])
    assert all(verdicts(shown))


def test_train_memory_task_solves_a_short_gap_and_is_reproducible():
    first = _train_memory_task("lstm", length=6, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)
    again = _train_memory_task("lstm", length=6, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)
    assert first.accuracy > 0.95
    assert first.losses == again.losses and first.accuracy == again.accuracy


def test_the_test_sequences_never_occur_in_training():
    """With 6 distractors there are only 4^7 = 16,384 sequences and training draws 7,680: hundreds of
    test draws repeat a training sequence, and every one of them is replaced."""
    run = _train_memory_task("lstm", length=6, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)
    train = set(map(tuple, run.train_symbols.tolist()))
    test = list(map(tuple, run.test_symbols.tolist()))
    assert run.train_symbols.shape == (120 * 64, 7) and run.test_symbols.shape == (1000, 7)
    assert train.isdisjoint(test) and run.replaced > 100
    # the training sequences are the ones the training generator drew
    task, generator = MemoryTask(6), torch.Generator().manual_seed(1)
    drawn = torch.cat([sequence_symbols(task.batch(64, generator)[0], 4) for _ in range(120)])
    assert torch.equal(drawn, run.train_symbols)
    # 2 distractors: 4^3 = 64 sequences, all drawn in training
    with pytest.raises(ValueError, match=r"only 0 sequences outside the 64 seen.*4\^3"):
        _train_memory_task("lstm", length=2, steps=120, hidden_size=16, keep_bias=1.0, lr=1e-2)


def test_the_experiments_at_a_tiny_size():
    decay = update_gate_decay(torch.randn(1, 50, 3, dtype=torch.float64))
    assert list(decay.norms) == [-3.0, 0.0, 3.0] and decay.norms[0.0].shape == (51,)
    reach = keep_gate_reach(torch.randn(2, 60, 6, dtype=torch.float64), hidden_size=4)
    assert len(reach.norms) == 5 and reach.norms["lstm", 5.0].shape == (61,)
    tiny = dict(steps=20, hidden_size=32, test_size=8)
    swept = memory_sweep((0,), lengths=(10, 40), **tiny)
    assert set(swept.accuracy) == {(k, T) for k in ("rnn", "gru", "lstm") for T in (10, 40)}
    assert set(swept.learned) == {(k, T) for k in ("gru", "lstm") for T in (10, 40)}
    assert len(closed_forget_gate((0, 1), **tiny).accuracy) == 2
    grads = gradient_reach(swept, (0,))
    assert grads.curves["lstm", "trained"][0].shape == (43,)
    remember = forget_bias_reach(lambda b, n, seed=None: b / n, 0.05, lengths=range(20, 23))
    assert remember.lengths == [20, 21, 22] and len(remember.other_models) == 10
