"""What lib's signatures declare, and how they are checked at the call.

A signature says what a function accepts: ``x: Float[Tensor, "*shape"]`` (a float tensor
of any shape, as jaxtyping writes it; sizes named alike in two arguments, such as
``"B C"``, must agree), ``depth: PositiveInt``, ``reduction: Reduction``. In a module
listed in :data:`CHECKED_MODULES`, every call of a function the module defines with
``def``, its private helpers included, is checked against its signature (beartype,
through jaxtyping's import hook, installed by ``lib/__init__.py``): a wrong call raises
a ``TypeError`` that names the parameter, the value it was given and what the
signature asks for. A rule a signature cannot state (an axis that must exist, two
tensors that must share a dtype, values inside a tensor) stays in the body, as an ``if``
that raises.

The value rules are declared here, once. A number may be any real (or integral) number,
NumPy's included, but not a bool. A check costs about 10 to 15 µs a call (the Benchmarks
page), and a function calling a checked helper pays for both.

References: P. Kidger, jaxtyping (https://docs.kidger.site/jaxtyping/); C. Curry,
beartype (https://beartype.readthedocs.io).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Annotated, Literal, Union

import torch
from beartype import beartype
from beartype.door import is_bearable
from beartype.vale import Is
from jaxtyping import AbstractDtype, Float
from torch import Tensor

# The modules whose calls are checked against their signatures (the others still check
# their arguments in their bodies, with lib.validation, until they are rewritten so).
CHECKED_MODULES = (
    "lib.activations",
    "lib.losses",
    "lib.rnn",
    "lib.attention",
    "lib.seq2seq",
    "lib.transformer_blocks",
    "lib.transformer",
    "lib.optim",
    "lib.schedules",
    "lib.memory.hopfield",
    "lib.memory.memn2n",
    "lib.memory.ntm",
    "lib.memory.turing",
    "lib.decoding",
)

typechecked = beartype  # what the import hook applies, with jaxtyping's shape checks


def is_a_number(value: object) -> bool:
    # True is an int to Python, not a number to a reader.
    return not isinstance(value, bool)


def is_finite(value: Real) -> bool:
    return is_a_number(value) and math.isfinite(value)


def is_at_least_0(value: Real) -> bool:
    return is_finite(value) and value >= 0


def is_above_0(value: Real) -> bool:
    return is_finite(value) and value > 0


def is_at_least_1(value: Integral) -> bool:
    return is_a_number(value) and value >= 1


def is_at_least_0_or_inf(value: Real) -> bool:
    return is_a_number(value) and value >= 0  # NaN fails, inf passes


def is_above_0_or_inf(value: Real) -> bool:
    return is_a_number(value) and value > 0


def is_a_rate(value: Real) -> bool:
    return is_finite(value) and 0 <= value < 1


def is_a_fraction(value: Real) -> bool:
    return is_finite(value) and 0 <= value <= 1


Axis = Annotated[Integral, Is[is_a_number]]  # an axis; negative counts from the end
NonNegativeInt = Annotated[Integral, Is[is_at_least_0]]
PositiveInt = Annotated[Integral, Is[is_at_least_1]]
Finite = Annotated[Real, Is[is_finite]]
NonNegative = Annotated[Real, Is[is_at_least_0]]
Positive = Annotated[Real, Is[is_above_0]]
NonNegativeOrInf = Annotated[Real, Is[is_at_least_0_or_inf]]  # a norm's bound
PositiveOrInf = Annotated[Real, Is[is_above_0_or_inf]]  # a norm's order q, inf included
DropoutRate = Annotated[Real, Is[is_a_rate]]  # a probability of dropping, 0 <= p < 1
Fraction = Annotated[Real, Is[is_a_fraction]]  # in [0, 1]: a schedule's factor, a share
DecayRate = Annotated[Real, Is[is_a_rate]]  # an average's decay β, 0 <= β < 1
Reduction = Literal["mean", "sum", "none"]


def each(hint: object) -> object:
    """A sequence every item of which is a ``hint``, as in
    ``seeds: each(NonNegativeInt)`` (beartype alone looks at one item, drawn at random,
    of a long sequence)."""
    return Annotated[
        Sequence[hint], Is[lambda items: all(is_bearable(item, hint) for item in items)]
    ]


def or_scalar_tensor(hint: object) -> object:
    """``hint``, or a one-element float tensor holding one (``torch.optim`` takes ``lr``
    and ``betas`` so, and reads them once, as numbers)."""

    def holds_one(tensor: Tensor) -> bool:
        return (
            tensor.numel() == 1
            and tensor.is_floating_point()
            and is_bearable(tensor.item(), hint)
        )

    return Union[hint, Annotated[Tensor, Is[holds_one]]]


def holds_only_plus_or_minus_1(tensor: Tensor) -> bool:
    return bool(((tensor == 1) | (tensor == -1)).all())


def spins(shape: str) -> object:
    """A float tensor of ``+1`` and ``-1`` with the jaxtyping ``shape``, as in
    ``patterns: spins("P N")`` (a Hopfield network's states)."""
    return Annotated[Float[Tensor, shape], Is[holds_only_plus_or_minus_1]]


def positive_int_at_most(bound: int) -> object:
    """An int from 1 to ``bound``, as in ``n_units: positive_int_at_most(4096)``."""

    def is_at_most(value: Integral) -> bool:
        return value <= bound

    is_at_most.__name__ = is_at_most.__qualname__ = f"is_at_most_{bound}"
    return Annotated[Integral, Is[is_at_least_1], Is[is_at_most]]


def is_a_float_dtype(dtype: torch.dtype) -> bool:
    return dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)


FloatDtype = Annotated[torch.dtype, Is[is_a_float_dtype]]


def is_a_device(value: str) -> bool:
    try:
        torch.device(value)
    except (RuntimeError, TypeError):
        return False
    return True


Device = torch.device | Annotated[str, Is[is_a_device]]  # torch.device("cpu") or "cpu"


class Float32Or64(AbstractDtype):
    """float32 or float64, as in ``Float32Or64[Tensor, "N D"]``: the real dtypes that
    torch.linalg takes."""

    dtypes = ["float32", "float64"]


class IntegerDtype(AbstractDtype):
    """torch's integer dtypes with arithmetic on every device, as in
    ``IntegerDtype[Tensor, "B"]`` (lengths, indices)."""

    dtypes = ["uint8", "int8", "int16", "int32", "int64"]


def same_dtype(**tensors: Tensor) -> None:
    """Raise a ``TypeError`` naming the first of ``tensors`` whose dtype is not the
    first one's."""
    (first, reference), *others = tensors.items()
    for name, tensor in others:
        if tensor.dtype != reference.dtype:
            raise TypeError(
                f"{name} must have the dtype of {first} ({reference.dtype}); "
                f"found {tensor.dtype}"
            )


# --- rules for lib.decoding ---


def is_a_log_prob(value: Real) -> bool:
    return is_a_number(value) and value <= 0  # NaN fails, -inf passes


LogProb = Annotated[Real, Is[is_a_log_prob]]  # <= 0, -inf included (probability 0)


def non_negative_at_most(bound: float) -> object:
    """A finite number from 0 to ``bound``, as in ``non_negative_at_most(50.0)``."""

    def is_at_most(value: Real) -> bool:
        return value <= bound

    is_at_most.__name__ = is_at_most.__qualname__ = f"is_at_most_{bound:g}"
    return Annotated[Real, Is[is_at_least_0], Is[is_at_most]]
