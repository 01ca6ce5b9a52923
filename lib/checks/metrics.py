"""Checkers for the exercises of chapter 8 (evaluating generated text: BLEU and ROUGE)."""
from __future__ import annotations

import math
from typing import Callable

import torch

from lib.checks.core import Check, Measured, Slip
from lib.metrics import bleu_from_counts, clipped_counts, ngram_counts, sentence_bleu

_WORDS = ("the", "cat", "sat", "on", "a", "mat")  # few words, so n-grams repeat and clipping matters


def clipped_matches_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(hypothesis, references, max_n)`` for :data:`check_clipped_matches`.

    Sentences are lists of words drawn from six words (with repeats); some
    hypotheses are shorter than ``max_n`` or empty. One case on every draw tells
    the clipping rules apart (:func:`_telling_case`).
    """
    def sentence(low, high):
        length = int(torch.randint(low, high + 1, (), generator=generator))
        return [_WORDS[int(i)] for i in torch.randint(len(_WORDS), (length,), generator=generator)]

    cases = []
    for trial in range(trials):
        if trial == 1:
            cases.append(_telling_case(generator))
            continue
        hypothesis = sentence(0 if trial == 0 else 2, 10)
        references = [sentence(3, 10) for _ in range(int(torch.randint(1, 4, (), generator=generator)))]
        cases.append((hypothesis, references, int(torch.randint(1, 5, (), generator=generator))))
    return cases


def _telling_case(generator: torch.Generator) -> tuple:
    """A case on which the maximum over references differs from their sum, from the first
    reference alone and from no clipping: a word ``w`` occurs once in each of two or three
    references and two or three times in the hypothesis, and a word ``u`` occurs in the
    hypothesis and in the last reference but not in the first. The unigram matches are then
    ``max``: 1 for ``w``, 1 for ``u``; ``sum``: 2 or 3 for ``w``; first reference only: 0 for
    ``u``; unclipped: 2 or 3 for ``w``. The other words never equal ``w`` or ``u``."""
    order = torch.randperm(len(_WORDS), generator=generator).tolist()
    w, u, others = _WORDS[order[0]], _WORDS[order[1]], [_WORDS[i] for i in order[2:]]

    def filler(low, high):
        length = int(torch.randint(low, high + 1, (), generator=generator))
        return [others[int(i)] for i in torch.randint(len(others), (length,), generator=generator)]

    def shuffled(words):
        return [words[int(i)] for i in torch.randperm(len(words), generator=generator)]

    count = int(torch.randint(2, 4, (), generator=generator))  # references, and w in the hypothesis
    references = [shuffled([w, *filler(2, 6)]) for _ in range(count - 1)]
    references.append(shuffled([w, u, *filler(1, 5)]))
    hypothesis = shuffled([w] * count + [u] + filler(1, 5))
    return hypothesis, references, int(torch.randint(1, 5, (), generator=generator))


def _per_order(count: Callable) -> Callable:
    """The answer ``count(hypothesis, references, n)`` gives for every order n = 1..max_n, as a tensor."""
    def answer(hypothesis, references, max_n):
        return torch.tensor([count(hypothesis, references, n) for n in range(1, max_n + 1)])  # (max_n,)
    return answer


def _unclipped(hypothesis, references, n):
    seen = set().union(*(ngram_counts(r, n) for r in references))
    return sum(count for gram, count in ngram_counts(hypothesis, n).items() if gram in seen)


def _clipped_by_sum(hypothesis, references, n):
    pooled = sum((ngram_counts(r, n) for r in references), start=ngram_counts([], n))
    return sum(min(count, pooled[gram]) for gram, count in ngram_counts(hypothesis, n).items())


check_clipped_matches = Check(
    "clipped n-gram matches agree with lib.metrics.clipped_counts on 20 fresh random sentences",
    clipped_matches_cases, _per_order(lambda hypothesis, references, n: clipped_counts(hypothesis, references, n)[0]),
    describe=lambda hypothesis, references, max_n: (f"hypothesis {' '.join(hypothesis)!r}, references "
                                                    f"{[' '.join(r) for r in references]}, max_n {max_n}"),
    compared_with="lib.metrics.clipped_counts", noun="counts", layout="(max_n,)",
    slips=(
        Slip(_per_order(_unclipped), "you count every hypothesis n-gram found in a reference; clip each one to its "
                                     "largest count in a single reference"),
        Slip(_per_order(_clipped_by_sum), "you clip to the count summed over the references; clip to the largest "
                                          "count in any one reference"),
        Slip(_per_order(lambda hypothesis, references, n: clipped_counts(hypothesis, references[:1], n)[0]),
             "you clip against the first reference only; take the maximum over all references"),
        Slip(_per_order(lambda hypothesis, references, n: clipped_counts(hypothesis, references, n)[1]),
             "you return the number of hypothesis n-grams; return how many of them match (after clipping)"),
    ),
    shape_hint=lambda shape, *case: ": one count per order",
    mismatch=lambda found, expected, *case: f"your counts are {found.tolist()}; expected {expected.tolist()}",
    tolerance=dict(atol=0.0, rtol=0.0),
)


def bleu_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(matches, totals, hyp_len, ref_len)`` for :data:`check_bleu`.

    Counts of a hypothesis of ``c`` words (``totals = c - n + 1``) with at least
    one match of every order, so no smoothing is needed; ``r`` is sometimes
    larger than ``c`` (brevity penalty) and sometimes smaller.
    """
    cases = []
    for _ in range(trials):
        hyp_len = int(torch.randint(5, 30, (), generator=generator))
        totals = torch.tensor([hyp_len - n for n in range(4)])
        matches = torch.stack([torch.randint(1, int(t) + 1, (), generator=generator) for t in totals])
        ref_len = max(1, hyp_len + int(torch.randint(-4, 8, (), generator=generator)))
        cases.append((matches, totals, torch.tensor(hyp_len), torch.tensor(ref_len)))
    return cases


def _bleu_slip(formula: Callable) -> Callable:
    """A wrong BLEU: ``formula(precisions, c, r, brevity_penalty, geometric_mean)`` of the case's counts."""
    def answer(matches, totals, hyp_len, ref_len):
        precisions = (matches / totals).tolist()
        c, r = int(hyp_len), int(ref_len)
        geometric = math.exp(sum(math.log(p) for p in precisions) / len(precisions))
        return torch.tensor(formula(precisions, c, r, 1.0 if c >= r else math.exp(1 - r / c), geometric),
                            dtype=torch.float64)
    return answer


check_bleu = Check(
    "BLEU from counts agrees with lib.metrics.bleu_from_counts on 20 fresh random cases",
    bleu_cases,
    lambda matches, totals, hyp_len, ref_len: torch.tensor(
        bleu_from_counts(matches.tolist(), totals.tolist(), int(hyp_len), int(ref_len)).score, dtype=torch.float64),
    describe=lambda matches, totals, hyp_len, ref_len: (f"matches {matches.tolist()}, totals {totals.tolist()}, "
                                                        f"c = {int(hyp_len)}, r = {int(ref_len)}"),
    compared_with="lib.metrics.bleu_from_counts", noun="BLEU",
    # With c >= r several slips give the right number: a slip must reproduce every case to be named.
    slips=(
        Slip(_bleu_slip(lambda p, c, r, bp, g: math.exp(sum(p) / len(p))),
             "that is note 004's exp((1/N) Σ p_n), which is at least 1; BLEU is BP · exp(Σ w_n log p_n)"),
        Slip(_bleu_slip(lambda p, c, r, bp, g: bp * math.exp(sum(p) / len(p))),
             "you average the precisions, not their logarithms: use exp(Σ w_n log p_n)"),
        Slip(_bleu_slip(lambda p, c, r, bp, g: g), "you left out the brevity penalty BP"),
        Slip(_bleu_slip(lambda p, c, r, bp, g: math.exp(1 - r / c) * g),
             "BP is 1 when c >= r; exp(1 - r/c) only when c < r"),
        Slip(_bleu_slip(lambda p, c, r, bp, g: (1.0 if c >= r else math.exp(1 - c / r)) * g),
             "the brevity penalty is exp(1 - r/c), not exp(1 - c/r)"),
        Slip(_bleu_slip(lambda p, c, r, bp, g: bp * sum(p) / len(p)),
             "BLEU is a geometric mean of the precisions, not an arithmetic one"),
    ),
    tolerance=dict(atol=1e-9, rtol=1e-6),
)


# ---- experiment: a negated sentence that BLEU still likes --------------------------------
def negation_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh ``(reference, not_token)`` for :data:`check_negation_bleu`: a reference of 6 to 15
    token ids drawn from 1..20 (repeats included) and the id 0 of the word "not"."""
    return [(torch.randint(1, 21, (int(torch.randint(6, 16, (), generator=generator)),), generator=generator), 0)
            for _ in range(trials)]


def _bleu_of_ids(candidate: torch.Tensor, reference: torch.Tensor) -> float:
    """Sentence BLEU-4 (no smoothing) of two sequences of token ids."""
    return sentence_bleu([str(t) for t in candidate.tolist()], [[str(t) for t in reference.tolist()]]).score


def _inserted(reference: torch.Tensor, token: int, position: int) -> torch.Tensor:
    """``reference`` with ``token`` inserted before index ``position``."""
    return torch.cat([reference[:position], torch.tensor([token]), reference[position:]])


def negated_candidate(reference: torch.Tensor, not_token: int) -> torch.Tensor:
    """The book's answer: "not" in front of the reference, which breaks no n-gram of the reference.

    Shapes
    ------
    reference ``(L,)`` -> ``(L + 1,)``
    """
    return _inserted(reference, not_token, 0)


def _negation_rules(found: torch.Tensor, expected: torch.Tensor, reference: torch.Tensor, not_token: int) -> str | None:
    """Not the reference with one "not" inserted, or a position that BLEU likes less than the best."""
    positions = [p for p in range(len(reference) + 1) if torch.equal(_inserted(reference, not_token, p), found)]
    if not positions:
        return "your candidate must be the reference with the not_token inserted once, every other token kept in order"
    best = max(range(len(reference) + 1), key=lambda p: _bleu_of_ids(_inserted(reference, not_token, p), reference))
    best_score = _bleu_of_ids(_inserted(reference, not_token, best), reference)
    score = _bleu_of_ids(found, reference)
    if score < best_score - 1e-12:
        return (f"your candidate, with not before index {positions[0]}, has BLEU {score:.4f}; before index {best} it "
                f"has {best_score:.4f}. An insertion breaks every n-gram that spans it")
    return None


check_negation_bleu = Measured(
    "on 10 fresh references, your negated candidates get the highest BLEU-4 an inserted not allows",
    negation_cases, negated_candidate,
    describe=lambda reference, not_token: f"a reference of {len(reference)} tokens",
    compared_with="not in front", noun="candidate", layout="(L + 1,)",
    shape_hint=lambda shape, reference, not_token: (
        ": insert not_token, keeping every token of the reference; do not replace one"
        if shape == tuple(reference.shape) else
        ": the reference with not_token inserted once, one token longer" if len(shape) == 1 else ""),
    rules=_negation_rules,
)
