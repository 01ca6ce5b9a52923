"""Tests for experiments/ch12_memory.py: each result's findings hold on made-up numbers that
agree, and each fails alone (``result.failing()`` names it and no other) just past its threshold;
each run refuses bad arguments by name; each experiment at a tiny size; the seed sweep
of memory networks, the capacity runs against a loop over cues (moved from
tests/lib/part5_memory/test_memn2n.py and tests/lib/part5_memory/test_hopfield.py); the NTM's training command and its committed
weights (moved from tests/lib/part5_memory/test_ntm.py)."""
import re

import pytest
import torch

from experiments import ch12_memory as ch12
from lib.part5_memory import (
    CAPACITY, VOCABULARY, HopfieldNetwork, MemN2N, MemN2NConfig, NTMConfig, Stories, accuracy,
    copy_batch, flip_bits, generate, overlap,
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small models train faster on one thread on a busy machine, as in tests/lib/part5_memory/test_ntm.py."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


EPS = 1e-6  # "just past" a threshold


def fails_alone(result, index):
    """``result`` contradicts its class's finding ``index`` and no other."""
    return result.failing() == [type(result).FINDINGS[index].says]


def holds_all(result):
    result.check()  # prints the findings ticked and raises when one does not hold
    return True


def some_stories(task, n, seed):
    return Stories.from_stories(generate(task, n, seed=seed))


# ---------------------------------------------------------------------------
# Memory networks.
# ---------------------------------------------------------------------------


def test_train_over_seeds_repeats_a_seed_exactly_and_differs_between_seeds():
    train, test = some_stories("single", 200, 1), some_stories("single", 100, 2)
    config = MemN2NConfig(len(VOCABULARY), embed_dim=8, hops=1)
    models, accuracies = ch12._train_over_seeds(config, train, test, [0, 1, 0], epochs=1, batch_size=50)
    assert len(models) == len(accuracies) == 3 and all(0.0 <= a <= 1.0 for a in accuracies)
    first, other, again = (torch.cat([p.flatten() for p in m.parameters()]) for m in models)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert accuracies[0] == accuracies[2] == accuracy(models[0], test)


def hops_accuracy(single=0.99, two_one=(0.55, 0.56, 0.54), two_three=0.99, without=0.55):
    accuracies = {("single", 1): [single, 0.995], ("two", 1): list(two_one),
                  ("two", 3): [two_three, 0.995]}
    without = list(without) if isinstance(without, tuple) else [without, 0.55]
    return ch12.HopsAccuracy(accuracies, without, trained={})


@pytest.mark.parametrize("at, past, index", [
    (dict(single=0.98), dict(single=0.98 - EPS), 0),
    (dict(two_one=(0.65, 0.56, 0.54)), dict(two_one=(0.65 + EPS, 0.56, 0.54)), 1),
    (dict(two_three=0.97), dict(two_three=0.97 - EPS), 2),
    # linear start made no difference: without it three hops leave the one-hop level (median 0.55);
    # the at-threshold cases sit exactly on 5 points, where the float difference is not 0.05
    (dict(without=0.60), dict(without=0.6 + EPS), 3),
    (dict(without=0.50), dict(without=0.5 - EPS), 3),
    (dict(two_one=(0.65, 0.64, 0.63), without=(0.59, 0.6)),  # abs(0.59 - 0.64) > 0.05 in floats
     dict(two_one=(0.65, 0.64, 0.63), without=(0.59 - EPS, 0.6)), 3),
    # within 5 points of one hop (median 0.64) but less than 30 points below three hops (0.97):
    # exactly 30 points, 0.97 - 0.67 < 0.3 in floats
    (dict(two_one=(0.65, 0.64, 0.63), two_three=0.97, without=(0.66, 0.67)),
     dict(two_one=(0.65, 0.64, 0.63), two_three=0.97, without=(0.66, 0.67 + EPS)), 3),
])
def test_hops_accuracy_findings(at, past, index):
    assert holds_all(hops_accuracy()) and hops_accuracy(**at).failing() == []
    assert fails_alone(hops_accuracy(**past), index)


def test_hops_accuracy_check_names_the_cells_of_a_failing_finding():
    with pytest.raises(AssertionError, match="cells training-discussion, summary"):
        hops_accuracy(two_one=(0.7, 0.56, 0.54)).check()


@pytest.fixture(scope="module")
def tiny_runs():
    """The chapter's training at a tiny size: 60 stories per task and one seed."""
    data = {task: (some_stories(task, 60, 1), some_stories(task, 30, 2)) for task in ("single", "two")}
    return data, ch12.memn2n_training(data, seeds=(0,))


def test_memn2n_training_runs_at_a_tiny_size(tiny_runs):
    _, training = tiny_runs
    assert set(training.accuracies) == {("single", 1), ("two", 1), ("two", 3)}
    assert all(len(runs) == 1 and 0 <= runs[0] <= 1 for runs in training.accuracies.values())
    assert len(training.without_linear_start) == 1
    assert isinstance(training.trained["two", 3][0], MemN2N)


def test_example_reads_and_hop_weights_run_at_a_tiny_size(tiny_runs):
    data, training = tiny_runs
    models = training.trained["two", 3]
    story, batch = generate("two", 1, seed=2)[0], data["two"][1][0:1]
    reads = ch12.example_reads(models, story, batch)
    assert reads.weights.shape == (1, 3, 10) and reads.answers[0] in VOCABULARY
    assert ch12.hop_weights(models, data["two"][1]).by_seed.shape == (1, 3, 2)


def test_example_reads_and_hop_weights_refuse_no_models(tiny_runs):
    data, _ = tiny_runs
    story, batch = generate("two", 1, seed=2)[0], data["two"][1][0:1]
    match = "models must be a non-empty list of trained models, one per seed; found none"
    with pytest.raises(ValueError, match=match):
        ch12.example_reads([], story, batch)
    with pytest.raises(ValueError, match=match):
        ch12.hop_weights([], data["two"][1])


@pytest.mark.parametrize("weights, answers, match", [
    (torch.zeros(0, 3, 10), [], "found weights of shape \\(0, 3, 10\\) and 0 answers"),
    (torch.zeros(2, 3, 10), ["garden"], "found weights of shape \\(2, 3, 10\\) and 1 answers"),
    (torch.zeros(3, 10), ["garden"], "found weights of shape \\(3, 10\\) and 1 answers"),
])
def test_example_reads_refuses_no_seed_or_answers_not_one_per_seed(weights, answers, match):
    with pytest.raises(ValueError, match="ExampleReads: weights must be \\(seeds, K, N\\) .*" + match):
        ch12.ExampleReads(weights, answers, generate("two", 1, seed=3)[0])


@pytest.mark.parametrize("shape", [(0, 3, 2), (3, 2), (3, 3, 1)])
def test_hop_weights_refuses_no_seed(shape):
    says = f"HopWeights: by_seed must be (seeds, K, 2) with at least one seed; found shape {shape}"
    with pytest.raises(ValueError, match=re.escape(says) + "$"):
        ch12.HopWeights(torch.zeros(shape))


def example_reads(tops):
    """Reads whose hops put all their weight on the sentences ``tops`` (one list per seed)."""
    story = generate("two", 1, seed=3)[0]
    weights = torch.zeros(len(tops), 3, 10)
    for seed, hops in enumerate(tops):
        for hop, sentence in enumerate(hops):
            weights[seed, hop, sentence] = 1.0
    return ch12.ExampleReads(weights, [story.answer] * len(tops), story)


def test_example_reads_findings():
    pickup, last_move = generate("two", 1, seed=3)[0].supporting
    assert holds_all(example_reads([[pickup, pickup, last_move], [pickup, last_move, last_move]]))
    # seed 0 reads the last move in hop 2: the example's story, not the rule of every seed
    assert fails_alone(example_reads([[pickup, last_move, last_move]]), 0)
    assert fails_alone(example_reads([[pickup, pickup, last_move], [last_move, pickup, pickup]]), 1)
    wrong = example_reads([[pickup, pickup, last_move]] * 2)
    wrong.answers[1] = "nowhere"  # seed 1 reads right and answers wrong
    assert fails_alone(wrong, 1)
    wrong.answers[0] = "nowhere"
    assert wrong.failing() == [finding.says for finding in ch12.ExampleReads.FINDINGS]


@pytest.mark.parametrize("hop, fact, at, past", [
    (0, 0, 0.6, 0.6 - EPS),  # hop 1 on the pick-up
    (1, 0, 0.9, 0.9 - EPS),  # hop 2 on the pick-up
    (1, 1, 0.05, 0.05 + EPS),  # hop 2 on the last move
    (2, 1, 0.8, 0.8 - EPS),  # hop 3 on the last move
    (2, 0, 0.1, 0.1 + EPS),  # hop 3 on the pick-up
])
def test_hop_weights_findings(hop, fact, at, past):
    agrees = torch.tensor([[[0.78, 0.02], [0.98, 0.0], [0.0, 0.93]]] * 3, dtype=torch.float64)
    assert holds_all(ch12.HopWeights(agrees))  # (seeds, K, 2)
    for value, failing in ((at, []), (past, [ch12.HopWeights.FINDINGS[hop].says])):
        changed = agrees.clone()
        changed[1, hop, fact] = value  # one seed of three
        assert ch12.HopWeights(changed).failing() == failing


# ---------------------------------------------------------------------------
# The Neural Turing Machine.
# ---------------------------------------------------------------------------


def test_the_script_saves_a_loadable_model(tmp_path, capsys):
    path = tmp_path / "copy.pt"
    ch12._main(["train-ntm", "--steps", "2", "--max-length", "2", "--batch", "2", "--out", str(path)])
    assert "saved to" in capsys.readouterr().out
    loaded, info = ch12.load_copy_model(path)
    assert info["steps"] == [2] and info["max_length"] == 2 and info["config"] == vars(NTMConfig())
    assert not loaded.training


@pytest.fixture(scope="module")
def chapters_model():
    return ch12.load_copy_model()


def test_the_chapters_model_copies_sequences_it_was_trained_on(chapters_model):
    assert ch12.WEIGHTS_PATH.stat().st_size < 1_000_000
    model, info = chapters_model
    inputs, targets, answer = copy_batch(50, 8, model.config.output_size, torch.Generator().manual_seed(1))
    with torch.no_grad():
        predicted = (model(inputs)[:, answer] > 0).float()
    bit_errors = (predicted != targets[:, answer]).float().mean()
    assert bit_errors < 0.01 and info["max_length"] >= 8


def test_copy_lengths_and_copy_limit_show_the_findings_on_the_chapters_model(chapters_model):
    model, _ = chapters_model
    copying = ch12.copy_lengths(model)
    assert list(copying.wrong_bits) == list(copying.copied) == [4, 8, 12, 16, 20]
    assert holds_all(copying)
    limit = ch12.copy_limit(model)
    assert limit.slots == 24 and limit.write_back[22].shape == (100,) and holds_all(limit)
    # one generator across lengths: an extra length after the others changes none of them
    longer = ch12.copy_lengths(model, lengths=(4, 8, 12, 16, 20, 6))
    assert {n: longer.wrong_bits[n] for n in copying.wrong_bits} == copying.wrong_bits


@pytest.mark.parametrize("run, lengths, error, match", [
    ("copy_lengths", (4,), ValueError,
     "lengths must hold the points the findings read, 4, 8, 12, 16, 20; found \\(4,\\), without 8, 12, 16, 20"),
    ("copy_limit", (6, 22), ValueError,
     "lengths must hold the points the findings read, 22, 23; found \\(6, 22\\), without 23"),
    ("copy_limit", (0, 22, 23), TypeError, "(?s)parameter 'lengths'.*Actual value: \\(0, 22, 23\\)"),
    ("copy_lengths", [4, 8.0], TypeError, "(?s)parameter 'lengths'.*Actual value: \\[4, 8.0\\]"),
])
def test_the_copy_runs_refuse_lengths_their_findings_cannot_read(chapters_model, run, lengths, error, match):
    with pytest.raises(error, match=match):
        getattr(ch12, run)(chapters_model[0], lengths)


@pytest.mark.parametrize("field, length, at, past, index", [
    ("wrong_bits", 4, 0.001, 0.001 + EPS, 0),
    ("wrong_bits", 12, 0.001, 0.001 + EPS, 0),
    ("wrong_bits", 16, 0.001, 0.001 + EPS, 1),
    ("wrong_bits", 20, 0.001, 0.001 + EPS, 1),
    ("copied", 16, 0.95, 0.95 - EPS, 1),
    ("copied", 20, 0.95, 0.95 - EPS, 1),
])
def test_copy_accuracy_findings(field, length, at, past, index):
    fields = dict(wrong_bits={4: 0.0, 8: 0.0, 12: 0.0, 16: 0.0001, 20: 0.0},
                  copied={4: 1.0, 8: 1.0, 12: 1.0, 16: 0.99, 20: 1.0})
    assert holds_all(ch12.CopyAccuracy(**fields))
    at_result = ch12.CopyAccuracy(**{**fields, field: {**fields[field], length: at}})
    assert at_result.failing() == []
    assert fails_alone(ch12.CopyAccuracy(**{**fields, field: {**fields[field], length: past}}), index)


def copy_limit(**changes):
    """A CopyLimit like the chapter's run, with ``changes``."""
    back = torch.full((100,), 24)
    fields = dict(slots=24, wrong_bits={22: 0.0, 23: 0.29}, exact={22: 1.0, 23: 0.06},
                  write_first={22: 0.0, 23: 0.93}, first_exact={22: 0.0, 23: 0.0},
                  same_slot={22: 0.0, 23: 0.86}, write_back={22: back, 23: back},
                  erasing={22: 0.5, 23: 0.5})
    return ch12.CopyLimit(**{**fields, **changes})


def back_on_slot_0(at_n, later=25, earlier=None):
    """The steps at which the write heads of 100 sequences are back on slot 0: ``at_n`` of
    them at N = 24, one at ``earlier`` if given, the rest at ``later``."""
    back = torch.full((100,), later)
    back[:at_n] = 24
    if earlier is not None:
        back[-1] = earlier
    return back


def test_copy_limit_findings_hold_on_the_chapters_numbers():
    assert holds_all(copy_limit())
    # N is what the steps are counted against: a memory of 25 slots, back at step 25
    back = torch.full((100,), 25)
    assert fails_alone(copy_limit(slots=25, write_back={22: back, 23: back}), 0)
    assert fails_alone(copy_limit(slots=23, write_back={22: back - 2, 23: back - 2}), 0)


@pytest.mark.parametrize("at, past, index", [
    # back at step N in at least 80% of the sequences ...
    (dict(write_back={22: back_on_slot_0(80), 23: back_on_slot_0(100)}),
     dict(write_back={22: back_on_slot_0(79), 23: back_on_slot_0(100)}), 1),
    # ... and never earlier: one write head back a step early
    (dict(write_back={22: back_on_slot_0(99), 23: back_on_slot_0(100)}),
     dict(write_back={22: back_on_slot_0(99, earlier=23), 23: back_on_slot_0(100)}), 1),
    (dict(erasing={22: 0.5, 23: 0.3}), dict(erasing={22: 0.5, 23: 0.3 - EPS}), 2),
    (dict(wrong_bits={22: 0.001, 23: 0.29}), dict(wrong_bits={22: 0.001 + EPS, 23: 0.29}), 3),
    (dict(exact={22: 0.95, 23: 0.06}), dict(exact={22: 0.95 - EPS, 23: 0.06}), 3),
    (dict(write_first={22: 0.05, 23: 0.93}), dict(write_first={22: 0.05 + EPS, 23: 0.93}), 3),
    (dict(wrong_bits={22: 0.0, 23: 0.1}), dict(wrong_bits={22: 0.0, 23: 0.1 - EPS}), 4),
    (dict(exact={22: 1.0, 23: 0.2}), dict(exact={22: 1.0, 23: 0.2 + EPS}), 4),
    (dict(write_first={22: 0.0, 23: 0.8}), dict(write_first={22: 0.0, 23: 0.8 - EPS}), 4),
    (dict(first_exact={22: 0.0, 23: 0.0}), dict(first_exact={22: 0.0, 23: 0.01}), 4),
    (dict(same_slot={22: 0.0, 23: 0.7}), dict(same_slot={22: 0.0, 23: 0.7 - EPS}), 4),
])
def test_copy_limit_findings(at, past, index):
    assert copy_limit(**at).failing() == []
    assert fails_alone(copy_limit(**past), index)


# ---------------------------------------------------------------------------
# Hopfield networks.
# ---------------------------------------------------------------------------


def test_the_explorers_runs_show_what_its_text_says():
    assert holds_all(ch12.explorer_recall())


def test_explorer_recall_findings():
    ends = {0.3: ["A", "T", "X", "spurious"], 0.4: list("ATXL"), 0.5: ["L", "spurious", "L", "A"]}
    outcomes = {(letter, noise): end for noise, row in ends.items() for letter, end in zip("ATXL", row)}
    back = {(letter, noise): True for letter in "ATXL" for noise in (0.0, 0.1, 0.2)}
    assert holds_all(ch12.ExplorerRecall(outcomes, back, flips_lower_energy=True))
    assert fails_alone(ch12.ExplorerRecall(outcomes, {**back, ("T", 0.2): False}, True), 0)
    assert fails_alone(ch12.ExplorerRecall(outcomes, {**back, ("A", 0.0): False}, True), 0)
    assert fails_alone(ch12.ExplorerRecall({**outcomes, ("L", 0.3): "L"}, back, True), 1)
    assert fails_alone(ch12.ExplorerRecall({**outcomes, ("A", 0.3): "-A"}, back, True), 1)
    assert fails_alone(ch12.ExplorerRecall({**outcomes, ("X", 0.4): "-X"}, back, True), 2)
    assert fails_alone(ch12.ExplorerRecall({**outcomes, ("T", 0.5): "T"}, back, True), 3)
    assert fails_alone(ch12.ExplorerRecall(outcomes, back, False), 4)


def test_recall_collapses_above_the_capacity():
    low = ch12._recall(200, 10, 0.0, trials=2, seed=0)  # load 0.05
    high = ch12._recall(200, 50, 0.0, trials=2, seed=0)  # load 0.25
    assert low == {"exact": 1.0, "overlap": 1.0}
    assert high["overlap"] < 0.7 and high["exact"] < 0.1 and 50 / 200 > CAPACITY
    assert ch12._recall(200, 50, 0.0, trials=2, seed=0) == high  # deterministic


def test_recall_measures_what_a_loop_over_cues_measures():
    result = ch12._recall(60, 6, 0.3, trials=2, seed=3)
    generator = torch.Generator().manual_seed(3)  # the same draws, in the same order
    exact, overlaps = [], []
    for _ in range(2):
        patterns = torch.randint(0, 2, (6, 60), generator=generator).double() * 2 - 1
        cues = flip_bits(patterns, 0.3, generator)
        final = HopfieldNetwork(patterns).recall(cues, max_steps=30, generator=generator).states
        for state, pattern in zip(final, patterns):
            exact.append(float(torch.equal(state, pattern)))
            overlaps.append(float(overlap(state, pattern)))
    assert result["exact"] == pytest.approx(sum(exact) / 12)
    assert result["overlap"] == pytest.approx(sum(overlaps) / 12)
    assert 0.0 < result["exact"] < 1.0  # the case is not trivial


def test_capacity_sweep_on_the_grid_its_findings_read_is_recall_point_by_point():
    capacity = ch12.capacity_sweep(seeds=(0, 1), patterns=ch12.Capacity.PATTERNS)
    points = [("noise", x) for x in (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)]
    points += [("load", x) for x in (0.02, 0.05, 0.08, 0.1, 0.12, 0.14, 0.16, 0.25)]
    assert list(capacity.exact) == list(capacity.overlaps) == points
    for seed in (0, 1):
        assert ch12._recall(100, 5, 0.3, trials=4, seed=seed) == {
            "exact": capacity.exact["noise", 0.3][seed],
            "overlap": capacity.overlaps["noise", 0.3][seed]}
        assert ch12._recall(200, 32, 0.0, seed=seed)["overlap"] == capacity.overlaps["load", 0.16][seed]
    assert capacity.failing() == []  # two of the chapter's seeds: every finding holds


@pytest.mark.parametrize("run, kwargs, error, match", [
    ("capacity_sweep", dict(seeds=()), ValueError, "seeds must be a non-empty sequence of ints; found none"),
    ("capacity_sweep", dict(seeds=(0, -1)), TypeError, "(?s)parameter 'seeds'.*Actual value: \\(0, -1\\)"),
    ("capacity_sweep", dict(seeds=[0, 0.5]), TypeError, "(?s)parameter 'seeds'.*Actual value: \\[0, 0.5\\]"),
    ("capacity_sweep", dict(noises=(0.0,)), ValueError,
     "noises must hold the points the findings read, 0.0, 0.1, 0.2, 0.3, 0.4, 0.5; found \\(0.0,\\), "
     "without 0.1, 0.2, 0.3, 0.4, 0.5"),
    ("capacity_sweep", dict(patterns=(4, 10, 16, 20, 24, 28, 36, 40, 50)), ValueError,
     "patterns must hold the points the findings read, 4, 10, 16, 20, 24, 28, 32, 50; found .*, "
     "without 32$"),
    # the loads 0.02, 0.05, 0.08 (recall perfect) and 0.12 (overlap near 1) are read too
    ("capacity_sweep", dict(patterns=(20, 28, 32, 50)), ValueError,
     "patterns must hold the points the findings read, 4, 10, 16, 20, 24, 28, 32, 50; "
     "found \\(20, 28, 32, 50\\), without 4, 10, 16, 24$"),
    ("capacity_sweep", dict(seeds=(0, 0, 0)), ValueError, "seeds must be distinct; found \\(0, 0, 0\\), with 0 repeated"),
    ("capacity_sweep", dict(seeds=(2, 1, 0, 1, 2)), ValueError,
     "seeds must be distinct; found \\(2, 1, 0, 1, 2\\), with 1, 2 repeated"),
    ("memn2n_training", dict(data={"single": None, "two": None}, seeds=(1, 0, 1)), ValueError,
     "seeds must be distinct; found \\(1, 0, 1\\), with 1 repeated"),
    ("capacity_sweep", dict(noises=(0.0, 1.5)), TypeError, "(?s)parameter 'noises'.*Actual value: \\(0.0, 1.5\\)"),
    ("capacity_sweep", dict(patterns=(0, 20)), TypeError, "(?s)parameter 'patterns'.*Actual value: \\(0, 20\\)"),
    ("memn2n_training", dict(data={"single": None, "two": None}, seeds=()), ValueError,
     "seeds must be a non-empty sequence of ints; found none"),
    ("memn2n_training", dict(data={"single": None, "two": None}, seeds=(-1,)), TypeError,
     "(?s)parameter 'seeds'.*Actual value: \\(-1,\\)"),
    ("memn2n_training", dict(data={"single": None}), ValueError,
     "data must map the tasks 'single' and 'two' to \\(train, test\\) stories; found the keys \\['single'\\]"),
    ("_recall", dict(n_units=20, n_patterns=2, noise=0.1, trials=0), TypeError,
     "(?s)parameter 'trials'.*Actual value: 0"),
    ("_recall", dict(n_units=20, n_patterns=0, noise=0.1), TypeError, "(?s)parameter 'n_patterns'.*Actual value: 0"),
    ("_recall", dict(n_units=20, n_patterns=2, noise=-0.1), TypeError, "(?s)parameter 'noise'.*Actual value: -0.1"),
    ("_recall", dict(n_units=20, n_patterns=2, noise=0.1, seed=-1), TypeError, "(?s)parameter 'seed'.*Actual value: -1"),
])
def test_the_runs_name_bad_arguments(run, kwargs, error, match):
    with pytest.raises(error, match=match):
        getattr(ch12, run)(**kwargs)


def test_train_over_seeds_refuses_no_seeds():
    stories = some_stories("single", 10, 1)
    config = MemN2NConfig(len(VOCABULARY), embed_dim=8, hops=1)
    with pytest.raises(ValueError, match="seeds must be a non-empty sequence of ints; found none"):
        ch12._train_over_seeds(config, stories, stories, (), epochs=1)


def capacity(noise=None, load=None, noise_m=None, load_m=None):
    """A Capacity like the chapter's run (median seed), with some values replaced."""
    exact = {0.0: 1, 0.1: 1, 0.2: 1, 0.3: 0.95, 0.4: 0.4, 0.5: 0.0}
    loads = {0.02: 1, 0.05: 1, 0.08: 1, 0.1: 0.9, 0.12: 0.8, 0.14: 0.7, 0.16: 0.5, 0.25: 0.0}
    noise_overlap = {0.0: 1, 0.1: 1, 0.2: 1, 0.3: 0.99, 0.4: 0.63, 0.5: 0.01}
    load_overlap = {0.02: 1, 0.05: 1, 0.08: 1, 0.1: 0.99, 0.12: 0.99, 0.14: 0.98, 0.16: 0.9, 0.25: 0.5}
    exact, loads = {**exact, **(noise or {})}, {**loads, **(load or {})}
    noise_overlap, load_overlap = {**noise_overlap, **(noise_m or {})}, {**load_overlap, **(load_m or {})}
    return ch12.Capacity(
        {**{("noise", x): [v] for x, v in exact.items()}, **{("load", x): [v] for x, v in loads.items()}},
        {**{("noise", x): [v] for x, v in noise_overlap.items()},
         **{("load", x): [v] for x, v in load_overlap.items()}},
    )


@pytest.mark.parametrize("at, past, index", [
    (dict(noise={0.2: 1}), dict(noise={0.2: 1 - EPS}), 0),
    (dict(noise={0.0: 1}), dict(noise={0.0: 1 - EPS}), 0),
    (dict(noise={0.3: 0.8}), dict(noise={0.3: 0.8 - EPS}), 1),
    # "fewer than at 30%" follows from finding 1 (at least 80%) and the bound (at most 70%)
    (dict(noise={0.4: 0.7}), dict(noise={0.4: 0.7 + EPS}), 2),
    (dict(noise={0.5: 0.1}), dict(noise={0.5: 0.1 + EPS}), 3),
    (dict(noise_m={0.5: 0.1}), dict(noise_m={0.5: 0.1 + EPS}), 3),
    (dict(noise_m={0.5: -0.1}), dict(noise_m={0.5: -0.1 - EPS}), 3),
    (dict(load={0.08: 1}), dict(load={0.08: 1 - EPS}), 4),
    (dict(load={0.02: 1}), dict(load={0.02: 1 - EPS}), 4),
    (dict(load={0.05: 1}), dict(load={0.05: 1 - EPS}), 4),
    (dict(load={0.06: 1}), dict(load={0.06: 1 - EPS}), 4),  # a load the run adds is read too
    (dict(load={0.1: 1 - EPS}), dict(load={0.1: 1}), 4),  # recall not yet failing at 0.10
    (dict(load={0.1: 0.5}), dict(load={0.1: 0.5 - EPS}), 5),
    # the overlap clause at 0.14 is finding 7's too: exact recall is what fails finding 6 alone
    (dict(load={0.14: 1 - EPS}), dict(load={0.14: 1}), 6),
    (dict(load_m={0.12: 0.95}), dict(load_m={0.12: 0.95 - EPS}), 7),
    (dict(load_m={0.02: 0.95}), dict(load_m={0.02: 0.95 - EPS}), 7),
    (dict(load_m={0.05: 0.95}), dict(load_m={0.05: 0.95 - EPS}), 7),
    (dict(load_m={0.08: 0.95}), dict(load_m={0.08: 0.95 - EPS}), 7),
    (dict(load_m={0.1: 0.95}), dict(load_m={0.1: 0.95 - EPS}), 7),
    (dict(load_m={0.13: 0.95}), dict(load_m={0.13: 0.95 - EPS}), 7),  # a load the run adds
    (dict(load_m={0.16: 0.85}), dict(load_m={0.16: 0.85 - EPS}), 8),
    (dict(load_m={0.25: 0.7}), dict(load_m={0.25: 0.7 + EPS}), 9),
])
def test_capacity_findings(at, past, index):
    assert holds_all(capacity()) and capacity(**at).failing() == []
    assert fails_alone(capacity(**past), index)


@pytest.mark.parametrize("table, point", [
    # each point is read by one finding only, through its "up to": 4 (exact), 7 (overlap)
    *[("exact", x) for x in (0.02, 0.05, 0.08)],
    *[("overlaps", x) for x in (0.02, 0.05, 0.08, 0.1, 0.12)],
])
def test_capacity_findings_read_their_named_loads(table, point):
    """A result without a named load cannot tick the finding that reads it: a grid
    with no load up to 0.08 would otherwise leave "perfect up to 0.08" reading nothing."""
    result = capacity()
    del getattr(result, table)["load", point]
    with pytest.raises(KeyError, match=str(point)):
        result.failing()


def test_capacity_overlap_at_0_14_fails_both_findings_that_read_it():
    assert capacity(load_m={0.14: 0.95 - EPS}).failing() == [
        ch12.Capacity.FINDINGS[6].says, ch12.Capacity.FINDINGS[7].says]


# ---------------------------------------------------------------------------
# Modern Hopfield networks: one-step retrieval and capacity.
# ---------------------------------------------------------------------------


def one_step(worst=None, typical=None, to_mean=None):
    """A OneStep like the chapter's run (one seed), with some values replaced."""
    base_worst = {0.01: 1.0, 0.03: 0.97, 0.1: 0.8, 0.3: 0.05, 1.0: 2e-4}
    base_typical = {0.01: 0.98, 0.03: 0.93, 0.1: 0.25, 0.3: 2e-5, 1.0: 1e-17}
    base_mean = {0.01: 0.04, 0.03: 0.3, 0.1: 1.7, 0.3: 1.7, 1.0: 1.7}
    return ch12.OneStep(*({b: [v] for b, v in {**base, **(new or {})}.items()}
                          for base, new in ((base_worst, worst), (base_typical, typical), (base_mean, to_mean))))


@pytest.mark.parametrize("at, past, index", [
    (dict(worst={1.0: 1e-3}), dict(worst={1.0: 1e-3 + EPS * 1e-3}), 0),
    (dict(to_mean={0.01: 0.1}), dict(to_mean={0.01: 0.1 + EPS}), 1),
    (dict(typical={0.3: 1e-17 + 1e-30}), dict(typical={0.3: 1e-17}), 2),  # not falling: equal
    (dict(typical={0.03: 0.98 - EPS}), dict(typical={0.03: 0.98}), 2),
    (dict(typical={0.5: 1e-6}), dict(typical={0.5: 1e-18}), 2),  # a beta the run adds is read too
])
def test_one_step_findings(at, past, index):
    assert holds_all(one_step()) and one_step(**at).failing() == []
    assert fails_alone(one_step(**past), index)


def test_one_step_retrieval_is_one_update_of_each_cue():
    run = ch12.one_step_retrieval(seeds=(3,), betas=ch12.OneStep.BETAS, n_units=8, n_patterns=5)
    generator = torch.Generator().manual_seed(3)
    patterns = torch.randn(5, 8, generator=generator, dtype=torch.float64)
    cues = patterns + 0.5 * torch.randn(5, 8, generator=generator, dtype=torch.float64)
    for beta in ch12.OneStep.BETAS:
        errors = []
        for cue, pattern in zip(cues, patterns):  # one cue at a time, written out
            weights = torch.softmax(beta * (patterns @ cue), 0)
            errors.append(float((weights @ patterns - pattern).norm() / pattern.norm()))
        assert run.worst[beta] == [pytest.approx(max(errors), rel=1e-9)]
        assert run.typical[beta] == [pytest.approx(sorted(errors)[2], rel=1e-9)]


def modern(classical=None, modern_=None, as_nearest=None):
    """A ModernCapacity like the chapter's run (one seed), with some values replaced."""
    base_c = {4: 1.0, 8: 0.375, 16: 0.0625, 32: 0.0, 64: 0.0}
    base_m = {p: 1.0 for p in (4, 8, 16, 32, 64, 128, 256, 512)} | {1024: 0.997}
    base_n = {p: 1.0 for p in base_m}
    return ch12.ModernCapacity({p: [v] for p, v in {**base_c, **(classical or {})}.items()},
                               {p: [v] for p, v in {**base_m, **(modern_ or {})}.items()}, 32,
                               {p: [v] for p, v in {**base_n, **(as_nearest or {})}.items()})


@pytest.mark.parametrize("at, past, index", [
    (dict(classical={16: 0.1}), dict(classical={16: 0.1 + EPS}), 0),
    (dict(classical={64: 0.0}), dict(classical={64: EPS}), 1),
    (dict(modern_={1024: 0.99}), dict(modern_={1024: 0.99 - EPS}), 2),
    (dict(modern_={128: 0.99}), dict(modern_={128: 0.99 - EPS}), 2),
    (dict(modern_={2048: 0.5}), dict(modern_={256: 0.99 - EPS}), 2),  # beyond 1024 is not claimed
    (dict(classical={8: 0.995}, modern_={8: 0.995}), dict(classical={8: 0.995 + EPS}, modern_={8: 0.995}), 3),
    (dict(classical={4: 1.0}, modern_={4: 1.0}), dict(classical={4: 1.0}, modern_={4: 1 - EPS}), 3),
    (dict(modern_={32: 1.0}, classical={32: 0.0}), dict(classical={32: EPS}), 4),
    (dict(modern_={32: 1.0}, classical={32: 0.0}), dict(modern_={32: 1 - EPS}), 4),
    (dict(as_nearest={1024: 1.0}), dict(as_nearest={1024: 1 - EPS}), 5),
    (dict(as_nearest={4: 1.0}), dict(as_nearest={4: 1 - EPS}), 5),
])
def test_modern_capacity_findings(at, past, index):
    assert holds_all(modern()) and modern(**at).failing() == []
    assert fails_alone(modern(**past), index)


def loop_over_cues(p, seed):
    """For ``p`` patterns on ``seed``, as the run draws them: per cue, written out, whether one
    modern update's signs are its pattern's and whether its own pattern is its strict nearest
    neighbour; and the classical network's verdict on the same cues."""
    generator = torch.Generator().manual_seed(seed)
    stored = torch.randint(0, 2, (p, 32), generator=generator).double() * 2 - 1
    cues = flip_bits(stored, 0.1, generator)
    modern_, nearest = [], []
    for i, (cue, pattern) in enumerate(zip(cues, stored)):
        scores = [float(x @ cue) for x in stored]
        new = torch.softmax(pattern.new_tensor(scores), 0) @ stored
        modern_.append(all(float(a) * float(b) > 0 for a, b in zip(new, pattern)))
        nearest.append(all(scores[i] > score for j, score in enumerate(scores) if j != i))
    final = HopfieldNetwork(stored).recall(cues, max_steps=30, generator=generator).states
    classical = [bool(torch.equal(state, pattern)) for state, pattern in zip(final, stored)]
    return modern_, nearest, classical


def test_modern_capacity_against_a_loop_over_cues():
    # seed 4 at P = 8: the classical network recalls 3 of 8 cues, 4 if stopped after one sweep;
    # seed 0 at P = 1024: one modern update misses 3 of 1024 cues
    run = ch12.modern_capacity(seeds=(0, 4), patterns=(4, 8, 16, 32, 64, 1024), classical_up_to=8)
    assert list(run.classical) == [4, 8] and list(run.modern) == [4, 8, 16, 32, 64, 1024]
    modern_, nearest, classical = loop_over_cues(8, seed=4)
    assert 0 < sum(classical) < 8  # the classical network recalls some of these cues, not all
    assert run.classical[8][1] == sum(classical) / 8 and run.modern[8][1] == sum(modern_) / 8
    modern_, nearest, _ = loop_over_cues(1024, seed=0)
    assert 0 < sum(modern_) < 1024  # one update misses some of these cues
    assert run.modern[1024][0] == sum(modern_) / 1024
    assert run.as_nearest[1024][0] == sum(m == n for m, n in zip(modern_, nearest)) / 1024


@pytest.mark.parametrize("run, kwargs, error, match", [
    ("one_step_retrieval", dict(seeds=()), ValueError, "seeds must be a non-empty sequence of ints; found none"),
    ("one_step_retrieval", dict(seeds=(1, 1)), ValueError, "seeds must be distinct"),
    ("one_step_retrieval", dict(betas=(0.01, 1.0)), ValueError, "betas must hold the points the findings read"),
    ("one_step_retrieval", dict(betas=(0.0, 1.0)), TypeError, "(?s)parameter 'betas'"),
    ("modern_capacity", dict(seeds=()), ValueError, "seeds must be a non-empty sequence of ints; found none"),
    ("modern_capacity", dict(patterns=(4, 16, 64)), ValueError, "patterns must hold the points the findings read"),
    ("modern_capacity", dict(noise=1.5), TypeError, "(?s)parameter 'noise'"),
])
def test_modern_runs_name_bad_arguments(run, kwargs, error, match):
    with pytest.raises(error, match=match):
        getattr(ch12, run)(**kwargs)
