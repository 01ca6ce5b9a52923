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
2. *Models that fall back on shorter histories*: :class:`LinearInterpolation`
   mixes the maximum-likelihood estimates of every order with weights fitted on
   held-out text by EM (:func:`interpolation_weights`; Jelinek & Mercer, 1980);
   :class:`KneserNeyModel` subtracts a fixed discount from every count and gives
   what it took to the next lower order: interpolated absolute discounting (Ney et
   al., 1994) or, with continuation counts, interpolated Kneser-Ney (Kneser & Ney,
   1995; Chen & Goodman [1]_, section 3; Jurafsky & Martin [2]_, chapter 3).
3. :func:`perplexity` turns any model's per-token log-probabilities into the
   usual score: the inverse geometric mean of the probabilities.

Conventions. n-gram models work on words (strings); their :meth:`NGramModel.step`
reads ids ``0 .. V - 1`` plus ``bos = V`` for :mod:`lib.part3_words.decoding`.
Log-probabilities are natural logarithms unless a ``base`` says otherwise.

References
----------
.. [1] S. F. Chen, J. Goodman. "An Empirical Study of Smoothing Techniques for
   Language Modeling". Computer Speech and Language 13(4), 1999.
.. [2] D. Jurafsky, J. H. Martin. "Speech and Language Processing", 3rd edition
   draft, chapter 3 "N-gram Language Models".
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
    "KneserNeyModel",
    "interpolation_weights",
    "LinearInterpolation",
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
        if 0 in prefixes.shape:
            raise ValueError(
                f"prefixes must be at least one row, each starting with bos_id "
                f"{self.bos_id}; found shape {tuple(prefixes.shape)}"
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
# Falling back on shorter histories: interpolation, absolute discounting and
# Kneser-Ney.
# ---------------------------------------------------------------------------


def _level_counts(counts: dict, continuation: bool) -> list[dict]:
    """``levels[k - 1][h][w]`` = c_k(h, w) for every order k = 1 .. n, from the n-gram
    counts ``counts[h][w]`` (k = n). Below n, a raw count adds up the counts of every
    longer gram ending in ``(h, w)``; a continuation count is the number of distinct
    words u seen before it, N1+(. h w): the number of grams ``(u, h, w)`` one level up
    with a count above 0."""
    levels = [counts]
    for _ in range(len(next(iter(counts))), 0, -1):  # n - 1 levels below n
        lower: dict = {}
        for context, followers in levels[0].items():
            for word, count in followers.items():
                added = 1 if continuation else count
                lower.setdefault(context[1:], Counter())[word] += added
        levels.insert(0, lower)
    return levels


def _history_totals(levels: list[dict]) -> list[dict]:
    """``totals[k - 1][h]`` = the sum over w of ``levels[k - 1][h][w]``."""
    return [{h: sum(f.values()) for h, f in level.items()} for level in levels]


def _ney_discount(level: dict) -> float:
    # D = n1 / (n1 + 2 n2), n_r the number of grams of count r (Ney et al., 1994).
    counts = Counter(c for followers in level.values() for c in followers.values())
    n1, n2 = counts[1], counts[2]
    return n1 / (n1 + 2 * n2) if n1 + n2 else 0.5


@dataclass
class KneserNeyModel:
    r"""Interpolated absolute discounting, or interpolated Kneser-Ney smoothing.

    .. math:: p_k(w \mid h) = \frac{\max(c_k(h, w) - D_k, 0)}{c_k(h)}
              + \frac{D_k\, N_{1+}(h\,\bullet)}{c_k(h)}\, p_{k-1}(w \mid h'),
              \qquad p_0(w) = \frac{1}{|V|}

    for k = 1 .. n, with :math:`c_k(h) = \sum_v c_k(h, v)`, :math:`N_{1+}(h\,\bullet)`
    the number of words with :math:`c_k(h, w) > 0`, and h' the history h without its
    first word; a history with :math:`c_k(h) = 0` passes :math:`p_{k-1}` on unchanged.
    The top order counts the n-grams; with ``continuation=True`` (Kneser-Ney) each
    lower order counts the distinct words seen before ``(h, w)``, with ``False``
    (absolute discounting) it counts ``(h, w)`` itself. ``discounts`` holds
    :math:`D_1, \dots, D_n` in [0, 1] (default: :math:`n_1 / (n_1 + 2 n_2)` of each
    order's counts, Ney et al.'s estimate); :math:`D_1 = 0` leaves out the uniform
    :math:`p_0`, as nltk does, and gives the words never counted probability 0.
    """

    counted: NGramModel = field(repr=False)  # n-gram counts, vocabulary and unk
    discounts: each(Fraction) = ()
    continuation: bool = True
    levels: list = field(default_factory=list, repr=False)

    def __post_init__(self):
        self.discounts = tuple(float(d) for d in self.discounts)
        if len(self.discounts) != self.order or not all(
            0 <= d <= 1 for d in self.discounts
        ):
            raise ValueError(
                f"discounts must hold {self.order} values in [0, 1], one per order; "
                f"found {self.discounts}"
            )
        self.levels = _level_counts(self.counted.counts, self.continuation)
        self._totals = _history_totals(self.levels)

    @classmethod
    def fit(
        cls,
        sentences: Sentences,
        order: positive_int_at_most(MAX_ORDER),
        discounts: Optional[each(Fraction)] = None,
        continuation: bool = True,
        vocabulary: Optional[Words] = None,
        unk: Optional[str] = UNK,
    ) -> KneserNeyModel:
        """Count the n-grams of padded sentences (as :meth:`NGramModel.fit` does)."""
        counted = NGramModel.fit(sentences, order, 0.0, vocabulary, unk)
        return cls.from_counts(counted, discounts, continuation)

    @classmethod
    def from_counts(
        cls,
        counted: NGramModel,
        discounts: Optional[each(Fraction)] = None,
        continuation: bool = True,
    ) -> KneserNeyModel:
        """Smooth the counts of an :class:`NGramModel` (its delta is not used)."""
        if discounts is None:
            levels = _level_counts(counted.counts, continuation)
            discounts = [_ney_discount(level) for level in levels]
        return cls(counted, tuple(discounts), continuation)

    @property
    def order(self) -> int:
        return self.counted.order

    @property
    def vocabulary(self) -> tuple[str, ...]:
        return self.counted.vocabulary

    def prob(self, word: str, context: Words = ()) -> float:
        """:math:`p_n(w \\mid h)`, ``context`` holding the ``n - 1`` words before."""
        self.counted.prob(word, context)  # refuses what NGramModel.prob refuses
        context = self.counted._last_context(context)
        (word,) = self.counted.lookup([word])
        return self._prob(word, context)

    @no_type_check  # once per token: prob and token_log_probs looked the words up
    def _prob(self, word, context):
        p = 1 / len(self.vocabulary)
        for k in range(1, self.order + 1):
            history = context[len(context) - k + 1 :] if k > 1 else ()
            followers = self.levels[k - 1].get(history)
            if not followers:  # an unseen history: p_{k-1} unchanged
                continue
            total, d = self._totals[k - 1][history], self.discounts[k - 1]
            kept = max(followers.get(word, 0) - d, 0.0) / total
            p = kept + d * len(followers) / total * p
        return p

    def token_log_probs(self, sentences: Sentences) -> Float64[Tensor, "M"]:
        """Log-probability of each of the M tokens of the sentences, each ``</s>``
        included."""
        grams = [self.counted.lookup(g) for g in self.counted.test_ngrams(sentences)]
        probs = [self._prob(g[-1], g[:-1]) for g in grams]
        return torch.tensor(probs, dtype=torch.float64).log()

    def perplexity(self, sentences: Sentences) -> float:
        """:func:`perplexity` of :meth:`token_log_probs`."""
        return perplexity(self.token_log_probs(sentences))

    def next_probs(self, context: Words) -> Float64[Tensor, "V"]:
        """The whole next-word distribution after ``context``, in the order of
        ``vocabulary`` (one :meth:`prob` per word)."""
        context = self.counted._last_context(context)
        return torch.tensor(
            [self._prob(w, context) for w in self.vocabulary], dtype=torch.float64
        )


def interpolation_weights(
    components: Float64[Tensor, "M K"], steps: PositiveInt = 500
) -> Float64[Tensor, "K"]:
    r"""Mixture weights :math:`\lambda` that maximise
    :math:`\sum_t \log \sum_k \lambda_k P_{tk}` over M held-out tokens, by EM.

    ``components[t, k]`` is component k's probability of token t. Each step gives
    component k the average share of the tokens it explains,
    :math:`\lambda_k \leftarrow \frac{1}{M} \sum_t \lambda_k P_{tk} / \sum_j
    \lambda_j P_{tj}`, which never lowers the likelihood; it stops after ``steps``
    steps or when no weight moves by more than 1e-12.
    """
    if components.shape[0] == 0:
        raise ValueError(
            "components must hold at least one held-out token (row); found shape "
            f"{tuple(components.shape)}"
        )
    if not bool(((components >= 0) & (components <= 1)).all()) or not bool(
        (components.sum(1) > 0).all()
    ):
        raise ValueError(
            "components must be probabilities in [0, 1] with some component above 0 "
            "for every token; found a negative, NaN, above-1 or all-zero row"
        )
    weights = torch.full((components.shape[1],), 1 / components.shape[1])
    weights = weights.double()
    for _ in range(steps):
        shares = components * weights  # (M, K)
        updated = (shares / shares.sum(1, keepdim=True)).mean(0)
        done = bool((updated - weights).abs().max() < 1e-12)
        weights = updated
        if done:
            break
    return weights


@dataclass
class LinearInterpolation:
    r"""Linear interpolation of the maximum-likelihood estimates of every order,

    .. math:: p(w \mid h) = \lambda_0 \frac{1}{|V|}
              + \sum_{k=1}^{n} \lambda_k\, p^{\mathrm{ML}}_k(w \mid h_k),
              \qquad \sum_k \lambda_k = 1,

    :math:`h_k` the last k - 1 words of h, :math:`p^{\mathrm{ML}}_k = c_k(h_k, w) /
    c_k(h_k)` from raw counts; where :math:`c_k(h_k) = 0`, :math:`p^{\mathrm{ML}}_k` is
    replaced by the component below it, so every mixture sums to 1. ``weights`` are
    :math:`\lambda_0, \dots, \lambda_n`, fitted on held-out text by
    :func:`interpolation_weights` in :meth:`fit`.
    """

    counted: NGramModel = field(repr=False)
    weights: each(NonNegative) = ()
    levels: list = field(default_factory=list, repr=False)

    def __post_init__(self):
        self.weights = tuple(float(w) for w in self.weights)
        if len(self.weights) != self.counted.order + 1 or not (
            all(w >= 0 for w in self.weights) and abs(sum(self.weights) - 1) < 1e-9
        ):
            raise ValueError(
                f"weights must hold {self.counted.order + 1} values >= 0 that sum to "
                f"1; found {self.weights}"
            )
        self.levels = _level_counts(self.counted.counts, continuation=False)
        self._totals = _history_totals(self.levels)

    @classmethod
    def fit(
        cls,
        sentences: Sentences,
        order: positive_int_at_most(MAX_ORDER),
        held_out: Sentences,
        vocabulary: Optional[Words] = None,
        unk: Optional[str] = UNK,
    ) -> LinearInterpolation:
        """Count the n-grams of padded ``sentences``; fit the weights by EM on the
        padded ``held_out`` sentences, which must share none of them."""
        shared = {tuple(s) for s in sentences} & {tuple(s) for s in held_out}
        if shared:
            raise ValueError(
                "held_out must be disjoint from sentences; found "
                f"{len(shared)} sentences in both"
            )
        counted = NGramModel.fit(sentences, order, 0.0, vocabulary, unk)
        return cls.from_counts(counted, held_out)

    @classmethod
    def from_counts(
        cls, counted: NGramModel, held_out: Sentences
    ) -> LinearInterpolation:
        """Interpolate the counts of an :class:`NGramModel`, with weights fitted on
        ``held_out`` (the caller keeps it apart from the counted text)."""
        if not held_out:
            raise ValueError(
                "held_out must hold at least one sentence to fit the weights on; "
                "found none"
            )
        model = cls(counted, (1.0,) + (0.0,) * counted.order)
        weights = interpolation_weights(model.components(held_out))
        return cls(counted, tuple(weights.tolist()))

    @property
    def order(self) -> int:
        return self.counted.order

    @property
    def vocabulary(self) -> tuple[str, ...]:
        return self.counted.vocabulary

    @no_type_check  # once per token: components and next_probs looked the words up
    def _components(self, word, context):
        row = [1 / len(self.vocabulary)]
        for k in range(1, self.order + 1):
            history = context[len(context) - k + 1 :] if k > 1 else ()
            total = self._totals[k - 1].get(history, 0)
            followers = self.levels[k - 1].get(history, {})
            row.append(followers.get(word, 0) / total if total else row[-1])
        return row

    def components(self, sentences: Sentences) -> Float64[Tensor, "M K"]:
        """Each component's probability (uniform, then orders 1 .. n) of each of the M
        tokens of the padded sentences: ``K = n + 1`` columns."""
        grams = [self.counted.lookup(g) for g in self.counted.test_ngrams(sentences)]
        return torch.tensor(
            [self._components(g[-1], g[:-1]) for g in grams], dtype=torch.float64
        )

    def token_log_probs(self, sentences: Sentences) -> Float64[Tensor, "M"]:
        """Log-probability of each of the M tokens of the sentences, each ``</s>``
        included."""
        weights = torch.tensor(self.weights, dtype=torch.float64)
        return (self.components(sentences) @ weights).log()

    def perplexity(self, sentences: Sentences) -> float:
        """:func:`perplexity` of :meth:`token_log_probs`."""
        return perplexity(self.token_log_probs(sentences))

    def next_probs(self, context: Words) -> Float64[Tensor, "V"]:
        """The whole next-word distribution after ``context``, in the order of
        ``vocabulary``."""
        context = self.counted._last_context(context)
        rows = torch.tensor(
            [self._components(w, context) for w in self.vocabulary],
            dtype=torch.float64,
        )
        return rows @ torch.tensor(self.weights, dtype=torch.float64)


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
