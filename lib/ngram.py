"""n-gram language models: padding, counting with add-delta smoothing, perplexity.

A language model gives the probability of a sequence through the chain rule,
:math:`p(x_{1:T}) = \\prod_t p(x_t \\mid x_{<t})`, so it only ever predicts the
next token. This module is the counting half of chapter 6 (syllabus LM1-LM6);
the neural half is :mod:`lib.lm`.

1. *n-gram models* (:class:`NGramModel`) cut the history to the last ``n - 1``
   tokens (the Markov assumption) and estimate each conditional by counting,
   with add-delta (Lidstone) smoothing, :func:`add_delta_log_prob`. Sentences are
   padded with ``n - 1`` begin symbols ``<s>`` and one end symbol ``</s>``
   (:func:`pad`), so that the model also predicts where a sentence stops.
   :func:`unseen_fraction` measures the data sparsity that smoothing fights.
2. :func:`perplexity` turns any model's per-token log-probabilities into the
   usual score: the inverse geometric mean of the probabilities.

Conventions. n-gram models work on words (strings); their :meth:`NGramModel.step`
reads ids ``0 .. V - 1`` plus ``bos = V`` for :mod:`lib.decoding`.
Log-probabilities are natural logarithms unless a ``base`` says otherwise.

References
----------
.. [1] S. F. Chen, J. Goodman. "An Empirical Study of Smoothing Techniques for
   Language Modeling". Computer Speech and Language 13(4), 1999.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional, Sequence

import torch
from torch import Tensor

from lib.corpus import Vocabulary
from lib.validation import (
    require_broadcastable, require_int, require_log_probs, require_number, require_sentences, require_words,
)

__all__ = [
    "BOS",
    "EOS",
    "UNK",
    "pad",
    "ngrams",
    "add_delta_log_prob",
    "NGramModel",
    "unseen_fraction",
    "perplexity",
]

_LOG_FLOAT_MAX = math.log(sys.float_info.max)  # about 709.78
MAX_ORDER = 100  # n-gram orders above this are never meant (a padded sentence would be mostly <s>)

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_token_tensor(name: str, value: object, dims: int, ids_below: Optional[int] = None) -> None:
    if not isinstance(value, Tensor) or value.dtype != torch.long or value.dim() != dims:
        found = f"{value.dtype} of shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
        layout = "(N, t)" if dims == 2 else "(N,)"
        raise TypeError(f"{name} must be a LongTensor of shape {layout}; found {found}")
    if ids_below is not None and value.numel() and (value.min() < 0 or value.max() >= ids_below):
        raise ValueError(f"{name} must hold ids in [0, {ids_below - 1}]; found {value.min()}..{value.max()}")


# ---------------------------------------------------------------------------
# n-gram models.
# ---------------------------------------------------------------------------


def pad(sentence: Sequence[str], order: int) -> list[str]:
    """``order - 1`` begin symbols, the sentence, one end symbol.

    The begin symbols give the first words a full-length history; the end
    symbol is a word the model must predict, so the probabilities of all
    finished sentences (of every length) sum to one.

    Examples
    --------
    >>> pad(["the", "cat"], 3)
    ['<s>', '<s>', 'the', 'cat', '</s>']

    Shapes
    ------
    No tensors: ``len(output) == len(sentence) + order``.
    """
    require_int("order", order, 1, MAX_ORDER), require_words("sentence", sentence)
    return [BOS] * (order - 1) + list(sentence) + [EOS]


def ngrams(tokens: Sequence[str], order: int) -> list[tuple[str, ...]]:
    """Every run of ``order`` consecutive tokens, left to right.

    Shapes
    ------
    No tensors: ``max(0, len(tokens) - order + 1)`` tuples of length ``order``.
    """
    require_words("tokens", tokens), require_int("order", order, 1)
    return [tuple(tokens[i:i + order]) for i in range(len(tokens) - order + 1)]


def _check_add_delta(pair_counts: object, context_counts: object, delta: object, vocab_size: object) -> None:
    for name, value in (("pair_counts", pair_counts), ("context_counts", context_counts)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of counts; found {type(value).__name__}")
    require_number("delta", delta, 0.0), require_int("vocab_size", vocab_size, 1)
    require_broadcastable("context_counts", context_counts, "pair_counts", pair_counts)
    if bool((pair_counts < 0).any()) or bool((context_counts < pair_counts).any()):
        raise ValueError("counts must satisfy 0 <= pair_counts <= context_counts")


def add_delta_log_prob(pair_counts: Tensor, context_counts: Tensor, delta: float, vocab_size: int) -> Tensor:
    r"""Add-delta (Lidstone) smoothed log-probabilities from counts.

    .. math:: p(w \mid h) = \frac{m(h, w) + \delta}{m(h) + \delta |V|},
              \qquad m(h) = \sum_{v} m(h, v)

    ``delta = 1`` is add-one (Laplace) smoothing; ``delta = 0`` is the maximum
    likelihood estimate, which gives unseen n-grams probability 0 (log -inf),
    and, for a context never seen, 0 as well (no evidence, no probability).

    Parameters
    ----------
    pair_counts : Tensor
        ``m(h, w)`` for each asked (context, word) pair.
    context_counts : Tensor
        ``m(h)`` for the same pairs (broadcastable to ``pair_counts``).
    delta : float
        Pseudo-count added to every word, >= 0.
    vocab_size : int
        ``|V|``, the number of words that can follow a context.

    Returns
    -------
    Tensor
        ``log p(w | h)``, float64.

    Shapes
    ------
    pair_counts : (...)
    context_counts : broadcastable to (...)
    output : (...)
    """
    _check_add_delta(pair_counts, context_counts, delta, vocab_size)
    pair = pair_counts.double()
    context = context_counts.double()
    numerator = torch.log(pair + delta)
    denominator = torch.log(context + delta * vocab_size)
    log_prob = numerator - denominator
    # delta = 0 and m(h) = 0 is 0/0: an unseen context gets no probability either.
    return torch.where(context + delta * vocab_size > 0, log_prob, torch.full_like(log_prob, -math.inf))


@dataclass
class NGramModel:
    """An add-delta smoothed n-gram model: counts of ``(context, word)`` pairs.

    Build one with :meth:`fit` (from sentences) or :meth:`from_ngrams` (from
    n-grams padded by someone else, e.g. nltk). Words outside ``vocabulary``
    are read as ``unk`` wherever they appear.

    Parameters
    ----------
    order : int
        ``n``: each word is predicted from the ``n - 1`` before it.
    vocabulary : sequence of str
        The words the model can predict, ``</s>`` (and ``unk``) included; its
        length is the ``|V|`` of the smoothing formula. ``<s>`` may appear in
        contexts without being in it.
    delta : float
        Add-delta pseudo-count (>= 0).
    unk : str or None
        The stand-in for unknown words; None forbids unknown words.

    Attributes
    ----------
    counts : dict
        ``counts[context][word]``: how often ``word`` followed ``context``
        (``context`` a tuple of ``n - 1`` words) in the training n-grams.
    """

    order: int
    vocabulary: tuple[str, ...]
    delta: float = 1.0
    unk: Optional[str] = UNK
    counts: dict[tuple[str, ...], Counter] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        require_int("order", self.order, 1)
        require_number("delta", self.delta, 0.0)
        if isinstance(self.vocabulary, str) or not isinstance(self.vocabulary, (list, tuple)) \
                or not all(isinstance(w, str) for w in self.vocabulary):
            raise TypeError(f"vocabulary must be a sequence of str; found {self.vocabulary!r:.60}")
        self.vocabulary = tuple(self.vocabulary)
        self._ids = {word: i for i, word in enumerate(self.vocabulary)}
        if len(self._ids) != len(self.vocabulary) or not self.vocabulary:
            raise ValueError("vocabulary must be a non-empty sequence of distinct words")
        if self.unk is not None and self.unk not in self._ids:
            raise ValueError(f"unk must be one of the vocabulary's words (or None); found {self.unk!r}")
        self._totals = {context: sum(followers.values()) for context, followers in self.counts.items()}

    # ---- building -------------------------------------------------------------
    @classmethod
    def fit(cls, sentences: Iterable[Sequence[str]], order: int, delta: float = 1.0,
            vocabulary: Optional[Sequence[str]] = None, unk: Optional[str] = UNK) -> "NGramModel":
        """Count the n-grams of padded training sentences.

        Parameters
        ----------
        sentences : iterable of lists of str
        order : int
        delta : float
        vocabulary : sequence of str, optional
            Default: ``</s>``, ``unk`` and every training word, numbered as
            :class:`lib.corpus.Vocabulary` numbers them.
        unk : str or None

        Returns
        -------
        NGramModel

        Shapes
        ------
        No tensors.
        """
        require_sentences("sentences", sentences)
        sentences = [list(sentence) for sentence in sentences]
        if vocabulary is None:
            specials = (EOS,) if unk is None else (EOS, unk)
            vocabulary = Vocabulary.from_sentences(sentences, specials=specials).words
        return cls.from_ngrams([g for s in sentences for g in ngrams(pad(s, order), order)], vocabulary, delta, unk)

    @classmethod
    def from_ngrams(cls, grams: Iterable[Sequence[str]], vocabulary: Sequence[str], delta: float = 1.0,
                    unk: Optional[str] = UNK) -> "NGramModel":
        """Count given n-grams (all of one length, the order); no padding is added.

        Shapes
        ------
        No tensors.
        """
        grams = [tuple(g) for g in grams]
        if not grams or len({len(g) for g in grams}) != 1:
            raise ValueError("grams must be a non-empty list of n-grams of one length")
        model = cls(len(grams[0]), tuple(vocabulary), delta, unk)
        counts: dict[tuple[str, ...], Counter] = {}
        for gram in grams:
            *context, word = model.lookup(gram)
            counts.setdefault(tuple(context), Counter())[word] += 1
        return replace(model, counts=counts)

    def with_delta(self, delta: float) -> "NGramModel":
        """The same counts with another pseudo-count (no recounting)."""
        return replace(self, delta=delta)

    # ---- words and ids ----------------------------------------------------------
    def lookup(self, words: Sequence[str]) -> tuple[str, ...]:
        """``words`` with every unknown word replaced by ``unk`` (``<s>`` is known)."""
        out = []
        for word in words:
            if word in self._ids or word == BOS:
                out.append(word)
            elif self.unk is None:
                raise ValueError(f"{word!r} is not in the vocabulary and the model has no unknown-word token")
            else:
                out.append(self.unk)
        return tuple(out)

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    @property
    def bos_id(self) -> int:
        """The input-only id of ``<s>`` in :meth:`step` prefixes: ``V``."""
        return self.vocab_size

    @property
    def eos_id(self) -> int:
        return self._ids[EOS]

    # ---- probabilities: plain path ------------------------------------------------
    def prob(self, word: str, context: Sequence[str] = ()) -> float:
        """:math:`p(w \\mid h)` by the formula, for one word (the reference path).

        ``context`` holds the ``n - 1`` words before ``word`` (longer contexts
        are cut to their last ``n - 1`` words).

        Shapes
        ------
        No tensors.
        """
        require_words("context", context)
        context = self.lookup(tuple(context)[len(context) - self.order + 1:] if self.order > 1 else ())
        (word,) = self.lookup([word])
        if len(context) != self.order - 1:
            raise ValueError(f"context must hold {self.order - 1} words; found {context}")
        total = self._totals.get(context, 0)
        numerator = self.counts.get(context, {}).get(word, 0) + self.delta
        denominator = total + self.delta * self.vocab_size
        return numerator / denominator if denominator > 0 else 0.0

    def log_prob(self, word: str, context: Sequence[str] = ()) -> float:
        """``log prob(word, context)``; ``-inf`` for probability 0."""
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf

    # ---- probabilities: fast path ---------------------------------------------------
    def ngram_log_probs(self, grams: Sequence[Sequence[str]]) -> Tensor:
        """``log p(last word | the words before it)`` for each n-gram, vectorised.

        Returns
        -------
        Tensor
            float64 log-probabilities.

        Shapes
        ------
        output : (M,) for M n-grams
        """
        pair_counts, context_counts = self.pair_counts(grams)
        return add_delta_log_prob(pair_counts, context_counts, self.delta, self.vocab_size)

    def pair_counts(self, grams: Sequence[Sequence[str]]) -> tuple[Tensor, Tensor]:
        """``m(h, w)`` and ``m(h)`` of each n-gram: all that add-delta needs.

        Shapes
        ------
        output : (M,), (M,) float64
        """
        pairs, contexts = [], []
        for gram in grams:
            if len(gram) != self.order:
                raise ValueError(f"every n-gram must have {self.order} words; found {tuple(gram)}")
            *context, word = self.lookup(gram)
            context = tuple(context)
            pairs.append(self.counts.get(context, {}).get(word, 0))
            contexts.append(self._totals.get(context, 0))
        return torch.tensor(pairs, dtype=torch.float64), torch.tensor(contexts, dtype=torch.float64)

    def test_ngrams(self, sentences: Iterable[Sequence[str]]) -> list[tuple[str, ...]]:
        """The n-grams of padded sentences: one per predicted token (``</s>`` included)."""
        require_sentences("sentences", sentences)
        return [g for s in sentences for g in ngrams(pad(list(s), self.order), self.order)]

    def token_log_probs(self, sentences: Iterable[Sequence[str]]) -> Tensor:
        """Log-probability of every token of the sentences, each ``</s>`` included.

        Shapes
        ------
        output : (sum of (len(sentence) + 1),)
        """
        return self.ngram_log_probs(self.test_ngrams(sentences))

    def perplexity(self, sentences: Iterable[Sequence[str]]) -> float:
        """:func:`perplexity` of :meth:`token_log_probs`."""
        return perplexity(self.token_log_probs(sentences))

    def next_log_probs(self, context: Sequence[str]) -> Tensor:
        """The whole next-word distribution after ``context`` (log, float64).

        Shapes
        ------
        output : (V,), in the order of ``vocabulary``
        """
        context = self.lookup(tuple(context)[len(context) - self.order + 1:] if self.order > 1 else ())
        counts = torch.zeros(self.vocab_size, dtype=torch.float64)
        for word, count in self.counts.get(context, {}).items():
            counts[self._ids[word]] = count
        return add_delta_log_prob(counts, counts.sum(), self.delta, self.vocab_size)

    def step(self, prefixes: Tensor) -> Tensor:
        """Step function for :mod:`lib.decoding`: next-word log-probabilities of id prefixes.

        Ids index ``vocabulary``; ``bos_id`` (= V) stands for ``<s>``.

        Shapes
        ------
        prefixes : (N, t), each starting with ``bos_id``
        output : (N, V)
        """
        _require_token_tensor("prefixes", prefixes, 2, ids_below=self.vocab_size + 1)  # bos_id = V
        words = self.vocabulary + (BOS,)
        rows = []
        for prefix in prefixes.tolist():
            history = [BOS] * (self.order - 1) + [words[i] for i in prefix[1:]]
            rows.append(self.next_log_probs(history[len(history) - self.order + 1:] if self.order > 1 else []))
        return torch.stack(rows)  # (N, V)

    def decode(self, ids: Sequence[int]) -> list[str]:
        """Ids to words; ``</s>`` ends the sentence and is dropped."""
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            words.append(self.vocabulary[i])
        return words


def unseen_fraction(train: Iterable[Sequence[str]], test: Iterable[Sequence[str]], order: int) -> float:
    """The share of the test n-grams (of padded sentences) that never occur in training.

    Every such n-gram gets probability 0 from the unsmoothed maximum likelihood
    estimate: the data sparsity that grows quickly with ``order``.

    Returns
    -------
    float
        In [0, 1].

    Shapes
    ------
    No tensors.
    """
    require_sentences("train", train)
    require_sentences("test", test)
    seen = {g for s in train for g in ngrams(pad(list(s), order), order)}
    asked = [g for s in test for g in ngrams(pad(list(s), order), order)]
    if not asked:
        raise ValueError("test must contain at least one sentence")
    return sum(g not in seen for g in asked) / len(asked)


# ---------------------------------------------------------------------------
# Perplexity.
# ---------------------------------------------------------------------------


def perplexity(log_probs: Tensor, base: float = math.e) -> float:
    r"""Perplexity of a model on a text from its per-token log-probabilities.

    .. math:: \mathrm{PPL} = b^{-\frac{1}{T}\sum_{t=1}^{T} \log_b p(x_t \mid x_{<t})}
              = \Big(\prod_{t=1}^{T} p(x_t \mid x_{<t})\Big)^{-1/T}

    The exponent is the cross-entropy in units of ``log_b``; the value does not
    depend on the base as long as the logarithms and ``base`` agree. A model
    that spreads its probability evenly over ``K`` words has perplexity ``K``.

    Parameters
    ----------
    log_probs : Tensor
        ``log_b p(x_t | x_{<t})`` of every token of the text (all sentences
        concatenated), any shape.
    base : float
        ``b`` of the logarithms: ``math.e`` (natural, the default) or 2 (bits).

    Returns
    -------
    float
        >= 1 for probabilities <= 1; ``inf`` if some token has probability 0 or the
        value exceeds the largest float (mean log-probability below about -709.8).

    Shapes
    ------
    log_probs : (...), flattened
    """
    require_log_probs("log_probs", log_probs), require_number("base", base, 1.0 + 1e-12)
    cross_entropy = -float(log_probs.double().mean())  # in units of log_base
    # b^H overflows a float (OverflowError) for H ln b above ~709.8: the perplexity is inf.
    return base ** cross_entropy if cross_entropy * math.log(base) < _LOG_FLOAT_MAX else math.inf
