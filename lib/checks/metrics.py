"""Checkers for the exercises of chapter 8 (evaluating generated text: BLEU and ROUGE)."""
from __future__ import annotations

import math
from typing import Callable

import torch

from lib.checks.core import Check, Measured, Slip, _distinct
from lib.metrics import bleu_from_counts, ngram_counts, rouge_n, rouge_n_scores, sentence_bleu

_WORDS = ("the", "cat", "sat", "on", "a", "mat")  # few words, so n-grams repeat and clipping matters


# ---- ROUGE-N against several references, as rouge_score's score_multi reports it -------------
def _pairwise(hypothesis, references, n) -> list[tuple[float, float, float]]:
    """ROUGE-N ``(precision, recall, F)`` of the hypothesis against each reference alone."""
    return [(s.precision, s.recall, s.fmeasure) for s in (rouge_n_scores(hypothesis, r, n) for r in references)]


def rouge_multi(hypothesis, references, n) -> torch.Tensor:
    """The book's answer: the pairwise ROUGE-N of the reference with the largest F, the first when the
    Fs are equal as floats (``rouge_score``'s ``score_multi``, whose ``np.argmax`` takes the first
    maximum of Fs computed as 2PR/(P + R), so an exact tie can go either way by rounding; the cases
    of :func:`rouge_multi_cases` have none).

    Shapes
    ------
    ``(3,)``: precision, recall, F; float64.
    """
    return torch.tensor(max(_pairwise(hypothesis, references, n), key=lambda scores: scores[2]),
                        dtype=torch.float64)


def _harmonic(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _best_recall(hypothesis, references, n):
    return torch.tensor(max(_pairwise(hypothesis, references, n), key=lambda scores: scores[1]), dtype=torch.float64)


def _most_matched(hypothesis, references, n):
    """The reference with the largest precision (the most matched n-grams), the first on a tie."""
    return torch.tensor(max(_pairwise(hypothesis, references, n), key=lambda scores: scores[0]), dtype=torch.float64)


def _largest_tuple(hypothesis, references, n):
    """Python's ``max`` over the ``(P, R, F)`` tuples without a key: the largest precision, a tie
    going to the larger recall."""
    return torch.tensor(max(_pairwise(hypothesis, references, n)), dtype=torch.float64)


def _largest_of_each(hypothesis, references, n):
    return torch.tensor(_pairwise(hypothesis, references, n), dtype=torch.float64).max(dim=0).values


def _mean_over_references(hypothesis, references, n):
    return torch.tensor(_pairwise(hypothesis, references, n), dtype=torch.float64).mean(dim=0)


def _swapped(hypothesis, references, n):
    precision, recall, f = rouge_multi(hypothesis, references, n).tolist()
    return torch.tensor([recall, precision, f], dtype=torch.float64)


def _arithmetic_f(hypothesis, references, n):
    scores = [(p, r, (p + r) / 2) for p, r, _ in _pairwise(hypothesis, references, n)]
    return torch.tensor(max(scores, key=lambda s: s[2]), dtype=torch.float64)


def _unclipped_pairwise(hypothesis, references, n):
    """Every hypothesis n-gram that occurs in the reference counts as often as the hypothesis has it."""
    counts = ngram_counts(hypothesis, n)
    scores = []
    for reference in references:
        found = ngram_counts(reference, n)
        overlap = sum(count for gram, count in counts.items() if gram in found)
        precision, recall = overlap / max(sum(counts.values()), 1), overlap / max(sum(found.values()), 1)
        scores.append((precision, recall, _harmonic(precision, recall)))
    return torch.tensor(max(scores, key=lambda s: s[2]), dtype=torch.float64)


def _pooled_recalls(hypothesis, references, n) -> tuple[float, float]:
    """Recall pooled over the references two ways: Lin's equation 1 (``rouge_n``: clipped per
    reference, summed), and against the references merged into one (counts added up)."""
    merged = sum((ngram_counts(reference, n) for reference in references), start=ngram_counts([], n))
    overlap = sum(min(count, merged[gram]) for gram, count in ngram_counts(hypothesis, n).items())
    return rouge_n(hypothesis, references, n), overlap / max(sum(merged.values()), 1)


def _pooled_by_equation_1(hypothesis, references, n):
    """Equation 1 for both scores: the overlaps summed over the references, divided by the references'
    n-grams (recall) and by the hypothesis's, counted once per reference (precision)."""
    counts = ngram_counts(hypothesis, n)
    overlap = sum(sum((counts & ngram_counts(reference, n)).values()) for reference in references)
    precision = overlap / max(len(references) * sum(counts.values()), 1)
    recall = rouge_n(hypothesis, references, n)
    return torch.tensor([precision, recall, _harmonic(precision, recall)], dtype=torch.float64)


def _pooled_as_one_reference(hypothesis, references, n):
    """The references' counts added up, as if they were one reference."""
    counts = ngram_counts(hypothesis, n)
    merged = sum((ngram_counts(reference, n) for reference in references), start=ngram_counts([], n))
    overlap = sum((counts & merged).values())
    precision, recall = overlap / max(sum(counts.values()), 1), overlap / max(sum(merged.values()), 1)
    return torch.tensor([precision, recall, _harmonic(precision, recall)], dtype=torch.float64)


_POOLED = ("your recall pools the references ({}); score each reference alone and keep the one with the "
           "largest F, as rouge_score's score_multi does")
_MOST_MATCHED = ("you keep the reference with the most matched n-grams (largest precision); keep the one with "
                 "the largest F")
_ROUGE_SLIPS = (
    Slip(_most_matched, _MOST_MATCHED),
    Slip(_largest_tuple, _MOST_MATCHED),
    Slip(_best_recall, "you keep the reference with the largest recall (Lin's section 2.1); rouge_score's "
                       "score_multi keeps the one with the largest F"),
    Slip(_largest_of_each, "you take the largest precision, recall and F separately, which may come from different "
                           "references; return all three scores of the one reference with the largest F"),
    Slip(_mean_over_references, "you average the scores over the references; keep the reference with the largest F"),
    Slip(_swapped, "your precision and recall are swapped: precision divides the overlap by the hypothesis's "
                   "n-grams, recall by the reference's"),
    Slip(_arithmetic_f, "F is the harmonic mean 2PR/(P + R) of precision and recall, not the arithmetic mean"),
    Slip(_unclipped_pairwise, "you count every hypothesis n-gram found in the reference as often as the hypothesis "
                              "has it; clip each to min(c_w(hyp), c_w(ref))"),
    Slip(_pooled_by_equation_1, _POOLED.format("Lin's equation 1, the chapter's rouge_n")),
    Slip(_pooled_as_one_reference, _POOLED.format("as if they were one reference")),
    Slip(lambda hypothesis, references, n: rouge_multi(hypothesis, references[:1], n),
         "you score against the first reference only; score each reference and keep the one with the largest F"),
)


def _rouge_multi_rules(found: torch.Tensor, expected: torch.Tensor, hypothesis, references, n) -> str | None:
    """Recall pooled over the references (the chapter's rouge_n), or an F that is not the harmonic mean."""
    precision, recall, f = found.tolist()
    right = expected[1].item()
    ways = ("Lin's equation 1, the chapter's rouge_n", "as if they were one reference")
    pooled = [how for how, value in zip(ways, _pooled_recalls(hypothesis, references, n))
              if abs(recall - value) < 1e-9 < abs(right - value)]
    if pooled:
        return _POOLED.format(pooled[0] if len(pooled) == 1 else f"{ways[0]}, which here equals counting them "
                                                                  f"{ways[1]}")
    if abs(f - _harmonic(precision, recall)) > 1e-6:
        return "your F is not the harmonic mean 2PR/(P + R) of your precision and recall"
    return None


def _tells_apart(answer, case) -> bool:
    return not torch.allclose(torch.as_tensor(answer(*case), dtype=torch.float64), rouge_multi(*case), atol=1e-6)


def _fair(case) -> bool:
    """No two references tie on F with different scores (rounding would then decide which one a right
    answer keeps), and with several references and a hypothesis of at least ``n`` words, neither
    pooled recall is the right recall."""
    hypothesis, references, n = case
    scores = _pairwise(hypothesis, references, n)
    best = max(s[2] for s in scores)
    tied = {(round(s[0], 9), round(s[1], 9)) for s in scores if abs(s[2] - best) < 1e-9}
    recall = rouge_multi(*case)[1].item()
    pooled = (len(references) > 1 and len(hypothesis) >= n
              and any(abs(r - recall) < 1e-9 for r in _pooled_recalls(*case)))
    return len(tied) == 1 and not pooled


def rouge_multi_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(hypothesis, references, n)`` for :data:`check_rouge_multi`.

    Sentences are lists of words drawn from six lowercase words (with repeats), so
    ``rouge_score``'s tokeniser leaves them as they are; ``n`` is 1, 2 or 3. The first case
    has one reference, the second a hypothesis shorter than ``n``; the others two to four
    references. No case has two references tied on F with different scores
    and none where a recall pooled over the references is the right recall (:func:`_fair`);
    the cases are redrawn until each known slip is wrong on at least one of them.
    """
    def sentence(low, high):
        length = int(torch.randint(low, high + 1, (), generator=generator))
        return [_WORDS[int(i)] for i in torch.randint(len(_WORDS), (length,), generator=generator)]

    def draw(trial):
        n = int(torch.randint(1, 4, (), generator=generator))
        hypothesis = sentence(0, n - 1) if trial == 1 else sentence(2, 10)
        count = 1 if trial == 0 else int(torch.randint(2, 5, (), generator=generator))
        return hypothesis, [sentence(2, 10) for _ in range(count)], n

    telling = [slip.answer for slip in _ROUGE_SLIPS]
    cases = []
    for trial in range(trials):
        untold = [a for a in telling if not any(_tells_apart(a, c) for c in cases)]
        for _ in range(10_000):
            case = draw(trial)
            # the last cases must tell apart what the earlier ones have not
            if _fair(case) and (len(untold) <= trials - 1 - trial or any(_tells_apart(a, case) for a in untold)):
                break
        else:
            raise RuntimeError("could not draw a telling case")
        cases.append(case)
    return cases


def _join(words) -> str:
    return " ".join(words)


def _rouge_mismatch(found: torch.Tensor, expected: torch.Tensor, *case) -> str:
    """Which of precision, recall and F are wrong, with both values; when two of those numbers would
    print the same, only the first wrong one, with enough digits to tell its two values apart."""
    wrong = ([i for i in range(3) if not torch.isclose(found[i], expected[i], atol=1e-6, rtol=1e-5)]
             or [i for i in range(3) if found[i] != expected[i]])
    names = ("precision", "recall", "F")
    values = [f"{found[i].item():.6g}" for i in wrong] + [f"{expected[i].item():.6g}" for i in wrong]
    if len(set(values)) < len(values):
        first = wrong[0]
        yours, theirs = _distinct(found[first].item(), expected[first].item())
        return f"your {names[first]} is {yours}; rouge_score's score_multi gives {theirs}"
    listed = names[wrong[0]] if len(wrong) == 1 else f"{', '.join(names[i] for i in wrong[:-1])} and {names[wrong[-1]]}"
    half = len(wrong)
    return (f"your {listed} {'is' if half == 1 else 'are'} {', '.join(values[:half])}; rouge_score's score_multi "
            f"gives {', '.join(values[half:])}")


check_rouge_multi = Check(
    "ROUGE-N against several references agrees with rouge_score's score_multi on 20 fresh random cases",
    rouge_multi_cases, rouge_multi,
    describe=lambda hypothesis, references, n: (f"hypothesis {_join(hypothesis)!r}, references "
                                                f"{[_join(r) for r in references]}, n {n}"),
    compared_with="rouge_score's score_multi", noun="scores", layout="(3,)",
    slips=_ROUGE_SLIPS, rules=_rouge_multi_rules, mismatch=_rouge_mismatch,
    shape_hint=lambda shape, *case: ": precision, recall and F of the reference with the largest F",
    tolerance=dict(atol=1e-9, rtol=1e-7),
    forbidden=("rouge_score",),
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
