"""What a chapter concludes from a measured run, declared once beside the run.

A measured output (training, sampling, timing) changes from CPU to CPU, so nbval does
not compare it digit by digit. Each conclusion the chapter's text draws from such a run
is a :class:`Finding` of the run's result class: the sentence, the markdown cells whose
prose it backs, and a test with a tolerance that holds over seeds and CPUs. The chapter
calls ``result.check()`` in a visible cell: it prints every finding with a tick, a line
nbval compares exactly, and fails, naming the findings, when one does not hold.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

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
