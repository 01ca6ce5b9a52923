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


def _tensors(value, found: list) -> list:
    """Every tensor in ``value`` (tuples, lists and dicts walked), in order."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _tensors(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors(item, found)
    return found


def _clonable(cases: list[tuple]) -> bool:
    """Whether ``clone`` copies every tensor of ``cases`` as deepcopy does: plain, contiguous CPU tensors
    that record no graph, no two of them sharing memory (deepcopy keeps two views of one storage as
    two views of one copy; clones would be apart)."""
    storages = {}
    for tensor in _tensors(cases, []):
        if (type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.device.type != "cpu"
                or tensor.requires_grad or not tensor.is_contiguous() or vars(tensor)):
            return False
        pointer = tensor.untyped_storage().data_ptr()
        if tensor.numel() and storages.setdefault(pointer, tensor) is not tensor:
            return False
    return True


@functools.cache
def _drawn(check_name: str, seed: int) -> tuple[list[tuple], bool]:
    cases = CHECKS[check_name].make_cases(torch.Generator().manual_seed(seed))
    return cases, _clonable(cases)


def drawn_cases(check_name: str, seed: int) -> list[tuple]:
    """The cases ``check_name`` draws from ``seed``, as a fresh deep copy: no answer, reference or
    slip sees another's changes (every checker's cases survive deepcopy bit for bit: dtype, shape,
    strides, values). Where :func:`_clonable`, each tensor is cloned first and deepcopy reuses the
    clone (the same tensor twice is still one copy): the same copy, several times faster than
    deepcopy's own way with tensors, which the fairness test's 8,000 copies of cases felt."""
    cases, clonable = _drawn(check_name, seed)
    memo = {id(tensor): tensor.clone() for tensor in _tensors(cases, [])} if clonable else {}
    return copy.deepcopy(cases, memo)
