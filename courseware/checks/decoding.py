"""Checkers for the exercises of chapter 7 (decoding: exact search for a bigram model, with and
without <eos>, nucleus sampling, temperature)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial

import torch

from courseware.checks.core import Check, CheckFailed, Measured, Slip, _distinct, by_value, solve_increasing
from lib.part3_words.decoding import sampling_distribution


# ---- exact search for a model that looks one token back (the Viterbi recursion) --------------
# In every case the most probable sequence is ahead of every other by at least this much in
# log-probability, so that a right answer that adds in another order, or in float32, finds it too.
MARKOV_MARGIN = 1e-3
MARKOV_VOCAB = (2, 6)  # V of every case, from .. to
MARKOV_SHORT = (2, 6)  # T of the short cases: all V^T sequences can be tried in the tests
MARKOV_LONG = (30, 60)  # T of the long case: V^T ≥ 2^30 sequences, too many to try


def sequence_log_prob(tokens: list[int], first: torch.Tensor, transitions: torch.Tensor) -> float:
    """``first[y_1] + Σ_t transitions[y_{t-1}, y_t]``, the log-probability of ``tokens``."""
    score = float(first[tokens[0]])
    for previous, token in zip(tokens, tokens[1:]):
        score += float(transitions[previous, token])
    return score


def _forward(first: torch.Tensor, transitions: torch.Tensor, length: int) -> tuple[list, list]:
    """``(best, came)``: ``best[t][v]`` is the largest log-probability of a prefix of ``t + 1`` tokens
    that ends in ``v``, and ``came[t - 1][v]`` the token before ``v`` on that prefix (the lowest on a
    tie). In Python floats: for these few tokens, far faster than tensor operations."""
    table = transitions.tolist()
    vocab = len(table)
    best, came = [first.tolist()], []
    for _ in range(length - 1):
        previous = [max(range(vocab), key=lambda u: best[-1][u] + table[u][v]) for v in range(vocab)]
        best.append([best[-1][u] + table[u][v] for v, u in enumerate(previous)])
        came.append(previous)
    return best, came


def _argmax(values: list[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)  # the first largest


def most_probable_sequence(first: torch.Tensor, transitions: torch.Tensor, length: int) -> torch.Tensor:
    """The book's answer: the most probable sequence of ``length`` tokens, by the Viterbi recursion.

    ``δ_1 = first`` and ``δ_t(v) = max_u δ_{t-1}(u) + transitions[u, v]``: two prefixes that end in
    the same token have the same continuations, so only the better can begin the best sequence. The
    best last token, then the recorded tokens before each, give it back to front.
    ``tests/courseware/test_checks_decoding.py`` holds it to a search of all ``V^T`` sequences.

    Shapes
    ------
    first ``(V,)``, transitions ``(V, V)`` (row: the previous token) -> ``(T,)`` long
    """
    best, came = _forward(first, transitions, length)
    tokens = [_argmax(best[-1])]
    for previous in reversed(came):
        tokens.append(previous[tokens[-1]])
    return torch.tensor(tokens[::-1])


def markov_margin(first: torch.Tensor, transitions: torch.Tensor, length: int) -> float:
    """How far the most probable sequence is ahead of the second most probable, in log-probability.

    The best sequence through token ``v`` at step ``t`` scores ``forward[t][v] + backward[t][v]`` (the
    best prefix that ends in ``v``, the best continuation from it); every other sequence leaves the
    best one at some step, so the second best is the largest of these off the best sequence.
    """
    forward, _ = _forward(first, transitions, length)
    table = transitions.tolist()
    vocab = len(table)
    backward = [[0.0] * vocab]
    for _ in range(length - 1):
        backward.append([max(table[u][v] + backward[-1][v] for v in range(vocab)) for u in range(vocab)])
    backward.reverse()
    best = most_probable_sequence(first, transitions, length).tolist()
    second = max(forward[t][v] + backward[t][v] for t in range(length) for v in range(vocab) if v != best[t])
    return max(forward[-1]) - second


def beam_sequence(first: torch.Tensor, transitions: torch.Tensor, length: int, width: int) -> torch.Tensor:
    """A slip: beam search of ``width`` prefixes, each step keeping the ``width`` best extensions (a
    stable sort: ties in the order prefix, then token), every output ``length`` tokens long (no
    ``<eos>``). Width 1 is greedy search."""
    start, table = first.tolist(), transitions.tolist()
    beam = [((), 0.0)]
    for step in range(length):
        candidates = [((*prefix, v), score + (start[v] if step == 0 else table[prefix[-1]][v]))
                      for prefix, score in beam for v in range(len(start))]
        beam = sorted(candidates, key=lambda candidate: -candidate[1])[:width]
    return torch.tensor(beam[0][0])


def _best_ending_at_each_step(first: torch.Tensor, transitions: torch.Tensor, length: int) -> torch.Tensor:
    """A slip: at each step the token whose best prefix is the most probable, without tracing back."""
    best, _ = _forward(first, transitions, length)
    return torch.tensor([_argmax(values) for values in best])


def _max_over_the_next_token(first: torch.Tensor, transitions: torch.Tensor, length: int) -> torch.Tensor:
    """A slip: the recursion maxed over the wrong axis, ``(best[:, None] + transitions).max(dim=1)``:
    for each previous token ``u`` the best next token ``v``, then traced back as usual (the flipped
    answer is a slip too)."""
    table = transitions.tolist()
    best, came = first.tolist(), []
    for _ in range(length - 1):
        following = [_argmax(row) for row in table]
        best = [best[u] + table[u][v] for u, v in enumerate(following)]
        came.append(following)
    tokens = [_argmax(best)]
    for previous in reversed(came):
        tokens.append(previous[tokens[-1]])
    return torch.tensor(tokens[::-1])


def _traced_back_in_forward_order(first: torch.Tensor, transitions: torch.Tensor, length: int) -> torch.Tensor:
    """A slip: the right back-pointers, followed from step 2's instead of from step T's (no
    ``reversed``), the tokens then turned front to back (the flipped answer is a slip too)."""
    best, came = _forward(first, transitions, length)
    tokens = [_argmax(best[-1])]
    for previous in came:
        tokens.append(previous[tokens[-1]])
    return torch.tensor(tokens[::-1])


def _as_given(first: torch.Tensor, transitions: torch.Tensor) -> tuple:
    return first, transitions


def _transposed(first: torch.Tensor, transitions: torch.Tensor) -> tuple:
    return first, transitions.T


def _without_first(first: torch.Tensor, transitions: torch.Tensor) -> tuple:
    return torch.zeros_like(first), transitions


def _beam_of(width):
    def answer(first, transitions, length):
        return beam_sequence(first, transitions, length, len(first) if width == "V" else width)
    return answer


_KEEP_ONE_PER_TOKEN = "keep instead, for every token v, the best prefix that ends in v"
# (the mistake's answer, the model under which an answer as probable as it makes the same mistake,
# or None when only that answer does, what to say). Sequences with the same first token and the same
# transitions in another order tie, so a student's beam search or search of a wrong table may return
# another sequence than the slip's, one exactly as probable: the rules name the mistake by its score.
_MARKOV_MISTAKES = (
    (_beam_of(1), _as_given,
     "you took the most probable token at each step (greedy search); a less probable token can lead to a "
     f"more probable sequence: {_KEEP_ONE_PER_TOKEN}"),
    (_beam_of("V"), _as_given,
     "a beam as wide as the vocabulary (K = V) is not exact: the V best prefixes can all end in the same "
     "few tokens and crowd out the prefix the best sequence continues. Keep one prefix per last token, "
     "the best that ends in it, whatever its rank"),
    *((_beam_of(width), _as_given,
       f"you kept the {width} best prefixes at each step (beam search with K = {width}), which can prune "
       f"the prefix the best sequence continues: {_KEEP_ONE_PER_TOKEN}") for width in range(2, 11)),
    (lambda first, transitions, length: most_probable_sequence(first, transitions.T, length), _transposed,
     "you read transitions[v, u] as the log-probability of v after u; the row is the previous token: "
     "log p(y_t = v | y_(t-1) = u) is transitions[u, v]"),
    (lambda first, transitions, length: most_probable_sequence(torch.zeros_like(first), transitions, length),
     _without_first, "you left out first: a sequence's log-probability starts with first[y_1]"),
    (_best_ending_at_each_step, None,
     "at each step you took the token whose best prefix is the most probable, but the best sequence need "
     "not pass through those tokens: record, for every token, the token before it on its best prefix, "
     "and follow those back from the best last token"),
    (lambda first, transitions, length: most_probable_sequence(first, transitions, length).flip(0), None,
     "your sequence is backwards: tracing back gives y_T first; reverse it"),
    *((answer, None,
       "you took, for each previous token u, the max over the next token v (dim 1); δ_t(v) takes the max "
       "over the previous token u, for each v (dim 0)")
      for answer in (_max_over_the_next_token,
                     lambda first, transitions, length: _max_over_the_next_token(first, transitions, length).flip(0))),
    *((answer, None,
       "you followed the back-pointers in the order you recorded them; those of the last step lead from "
       "y_T to y_(T-1), so follow them from the last step back to the first (reversed)")
      for answer in (_traced_back_in_forward_order,
                     lambda first, transitions, length: _traced_back_in_forward_order(first, transitions,
                                                                                      length).flip(0))),
)
_MARKOV_SLIPS = tuple(Slip(answer, message) for answer, _, message in _MARKOV_MISTAKES)
# every draw of cases tells these apart: greedy search, K = V, the transposed table, no first, the
# untraced best endings and the reversed sequence (counted from the end: the four before the last four)
_MARKOV_TELLING = tuple(_MARKOV_MISTAKES[i][0] for i in (0, 1, -8, -7, -6, -5))
# Two log-probabilities of one model within this are the same number summed in another order.
_SAME_SCORE = 1e-9


def _tells_markov_apart(answer, case) -> bool:
    return not torch.equal(answer(*case), most_probable_sequence(*case))


def _markov_case(generator: torch.Generator, length: int) -> tuple:
    """One case ``(first, transitions, length)``: rows from flat to peaked, one token that every row
    favours (so that many prefixes end in it), and about one transition in seven impossible (-inf).
    Each row keeps its most likely token and each column some token: in the table and in its
    transpose (a slip) every token has a possible successor, so every search ends on a sequence of
    probability above 0, and -inf ties never decide."""
    vocab = int(torch.randint(MARKOV_VOCAB[0], MARKOV_VOCAB[1] + 1, (), generator=generator))
    sharpness = 0.3 + 3 * torch.rand(vocab, 1, generator=generator, dtype=torch.float64)
    logits = sharpness * torch.randn(vocab, vocab, generator=generator, dtype=torch.float64)
    hub = int(torch.randint(vocab, (), generator=generator))
    logits[:, hub] += 1.5 * float(torch.rand((), generator=generator, dtype=torch.float64))
    impossible = torch.rand(vocab, vocab, generator=generator) < 0.15
    impossible[torch.arange(vocab), logits.argmax(dim=1)] = False
    impossible[torch.randint(vocab, (vocab,), generator=generator), torch.arange(vocab)] = False
    first = 2 * float(torch.rand((), generator=generator, dtype=torch.float64)) * torch.randn(
        vocab, generator=generator, dtype=torch.float64)
    transitions = torch.log_softmax(logits.masked_fill(impossible, -math.inf), dim=1)
    return torch.log_softmax(first, dim=0), transitions, length


def markov_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(first, transitions, length)`` for :data:`check_most_probable_sequence`.

    ``V`` from 2 to 6; the first case has ``T = 1``, the second ``T`` from 30 to 60 (too many sequences
    to try them all), the others ``T`` from 2 to 6. Every case's best sequence is ahead by
    ``MARKOV_MARGIN``, and the cases are redrawn until greedy search, a beam of ``K = V``, the
    transposed table, the missing ``first``, the untraced best endings and the reversed sequence are
    each wrong on at least one of them.
    """
    untold = list(_MARKOV_TELLING)  # the mistakes no case drawn so far tells apart
    cases = []
    for trial in range(trials):
        for _ in range(10_000):
            if trial == 0:
                length = 1
            else:
                low, high = MARKOV_LONG if trial == 1 else MARKOV_SHORT
                length = int(torch.randint(low, high + 1, (), generator=generator))
            case = _markov_case(generator, length)
            if markov_margin(*case) < MARKOV_MARGIN:
                continue
            # the last cases must tell apart what the earlier ones have not
            if len(untold) <= trials - 1 - trial or any(_tells_markov_apart(a, case) for a in untold):
                break
        else:
            raise RuntimeError("could not draw a telling case")
        cases.append(case)
        untold = [a for a in untold if not _tells_markov_apart(a, case)]
    return cases


def _markov_rules(found: torch.Tensor, expected: torch.Tensor, first, transitions, length) -> str | None:
    """Token ids outside 0 .. V - 1; or a sequence exactly as probable as a known mistake's answer
    under the model that mistake searches (a tie the slips, which compare sequences, miss)."""
    vocab = len(first)
    if ((found < 0) | (found >= vocab)).any():
        return f"your sequence {found.tolist()} has token ids outside 0 .. {vocab - 1}"
    tokens = found.tolist()
    for answer, model, message in _MARKOV_MISTAKES:
        if model is not None:
            start, table = model(first, transitions)
            theirs = sequence_log_prob(answer(first, transitions, length).tolist(), start, table)
            if math.isfinite(theirs) and abs(sequence_log_prob(tokens, start, table) - theirs) <= _SAME_SCORE:
                return message
    return None


def _markov_mismatch(found: torch.Tensor, expected: torch.Tensor, first, transitions, length) -> str:
    """Both log-probabilities, told apart, and the first position at which the sequences differ."""
    yours = sequence_log_prob(found.tolist(), first, transitions)
    right = sequence_log_prob(expected.tolist(), first, transitions)
    at = int((found != expected).nonzero()[0])
    shown_yours, shown_right = ("-inf", f"{right:.6g}") if yours == -math.inf else _distinct(yours, right)
    impossible = " (it takes a token or a transition of probability 0)" if yours == -math.inf else ""
    return (f"your sequence has log-probability {shown_yours}{impossible}; the most probable has {shown_right} (the "
            f"two first differ at position {at}, counting from 0)")


def _markov_shape_hint(shape: tuple, first, transitions, length) -> str:
    if shape == ():
        return ": return the sequence of token ids, not its log-probability"
    if shape == (length + 1,):
        return ": first gives y_1, so a sequence of T tokens takes T - 1 transitions"
    if shape == (length - 1,):
        return ": return all T tokens, y_1 included"
    return ""


check_most_probable_sequence = Check(
    "your sequences are the most probable ones on 20 fresh random bigram models, one of them too long to "
    "try every sequence",
    markov_cases, most_probable_sequence,
    describe=lambda first, transitions, length: f"V = {len(first)} tokens and T = {length}",
    compared_with="the most probable sequence", noun="sequence", layout="(T,)",
    slips=_MARKOV_SLIPS, rules=_markov_rules, mismatch=_markov_mismatch, shape_hint=_markov_shape_hint,
    tolerance=dict(atol=0.0, rtol=0.0), integers=True,
)


# ---- nucleus (top-p) sampling ---------------------------------------------------------------
# Every cumulative probability of a case is at least this far from top_p, and two tokens whose
# probabilities differ (tokens are tied only on purpose) differ by at least NUCLEUS_GAP relative:
# a right answer computed in float32, or in another order of summation, keeps the same nucleus.
NUCLEUS_MARGIN = 1e-3
NUCLEUS_GAP = 1e-4


def _nucleus(probs: torch.Tensor, top_p: float, order: str = "probability", crossing: bool = True,
             renormalise: bool = True, threshold: bool = False) -> torch.Tensor:
    """The nucleus distribution of each row of ``probs`` ``(..., V)``, by a loop over Python floats.

    ``order`` is how the tokens are taken: ``"probability"`` (most probable first, ties by lower
    token id, the statement's rule), ``"higher id first"`` (ties the other way) or ``"token id"``
    (not sorted at all). Tokens are added while the ones already taken sum to less than ``top_p``
    (``crossing=True``, so the one that crosses it is kept) or while the total *with* the next one
    stays below ``top_p`` (``crossing=False``, a slip that can leave the nucleus empty: 0/0 = NaN).
    ``threshold=True`` is the slip of keeping every token at least as probable as the last one taken,
    so all the tokens tied with it.
    """
    keys = {"probability": lambda row, v: (-row[v], v), "higher id first": lambda row, v: (-row[v], -v),
            "token id": lambda row, v: v}[order]
    rows = probs.reshape(-1, probs.shape[-1])  # (N, V)
    out = torch.zeros_like(rows)
    for r, row in enumerate(rows.tolist()):
        taken, total = [], 0.0
        for v in sorted(range(len(row)), key=lambda v: keys(row, v)):
            if total >= top_p or (not crossing and total + row[v] >= top_p):
                break
            taken.append(v)
            total += row[v]
        if threshold and taken:
            taken = [v for v in range(len(row)) if row[v] >= row[taken[-1]]]
        if not taken:
            out[r] = math.nan  # an empty nucleus (only when crossing=False) renormalised: 0/0
        mass = sum(row[v] for v in taken) if renormalise else 1.0
        for v in taken:
            out[r, v] = row[v] / mass
    return out.reshape(probs.shape)


def nucleus_distribution(log_probs: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The distribution nucleus (top-p) sampling draws from, by brute force: the reference of
    :data:`check_nucleus_distribution`.

    ``q = softmax(log_probs / T)``; take the tokens most probable first (ties: lower token id
    first) while those already taken sum to less than ``top_p``, so the token that crosses
    ``top_p`` is kept and the nucleus is never empty; return ``q`` renormalised over them, 0 elsewhere.

    Shapes
    ------
    log_probs ``(..., V)`` -> ``(..., V)``
    """
    return _nucleus(torch.softmax(log_probs / temperature, dim=-1), top_p)


def _nucleus_slip(log_probs: torch.Tensor, temperature: float, top_p: float, **slip) -> torch.Tensor:
    """:func:`nucleus_distribution` with one of the slips of :func:`_nucleus` (``order``, ``crossing``,
    ``renormalise``)."""
    return _nucleus(torch.softmax(log_probs / temperature, dim=-1), top_p, **slip)


def _nucleus_chosen_untempered(log_probs: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """A slip: the nucleus of ``softmax(log_probs)``, with the tempered probabilities renormalised on it."""
    kept = torch.softmax(log_probs / temperature, dim=-1) * (nucleus_distribution(log_probs, 1.0, top_p) > 0)
    return kept / kept.sum(-1, keepdim=True)


def _nucleus_with_untempered_values(log_probs: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """A slip: the nucleus of the tempered distribution, but ``softmax(log_probs)`` renormalised on it
    (the temperature forgotten in the final softmax)."""
    kept = torch.softmax(log_probs, dim=-1) * (nucleus_distribution(log_probs, temperature, top_p) > 0)
    return kept / kept.sum(-1, keepdim=True)


def _clear_of_boundaries(probs: torch.Tensor, top_p: float) -> bool:
    """Whether no cumulative probability (most probable first) is within ``NUCLEUS_MARGIN`` of
    ``top_p`` and untied probabilities differ by at least ``NUCLEUS_GAP`` relative."""
    ordered = probs.reshape(-1, probs.shape[-1]).sort(dim=-1, descending=True).values  # (N, V)
    gaps = ordered[:, :-1] - ordered[:, 1:]
    near_tie = (gaps > 0) & (gaps < NUCLEUS_GAP * ordered[:, :-1])
    near_boundary = (ordered.cumsum(-1) - top_p).abs() < NUCLEUS_MARGIN
    return not bool(near_tie.any() or near_boundary.any())


def _nucleus_case(generator: torch.Generator, trial: int) -> tuple:
    """One case ``(log_probs, temperature, top_p)``. Every fourth case is one row with a group of
    two or three tied tokens (scattered token ids) across which the nucleus ends, so that the tie
    rule decides; trial 1 is a case whose nucleus the temperature changes."""
    temperatures = (0.5, 0.8, 1.0, 1.5, 2.0, 3.0)
    while True:
        vocab_size = int(torch.randint(4, 10, (), generator=generator))
        tied = trial % 4 == 0
        rows = 1 if tied or trial % 2 else int(torch.randint(2, 4, (), generator=generator))
        shape = (vocab_size,) if rows == 1 else (rows, vocab_size)
        logits = 2 * torch.randn(*shape, generator=generator, dtype=torch.float64)
        temperature = temperatures[int(torch.randint(len(temperatures), (), generator=generator))]
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if tied:
            size = int(torch.randint(2, 4, (), generator=generator))
            group = torch.randperm(vocab_size, generator=generator)[:size]
            logits[group] = float(logits[group[0]])
            log_probs = torch.log_softmax(logits, dim=-1)
            probs = torch.softmax(log_probs / temperature, dim=-1)
            tie = float(probs[group[0]])
            before = float(probs[probs > tie].sum())
            taken = int(torch.randint(1, size, (), generator=generator))  # tied tokens in the nucleus
            top_p = round(before + (taken - 1 + 0.2 + 0.6 * u) * tie, 3)
        else:
            log_probs = torch.log_softmax(logits, dim=-1)
            probs = torch.softmax(log_probs / temperature, dim=-1)
            top_p = round(0.1 + 0.85 * u, 3)
        if not 0 < top_p < 1 or not _clear_of_boundaries(probs, top_p):
            continue
        if trial == 1 and torch.equal(nucleus_distribution(log_probs, temperature, top_p) > 0,
                                      nucleus_distribution(log_probs, 1.0, top_p) > 0):
            continue
        return log_probs, temperature, top_p


def nucleus_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(log_probs, temperature, top_p)`` for :data:`check_nucleus_distribution`:
    float64 log-probabilities of shape ``(V,)`` or ``(B, V)``, a temperature and a top_p in (0, 1)
    with three decimals, clear of every cumulative probability (see ``NUCLEUS_MARGIN``)."""
    return [_nucleus_case(generator, trial) for trial in range(trials)]


def _tokens(mask: torch.Tensor) -> str:
    """The token ids at which one row of ``mask`` is True: ``"token 4"`` or ``"tokens 1, 4"``."""
    ids = mask.nonzero().flatten().tolist()
    return ("token " if len(ids) == 1 else "tokens ") + ", ".join(str(v) for v in ids)


def _nucleus_rules(found: torch.Tensor, expected: torch.Tensor, log_probs, temperature, top_p,
                   returned: torch.dtype = torch.float64) -> str | None:
    """What the result gets wrong about the nucleus: tokens outside it, tokens of it left out (the
    token that crosses top_p, above all), or rows that do not sum to 1 to within what the dtype the
    result was ``returned`` in can hold (a float16 or bfloat16 result that does is told its
    precision is too low for the check's tolerance, not to renormalise)."""
    kept = (found.abs() > 1e-12).reshape(-1, found.shape[-1])  # (N, V)
    nucleus = (expected > 0).reshape(-1, expected.shape[-1])

    def where(r: int) -> str:
        return f" (row {r})" if found.dim() > 1 else ""

    for r in range(kept.shape[0]):
        extra, missing = kept[r] & ~nucleus[r], nucleus[r] & ~kept[r]
        if extra.any():
            return (f"you give probability to {_tokens(extra)}{where(r)}, outside the nucleus "
                    f"({_tokens(nucleus[r])}): keep only the most probable tokens, taken until they reach top_p")
        if missing.any():
            probs = torch.softmax(log_probs / temperature, dim=-1).reshape(-1, found.shape[-1])[r]
            # the last token taken: the nucleus's least probable, the highest id among equals
            crossing = int((nucleus[r] & (probs == probs[nucleus[r]].min())).nonzero().max())
            if missing.sum() == 1 and missing[crossing]:
                return ("you left out the token that crosses top_p: keep every token up to and including the "
                        "first at which the cumulative probability reaches top_p")
            return f"you left out {_tokens(missing)}{where(r)} of the nucleus ({_tokens(nucleus[r])})"
    sums = found.sum(-1).flatten()  # (N,)
    worst = int((sums - 1).abs().argmax())
    # each of the V probabilities is rounded to the returned dtype: the sum is 1 to about V × eps
    eps = torch.finfo(returned).eps
    if not abs(float(sums[worst]) - 1) <= max(1e-6, found.shape[-1] * eps):
        return (f"your probabilities sum to {sums[worst]:.4f}{where(worst)}, not 1: renormalise over the "
                "nucleus (divide by the nucleus's total probability)")
    if eps > torch.finfo(torch.float32).eps:
        return (f"your probabilities are {str(returned).removeprefix('torch.')}, whose precision (about {eps:.0e} "
                "relative) is too low for the check's tolerance: compute and return float32 or float64")
    return None


@dataclass(frozen=True)
class _NucleusCheck(Check):
    """A :class:`Check` that tells log-probabilities (-inf off the nucleus) from an empty nucleus
    (NaN), and whose ``rules`` know the dtype the result was returned in."""

    def _comparable(self, found: torch.Tensor, expected: torch.Tensor, case: tuple) -> tuple[torch.Tensor, dict]:
        try:
            return super()._comparable(found, expected, case)
        except CheckFailed:
            values = found.detach()
            if (values.shape == expected.shape and values.is_floating_point() and torch.isneginf(values).any()
                    and torch.isfinite(values[~torch.isneginf(values)]).all()):
                raise CheckFailed(f"your {self.noun} contain -inf for {self.describe(*case)}: return probabilities "
                                  "(0 off the nucleus), not log-probabilities") from None
            raise

    def _explain(self, found: torch.Tensor, tolerance: dict, expected: torch.Tensor, index: int,
                 cases: list[tuple], results: list) -> str:
        knowing = replace(self, rules=partial(self.rules, returned=results[index].dtype))
        return super(_NucleusCheck, knowing)._explain(found, tolerance, expected, index, cases, results)


check_nucleus_distribution = _NucleusCheck(
    "nucleus (top-p) probabilities agree with a brute-force loop on 20 fresh random cases",
    nucleus_cases, nucleus_distribution,
    describe=lambda log_probs, temperature, top_p: (f"log_probs of shape {tuple(log_probs.shape)}, temperature "
                                                    f"{temperature}, top_p {top_p:g}"),
    compared_with="the nucleus distribution (brute force)", noun="probabilities", layout="log_probs.shape",
    slips=(
        Slip(lambda *case: _nucleus_slip(*case, crossing=False),
             "you left out the token that crosses top_p: keep every token up to and including the first at which "
             "the cumulative probability reaches top_p"),
        Slip(lambda *case: _nucleus_slip(*case, renormalise=False),
             "you kept the right tokens but did not renormalise: divide their probabilities by their sum"),
        Slip(_nucleus_chosen_untempered,
             "you chose the nucleus from the untempered probabilities: apply the temperature first, then take the "
             "tokens of the tempered distribution until they reach top_p"),
        Slip(lambda log_probs, temperature, top_p: nucleus_distribution(log_probs, 1.0, top_p),
             "the temperature has no effect in your answer; the distribution is softmax(log_probs / T)"),
        Slip(lambda log_probs, temperature, top_p: nucleus_distribution(log_probs * temperature, 1.0, top_p),
             "you multiplied log_probs by the temperature; divide by it: the distribution is "
             "softmax(log_probs / T)"),
        Slip(_nucleus_with_untempered_values,
             "you kept the right tokens, but their values must come from softmax(log_probs / T): renormalise the "
             "tempered probabilities over the nucleus, not softmax(log_probs)"),
        Slip(lambda *case: _nucleus_slip(*case, order="higher id first"),
             "among equally probable tokens the lower token id comes first; yours takes the higher one first "
             "(flipping an ascending sort reverses the order of ties, or a sort that does not keep tied tokens in "
             "token-id order, such as torch.topk, reorders them: sort descending with stable=True)"),
        Slip(lambda *case: _nucleus_slip(*case, threshold=True),
             "you kept every token tied with the last one the nucleus takes (a threshold on q keeps them all); "
             "take equally probable tokens lowest id first, and stop as soon as the total reaches top_p"),
        Slip(lambda *case: _nucleus_slip(*case, order="token id"),
             "you accumulated the probabilities in token-id order; sort the tokens, most probable first, before "
             "accumulating"),
    ),
    rules=_nucleus_rules, tolerance=dict(atol=1e-8, rtol=0.0),
    nan_hint=(": an empty nucleus gives 0/0. The nucleus always keeps the token that crosses top_p, so at least "
              "the most probable token"),
)


# ---- experiment: the temperature that leaves k tokens' worth of choice --------------------
def perplexity_temperature_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh ``(log_probs, perplexity)`` for :data:`check_perplexity_temperature`: a next-token
    distribution over 5 to 30 tokens (float64 log-probabilities with a unique most likely token)
    and a target perplexity between 1.5 and half the vocabulary."""
    cases = []
    for _ in range(trials):
        logits = 2 * torch.randn(int(torch.randint(5, 31, (), generator=generator)), generator=generator,
                                 dtype=torch.float64)
        logits[logits.argmax()] += 0.1
        perplexity = float(torch.empty((), dtype=torch.float64).uniform_(1.5, len(logits) / 2, generator=generator))
        cases.append((torch.log_softmax(logits, dim=0), perplexity))
    return cases


def _perplexity(log_probs: torch.Tensor, temperature: float) -> float:
    """``exp(H)`` of the distribution sampled at ``temperature``, H in nats."""
    probs = sampling_distribution(log_probs, temperature)
    return float(torch.exp(torch.special.entr(probs).sum()))  # entr(p) = -p ln p, 0 at p = 0


@by_value()
def perplexity_temperature(log_probs: torch.Tensor, perplexity: float) -> torch.Tensor:
    """The temperature at which sampling from ``log_probs`` has perplexity ``exp(H) = perplexity``.

    The entropy grows monotonically with the temperature, from 0 (greedy, one most likely token)
    to ``ln V`` (uniform), so halving or doubling brackets the answer and bisection finds it.
    Remembered by value (:func:`courseware.checks.core.by_value`).

    Shapes
    ------
    log_probs ``(V,)`` -> a 0-dimensional tensor
    """
    temperature = solve_increasing(lambda t: _perplexity(log_probs, t), perplexity)
    return torch.tensor(temperature, dtype=torch.float64)


# The statement's tolerance, on the perplexity: |exp(H(T)) - target| <= 1e-6 * target. The slack
# of 1e-12 absorbs the rounding of the checker's own entropy, so that a search that stops exactly
# at the tolerance is not failed by the last bit of a sum.
PERPLEXITY_RTOL = 1e-6
# A temperature returned in float32 (or a lower precision, held to float32's, as every checker
# holds it) stands for every real number that rounds to it: T (1 ± 2^-24) at most, half a float32
# step. A search that stops on the perplexity in float64 and returns torch.tensor(T), float32 by
# default, is right if one of those numbers is; a float64 T is judged as the number it is.
FLOAT32_HALF_STEP = 2.0**-24
# How close a wrong answer must come to a known slip for the message to name it.
_SLIP_RTOL = 1e-3


def _perplexity_rules(found: torch.Tensor, expected: torch.Tensor, log_probs: torch.Tensor,
                      perplexity: float) -> str | None:
    """None if the perplexity at the student's temperature is within ``PERPLEXITY_RTOL`` (relative)
    of the target; else what is wrong, naming the slip that explains it when one does.

    ``found`` is in the dtype the student returned (:class:`_MeasuredAsReturned`): a T in a precision
    below float64 passes if some T' with |T'/T - 1| <= ``FLOAT32_HALF_STEP`` does. The perplexity
    grows with T, so the two ends of that interval decide."""
    temperature = float(found)
    if not temperature > 0:
        return f"a temperature must be > 0; yours is {temperature:.6g}"
    step = 0.0 if found.dtype == torch.float64 else FLOAT32_HALF_STEP
    lowest, error, highest = (_perplexity(log_probs, temperature * (1 + s)) / perplexity - 1
                              for s in (-step, 0.0, step))
    if lowest <= PERPLEXITY_RTOL + 1e-12 and highest >= -PERPLEXITY_RTOL - 1e-12:
        return None
    if abs(_perplexity(log_probs, 1 / temperature) / perplexity - 1) <= _SLIP_RTOL:
        return "that is 1/T, the factor that multiplies the log-probabilities; return T, which divides them"
    entropy = math.log(_perplexity(log_probs, temperature))  # H in nats at the student's T
    if abs(math.exp(entropy / math.log(2)) / perplexity - 1) <= _SLIP_RTOL:
        return ("your T gives exp(H) = perplexity with H in bits; perplexity is exp(H) for H in nats "
                "(or 2^H for H in bits)")
    if abs(2**entropy / perplexity - 1) <= _SLIP_RTOL:
        return ("your T gives 2^H = perplexity with H in nats; perplexity is exp(H) for H in nats "
                "(or 2^H for H in bits)")
    digits = 2  # enough digits that the error never prints as the tolerance itself
    while f"{abs(error):.{digits}g}" == f"{PERPLEXITY_RTOL:.{digits}g}" and digits < 17:
        digits += 1
    rounding = (f", nor does any T that rounds to your {str(found.dtype).removeprefix('torch.')} value"
                if step else "")
    return (f"at your T = {temperature:.6g} the perplexity is too {'high' if error > 0 else 'low'} by a "
            f"relative error of {abs(error):.{digits}g}; it must be within 1e-6 of the target{rounding} "
            "(narrow the interval until the perplexity, not T, is close enough)")


@dataclass(frozen=True)
class _MeasuredAsReturned(Measured):
    """A :class:`Measured` checker whose ``rules`` see the result in the dtype it was returned in, so that
    a float32 temperature is judged as the float32 number it is (see ``FLOAT32_HALF_STEP``)."""

    def _comparable(self, found: torch.Tensor, expected: torch.Tensor, case: tuple) -> tuple[torch.Tensor, dict]:
        converted, tolerance = super()._comparable(found, expected, case)  # shape, dtype kind, NaN
        return found.detach().reshape(converted.shape), tolerance


check_perplexity_temperature = _MeasuredAsReturned(
    "your temperatures give the perplexity asked for, to a relative error of 1e-6, on 12 fresh next-token "
    "distributions",
    perplexity_temperature_cases, perplexity_temperature,
    describe=lambda log_probs, perplexity: f"{len(log_probs)} tokens and perplexity {perplexity:.3f}",
    compared_with="the temperature found by bisection", noun="temperature", layout=" (a 0-dimensional tensor)",
    rules=_perplexity_rules,
    forbidden=("scipy",),
)


# ---- exact search with <eos> by branch and bound -------------------------------------------------
# In every case the most probable output is ahead of the second by at least this much in log-probability.
BOUND_MARGIN = 1e-3
BOUND_VOCAB = (3, 6)  # V of every case (eos = 0 included), from .. to
BOUND_SHORT = (1, 6)  # max_len of the short cases
BOUND_LONG = (25, 40)  # max_len of the long case: far too many outputs to try them all
BOUND_EOS = 0


def _search_outputs(first: torch.Tensor, transitions: torch.Tensor, max_len: int, keep: int = 1,
                    eos_ends: bool = True, cut_ends: bool = True) -> list[float]:
    """The ``keep`` largest log-probabilities of an output, best first, by dynamic programming over
    (length, last token): the model looks one token back, so the ``keep`` best prefixes that end in a
    token are all a longer output can begin with.

    An output ends with ``eos`` (``eos_ends``) or when it has ``max_len`` tokens (``cut_ends``; without
    it, an output of ``max_len`` tokens must end with ``eos``). ``eos_ends=False`` is the slip of
    searching sequences of exactly ``max_len`` tokens, eos a word like any other.
    """
    start, table = first.tolist(), transitions.tolist()
    vocab = len(start)
    # open_[v]: the keep best log-probabilities of an unfinished prefix of the current length ending in v
    open_ = [[start[v]] for v in range(vocab)]
    finished: list[float] = []
    for length in range(1, max_len + 1):
        for v in range(vocab):
            ends = (eos_ends and v == BOUND_EOS) or length == max_len
            if not ends:
                continue
            if length == max_len and not cut_ends and v != BOUND_EOS:
                continue  # a slip: an output of max_len tokens must end with eos
            finished += open_[v]
        if length == max_len:
            break
        following = [[] for _ in range(vocab)]
        for u in range(vocab):
            if eos_ends and u == BOUND_EOS:
                continue  # nothing follows eos
            for score in open_[u]:
                for v in range(vocab):
                    following[v].append(score + table[u][v])
        open_ = [sorted(scores, reverse=True)[:keep] for scores in following]
    return sorted(finished, reverse=True)[:keep]


def best_output_log_prob(first: torch.Tensor, transitions: torch.Tensor, max_len: int) -> torch.Tensor:
    """The book's answer: the log-probability of the most probable output of at most ``max_len`` tokens,
    which ends at ``eos`` (token 0) or at ``max_len`` tokens. The chapter's solution searches by branch
    and bound; this checker, by dynamic programming, which also works where the bound prunes little.

    ``tests/courseware/test_checks_decoding.py`` holds it to a search of every output.

    Shapes
    ------
    first ``(V,)``, transitions ``(V, V)`` (row: the previous token) -> ``()`` float64
    """
    return torch.tensor(_search_outputs(first, transitions, max_len)[0], dtype=torch.float64)


def _greedy_output(first: torch.Tensor, transitions: torch.Tensor, max_len: int) -> torch.Tensor:
    """A slip: the most probable token at each step, until eos or max_len tokens."""
    start, table = first.tolist(), transitions.tolist()
    row, score = start, 0.0
    for length in range(1, max_len + 1):
        token = max(range(len(row)), key=row.__getitem__)
        score += row[token]
        if token == BOUND_EOS:
            break
        row = table[token]
    return torch.tensor(score, dtype=torch.float64)


def _eos_only(first, transitions, max_len):
    """A slip: only outputs that end with eos count; those cut at max_len tokens are dropped."""
    return torch.tensor(_search_outputs(first, transitions, max_len, cut_ends=False)[0], dtype=torch.float64)


def _one_token_too_many(first, transitions, max_len):
    """A slip: max_len words and then eos, so outputs of up to max_len + 1 tokens."""
    return torch.tensor(_search_outputs(first, transitions, max_len + 1)[0], dtype=torch.float64)


def _one_token_too_few(first, transitions, max_len):
    """A slip: outputs of at most max_len - 1 tokens (eos included), cut there."""
    return torch.tensor(_search_outputs(first, transitions, max(1, max_len - 1))[0], dtype=torch.float64)


def _eos_as_a_word(first, transitions, max_len):
    """A slip: eos does not end the output; the best sequence of exactly max_len tokens."""
    return torch.tensor(_search_outputs(first, transitions, max_len, eos_ends=False)[0], dtype=torch.float64)


def _break_in_index_order(first, transitions, max_len):
    """A slip: the children tried in index order, the loop left at the first one the bound prunes, as
    if they were sorted most probable first."""
    start, table = first.tolist(), transitions.tolist()
    best = -math.inf

    def extend(row, length, log_prob):
        nonlocal best
        for token, entry in enumerate(row):
            score = log_prob + entry
            if score <= best:
                break
            if token == BOUND_EOS or length + 1 == max_len:
                best = score
            else:
                extend(table[token], length + 1, score)

    extend(start, 0, 0.0)
    return torch.tensor(best, dtype=torch.float64)


_BOUND_MISTAKES = (
    (_greedy_output, "you took the most probable token at each step (greedy search), or stopped at the first "
     "finished output; a finished output is only a bound: keep searching every prefix more probable than it"),
    (_eos_only, "you dropped the outputs that reach max_len tokens without eos; such an output ends there "
     "too, and can be the most probable"),
    (_one_token_too_many, "your outputs can have max_len + 1 tokens; an output has at most max_len tokens, "
     "eos included"),
    (_one_token_too_few, "your outputs have at most max_len - 1 tokens; an output has up to max_len tokens, "
     "eos included, and one that reaches max_len tokens without eos ends there"),
    (_eos_as_a_word, "you searched sequences of exactly max_len tokens; eos ends an output, so an output can "
     "be shorter, and nothing follows eos"),
    (_break_in_index_order, "you stopped at the first pruned child, but the children were not sorted most "
     "probable first: a later, more probable child can still beat the bound"),
)
_BOUND_SLIPS = tuple(Slip(answer, message) for answer, message in _BOUND_MISTAKES)


def _bound_case(generator: torch.Generator, max_len: int, eos_shift: tuple = (-1.5, 1.5)) -> tuple:
    """One case ``(first, transitions, max_len)``: random rows from flat to peaked, eos (token 0) made
    more or less likely by a shift of its logits drawn from ``eos_shift``, no probability 0."""
    vocab = int(torch.randint(BOUND_VOCAB[0], BOUND_VOCAB[1] + 1, (), generator=generator))
    sharpness = 0.5 + 3 * torch.rand(vocab + 1, 1, generator=generator, dtype=torch.float64)
    logits = sharpness * torch.randn(vocab + 1, vocab, generator=generator, dtype=torch.float64)
    low, high = eos_shift
    logits[:, BOUND_EOS] += low + (high - low) * float(torch.rand((), generator=generator, dtype=torch.float64))
    log_probs = torch.log_softmax(logits, dim=1)
    return log_probs[vocab], log_probs[:vocab], max_len  # first: the extra row


def _tells_bound_apart(answer, case) -> bool:
    return abs(float(answer(*case)) - float(best_output_log_prob(*case))) > BOUND_MARGIN / 2


def bound_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(first, transitions, max_len)`` for :data:`check_best_output_log_prob`.

    ``V`` from 3 to 6 with eos = 0; the second case has ``max_len`` from 25 to 40 (too many outputs to
    try) and an eos likely enough that a branch and bound prunes well, the others ``max_len`` from 1
    to 6. Every case's best output is ahead by ``BOUND_MARGIN``, and the cases
    are redrawn until each slip is wrong on at least one of them.
    """
    untold = [a for a, _ in _BOUND_MISTAKES]  # the mistakes no case drawn so far tells apart
    cases = []
    for trial in range(trials):
        for _ in range(10_000):
            low, high = BOUND_LONG if trial == 1 else BOUND_SHORT
            max_len = int(torch.randint(low, high + 1, (), generator=generator))
            case = _bound_case(generator, max_len, (0.5, 1.5) if trial == 1 else (-1.5, 1.5))
            two = _search_outputs(*case, keep=2)
            if len(two) == 2 and two[0] - two[1] < BOUND_MARGIN:
                continue
            if len(untold) <= trials - 1 - trial or any(_tells_bound_apart(a, case) for a in untold):
                break
        else:
            raise RuntimeError("could not draw a telling case")
        cases.append(case)
        untold = [a for a in untold if not _tells_bound_apart(a, case)]
    return cases


def _bound_rules(found: torch.Tensor, expected: torch.Tensor, first, transitions, max_len) -> str | None:
    if float(found) > float(expected):
        return ("your log-probability is above that of every output: check that each output starts with "
                "first[y_1] and adds transitions[y_(t-1), y_t] for each later token")
    return None


def _bound_mismatch(found: torch.Tensor, expected: torch.Tensor, first, transitions, max_len) -> str:
    yours, right = _distinct(float(found), float(expected))
    return (f"your log-probability is {yours}; the most probable output has {right}: some output more "
            "probable than yours was pruned or never reached")


check_best_output_log_prob = Check(
    "your log-probabilities are those of the most probable outputs on 20 fresh random bigram models with "
    "<eos>, one of them too long to try every output",
    bound_cases, best_output_log_prob,
    describe=lambda first, transitions, max_len: f"V = {len(first)} tokens and max_len = {max_len}",
    compared_with="the log-probability of the most probable output", noun="log-probability", layout="()",
    slips=_BOUND_SLIPS, rules=_bound_rules, mismatch=_bound_mismatch,
    tolerance=dict(atol=1e-9, rtol=1e-9),
)
