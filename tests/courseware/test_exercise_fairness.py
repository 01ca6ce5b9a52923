"""Every checker is fair, tested the way a class would test it: on many fresh draws.

Each ``tests/courseware/test_checks_<module>.py`` declares, in a module-level ``FAIRNESS`` table, for each of
its checkers an independent right answer (written from the exercise's statement by another method
than the book's: loops instead of vectorised code, float64, a search that stops on the named
quantity, the literal reading of the statement) and the three or more most plausible wrong ones,
each with a pattern its failure message must match:

    FAIRNESS = {
        "check_multi_head_write": {
            "right": [multi_write_loops],
            "wrong": [(interleaved_heads, "you wrote head by head"), ...],
        },
    }

Here every right answer must pass on each of ``SEEDS`` and every wrong one fail on each of them,
naming its mistake; and no failure message may print two numbers that look equal ("is 0.741287;
must be 0.741287"), which tells a student nothing.
"""
import importlib
import re
from pathlib import Path

import pytest

from courseware.checks import CHECKS, CheckFailed
from courseware.checks.core import _outcome
from case_cache import drawn_cases

SEEDS = range(20)
MODULES = sorted(path.stem for path in Path(__file__).parent.glob("test_checks_*.py"))


def fairness_tables() -> dict:
    tables = {}
    for module in MODULES:
        for name, table in getattr(importlib.import_module(module), "FAIRNESS", {}).items():
            assert name not in tables, f"{name} has a FAIRNESS entry in two modules"
            tables[name] = table
    return tables


TABLES = fairness_tables()


pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def verdict(check_name: str, answer, seed: int) -> str:
    """The CheckFailed message for ``answer`` on the cases drawn from ``seed``, or "" for a pass."""
    check = CHECKS[check_name]
    cases = drawn_cases(check_name, seed)  # a fresh copy, as if drawn again
    try:
        check.judge(cases, [_outcome(answer, args) for args in cases])
    except CheckFailed as failure:
        return str(failure)
    return ""


def look_equal(message: str) -> list[str]:
    """Decimal numbers (1.5, 1e-06) printed twice in ``message``."""
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+(?:e[-+]?\d+)?|e[-+]?\d+)", message)
    return sorted({n for n in numbers if numbers.count(n) > 1})


def test_every_checker_has_an_independent_right_answer_and_three_wrong_ones():
    missing = sorted(set(CHECKS) - set(TABLES))
    assert not missing, f"no FAIRNESS entry for {missing}"
    unknown = sorted(set(TABLES) - set(CHECKS))
    assert not unknown, f"FAIRNESS entries for checkers that do not exist: {unknown}"
    for name, table in TABLES.items():
        assert len(table["right"]) >= 1, f"{name}: no independent right answer"
        assert len(table["wrong"]) >= 3, f"{name}: {len(table['wrong'])} wrong answers; at least 3"


RIGHT = [(name, answer) for name, table in TABLES.items() for answer in table["right"]]
WRONG = [(name, answer, pattern) for name, table in TABLES.items() for answer, pattern in table["wrong"]]


@pytest.mark.parametrize(("name", "answer"), RIGHT, ids=[f"{n}-{a.__name__}" for n, a in RIGHT])
def test_right_answer_passes_on_every_seed(name, answer):
    failures = {seed: message for seed in SEEDS if (message := verdict(name, answer, seed))}
    assert not failures, f"a right answer fails on {len(failures)} of {len(SEEDS)} seeds: {failures}"


@pytest.mark.parametrize(("name", "answer", "pattern"), WRONG,
                         ids=[f"{n}-{getattr(a, '__name__', '?')}-{i}" for i, (n, a, _) in enumerate(WRONG)])
def test_wrong_answer_fails_on_every_seed_naming_its_mistake(name, answer, pattern):
    for seed in SEEDS:
        message = verdict(name, answer, seed)
        assert message, f"seed {seed}: a wrong answer passes"
        assert re.search(pattern, message), f"seed {seed}: {message!r} does not match {pattern!r}"
        assert not look_equal(message), f"seed {seed}: {message!r} prints {look_equal(message)} twice"


def test_look_equal_finds_numbers_printed_twice():
    assert look_equal("at T = 0.741287 the perplexity is 2.5; must be 0.741287") == ["0.741287"]
    assert look_equal("is 2.50, must be 2.5 over 20 cases of 20") == []
    assert look_equal("a relative error of 1e-06 (allowed: 1e-06)") == ["1e-06"]
