"""experiments.ch03_rnn: each result's findings hold on made-up numbers that show them and
fail on numbers that contradict them; each run, at a tiny size, returns what the chapter
reads (the clipping runs of a seed start from the same weights)."""

import math
from dataclasses import replace

import pytest
import torch

from experiments.ch03_rnn import (
    ClippingRescue,
    EchoSweep,
    Samples,
    ZenTraining,
    clipping_rescue,
    echo_sweep,
    gradient_reach,
    sample_lines,
    train_on_zen,
)
from lib.part2_recurrent.char_lm import CharLM, CharVocabulary, language_model_batch, train_char_lm

UNIFORM = math.log(45)  # 3.81


def verdicts(result):
    return [bool(finding.holds(result)) for finding in result.FINDINGS]


def zen(train_end=0.1, held_curve=(3.9, 2.6, 4.9)):
    train = [[3.85, 1.0, train_end]] * 3
    return ZenTraining(train, [list(held_curve)] * 3, [5.0] * 3, [0.05] * 3, UNIFORM, [])


def test_zen_training_findings_hold_on_an_over_fitting_run_only(capsys):
    zen().check()
    assert capsys.readouterr().out.count("✓") == len(ZenTraining.FINDINGS)
    # training stuck at 0.3 nats, the held-out loss never climbing back above ln V
    stuck = zen(train_end=0.3, held_curve=(3.9, 2.6, 3.0))
    assert verdicts(stuck) == [True, False, True, True, False, False, True, True]
    with pytest.raises(AssertionError, match=r"by step 150 .* \(cells afb88896\)"):
        stuck.check()


def test_samples_findings():
    assert all(verdicts(Samples(["a"], [0.5, 0.45], [50, 55], [0.84, 0.9])))
    assert verdicts(Samples(["a"], [0.0, 0.9], [100, 10], [0.84, 0.3])) == [False] * 3


def test_clipping_rescue_findings():
    diverged = [[3.9, 9.0, 30.0, 20.0, math.nan]]
    calm = [[3.8, 3.9, 2.0, 0.5]]
    rescue = ClippingRescue(diverged, calm, 0.25, UNIFORM)
    assert all(verdicts(rescue)) and rescue.leap == [2] and rescue.peak_step == [2]
    assert rescue.late == [3.9, 9.0, 30.0, 20.0]
    # the unclipped run recovers below ln V; the clipped one rises by a nat
    recovered = ClippingRescue([[3.8, 30.0, 1.0]], [[3.8, 4.9, 0.5]], 0.25, UNIFORM)
    assert verdicts(recovered) == [True, False, False]
    never_leaps = ClippingRescue([[3.9, 9.0, 5.0]], calm, 0.25, UNIFORM)
    assert never_leaps.leap == [math.inf] and verdicts(never_leaps) == [False, True, True]


def test_echo_sweep_findings():
    assert all(verdicts(EchoSweep(4, {4: [0.6, 0.54], 5: [1.0, 0.99], 8: [1.0, 0.99]}, [1.0, 0.99])))
    assert verdicts(EchoSweep(4, {4: [0.6, 0.95], 5: [1.0, 0.9], 8: [0.5, 1.0]}, [0.6, 1.0])) == [False] * 4


LINES = ["abcab", "bcabc", "cabca"]


def test_the_runs_at_a_tiny_size():
    vocabulary = CharVocabulary.from_text("\n".join(LINES + ["abd"]))
    train = language_model_batch(LINES, vocabulary)
    held_out = language_model_batch(["abd"], vocabulary)
    run = train_on_zen(vocabulary, train, held_out, ["d"], seeds=(0, 1), steps=3)
    assert [len(curve) for curve in run.train + run.held_out] == [4] * 4
    assert len(run.unseen_cost) == len(run.models) == 2
    assert 0 < min(run.unseen_share) and max(run.unseen_share) <= 1
    samples = sample_lines(run.models, vocabulary, "\n".join(LINES), 2, per_model=5)
    assert len(samples.shown) == 2 and len(samples.verbatim) == 2
    echo = echo_sweep(seeds=(0,), streams=2, length=20)
    assert list(echo.accuracy) == [4, 5, 8] and all(len(a) == 1 for a in echo.accuracy.values())
    assert len(echo.windowed) == 1 and 0 <= echo.windowed[0] <= 1


def test_clipping_rescue_runs_a_seed_from_the_same_weights_with_and_without_clipping():
    vocabulary = CharVocabulary.from_text("\n".join(LINES))
    inputs, targets = language_model_batch(LINES, vocabulary)
    rescue = clipping_rescue(vocabulary.size, inputs, targets, (0, 1), steps=3)
    for max_norm, runs in ((math.inf, rescue.unclipped), (0.25, rescue.clipped)):
        for seed, curve in zip((0, 1), runs):
            torch.manual_seed(seed)
            model = CharLM(vocabulary.size, hidden_size=64, embedding_dim=16, kind="rnn")
            want = train_char_lm(model, inputs, targets, 3, 8.0, max_norm, optimizer="sgd")
            assert curve == want["train"]
    assert rescue.unclipped[0][0] == rescue.clipped[0][0] != rescue.clipped[1][0]
    assert rescue.unclipped[0][1:] != rescue.clipped[0][1:]  # clipping changes the steps


def test_clipping_rescue_refuses_no_seeds_and_a_threshold_that_does_not_clip():
    vocabulary = CharVocabulary.from_text("\n".join(LINES))
    inputs, targets = language_model_batch(LINES, vocabulary)
    for seeds, max_norm in (((), 0.25), ((0,), math.inf), ((0,), 0.0)):
        with pytest.raises(ValueError, match=r"at least one seed and a finite positive max_norm"):
            clipping_rescue(vocabulary.size, inputs, targets, seeds, max_norm, steps=1)


# Each finding fails just past its threshold, and only it.

SAYS = {cls: [finding.says for finding in cls.FINDINGS]
        for cls in (ZenTraining, Samples, ClippingRescue, EchoSweep)}


def agreeing_zen():
    train = [[3.85, 1.0, 0.1] for _ in range(3)]
    held = [[3.9, 2.6, 4.9] for _ in range(3)]
    return ZenTraining(train, held, [5.0] * 3, [0.05] * 3, UNIFORM, [])


def test_zen_training_findings_fail_one_at_a_time_just_past_their_thresholds():
    agreeing, says = agreeing_zen(), SAYS[ZenTraining]
    assert agreeing.failing() == []
    seeds = lambda *last: [[3.85, 1.0, 0.1]] * 2 + [list(last)]  # the third seed differs
    held = lambda *last: [[3.9, 2.6, 4.9]] * 2 + [list(last)]
    cases = {
        0: replace(agreeing, train=seeds(UNIFORM + 0.21, 1.0, 0.1)),  # 0.2 from ln V
        1: replace(agreeing, train=seeds(3.85, 1.0, 0.25)),  # 0.25 nats
        2: replace(agreeing, held_out=held(3.9, UNIFORM - 0.79, 4.9)),  # 0.8 below ln V
        3: replace(agreeing, held_out=held(*[3.9] * 60, 2.6, 4.9)),  # lowest at step 60
        6: replace(agreeing, unseen_cost=[5.0, 5.0, UNIFORM]),  # not above ln V
        7: replace(agreeing, unseen_share=[0.05, 0.05, 0.1]),  # a tenth
    }
    for k, result in cases.items():
        assert result.failing() == [says[k]], k
    # finding 4 has two parts: 1 nat above the lowest point, and above ln V; with the
    # training loss at 0.1, the second fails only with finding 5 (a gap above 3.8 nats)
    assert replace(agreeing, held_out=held(3.9, 2.95, 3.95)).failing() == [says[4]]
    assert replace(agreeing, held_out=held(3.9, 2.94, 3.95)).failing() == []
    assert replace(agreeing, held_out=held(3.9, 2.6, UNIFORM - 0.01)).failing() == [
        says[4], says[5]]
    # finding 5: a gap of 3.8 nats (findings 1 and 4 imply only more than ln V - 0.25)
    gap = lambda held_end: replace(
        agreeing, train=seeds(3.85, 1.0, 0.2), held_out=held(3.9, 2.6, held_end))
    assert gap(4.01).failing() == []
    assert gap(4.0).failing() == [says[5]]


def test_samples_findings_fail_one_at_a_time_just_past_their_thresholds():
    agreeing, says = Samples(["a"], [0.5, 0.45], [50, 55], [0.84, 0.9]), SAYS[Samples]
    assert agreeing.failing() == []
    assert replace(agreeing, verbatim=[0.5, 0.0]).failing() == [says[0]]
    assert replace(agreeing, new=[50, 24]).failing() == [says[1]]
    assert replace(agreeing, new=[50, 25]).failing() == []
    assert replace(agreeing, misspelt=[0.84, 0.5]).failing() == [says[2]]


def test_clipping_rescue_findings_fail_one_at_a_time_just_past_their_thresholds():
    calm = [[3.8, 3.9, 2.0, 0.5]]
    agreeing = ClippingRescue([[3.9, 9.0, 30.0, 20.0, math.nan]], calm, 0.25, UNIFORM)
    says = SAYS[ClippingRescue]
    assert agreeing.failing() == []
    late_leap = [[3.9] + [5.0] * 7 + [30.0, 20.0, math.nan]]  # above 3 ln V at step 8
    assert replace(agreeing, unclipped=late_leap).failing() == []
    later = [[3.9] + [5.0] * 8 + [30.0, 20.0, math.nan]]  # at step 9
    assert replace(agreeing, unclipped=later).failing() == [says[0]]
    dips = [[3.9, 9.0, 30.0, 20.0, UNIFORM - 0.01]]
    assert replace(agreeing, unclipped=dips).failing() == [says[1]]
    assert replace(agreeing, clipped=[[3.8, 4.3, 2.0, 0.5]]).failing() == []
    assert replace(agreeing, clipped=[[3.8, 4.31, 2.0, 0.5]]).failing() == [says[2]]
    assert replace(agreeing, clipped=[[3.8, 3.9, 2.0, 1.0]]).failing() == [says[2]]


def test_echo_sweep_findings_fail_one_at_a_time_just_past_their_thresholds():
    agreeing = EchoSweep(4, {4: [0.6, 0.54], 5: [1.0, 0.99], 8: [0.99, 1.0]}, [1.0, 0.99])
    says = SAYS[EchoSweep]
    assert agreeing.failing() == []
    assert replace(agreeing, accuracy={**agreeing.accuracy, 4: [0.6, 0.9]}).failing() == [says[0]]
    assert replace(agreeing, accuracy={**agreeing.accuracy, 5: [1.0, 0.98]}).failing() == [says[1]]
    assert replace(agreeing, windowed=[1.0, 0.98]).failing() == [says[2]]
    assert replace(agreeing, accuracy={**agreeing.accuracy, 8: [0.98, 1.0]}).failing() == [says[3]]
    # the findings read the arms from the delay, not from 4, 5 and 8: the exercise's delay = 6
    six = EchoSweep(6, {6: [0.6, 0.5], 7: [1.0, 0.99], 12: [0.99, 1.0]}, [1.0, 0.99])
    assert six.failing() == []
    assert replace(six, accuracy={**six.accuracy, 12: [0.5, 1.0]}).failing() == [says[3]]


def test_gradient_reach_is_the_window_definition_in_autograd():
    """Autograd's reach against the closed form: the loss at step t reaches s when
    max(0, k1 (t // k1) - (k2 - k1)) <= s <= t; randomised, when no cut (factor 0) lies
    on the steps s + 1 .. t."""
    length = 11
    t, s = torch.arange(length)[:, None], torch.arange(length)[None, :]
    for k1, k2 in ((3, 3), (3, 6), (4, 9), (2, 11)):
        begin = (k1 * (t // k1) - (k2 - k1)).clamp(min=0)
        want = ((begin <= s) & (s <= t)).long()
        assert torch.equal(gradient_reach(length, k1, k2), want), (k1, k2)
    assert torch.equal(gradient_reach(length, 3), gradient_reach(length, 3, 3))
    factors = torch.tensor([2.0, 2, 0, 2, 2, 2, 0, 0, 2, 2, 2], dtype=torch.float64)
    cut = (factors == 0).long().cumsum(0)  # cuts up to each step
    # s reaches t when no cut lies on steps s + 1 .. t: cut[t] == cut[s]
    want = ((cut[:, None] == cut[None, :]) & (s <= t)).long()
    assert torch.equal(gradient_reach(length, 1, factors=factors), want)
