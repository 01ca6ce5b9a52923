"""Tests for experiments/ch12_memory.py: each result's findings fail on made-up numbers that
contradict them and hold on numbers that agree; each experiment at a tiny size; the seed sweep
of memory networks, the capacity runs against a loop over cues (moved from
tests/lib/part5_memory/test_memn2n.py and tests/lib/part5_memory/test_hopfield.py); the NTM's training command and its committed
weights (moved from tests/lib/part5_memory/test_ntm.py)."""
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


def verdicts(result):
    return [bool(finding.holds(result)) for finding in result.FINDINGS]


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


def hops_accuracy(single=0.99, two_one=0.55, two_three=0.99, without=0.55):
    accuracies = {("single", 1): [single, 0.995], ("two", 1): [two_one, 0.56, 0.54],
                  ("two", 3): [two_three, 0.995]}
    return ch12.HopsAccuracy(accuracies, [without, 0.55], trained={})


def test_hops_accuracy_findings():
    assert holds_all(hops_accuracy())
    assert verdicts(hops_accuracy(single=0.9)) == [False, True, True, True]
    assert verdicts(hops_accuracy(two_one=0.7)) == [True, False, True, True]
    assert verdicts(hops_accuracy(two_three=0.9)) == [True, True, False, True]
    # linear start made no difference: three hops without it solve the task
    assert verdicts(hops_accuracy(without=0.95)) == [True, True, True, False]
    with pytest.raises(AssertionError, match="cells training-discussion, summary"):
        hops_accuracy(two_one=0.7).check()


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
    assert verdicts(example_reads([[pickup, last_move, last_move]])) == [False, True]
    assert verdicts(example_reads([[pickup, pickup, last_move], [last_move, pickup, pickup]])) == [True, False]
    wrong = example_reads([[pickup, pickup, last_move]])
    wrong.answers[0] = "nowhere"
    assert verdicts(wrong) == [False, False]


def test_hop_weights_findings():
    agrees = torch.tensor([[[0.78, 0.02], [0.98, 0.0], [0.0, 0.93]]] * 3)  # (seeds, K, 2)
    assert holds_all(ch12.HopWeights(agrees))
    for hop, fact, value in ((0, 0, 0.5), (1, 1, 0.1), (2, 1, 0.7)):
        contradicts = agrees.clone()
        contradicts[1, hop, fact] = value
        assert verdicts(ch12.HopWeights(contradicts)) == [index != hop for index in range(3)]


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


def test_copy_lengths_and_copy_limit_run_on_the_chapters_model(chapters_model):
    model, _ = chapters_model
    copying = ch12.copy_lengths(model, lengths=(4,))
    assert copying.wrong_bits[4] <= 0.001 and copying.copied[4] >= 0.95
    limit = ch12.copy_limit(model, lengths=(6,))
    assert limit.slots == 24 and limit.write_back[6].shape == (100,) and limit.wrong_bits[6] <= 0.001


def test_copy_accuracy_findings():
    wrong = {4: 0.0, 8: 0.0, 12: 0.0, 16: 0.0001, 20: 0.0}
    copied = {4: 1.0, 8: 1.0, 12: 1.0, 16: 0.99, 20: 1.0}
    assert holds_all(ch12.CopyAccuracy(wrong, copied))
    assert verdicts(ch12.CopyAccuracy({**wrong, 8: 0.01}, copied)) == [False, True]
    assert verdicts(ch12.CopyAccuracy(wrong, {**copied, 20: 0.9})) == [True, False]


def copy_limit(**changes):
    """A CopyLimit like the chapter's run, with ``changes``."""
    back = torch.full((100,), 24)
    fields = dict(slots=24, wrong_bits={22: 0.0, 23: 0.29}, exact={22: 1.0, 23: 0.06},
                  write_first={22: 0.0, 23: 0.93}, first_exact={22: 0.0, 23: 0.0},
                  same_slot={22: 0.0, 23: 0.86}, write_back={22: back, 23: back},
                  erasing={22: 0.5, 23: 0.5})
    return ch12.CopyLimit(**{**fields, **changes})


def test_copy_limit_findings():
    assert holds_all(copy_limit())
    assert verdicts(copy_limit(slots=20))[:2] == [False, False]  # N is what the steps are counted against
    early = torch.full((100,), 24)
    early[0] = 23  # one write head back on slot 0 a step early
    assert verdicts(copy_limit(write_back={22: early, 23: early}))[1] is False
    assert verdicts(copy_limit(erasing={22: 0.1, 23: 0.5})) == [True, True, False, True, True]
    assert verdicts(copy_limit(write_first={22: 0.1, 23: 0.93})) == [True, True, True, False, True]
    assert verdicts(copy_limit(first_exact={22: 0.0, 23: 0.01})) == [True, True, True, True, False]


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
    assert verdicts(ch12.ExplorerRecall(outcomes, {**back, ("T", 0.2): False}, True))[0] is False
    assert verdicts(ch12.ExplorerRecall({**outcomes, ("L", 0.3): "L"}, back, True))[1] is False
    assert verdicts(ch12.ExplorerRecall({**outcomes, ("X", 0.4): "-X"}, back, True))[2] is False
    assert verdicts(ch12.ExplorerRecall({**outcomes, ("T", 0.5): "T"}, back, True))[3] is False
    assert verdicts(ch12.ExplorerRecall(outcomes, back, False)) == [True] * 4 + [False]


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


def test_capacity_sweep_runs_at_a_tiny_size():
    capacity = ch12.capacity_sweep(seeds=(0,), noises=(0.0,), patterns=(4,))
    assert capacity.exact == {("noise", 0.0): [1.0], ("load", 0.02): [1.0]}
    assert capacity.overlaps == {("noise", 0.0): [1.0], ("load", 0.02): [1.0]}


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


@pytest.mark.parametrize("changes, fails", [
    (dict(noise={0.2: 0.95}), 0),
    (dict(noise={0.3: 0.75}), 1),
    (dict(noise={0.4: 0.96}), 2),
    (dict(noise_m={0.5: -0.2}), 3),
    (dict(load={0.1: 1}), 4),
    (dict(load={0.1: 0.4}), 5),
    (dict(load={0.14: 1}), 6),
    (dict(load_m={0.12: 0.9}), 7),
    (dict(load_m={0.16: 0.8}), 8),
    (dict(load_m={0.25: 0.75}), 9),
])
def test_capacity_findings(changes, fails):
    assert holds_all(capacity())
    assert not verdicts(capacity(**changes))[fails]
