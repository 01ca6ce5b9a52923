"""experiments.ch03_rnn: each result's findings hold on made-up numbers that show them and
fail on numbers that contradict them; each run, at a tiny size, returns what the chapter
reads (the clipping runs of a seed start from the same weights)."""

import math

import pytest
import torch

from experiments.ch03_rnn import (
    ClippingRescue,
    EchoSweep,
    Samples,
    ZenTraining,
    clipping_rescue,
    echo_sweep,
    sample_lines,
    train_on_zen,
)
from lib.char_lm import CharLM, CharVocabulary, language_model_batch, train_char_lm

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
    assert all(verdicts(EchoSweep(4, {4: [0.6, 0.54], 5: [1.0, 0.99]})))
    assert verdicts(EchoSweep(4, {4: [0.6, 0.95], 5: [1.0, 0.9]})) == [False, False]


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
    assert list(echo.accuracy) == [4, 5] and all(len(a) == 1 for a in echo.accuracy.values())


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
