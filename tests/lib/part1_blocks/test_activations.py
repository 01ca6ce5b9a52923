"""Tests for lib/part1_blocks/activations.py.

Values and hand-written derivatives are compared with ``torch.nn.functional`` and
autograd in float64 (1e-12); the sigmoid-approximated GELU, which torch lacks, with
its formula written differently. SELU's constants are derived again with mpmath.
"""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part1_blocks.activations import (
    ACTIVATIONS,
    SELU_ALPHA,
    SELU_LAMBDA,
    dead_units,
    elu,
    elu_grad,
    gelu,
    gelu_grad,
    layer_statistics,
    leaky_relu,
    leaky_relu_grad,
    relu,
    relu_grad,
    selu,
    selu_constants,
    selu_grad,
    sigmoid,
    sigmoid_grad,
    tanh,
    tanh_grad,
)

TOL = dict(atol=1e-12, rtol=0)
FAST = settings(max_examples=50, deadline=None, database=None)

# A dense grid, the kink at 0 exactly, and values far out in both tails.
X = torch.cat([torch.linspace(-12, 12, 2401, dtype=torch.float64),
               torch.tensor([0.0, -40.0, 40.0, -700.0, 700.0], dtype=torch.float64)])

# (ours, our derivative, torch's function)
PAIRS = {
    "sigmoid": (sigmoid, sigmoid_grad, torch.sigmoid),
    "tanh": (tanh, tanh_grad, torch.tanh),
    "relu": (relu, relu_grad, F.relu),
    "leaky_relu-0.01": (leaky_relu, leaky_relu_grad, F.leaky_relu),
    "leaky_relu-0.2": (lambda x: leaky_relu(x, 0.2), lambda x: leaky_relu_grad(x, 0.2),
                       lambda x: F.leaky_relu(x, 0.2)),
    "elu-1": (elu, elu_grad, F.elu),
    "elu-0.3": (lambda x: elu(x, 0.3), lambda x: elu_grad(x, 0.3), lambda x: F.elu(x, 0.3)),
    "selu": (selu, selu_grad, F.selu),
    "gelu": (gelu, gelu_grad, F.gelu),
    "gelu-tanh": (lambda x: gelu(x, "tanh"), lambda x: gelu_grad(x, "tanh"),
                  lambda x: F.gelu(x, approximate="tanh")),
    # torch has no sigmoid approximation: the reference is its formula, x σ(1.702 x).
    "gelu-sigmoid": (lambda x: gelu(x, "sigmoid"), lambda x: gelu_grad(x, "sigmoid"),
                     lambda x: x * torch.sigmoid(1.702 * x)),
}


def autograd_derivative(fn, x):
    x = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(fn(x).sum(), x)
    return grad


@pytest.mark.parametrize("name", list(PAIRS))
def test_values_match_torch(name):
    ours, _, reference = PAIRS[name]
    torch.testing.assert_close(ours(X), reference(X), **TOL)


@pytest.mark.parametrize("name", list(PAIRS))
def test_derivatives_match_torch_autograd_including_the_kink(name):
    _, our_grad, reference = PAIRS[name]
    torch.testing.assert_close(our_grad(X), autograd_derivative(reference, X), **TOL)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_registry_derivative_is_the_derivative_of_the_registry_function(name):
    # Autograd through our own function (away from the kink) agrees with the hand-written one,
    # and gradcheck confirms both against finite differences.
    activation = ACTIVATIONS[name]
    x = X[(X.abs() > 1e-3) & (X.abs() < 50)]
    for parameter in (None, 0.25):
        fn = lambda t: activation(t, parameter)  # noqa: E731
        torch.testing.assert_close(activation.derivative(x, parameter), autograd_derivative(fn, x), **TOL)
    sample = torch.linspace(-3.05, 3.05, 12, dtype=torch.float64, requires_grad=True)  # avoids 0
    assert torch.autograd.gradcheck(lambda t: activation(t), (sample,))


def test_registry_names_and_parameters():
    assert list(ACTIVATIONS) == ["sigmoid", "tanh", "relu", "leaky_relu", "elu", "selu",
                                 "gelu", "gelu_tanh", "gelu_sigmoid"]
    assert ACTIVATIONS["leaky_relu"].parameter == "negative_slope"
    assert ACTIVATIONS["elu"].parameter == "alpha"
    x = torch.tensor([-2.0], dtype=torch.float64)
    assert ACTIVATIONS["leaky_relu"](x, 0.3).item() == pytest.approx(-0.6)
    assert ACTIVATIONS["relu"](x, 0.3).item() == 0.0  # no parameter: the value is ignored


# ---------------------------------------------------------------------------
# Properties and the numbers the chapter prints.
# ---------------------------------------------------------------------------


def test_sigmoid_saturates_to_0_and_1_with_vanishing_derivative():
    # The notes say a large input of either sign gives an output near 0; only the
    # derivative does. σ(+30) ≈ 1, σ(-30) ≈ 0, and σ'(±30) ≈ 1e-13.
    x = torch.tensor([-30.0, 0.0, 30.0], dtype=torch.float64)
    torch.testing.assert_close(sigmoid(x), torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64), atol=1e-12, rtol=0)
    assert sigmoid_grad(x)[1] == 0.25 and sigmoid_grad(x)[[0, 2]].max() < 1e-12
    assert sigmoid_grad(X).max() == 0.25 and tanh_grad(X).max() == 1.0


@FAST
@given(st.floats(-30, 30))
def test_symmetries(value):
    x = torch.tensor([value], dtype=torch.float64)
    torch.testing.assert_close(sigmoid(-x), 1 - sigmoid(x), **TOL)
    torch.testing.assert_close(tanh(-x), -tanh(x), **TOL)
    for form in ("none", "tanh", "sigmoid"):
        # x Φ(x) - (-x) Φ(-x) = x (Φ(x) + Φ(-x)) = x, and likewise for both approximations.
        torch.testing.assert_close(gelu(x, form) - gelu(-x, form), x, atol=1e-12, rtol=1e-12)


@FAST
@given(st.floats(-20, 0), st.floats(0.05, 3))
def test_elu_derivative_is_elu_plus_alpha_for_negative_inputs(value, alpha):
    x = torch.tensor([value], dtype=torch.float64)
    torch.testing.assert_close(elu_grad(x, alpha), elu(x, alpha) + alpha, **TOL)


def test_gelu_approximation_errors():
    # The chapter prints these maxima over [-8, 8]: about 4.7e-4 (tanh) and 2.0e-2 (sigmoid).
    x = torch.linspace(-8, 8, 160001, dtype=torch.float64)
    tanh_error = (gelu(x, "tanh") - gelu(x)).abs().max().item()
    sigmoid_error = (gelu(x, "sigmoid") - gelu(x)).abs().max().item()
    assert 4.5e-4 < tanh_error < 4.8e-4
    assert 0.020 < sigmoid_error < 0.021


# ---------------------------------------------------------------------------
# SELU's constants.
# ---------------------------------------------------------------------------


def test_selu_constants_derived_in_float64_match_the_quoted_ones_and_torch():
    alpha, scale = selu_constants()
    assert alpha == pytest.approx(SELU_ALPHA, rel=1e-15)
    assert scale == pytest.approx(SELU_LAMBDA, rel=1e-15)
    # torch's selu(1) = λ and selu(-∞) = -λα.
    ends = F.selu(torch.tensor([1.0, -800.0], dtype=torch.float64))
    assert ends[0].item() == SELU_LAMBDA
    assert ends[1].item() == pytest.approx(-SELU_LAMBDA * SELU_ALPHA, rel=1e-15)


def test_selu_constants_to_30_digits_with_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    phi = lambda t: mpmath.ncdf(t)  # noqa: E731
    e = mpmath.e
    alpha = -(1 / mpmath.sqrt(2 * mpmath.pi)) / (mpmath.sqrt(e) * phi(-1) - mpmath.mpf(1) / 2)
    square = e**2 * phi(-2) - 2 * mpmath.sqrt(e) * phi(-1) + mpmath.mpf(1) / 2
    scale = 1 / mpmath.sqrt(mpmath.mpf(1) / 2 + alpha**2 * square)
    assert abs(alpha - mpmath.mpf("1.6732632423543772848170429916717")) < mpmath.mpf("1e-30")
    assert abs(scale - mpmath.mpf("1.0507009873554804934193349852946")) < mpmath.mpf("1e-30")
    # The defining property: for z ~ N(0, 1), selu(z) has mean 0 and second moment 1.
    density = lambda z: mpmath.npdf(z)  # noqa: E731
    negative = lambda z: scale * alpha * (mpmath.exp(z) - 1)  # noqa: E731
    mean = mpmath.quad(lambda z: negative(z) * density(z), [-mpmath.inf, 0]) \
        + mpmath.quad(lambda z: scale * z * density(z), [0, mpmath.inf])
    second = mpmath.quad(lambda z: negative(z) ** 2 * density(z), [-mpmath.inf, 0]) \
        + mpmath.quad(lambda z: (scale * z) ** 2 * density(z), [0, mpmath.inf])
    assert abs(mean) < mpmath.mpf("1e-30") and abs(second - 1) < mpmath.mpf("1e-30")


# ---------------------------------------------------------------------------
# Measurements.
# ---------------------------------------------------------------------------


def test_layer_statistics_by_hand_for_one_layer():
    generator = torch.Generator().manual_seed(3)
    stats = layer_statistics(torch.tanh, depth=1, width=4, batch=5, generator=generator, dtype=torch.float64)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    w = torch.randn(4, 4, generator=generator, dtype=torch.float64) / 2.0
    out = torch.tanh(x @ w)
    torch.testing.assert_close(stats, torch.stack([out.mean(), out.var()])[None])


def test_selu_keeps_mean_0_and_variance_1_through_20_layers_and_relu_does_not():
    generator = torch.Generator().manual_seed(0)
    selu_stats = layer_statistics(selu, depth=20, width=256, batch=1024, generator=generator)
    assert selu_stats[:, 0].abs().max() < 0.05
    assert (selu_stats[:, 1] - 1).abs().max() < 0.08
    relu_stats = layer_statistics(relu, depth=20, width=256, batch=1024, generator=generator)
    assert relu_stats[-1, 1] < 1e-4  # each layer halves E[x²] under LeCun init


def test_dead_units_by_hand():
    activations = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    activations[1, 2] = 0.5
    assert dead_units(activations).tolist() == [True, False, False]
    assert dead_units(activations[:1]).tolist() == [True, False, True]  # one input
    with pytest.raises(ValueError, match=r"activations must hold at least one input \(N >= 1\).*found shape \(0, 3\)"):
        dead_units(activations[:0])


# ---------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        # A wrong call names the parameter, what it was given and what its signature asks for.
        (lambda: sigmoid([1.0]), TypeError, r"(?s)parameter 'x'.*Actual value: \[1\.0\]"),
        (lambda: relu(torch.tensor([1, 2])), TypeError, r"(?s)parameter 'x'.*Actual value: i64\[2\]"),
        (lambda: gelu(torch.zeros(2), "erf"), TypeError,
         r"(?s)parameter 'approximate'.*Actual value: 'erf'.*Literal\['none', 'tanh', 'sigmoid'\]"),
        (lambda: gelu_grad(torch.zeros(2), None), TypeError, r"(?s)parameter 'approximate'.*Actual value: None"),
        (lambda: leaky_relu(torch.zeros(2), "0.1"), TypeError,
         r"(?s)parameter 'negative_slope'.*Actual value: '0\.1'"),
        (lambda: elu(torch.zeros(2), float("nan")), TypeError, r"(?s)parameter 'alpha'.*Actual value: nan"),
        (lambda: layer_statistics(relu, depth=0), TypeError, r"(?s)parameter 'depth'.*Actual value: 0"),
        (lambda: layer_statistics(relu, dtype=torch.int64), TypeError, r"(?s)parameter 'dtype'.*torch.int64"),
        (lambda: layer_statistics(relu, dtype=torch.float8_e4m3fn), TypeError, r"(?s)parameter 'dtype'.*float8"),
        (lambda: dead_units(torch.zeros(3)), TypeError,
         r"(?s)parameter 'activations'.*Actual value: f32\[3\].*Float\[Tensor, 'N H'\]"),
    ],
)
def test_bad_input_is_rejected_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_float32_inputs_keep_their_dtype():
    x = torch.linspace(-3, 3, 7)
    for activation in ACTIVATIONS.values():
        assert activation(x).dtype == torch.float32 and activation.derivative(x).dtype == torch.float32


# ---------------------------------------------------------------------------
# NaN, inf, precision near 0 and half precision (issue 22).
# ---------------------------------------------------------------------------

SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-300, -2.5, 3.0],
                       dtype=torch.float64)


@pytest.mark.parametrize("name", list(PAIRS))
def test_nan_and_inf_propagate_as_in_torch(name):
    ours, _, reference = PAIRS[name]
    torch.testing.assert_close(ours(SPECIAL), reference(SPECIAL), equal_nan=True, **TOL)


@pytest.mark.parametrize("name", list(PAIRS))
def test_derivatives_at_nan_are_nan(name):
    # Autograd's relu and leaky_relu pass the incoming gradient at NaN (1 or the slope);
    # ours return NaN there so that no derivative hides a NaN input.
    _, derivative, _ = PAIRS[name]
    assert torch.isnan(derivative(torch.tensor([float("nan")], dtype=torch.float64))).all()


def test_relu_keeps_the_sign_of_negative_zero_like_torch():
    x = torch.tensor([-0.0, 0.0])
    assert torch.equal(torch.signbit(relu(x)), torch.signbit(F.relu(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_tanh_keeps_its_digits_near_zero(dtype):
    x = torch.tensor([1e-8, 1e-6, -0.000999, 1e-3, -0.02], dtype=dtype)
    # 2σ(2x) - 1 gave tanh(1e-8) = 0, tanh(1e-6) 7.3 % off in float32 and -0.0039 for
    # bfloat16 tanh(-0.000999); ours agree with torch to one unit of the last place.
    torch.testing.assert_close(tanh(x), torch.tanh(x), rtol=torch.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_half_precision_is_computed_in_float32_like_torch(name, dtype):
    ours, _, reference = PAIRS[name]
    x = (torch.randn(100_000, generator=torch.Generator().manual_seed(0)) * 8).to(dtype)
    result = ours(x)
    assert result.dtype == dtype
    # Both round the same float32 value once: at most one unit of the last place apart.
    torch.testing.assert_close(result, reference(x), rtol=torch.finfo(dtype).eps, atol=torch.finfo(dtype).tiny)


@pytest.mark.parametrize("x", [torch.tensor([1, 2]), torch.tensor([True, False])])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_integer_and_bool_tensors_are_rejected_by_every_activation(name, x):
    with pytest.raises(TypeError, match=r"(?s)parameter 'x'.*Float\[Tensor, '\*shape'\]"):
        ACTIVATIONS[name](x)
