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
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Annotated, Literal, Union

import numpy as np
import torch
from beartype import beartype
from beartype.door import is_bearable
from beartype.vale import Is
from jaxtyping import AbstractDtype, Float
from torch import Tensor

# The modules whose calls are checked against their signatures: every module a chapter
# teaches, and the foundations they share (tests/lib/test_display.py holds the book to
# it).
CHECKED_MODULES = (
    "lib.training",
    "lib.corpus",
    "lib.part1_blocks.activations",
    "lib.part1_blocks.losses",
    "lib.part1_blocks.optim",
    "lib.part1_blocks.schedules",
    "lib.part1_blocks.heavy_ball",
    "lib.part2_recurrent.rnn",
    "lib.part2_recurrent.char_lm",
    "lib.part2_recurrent.gating",
    "lib.part2_recurrent.recall_task",
    "lib.part3_words.word2vec",
    "lib.part3_words.embeddings",
    "lib.part3_words.tree_softmax",
    "lib.part3_words.ppmi",
    "lib.part3_words.ngram",
    "lib.part3_words.lm",
    "lib.part3_words.softmax_approx",
    "lib.part3_words.reinforce",
    "lib.part3_words.decoding",
    "lib.part3_words.metrics",
    "lib.part4_attention.attention",
    "lib.part4_attention.seq2seq",
    "lib.part4_attention.pointer",
    "lib.part4_attention.pairs",
    "lib.part4_attention.date_task",
    "lib.part4_attention.sorting_task",
    "lib.part4_attention.reversal_task",
    "lib.part4_attention.positional",
    "lib.part4_attention.transformer_blocks",
    "lib.part4_attention.transformer",
    "lib.part4_attention.transformer_recipe",
    "lib.part4_attention.pretrained",
    "lib.part4_attention.pretraining",
    "lib.part5_memory.hopfield",
    "lib.part5_memory.modern_hopfield",
    "lib.part5_memory.memn2n",
    "lib.part5_memory.ntm",
    "lib.part5_memory.turing",
    "lib.part5_memory.babi",
)

typechecked = beartype  # what the import hook applies, with jaxtyping's shape checks


# --- numbers --------------------------------------------------------------------------


def is_a_number(value: object) -> bool:
    # True is an int to Python, not a number to a reader.
    return not isinstance(value, bool)


def is_finite(value: Real) -> bool:
    return is_a_number(value) and math.isfinite(value)


def is_at_least_0(value: Real) -> bool:
    return is_finite(value) and value >= 0


def is_above_0(value: Real) -> bool:
    return is_finite(value) and value > 0


def is_above_1(value: Real) -> bool:
    return is_finite(value) and value > 1


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


def is_a_typo_rate(value: Real) -> bool:
    return is_finite(value) and 1e-12 <= value <= 1  # log(typo) stays finite


def is_at_most_10_in_size(value: Real) -> bool:
    return is_finite(value) and -10 <= value <= 10  # count ** 10 is finite below 1e30


def is_a_log_prob(value: Real) -> bool:
    return is_a_number(value) and value <= 0  # NaN fails, -inf passes


def fits_in_a_long(value: Integral) -> bool:
    return is_a_number(value) and -(2**63) <= value < 2**63


def is_a_token_id(value: object) -> bool:
    # Any object: lib.part2_recurrent.char_lm also calls it on each item of a long list
    # in a body, where each(TokenId) would cost ~2 µs an item.
    return (
        isinstance(value, Integral)
        and not isinstance(value, bool)
        and 0 <= value < 2**63
    )


Axis = Annotated[Integral, Is[is_a_number]]  # an axis; negative counts from the end
AnyInt = Annotated[Integral, Is[fits_in_a_long]]  # any int a LongTensor can hold
TokenId = Annotated[Integral, Is[is_a_token_id]]  # an id >= 0 a LongTensor can hold
NonNegativeInt = Annotated[Integral, Is[is_at_least_0]]
PositiveInt = Annotated[Integral, Is[is_at_least_1]]
Number = Annotated[Real, Is[is_a_number]]  # any real, NaN and inf too: a diverged loss
Finite = Annotated[Real, Is[is_finite]]
NonNegative = Annotated[Real, Is[is_at_least_0]]
Positive = Annotated[Real, Is[is_above_0]]
NonNegativeOrInf = Annotated[Real, Is[is_at_least_0_or_inf]]  # a norm's bound
PositiveOrInf = Annotated[Real, Is[is_above_0_or_inf]]  # a norm's order q, inf included
DropoutRate = Annotated[Real, Is[is_a_rate]]  # a probability of dropping, 0 <= p < 1
Fraction = Annotated[Real, Is[is_a_fraction]]  # in [0, 1]: a schedule's factor, a share
DecayRate = Annotated[Real, Is[is_a_rate]]  # an average's decay β, 0 <= β < 1
TypoRate = Annotated[Real, Is[is_a_typo_rate]]  # a probability of a typo, in [1e-12, 1]
LogBase = Annotated[Real, Is[is_above_1]]  # the base b of a logarithm, b > 1
LogProb = Annotated[Real, Is[is_a_log_prob]]  # <= 0, -inf included (probability 0)
NoiseExponent = Annotated[Real, Is[is_at_most_10_in_size]]  # word2vec's ns_exponent
Reduction = Literal["mean", "sum", "none"]


# --- rules built from a bound ---------------------------------------------------------


def int_from(low: int, high: float = math.inf) -> object:
    """An int from ``low`` to ``high``, as in ``length: int_from(2, 1000)``."""

    def is_at_least(value: Integral) -> bool:
        return is_a_number(value) and value >= low

    def is_at_most(value: Integral) -> bool:
        return value <= high

    is_at_least.__name__ = is_at_least.__qualname__ = f"is_at_least_{low}"
    is_at_most.__name__ = is_at_most.__qualname__ = f"is_at_most_{high}"
    return Annotated[Integral, Is[is_at_least], Is[is_at_most]]


def positive_int_at_most(bound: int) -> object:
    """An int from 1 to ``bound``, as in ``n_units: positive_int_at_most(4096)``."""
    return int_from(1, bound)


AtLeast2Int = int_from(2)  # a clock's hours, a length


def non_negative_at_most(bound: float) -> object:
    """A finite number from 0 to ``bound``, as in ``non_negative_at_most(50.0)``."""

    def is_at_most(value: Real) -> bool:
        return value <= bound

    is_at_most.__name__ = is_at_most.__qualname__ = f"is_at_most_{bound:g}"
    return Annotated[Real, Is[is_at_least_0], Is[is_at_most]]


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


# --- sequences and mappings: beartype alone looks at one item, drawn at random --------


def each(hint: object) -> object:
    """A sequence every item of which is a ``hint``, as in
    ``seeds: each(NonNegativeInt)``."""

    def every_item_matches(items: Sequence) -> bool:
        return all(is_bearable(item, hint) for item in items)

    return Annotated[Sequence[hint], Is[every_item_matches]]


def distinct_each(hint: object) -> object:
    """A non-empty sequence of distinct items, every one a ``hint``, as in
    ``steps: distinct_each(int_from(1, 9))``."""

    def are_distinct(items: Sequence) -> bool:
        return 0 < len(items) == len(set(items))

    return Annotated[each(hint), Is[are_distinct]]


def each_entry(key: object, value: object) -> object:
    """A mapping whose every key is a ``key`` and every value a ``value``, as in
    ``models: each_entry(NonNegativeInt, nn.Module)``."""

    def holds_them(mapping: Mapping) -> bool:
        return all(
            is_bearable(k, key) and is_bearable(v, value) for k, v in mapping.items()
        )

    return Annotated[Mapping[key, value], Is[holds_them]]


def is_a_list_of_words(words: Sequence[str]) -> bool:
    # One str is a Sequence of str too: "king" would be the words k, i, n, g.
    return not isinstance(words, str) and all(isinstance(w, str) for w in words)


def is_sentences(value: Sequence) -> bool:
    return not isinstance(value, str) and all(
        is_a_list_of_words(sentence) for sentence in value
    )


def is_not_a_str(value: object) -> bool:
    return not isinstance(value, str)


def is_a_vector_of_weights(array: np.ndarray) -> bool:
    return array.ndim == 1 and is_bearable(array.tolist(), each(NonNegative))


Words = Annotated[Sequence[str], Is[is_a_list_of_words]]  # ["king", "woman"]
Sentences = Annotated[Sequence[Sequence[str]], Is[is_sentences]]  # a list of Words
# A list of references, each a sentence. A str among them passes here so that the body
# can say how to mend the likeliest slip: one reference given where a list is expected.
References = Annotated[each(Union[Words, str]), Is[is_not_a_str]]
# Weights w_n >= 0: a sequence of numbers, or a 1-D NumPy array of them.
Weights = Union[each(NonNegative), Annotated[np.ndarray, Is[is_a_vector_of_weights]]]


# --- dtypes and devices ---------------------------------------------------------------


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


class IdDtype(AbstractDtype):
    """int32 or int64, as in ``IdDtype[Tensor, "B T"]``: the ids that ``nn.Embedding``
    looks up."""

    dtypes = ["int32", "int64"]


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
