"""Checker tests draw their inputs from a seed, not from the operating system.

In a notebook a checker draws fresh inputs on every call; in the test suite the
same draws on every run keep CI's verdict stable. The seed mixes the test's id
with ``CHECK_SEED`` (default 0), so ``make check-seeds`` can replay every checker
test under many other seeds and find a wrong answer that slips through only on
some draws.
"""
import os
import zlib

import pytest
import torch

import courseware.checks.core


@pytest.fixture(autouse=True)
def seeded_checker_inputs(request, monkeypatch):
    seed = zlib.crc32(f"{os.environ.get('CHECK_SEED', '0')}:{request.node.nodeid}".encode())
    generator = torch.Generator().manual_seed(seed)
    monkeypatch.setattr(courseware.checks.core, "fresh_generator", lambda: generator)


@pytest.fixture(autouse=True, scope="session")
def one_thread_per_lane():
    """One torch thread for the whole session. ``make test`` runs two pytest lanes side by side
    on two cores, and the chapters' runs compute on one thread each: a second thread per lane
    only oversubscribes the cores, and small tensor operations then wait for a thread that
    another process holds (several times slower; the unit lane took about 34 minutes).
    Results do not depend on it beyond float noise, which every comparison's tolerance allows.
    Subprocesses (notebook runs, the grader's sandboxes, book builds) keep their own settings."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module whose tensors are tiny: a second thread only waits, and many
    times slower while the other test lane or another job keeps the cores busy. Modules opt in
    with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
