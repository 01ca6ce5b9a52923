"""Interleaved timing of our code against a reference, and the record it produces."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

__all__ = ["Timing", "Record", "effort", "time_calls", "compare", "measured"]


@dataclass
class Timing:
    """Seconds per call: the median of the repetitions and their spread (min and max)."""

    median: float
    low: float
    high: float
    repeats: int

    @classmethod
    def of(cls, samples: list[float]) -> "Timing":
        return cls(statistics.median(samples), min(samples), max(samples), len(samples))


@dataclass
class Record:
    """One line of the results: ours against a reference, or one measured value against a goal.

    ``ratio`` is ours / reference (time ratios: below 1 means we are faster), or
    for a speed-up goal reference / ours. ``goal`` says what ``ratio`` (or, when
    there is no reference, ``value``) must satisfy, e.g. ``"<= 1.5"``.
    """

    group: str
    case: str
    ours: Optional[Timing] = None
    reference_name: str = ""
    reference: Optional[Timing] = None
    ratio: Optional[float] = None
    value: Optional[float] = None
    unit: str = ""
    goal: str = ""
    met: Optional[bool] = None
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _meets(number: float, goal: str) -> Optional[bool]:
    if not goal:
        return None
    op, bound = goal.split()
    bound = float(bound)
    return {"<=": number <= bound, ">=": number >= bound, "<": number < bound, ">": number > bound}[op]


def effort(quick: bool, repeats: int = 7) -> dict:
    """Repetitions and minimum sample length for :func:`compare`; a quick run only proves the code runs."""
    return {"repeats": 1, "min_seconds": 0.0} if quick else {"repeats": repeats, "min_seconds": 0.05}


def time_calls(fn: Callable[[], object], min_seconds: float = 0.05) -> int:
    """How many calls of ``fn`` make one sample last at least ``min_seconds``."""
    fn()  # warm up: first-call allocations and lazy imports are not what we measure
    number, elapsed = 1, 0.0
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return number
        number *= 2 if elapsed == 0 else max(2, min(10, int(min_seconds / elapsed) + 1))


def compare(group: str, case: str, ours: Callable[[], object], reference: Callable[[], object],
            reference_name: str, goal: str = "", repeats: int = 7, min_seconds: float = 0.05,
            speedup: bool = False, note: str = "") -> Record:
    """Time ``ours`` and ``reference`` in alternation and return their ratio.

    Each repetition times both, one after the other, each in a fixed number of
    calls chosen so its sample lasts at least ``min_seconds``; alternating them means a
    burst of load on the machine slows both, not one. ``ratio`` is
    median(ours) / median(reference), or its inverse with ``speedup=True``.
    """
    sides = {"ours": ours, "reference": reference}
    numbers = {name: time_calls(fn, min_seconds) for name, fn in sides.items()}
    samples: dict[str, list[float]] = {"ours": [], "reference": []}
    for _ in range(repeats):
        for name, fn in sides.items():
            start = time.perf_counter()
            for _ in range(numbers[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / numbers[name])
    mine, theirs = Timing.of(samples["ours"]), Timing.of(samples["reference"])
    ratio = theirs.median / mine.median if speedup else mine.median / theirs.median
    return Record(group, case, mine, reference_name, theirs, ratio, goal=goal, met=_meets(ratio, goal), note=note)


def measured(group: str, case: str, value: float, unit: str, goal: str = "", note: str = "",
             timing: Optional[Timing] = None) -> Record:
    """A record of one measured value (a time, an accuracy) judged against an absolute goal."""
    return Record(group, case, ours=timing, value=value, unit=unit, goal=goal, met=_meets(value, goal), note=note)
