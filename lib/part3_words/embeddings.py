"""Evaluating word vectors: nearest neighbours, analogies, word-similarity benchmarks.

Chapter 5 trains word vectors (:mod:`lib.part3_words.word2vec`, or gensim) and then asks
how good they are. :class:`WordVectors` holds the vectors with their vocabulary and
compares words by cosine similarity:

1. nearest neighbours, and analogies "``a`` is to ``b`` as ``c`` is to ?" by
   3CosAdd or 3CosMul (Levy and Goldberg, 2014, section 6),
   whose accuracy on the analogy questions of Mikolov et al. (2013)
   :meth:`WordVectors.evaluate_analogies` measures
   (:func:`read_analogies`, :class:`AnalogyScore`);
2. the correlation of cosine similarities with human ratings of word pairs,
   WordSim-353 (Finkelstein et al., 2002) or SimLex-999 (Hill et al., 2015), as
   Spearman's rank correlation (:func:`read_word_pairs`, :func:`spearman`,
   :class:`SimilarityScore`).

gensim's ``KeyedVectors`` evaluations are the reference the tests compare with.
``V`` is the vocabulary size and ``D`` the vector size.

References
----------
.. [1] T. Mikolov, K. Chen, G. Corrado, J. Dean. "Efficient Estimation of Word
   Representations in Vector Space". ICLR Workshop 2013. arXiv:1301.3781.
   (The analogy questions.)
.. [2] O. Levy, Y. Goldberg. "Linguistic Regularities in Sparse and Explicit
   Word Representations". CoNLL 2014. (3CosAdd and 3CosMul.)
.. [3] L. Finkelstein, E. Gabrilovich, Y. Matias, E. Rivlin, Z. Solan, G. Wolfman,
   E. Ruppin. "Placing Search in Context: The Concept Revisited". ACM TOIS 20(1), 2002.
   (WordSim-353.)
.. [4] F. Hill, R. Reichart, A. Korhonen. "SimLex-999: Evaluating Semantic Models
   with (Genuine) Similarity Estimation". Computational Linguistics 41(4), 2015.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, Optional, Union

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Float64, Int, Real
from torch import Tensor

from lib.checked import Finite, Fraction, NonNegativeInt, PositiveInt, Words, each
from lib.corpus import Vocabulary

__all__ = [
    "WordVectors",
    "WordPair",
    "read_word_pairs",
    "spearman",
    "SimilarityScore",
    "read_analogies",
    "AnalogyScore",
    "WordClassScore",
]

Question = tuple[str, str, str, str]  # an analogy "a : b :: c : d"
Method = Literal["3CosAdd", "3CosMul"]
EPSILON = 0.001  # 3CosMul's ε, which keeps its denominator from 0 (Levy & Goldberg)


@dataclass(frozen=True)
class WordPair:
    """Two words and the similarity people gave them (0-10 in WordSim-353)."""

    first: str
    second: str
    score: Finite


@dataclass
class WordVectors:
    """Word vectors with their vocabulary, compared by cosine similarity: the dot
    product of unit vectors."""

    vectors: Float[Tensor, "V D"]
    vocab: Vocabulary

    def __post_init__(self):
        if len(self.vocab) < 2:
            raise ValueError(
                f"vocab must hold at least 2 words; found {len(self.vocab)}"
            )
        if self.vectors.shape[0] != len(self.vocab):
            raise ValueError(
                f"vectors must have shape (V, D) with V = {len(self.vocab)}; "
                f"found {tuple(self.vectors.shape)}"
            )
        if self.vectors.shape[1] == 0:
            raise ValueError("vectors must have D >= 1 columns; found D = 0")
        if not torch.isfinite(self.vectors).all():
            raise ValueError("vectors must be finite; found NaN or inf")

    @cached_property
    def unit(self) -> Float[Tensor, "V D"]:
        """The rows scaled to length 1 (a zero row stays zero)."""
        return F.normalize(self.vectors.detach().float(), dim=1)

    def vector(self, word: str) -> Float[Tensor, "D"]:
        """The unit vector of ``word`` (a KeyError if it is not in the vocabulary)."""
        return self.unit[self.vocab.index(word)]

    def similarity(self, first: str, second: str) -> Finite:
        """The cosine similarity of two words of the vocabulary."""
        return float(self.vector(first) @ self.vector(second))

    def most_similar(
        self, positive: Words, negative: Words = (), k: PositiveInt = 10
    ) -> list[tuple[str, float]]:
        """The ``k`` words closest to ``Σ positive - Σ negative`` (unit vectors), with
        their cosine similarity to it; the query words are left out. With
        ``positive = [b, c]`` and ``negative = [a]`` this is 3CosAdd."""
        if not positive:
            raise ValueError("positive must name at least one word; found none")
        query = torch.zeros(self.unit.shape[1])  # (D,)
        for word in positive:
            query += self.vector(word)
        for word in negative:
            query -= self.vector(word)
        # Words that cancel (["man"] - ["man"]) leave float32 rounding, ~1e-7 a word:
        # no direction to look in.
        named = len(positive) + len(negative)
        if query.norm() < 1e-4 * named:
            raise ValueError(
                f"positive and negative must not cancel; found "
                f"|Σ positive - Σ negative| = {float(query.norm()):.2g}"
            )
        scores = self.unit @ F.normalize(query, dim=0)  # (V,)
        scores[[self.vocab.index(w) for w in (*positive, *negative)]] = -math.inf
        others = len(self.vocab) - len(set(positive) | set(negative))
        if others == 0:
            raise ValueError(
                f"positive and negative must leave a word to return; "
                f"found all {len(self.vocab)} words named"
            )
        k = min(k, others)
        top = torch.topk(scores, k)
        words = [self.vocab.words[i] for i in top.indices.tolist()]
        return [(word, float(score)) for word, score in zip(words, top.values)]

    def analogy(
        self, a: str, b: str, c: str, k: PositiveInt = 1, method: Method = "3CosAdd"
    ) -> list[tuple[str, float]]:
        """ "``a`` is to ``b`` as ``c`` is to ?": the ``k`` best words other than the
        three, with their scores (:meth:`analogy_scores`)."""
        ids = torch.tensor([[self.vocab.index(w) for w in (a, b, c)]])  # (1, 3)
        scores = self.analogy_scores(ids, method)[0]  # (V,)
        k = min(k, int(torch.isfinite(scores).sum()))
        top = torch.topk(scores, k)
        words = [self.vocab.words[i] for i in top.indices.tolist()]
        return [(word, float(score)) for word, score in zip(words, top.values)]

    def analogy_scores(
        self, ids: Int[Tensor, "Q 3"], method: Method = "3CosAdd"
    ) -> Float[Tensor, "Q V"]:
        """The score of every word as the answer to each question ``a : b :: c : ?``
        (``ids`` holds the ids of ``a, b, c``); the three get ``-inf``.

        3CosAdd: ``cos(x, b - a + c)`` of unit vectors. 3CosMul: ``cos'(x, b)
        cos'(x, c) / (cos'(x, a) + ε)`` with ``cos' = (cos + 1) / 2`` in ``[0, 1]``."""
        if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < len(self.vocab):
            raise ValueError(
                f"ids must be word ids in [0, {len(self.vocab)}); found "
                f"{int(ids.min())} to {int(ids.max())}"
            )
        a, b, c = (self.unit[ids[:, i]] for i in range(3))  # (Q, D) each
        if method == "3CosAdd":
            scores = F.normalize(b - a + c, dim=1) @ self.unit.T  # (Q, V)
        else:
            # in place: these (Q, V) matrices are the cost of the whole evaluation
            to_a, to_b, to_c = (x @ self.unit.T for x in (a, b, c))  # cosines
            to_a.add_(1).div_(2).add_(EPSILON)  # cos'(x, a) + ε
            scores = to_b.add_(1).div_(2).mul_(to_c.add_(1).div_(2)).div_(to_a)
        return scores.scatter_(1, ids, -math.inf)  # never a question word

    def evaluate_word_pairs(self, pairs: each(WordPair)) -> SimilarityScore:
        """Spearman's correlation of cosine similarities with human ratings; pairs
        with a word outside the vocabulary are skipped, as gensim does."""
        used = [p for p in pairs if p.first in self.vocab and p.second in self.vocab]
        if len(used) < 3:
            raise ValueError(
                f"pairs must hold at least 3 pairs in the vocabulary to correlate; "
                f"found {len(used)}"
            )
        first = self.unit[[self.vocab.index(p.first) for p in used]]  # (P, D)
        second = self.unit[[self.vocab.index(p.second) for p in used]]  # (P, D)
        cosines = (first * second).sum(dim=1).double()  # (P,)
        ratings = torch.tensor([p.score for p in used], dtype=torch.float64)
        skipped = len(pairs) - len(used)
        return SimilarityScore(spearman(cosines, ratings), len(used), skipped)

    def evaluate_word_classes(self, label: dict[str, str]) -> WordClassScore:
        """How often a word's nearest neighbour shares its class (``label`` maps words
        to class names), and how often a random neighbour would."""
        used = {word: name for word, name in label.items() if word in self.vocab}
        if not used:
            raise ValueError(
                f"label: no labelled word is in the vocabulary; "
                f"found {len(label)} labelled words"
            )
        sizes = {name: list(used.values()).count(name) for name in set(used.values())}
        hits = [
            used.get(self.most_similar([word], k=1)[0][0]) == name
            for word, name in used.items()
        ]
        # A random neighbour among the other V - 1 words shares the class of a word
        # of class c with probability (n_c - 1) / (V - 1).
        others = len(self.vocab) - 1
        chance = sum((sizes[name] - 1) / others for name in used.values()) / len(used)
        return WordClassScore(sum(hits) / len(used), chance, len(used))

    def evaluate_analogies(
        self, questions: each(Question), method: Method = "3CosAdd"
    ) -> AnalogyScore:
        """The share of ``a : b :: c : d`` questions whose best answer by ``method``
        is ``d``; questions with a word outside the vocabulary are skipped, as gensim
        does."""
        used = [q for q in questions if all(w in self.vocab for w in q)]
        correct = int(self.answered(used, method).sum())
        skipped = len(questions) - len(used)
        return AnalogyScore(correct=correct, used=len(used), skipped=skipped)

    def answered(
        self, questions: each(Question), method: Method = "3CosAdd"
    ) -> Bool[Tensor, "Q"]:
        """For each ``a : b :: c : d`` question, whether its best answer by ``method``
        is ``d``; all four words must be in the vocabulary.

        The scores are float32 products whose rounding can depend on how many
        questions share a chunk, so a near-tie may be answered differently when the
        question is asked in another list (identical on the chapter's data)."""
        unknown = [w for q in questions for w in q if w not in self.vocab]
        if unknown:
            raise ValueError(
                f"questions must hold words of the vocabulary; found {unknown[0]!r}"
            )
        ids = [[self.vocab.index(w) for w in q] for q in questions]
        right = [torch.zeros(0, dtype=torch.bool)]
        # 128 questions at a time: the (q, V) score matrices stay small (about a
        # tenth faster than one (Q, V) matrix for 3,000 questions and 8,087 words).
        for chunk in torch.tensor(ids, dtype=torch.long).view(-1, 4).split(128):
            scores = self.analogy_scores(chunk[:, :3], method)  # (q, V)
            right.append(scores.argmax(dim=1) == chunk[:, 3])
        return torch.cat(right)


def _data_lines(path: Union[str, Path]) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must name an existing text file; found {str(path)!r}")
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]


def read_word_pairs(
    path: Union[str, Path], normalise: Optional[Callable[[str], str]] = None
) -> list[WordPair]:
    """A word-similarity set: lines ``word1 <tab> word2 <tab> score``, ``#`` starts a
    comment; ``normalise`` (a stemmer, say) is applied to every lower-cased word."""
    normalise = normalise or (lambda word: word)
    pairs = []
    for number, line in enumerate(_data_lines(path), start=1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        try:
            score = float(fields[2])
        except (IndexError, ValueError):
            score = math.nan  # refused below, with the line
        if len(fields) != 3 or not math.isfinite(score):
            raise ValueError(
                f"path: line {number} of {Path(path).name} must be "
                f"'word <tab> word <tab> score' with a finite score; found {line!r}"
            )
        first, second = normalise(fields[0].lower()), normalise(fields[1].lower())
        pairs.append(WordPair(first, second, score))
    return pairs


def read_analogies(
    path: Union[str, Path], normalise: Optional[Callable[[str], str]] = None
) -> dict[str, list[Question]]:
    """word2vec's analogy questions (``questions-words.txt``) by section, lower-cased
    and passed through ``normalise``."""
    normalise = normalise or (lambda word: word)
    sections: dict[str, list] = {}
    current = None
    for number, line in enumerate(_data_lines(path), start=1):
        if line.startswith(":"):
            current = sections.setdefault(line[1:].strip(), [])
        elif line:
            words = line.lower().split()
            if len(words) != 4 or current is None:
                raise ValueError(
                    f"path: line {number} of {Path(path).name} must hold 4 words "
                    f"after a ': section' line; found {line!r}"
                )
            current.append(tuple(normalise(w) for w in words))
    return sections


def _average_ranks(values: Float64[Tensor, "n"]) -> Float64[Tensor, "n"]:
    """Ranks 1..n; tied values share the mean of their ranks."""
    order = torch.argsort(values, stable=True)
    ranks = torch.empty_like(values)
    ranks[order] = torch.arange(1, values.numel() + 1, dtype=values.dtype)
    unique, inverse = torch.unique(values, return_inverse=True)  # (U,), (n,)
    totals = torch.zeros(unique.numel(), dtype=values.dtype).index_add_(
        0, inverse, ranks
    )
    sizes = torch.zeros(unique.numel(), dtype=values.dtype)
    sizes.index_add_(0, inverse, torch.ones_like(values))
    return (totals / sizes)[inverse]


def spearman(x: Real[Tensor, "n"], y: Real[Tensor, "n"]) -> Finite:
    """Spearman's rank correlation: Pearson's correlation of the tie-averaged ranks."""
    if x.numel() < 2:
        raise ValueError(f"x and y must hold at least 2 values; found {x.numel()}")
    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"x must be finite; found {bad} NaN or inf values")
    if not torch.isfinite(y).all():
        bad = int((~torch.isfinite(y)).sum())
        raise ValueError(f"y must be finite; found {bad} NaN or inf values")
    rx, ry = _average_ranks(x.double()), _average_ranks(y.double())
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = (rx.norm() * ry.norm()).item()
    if denominator == 0:
        raise ValueError("Spearman's correlation is undefined when x or y is constant")
    return float((rx @ ry).item() / denominator)


@dataclass(frozen=True)
class SimilarityScore:
    """What :meth:`WordVectors.evaluate_word_pairs` returns."""

    spearman: Finite
    used: NonNegativeInt
    skipped: NonNegativeInt


@dataclass(frozen=True)
class AnalogyScore:
    """What :meth:`WordVectors.evaluate_analogies` returns."""

    correct: NonNegativeInt
    used: NonNegativeInt
    skipped: NonNegativeInt

    def __post_init__(self):
        if self.correct > self.used:
            raise ValueError(
                f"correct must be at most used = {self.used}; found {self.correct}"
            )

    @property
    def accuracy(self) -> Fraction:
        return self.correct / self.used if self.used else 0.0


@dataclass(frozen=True)
class WordClassScore:
    """What :meth:`WordVectors.evaluate_word_classes` returns: shares of the ``used``
    labelled words."""

    same_class: Fraction
    chance: Fraction
    used: PositiveInt
