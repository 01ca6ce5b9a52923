"""Argument checks shared by the modules of ``lib``.

Every message names the argument, what was expected and what was found, so a
reader who passes the wrong thing learns what to pass instead.
"""
from __future__ import annotations

import math
import numbers

__all__ = ["require_int", "require_number"]


def require_int(name: str, value: object, minimum: int = 1) -> None:
    """Raise unless ``value`` is an integer (not a bool) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int; found {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; found {value}")


def require_number(name: str, value: object, low: float, high: float = math.inf) -> None:
    """Raise unless ``value`` is a finite real number in ``[low, high]`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number; found {type(value).__name__}")
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be a finite number in [{low}, {high}]; found {value}")
