"""Tests for experiments/ch11_transformer.py: each result's findings hold on numbers that
agree with the chapter's text, and each finding, alone, fails just past its threshold; the
pretraining sets share no string; each experiment runs at a tiny size; the layout runs the
chapter loads are those ``python -m experiments.ch11_transformer layout-runs`` trains on the
chapter's recipe (a shortened run of the command, and one stored run retrained in full)."""

import math
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
import torch

import experiments.ch11_transformer as ch11
from experiments.findings import run_arithmetic
from experiments.ch11_transformer import (
    CacheTiming, ChunkErrors, CostCurves, DropoutRuns, EpochTimes, GruRuns,
    HeldOutAccuracy, InitGradients, LayoutRederived, LayoutRuns, MirrorWeights, PretrainingRuns,
    ReversalRuns, pretraining_splits,
)
from lib.part4_attention.pretraining import shared_strings, walks
from lib.part4_attention.seq2seq import Seq2SeqConfig
from lib.part4_attention.reversal_task import ReversalTask
from lib.training import TrainingLog
from lib.part4_attention.transformer import TransformerConfig

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


def agrees(result):
    assert result.failing() == []
    result.check()  # prints every finding ticked


def only_fails(result, k):
    """``result`` contradicts finding ``k`` of its class and no other."""
    assert result.failing() == [type(result).FINDINGS[k].says]
    with pytest.raises(AssertionError, match="the chapter says what this run does not show"):
        result.check()


def log(losses, seconds=(1.0,)):
    return TrainingLog(losses=list(losses), seconds=list(seconds))


def test_cache_timing_findings():
    agreeing = CacheTiming({}, {}, {32: 1.01, 256: 1.5})
    agrees(agreeing)
    only_fails(replace(agreeing, speedup={32: 1.0, 256: 1.5}), 0)  # not faster at 32
    only_fails(replace(agreeing, speedup={32: 1.01, 256: 1.49}), 1)  # under 1.5 at 256
    only_fails(replace(agreeing, speedup={32: 1.6, 256: 1.6}), 2)  # no larger at 256


LENGTHS = [32, 64, 128, 256, 512, 1024, 2048]


def curves(attention_slope, gru_slope, attention=0.2, gru=1.0, at=None):
    """Power laws from T = 32 (times in ms), with ``at`` = {(layer, T): time} put in."""
    times = {"self-attention": [attention * (n / 32) ** attention_slope for n in LENGTHS],
             "GRU": [gru * (n / 32) ** gru_slope for n in LENGTHS]}
    for (name, length), value in (at or {}).items():
        times[name][LENGTHS.index(length)] = value
    return CostCurves(LENGTHS, times)


def test_cost_findings():
    agreeing = curves(1.51, 1.0)
    assert agreeing.slope("self-attention") == pytest.approx(1.51)
    assert agreeing.at("GRU", 64) == pytest.approx(2.0)
    agrees(agreeing)
    only_fails(curves(1.49, 0.9), 0)  # self-attention under 1.5
    only_fails(curves(2.0, 1.31, attention=0.1), 1)  # the GRU over 1.3
    only_fails(curves(1.6, 1.11), 2)  # less than 0.5 steeper
    assert agreeing.ratio(64) == pytest.approx(0.2 * 2 ** 1.51 / 2.0)
    for length in (64, 128, 256):  # as slow as the GRU at one of them, or just slower
        gru = curves(1.51, 1.0).at("GRU", length)
        for share in (1.0, 1.001):
            only_fails(curves(1.51, 1.0, at={("self-attention", length): share * gru}), 3)
        agrees(curves(1.51, 1.0, at={("self-attention", length): 0.999 * gru}))
    only_fails(curves(1.51, 1.0, attention=0.01), 4)  # not slower at T = 2048
    level = 64 ** -0.51  # the start at which self-attention ties the GRU at T = 2048
    only_fails(curves(1.51, 1.0, attention=0.999 * level), 4)
    agrees(curves(1.51, 1.0, attention=1.001 * level))


class _Clock:
    """A fake process_time and two fake layers: each call of a layer costs what
    ``costs[(layer, T)]`` lists for that call, in turn; calls are logged."""

    def __init__(self, costs):
        self.now, self.costs, self.calls = 0.0, costs, []

    def process_time(self):
        return self.now

    def layer(self, name):
        def forward(h, *_):
            self.calls.append((name, h.shape[1]))
            self.now += self.costs[name, h.shape[1]].pop(0)
            return h
        return forward


def test_attention_vs_gru_cost_keeps_the_fastest_round_of_timed_calls_in_turns(monkeypatch):
    """Each (layer, length) is timed once per round, each timed call right after an untimed
    call of the same layer and length, the rounds going over every length in turn; the time
    kept is the fastest round's. Mutants (max for min, no untimed call, one round) fail."""
    lengths, rounds = (64, 128, 256, 2048), 3  # one round (a mutant) keeps 5 and 7 ms
    # per call: untimed, timed (round 1); untimed, timed (round 2); ...; the timed ones are
    # 5, 2, 9 ms for self-attention and 7, 7, 3 ms for the GRU, untimed ones 100 ms
    costs = {("self-attention", T): [0.1, 0.005, 0.1, 0.002, 0.1, 0.009] for T in lengths}
    costs.update({("GRU", T): [0.1, 0.007, 0.1, 0.007, 0.1, 0.003] for T in lengths})
    clock = _Clock(costs)
    monkeypatch.setattr(ch11.time, "process_time", clock.process_time)
    monkeypatch.setattr(ch11, "MultiHeadAttention", lambda d, heads: clock.layer("self-attention"))
    monkeypatch.setattr(ch11.nn, "GRU", lambda d, hidden, batch_first: clock.layer("GRU"))
    cost = ch11.attention_vs_gru_cost(lengths=lengths, d=8, rounds=rounds, seconds=0)
    assert cost.times == {"self-attention": [pytest.approx(2.0)] * 4, "GRU": [pytest.approx(3.0)] * 4}
    one_round = [(name, T) for T in lengths for name in ("self-attention", "GRU") for _ in (1, 2)]
    assert clock.calls == one_round * rounds


def test_attention_vs_gru_cost_times_a_length_again_until_each_layer_has_spent_seconds(monkeypatch):
    """After ``rounds`` rounds, a length is timed in the rounds after until each layer's
    timed calls there add up to ``seconds``, and no longer: at T = 64 self-attention's
    reach 10 ms in round 3 and the GRU's in round 4, whose 1 ms self-attention call is
    the fastest (a mutant without the extra rounds keeps 4 ms, one that stops when either
    layer is done keeps 3 ms, one that counts untimed calls stops after round 2); the
    other lengths spend 12 ms in the two rounds and are timed no more (a third call
    would find no cost listed)."""
    lengths = (64, 128, 256, 2048)
    costs = {("self-attention", 64): [0.1, 0.004, 0.1, 0.004, 0.1, 0.003, 0.1, 0.001],
             ("GRU", 64): [0.1, 0.003, 0.1, 0.003, 0.1, 0.003, 0.1, 0.003]}
    for T in lengths[1:]:
        costs.update({(name, T): [0.1, 0.006, 0.1, 0.006] for name in ("self-attention", "GRU")})
    clock = _Clock(costs)
    monkeypatch.setattr(ch11.time, "process_time", clock.process_time)
    monkeypatch.setattr(ch11, "MultiHeadAttention", lambda d, heads: clock.layer("self-attention"))
    monkeypatch.setattr(ch11.nn, "GRU", lambda d, hidden, batch_first: clock.layer("GRU"))
    cost = ch11.attention_vs_gru_cost(lengths=lengths, d=8, rounds=2, seconds=0.01)
    assert cost.times == {"self-attention": [pytest.approx(1.0)] + [pytest.approx(6.0)] * 3,
                          "GRU": [pytest.approx(3.0)] + [pytest.approx(6.0)] * 3}
    def rounds_of(*timed):
        return [(name, T) for T in timed for name in ("self-attention", "GRU") for _ in (1, 2)]
    assert clock.calls == rounds_of(*lengths) * 2 + rounds_of(64) * 2


def _timed_calls(lengths, rounds):
    return [(name, T) for T in lengths for name in ("self-attention", "GRU") for _ in (1, 2)] * rounds


def test_attention_vs_gru_cost_stops_timing_a_length_once_its_calls_reach_seconds_exactly(monkeypatch):
    """Timed calls of 0.25 s (exact in binary) reach ``seconds=0.5`` in the second round: a third
    round (a mutant that times on while the sum equals ``seconds``) would find no cost listed."""
    lengths = (64, 128, 256, 2048)
    clock = _Clock({(name, T): [0.0, 0.25, 0.0, 0.25] for T in lengths for name in ("self-attention", "GRU")})
    monkeypatch.setattr(ch11.time, "process_time", clock.process_time)
    monkeypatch.setattr(ch11, "MultiHeadAttention", lambda d, heads: clock.layer("self-attention"))
    monkeypatch.setattr(ch11.nn, "GRU", lambda d, hidden, batch_first: clock.layer("GRU"))
    ch11.attention_vs_gru_cost(lengths=lengths, d=8, rounds=1, seconds=0.5)
    assert clock.calls == _timed_calls(lengths, 2)


def test_attention_vs_gru_cost_stops_after_its_most_rounds_if_the_clock_never_moves(monkeypatch):
    lengths = (64, 128, 256, 2048)

    class Free(list):
        """Every call costs nothing; more calls than a bounded loop makes fail the test."""

        def pop(self, _):
            assert len(clock.calls) <= 1000, "attention_vs_gru_cost did not stop"
            return 0.0

    clock = _Clock({(name, T): Free() for T in lengths for name in ("self-attention", "GRU")})
    monkeypatch.setattr(ch11.time, "process_time", clock.process_time)
    monkeypatch.setattr(ch11, "MultiHeadAttention", lambda d, heads: clock.layer("self-attention"))
    monkeypatch.setattr(ch11.nn, "GRU", lambda d, hidden, batch_first: clock.layer("GRU"))
    monkeypatch.setattr(ch11, "_MOST_ROUNDS", 4)
    ch11.attention_vs_gru_cost(lengths=lengths, d=8, rounds=2, seconds=0.01)
    assert clock.calls == _timed_calls(lengths, 4)


def test_attention_vs_gru_cost_refuses_what_it_cannot_time():
    with pytest.raises(ValueError, match="rounds must be a whole number of at least 1; found 0"):
        ch11.attention_vs_gru_cost(lengths=(64, 128, 256, 2048), d=8, rounds=0)
    for seconds in (-0.01, math.inf, math.nan, "1", True):
        with pytest.raises(ValueError, match="seconds must be a finite number of at least 0; found"):
            ch11.attention_vs_gru_cost(lengths=(64, 128, 256, 2048), d=8, seconds=seconds)
    with pytest.raises(ValueError, match="lengths must be at least three increasing .*found \\(4, 8\\)"):
        ch11.attention_vs_gru_cost(lengths=(4, 8), d=8)
    with pytest.raises(ValueError, match="found \\(8, 4, 16\\)"):
        ch11.attention_vs_gru_cost(lengths=(8, 4, 16), d=8)
    with pytest.raises(ValueError, match="must include 64, 128, 256 and 2048.*\\[128, 2048\\] missing"):
        ch11.attention_vs_gru_cost(lengths=(32, 64, 256), d=8)


def test_reversal_findings():
    agreeing = ReversalRuns([], [log([2.0, 0.9, 0.39, 0.2])] * 3)
    agrees(agreeing)
    fails = [log([2.0, 0.9, 0.41, 0.2]), log([2.0, 0.3, 0.3, 0.2]), log([2.0, 2.1, 0.3, 0.2])]
    for failing in fails:  # over a fifth, or not falling, for one seed of three
        only_fails(ReversalRuns([], [agreeing.logs[0], failing, agreeing.logs[0]]), 0)


def test_held_out_accuracy_findings():
    agreeing = HeldOutAccuracy([0.9, 0.95, 0.99], [], [0, 1, 2, 3], True)
    agrees(agreeing)
    only_fails(replace(agreeing, accuracy=[0.95, 0.899, 0.99]), 0)
    only_fails(replace(agreeing, shown_exact=False), 1)


def weights(layer1, layer2):
    return torch.tensor([[layer1, layer2]], dtype=torch.float64)  # (1 seed, 2 layers, 2 heads)


def test_mirror_findings():
    agreeing = MirrorWeights(weights([0.3, 0.25], [0.4, 0.6]), weights([0.2, 0.2], [0.31, 0.205]))
    agrees(agreeing)
    only_fails(replace(agreeing, on_mirror=weights([0.3, 0.25], [0.39, 0.6])), 0)
    only_fails(replace(agreeing, on_neighbour=weights([0.2, 0.2], [0.4, 0.205])), 1)
    only_fails(replace(agreeing, on_mirror=weights([0.4, 0.25], [0.4, 0.6])), 2)
    only_fails(replace(agreeing, on_neighbour=weights([0.2, 0.2], [0.31, 0.195])), 3)


def test_gru_findings():
    agreeing = GruRuns([], [0.5, 0.65, 0.6], [0.96, 0.97, 0.99])
    agrees(agreeing)
    only_fails(GruRuns([], [0.5, 0.651, 0.6], [0.99, 0.99, 0.99]), 0)
    only_fails(replace(agreeing, transformer_accuracy=[0.94, 0.97, 0.99]), 1)


def test_epoch_time_findings():
    agrees(EpochTimes(transformer=1.0, gru=0.99))
    only_fails(EpochTimes(transformer=1.0, gru=1.0), 0)


def layout_runs(post=2.1, linear=1.0, paper=1.0, pre=1.0, pre_linear=0.5,
                baseline=(0.9, 0.99, 0.95)):
    """Runs of 20 steps at a constant loss: every seed's as given, the second seed's
    run of each arm at the argument of its name (``post``: post-norm without warm-up)."""
    def runs(*ends):
        return [[end] * 20 for end in ends]
    return LayoutRuns({"post-norm": runs(2.3, post, 2.3),
                       "post-norm, linear warm-up": runs(1.0, linear, 1.0),
                       "post-norm, paper's schedule": runs(1.0, paper, 1.0),
                       "pre-norm": runs(1.0, pre, 1.0),
                       "pre-norm, linear warm-up": runs(0.5, pre_linear, 0.5)}, list(baseline))


def test_layout_findings():
    agrees(layout_runs())
    assert layout_runs().end("post-norm") == pytest.approx([2.3, 2.1, 2.3])
    only_fails(layout_runs(post=2.0, linear=0.99, paper=0.99, pre=0.99), 0)  # not above 2.0
    only_fails(layout_runs(post=2.05, linear=1.06), 1)  # linear warm-up less than 1.0 below
    only_fails(layout_runs(post=2.05, paper=1.06), 1)  # the paper's schedule less than 1.0 below
    only_fails(layout_runs(post=2.05, pre=1.06), 2)  # pre-norm less than 1.0 below
    only_fails(layout_runs(baseline=(0.9, 2.11, 0.95)), 3)  # a baseline above one post-norm run
    agrees(layout_runs(pre=1.0, pre_linear=0.999))  # just below the run without warm-up
    only_fails(layout_runs(pre=1.0, pre_linear=1.0), 4)  # pre-norm's warm-up no lower on one seed


def rederived(post=2.01, paper=1.0, same_arithmetic=True, equal=True):
    """Seed 0's two runs trained again, 20 steps at a constant loss each, beside stored ones
    that are the same or not."""
    live = {"post-norm": [post] * 20, "post-norm, paper's schedule": [paper] * 20}
    stored = {name: list(losses) for name, losses in live.items()}
    if not equal:
        stored["post-norm, paper's schedule"][7] += 2.0 ** -20  # one step, one low bit
    return LayoutRederived(live, stored, same_arithmetic)


def test_layout_rederived_findings():
    agrees(rederived())
    agrees(rederived(same_arithmetic=False, equal=False))  # another machine: the conclusions only
    only_fails(rederived(post=2.0, paper=0.99), 0)  # not above 2.0
    only_fails(rederived(paper=1.02), 0)  # the paper's schedule less than 1.0 below
    only_fails(rederived(equal=False), 1)  # one low bit apart where the arithmetic is the same


def init_gradients(ratios_1, ratios_8):
    """Norms (last block only matters) whose post/pre ratios at depths 1 and 8 are given."""
    post = {1: [torch.tensor([r]) for r in ratios_1], 8: [torch.tensor([0.5, r]) for r in ratios_8]}
    pre = {1: [torch.tensor([1.0])] * 3, 8: [torch.tensor([0.5, 1.0])] * 3}
    return InitGradients([1, 8], {"post-norm": post, "pre-norm": pre})


def test_init_gradient_findings():
    agrees(init_gradients([1.1, 1.2, 1.3], [1.5, 1.6, 1.7]))
    only_fails(init_gradients([1.1, 1.0, 1.3], [1.5, 1.6, 1.7]), 0)  # a ratio of 1 at depth 1
    only_fails(init_gradients([1.1, 1.2, 1.3], [1.5, 1.6, 1.3]), 1)  # as large, not larger, at 8


def dropout_runs(train_with, held_with, epochs=20):
    """Without dropout: training loss 0.8, held-out 1.3 for each of three seeds; with
    0.1: the given losses for the second seed, the first's for the others."""
    return DropoutRuns({0.0: [0.8] * 3, 0.1: [0.91, train_with, 0.91]},
                       {0.0: [1.3] * 3, 0.1: [1.35, held_with, 1.35]}, epochs)


def test_dropout_findings():
    agrees(dropout_runs(0.91, 1.35))
    only_fails(dropout_runs(0.89, 1.33), 0)  # training loss raised by less than 0.1
    only_fails(dropout_runs(0.91, 1.37), 1)  # the gap narrowed by less than 0.05
    only_fails(dropout_runs(0.91, 1.3), 2)  # the held-out loss not higher
    only_fails(dropout_runs(0.91, 1.35, epochs=19), 2)  # not after 20 epochs


def mlm(at_1, at_10, at_20, at_30):
    """30 epochs' losses, straight lines between those of epochs 1, 10, 20 and 30."""
    def between(a, b, steps):
        return [a + (b - a) * i / steps for i in range(steps)]
    return between(at_1, at_10, 9) + between(at_10, at_20, 10) + between(at_20, at_30, 10) + [at_30]


def pretraining(losses=None, scratch=0.369, frozen=0.389, fine_tuned=0.47, best=0.671,
                vocab_size=12):
    """Three seeds; the second has the given numbers, the others agree."""
    agreeing = mlm(2.4, 2.3, 2.19, 1.89)
    second = agreeing if losses is None else losses
    return PretrainingRuns(
        [agreeing, second, agreeing],
        {"scratch": [0.369, scratch, 0.369], "frozen": [0.389, frozen, 0.389],
         "fine-tuned": [0.47, fine_tuned, 0.47]},
        [0.671, best, 0.671], vocab_size)


def test_pretraining_findings():
    agreeing = pretraining()
    assert len(agreeing.mlm_losses[0]) == 30 and agreeing.mlm_losses[0][9] == pytest.approx(2.3)
    agrees(agreeing)
    only_fails(pretraining(losses=mlm(2.4, 2.3, 2.19, 1.91)), 0)  # less than 0.5 lower
    only_fails(pretraining(losses=mlm(2.4, 2.3, 2.21, 1.89)), 1)  # falls less in epochs 10-20
    only_fails(pretraining(vocab_size=13), 2)
    only_fails(pretraining(fine_tuned=0.468, frozen=0.38), 3)  # under 10 points over scratch
    only_fails(pretraining(scratch=0.129), 4)  # over 12 points below chance
    only_fails(pretraining(scratch=0.371, fine_tuned=0.48, frozen=0.39, best=0.69), 4)  # above
    only_fails(pretraining(frozen=0.391), 5)  # under 8 points below fine-tuned
    only_fails(pretraining(best=0.669), 6)  # under 20 points below the best possible


def chunk_errors(by_m2s=0.9e-11, by_squares=(1.1e-9, 1.1e-9, 1.1e-8), by_squares32=(2.0, 0.5)):
    return ChunkErrors(torch.tensor([by_m2s], dtype=torch.float64),
                       torch.tensor(by_squares, dtype=torch.float64),
                       torch.tensor(by_squares32), torch.tensor([1.0, 1.0]))


def test_chunk_error_findings():
    agrees(chunk_errors())
    agrees(chunk_errors(by_squares=(1.1e-9, 1.1e-9, 0.9e-6)))
    only_fails(chunk_errors(by_m2s=1.1e-11), 0)
    only_fails(chunk_errors(by_squares=(0.9e-9, 0.9e-9, 1.1e-8)), 1)
    only_fails(chunk_errors(by_squares=(1.1e-9, 1.1e-9, 0.9e-8)), 2)  # the worst row too close
    only_fails(chunk_errors(by_squares=(1.1e-9, 1.1e-9, 1.1e-6)), 2)  # or too far
    only_fails(chunk_errors(by_squares32=(1.0, 0.5)), 3)


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
TASK = ReversalTask(min_len=4, max_len=8)


@pytest.fixture
def tiny():
    """16 training strings, 40 held-out ones, and one Transformer trained for two epochs."""
    train, test = TASK.split(n_train=16, n_test=40, seed=0)
    return train, test, ch11.reversal_sweep(TASK, train, TINY, seeds=(0,), epochs=2)


def test_cache_speedup_runs():
    assert set(ch11.cache_speedup(TINY, pairs={4: 1}).speedup) == {4}


def test_attention_vs_gru_cost_runs():
    assert len(ch11.attention_vs_gru_cost(lengths=(4, 64, 128, 256, 2048), d=8, rounds=1, seconds=0.002).times["GRU"]) == 5


def test_reversal_sweep_and_held_out_accuracy_run(tiny):
    train, test, reversal = tiny
    assert len(reversal.logs[0].losses) == 2
    decoded = ch11.held_out_accuracy(reversal.models, TASK, test)
    assert len(decoded.shown) == 4 and 0 <= decoded.accuracy[0] <= 1
    assert len(decoded.outputs) == len(test)


def test_mirror_weights_run(tiny):
    train, test, reversal = tiny
    assert ch11.mirror_weights(reversal.models, test).on_mirror.shape == (1, 1, 2)


def test_gru_sweep_and_seconds_per_epoch_run(tiny):
    train, test, reversal = tiny
    grus = ch11.gru_sweep(TASK, train, test, Seq2SeqConfig(embed_dim=8, hidden_dim=8, bidirectional=False),
                          [0.9], seeds=(0,), epochs=1)
    assert grus.transformer_accuracy == [0.9] and len(grus.logs[0].losses) == 1
    assert ch11.seconds_per_epoch(reversal, grus).gru > 0


def test_layout_run_runs_and_refuses_an_unknown_run(tiny):
    train, test, reversal = tiny
    losses = ch11.layout_run(TASK, train, TINY, "pre-norm", seed=0, steps=3)
    assert len(losses) == 3 and losses == ch11.layout_run(TASK, train, TINY, "pre-norm", 0, 3)
    with pytest.raises(ValueError, match="name must be one of \\['post-norm', .*found 'post norm'"):
        ch11.layout_run(TASK, train, TINY, "post norm", seed=0, steps=3)


@pytest.fixture(scope="module")
def chapter_strings():
    """The chapter's training strings, as the layout command rebuilds them."""
    return ch11.LAYOUT_TASK.split(**ch11.LAYOUT_SPLIT)[0]


def test_the_layout_command_stores_what_layout_run_trains(tmp_path, capsys, chapter_strings):
    """A shortened run of ``python -m experiments.ch11_transformer layout-runs`` (the chapter's
    losses come from the full run): every run, two seeds, three steps, each equal to a direct
    call, and a recipe the loader accepts for those seeds and steps only."""
    path = tmp_path / "runs.pt"
    ch11._main(["layout-runs", "--steps", "3", "--seeds", "0", "1", "--out", str(path)])
    assert "saved to" in capsys.readouterr().out
    saved = torch.load(path, weights_only=True)
    arms = list(ch11.warmup_arms(32))
    assert list(saved["losses"]) == arms and saved["arithmetic"] == run_arithmetic()
    for name in arms:
        for i, seed in enumerate((0, 1)):
            direct = ch11.layout_run(ch11.LAYOUT_TASK, chapter_strings, ch11.LAYOUT_CONFIG, name, seed, 3)
            assert saved["losses"][name][i].tolist() == direct, f"{name}, seed {seed}"
    assert saved["recipe"] == ch11._layout_recipe(ch11.LAYOUT_TASK, chapter_strings, ch11.LAYOUT_CONFIG,
                                                  (0, 1), 3)


def test_the_stored_layout_runs_are_the_chapters_recipe(chapter_strings):
    """The file the chapter loads holds every run of every seed for the full 188 steps, made on
    the chapter's task, strings and model, which the chapter's own cells build."""
    path = ch11.LAYOUT_RUNS_PATH
    assert path.stat().st_size < 50_000, f"{path.name} should stay small"
    saved = torch.load(path, weights_only=True)
    recipe = ch11._layout_recipe(ch11.LAYOUT_TASK, chapter_strings, ch11.LAYOUT_CONFIG, ch11.SEEDS,
                                 ch11.WARMUP_STEPS)
    assert saved["recipe"] == recipe and recipe["steps"] == 188 and recipe["seeds"] == [0, 1, 2]
    assert [losses.shape for losses in saved["losses"].values()] == [(3, 188)] * 5
    assert list(saved["losses"]) == list(ch11.warmup_arms(32))
    # the chapter's cells that build the task, the strings and the model build these
    cells = {cell.get("id"): cell.source
             for cell in nbformat.read(ROOT / "chapters" / "11_transformer.ipynb", as_version=4).cells}
    task_lines = "\n".join(cells["task-code"].splitlines()[:2])  # task = ..., train, test = ...
    config_line = cells["2c4a15d7"].splitlines()[0]  # config = TransformerConfig(...)
    assert task_lines.startswith("task = ") and config_line.startswith("config = ")
    chapter = {"ReversalTask": ReversalTask, "TransformerConfig": TransformerConfig}
    exec(task_lines + "\n" + config_line, chapter)  # noqa: S102, the chapter's own lines
    assert chapter["task"] == ch11.LAYOUT_TASK and chapter["config"] == ch11.LAYOUT_CONFIG
    assert ch11._layout_recipe(chapter["task"], chapter["train"], chapter["config"], ch11.SEEDS,
                               ch11.WARMUP_STEPS) == recipe


def test_the_loader_refuses_runs_of_another_recipe(chapter_strings):
    reversal = ReversalRuns([], [log([2.0, 0.9])] * 3)
    loaded = ch11.load_layout_runs(ch11.LAYOUT_TASK, chapter_strings, ch11.LAYOUT_CONFIG, reversal)
    assert loaded.baseline_epoch2 == [0.9] * 3 and loaded.failing() == []
    assert loaded.end("post-norm")[0] == pytest.approx(2.2590, abs=5e-5)  # as the chapter printed it
    with pytest.raises(ValueError, match="differ from this recipe in \\['config', 'arms'\\]"):
        ch11.load_layout_runs(ch11.LAYOUT_TASK, chapter_strings, replace(ch11.LAYOUT_CONFIG, d_model=16),
                              reversal)
    with pytest.raises(ValueError, match="differ from this recipe in \\['train_sha256'\\]"):
        ch11.load_layout_runs(ch11.LAYOUT_TASK, ch11.LAYOUT_TASK.split(3000, 1000, seed=1)[0],
                              ch11.LAYOUT_CONFIG, reversal)
    with pytest.raises(ValueError, match="differ from this recipe in \\['seeds'\\]"):
        ch11.load_layout_runs(ch11.LAYOUT_TASK, chapter_strings, ch11.LAYOUT_CONFIG, reversal,
                              seeds=(0, 1, 3))


def test_one_stored_layout_run_retrained_in_full_is_bit_equal(chapter_strings):
    """The linear warm-up from seed 2, all 188 steps (the chapter retrains two runs of seed 0):
    equal to the stored losses at every step where the arithmetic is the command's."""
    saved = torch.load(ch11.LAYOUT_RUNS_PATH, weights_only=True)
    name = "post-norm, linear warm-up"
    losses = ch11.layout_run(ch11.LAYOUT_TASK, chapter_strings, ch11.LAYOUT_CONFIG, name, seed=2)
    if run_arithmetic() == saved["arithmetic"]:
        assert torch.equal(torch.tensor(losses, dtype=torch.float32), saved["losses"][name][2])
    else:  # another processor or settings: the low bits part, the outcome does not
        assert sum(losses[-20:]) / 20 < 1.0


def test_compare_layout_runs_sets_live_runs_beside_the_stored_ones():
    names = ("post-norm", "post-norm, paper's schedule")
    stored = LayoutRuns({name: [[2.3] * 3, [1.0 + i] * 3] for i, name in enumerate(names)}, [0.9] * 2,
                        run_arithmetic())
    compared = ch11.compare_layout_runs({name: [2.3] * 3 for name in names}, stored, seed=0)
    assert compared.same_arithmetic and compared.equal()
    compared = ch11.compare_layout_runs({name: [2.3] * 3 for name in names}, stored, seed=1)
    assert compared.stored == {"post-norm": [1.0] * 3, "post-norm, paper's schedule": [2.0] * 3}
    assert not compared.equal()
    assert not ch11.compare_layout_runs(compared.live, replace(stored, arithmetic={}), 0).same_arithmetic
    with pytest.raises(ValueError, match="seed must be one of the stored seeds, 0 to 1; found 2"):
        ch11.compare_layout_runs(compared.live, stored, seed=2)
    with pytest.raises(ValueError, match="live must hold the runs .* found \\['post-norm'\\]"):
        ch11.compare_layout_runs({"post-norm": [2.3] * 3}, stored, seed=0)
    with pytest.raises(ValueError, match="and only runs of .* found .*'pre-norm'"):
        ch11.compare_layout_runs({**compared.live, "pre-norm": [1.0] * 3}, stored, seed=0)


def test_warmup_arms_follow_the_libraries_schedules():
    """The linear arm is chapter 2's warm-up with no decay, the paper's arm peaks just under 0.03."""
    arms = ch11.warmup_arms(32)
    _, lr, linear = arms["post-norm, linear warm-up"]
    assert lr == ch11.WARMUP_RATE and linear(0) == pytest.approx(0.02) and linear(60) == linear(187) == 1.0
    assert linear(59) < 1.0  # the warm-up lasts 60 steps, not fewer
    pre_norm, lr, pre_linear = arms["pre-norm, linear warm-up"]
    assert pre_norm and lr == ch11.WARMUP_RATE
    assert [pre_linear(t) for t in range(188)] == [linear(t) for t in range(188)]
    _, lr, paper = arms["post-norm, paper's schedule"]
    rates = [lr * paper(t) for t in range(188)]
    assert max(rates) == rates[34] and 0.029 < rates[34] <= 0.03
    assert arms["post-norm"][2] is None and arms["pre-norm"][:2] == (True, ch11.WARMUP_RATE)


def test_train_scheduled_sets_the_rate_of_every_step(monkeypatch):
    """The optimiser's rate at step t is lr * schedule(t), read inside Adam.step."""
    seen = []
    original = torch.optim.Adam.step
    def step(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)
    monkeypatch.setattr(torch.optim.Adam, "step", step)
    train, _ = TASK.split(n_train=40, n_test=8, seed=0)
    torch.manual_seed(0)
    model = ch11.Seq2SeqTransformer(TASK.vocab_size, TASK.vocab_size, TINY)
    losses = ch11._train_scheduled(model, train, 0.5, lambda t: 1 / (t + 1), seed=0, steps=5, batch_size=16)
    assert len(losses) == 5 and seen == pytest.approx([0.5 / (t + 1) for t in range(5)])


def test_init_gradients_run(tiny):
    train, test, reversal = tiny
    result = ch11.init_gradients(TASK, train, TINY, depths=(1, 2), seeds=(0,), pairs=4)
    assert [len(result.norms["pre-norm"][depth][0]) for depth in (1, 2)] == [1, 2]
    assert result.norms["post-norm"][2][0].dtype == torch.float64
    batch = train[:4]
    for name, norm_first in (("post-norm", False), ("pre-norm", True)):  # labels match layouts
        for depth in (1, 2):
            torch.manual_seed(0)
            model = ch11.Seq2SeqTransformer(
                TASK.vocab_size, TASK.vocab_size, replace(TINY, num_layers=depth, norm_first=norm_first)
            ).double()
            logits = model(batch.src, batch.tgt_in, batch.src_lens)
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(),
                                                     ignore_index=0)
            expected = ch11.ffn_gradient_norms(loss, model.decoder.blocks)  # the decoder's blocks
            assert torch.equal(result.norms[name][depth][0], expected), (name, depth)
            assert not torch.equal(expected, ch11.ffn_gradient_norms(loss, model.encoder.blocks))


def test_dropout_sweep_runs(tiny):
    train, test, reversal = tiny
    runs = ch11.dropout_sweep(TASK, train[:8], test[:8], TINY, seeds=(0,), epochs=1)
    assert len(runs.held_loss[0.1]) == 1 and runs.epochs == 1


def test_the_solution_of_ex_tr_layer_norm_chunks_holds_what_its_discussion_says():
    """The findings ex-tr-layer-norm-chunks-solution-discussion states, on the checker's M2
    combination (a ticked line in the chapter would give the exercise's answer away)."""
    from courseware.checks.transformer import _combined  # noqa: the checker's combination
    assert ch11._chunk_statistics_errors(_combined).failing() == []
