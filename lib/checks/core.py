"""The machinery shared by every chapter's checkers (see :mod:`lib.checks`)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch


class CheckFailed(AssertionError):
    """The student's answer is wrong; the message says how."""


def fresh_generator() -> torch.Generator:
    """A generator seeded from the operating system: new inputs on every call."""
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(os.urandom(8), "little"))
    return generator


def _outcome(student_fn, args):
    """What the student's function returned, or ``"ErrorType: message"`` if it raised."""
    try:
        return student_fn(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    except Exception as error:  # reported to the student with its type, as the grader does
        return f"{type(error).__name__}: {error}"


def _require_tensor(found, context: str, hint: str = "") -> torch.Tensor:
    """Turn a raised error or a non-tensor result into a :class:`CheckFailed`."""
    if isinstance(found, str):
        if found.startswith("NotImplementedError"):
            raise CheckFailed("your function still raises NotImplementedError: write its body first")
        raise CheckFailed(f"your function raised {found.splitlines()[0].rstrip('.')} for {context}{hint}")
    if not isinstance(found, torch.Tensor):
        raise CheckFailed(f"your function must return a torch.Tensor; it returned {type(found).__name__}")
    return found


@dataclass(frozen=True)
class Check:
    """The checker of one coding exercise.

    ``make_cases(generator)`` draws the inputs (a list of argument tuples);
    ``judge(cases, results)`` compares what the student's function returned for
    each case with the book's implementation and raises :class:`CheckFailed`.
    A check cell calls the ``Check`` with the student's function; the grader
    (:mod:`lib.grading`) calls ``make_cases`` and ``judge`` in its own process
    and lets only the student's function run, in a sandbox. ``forbidden`` lists
    what the exercise text forbids (dotted names, or ``".method"``): the grader's
    static scan flags a solution that uses one for REVIEW
    (:func:`lib.grading.scan.review_flags`).
    """

    success: str  # printed after "✓ " when every case passes
    make_cases: Callable[[torch.Generator], list[tuple]]
    judge: Callable[[list[tuple], list], None]
    forbidden: tuple[str, ...] = ()

    def __call__(self, student_fn) -> None:
        if not callable(student_fn):
            raise CheckFailed(f"expected a function; found {type(student_fn).__name__}")
        cases = self.make_cases(fresh_generator())
        self.judge(cases, [_outcome(student_fn, args) for args in cases])
        print(f"✓ {self.success}")


# The dtype policy: inputs are float64; a float64 result is held to the checker's own tolerance,
# a result in a lower precision (float32, float16, bfloat16) to at least float32's, about 1e-4.
# Every slip the checkers diagnose is far larger than either.
FLOAT32_TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def tolerance_for(found: torch.Tensor, tolerance: dict) -> dict:
    """The tolerance a result is compared with, following its dtype (see ``FLOAT32_TOLERANCE``).

    Parameters
    ----------
    found : torch.Tensor
        The student's result, in the dtype it was returned in.
    tolerance : dict
        The checker's ``atol`` and ``rtol`` for float64 results.
    """
    if not isinstance(found, torch.Tensor):
        raise TypeError(f"found must be a torch.Tensor; found {type(found).__name__}")
    if not found.is_floating_point() or found.dtype == torch.float64:
        return dict(tolerance)
    return {key: max(value, FLOAT32_TOLERANCE[key]) for key, value in tolerance.items()}


def compare_tensors(found: torch.Tensor, expected: torch.Tensor, context: str, layout: str,
                    diagnoses: tuple, shape_hints: dict, reference: str,
                    tolerance: dict = dict(atol=1e-6, rtol=1e-6)) -> None:
    """Shape, NaN and value checks shared by the checkers.

    ``diagnoses`` are (wrong answer, message) pairs: a result equal to a known
    wrong answer gets that answer's message. ``shape_hints`` maps a wrong shape
    to advice. ``reference`` names the module the answer is compared with.
    ``tolerance`` applies to float64 results; lower-precision results are
    compared with :func:`tolerance_for`'s looser one.
    """
    if tuple(found.shape) != tuple(expected.shape):
        hint = shape_hints.get(tuple(found.shape), "")
        raise CheckFailed(f"for {context} your result has shape {tuple(found.shape)}; expected {layout} = "
                          f"{tuple(expected.shape)}{hint}")
    tolerance = tolerance_for(found, tolerance)
    returned = str(found.dtype).removeprefix("torch.")
    found = found.detach().to(expected.dtype)
    if torch.isnan(found).any():
        raise CheckFailed(f"your result contains NaN for {context}")
    if torch.allclose(found, expected, **tolerance):
        return
    for wrong, message in diagnoses:
        if wrong.shape == found.shape and torch.allclose(found, wrong, **tolerance):
            raise CheckFailed(f"for {context}: {message}")
    difference = (found - expected).abs()
    where = tuple(int(i) for i in torch.unravel_index(difference.argmax(), expected.shape))
    raise CheckFailed(f"for {context} your result differs from {reference}'s by up to {difference.max():.3g} "
                      f"(at index {where}; a {returned} result may differ by atol {tolerance['atol']:g} + "
                      f"rtol {tolerance['rtol']:g} × |expected|)")
