"""The checkers of chapter 6: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math
import warnings
from collections import Counter
from fractions import Fraction
from functools import partial

import pytest
import torch

from courseware.checks import CHECKS, CheckFailed, check_good_turing, check_kneser_ney, check_nce_normaliser
from courseware.checks.core import _outcome
from lib.part3_words.softmax_approx import nce_loss


def test_the_checks_are_registered():
    assert CHECKS["check_good_turing"] is check_good_turing
    assert CHECKS["check_nce_normaliser"] is check_nce_normaliser
    assert CHECKS["check_kneser_ney"] is check_kneser_ney


# ---- Good–Turing ------------------------------------------------------------------------------------
def good_turing_from_tokens(counts):
    """Written from the statement by another route: the counts become a list of tokens again, Counter
    counts them and the counts of counts, and exact fractions carry the arithmetic."""
    tokens = [word for word, count in enumerate(counts.long().tolist()) for _ in range(count)]
    seen = Counter(tokens)
    total = len(tokens)
    of_count = Counter(seen.values())  # N_r for r >= 1
    unseen = len(counts) - len(seen)  # N_0
    adjusted = {word: Fraction((r + 1) * of_count[r + 1], of_count[r]) if of_count[r + 1] else Fraction(r)
                for word, r in seen.items()}
    unseen_mass = Fraction(of_count[1], total)
    rest = sum(adjusted.values())
    return torch.tensor([float((1 - unseen_mass) * adjusted[w] / rest) if w in seen else float(unseen_mass / unseen)
                         for w in range(len(counts))], dtype=torch.float64)


def good_turing_float32_loops(counts):
    """The literal reading, one word at a time in Python floats, returned in float32."""
    values = counts.long().tolist()
    total = sum(values)
    n = {r: values.count(r) for r in set(values) | {r + 1 for r in values}}
    out = torch.zeros(len(values))
    star = [((r + 1) * n[r + 1] / n[r] if n[r + 1] else r) if r else 0.0 for r in values]
    for w, r in enumerate(values):
        out[w] = n[1] / total / n[0] if r == 0 else (1 - n[1] / total) * star[w] / sum(star)
    return out


def test_the_cases_keep_the_statements_promises():
    from courseware.checks.lm import good_turing_cases

    for seed in range(20):
        for (counts,) in good_turing_cases(torch.Generator().manual_seed(seed)):
            assert counts.dtype == torch.float64 and counts.dim() == 1
            assert torch.equal(counts, counts.round()) and bool((counts >= 0).all())
            n_r = Counter(counts.long().tolist())
            assert n_r[0] >= 2 and n_r[1] >= 1 and n_r[2] >= 1


def test_the_reference_is_good_turing_counted_by_brute_force():
    from courseware.checks.lm import good_turing, good_turing_cases

    for seed in range(5):
        for (counts,) in good_turing_cases(torch.Generator().manual_seed(seed)):
            torch.testing.assert_close(good_turing(counts), good_turing_from_tokens(counts), atol=1e-15, rtol=1e-14)
            assert math.isclose(float(good_turing(counts).sum()), 1.0, abs_tol=1e-14)


def test_the_reference_agrees_with_nltk_on_the_unseen_mass_and_the_seen_total():
    """nltk's SimpleGoodTuringProbDist (Gale & Sampson) smooths N_r with a line in log-log space before it
    forms r*, so its seen words get other shares (by more than 0.01 in some case); but it reserves N_1/N for
    the unseen words, split evenly, and rescales the seen ones to the rest, as the exercise does."""
    nltk_probability = pytest.importorskip("nltk.probability")
    from courseware.checks.lm import good_turing, good_turing_cases

    seen_gaps = []
    for (counts,) in good_turing_cases(torch.Generator().manual_seed(0)):
        freq = nltk_probability.FreqDist({w: int(c) for w, c in enumerate(counts.tolist()) if c > 0})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "did not find a proper best fit line" on small samples
            nltk_dist = nltk_probability.SimpleGoodTuringProbDist(freq, bins=len(counts))
        ours = good_turing(counts)
        theirs = torch.tensor([nltk_dist.prob(w) for w in range(len(counts))], dtype=torch.float64)
        unseen = counts == 0
        torch.testing.assert_close(theirs[unseen], ours[unseen], atol=1e-15, rtol=1e-12)
        assert math.isclose(float(theirs[~unseen].sum()), float(ours[~unseen].sum()), rel_tol=1e-12)
        seen_gaps.append(float((theirs - ours)[~unseen].abs().max()))
    assert max(seen_gaps) > 0.01  # the solution's "other shares to the seen words"


def test_good_turing_judge_on_a_case_worked_by_hand():
    # counts 3, 2, 1, 1, 0, 0: N = 7, N_0 = 2, N_1 = 2, N_2 = 1, N_3 = 1, N_4 = 0. r* = 3 N_4/N_3 -> 3 (kept),
    # 3 N_3/N_2 = 3, 2 N_2/N_1 = 1, 1: they add up to 8. The unseen get 2/7, 1/7 each; the seen share 5/7
    # as 3 : 3 : 1 : 1, so 15/56, 15/56, 5/56 and 5/56.
    counts = torch.tensor([3.0, 2.0, 1.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    right = torch.tensor([15 / 56, 15 / 56, 5 / 56, 5 / 56, 1 / 7, 1 / 7], dtype=torch.float64)
    check_good_turing.judge([(counts,)], [right])
    with pytest.raises(CheckFailed, match=r"you gave each seen word r\*/N"):
        check_good_turing.judge([(counts,)], [torch.tensor([3 / 7, 3 / 7, 1 / 7, 1 / 7, 1 / 7, 1 / 7])])
    with pytest.raises(CheckFailed, match="sum to 0.9, not 1"):
        check_good_turing.judge([(counts,)], [right - torch.tensor([0.1, 0, 0, 0, 0, 0])])


@pytest.mark.parametrize("answer", [good_turing_from_tokens, good_turing_float32_loops])
def test_good_turing_accepts_right_answers_written_differently(answer, capsys):
    check_good_turing(answer)
    assert capsys.readouterr().out.startswith("✓ Good–Turing probabilities agree")


def good_turing_swapped(counts):
    values = counts.long().tolist()
    n = Counter(values)
    star = [(r + 1) * n[r] / n[r + 1] if n[r + 1] else r for r in values]
    seen = sum(s for s, r in zip(star, values) if r)
    mass = n[1] / sum(values)
    return torch.tensor([(1 - mass) * s / seen if r else mass / n[0] for s, r in zip(star, values)],
                        dtype=torch.float64)


def good_turing_r_not_r_plus_1(counts):
    values = counts.long().tolist()
    n = Counter(values)
    star = [r * n[r + 1] / n[r] if n[r + 1] else r for r in values]
    seen = sum(s for s, r in zip(star, values) if r)
    mass = n[1] / sum(values)
    return torch.tensor([(1 - mass) * s / seen if r else mass / n[0] for s, r in zip(star, values)],
                        dtype=torch.float64)


def good_turing_not_rescaled(counts):
    values = counts.long().tolist()
    n = Counter(values)
    total = sum(values)
    return torch.tensor([((r + 1) * n[r + 1] / n[r] if n[r + 1] else r) / total if r else n[1] / total / n[0]
                         for r in values], dtype=torch.float64)


def good_turing_fallback_only_at_the_largest_count(counts):
    """r* = r at the largest count only, as if N_{r+1} = 0 nowhere else: 0 just below a gap."""
    values = counts.long().tolist()
    n = Counter(values)
    star = [r if r == max(values) else (r + 1) * n[r + 1] / n[r] for r in values]
    seen = sum(s for s, r in zip(star, values) if r)
    mass = n[1] / sum(values)
    return torch.tensor([(1 - mass) * s / seen if r else mass / n[0] for s, r in zip(star, values)],
                        dtype=torch.float64)


def good_turing_in_proportion_to_r(counts):
    """Unseen words right, seen words share 1 - N_1/N in proportion to r instead of r*."""
    values = counts.long().tolist()
    n = Counter(values)
    total = sum(values)
    mass = n[1] / total
    return torch.tensor([(1 - mass) * r / total if r else mass / n[0] for r in values], dtype=torch.float64)


def good_turing_all_normalised_together(counts):
    """r*_0 = N_1/N_0 for the unseen words too, then every r* over their sum."""
    values = counts.long().tolist()
    n = Counter(values)
    star = torch.tensor([(r + 1) * n[r + 1] / n[r] if n[r + 1] else float(r) for r in values],
                        dtype=torch.float64)
    return star / star.sum()


def good_turing_unseen_mass_to_each(counts):
    values = counts.long().tolist()
    n = Counter(values)
    star = [(r + 1) * n[r + 1] / n[r] if n[r + 1] else r for r in values]
    seen = sum(s for s, r in zip(star, values) if r)
    mass = n[1] / sum(values)
    return torch.tensor([(1 - mass) * s / seen if r else mass for s, r in zip(star, values)], dtype=torch.float64)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (good_turing_swapped, "swapped N_r and N_{r\\+1}"),
        (good_turing_r_not_r_plus_1, "use r where Good–Turing has r \\+ 1"),
        (good_turing_not_rescaled, "rescale the seen words"),
        (good_turing_fallback_only_at_the_largest_count, "keep r\\* = r wherever N_{r\\+1} = 0"),
        (good_turing_in_proportion_to_r, "in proportion to their counts r"),
        (good_turing_all_normalised_together, "divided every adjusted count by their sum"),
        (good_turing_unseen_mass_to_each, "share it, N_1/\\(N N_0\\) each"),
        (lambda c: c / c.sum(), "unsmoothed relative frequencies"),
        (lambda c: (c + 1) / (c + 1).sum(), "differ from the Good–Turing probabilities by up to"),
        (lambda c: good_turing_from_tokens(c) + 1, "sum to .*, not 1"),
        (lambda c: good_turing_from_tokens(c)[c > 0], "has shape|have shape"),
        (lambda c: good_turing_from_tokens(c).tolist(), "must return a torch.Tensor; it returned list"),
    ],
)
def test_good_turing_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_good_turing(answer)


# ---- the normaliser that NCE would choose ----------------------------------------------------------------
def _logits(data, noise, data_q, noise_q, k=None):
    """Δs = s - log(k q) of the B data words and the B K noise words, as Python floats."""
    k = noise.shape[1] if k is None else k
    return ([s - math.log(k) - q for s, q in zip(data.tolist(), data_q.tolist())]
            + [s - math.log(k) - q for row, rows_q in zip(noise.tolist(), noise_q.tolist())
               for s, q in zip(row, rows_q)])


def _sigmoid(u):
    return 1 / (1 + math.exp(-u)) if u >= 0 else math.exp(u) / (1 + math.exp(u))


def _root_of_condition(logits, count):
    """The z where Σ σ(logit + z) = count, by bisection in float64 (the sum increases with z): 200 halvings,
    or fewer once one leaves the bracket as it was (then every later one would too: each is a function of
    the bracket alone), which happens after about 60."""
    low, high = -60.0, 60.0
    for _ in range(200):
        middle = (low + high) / 2
        bracket = (middle, high) if sum(_sigmoid(u + middle) for u in logits) < count else (low, middle)
        if bracket == (low, high):
            break
        low, high = bracket
    return (low + high) / 2


def _nce_loss_of_logits(z, logits, batch, k):
    """The chapter's L with every logit moved by z, in Python floats, from the B data words' and the B K
    noise words' logits Δs (see :func:`_logits`)."""
    labelled = [(u, 1) for u in logits[:batch]] + [(u, 0) for u in logits[batch:]]
    total = 0.0
    for u, label in labelled:
        x = u + z if label else -(u + z)  # log σ(x) for data, log(1 - σ(u + z)) = log σ(-(u + z)) for noise
        total += -x if x < -30 else -math.log1p(math.exp(-x)) if x > 0 else x - math.log1p(math.exp(x))
    return -total / (batch * (k + 1))


def nce_loss_with_floats(z, data, noise, data_q, noise_q):
    """The chapter's L with every logit moved by z, from its definition, in Python floats."""
    return _nce_loss_of_logits(z, _logits(data, noise, data_q, noise_q), *noise.shape)


def normaliser_by_golden_section(data, noise, data_q, noise_q):
    """Minimises L itself, never its derivative: a golden-section search on z in [-40, 40]. The logits
    Δs do not depend on z: computed once."""
    logits, (batch, k) = _logits(data, noise, data_q, noise_q), noise.shape
    low, high = -40.0, 40.0
    ratio = (math.sqrt(5) - 1) / 2
    while high - low > 1e-11:
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if _nce_loss_of_logits(left, logits, batch, k) < _nce_loss_of_logits(right, logits, batch, k):
            high = right
        else:
            low = left
    return torch.tensor((low + high) / 2, dtype=torch.float64)


def normaliser_by_bisection_float32(data, noise, data_q, noise_q):
    """dL/dz = 0 written as Σ_data (1 - σ) = Σ_noise σ, the data's pull up against the noise's pull down,
    solved in float32 by bisection on a fixed bracket. (Plain Newton from z = 0 can overshoot to -inf where
    every σ is near 1: the sum is flat there.)"""
    k = noise.shape[1]
    data_logits = (data - data_q - math.log(k)).float()
    noise_logits = (noise - noise_q - math.log(k)).float()
    low, high = -100.0, 100.0
    for _ in range(60):
        z = (low + high) / 2
        up = (1 - torch.sigmoid(data_logits + z)).sum()
        down = torch.sigmoid(noise_logits + z).sum()
        low, high = (z, high) if up > down else (low, z)
    return torch.tensor((low + high) / 2, dtype=torch.float32)


def test_the_reference_minimises_the_loss_where_the_probabilities_sum_to_b():
    from courseware.checks.lm import nce_normaliser, nce_normaliser_cases

    for case in nce_normaliser_cases(torch.Generator().manual_seed(0), trials=10):
        z = float(nce_normaliser(*case))
        assert z == pytest.approx(_root_of_condition(_logits(*case), len(case[0])), abs=1e-10)
        at_z = float(nce_loss(case[0] + z, case[1] + z, case[2], case[3]))
        for step in (-1e-3, 1e-3):
            assert float(nce_loss(case[0] + z + step, case[1] + z + step, case[2], case[3])) > at_z
        assert at_z == pytest.approx(nce_loss_with_floats(z, *case), rel=1e-12)


def test_nce_normaliser_judge_on_a_case_worked_by_hand():
    # One data word and two noise words, every score 0 and q = 1/2: Δs = 0 - log(2 · 1/2) = 0 for all three,
    # and 3 σ(z) = 1 gives σ(z) = 1/3, z = -log 2.
    half = math.log(0.5)
    case = (torch.zeros(1, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float64),
            torch.full((1,), half, dtype=torch.float64), torch.full((1, 2), half, dtype=torch.float64))
    check_nce_normaliser.judge([case], [torch.tensor(-math.log(2), dtype=torch.float64)])
    with pytest.raises(CheckFailed, match="wrong sign"):
        check_nce_normaliser.judge([case], [torch.tensor(math.log(2), dtype=torch.float64)])
    with pytest.raises(CheckFailed, match=r"your z is -0.6; expected -0.693147 .* sum to 1.0\d*; at the minimum "
                                          r"of L they sum to B = 1\)"):
        check_nce_normaliser.judge([case], [torch.tensor(-0.6, dtype=torch.float64)])


@pytest.mark.parametrize("answer", [normaliser_by_golden_section, normaliser_by_bisection_float32])
def test_nce_normaliser_accepts_right_answers_written_differently(answer, capsys):
    check_nce_normaliser(answer)
    assert capsys.readouterr().out.startswith("✓ your z agrees with the minimiser of lib.part3_words.softmax_approx.nce_loss")


def normaliser_without_log_k(data, noise, data_q, noise_q):
    return torch.tensor(_root_of_condition(_logits(data, noise, data_q, noise_q, k=1), len(data)),
                        dtype=torch.float64)


def normaliser_with_k_plus_1(data, noise, data_q, noise_q):
    return torch.tensor(_root_of_condition(_logits(data, noise, data_q, noise_q, k=noise.shape[1] + 1),
                                           len(data)), dtype=torch.float64)


def normaliser_wrong_sign(data, noise, data_q, noise_q):
    return -torch.tensor(_root_of_condition(_logits(data, noise, data_q, noise_q), len(data)), dtype=torch.float64)


def normaliser_one_newton_step(data, noise, data_q, noise_q):
    probs = [_sigmoid(u) for u in _logits(data, noise, data_q, noise_q)]
    return torch.tensor(-(sum(probs) - len(data)) / sum(p * (1 - p) for p in probs), dtype=torch.float64)


def normaliser_half_and_half(data, noise, data_q, noise_q):
    """Σ σ = B (K + 1) / 2: the classifier's probabilities set to 1/2 on average."""
    return torch.tensor(_root_of_condition(_logits(data, noise, data_q, noise_q), noise.numel() / 2 + len(data) / 2),
                        dtype=torch.float64)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (normaliser_without_log_k, "log K too small"),
        (normaliser_with_k_plus_1, r"log\(\(K \+ 1\) q\)"),
        (normaliser_wrong_sign, "wrong sign"),
        (normaliser_one_newton_step, "one Newton step"),
        (normaliser_half_and_half, "your z is .*; expected .* at the minimum of L they sum to B"),
        (lambda *case: normaliser_by_golden_section(*case) + 1, "your z is .*; expected"),
        (lambda *case: normaliser_by_golden_section(*case).expand(2), "return one number"),
        (lambda *case: float(normaliser_by_golden_section(*case)), "must return a torch.Tensor; it returned float"),
    ],
)
def test_nce_normaliser_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_nce_normaliser(answer)


# ---- the best constant baseline (REINFORCE) ----------------------------------------------------------
def variance_of_estimate(scores, reward, b):
    """Total variance of the one-sample REINFORCE estimate with baseline b, summed exactly over the words,
    each word's estimate taken from lib.part3_words.reinforce.reinforce_loss by autograd."""
    from lib.part3_words.reinforce import reinforce_loss

    p = torch.softmax(scores, 0)
    estimates = []
    for word in range(len(scores)):
        logits = scores.clone().requires_grad_()
        loss = reinforce_loss(torch.log_softmax(logits, 0)[word:word + 1], reward[word:word + 1], float(b))
        estimates.append(-torch.autograd.grad(loss, logits)[0])
    estimates = torch.stack(estimates)  # (V, V)
    mean = p @ estimates
    return float((p * ((estimates - mean) ** 2).sum(1)).sum())


def baseline_by_grid(scores, reward):
    candidates = torch.linspace(float(reward.min()), float(reward.max()), 2001, dtype=torch.float64)
    p = torch.softmax(scores, 0)
    grads = torch.eye(len(p), dtype=p.dtype) - p  # (V, V): grad of log p(x) for each word x
    exact = (p * reward) @ grads
    variances = torch.stack([(p * ((((reward - b)[:, None] * grads) - exact) ** 2).sum(1)).sum()
                             for b in candidates])
    return candidates[variances.argmin()]


def test_the_reference_baseline_minimises_the_variance_of_reinforce():
    from courseware.checks.lm import _best_baseline, baseline_cases

    for scores, reward in baseline_cases(torch.Generator().manual_seed(0), trials=4):
        best = float(_best_baseline(scores, reward))
        at_best = variance_of_estimate(scores, reward, best)
        for step in (-0.05, -0.005, 0.005, 0.05):
            assert variance_of_estimate(scores, reward, best + step) > at_best
        mean_reward = float((torch.softmax(scores, 0) * reward).sum())
        assert at_best <= variance_of_estimate(scores, reward, mean_reward)


def test_best_baseline_accepts_the_grid_experiment_and_the_formula(capsys):
    from courseware.checks import check_best_baseline

    check_best_baseline(baseline_by_grid)
    check_best_baseline(lambda s, r: (lambda p, n: (p * n * r).sum() / (p * n).sum())(
        torch.softmax(s, 0), 1 - 2 * torch.softmax(s, 0) + (torch.softmax(s, 0) ** 2).sum()))
    assert capsys.readouterr().out.count("✓ the baseline agrees") == 2


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s, r: (torch.softmax(s, 0) * r).sum(), "mean reward E\\[G\\]"),
        (lambda s, r: torch.zeros((), dtype=torch.float64), "you returned 0"),
        (lambda s, r: r.mean(), "your baseline is .*; expected"),
        (lambda s, r: r, "shape"),
    ],
)
def test_best_baseline_rejects_wrong_answers_saying_why(answer, message):
    from courseware.checks import check_best_baseline

    with pytest.raises(CheckFailed, match=message):
        check_best_baseline(answer)


# ---- fairness: right answers written from the statements, the likeliest wrong ones -----------------
def _variance_with_loops(scores, reward, b):
    """E ||(G(x) - b) grad log p(x) - grad J||^2, summed over the words with Python floats."""
    p = torch.softmax(scores, 0).tolist()
    g = reward.tolist()
    words = range(len(p))
    score_function = [[(1.0 if i == x else 0.0) - p[i] for i in words] for x in words]
    exact = [sum(p[x] * g[x] * score_function[x][i] for x in words) for i in words]
    return sum(p[x] * sum(((g[x] - b) * score_function[x][i] - exact[i]) ** 2 for i in words) for x in words)


def baseline_by_golden_section(scores, reward):
    """A search that stops on the named quantity's argument to 1e-7, well inside the 0.001 allowed."""
    low, high = float(reward.min()), float(reward.max())
    ratio = (math.sqrt(5) - 1) / 2
    while high - low > 1e-7:
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if _variance_with_loops(scores, reward, left) < _variance_with_loops(scores, reward, right):
            high = right
        else:
            low = left
    return torch.tensor((low + high) / 2)


def baseline_from_three_points(scores, reward):
    """The variance is a quadratic in b: its vertex from the values at b = 0, 1 and 2."""
    v0, v1, v2 = (_variance_with_loops(scores, reward, b) for b in (0.0, 1.0, 2.0))
    return torch.tensor(1.0 - (v2 - v0) / (2 * (v2 - 2 * v1 + v0)), dtype=torch.float64)


def baseline_mean_reward(scores, reward):
    return (torch.softmax(scores, 0) * reward).sum()


def baseline_zero(scores, reward):
    return torch.zeros((), dtype=torch.float64)


def baseline_unweighted_mean(scores, reward):
    return reward.mean()


def baseline_weighted_by_p_squared(scores, reward):
    p = torch.softmax(scores, 0)
    return (p * p * reward).sum() / (p * p).sum()


FAIRNESS = {
    "check_good_turing": {
        "right": [good_turing_from_tokens, good_turing_float32_loops],
        "wrong": [
            (good_turing_swapped, "swapped N_r and N_{r\\+1}"),
            (good_turing_r_not_r_plus_1, "use r where Good–Turing has r \\+ 1"),
            (good_turing_not_rescaled, "rescale the seen words"),
        (good_turing_fallback_only_at_the_largest_count, "keep r\\* = r wherever N_{r\\+1} = 0"),
        (good_turing_in_proportion_to_r, "in proportion to their counts r"),
            (good_turing_all_normalised_together, "divided every adjusted count by their sum"),
            (good_turing_unseen_mass_to_each, "share it, N_1/\\(N N_0\\) each"),
        ],
    },
    "check_nce_normaliser": {
        "right": [normaliser_by_golden_section, normaliser_by_bisection_float32],
        "wrong": [
            (normaliser_without_log_k, "log K too small"),
            (normaliser_with_k_plus_1, r"log\(\(K \+ 1\) q\)"),
            (normaliser_wrong_sign, "wrong sign"),
            (normaliser_one_newton_step, "one Newton step"),
            (normaliser_half_and_half, "at the minimum of L they sum to B"),
        ],
    },
    "check_best_baseline": {
        "right": [baseline_by_golden_section, baseline_from_three_points],
        "wrong": [
            (baseline_mean_reward, r"mean reward E\[G\]"),
            (baseline_zero, "you returned 0"),
            (baseline_unweighted_mean, "your baseline is .*; expected"),
            (baseline_weighted_by_p_squared, "your baseline is .*; expected"),
        ],
    },
}


def test_good_turing_cases_are_often_not_monotone_and_have_gaps():
    """The solution says: the raw r* are not monotone in r in about half of the checker's cases, and
    counts have gaps (so r* = r is kept below a gap, not only at the largest count)."""
    from courseware.checks.lm import good_turing, good_turing_cases

    not_monotone = with_gap = total = 0
    for seed in range(20):
        for (counts,) in good_turing_cases(torch.Generator().manual_seed(seed)):
            p, seen = good_turing(counts), counts > 0
            total += 1
            not_monotone += any(bool((p[seen & (counts > counts[i])] < p[i] - 1e-15).any())
                                for i in range(len(counts)) if counts[i] > 0)
            with_gap += bool((torch.bincount(counts.long())[1:] == 0).any())
    assert 0.35 * total < not_monotone < 0.65 * total
    assert with_gap > 0.8 * total


# ---- interpolated Kneser–Ney bigrams ----------------------------------------------------------------
def kneser_ney_loops(counts, discount, lower="continuation", combine="interpolate", weight="types",
                     uniform=True, kinds=True, denominator="types", unseen="p1", clamp=True, axis=0):
    """Independent: lists and loops, from the statement (and its most plausible misreadings)."""
    rows = counts.long().tolist()
    H, V = len(rows), len(rows[0])
    if axis == 1:  # N1+(h .), one per history, taken for N1+(. w): a shape clash unless H = V
        if H != V:
            raise RuntimeError(f"The size of tensor a ({V}) must match the size of tensor b ({H})")
        low = [sum(1 for c in rows[h] if c > 0) for h in range(H)]
    elif lower == "continuation":  # N1+(. w): how many histories w followed
        low = [sum(1 for h in range(H) if rows[h][w] > 0) for w in range(V)]
    else:  # tokens
        low = [sum(rows[h][w] for h in range(H)) for w in range(V)]
    total_low = sum(low) if denominator == "types" else sum(map(sum, rows))
    if uniform:
        spread = discount * sum(1 for c in low if c > 0) / V if kinds else 0.0
        p1 = [(max(c - discount, 0) + spread) / total_low for c in low]
    else:
        p1 = [c / total_low for c in low]
    out = []
    for row in rows:
        c_h = sum(row)
        if c_h == 0:
            out.append(list(p1) if unseen == "p1" else [1 / V] * V)
            continue
        gamma = discount * sum(1 for c in row if c > 0) / c_h if weight == "types" else discount / c_h
        kept = [(max(c - discount, 0) if clamp else c - discount) / c_h for c in row]
        if combine == "interpolate":
            out.append([kept[w] + gamma * p1[w] for w in range(V)])
        else:
            out.append([kept[w] if c > 0 else gamma * p1[w] for w, c in enumerate(row)])
    return torch.tensor(out, dtype=torch.float64)


def kneser_ney_vectorised(counts, discount):
    """Independent too: whole-matrix torch, float64."""
    c = counts.double()
    H, V = c.shape
    seen = c > 0
    followed = seen.sum(0).double()  # N1+(. w)
    p1 = ((followed - discount).clamp(min=0) + discount * (followed > 0).sum() / V) / followed.sum()
    c_h = c.sum(1, keepdim=True)
    gamma = discount * seen.sum(1, keepdim=True) / c_h.clamp(min=1)
    p = (c - discount).clamp(min=0) / c_h.clamp(min=1) + gamma * p1
    return torch.where(c_h > 0, p, p1.expand(H, V))


def kneser_ney_absolute_discounting(counts, discount):
    return kneser_ney_loops(counts, discount, lower="tokens")


def kneser_ney_backoff(counts, discount):
    return kneser_ney_loops(counts, discount, combine="backoff")


def kneser_ney_unseen_uniform(counts, discount):
    return kneser_ney_loops(counts, discount, unseen="uniform")


def kneser_ney_no_clamp(counts, discount):
    return kneser_ney_loops(counts, discount, clamp=False)


FAIRNESS["check_kneser_ney"] = {
    "right": [kneser_ney_loops, kneser_ney_vectorised],
    "wrong": [
        (kneser_ney_absolute_discounting, "that is absolute discounting"),
        (kneser_ney_backoff, "only for pairs never seen"),
        (kneser_ney_unseen_uniform, "a history never seen gets your uniform 1/V: it gets p_1"),
        (kneser_ney_no_clamp, "negative: .*max\\(c\\(h, w\\) - D, 0\\)"),
    ],
}


def test_the_kneser_ney_reference_is_the_library_model_and_sums_to_one():
    from courseware.checks.lm import kneser_ney_bigram, kneser_ney_cases
    from lib.part3_words.ngram import KneserNeyModel, NGramModel

    for seed in range(20):
        for counts, discount in kneser_ney_cases(torch.Generator().manual_seed(seed)):
            H, V = counts.shape
            words = tuple(f"w{i}" for i in range(V))
            table = {(f"h{h}",): Counter({words[w]: int(counts[h, w]) for w in range(V) if counts[h, w] > 0})
                     for h in range(H) if counts[h].sum() > 0}
            model = KneserNeyModel.from_counts(NGramModel(2, words, 0.0, None, table), (discount, discount))
            by_lib = torch.tensor([[model._prob(w, (f"h{h}",)) for w in words] for h in range(H)],
                                  dtype=torch.float64)
            ours = kneser_ney_bigram(counts, discount)
            torch.testing.assert_close(ours, by_lib, atol=1e-15, rtol=1e-13)
            torch.testing.assert_close(ours.sum(1), torch.ones(H, dtype=torch.float64), atol=1e-13, rtol=0)
            assert (counts.sum(1) == 0).any() and (counts.sum(0) == 0).any()  # an unseen history and word


def test_kneser_ney_accepts_an_independent_solution_on_20_seeds(capsys):
    from courseware.checks.lm import kneser_ney_cases

    for seed in range(20):
        cases = kneser_ney_cases(torch.Generator().manual_seed(seed))
        check_kneser_ney.judge(cases, [kneser_ney_loops(*case) for case in cases])
    check_kneser_ney(kneser_ney_loops)
    assert capsys.readouterr().out.startswith("✓ interpolated Kneser–Ney bigram probabilities agree")


@pytest.mark.parametrize("options, message", [
    (dict(lower="tokens"), "that is absolute discounting"),
    (dict(combine="backoff"), "only for pairs never seen"),
    (dict(weight="one"), "the weight is D N1\\+\\(h \\.\\) / c\\(h\\)"),
    (dict(uniform=False), "undiscounted and with no uniform part"),
    (dict(kinds=False), "forgot \\+ D·\\|\\{v: N1\\+\\(\\. v\\) > 0\\}\\|/V"),
    (dict(denominator="tokens"), "divides by the number of bigram tokens"),
    (dict(unseen="uniform"), "a history never seen gets your uniform 1/V: it gets p_1"),
    (dict(clamp=False), "negative: .*max\\(c\\(h, w\\) - D, 0\\)"),
    (dict(axis=1), "N1\\+\\(\\. w\\) counts down each column|your N1\\+\\(\\. w\\) counts along each row"),
])
def test_kneser_ney_rejects_the_plausible_mistakes_on_every_seed(options, message):
    from courseware.checks.lm import kneser_ney_cases

    for seed in range(20):
        cases = kneser_ney_cases(torch.Generator().manual_seed(seed))
        with pytest.raises(CheckFailed, match=message):
            check_kneser_ney.judge(cases, [_outcome(partial(kneser_ney_loops, **options), case) for case in cases])


def test_kneser_ney_rows_must_sum_to_one():
    from courseware.checks.lm import kneser_ney_bigram, kneser_ney_cases

    counts, discount = kneser_ney_cases(torch.Generator().manual_seed(0))[0]
    wrong = kneser_ney_bigram(counts, discount)
    wrong = torch.where(counts.sum(1, keepdim=True) > 0, wrong * 1.1, wrong)  # the seen rows only
    with pytest.raises(CheckFailed, match="sums to .*, not 1: each row is a distribution"):
        check_kneser_ney.judge([(counts, discount)], [wrong])


def test_kneser_ney_wrong_axis_is_named_whether_or_not_the_shapes_clash():
    from courseware.checks.lm import kneser_ney_cases

    cases = kneser_ney_cases(torch.Generator().manual_seed(0))
    square = [case for case in cases if case[0].shape[0] == case[0].shape[1]]
    oblong = [case for case in cases if case[0].shape[0] != case[0].shape[1]]
    assert square and oblong
    with pytest.raises(CheckFailed, match=r"counts along each row, which is N1\+\(h \.\)"):
        check_kneser_ney.judge(square[:1], [kneser_ney_loops(*square[0], axis=1)])
    with pytest.raises(CheckFailed, match=r"raised RuntimeError.*N1\+\(\. w\) counts down each column.*V numbers"):
        check_kneser_ney(lambda counts, discount: kneser_ney_loops(counts, discount, axis=1)
                         if counts.shape[0] != counts.shape[1] else kneser_ney_loops(*oblong[0], axis=1))


def test_kneser_ney_points_at_p1_when_the_unseen_row_is_off():
    from courseware.checks.lm import kneser_ney_bigram, kneser_ney_cases

    counts, discount = kneser_ney_cases(torch.Generator().manual_seed(0))[0]
    unseen = int((counts.sum(1) == 0).nonzero()[0])
    wrong = kneser_ney_bigram(counts, discount).clone()
    wrong[unseen] *= 0.9  # p_1 itself is off; the seen rows are not
    with pytest.raises(CheckFailed, match=rf"your row {unseen} \(a history never seen\) sums to .*this row is "
                       r"your p_1, and p_1 does not sum to 1: its denominator is Σ_v N1\+\(\. v\)"):
        check_kneser_ney.judge([(counts, discount)], [wrong])
    negative = kneser_ney_bigram(counts, discount).clone()
    negative[unseen, 0] = -0.01
    with pytest.raises(CheckFailed, match=r"below 0: .*without the max\(\., 0\)"):
        check_kneser_ney.judge([(counts, discount)], [negative])


@pytest.mark.parametrize("spoil", [
    lambda p: p + torch.nn.functional.one_hot(torch.tensor(p.shape[1] - 1), p.shape[1]) * 1e-4,  # one entry
    lambda p: p * 1.001,  # every row scaled
])
def test_kneser_ney_rejects_answers_just_off(spoil):
    from courseware.checks.lm import kneser_ney_bigram, kneser_ney_cases

    cases = kneser_ney_cases(torch.Generator().manual_seed(1))
    right = [kneser_ney_bigram(*case) for case in cases]
    check_kneser_ney.judge(cases, right)  # the unspoilt answers pass
    with pytest.raises(CheckFailed):
        check_kneser_ney.judge(cases, [spoil(p) for p in right])
