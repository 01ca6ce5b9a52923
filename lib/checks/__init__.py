"""Checkers for the book's coding exercises.

A check cell in a chapter calls one ``check_*`` function with the student's
function. The checker runs it on *fresh* random inputs (a new seed every call, so
hard-coding the answers shown in the chapter does not pass), compares the result
with the book's tested implementation, and either prints one line starting with
``✓`` or raises :class:`CheckFailed` with a message a student can act on.

The printed line does not depend on the random inputs, so a passing check cell
has a stable output that nbval can compare. Every checker is registered in
:data:`CHECKS` under the name a check cell calls it by.

Checkers live in one module per chapter (``lib/checks/attention.py``, ...) and are
re-exported here, so a check cell always writes ``from lib.checks import check_...``.
A chapter's module is imported when one of its checkers is first asked for (PEP 562), so a
chapter's kernel imports only its own checkers and the lib modules they test: the book's
execution cache (``tools/chapter_runs.py``) then re-runs a chapter only when code it uses changes.
Each is a :class:`Check` written as data (:mod:`lib.checks.core`): how to draw the
cases, the book's answer to one case, and a table of known wrong answers
(:class:`Slip`) with what to tell a student whose result equals one. Adding an
exercise means writing those few lines; the comparison, the tolerance that
follows the result's dtype and the messages are shared.
"""
import ast
import importlib
from pathlib import Path

from lib.checks.core import Check, CheckFailed, Slip, fresh_generator

# The chapters' checker modules, in chapter order.
_CHAPTER_MODULES = ("activations", "optim", "rnn", "gating", "word2vec", "lm", "decoding", "metrics",
                    "attention", "seq2seq", "transformer", "memory")


def _checker_names(module: str) -> list[str]:
    """The ``check_*`` names that ``lib/checks/<module>.py`` assigns at top level (read, not imported)."""
    tree = ast.parse((Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    return [target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name) and target.id.startswith("check_")]


_MODULE_OF = {name: module for module in _CHAPTER_MODULES for name in _checker_names(module)}


def _all_checks() -> dict[str, Check]:
    """The name a check cell calls → its checker (the grader looks checkers up here)."""
    checks = {}
    for module in _CHAPTER_MODULES:
        for name, value in vars(importlib.import_module(f"lib.checks.{module}")).items():
            if name.startswith("check_") and isinstance(value, Check):
                checks[name] = value
    return checks


def __getattr__(name: str):
    if name == "CHECKS":
        value = _all_checks()
    elif name in _MODULE_OF:
        value = getattr(importlib.import_module(f"lib.checks.{_MODULE_OF[name]}"), name)
    else:
        raise AttributeError(f"module 'lib.checks' has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = ["CHECKS", "Check", "CheckFailed", "Slip", "fresh_generator", *_MODULE_OF]
