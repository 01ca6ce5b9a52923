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
Each is a :class:`Check` written as data (:mod:`lib.checks.core`): how to draw the
cases, the book's answer to one case, and a table of known wrong answers
(:class:`Slip`) with what to tell a student whose result equals one. Adding an
exercise means writing those few lines; the comparison, the tolerance that
follows the result's dtype and the messages are shared.
"""
from lib.checks import activations, attention, decoding, memory, metrics, optim, rnn, seq2seq, transformer
from lib.checks import gating
from lib.checks import word2vec
from lib.checks import lm
from lib.checks.core import Check, CheckFailed, Slip, fresh_generator

_CHAPTER_MODULES = (activations, optim, rnn, gating, word2vec, lm, decoding, metrics, attention, seq2seq, transformer,
                    memory)

# The name a check cell calls → its checker (the grader looks checkers up here).
CHECKS: dict[str, Check] = {
    name: value
    for module in _CHAPTER_MODULES
    for name, value in vars(module).items()
    if name.startswith("check_") and isinstance(value, Check)
}
globals().update(CHECKS)

__all__ = ["CHECKS", "Check", "CheckFailed", "Slip", "fresh_generator", *CHECKS]
