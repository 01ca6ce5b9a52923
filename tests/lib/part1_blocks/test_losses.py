"""Tests for lib/part1_blocks/losses.py.

References: ``torch.nn.functional`` (cross_entropy, nll_loss, log_softmax,
binary_cross_entropy[_with_logits]), formulas written out, hand-computed cases,
autograd (the ridge solution is a stationary point) and hypothesis properties.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part1_blocks.losses import (
    MARGIN_LOSSES,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    distribution_cross_entropy,
    empirical_risk,
    log_softmax,
    margin_loss,
    nll_loss,
    polynomial_features,
    ridge_fit,
    squared_loss,
    structural_risk,
    svm_objective,
)

FAST = settings(max_examples=50, deadline=None, database=None)
TOL = dict(atol=1e-12, rtol=1e-12)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def labels_pm1(n, seed=0):
    return torch.randint(0, 2, (n,), generator=torch.Generator().manual_seed(seed)).double() * 2 - 1


# ---------------------------------------------------------------------------
# Label forms and margin forms.
# ---------------------------------------------------------------------------


def test_squared_loss_by_hand():
    y = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    f = torch.tensor([0.5, 0.5, -2.0], dtype=torch.float64)
    torch.testing.assert_close(squared_loss(y, f), torch.tensor([0.25, 2.25, 9.0], dtype=torch.float64))


def test_margin_losses_at_margin_one_half():
    # The chapter's worked example: y = +1, f(x) = 0.5, so m = 0.5.
    m = torch.tensor([0.5], dtype=torch.float64)
    values = {name: margin_loss(name, m).item() for name in MARGIN_LOSSES}
    assert values == pytest.approx({"0-1": 0.0, "hinge": 0.5, "log": math.log(1 + math.exp(-0.5)),
                                    "exponential": math.exp(-0.5), "squared": 0.25, "absolute": 0.5})
    assert round(values["log"], 4) == 0.4741 and round(values["exponential"], 4) == 0.6065


@FAST
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=8), st.integers(0, 2**16))
def test_label_forms_are_functions_of_the_margin_for_pm1_labels(scores, seed):
    f = torch.tensor(scores, dtype=torch.float64)
    y = labels_pm1(len(scores), seed)
    m = y * f
    # Each loss written in its label form loss(y, f), the reference for the margin form.
    torch.testing.assert_close(margin_loss("hinge", m), (1.0 - y * f).clamp_min(0.0), **TOL)
    torch.testing.assert_close(margin_loss("exponential", m), torch.exp(-y * f), **TOL)
    # (y - f)² = y²(1 - y f)² = (1 - m)² and |y - f| = |1 - m| because y² = 1.
    torch.testing.assert_close(margin_loss("squared", m), squared_loss(y, f), **TOL)
    torch.testing.assert_close(margin_loss("absolute", m), (y - f).abs(), **TOL)
    # The log loss of logistic regression, P(y | x) = σ(y f), is log(1 + e^{-m}).
    torch.testing.assert_close(margin_loss("log", m), -torch.log(torch.sigmoid(y * f)), atol=1e-12, rtol=1e-9)
    # 0-1 on the predicted label sign(f); f = 0 has no sign (the margin form counts it as an error).
    decided = f != 0
    torch.testing.assert_close(margin_loss("0-1", m)[decided], (y != torch.sign(f))[decided].double())


@FAST
@given(st.floats(-20, 20))
def test_convex_surrogates_bound_the_zero_one_loss(value):
    m = torch.tensor([value], dtype=torch.float64)
    zero_one = margin_loss("0-1", m)
    for name in ("hinge", "exponential", "squared"):
        assert margin_loss(name, m) >= zero_one
    assert margin_loss("log", m) / math.log(2) >= zero_one  # in base 2 the log loss passes through (0, 1)


def test_log_margin_loss_is_stable_for_large_margins():
    m = torch.tensor([-1000.0, 0.0, 1000.0], dtype=torch.float64)
    torch.testing.assert_close(margin_loss("log", m), torch.tensor([1000.0, math.log(2), 0.0], dtype=torch.float64))


def test_svm_objective_is_half_norm_squared_plus_c_times_hinge_sum():
    x, y = randn(7, 3, seed=1), labels_pm1(7, seed=2)
    w, b, c = randn(3, seed=3), torch.tensor(0.3, dtype=torch.float64), 2.5
    expected = 0.5 * sum(float(v) ** 2 for v in w)
    for i in range(7):
        expected += c * max(0.0, 1 - float(y[i]) * (float(x[i] @ w) + 0.3))
    assert svm_objective(w, b, x, y, c).item() == pytest.approx(expected, rel=1e-12)


# ---------------------------------------------------------------------------
# Cross-entropy.
# ---------------------------------------------------------------------------


def test_binary_cross_entropy_matches_torch():
    q = torch.sigmoid(randn(10, seed=4))
    p = torch.rand(10, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(binary_cross_entropy(q, p, reduction),
                                   F.binary_cross_entropy(q, p, reduction=reduction), **TOL)


def test_binary_cross_entropy_with_logits_matches_torch_even_for_huge_logits():
    z = torch.cat([randn(10, seed=6) * 5, torch.tensor([-800.0, 800.0], dtype=torch.float64)])
    p = torch.rand(12, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(binary_cross_entropy_with_logits(z, p, reduction),
                                   F.binary_cross_entropy_with_logits(z, p, reduction=reduction), **TOL)


def test_log_softmax_and_nll_match_torch():
    logits = torch.cat([randn(5, 4, seed=8), torch.tensor([[1000.0, 0.0, -1000.0, 999.0]], dtype=torch.float64)])
    targets = torch.tensor([0, 3, 2, 1, 1, 3])
    torch.testing.assert_close(log_softmax(logits), F.log_softmax(logits, dim=-1), **TOL)
    torch.testing.assert_close(log_softmax(logits.T, dim=0), F.log_softmax(logits.T, dim=0), **TOL)
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(nll_loss(log_softmax(logits), targets, reduction),
                                   F.nll_loss(F.log_softmax(logits, -1), targets, reduction=reduction), **TOL)


def test_cross_entropy_is_log_softmax_then_nll_and_matches_torch():
    logits, targets = randn(6, 5, seed=9) * 3, torch.tensor([4, 0, 2, 2, 1, 3])
    ours = cross_entropy(logits, targets)
    torch.testing.assert_close(ours, nll_loss(log_softmax(logits), targets), **TOL)
    torch.testing.assert_close(ours, F.cross_entropy(logits, targets), **TOL)
    torch.testing.assert_close(cross_entropy(logits, targets, "none"),
                               F.cross_entropy(logits, targets, reduction="none"), **TOL)
    # Soft targets (probabilities) too.
    soft = torch.softmax(randn(6, 5, seed=10), -1)
    torch.testing.assert_close(cross_entropy(logits, soft), F.cross_entropy(logits, soft), **TOL)
    # Gradients: softmax(z) - onehot(y), averaged.
    z = logits.clone().requires_grad_()
    cross_entropy(z, targets).backward()
    expected = (torch.softmax(logits, -1) - F.one_hot(targets, 5)) / 6
    torch.testing.assert_close(z.grad, expected, **TOL)


def test_cross_entropy_worked_example():
    # Logits (2, 1, 0.1), true class 0: softmax (0.6590, 0.2424, 0.0986), loss -log 0.6590 = 0.4170.
    logits = torch.tensor([[2.0, 1.0, 0.1]], dtype=torch.float64)
    assert [round(v, 4) for v in torch.softmax(logits, -1)[0].tolist()] == [0.659, 0.2424, 0.0986]
    assert round(cross_entropy(logits, torch.tensor([0])).item(), 4) == 0.417


def test_multiclass_cross_entropy_is_minus_sum_p_log_q_not_the_notes_binary_form():
    # Note 002 calls -Σ_x (p log q + (1 - p) log(1 - q)) the standard cross-entropy. That is
    # the two-class form; for C classes it is H(p, q) = -Σ_c p_c log q_c, which is what
    # CrossEntropyLoss computes. The binary form summed over classes gives a different number.
    p = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)
    logits = torch.tensor([[2.0, 1.0, 0.1]], dtype=torch.float64)
    q = torch.softmax(logits, -1)
    multi = distribution_cross_entropy(p, q)
    torch.testing.assert_close(multi, F.cross_entropy(logits, p, reduction="none"), **TOL)
    notes_form = binary_cross_entropy(q, p, reduction="sum")
    assert notes_form.item() > multi.item() + 0.5
    # With two classes, q = (q1, 1 - q1), the binary form is the multi-class one.
    q2 = torch.tensor([[0.3, 0.7]], dtype=torch.float64)
    p2 = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(distribution_cross_entropy(p2, q2),
                               binary_cross_entropy(q2[:, 0], p2[:, 0], reduction="none"), **TOL)


# ---------------------------------------------------------------------------
# Risks.
# ---------------------------------------------------------------------------


def test_empirical_and_structural_risk_by_hand():
    losses = torch.tensor([1.0, 2.0, 6.0])
    assert empirical_risk(losses).item() == 3.0
    w = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]])]
    assert structural_risk(losses, w, 0.1).item() == pytest.approx(3.0 + 0.1 * 14.0)


def test_polynomial_features():
    x = torch.tensor([2.0, -1.0], dtype=torch.float64)
    assert polynomial_features(x, 3).tolist() == [[1, 2, 4, 8], [1, -1, 1, -1]]


@pytest.mark.parametrize("penalty", [1e-4, 0.1, 3.0])
def test_ridge_fit_is_a_stationary_point_of_the_structural_risk(penalty):
    x, y = randn(20, 4, seed=11), randn(20, seed=12)
    w = ridge_fit(x, y, penalty).requires_grad_()
    risk = structural_risk(squared_loss(y, x @ w), [w], penalty)
    (grad,) = torch.autograd.grad(risk, w)
    assert grad.abs().max() < 1e-12


def test_ridge_fit_without_penalty_is_least_squares():
    x, y = randn(20, 4, seed=13), randn(20, seed=14)
    torch.testing.assert_close(ridge_fit(x, y, 0.0), torch.linalg.pinv(x) @ y, **TOL)


# ---------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        # A wrong call names the parameter, what it was given and what its signature asks for;
        # shapes named alike (*shape, B, C, N) must agree across the arguments.
        (lambda: squared_loss(torch.ones(3), torch.ones(2)), TypeError,
         r"(?s)parameter 'f'.*Actual value: f32\[2\].*shape=torch.Size\(\[3\]\)"),
        (lambda: squared_loss([1.0], torch.ones(1)), TypeError, r"(?s)parameter 'y'.*Actual value: \[1\.0\]"),
        (lambda: margin_loss("cubic", torch.ones(1)), TypeError, r"(?s)parameter 'name'.*Actual value: 'cubic'"),
        (lambda: binary_cross_entropy(torch.tensor([1.5]), torch.tensor([1.0])), ValueError, r"q must lie in \[0, 1\]"),
        (lambda: binary_cross_entropy(torch.zeros(0), torch.zeros(0)), ValueError,
         "reduction='mean' needs at least one loss; found an empty batch"),
        (lambda: cross_entropy(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)), ValueError,
         "found an empty batch"),
        (lambda: cross_entropy(torch.zeros(2, 3), torch.tensor([0, 3])), ValueError,
         r"targets must be class indices in \[0, C\), C = 3 .*; found 0..3"),
        (lambda: nll_loss(torch.zeros(2, 0), torch.tensor([0, 0])), ValueError,
         r"in \[0, C\), C = 0 \(the columns of log_probs\); found 0..0"),
        (lambda: cross_entropy(torch.zeros(2, 3), torch.tensor([0])), TypeError,
         r"(?s)parameter 'targets'.*Actual value: i64\[1\].*B=2"),
        (lambda: cross_entropy(torch.zeros(3), torch.tensor([0])), TypeError,
         r"(?s)parameter 'logits'.*Float\[Tensor, 'B C'\]"),
        (lambda: cross_entropy(torch.zeros(2, 3), [0, 1]), TypeError, r"(?s)parameter 'targets'.*Actual value: \[0, 1\]"),
        (lambda: nll_loss(torch.zeros(2, 3), torch.tensor([0, 1]), "average"), TypeError,
         r"(?s)parameter 'reduction'.*Actual value: 'average'"),
        (lambda: ridge_fit(torch.zeros(3, 2), torch.zeros(3), -1.0), TypeError,
         r"(?s)parameter 'penalty'.*Actual value: -1\.0"),
        (lambda: ridge_fit(torch.zeros(3, 2), torch.zeros(3, dtype=torch.float64), 0.5), TypeError,
         r"targets must have the dtype of features \(torch.float32\); found torch.float64"),
        (lambda: svm_objective(torch.zeros(2), torch.tensor(0.0), torch.zeros(3, 2), torch.zeros(3), 0.0),
         TypeError, r"(?s)parameter 'c'.*Actual value: 0\.0"),
        (lambda: empirical_risk(torch.zeros(2, 2)), TypeError, r"(?s)parameter 'losses'.*Actual value: f32\[2,2\]"),
        (lambda: empirical_risk(torch.zeros(0)), ValueError, "losses must hold at least one loss"),
        # Rules a signature cannot state stay in the body and name what they found.
        (lambda: binary_cross_entropy(torch.tensor([0.5]), torch.tensor([2.0])), ValueError,
         r"p must lie in \[0, 1\]; found 2$"),
        (lambda: binary_cross_entropy(torch.tensor([0.5]), torch.tensor([float("nan")])), ValueError,
         r"p must lie in \[0, 1\]; found nan"),
        (lambda: binary_cross_entropy_with_logits(torch.tensor([10.0]), torch.tensor([2.0])), ValueError,
         r"p must lie in \[0, 1\]; found 2$"),
        (lambda: cross_entropy(torch.zeros(1, 3), torch.tensor([[-1.0, 2.0, 0.0]])), ValueError,
         r"targets must lie in \[0, 1\]; found -1$"),
        (lambda: binary_cross_entropy(torch.tensor([0.5]).half(), torch.tensor([1.0], dtype=torch.float64)),
         TypeError, r"p must have the dtype of q \(torch.float16\); found torch.float64"),
        (lambda: squared_loss(torch.ones(2), torch.ones(2, dtype=torch.float64)), TypeError,
         r"f must have the dtype of y"),
        (lambda: ridge_fit(torch.zeros(0, 2), torch.zeros(0), 0.5), ValueError, "features must have at least one row"),
        (lambda: ridge_fit(torch.zeros(3, 2).half(), torch.zeros(3).half(), 0.5), TypeError,
         r"(?s)parameter 'features'.*Float32Or64"),
        (lambda: svm_objective(torch.zeros(2), torch.tensor(0.0, dtype=torch.float64), torch.zeros(3, 2),
                               torch.zeros(3), 1.0), TypeError,
         r"bias must have the dtype of weight \(torch.float32\); found torch.float64"),
        (lambda: cross_entropy(torch.zeros(2, 3).half(), torch.zeros(2, 3, dtype=torch.float64)), TypeError,
         r"targets must have the dtype of logits \(torch.float16\); found torch.float64"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()
