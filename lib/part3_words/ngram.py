"""n-gram language models: padding, counting with add-delta smoothing, perplexity.

A language model gives the probability of a sequence through the chain rule,
:math:`p(x_{1:T}) = \\prod_t p(x_t \\mid x_{<t})`, so it only ever predicts the
next token. This module is the counting half of chapter 6 (syllabus LM1-LM6);
the neural half is :mod:`lib.part3_words.lm`.

1. *n-gram models* (:class:`NGramModel`) cut the history to the last ``n - 1``
   tokens (the Markov assumption) and estimate each conditional by counting,
   with add-delta (Lidstone) smoothing, :func:`add_delta_log_prob`. Sentences are
   padded with ``n - 1`` begin symbols ``<s>`` and one end symbol ``</s>``
   (:func:`pad`), so that the model also predicts where a sentence stops.
   :func:`unseen_fraction` measures the data sparsity that smoothing fights.
2. :func:`perplexity` turns any model's per-token log-probabilities into the
   usual score: the inverse geometric mean of the probabilities.

Conventions. n-gram models work on words (strings); their :meth:`NGramModel.step`
reads ids ``0 .. V - 1`` plus ``bos = V`` for :mod:`lib.part3_words.decoding`.
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Optional, no_type_check

import torch
from jaxtyping import Float, Float64, Int64, Real
from torch import Tensor

from lib.checked import (
    Fraction,
    LogBase,
    NonNegative,
    NonNegativeInt,
    NonNegativeOrInf,
    PositiveInt,
    Sentences,
    Words,
    each,
    is_a_list_of_words,
    positive_int_at_most,
)
from lib.corpus import Vocabulary

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
MAX_ORDER = 100  # higher orders are never meant: a padded sentence would be mostly <s>

BOS, EOS, UNK = "<s>", "</s>", "<unk>"


def pad(sentence: Words, order: positive_int_at_most(MAX_ORDER)) -> list[str]:
    """``order - 1`` begin symbols, the sentence, one end symbol.

    The begin symbols give the first words a full-length history; the end symbol is a
    word the model must predict, so the probabilities of all finished sentences (of
    every length) sum to one: ``pad(["the", "cat"], 3)`` is
    ``['<s>', '<s>', 'the', 'cat', '</s>']``.
    """
    return [BOS] * (order - 1) + list(sentence) + [EOS]


def ngrams(tokens: Words, order: PositiveInt) -> list[tuple[str, ...]]:
    """Every run of ``order`` consecutive tokens, left to right."""
    return [tuple(tokens[i : i + order]) for i in range(len(tokens) - order + 1)]


def add_delta_log_prob(
    pair_counts: Real[Tensor, "..."],
    context_counts: Real[Tensor, "..."],
    delta: NonNegative,
    vocab_size: PositiveInt,
) -> Float64[Tensor, "..."]:
    r"""Add-delta (Lidstone) smoothed log-probabilities from counts, in float64.

    .. math:: p(w \mid h) = \frac{m(h, w) + \delta}{m(h) + \delta |V|},
              \qquad m(h) = \sum_{v} m(h, v)

    ``pair_counts`` holds :math:`m(h, w)` of each asked pair, ``context_counts`` its
    :math:`m(h)` (broadcastable to it). ``delta = 1`` is add-one (Laplace) smoothing;
    ``delta = 0`` is the maximum likelihood estimate, which gives unseen n-grams, and
    every word after an unseen context, probability 0 (log -inf).
    """
    try:
        torch.broadcast_shapes(pair_counts.shape, context_counts.shape)
    except RuntimeError:
        raise ValueError(
            f"context_counts must broadcast against pair_counts "
            f"{tuple(pair_counts.shape)}; found {tuple(context_counts.shape)}"
        ) from None
    # False for NaN too: NaN counts are refused.
    if not bool(((0 <= pair_counts) & (pair_counts <= context_counts)).all()):
        raise ValueError(
            "counts must satisfy 0 <= pair_counts <= context_counts; found "
            f"pair_counts {pair_counts.min()}..{pair_counts.max()}, "
            f"context_counts {context_counts.min()}..{context_counts.max()}"
        )
    pair = pair_counts.double()
    context = context_counts.double()
    numerator = torch.log(pair + delta)
    denominator = torch.log(context + delta * vocab_size)
    log_prob = numerator - denominator
    # delta = 0 and m(h) = 0 is 0/0: an unseen context gets no probability either.
    seen = context + delta * vocab_size > 0
    return torch.where(seen, log_prob, torch.full_like(log_prob, -math.inf))


@dataclass
class NGramModel:
    """An add-delta smoothed n-gram model: counts of ``(context, word)`` pairs.

    Build one with :meth:`fit` (from sentences) or :meth:`from_ngrams` (from n-grams
    padded by someone else, e.g. nltk). ``order`` is ``n``; ``vocabulary`` holds the
    words the model can predict, ``</s>`` (and ``unk``) included, its length the
    ``|V|`` of the smoothing (``<s>`` may appear in contexts without being in it).
    Words outside it are read as ``unk``; ``unk=None`` refuses them.
    ``counts[context][word]`` is how often ``word`` followed ``context`` (a tuple of
    ``n - 1`` words) in the training n-grams.
    """

    order: PositiveInt
    vocabulary: Words
    delta: NonNegative = 1.0
    unk: Optional[str] = UNK
    counts: dict[tuple[str, ...], Counter] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.vocabulary = tuple(self.vocabulary)
        self._ids = {word: i for i, word in enumerate(self.vocabulary)}
        if len(self._ids) != len(self.vocabulary) or not self.vocabulary:
            raise ValueError(
                "vocabulary must be a non-empty sequence of distinct words; "
                f"found {len(self.vocabulary)} words, {len(self._ids)} distinct"
            )
        if self.unk is not None and self.unk not in self._ids:
            raise ValueError(
                "unk must be one of the vocabulary's words (or None); "
                f"found {self.unk!r}"
            )
        self._totals = {
            context: sum(followers.values())
            for context, followers in self.counts.items()
        }

    # ---- building -----------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        sentences: Sentences,
        order: PositiveInt,
        delta: NonNegative = 1.0,
        vocabulary: Optional[Words] = None,
        unk: Optional[str] = UNK,
    ) -> NGramModel:
        """Count the n-grams of padded training sentences.

        The default ``vocabulary`` is ``</s>``, ``unk`` and every training word,
        numbered as :class:`lib.corpus.Vocabulary` numbers them.
        """
        sentences = [list(sentence) for sentence in sentences]
        if vocabulary is None:
            specials = (EOS,) if unk is None else (EOS, unk)
            vocabulary = Vocabulary.from_sentences(sentences, specials=specials).words
        grams = [g for s in sentences for g in ngrams(pad(s, order), order)]
        return cls.from_ngrams(grams, vocabulary, delta, unk)

    @classmethod
    def from_ngrams(
        cls,
        grams: Iterable[Sequence[str]],
        vocabulary: Words,
        delta: NonNegative = 1.0,
        unk: Optional[str] = UNK,
    ) -> NGramModel:
        """Count given n-grams (all of one length, the order); no padding is added."""
        grams = list(grams)
        for gram in grams:  # beartype does not look inside an Iterable
            if not is_a_list_of_words(gram):
                raise TypeError(
                    f"grams must each be a sequence of str words; found {gram!r}"
                )
        grams = [tuple(g) for g in grams]
        if not grams or len({len(g) for g in grams}) != 1:
            raise ValueError(
                "grams must be a non-empty list of n-grams of one length; found "
                f"{len(grams)} n-grams of lengths {sorted({len(g) for g in grams})}"
            )
        model = cls(len(grams[0]), tuple(vocabulary), delta, unk)
        counts: dict[tuple[str, ...], Counter] = {}
        for gram in grams:
            *context, word = model.lookup(gram)
            counts.setdefault(tuple(context), Counter())[word] += 1
        return replace(model, counts=counts)

    def with_delta(self, delta: NonNegative) -> NGramModel:
        """The same counts with another pseudo-count (no recounting)."""
        return replace(self, delta=delta)

    # ---- words and ids ------------------------------------------------------------
    @no_type_check  # once per n-gram: its callers checked the words, or built them
    def lookup(self, words: Sequence[str]) -> tuple[str, ...]:
        """``words`` with every unknown word replaced by ``unk`` (``<s>`` is known)."""
        out = []
        for word in words:
            if word in self._ids or word == BOS:
                out.append(word)
            elif self.unk is None:
                raise ValueError(
                    f"words must be in the vocabulary, as the model has no "
                    f"unknown-word token; found {word!r}"
                )
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
    def _last_context(self, words: Sequence[str]) -> tuple[str, ...]:
        # The last n - 1 words, read as the model reads them.
        return self.lookup(
            tuple(words)[len(words) - self.order + 1 :] if self.order > 1 else ()
        )

    def prob(self, word: str, context: Words = ()) -> float:
        """:math:`p(w \\mid h)` by the formula, for one word (the reference path).

        ``context`` holds the ``n - 1`` words before ``word`` (longer contexts are cut
        to their last ``n - 1`` words).
        """
        context = self._last_context(context)
        (word,) = self.lookup([word])
        if word not in self._ids:  # <s> begins contexts, but is never predicted
            raise ValueError(
                f"word must be in the vocabulary (or be read as unk); found {word!r}"
            )
        if len(context) != self.order - 1:
            raise ValueError(
                f"context must hold {self.order - 1} words; found {context}"
            )
        total = self._totals.get(context, 0)
        numerator = self.counts.get(context, {}).get(word, 0) + self.delta
        denominator = total + self.delta * self.vocab_size
        return numerator / denominator if denominator > 0 else 0.0

    def log_prob(self, word: str, context: Words = ()) -> float:
        """``log prob(word, context)``; ``-inf`` for probability 0."""
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf

    # ---- probabilities: fast path -------------------------------------------------
    def ngram_log_probs(self, grams: each(Words)) -> Float64[Tensor, "M"]:
        """``log p(last word | the words before it)`` of each of M n-grams."""
        pair_counts, context_counts = self.pair_counts(grams)
        return add_delta_log_prob(
            pair_counts, context_counts, self.delta, self.vocab_size
        )

    def pair_counts(
        self, grams: each(Words)
    ) -> tuple[Float64[Tensor, "M"], Float64[Tensor, "M"]]:
        """``m(h, w)`` and ``m(h)`` of each of M n-grams: all that add-delta needs."""
        pairs, contexts = [], []
        for gram in grams:
            if len(gram) != self.order:
                raise ValueError(
                    f"grams must each have {self.order} words; found {tuple(gram)}"
                )
            *context, word = self.lookup(gram)
            context = tuple(context)
            pairs.append(self.counts.get(context, {}).get(word, 0))
            contexts.append(self._totals.get(context, 0))
        return (
            torch.tensor(pairs, dtype=torch.float64),
            torch.tensor(contexts, dtype=torch.float64),
        )

    def test_ngrams(self, sentences: Sentences) -> list[tuple[str, ...]]:
        """The n-grams of padded sentences: one per predicted token, ``</s>`` too."""
        return [g for s in sentences for g in ngrams(pad(s, self.order), self.order)]

    def token_log_probs(self, sentences: Sentences) -> Float64[Tensor, "M"]:
        """Log-probability of each of the M tokens of the sentences, each ``</s>``
        included."""
        return self.ngram_log_probs(self.test_ngrams(sentences))

    def perplexity(self, sentences: Sentences) -> float:
        """:func:`perplexity` of :meth:`token_log_probs`."""
        return perplexity(self.token_log_probs(sentences))

    def next_log_probs(self, context: Words) -> Float64[Tensor, "V"]:
        """The whole next-word distribution after ``context`` (log), in the order of
        ``vocabulary``."""
        context = self._last_context(context)
        counts = torch.zeros(self.vocab_size, dtype=torch.float64)
        for word, count in self.counts.get(context, {}).items():
            counts[self._ids[word]] = count
        return add_delta_log_prob(counts, counts.sum(), self.delta, self.vocab_size)

    def step(self, prefixes: Int64[Tensor, "N t"]) -> Float64[Tensor, "N V"]:
        """Next-word log-probabilities of id prefixes, each starting with ``bos_id``
        (= V, ``<s>``): the step function of :mod:`lib.part3_words.decoding`."""
        # A negative id would index the words from the end, silently.
        if prefixes.numel() and (prefixes.min() < 0 or prefixes.max() > self.bos_id):
            raise ValueError(
                f"prefixes must hold ids in [0, {self.bos_id}]; "
                f"found {prefixes.min()}..{prefixes.max()}"
            )
        # The first id is skipped as bos: any other would be dropped silently.
        if prefixes.shape[1] == 0:
            raise ValueError(
                f"prefixes must each start with bos_id {self.bos_id}; found width 0"
            )
        if bool((prefixes[:, 0] != self.bos_id).any()):
            raise ValueError(
                f"prefixes must each start with bos_id {self.bos_id}; "
                f"found first ids {prefixes[:, 0].unique().tolist()}"
            )
        later = (prefixes[:, 1:] == self.bos_id).any(dim=1)  # (N,)
        if bool(later.any()):
            raise ValueError(
                f"prefixes must hold bos_id {self.bos_id} first only; "
                f"found it later in {int(later.sum())} of {len(prefixes)} rows"
            )
        words = self.vocabulary + (BOS,)
        rows = []
        for prefix in prefixes.tolist():
            history = [BOS] * (self.order - 1) + [words[i] for i in prefix[1:]]
            rows.append(self.next_log_probs(history))
        return torch.stack(rows)  # (N, V)

    def decode(self, ids: each(NonNegativeInt)) -> list[str]:
        """Ids to words; ``</s>`` ends the sentence and is dropped."""
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            if i >= self.vocab_size:
                raise ValueError(
                    f"ids must be below the vocabulary's size {self.vocab_size}; "
                    f"found {i}"
                )
            words.append(self.vocabulary[i])
        return words


def unseen_fraction(train: Sentences, test: Sentences, order: PositiveInt) -> Fraction:
    """The share, in [0, 1], of the test n-grams (of padded sentences) that never occur
    in training: each gets probability 0 from the unsmoothed maximum likelihood
    estimate, a sparsity that grows quickly with ``order``."""
    if not test:
        raise ValueError("test must contain at least one sentence; found none")
    seen = {g for s in train for g in ngrams(pad(s, order), order)}
    asked = [g for s in test for g in ngrams(pad(s, order), order)]
    return sum(g not in seen for g in asked) / len(asked)


# ---------------------------------------------------------------------------
# Perplexity.
# ---------------------------------------------------------------------------


def perplexity(
    log_probs: Float[Tensor, "..."], base: LogBase = math.e
) -> NonNegativeOrInf:
    r"""Perplexity of a model on a text from its per-token log-probabilities.

    .. math:: \mathrm{PPL} = b^{-\frac{1}{T}\sum_{t=1}^{T} \log_b p(x_t \mid x_{<t})}
              = \Big(\prod_{t=1}^{T} p(x_t \mid x_{<t})\Big)^{-1/T}

    ``log_probs`` holds :math:`\log_b p(x_t \mid x_{<t})` of every token of the text
    (any shape); ``base`` is ``b``: ``math.e`` or 2 (bits). A model that spreads its
    probability evenly over ``K`` words has perplexity ``K``. The result is ``inf``
    if a token has probability 0 or the value exceeds the largest float.
    """
    if log_probs.numel() == 0:
        raise ValueError(
            "log_probs must hold at least one token; found an empty tensor"
        )
    if bool(torch.isnan(log_probs).any()) or bool((log_probs == math.inf).any()):
        raise ValueError(
            "log_probs must be log-probabilities (finite or -inf); found NaN or +inf"
        )
    # A probability above 1 is no probability; 1e-4 forgives float noise around 0.
    if bool((log_probs > 1e-4).any()):
        raise ValueError(
            "log_probs must be log-probabilities (<= 0); "
            f"found values up to {float(log_probs.max())}"
        )
    cross_entropy = -float(log_probs.double().mean())  # in units of log base `base`
    # b^H overflows a float for H ln b above ~709.8: the perplexity is inf.
    if cross_entropy * math.log(base) < _LOG_FLOAT_MAX:
        return base**cross_entropy
    return math.inf
