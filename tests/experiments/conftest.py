"""Every finding is shown failing by a test, alone, just past its threshold.

A finding whose test cannot fail guards nothing: the chapter would print its tick on
any run. So the tests of ``experiments/<module>.py`` live in
``tests/experiments/test_<module>.py``, and among them, for every finding the module
declares, some passing test asserts ``result.failing() == [finding.says]`` on a result
that contradicts that finding and no other.

This file records those assertions. What a result contradicts is recomputed from its
class's FINDINGS as declared (kept when the class is created), so a test cannot narrow
FINDINGS to pass off a finding that never fails alone; a result of another class (a
subclass too) shows nothing for this one; merely calling ``failing()`` shows nothing.
When a test file has run whole (no test of it deselected, the file not picked out by
node id) and every test passed, the session fails if a finding of its module was
never shown failing, and the summary names each such finding. A ``test_ch*.py`` file
that pytest collected but that yields no test (skipped at module level, tests in a
class not named ``Test*``) fails the session too: it would turn the guard off for its
module. ``tests/experiments/test_findings.py`` tests this guard.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from experiments.findings import Finding, Result

HERE = Path(__file__).parent
_declared: dict[type, tuple[Finding, ...]] = {}  # each Result class's FINDINGS, kept
_shown_by_test: dict[str, set[tuple[type, str]]] = {}  # node id -> what it showed
_shown_failing: set[tuple[type, str]] = set()  # what passing tests showed
_deselected_files: set[Path] = set()
_test_ch_files: set[Path] = set()  # test_ch*.py files pytest looked at
_files_with_tests: set[Path] = set()
_unguarded: list[str] = []  # what the summary names


def _declared_findings(cls) -> tuple[Finding, ...]:
    return _declared.setdefault(cls, tuple(cls.FINDINGS))


def _keep_findings(cls, **kwargs) -> None:
    _declared_findings(cls)
    for subclass in cls.__subclasses__():
        _keep_findings(subclass)


_keep_findings(Result)  # the classes already created, then each one as it is
Result.__init_subclass__ = classmethod(_keep_findings)


class _Failing(list):
    """What ``failing()`` returns, recording the finding when a test compares it
    equal to ``[says]`` and the class's declared FINDINGS contradict that alone."""

    def __init__(self, says, result, shown):
        super().__init__(says)
        self._result, self._shown = result, shown

    def __eq__(self, other):
        equal = list.__eq__(self, other)
        if equal is True and not isinstance(other, _Failing) and len(other) == 1:
            cls = type(self._result)
            findings = _declared_findings(cls)
            if [f.says for f in findings if not f.holds(self._result)] == list(other):
                self._shown.add((cls, other[0]))
        return equal


@pytest.fixture(autouse=True)
def record_findings_shown_failing(monkeypatch, request):
    failing, shown = Result.failing, set()
    _shown_by_test[request.node.nodeid] = shown
    monkeypatch.setattr(
        Result, "failing", lambda result: _Failing(failing(result), result, shown)
    )


def pytest_collect_file(file_path):
    if file_path.parent == HERE and file_path.match("test_ch*.py"):
        _test_ch_files.add(file_path)


def pytest_itemcollected(item):
    _files_with_tests.add(Path(item.path))


def pytest_runtest_logreport(report):
    """A test counts only if it passed (not skipped, not an expected failure)."""
    if report.when == "call" and report.passed and not hasattr(report, "wasxfail"):
        _shown_failing.update(_shown_by_test.pop(report.nodeid, ()))


def pytest_deselected(items):
    _deselected_files.update(Path(item.path) for item in items)


def _given(session, node_ids: bool) -> set[Path]:
    """The paths given on the command line (only those with a ``::`` if node_ids)."""
    start = session.config.invocation_params.dir
    return {
        (start / arg.split("::")[0]).resolve()
        for arg in session.config.args
        if "::" in arg or not node_ids
    }


def _empty_test_files(session) -> set[Path]:
    """test_ch*.py files pytest was asked to run that yield no test."""
    given = _given(session, node_ids=False)
    asked = {path for path in _test_ch_files if given & {path, *path.parents}}
    return asked - _files_with_tests


def _whole_test_files(session) -> set[Path]:
    picked = _given(session, node_ids=True)
    ran = {Path(item.path) for item in session.items if Path(item.path).parent == HERE}
    whole = {path for path in ran if path.name.startswith("test_ch")}
    return whole - _deselected_files - picked


def _findings_of(module) -> dict[type, tuple[Finding, ...]]:
    return {
        value: _declared_findings(value)
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Result)
        and value.__module__ == module.__name__
    }


def pytest_sessionfinish(session, exitstatus):
    code = pytest.ExitCode
    ran = exitstatus in (code.OK, code.TESTS_FAILED, code.NO_TESTS_COLLECTED)
    if not ran or session.config.getoption("lf", False):
        return  # collection broke, or --lf left files out
    for path in sorted(_empty_test_files(session)):
        _unguarded.append(f"{path.name}: no test collected (skipped as a whole?)")
    if not (session.config.option.collectonly or session.testsfailed or exitstatus):
        for path in sorted(_whole_test_files(session)):
            module = importlib.import_module(f"experiments.{path.stem[len('test_'):]}")
            for result_class, findings in _findings_of(module).items():
                for finding in findings:
                    if (result_class, finding.says) not in _shown_failing:
                        _unguarded.append(
                            f"{path.name}: {result_class.__name__}: {finding.says}"
                        )
    if _unguarded:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _unguarded:
        terminalreporter.section("findings no test shows failing", sep="=", red=True)
        terminalreporter.line(
            "Each finding needs a passing test that asserts result.failing() == "
            "[its sentence],\nand each test_ch*.py file tests "
            "(tests/experiments/conftest.py):"
        )
        for line in _unguarded:
            terminalreporter.line(f"  {line}")
