"""Activation functions and their derivatives, written from their formulas.

Every function ``f`` has a hand-written derivative ``f_grad`` (syllabus ACT1-ACT3):

* :func:`sigmoid` and :func:`tanh`, the saturating squashers whose derivatives are
  at most 1/4 and 1, the source of vanishing gradients in deep stacks;
* :func:`relu` (Nair & Hinton, 2010), :func:`leaky_relu` (Maas et al., 2013) and
  :func:`elu` (Clevert et al., 2016), the piecewise functions that do not saturate
  for positive inputs;
* :func:`selu` (Klambauer et al., 2017), an ELU scaled so that a standard normal
  input gives an output of mean 0 and variance 1; :func:`selu_constants` derives its
  two constants from that requirement;
* :func:`gelu` (Hendrycks & Gimpel, 2016), ``x Φ(x)``, exact or with its tanh or
  sigmoid approximation.

Every function takes a float tensor of any shape and returns one of the same shape and
dtype; a NaN input gives a NaN output. :func:`sigmoid` and :func:`tanh` compute half
precision (float16, bfloat16) in float32 and round once at the end, as torch does. The
tests compare each value and derivative with ``torch.nn.functional`` and autograd in
float64 (where torch has the function), and with the formula otherwise. Conventions at
the kinks follow autograd: the derivative of ``relu`` at 0 is 0, that of ``leaky_relu``
is the slope, that of ``elu`` is ``alpha``.

:func:`layer_statistics` and :func:`dead_units` are the two measurements the
chapter makes with them: how activations evolve through a deep random network,
and which ReLU units never fire.

References
----------
.. [1] V. Nair, G. E. Hinton. "Rectified Linear Units Improve Restricted Boltzmann
   Machines". ICML 2010.
.. [2] A. L. Maas, A. Y. Hannun, A. Y. Ng. "Rectifier Nonlinearities Improve Neural
   Network Acoustic Models". ICML Workshop on Deep Learning for Audio, Speech and
   Language Processing, 2013.
.. [3] D.-A. Clevert, T. Unterthiner, S. Hochreiter. "Fast and Accurate Deep Network
   Learning by Exponential Linear Units (ELUs)". ICLR 2016. arXiv:1511.07289.
.. [4] G. Klambauer, T. Unterthiner, A. Mayr, S. Hochreiter. "Self-Normalizing Neural
   Networks". NeurIPS 2017. arXiv:1706.02515.
.. [5] D. Hendrycks, K. Gimpel. "Gaussian Error Linear Units (GELUs)".
   arXiv:1606.08415, 2016.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from collections.abc import Callable
from typing import Literal, Optional

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from lib.checked import Finite, FloatDtype, PositiveInt

__all__ = [
    "sigmoid",
    "sigmoid_grad",
    "tanh",
    "tanh_grad",
    "relu",
    "relu_grad",
    "leaky_relu",
    "leaky_relu_grad",
    "elu",
    "elu_grad",
    "selu",
    "selu_grad",
    "gelu",
    "gelu_grad",
    "GELU_APPROXIMATIONS",
    "SELU_ALPHA",
    "SELU_LAMBDA",
    "selu_constants",
    "Activation",
    "ACTIVATIONS",
    "layer_statistics",
    "dead_units",
]

# The constants of Klambauer et al. (2017), to the 32 digits they and PyTorch quote;
# a float keeps the first 17. :func:`selu_constants` derives them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_LAMBDA = 1.0507009873554804934193349852946

GELU_APPROXIMATIONS = ("none", "tanh", "sigmoid")
GeluApproximation = Literal["none", "tanh", "sigmoid"]
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715  # the tanh approximation's cubic coefficient
_GELU_SIGMOID_SCALE = 1.702  # x Φ(x) ≈ x σ(1.702 x)
_HALF_DTYPES = (torch.float16, torch.bfloat16)  # computed in float32, as torch does


# ---------------------------------------------------------------------------
# Saturating functions.
# ---------------------------------------------------------------------------


def sigmoid(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """The logistic function σ(x) = 1 / (1 + e^{-x}), with values in (0, 1)."""
    if x.dtype in _HALF_DTYPES:
        return sigmoid(x.float()).to(x.dtype)
    # e^{-|x|} never overflows; for x < 0, σ(x) = e^{x} / (1 + e^{x}) is the same value.
    z = torch.exp(-x.abs())
    return torch.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def sigmoid_grad(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """σ'(x) = σ(x)(1 - σ(x)), at most 1/4 (at x = 0)."""
    s = sigmoid(x)
    return s * (1.0 - s)


def tanh(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """tanh(x) = 2σ(2x) - 1: a sigmoid stretched to (-1, 1) and centred at 0.

    Written literally, 2σ(2x) - 1 subtracts two numbers close to 1 and loses every digit
    near 0 (tanh(1e-8) would be 0 in float32); expm1 keeps them.
    """
    if x.dtype in _HALF_DTYPES:
        return tanh(x.float()).to(x.dtype)
    z = torch.expm1(-2.0 * x.abs())  # e^{-2|x|} - 1, exact to the last digit near 0
    return torch.copysign(-z / (2.0 + z), x)


def tanh_grad(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """tanh'(x) = 1 - tanh(x)², at most 1 (at x = 0)."""
    return 1.0 - tanh(x) ** 2


# ---------------------------------------------------------------------------
# Rectifiers: linear for positive inputs.
# ---------------------------------------------------------------------------


def relu(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """max(0, x)."""
    return torch.where(x < 0, torch.zeros_like(x), x)


def relu_grad(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """1 for x > 0, else 0 (0 at the kink, as autograd; NaN at a NaN)."""
    return torch.where(x.isnan(), x, (x > 0).to(x.dtype))


def leaky_relu(
    x: Float[Tensor, "*shape"], negative_slope: Finite = 0.01
) -> Float[Tensor, "*shape"]:
    """x for x > 0, else negative_slope · x (0 gives ReLU; torch's default is 0.01)."""
    return torch.where(x > 0, x, negative_slope * x)


def leaky_relu_grad(
    x: Float[Tensor, "*shape"], negative_slope: Finite = 0.01
) -> Float[Tensor, "*shape"]:
    """1 for x > 0, negative_slope otherwise (including the kink)."""
    slopes = torch.where(x > 0, torch.ones_like(x), torch.full_like(x, negative_slope))
    return torch.where(x.isnan(), x, slopes)  # NaN stays NaN


def elu(x: Float[Tensor, "*shape"], alpha: Finite = 1.0) -> Float[Tensor, "*shape"]:
    """x for x > 0, alpha (e^x - 1) otherwise: saturates at -alpha."""
    # expm1 keeps digits near 0; clamping keeps the unused branch finite for large x.
    return torch.where(x > 0, x, alpha * torch.expm1(x.clamp_max(0.0)))


def elu_grad(
    x: Float[Tensor, "*shape"], alpha: Finite = 1.0
) -> Float[Tensor, "*shape"]:
    """1 for x > 0, alpha e^x (that is, elu(x) + alpha) otherwise."""
    return torch.where(x > 0, torch.ones_like(x), alpha * torch.exp(x.clamp_max(0.0)))


def selu_constants() -> tuple[float, float]:
    """SELU's (alpha, lambda): the ones that map N(0, 1) to mean 0 and variance 1.

    For z ~ N(0, 1), the partial expectations have closed forms (Φ the normal CDF):
    E[z; z > 0] = 1/√(2π), E[z²; z > 0] = 1/2, E[e^z - 1; z <= 0] = √e Φ(-1) - 1/2 and
    E[(e^z - 1)²; z <= 0] = e² Φ(-2) - 2 √e Φ(-1) + 1/2. Mean 0 fixes alpha; a second
    moment of 1 then fixes lambda (Klambauer et al., 2017).
    """

    def phi(t):  # standard normal CDF
        return 0.5 * math.erfc(-t / math.sqrt(2.0))

    mean_negative = math.sqrt(math.e) * phi(-1.0) - 0.5
    square_negative = math.e**2 * phi(-2.0) - 2.0 * math.sqrt(math.e) * phi(-1.0) + 0.5
    alpha = -(1.0 / math.sqrt(2.0 * math.pi)) / mean_negative
    scale = (0.5 + alpha**2 * square_negative) ** -0.5
    return alpha, scale


def selu(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """λ elu(x, α) with α = SELU_ALPHA, λ = SELU_LAMBDA."""
    return SELU_LAMBDA * elu(x, SELU_ALPHA)


def selu_grad(x: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """λ for x > 0, λ α e^x otherwise."""
    return SELU_LAMBDA * elu_grad(x, SELU_ALPHA)


# ---------------------------------------------------------------------------
# GELU: x times the probability that a standard normal variable is below x.
# ---------------------------------------------------------------------------


def _normal_cdf(x: Tensor) -> Tensor:
    return 0.5 * torch.erfc(-x / math.sqrt(2.0))  # Φ(x) = (1 + erf(x/√2)) / 2


def gelu(
    x: Float[Tensor, "*shape"], approximate: GeluApproximation = "none"
) -> Float[Tensor, "*shape"]:
    """Gaussian error linear unit x Φ(x) ("none"), or one of its two approximations:
    x/2 (1 + tanh(√(2/π)(x + 0.044715 x³))) ("tanh") and x σ(1.702 x) ("sigmoid")."""
    if approximate == "none":
        return x * _normal_cdf(x)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x**3)))
    return x * sigmoid(_GELU_SIGMOID_SCALE * x)


def gelu_grad(
    x: Float[Tensor, "*shape"], approximate: GeluApproximation = "none"
) -> Float[Tensor, "*shape"]:
    """Derivative of :func:`gelu` (of the chosen form), by the product rule."""
    if approximate == "none":
        density = torch.exp(-0.5 * x**2) / math.sqrt(2.0 * math.pi)  # φ(x)
        return _normal_cdf(x) + x * density
    if approximate == "tanh":
        t = tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x**3))
        inner_grad = _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_CUBIC * x**2)
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t**2) * inner_grad
    s = sigmoid(_GELU_SIGMOID_SCALE * x)
    return s + _GELU_SIGMOID_SCALE * x * s * (1.0 - s)


# ---------------------------------------------------------------------------
# A registry for the chapter's plots and explorer.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Activation:
    """An activation function, its derivative and the name of its parameter (if any)."""

    name: str
    fn: Callable[..., Tensor]
    grad: Callable[..., Tensor]
    parameter: Optional[str] = None  # keyword of fn and grad, e.g. "alpha"

    def __call__(
        self, x: Float[Tensor, "*shape"], parameter: Optional[Finite] = None
    ) -> Float[Tensor, "*shape"]:
        return self.fn(x, **self._keywords(parameter))

    def derivative(
        self, x: Float[Tensor, "*shape"], parameter: Optional[Finite] = None
    ) -> Float[Tensor, "*shape"]:
        return self.grad(x, **self._keywords(parameter))

    def _keywords(self, parameter: Optional[Finite]) -> dict:
        return (
            {}
            if self.parameter is None or parameter is None
            else {self.parameter: parameter}
        )


ACTIVATIONS: dict[str, Activation] = {
    "sigmoid": Activation("sigmoid", sigmoid, sigmoid_grad),
    "tanh": Activation("tanh", tanh, tanh_grad),
    "relu": Activation("relu", relu, relu_grad),
    "leaky_relu": Activation(
        "leaky_relu", leaky_relu, leaky_relu_grad, "negative_slope"
    ),
    "elu": Activation("elu", elu, elu_grad, "alpha"),
    "selu": Activation("selu", selu, selu_grad),
    **{
        name: Activation(
            name, partial(gelu, approximate=form), partial(gelu_grad, approximate=form)
        )
        for name, form in (
            ("gelu", "none"),
            ("gelu_tanh", "tanh"),
            ("gelu_sigmoid", "sigmoid"),
        )
    },
}


# ---------------------------------------------------------------------------
# Measurements.
# ---------------------------------------------------------------------------


def layer_statistics(
    activation: Callable[[Tensor], Tensor],
    depth: PositiveInt = 20,
    width: PositiveInt = 256,
    batch: PositiveInt = 2048,
    generator: Optional[torch.Generator] = None,
    dtype: FloatDtype = torch.float32,
) -> Float[Tensor, "layers 2"]:
    """Mean and variance of the activations after each layer of a random deep network.

    The input has independent N(0, 1) entries; each layer is x ← activation(x W), with
    no bias and W drawn LeCun-normal, N(0, 1/width), so that a linear layer alone would
    keep the variance of its input. One row per layer: row l is layer l + 1's output.
    """
    x = torch.randn(batch, width, generator=generator, dtype=dtype)  # (batch, width)
    scale = math.sqrt(width)  # N(0, 1) entries divided by √width have variance 1/width
    stats = []
    for _ in range(depth):
        weight = torch.randn(width, width, generator=generator, dtype=dtype) / scale
        x = activation(x @ weight)  # (batch, width)
        stats.append(torch.stack([x.mean(), x.var()]))
    return torch.stack(stats)  # (depth, 2)


def dead_units(activations: Float[Tensor, "N H"]) -> Bool[Tensor, "H"]:
    """Which of the H units output exactly 0 for each of the N inputs: dead ReLUs.

    Such a unit also has derivative 0 for every input, so no gradient ever reaches its
    incoming weights: it stays dead.
    """
    if not len(activations):
        raise ValueError(
            "activations must hold at least one input (N >= 1): with none, every unit "
            f"would count as dead; found shape {tuple(activations.shape)}"
        )
    return (activations == 0).all(dim=0)
