"""Chapter 6's experiments (experiments.ch06_language_models): each finding holds on
numbers that show it and fails, alone, on numbers just past its threshold; and each run
works at a tiny size. The chapter runs them at full size
(tests/book/test_notebook_outputs.py)."""

import copy
import math
from dataclasses import replace

import pytest
import torch

from experiments import ch06_language_models as ch06
from experiments import ch06_weights as ch06w
from lib.part2_recurrent.char_lm import teacher_forcing_batch
from lib.corpus import Vocabulary, read_sentences
from lib.part3_words.lm import CountingLanguage, EpsilonSchedule, NeuralLM, drift, rollout
from lib.part3_words.ngram import EOS, UNK, perplexity
from lib.part3_words.reinforce import bigram_precision, reinforce_fine_tune

pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def says(result_class, *indices):
    return [result_class.FINDINGS[i].says for i in indices]


# ---- findings on hand-made numbers: each fails alone just past its threshold ---------


def test_smoothing_findings():
    agrees = ch06.SmoothingSweep(
        {}, {2: {0.0: 300.0, 0.1: 200.0}, 3: {0.1: 200.5}}, 0.51
    )
    assert agrees.failing() == [] and agrees.best_delta == {2: 0.1, 3: 0.1}
    tied = replace(agrees, perplexities={2: {0.1: 200.0}, 3: {0.0: 200.0}})
    assert tied.failing() == says(ch06.SmoothingSweep, 0)
    assert replace(agrees, rare_histories=0.5).failing() == says(ch06.SmoothingSweep, 1)


def test_neural_findings_need_every_one_of_three_seeds():
    agrees = ch06.NeuralLMRuns({}, [8.1] * 3, [6.0, 6.09, 5.9], [200] * 3, [216] * 3)
    assert agrees.failing() == []
    just_short = replace(agrees, end_loss=[6.0, 6.1, 5.9])  # falls by 2.0 nats only
    assert just_short.failing() == says(ch06.NeuralLMRuns, 0)
    two_seeds = replace(agrees, start_loss=[8.1] * 2, end_loss=[6.0] * 2)
    assert two_seeds.failing() == says(ch06.NeuralLMRuns, 0)


def _test_perplexities(add_delta=(300.0, 280.0, 900.0), kneser_ney=(300.0, 155.0, 146.0)):
    table = {("add-δ", n): p for n, p in enumerate(add_delta, 1)}
    table |= {("kneser-ney", n): p for n, p in enumerate(kneser_ney, 1)}
    for method, gap in (("interpolation", 20.0), ("absolute", 5.0)):
        table |= {(method, n): table["kneser-ney", n] + gap for n in (1, 2, 3)}
    return table


def test_smoothed_baselines_findings():
    agrees = ch06.SmoothedBaselines({}, _test_perplexities(), {}, {})
    assert agrees.failing() == [] and agrees.best() == 3
    flat = _test_perplexities(kneser_ney=(300.0, 155.0, 155.0))  # the trigram only ties
    assert replace(agrees, test=flat).failing() == says(ch06.SmoothedBaselines, 0)
    for method in ("interpolation", "absolute"):  # one method's trigram ties its bigram
        tied = dict(agrees.test) | {(method, 3): agrees.test[method, 2]}
        assert replace(agrees, test=tied).failing() == says(ch06.SmoothedBaselines, 0)
    worse = dict(agrees.test) | {("add-δ", 2): 175.0}  # ties interpolation's bigram
    assert replace(agrees, test=worse).failing() == says(ch06.SmoothedBaselines, 1)
    tied = dict(agrees.test) | {("absolute", 2): 155.0}  # ties Kneser–Ney's bigram
    assert replace(agrees, test=tied).failing() == says(ch06.SmoothedBaselines, 2)


def test_versus_counts_findings():
    agrees = ch06.VersusCounts([216, 219, 230], _test_perplexities(add_delta=(351, 231, 906)))
    assert agrees.failing() == [] and agrees.add_delta == 231
    tied = replace(agrees, ngram_test=_test_perplexities(add_delta=(351, 230, 906)))
    assert tied.failing() == says(ch06.VersusCounts, 0)
    close = replace(agrees, ngram_test=_test_perplexities(kneser_ney=(300, 216, 216)))
    assert close.failing() == says(ch06.VersusCounts, 1)  # ties the best seed
    two_seeds = replace(agrees, neural_test=[216, 219])
    assert two_seeds.failing() == says(ch06.VersusCounts, 0, 1)


def five_grams(story):
    return {tuple(story[i : i + 5]) for i in range(len(story) - 4)}


def test_the_chapter_split_drops_repeated_and_nearly_repeated_stories():
    stories = read_sentences()
    train, valid, test = ch06.split_stories(stories)
    parts = [{tuple(s) for s in part} for part in (train, valid, test)]
    assert not (parts[0] & parts[1]) and not (parts[0] & parts[2]) and not (parts[1] & parts[2])
    # Brute force: no held-out story shares more than half of its 5-grams with a training story.
    trained = [five_grams(s) for s in train]
    for story in valid + test:
        grams = five_grams(story)
        assert max(len(grams & seen) for seen in trained) <= len(grams) / 2
    # The corpus repeats stories, exactly and with a few words changed: a split by position
    # alone, or one dropping exact repeats only, would keep some.
    by_position = {tuple(s) for s in stories[::5]} | {tuple(s) for s in stories[1::10]}
    assert by_position & parts[0]
    exact_only = [s for s in stories[1::10] if tuple(s) not in parts[0]]
    assert len(exact_only) > len(valid)
    near = [s for s in exact_only if tuple(s) not in parts[1]]
    assert near and all(tuple(s) not in parts[0] for s in near)  # near, not exact, copies
    assert len(train) + len(valid) + len(test) < len(stories)


def test_near_copy_threshold():
    story = [str(i) for i in range(14)]  # ten 5-grams
    for shared, expected in ((5, False), (6, True)):  # more than half, strictly
        other = story[: shared + 4] + ["x"] * 6
        assert ch06._near_copy(story, [five_grams(other)]) is expected
    assert ch06._near_copy(["a", "b"], [{("a", "b")}])  # a short story compared whole


def test_embedding_findings():
    shares = {
        "embedding M": [0.03, 0.02, 0.10],
        "learned part M - M0": [0.24, 0.039, 0.26],
        "output W": [0.50, 0.30, 0.55],
        "word2vec (CBOW)": [0.20, 0.32, 0.50],
    }
    said = [{"says", "was", "had", "has", "does"}] * 3
    agrees = ch06.EmbeddingNeighbours(shares, 0.003, [0.2, 0.49, 0.25], said, {})
    assert agrees.failing() == []

    def changed(view, values):
        return replace(agrees, shares={**shares, view: values})

    cases = [
        changed("embedding M", [0.03, 0.02, 0.101]),
        changed("output W", [0.50, 0.299, 0.55]),
        changed("learned part M - M0", [0.089, 0.03, 0.26]),  # median < 3 × 0.03
        changed("learned part M - M0", [0.24, 0.04, 0.26]),  # 0.04 = 2 × 0.02
        changed("word2vec (CBOW)", [0.199, 0.32, 0.50]),
        replace(agrees, moved=[0.2, 0.5, 0.25]),
        changed("word2vec (CBOW)", [0.20, 0.501, 0.52]),  # median above W's 0.50
        replace(agrees, said_in_W=[said[0], {"says", "was", "has", "is"}, said[0]]),
    ]
    for index, case in enumerate(cases):
        assert case.failing() == says(ch06.EmbeddingNeighbours, index)
    two_seeds = ch06.EmbeddingNeighbours(
        {view: values[:2] for view, values in shares.items()}, 0.003, [0.2, 0.3],
        said[:2], {},
    )  # fmt: skip
    assert two_seeds.failing() == says(ch06.EmbeddingNeighbours, 0, 1, 4, 5, 7)


def test_sampling_findings():
    flat, sharp = torch.full((4,), 0.25), torch.tensor([0.7, 0.1, 0.1, 0.1])
    agrees = ch06.NextWordTemperatures({2.0: flat, 0.5: sharp})  # in any order
    assert agrees.failing() == []
    tied = ch06.NextWordTemperatures({0.5: flat, 2.0: flat})
    assert tied.failing() == says(ch06.NextWordTemperatures, 0)
    agrees = ch06.TemperatureSamples({}, {0.5: -2.0, 1.5: -2.001})
    assert agrees.failing() == []
    tied = replace(agrees, mean_log_prob={0.5: -2.0, 1.5: -2.0})
    assert tied.failing() == says(ch06.TemperatureSamples, 0)


def curve(first, last):  # KL at 13 positions, rising from first to last
    return torch.linspace(first, last, 13, dtype=torch.float64)


def grown(times):  # KL after own samples: the last four positions `times` the first two
    return torch.tensor([1.0] * 2 + [2.0] * 7 + [times] * 4, dtype=torch.float64)


def test_exposure_findings():
    agrees = ch06.ExposureDrift(
        {}, {s: (curve(0.008, 0.0299), grown(3.0)) for s in (0, 1, 2)}
    )
    assert agrees.failing() == []
    high = replace(
        agrees, curves={**agrees.curves, 1: (curve(0.008, 0.0301), grown(3.0))}
    )
    assert high.failing() == says(ch06.ExposureDrift, 0)
    flat = replace(
        agrees, curves={**agrees.curves, 1: (curve(0.008, 0.0299), grown(2.99))}
    )
    assert flat.failing() == says(ch06.ExposureDrift, 1)
    two_seeds = replace(agrees, curves={s: agrees.curves[s] for s in (0, 1)})
    assert two_seeds.failing() == says(ch06.ExposureDrift, 0, 1)


def test_scheduled_findings():
    forced = {s: (curve(0.008, 0.01), grown(3.0)) for s in (0, 1, 2)}
    agrees = ch06.ScheduledDrift(
        forced, {s: (d, own * 0.9) for s, (d, own) in forced.items()}
    )
    assert agrees.failing() == []
    flat = replace(
        agrees, scheduled={**agrees.scheduled, 1: (forced[1][0], grown(2.99))}
    )
    assert flat.failing() == says(ch06.ScheduledDrift, 0)
    better = replace(
        agrees, scheduled={**agrees.scheduled, 1: (forced[1][0], grown(3.0) * 0.89)}
    )
    assert better.failing() == says(ch06.ScheduledDrift, 1)
    two_seeds = replace(agrees, scheduled={s: agrees.scheduled[s] for s in (0, 1)})
    assert two_seeds.failing() == says(ch06.ScheduledDrift, 0, 1)


def four(reward, ppl, data, own):
    return {
        "reward (bigram precision)": reward,
        "test perplexity": ppl,
        "KL after data": data,
        "KL after own": own,
    }


def test_reinforce_findings():
    before = {s: four(0.98, 1.28, 0.007, 0.06) for s in (0, 1, 2)}
    after = {s: four(0.9801, 1.2801, 0.0071, 0.0599) for s in (0, 1, 2)}
    agrees = ch06.ClockFineTuning(before, after)
    assert agrees.failing() == []
    for index, key in enumerate(before[0]):  # no change on seed 1
        unchanged = {**after, 1: {**after[1], key: before[1][key]}}
        assert replace(agrees, after=unchanged).failing() == says(
            ch06.ClockFineTuning, index
        )
    two_seeds = ch06.ClockFineTuning({s: before[s] for s in (0, 1)}, after)
    assert two_seeds.failing() == says(ch06.ClockFineTuning, 0, 1, 2, 3)


def test_without_baseline_findings():
    mixed = {
        "reward (bigram precision)": [0.01, 0.0, 0.01],
        "KL after own": [-0.02, 0.0, -0.02],
    }
    slow = {
        "reward (bigram precision)": [0.0021, 0.005, 0.004],
        "KL after own": [-0.0101, -0.02, -0.03],
    }
    agrees = ch06.WithoutBaseline(mixed, slow)
    assert ch06.WithoutBaseline.improved(mixed) == (2, 2, 2) and agrees.failing() == []
    worse = {"reward (bigram precision)": [0.0] * 3, "KL after own": [0.0] * 3}
    assert replace(agrees, at_3e3=worse).failing() == says(ch06.WithoutBaseline, 0)
    # every seed improving, if only by 1e-4, contradicts it too
    better = {
        "reward (bigram precision)": [0.01, 1e-4, 0.01],
        "KL after own": [-0.02, -1e-4, -0.02],
    }
    assert replace(agrees, at_3e3=better).failing() == says(ch06.WithoutBaseline, 0)
    for key, value in (("reward (bigram precision)", 0.002), ("KL after own", -0.01)):
        short = replace(agrees, at_1e3={**slow, key: [value] + slow[key][1:]})
        assert short.failing() == says(ch06.WithoutBaseline, 1)
    two_seeds = replace(
        agrees, at_1e3={key: values[:2] for key, values in slow.items()}
    )
    assert two_seeds.failing() == says(ch06.WithoutBaseline, 1)


def test_cost_findings():
    assert ch06.LayerCosts(2048, 2048 * 10 + 1).failing() == []
    assert ch06.LayerCosts(2048, 2048 * 10).failing() == says(ch06.LayerCosts, 0)
    # saves 16 dot products, 4 of them from <unk>'s share
    assert ch06.BinsOnTest(120.0, 110.0, 94.0, 98.0).failing() == []
    assert ch06.BinsOnTest(100.0, 110.0, 100.0, 103.0).failing() == says(
        ch06.BinsOnTest, 0
    )
    for test, unk in ((100.0, 102.0), (95.0, 100.0)):  # a fifth of 10; a third of 15
        assert ch06.BinsOnTest(120.0, 110.0, test, unk).failing() == says(
            ch06.BinsOnTest, 1
        )
    # saves 7, 2 of them from <unk>'s share, and exactly 5 at its training share
    assert ch06.BinsOnTest(120.0, 110.0, 103.0, 105.0).failing() == says(
        ch06.BinsOnTest, 2
    )


def test_timing_findings():
    agrees = ch06.SoftmaxTiming(
        {"full": [1.0, 20.0], "classes": [1.0, 4.0], "tree": [1.0, 1.99]}
    )
    assert agrees.failing() == []
    cases = [
        {"full": [2.0, 19.9], "tree": [1.0, 0.9]},  # the full one grows 9.95-fold
        {"tree": [1.0, 2.0]},  # a tenth of the full one's 20-fold
        {"tree": [3.0, 4.0]},  # as fast as the two-level one at 2^16 words
        {"classes": [0.5, 10.0]},  # as steep as the full one
        {"classes": [2.0, 3.98]},  # as flat as the tree
    ]
    for index, changed in enumerate(cases):
        case = replace(agrees, milliseconds={**agrees.milliseconds, **changed})
        assert case.failing() == says(ch06.SoftmaxTiming, index)
    slow_classes = {"full": [0.04, 0.8], "classes": [0.2, 0.8], "tree": [0.5, 0.75]}
    assert ch06.SoftmaxTiming(slow_classes).failing() == says(ch06.SoftmaxTiming, 2)


def test_importance_findings():
    agrees = {
        (3, False): (0.09, 0.03),
        (3, True): (0.1501, 0.05),
        (30, False): (0.03, 0.03),
        (30, True): (0.11, 0.01),
    }
    assert ch06.ImportanceErrors(agrees).failing() == []
    cases = [
        {(3, False): (0.0901, 0.03)},
        {(3, True): (0.15, 0.05)},  # 3 standard errors exactly
        {(30, True): (0.1201, 0.01)},  # 0.1501 < 1.25 × 0.1201
    ]
    for index, changed in enumerate(cases):
        result = ch06.ImportanceErrors({**agrees, **changed})
        assert result.failing() == says(ch06.ImportanceErrors, index)


# ---- the runs, at a tiny size --------------------------------------------------------

TOY = [
    s.split() for s in ("the cat sat on the mat", "the dog sat on the log", "a cat saw")
]


def test_smoothing_sweep_runs_and_picks_the_best_delta():
    words = sorted({w for s in TOY for w in s}) + [EOS, UNK]
    sweep = ch06.smoothing_sweep(TOY, TOY[:2], words, deltas=(0.0, 0.5))
    assert set(sweep.perplexities) == {1, 2, 3} and 0 <= sweep.rare_histories <= 1
    assert sweep.best(2) == min(sweep.perplexities[2].values())


def test_smoothed_baselines_run_on_the_sweep_counts():
    words = sorted({w for s in TOY for w in s}) + [EOS, UNK]
    sweep = ch06.smoothing_sweep(TOY[:2], TOY[2:], words, deltas=(0.5,))
    baselines = ch06.smoothed_baselines(sweep, TOY[2:], [["the", "cat", "sat"]])
    assert set(baselines.test) == {(m, n) for m in ch06.METHODS for n in (1, 2, 3)}
    assert baselines.test["add-δ", 2] == sweep.models[2].with_delta(0.5).perplexity(
        [["the", "cat", "sat"]]
    )
    assert [len(baselines.weights[n]) for n in (1, 2, 3)] == [2, 3, 4]
    assert all(len(baselines.discounts[n]) == n for n in (1, 2, 3))


def test_neural_runs_sampling_and_costs_run():
    vocabulary = Vocabulary.from_sentences(TOY, specials=(EOS, UNK))
    V = len(vocabulary)
    stories = [vocabulary.encode(s) + [vocabulary.index(EOS)] for s in TOY]
    batch = teacher_forcing_batch(stories, bos=V)
    runs = ch06w.train_neural_lms(
        {"train": batch, "valid": batch, "test": batch}, V, (0,)
    )
    assert runs.end_loss[0] < runs.start_loss[0]  # it learns the three sentences
    table = ch06.versus_counts(runs, _test_perplexities(kneser_ney=(1e3, 1e3, 1e3)))
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
    scheduled = ch06w.scheduled_sampling_drift(
        language, sentences, test_sentences, schedule, drifted, seeds=(0,)
    )
    assert scheduled.teacher_forced is drifted.curves
    assert list(scheduled.scheduled) == [0]


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
    tuned = ch06w.reinforce_clock_models(drifted, language, sentences, test_sentences)
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
