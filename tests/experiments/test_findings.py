"""experiments.findings: a result checks the findings its class declares, prints each with its
verdict, and fails naming the ones that do not hold (and the cells whose prose they back)."""
from dataclasses import dataclass

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
