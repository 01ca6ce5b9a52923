"""The experiment checker of chapter 9: scales found by any search pass, wrong scales fail saying why.
(The chapter's other checkers are tested in tests/test_checks.py.)"""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_sharpening_scale


def test_the_checker_is_registered_under_its_name():
    assert CHECKS["check_sharpening_scale"] is check_sharpening_scale


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


def scale_by_newton_on_log_weight(scores, top):
    """Newton's method on log α_max(c) - log top, whose derivative is max(s) - E_α[s] > 0 (float32 result)."""
    c = 1.0
    for _ in range(100):
        weights = torch.softmax(c * scores, dim=0)
        slope = float(scores.max() - (weights * scores).sum())
        c = max(c - (math.log(float(weights.max())) - math.log(top)) / slope, c / 4)
    return torch.tensor(c, dtype=torch.float32)


@pytest.mark.parametrize("answer", [scale_by_doubling_then_bisection, scale_by_newton_on_log_weight])
def test_scales_found_by_different_searches_pass(answer, capsys):
    check_sharpening_scale(answer)
    assert capsys.readouterr().out.startswith("✓ your scales give the largest weight asked for")


def two_largest_only(scores, top):
    first, second = scores.topk(2).values
    return math.log(top / (1 - top)) / (first - second)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s, top: 1 / scale_by_doubling_then_bisection(s, top), "that is the temperature τ = 1/c"),
        (two_largest_only, "right for the two largest scores alone"),
        (lambda s, top: scale_by_doubling_then_bisection(s, top) * 1.01,
         "softmax\\(c \\* scores\\).max\\(\\) is .* it must be"),
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
