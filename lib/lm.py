"""Language models: n-gram counts, a neural model, perplexity, sampling and exposure bias.

A language model gives the probability of a sequence through the chain rule,
:math:`p(x_{1:T}) = \\prod_t p(x_t \\mid x_{<t})`, so it only ever predicts the
next token. The module follows chapter 6 (syllabus LM1-LM6):

1. *n-gram models* (:class:`NGramModel`) cut the history to the last ``n - 1``
   tokens (the Markov assumption) and estimate each conditional by counting,
   with add-delta (Lidstone) smoothing, :func:`add_delta_log_prob`. Sentences are
   padded with ``n - 1`` begin symbols ``<s>`` and one end symbol ``</s>``
   (:func:`pad`), so that the model also predicts where a sentence stops.
   :func:`unseen_fraction` measures the data sparsity that smoothing fights.
2. :func:`perplexity` turns any model's per-token log-probabilities into the
   usual score: the inverse geometric mean of the probabilities.
3. :class:`NeuralLM` is the "embedding -> feature layer -> softmax" model of
   Bengio et al. (2003): the feature layer reads a window of the last ``n - 1``
   embeddings (a feed-forward n-gram model) or their running average. Its
   recurrent sibling is :class:`lib.char_lm.CharLM`; both are sampled with
   :func:`lib.decoding.sample` at any temperature.
4. :func:`train_lm` trains any such model by teacher forcing or by scheduled
   sampling (Bengio et al., 2015): with probability ``1 - epsilon`` an input
   token is replaced by the model's own sample (:func:`scheduled_sampling_inputs`),
   ``epsilon`` decaying by an :class:`EpsilonSchedule`.
5. :class:`CountingLanguage`, a toy language whose true next-token distribution
   is known exactly, and :func:`drift`, which measures exposure bias: how far
   a model's predictions are from the truth after its *own* samples compared
   with after real data.

Conventions. n-gram models work on words (strings). Neural models work on ids
``0 .. V - 1`` and read an extra input-only id ``bos = V``, as in
:mod:`lib.rnn` and :mod:`lib.decoding`. Log-probabilities are natural
logarithms unless a ``base`` says otherwise.

References
----------
.. [1] S. F. Chen, J. Goodman. "An Empirical Study of Smoothing Techniques for
   Language Modeling". Computer Speech and Language 13(4), 1999.
.. [2] Y. Bengio, R. Ducharme, P. Vincent, C. Jauvin. "A Neural Probabilistic
   Language Model". JMLR 3, 2003.
.. [3] S. Bengio, O. Vinyals, N. Jaitly, N. Shazeer. "Scheduled Sampling for
   Sequence Prediction with Recurrent Neural Networks". NeurIPS 2015.
   arXiv:1506.03099.
.. [4] F. Huszár. "How (not) to Train your Generative Model: Scheduled
   Sampling, Likelihood, Adversary?". arXiv:1511.05101, 2015.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.char_lm import NextTokenLM
from lib.corpus import Vocabulary
from lib.rnn import clip_grad_norm
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
    "NeuralLM",
    "FEATURES",
    "EpsilonSchedule",
    "scheduled_sampling_inputs",
    "train_lm",
    "token_log_probs",
    "CountingLanguage",
    "rollout",
    "drift",
]

_LOG_FLOAT_MAX = math.log(sys.float_info.max)  # about 709.78
MAX_ORDER = 100  # n-gram orders above this are never meant (a padded sentence would be mostly <s>)

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
FEATURES = ("window", "average")


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_token_tensor(name: str, value: object, dims: int) -> None:
    if not isinstance(value, Tensor) or value.dtype != torch.long or value.dim() != dims:
        found = f"{value.dtype} of shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
        layout = "(N, t)" if dims == 2 else "(N,)"
        raise TypeError(f"{name} must be a LongTensor of shape {layout}; found {found}")


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
    for name, value in (("pair_counts", pair_counts), ("context_counts", context_counts)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of counts; found {type(value).__name__}")
    require_number("delta", delta, 0.0), require_int("vocab_size", vocab_size, 1)
    require_broadcastable("context_counts", context_counts, "pair_counts", pair_counts)
    pair = pair_counts.double()
    context = context_counts.double()
    if bool((pair < 0).any()) or bool((context < pair).any()):
        raise ValueError("counts must satisfy 0 <= pair_counts <= context_counts")
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
        _require_token_tensor("prefixes", prefixes, 2)
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


# ---------------------------------------------------------------------------
# A neural language model: embedding -> feature layer -> softmax.
# ---------------------------------------------------------------------------


class NeuralLM(NextTokenLM, nn.Module):
    r"""A feed-forward neural language model (Bengio et al., 2003).

    .. math::
        \mathbf{e}_i = \mathbf{M}[x_i], \qquad
        \mathbf{h}_t = \tanh(\mathbf{W}_h \mathbf{f}_t + \mathbf{b}_h), \qquad
        p(\cdot \mid x_{<t}) = \operatorname{softmax}(\mathbf{W}_o \mathbf{h}_t + \mathbf{b}_o)

    where the feature vector :math:`\mathbf{f}_t` is, for ``feature="window"``,
    the concatenation :math:`[\mathbf{e}_{t-n+1}; \dots; \mathbf{e}_{t-1}]` of
    the last ``context = n - 1`` embeddings (missing ones are ``bos``), and for
    ``feature="average"`` the mean of the embeddings of ``bos`` and all earlier
    tokens. The recurrent feature layer is :class:`lib.char_lm.CharLM`.

    Parameters
    ----------
    vocab_size : int
        ``V`` output tokens; the embedding has ``V + 1`` rows, the last for ``bos``.
    context : int
        ``n - 1``, the window length (ignored by ``"average"``).
    embedding_dim, hidden_size : int
    feature : {"window", "average"}

    Shapes
    ------
    tokens : (N, t) LongTensor, each row starting with ``bos``
    forward output : (N, t, V) logits; row ``i`` predicts the token after ``tokens[:, i]``
    """

    def __init__(self, vocab_size: int, context: int = 2, embedding_dim: int = 32, hidden_size: int = 64,
                 feature: str = "window"):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("context", context),
                            ("embedding_dim", embedding_dim), ("hidden_size", hidden_size)):
            require_int(name, value, 1)
        if feature not in FEATURES:
            raise ValueError(f"feature must be one of {FEATURES}; found {feature!r}")
        self.vocab_size, self.context, self.feature = vocab_size, context, feature
        self.embedding = nn.Embedding(vocab_size + 1, embedding_dim)
        width = context * embedding_dim if feature == "window" else embedding_dim
        self.hidden = nn.Linear(width, hidden_size)
        self.output = nn.Linear(hidden_size, vocab_size)

    @property
    def bos(self) -> int:
        return self.vocab_size

    def features(self, tokens: Tensor) -> Tensor:
        """The feature layer's output :math:`\\mathbf{h}_t` at every position.

        Shapes
        ------
        tokens : (N, t)
        output : (N, t, hidden_size)
        """
        _require_token_tensor("tokens", tokens, 2)
        if tokens.numel() and (tokens.min() < 0 or tokens.max() > self.bos):
            raise ValueError(f"tokens must be ids in [0, {self.bos}] (bos = {self.bos}); "
                             f"found {tokens.min()}..{tokens.max()}")
        if self.feature == "window":
            # Left-pad with bos so that every position has a full window, then cut the windows.
            padded = F.pad(tokens, (self.context - 1, 0), value=self.bos)  # (N, t + n - 2)
            windows = padded.unfold(1, self.context, 1)  # (N, t, n - 1)
            f = self.embedding(windows).flatten(2)  # (N, t, (n - 1) * E)
        else:
            embedded = self.embedding(tokens)  # (N, t, E)
            counts = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)  # (t,)
            f = embedded.cumsum(dim=1) / counts[None, :, None]  # (N, t, E): running means
        return torch.tanh(self.hidden(f))  # (N, t, H)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.output(self.features(tokens))  # (N, t, V)


# ---------------------------------------------------------------------------
# Training: teacher forcing and scheduled sampling.
# ---------------------------------------------------------------------------

_SCHEDULES = ("constant", "linear", "exponential", "inverse_sigmoid")


@dataclass(frozen=True)
class EpsilonSchedule:
    r"""The probability :math:`\epsilon_i` of feeding the *true* token at training step ``i``.

    The three decays of Bengio et al. (2015), each floored at ``minimum``:

    - ``"linear"``: :math:`\epsilon_i = \max(\epsilon_{\min}, k - c\,i)`;
    - ``"exponential"``: :math:`\epsilon_i = k^i` with :math:`k < 1`;
    - ``"inverse_sigmoid"``: :math:`\epsilon_i = k / (k + \exp(i / k))` with :math:`k \ge 1`;
    - ``"constant"``: :math:`\epsilon_i = k` (``k = 1`` is teacher forcing).

    Shapes
    ------
    Scalars in and out.
    """

    kind: str = "inverse_sigmoid"
    k: float = 10.0
    c: float = 0.0
    minimum: float = 0.0

    def __post_init__(self):
        if self.kind not in _SCHEDULES:
            raise ValueError(f"kind must be one of {_SCHEDULES}; found {self.kind!r}")
        require_number("minimum", self.minimum, 0.0, 1.0)
        if self.kind == "exponential":
            require_number("k", self.k, 0.0, 1.0)
        elif self.kind == "inverse_sigmoid":
            require_number("k", self.k, 1.0)
        else:
            require_number("k", self.k, 0.0, 1.0)
        require_number("c", self.c, 0.0)

    def __call__(self, step: int) -> float:
        require_int("step", step, 0)
        if self.kind == "constant":
            value = self.k
        elif self.kind == "linear":
            value = self.k - self.c * step
        elif self.kind == "exponential":
            value = self.k**step
        else:
            value = self.k / (self.k + math.exp(min(step / self.k, 700.0)))  # exp overflows past 709
        return max(self.minimum, value)


def _check_batch(inputs: object, targets: object) -> None:
    _require_token_tensor("inputs", inputs, 2)
    _require_token_tensor("targets", targets, 2)
    if inputs.shape != targets.shape:
        raise ValueError(f"inputs and targets must have the same shape (N, L); found "
                         f"{tuple(inputs.shape)} and {tuple(targets.shape)}")


def scheduled_sampling_inputs(model: nn.Module, inputs: Tensor, targets: Tensor, epsilon: float,
                              generator: Optional[torch.Generator] = None, prompt: int = 0) -> Tensor:
    """Replace each true input token by the model's own sample with probability ``1 - epsilon``.

    Left to right, input ``t`` (the true token ``t - 1``) is swapped for a
    token drawn from the model's prediction given the inputs *as already
    mixed*, exactly what the model would have read had it generated the prefix
    itself (Bengio et al., 2015). The draws are not differentiated through.

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)``.
    inputs, targets : LongTensor
        A teacher-forcing batch (:func:`lib.char_lm.teacher_forcing_batch`);
        positions whose target is -100 are padding and never swapped.
    epsilon : float
        Probability of keeping each true token.
    generator : torch.Generator, optional
    prompt : int
        The first ``prompt`` tokens are always kept (a given beginning that
        the model continues).

    Returns
    -------
    LongTensor
        The mixed inputs.

    Shapes
    ------
    inputs, targets, output : (N, L)
    """
    _check_batch(inputs, targets)
    require_number("epsilon", epsilon, 0.0, 1.0)
    require_int("prompt", prompt, 0)
    mixed = inputs.clone()
    if epsilon == 1.0:
        return mixed
    with torch.no_grad():
        for t in range(prompt + 1, inputs.shape[1]):
            logits = model(mixed[:, :t])[:, -1]  # (N, V): the model's guess for input t
            drawn = torch.multinomial(torch.softmax(logits.double(), dim=-1), 1, generator=generator)[:, 0]
            swap = (torch.rand(len(mixed), generator=generator) >= epsilon) & (targets[:, t] != -100)  # (N,)
            mixed[swap, t] = drawn[swap]
    return mixed


def train_lm(model: nn.Module, inputs: Tensor, targets: Tensor, steps: int, batch_size: int = 64,
             lr: float = 1e-2, schedule: Optional[EpsilonSchedule] = None, prompt: int = 0, seed: int = 0,
             max_norm: float = 1.0) -> list[float]:
    """Fit a language model by minibatch Adam on the next-token cross-entropy.

    Rows are sorted by length and cut into batches of ``batch_size`` rows of
    similar length, so that little is spent on padding; every pass over the
    data visits the batches in a new seeded order. Each step optionally mixes
    in the model's own samples (:func:`scheduled_sampling_inputs` with
    ``epsilon = schedule(step)``) and takes one Adam step with gradients clipped
    to global norm ``max_norm``. Without a schedule this is teacher forcing.

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)``
        (:class:`NeuralLM`, :class:`lib.char_lm.CharLM`).
    inputs, targets : LongTensor
        From :func:`lib.char_lm.teacher_forcing_batch`.
    steps, batch_size : int
    lr : float
    schedule : EpsilonSchedule, optional
    prompt : int
        Tokens at the start of every row that scheduled sampling never replaces.
    seed : int
        Seeds the order of the batches and the samples.
    max_norm : float

    Returns
    -------
    list of float
        The training loss (nats per token) of each step's batch.

    Shapes
    ------
    inputs, targets : (N, L)
    """
    _check_batch(inputs, targets)
    require_int("steps", steps, 1)
    require_int("batch_size", batch_size, 1)
    if schedule is not None and not isinstance(schedule, EpsilonSchedule):
        raise TypeError(f"schedule must be an EpsilonSchedule or None; found {type(schedule).__name__}")
    lengths = (targets != -100).sum(dim=1)  # (N,)
    by_length = torch.sort(lengths, stable=True).indices
    batches = list(torch.split(by_length, batch_size))
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    while len(losses) < steps:
        for b in torch.randperm(len(batches), generator=generator).tolist():
            if len(losses) == steps:
                break
            rows = batches[b]
            length = max(1, int(lengths[rows].max()))  # later columns are padding in every row
            x, y = inputs[rows, :length], targets[rows, :length]  # (B, L')
            if schedule is not None:
                x = scheduled_sampling_inputs(model, x, y, schedule(len(losses)), generator, prompt)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=-100)
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm(model.parameters(), max_norm)
            optimizer.step()
            losses.append(loss.item())
    return losses


@torch.no_grad()
def token_log_probs(model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
    """The model's log-probability of every real target token (teacher forcing), for :func:`perplexity`.

    Rows are scored one at a time, cut to their real length, so that memory
    stays at one row's ``(L, V)`` scores.

    Shapes
    ------
    inputs, targets : (N, L)
    output : (M,) for the M targets that are not -100, row by row
    """
    _check_batch(inputs, targets)
    scored = []
    for tokens, target in zip(inputs, targets):
        length = int((target != -100).sum())  # real targets come first in each row
        log_probs = F.log_softmax(model(tokens[None, :length])[0].double(), dim=-1)  # (length, V)
        scored.append(log_probs.gather(1, target[:length, None])[:, 0])
    return torch.cat(scored)


# ---------------------------------------------------------------------------
# Exposure bias: a language with a known distribution, and the drift measurement.
# ---------------------------------------------------------------------------


@dataclass
class CountingLanguage:
    """Count around a clock: a toy language whose next-token distribution is known exactly.

    A sentence has ``length`` tokens from ``0 .. hours - 1``. Its hidden clean
    version starts at a uniformly random hour and moves by a fixed step, drawn
    uniformly from ``steps``, modulo ``hours`` (``3, 5, 7, 9, 11, 1, ...``). Each
    token is then, independently with probability ``typo``, replaced by a
    uniformly random hour. The typos give every sequence a non-zero
    probability, so :meth:`next_probs` is defined after *any* prefix, including
    a model's own mistakes.

    Parameters
    ----------
    hours : int
    steps : tuple of int
    length : int
    typo : float

    Shapes
    ------
    sentences : (N, length) LongTensor
    """

    hours: int = 12
    steps: tuple[int, ...] = (1, 2, 3)
    length: int = 16
    typo: float = 0.002

    def __post_init__(self):
        require_int("hours", self.hours, 2)
        require_int("length", self.length, 2)
        require_number("typo", self.typo, 1e-12, 1.0)
        if not self.steps or not all(isinstance(s, int) and not isinstance(s, bool) for s in self.steps):
            raise TypeError(f"steps must be a non-empty tuple of ints; found {self.steps!r}")
        starts = torch.arange(self.hours)
        positions = torch.arange(self.length)
        # Every hidden clean sentence: one row per (step, start) pair, all equally likely.
        self.clean = torch.cat([(starts[:, None] + step * positions[None]) % self.hours for step in self.steps])

    def sample(self, n: int, generator: Optional[torch.Generator] = None) -> Tensor:
        """``n`` sentences drawn from the language.

        Shapes
        ------
        output : (n, length)
        """
        require_int("n", n, 1)
        clean = self.clean[torch.randint(len(self.clean), (n,), generator=generator)]  # (n, T)
        typos = torch.rand(n, self.length, generator=generator) < self.typo
        return torch.where(typos, torch.randint(self.hours, (n, self.length), generator=generator), clean)

    def next_probs(self, prefixes: Tensor) -> Tensor:
        """The true :math:`p(x_{t+1} \\mid x_{1:t})` after each prefix, by Bayes' rule.

        The posterior over the hidden clean sentences weighs each by how many
        prefix tokens it explains: each match has probability
        ``1 - typo + typo / hours``, each mismatch ``typo / hours``.

        Shapes
        ------
        prefixes : (N, t) with 0 <= t < length
        output : (N, hours), float64
        """
        _require_token_tensor("prefixes", prefixes, 2)
        t = prefixes.shape[1]
        if t >= self.length:
            raise ValueError(f"prefixes must be shorter than the sentences ({self.length}); found length {t}")
        match = torch.tensor(math.log(1 - self.typo + self.typo / self.hours), dtype=torch.float64)
        mismatch = torch.tensor(math.log(self.typo / self.hours), dtype=torch.float64)
        agree = prefixes[:, None, :] == self.clean[None, :, :t]  # (N, M, t)
        log_likelihood = torch.where(agree, match, mismatch).sum(-1)  # (N, M)
        posterior = torch.softmax(log_likelihood, dim=-1)  # (N, M)
        nxt = F.one_hot(self.clean[:, t], self.hours).double() * (1 - self.typo) + self.typo / self.hours  # (M, V)
        return posterior @ nxt  # (N, V)


@torch.no_grad()
def rollout(model: nn.Module, prompts: Tensor, length: int, bos: int,
            generator: Optional[torch.Generator] = None) -> Tensor:
    """Continue each prompt to ``length`` tokens with the model's own samples (temperature 1).

    Shapes
    ------
    prompts : (N, P)
    output : (N, length), the prompts included
    """
    _require_token_tensor("prompts", prompts, 2)
    require_int("length", length, prompts.shape[1])
    tokens = torch.cat([torch.full((len(prompts), 1), bos), prompts], dim=1)  # (N, 1 + P)
    while tokens.shape[1] < length + 1:
        probs = torch.softmax(model(tokens)[:, -1].double(), dim=-1)  # (N, V)
        drawn = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
        tokens = torch.cat([tokens, drawn], dim=1)
    return tokens[:, 1:]


@torch.no_grad()
def drift(model: nn.Module, language: CountingLanguage, sentences: Tensor, bos: int, prompt: int = 2,
          generator: Optional[torch.Generator] = None) -> tuple[Tensor, Tensor]:
    r"""Exposure bias made visible: the model's error after real prefixes and after its own.

    At every position ``t`` the error is the mean Kullback-Leibler divergence
    :math:`\mathrm{KL}(p(\cdot \mid x_{<t}) \,\|\, p_\theta(\cdot \mid x_{<t}))`
    between the true next-token distribution and the model's, over prefixes
    :math:`x_{<t}` that are either real sentences (what teacher forcing trains
    on) or the model's own continuations of their first ``prompt`` tokens (what
    it reads when it generates).

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)``.
    language : CountingLanguage
    sentences : LongTensor
        Real sentences; their first ``prompt`` tokens start the rollouts.
    bos : int
    prompt : int
    generator : torch.Generator, optional
        Seeds the model's samples.

    Returns
    -------
    on_data, on_own : Tensor
        float64 KL divergences (nats) for positions ``prompt + 1 .. length``.

    Shapes
    ------
    sentences : (N, length)
    on_data, on_own : (length - prompt,)
    """
    _require_token_tensor("sentences", sentences, 2)
    require_int("prompt", prompt, 0)
    own = rollout(model, sentences[:, :prompt], language.length, bos, generator)  # (N, T)
    curves = []
    for prefixes in (sentences, own):
        inputs = torch.cat([torch.full((len(prefixes), 1), bos), prefixes[:, :-1]], dim=1)  # (N, T)
        log_q = torch.log_softmax(model(inputs).double(), dim=-1)  # (N, T, V)
        kl = []
        for t in range(prompt, language.length):
            p = language.next_probs(prefixes[:, :t])  # (N, V)
            kl.append(float((p * (p.log() - log_q[:, t])).sum(-1).mean()))
        curves.append(torch.tensor(kl, dtype=torch.float64))
    return curves[0], curves[1]
