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
import numbers
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

from lib.validation import require_int, require_number, require_words

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

# Smoothing method -> default value (sacreBLEU's, from Chen and Cherry 2014): the count
# given to a zero match ("floor"), or added to matches and totals of n >= 2 ("add-k").
SMOOTHING: dict[str, Optional[float]] = {"none": None, "floor": 0.1, "add-k": 1.0, "exp": None}

Tokens = Sequence[str]

# Highest n-gram order accepted: BLEU uses 4, and a typo such as max_n = 10**6 would
# otherwise run for hours instead of failing.
MAX_ORDER = 100


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _check_references(name: str, references: object) -> None:
    if isinstance(references, (list, tuple)) and references and isinstance(references[0], str):
        raise TypeError(
            f"{name} must be a list of references, each a list of token strings; found a list of str "
            "(wrap a single reference in a list: [reference])"
        )
    if not isinstance(references, (list, tuple)) or not references:
        found = "an empty list" if isinstance(references, (list, tuple)) else type(references).__name__
        raise ValueError(f"{name} must be a non-empty list of references (token lists); found {found}")
    for reference in references:
        require_words(f"each of {name}", reference)


def _check_weights(weights: Optional[Sequence[float]], max_n: int) -> tuple[float, ...]:
    if weights is None:
        return (1.0 / max_n,) * max_n
    if isinstance(weights, str) or not all(
            isinstance(w, numbers.Real) and not isinstance(w, bool) for w in weights):
        raise TypeError(f"weights must be a sequence of {max_n} numbers; found {weights!r}")
    weights = tuple(float(w) for w in weights)
    if len(weights) != max_n or not all(0 <= w < math.inf for w in weights) or abs(sum(weights) - 1.0) > 1e-9:
        raise ValueError(
            f"weights must be {max_n} numbers >= 0 (one per n-gram order) that sum to 1; found {weights}"
        )
    return weights


def _check_lengths(hyp_len: object, ref_lens: object) -> None:
    require_int("hyp_len", hyp_len, 0)
    if not isinstance(ref_lens, (list, tuple)) or not ref_lens:
        raise ValueError(f"ref_lens must be a non-empty list of reference lengths; found {ref_lens!r}")
    for length in ref_lens:
        require_int("each of ref_lens", length, 0)


def _smoothing_value(smooth: str, smooth_value: Optional[float]) -> Optional[float]:
    if smooth not in SMOOTHING:
        raise ValueError(f"smooth must be one of {', '.join(map(repr, SMOOTHING))}; found {smooth!r}")
    if smooth_value is None:
        return SMOOTHING[smooth]
    if SMOOTHING[smooth] is None:
        raise ValueError(f"smooth_value is used by 'floor' and 'add-k' only; found {smooth_value!r} with {smooth!r}")
    require_number("smooth_value", smooth_value, 0.0)  # 0 is allowed, as in sacreBLEU: p_n = 0, BLEU 0
    return float(smooth_value)


# ---------------------------------------------------------------------------
# The pieces of BLEU.
# ---------------------------------------------------------------------------


def ngram_counts(tokens: Tokens, n: int) -> Counter:
    """How often each n-gram (a tuple of ``n`` tokens) occurs in ``tokens``.

    Parameters
    ----------
    tokens : list of str
    n : int

    Returns
    -------
    Counter
        ``{("the", "cat"): 2, ...}``; empty when ``len(tokens) < n``.

    Shapes
    ------
    A sentence of ``L`` tokens has ``max(L - n + 1, 0)`` n-grams.
    """
    require_words("tokens", tokens), require_int("n", n, 1, MAX_ORDER)
    # zip of n shifted copies yields the windows tokens[i:i + n] without index arithmetic.
    return Counter(zip(*(tokens[i:] for i in range(n))))


def clipped_counts(hypothesis: Tokens, references: Sequence[Tokens], n: int) -> tuple[int, int]:
    """BLEU's modified n-gram precision as a fraction: ``(clipped matches, total)``.

    Each n-gram ``w`` of the hypothesis counts ``min(c_w(hyp), max_k c_w(ref_k))``
    times: never more often than it occurs in any *single* reference. ``total``
    is the number of n-grams of the hypothesis.

    Parameters
    ----------
    hypothesis : list of str
    references : list of list of str
    n : int

    Returns
    -------
    tuple of int
        ``(matches, total)``; the precision is ``matches / total`` when ``total > 0``.

    Shapes
    ------
    Scalars out; sentences of any length in.
    """
    require_words("hypothesis", hypothesis)
    _check_references("references", references)
    require_int("n", n, 1, MAX_ORDER)
    hypothesis_counts = ngram_counts(hypothesis, n)
    reference_counts = [ngram_counts(reference, n) for reference in references]
    matches = sum(
        min(count, max(counts[gram] for counts in reference_counts))
        for gram, count in hypothesis_counts.items()
    )
    return matches, sum(hypothesis_counts.values())


def closest_reference_length(hyp_len: int, ref_lens: Sequence[int]) -> int:
    """The reference length closest to ``hyp_len``; the shorter one on a tie.

    This is Papineni et al.'s "best match length", used by sacreBLEU and NLTK
    (note 000 uses the *shortest* reference instead; see the errata).

    Parameters
    ----------
    hyp_len : int
    ref_lens : list of int

    Returns
    -------
    int
    """
    _check_lengths(hyp_len, ref_lens)
    return min(ref_lens, key=lambda length: (abs(length - hyp_len), length))


def brevity_penalty(hyp_len: int, ref_len: int) -> float:
    """``BP = 1`` if ``c >= r``, else ``exp(1 - r / c)``; 0 for an empty hypothesis.

    Parameters
    ----------
    hyp_len : int
        ``c``, the hypothesis length (summed over a corpus).
    ref_len : int
        ``r``, the closest reference length (summed over a corpus).

    Returns
    -------
    float
        In [0, 1].
    """
    require_int("hyp_len", hyp_len, 0), require_int("ref_len", ref_len, 0)
    if hyp_len >= ref_len:
        return 1.0
    return math.exp(1.0 - ref_len / hyp_len) if hyp_len > 0 else 0.0


@dataclass(frozen=True)
class BleuStats:
    """BLEU and every piece it is made of.

    Attributes
    ----------
    matches, totals : tuple of int
        Clipped n-gram matches and hypothesis n-grams for n = 1..N (summed over a corpus).
    hyp_len, ref_len : int
        ``c`` and ``r``: hypothesis length and closest reference length (summed).
    precisions : tuple of float
        ``p_n`` after smoothing; 0 where the order has no n-grams.
    weights : tuple of float
        ``w_n`` actually used (sentence BLEU drops orders the hypothesis is too short for).
    brevity_penalty : float
    score : float
        ``BP * exp(sum_n w_n log p_n)``, in [0, 1].
    """

    matches: tuple[int, ...]
    totals: tuple[int, ...]
    hyp_len: int
    ref_len: int
    precisions: tuple[float, ...]
    weights: tuple[float, ...]
    brevity_penalty: float
    score: float


def _check_counts(matches: object, totals: object) -> None:
    for name, counts in (("matches", matches), ("totals", totals)):
        if not isinstance(counts, (list, tuple)) or not all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            raise TypeError(f"{name} must be a list of ints (one per n-gram order); found {counts!r}")
    require_int("the number of n-gram orders", len(matches), 1, MAX_ORDER)
    if len(totals) != len(matches) or any(not 0 <= m <= t for m, t in zip(matches, totals)):
        raise ValueError(
            f"matches and totals must be two lists of the same length with 0 <= match <= total; "
            f"found {list(matches)} and {list(totals)}"
        )


def _smoothed_precisions(matches: Sequence[int], totals: Sequence[int], smooth: str, value: Optional[float],
                         effective_order: bool) -> tuple[list[float], int]:
    """The precisions ``p_n`` after smoothing (see :func:`bleu_from_counts`), and the number
    of orders that count: fewer with ``effective_order`` if the hypothesis is shorter than ``N``."""
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
    matches: Sequence[int],
    totals: Sequence[int],
    hyp_len: int,
    ref_len: int,
    weights: Optional[Sequence[float]] = None,
    smooth: str = "none",
    smooth_value: Optional[float] = None,
    effective_order: bool = False,
) -> BleuStats:
    """Combine n-gram counts and lengths into BLEU: ``BP * exp(sum_n w_n log p_n)``.

    Smoothing (Chen and Cherry 2014) decides what a zero count becomes:

    - ``"none"``: ``p_n = 0``, so BLEU is 0;
    - ``"floor"``: a zero match count becomes ``smooth_value`` (default 0.1);
    - ``"add-k"``: ``smooth_value`` (default 1) is added to the matches and the
      totals of every order ``n >= 2``;
    - ``"exp"``: the ``i``-th order with zero matches gets ``p_n = 1 / (2**i * total)``.

    If no n-gram of any order matches, BLEU is 0 whatever the smoothing.
    Orders with no n-grams at all (a hypothesis shorter than ``n``) have
    ``p_n = 0``; with ``effective_order`` they are left out and the remaining
    weights rescaled to sum to 1 (what sentence BLEU does). These are
    sacreBLEU's rules, so the results agree with it.

    Parameters
    ----------
    matches, totals : list of int
        Clipped matches and hypothesis n-grams for n = 1..N.
    hyp_len, ref_len : int
        ``c`` and ``r`` of the brevity penalty.
    weights : list of float, optional
        ``w_1..w_N``, >= 0, summing to 1; uniform by default.
    smooth : {"none", "floor", "add-k", "exp"}
        ``"none"`` by default: Papineni et al.'s BLEU, which the chapter teaches.
        sacreBLEU's default is ``"exp"``.
    smooth_value : float, optional
        For ``"floor"`` and ``"add-k"``; sacreBLEU's defaults when None. 0 is allowed,
        as in sacreBLEU (a zero match then stays 0, and so does BLEU).
    effective_order : bool
        Leave out the orders the hypothesis has no n-grams of.

    Returns
    -------
    BleuStats

    Shapes
    ------
    matches, totals : (N,)
    """
    _check_counts(matches, totals)
    if not isinstance(effective_order, bool):
        raise TypeError(f"effective_order must be True or False; found {effective_order!r}")
    max_n = len(matches)
    weights, value = _check_weights(weights, max_n), _smoothing_value(smooth, smooth_value)
    bp = brevity_penalty(hyp_len, ref_len)
    pieces = dict(matches=tuple(matches), totals=tuple(totals), hyp_len=hyp_len, ref_len=ref_len,
                  brevity_penalty=bp)
    if not any(matches):
        return BleuStats(precisions=(0.0,) * max_n, weights=weights, score=0.0, **pieces)
    precisions, orders = _smoothed_precisions(matches, totals, smooth, value, effective_order)
    used = weights[:orders]
    if sum(used) == 0:  # every order that carries weight is missing
        return BleuStats(precisions=tuple(precisions), weights=(0.0,) * max_n, score=0.0, **pieces)
    used = [w / sum(used) for w in used] + [0.0] * (max_n - orders)
    if any(w > 0 and p == 0 for w, p in zip(used, precisions)):
        score = 0.0  # log 0 = -inf: one zero precision zeroes the geometric mean
    else:
        score = bp * math.exp(sum(w * math.log(p) for w, p in zip(used, precisions) if w > 0))
    return BleuStats(precisions=tuple(precisions), weights=tuple(used), score=score, **pieces)


def _sentence_counts(hypothesis: Tokens, references: Sequence[Tokens], max_n: int) -> tuple[list, list, int, int]:
    """Matches and totals of every order, plus (c, r), for one sentence: the fast path.

    Equal to calling :func:`clipped_counts` for each order, but the references'
    counts are merged (a max over references) once per order.
    """
    matches, totals = [0] * max_n, [0] * max_n
    for n in range(1, max_n + 1):
        hypothesis_counts = ngram_counts(hypothesis, n)
        if not hypothesis_counts:
            break  # shorter than n: no n-grams of this or any higher order
        best = ngram_counts(references[0], n)
        for reference in references[1:]:
            best |= ngram_counts(reference, n)  # Counter | Counter keeps the larger count
        matches[n - 1] = sum(min(count, best[gram]) for gram, count in hypothesis_counts.items() if gram in best)
        totals[n - 1] = len(hypothesis) - n + 1
    ref_len = closest_reference_length(len(hypothesis), [len(reference) for reference in references])
    return matches, totals, len(hypothesis), ref_len


def sentence_bleu(
    hypothesis: Tokens,
    references: Sequence[Tokens],
    max_n: int = 4,
    weights: Optional[Sequence[float]] = None,
    smooth: str = "none",
    smooth_value: Optional[float] = None,
    effective_order: bool = True,
) -> BleuStats:
    """BLEU of one hypothesis against its references.

    By default the orders the hypothesis is too short for are left out
    (``effective_order=True``), so a three-word hypothesis gets BLEU-3. sacreBLEU's
    ``BLEU()`` does not do this unless told (its ``effective_order=False``: the
    missing order has precision 0, so the score is 0 unless add-k fills it); its function
    ``sacrebleu.sentence_bleu`` does. To get ``BLEU().sentence_score``'s numbers,
    pass ``smooth="exp", effective_order=False``.

    Parameters
    ----------
    hypothesis : list of str
    references : list of list of str
        One or more references for this hypothesis.
    max_n : int
        Highest n-gram order ``N``.
    weights : list of float, optional
        ``w_1..w_N``; uniform by default.
    smooth : {"none", "floor", "add-k", "exp"}
        ``"none"`` by default: Papineni et al.'s BLEU, which the chapter teaches.
        sacreBLEU's default is ``"exp"``.
    smooth_value : float, optional
    effective_order : bool
        Leave out the orders the hypothesis has no n-grams of (True by default).

    Returns
    -------
    BleuStats
        ``.score`` in [0, 1] and its pieces.

    Shapes
    ------
    BleuStats.matches, .totals, .precisions, .weights : (N,)
    """
    require_words("hypothesis", hypothesis)
    _check_references("references", references)
    require_int("max_n", max_n, 1, MAX_ORDER)
    matches, totals, hyp_len, ref_len = _sentence_counts(hypothesis, references, max_n)
    return bleu_from_counts(matches, totals, hyp_len, ref_len, weights, smooth, smooth_value,
                            effective_order=effective_order)


def corpus_bleu(
    hypotheses: Sequence[Tokens],
    references: Sequence[Sequence[Tokens]],
    max_n: int = 4,
    weights: Optional[Sequence[float]] = None,
    smooth: str = "none",
    smooth_value: Optional[float] = None,
    effective_order: bool = False,
) -> BleuStats:
    """BLEU of a corpus: counts and lengths are summed over sentences, then combined.

    This is not the average of sentence BLEU scores: a sentence with many
    n-grams weighs more, and a zero count in one sentence does not zero the corpus.

    Parameters
    ----------
    hypotheses : list of list of str
        One hypothesis per sentence.
    references : list of list of list of str
        For each sentence, its list of references (the number may vary).
    max_n : int
    weights : list of float, optional
    smooth : {"none", "floor", "add-k", "exp"}
        ``"none"`` by default: Papineni et al.'s BLEU, which the chapter teaches.
        sacreBLEU's default is ``"exp"``; pass ``smooth="exp"`` to get ``BLEU().corpus_score``'s
        numbers.
    smooth_value : float, optional
    effective_order : bool
        Leave out the orders that no hypothesis of the corpus has n-grams of (False by
        default, as in sacreBLEU).

    Returns
    -------
    BleuStats

    Shapes
    ------
    hypotheses : (M,) sentences; references : (M,) lists of references
    """
    if isinstance(hypotheses, str) or not isinstance(hypotheses, (list, tuple)) or not hypotheses:
        raise ValueError(f"hypotheses must be a non-empty list of token lists; found {hypotheses!r:.60}")
    if not isinstance(references, (list, tuple)) or len(references) != len(hypotheses):
        found = len(references) if isinstance(references, (list, tuple)) else type(references).__name__
        raise ValueError(
            f"references must hold one list of references per hypothesis ({len(hypotheses)}); found {found}"
        )
    require_int("max_n", max_n, 1, MAX_ORDER)
    matches, totals, hyp_len, ref_len = [0] * max_n, [0] * max_n, 0, 0
    for i, (hypothesis, sentence_references) in enumerate(zip(hypotheses, references)):
        require_words(f"hypotheses[{i}]", hypothesis)
        _check_references(f"references[{i}]", sentence_references)
        sentence = _sentence_counts(hypothesis, sentence_references, max_n)
        matches = [a + b for a, b in zip(matches, sentence[0])]
        totals = [a + b for a, b in zip(totals, sentence[1])]
        hyp_len, ref_len = hyp_len + sentence[2], ref_len + sentence[3]
    return bleu_from_counts(matches, totals, hyp_len, ref_len, weights, smooth, smooth_value,
                            effective_order=effective_order)


# ---------------------------------------------------------------------------
# ROUGE-N.
# ---------------------------------------------------------------------------


def rouge_n(hypothesis: Tokens, references: Sequence[Tokens], n: int = 1) -> float:
    """ROUGE-N recall, pooled over references (Lin 2004).

    .. math::
        \\frac{\\sum_k \\sum_{w} \\min(c_w(\\text{hyp}), c_w(\\text{ref}_k))}{\\sum_k \\sum_{w} c_w(\\text{ref}_k)}

    where ``w`` runs over the n-grams of the references. It is 0 when the
    references have no n-grams (rouge_score's convention).

    Parameters
    ----------
    hypothesis : list of str
    references : list of list of str
    n : int

    Returns
    -------
    float
        In [0, 1].
    """
    require_words("hypothesis", hypothesis)
    _check_references("references", references)
    require_int("n", n, 1, MAX_ORDER)
    hypothesis_counts = ngram_counts(hypothesis, n)
    overlap = total = 0
    for reference in references:
        reference_counts = ngram_counts(reference, n)
        overlap += sum(min(count, hypothesis_counts[gram]) for gram, count in reference_counts.items())
        total += sum(reference_counts.values())
    return overlap / total if total else 0.0


@dataclass(frozen=True)
class RougeScore:
    """ROUGE-N against one reference: precision, recall and their harmonic mean."""

    precision: float
    recall: float
    fmeasure: float


def rouge_n_scores(hypothesis: Tokens, reference: Tokens, n: int = 1) -> RougeScore:
    """ROUGE-N precision, recall and F against one reference.

    ``overlap = sum_w min(c_w(hyp), c_w(ref))``; precision divides it by the
    hypothesis's n-grams, recall by the reference's (each 0 when there are none),
    and F is their harmonic mean. These are the numbers ``rouge_score`` reports.

    Parameters
    ----------
    hypothesis, reference : list of str
    n : int

    Returns
    -------
    RougeScore
    """
    require_words("hypothesis", hypothesis)
    require_words("reference", reference)
    require_int("n", n, 1, MAX_ORDER)
    hypothesis_counts, reference_counts = ngram_counts(hypothesis, n), ngram_counts(reference, n)
    overlap = sum((hypothesis_counts & reference_counts).values())  # & keeps the smaller count
    precision = overlap / max(sum(hypothesis_counts.values()), 1)
    recall = overlap / max(sum(reference_counts.values()), 1)
    fmeasure = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return RougeScore(precision, recall, fmeasure)
