"""The checkers of chapter 9: right answers pass however they are written (and, for the experiment,
however the search stopped), wrong ones fail saying why. ``FAIRNESS`` holds each checker to an
independent right answer and the most plausible wrong ones (tests/test_exercise_fairness.py);
the masked softmax and attention checkers are also tested in tests/test_checks.py."""
import math
import re

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_sharpening_scale
from lib.checks.attention import SHARPENING_RTOL


def test_the_checker_is_registered_under_its_name():
    assert CHECKS["check_sharpening_scale"] is check_sharpening_scale


# ---- masked softmax: written from the statement, loops and plain floats ----------------------
def masked_softmax_by_rows(scores, valid_lens):
    """Row by row in Python floats: exp of the shifted valid scores over their sum, 0 elsewhere."""
    out = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        n = int(valid_lens[b])
        for q in range(scores.shape[1]):
            if n == 0:
                continue
            row = [float(s) for s in scores[b, q, :n]]
            top = max(row)
            exps = [math.exp(s - top) for s in row]
            for k, e in enumerate(exps):
                out[b, q, k] = e / sum(exps)
    return out


def keep_mask(scores, valid_lens, extra=0):
    return torch.arange(scores.shape[-1]) < (valid_lens + extra)[:, None, None]


def softmax_without_mask(scores, valid_lens):
    return torch.softmax(scores, -1)


def softmax_nan_on_empty_rows(scores, valid_lens):
    return torch.softmax(scores.masked_fill(~keep_mask(scores, valid_lens), -math.inf), -1)


def mask_one_too_many_kept(scores, valid_lens):
    """Off by one: keys at positions <= valid_lens kept."""
    return torch.softmax(scores.masked_fill(~keep_mask(scores, valid_lens, 1), -math.inf), -1).nan_to_num(0.0)


def softmax_over_the_queries(scores, valid_lens):
    return torch.softmax(scores.masked_fill(~keep_mask(scores, valid_lens), -math.inf), 1).nan_to_num(0.0)


# ---- scaled dot-product attention: loops over every leading index and query ------------------
def attention_by_loops(q, k, v):
    """For each leading index and each query t: weights exp(q_t·k_s/√d) / Σ, then Σ_s α_s v_s."""
    lead, (T, d), (S, dv) = q.shape[:-2], q.shape[-2:], v.shape[-2:]
    q2, k2, v2 = q.reshape(-1, T, d), k.reshape(-1, S, d), v.reshape(-1, S, dv)
    out = torch.zeros(q2.shape[0], T, dv, dtype=q.dtype)
    for i in range(q2.shape[0]):
        for t in range(T):
            scores = [sum(float(q2[i, t, j]) * float(k2[i, s, j]) for j in range(d)) / math.sqrt(d)
                      for s in range(S)]
            top = max(scores)
            exps = [math.exp(x - top) for x in scores]
            for s in range(S):
                out[i, t] += exps[s] / sum(exps) * v2[i, s]
    return out.reshape(*lead, T, dv)


def attention_unscaled(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1), -1) @ v


def attention_divided_by_d(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], -1) @ v


def attention_softmax_over_queries(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -2) @ v


def attention_without_transpose(q, k, v):
    return torch.softmax(q @ k / q.shape[-1] ** 0.5, -1) @ v


# ---- the scale that makes attention nearly hard -----------------------------------------------
def largest_weight(c, scores):
    return torch.softmax(c * scores, dim=0).max()


def scale_by_doubling_then_bisection(scores, top):
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < top:
        high *= 2
    for _ in range(80):
        middle = (low + high) / 2
        if largest_weight(middle, scores) < top:
            low = middle
        else:
            high = middle
    return torch.tensor(high)


def scale_stopping_on_the_weight(scores, top):
    """The statement read literally: bisect on c until the largest weight is within a relative
    1e-6 of top, and stop there (c itself is then known only as finely as the weight needs)."""
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < top:
        low, high = high, 2 * high
    while True:
        middle = (low + high) / 2
        weight = float(largest_weight(middle, scores))
        if abs(weight - top) < 0.99e-6 * top:
            return torch.tensor(middle, dtype=torch.float64)
        low, high = (middle, high) if weight < top else (low, middle)


def scale_by_newton_on_log_weight(scores, top):
    """Newton's method on log α_max(c) - log top, whose derivative is max(s) - E_α[s] > 0 (float32 result)."""
    c = 1.0
    for _ in range(100):
        weights = torch.softmax(c * scores, dim=0)
        slope = float(scores.max() - (weights * scores).sum())
        c = max(c - (math.log(float(weights.max())) - math.log(top)) / slope, c / 4)
    return torch.tensor(c, dtype=torch.float32)


def scale_for_the_two_largest_only(scores, top):
    first, second = scores.topk(2).values
    return math.log(top / (1 - top)) / (first - second)


def temperature_instead_of_scale(scores, top):
    return 1 / scale_stopping_on_the_weight(scores, top)


def scale_stopping_on_a_loose_weight(scores, top):
    """Stops when the weight is within 1e-3 of top: a thousand times the relative error allowed."""
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < top:
        low, high = high, 2 * high
    while True:
        middle = (low + high) / 2
        weight = float(largest_weight(middle, scores))
        if abs(weight - top) < 1e-3:
            return torch.tensor(middle, dtype=torch.float64)
        low, high = (middle, high) if weight < top else (low, middle)


def the_weight_instead_of_the_scale(scores, top):
    return torch.tensor(top, dtype=torch.float64)


def scale_at_weight(scores, weight):
    """The c at which the largest weight is ``weight``, by doubling and 80 bisection steps, in float64."""
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < weight:
        low, high = high, 2 * high
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if largest_weight(middle, scores) < weight else (low, middle)
    return torch.tensor((low + high) / 2, dtype=torch.float64)


def scale_just_below_the_bound(scores, top):
    """A search that only just misses: its weight is 1.04e-6 (relative) below top, the bound being 1e-6."""
    return scale_at_weight(scores, top * (1 - 1.04e-6))


FAIRNESS = {
    "check_masked_softmax": {
        "right": [masked_softmax_by_rows],
        "wrong": [
            (softmax_without_mask, r"your weights at key positions >= \d+ are not 0"),
            (softmax_nan_on_empty_rows, r"NaN or inf .*a row whose valid length is 0 must be all zeros"),
            (mask_one_too_many_kept, r"your weights at key positions >= \d+ are not 0"),
            (softmax_over_the_queries, r"your weights for query \d+ sum to .*; expected 1"),
        ],
    },
    "check_scaled_dot_product_attention": {
        "right": [attention_by_loops],
        "wrong": [
            (attention_unscaled, "you did not divide the scores by √d"),
            (attention_divided_by_d, "you divided the scores by d; divide by √d"),
            (attention_softmax_over_queries, "your softmax runs over the queries"),
            (attention_without_transpose, "q @ k does not fit"),
        ],
    },
    "check_sharpening_scale": {
        "right": [scale_stopping_on_the_weight, scale_by_newton_on_log_weight, scale_by_doubling_then_bisection],
        "wrong": [
            (temperature_instead_of_scale, "that is the temperature τ = 1/c"),
            (scale_for_the_two_largest_only, "right for the two largest scores alone"),
            (scale_stopping_on_a_loose_weight, r"is (below|above) top by a relative error of .* \(allowed: 1e-6\)"),
            (the_weight_instead_of_the_scale, "you returned top, the weight asked for"),
            (scale_just_below_the_bound, r"is below top by a relative error of 1\.04e-06 \(allowed: 1e-6\)"),
        ],
    },
}


@pytest.mark.parametrize("answer", [scale_by_doubling_then_bisection, scale_by_newton_on_log_weight,
                                    scale_stopping_on_the_weight])
def test_scales_found_by_different_searches_pass(answer, capsys):
    check_sharpening_scale(answer)
    assert capsys.readouterr().out.startswith("✓ your scales give the largest weight asked for")


def test_the_tolerance_is_on_the_weight_not_on_the_scale():
    """A c whose weight is within the relative 1e-6 passes even when c itself is further than 1e-6 from
    the bisection's; a c just outside it fails, and the message gives the relative error of the weight."""
    check = CHECKS["check_sharpening_scale"]
    cases = check.make_cases(torch.Generator().manual_seed(0))
    scores, top = cases[0]
    exact = float(check.reference(scores, top))

    def scale_at(relative_error):  # the c at which the weight is top * (1 + relative_error)
        return scale_by_doubling_then_bisection(scores, top * (1 + relative_error))

    inside = scale_at(0.9 * SHARPENING_RTOL)
    assert abs(float(inside) / exact - 1) > SHARPENING_RTOL  # the old test on c would reject it
    check.judge(cases[:1], [inside])
    with pytest.raises(CheckFailed, match=r"above top by a relative error of 1\.1e-06 \(allowed: 1e-6\): c must be "
                                          "smaller"):
        check.judge(cases[:1], [scale_at(1.1 * SHARPENING_RTOL)])
    with pytest.raises(CheckFailed, match=r"below top by a relative error of 2e-05 .*c must be larger"):
        check.judge(cases[:1], [scale_at(-2e-5)])


def printed_error(message):
    """The relative error a failure message prints, as the number a student reads."""
    return float(re.search(r"relative error of (\S+) \(allowed", message).group(1))


@pytest.mark.parametrize("relative_error", [-1.04e-6, 1.04e-6, -1.0004e-6, 1.0000004e-6])
def test_a_near_miss_prints_an_error_that_differs_from_the_bound(relative_error):
    """Just outside the bound, the printed error must not read as the bound itself ("1e-06 (allowed:
    1e-6)" tells a student nothing): it gets as many digits as it takes to differ."""
    check = CHECKS["check_sharpening_scale"]
    cases = check.make_cases(torch.Generator().manual_seed(16))
    scores, top = cases[0]
    with pytest.raises(CheckFailed) as failure:
        check.judge(cases[:1], [scale_at_weight(scores, top * (1 + relative_error))])
    printed = printed_error(str(failure.value))
    assert printed != SHARPENING_RTOL
    assert printed == pytest.approx(abs(relative_error), rel=1e-3)


def test_a_near_miss_is_not_called_the_two_score_slip():
    """Where the two-score scale lies within 0.1% of the right one (about one draw in fifteen), a search
    that just misses the bound, on either side, is told its relative error, not that it used two scores.
    The two-score scale itself is named wherever it misses the bound clearly (by more than twice the
    allowed error); where it misses only just, it too is told by how much."""
    check = CHECKS["check_sharpening_scale"]
    near, named = 0, 0
    for seed in range(40):
        for scores, top in check.make_cases(torch.Generator().manual_seed(seed)):
            right = float(check.reference(scores, top))
            two = float(scale_for_the_two_largest_only(scores, top))
            if abs(two / right - 1) > 1e-3:
                continue
            near += 1
            for relative_error in (-1.04e-6, 1.04e-6):
                with pytest.raises(CheckFailed, match="by a relative error of 1.04e-06"):
                    check.judge([(scores, top)], [scale_at_weight(scores, top * (1 + relative_error))])
            two_error = abs(float(largest_weight(two, scores)) / top - 1)
            if two_error <= SHARPENING_RTOL:
                check.judge([(scores, top)], [torch.tensor(two, dtype=torch.float64)])
                continue
            expected = ("right for the two largest scores alone" if two_error > 2 * SHARPENING_RTOL
                        else "below top by a relative error of")
            with pytest.raises(CheckFailed, match=expected):
                check.judge([(scores, top)], [torch.tensor(two, dtype=torch.float64)])
            named += expected.startswith("right")
    assert near >= 10 and named >= 1, (near, named)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (temperature_instead_of_scale, "that is the temperature τ = 1/c"),
        (scale_for_the_two_largest_only, "right for the two largest scores alone"),
        (lambda s, top: scale_by_doubling_then_bisection(s, top) * 1.01,
         r"the largest weight of softmax\(c \* scores\) is above top by a relative error of"),
        (lambda s, top: -scale_by_doubling_then_bisection(s, top), "is not positive"),
        (lambda s, top: scale_by_doubling_then_bisection(s, top).reshape(1, 1).repeat(2, 1),
         "expected a scalar"),
        (lambda s, top: float(scale_by_doubling_then_bisection(s, top)),
         "must return a torch.Tensor; it returned float"),
    ],
)
def test_wrong_scales_fail_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_sharpening_scale(answer)


def test_solve_increasing_brackets_from_either_side_of_1():
    from lib.checks.core import solve_increasing
    assert math.isclose(solve_increasing(lambda x: x * x, 2.0), math.sqrt(2), rel_tol=1e-12)
    assert math.isclose(solve_increasing(lambda x: x**3, 1e-6), 1e-2, rel_tol=1e-12)
