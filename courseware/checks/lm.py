"""Checkers for the exercises of chapter 6 (language models and sequence generation)."""
from __future__ import annotations

import math

import torch

from courseware.checks.core import Check, Slip, _distinct, by_value
from lib.part3_words.softmax_approx import nce_loss


# ---------------------------------------------------------------------------
# Good–Turing smoothing of a vector of counts (exercise ex-lm-good-turing).
# ---------------------------------------------------------------------------


def _counts_of_counts(counts: torch.Tensor) -> torch.Tensor:
    """``N_r`` for ``r = 0 .. max + 1``: how many words were seen exactly ``r`` times (the last is 0)."""
    return torch.bincount(counts.long(), minlength=int(counts.max()) + 2).double()


def good_turing(counts: torch.Tensor, mistake: str | None = None) -> torch.Tensor:
    """Good–Turing probabilities of the ``V`` words of a vocabulary from their counts.

    A word seen ``r >= 1`` times has the adjusted count ``r* = (r + 1) N_{r+1} / N_r``, or ``r``
    itself where ``N_{r+1} = 0``; the ``N_0`` words never seen share ``N_1 / N`` equally, and the seen
    ones share ``1 - N_1 / N`` in proportion to ``r*``. ``mistake`` names a slip instead:
    ``"swapped"`` (``(r + 1) N_r / N_{r+1}``), ``"r"`` (``r N_{r+1} / N_r``), ``"no fallback"``
    (``r* = 0`` where ``N_{r+1} = 0``), ``"fallback at max"`` (``r* = r`` only at the largest count,
    0 below a gap), ``"by r"`` (seen words share ``1 - N_1 / N`` in proportion to ``r``, not ``r*``),
    ``"not rescaled"`` (seen words get ``r* / N``),
    ``"all together"`` (the unseen words get ``r*_0 = N_1 / N_0`` each and every ``r*`` is divided by
    their sum), ``"unseen not split"`` (each unseen word gets all of ``N_1 / N``) or ``"split over V"``
    (each gets ``N_1 / (N V)``).

    Shapes
    ------
    counts : (V,), whole numbers >= 0, float64
    output : (V,)
    """
    r = counts.long()
    n_r = _counts_of_counts(counts)  # (max + 2,)
    here, above = n_r[r], n_r[r + 1]  # (V,): N_r and N_{r+1} of each word
    if mistake == "swapped":
        star = (r + 1) * here / above
    elif mistake == "r":
        star = r * above / here
    else:
        star = (r + 1) * above / here
    if mistake == "fallback at max":
        star = torch.where(r == r.max(), counts, star)  # forgets the r just below a gap
    elif mistake == "by r":
        star = counts
    elif mistake != "no fallback":
        star = torch.where(above > 0, star, counts)  # GT's estimate would be 0 (or inf): keep r
    seen = r > 0
    unseen_mass = n_r[1] / counts.sum()  # N_1 / N
    if mistake == "all together":
        adjusted = torch.where(seen, star, n_r[1] / n_r[0])  # r*_0 = (0 + 1) N_1 / N_0
        return adjusted / adjusted.sum()
    seen_probs = star / counts.sum() if mistake == "not rescaled" else (1 - unseen_mass) * star / star[seen].sum()
    unseen_share = {"unseen not split": 1.0, "split over V": 1 / len(counts)}.get(mistake, 1 / n_r[0])
    return torch.where(seen, seen_probs, unseen_mass * unseen_share)


_GOOD_TURING_SLIPS = (
    Slip(lambda counts: good_turing(counts, "swapped"),
         "you swapped N_r and N_{r+1}: the adjusted count is r* = (r + 1) N_{r+1} / N_r, the words seen "
         "once more than this one per word seen this often"),
    Slip(lambda counts: good_turing(counts, "r"),
         "your adjusted counts use r where Good–Turing has r + 1: r* = (r + 1) N_{r+1} / N_r"),
    Slip(lambda counts: good_turing(counts, "no fallback"),
         "your most frequent words got probability 0: where N_{r+1} = 0 the formula gives r* = 0, and the "
         "statement keeps r* = r there"),
    Slip(lambda counts: good_turing(counts, "fallback at max"),
         "some of your seen words got probability 0: N_{r+1} = 0 not only at the largest count but at "
         "every count just below a gap (no word seen r + 1 times); keep r* = r wherever N_{r+1} = 0"),
    Slip(lambda counts: good_turing(counts, "by r"),
         "you shared 1 - N_1/N among the seen words in proportion to their counts r: Good–Turing shares "
         "it in proportion to the adjusted counts r* = (r + 1) N_{r+1} / N_r"),
    Slip(lambda counts: good_turing(counts, "not rescaled"),
         "you gave each seen word r*/N: these add up to 1 - N_1/N only when the counts have no gaps; "
         "where no word was seen r + 1 times the words seen r times keep r* = r, and the words seen "
         "just above a gap lose their tokens to no r*; rescale the seen words so that they add up to 1 - N_1/N"),
    Slip(lambda counts: good_turing(counts, "all together"),
         "you gave the unseen words r*_0 = N_1/N_0 each and divided every adjusted count by their sum: the "
         "unseen words' total is then not N_1/N; reserve N_1/N for them and rescale only the seen words"),
    Slip(lambda counts: good_turing(counts, "unseen not split"),
         "you gave every unseen word the whole unseen mass N_1/N: the N_0 unseen words share it, N_1/(N N_0) each"),
    Slip(lambda counts: good_turing(counts, "split over V"),
         "you split the unseen mass N_1/N over all V words: only the N_0 unseen words share it, N_1/(N N_0) each"),
    Slip(lambda counts: counts / counts.sum(),
         "you returned the unsmoothed relative frequencies r/N: the unseen words get nothing"),
)


def good_turing_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(counts,)`` for :data:`check_good_turing`.

    ``counts`` is a float64 ``(V,)`` vector of whole numbers, ``V`` in 8..24: the counts of a sample of
    ``V`` to ``4V`` tokens from a Zipf-like distribution (``1 / rank^1.1``, ranks shuffled), as words
    are. A draw is kept only with ``N_0 >= 2`` (two unseen words, so that splitting the unseen mass
    shows), ``N_1 >= 1`` and ``N_2 >= 1``; the cases are redrawn until each slip is wrong on at least
    one of them.
    """
    def draw() -> torch.Tensor:
        while True:
            vocab = int(torch.randint(8, 25, (), generator=generator))
            tokens = int(torch.randint(vocab, 4 * vocab + 1, (), generator=generator))
            zipf = 1.0 / torch.arange(1, vocab + 1, dtype=torch.float64) ** 1.1
            zipf = zipf[torch.randperm(vocab, generator=generator)]
            drawn = torch.multinomial(zipf, tokens, replacement=True, generator=generator)
            counts = torch.bincount(drawn, minlength=vocab).double()
            n_r = _counts_of_counts(counts)
            if n_r[0] >= 2 and n_r[1] >= 1 and n_r[2] >= 1:
                return counts

    def tells_apart(slip: Slip, counts: torch.Tensor) -> bool:
        return not torch.allclose(slip.answer(counts), good_turing(counts), atol=1e-6, rtol=1e-6)

    for _ in range(100):
        cases = [(draw(),) for _ in range(trials)]
        if all(any(tells_apart(slip, *case) for case in cases) for slip in _GOOD_TURING_SLIPS):
            return cases
    raise RuntimeError("could not draw cases that tell every slip apart")


def _probabilities_not_normalised(found: torch.Tensor, expected: torch.Tensor, counts) -> str | None:
    total = float(found.sum())
    if abs(total - 1) <= 1e-6:
        return None
    return (f"your probabilities sum to {_distinct(total, 1.0)[0]}, not 1: the unseen words share N_1/N "
            "and the seen words the rest, 1 - N_1/N")


check_good_turing = Check(
    "Good–Turing probabilities agree with (r + 1) N_{r+1} / N_r, rescaled, and N_1/N for the unseen words, "
    "on 20 fresh random count vectors",
    good_turing_cases, good_turing,
    describe=lambda counts: f"counts {[int(c) for c in counts.tolist()]}",
    compared_with="the Good–Turing probabilities", noun="probabilities", layout="(V,)",
    slips=_GOOD_TURING_SLIPS,
    shape_hint=lambda shape, counts: ": one probability per word of the vocabulary, seen or not",
    nan_hint=(": where N_{r+1} = 0 keep r* = r rather than divide by it, and divide by N_r only for counts "
              "that occur (r* = (r + 1) N_{r+1} / N_r)"),
    rules=_probabilities_not_normalised, tolerance=dict(atol=1e-6, rtol=1e-6), forbidden=("nltk",),
)


# ---------------------------------------------------------------------------
# The log-normaliser z that the NCE loss would choose (exercise ex-lm-nce-normaliser).
# ---------------------------------------------------------------------------


def nce_normaliser_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(data_scores, noise_scores, data_log_q, noise_log_q)`` for :data:`check_nce_normaliser`.

    Batches of ``B`` data words with ``K`` noise words each, ``B`` and ``K`` two different numbers in
    2..6 (``K`` is never 1, so a forgotten ``log K`` shows). Scores are ``2 N(0, 1)`` plus an offset in
    [-3, 3] shared by the batch, so that the minimiser ``z`` is sometimes positive and sometimes
    negative; ``q`` is in [0.01, 0.31].
    """
    cases = []
    for _ in range(trials):
        batch, noise = (int(n) for n in torch.randperm(5, generator=generator)[:2] + 2)
        offset = 6 * float(torch.rand((), generator=generator, dtype=torch.float64)) - 3
        data_scores = 2 * torch.randn(batch, generator=generator, dtype=torch.float64) + offset
        noise_scores = 2 * torch.randn(batch, noise, generator=generator, dtype=torch.float64) + offset
        data_log_q = torch.log(torch.rand(batch, generator=generator, dtype=torch.float64) * 0.3 + 0.01)
        noise_log_q = torch.log(torch.rand(batch, noise, generator=generator, dtype=torch.float64) * 0.3 + 0.01)
        cases.append((data_scores, noise_scores, data_log_q, noise_log_q))
    return cases


def _nce_slope_and_curvature(z: float, data, noise, data_q, noise_q) -> tuple[float, float]:
    """``dL/dz`` and ``d²L/dz²`` at ``z``, by autograd through :func:`lib.part3_words.softmax_approx.nce_loss` with
    every score shifted by ``z`` (``p = exp(s + z)``, so every logit becomes ``Δs + z``)."""
    shift = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    (slope,) = torch.autograd.grad(nce_loss(data + shift, noise + shift, data_q, noise_q), shift, create_graph=True)
    (curvature,) = torch.autograd.grad(slope, shift)
    return float(slope.detach()), float(curvature)


@by_value()
def nce_normaliser(data, noise, data_q, noise_q) -> torch.Tensor:
    """The reference: the ``z`` that minimises :func:`lib.part3_words.softmax_approx.nce_loss` of the scores ``s + z``.

    The loss is convex in ``z``: a bracket by doubling, then Newton steps on autograd's slope and
    curvature, each kept inside the bracket (a step that leaves it is replaced by bisection), until a
    step moves ``z`` by less than ``1e-13 (1 + |z|)``. The slope's sign shrinks the bracket at every
    step. It never uses the condition the exercise derives. Remembered by value
    (:func:`courseware.checks.core.by_value`): three slips build on it, on the case being explained.

    Shapes
    ------
    data, data_q : (B,); noise, noise_q : (B, K); output : ()
    """
    case = (data, noise, data_q, noise_q)
    low, high = -1.0, 1.0
    while _nce_slope_and_curvature(low, *case)[0] > 0:
        low *= 2
    while _nce_slope_and_curvature(high, *case)[0] < 0:
        high *= 2
    z = (low + high) / 2
    for _ in range(200):
        slope, curvature = _nce_slope_and_curvature(z, *case)
        low, high = (z, high) if slope < 0 else (low, z)
        newton = z - slope / curvature if curvature > 0 else math.nan
        following = newton if low < newton < high else (low + high) / 2
        if abs(following - z) <= 1e-13 * (1 + abs(z)):
            break
        z = following
    return torch.tensor(following, dtype=torch.float64)


def _one_newton_step(data, noise, data_q, noise_q) -> torch.Tensor:
    """A slip: one Newton step from ``z = 0`` on ``Σ σ(Δs + z) = B``."""
    logits = torch.cat([data - data_q, (noise - noise_q).flatten()]) - math.log(noise.shape[1])
    probs = torch.sigmoid(logits)
    return -(probs.sum() - data.numel()) / (probs * (1 - probs)).sum()


def _nce_normaliser_mismatch(found, expected, data, noise, data_q, noise_q) -> str:
    """The last-resort message: the two ``z``, and what the classifier's probabilities add up to at the
    student's ``z`` (``B`` at the minimum)."""
    logits = torch.cat([data - data_q, (noise - noise_q).flatten()]) - math.log(noise.shape[1])
    total = float(torch.sigmoid(logits + found.double()).sum())
    yours, wanted = _distinct(found.item(), expected.item())
    summed = _distinct(total, float(data.numel()))[0]
    return (f"your z is {yours}; expected {wanted} (at your z the probabilities σ(Δs + z) of the B (K + 1) "
            f"words sum to {summed}; at the minimum of L they sum to B = {data.numel()})")


check_nce_normaliser = Check(
    "your z agrees with the minimiser of lib.part3_words.softmax_approx.nce_loss (found with autograd) on 20 fresh "
    "random batches",
    nce_normaliser_cases, nce_normaliser,
    describe=lambda data, noise, data_q, noise_q: (f"B = {noise.shape[0]} data words with K = {noise.shape[1]} "
                                                   "noise words each"),
    compared_with="the minimiser of L", noun="z",
    slips=(
        Slip(lambda *case: nce_normaliser(*case) - math.log(case[1].shape[1]),
             "your z is log K too small: you left log K out of the logit s + z - log(K q), and z took its place"),
        Slip(lambda *case: nce_normaliser(*case) + math.log((case[1].shape[1] + 1) / case[1].shape[1]),
             "your logit uses log((K + 1) q): the prior odds of data to noise are 1 : K, so the logit is "
             "s + z - log(K q)"),
        Slip(lambda *case: -nce_normaliser(*case),
             "your z has the wrong sign: with p = exp(s + z) the logit is Δs + z"),
        Slip(_one_newton_step,
             "you stopped after one Newton step from z = 0: iterate until z stops moving, or bisect, since "
             "the slope of L increases with z"),
    ),
    shape_hint=lambda shape, *case: ": one z for the whole batch, the same for every word",
    mismatch=_nce_normaliser_mismatch,
    tolerance=dict(atol=1e-6, rtol=1e-6),
    forbidden=("torch.autograd", "torch.func", ".backward", "torch.optim"),
)


def baseline_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh one-token policies ``(scores, reward)`` for :data:`check_best_baseline`.

    ``scores`` are the logits of 3 to 8 words, ``reward`` a number in [0, 1]
    for each word.
    """
    cases = []
    for _ in range(trials):
        words = int(torch.randint(3, 9, (), generator=generator))
        scores = 1.5 * torch.randn(words, generator=generator, dtype=torch.float64)
        cases.append((scores, torch.rand(words, generator=generator, dtype=torch.float64)))
    return cases


def _best_baseline(scores: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """The constant ``b`` of least variance for the estimate ``(G(x) - b) grad log p(x)``, ``x ~ p``.

    The variance is a quadratic in ``b``, smallest at
    ``b = E[G |grad log p|^2] / E[|grad log p|^2]``: the mean reward, weighted by
    the squared length of each word's score function. With respect to the
    logits, ``grad log p(x) = e_x - p``, of squared length ``1 - 2 p_x + |p|^2``.
    """
    p = torch.softmax(scores, 0)  # (V,)
    lengths = 1 - 2 * p + (p * p).sum()  # (V,): |e_x - p|^2
    return (p * lengths * reward).sum() / (p * lengths).sum()


check_best_baseline = Check(
    "the baseline agrees with the variance-minimising constant on 20 fresh random policies, within 0.001",
    baseline_cases, _best_baseline,
    describe=lambda scores, reward: f"a policy over {len(scores)} words",
    compared_with="E[G |grad log p|^2] / E[|grad log p|^2]", noun="baseline", layout="() (one number)",
    slips=(
        Slip(lambda scores, reward: (torch.softmax(scores, 0) * reward).sum(),
             "you returned the mean reward E[G]: a good baseline, but not the one of least variance; words whose "
             "score function is longer count more"),
        Slip(lambda scores, reward: torch.zeros((), dtype=scores.dtype),
             "you returned 0, no baseline at all: the variance at b = 0 is not its minimum"),
    ),
    shape_hint=lambda shape, scores, reward: ": one number, the same baseline for every word",
    tolerance=dict(atol=1e-3, rtol=0.0),
)


# ---------------------------------------------------------------------------
# An interpolated Kneser–Ney bigram model from a count matrix (exercise ex-lm-kneser-ney).
# ---------------------------------------------------------------------------


def kneser_ney_bigram(counts: torch.Tensor, discount: float, mistake: str | None = None) -> torch.Tensor:
    """Interpolated Kneser–Ney bigram probabilities ``p(w | h)`` from bigram counts.

    ``counts[h, w]`` is how often word ``w`` followed history ``h``. The unigram level counts the
    different histories each word followed, ``N1+(. w)``, discounts them by ``D`` and interpolates
    with the uniform ``1/V``; the bigram level discounts ``c(h, w)`` by ``D`` and interpolates with the
    unigram level, whose weight is ``D N1+(h .) / c(h)``; a history never seen gets the unigram level
    (``lib.part3_words.ngram.KneserNeyModel`` with order 2 and discounts ``(D, D)``). ``mistake``
    names a slip instead: ``"raw"`` (the unigram level counts tokens, ``c(w)``: absolute discounting),
    ``"backoff"`` (the unigram level only for pairs never seen), ``"gamma"`` (its weight ``D / c(h)``),
    ``"no uniform"`` (the unigram level undiscounted, with no uniform part, as in nltk), ``"no kinds"``
    (the unigram level discounted but without ``+ D kinds / V``), ``"tokens total"`` (the unigram level
    divided by the number of bigram tokens, not by ``Σ_v N1+(. v)``), ``"unseen uniform"`` (a history
    never seen gets ``1/V``), ``"no clamp"`` (``c(h, w) - D`` without ``max(., 0)``) or ``"axis"``
    (``N1+(h .)``, counted along each row, taken for ``N1+(. w)``: only when ``H = V``, else NaN).

    Shapes
    ------
    counts : (H, V), whole numbers >= 0, float64
    output : (H, V)
    """
    H, V = counts.shape
    if mistake == "axis" and H != V:  # the student's code raises a shape clash instead
        return torch.full_like(counts, math.nan)
    lower = counts.sum(0) if mistake == "raw" else (counts > 0).double().sum(0)  # (V,)
    if mistake == "axis":
        lower = (counts > 0).double().sum(1)  # (H,) = (V,): N1+(h .)
    if mistake == "no uniform":
        unigram = lower / lower.sum()
    else:
        kinds = (lower > 0).double().sum()  # words with a count above 0
        spread = 0.0 if mistake == "no kinds" else discount * kinds / V
        denominator = counts.sum() if mistake == "tokens total" else lower.sum()
        unigram = ((lower - discount).clamp(min=0) + spread) / denominator
    total = counts.sum(1, keepdim=True)  # (H, 1): c(h)
    seen = total > 0
    safe = torch.where(seen, total, torch.ones_like(total))
    kept = (counts - discount) / safe if mistake == "no clamp" else (counts - discount).clamp(min=0) / safe
    weight = discount * (counts > 0).double().sum(1, keepdim=True) / safe  # (H, 1): γ(h)
    if mistake == "gamma":
        weight = discount / safe
    if mistake == "backoff":
        bigram = torch.where(counts > 0, kept, weight * unigram)
    else:
        bigram = kept + weight * unigram
    unseen = torch.full_like(unigram, 1 / V) if mistake == "unseen uniform" else unigram
    return torch.where(seen, bigram, unseen.expand_as(counts))


_KNESER_NEY_SLIPS = (
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "raw"),
         "your unigram level counts how often each word occurred: that is absolute discounting; Kneser–Ney's "
         "lower order counts the different histories a word followed, N1+(. w) (the number of nonzero "
         "entries in its column)"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "backoff"),
         "you used the unigram level only for pairs never seen (backing off): interpolated Kneser–Ney adds "
         "γ(h) p_1(w) to every word, seen after h or not, which is what makes each row sum to 1"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "gamma"),
         "the weight of your unigram level is D / c(h): the discount was taken once for every different "
         "word seen after h, so the weight is D N1+(h .) / c(h)"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "no uniform"),
         "your unigram level is N1+(. w) / N1+(. .), undiscounted and with no uniform part (nltk's choice): "
         "the statement discounts it by D too and gives the freed mass to the uniform 1/V, so that a word "
         "never seen after any history keeps some probability"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "no kinds"),
         "your p_1 discounts N1+(. w) but forgot + D·|{v: N1+(. v) > 0}|/V: the discount taken from every "
         "counted word goes back to every word, 1/V each, so p_1 (and every row) sums to less than 1"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "tokens total"),
         "your p_1 divides by the number of bigram tokens, Σ c(h, w): its numerators count histories, "
         "N1+(. w), so its denominator is their sum Σ_v N1+(. v), the number of different bigrams"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "unseen uniform"),
         "a history never seen gets your uniform 1/V: it gets p_1, the unigram level, as c(h) = 0 leaves "
         "all of its probability to the order below"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "no clamp"),
         "some of your probabilities are negative: a word never seen after h has c(h, w) = 0 and 0 - D < 0; "
         "the discounted count is max(c(h, w) - D, 0) (.clamp(min=0))"),
    Slip(lambda counts, d: kneser_ney_bigram(counts, d, "axis"),
         "your N1+(. w) counts along each row, which is N1+(h .), the different words after history h: the "
         "histories a word followed are the nonzero entries of its column, (counts > 0).sum(0), V numbers"),
)


def kneser_ney_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(counts, discount)`` for :data:`check_kneser_ney`.

    ``counts`` is a float64 ``(H, V)`` matrix of bigram counts, ``H`` in 3..6 histories and ``V`` in
    5..9 words, from 3V to 6V Zipf-like draws (so some counts are 1, some larger); one row is left
    empty (a history never seen) and one column too (a word never seen). ``discount`` is in
    [0.3, 0.9].
    """
    cases = []
    for _ in range(trials):
        H = int(torch.randint(3, 7, (), generator=generator))
        V = int(torch.randint(5, 10, (), generator=generator))
        tokens = int(torch.randint(3 * V, 6 * V + 1, (), generator=generator))
        weights = 1.0 / torch.arange(1, H * V + 1, dtype=torch.float64) ** 1.1
        weights = weights[torch.randperm(H * V, generator=generator)].reshape(H, V)
        weights[int(torch.randint(H, (), generator=generator))] = 0  # a history never seen
        weights[:, int(torch.randint(V, (), generator=generator))] = 0  # a word never seen
        drawn = torch.multinomial(weights.flatten(), tokens, replacement=True, generator=generator)
        counts = torch.bincount(drawn, minlength=H * V).double().reshape(H, V)
        discount = 0.3 + 0.6 * float(torch.rand((), generator=generator, dtype=torch.float64))
        cases.append((counts, discount))
    return cases


def _rows_not_normalised(found: torch.Tensor, expected: torch.Tensor, counts, discount) -> str | None:
    negative = (found < 0).nonzero()
    if len(negative):
        h, w = (int(i) for i in negative[0])
        return (f"your probability of word {w} after history {h} is {float(found[h, w]):.4g}, below 0: the "
                "discounted count is max(c(h, w) - D, 0); without the max(., 0) (.clamp(min=0)) a count below "
                "D goes negative")
    totals = found.sum(1)
    off = (totals - 1).abs() > 1e-6
    unseen = counts.sum(1) == 0
    if bool((off & unseen).any()):  # the unseen history's row is p_1 itself: the fault is there
        row = int((off & unseen).nonzero()[0])
        return (f"your row {row} (a history never seen) sums to {_distinct(float(totals[row]), 1.0)[0]}: this "
                "row is your p_1, and p_1 does not sum to 1: its denominator is Σ_v N1+(. v), and "
                "D·|{v: N1+(. v) > 0}|/V goes to every word")
    if not bool(off.any()):
        return None
    worst = int((totals - 1).abs().argmax())
    return (f"your row {worst} sums to {_distinct(float(totals[worst]), 1.0)[0]}, not 1: each row is "
            "a distribution over the V words")


check_kneser_ney = Check(
    "interpolated Kneser–Ney bigram probabilities agree with the book's, on 20 fresh random count matrices",
    kneser_ney_cases, kneser_ney_bigram,
    describe=lambda counts, discount: (f"counts {[[int(c) for c in row] for row in counts.tolist()]}, "
                                       f"discount {discount:.3f}"),
    compared_with="the interpolated Kneser–Ney probabilities", noun="probabilities", layout="(H, V)",
    slips=_KNESER_NEY_SLIPS,
    shape_hint=lambda shape, counts, discount: ": one row per history, one probability per word",
    nan_hint=": a history never seen has c(h) = 0; give it the unigram level instead of dividing by 0",
    error_hint=(" (a shape clash in p_1?): N1+(. w) counts down each column, (counts > 0).sum(0), V numbers, one per word; "
                "along each row, .sum(1), gives H numbers, one per history, which p_1 cannot be"),
    rules=_rows_not_normalised, tolerance=dict(atol=1e-6, rtol=1e-6), forbidden=("nltk", "lib"),
)
