"""Tests for experiments/ch11_transformer.py: each result's findings hold on numbers that
agree with the chapter's text and fail on numbers that contradict it; the pretraining sets
share no string; each experiment runs at a tiny size."""

import pytest
import torch

import experiments.ch11_transformer as ch11
from experiments.ch11_transformer import (
    CacheTiming, ChunkErrors, CostCurves, DropoutRuns, EpochTimes, GruRuns,
    HeldOutAccuracy, LayoutRuns, MirrorWeights, PretrainingRuns, ReversalRuns,
    pretraining_splits,
)
from lib.pretraining import shared_strings, walks
from lib.seq2seq import Seq2SeqConfig
from lib.tasks import ReversalTask
from lib.training import TrainingLog
from lib.transformer import TransformerConfig


def verdicts(result):
    return [bool(finding.holds(result)) for finding in result.FINDINGS]


def holds_and_fails(agrees, contradicts):
    assert all(verdicts(agrees)), verdicts(agrees)
    agrees.check()
    assert not any(verdicts(contradicts)), verdicts(contradicts)
    with pytest.raises(AssertionError, match="the chapter says what this run does not show"):
        contradicts.check()


def log(losses, seconds=(1.0,)):
    return TrainingLog(losses=list(losses), seconds=list(seconds))


def test_cache_timing_findings():
    holds_and_fails(CacheTiming({}, {}, {32: 1.3, 256: 2.3}), CacheTiming({}, {}, {32: 0.9, 256: 0.8}))


def test_cost_findings():
    lengths = [32, 64, 128, 256]
    agrees = CostCurves(lengths, {"self-attention": [1, 2, 8, 32], "GRU": [2, 4, 8, 16]})
    contradicts = CostCurves(lengths, {"self-attention": [4, 4, 8, 16], "GRU": [2, 4, 16, 64]})
    assert agrees.slope("self-attention") == pytest.approx(2.0)
    holds_and_fails(agrees, contradicts)


def test_reversal_findings():
    holds_and_fails(ReversalRuns([], [log([2.0, 0.9, 0.2, 0.04])] * 3),
                    ReversalRuns([], [log([2.0, 1.9, 0.5, 0.04])] * 3))


def test_held_out_accuracy_findings():
    holds_and_fails(HeldOutAccuracy([0.97, 0.98, 0.99], [], [0, 1, 2, 3], True),
                    HeldOutAccuracy([0.97, 0.85, 0.99], [], [0, 1, 2, 3], False))


def test_mirror_findings():
    agrees = MirrorWeights(torch.tensor([[[0.3, 0.25], [0.6, 0.55]]]),
                           torch.tensor([[[0.2, 0.2], [0.3, 0.3]]]))
    contradicts = MirrorWeights(torch.tensor([[[0.5, 0.35], [0.3, 0.2]]]),
                                torch.tensor([[[0.2, 0.2], [0.32, 0.3]]]))
    holds_and_fails(agrees, contradicts)


def test_gru_and_epoch_time_findings():
    holds_and_fails(GruRuns([], [0.4, 0.5, 0.36], [0.97, 0.98, 0.99]),
                    GruRuns([], [0.4, 0.7, 0.36], [0.97, 0.98, 0.99]))
    holds_and_fails(EpochTimes(transformer=1.4, gru=0.6), EpochTimes(transformer=0.6, gru=1.4))


def test_layout_findings():
    holds_and_fails(
        LayoutRuns({"post-norm": [[2.0, 1.3]] * 3, "pre-norm": [[1.7, 0.6]] * 3}, [0.9, 0.8, 0.9]),
        LayoutRuns({"post-norm": [[2.0, 0.7]] * 3, "pre-norm": [[1.7, 0.6]] * 3}, [0.9, 0.8, 0.9]))


def test_dropout_findings():
    holds_and_fails(DropoutRuns({0.0: [0.8] * 3, 0.1: [1.2] * 3}, {0.0: [1.3] * 3, 0.1: [1.5] * 3}),
                    DropoutRuns({0.0: [1.2] * 3, 0.1: [0.8] * 3}, {0.0: [1.5] * 3, 0.1: [1.2] * 3}))


def test_pretraining_findings():
    falling = [2.4 - 0.01 * e for e in range(10)] + [2.3 - 0.05 * e for e in range(20)]
    accuracy = {"scratch": [0.3, 0.25, 0.26], "frozen": [0.4, 0.3, 0.3], "fine-tuned": [0.6, 0.45, 0.5]}
    holds_and_fails(PretrainingRuns([falling] * 3, accuracy, [0.96, 0.94, 0.96], 12),
                    PretrainingRuns([[2.4] * 30] * 3, {name: [0.9, 0.9, 0.9] for name in accuracy},
                                    [0.96, 0.94, 0.96], 13))


def test_chunk_error_findings():
    holds_and_fails(ChunkErrors(torch.tensor([1e-12]), torch.tensor([2e-9, 5e-8]), torch.tensor([2.0]), torch.tensor([1.0])),
                    ChunkErrors(torch.tensor([1e-10]), torch.tensor([1e-10]), torch.tensor([0.5]), torch.tensor([1.0])))


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_the_chapter_s_three_sets_share_no_string(seed):
    corpus, (train, train_labels), (test, test_labels) = pretraining_splits(32, 1000, 250, seed)
    assert (len(corpus), len(train), len(test)) == (1000, 32, 250)
    for a, b in ((corpus, train), (corpus, test), (train, test)):
        assert shared_strings(a, b) == 0
        assert not {tuple(r) for r in a.tolist()} & {tuple(r) for r in b.tolist()}  # the same, by hand
    more_corpus, (more, more_labels), (same_test, _) = pretraining_splits(256, 1000, 250, seed)
    assert torch.equal(more_corpus, corpus) and torch.equal(same_test, test)  # fixed as labels grow
    assert torch.equal(more[:32], train) and torch.equal(more_labels[:32], train_labels)
    assert shared_strings(more, corpus) == shared_strings(more, test) == 0


def test_pretraining_splits_refuse_sets_that_share_a_string(monkeypatch):
    tokens, labels = walks(300, seed=0)
    repeated = torch.cat([tokens[:100], tokens[:100], tokens[:100]]), torch.cat([labels[:100]] * 3)
    monkeypatch.setattr(ch11, "distinct_walks", lambda count, seed: repeated)
    with pytest.raises(AssertionError, match="the unlabelled and labelled strings share 100"):
        pretraining_splits(100, 100, 100, 0)
    with pytest.raises(ValueError, match="num_labels \\+ corpus_size \\+ test_size must be at most half of the 83640"):
        pretraining_splits(41000, 1000, 250)


@pytest.mark.parametrize("name, sizes", [
    ("num_labels", (-10,)), ("num_labels", (0,)), ("num_labels", (2.5,)), ("corpus_size", (32, 0)),
    ("test_size", (32, 1000, -1)), ("seed", (32, 1000, 250, -1)),
])
def test_pretraining_splits_refuse_sizes_below_one(name, sizes):
    with pytest.raises(ValueError, match=f"{name} must be a whole number of at least"):
        pretraining_splits(*sizes)


TINY = TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=16)


def test_each_experiment_runs_at_a_tiny_size():
    task = ReversalTask(min_len=4, max_len=8)
    train, test = task.split(n_train=64, n_test=40, seed=0)
    assert set(ch11.cache_speedup(TINY, pairs={4: 1}).speedup) == {4}
    assert len(ch11.attention_vs_gru_cost(lengths=(4, 8, 16), d=8).times["GRU"]) == 3
    reversal = ch11.reversal_sweep(task, train, TINY, seeds=(0,), epochs=2)
    decoded = ch11.exact_matches(reversal.models, task, test)
    assert len(decoded.shown) == 4 and 0 <= decoded.accuracy[0] <= 1
    assert ch11.mirror_weights(reversal.models, test).on_mirror.shape == (1, 1, 2)
    grus = ch11.gru_sweep(task, train, test, Seq2SeqConfig(embed_dim=8, hidden_dim=8, bidirectional=False),
                          decoded, seeds=(0,))
    assert ch11.seconds_per_epoch(reversal, grus).gru > 0
    assert len(ch11.layout_sweep(task, train, TINY, reversal, seeds=(0,)).losses["pre-norm"][0]) == 2
    assert len(ch11.dropout_sweep(task, train[:8], test[:8], TINY, seeds=(0,)).held_loss[0.1]) == 1
    runs = ch11.pretraining_sweep(TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=9,
                                                    learned_positions=True),
                                  seeds=(0,), num_labels=8, pretrain_epochs=1, epochs=1)
    assert set(runs.accuracy) == {"scratch", "frozen", "fine-tuned"} and len(runs.mlm_losses[0]) == 1
    from courseware.checks.transformer import _combined  # noqa: the checker's combination
    assert all(verdicts(ch11.chunk_statistics_errors(_combined)))
