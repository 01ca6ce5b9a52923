"""Decoding: from a next-token model to an output sequence.

An autoregressive model gives the probability of the next token given a source
``x`` and the tokens so far, :math:`p(y_t \\mid x, y_{<t})`. Decoding turns it into
one output. This module implements, in the order chapter 7 teaches them
(syllabus DEC1-DEC4, LM5):

1. :func:`greedy_search` takes the most probable token at every step. It is the
   plain reference that :func:`beam_search` with ``beam_size=1`` must reproduce.
2. :func:`beam_search` keeps the ``K`` best prefixes: every step extends each of
   them by every token (``K * V`` candidates, :func:`expand_and_prune`) and keeps
   the ``K`` most probable. :func:`beam_search_batch` decodes several source
   sentences with one model call per step (the form later chapters use), and an
   optional ``trace`` records every candidate for the chapter's explorer.
3. Scores are sums of log-probabilities (products of probabilities underflow),
   optionally divided by ``len ** alpha`` (length normalisation).
4. :func:`sample` draws sequences at a temperature, optionally from the ``k``
   most probable tokens only (:func:`sampling_distribution`).
5. :func:`sequence_score` and :func:`blame` are the error-analysis recipe: if the
   model prefers the reference to the output, the search is to blame.
   :func:`exact_search` removes the search from the question: a depth-first
   branch-and-bound search [5]_ that returns the model's most probable output, and
   :func:`gnmt_length_penalty` is the length penalty of [2]_.
6. :class:`TableModel` is a next-token model that is a look-up table trained by
   counting, and :class:`ClockTask` the chapter's toy "read the clock aloud" data.

Conventions. Every model is given as a *step function*. The single-sentence
form ``step_fn(prefixes)`` maps a ``LongTensor (N, t)`` of ``N`` prefixes, each
starting with ``bos``, to next-token log-probabilities ``(N, V)``. The batched
form ``step_fn(prefixes, sources)`` also receives a ``LongTensor (N,)`` telling
which source sentence each row continues. A hypothesis's ``tokens`` exclude
``bos`` and include ``eos`` once it is emitted; its length is ``len(tokens)``.

References
----------
.. [1] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks". NeurIPS 2014. arXiv:1409.3215. (Left-to-right beam search.)
.. [2] Y. Wu et al. "Google's Neural Machine Translation System: Bridging the
   Gap between Human and Machine Translation". arXiv:1609.08144, 2016.
   (Length normalisation of beam-search scores.)
.. [3] P. Koehn, R. Knowles. "Six Challenges for Neural Machine Translation".
   Workshop on Neural Machine Translation, 2017. arXiv:1706.03872.
   (Wider beams can give worse, shorter outputs.)
.. [4] A. Fan, M. Lewis, Y. Dauphin. "Hierarchical Neural Story Generation".
   ACL 2018. arXiv:1805.04833. (Top-k sampling.)
.. [5] F. Stahlberg, B. Byrne. "On NMT Search Errors and Model Errors: Cat Got Your
   Tongue?". EMNLP-IJCNLP 2019. arXiv:1908.10090. (Exact search: beam search's
   score as the first bound, then depth-first search.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Integral
from dataclasses import dataclass
from typing import Literal, Optional, no_type_check

import torch
from jaxtyping import Float, Int
from torch import Tensor

from lib.checked import (
    LogProb,
    NonNegativeInt,
    Positive,
    PositiveInt,
    each,
    non_negative_at_most,
    positive_int_at_most,
)

__all__ = [
    "Candidate",
    "TraceStep",
    "greedy_search",
    "expand_and_prune",
    "beam_search",
    "beam_search_batch",
    "normalised_score",
    "sampling_distribution",
    "sample",
    "sequence_score",
    "blame",
    "exact_search",
    "gnmt_length_penalty",
    "TableModel",
    "ClockTask",
    "MAX_EXPANSIONS",
    "MAX_ALPHA",
]

StepFn = Callable[[Tensor], Tensor]  # prefixes (N, t) -> log-probabilities (N, V)
BatchStepFn = Callable[[Tensor, Tensor], Tensor]  # prefixes (N, t), sources (N,)

# A row of log-probabilities must log-sum-exp to 0; float32 models are off by ~1e-7.
_NORMALISATION_TOLERANCE = 1e-3
# At most this many hypotheses x steps, (num_sources x beam_size, or num_samples, times
# max_len): more would run for hours, which is never what a reader meant.
MAX_EXPANSIONS = 10**6
# Largest length-penalty exponent: usual values lie in [0, 1], and length**alpha must
# stay a float for lengths up to MAX_EXPANSIONS (10**6 ** 50 = 1e300).
MAX_ALPHA = 50.0

MaxLen = positive_int_at_most(MAX_EXPANSIONS)
Alpha = non_negative_at_most(MAX_ALPHA)  # the length-normalisation exponent


def _as_log_probs(output: object, rows: int, eos: Optional[int] = None) -> Tensor:
    """What a step function returned for ``rows`` prefixes, as float64, once it is known
    to be ``rows`` rows of log-probabilities (a signature cannot say what a reader's
    function returns)."""
    if not isinstance(output, Tensor) or not output.is_floating_point():
        found = output.dtype if isinstance(output, Tensor) else type(output).__name__
        raise TypeError(
            "step_fn must return a floating-point torch.Tensor of log-probabilities; "
            f"found {found}"
        )
    if output.dim() != 2 or output.shape[0] != rows:
        raise ValueError(
            f"step_fn must return log-probabilities of shape (N, V) = ({rows}, V) for "
            f"{rows} prefixes; found {tuple(output.shape)}"
        )
    if eos is not None and eos >= output.shape[1]:
        raise ValueError(
            f"eos must be a token of the vocabulary, < V = {output.shape[1]}; "
            f"found {eos}"
        )
    output = output.detach().double()
    if bool((torch.isnan(output) | (output == math.inf)).any()):
        raise ValueError(
            "step_fn must return finite log-probabilities (or -inf); found NaN or +inf"
        )
    totals = torch.logsumexp(output, dim=1)  # (N,); 0 for normalised rows
    worst = int(totals.abs().argmax())
    if not abs(float(totals[worst])) <= _NORMALISATION_TOLERANCE:
        raise ValueError(
            "step_fn must return log-probabilities (each row's logsumexp is 0; apply "
            f"log_softmax to logits); found logsumexp {float(totals[worst]):.4g} in "
            f"row {worst}"
        )
    return output


def normalised_score(
    log_prob: LogProb, length: PositiveInt, alpha: Alpha = 0.0
) -> LogProb:
    """The beam-search score of a hypothesis of ``length`` tokens (``eos`` counted,
    ``bos`` not): ``alpha = 0`` ranks by probability, ``alpha = 1`` by log-probability
    per token."""
    return log_prob / length**alpha


def greedy_search(
    step_fn: StepFn, bos: NonNegativeInt, eos: NonNegativeInt, max_len: MaxLen
) -> tuple[list[int], float]:
    """Emit the most probable next token until ``eos`` or ``max_len`` tokens; return the
    tokens (without ``bos``) and the sum of their log-probabilities."""
    tokens: list[int] = []
    log_prob = 0.0
    while len(tokens) < max_len:
        prefix = torch.tensor([[bos, *tokens]])  # (1, t)
        log_probs = _as_log_probs(step_fn(prefix), rows=1, eos=eos)[0]  # (V,)
        token = int(log_probs.argmax())  # the first maximum on ties
        tokens.append(token)
        log_prob += float(log_probs[token])
        if token == eos:
            break
    return tokens, log_prob


def expand_and_prune(
    beam_scores: Float[Tensor, "K"],
    log_probs: Float[Tensor, "K V"],
    beam_size: PositiveInt,
) -> tuple[Tensor, Tensor, Tensor]:
    """One beam-search step: extend each of the ``K`` hypotheses by every token and keep
    the ``beam_size`` best candidates: their parents, tokens and scores, best first.

    All ``K * V`` candidates have the same length, so ranking them by log-probability
    ranks them by any length-normalised score too. Candidates of probability 0 are never
    kept; ties keep the lower parent, then the lower token.
    """
    if log_probs.numel() == 0:
        raise ValueError(
            "log_probs must hold at least one hypothesis and one token (K, V >= 1); "
            f"found shape {tuple(log_probs.shape)}"
        )
    vocab_size = log_probs.shape[1]
    candidates = (beam_scores[:, None] + log_probs).flatten()  # (K, V) -> (K * V,)
    # A NaN or +inf in either argument makes a NaN or +inf candidate.
    if bool((candidates.isnan() | (candidates == math.inf)).any()):
        raise ValueError(
            "beam_scores and log_probs must not contain NaN or +inf: such a candidate "
            "cannot be ranked; found NaN or +inf"
        )
    # A stable sort makes ties deterministic and agree with greedy's argmax.
    order = torch.sort(candidates, descending=True, stable=True).indices[:beam_size]
    order = order[candidates[order] > -math.inf]  # (k,)
    # Three (k,) tensors; declaring them would add a ~15 us check to every step.
    return order // vocab_size, order % vocab_size, candidates[order]


@no_type_check  # tens of thousands per traced search: a cheap check of its own instead
@dataclass(frozen=True)
class Candidate:
    """One candidate of a beam-search step, as a trace records it. ``parent`` indexes
    the previous step's open hypotheses, in the order that step lists them."""

    tokens: tuple[int, ...]
    log_prob: float
    parent: int
    status: Literal["kept", "finished", "pruned"]  # finished: kept, and ends

    def __post_init__(self) -> None:
        tokens, log_prob, parent = self.tokens, self.log_prob, self.parent
        if not (
            type(tokens) is tuple
            and all(type(t) is int and t >= 0 for t in tokens)
            and type(log_prob) is float
            and log_prob == log_prob  # not NaN
            and type(parent) is int
            and parent >= 0
            and self.status in ("kept", "finished", "pruned")
        ):
            raise ValueError(
                "Candidate: tokens must be a tuple of ids (ints >= 0), log_prob a "
                "float (not NaN), parent an int >= 0 and status 'kept', 'finished' "
                f"or 'pruned'; found tokens={tokens!r}, log_prob={log_prob!r}, "
                f"parent={parent!r}, status={self.status!r}"
            )


@dataclass(frozen=True)
class TraceStep:
    """Every candidate of one beam-search step for one source, best first."""

    source: NonNegativeInt
    step: NonNegativeInt
    candidates: tuple[Candidate, ...]


@no_type_check  # per source and step: beam_search_batch, checked, made the arguments
def _trace_step(
    source: int,
    step: int,
    alive: list[tuple[tuple[int, ...], float]],
    log_probs: Float[Tensor, "K V"],
    parents: Int[Tensor, "k"],
    tokens: Int[Tensor, "k"],
    eos: int,
    max_len: int,
) -> TraceStep:
    """Record all candidates of a step, marking the kept ones (does not search)."""
    kept = set(zip(parents.tolist(), tokens.tolist()))
    recorded = []
    for parent, (prefix, score) in enumerate(alive):
        for token, token_log_prob in enumerate(log_probs[parent].tolist()):
            if token_log_prob == -math.inf:
                continue  # impossible sequences are not candidates
            ends = token == eos or len(prefix) + 1 == max_len
            status = "pruned"
            if (parent, token) in kept:
                status = "finished" if ends else "kept"
            recorded.append(
                Candidate((*prefix, token), score + token_log_prob, parent, status)
            )
    recorded.sort(key=lambda c: -c.log_prob)
    return TraceStep(source, step, tuple(recorded))


def beam_search_batch(
    step_fn: BatchStepFn,
    num_sources: PositiveInt,
    bos: NonNegativeInt,
    eos: NonNegativeInt,
    beam_size: PositiveInt,
    max_len: MaxLen,
    alpha: Alpha = 0.0,
    trace: Optional[list[TraceStep]] = None,
) -> list[list[tuple[list[int], float]]]:
    """Beam search for ``num_sources`` source sentences at once, one call of
    ``step_fn(prefixes, sources)`` per step; ``sources`` says which sentence each row
    continues. For each source, its finished hypotheses as (tokens, score), best first.

    A kept candidate that ends with ``eos`` or has ``max_len`` tokens is finished and
    keeps its slot, so a source's beam narrows as hypotheses finish. The final ranking
    divides log-probabilities by ``len(tokens) ** alpha``. A ``trace`` list receives
    one :class:`TraceStep` per source and step.
    """
    if num_sources * beam_size * max_len > MAX_EXPANSIONS:
        raise ValueError(
            f"num_sources * beam_size * max_len must be at most {MAX_EXPANSIONS:,}; "
            f"found {num_sources} * {beam_size} * {max_len}"
        )
    # Open hypotheses per source as (tokens, log-probability); finished ones likewise.
    alive = [[((), 0.0)] for _ in range(num_sources)]
    finished: list[list[tuple[tuple[int, ...], float]]] = [[] for _ in alive]
    for step in range(1, max_len + 1):
        rows = [(s, tokens) for s in range(num_sources) for tokens, _ in alive[s]]
        if not rows:
            break
        prefixes = torch.tensor([[bos, *tokens] for _, tokens in rows])  # (N, step)
        sources = torch.tensor([s for s, _ in rows])  # (N,)
        log_probs = step_fn(prefixes, sources)
        log_probs = _as_log_probs(log_probs, len(rows), eos)  # (N, V)
        start = 0
        for s in range(num_sources):
            beam, stop = alive[s], start + len(alive[s])
            if not beam:
                continue
            scores = torch.tensor([score for _, score in beam], dtype=torch.float64)
            slots = beam_size - len(finished[s])
            own = log_probs[start:stop]  # (K, V): this source's rows
            parents, tokens, new_scores = expand_and_prune(scores, own, slots)
            if trace is not None:
                record = _trace_step(s, step, beam, own, parents, tokens, eos, max_len)
                trace.append(record)
            alive[s] = []
            kept = zip(parents.tolist(), tokens.tolist(), new_scores.tolist())
            for parent, token, score in kept:
                hypothesis = ((*beam[parent][0], token), score)
                done = token == eos or step == max_len
                (finished[s] if done else alive[s]).append(hypothesis)
            start = stop
    ranked = []
    for hypotheses in finished:
        scored = [
            (list(t), normalised_score(lp, len(t), alpha)) for t, lp in hypotheses
        ]
        ranked.append(sorted(scored, key=lambda hypothesis: -hypothesis[1]))
    return ranked


def beam_search(
    step_fn: StepFn,
    bos: NonNegativeInt,
    eos: NonNegativeInt,
    beam_size: PositiveInt,
    max_len: MaxLen,
    alpha: Alpha = 0.0,
    trace: Optional[list[TraceStep]] = None,
) -> list[tuple[list[int], float]]:
    """Beam search for one source: :func:`beam_search_batch` with a single sentence."""
    one_source = lambda prefixes, sources: step_fn(prefixes)  # noqa: E731
    search = beam_search_batch(
        one_source, 1, bos, eos, beam_size, max_len, alpha, trace
    )
    return search[0]


def sampling_distribution(
    log_probs: Float[Tensor, "*batch V"],
    temperature: Positive = 1.0,
    top_k: Optional[PositiveInt] = None,
) -> Float[Tensor, "*batch V"]:
    """The distribution a sampler draws the next token from: softmax(log p / T), kept to
    the ``top_k`` most probable tokens (ties go to the lower id) and renormalised."""
    if log_probs.shape[-1] == 0:
        raise ValueError(
            f"log_probs must hold at least one token (V >= 1); found shape "
            f"{tuple(log_probs.shape)}"
        )
    if bool((log_probs.isnan() | (log_probs == math.inf)).any()):
        raise ValueError("log_probs must be finite or -inf; found NaN or +inf")
    scaled = log_probs / temperature
    if bool((scaled == -math.inf).all(dim=-1).any()):
        raise ValueError(
            "log_probs / temperature must leave each row a token of probability > 0; "
            f"found a row of -inf (temperature {temperature})"
        )
    if top_k is not None and top_k < scaled.shape[-1]:
        # A stable sort breaks ties by token id, so exactly k tokens survive.
        order = torch.sort(scaled, dim=-1, descending=True, stable=True).indices
        best = order[..., :top_k]  # (..., k)
        keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, best, True)
        scaled = scaled.masked_fill(~keep, -math.inf)
    return torch.softmax(scaled, dim=-1)


def sample(
    step_fn: StepFn,
    bos: NonNegativeInt,
    eos: NonNegativeInt,
    max_len: MaxLen,
    num_samples: PositiveInt = 1,
    temperature: Positive = 1.0,
    top_k: Optional[PositiveInt] = None,
    generator: Optional[torch.Generator] = None,
) -> list[tuple[list[int], float]]:
    """Draw ``num_samples`` sequences in parallel from :func:`sampling_distribution`;
    return each with the *model's* log-probability (untempered, unrestricted)."""
    if num_samples * max_len > MAX_EXPANSIONS:
        raise ValueError(
            f"num_samples * max_len must be at most {MAX_EXPANSIONS:,}; "
            f"found {num_samples} * {max_len}"
        )
    samples: list[list[int]] = [[] for _ in range(num_samples)]
    log_prob = [0.0] * num_samples
    open_rows = list(range(num_samples))
    for _ in range(max_len):
        if not open_rows:
            break
        prefixes = torch.tensor([[bos, *samples[i]] for i in open_rows])  # (N, t)
        log_probs = _as_log_probs(step_fn(prefixes), len(open_rows), eos)
        probs = sampling_distribution(log_probs, temperature, top_k)  # (N, V)
        drawn = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
        drawn_log_probs = log_probs.gather(1, drawn)[:, 0].tolist()  # (N,)
        for i, token, token_log_prob in zip(
            list(open_rows), drawn[:, 0].tolist(), drawn_log_probs
        ):
            samples[i].append(token)
            log_prob[i] += token_log_prob
            if token == eos:
                open_rows.remove(i)
    return list(zip(samples, log_prob))


def sequence_score(
    step_fn: StepFn,
    bos: NonNegativeInt,
    tokens: each(NonNegativeInt),
    alpha: Alpha = 0.0,
) -> LogProb:
    """The score beam search maximises, for a given output ``tokens`` (without ``bos``):
    log-probability / ``len(tokens) ** alpha``."""
    if not tokens:
        raise ValueError("tokens must hold at least one token id; found []")
    log_prob = 0.0
    for t, token in enumerate(tokens):
        prefix = torch.tensor([[bos, *tokens[:t]]])  # (1, t + 1)
        log_probs = _as_log_probs(step_fn(prefix), rows=1)[0]  # (V,)
        if token >= len(log_probs):
            raise ValueError(
                f"tokens must be ids < V = {len(log_probs)}; found {token} at {t}"
            )
        log_prob += float(log_probs[token])
    return normalised_score(log_prob, len(tokens), alpha)


def blame(
    step_fn: StepFn,
    bos: NonNegativeInt,
    reference: each(NonNegativeInt),
    output: each(NonNegativeInt),
    alpha: Alpha = 0.0,
) -> Literal["search", "model"]:
    """Who is to blame for a wrong output? The search if the model scores the reference
    higher than the output (a wider beam may find it), the model otherwise. ``alpha``
    must be the one the search used."""
    if not reference:
        raise ValueError("reference must hold at least one token id; found []")
    if not output:
        raise ValueError("output must hold at least one token id; found []")
    reference_score = sequence_score(step_fn, bos, reference, alpha)
    output_score = sequence_score(step_fn, bos, output, alpha)
    return "search" if reference_score > output_score else "model"


def exact_search(
    step_fn: StepFn,
    bos: NonNegativeInt,
    eos: NonNegativeInt,
    max_len: MaxLen,
    max_calls: MaxLen = 100_000,
    lower_bound: LogProb = -math.inf,
) -> tuple[list[int], float]:
    """The model's most probable output of at most ``max_len`` tokens and its
    log-probability, by depth-first branch and bound: extending a prefix only lowers
    its log-probability, so a prefix no more probable than the best finished output
    found so far is pruned. ``lower_bound`` is the log-probability of an output known
    beforehand, such as beam search's (as Stahlberg and Byrne start): prefixes below
    it are pruned from the first step. Children are visited most probable first (our
    choice); an output ends with ``eos`` or at ``max_len`` tokens, as in
    :func:`beam_search`. Ties keep the output found first. At most ``max_calls``
    calls of ``step_fn``."""
    best_tokens: Optional[tuple[int, ...]] = None
    best = -math.inf  # the log-probability of the best finished output so far
    stack: list[tuple[tuple[int, ...], float]] = [((), 0.0)]  # open prefixes
    calls = 0
    while stack:
        prefix, log_prob = stack.pop()
        if log_prob <= best:  # the bound rose since this prefix was pushed
            continue
        if calls == max_calls:
            raise ValueError(
                f"max_calls: exact search needed more than {max_calls:,} calls of "
                "step_fn; raise max_calls or lower max_len"
            )
        calls += 1
        prefixes = torch.tensor([[bos, *prefix]])  # (1, t)
        log_probs = _as_log_probs(step_fn(prefixes), rows=1, eos=eos)[0]  # (V,)
        scores = (log_prob + log_probs).tolist()  # each child's log-probability
        open_children = []
        for token, score in enumerate(scores):
            if score <= best or score < lower_bound:  # pruned (-inf included)
                continue
            tokens = (*prefix, token)
            if token == eos or len(tokens) == max_len:
                best_tokens, best = tokens, score  # a finished output, the best yet
            else:
                open_children.append((score, tokens))
        # Most probable child on top of the stack, so it is extended first.
        open_children.sort(key=lambda child: child[0])
        stack += [(tokens, score) for score, tokens in open_children]
    if best_tokens is None:  # every row has a token of probability > 0
        raise ValueError(
            f"lower_bound: no output reaches log-probability {lower_bound!r}; pass "
            "the log-probability of an output of the model, or -inf"
        )
    return list(best_tokens), best


def gnmt_length_penalty(length: PositiveInt, alpha: Alpha) -> Positive:
    """The length penalty of Wu et al. (2016), section 7, eq. 14:
    lp(Y) = (5 + |Y|)^alpha / (5 + 1)^alpha; a score is log p(Y | X) / lp(Y)."""
    return ((5 + length) / 6) ** alpha


@dataclass
class TableModel:
    """A next-token model that is a table, log p(y_t = v | source s, y_{t-1} = u): a
    bigram model per source. Row ``u = V`` of ``log_probs`` (S, V + 1, V) is ``bos``."""

    log_probs: Float[Tensor, "S V_and_bos V"]

    def __post_init__(self):
        if not len(self.log_probs):
            raise ValueError(
                "log_probs must hold at least one source (S >= 1); found shape "
                f"{tuple(self.log_probs.shape)}"
            )
        if self.log_probs.shape[1] != self.log_probs.shape[2] + 1:
            raise ValueError(
                "log_probs must have shape (S, V + 1, V); found "
                f"{tuple(self.log_probs.shape)}"
            )
        if bool((self.log_probs.isnan() | (self.log_probs == math.inf)).any()):
            raise ValueError("log_probs must be finite or -inf; found NaN or +inf")

    @property
    def vocab_size(self) -> int:
        return self.log_probs.shape[2]

    @property
    def bos(self) -> int:
        return self.vocab_size

    @classmethod
    def fit(
        cls,
        pairs: Sequence[tuple[int, Sequence[int]]],
        num_sources: PositiveInt,
        vocab_size: PositiveInt,
        delta: Positive = 0.1,
    ) -> TableModel:
        """Train by counting ``(source, tokens)`` pairs (tokens end with ``eos``): add-
        ``delta`` maximum likelihood, so that no sequence has probability 0."""
        shape = (num_sources, vocab_size + 1, vocab_size)
        counts = torch.full(shape, float(delta), dtype=torch.float64)
        cells = []  # one (source, previous token, token) triple per counted token
        # The signature looks at one pair drawn at random; every pair is read here, and
        # an error quotes the bad pair, not all of them.
        for n, (source, tokens) in enumerate(pairs):
            ids = (source, *tokens)
            # type() first: isinstance(i, Integral) alone is an ABC check, 20 us a pair
            if not all(
                type(i) is int or isinstance(i, Integral) and type(i) is not bool
                for i in ids
            ):
                raise TypeError(
                    f"pairs must hold (source, tokens) of int ids; found pairs[{n}] = "
                    f"({source!r}, {tokens!r})"
                )
            in_range = tokens and 0 <= min(tokens) and max(tokens) < vocab_size
            if not (0 <= source < num_sources and in_range):
                raise ValueError(
                    f"each pair must be (source < {num_sources}, non-empty tokens < "
                    f"{vocab_size}); found pairs[{n}] = ({source}, {tokens})"
                )
            # bos, then each token before the next
            previous = [vocab_size, *tokens[:-1]]
            cells += [(source, u, v) for u, v in zip(previous, tokens)]
        if cells:  # one scatter-add, not a loop; whole numbers add exactly in any order
            index = torch.tensor(cells).T  # (3, number of tokens)
            ones = torch.ones(index.shape[1], dtype=torch.float64)
            counts.index_put_(tuple(index), ones, accumulate=True)
        return cls(torch.log(counts / counts.sum(dim=2, keepdim=True)))

    def step(
        self, prefixes: Int[Tensor, "N t"], sources: Int[Tensor, "N"]
    ) -> Float[Tensor, "N V"]:
        """The batched step function: the table's rows (source, previous token)."""
        num_sources, bos = self.log_probs.shape[0], self.bos
        if prefixes.shape[1] == 0:
            raise ValueError("prefixes must start with bos; found shape (N, 0)")
        previous = prefixes[:, -1]  # (N,)
        if len(sources) and not 0 <= sources.min() <= sources.max() < num_sources:
            raise ValueError(
                f"sources must be ids < S = {num_sources}; found ids from "
                f"{int(sources.min())} to {int(sources.max())}"
            )
        if len(previous) and not 0 <= previous.min() <= previous.max() <= bos:
            raise ValueError(
                f"prefixes must hold ids <= bos = {bos}; found last ids from "
                f"{int(previous.min())} to {int(previous.max())}"
            )
        return self.log_probs[sources, previous]

    def for_source(self, source: NonNegativeInt) -> StepFn:
        """The single-sentence step function of one source."""
        if source >= self.log_probs.shape[0]:
            raise ValueError(
                f"source must be < S = {self.log_probs.shape[0]}; found {source}"
            )
        return lambda prefixes: self.log_probs[source, prefixes[:, -1]]  # (N, V)


_HOURS = (
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
)


def _clock_phrases(time: str) -> list[str]:
    """The ways of reading ``time`` (``"h:mm"``) aloud that the toy task knows."""
    hour, minute = (int(part) for part in time.split(":"))
    h, next_h = _HOURS[hour - 1], _HOURS[hour % 12]
    return {
        0: [f"{h} o'clock", h],
        15: [
            f"quarter past {h}",
            f"a quarter past {h}",
            f"quarter after {h}",
            f"a quarter after {h}",
            f"{h} fifteen",
        ],
        30: [f"half past {h}", f"{h} thirty"],
        45: [
            f"quarter to {next_h}",
            f"a quarter to {next_h}",
            f"quarter of {next_h}",
            f"{h} forty five",
        ],
    }[minute]


class ClockTask:
    """Toy "translation" data: read one of the 48 times ``h:mm`` (``mm`` in 00, 15, 30,
    45) aloud, in one of its two to five phrasings.

    The phrasings' probabilities are drawn once per time from a uniform Dirichlet
    distribution (``seed``; 38, the chapter's, shows every effect the chapter
    discusses), so the most probable phrasing, the reference of error analysis, is
    known exactly. ``vocab`` is ``"<eos>"`` (``eos = 0``), then the words in
    alphabetical order; ``phrasings[time]`` are token lists ending with ``eos``.
    """

    def __init__(self, seed: NonNegativeInt = 38):
        self.times = [f"{h}:{m:02d}" for h in range(1, 13) for m in (0, 15, 30, 45)]
        phrases = [_clock_phrases(time) for time in self.times]
        words = sorted(
            {w for options in phrases for text in options for w in text.split()}
        )
        self.vocab = ["<eos>", *words]
        self.eos = 0
        self.phrasings = [
            [self.encode(text) for text in options] for options in phrases
        ]
        generator = torch.Generator().manual_seed(seed)
        self.probabilities = []
        for options in phrases:
            # Normalised Exp(1) draws: a draw from the uniform Dirichlet distribution.
            uniform = torch.rand(len(options), generator=generator, dtype=torch.float64)
            draws = -torch.log(uniform)
            self.probabilities.append((draws / draws.sum()).tolist())

    def encode(self, text: str) -> list[int]:
        """Words to tokens, with ``eos`` appended."""
        unknown = [word for word in text.split() if word not in self.vocab[1:]]
        if unknown:
            raise ValueError(
                f"text must use the task's words {self.vocab[1:]}; found {unknown}"
            )
        return [self.vocab.index(word) for word in text.split()] + [self.eos]

    def decode(self, tokens: each(NonNegativeInt), keep_eos: bool = False) -> str:
        """Tokens to words; ``eos`` is dropped unless ``keep_eos``."""
        if any(token >= len(self.vocab) for token in tokens):
            raise ValueError(
                f"tokens must be ids < {len(self.vocab)}, the vocabulary's size; "
                f"found {list(tokens)}"
            )
        words = [self.vocab[t] for t in tokens if keep_eos or t != self.eos]
        return " ".join(words)

    def best(self, time: NonNegativeInt) -> list[int]:
        """The most probable phrasing of source ``time`` (an index into ``times``)."""
        if time >= len(self.times):
            raise ValueError(f"time must be < {len(self.times)}; found {time}")
        probabilities = self.probabilities[time]
        return self.phrasings[time][probabilities.index(max(probabilities))]

    def fit_model(
        self,
        per_time: PositiveInt = 200,
        delta: Positive = 1.0,
        seed: NonNegativeInt = 38,
    ) -> TableModel:
        """Draw ``per_time`` training phrasings per time and count them into a
        :class:`TableModel`."""
        pairs = self.sample(per_time, torch.Generator().manual_seed(seed))
        return TableModel.fit(pairs, len(self.times), len(self.vocab), delta)

    def sample(
        self, per_time: PositiveInt, generator: Optional[torch.Generator] = None
    ) -> list[tuple[int, list[int]]]:
        """Training pairs ``(time, tokens)``: ``per_time`` phrasings drawn per time."""
        pairs = []
        for time, probabilities in enumerate(self.probabilities):
            drawn = torch.multinomial(
                torch.tensor(probabilities),
                per_time,
                replacement=True,
                generator=generator,
            )
            pairs += [(time, self.phrasings[time][i]) for i in drawn.tolist()]
        return pairs
