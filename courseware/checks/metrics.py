"""Checkers for the exercises of chapter 8 (evaluating generated text: BLEU, ROUGE and chrF)."""
from __future__ import annotations

from collections import Counter

import torch

from courseware.checks.core import Check, Measured, Slip, _distinct
from lib.part3_words.metrics import ngram_counts, rouge_n, rouge_n_scores, sentence_bleu

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

    untold = [slip.answer for slip in _ROUGE_SLIPS]  # the slips no case drawn so far tells apart
    cases = []
    for trial in range(trials):
        for _ in range(10_000):
            case = draw(trial)
            # the last cases must tell apart what the earlier ones have not
            if _fair(case) and (len(untold) <= trials - 1 - trial or any(_tells_apart(a, case) for a in untold)):
                break
        else:
            raise RuntimeError("could not draw a telling case")
        cases.append(case)
        untold = [a for a in untold if not _tells_apart(a, case)]
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


# ---- chrF, the character n-gram F-score, as sacreBLEU's CHRF() computes it --------------------
CHRF_ORDER = 6  # character n-grams of orders 1 to 6
CHRF_BETA = 2  # chrF2: recall weighs more than precision
# Words that share many characters, so that near misses ("cats" for "cat") earn partial credit.
_CHRF_WORDS = ("the", "a", "cat", "cats", "sat", "sits", "sitting", "on", "mat", "mats", "hat", "dog", "dogs")


def _char_ngrams(text: str, n: int, spaces: bool = False, within_words: bool = False) -> Counter:
    """The character n-grams of ``text`` with its spaces deleted, so that they run across word
    boundaries. Slips: ``spaces=True`` keeps the spaces as characters; ``within_words=True`` takes the
    n-grams of each word alone."""
    if within_words:
        return sum((_char_ngrams(word, n) for word in text.split()), start=Counter())
    text = text if spaces else "".join(text.split())
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def _chrf_counts(hypothesis: str, reference: str, orders: int = CHRF_ORDER, clip: bool = True,
                 **ngrams) -> list[tuple[int, int, int]]:
    """Per order n = 1 .. ``orders``: (the hypothesis's n-grams, the reference's, the matches
    Σ_g min(c_g(hyp), c_g(ref))). ``clip=False`` is the slip of counting every hypothesis n-gram found
    in the reference as often as the hypothesis has it."""
    counts = []
    for n in range(1, orders + 1):
        hyp, ref = _char_ngrams(hypothesis, n, **ngrams), _char_ngrams(reference, n, **ngrams)
        matches = sum((hyp & ref).values()) if clip else sum(c for g, c in hyp.items() if g in ref)
        counts.append((sum(hyp.values()), sum(ref.values()), matches))
    return counts


def _f_beta(precision: float, recall: float, beta: float) -> float:
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall) if precision + recall > 0 else 0.0


def _chrf_of_counts(counts: list[tuple[int, int, int]], beta: float = CHRF_BETA, combine: str = "means",
                    every_order: bool = False, matched_only: bool = False) -> float:
    """chrF from the pooled counts of each order, on sacreBLEU's scale 0-100: the precisions
    ``matches / hyp`` and recalls ``matches / ref`` of the orders with n-grams on both sides, their
    means, and F_β of the means. Slips: ``combine="F of each order"`` (the mean of each order's F_β,
    over those orders) or ``"F of each order, all orders"`` (over every order, 0 for an order without
    n-grams); ``every_order=True``: the means over every order, an order without n-grams counting 0;
    ``matched_only=True``: the means over the orders with at least one match only."""
    kept = [(m / h, m / r) for h, r, m in counts if h > 0 and r > 0 and (m > 0 or not matched_only)]
    if every_order:
        kept += [(0.0, 0.0)] * (len(counts) - len(kept))
    if not kept:
        return 0.0
    if combine == "means":
        precision, recall = (sum(values) / len(kept) for values in zip(*kept))
        return 100 * _f_beta(precision, recall, beta)
    scores = [_f_beta(p, r, beta) for p, r in kept]
    divide = len(counts) if combine == "F of each order, all orders" else len(kept)
    return 100 * sum(scores) / divide


def _chrf(hypotheses, references, pooled: bool = True, scale: float = 1.0, beta: float = CHRF_BETA,
          combine: str = "means", every_order: bool = False, matched_only: bool = False,
          **options) -> torch.Tensor:
    """chrF of a corpus, or one of its slips: ``pooled=False`` averages the sentences' chrF;
    ``scale=0.01`` gives it in [0, 1]; ``beta``, ``combine``, ``every_order`` and ``matched_only`` go
    to :func:`_chrf_of_counts`, the other ``options`` to :func:`_chrf_counts`."""
    counts = [_chrf_counts(h, r, **options) for h, r in zip(hypotheses, references)]
    if pooled:
        totals = [tuple(map(sum, zip(*order))) for order in zip(*counts)]
        score = _chrf_of_counts(totals, beta, combine, every_order, matched_only)
    else:
        score = sum(_chrf_of_counts(c, beta, combine, every_order, matched_only) for c in counts) / len(counts)
    return torch.tensor(scale * score, dtype=torch.float64)


def corpus_chrf(hypotheses: list[str], references: list[str]) -> torch.Tensor:
    """The book's answer: chrF2 of a corpus, one reference per hypothesis, as sacreBLEU's
    ``CHRF().corpus_score`` computes it by default (``tests/courseware/test_checks_metrics.py`` holds it to
    sacreBLEU on many corpora).

    Each sentence's spaces are deleted; for each order n = 1 .. 6 the counts of the hypothesis's
    character n-grams, the reference's and their clipped matches are added up over the corpus; the
    orders with n-grams on both sides give P_n and R_n; chrF = 100 F_β(mean P_n, mean R_n), β = 2.
    (sacreBLEU leaves out a sentence's hypothesis n-grams of an order its reference lacks; every
    reference of the cases has at least 6 letters, so that never happens.)

    Shapes
    ------
    a 0-dimensional float64 tensor, in [0, 100]
    """
    return _chrf(hypotheses, references)


_CHRF_SLIPS = (
    Slip(lambda h, r: _chrf(h, r, pooled=False),
         "you averaged the sentences' chrF; add up each order's counts over all the sentences first, then compute "
         "one chrF from the totals (as corpus BLEU pools its counts)"),
    Slip(lambda h, r: _chrf(h, r, beta=1), "that is chrF1 (β = 1); chrF2 has β = 2: 5 chrP chrR / (4 chrP + chrR)"),
    Slip(lambda h, r: _chrf(h, r, beta=2**0.5),
         "you used β, not β², in the F-score: chrF2 is (1 + β²) chrP chrR / (β² chrP + chrR) with β = 2, "
         "5 chrP chrR / (4 chrP + chrR)"),
    Slip(lambda h, r: _chrf(h, r, beta=0.5),
         "your F weighs precision more than recall (chrP and chrR swapped, or β = 1/2): chrF2 is "
         "5 chrP chrR / (4 chrP + chrR)"),
    Slip(lambda h, r: _chrf(h, r, spaces=True),
         "you counted the spaces as characters; delete them before taking the n-grams"),
    Slip(lambda h, r: _chrf(h, r, within_words=True),
         "your n-grams stop at the spaces; delete the spaces first, so that n-grams run across word boundaries "
         "(\"a cat\" has the bigram \"ac\")"),
    Slip(lambda h, r: _chrf(h, r, combine="F of each order"),
         "you averaged the F of each order; average the precisions and the recalls over the orders, then take "
         "one F of the two means"),
    Slip(lambda h, r: _chrf(h, r, combine="F of each order, all orders"),
         "you averaged the F of each order; average the precisions and the recalls over the orders, then take "
         "one F of the two means"),
    Slip(lambda h, r: _chrf(h, r, every_order=True),
         "you averaged over all six orders; leave out an order in which the hypotheses have no n-gram at all"),
    Slip(lambda h, r: _chrf(h, r, matched_only=True),
         "you left out the orders without a match; leave out only an order in which the hypotheses or the "
         "references have no n-gram at all: an order with n-grams but no match counts, with P_n = R_n = 0"),
    Slip(lambda h, r: _chrf(h, r, orders=4),
         "you stopped at 4-grams, as BLEU does; chrF takes character n-grams of orders 1 to 6"),
    Slip(lambda h, r: _chrf(h, r, clip=False),
         "you counted every hypothesis n-gram found in the reference as often as the hypothesis has it; clip "
         "each to min(c(hyp), c(ref))"),
    Slip(lambda h, r: _chrf(h, r, scale=0.01),
         "that is chrF in [0, 1]; return it on sacreBLEU's scale, 0 to 100"),
)


def _tells_chrf_apart(answer, case) -> bool:
    return not torch.allclose(answer(*case), corpus_chrf(*case), atol=1e-6, rtol=0)


def _chrf_sentence(generator: torch.Generator, low: int, high: int) -> str:
    length = int(torch.randint(low, high + 1, (), generator=generator))
    return " ".join(_CHRF_WORDS[int(i)] for i in torch.randint(len(_CHRF_WORDS), (length,), generator=generator))


def _chrf_hypothesis(generator: torch.Generator, reference: str) -> str:
    """A hypothesis near ``reference``: one or two of its words replaced, dropped or inserted (the
    replacements drawn from words that share characters), or else an unrelated sentence."""
    words = reference.split()
    if float(torch.rand((), generator=generator)) < 0.2:
        return _chrf_sentence(generator, 1, 6)
    for _ in range(int(torch.randint(1, 3, (), generator=generator))):
        edit = int(torch.randint(3, (), generator=generator))
        at = int(torch.randint(len(words) + (edit == 2), (), generator=generator)) if words or edit == 2 else 0
        word = _CHRF_WORDS[int(torch.randint(len(_CHRF_WORDS), (), generator=generator))]
        if edit == 0 and words:
            words[at] = word
        elif edit == 1 and words:
            del words[at]
        else:
            words.insert(at, word)
    return " ".join(words)


def _chrf_case(generator: torch.Generator, trial: int) -> tuple[list[str], list[str]]:
    """``(hypotheses, references)``. References have 2 to 6 words and at least 6 letters. Trial 0 is one
    sentence; in trial 1 every hypothesis has fewer than 6 letters (fewer orders than 6 have n-grams);
    trial 2 holds an empty hypothesis; the others have 1 to 4 sentences."""
    size = 1 if trial == 0 else int(torch.randint(2, 5, (), generator=generator))
    references = []
    while len(references) < size:
        reference = _chrf_sentence(generator, 2, 6)
        if len(reference.replace(" ", "")) >= CHRF_ORDER:
            references.append(reference)
    if trial == 1:
        short = [w for w in _CHRF_WORDS if len(w) <= 3]
        hypotheses = [" ".join(short[int(i)] for i in torch.randint(len(short), (int(torch.randint(1, 3, (),
                      generator=generator)),), generator=generator)) for _ in references]
        hypotheses = [h if len(h.replace(" ", "")) < CHRF_ORDER else h.split()[0] for h in hypotheses]
    else:
        hypotheses = [_chrf_hypothesis(generator, reference) for reference in references]
    if trial == 2:
        hypotheses[int(torch.randint(size, (), generator=generator))] = ""
    return hypotheses, references


def chrf_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(hypotheses, references)`` for :data:`check_chrf`: corpora of lowercase words
    separated by single spaces (see :func:`_chrf_case`), redrawn until each known slip is wrong on at
    least one of them."""
    untold = [slip.answer for slip in _CHRF_SLIPS]  # the slips no case drawn so far tells apart
    cases = []
    for trial in range(trials):
        for _ in range(10_000):
            case = _chrf_case(generator, trial)
            # the last cases must tell apart what the earlier ones have not
            if len(untold) <= trials - 1 - trial or any(_tells_chrf_apart(a, case) for a in untold):
                break
        else:
            raise RuntimeError("could not draw a telling case")
        cases.append(case)
        untold = [a for a in untold if not _tells_chrf_apart(a, case)]
    return cases


check_chrf = Check(
    "chrF2 agrees with sacreBLEU's CHRF() on 20 fresh random corpora",
    chrf_cases, corpus_chrf,
    describe=lambda hypotheses, references: f"hypotheses {hypotheses} and references {references}",
    compared_with="sacreBLEU's CHRF()", noun="chrF", slips=_CHRF_SLIPS,
    tolerance=dict(atol=1e-9, rtol=1e-9),
    forbidden=("sacrebleu",),
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
