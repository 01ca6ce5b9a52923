"""Chapter 6's experiments (experiments.ch06_language_models): each result's findings
hold on numbers that show them and fail on numbers that contradict them, and each run
works at a tiny size. The chapter runs them at full size
(tests/test_notebook_outputs.py)."""

import copy
import math

import pytest
import torch

from experiments import ch06_language_models as ch06
from lib.char_lm import teacher_forcing_batch
from lib.corpus import Vocabulary
from lib.lm import CountingLanguage, EpsilonSchedule, NeuralLM, drift, rollout
from lib.ngram import EOS, UNK, perplexity
from lib.reinforce import bigram_precision, reinforce_fine_tune

pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def verdicts(result):
    return [bool(finding.holds(result)) for finding in result.FINDINGS]


# ---- findings on hand-made numbers ---------------------------------------------------


def test_smoothing_findings():
    agrees = ch06.SmoothingSweep(
        {}, {2: {0.0: 300.0, 0.1: 200.0}, 3: {0.1: 250.0}}, 0.7
    )
    assert verdicts(agrees) == [True, True]
    assert ch06.SmoothingSweep(
        {}, {2: {0.1: 200.0}, 3: {0.1: 190.0}}, 0.4
    ).best_delta == {
        2: 0.1,
        3: 0.1,
    }
    assert verdicts(
        ch06.SmoothingSweep({}, {2: {0.1: 200.0}, 3: {0.1: 190.0}}, 0.4)
    ) == [
        False,
        False,
    ]


def test_neural_and_table_findings():
    runs = ch06.NeuralLMRuns({}, [8.1, 8.1], [5.6, 6.2], [200, 210], [216, 219])
    assert verdicts(runs) == [False]  # the second seed falls by 1.9 nats only
    runs.end_loss[1] = 5.9
    assert verdicts(runs) == [True]
    assert verdicts(ch06.VersusCounts([216, 219], {1: 900, 2: 700, 3: 800})) == [
        True,
        True,
    ]
    assert verdicts(ch06.VersusCounts([216, 300], {1: 900, 2: 250, 3: 800})) == [
        False,
        False,
    ]


def test_embedding_findings():
    shares = {
        "embedding M": [0.03, 0.02, 0.06],
        "learned part M - M0": [0.24, 0.03, 0.26],
        "output W": [0.50, 0.45, 0.55],
        "word2vec (CBOW)": [0.35, 0.32, 0.48],
    }
    said = [{"says", "was", "had", "has", "does"}] * 3
    agrees = ch06.EmbeddingNeighbours(shares, 0.003, [0.2, 0.3, 0.25], said, {})
    assert all(verdicts(agrees))
    contradicts = copy.deepcopy(agrees)
    contradicts.shares["embedding M"] = [0.12, 0.11, 0.11]  # fails the first three
    contradicts.shares["learned part M - M0"] = [
        0.3,
        0.3,
        0.3,
    ]  # and every seed does well
    contradicts.moved[0] = 0.6
    contradicts.said_in_W[1] = {"says", "was"}
    assert verdicts(contradicts) == [
        False,
        True,
        False,
        False,
        True,
        False,
        True,
        False,
    ]


def test_sampling_findings():
    flat, sharp = torch.full((4,), 0.25), torch.tensor([0.7, 0.1, 0.1, 0.1])
    assert verdicts(ch06.NextWordTemperatures({0.5: sharp, 2.0: flat})) == [True]
    assert verdicts(ch06.NextWordTemperatures({0.5: flat, 2.0: sharp})) == [False]
    assert verdicts(ch06.TemperatureSamples({}, {0.5: -2.0, 1.5: -6.0})) == [True]
    assert verdicts(ch06.TemperatureSamples({}, {0.5: -6.0, 1.5: -2.0})) == [False]


def curve(first, last):  # KL at 13 positions, rising from first to last
    return torch.linspace(first, last, 13)


def test_exposure_findings():
    grows = {seed: (curve(0.008, 0.01), curve(0.01, 0.1)) for seed in (0, 1)}
    assert verdicts(ch06.ExposureDrift({}, grows)) == [True, True]
    flat = {0: (curve(0.008, 0.04), curve(0.01, 0.02)), 1: grows[1]}
    assert verdicts(ch06.ExposureDrift({}, flat)) == [False, False]
    assert verdicts(ch06.ScheduledDrift(grows, grows)) == [True, True]
    better = {seed: (data, own / 2) for seed, (data, own) in flat.items()}
    assert verdicts(ch06.ScheduledDrift(grows, better)) == [False, False]


def four(reward, ppl, data, own):
    return {
        "reward (bigram precision)": reward,
        "test perplexity": ppl,
        "KL after data": data,
        "KL after own": own,
    }


def test_reinforce_findings():
    before = {0: four(0.98, 1.28, 0.007, 0.06), 1: four(0.99, 1.28, 0.007, 0.05)}
    after = {0: four(0.99, 1.30, 0.010, 0.02), 1: four(0.995, 1.31, 0.009, 0.03)}
    assert verdicts(ch06.ClockFineTuning(before, after)) == [True] * 4
    assert verdicts(ch06.ClockFineTuning(after, before)) == [False] * 4
    mixed = {"reward (bigram precision)": [0.01, -0.01], "KL after own": [-0.02, 0.01]}
    steady = {
        "reward (bigram precision)": [0.005, 0.004],
        "KL after own": [-0.02, -0.03],
    }
    assert ch06.WithoutBaseline.improved(mixed) == (1, 1, 1)
    assert verdicts(ch06.WithoutBaseline(mixed, steady)) == [True, True, True]
    assert verdicts(ch06.WithoutBaseline(steady, mixed)) == [False, False, False]


def test_cost_findings():
    assert verdicts(ch06.LayerCosts(2048, 32 * 3000)) == [True]
    assert verdicts(ch06.LayerCosts(2048, 2048 * 10)) == [False]
    # saves 16 dot products, 4 of them from <unk>'s share
    assert verdicts(ch06.BinsOnTest(120.0, 110.0, 94.0, 98.0)) == [True] * 3
    assert verdicts(ch06.BinsOnTest(90.0, 110.0, 108.0, 110.0)) == [False] * 3


def test_timing_findings():
    agrees = {"full": [1.0, 20.0], "classes": [1.0, 4.0], "tree": [1.0, 1.5]}
    assert verdicts(ch06.SoftmaxTiming(agrees)) == [True] * 4
    contradicts = {"full": [1.0, 5.0], "classes": [1.0, 6.0], "tree": [1.0, 7.0]}
    assert verdicts(ch06.SoftmaxTiming(contradicts)) == [False] * 4


def test_importance_findings():
    agrees = {
        (3, False): (0.04, 0.03),
        (3, True): (0.2, 0.005),
        (30, False): (0.03, 0.03),
        (30, True): (0.1, 0.01),
    }
    assert verdicts(ch06.ImportanceErrors(agrees)) == [True] * 3
    contradicts = {
        (3, False): (0.1, 0.03),
        (3, True): (0.01, 0.005),
        (30, False): (0.03, 0.03),
        (30, True): (0.01, 0.01),
    }
    assert verdicts(ch06.ImportanceErrors(contradicts)) == [False] * 3


# ---- the runs, at a tiny size --------------------------------------------------------

TOY = [
    s.split() for s in ("the cat sat on the mat", "the dog sat on the log", "a cat saw")
]


def test_smoothing_sweep_runs_and_picks_the_best_delta():
    words = sorted({w for s in TOY for w in s}) + [EOS, UNK]
    sweep = ch06.smoothing_sweep(TOY, TOY[:2], words, deltas=(0.0, 0.5))
    assert set(sweep.perplexities) == {1, 2, 3} and 0 <= sweep.rare_histories <= 1
    assert sweep.best(2) == min(sweep.perplexities[2].values())


def test_neural_runs_sampling_and_costs_run():
    vocabulary = Vocabulary.from_sentences(TOY, specials=(EOS, UNK))
    V = len(vocabulary)
    stories = [vocabulary.encode(s) + [vocabulary.index(EOS)] for s in TOY]
    batch = teacher_forcing_batch(stories, bos=V)
    runs = ch06.train_neural_lms(
        {"train": batch, "valid": batch, "test": batch}, V, (0,)
    )
    assert runs.end_loss[0] < runs.start_loss[0]  # it learns the three sentences
    table = ch06.versus_counts(runs, {1: 1e3, 2: 1e3, 3: 1e3})
    assert table.factors == [1e3 / runs.test_perplexity[0]]
    first = ch06.next_word_temperatures(runs.models[0], V)
    assert list(first.perplexities) == [0.5, 1.0, 2.0]
    samples = ch06.samples_at_temperatures(runs.models[0], vocabulary, V)
    assert [len(texts) for texts in samples.texts.values()] == [2, 2, 2]
    assert ch06.layer_costs(runs.models[0]) == ch06.LayerCosts(64 * 32, 32 * V)


@pytest.fixture(scope="module")
def clock():
    language = CountingLanguage(hours=12, steps=(1, 2), length=8)
    sentences = language.sample(40, torch.Generator().manual_seed(0))
    test_sentences = language.sample(20, torch.Generator().manual_seed(1))
    drifted = ch06.exposure_drift(language, sentences, test_sentences, seeds=(0, 1))
    return language, sentences, test_sentences, drifted


def test_exposure_and_scheduled_sampling_run(clock):
    language, sentences, test_sentences, drifted = clock
    assert [len(own) for _, own in drifted.curves.values()] == [8 - 3] * 2
    schedule = EpsilonSchedule("inverse_sigmoid", k=50)
    scheduled = ch06.scheduled_sampling_drift(
        language, sentences, test_sentences, schedule, drifted, seeds=(0,)
    )
    assert scheduled.teacher_forced is drifted.curves and list(scheduled.scheduled) == [
        0
    ]


def test_judging_a_clock_model_is_the_four_numbers_written_out(clock):
    language, _, test_sentences, drifted = clock
    model = drifted.models[1]
    got = ch06._judge_clock_model(model, language, test_sentences, seed=1)
    own = rollout(model, test_sentences[:, :3], 8, 12, torch.Generator().manual_seed(1))
    inputs, targets = teacher_forcing_batch(test_sentences.tolist(), bos=12)
    with torch.no_grad():
        log_p = torch.log_softmax(model(inputs).double(), dim=-1)  # (20, 8, 12)
    on_data, on_own = drift(
        model, language, test_sentences, bos=12, prompt=3,
        generator=torch.Generator().manual_seed(6),
    )  # fmt: skip
    assert got == four(
        float(bigram_precision(own, test_sentences, 3).mean()),
        perplexity(log_p.gather(2, targets[..., None]).flatten()),
        float(on_data.mean()),
        float(on_own.mean()),
    )
    reused = ch06._judge_clock_model(
        model, language, test_sentences, 1, curves=(on_data * 0, on_own * 0)
    )
    assert (
        reused["KL after own"] == 0
        and reused["test perplexity"] == got["test perplexity"]
    )


def test_reinforce_fine_tunes_a_copy_and_judges_it_before_and_after(clock):
    language, sentences, test_sentences, drifted = clock
    originals = {
        s: [p.clone() for p in m.parameters()] for s, m in drifted.models.items()
    }
    tuned = ch06.reinforce_clock_models(drifted, language, sentences, test_sentences)
    for seed, model in drifted.models.items():  # the originals are untouched
        assert all(
            torch.equal(p, q) for p, q in zip(model.parameters(), originals[seed])
        )
        assert tuned.before[seed] == ch06._judge_clock_model(
            model, language, test_sentences, seed, drifted.curves[seed]
        )
        copied = copy.deepcopy(model)
        reinforce_fine_tune(
            copied, sentences, lambda s, r: bigram_precision(s, r, 3), prompt=3, bos=12,
            steps=100, batch_size=64, lr=3e-3, seed=seed,
        )  # fmt: skip
        judged = ch06._judge_clock_model(copied, language, test_sentences, seed)
        assert tuned.after[seed] == judged
    assert tuned.after[0] != tuned.before[0]


def test_class_costs_timing_and_importance_run():
    counts, test_ids = [50, 20, 10, 5, 5, 3, 2, 1, 1], torch.tensor([0, 1, 2, 8, 8])
    cost = {
        ("equal", "test"): 9.0,
        ("frequency", "train"): 8.0,
        ("frequency", "test"): 7.0,
    }
    bins = ch06.frequency_bins_on_test(
        cost, counts, test_ids, unk=8, unk_train_share=0.1, k=3
    )
    assert bins.saved == 1.0 and math.isfinite(bins.unk_as_in_training)
    timing = ch06.softmax_timing([16, 32], repeats=1)
    assert all(len(ms) == 2 and min(ms) > 0 for ms in timing.milliseconds.values())
    with pytest.raises(
        ValueError, match="method must be 'full', 'tree' or 'classes'; found 'nce'"
    ):
        ch06._time_per_step("nce", 10)
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(9, 4, generator=generator, dtype=torch.float64)
    context = torch.randn(1, 4, generator=generator, dtype=torch.float64)
    proposal = torch.tensor(counts, dtype=torch.float64) / sum(counts)
    errors = ch06.importance_sampling_errors(
        weight, torch.zeros(9, dtype=torch.float64), context, 2, proposal, ks=(3, 30)
    )
    assert errors.ks == [3, 30] and len(errors.errors) == 4
