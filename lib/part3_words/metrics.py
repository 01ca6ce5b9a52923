"""Evaluating generated text against references: BLEU and ROUGE-N.

Both metrics compare the n-grams of a generated sentence (the *hypothesis*, or
candidate) with those of one or more human *references* (syllabus EVAL1-EVAL3):

1. :func:`clipped_counts` is BLEU's modified n-gram precision: each hypothesis
   n-gram is credited at most as often as it occurs in a single reference.
2. :func:`brevity_penalty` punishes hypotheses shorter than the reference length
   closest to theirs (:func:`closest_reference_length`).
3. :func:`bleu_from_counts` combines the pieces,
   ``BLEU = BP * exp(sum_n w_n log p_n)``, with one of the smoothing methods of
   Chen and Cherry (2014) for zero counts; :func:`corpus_bleu` pools the counts
   of a whole corpus before dividing, and :func:`sentence_bleu` scores one
   sentence, by default averaging only the n-gram orders it has (the
   *effective order*). Both return every piece in a :class:`BleuStats`.
4. :func:`rouge_n` is ROUGE-N, n-gram *recall* pooled over the references, and
   :func:`rouge_n_scores` gives precision, recall and F for one reference.

Inputs are already tokenised: a sentence is a list of token strings. With
uniform weights the scores equal sacreBLEU's (``tokenize="none"``, same smoothing,
smoothing values and ``effective_order``) divided by 100; the tests check this to
1e-9. sacreBLEU's ``BLEU()`` defaults to ``smooth_method="exp"`` and
``effective_order=False`` for corpus and sentence scores alike; ours to no
smoothing, and to the effective order for :func:`sentence_bleu` only.

References
----------
.. [1] K. Papineni, S. Roukos, T. Ward, W.-J. Zhu. "BLEU: a Method for Automatic
   Evaluation of Machine Translation". ACL 2002.
.. [2] C.-Y. Lin. "ROUGE: A Package for Automatic Evaluation of Summaries".
   Text Summarization Branches Out, ACL Workshop 2004.
.. [3] B. Chen, C. Cherry. "A Systematic Comparison of Smoothing Techniques for
   Sentence-Level BLEU". WMT 2014.
.. [4] M. Post. "A Call for Clarity in Reporting BLEU Scores". WMT 2018.
   (sacreBLEU.)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Literal, Optional

from lib.checked import (
    Fraction,
    NonNegative,
    NonNegativeInt,
    References,
    Weights,
    Words,
    each,
    positive_int_at_most,
)

__all__ = [
    "SMOOTHING",
    "ngram_counts",
    "clipped_counts",
    "closest_reference_length",
    "brevity_penalty",
    "BleuStats",
    "bleu_from_counts",
    "sentence_bleu",
    "corpus_bleu",
    "rouge_n",
    "RougeScore",
    "rouge_n_scores",
]

Smoothing = Literal["none", "floor", "add-k", "exp"]
# Smoothing method -> default value (sacreBLEU's, from Chen and Cherry 2014): the count
# given to a zero match ("floor"), or added to matches and totals of n >= 2 ("add-k").
SMOOTHING: dict[str, Optional[float]] = {
    "none": None,
    "floor": 0.1,
    "add-k": 1.0,
    "exp": None,
}

# Highest n-gram order accepted: BLEU uses 4, and a typo such as max_n = 10**6 would
# otherwise run for hours instead of failing.
MAX_ORDER = 100
Order = positive_int_at_most(MAX_ORDER)  # an n-gram order n, or the highest one N


def ngram_counts(tokens: Words, n: Order) -> Counter:
    """How often each n-gram (a tuple of ``n`` tokens) occurs in ``tokens``:
    ``{("the", "cat"): 2, ...}``, from the ``max(L - n + 1, 0)`` n-grams of L tokens."""
    # zip of n shifted copies yields the windows tokens[i:i + n], no index arithmetic
    return Counter(zip(*(tokens[i:] for i in range(n))))


def _require_references(references: Sequence, name: str = "references") -> None:
    """What ``References`` cannot word: at least one reference, and none of them a str
    (the likeliest slip: one reference passed where a list of them is expected)."""
    if not references:
        raise ValueError(
            f"{name} must be a non-empty list of references (token lists); "
            "found an empty list"
        )
    strs = [i for i, reference in enumerate(references) if isinstance(reference, str)]
    if strs:
        raise TypeError(
            f"{name}[{strs[0]}] must be a list of token strings; found "
            f"{references[strs[0]]!r} (wrap a single reference in a list: [reference])"
        )


def clipped_counts(
    hypothesis: Words, references: References, n: Order
) -> tuple[NonNegativeInt, NonNegativeInt]:
    """BLEU's modified n-gram precision as ``(clipped matches, total)``: an n-gram of
    the hypothesis counts ``min(c_w(hyp), max_k c_w(ref_k))`` times, never more often
    than it occurs in any *single* reference; ``total`` counts the hypothesis's
    n-grams."""
    _require_references(references)
    hypothesis_counts = ngram_counts(hypothesis, n)
    reference_counts = [ngram_counts(reference, n) for reference in references]
    matches = sum(
        min(count, max(counts[gram] for counts in reference_counts))
        for gram, count in hypothesis_counts.items()
    )
    return matches, sum(hypothesis_counts.values())


def closest_reference_length(
    hyp_len: NonNegativeInt, ref_lens: each(NonNegativeInt)
) -> NonNegativeInt:
    """The reference length closest to ``hyp_len``, the shorter one on a tie: Papineni
    et al.'s "best match length", as in sacreBLEU and NLTK (note 000 uses the
    *shortest* reference instead; see the errata)."""
    if not ref_lens:
        raise ValueError(
            "ref_lens must be a non-empty list of reference lengths; "
            f"found {ref_lens!r}"
        )
    return min(ref_lens, key=lambda length: (abs(length - hyp_len), length))


def brevity_penalty(hyp_len: NonNegativeInt, ref_len: NonNegativeInt) -> Fraction:
    """``BP = 1`` if ``c >= r``, else ``exp(1 - r / c)``; 0 for an empty hypothesis
    (``c = hyp_len`` and ``r = ref_len`` are summed over a corpus)."""
    if hyp_len >= ref_len:
        return 1.0
    return math.exp(1.0 - ref_len / hyp_len) if hyp_len > 0 else 0.0


@dataclass(frozen=True)
class BleuStats:
    """BLEU (``score``, in [0, 1]) and every piece it is made of, for n = 1..N: the
    clipped matches and hypothesis n-grams, ``c`` and ``r``, the precisions ``p_n``
    after smoothing (0 where an order has no n-grams), the weights ``w_n`` used (the
    effective order drops some) and the brevity penalty."""

    matches: tuple[int, ...]
    totals: tuple[int, ...]
    hyp_len: NonNegativeInt
    ref_len: NonNegativeInt
    precisions: tuple[float, ...]
    weights: tuple[float, ...]
    brevity_penalty: float
    score: float


def _smoothed_precisions(
    matches: Sequence[Integral],
    totals: Sequence[Integral],
    smooth: Smoothing,
    value: Optional[float],
    effective_order: bool,
) -> tuple[list[float], int]:
    """The precisions ``p_n`` after smoothing (see :func:`bleu_from_counts`), and the
    number of orders that count: fewer with ``effective_order`` if the hypothesis is
    shorter than ``N``."""
    max_n = len(matches)
    precisions = [0.0] * max_n
    orders, zero_orders = max_n, 0
    for n in range(max_n):
        match, total = matches[n], totals[n]
        if smooth == "add-k" and n > 0:
            match, total = match + value, total + value
        if total == 0:  # the hypothesis is shorter than n + 1: so are all higher orders
            orders = n if effective_order else max_n
            break
        if match > 0:
            precisions[n] = match / total
        elif smooth == "floor":
            precisions[n] = value / total
        elif smooth == "exp":
            zero_orders += 1
            precisions[n] = 1.0 / (2**zero_orders * total)
    return precisions, orders


def bleu_from_counts(
    matches: each(NonNegativeInt),
    totals: each(NonNegativeInt),
    hyp_len: NonNegativeInt,
    ref_len: NonNegativeInt,
    weights: Optional[Weights] = None,
    smooth: Smoothing = "none",
    smooth_value: Optional[NonNegative] = None,
    effective_order: bool = False,
) -> BleuStats:
    """Combine n-gram counts and lengths into BLEU: ``BP * exp(sum_n w_n log p_n)``.

    Smoothing (Chen and Cherry 2014) decides what a zero count becomes: ``"none"``,
    ``p_n = 0`` and BLEU 0; ``"floor"``, a zero match count becomes ``smooth_value``
    (0.1); ``"add-k"``, ``smooth_value`` (1) is added to the matches and totals of the
    orders ``n >= 2``; ``"exp"``, the ``i``-th order without a match gets
    ``p_n = 1 / (2**i * total)``. No match at all gives 0 whatever the smoothing. An
    order without n-grams has ``p_n = 0``; ``effective_order`` leaves it out and
    rescales the other weights (uniform by default) to sum to 1. These are sacreBLEU's
    rules (its default smoothing is ``"exp"``).
    """
    if not 1 <= len(matches) <= MAX_ORDER:
        raise ValueError(
            f"matches must hold 1 to {MAX_ORDER} counts (one per n-gram order); "
            f"found {len(matches)}"
        )
    if len(totals) != len(matches) or any(m > t for m, t in zip(matches, totals)):
        raise ValueError(
            "matches and totals must be two lists of the same length with "
            f"0 <= match <= total; found {list(matches)} and {list(totals)}"
        )
    if totals[0] > hyp_len:  # c tokens hold c unigrams
        raise ValueError(
            f"totals[0], the unigrams, must be at most hyp_len = {hyp_len}; "
            f"found {totals[0]}"
        )
    max_n = len(matches)
    if weights is None:
        weights = (1.0 / max_n,) * max_n
    weights = tuple(float(w) for w in weights)
    if len(weights) != max_n or abs(sum(weights) - 1.0) > 1e-9:
        raise ValueError(
            f"weights must be {max_n} numbers >= 0 (one per n-gram order) that sum to "
            f"1; found {weights}"
        )
    if smooth_value is not None and SMOOTHING[smooth] is None:
        raise ValueError(
            "smooth_value is used by 'floor' and 'add-k' only; "
            f"found {smooth_value!r} with {smooth!r}"
        )
    # 0 is allowed, as in sacreBLEU: a zero match then stays 0, and so does BLEU.
    value = SMOOTHING[smooth] if smooth_value is None else float(smooth_value)
    bp = brevity_penalty(hyp_len, ref_len)
    pieces = dict(  # as Python ints, whichever integers came in (NumPy's...)
        matches=tuple(map(int, matches)),
        totals=tuple(map(int, totals)),
        hyp_len=int(hyp_len),
        ref_len=int(ref_len),
        brevity_penalty=bp,
    )
    if not any(matches):
        zeros = (0.0,) * max_n
        return BleuStats(precisions=zeros, weights=weights, score=0.0, **pieces)
    precisions, orders = _smoothed_precisions(
        matches, totals, smooth, value, effective_order
    )
    used = weights[:orders]
    if sum(used) == 0:  # every order that carries weight is missing
        zeros = (0.0,) * max_n
        return BleuStats(
            precisions=tuple(precisions), weights=zeros, score=0.0, **pieces
        )
    used = [w / sum(used) for w in used] + [0.0] * (max_n - orders)
    if any(w > 0 and p == 0 for w, p in zip(used, precisions)):
        score = 0.0  # log 0 = -inf: one zero precision zeroes the geometric mean
    else:
        logs = sum(w * math.log(p) for w, p in zip(used, precisions) if w > 0)
        score = bp * math.exp(logs)
    return BleuStats(
        precisions=tuple(precisions), weights=tuple(used), score=score, **pieces
    )


def _sentence_counts(
    hypothesis: Words, references: each(Words), max_n: Order
) -> tuple[list, list, int, int]:
    """Matches and totals of every order, and ``(c, r)``, for one sentence: what
    :func:`clipped_counts` gives, with the references merged once per order."""
    matches, totals = [0] * max_n, [0] * max_n
    for n in range(1, max_n + 1):
        hypothesis_counts = ngram_counts(hypothesis, n)
        if not hypothesis_counts:
            break  # shorter than n: no n-grams of this or any higher order
        best = ngram_counts(references[0], n)
        for reference in references[1:]:
            # Counter | Counter keeps the larger count
            best |= ngram_counts(reference, n)
        matches[n - 1] = sum(
            min(count, best[gram])
            for gram, count in hypothesis_counts.items()
            if gram in best
        )
        totals[n - 1] = len(hypothesis) - n + 1
    ref_lens = [len(reference) for reference in references]
    ref_len = closest_reference_length(len(hypothesis), ref_lens)
    return matches, totals, len(hypothesis), ref_len


def sentence_bleu(
    hypothesis: Words,
    references: References,
    max_n: Order = 4,
    weights: Optional[Weights] = None,
    smooth: Smoothing = "none",
    smooth_value: Optional[NonNegative] = None,
    effective_order: bool = True,
) -> BleuStats:
    """BLEU of one hypothesis against its references (see :func:`bleu_from_counts`).

    By default the orders the hypothesis is too short for are left out, so a
    three-word hypothesis gets BLEU-3, as ``sacrebleu.sentence_bleu`` does. To get
    sacreBLEU's ``BLEU().sentence_score``, pass ``smooth="exp", effective_order=False``.
    """
    _require_references(references)
    counts = _sentence_counts(hypothesis, references, max_n)
    return bleu_from_counts(
        *counts, weights, smooth, smooth_value, effective_order=effective_order
    )


def corpus_bleu(
    hypotheses: each(Words),
    references: each(References),
    max_n: Order = 4,
    weights: Optional[Weights] = None,
    smooth: Smoothing = "none",
    smooth_value: Optional[NonNegative] = None,
    effective_order: bool = False,
) -> BleuStats:
    """BLEU of a corpus: counts and lengths are summed over sentences, then combined.

    Not the average of sentence BLEU: a sentence with many n-grams weighs more, and a
    zero count in one sentence does not zero the corpus. ``references`` holds a list of
    references for each hypothesis. Pass ``smooth="exp"`` to get sacreBLEU's
    ``BLEU().corpus_score``.
    """
    if not hypotheses:
        raise ValueError(
            "hypotheses must be a non-empty list of token lists; found an empty list"
        )
    if len(references) != len(hypotheses):
        raise ValueError(
            "references must hold one list of references per hypothesis "
            f"({len(hypotheses)}); found {len(references)}"
        )
    matches, totals, hyp_len, ref_len = [0] * max_n, [0] * max_n, 0, 0
    for i, (hypothesis, sentence_references) in enumerate(zip(hypotheses, references)):
        _require_references(sentence_references, f"references[{i}]")
        sentence = _sentence_counts(hypothesis, sentence_references, max_n)
        matches = [a + b for a, b in zip(matches, sentence[0])]
        totals = [a + b for a, b in zip(totals, sentence[1])]
        hyp_len, ref_len = hyp_len + sentence[2], ref_len + sentence[3]
    return bleu_from_counts(
        matches,
        totals,
        hyp_len,
        ref_len,
        weights,
        smooth,
        smooth_value,
        effective_order=effective_order,
    )


def rouge_n(hypothesis: Words, references: References, n: Order = 1) -> Fraction:
    """ROUGE-N recall, pooled over references (Lin 2004): the sum over references of
    ``sum_w min(c_w(hyp), c_w(ref_k))`` over the sum of ``sum_w c_w(ref_k)``, ``w``
    running over the n-grams of the references; 0 when they have none (rouge_score's
    convention)."""
    _require_references(references)
    hypothesis_counts = ngram_counts(hypothesis, n)
    overlap = total = 0
    for reference in references:
        reference_counts = ngram_counts(reference, n)
        overlap += sum(
            min(count, hypothesis_counts[gram])
            for gram, count in reference_counts.items()
        )
        total += sum(reference_counts.values())
    return overlap / total if total else 0.0


@dataclass(frozen=True)
class RougeScore:
    """ROUGE-N against one reference: precision, recall and their harmonic mean."""

    precision: float
    recall: float
    fmeasure: float


def rouge_n_scores(hypothesis: Words, reference: Words, n: Order = 1) -> RougeScore:
    """ROUGE-N precision, recall and F against one reference, as ``rouge_score``
    reports them: the overlap ``sum_w min(c_w(hyp), c_w(ref))`` over the hypothesis's
    n-grams, over the reference's (each 0 when there are none), and their harmonic
    mean."""
    hypothesis_counts = ngram_counts(hypothesis, n)
    reference_counts = ngram_counts(reference, n)
    # & keeps the smaller count of each n-gram
    overlap = sum((hypothesis_counts & reference_counts).values())
    precision = overlap / max(sum(hypothesis_counts.values()), 1)
    recall = overlap / max(sum(reference_counts.values()), 1)
    if precision + recall > 0:
        fmeasure = 2 * precision * recall / (precision + recall)
    else:
        fmeasure = 0.0
    return RougeScore(precision, recall, fmeasure)
