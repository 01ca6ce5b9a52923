"""One cache of checkers' drawn cases for the test session, shared by the test files that judge
many answers on the same seeds (test_exercise_fairness.py, test_checks_determinism.py).

A checker's ``make_cases`` redraws until its cases tell the known slips apart, which costs far
more than judging an answer. Every answer in a checker's FAIRNESS table is judged on the same 20
seeds: two right and five wrong for check_momentum_rate, 5 to 18 answers per checker (about 10 on
average). Without the cache each answer redraws the same cases, about seven draws per seed where
one will do; with it a checker's cases are drawn once per seed, whichever file asks first.
"""
import copy
import functools

import torch

from courseware.checks import CHECKS


@functools.cache
def _drawn(check_name: str, seed: int) -> list[tuple]:
    return CHECKS[check_name].make_cases(torch.Generator().manual_seed(seed))


def drawn_cases(check_name: str, seed: int) -> list[tuple]:
    """The cases ``check_name`` draws from ``seed``, as a fresh deep copy: no answer, reference or
    slip sees another's changes (every checker's cases survive deepcopy bit for bit: dtype, shape,
    strides, values)."""
    return copy.deepcopy(_drawn(check_name, seed))
