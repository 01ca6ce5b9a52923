"""experiments.findings: a result checks the findings its class declares, prints each with its
verdict, and fails naming the ones that do not hold (and the cells whose prose they back)."""
from dataclasses import dataclass
from pathlib import Path

import pytest

from experiments.findings import Finding, Result


@dataclass
class Accuracy(Result):
    per_seed: list[float]

    FINDINGS = (
        Finding("Every seed reaches 90%.", backs=("lstm-text",), holds=lambda r: min(r.per_seed) >= 0.9),
        Finding("The seeds lie within 5 points of each other, which is a sentence long enough to be "
                "wrapped at the book's line width.", backs=("lstm-text", "summary"),
                holds=lambda r: max(r.per_seed) - min(r.per_seed) <= 0.05),
    )


def test_a_run_that_shows_every_finding_prints_them_ticked(capsys):
    Accuracy([0.93, 0.95]).check()
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "✓ Every seed reaches 90%."
    assert printed[1].startswith("✓ The seeds lie") and printed[2].startswith("  ")
    assert max(map(len, printed)) <= 88


def test_a_finding_that_does_not_hold_fails_with_its_sentence_and_cells(capsys):
    with pytest.raises(AssertionError, match=r"Every seed reaches 90%\. \(cells lstm-text\)$"):
        Accuracy([0.85, 0.88]).check()
    assert capsys.readouterr().out.startswith("✗ Every seed reaches 90%.\n✓ The seeds")


def test_a_result_without_findings_cannot_be_checked():
    with pytest.raises(TypeError, match="Result declares no FINDINGS"):
        Result().check()
    with pytest.raises(TypeError, match="Result declares no FINDINGS"):
        Result().failing()


@pytest.mark.parametrize("says, backs, holds, message", [
    ("", ("text",), bool, "says must be a sentence"),
    ("every seed wins.", ("text",), bool, "opening with a capital, a digit or a quote"),
    ("Every seed wins", ("text",), bool, "ending with a full stop"),
    (".", ("text",), bool, "must be a sentence"),
    (" Every seed wins.", ("text",), bool, "must be a sentence"),
    ("X.", "text", bool, "backs must be a tuple of markdown cell ids; found 'text'"),
    ("X.", (), bool, "backs must be a tuple"),
    ("X.", ("text",), True, "holds must be a function of the result; found True"),
])
def test_a_finding_is_declared_with_a_sentence_cells_and_a_test(says, backs, holds, message):
    with pytest.raises(TypeError, match=message):
        Finding(says, backs=backs, holds=holds)


def test_failing_names_exactly_the_findings_a_result_contradicts():
    assert Accuracy([0.93, 0.95]).failing() == []
    assert Accuracy([0.89, 0.90]).failing() == [Accuracy.FINDINGS[0].says]
    assert Accuracy([0.80, 0.95]).failing() == [finding.says for finding in Accuracy.FINDINGS]


def test_every_module_that_declares_findings_has_its_test_file():
    """The guard in conftest.py checks a module's findings when its test file runs whole."""
    import importlib
    import pkgutil
    from pathlib import Path

    import experiments

    here = Path(__file__).parent
    untested = [
        info.name
        for info in pkgutil.iter_modules(experiments.__path__)
        if any(
            isinstance(value, type) and issubclass(value, Result) and value.FINDINGS
            for value in vars(importlib.import_module(f"experiments.{info.name}")).values()
        )
        and not (here / f"test_{info.name}.py").exists()
    ]
    assert not untested, f"experiments modules with findings but no tests/experiments/test_<module>.py: {untested}"


# The guard in conftest.py, run on a throwaway package in a pytest of its own.

pytest_plugins = ["pytester"]

TOY = """
from dataclasses import dataclass
from pathlib import Path

from experiments.findings import Finding, Result


@dataclass
class Score(Result):
    a: float
    b: float

    FINDINGS = (
        Finding("A is positive.", backs=("x",), holds=lambda r: r.a > 0),
        Finding("B is positive.", backs=("x",), holds=lambda r: r.b > 0),
    )
"""
TESTS = """
from dataclasses import dataclass

import pytest

from experiments.ch99_toy import Score
from experiments.findings import Finding, Result


def test_agrees():
    assert Score(1, 1).failing() == []
"""
SHOWS_A = """
def test_a():
    assert Score(0, 1).failing() == ["A is positive."]
"""
SHOWS_B = """
def test_b():
    assert Score(1, 0).failing() == ["B is positive."]
"""
UNSHOWN = "findings no test shows failing"


@pytest.fixture
def guarded(pytester, monkeypatch):
    """Run pytest on tests/experiments/test_ch99_toy.py (made of ``tests``) beside a
    copy of the real conftest.py and experiments/findings.py."""
    from lib.display import LINE_WIDTH

    here = Path(__file__).parent
    pytester.makepyfile(**{
        "experiments/__init__": "",
        "experiments/findings": (here.parents[1] / "experiments/findings.py").read_text(),
        "experiments/ch99_toy": TOY,
        "lib/__init__": "",
        "lib/display": f"LINE_WIDTH = {LINE_WIDTH}",
        "tests/experiments/conftest": (here / "conftest.py").read_text(),
    })
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # a quicker start

    def run(*tests, args=("tests/experiments",), head=TESTS):
        pytester.makepyfile(**{"tests/experiments/test_ch99_toy": "\n".join((head,) + tests)})
        return pytester.runpytest_subprocess(*args)

    return run


def test_the_guard_fails_a_session_and_names_a_finding_no_test_shows_failing(guarded):
    result = guarded(SHOWS_A)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{UNSHOWN}*", "  test_ch99_toy.py: Score: B is positive."])
    result.stdout.no_fnmatch_line("*: Score: A is positive.")
    result.assert_outcomes(passed=2)


SHOWS_B_REVERSED = """
def test_b():
    assert ["B is positive."] == Score(1, 0).failing()
"""


@pytest.mark.parametrize("b", [SHOWS_B, SHOWS_B_REVERSED], ids=["==", "== reversed"])
def test_the_guard_passes_a_session_that_shows_every_finding_failing(guarded, b):
    result = guarded(SHOWS_A, b)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line(f"*{UNSHOWN}*")


@pytest.mark.parametrize("args", [
    ("tests/experiments/test_ch99_toy.py::test_a",),  # picked out by node id
    ("tests/experiments", "-k", "not test_agrees"),  # a test deselected
    ("tests/experiments", "--collect-only"),  # nothing ran
])
def test_the_guard_is_silent_when_a_test_file_did_not_run_whole(guarded, args):
    result = guarded(SHOWS_A, args=args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line(f"*{UNSHOWN}*")


TWO_AT_ONCE = """
def test_both():
    assert Score(0, 0).failing() == ["A is positive.", "B is positive."]
"""
SKIPPED_B = """
def test_b_skipped():
    assert Score(1, 0).failing() == ["B is positive."]
    pytest.skip("shown, then skipped")
"""
EXPECTED_TO_FAIL_B = """
@pytest.mark.xfail(strict=True)
def test_b_xfail():
    assert Score(1, 0).failing() == ["B is positive."]
    assert False
"""


CALLED_ONLY = """
def test_b():
    Score(1, 0).failing()
"""
SOMETHING_FAILS = """
def test_b():
    assert Score(1, 0).failing()
"""
B_AMONG_THEM = """
def test_b():
    assert "B is positive." in Score(1, 0).failing()
"""
EQUAL_TO_ITSELF = """
def test_b():
    assert Score(1, 0).failing() == Score(1, 0).failing()
"""
ANOTHER_CLASS = """
@dataclass
class Other(Result):
    b: float

    FINDINGS = (Finding("B is positive.", backs=("x",), holds=lambda r: r.b > 0),)


def test_b():
    assert Other(0).failing() == ["B is positive."]
"""
A_SUBCLASS = """
class Sub(Score):
    pass


def test_b():
    assert Sub(1, 0).failing() == ["B is positive."]
"""
# A finding that cannot fail alone (B is positive, but only when A is not) passed off
# as shown by narrowing FINDINGS: the guard goes by the class's FINDINGS as declared.
NARROWED_CLASS = """
def test_b(monkeypatch):
    monkeypatch.setattr(Score, "FINDINGS", Score.FINDINGS[1:])
    assert Score(0, 0).failing() == ["B is positive."]
"""
NARROWED_RESULT = """
def test_b():
    result = Score(0, 0)
    result.FINDINGS = Score.FINDINGS[1:]
    assert result.failing() == ["B is positive."]
"""
DROPPED_AT_IMPORT = """
Score.FINDINGS = Score.FINDINGS[:1]  # for the rest of the session
"""


@pytest.mark.parametrize("b", [
    TWO_AT_ONCE, SKIPPED_B, EXPECTED_TO_FAIL_B, CALLED_ONLY, SOMETHING_FAILS, B_AMONG_THEM,
    EQUAL_TO_ITSELF, ANOTHER_CLASS, A_SUBCLASS, NARROWED_CLASS, NARROWED_RESULT,
    DROPPED_AT_IMPORT,
], ids=[
    "two-at-once", "skipped", "xfail", "called-only", "something-fails", "b-among-them",
    "equal-to-itself", "another-class", "a-subclass", "narrowed-class", "narrowed-result",
    "dropped-at-import",
])
def test_a_finding_counts_only_alone_and_in_a_test_that_passed(guarded, b):
    result = guarded(SHOWS_A, b)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*{UNSHOWN}*", "  test_ch99_toy.py: Score: B is positive."])


def test_a_session_where_a_test_failed_reports_only_that_failure(guarded):
    result = guarded(SHOWS_A, "def test_broken():\n    assert Score(1, 1).failing() == [0]\n")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.no_fnmatch_line(f"*{UNSHOWN}*")


def test_a_node_id_in_another_file_does_not_excuse_a_file_run_whole(guarded, pytester):
    pytester.makepyfile(**{"tests/experiments/test_other": "def test_x():\n    pass\n"})
    result = guarded(SHOWS_A, args=(
        "tests/experiments/test_ch99_toy.py", "tests/experiments/test_other.py::test_x"))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["  test_ch99_toy.py: Score: B is positive."])


IN_A_CLASS = """
from experiments.ch99_toy import Score


class Checks:  # not Test*: pytest collects nothing
    def test_a(self):
        assert Score(0, 1).failing() == ["A is positive."]
"""


@pytest.mark.parametrize("head, tests, args", [
    (IN_A_CLASS, (), ("tests/experiments",)),
    (IN_A_CLASS, (), ("tests/experiments/test_ch99_toy.py",)),
    ("import pytest", ("pytest.importorskip('no_such_module')", SHOWS_A), ("tests/experiments",)),
    ("import pytest", ("pytest.skip('later', allow_module_level=True)",), (".",)),
    ("def helper():\n    pass", (), ("tests",)),
], ids=["class", "class-given-as-a-path", "importorskip", "skip", "no-test"])
def test_a_test_file_that_yields_no_test_fails_the_session(guarded, head, tests, args):
    result = guarded(*tests, head=head, args=args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["  test_ch99_toy.py: no test collected*"])


@pytest.mark.parametrize("args", [
    ("tests/experiments/test_other.py",),
    ("tests/experiments", "--ignore", "tests/experiments/test_ch99_toy.py"),
], ids=["another-file-given", "ignored"])
def test_a_test_file_pytest_was_not_asked_to_run_is_not_named(guarded, pytester, args):
    pytester.makepyfile(**{"tests/experiments/test_other": "def test_x():\n    pass\n"})
    result = guarded(head=IN_A_CLASS, args=args)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.no_fnmatch_line(f"*{UNSHOWN}*")
