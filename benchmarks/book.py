"""Benchmarks of the book itself: chapter execution, explorer updates, the HTML build.

Each chapter runs twice in a fresh kernel, one chapter at a time: live, as a reader runs it
in Jupyter (the time the 60 s budget is about), and as the book build runs it (static
explorers, every frame of every player rendered, no frame cache); the explorers log the time
of every frame then (:data:`lib.widgets.core.TIMINGS_ENV`). A frame is what one slider move
costs live: ``compute`` + artist ``update`` + rendering the figure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.timing import Record, Timing, measured

__all__ = ["ROOT", "chapters", "book"]

ROOT = Path(__file__).resolve().parent.parent


def _execute(notebook: Path, timings: Path | None) -> float:
    """Seconds to run ``notebook`` top to bottom in a fresh kernel (the file is not changed):
    live, or with ``timings`` (a file for the frame times) as the build runs it."""
    import nbformat
    from nbclient import NotebookClient

    from lib.widgets.core import TIMINGS_ENV, WIDGETS_ENV

    nb = nbformat.read(notebook, as_version=4)
    saved = {name: os.environ.get(name) for name in (WIDGETS_ENV, TIMINGS_ENV)}
    if timings is None:
        os.environ[WIDGETS_ENV] = "live"
        os.environ.pop(TIMINGS_ENV, None)
    else:
        os.environ[WIDGETS_ENV], os.environ[TIMINGS_ENV] = "static", str(timings)
    try:
        client = NotebookClient(nb, timeout=900, kernel_name="python3",
                                resources={"metadata": {"path": str(notebook.parent)}})
        start = time.perf_counter()
        client.execute()
        return time.perf_counter() - start
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def chapters(quick: bool = False) -> list[Record]:
    """Every chapter's execution time live (goal: under 60 s) and as the build runs it, and every
    explorer's frame times (goal: 95th percentile under 100 ms)."""
    notebooks = sorted((ROOT / "chapters").glob("*.ipynb"))
    if quick:
        notebooks = notebooks[:1]
    records = []
    for notebook in notebooks:
        records.append(measured("chapters", f"{notebook.stem}: execution, live (as a reader runs it)",
                                _execute(notebook, None), "s", goal="< 60"))
        with tempfile.TemporaryDirectory() as folder:
            timings = Path(folder) / "frames.jsonl"
            seconds = _execute(notebook, timings)
            records.append(measured("chapters", f"{notebook.stem}: execution, static explorers (as the build "
                                    "runs it, every frame rendered)", seconds, "s"))
            lines = timings.read_text(encoding="utf-8").splitlines() if timings.exists() else []
        for line in lines:
            entry = json.loads(line)
            frame_ms = [1000 * s for s in entry["seconds"]]
            # Linear interpolation between the two nearest ranks (numpy's default method, named here).
            p95, p50 = (float(np.percentile(frame_ms, q, method="linear")) for q in (95, 50))
            records.append(measured(
                "explorers", f"{notebook.stem}: {entry['title']}", p95, "ms (95th percentile)", goal="< 100",
                timing=Timing(p50 / 1000, min(frame_ms) / 1000, max(frame_ms) / 1000, len(frame_ms)),
                note=f"{len(frame_ms)} frames",
            ))
    return records


def _run(command: list[str], cwd: Path = ROOT) -> None:
    """Run ``command``; on failure raise with the end of its output, which says why."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[:3])} ... failed ({done.returncode}):\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")


def _copy_of_the_book(folder: Path) -> Path:
    copy = folder / "book"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("_build", ".venv", ".git", "student", "__pycache__",
                                                                ".hypothesis", ".pytest_cache"))
    return copy


def book(quick: bool = False) -> list[Record]:
    """What ``make book`` and ``make test`` do once the packages are installed, on a fresh copy of
    the book (no runs, no frame cache): the runs and the HTML build (warnings as errors), then
    every test; and the build again after one sentence of one chapter changed.
    """
    if quick:
        return []
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    with tempfile.TemporaryDirectory() as folder:
        copy = _copy_of_the_book(Path(folder))

        def make_book():
            _run([sys.executable, "tools/chapter_runs.py", "book"], cwd=copy)
            _run([str(jupyter_book), "build", ".", "--warningiserror", "--nitpick", "--keep-going"], cwd=copy)

        start = time.perf_counter()
        make_book()
        build = time.perf_counter() - start
        # The benchmarks' own tests are left out: they check the results file this run is writing.
        _run([sys.executable, "-m", "pytest", "tests", "-m", "not other_cpu", "-q",
              "--ignore", "tests/book/test_benchmarks.py"], cwd=copy)
        _run([sys.executable, "tools/chapter_runs.py", "other-cpu"], cwd=copy)
        _run([sys.executable, "-m", "pytest", "tests/book/test_notebook_outputs.py", "-m", "other_cpu", "-q"], cwd=copy)
        total = time.perf_counter() - start
        import nbformat

        chapter = copy / "chapters" / "09_attention.ipynb"
        notebook = nbformat.read(chapter, as_version=4)
        prose = next(cell for cell in notebook.cells if cell.cell_type == "markdown" and " the " in cell.source)
        prose.source = prose.source.replace(" the ", " this ", 1)  # one word of one sentence
        nbformat.write(notebook, chapter)
        start = time.perf_counter()
        make_book()
        edit = time.perf_counter() - start
    return [
        measured("book", "HTML build from a fresh clone (every notebook run, every frame rendered)", build / 60,
                 "min", goal="< 6"),
        measured("book", "the test command after installation (build + every test, one lane)", total / 60, "min",
                 goal="< 30", note="without tests/book/test_benchmarks.py (about 30 s)"),
        measured("book", "the build again after a sentence of one chapter changed", edit / 60, "min", goal="< 2"),
    ]
