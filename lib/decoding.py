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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from lib.validation import (
    require_callable, require_float_tensor, require_ids, require_int, require_log_prob, require_number,
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
    "TableModel",
    "ClockTask",
    "MAX_EXPANSIONS",
    "MAX_ALPHA",
]

StepFn = Callable[[Tensor], Tensor]
BatchStepFn = Callable[[Tensor, Tensor], Tensor]

# A row of log-probabilities must log-sum-exp to 0; float32 models are off by ~1e-7.
_NORMALISATION_TOLERANCE = 1e-3
# At most this many hypotheses x steps (beam_size or num_samples times max_len): more
# would run for hours, which is never what a reader meant.
MAX_EXPANSIONS = 10**6
# Largest length-penalty exponent: usual values lie in [0, 1], and length**alpha must stay
# a float for lengths up to MAX_EXPANSIONS (10**6 ** 50 = 1e300).
MAX_ALPHA = 50.0


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _check_beam(beam_scores: object, log_probs: object) -> None:
    require_float_tensor("beam_scores", beam_scores), require_float_tensor("log_probs", log_probs)
    if beam_scores.dim() != 1 or log_probs.dim() != 2 or log_probs.shape[0] != beam_scores.shape[0]:
        raise ValueError(
            f"beam_scores must have shape (K,) and log_probs (K, V); found {tuple(beam_scores.shape)} "
            f"and {tuple(log_probs.shape)}"
        )
    if bool(beam_scores.isnan().any()) or bool(log_probs.isnan().any()):
        raise ValueError("beam_scores and log_probs must not contain NaN: a NaN candidate cannot be ranked "
                         "(it would be dropped without a word); found NaN")


def _check_sampling(log_probs: object, temperature: object) -> None:
    if not isinstance(log_probs, Tensor) or not log_probs.is_floating_point() or log_probs.dim() == 0:
        found = log_probs.dtype if isinstance(log_probs, Tensor) else type(log_probs).__name__
        raise TypeError(f"log_probs must be a floating-point torch.Tensor of shape (..., V); found {found}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not 0 < temperature < math.inf:
        raise ValueError(f"temperature must be a finite number > 0; found {temperature!r}")


def _require_search_size(name: str, count: object, max_len: int) -> None:
    require_int(name, count, 1)
    if count * max_len > MAX_EXPANSIONS:
        raise ValueError(f"{name} * max_len must be at most {MAX_EXPANSIONS:,}; found {count} * {max_len}")


def _checked_log_probs(output: object, rows: int, eos: Optional[int] = None) -> Tensor:
    """Validate what a step function returned for ``rows`` prefixes; return it as float64."""
    if not isinstance(output, Tensor) or not output.is_floating_point():
        found = output.dtype if isinstance(output, Tensor) else type(output).__name__
        raise TypeError(f"step_fn must return a floating-point torch.Tensor of log-probabilities; found {found}")
    if output.dim() != 2 or output.shape[0] != rows:
        raise ValueError(
            f"step_fn must return log-probabilities of shape (N, V) = ({rows}, V) for {rows} prefixes; "
            f"found {tuple(output.shape)}"
        )
    if eos is not None and eos >= output.shape[1]:
        raise ValueError(f"eos must be a token of the vocabulary, < V = {output.shape[1]}; found {eos}")
    output = output.detach().double()
    if bool((torch.isnan(output) | (output == math.inf)).any()):
        raise ValueError("step_fn must return finite log-probabilities (or -inf); found NaN or +inf")
    totals = torch.logsumexp(output, dim=1)  # (N,); 0 for normalised rows
    worst = int(totals.abs().argmax())
    if not abs(float(totals[worst])) <= _NORMALISATION_TOLERANCE:
        raise ValueError(
            "step_fn must return log-probabilities (each row's logsumexp is 0; apply log_softmax "
            f"to logits); found logsumexp {float(totals[worst]):.4g} in row {worst}"
        )
    return output


def normalised_score(log_prob: float, length: int, alpha: float = 0.0) -> float:
    """The beam-search score of a hypothesis: ``log_prob / length ** alpha``.

    Parameters
    ----------
    log_prob : float
        Log-probability of the hypothesis, a sum of per-token log-probabilities.
    length : int
        Number of tokens, counting ``eos`` and not ``bos``.
    alpha : float
        0 ranks by probability; 1 by the average log-probability per token.

    Returns
    -------
    float

    Shapes
    ------
    Scalars in and out.
    """
    require_log_prob("log_prob", log_prob), require_int("length", length, 1), require_number("alpha", alpha, 0.0, MAX_ALPHA)
    return log_prob / length**alpha


# ---------------------------------------------------------------------------
# Greedy search: the plain reference path.
# ---------------------------------------------------------------------------


def greedy_search(step_fn: StepFn, bos: int, eos: int, max_len: int) -> tuple[list[int], float]:
    """Emit the most probable next token until ``eos`` or ``max_len`` tokens.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(prefixes)`` maps a ``LongTensor (N, t)`` of prefixes (each
        starting with ``bos``) to log-probabilities ``(N, V)``.
    bos, eos : int
        Begin- and end-of-sequence tokens.
    max_len : int
        Largest number of output tokens.

    Returns
    -------
    tokens : list of int
        The output, without ``bos``, ending with ``eos`` if it was emitted.
    log_prob : float
        Sum of the log-probabilities of the chosen tokens.

    Shapes
    ------
    prefixes passed to step_fn : (1, t)
    step_fn output : (1, V)
    """
    _check_search_args(step_fn, bos, eos, max_len)
    tokens: list[int] = []
    log_prob = 0.0
    while len(tokens) < max_len:
        prefix = torch.tensor([[bos, *tokens]])  # (1, t)
        log_probs = _checked_log_probs(step_fn(prefix), rows=1, eos=eos)[0]  # (V,)
        token = int(log_probs.argmax())  # the first maximum on ties
        tokens.append(token)
        log_prob += float(log_probs[token])
        if token == eos:
            break
    return tokens, log_prob


def _check_search_args(step_fn: object, bos: int, eos: int, max_len: int) -> None:
    require_callable("step_fn", step_fn)
    require_int("bos", bos, 0)
    require_int("eos", eos, 0)
    require_int("max_len", max_len, 1, MAX_EXPANSIONS)


# ---------------------------------------------------------------------------
# Beam search.
# ---------------------------------------------------------------------------


def expand_and_prune(beam_scores: Tensor, log_probs: Tensor, beam_size: int) -> tuple[Tensor, Tensor, Tensor]:
    """One beam-search step: extend every hypothesis by every token, keep the best.

    Candidate ``(k, v)`` extends hypothesis ``k`` by token ``v`` and scores
    ``beam_scores[k] + log_probs[k, v]``. All ``K * V`` candidates have the same
    length, so ranking them by log-probability is ranking them by any
    length-normalised score too. Candidates of probability 0 (score ``-inf``)
    are never kept.

    Parameters
    ----------
    beam_scores : Tensor
        Log-probabilities of the ``K`` current hypotheses.
    log_probs : Tensor
        Next-token log-probabilities after each hypothesis.
    beam_size : int
        How many candidates to keep.

    Returns
    -------
    parents, tokens : LongTensor
        Which hypothesis each kept candidate extends, and by which token.
    scores : Tensor
        The kept candidates' log-probabilities, best first (ties keep the
        order of the flattened ``(K, V)`` table: lower parent, then lower token).

    Shapes
    ------
    beam_scores : (K,)
    log_probs : (K, V)
    parents, tokens, scores : (k,) with k = min(beam_size, number of finite candidates)
    """
    require_int("beam_size", beam_size, 1), _check_beam(beam_scores, log_probs)
    vocab_size = log_probs.shape[1]
    candidates = (beam_scores[:, None] + log_probs).flatten()  # (K, V) -> (K * V,)
    # A stable sort makes ties deterministic and agree with greedy's argmax.
    order = torch.sort(candidates, descending=True, stable=True).indices[:beam_size]  # (k,)
    order = order[candidates[order] > -math.inf]
    return order // vocab_size, order % vocab_size, candidates[order]


@dataclass(frozen=True)
class Candidate:
    """One candidate of a beam-search step, as recorded in a trace.

    ``parent`` indexes the previous step's kept (still open) hypotheses, in the
    order that step lists them; ``status`` is ``"kept"`` (stays in the beam),
    ``"finished"`` (kept, and ends with ``eos`` or reached ``max_len``) or
    ``"pruned"``.
    """

    tokens: tuple[int, ...]
    log_prob: float
    parent: int
    status: str


@dataclass(frozen=True)
class TraceStep:
    """Every candidate of one beam-search step for one source, best first."""

    source: int
    step: int
    candidates: tuple[Candidate, ...]


def _trace_step(source, step, alive, log_probs, parents, tokens, eos, max_len) -> TraceStep:
    """Record all candidates of a step, marking the kept ones (does not search)."""
    kept = set(zip(parents.tolist(), tokens.tolist()))
    recorded = []
    for parent, (prefix, score) in enumerate(alive):
        for token, token_log_prob in enumerate(log_probs[parent].tolist()):
            if token_log_prob == -math.inf:
                continue  # impossible sequences are not candidates
            ends = token == eos or len(prefix) + 1 == max_len
            status = ("finished" if ends else "kept") if (parent, token) in kept else "pruned"
            recorded.append(Candidate((*prefix, token), score + token_log_prob, parent, status))
    recorded.sort(key=lambda c: -c.log_prob)
    return TraceStep(source, step, tuple(recorded))


def beam_search_batch(
    step_fn: BatchStepFn,
    num_sources: int,
    bos: int,
    eos: int,
    beam_size: int,
    max_len: int,
    alpha: float = 0.0,
    trace: Optional[list] = None,
) -> list[list[tuple[list[int], float]]]:
    """Beam search for several source sentences at once, one model call per step.

    Each source has its own beam of ``beam_size`` slots. Every step extends the
    open hypotheses of all sources together (one call of ``step_fn``), then,
    source by source, keeps the best candidates (:func:`expand_and_prune`). A
    kept candidate that ends with ``eos`` or has ``max_len`` tokens is finished
    and keeps its slot, so the beam of a source narrows as hypotheses finish and
    the search ends when no hypothesis is open. Each source therefore gets
    ``beam_size`` finished hypotheses (fewer if the model allows fewer).

    Parameters
    ----------
    step_fn : callable
        ``step_fn(prefixes, sources)``: prefixes ``LongTensor (N, t)`` starting
        with ``bos``, and ``sources`` ``LongTensor (N,)``, the index in
        ``range(num_sources)`` of the sentence each row continues. Returns
        log-probabilities ``(N, V)``. An encoder-decoder model encodes its batch
        once and indexes the encoder states with ``sources``.
    num_sources : int
        Number of source sentences.
    bos, eos : int
        Begin- and end-of-sequence tokens.
    beam_size : int
        ``K``, the number of hypotheses kept per source.
    max_len : int
        Largest number of output tokens.
    alpha : float
        Length-normalisation exponent of the final ranking:
        score = log-probability / ``len(tokens) ** alpha``.
    trace : list, optional
        If given, one :class:`TraceStep` per source and step is appended.

    Returns
    -------
    list of lists of (tokens, score)
        For each source, its finished hypotheses sorted best first.

    Shapes
    ------
    prefixes passed to step_fn : (N, t), N = open hypotheses of all sources
    sources passed to step_fn : (N,)
    step_fn output : (N, V)
    """
    require_int("num_sources", num_sources, 1)
    _check_search_args(step_fn, bos, eos, max_len)
    _require_search_size("beam_size", beam_size, max_len)
    require_number("alpha", alpha, 0.0, MAX_ALPHA)
    # Open hypotheses per source as (tokens, log-probability); finished ones likewise.
    alive: list[list[tuple[tuple[int, ...], float]]] = [[((), 0.0)] for _ in range(num_sources)]
    finished: list[list[tuple[tuple[int, ...], float]]] = [[] for _ in range(num_sources)]
    for step in range(1, max_len + 1):
        rows = [(s, tokens) for s in range(num_sources) for tokens, _ in alive[s]]
        if not rows:
            break
        prefixes = torch.tensor([[bos, *tokens] for _, tokens in rows])  # (N, step)
        sources = torch.tensor([s for s, _ in rows])  # (N,)
        log_probs = _checked_log_probs(step_fn(prefixes, sources), len(rows), eos)  # (N, V)
        start = 0
        for s in range(num_sources):
            beam, stop = alive[s], start + len(alive[s])
            if not beam:
                continue
            scores = torch.tensor([score for _, score in beam], dtype=torch.float64)  # (K,)
            slots = beam_size - len(finished[s])
            parents, tokens, new_scores = expand_and_prune(scores, log_probs[start:stop], slots)
            if trace is not None:
                trace.append(_trace_step(s, step, beam, log_probs[start:stop], parents, tokens, eos, max_len))
            alive[s] = []
            for parent, token, score in zip(parents.tolist(), tokens.tolist(), new_scores.tolist()):
                hypothesis = ((*beam[parent][0], token), score)
                done = token == eos or step == max_len
                (finished[s] if done else alive[s]).append(hypothesis)
            start = stop
    return [
        sorted(
            ((list(tokens), normalised_score(log_prob, len(tokens), alpha)) for tokens, log_prob in hyps),
            key=lambda hypothesis: -hypothesis[1],
        )
        for hyps in finished
    ]


def beam_search(
    step_fn: StepFn,
    bos: int,
    eos: int,
    beam_size: int,
    max_len: int,
    alpha: float = 0.0,
    trace: Optional[list] = None,
) -> list[tuple[list[int], float]]:
    """Beam search for one source: :func:`beam_search_batch` with a single sentence.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(prefixes)`` maps a ``LongTensor (N, t)`` of prefixes (each
        starting with ``bos``) to log-probabilities ``(N, V)``.
    bos, eos : int
        Begin- and end-of-sequence tokens.
    beam_size : int
        ``K``, the number of hypotheses kept.
    max_len : int
        Largest number of output tokens.
    alpha : float
        Length-normalisation exponent: score = log-probability / ``len ** alpha``.
    trace : list, optional
        If given, one :class:`TraceStep` per step is appended (``source`` 0).

    Returns
    -------
    list of (tokens, score)
        The finished hypotheses, best first. ``tokens`` excludes ``bos`` and
        ends with ``eos`` unless the hypothesis reached ``max_len`` tokens.

    Shapes
    ------
    prefixes passed to step_fn : (N, t), N <= beam_size
    step_fn output : (N, V)
    """
    require_callable("step_fn", step_fn)  # checked here too: the lambda below would hide it
    return beam_search_batch(
        lambda prefixes, sources: step_fn(prefixes), 1, bos, eos, beam_size, max_len, alpha, trace
    )[0]


# ---------------------------------------------------------------------------
# Sampling.
# ---------------------------------------------------------------------------


def sampling_distribution(log_probs: Tensor, temperature: float = 1.0, top_k: Optional[int] = None) -> Tensor:
    """The distribution a sampler draws the next token from.

    :math:`\\operatorname{softmax}(\\log p / T)`, restricted to the ``top_k`` most
    probable tokens and renormalised. Exactly ``k`` tokens are kept: ties at the
    ``k``-th place go to the lower token id (smoothed tables have many ties).
    ``T < 1`` sharpens the distribution, ``T > 1`` flattens it.

    Parameters
    ----------
    log_probs : Tensor
        Next-token log-probabilities (or logits: the softmax normalises).
    temperature : float
        ``T > 0``.
    top_k : int, optional
        Keep only the ``k`` most probable tokens; None keeps all.

    Returns
    -------
    Tensor
        Probabilities, zero outside the kept tokens.

    Shapes
    ------
    log_probs : (..., V)
    output : (..., V)
    """
    _check_sampling(log_probs, temperature)
    scaled = log_probs / temperature
    if top_k is not None:
        require_int("top_k", top_k, 1)
        if top_k < scaled.shape[-1]:
            # A stable sort breaks ties by token id, so exactly k tokens survive.
            best = torch.sort(scaled, dim=-1, descending=True, stable=True).indices[..., :top_k]  # (..., k)
            keep = torch.zeros_like(scaled, dtype=torch.bool).scatter(-1, best, True)  # (..., V)
            scaled = scaled.masked_fill(~keep, -math.inf)
    return torch.softmax(scaled, dim=-1)


def sample(
    step_fn: StepFn,
    bos: int,
    eos: int,
    max_len: int,
    num_samples: int = 1,
    temperature: float = 1.0,
    top_k: Optional[int] = None,
    generator: Optional[torch.Generator] = None,
) -> list[tuple[list[int], float]]:
    """Draw sequences token by token from :func:`sampling_distribution`.

    All samples are drawn in parallel: each step calls ``step_fn`` once on the
    samples that have not finished.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(prefixes)`` maps a ``LongTensor (N, t)`` to log-probabilities ``(N, V)``.
    bos, eos : int
        Begin- and end-of-sequence tokens.
    max_len : int
        Largest number of output tokens.
    num_samples : int
        How many sequences to draw.
    temperature : float
        Sampling temperature ``T > 0``.
    top_k : int, optional
        Sample only among the ``k`` most probable tokens.
    generator : torch.Generator, optional
        Source of randomness (seed it for reproducible samples).

    Returns
    -------
    list of (tokens, log_prob)
        One per sample, in order. ``log_prob`` is the *model's* log-probability
        of the tokens (untempered, unrestricted), as for the searches.

    Shapes
    ------
    prefixes passed to step_fn : (N, t), N <= num_samples
    step_fn output : (N, V)
    """
    _check_search_args(step_fn, bos, eos, max_len)
    _require_search_size("num_samples", num_samples, max_len)
    samples: list[list[int]] = [[] for _ in range(num_samples)]
    log_prob = [0.0] * num_samples
    open_rows = list(range(num_samples))
    for _ in range(max_len):
        if not open_rows:
            break
        prefixes = torch.tensor([[bos, *samples[i]] for i in open_rows])  # (N, t)
        log_probs = _checked_log_probs(step_fn(prefixes), len(open_rows), eos)  # (N, V)
        probs = sampling_distribution(log_probs, temperature, top_k)  # (N, V)
        drawn = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
        step_log_probs = log_probs.gather(1, drawn)[:, 0].tolist()  # (N,): each drawn token's log-probability
        for i, token, token_log_prob in zip(list(open_rows), drawn[:, 0].tolist(), step_log_probs):
            samples[i].append(token)
            log_prob[i] += token_log_prob
            if token == eos:
                open_rows.remove(i)
    return list(zip(samples, log_prob))


# ---------------------------------------------------------------------------
# Error analysis: is it the search or the model?
# ---------------------------------------------------------------------------


def sequence_score(step_fn: StepFn, bos: int, tokens: list[int], alpha: float = 0.0) -> float:
    """The model's score of a given output: log-probability / ``len(tokens) ** alpha``.

    This is the quantity beam search maximises, so it is what error analysis
    must compare (with ``alpha = 0`` it is the log-probability).

    Parameters
    ----------
    step_fn : callable
        ``step_fn(prefixes)`` maps a ``LongTensor (N, t)`` to log-probabilities ``(N, V)``.
    bos : int
        Begin-of-sequence token.
    tokens : list of int
        The output, without ``bos``, with ``eos`` if it has one.
    alpha : float
        Length-normalisation exponent.

    Returns
    -------
    float

    Shapes
    ------
    prefixes passed to step_fn : (1, t) for t = 1 .. len(tokens)
    """
    require_callable("step_fn", step_fn), require_int("bos", bos, 0), require_ids("tokens", tokens)
    log_prob = 0.0
    for t, token in enumerate(tokens):
        prefix = torch.tensor([[bos, *tokens[:t]]])  # (1, t + 1)
        log_prob += float(_checked_log_probs(step_fn(prefix), rows=1)[0, token])
    return normalised_score(log_prob, len(tokens), alpha)


def blame(step_fn: StepFn, bos: int, reference: list[int], output: list[int], alpha: float = 0.0) -> str:
    """Who is to blame for a wrong output: ``"search"`` or ``"model"``?

    If the model scores the reference ``y*`` higher than the output ``ŷ`` the
    search missed a better sequence: a *search error* (widen the beam). Otherwise
    the model itself prefers the wrong output: a *model error* (improve the
    model; a wider beam cannot help). Both are scored with the objective the
    search maximises, so ``alpha`` must be the one the search used.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(prefixes)`` maps a ``LongTensor (N, t)`` to log-probabilities ``(N, V)``.
    bos : int
        Begin-of-sequence token.
    reference, output : list of int
        The correct output and the decoder's output (without ``bos``).
    alpha : float
        Length-normalisation exponent the search used.

    Returns
    -------
    str
        ``"search"`` or ``"model"``.

    Shapes
    ------
    As :func:`sequence_score`.
    """
    require_ids("reference", reference), require_ids("output", output)
    reference_score = sequence_score(step_fn, bos, reference, alpha)
    output_score = sequence_score(step_fn, bos, output, alpha)
    return "search" if reference_score > output_score else "model"


# ---------------------------------------------------------------------------
# A model to decode with: a look-up table, and the chapter's toy data.
# ---------------------------------------------------------------------------


@dataclass
class TableModel:
    """A next-token model that is a table: :math:`\\log p(y_t = v \\mid s, y_{t-1} = u)`.

    The next token depends on the source sentence ``s`` and the previous token
    ``u`` only (a bigram model per source). Row ``u = V`` is ``bos``.

    Shapes
    ------
    log_probs : (S, V + 1, V)
    """

    log_probs: Tensor

    def __post_init__(self):
        require_float_tensor("log_probs", self.log_probs)
        if self.log_probs.dim() != 3 or self.log_probs.shape[1] != self.log_probs.shape[2] + 1:
            raise ValueError(f"log_probs must have shape (S, V + 1, V); found {tuple(self.log_probs.shape)}")

    @property
    def vocab_size(self) -> int:
        return self.log_probs.shape[2]

    @property
    def bos(self) -> int:
        return self.vocab_size

    @classmethod
    def fit(cls, pairs: list[tuple[int, list[int]]], num_sources: int, vocab_size: int,
            delta: float = 0.1) -> "TableModel":
        """Train by counting: add-``delta`` maximum likelihood, as for n-gram models.

        Parameters
        ----------
        pairs : list of (source, tokens)
            Training examples; ``tokens`` end with ``eos`` and exclude ``bos``.
        num_sources, vocab_size : int
            ``S`` and ``V``.
        delta : float
            Pseudo-count added to every table entry (> 0, so no sequence has
            probability 0).

        Returns
        -------
        TableModel

        Shapes
        ------
        log_probs of the result : (S, V + 1, V)
        """
        require_int("num_sources", num_sources, 1)
        require_int("vocab_size", vocab_size, 1)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not delta > 0:
            raise ValueError(f"delta must be a number > 0; found {delta!r}")
        counts = torch.full((num_sources, vocab_size + 1, vocab_size), float(delta), dtype=torch.float64)
        cells = []  # one (source, previous token, token) triple per counted token
        for source, tokens in pairs:
            if not 0 <= source < num_sources or not tokens or not all(0 <= v < vocab_size for v in tokens):
                raise ValueError(
                    f"each pair must be (source < {num_sources}, non-empty tokens < {vocab_size}); "
                    f"found ({source}, {tokens})"
                )
            previous = [vocab_size, *tokens[:-1]]  # bos, then each token before the next
            cells += [(source, u, v) for u, v in zip(previous, tokens)]
        if cells:  # one scatter-add instead of a Python loop; adding whole numbers is exact in any order
            index = torch.tensor(cells).T  # (3, number of tokens)
            counts.index_put_(tuple(index), torch.ones(index.shape[1], dtype=torch.float64), accumulate=True)
        return cls(torch.log(counts / counts.sum(dim=2, keepdim=True)))

    def step(self, prefixes: Tensor, sources: Tensor) -> Tensor:
        """Batched step function: rows (source, previous token) of the table.

        Shapes
        ------
        prefixes : (N, t)
        sources : (N,)
        output : (N, V)
        """
        return self.log_probs[sources, prefixes[:, -1]]  # (N, V)

    def for_source(self, source: int) -> StepFn:
        """The single-sentence step function of one source."""
        require_int("source", source, 0)
        if source >= self.log_probs.shape[0]:
            raise ValueError(f"source must be < S = {self.log_probs.shape[0]}; found {source}")
        return lambda prefixes: self.log_probs[source, prefixes[:, -1]]  # (N, V)


_HOURS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def _clock_phrases(time: str) -> list[str]:
    """The ways of reading ``time`` (``"h:mm"``) aloud that the toy task knows."""
    hour, minute = (int(part) for part in time.split(":"))
    h, next_h = _HOURS[hour - 1], _HOURS[hour % 12]
    return {
        0: [f"{h} o'clock", h],
        15: [f"quarter past {h}", f"a quarter past {h}", f"quarter after {h}", f"a quarter after {h}",
             f"{h} fifteen"],
        30: [f"half past {h}", f"{h} thirty"],
        45: [f"quarter to {next_h}", f"a quarter to {next_h}", f"quarter of {next_h}", f"{h} forty five"],
    }[minute]


class ClockTask:
    """Toy "translation" data: read a time such as 8:45 aloud, in one of several ways.

    The sources are the 48 times ``h:mm`` with ``mm`` in {00, 15, 30, 45}. Each
    has two to five phrasings ("quarter to nine", "a quarter to nine", "quarter
    of nine", "eight forty five"), with probabilities drawn once per time from a
    uniform Dirichlet distribution, so every time has its own favourite. The
    true distribution is known exactly, so the most probable phrasing, the
    reference ``y*`` of error analysis, is known too.

    Parameters
    ----------
    seed : int
        Seed of the phrasing probabilities. 38, the chapter's, shows in one
        model every effect the chapter discusses (greedy search errors, the
        short outputs of wide beams, length normalisation changing the
        answer); the chapter's sweep repeats the experiment with other seeds.

    Attributes
    ----------
    times : list of str
        The sources, ``"1:00"`` to ``"12:45"``.
    vocab : list of str
        ``"<eos>"`` (token ``eos = 0``), then the words in alphabetical order.
    phrasings : list of list of list of int
        For each time, its phrasings as token lists ending with ``eos``.
    probabilities : list of list of float
        For each time, the probability of each phrasing.
    """

    def __init__(self, seed: int = 38):
        self.times = [f"{h}:{m:02d}" for h in range(1, 13) for m in (0, 15, 30, 45)]
        phrases = [_clock_phrases(time) for time in self.times]
        words = sorted({word for options in phrases for text in options for word in text.split()})
        self.vocab = ["<eos>", *words]
        self.eos = 0
        self.phrasings = [[self.encode(text) for text in options] for options in phrases]
        require_int("seed", seed, 0)
        generator = torch.Generator().manual_seed(seed)
        self.probabilities = []
        for options in phrases:
            # Normalised Exp(1) draws are a draw from the uniform Dirichlet distribution.
            draws = -torch.log(torch.rand(len(options), generator=generator, dtype=torch.float64))
            self.probabilities.append((draws / draws.sum()).tolist())

    def encode(self, text: str) -> list[int]:
        """Words to tokens, with ``eos`` appended."""
        unknown = [word for word in text.split() if word not in self.vocab[1:]]
        if unknown:
            raise ValueError(f"text must use the task's words {self.vocab[1:]}; found {unknown}")
        return [self.vocab.index(word) for word in text.split()] + [self.eos]

    def decode(self, tokens: list[int], keep_eos: bool = False) -> str:
        """Tokens to words; ``eos`` is dropped unless ``keep_eos``."""
        return " ".join(self.vocab[token] for token in tokens if keep_eos or token != self.eos)

    def best(self, time: int) -> list[int]:
        """The most probable phrasing of source ``time`` (an index into ``times``)."""
        probabilities = self.probabilities[time]
        return self.phrasings[time][probabilities.index(max(probabilities))]

    def fit_model(self, per_time: int = 200, delta: float = 1.0, seed: int = 38) -> TableModel:
        """Draw ``per_time`` training phrasings per time and count them into a :class:`TableModel`."""
        pairs = self.sample(per_time, torch.Generator().manual_seed(seed))
        return TableModel.fit(pairs, len(self.times), len(self.vocab), delta)

    def sample(self, per_time: int, generator: Optional[torch.Generator] = None) -> list[tuple[int, list[int]]]:
        """Training pairs ``(time, tokens)``: ``per_time`` phrasings drawn for every time."""
        require_int("per_time", per_time, 1)
        pairs = []
        for time, probabilities in enumerate(self.probabilities):
            drawn = torch.multinomial(torch.tensor(probabilities), per_time, replacement=True, generator=generator)
            pairs += [(time, self.phrasings[time][i]) for i in drawn.tolist()]
        return pairs
