"""The machinery shared by every chapter's checkers (see :mod:`courseware.checks`).

A checker is data: how to draw the cases, the book's answer to one case, and a
table of known wrong answers (:class:`Slip`), each with what to tell a student
whose result equals it. :class:`Check` runs the same comparison for every
exercise (:func:`compare_tensors`): shape, dtype and NaN first, then the value;
a wrong value is explained by the closest slip that reproduces the student's
result on every case, else by a property every right answer has (``rules``),
else by where and by how much it differs.
"""
from __future__ import annotations

import copy
import functools
import hashlib
import os
import textwrap
import threading
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import torch

from lib.display import LINE_WIDTH
from courseware.probe import changed_argument


class CheckFailed(AssertionError):
    """The student's answer is wrong; the message says how."""


@contextmanager
def one_thread():
    """Run the block on one thread, then restore the caller's count: a checker's tensors are so
    small that a second thread only waits, many times slower on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def fresh_generator() -> torch.Generator:
    """A generator seeded from the operating system: new inputs on every call."""
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(os.urandom(8), "little"))
    return generator


# The error text of a function that wrote into one of its tensor arguments. Every exercise asks for a
# function that returns its result and leaves its inputs as they were (a caller may reuse them); the
# grader's probe, which runs in the sandbox without lib, reports the same text from the same test.
INPUT_CHANGED = "InputChanged"


def _outcome(student_fn, args):
    """What the student's function returned, or ``"ErrorType: message"`` if it raised or changed
    one of its tensor arguments in place.

    The function gets copies: tensors cloned (a change is reported), anything else (lists of
    words, of references, of tensors) deep-copied, so an answer that writes into a list is judged
    and described on the case drawn, as the grader judges it."""
    given = tuple(a.clone() if isinstance(a, torch.Tensor) else copy.deepcopy(a) for a in args)
    try:
        found = student_fn(*given)
    except Exception as error:  # reported to the student with its type, as the grader does
        return f"{type(error).__name__}: {error}"
    position = changed_argument(args, given, torch)
    if position is not None:
        return f"{INPUT_CHANGED}: your function changed its argument {position} in place"
    return found


# How the grader's probe (courseware.probe, in the sandbox) reports a result that is no tensor at all.
_PROBE_NOT_A_TENSOR = ("TypeError: your function must return a plain torch.Tensor; it returned ",
                       " (not a torch.Tensor)")


def _require_tensor(found, context: str, hint: str = "", not_tensor_hint: str = "") -> torch.Tensor:
    """Turn a raised error or a non-tensor result into a :class:`CheckFailed`.

    ``hint`` is appended to the message of a raised error, ``not_tensor_hint`` to that of a result
    that is no tensor (returned here, or reported so by the grader's probe)."""
    if isinstance(found, str):
        if found.startswith("NotImplementedError"):
            raise CheckFailed("your function still raises NotImplementedError: write its body first")
        if found.startswith(f"{INPUT_CHANGED}: "):
            raise CheckFailed(f"{found.removeprefix(INPUT_CHANGED + ': ')} for {context}: leave the inputs as "
                              "they were and return a new tensor (clone first, or use out-of-place operations)")
        first = found.splitlines()[0]
        if not_tensor_hint and first.startswith(_PROBE_NOT_A_TENSOR[0]) and first.endswith(_PROBE_NOT_A_TENSOR[1]):
            hint = not_tensor_hint
        raise CheckFailed(f"your function raised {first.rstrip('.')} for {context}{hint}")
    if not isinstance(found, torch.Tensor):
        raise CheckFailed(f"your function must return a torch.Tensor; it returned {type(found).__name__}"
                          f"{not_tensor_hint}")
    return found


# The dtype policy: inputs are float64; a float64 result is held to the checker's own tolerance,
# a result in a lower precision (float32, float16, bfloat16) to at least float32's, about 1e-4.
# Every slip the checkers diagnose is far larger than either.
FLOAT32_TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def _distinct(a: float, b: float) -> tuple[str, str]:
    """``a`` and ``b`` with the fewest significant digits, at least 6, that tell them apart: a message
    must never print a wrong number that looks like the right one."""
    for digits in range(6, 18):
        shown = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if shown[0] != shown[1]:
            break
    return shown


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


def compare_tensors(found: torch.Tensor, target: torch.Tensor, tolerance: dict) -> float | None:
    """How far ``found`` is from ``target`` if it matches it, else None.

    The one comparison every checker makes, against the book's answer and against
    each known wrong answer: ``found`` matches ``target`` when the shapes agree and
    every entry is within ``atol + rtol × |target|``.

    Parameters
    ----------
    found : torch.Tensor
        The student's result, already converted to ``target``'s dtype.
    target : torch.Tensor
        The book's answer, or a known wrong answer.
    tolerance : dict
        ``atol`` and ``rtol``, as :func:`tolerance_for` gives them.

    Returns
    -------
    float or None
        The largest absolute difference (0.0 for an exact match), or None when
        the shapes differ or some entry is out of tolerance.

    Shapes
    ------
    ``found`` and ``target``: any shape; different shapes never match.
    """
    if found.shape != target.shape or not torch.allclose(found, target, **tolerance):
        return None
    return float((found - target).abs().max()) if found.numel() else 0.0


@dataclass(frozen=True)
class Slip:
    """A known wrong answer: how to compute it from a case's arguments, and what to tell a
    student whose result equals it."""

    answer: Callable[..., torch.Tensor]
    message: str


def _no_hint(shape: tuple, *args) -> str:
    return ""


@dataclass(frozen=True)
class Check:
    """The checker of one coding exercise, written as data.

    ``make_cases(generator)`` draws the inputs (a list of argument tuples);
    ``reference(*case)`` is the book's answer to one case and ``slips`` the known
    wrong answers. ``judge(cases, results)`` compares what the student's function
    returned for each case and raises :class:`CheckFailed` at the first case it
    gets wrong. A check cell calls the ``Check`` with the student's function; the
    grader (:mod:`courseware.grading`) calls ``make_cases`` and ``judge`` in its own
    process and lets only the student's function run, in a sandbox. ``forbidden``
    lists what the exercise text forbids (dotted names, or ``".method"``): the
    grader's static scan flags a solution that uses one for REVIEW
    (:func:`courseware.grading.scan.review_flags`).

    The other fields shape the messages: ``describe(*case)`` names a case,
    ``noun`` the result ("weights", "loss"), ``layout`` its expected shape in
    symbols ("(B, T, H)"); ``shape_hint(shape, *case)`` advises on a wrong shape,
    ``error_hint`` on a ``RuntimeError`` (usually a shape clash), ``not_tensor_hint``
    on a result that is no tensor (a tuple where one tensor is asked for), ``nan_hint`` on
    NaN or inf; ``rules(found, expected, *case)`` names a property every right
    answer has and the result lacks (or returns None); ``mismatch(found,
    expected, *case)`` replaces the last-resort "differs by up to" message, which
    names the answer ``compared_with``. ``integers`` asks for an integer dtype
    (indices); whole-number results (counts) may come as floats.
    """

    success: str  # printed after "✓ " when every case passes
    make_cases: Callable[[torch.Generator], list[tuple]]
    reference: Callable[..., torch.Tensor]
    describe: Callable[..., str]
    compared_with: str
    slips: tuple[Slip, ...] = ()
    noun: str = "result"
    layout: str = ""
    shape_hint: Callable[..., str] = _no_hint
    error_hint: str = ""
    nan_hint: str = ""
    rules: Callable[..., str | None] | None = None
    mismatch: Callable[..., str] | None = None
    tolerance: dict = field(default_factory=lambda: dict(atol=1e-6, rtol=1e-6))
    integers: bool = False
    forbidden: tuple[str, ...] = ()
    not_tensor_hint: str = ""  # last, so that positional arguments keep their meaning

    def __call__(self, student_fn) -> None:
        if not callable(student_fn):
            raise CheckFailed(f"expected a function; found {type(student_fn).__name__}")
        cases = self.make_cases(fresh_generator())
        self.judge(cases, [_outcome(student_fn, args) for args in cases])
        print(textwrap.fill(f"✓ {self.success}", LINE_WIDTH, subsequent_indent="  "))

    def judge(self, cases: list[tuple], results: list) -> None:
        """Compare ``results[i]``, what the student's function returned for ``cases[i]`` (or the
        text ``"ErrorType: message"`` of what it raised), with the book's answers."""
        for index, (case, found) in enumerate(zip(cases, results, strict=True)):
            found, tolerance, expected = self._prepared(found, case)
            if compare_tensors(found, expected, tolerance) is None:
                raise CheckFailed(self._explain(found, tolerance, expected, index, cases, results))

    def _prepared(self, found, case: tuple) -> tuple[torch.Tensor, dict, torch.Tensor]:
        """``(found, tolerance, expected)``: the student's result for ``case`` made comparable with the
        book's answer ``expected``, or a :class:`CheckFailed` saying why it cannot be compared."""
        if not isinstance(found, torch.Tensor):
            hint = self.error_hint if isinstance(found, str) and found.startswith("RuntimeError") else ""
            _require_tensor(found, self.describe(*case), hint, self.not_tensor_hint)
        expected = self.reference(*case)
        found, tolerance = self._comparable(found, expected, case)
        return found, tolerance, expected

    def _has(self, verb: str) -> str:
        """``verb`` agreeing with the noun: "has"/"have", "differs"/"differ", "contains"/"contain"."""
        plural = self.noun.endswith("s") and not self.noun.endswith("ss")
        return {"has": "have"}.get(verb, verb[:-1]) if plural else verb

    def _comparable(self, found: torch.Tensor, expected: torch.Tensor, case: tuple) -> tuple[torch.Tensor, dict]:
        """``found`` in ``expected``'s dtype and shape with the tolerance its own dtype earns, or a
        :class:`CheckFailed` saying why it cannot be compared."""
        found = found.detach()
        if expected.dim() == 0 and found.numel() == 1:
            found = found.reshape(())
        if found.shape != expected.shape:
            shape = tuple(found.shape)
            wanted = (f"expected a scalar: return one number{self.layout}" if expected.dim() == 0
                      else f"expected {self.layout} = {tuple(expected.shape)}")
            raise CheckFailed(f"for {self.describe(*case)} your {self.noun} {self._has('has')} shape {shape}; {wanted}"
                              f"{self.shape_hint(shape, *case)}")
        returned = str(found.dtype).removeprefix("torch.")
        if expected.is_floating_point() and not found.is_floating_point():
            raise CheckFailed(f"your {self.noun} {self._has('has')} dtype {returned}; return floats")
        if not expected.is_floating_point() and found.is_floating_point():
            if self.integers:
                raise CheckFailed(f"your {self.noun} {self._has('has')} dtype {returned}; return integers "
                                  "(torch.long)")
            if not torch.equal(found, found.round()):
                raise CheckFailed(f"for {self.describe(*case)} your {self.noun} {found.tolist()} are not whole numbers")
        if found.is_floating_point() and not torch.isfinite(found).all():
            raise CheckFailed(f"your {self.noun} {self._has('contains')} NaN or inf for {self.describe(*case)}"
                              f"{self.nan_hint}")
        return found.to(expected.dtype), tolerance_for(found, self.tolerance)

    def _explain(self, found: torch.Tensor, tolerance: dict, expected: torch.Tensor, index: int,
                 cases: list[tuple], results: list, broken: str | None = None) -> str:
        """Why ``found``, the comparable but wrong result for ``cases[index]``, is wrong.

        Of the slips that reproduce it, the one that also reproduces the most of
        the other results (one case alone can fit several slips), then the
        closest; else a broken rule (``broken``, when the caller has already
        measured it: what ``rules`` returns for this case); else where and by how
        much it differs.
        """
        case = cases[index]
        context = self.describe(*case)
        candidates = []  # (distance, slip) for every slip that reproduces found
        for slip in self.slips:
            distance = compare_tensors(found, torch.as_tensor(slip.answer(*case)).to(found.dtype), tolerance)
            if distance is not None:
                candidates.append((distance, slip))
        if len(candidates) > 1:
            others = self._comparable_results(cases, results)
            candidates = [(-sum(compare_tensors(result, torch.as_tensor(slip.answer(*other)).to(result.dtype),
                                                allowed) is not None for other, result, allowed in others),
                           distance, slip) for distance, slip in candidates]
        if candidates:
            return f"for {context}: {min(candidates, key=lambda ranked: ranked[:-1])[-1].message}"
        if broken is None:
            broken = self.rules(found, expected, *case) if self.rules else None
        if broken:
            return f"for {context}: {broken}"
        if self.mismatch:
            return f"for {context} {self.mismatch(found, expected, *case)}"
        if found.dim() == 0:
            yours, wanted = _distinct(found.item(), expected.item())
            return f"for {context} your {self.noun} is {yours}; expected {wanted}"
        difference = (found - expected).abs()
        where = tuple(int(i) for i in torch.unravel_index(difference.argmax(), difference.shape))
        returned = str(results[index].dtype).removeprefix("torch.")
        allowed = (f"{tolerance['atol']:g} × (1 + |expected|)" if tolerance["atol"] == tolerance["rtol"] else
                   f"atol {tolerance['atol']:g} + rtol {tolerance['rtol']:g} × |expected|")
        return (f"for {context} your {self.noun} {self._has('differs')} from {self.compared_with} by up to "
                f"{difference.max():.3g} (at index {where}; a {returned} result may differ by {allowed})")

    def _comparable_results(self, cases: list[tuple], results: list) -> list[tuple]:
        """``(case, result, tolerance)`` for every result that can be compared: a tensor of the right shape
        and dtype, without NaN (a raised error or a wrong shape says nothing about a slip)."""
        comparable = []
        for case, result in zip(cases, results):
            if isinstance(result, torch.Tensor):
                try:
                    comparable.append((case, *self._comparable(result, self.reference(*case), case)))
                except CheckFailed:
                    continue
        return comparable


@dataclass(frozen=True)
class Measured(Check):
    """The checker of an experiment exercise, whose right answers are many: judged by measuring them.

    ``reference(*case)`` is one right answer (the book's), which fixes the shape and
    dtype the result must have; ``rules(found, expected, *case)`` runs the experiment
    on the student's result and returns what it measured wrong (or None when the
    result passes). A result that fails is explained by a matching :class:`Slip`
    first, as in :class:`Check`, else by the rule it broke.
    """

    def judge(self, cases: list[tuple], results: list) -> None:
        if self.rules is None:
            raise TypeError("a Measured checker needs rules: the measurement that decides")
        for index, (case, found) in enumerate(zip(cases, results, strict=True)):
            found, tolerance, expected = self._prepared(found, case)
            broken = self.rules(found, expected, *case)  # the measurement, made once
            if broken:
                raise CheckFailed(self._explain(found, tolerance, expected, index, cases, results, broken=broken))


def _value_key(value):
    """A hashable key that two arguments share only when they hold the same values: a tensor by its
    dtype, shape, strides and a digest of its bytes; a number by its type and exact bits (0.0 and
    -0.0 differ); tuples and lists element by element. None for any other kind of value."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad or value.is_sparse or value.device.type != "cpu":
            return None
        data = value.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        return ("tensor", str(value.dtype), tuple(value.shape), value.stride(),
                hashlib.blake2b(data, digest_size=20).digest())
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (bool, int, str, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list)):
        keys = tuple(_value_key(item) for item in value)
        return None if None in keys else (type(value).__name__, keys)
    return None


_MISSING = object()


def by_value(maxsize: int = 1024) -> Callable[[Callable], Callable]:
    """Remember a pure function's results by the values of its arguments (see :func:`_value_key`).

    A checker computes the book's answer to a case in ``judge``, again in every slip built on it
    while it explains a wrong result, and again when it weighs the slips on the other cases; the test
    files judge many answers on the same cases. Only a deterministic function whose result depends on
    nothing but its arguments' values may be decorated: the answer remembered is the one it computed,
    bit for bit. Each caller gets its own copy (tensors cloned, anything else deep-copied). A call with
    an argument that has no key (see :func:`_value_key`) or a keyword argument is not remembered.
    The ``maxsize`` most recently used results are kept, so it is for small results (numbers, short
    lists): a thousand of them stay in the grader's process. The cache is shared by its threads.
    """
    def decorate(function: Callable) -> Callable:
        results: OrderedDict = OrderedDict()
        lock = threading.Lock()

        @functools.wraps(function)
        def remembered(*args, **kwargs):
            key = None if kwargs else _value_key(args)
            if key is None:
                return function(*args, **kwargs)
            with lock:
                found = results.get(key, _MISSING)
                if found is not _MISSING:
                    results.move_to_end(key)
            if found is _MISSING:
                found = function(*args)
                with lock:
                    results[key] = found
                    while len(results) > maxsize:
                        results.popitem(last=False)
            return found.clone() if isinstance(found, torch.Tensor) else copy.deepcopy(found)

        return remembered

    return decorate



def solve_increasing(function: Callable[[float], float], target: float, iterations: int = 100) -> float:
    """The ``x > 0`` at which the increasing ``function`` reaches ``target``, for the checkers of
    experiments that search a scale or a temperature.

    Halving and doubling from 1 bracket the answer; bisection then halves the bracket
    ``iterations`` times, or stops sooner at a halving that leaves the bracket as it was (about 55 in,
    when its two ends are neighbouring floats): each halving is a function of the bracket alone, so
    every later one would leave it too, and the answer is the one all ``iterations`` give.
    """
    low, high = 1.0, 1.0
    while function(low) > target:
        low /= 2
    while function(high) < target:
        high *= 2
    for _ in range(iterations):
        middle = (low + high) / 2
        bracket = (middle, high) if function(middle) < target else (low, middle)
        if bracket == (low, high):
            break
        low, high = bracket
    return (low + high) / 2
