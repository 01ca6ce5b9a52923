"""Chapter 5's experiments: what one step of each word2vec objective costs, the training
runs of skip-gram and CBOW against gensim, and the evaluation of the vectors they learn.

* :func:`step_times`: CPU time of one SGD step with the full softmax, negative sampling
  and the hierarchical softmax on a Huffman tree, on growing Zipfian vocabularies: why
  Mikolov et al. (2013b) replaced the softmax.
* :func:`train_runs`: skip-gram (seed 1) and CBOW (seeds 1 to 3), ours
  (:func:`lib.part3_words.word2vec.train_word2vec`) and gensim's (Řehůřek and Sojka
  2010), on gensim's stemmed sample of Wikipedia with word2vec.c's defaults (Mikolov et
  al. 2013a, 2013b); :attr:`Training.times` compares their CPU times.
* :func:`nearest_neighbours`, :func:`analogies`, :func:`analogy_accuracy` and
  :func:`section_accuracy`: neighbours and 3CosAdd analogies (Levy and Goldberg 2014) on
  word2vec's ``questions-words.txt`` (Mikolov et al. 2013a).
* :func:`word_similarity`: Spearman's ρ with WordSim-353 (Finkelstein et al. 2002) and
  SimLex-999 (Hill et al. 2015); :func:`vector_lengths`: frequent words' longer
  vectors.
* :func:`polysemy`: the neighbours of words with several senses.
* :func:`count_vectors`: shifted PPMI factorised by SVD (Levy and Goldberg 2014b; Levy,
  Goldberg and Dagan 2015) on the same corpus, window and subsampling, evaluated beside
  the word2vec runs, with 3CosAdd and 3CosMul (Levy and Goldberg 2014, section 6).
* ``python -m experiments.ch05_word2vec runs`` makes the chapter's word2vec runs and
  PPMI-SVD scores offline (:func:`_make_runs`, on one thread) and stores our vectors,
  their losses, every run's CPU seconds and the SVD scores with their recipe in
  :data:`RUNS_PATH`; :func:`load_runs` reads them for the chapter, refusing another
  recipe, and trains gensim's runs again.

Every result declares the findings chapter 5 draws from it
(:mod:`experiments.findings`).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from statistics import median
from typing import Literal, Optional

import torch

from experiments.findings import Finding, Result, run_arithmetic
from lib.corpus import Vocabulary
from lib.part3_words.embeddings import (
    AnalogyScore,
    Question,
    WordPair,
    WordVectors,
    spearman,
)
from lib.part3_words.ppmi import cooccurrence_counts, shifted_ppmi, svd_vectors
from lib.part3_words.tree_softmax import huffman_tree
from lib.part3_words.word2vec import (
    Word2VecConfig,
    draw_negatives,
    encode,
    keep_probabilities,
    subsample,
    logistic_sgd_step,
    train_gensim,
    train_word2vec,
    unigram_table,
)

OBJECTIVES = ("softmax", "negative", "hierarchical")
Run = tuple[str, str, int]  # (architecture, "ours" or "gensim", seed)


# ---------------------------------------------------------------------------
# The cost of one step.
# ---------------------------------------------------------------------------


def _time_objective_step(
    objective: Literal["softmax", "negative", "hierarchical"],
    vocab_size: int,
    dim: int = 100,
    batch_size: int = 256,
    negative: int = 5,
    repeats: int = 5,
) -> float:
    """CPU seconds of one SGD step on the output side, for a Zipfian vocabulary: the
    fastest of ``repeats`` runs after one warm-up run (``time.process_time``, which a
    busy machine does not inflate as it does wall time).

    The full softmax computes all ``V`` logits, their softmax and a dense gradient; the
    others call :func:`lib.part3_words.word2vec.logistic_sgd_step` on ``K + 1`` rows or
    on each word's Huffman path. Word counts are proportional to ``1 / rank`` (Zipf).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; found {objective!r}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2; found {vocab_size}")
    generator = torch.Generator().manual_seed(0)
    ranks = torch.arange(1, vocab_size + 1, dtype=torch.float64)  # (V,)
    counts = (1e7 / ranks).round().clamp(min=1)
    table = unigram_table(counts / counts.sum())
    words = draw_negatives(table, (batch_size,), generator)  # (B,) drawn by frequency
    hidden = torch.randn(batch_size, dim, generator=generator) / dim  # (B, D)
    tree = (
        huffman_tree([int(c) for c in counts]) if objective == "hierarchical" else None
    )
    rows = vocab_size - (tree is not None)  # R: one per word, or per inner node
    outputs = torch.randn(rows, dim, generator=generator) / dim  # (R, D)

    def step() -> None:
        if objective == "softmax":
            probs = torch.softmax(hidden @ outputs.T, dim=1)  # (B, V)
            probs[torch.arange(batch_size), words] -= 1.0  # dloss / dlogits
            _ = probs @ outputs  # gradient with respect to h, (B, D)
            outputs.sub_(0.01 * probs.T @ hidden)  # every row changes, (V, D)
        elif objective == "negative":
            noise = draw_negatives(table, (batch_size, negative), generator)  # (B, K)
            targets = torch.cat([words[:, None], noise], 1)  # (B, 1 + K)
            labels = torch.zeros(1, negative + 1)
            labels[0, 0] = 1.0
            logistic_sgd_step(hidden, outputs, targets, labels, torch.ones(1, 1), 0.01)
        elif objective == "hierarchical":
            nodes, codes, mask = tree.padded()  # (V, L) each
            labels = 1.0 - codes[words]  # (B, L)
            logistic_sgd_step(
                hidden, outputs, nodes[words], labels, mask[words].float(), 0.01
            )

    times = []
    for _ in range(repeats + 1):  # the first run warms up
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return min(times[1:])


@dataclass
class StepTimes(Result):
    sizes: list[int]  # vocabulary sizes, growing
    milliseconds: dict[str, list[float]]  # objective -> one step time per size

    @property
    def spans(self) -> bool:
        """Whether the sizes run from 1,000 to 30,000 words, as the findings say."""
        return self.sizes[0] == 1_000 and self.sizes[-1] == 30_000

    @property
    def growth(self) -> dict[str, float]:
        """How many times longer a step takes at the largest size than the smallest."""
        return {name: ms[-1] / ms[0] for name, ms in self.milliseconds.items()}

    FINDINGS = (
        Finding(
            "The full softmax's step time grows at least 5-fold from 1,000 to 30,000 "
            "words.",
            backs=("cost-note",),
            holds=lambda r: r.spans and r.growth["softmax"] >= 5,
        ),
        Finding(
            "Negative sampling's and the hierarchical softmax's grow less than a fifth "
            "as much.",
            backs=("cost-note",),
            holds=lambda r: r.spans
            and max(r.growth["negative"], r.growth["hierarchical"])
            < r.growth["softmax"] / 5,
        ),
        Finding(
            "At 1,000 words the full softmax is slower than negative sampling.",
            backs=("cost-note",),
            holds=lambda r: r.spans
            and r.milliseconds["softmax"][0] > r.milliseconds["negative"][0],
        ),
        Finding(
            "At 30,000 words the full softmax is the slowest.",
            backs=("cost-note",),
            holds=lambda r: r.spans
            and r.milliseconds["softmax"][-1]
            > max(r.milliseconds["negative"][-1], r.milliseconds["hierarchical"][-1]),
        ),
        Finding(
            "At 1,000 words the full softmax is less than 50 times slower than "
            "negative sampling (the dot products differ 1,000 to 6).",
            backs=("cost-note",),
            holds=lambda r: r.spans
            and r.milliseconds["softmax"][0] < 50 * r.milliseconds["negative"][0],
        ),
    )


def step_times(sizes: Sequence[int], repeats: int = 3) -> StepTimes:
    """One SGD step on a batch of 256 predictions, d = 100, for each objective."""
    milliseconds = {
        objective: [
            1e3 * _time_objective_step(objective, size, repeats=repeats)
            for size in sizes
        ]
        for objective in OBJECTIVES
    }
    return StepTimes(list(sizes), milliseconds)


# ---------------------------------------------------------------------------
# Training, ours against gensim's.
# ---------------------------------------------------------------------------


@dataclass
class TrainingTimes(Result):
    seconds: dict[Run, float]  # CPU seconds of each run
    seeds: dict[str, tuple[int, ...]]  # architecture -> its seeds

    @property
    def ratios(self) -> dict[str, list[float]]:
        """Architecture -> our time over gensim's, one per seed."""
        return {
            name: [
                self.seconds[name, "ours", s] / self.seconds[name, "gensim", s]
                for s in seeds
            ]
            for name, seeds in self.seeds.items()
        }

    @property
    def cbow_median(self) -> float:
        """Our CBOW's CPU seconds, the median over its seeds."""
        return median(self.seconds["CBOW", "ours", s] for s in self.seeds["CBOW"])

    FINDINGS = (
        Finding(
            "Gensim trains faster than ours in every run.",
            backs=("times-note",),
            holds=lambda r: min(min(ratios) for ratios in r.ratios.values()) > 1,
        ),
        Finding(
            "Our skip-gram takes at least twice as long as our CBOW.",
            backs=("cbow-gradient", "skip-gram"),
            holds=lambda r: r.seconds["skip-gram", "ours", 1] > 2 * r.cbow_median,
        ),
    )


@dataclass
class Training(Result):
    runs: dict[Run, WordVectors]
    seconds: dict[Run, float]  # CPU seconds of each run
    losses: dict[tuple[str, int], list[float]]  # (architecture, seed) -> ours, by epoch
    seeds: dict[str, tuple[int, ...]]  # architecture -> its seeds

    @property
    def models(self) -> dict[str, WordVectors]:
        """The four models of seed 1, named like "CBOW (gensim)"."""
        return {
            f"{name} ({who})": self.runs[name, who, 1]
            for name in self.seeds
            for who in ("ours", "gensim")
        }

    @property
    def times(self) -> TrainingTimes:
        return TrainingTimes(self.seconds, self.seeds)

    FINDINGS = (
        Finding(
            "Our mean loss falls from every epoch to the next, in every run.",
            backs=("times",),
            holds=lambda r: all(
                b < a for log in r.losses.values() for a, b in zip(log, log[1:])
            ),
        ),
    )


# word2vec.c's defaults, and its learning rate for each architecture
BASE = dict(vector_size=50, window=5, negative=5, sample=1e-3, epochs=5)
ALPHAS = {"skip-gram": 0.025, "CBOW": 0.05}


def train_runs(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    seeds: dict[str, tuple[int, ...]],
    min_count: int = 5,
    base: Optional[dict] = None,
) -> Training:
    """Each architecture from each of its seeds, ours and gensim's, timed in CPU
    seconds (these too rise on a busy machine: processes sharing its cores and
    caches slow each other); ``base`` replaces :data:`BASE` (a shortened run)."""
    runs, seconds, losses = {}, {}, {}
    for name, alpha in ALPHAS.items():
        for seed in seeds[name]:
            config = Word2VecConfig(
                architecture=name.lower(), alpha=alpha, seed=seed, **(base or BASE)
            )
            start = time.process_time()
            # train_word2vec(..., progress=True) draws a progress bar
            ours, log = train_word2vec(sentences, vocab, config)
            seconds[name, "ours", seed] = time.process_time() - start
            runs[name, "ours", seed] = ours.word_vectors()
            start = time.process_time()
            runs[name, "gensim", seed], _ = train_gensim(
                sentences, vocab, config, min_count=min_count
            )
            seconds[name, "gensim", seed] = time.process_time() - start
            losses[name, seed] = log.losses
    return Training(runs, seconds, losses, dict(seeds))


# ---------------------------------------------------------------------------
# Evaluation.
# ---------------------------------------------------------------------------


def _nearest(
    vectors: WordVectors, words: Sequence[str], k: int
) -> dict[str, list[str]]:
    return {
        word: [near for near, _ in vectors.most_similar([word], k=k)] for word in words
    }


# stems a reader would call sensible neighbours of each word
_SENSIBLE = {
    "war": set("alli armi battl fight fought militari outbreak vietnam".split()),
    "film": set("actor cann cinema director hitchcock movi tarkovski".split()),
    "church": set("anglican cathol christian communion episcop orthodox".split()),
    "physic": set(
        "biolog chemistri mathemat phenomena physiolog scientif theoret".split()
    ),
    "comput": set("desktop hardwar macintosh os pc program softwar".split()),
}


@dataclass
class Neighbours(Result):
    neighbours: dict[str, list[str]]  # word -> its nearest words, nearest first

    FINDINGS = (
        Finding(
            "Each word has at least two sensible neighbours among its six.",
            backs=("evaluation",),
            holds=lambda r: all(
                len(found) == 6 and len(_SENSIBLE[word] & set(found)) >= 2
                for word, found in r.neighbours.items()
            ),
        ),
    )


def nearest_neighbours(vectors: WordVectors, words: Sequence[str]) -> Neighbours:
    """The six nearest words of each of ``words``."""
    return Neighbours(_nearest(vectors, words, k=6))


@dataclass
class Analogies(Result):
    answers: dict[tuple[str, str, str], dict[str, str]]  # (a, b, c) -> model -> answer
    # model -> its 8 best answers to man : king :: woman
    queen_top8: dict[str, list[str]]

    FINDINGS = (
        Finding(
            "Both skip-gram models answer german to france : french :: germany.",
            backs=("analogies",),
            holds=lambda r: list(r.answers["france", "french", "germany"].values())
            == ["german"] * 2,
        ),
        Finding(
            "Neither answers queen to man : king :: woman.",
            backs=("analogies",),
            holds=lambda r: "queen" not in r.answers["man", "king", "woman"].values(),
        ),
        Finding(
            "The word queen is not among our skip-gram's eight best answers.",
            backs=("analogies", "explorers"),
            holds=lambda r: len(r.queen_top8["skip-gram (ours)"]) == 8
            and "queen" not in r.queen_top8["skip-gram (ours)"],
        ),
        Finding(
            "Nor is it among the eight best answers of any of the other three models.",
            backs=("explorers",),
            holds=lambda r: len(r.queen_top8) == 4
            and all(
                len(top) == 8 and "queen" not in top
                for name, top in r.queen_top8.items()
                if name != "skip-gram (ours)"
            ),
        ),
    )


def analogies(
    models: dict[str, WordVectors],
    questions: Sequence[tuple[str, str, str]],
    normalise: Callable[[str], str],
) -> Analogies:
    """The skip-gram models' best answer to each "a : b :: c : ?" (words normalised as
    the corpus was), and every model's eight best to man : king :: woman."""
    skipgram = ("skip-gram (ours)", "skip-gram (gensim)")
    answers = {
        (a, b, c): {
            name: models[name].analogy(*map(normalise, (a, b, c)))[0][0]
            for name in skipgram
        }
        for a, b, c in questions
    }
    queen_top8 = {
        name: [word for word, _ in vectors.analogy("man", "king", "woman", k=8)]
        for name, vectors in models.items()
    }
    return Analogies(answers, queen_top8)


@dataclass
class AnalogyAccuracy(Result):
    scores: dict[Run, AnalogyScore]
    # each run's questions with all four words in the vocabulary, and whether it
    # answered each right (section_accuracy reads them)
    right: dict[Run, dict[Question, bool]]
    # each run's questions skipped for a word outside its vocabulary
    unknown: dict[Run, frozenset[Question]]

    FINDINGS = (
        Finding(
            "At most 15% of the analogies come out right in any run.",
            backs=("analogy-accuracy",),
            holds=lambda r: max(s.accuracy for s in r.scores.values()) <= 0.15,
        ),
    )


def analogy_accuracy(
    runs: dict[Run, WordVectors], questions: Sequence[Question]
) -> AnalogyAccuracy:
    """The share of ``questions`` each run answers right by 3CosAdd (a question with a
    word outside the vocabulary is skipped), and which ones."""
    scores, right, unknown = {}, {}, {}
    for key, vectors in runs.items():
        used = [q for q in questions if all(w in vectors.vocab for w in q)]
        answered = vectors.answered(used).tolist()
        scores[key] = AnalogyScore(sum(answered), len(used), len(questions) - len(used))
        right[key] = dict(zip(used, answered))
        unknown[key] = frozenset(questions) - right[key].keys()
    return AnalogyAccuracy(scores, right, unknown)


_HARD = ("gram3-comparative", "gram4-superlative")


def _better(easier: str, harder: str) -> Callable[[SectionAccuracy], bool]:
    """Whether every run does better on section ``easier`` than on ``harder``."""
    return lambda r: all(
        e > h
        for name, who in r.columns
        for e, h in zip(r.accuracy[easier, name, who], r.accuracy[harder, name, who])
    )


@dataclass
class SectionAccuracy(Result):
    # (section, architecture, "ours" or "gensim") -> accuracy, one per seed
    accuracy: dict[tuple[str, str, str], list[float]]

    @property
    def columns(self) -> list[tuple[str, str]]:
        """Each (architecture, "ours" or "gensim"), in the order of the runs."""
        return list(dict.fromkeys((name, who) for _, name, who in self.accuracy))

    FINDINGS = (
        Finding(
            "Every run gets at most 5% of the comparatives and of the superlatives "
            "right.",
            backs=("analogy-sections-read",),
            holds=lambda r: all(
                acc <= 0.05
                for section in _HARD
                for name, who in r.columns
                for acc in r.accuracy[section, name, who]
            ),
        ),
        Finding(
            "Every run does better on nationality adjectives than on comparatives.",
            backs=("analogy-sections-read",),
            holds=_better("gram6-nationality-adjective", "gram3-comparative"),
        ),
        Finding(
            "Every run does better on nationality adjectives than on superlatives.",
            backs=("analogy-sections-read",),
            holds=_better("gram6-nationality-adjective", "gram4-superlative"),
        ),
        Finding(
            "Every run does better on the capitals of common countries than on "
            "comparatives.",
            backs=("analogy-sections-read",),
            holds=_better("capital-common-countries", "gram3-comparative"),
        ),
        Finding(
            "Every run does better on the capitals of common countries than on "
            "superlatives.",
            backs=("analogy-sections-read",),
            holds=_better("capital-common-countries", "gram4-superlative"),
        ),
    )


def section_accuracy(
    answers: AnalogyAccuracy, sections: dict[str, list[Question]]
) -> SectionAccuracy:
    """Each run's accuracy on each section that has questions, read from the answers
    :func:`analogy_accuracy` checked: a question it skipped for an unknown word is
    skipped here too (as :meth:`WordVectors.evaluate_analogies` does), and any other
    question must be among those it scored. The accuracies equal
    ``evaluate_analogies(section)``'s on the chapter's data; on a near-tie they could
    differ, since float32 scores depend on the rows scored together
    (:meth:`WordVectors.answered`)."""
    accuracy = {}
    for section, questions in sections.items():
        for run, right in answers.right.items():
            if not questions:
                continue
            hits = []
            for question in questions:
                if question in right:
                    hits.append(right[question])
                elif question not in answers.unknown[run]:
                    raise ValueError(
                        f"sections: question {question!r} of section {section!r} "
                        f"must be among those analogy_accuracy scored for run {run}; "
                        "found it was not scored"
                    )
            name, who, _ = run
            accuracy.setdefault((section, name, who), []).append(
                sum(hits) / len(hits) if hits else 0.0
            )
    return SectionAccuracy(accuracy)


@dataclass
class WordSimilarity(Result):
    spearman: dict[Run, tuple[float, float]]  # (WordSim-353, SimLex-999) of each run

    def over_seeds(self, name: str, who: str, which: int) -> list[float]:
        """One ρ per seed of ``name`` (which = 0: WordSim-353, 1: SimLex-999)."""
        return [
            rho[which]
            for (n, w, _), rho in self.spearman.items()
            if (n, w) == (name, who)
        ]

    def cbow_gaps(self, which: int) -> list[float]:
        """Our CBOW's ρ minus gensim's, one per seed."""
        ours, theirs = (
            self.over_seeds("CBOW", who, which) for who in ("ours", "gensim")
        )
        return [a - b for a, b in zip(ours, theirs)]

    @property
    def one_skipgram_run(self) -> bool:
        """Whether skip-gram ran once, ours and gensim's, as the findings say."""
        return all(
            len(self.over_seeds("skip-gram", who, 0)) == 1 for who in ("ours", "gensim")
        )

    def skipgram_gap(self, which: int) -> float:
        """Our skip-gram's ρ minus gensim's, in its one run."""
        return (
            self.spearman["skip-gram", "ours", 1][which]
            - self.spearman["skip-gram", "gensim", 1][which]
        )

    FINDINGS = (
        Finding(
            "Our CBOW beats gensim's on WordSim-353 with every seed.",
            backs=("similarity-discussion", "summary"),
            holds=lambda r: min(r.cbow_gaps(0)) > 0,
        ),
        Finding(
            "Our CBOW beats gensim's on SimLex-999 with every seed.",
            backs=("similarity-discussion", "summary"),
            holds=lambda r: min(r.cbow_gaps(1)) > 0,
        ),
        Finding(
            "In its one run, our skip-gram beats gensim's on WordSim-353.",
            backs=("similarity-discussion", "summary"),
            holds=lambda r: r.one_skipgram_run and r.skipgram_gap(0) > 0,
        ),
        Finding(
            "In its one run, our skip-gram beats gensim's on SimLex-999.",
            backs=("summary",),
            holds=lambda r: r.one_skipgram_run and r.skipgram_gap(1) > 0,
        ),
        Finding(
            "Every run correlates better with WordSim-353 than with SimLex-999, by at "
            "least 0.15.",
            backs=("similarity-discussion",),
            holds=lambda r: all(ws - sl >= 0.15 for ws, sl in r.spearman.values()),
        ),
        Finding(
            "Our skip-gram run beats every CBOW run on WordSim-353.",
            backs=("similarity-discussion",),
            holds=lambda r: r.spearman["skip-gram", "ours", 1][0]
            > max(r.over_seeds("CBOW", "ours", 0) + r.over_seeds("CBOW", "gensim", 0)),
        ),
    )


def word_similarity(
    runs: dict[Run, WordVectors], wordsim: list[WordPair], simlex: list[WordPair]
) -> WordSimilarity:
    """Spearman's ρ of each run with WordSim-353 and with SimLex-999."""
    return WordSimilarity(
        {
            key: (
                vectors.evaluate_word_pairs(wordsim).spearman,
                vectors.evaluate_word_pairs(simlex).spearman,
            )
            for key, vectors in runs.items()
        }
    )


@dataclass
class VectorLengths(Result):
    # model -> Spearman's ρ of word counts and vector lengths
    count_rho: dict[str, float]

    FINDINGS = (
        Finding(
            "In each of the four models, Spearman's ρ between a word's count and its "
            "vector's length is above 0.8.",
            backs=("cosine", "vector-lengths-note"),
            holds=lambda r: len(r.count_rho) == 4 and min(r.count_rho.values()) > 0.8,
        ),
    )


def vector_lengths(models: dict[str, WordVectors], vocab: Vocabulary) -> VectorLengths:
    """How closely the length of each model's word vectors follows the word's count."""
    counts = torch.tensor(vocab.counts, dtype=torch.float64)  # (V,)
    return VectorLengths(
        {
            name: spearman(vectors.vectors.double().norm(dim=1), counts)
            for name, vectors in models.items()
        }
    )


# stems of the one sense of each word that this corpus's neighbours show
_SENSES = {
    "plai": set(
        "afc baselin bowl footbal game inning nfl overtim pass pitch player "
        "quarterback score season spike team thrown touchdown trick yard".split()
    ),
    "record": set(
        "album andersson band compil ep label releas singl song studio warp".split()
    ),
    "press": set(
        "berkelei cambridg chicago harvard oxford princeton univers yale".split()
    ),
}


@dataclass
class Senses(Result):
    neighbours: dict[str, list[str]]  # word -> its nearest words, nearest first

    FINDINGS = (
        Finding(
            "At least five of the six neighbours of each of the three words are from "
            "one sense.",
            backs=("limits",),
            holds=lambda r: len(r.neighbours) == 3
            and all(
                len(found) == 6 and len(_SENSES[word] & set(found)) >= 5
                for word, found in r.neighbours.items()
            ),
        ),
    )


def polysemy(vectors: WordVectors, words: Sequence[str]) -> Senses:
    """The six nearest words of each of ``words``, words of several senses."""
    return Senses(_nearest(vectors, words, k=6))


# ---------------------------------------------------------------------------
# Counting instead of predicting: shifted PPMI and SVD.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scores:
    """One set of vectors on the chapter's three tests."""

    wordsim: float  # Spearman's ρ with WordSim-353
    simlex: float  # and with SimLex-999
    add: float  # share of the analogies right by 3CosAdd
    mul: float  # and by 3CosMul


def _scores(vectors, wordsim, simlex, questions) -> Scores:
    return Scores(
        vectors.evaluate_word_pairs(wordsim).spearman,
        vectors.evaluate_word_pairs(simlex).spearman,
        vectors.evaluate_analogies(questions, "3CosAdd").accuracy,
        vectors.evaluate_analogies(questions, "3CosMul").accuracy,
    )


@dataclass
class CountVectors(Result):
    svd: dict[tuple[int, int], Scores]  # (shift k, subsample seed) -> PPMI-SVD's scores
    word2vec: dict[Run, Scores]  # each training run's scores (3CosMul: ours only, NaN)
    seconds: float  # CPU seconds to count, weight and factorise, every seed and k

    @property
    def seeds(self) -> list[int]:
        """The subsample seeds of the SVD vectors."""
        return sorted({seed for _, seed in self.svd})

    def over_seeds(self, k: int, field: str) -> list[float]:
        """The SVD vectors' ``field`` for shift ``k``, one value per subsample seed."""
        return [getattr(self.svd[k, seed], field) for seed in self.seeds]

    def best(self, field: str) -> float:
        """The best word2vec run on ``field``, ours or gensim's."""
        return max(getattr(s, field) for s in self.word2vec.values())

    @property
    def cosmul_gains(self) -> list[float]:
        """3CosMul's accuracy minus 3CosAdd's, for each of our word2vec runs."""
        return [
            s.mul - s.add for (_, who, _), s in self.word2vec.items() if who == "ours"
        ]

    def _every_seed(self, holds: Callable[[int], bool]) -> bool:
        """At least three subsample seeds, and ``holds(seed)`` for each."""
        return len(self.seeds) >= 3 and all(holds(seed) for seed in self.seeds)

    FINDINGS = (
        Finding(
            "With k = 1, the SVD vectors of each of three subsamples beat every "
            "word2vec run, stopped after 5 epochs, on WordSim-353 and on SimLex-999.",
            backs=("count-vectors-read", "summary"),
            holds=lambda r: r._every_seed(
                lambda s: r.svd[1, s].wordsim > r.best("wordsim")
                and r.svd[1, s].simlex > r.best("simlex")
            ),
        ),
        Finding(
            "With k = 1, the SVD vectors of each of three subsamples answer more "
            "analogies right by 3CosAdd than every word2vec run stopped after 5 "
            "epochs.",
            backs=("count-vectors-read", "summary"),
            holds=lambda r: r._every_seed(lambda s: r.svd[1, s].add > r.best("add")),
        ),
        Finding(
            "For each of three subsamples, the shift by log 5 lowers the SVD "
            "vectors' correlation with WordSim-353.",
            backs=("count-vectors-read",),
            holds=lambda r: r._every_seed(
                lambda s: r.svd[5, s].wordsim < r.svd[1, s].wordsim
            ),
        ),
        Finding(
            "3CosMul answers fewer analogies right than 3CosAdd for the SVD vectors "
            "of both shifts and each of three subsamples.",
            backs=("count-vectors-read", "summary"),
            holds=lambda r: r._every_seed(
                lambda s: all(r.svd[k, s].mul < r.svd[k, s].add for k in (1, 5))
            ),
        ),
        Finding(
            "In none of our word2vec runs does 3CosMul answer more than 0.5% more "
            "analogies right than 3CosAdd.",
            backs=("count-vectors-read", "summary"),
            holds=lambda r: len(r.cosmul_gains) >= 4 and max(r.cosmul_gains) <= 0.005,
        ),
    )


def count_vectors(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    runs: dict[Run, WordVectors],
    similarity: WordSimilarity,
    accuracy: AnalogyAccuracy,
    wordsim: list[WordPair],
    simlex: list[WordPair],
    questions: Sequence[Question],
    ks: Sequence[int] = (1, 5),
    dim: int = 50,
    p: float = 0.5,
    seeds: Sequence[int] = (1, 2, 3),
    stored: Optional[tuple[dict[tuple[int, int], Scores], float, dict]] = None,
) -> CountVectors:
    """Shifted PPMI factorised into ``dim``-dimensional vectors ``U_d Σ_d^p`` for each
    shift ``k`` and each subsample seed, cut with word2vec's shrunk windows in
    expectation and the contexts' counts raised to 3/4, scored on the three tests
    beside the word2vec ``runs`` (their ρ and 3CosAdd accuracy from ``similarity``
    and ``accuracy``; 3CosMul for ours only, to save time). ``stored`` holds the SVD
    vectors' scores, CPU seconds and settings (``ks``, ``dim``, ``p``, ``seeds``) of
    :func:`svd_scores` (the stored runs, :meth:`StoredRuns.svd_scores`), in place of
    computing them here; they must be this call's."""
    if stored is None:
        svd, seconds = svd_scores(
            sentences, vocab, wordsim, simlex, questions, ks, dim, p, seeds
        )
    else:
        svd, seconds, settings = stored
        wanted = {"ks": list(ks), "dim": dim, "p": p, "seeds": list(seeds)}
        found = {key: settings.get(key) for key in wanted}
        if found != wanted or set(svd) != {(k, s) for k in ks for s in seeds}:
            raise ValueError(
                f"stored must hold the SVD scores of {wanted}; found {found} with "
                f"keys {sorted(svd)}"
            )
    word2vec = {
        key: Scores(
            *similarity.spearman[key],
            accuracy.scores[key].accuracy,
            (
                vectors.evaluate_analogies(questions, "3CosMul").accuracy
                if key[1] == "ours"
                else math.nan
            ),
        )
        for key, vectors in runs.items()
    }
    return CountVectors(svd, word2vec, seconds)


# The contexts' counts are raised to this power in the PPMI (Levy, Goldberg and Dagan
# 2015's smoothing, as word2vec's noise distribution).
CONTEXT_POWER = 0.75


def svd_scores(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    wordsim: list[WordPair],
    simlex: list[WordPair],
    questions: Sequence[Question],
    ks: Sequence[int] = (1, 5),
    dim: int = 50,
    p: float = 0.5,
    seeds: Sequence[int] = (1, 2, 3),
) -> tuple[dict[tuple[int, int], Scores], float]:
    """The PPMI-SVD half of :func:`count_vectors`: (shift k, subsample seed) -> the
    scores of its vectors, and the CPU seconds of counting, weighting and factorising.
    """
    start = time.process_time()
    corpus = encode(sentences, vocab)
    keep = keep_probabilities(vocab.counts, BASE["sample"])
    vectors = {}
    for seed in seeds:
        drawn = subsample(corpus, keep, torch.Generator().manual_seed(seed))
        counts = cooccurrence_counts(drawn, len(vocab), BASE["window"])
        for k in ks:
            matrix = svd_vectors(shifted_ppmi(counts, k, CONTEXT_POWER), dim, p)
            vectors[k, seed] = WordVectors(matrix.float(), vocab)
    seconds = time.process_time() - start
    svd = {key: _scores(v, wordsim, simlex, questions) for key, v in vectors.items()}
    return svd, seconds


def plot_count_vectors(result: CountVectors):
    """Bars of the four scores: the two SVD vectors (median over the subsamples), our
    skip-gram run and the median of our CBOW runs (3CosAdd and 3CosMul accuracies as
    shares)."""
    import matplotlib.pyplot as plt

    tests = ("wordsim", "simlex", "add", "mul")
    labels = (
        "WordSim\nρ",
        "SimLex\nρ",
        "analogies\n3CosAdd",
        "analogies\n3CosMul",
    )
    cbow = [
        s for (n, who, _), s in result.word2vec.items() if (n, who) == ("CBOW", "ours")
    ]
    bars = {
        f"PPMI-SVD, k = {k}, median": [median(result.over_seeds(k, t)) for t in tests]
        for k in sorted({k for k, _ in result.svd})
    }
    bars["skip-gram (ours)"] = [
        getattr(result.word2vec["skip-gram", "ours", 1], t) for t in tests
    ]
    bars["CBOW (ours), median"] = [median(getattr(s, t) for s in cbow) for t in tests]
    fig, ax = plt.subplots(figsize=(4.8, 4.2), layout="constrained")
    width = 0.8 / len(bars)
    for i, (name, values) in enumerate(bars.items()):
        offset = (i - (len(bars) - 1) / 2) * width
        ax.bar([j + offset for j in range(len(tests))], values, width, label=name)
    ax.set_xticks(range(len(tests)), labels)
    ax.set_ylabel("ρ, or share right")
    fig.legend(loc="outside lower center")
    return fig


# ---------------------------------------------------------------------------
# The stored runs: our word2vec runs and the PPMI-SVD scores, made offline.
# ---------------------------------------------------------------------------

# The chapter's seeds, corpus and tests, which the offline runs rebuild;
# load_runs checks them against the chapter's own.
SEEDS = {"skip-gram": (1,), "CBOW": (1, 2, 3)}
CORPUS = "head500.noblanks.cor"
MIN_COUNT = 5
RUNS_PATH = Path(__file__).with_name("weights") / "ch05_runs.pt"
RUNS_COMMAND = "python -m experiments.ch05_word2vec runs"


def _sha256(items) -> str:
    """SHA-256 of the repr of every item, one per line."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(repr(item).encode() + b"\n")
    return digest.hexdigest()


def _chapter_data(sentences: Optional[int] = None) -> dict:
    """The corpus, vocabulary and tests as chapter 5 builds them (``sentences``: only
    the first so many lines, a shortened run)."""
    from gensim.parsing.porter import PorterStemmer

    from lib.corpus import gensim_data, read_sentences
    from lib.part3_words.embeddings import read_analogies, read_word_pairs

    stem = PorterStemmer().stem
    lines = read_sentences(gensim_data(CORPUS))[:sentences]
    sections = read_analogies(gensim_data("questions-words.txt"), normalise=stem)
    return dict(
        sentences=lines,
        vocab=Vocabulary.from_sentences(lines, min_count=MIN_COUNT),
        wordsim=read_word_pairs(gensim_data("wordsim353.tsv"), normalise=stem),
        simlex=read_word_pairs(gensim_data("simlex999.txt"), normalise=stem),
        questions=[q for qs in sections.values() for q in qs if len(set(q)) == 4],
    )


def _runs_recipe(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    wordsim: list[WordPair],
    simlex: list[WordPair],
    questions: Sequence[Question],
    seeds: dict[str, tuple[int, ...]] = SEEDS,
    base: Optional[dict] = None,
    svd_seeds: Sequence[int] = (1, 2, 3),
) -> dict:
    """What the stored runs depend on: the corpus, vocabulary and tests (their SHA-256),
    the seeds, word2vec's settings and the SVD's."""
    return {
        "corpus_sha256": _sha256(sentences),
        "vocab_sha256": _sha256(zip(vocab.words, vocab.counts)),
        "wordsim_sha256": _sha256(wordsim),
        "simlex_sha256": _sha256(simlex),
        "questions_sha256": _sha256(questions),
        "min_count": MIN_COUNT,
        "seeds": {name: list(s) for name, s in seeds.items()},
        "base": dict(base or BASE),
        "alphas": dict(ALPHAS),
        "training_sha256": _source_sha256(TRAINING_SOURCES),
        "svd": _svd_recipe(svd_seeds),
    }


def _svd_recipe(seeds: Sequence[int]) -> dict:
    """The settings of :func:`svd_scores` as the chapter calls it, its ``seeds``, and
    all else its scores depend on: the window, subsampling and smoothing it counts
    and weights with, and the SHA-256 of the code that does it."""
    return {
        "ks": [1, 5],
        "dim": 50,
        "p": 0.5,
        "seeds": list(seeds),
        "window": BASE["window"],
        "sample": BASE["sample"],
        "context_power": CONTEXT_POWER,
        "source_sha256": _source_sha256(["lib/part3_words/ppmi.py"]),
    }


# The code our runs are trained with: word2vec and what it imports for training
# (the Huffman tree of the hierarchical softmax, the training log).
TRAINING_SOURCES = (
    "lib/part3_words/word2vec.py",
    "lib/part3_words/tree_softmax.py",
    "lib/training.py",
)


def _source_sha256(paths: Sequence[str]) -> str:
    """SHA-256 of these files of the repository, in order (any edit counts)."""
    root = Path(__file__).parents[1]
    return _sha256((path, (root / path).read_bytes()) for path in paths)


def _key(run: Run) -> str:
    return f"{run[0]}/{run[1]}/{run[2]}"


def _make_runs(data: dict, seeds=SEEDS, base=None, svd_seeds=(1, 2, 3)) -> dict:
    """Everything the file holds: :func:`train_runs` (our vectors, every run's CPU
    seconds, our losses) and :func:`svd_scores`, with the recipe, the arithmetic and
    the CPU seconds of it all, the machine's load averages when it ends (CPU seconds
    rise under load) and gensim's version (which made its runs' times)."""
    import gensim

    start = time.process_time()
    training = train_runs(data["sentences"], data["vocab"], seeds, MIN_COUNT, base)
    svd, svd_seconds = svd_scores(
        data["sentences"],
        data["vocab"],
        data["wordsim"],
        data["simlex"],
        data["questions"],
        seeds=svd_seeds,
    )
    return dict(
        recipe=_runs_recipe(**data, seeds=seeds, base=base, svd_seeds=svd_seeds),
        arithmetic=run_arithmetic(),
        cpu_seconds=time.process_time() - start,
        vectors={
            _key(run): v.vectors for run, v in training.runs.items() if run[1] == "ours"
        },
        seconds={_key(run): s for run, s in training.seconds.items()},
        losses={
            _key((name, "ours", seed)): log
            for (name, seed), log in training.losses.items()
        },
        svd={f"{k}/{seed}": list(astuple(s)) for (k, seed), s in svd.items()},
        svd_seconds=svd_seconds,
        loadavg=list(os.getloadavg()),
        cpus=os.cpu_count(),
        gensim=gensim.__version__,
    )


def _refuse_another(saved: dict, recipe: dict, keys: Sequence[str], path) -> None:
    """A ValueError naming each of ``keys`` whose stored value differs from
    ``recipe``'s."""
    differ = [key for key in keys if saved.get(key) != recipe[key]]
    if differ:
        raise ValueError(
            f"the runs stored in {path} differ from this recipe in {differ}; "
            f"run {RUNS_COMMAND} again"
        )


_TESTS = ("wordsim_sha256", "simlex_sha256", "questions_sha256", "svd")


@dataclass
class StoredRuns:
    """The runs :data:`RUNS_COMMAND` stored, as the chapter uses them."""

    training: Training  # our runs loaded, gensim's trained here; stored CPU seconds
    arithmetic: dict[str, str]  # what made the stored runs (run_arithmetic)
    cpu_seconds: float  # of the whole offline command
    saved: dict  # the file's contents
    path: Path

    def svd_scores(
        self,
        wordsim: list[WordPair],
        simlex: list[WordPair],
        questions: Sequence[Question],
        seeds: Sequence[int] = (1, 2, 3),
    ) -> tuple[dict[tuple[int, int], Scores], float, dict]:
        """The stored :func:`svd_scores` and their settings
        (``count_vectors(stored=...)``), after checking that they were scored on these
        tests, from these subsample ``seeds`` with :func:`count_vectors`' other
        defaults."""
        recipe = {
            "wordsim_sha256": _sha256(wordsim),
            "simlex_sha256": _sha256(simlex),
            "questions_sha256": _sha256(questions),
            "svd": _svd_recipe(seeds),
        }
        _refuse_another(self.saved["recipe"], recipe, _TESTS, self.path)
        svd = {
            tuple(map(int, key.split("/"))): Scores(*values)
            for key, values in self.saved["svd"].items()
        }
        return svd, self.saved["svd_seconds"], dict(self.saved["recipe"]["svd"])

    @property
    def load(self) -> float:
        """The machine's load average (over a minute) when the file was made."""
        return self.saved["loadavg"][0]

    @property
    def gensims(self) -> tuple[str, str]:
        """The version of gensim that made the stored gensim times, and this one's
        (which trains gensim's runs again here)."""
        import gensim

        return self.saved["gensim"], gensim.__version__


def load_runs(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    seeds: dict[str, tuple[int, ...]] = SEEDS,
    path: Path = RUNS_PATH,
) -> StoredRuns:
    """Our word2vec runs, their losses and every run's CPU seconds as
    :data:`RUNS_COMMAND` stored them, after checking that they were made from these
    ``sentences``, ``vocab`` and ``seeds`` with :data:`BASE` and :data:`ALPHAS`;
    gensim's runs (a few seconds) are trained here again, with the same settings and
    seeds. The CPU seconds are those of the machine that made the file
    (``arithmetic["processor"]``)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no stored runs at {path}; make them: {RUNS_COMMAND}")
    saved = torch.load(path, weights_only=True)
    recipe = _runs_recipe(sentences, vocab, [], [], [], seeds)
    keys = [key for key in recipe if key not in _TESTS]
    _refuse_another(saved["recipe"], recipe, keys, path)
    runs = {}
    for name, alpha in ALPHAS.items():
        for seed in seeds[name]:
            config = Word2VecConfig(
                architecture=name.lower(), alpha=alpha, seed=seed, **BASE
            )
            ours = saved["vectors"][_key((name, "ours", seed))]
            runs[name, "ours", seed] = WordVectors(ours, vocab)
            runs[name, "gensim", seed], _ = train_gensim(
                sentences, vocab, config, min_count=MIN_COUNT
            )
    seconds = {run: saved["seconds"][_key(run)] for run in runs}
    losses = {
        (name, seed): saved["losses"][_key((name, "ours", seed))]
        for name in ALPHAS
        for seed in seeds[name]
    }
    return StoredRuns(
        Training(runs, seconds, losses, dict(seeds)),
        saved["arithmetic"],
        saved["cpu_seconds"],
        saved,
        Path(path),
    )


@dataclass
class Retrained(Result):
    """One of our stored runs trained again with :func:`train_runs`, beside the
    stored one."""

    live: list[float]  # the loss per example of every epoch, trained here
    stored: list[float]  # and as stored
    equal: bool  # the vectors and losses bit for bit
    same_arithmetic: bool  # this torch, processor and settings made the stored runs

    FINDINGS = (
        Finding(
            "Trained again here, the run has the stored run's loss at every epoch, "
            "within 0.1%.",
            backs=("cbow-gradient",),
            holds=lambda r: len(r.live) == len(r.stored)
            and all(abs(a - b) <= 1e-3 * b for a, b in zip(r.live, r.stored)),
        ),
        Finding(
            "On the arithmetic that made the file, its vectors and losses equal the "
            "stored ones bit for bit.",
            backs=("cbow-gradient",),
            holds=lambda r: r.equal or not r.same_arithmetic,
        ),
    )


def compare_retrained(stored: StoredRuns, live: Training, run: Run) -> Retrained:
    """Our ``run`` of ``live`` (trained again by :func:`train_runs`) against the
    stored one."""
    name, who, seed = run
    if who != "ours" or run not in live.runs or run not in stored.training.runs:
        raise ValueError(
            f"run must be one of our runs in both live and stored; found {run!r}"
        )
    losses = live.losses[name, seed], stored.training.losses[name, seed]
    equal = losses[0] == losses[1] and torch.equal(
        live.runs[run].vectors, stored.training.runs[run].vectors
    )
    return Retrained(*losses, equal, stored.arithmetic == run_arithmetic())


def _main(argv: Optional[list[str]] = None) -> None:
    """``python -m experiments.ch05_word2vec runs [--sentences N] [--epochs E]
    [--cbow-seeds 1 2 3] [--svd-seeds 1 2 3] [--out PATH]``: train the chapter's
    word2vec runs (ours and gensim's, timed) and score its PPMI-SVD vectors, on one
    thread, and store our vectors, the losses, every run's CPU seconds and the SVD
    scores (a shortened run: fewer sentences, epochs or seeds)."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.ch05_word2vec", description=_main.__doc__
    )
    parser.add_argument("command", choices=["runs"])
    parser.add_argument("--sentences", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=BASE["epochs"])
    parser.add_argument("--cbow-seeds", type=int, nargs="+", default=SEEDS["CBOW"])
    parser.add_argument("--svd-seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path, default=RUNS_PATH)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as the chapter: the same vectors on every run
    data = _chapter_data(args.sentences)
    seeds = {"skip-gram": SEEDS["skip-gram"], "CBOW": tuple(args.cbow_seeds)}
    base = {**BASE, "epochs": args.epochs}
    saved = _make_runs(data, seeds, base, tuple(args.svd_seeds))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(saved, args.out)
    for key, seconds in saved["seconds"].items():
        print(f"{key}: {seconds:.1f} s of CPU time")
    size = args.out.stat().st_size / 1e6
    print(
        f"saved to {args.out} ({size:.1f} MB) after {saved['cpu_seconds']:.0f} s "
        "of CPU time"
    )


if __name__ == "__main__":
    _main()
