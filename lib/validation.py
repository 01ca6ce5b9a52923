"""Argument checks shared by the modules of ``lib``.

Every message names the argument, what was expected and what was found, so a
reader who passes the wrong thing learns what to pass instead.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence

import torch
from torch import Tensor, nn

__all__ = ["INTEGER_DTYPES", "check_module_dtype", "require_lengths", "require_even", "require_int", "require_number", "require_choice", "require_tokens",
           "require_float_tensor", "require_real", "require_words", "require_sentences",
           "require_same_dtype", "require_same_shape", "require_float_tensors", "require_ints",
           "require_callable", "require_instance", "require_ids", "require_special_ids", "require_log_prob",
           "require_broadcastable", "require_log_probs"]

INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def require_int(name: str, value: object, minimum: int = 1, maximum: Optional[int] = None) -> None:
    """Raise unless ``value`` is an integer (not a bool) of at least ``minimum`` (and at
    most ``maximum``, a bound on sizes whose cost would explode)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; found {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; found {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be an int <= {maximum}; found {value}")


def require_number(name: str, value: object, low: float, high: float = math.inf) -> None:
    """Raise unless ``value`` is a finite real number in ``[low, high]`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number; found {type(value).__name__}")
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be a finite number in [{low}, {high}]; found {value}")


def require_choice(name: str, value: object, choices: Sequence) -> None:
    """Raise unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}; found {value!r}")


def require_tokens(name: str, value: object, vocab_size: int, max_len: Optional[int] = None) -> None:
    """Raise unless ``value`` is a ``(B, T)`` integer tensor of ids in ``[0, vocab_size)``
    with at most ``max_len`` positions (when given)."""
    if not isinstance(value, Tensor) or value.dtype not in INTEGER_DTYPES:
        found = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be an integer torch.Tensor of token ids; found {found}")
    if value.dim() != 2:
        raise ValueError(f"{name} must have shape (B, T); found {tuple(value.shape)}")
    if value.numel() and (int(value.min()) < 0 or int(value.max()) >= vocab_size):
        raise ValueError(
            f"{name} must hold ids in [0, {vocab_size}); found ids from {int(value.min())} to {int(value.max())}"
        )
    if max_len is not None and value.shape[1] > max_len:
        raise ValueError(f"{name} may have at most max_len = {max_len} positions; found {value.shape[1]}")


def check_module_dtype(name: str, tensor: Tensor, module: nn.Module) -> None:
    """Raise TypeError unless ``tensor`` has the dtype of ``module``'s parameters (shared by lib's layers)."""
    parameter = next(module.parameters())
    if tensor.dtype != parameter.dtype:
        raise TypeError(
            f"{name} must have the dtype of the module's parameters ({parameter.dtype}); "
            f"found {tensor.dtype}. Convert the input or call .to({tensor.dtype}) on the module"
        )


def require_float_tensor(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is a floating-point ``torch.Tensor``."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; found {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype (e.g. torch.float32); found {value.dtype}")


def require_real(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is a finite real number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite real number; found {value!r}")


def require_words(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is a list or tuple of token strings (not one str)."""
    if isinstance(value, str):
        raise TypeError(f"{name} must be a list of token strings; found a str (split it into tokens first)")
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of token strings; found {type(value).__name__}")
    wrong = [type(token).__name__ for token in value if not isinstance(token, str)]
    if wrong:
        raise TypeError(f"{name} must be a list of token strings; found a list of {wrong[0]}")


def require_sentences(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` is a list or tuple of sentences, each a list of token strings."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of sentences, each a list of token strings; "
                        f"found {type(value).__name__}")
    for i, sentence in enumerate(value):
        require_words(f"{name}[{i}]", sentence)


def require_lengths(name: str, value: object, batch: int, width: int) -> Tensor:
    """Return ``value`` if it is a ``(batch,)`` integer tensor of lengths in ``[1, width]``; raise otherwise."""
    if not isinstance(value, Tensor) or value.dtype not in INTEGER_DTYPES:
        found = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be an integer torch.Tensor; found {found}")
    if tuple(value.shape) != (batch,):
        raise ValueError(f"{name} must have shape (B,) = ({batch},); found {tuple(value.shape)}")
    if batch and (int(value.min()) < 1 or int(value.max()) > width):
        raise ValueError(
            f"{name} must lie in [1, S] = [1, {width}]; found values from {int(value.min())} to {int(value.max())}"
        )
    return value


def require_same_dtype(reference_name: str, reference: Tensor, **tensors: Tensor) -> None:
    """Raise TypeError unless every tensor in ``tensors`` has the dtype of ``reference``."""
    for name, tensor in tensors.items():
        if tensor.dtype != reference.dtype:
            raise TypeError(f"{name} must have the same dtype as {reference_name} ({reference.dtype}); "
                            f"found {tensor.dtype}")


def require_same_shape(reference_name: str, reference: Tensor, **tensors: Tensor) -> None:
    """Raise ValueError unless every tensor in ``tensors`` has the shape of ``reference``."""
    for name, tensor in tensors.items():
        if tensor.shape != reference.shape:
            raise ValueError(f"{name} must have the shape of {reference_name} {tuple(reference.shape)}; "
                             f"found {tuple(tensor.shape)}")


def require_float_tensors(**tensors: object) -> None:
    """:func:`require_float_tensor` for each ``name=value``."""
    for name, value in tensors.items():
        require_float_tensor(name, value)


def require_ints(**values: object) -> None:
    """:func:`require_int` (at least 1) for each ``name=value``, e.g. the sizes of a layer."""
    for name, value in values.items():
        require_int(name, value)


def require_callable(name: str, value: object) -> None:
    """Raise TypeError unless ``value`` can be called."""
    if not callable(value):
        raise TypeError(f"{name} must be callable; found {type(value).__name__}")


def require_instance(name: str, value: object, expected: type) -> None:
    """Raise TypeError unless ``value`` is an instance of ``expected``."""
    if not isinstance(value, expected):
        raise TypeError(f"{name} must be a {expected.__name__}; found {type(value).__name__}")


def require_ids(name: str, value: object) -> None:
    """Raise unless ``value`` is a non-empty list or tuple of token ids (ints >= 0, not bools)."""
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) and i >= 0 for i in value):
        return
    raise (ValueError if isinstance(value, (list, tuple)) else TypeError)(
        f"{name} must be a non-empty list of token ids (ints >= 0); found {value!r}")


def require_special_ids(**ids: object) -> None:
    """Raise unless the special ids ``name=value`` (e.g. ``pad=0, bos=1, eos=2``) are distinct
    ints filling ``0 .. len(ids) - 1``: the ids before the ordinary tokens of a task."""
    for name, value in ids.items():
        require_int(name, value, 0, len(ids) - 1)
    if len(set(ids.values())) != len(ids):
        raise ValueError(f"{', '.join(ids)} must be distinct (the ordinary tokens start at {len(ids)}); "
                         f"found {', '.join(f'{name} = {value}' for name, value in ids.items())}")


def require_log_prob(name: str, value: object) -> None:
    """Raise unless ``value`` is a log-probability: a real number, ``-inf`` allowed, not NaN or ``+inf``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number (a log-probability); found {type(value).__name__}")
    if math.isnan(value) or value == math.inf:
        raise ValueError(f"{name} must be a log-probability (finite or -inf); found {value}")


def require_broadcastable(name: str, value: Tensor, reference_name: str, reference: Tensor) -> None:
    """Raise ValueError unless ``value`` broadcasts against ``reference``."""
    try:
        torch.broadcast_shapes(value.shape, reference.shape)
    except RuntimeError:
        raise ValueError(f"{name} must broadcast against {reference_name} {tuple(reference.shape)}; "
                         f"found {tuple(value.shape)}") from None


def require_even(name: str, value: object, reason: str) -> None:
    """Raise unless ``value`` is an even int >= 2; ``reason`` says why it must be even."""
    require_int(name, value)
    if value % 2:
        raise ValueError(f"{name} must be even ({reason}); found {value}")


def require_log_probs(name: str, value: object) -> None:
    """Raise unless ``value`` is a non-empty float tensor of log-probabilities (finite or ``-inf``)."""
    if not isinstance(value, Tensor) or not value.is_floating_point():
        found = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be a floating-point torch.Tensor; found {found}")
    if value.numel() == 0:
        raise ValueError(f"{name} must hold at least one token; found an empty tensor")
    if bool(torch.isnan(value).any()) or bool((value == math.inf).any()):
        raise ValueError(f"{name} must be log-probabilities (finite or -inf); found NaN or +inf")
