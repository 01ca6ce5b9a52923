"""Every finding is shown failing by a test, alone, just past its threshold.

A finding whose test cannot fail guards nothing: the chapter would print its tick on
any run. So the tests of ``experiments/<module>.py`` live in
``tests/experiments/test_<module>.py``, and among them, for every finding the module
declares, some test calls ``result.failing()`` on a result that contradicts that
finding and no other (``failing()`` returns exactly ``[finding.says]``).

This file records those calls. When a test file has run whole (no test of it
deselected or picked out by node id), the session fails if a finding of its module
was never shown failing, and the summary names each such finding.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from experiments.findings import Result

HERE = Path(__file__).parent
_shown_failing: set[tuple[type, str]] = set()
_deselected_files: set[Path] = set()
_never_failing: list[str] = []


@pytest.fixture(autouse=True)
def record_findings_shown_failing(monkeypatch):
    failing = Result.failing

    def recorded(result):
        says = failing(result)
        if len(says) == 1:
            _shown_failing.add((type(result), says[0]))
        return says

    monkeypatch.setattr(Result, "failing", recorded)


def pytest_deselected(items):
    _deselected_files.update(Path(item.path) for item in items)


def _whole_test_files(session) -> set[Path]:
    if any("::" in arg for arg in session.config.args):
        return set()
    ran = {Path(item.path) for item in session.items if Path(item.path).parent == HERE}
    return {path for path in ran if path.name.startswith("test_ch")} - _deselected_files


def _result_classes(module) -> list[type[Result]]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Result)
        and value.__module__ == module.__name__
        and value.FINDINGS
    ]


def pytest_sessionfinish(session, exitstatus):
    if session.testsfailed or exitstatus not in (0, pytest.ExitCode.OK):
        return
    for path in sorted(_whole_test_files(session)):
        module = importlib.import_module(f"experiments.{path.stem[len('test_'):]}")
        for result_class in _result_classes(module):
            for finding in result_class.FINDINGS:
                if (result_class, finding.says) not in _shown_failing:
                    _never_failing.append(
                        f"{path.name}: {result_class.__name__}: {finding.says}"
                    )
    if _never_failing:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _never_failing:
        terminalreporter.section("findings no test shows failing", sep="=", red=True)
        terminalreporter.line(
            "Each finding needs a test whose result.failing() returns exactly its "
            "sentence (tests/experiments/conftest.py):"
        )
        for line in _never_failing:
            terminalreporter.line(f"  {line}")
