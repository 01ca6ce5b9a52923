"""Every finding is shown failing by a test, alone, just past its threshold.

A finding whose test cannot fail guards nothing: the chapter would print its tick on
any run. So the tests of ``experiments/<module>.py`` live in
``tests/experiments/test_<module>.py``, and among them, for every finding the module
declares, some passing test calls ``result.failing()`` on a result that contradicts
that finding and no other (``failing()`` returns exactly ``[finding.says]``).

This file records those calls. When a test file has run whole (no test of it
deselected, the file not picked out by node id) and every test passed, the session
fails if a finding of its module was never shown failing, and the summary names each
such finding. ``tests/experiments/test_findings.py`` tests this guard.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from experiments.findings import Result

HERE = Path(__file__).parent
_shown_by_test: dict[str, set[tuple[type, str]]] = {}  # node id -> what it showed
_shown_failing: set[tuple[type, str]] = set()  # what passing tests showed
_deselected_files: set[Path] = set()
_never_failing: list[str] = []


@pytest.fixture(autouse=True)
def record_findings_shown_failing(monkeypatch, request):
    failing, shown = Result.failing, set()
    _shown_by_test[request.node.nodeid] = shown

    def recorded(result):
        says = failing(result)
        if len(says) == 1:
            shown.add((type(result), says[0]))
        return says

    monkeypatch.setattr(Result, "failing", recorded)


def pytest_runtest_logreport(report):
    """A call counts only if its test passed (not skipped, not an expected failure)."""
    if report.when == "call" and report.passed and not hasattr(report, "wasxfail"):
        _shown_failing.update(_shown_by_test.pop(report.nodeid, ()))


def pytest_deselected(items):
    _deselected_files.update(Path(item.path) for item in items)


def _whole_test_files(session) -> set[Path]:
    start = session.config.invocation_params.dir
    picked = {
        (start / arg.split("::")[0]).resolve()
        for arg in session.config.args
        if "::" in arg
    }
    ran = {Path(item.path) for item in session.items if Path(item.path).parent == HERE}
    whole = {path for path in ran if path.name.startswith("test_ch")}
    return whole - _deselected_files - picked


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
    if session.config.option.collectonly or session.testsfailed or exitstatus != 0:
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
