"""Evaluating word vectors: nearest neighbours, analogies and word-similarity benchmarks.

Chapter 5 trains word vectors (:mod:`lib.word2vec`, or gensim) and then asks how
good they are. :class:`WordVectors` holds the vectors with their vocabulary and
compares words by cosine similarity:

1. nearest neighbours, and analogies "``a`` is to ``b`` as ``c`` is to ?" by
   3CosAdd (Levy and Goldberg, 2014), whose accuracy on the analogy questions
   of Mikolov et al. (2013) :meth:`WordVectors.evaluate_analogies` measures
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
   Word Representations". CoNLL 2014. (3CosAdd.)
.. [3] L. Finkelstein, E. Gabrilovich, Y. Matias, E. Rivlin, Z. Solan, G. Wolfman,
   E. Ruppin. "Placing Search in Context: The Concept Revisited". ACM TOIS 20(1), 2002.
   (WordSim-353.)
.. [4] F. Hill, R. Reichart, A. Korhonen. "SimLex-999: Evaluating Semantic Models
   with (Genuine) Similarity Estimation". Computational Linguistics 41(4), 2015.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from lib.corpus import Vocabulary
from lib.validation import require_int

__all__ = [
    "require_vocabulary",
    "WordVectors",
    "WordPair",
    "read_word_pairs",
    "spearman",
    "SimilarityScore",
    "read_analogies",
    "AnalogyScore",
    "WordClassScore",
]


def require_vocabulary(vocab: object) -> None:
    """A TypeError unless ``vocab`` is a :class:`lib.corpus.Vocabulary`, a ValueError unless it has 2 words or more."""
    if not isinstance(vocab, Vocabulary):
        raise TypeError(f"vocab must be a lib.corpus.Vocabulary; found {type(vocab).__name__}")
    if len(vocab) < 2:
        raise ValueError(f"vocab must hold at least 2 words; found {len(vocab)}")


@dataclass
class WordVectors:
    """Word vectors with their vocabulary: neighbours, analogies and benchmarks.

    Every comparison uses the cosine similarity ``a.b / (|a| |b|)``, i.e. the
    dot product of unit vectors.

    Attributes
    ----------
    vectors : Tensor ``(V, D)``
    vocab : Vocabulary
    """

    vectors: Tensor
    vocab: Vocabulary

    def __post_init__(self):
        require_vocabulary(self.vocab)
        if not isinstance(self.vectors, Tensor) or not self.vectors.is_floating_point():
            found = self.vectors.dtype if isinstance(self.vectors, Tensor) else type(self.vectors).__name__
            raise TypeError(f"vectors must be a floating-point torch.Tensor; found {found}")
        if self.vectors.dim() != 2 or self.vectors.shape[0] != len(self.vocab):
            raise ValueError(
                f"vectors must have shape (V, D) with V = {len(self.vocab)}; found {tuple(self.vectors.shape)}"
            )

    @cached_property
    def unit(self) -> Tensor:
        """Rows scaled to length 1 ``(V, D)`` (a zero row stays zero)."""
        return F.normalize(self.vectors.detach().float(), dim=1)

    def vector(self, word: str) -> Tensor:
        """The unit vector of ``word`` ``(D,)``; a KeyError names a word outside the vocabulary."""
        return self.unit[self.vocab.index(word)]

    def similarity(self, first: str, second: str) -> float:
        """Cosine similarity of two words."""
        return float(self.vector(first) @ self.vector(second))

    def most_similar(
        self, positive: Sequence[str], negative: Sequence[str] = (), k: int = 10
    ) -> list[tuple[str, float]]:
        """The ``k`` words closest to ``Σ positive - Σ negative`` (of unit vectors), query words excluded.

        With one positive word these are its nearest neighbours. With
        ``positive = [b, c]`` and ``negative = [a]`` this is 3CosAdd (Levy and
        Goldberg, 2014): the answer to "``a`` is to ``b`` as ``c`` is to ?" maximises
        ``cos(x, b) - cos(x, a) + cos(x, c)``.

        Returns
        -------
        list of (word, cosine similarity to the query vector)
        """
        for name, words in (("positive", positive), ("negative", negative)):
            if isinstance(words, str):
                raise TypeError(f"{name} must be a list of words, not one str; found {words!r}")
        if not positive:
            raise ValueError("positive must name at least one word; found none")
        require_int("k", k, 1)
        query = torch.zeros(self.unit.shape[1])  # (D,)
        for word in positive:
            query += self.vector(word)
        for word in negative:
            query -= self.vector(word)
        scores = self.unit @ F.normalize(query, dim=0)  # (V,)
        scores[[self.vocab.index(w) for w in (*positive, *negative)]] = -math.inf
        top = torch.topk(scores, min(k, len(self.vocab) - len(set(positive) | set(negative))))
        return [(self.vocab.words[i], float(s)) for s, i in zip(top.values, top.indices.tolist())]

    def analogy(self, a: str, b: str, c: str, k: int = 1) -> list[tuple[str, float]]:
        """"``a`` is to ``b`` as ``c`` is to ?" by 3CosAdd: :meth:`most_similar` of ``b - a + c``."""
        return self.most_similar(positive=[b, c], negative=[a], k=k)

    def evaluate_word_pairs(self, pairs: Sequence["WordPair"]) -> "SimilarityScore":
        """Spearman correlation between cosine similarities and human ratings.

        Pairs with a word outside the vocabulary are skipped (gensim does the
        same by default) and counted in ``SimilarityScore.skipped``.
        """
        used = [p for p in pairs if p.first in self.vocab and p.second in self.vocab]
        if len(used) < 3:
            raise ValueError(f"at least 3 pairs must be in the vocabulary to correlate; found {len(used)}")
        first = self.unit[[self.vocab.index(p.first) for p in used]]  # (P, D)
        second = self.unit[[self.vocab.index(p.second) for p in used]]  # (P, D)
        cosines = (first * second).sum(dim=1).double()  # (P,)
        ratings = torch.tensor([p.score for p in used], dtype=torch.float64)
        return SimilarityScore(spearman(cosines, ratings), used=len(used), skipped=len(pairs) - len(used))

    def evaluate_word_classes(self, label: dict[str, str]) -> "WordClassScore":
        """How often a word's nearest neighbour shares its class, and how often chance would.

        ``label`` maps words to class names (pronoun, day, ...). Words outside the
        vocabulary are skipped. Chance is the share a random neighbour among the
        other ``V - 1`` words would reach: the mean of ``(n_c - 1) / (V - 1)`` over
        the words, ``n_c`` the number of the word's class mates in the vocabulary.
        """
        used = {word: name for word, name in label.items() if word in self.vocab}
        if not used:
            raise ValueError(f"no labelled word is in the vocabulary; found {len(label)} labelled words")
        sizes = {name: list(used.values()).count(name) for name in set(used.values())}
        hits = [used.get(self.most_similar([word], k=1)[0][0]) == name for word, name in used.items()]
        chance = sum((sizes[name] - 1) / (len(self.vocab) - 1) for name in used.values()) / len(used)
        return WordClassScore(same_class=sum(hits) / len(used), chance=chance, used=len(used))

    def evaluate_analogies(self, questions: Sequence[tuple[str, str, str, str]]) -> "AnalogyScore":
        """Accuracy of 3CosAdd on ``(a, b, c, d)`` questions "``a : b :: c : d``".

        A question counts when its top answer (the query words excluded) is
        ``d``. Questions with a word outside the vocabulary are skipped, as in
        gensim's ``evaluate_word_analogies``.
        """
        used = [q for q in questions if all(w in self.vocab for w in q)]
        if not used:
            return AnalogyScore(correct=0, used=0, skipped=len(questions))
        ids = torch.tensor([[self.vocab.index(w) for w in q] for q in used])  # (Q, 4)
        a, b, c = self.unit[ids[:, 0]], self.unit[ids[:, 1]], self.unit[ids[:, 2]]  # (Q, D) each
        correct = 0
        for chunk in torch.split(torch.arange(len(used)), 1024):  # bounds the (Q, V) score matrix
            scores = F.normalize(b[chunk] - a[chunk] + c[chunk], dim=1) @ self.unit.T  # (q, V)
            scores.scatter_(1, ids[chunk, :3], -math.inf)
            correct += int((scores.argmax(dim=1) == ids[chunk, 3]).sum())
        return AnalogyScore(correct=correct, used=len(used), skipped=len(questions) - len(used))


@dataclass(frozen=True)
class WordPair:
    """Two words and the similarity people gave them (e.g. 0-10 in WordSim-353)."""

    first: str
    second: str
    score: float


def _data_lines(path: Union[str, Path]) -> list[str]:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or pathlib.Path; found {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must name an existing text file; found {str(path)!r}")
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]


def read_word_pairs(path: Union[str, Path], normalise: Optional[Callable[[str], str]] = None) -> list[WordPair]:
    """A word-similarity set: lines ``word1 <tab> word2 <tab> score``; ``#`` starts a comment.

    Parameters
    ----------
    path : str or Path
        E.g. ``lib.corpus.gensim_data("wordsim353.tsv")`` or ``"simlex999.txt"``.
    normalise : callable, optional
        Applied to every (lower-cased) word, e.g. a stemmer when the corpus is stemmed.
    """
    normalise = normalise or (lambda word: word)
    pairs = []
    for number, line in enumerate(_data_lines(path), start=1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(f"line {number} of {Path(path).name} must be 'word <tab> word <tab> score'; found {line!r}")
        pairs.append(WordPair(normalise(fields[0].lower()), normalise(fields[1].lower()), float(fields[2])))
    return pairs


def read_analogies(path: Union[str, Path], normalise: Optional[Callable[[str], str]] = None) -> dict[str, list]:
    """word2vec's analogy questions (``questions-words.txt``) by section.

    Returns
    -------
    dict
        Section name (``"capital-common-countries"``, ...) to a list of
        ``(a, b, c, d)`` tuples, lower-cased and passed through ``normalise``.
    """
    normalise = normalise or (lambda word: word)
    sections: dict[str, list] = {}
    current = None
    for number, line in enumerate(_data_lines(path), start=1):
        if line.startswith(":"):
            current = sections.setdefault(line[1:].strip(), [])
        elif line:
            words = line.lower().split()
            if len(words) != 4 or current is None:
                raise ValueError(f"line {number} of {Path(path).name} must hold 4 words after a ': section' line; "
                                 f"found {line!r}")
            current.append(tuple(normalise(w) for w in words))
    return sections


def _average_ranks(values: Tensor) -> Tensor:
    """Ranks 1..n; tied values share the mean of their ranks."""
    order = torch.argsort(values, stable=True)
    ranks = torch.empty_like(values)
    ranks[order] = torch.arange(1, values.numel() + 1, dtype=values.dtype)
    unique, inverse = torch.unique(values, return_inverse=True)
    totals = torch.zeros(unique.numel(), dtype=values.dtype).index_add_(0, inverse, ranks)
    sizes = torch.zeros(unique.numel(), dtype=values.dtype).index_add_(0, inverse, torch.ones_like(values))
    return (totals / sizes)[inverse]


def spearman(x: Tensor, y: Tensor) -> float:
    """Spearman's rank correlation: the Pearson correlation of the (tie-averaged) ranks.

    Shapes
    ------
    x, y : (n,) with n >= 2
    """
    for name, value in (("x", x), ("y", y)):
        if not isinstance(value, Tensor) or value.dim() != 1:
            found = f"shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
            raise TypeError(f"{name} must be a 1-D torch.Tensor; found {found}")
    if x.numel() != y.numel() or x.numel() < 2:
        raise ValueError(f"x and y must have the same length >= 2; found {x.numel()} and {y.numel()}")
    rx, ry = _average_ranks(x.double()), _average_ranks(y.double())
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denominator = (rx.norm() * ry.norm()).item()
    if denominator == 0:
        raise ValueError("Spearman's correlation is undefined when x or y is constant")
    return float((rx @ ry).item() / denominator)


@dataclass(frozen=True)
class SimilarityScore:
    """Result of :meth:`WordVectors.evaluate_word_pairs`."""

    spearman: float
    used: int
    skipped: int


@dataclass(frozen=True)
class AnalogyScore:
    """Result of :meth:`WordVectors.evaluate_analogies`."""

    correct: int
    used: int
    skipped: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.used if self.used else 0.0


@dataclass(frozen=True)
class WordClassScore:
    """Result of :meth:`WordVectors.evaluate_word_classes`: shares of the ``used`` labelled words."""

    same_class: float
    chance: float
    used: int
