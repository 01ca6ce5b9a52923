"""Checkers for the exercises of chapter 8 (evaluating generated text: BLEU and ROUGE)."""
from __future__ import annotations

import math

import torch

from lib.checks.core import Check, CheckFailed, _require_tensor
from lib.metrics import bleu_from_counts, clipped_counts, ngram_counts

_WORDS = ("the", "cat", "sat", "on", "a", "mat")  # few words, so n-grams repeat and clipping matters


def clipped_matches_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(hypothesis, references, max_n)`` for :data:`check_clipped_matches`.

    Sentences are lists of words drawn from six words (with repeats); some
    hypotheses are shorter than ``max_n`` or empty.
    """
    def sentence(low, high):
        length = int(torch.randint(low, high + 1, (), generator=generator))
        return [_WORDS[int(i)] for i in torch.randint(len(_WORDS), (length,), generator=generator)]

    cases = []
    for trial in range(trials):
        hypothesis = sentence(0 if trial == 0 else 2, 10)
        references = [sentence(3, 10) for _ in range(int(torch.randint(1, 4, (), generator=generator)))]
        cases.append((hypothesis, references, int(torch.randint(1, 5, (), generator=generator))))
    return cases


def _unclipped(hypothesis, references, n):
    seen = set().union(*(ngram_counts(r, n) for r in references))
    return sum(count for gram, count in ngram_counts(hypothesis, n).items() if gram in seen)


def _clipped_by_sum(hypothesis, references, n):
    pooled = sum((ngram_counts(r, n) for r in references), start=ngram_counts([], n))
    return sum(min(count, pooled[gram]) for gram, count in ngram_counts(hypothesis, n).items())


def judge_clipped_matches(cases: list[tuple], results: list) -> None:
    """Compare the student's counts with :func:`lib.metrics.clipped_counts`.

    A wrong answer is explained by the first known mistake that reproduces it on
    *every* case (one case alone can fit several mistakes).
    """
    answers, failing = [], None
    for (hypothesis, references, max_n), found in zip(cases, results, strict=True):
        setting = f"hypothesis {' '.join(hypothesis)!r}, references {[' '.join(r) for r in references]}, max_n {max_n}"
        found = _require_tensor(found, setting)
        expected = [clipped_counts(hypothesis, references, n)[0] for n in range(1, max_n + 1)]
        if found.shape != (max_n,):
            raise CheckFailed(
                f"for {setting} your counts have shape {tuple(found.shape)}; expected ({max_n},): one count per order"
            )
        if found.is_floating_point() and not torch.equal(found, found.round()):
            raise CheckFailed(f"for {setting} your counts {found.tolist()} are not whole numbers")
        answers.append(found.round().long().tolist())
        if failing is None and answers[-1] != expected:
            failing = (setting, answers[-1], expected)
    if failing is None:
        return
    diagnoses = (
        (_unclipped, "you count every hypothesis n-gram found in a reference; clip each one to its largest "
                     "count in a single reference"),
        (_clipped_by_sum, "you clip to the count summed over the references; clip to the largest count in "
                          "any one reference"),
        (lambda h, refs, n: clipped_counts(h, refs[:1], n)[0],
         "you clip against the first reference only; take the maximum over all references"),
        (lambda h, refs, n: clipped_counts(h, refs, n)[1],
         "you return the number of hypothesis n-grams; return how many of them match (after clipping)"),
    )
    setting, found, expected = failing
    for mistake, message in diagnoses:
        if all(answer == [mistake(h, refs, n) for n in range(1, max_n + 1)]
               for answer, (h, refs, max_n) in zip(answers, cases)):
            raise CheckFailed(f"for {setting}: {message}")
    raise CheckFailed(f"for {setting} your counts are {found}; expected {expected}")


check_clipped_matches = Check(
    "clipped n-gram matches agree with lib.metrics.clipped_counts on 20 fresh random sentences",
    clipped_matches_cases, judge_clipped_matches,
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


def judge_bleu(cases: list[tuple], results: list) -> None:
    """Compare the student's BLEU with :func:`lib.metrics.bleu_from_counts`.

    A wrong answer is explained by the first known mistake that reproduces it on
    *every* case (with ``c >= r`` several mistakes give the same number).
    """
    answers, failing = [], None
    for (matches, totals, hyp_len, ref_len), found in zip(cases, results, strict=True):
        setting = f"matches {matches.tolist()}, totals {totals.tolist()}, c = {int(hyp_len)}, r = {int(ref_len)}"
        found = _require_tensor(found, setting)
        if found.numel() != 1:
            raise CheckFailed(f"for {setting} your result has shape {tuple(found.shape)}; return one number")
        answers.append(float(found))
        expected = bleu_from_counts(matches.tolist(), totals.tolist(), int(hyp_len), int(ref_len)).score
        if failing is None and not math.isclose(answers[-1], expected, rel_tol=1e-6, abs_tol=1e-9):
            failing = (setting, answers[-1], expected)
    if failing is None:
        return

    def pieces(case):
        matches, totals, c, r = case
        precisions = (matches / totals).tolist()
        c, r = int(c), int(r)
        geometric = math.exp(sum(math.log(p) for p in precisions) / len(precisions))
        return precisions, c, r, (1.0 if c >= r else math.exp(1 - r / c)), geometric

    diagnoses = (
        (lambda p, c, r, bp, g: math.exp(sum(p) / len(p)),
         "that is note 004's exp((1/N) Σ p_n), which is at least 1; BLEU is BP · exp(Σ w_n log p_n)"),
        (lambda p, c, r, bp, g: bp * math.exp(sum(p) / len(p)),
         "you average the precisions, not their logarithms: use exp(Σ w_n log p_n)"),
        (lambda p, c, r, bp, g: g, "you left out the brevity penalty BP"),
        (lambda p, c, r, bp, g: math.exp(1 - r / c) * g, "BP is 1 when c >= r; exp(1 - r/c) only when c < r"),
        (lambda p, c, r, bp, g: (1.0 if c >= r else math.exp(1 - c / r)) * g,
         "the brevity penalty is exp(1 - r/c), not exp(1 - c/r)"),
        (lambda p, c, r, bp, g: bp * sum(p) / len(p),
         "BLEU is a geometric mean of the precisions, not an arithmetic one"),
    )
    setting, found, expected = failing
    for mistake, message in diagnoses:
        if all(math.isclose(answer, mistake(*pieces(case)), rel_tol=1e-6, abs_tol=1e-9)
               for answer, case in zip(answers, cases)):
            raise CheckFailed(f"for {setting}: {message}")
    raise CheckFailed(f"for {setting} your BLEU is {found:.6f}; expected {expected:.6f}")


check_bleu = Check(
    "BLEU from counts agrees with lib.metrics.bleu_from_counts on 20 fresh random cases",
    bleu_cases, judge_bleu,
)
