"""What a chapter concludes from a measured run, declared once beside the run.

A measured output (training, sampling, timing) changes from CPU to CPU, so nbval does
not compare it digit by digit. Each conclusion the chapter's text draws from such a run
is a :class:`Finding` of the run's result class: the sentence, the markdown cells whose
prose it backs, and a test with a tolerance that holds over seeds and CPUs. The chapter
calls ``result.check()`` in a visible cell: it prints every finding with a tick, a line
nbval compares exactly, and fails, naming the findings, when one does not hold.

A run too slow for a chapter is made offline and stored (``experiments/weights``) with
:func:`run_arithmetic`, what its low bits depend on: a chapter that trains part of it
again expects the same bits only where that arithmetic is the same, and elsewhere
checks the conclusion.
"""

from __future__ import annotations

import os
import platform
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch

from lib.display import LINE_WIDTH


@dataclass(frozen=True)
class Finding:
    """One conclusion: ``says`` is what the text says, ``backs`` the ids of the
    chapter's markdown cells that say it, ``holds`` the test of a result (with its
    tolerance)."""

    says: str
    backs: tuple[str, ...]
    holds: Callable[[Any], Any]

    def __post_init__(self) -> None:
        says = self.says
        sentence = isinstance(says, str) and says == says.strip() and says.endswith(".")
        if not (sentence and any(c.isalpha() for c in says) and not says[0].islower()):
            raise TypeError(
                "Finding: says must be a sentence as the book prints it: opening with "
                "a capital, a digit or a quote and ending with a full stop; found "
                f"{says!r}"
            )
        backs = self.backs
        if not (
            isinstance(backs, tuple)
            and backs
            and all(isinstance(b, str) and b for b in backs)
        ):
            raise TypeError(
                f"Finding: backs must be a tuple of markdown cell ids; found {backs!r}"
            )
        if not callable(self.holds):
            raise TypeError(
                f"Finding: holds must be a function of the result; found {self.holds!r}"
            )


class Result:
    """A measured result. A subclass (usually a dataclass) declares its ``FINDINGS``."""

    FINDINGS: ClassVar[tuple[Finding, ...]] = ()

    def failing(self) -> list[str]:
        """The sentences of the findings this result does not show (a test's view)."""
        if not self.FINDINGS:
            raise TypeError(f"{type(self).__name__} declares no FINDINGS to check")
        return [finding.says for finding in self.FINDINGS if not finding.holds(self)]

    def check(self) -> None:
        """Print each finding, ticked (✓) if this run shows it, crossed (✗) if not; then
        raise ``AssertionError`` naming every finding that does not hold."""
        if not self.FINDINGS:
            raise TypeError(f"{type(self).__name__} declares no FINDINGS to check")
        verdicts = [(finding, bool(finding.holds(self))) for finding in self.FINDINGS]
        for finding, holds in verdicts:
            mark = "✓ " if holds else "✗ "
            print(
                textwrap.fill(
                    finding.says,
                    LINE_WIDTH,
                    initial_indent=mark,
                    subsequent_indent="  ",
                )
            )
        failed = [
            f"{finding.says} (cells {', '.join(finding.backs)})"
            for finding, holds in verdicts
            if not holds
        ]
        if failed:
            raise AssertionError(
                "the chapter says what this run does not show: " + "; ".join(failed)
            )


# the settings that change which kernels torch, oneDNN and MKL run
ARITHMETIC_SETTINGS = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
)


def run_arithmetic() -> dict[str, str]:
    """What the low bits of a stored float32 run depend on besides the code and seeds:
    torch's version, the processor, the vector instructions torch's kernels use, the
    math libraries' settings and the number of threads."""
    processor = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():  # Linux: the model's name, which platform leaves empty
        lines = cpuinfo.read_text().splitlines()
        models = [
            line.split(":", 1)[1].strip() for line in lines if "model name" in line
        ]
        processor = models[0] if models else processor
    found = {
        "torch": str(torch.__version__),
        "machine": platform.machine(),
        "processor": processor,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": str(torch.get_num_threads()),
    }
    for name in ARITHMETIC_SETTINGS:
        found[name] = os.environ.get(name, "")
    return found
