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


# ---- make test: which tests wait for the book ----------------------------------------------------
# `make test` starts most tests at once, beside `make book` (Makefile: TEST_PARTS); only those marked
# `built` run after it, in the same recipe: the browser tests and the files below, which read the
# built HTML, the build's runs of the chapters or myst-nb's cache. A test that reads the build and is
# missing here fails beside the build (below) instead of reading a half-built book: add its file.
BUILT_FILES = {
    "tests/book/test_notebook_outputs.py",  # the build's runs (the other_cpu half waits for its own runs)
    "tests/book/test_launch.py",
    "tests/book/test_site_weight.py",
    "tests/i18n/test_chinese_edition.py",
}
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What `make book` writes while the other parts run: run beside the build (TESTS_BESIDE_THE_BUILD, set
# by the Makefile), a test that opens or lists anything under these fails, naming the path.
BEING_BUILT = tuple(os.path.join(_ROOT, "_build", *name.split("/"))
                    for name in ("html", "zh_CN", "runs/book", ".jupyter_cache", "jupyter_execute", "frame-cache"))


def being_built(path) -> bool:
    """Whether ``path`` lies in what ``make book`` writes (:data:`BEING_BUILT`)."""
    path = os.path.abspath(os.fsdecode(path))
    return any(path == built or path.startswith(built + os.sep) for built in BEING_BUILT)


def _refuse_the_build(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        if being_built(args[0]):
            raise PermissionError(
                f"{os.fsdecode(args[0])}: this test reads the book while `make test` builds it beside the "
                "test; add its file to BUILT_FILES in tests/conftest.py so that it runs after the build")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "built: reads the built book, its runs or myst-nb's cache: `make test` runs it after "
        "`make book` (set in tests/conftest.py: every browser test and the files of BUILT_FILES)")
    if os.environ.get("TESTS_BESIDE_THE_BUILD"):
        import sys

        sys.addaudithook(_refuse_the_build)


def pytest_collection_modifyitems(config, items):
    for item in items:
        relative = os.path.relpath(str(item.path), _ROOT).replace(os.sep, "/")
        if item.get_closest_marker("other_cpu"):
            continue  # waits for the other-cpu runs only, not for the book
        if item.get_closest_marker("browser") or relative in BUILT_FILES:
            item.add_marker(pytest.mark.built)
