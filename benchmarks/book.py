"""Benchmarks of the book itself: chapter execution, explorer updates, the HTML build.

Each chapter runs in a fresh kernel exactly as the book build runs it (static
explorers, so every frame of every player is rendered); the explorers log the
time of every frame (:data:`lib.widgets.core.TIMINGS_ENV`). A frame is what one
slider move costs live: ``compute`` + artist ``update`` + rendering the figure.
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

from benchmarks.timing import Record, Timing, measured, percentile

__all__ = ["ROOT", "chapters", "book"]

ROOT = Path(__file__).resolve().parent.parent


def _execute(notebook: Path, timings: Path) -> float:
    """Seconds to run ``notebook`` top to bottom in a fresh kernel (the file is not changed)."""
    import nbformat
    from nbclient import NotebookClient

    from lib.widgets.core import TIMINGS_ENV, WIDGETS_ENV

    nb = nbformat.read(notebook, as_version=4)
    saved = {name: os.environ.get(name) for name in (WIDGETS_ENV, TIMINGS_ENV)}
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
    """Every chapter's execution time (goal: under 60 s) and every explorer's frame times
    (goal: 95th percentile under 100 ms)."""
    notebooks = sorted((ROOT / "chapters").glob("*.ipynb"))
    if quick:
        notebooks = notebooks[:1]
    records = []
    for notebook in notebooks:
        with tempfile.TemporaryDirectory() as folder:
            timings = Path(folder) / "frames.jsonl"
            seconds = _execute(notebook, timings)
            records.append(measured("chapters", f"{notebook.stem}: execution (static explorers, as in the build)",
                                    seconds, "s", goal="< 60"))
            lines = timings.read_text(encoding="utf-8").splitlines() if timings.exists() else []
        for line in lines:
            entry = json.loads(line)
            frame_ms = [1000 * s for s in entry["seconds"]]
            p95 = percentile(frame_ms, 95)
            records.append(measured(
                "explorers", f"{notebook.stem}: {entry['title']}", p95, "ms (95th percentile)", goal="< 100",
                timing=Timing(percentile(frame_ms, 50) / 1000, min(frame_ms) / 1000, max(frame_ms) / 1000,
                              len(frame_ms)),
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
    """The full HTML build (warnings as errors) and then every test, on a copy of the book.

    Together they are what ``make test`` runs once the packages are installed.
    """
    if quick:
        return []
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    with tempfile.TemporaryDirectory() as folder:
        copy = _copy_of_the_book(Path(folder))
        start = time.perf_counter()
        _run([str(jupyter_book), "build", str(copy), "--warningiserror", "--nitpick", "--keep-going"])
        build = time.perf_counter() - start
        # The benchmarks' own tests are left out: they check the results file this run is writing.
        _run([sys.executable, "-m", "pytest", "tests", "--nbval", "chapters",
              "--nbval-sanitize-with", "tests/nbval_sanitize.cfg", "-q", "--ignore", "tests/test_benchmarks.py"], cwd=copy)
        total = time.perf_counter() - start
    return [
        measured("book", "HTML build (jupyter-book build, every notebook executed)", build / 60, "min"),
        measured("book", "the test command after installation (build + every test)", total / 60, "min",
                 goal="< 30", note="without tests/test_benchmarks.py (about 30 s)"),
    ]
