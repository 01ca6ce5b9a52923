"""Chapter 6's experiments: language models measured on the Lee corpus and on a toy
language.

* :func:`split_stories`: the training, validation and test stories, no held-out story
  a repeat or near-repeat of a training one.
* :func:`smoothing_sweep`: add-δ n-gram models chosen on validation perplexity, and
  why the trigram model loses to the bigram one (sparse histories; Chen & Goodman,
  1999); :func:`smoothed_baselines`: linear interpolation (weights fitted by EM on
  the validation stories), absolute discounting and Kneser-Ney, which fall back on
  shorter histories and reverse that order.
* :func:`load_neural_lms` and :func:`versus_counts`: the feed-forward neural
  language model of Bengio et al. (2003), trained for three seeds offline
  (:mod:`experiments.ch06_weights`) and compared with the n-gram models.
* :func:`embedding_neighbours`: what its input and output matrices learned, next to
  word2vec (Mikolov et al., 2013; Press & Wolf, 2017 on the output embedding).
* :func:`next_word_temperatures` and :func:`samples_at_temperatures`: sampling with a
  temperature.
* :func:`exposure_drift` and :func:`load_scheduled_sampling_drift`: exposure bias on
  a language whose true next-token distribution is known, with teacher forcing and
  with scheduled sampling (Bengio et al., 2015).
* :func:`load_reinforce_clock_models` and :func:`load_reinforce_without_baseline`:
  fine-tuning those models on a sequence-level reward by REINFORCE (Williams, 1992;
  Ranzato et al., 2016), with the leave-one-out baseline (Kool et al., 2019) and
  without one.
* The runs of :func:`load_neural_lms` and the three clock loaders are made offline by
  ``python -m experiments.ch06_weights neural-lms`` and ``... clock-runs``, which
  store them with their recipe; the loaders refuse a file of another recipe.
* :func:`layer_costs`, :func:`frequency_bins_on_test` and :func:`softmax_timing`:
  what the output layer costs, and what the two-level softmax (Goodman, 2001;
  Mikolov et al., 2011) and the binary tree (Morin & Bengio, 2005) save, counted and
  timed.
* :func:`importance_sampling_errors`: the bias of self-normalised importance
  sampling of the softmax gradient (Bengio & Senécal, 2008).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from experiments.findings import Finding, Result, run_arithmetic
from lib.part2_recurrent.char_lm import teacher_forcing_batch
from lib.corpus import Vocabulary
from lib.part3_words.decoding import sample, sampling_distribution
from lib.part3_words.embeddings import WordVectors
from lib.part3_words.lm import NeuralLM, drift, rollout, train_lm
from lib.part3_words.ngram import (
    EOS,
    KneserNeyModel,
    LinearInterpolation,
    NGramModel,
    perplexity,
)
from lib.part3_words.reinforce import bigram_precision, reinforce_fine_tune
from lib.part3_words.softmax_approx import (
    ClassSoftmax,
    equal_classes,
    frequency_classes,
    importance_sampled_loss,
)
from lib.part3_words.tree_softmax import balanced_tree, path_log_prob
from lib.part3_words.word2vec import Word2VecConfig, train_word2vec

SEEDS = (0, 1, 2)
DELTAS = (0.0, 1.0, 0.1, 0.03, 0.01, 0.003, 0.001)
CLOCK_BOS, CLOCK_PROMPT = 12, 3  # the clock language's start token and prompt length
# The neural language model of the Lee corpus and its training.
NEURAL_LM = {"context": 2, "embedding_dim": 32, "hidden_size": 32}
NEURAL_STEPS, NEURAL_BATCH, NEURAL_LR = 106, 4, 2e-2
# The clock models: steps of maximum likelihood and of REINFORCE.
CLOCK_STEPS, REINFORCE_STEPS = 200, 100
# The clock model and its teacher-forced training; REINFORCE's samples per step; the
# seeds of the samples that judge a model: its rollouts use the run's seed, the drift
# curves' samples DRIFT_SEED_OFFSET + seed.
CLOCK_MODEL = {"vocab_size": 12, "context": 3, "embedding_dim": 16, "hidden_size": 64}
# train_lm's batch order, and scheduled sampling's own samples, come from
# CLOCK_TRAIN["seed"] for every model: the models differ in their initial weights
# (torch.manual_seed(seed)).
CLOCK_TRAIN = {"batch_size": 128, "lr": 1e-2, "max_norm": 1.0, "seed": 0}
REINFORCE_BATCH = 64
DRIFT_SEED_OFFSET = 5


def _median(values):
    return sorted(values)[len(values) // 2]


def _all_seeds(per_seed) -> bool:
    """Whether a result holds a number for each of the chapter's seeds: its prose says
    "for every seed" of three, so a run of fewer seeds shows no such finding."""
    return len(per_seed) >= len(SEEDS)


# ---- n-gram models -----------------------------------------------------------------


def _five_grams(story):
    return {tuple(story[i : i + 5]) for i in range(len(story) - 4)}


def _near_copy(story, training_grams, share=0.5):
    """Whether more than ``share`` of ``story``'s distinct 5-grams occur in one story
    whose 5-gram set is among ``training_grams``: a repeat, or a repeat with a few
    words changed (a story of fewer than five words is compared whole)."""
    grams = _five_grams(story) or {tuple(story)}
    return any(len(grams & seen) > share * len(grams) for seen in training_grams)


def split_stories(stories, share=0.5):
    """Every fifth story for testing, every tenth from the second on for validation,
    the rest for training; a validation or test story that repeats a training story,
    exactly or nearly (more than ``share`` of its 5-grams in one training story; the
    corpus holds both), is dropped, so that no held-out story was trained on."""
    train = [s for i, s in enumerate(stories) if i % 5 and i % 10 != 1]
    training_grams = [_five_grams(s) or {tuple(s)} for s in train]
    valid = [s for s in stories[1::10] if not _near_copy(s, training_grams, share)]
    test = [s for s in stories[::5] if not _near_copy(s, training_grams, share)]
    return train, valid, test


@dataclass
class SmoothingSweep(Result):
    models: dict  # n -> NGramModel, counts of the training stories
    perplexities: dict  # n -> {δ: validation perplexity}
    rare_histories: float  # share of validation two-word histories seen at most once

    @property
    def best_delta(self):
        return {n: min(p, key=p.get) for n, p in self.perplexities.items()}

    def best(self, n):
        return self.perplexities[n][self.best_delta[n]]

    FINDINGS = (
        Finding(
            "At its best δ the trigram model has a higher validation perplexity than "
            "the bigram model at its best.",
            backs=("sparsity-discussion",),
            holds=lambda r: r.best(3) > r.best(2),
        ),
        Finding(
            "Most of the validation's distinct two-word histories were seen once or "
            "never in training.",
            backs=("sparsity-discussion",),
            holds=lambda r: r.rare_histories > 0.5,
        ),
    )


def smoothing_sweep(train, valid, words, deltas=DELTAS) -> SmoothingSweep:
    """Unigram, bigram and trigram models of ``train`` over ``words``, each scored on
    ``valid`` at every add-δ; and how often the validation's histories occur in
    training.
    """
    models, perplexities = {}, {}
    for n in (1, 2, 3):
        models[n] = NGramModel.fit(train, n, vocabulary=words)  # counts once
        perplexities[n] = {d: models[n].with_delta(d).perplexity(valid) for d in deltas}
    history_count = Counter(tuple(h) for *h, _ in models[3].test_ngrams(train))
    valid_histories = {tuple(h) for *h, _ in models[3].test_ngrams(valid)}
    rare = sum(history_count[h] <= 1 for h in valid_histories) / len(valid_histories)
    return SmoothingSweep(models, perplexities, rare)


METHODS = {
    "add-δ": "add-δ, best δ",
    "interpolation": "linear interpolation (EM)",
    "absolute": "absolute discounting",
    "kneser-ney": "interpolated Kneser–Ney",
}


@dataclass
class SmoothedBaselines(Result):
    valid: dict  # (method, n) -> validation perplexity
    test: dict  # (method, n) -> test perplexity
    weights: dict  # n -> λ_0 .. λ_n of linear interpolation
    discounts: dict  # n -> D_1 .. D_n of Kneser-Ney

    FINDINGS = (
        Finding(
            "With interpolation, absolute discounting and Kneser–Ney alike the "
            "trigram model has a lower test perplexity than the bigram model.",
            backs=("kneser-ney-discussion", "summary"),
            holds=lambda r: all(
                r.test[method, 3] < r.test[method, 2]
                for method in ("interpolation", "absolute", "kneser-ney")
            ),
        ),
        Finding(
            "At orders 2 and 3, interpolation, absolute discounting and Kneser–Ney "
            "each have a lower test perplexity than add-δ at its best δ.",
            backs=("kneser-ney-discussion",),
            holds=lambda r: all(
                r.test[method, n] < r.test["add-δ", n]
                for method in ("interpolation", "absolute", "kneser-ney")
                for n in (2, 3)
            ),
        ),
        Finding(
            "At orders 2 and 3 Kneser–Ney has the lowest test perplexity of the four.",
            backs=("kneser-ney-discussion",),
            holds=lambda r: all(
                r.test["kneser-ney", n] < r.test[method, n]
                for method in ("add-δ", "interpolation", "absolute")
                for n in (2, 3)
            ),
        ),
    )

    def best(self, method="kneser-ney"):  # the order with the lowest test perplexity
        return min(
            (n for m, n in self.test if m == method), key=lambda n: self.test[method, n]
        )


def smoothed_baselines(sweep: SmoothingSweep, valid, test, orders=(1, 2, 3)):
    """Each order's counts in ``sweep`` (of the training stories), smoothed four ways:
    add-δ at its best δ, linear interpolation with weights fitted by EM on ``valid``,
    absolute discounting and Kneser-Ney (discounts by Ney et al.'s estimate, from the
    training counts alone); each model's validation and test perplexity."""
    result = SmoothedBaselines({}, {}, {}, {})
    for n in orders:
        counted = sweep.models[n]
        interpolated = LinearInterpolation.from_counts(counted, valid)
        kneser_ney = KneserNeyModel.from_counts(counted)
        models = {
            "add-δ": counted.with_delta(sweep.best_delta[n]),
            "interpolation": interpolated,
            "absolute": KneserNeyModel.from_counts(counted, continuation=False),
            "kneser-ney": kneser_ney,
        }
        for method, model in models.items():
            result.valid[method, n] = model.perplexity(valid)
            result.test[method, n] = model.perplexity(test)
        result.weights[n] = interpolated.weights
        result.discounts[n] = kneser_ney.discounts
    return result


# ---- the neural language model -------------------------------------------------------


@dataclass
class NeuralLMRuns(Result):
    models: dict  # seed -> NeuralLM
    start_loss: list[float]  # (seeds,) nats per token, first step
    end_loss: list[float]  # (seeds,) mean of the last 10 steps
    valid_perplexity: list[float]  # (seeds,)
    test_perplexity: list[float]  # (seeds,)

    FINDINGS = (
        Finding(
            "The training loss falls by more than 2 nats per token, for every seed.",
            backs=("table",),
            holds=lambda r: _all_seeds(r.start_loss)
            and min(s - e for s, e in zip(r.start_loss, r.end_loss)) > 2,
        ),
    )


@dataclass
class VersusCounts(Result):
    neural_test: list[float]  # (seeds,) test perplexity of the neural models
    ngram_test: dict  # (method, n) -> test perplexity, as SmoothedBaselines.test

    @property
    def add_delta(self):  # the best add-δ model's test perplexity
        return min(p for (method, _), p in self.ngram_test.items() if method == "add-δ")

    @property
    def factors(self):  # how many times better than the Kneser-Ney trigram, per seed
        return [self.ngram_test["kneser-ney", 3] / p for p in self.neural_test]

    FINDINGS = (
        Finding(
            "The neural model beats every add-δ model on the test stories, for every "
            "seed.",
            backs=("table-discussion",),
            holds=lambda r: _all_seeds(r.neural_test)
            and max(r.neural_test) < r.add_delta,
        ),
        Finding(
            "The Kneser–Ney trigram model beats the neural model on the test stories, "
            "for every seed.",
            backs=("table-discussion",),
            holds=lambda r: _all_seeds(r.neural_test) and max(r.factors) < 1,
        ),
    )


def versus_counts(runs: NeuralLMRuns, ngram_test) -> VersusCounts:
    """The neural models' test perplexities next to the n-gram models'."""
    return VersusCounts(list(runs.test_perplexity), dict(ngram_test))


@dataclass
class EmbeddingNeighbours(Result):
    shares: dict  # view -> (seeds,) share of class words with a same-class neighbour
    chance: float  # a random neighbour is in the same class this often
    moved: list[float]  # (seeds,) |M - M0| / |M0|
    said_in_W: list[set]  # (seeds,) the five nearest neighbours of "said" in W
    views: dict  # seed -> view -> WordVectors

    def median(self, view):
        return _median(self.shares[view])

    FINDINGS = (
        Finding(
            "The rows of M have a same-class nearest neighbour for at most 10% of the "
            "class words, for every seed.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: _all_seeds(r.shares["embedding M"])
            and max(r.shares["embedding M"]) <= 0.10,
        ),
        Finding(
            "The rows of W do so for at least 30%, for every seed.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: _all_seeds(r.shares["output W"])
            and min(r.shares["output W"]) >= 0.30,
        ),
        Finding(
            "The learned part M - M0 does at least 3 times as well as M itself, in the "
            "median over seeds.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: r.median("learned part M - M0")
            >= 3 * r.median("embedding M"),
        ),
        Finding(
            "But not on every seed: on some seed M - M0 does less than twice as well "
            "as M.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: any(
                learned < 2 * read
                for learned, read in zip(
                    r.shares["learned part M - M0"], r.shares["embedding M"]
                )
            ),
        ),
        Finding(
            "Word2vec does so for at least 20%, for every seed.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: _all_seeds(r.shares["word2vec (CBOW)"])
            and min(r.shares["word2vec (CBOW)"]) >= 0.20,
        ),
        Finding(
            "Training moved M by less than half of its initial norm, for every seed.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: _all_seeds(r.moved) and max(r.moved) < 0.5,
        ),
        Finding(
            "W has at least as many same-class neighbours as word2vec, in the median "
            "over seeds.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: r.median("output W") >= r.median("word2vec (CBOW)"),
        ),
        Finding(
            "'says', 'was' and 'had' are among the five nearest neighbours of 'said' "
            "in W, for every seed.",
            backs=("lm-embeddings-discussion",),
            holds=lambda r: _all_seeds(r.said_in_W)
            and all({"says", "was", "had"} <= found for found in r.said_in_W),
        ),
    )


def embedding_neighbours(runs: NeuralLMRuns, vocabulary, train, label, seeds=SEEDS):
    """For each seed: the share of the class words (``label``: word -> class) whose
    nearest neighbour is in their class, in the embedding M, in what training added to
    it, in the output matrix W and in CBOW word2vec vectors trained on the same stories.
    """
    V = len(vocabulary)
    w2v_vocabulary = Vocabulary.from_sentences(train, min_count=2)  # without </s>
    result = EmbeddingNeighbours({}, 0.0, [], [], {})
    for seed in seeds:
        torch.manual_seed(seed)  # the same start as in training
        start = NeuralLM(V, context=2, embedding_dim=32, hidden_size=32)
        start = start.embedding.weight.detach()
        M = runs.models[seed].embedding.weight.detach()[:V]  # (V, 32): no <s> row
        result.moved.append(float((M - start[:V]).norm() / start[:V].norm()))
        config = Word2VecConfig(
            architecture="cbow",
            vector_size=32,
            window=2,
            epochs=10,
            alpha=0.05,
            seed=seed,
        )
        views = result.views[seed] = {
            "embedding M": WordVectors(M, vocabulary),
            "learned part M - M0": WordVectors(M - start[:V], vocabulary),
            "output W": WordVectors(
                runs.models[seed].output.weight.detach(), vocabulary
            ),
            "word2vec (CBOW)": train_word2vec(train, w2v_vocabulary, config)[
                0
            ].word_vectors(),
        }
        scores = {
            name: vectors.evaluate_word_classes(label)
            for name, vectors in views.items()
        }
        for name, score in scores.items():
            result.shares.setdefault(name, []).append(score.same_class)
        said = views["output W"].most_similar(["said"], k=5)
        result.said_in_W.append({word for word, _ in said})
    result.chance = scores["embedding M"].chance
    return result


# ---- sampling ------------------------------------------------------------------------


@dataclass
class NextWordTemperatures(Result):
    distributions: dict  # T -> (V,) p(x_1 | <s>) at temperature T

    @property
    def perplexities(self):
        return {
            t: math.exp(-(p * p.log()).sum()) for t, p in self.distributions.items()
        }

    FINDINGS = (
        Finding(
            "The distribution's perplexity grows with the temperature.",
            backs=("sampling",),
            holds=lambda r: all(
                r.perplexities[low] < r.perplexities[high]
                for low, high in zip(sorted(r.perplexities), sorted(r.perplexities)[1:])
            ),
        ),
    )


def next_word_temperatures(model, bos, temperatures=(0.5, 1.0, 2.0)):
    """The model's distribution of the first word, at each temperature (ascending)."""
    start = model.next_token_log_probs(torch.tensor([[bos]]))[0]  # p(x_1 | <s>)
    return NextWordTemperatures(
        {t: sampling_distribution(start, t) for t in temperatures}
    )


@dataclass
class TemperatureSamples(Result):
    texts: dict  # T -> the sampled sentences
    mean_log_prob: dict  # T -> per token, under the model itself (T = 1)

    FINDINGS = (
        Finding(
            "At T = 0.5 the sampled words are more probable under the model than at "
            "T = 1.5.",
            backs=("samples",),
            holds=lambda r: r.mean_log_prob[0.5] > r.mean_log_prob[1.5],
        ),
    )


def samples_at_temperatures(model, vocabulary, bos, temperatures=(0.5, 1.0, 1.5)):
    """Two samples of at most 14 tokens at each temperature, and their mean
    log-probability."""
    generator = torch.Generator().manual_seed(1)
    result = TemperatureSamples({}, {})
    for temperature in temperatures:
        drawn = sample(
            model.next_token_log_probs, bos, vocabulary.index(EOS), max_len=14,
            num_samples=2, temperature=temperature, generator=generator,
        )  # fmt: skip
        result.texts[temperature] = [
            " ".join(vocabulary.words[i] for i in tokens) for tokens, _ in drawn
        ]
        ids = [torch.tensor(tokens) for tokens, _ in drawn]
        prefixes = nn.utils.rnn.pad_sequence(
            [torch.cat([torch.tensor([bos]), t[:-1]]) for t in ids], batch_first=True
        )
        with torch.no_grad():
            log_p = torch.log_softmax(model(prefixes), dim=-1)  # (2, t, V)
        result.mean_log_prob[temperature] = float(
            torch.cat(
                [
                    log_p[i, : len(t)].gather(1, t[:, None])[:, 0]
                    for i, t in enumerate(ids)
                ]
            ).mean()
        )
    return result


# ---- exposure bias on the clock language ---------------------------------------------


def _growth(own):  # the KL of the last four positions over that of the first two
    return float(own[-4:].mean() / own[:2].mean())


def _counting_model(inputs, targets, schedule, seed, steps=CLOCK_STEPS):
    torch.manual_seed(seed)
    model = NeuralLM(**CLOCK_MODEL)
    train_lm(
        model, inputs, targets, steps=steps, schedule=schedule, prompt=CLOCK_PROMPT,
        **CLOCK_TRAIN,
    )  # fmt: skip
    return model


def _drift_runs(
    language, sentences, test_sentences, schedule, seeds, steps=CLOCK_STEPS
):
    """seed -> (model, (KL after data, KL after own samples) at each position)."""
    inputs, targets = teacher_forcing_batch(sentences.tolist(), bos=CLOCK_BOS)
    runs = {}
    for seed in seeds:
        model = _counting_model(inputs, targets, schedule, seed, steps)
        curves = drift(
            model, language, test_sentences, bos=CLOCK_BOS, prompt=CLOCK_PROMPT,
            generator=torch.Generator().manual_seed(DRIFT_SEED_OFFSET + seed),
        )  # fmt: skip
        runs[seed] = model, curves
    return runs


@dataclass
class ExposureDrift(Result):
    models: dict  # seed -> NeuralLM trained by teacher forcing
    curves: dict  # seed -> (on data, on own): (positions,) KL(true ‖ model)

    @property
    def worst_on_data(self):
        return max(float(on_data.max()) for on_data, _ in self.curves.values())

    @property
    def growth(self):  # (seeds,)
        return [_growth(own) for _, own in self.curves.values()]

    FINDINGS = (
        Finding(
            "After real prefixes the KL stays below 0.03 at every position, for every "
            "seed.",
            backs=("exposure-discussion",),
            holds=lambda r: _all_seeds(r.curves) and r.worst_on_data < 0.03,
        ),
        Finding(
            "After its own samples the KL of the last four positions is at least 3 "
            "times that of the first two, for every seed.",
            backs=("exposure-discussion",),
            holds=lambda r: _all_seeds(r.growth) and min(r.growth) >= 3,
        ),
    )


def exposure_drift(
    language, sentences, test_sentences, seeds=SEEDS, steps=CLOCK_STEPS
) -> ExposureDrift:
    """Teacher-forced models of the clock language, one per seed, and their KL error
    after real and after their own prefixes at each position
    (:func:`lib.part3_words.lm.drift`)."""
    runs = _drift_runs(language, sentences, test_sentences, None, seeds, steps)
    return ExposureDrift(
        {seed: model for seed, (model, _) in runs.items()},
        {seed: curves for seed, (_, curves) in runs.items()},
    )


@dataclass
class ScheduledDrift(Result):
    teacher_forced: dict  # seed -> (on data, on own), as ExposureDrift.curves
    scheduled: dict  # seed -> (on data, on own), trained with scheduled sampling

    def mean_own(self, curves):  # (seeds,) mean KL after own samples
        return [float(own.mean()) for _, own in curves.values()]

    FINDINGS = (
        Finding(
            "Scheduled sampling's error after its own samples still grows at least "
            "3-fold along the sentence, for every seed.",
            backs=("scheduled-discussion",),
            holds=lambda r: _all_seeds(r.scheduled)
            and min(_growth(own) for _, own in r.scheduled.values()) >= 3,
        ),
        Finding(
            "Scheduled sampling's mean error after its own samples is nowhere more "
            "than 10% below teacher forcing's (same seed).",
            backs=("scheduled-discussion",),
            holds=lambda r: _all_seeds(r.scheduled)
            and all(
                ss >= 0.9 * tf
                for ss, tf in zip(r.mean_own(r.scheduled), r.mean_own(r.teacher_forced))
            ),
        ),
    )


# ---- REINFORCE on the clock models ---------------------------------------------------


def _judge_clock_model(model, language, test_sentences, seed, curves=None):
    """Chapter 6's four numbers for a model of the clock language: the reward
    (:func:`lib.part3_words.reinforce.bigram_precision`) of its own continuations of the
    test sentences' prompts (:func:`lib.part3_words.lm.rollout`, seeded with ``seed``),
    the test perplexity under teacher forcing, and the mean KL errors of
    :func:`lib.part3_words.lm.drift` after real and after own prefixes (its samples
    seeded with ``DRIFT_SEED_OFFSET + seed``), unless
    its ``curves`` are given."""
    inputs, targets = teacher_forcing_batch(test_sentences.tolist(), bos=CLOCK_BOS)
    prompts = test_sentences[:, :CLOCK_PROMPT]  # (N, prompt)
    own_generator = torch.Generator().manual_seed(seed)
    length = test_sentences.shape[1]
    own = rollout(model, prompts, length, CLOCK_BOS, own_generator)  # (N, L)
    with torch.no_grad():
        log_p = torch.log_softmax(model(inputs).double(), dim=-1)  # (N, L, V)
    if curves is None:
        curves = drift(
            model, language, test_sentences, bos=CLOCK_BOS, prompt=CLOCK_PROMPT,
            generator=torch.Generator().manual_seed(DRIFT_SEED_OFFSET + seed),
        )  # fmt: skip
    on_data, on_own = curves
    reward = bigram_precision(own, test_sentences, CLOCK_PROMPT)  # (N,)
    return {
        "reward (bigram precision)": float(reward.mean()),
        "test perplexity": perplexity(log_p.gather(2, targets[..., None]).flatten()),
        "KL after data": float(on_data.mean()),
        "KL after own": float(on_own.mean()),
    }


def _change(before, after):  # key -> (seeds,) after - before, any seeds
    keys = next(iter(before.values()), {})
    return {key: [after[s][key] - before[s][key] for s in before] for key in keys}


_BOTH = ("reinforce-clock-discussion", "ex-lm-reinforce-run-solution")


@dataclass
class ClockFineTuning(Result):
    before: dict  # seed -> the four numbers, after maximum likelihood
    after: dict  # seed -> the four numbers, after REINFORCE

    @property
    def change(self):
        return _change(self.before, self.after)

    FINDINGS = (
        Finding(
            "REINFORCE raises the reward of the model's own continuations, for every "
            "seed.",
            backs=_BOTH,
            holds=lambda r: _all_seeds(r.before)
            and min(r.change["reward (bigram precision)"]) > 0,
        ),
        Finding(
            "It raises the perplexity of the test sentences, for every seed.",
            backs=_BOTH,
            holds=lambda r: _all_seeds(r.before)
            and min(r.change["test perplexity"]) > 0,
        ),
        Finding(
            "It raises the KL error after real prefixes, for every seed.",
            backs=_BOTH,
            holds=lambda r: _all_seeds(r.before) and min(r.change["KL after data"]) > 0,
        ),
        Finding(
            "It lowers the KL error after the model's own prefixes, for every seed.",
            backs=_BOTH,
            holds=lambda r: _all_seeds(r.before) and max(r.change["KL after own"]) < 0,
        ),
    )


@dataclass
class WithoutBaseline(Result):
    at_3e3: dict  # key -> (seeds,) change at lr=3e-3, no baseline
    at_1e3: dict  # key -> (seeds,) change at lr=1e-3, no baseline

    @staticmethod
    def improved(change):
        """How many seeds raised the reward, lowered the error after own prefixes,
        and both."""
        rises = [gain > 0 for gain in change["reward (bigram precision)"]]
        falls = [fall < 0 for fall in change["KL after own"]]
        return sum(rises), sum(falls), sum(r and f for r, f in zip(rises, falls))

    FINDINGS = (
        Finding(
            "Without a baseline the seeds go different ways: the reward or the error "
            "after the model's own prefixes improves on some seeds and not on others.",
            backs=("reinforce-no-baseline", "ex-lm-reinforce-run-solution"),
            holds=lambda r: any(
                0 < count < len(r.at_3e3["KL after own"])
                for count in r.improved(r.at_3e3)[:2]
            ),
        ),
        Finding(
            "At lr=1e-3 without a baseline the reward rises by more than 0.002 and the "
            "error after own prefixes falls by more than 0.01, for every seed.",
            backs=("reinforce-no-baseline", "ex-lm-reinforce-run-solution"),
            holds=lambda r: _all_seeds(r.at_1e3["KL after own"])
            and min(r.at_1e3["reward (bigram precision)"]) > 0.002
            and max(r.at_1e3["KL after own"]) < -0.01,
        ),
    )


# ---- the cost of the softmax ---------------------------------------------------------


@dataclass
class LayerCosts(Result):
    hidden_madds: int  # multiply-adds per token of the hidden layer
    output_madds: int  # and of the output layer

    FINDINGS = (
        Finding(
            "The output layer takes more than 10 times the multiply-adds of the hidden "
            "layer.",
            backs=("softmax-cost",),
            holds=lambda r: r.output_madds > 10 * r.hidden_madds,
        ),
    )


def layer_costs(model) -> LayerCosts:
    """Multiply-adds per token of a :class:`lib.part3_words.lm.NeuralLM`'s hidden and
    output layers."""
    return LayerCosts(model.hidden.weight.numel(), model.output.weight.numel())


@dataclass
class BinsOnTest(Result):
    equal_test: float  # dot products per test token, equal classes
    frequency_train: float  # frequency bins, per training token
    frequency_test: float  # frequency bins, per test token
    # frequency bins on the test tokens, <unk> at its training share
    unk_as_in_training: float

    @property
    def saved(self):  # by the frequency bins on the test tokens, against training
        return self.frequency_train - self.frequency_test

    @property
    def saved_by_unk(self):
        return self.unk_as_in_training - self.frequency_test

    FINDINGS = (
        Finding(
            "On the test tokens the frequency bins cost less than equal classes, and "
            "less than on the training tokens.",
            backs=("e0331d46", "ex-lm-classes-solution"),
            holds=lambda r: r.frequency_test < r.equal_test and r.saved > 0,
        ),
        Finding(
            "<unk>'s larger test share explains between a fifth and a third of the dot "
            "products saved.",
            backs=("e0331d46", "ex-lm-classes-solution"),
            holds=lambda r: 0.2 * r.saved < r.saved_by_unk < r.saved / 3,
        ),
        Finding(
            "With <unk> at its training share the bins still save more than 5 dot "
            "products on the test tokens.",
            backs=("e0331d46", "ex-lm-classes-solution"),
            holds=lambda r: r.unk_as_in_training < r.frequency_train - 5,
        ),
    )


def frequency_bins_on_test(cost, word_counts, test_ids, unk, unk_train_share, k=57):
    """The frequency bins' cost on the test tokens (``cost[kind, part]``, dot
    products per token) next to what it would be had ``<unk>`` its share of the
    training tokens."""
    bins = torch.as_tensor(frequency_classes(word_counts, k))
    token_cost = k + torch.bincount(bins, minlength=k).double()[bins[test_ids]]
    is_unk = test_ids == unk
    unk_as_in_training = (
        unk_train_share * token_cost[is_unk].mean()
        + (1 - unk_train_share) * token_cost[~is_unk].mean()
    )
    return BinsOnTest(
        float(cost["equal", "test"]),
        float(cost["frequency", "train"]),
        float(cost["frequency", "test"]),
        float(unk_as_in_training),
    )


def _time_per_step(
    method, vocab_size, hidden_size=64, batch_size=32, repeats=5, seed=0
):
    """CPU seconds (``time.process_time``, which other programs do not inflate as they
    do wall time) of the output layer's loss and its gradients: the fastest of
    ``repeats`` runs, the least disturbed.

    ``"full"``: ``F.cross_entropy`` over all ``|V|`` scores, with a dense gradient.
    ``"tree"``: a balanced binary tree
    (:func:`lib.part3_words.tree_softmax.path_log_prob`); ``"classes"``:
    :class:`lib.part3_words.softmax_approx.ClassSoftmax` with ``sqrt(|V|)`` equal
    classes; both with sparse gradients holding only the rows the batch touched, as a
    trainer with sparse updates computes them (a dense one would cost in proportion to
    ``|V|``).
    """
    if method not in ("full", "tree", "classes"):
        raise ValueError(
            f"method must be 'full', 'tree' or 'classes'; found {method!r}"
        )
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(
        batch_size, hidden_size, generator=generator, requires_grad=True
    )
    targets = torch.randint(vocab_size, (batch_size,), generator=generator)  # (B,)
    if method == "full":
        layer = nn.Linear(hidden_size, vocab_size)
        parameters = [hidden, *layer.parameters()]

        def loss_fn():
            return F.cross_entropy(layer(hidden), targets)

    elif method == "tree":
        tree = balanced_tree(vocab_size)
        tree.padded()  # built once, outside the timing
        noise = torch.randn(vocab_size - 1, hidden_size, generator=generator)
        node_vectors = (0.1 * noise).requires_grad_()  # (V - 1, D)
        parameters = [hidden, node_vectors]

        def loss_fn():
            log_p = path_log_prob(hidden, node_vectors, tree, targets, sparse=True)
            return -log_p.mean()

    else:
        classes = equal_classes(vocab_size, max(1, round(math.sqrt(vocab_size))))
        layer = ClassSoftmax(hidden_size, classes, sparse=True)
        parameters = [hidden, *layer.parameters()]

        def loss_fn():
            return -layer.log_prob(hidden, targets).mean()

    seconds = []
    for _ in range(repeats + 1):  # the first run warms up
        start = time.process_time()
        torch.autograd.grad(loss_fn(), parameters)  # returned, not put in .grad
        seconds.append(time.process_time() - start)
    return min(seconds[1:])


@dataclass
class SoftmaxTiming(Result):
    milliseconds: dict  # method -> (sizes,) per forward and backward step

    def growth(self, method):  # from the smallest vocabulary to the largest
        return self.milliseconds[method][-1] / self.milliseconds[method][0]

    FINDINGS = (
        Finding(
            "The full softmax's time grows at least 10-fold from 2^10 to 2^16 words.",
            backs=("timing-discussion",),
            holds=lambda r: r.growth("full") >= 10,
        ),
        Finding(
            "The tree's time grows less than a tenth as much.",
            backs=("timing-discussion",),
            holds=lambda r: r.growth("tree") < r.growth("full") / 10,
        ),
        Finding(
            "At 2^16 words the tree is the fastest, the two-level softmax second, the "
            "full softmax the slowest.",
            backs=("timing-discussion",),
            holds=lambda r: r.milliseconds["tree"][-1]
            < r.milliseconds["classes"][-1]
            < r.milliseconds["full"][-1],
        ),
        Finding(
            "The two-level softmax grows more slowly than the full one.",
            backs=("timing-discussion",),
            holds=lambda r: r.growth("classes") < r.growth("full"),
        ),
        Finding(
            "The two-level softmax's time grows faster than the tree's.",
            backs=("timing-discussion",),
            holds=lambda r: r.growth("tree") < r.growth("classes"),
        ),
    )


def softmax_timing(sizes, repeats=5, methods=("full", "classes", "tree")):
    """CPU milliseconds of one forward and backward step of each output layer, at each
    vocabulary size."""
    return SoftmaxTiming(
        {
            method: [
                1000 * _time_per_step(method, size, repeats=repeats) for size in sizes
            ]
            for method in methods
        }
    )


# ---- importance sampling -------------------------------------------------------------


@dataclass
class ImportanceErrors(Result):
    errors: dict  # (K, self-normalised) -> (error of the mean, 1 s.e.), relative

    @property
    def ks(self):
        return sorted({k for k, _ in self.errors})

    FINDINGS = (
        Finding(
            "With the exact Z the error of the mean is within 3 standard errors, for "
            "every K.",
            backs=("importance-discussion",),
            holds=lambda r: all(
                r.errors[k, False][0] <= 3 * r.errors[k, False][1] for k in r.ks
            ),
        ),
        Finding(
            "Self-normalised, the error is more than 3 standard errors at K = 3.",
            backs=("importance-discussion",),
            holds=lambda r: r.errors[3, True][0] > 3 * r.errors[3, True][1],
        ),
        Finding(
            "Self-normalised, the error shrinks as K grows, by a fifth or more at each "
            "step.",
            backs=("importance-discussion",),
            holds=lambda r: all(
                r.errors[small, True][0] > 1.25 * r.errors[large, True][0]
                for small, large in zip(r.ks, r.ks[1:])
            ),
        ),
    )


def _mean_estimate(
    context, weight, bias, target, proposal, num_samples, self_normalised
):
    """The mean of independent importance-sampled gradients with respect to the context,
    and its standard error."""
    repeats = 60_000 // num_samples  # independent estimates, as many as memory allows
    rows = context.expand(repeats, -1).clone().requires_grad_()  # the same context
    loss = importance_sampled_loss(
        rows, weight, bias, torch.full((repeats,), target), proposal, num_samples,
        torch.Generator().manual_seed(num_samples), self_normalised,
    )  # fmt: skip
    estimates = torch.autograd.grad(loss, rows)[0] * repeats  # (R, D): one per row
    return estimates.mean(0), estimates.std(0).norm() / math.sqrt(repeats)


def importance_sampling_errors(
    weight, bias, context, target, proposal, ks=(3, 30, 300)
):
    """How far the mean of many importance-sampled gradient estimates lies from the
    exact gradient, with the exact Z and self-normalised, for each number of samples K.
    """
    h = context.clone().requires_grad_()
    logits = h @ weight.T + bias
    exact = torch.autograd.grad(F.cross_entropy(logits, torch.tensor([target])), h)[0]
    errors = {}
    for k in ks:
        for self_normalised in (False, True):
            mean, noise = _mean_estimate(
                context, weight, bias, target, proposal, k, self_normalised
            )
            errors[k, self_normalised] = (
                float((mean - exact[0]).norm() / exact.norm()),
                float(noise / exact.norm()),
            )
    return ImportanceErrors(errors)


# ---- the runs made offline -----------------------------------------------------------
# ``python -m experiments.ch06_weights neural-lms`` and ``... clock-runs`` make
# the chapter's longest runs once, on one thread, and store them with their recipe (what
# they depend on, the data by its SHA-256) and the arithmetic that made them; the
# chapter loads them through loaders that refuse any other recipe.

NEURAL_LMS_PATH = Path(__file__).with_name("weights") / "ch06_neural_lms.pt"
CLOCK_RUNS_PATH = Path(__file__).with_name("weights") / "ch06_clock_runs.pt"
CLOCK_LR, CLOCK_BASELINE = 3e-3, "leave-one-out"  # the chapter's REINFORCE run
NO_BASELINE_LRS = (3e-3, 1e-3)  # reinforce_without_baseline's two runs


def _sha256(*tensors) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def _neural_recipe(batches, vocab_size, seeds, steps=NEURAL_STEPS) -> dict:
    """What :func:`experiments.ch06_weights.train_neural_lms` depends on: the model,
    its training, the seeds and the three parts' inputs and targets (their
    SHA-256)."""
    return {
        "model": dict(NEURAL_LM, vocab_size=vocab_size),
        "training": {"steps": steps, "batch_size": NEURAL_BATCH, "lr": NEURAL_LR},
        "seeds": list(seeds),
        "batches_sha256": {part: _sha256(*batches[part]) for part in sorted(batches)},
    }


def _clock_recipe(
    language, sentences, test_sentences, schedule, seeds,
    steps=CLOCK_STEPS, reinforce_steps=REINFORCE_STEPS,
) -> dict:  # fmt: skip
    """What the clock runs depend on: the language, its training and test sentences
    (their SHA-256), the scheduled-sampling schedule, the seeds (of the models and of
    the samples that judge them), the model, and the steps, batches and rates of every
    run."""
    return {
        "language": {
            "hours": language.hours,
            "steps": list(language.steps),
            "length": language.length,
            "typo": language.typo,
        },
        "sentences_sha256": _sha256(sentences),
        "test_sentences_sha256": _sha256(test_sentences),
        "schedule": {
            "kind": schedule.kind,
            "k": schedule.k,
            "c": schedule.c,
            "minimum": schedule.minimum,
        },
        "seeds": list(seeds),
        "drift_seed_offset": DRIFT_SEED_OFFSET,
        "prompt": CLOCK_PROMPT,
        "bos": CLOCK_BOS,
        "model": dict(CLOCK_MODEL),
        "steps": steps,
        "training": dict(CLOCK_TRAIN),
        # the code that trains, samples and scores: an edit to it makes the file stale
        "code_sha256": {
            fn.__name__: hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()
            for fn in (
                NeuralLM,
                train_lm,
                drift,
                rollout,
                reinforce_fine_tune,
                bigram_precision,
            )
        },
        "reinforce": {
            "steps": reinforce_steps,
            "batch_size": REINFORCE_BATCH,
            "lr": CLOCK_LR,
            "baseline": CLOCK_BASELINE,
            "no_baseline_lrs": list(NO_BASELINE_LRS),
        },
    }


def _load(path: Path, recipe: dict, command: str) -> dict:
    """The file ``command`` stored at ``path``, after checking its recipe."""
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"no stored runs at {path}; make them with "
            f"python -m experiments.ch06_weights {command}"
        )
    saved = torch.load(path, weights_only=True)
    differ = [key for key in recipe if saved["recipe"].get(key) != recipe[key]]
    if differ:
        raise ValueError(
            f"the runs stored in {path} differ from this recipe in {differ}; "
            f"run python -m experiments.ch06_weights {command} again"
        )
    return saved


def load_neural_lms(
    batches, vocab_size, seeds=SEEDS, path: Path = NEURAL_LMS_PATH
) -> NeuralLMRuns:
    """What ``python -m experiments.ch06_weights neural-lms`` stored: the models and
    numbers of :func:`experiments.ch06_weights.train_neural_lms` for these
    ``batches``, ``vocab_size`` and ``seeds``, after checking that they are its
    recipe."""
    saved = _load(path, _neural_recipe(batches, vocab_size, seeds), "neural-lms")
    runs = NeuralLMRuns({}, *(list(saved["runs"][name]) for name in _NEURAL_FIELDS))
    for seed, state in zip(seeds, saved["models"]):
        model = NeuralLM(vocab_size, **NEURAL_LM)
        model.load_state_dict(state)
        runs.models[seed] = model
    return runs


_NEURAL_FIELDS = ("start_loss", "end_loss", "valid_perplexity", "test_perplexity")


def _load_clock_runs(language, sentences, test_sentences, schedule, seeds, path):
    recipe = _clock_recipe(language, sentences, test_sentences, schedule, seeds)
    return _load(path, recipe, "clock-runs")["runs"]


def load_scheduled_sampling_drift(
    language, sentences, test_sentences, schedule, teacher_forced: ExposureDrift,
    seeds=SEEDS, path: Path = CLOCK_RUNS_PATH,
) -> ScheduledDrift:  # fmt: skip
    """:func:`experiments.ch06_weights.scheduled_sampling_drift` as ``clock-runs``
    stored it, next to the live ``teacher_forced`` curves, after checking that these
    are the teacher-forced models the file's runs were made with (bit for bit on the
    arithmetic that made the file, within 5 % elsewhere)."""
    recipe = _clock_recipe(language, sentences, test_sentences, schedule, seeds)
    saved = _load(path, recipe, "clock-runs")
    same_arithmetic = run_arithmetic() == saved["arithmetic"]
    for seed in seeds:
        for live, stored in zip(
            teacher_forced.curves[seed], saved["runs"]["teacher_forced"][seed]
        ):
            if not (
                torch.equal(live, stored)
                if same_arithmetic
                else torch.allclose(live, stored, rtol=0.05, atol=1e-3)
            ):
                raise ValueError(
                    f"the teacher-forced curves of seed {seed} differ from those the "
                    f"runs in {path} started from (largest difference "
                    f"{float((live - stored).abs().max()):.3g}); make the runs again "
                    "with "
                    "python -m experiments.ch06_weights clock-runs"
                )
    return ScheduledDrift(teacher_forced.curves, saved["runs"]["scheduled"])


def load_reinforce_clock_models(
    language, sentences, test_sentences, schedule, seeds=SEEDS,
    lr=CLOCK_LR, baseline=CLOCK_BASELINE, path: Path = CLOCK_RUNS_PATH,
) -> ClockFineTuning:  # fmt: skip
    """:func:`experiments.ch06_weights.reinforce_clock_models` as ``clock-runs``
    stored it (only at the stored ``lr`` and ``baseline``)."""
    if (lr, baseline) != (CLOCK_LR, CLOCK_BASELINE):
        raise ValueError(
            f"the stored REINFORCE run has lr={CLOCK_LR} and baseline="
            f"{CLOCK_BASELINE!r}; found lr={lr} and baseline={baseline!r}"
        )
    runs = _load_clock_runs(language, sentences, test_sentences, schedule, seeds, path)
    return ClockFineTuning(runs["before"], runs["after"])


def load_reinforce_without_baseline(
    language, sentences, test_sentences, schedule, seeds=SEEDS,
    path: Path = CLOCK_RUNS_PATH,
) -> WithoutBaseline:  # fmt: skip
    """:func:`experiments.ch06_weights.reinforce_without_baseline` as ``clock-runs``
    stored it."""
    runs = _load_clock_runs(language, sentences, test_sentences, schedule, seeds, path)
    return WithoutBaseline(runs["at_3e3"], runs["at_1e3"])
