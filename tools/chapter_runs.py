"""Run each notebook of the book once per numeric configuration, and reuse the run until
something it read changes.

Usage::

    python tools/chapter_runs.py book             # the build's runs (static explorers), into myst-nb's cache
    python tools/chapter_runs.py other-cpu        # the notebooks under tests/other_cpu.env (live explorers)
    python tools/chapter_runs.py book --jobs 1 chapters/09_attention.ipynb   # some notebooks only
    python tools/chapter_runs.py book --dry-run   # which runs are stale, and why

A *run* executes a notebook top to bottom in a fresh kernel (cwd = its folder, the cell timeout of
``_config.yml``) and is stored as ``_build/runs/<configuration>/<name>.ipynb`` with a record
``<name>.json`` of what it depended on:

* ``code``: the notebook's code cells (source and metadata) and kernelspec; prose is not part of it;
* ``environment``: the configuration's variables, Python's version, the machine's architecture, the
  pinned requirements and this file;
* ``files``: the SHA-256 of every file of the repository that the kernel opened, read as it ran
  (an audit hook records each ``open``, imports included) plus the file of every ``lib`` module
  it holds at the end.

A run is reused while all three hash the same. So changing one ``lib`` module re-runs exactly the
notebooks whose kernels imported it, directly or not; changing a sentence of a chapter re-runs
nothing. Runs go ``--jobs`` at a time (default: one per core), the longest first.

Two configurations, one run each per notebook (:data:`CONFIGURATIONS`):

* ``book``: as the machine is, explorers pre-rendered for the HTML book (``BOOK_WIDGETS=static``).
  Its runs are stored into myst-nb's execution cache, so the book build executes nothing itself,
  and ``tests/book/test_notebook_outputs.py`` compares them with the committed outputs.
* ``other-cpu``: the *student edition* of each chapter (``courseware.exercises.student_version``:
  every coding exercise's solution a stub that raises) under ``tests/other_cpu.env``, which imitates
  another CPU, explorers live (as a student's Jupyter runs them), then the book's answers: each
  exercise's solution and check cells as the master holds them. The run succeeds when exactly the
  student's check cells raise. Every cell of the master is compared with its committed output, the
  answers' through their copies (a student sees the book's numbers), and
  ``tests/courseware/test_exercises.py`` reads the student's failures. One run proves both, where
  two runs of every chapter did.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import platform
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "_build" / "runs"
JUPYTER_CACHE = ROOT / "_build" / ".jupyter_cache"  # execute.cache in _config.yml
FRAME_CACHE = ROOT / "_build" / "frame-cache"
WIDGETS_ENV = "BOOK_WIDGETS"  # lib.widgets.core.WIDGETS_ENV (imported by the kernel, not here)
FRAME_CACHE_ENV = "BOOK_FRAME_CACHE"  # lib.widgets.core.FRAME_CACHE_ENV
# What every run depends on besides its code and the files it opens.
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colours in a kernel's traceback
ENVIRONMENT_FILES = ("requirements.txt", "requirements-runtime.txt", "tools/chapter_runs.py")

# Installed in the kernel at start-up (before any cell): every path it opens, as an absolute path.
_RECORD_OPENS = (
    "import sys as _s, os as _os; _s.book_opened = set(); "
    "_s.addaudithook(lambda event, args, _o=_s.book_opened, _a=_os.path.abspath, _d=_os.fsdecode: "
    "_o.add(_a(_d(args[0]))) if event == 'open' and isinstance(args[0], (str, bytes)) else None); "
    "del _s, _os"
)
# Run after the last cell, in the same kernel: the files it opened and those of the lib modules it holds.
_REPORT_OPENS = (
    "import sys as _s, json as _j\n"
    "print(_j.dumps(sorted(_s.book_opened | {m.__file__ for n, m in list(_s.modules.items())\n"
    "    if (n == 'lib' or n.startswith('lib.')) and getattr(m, '__file__', None)})))"
)


@dataclass(frozen=True)
class Configuration:
    """A numeric configuration the notebooks run under."""

    name: str
    widgets: str  # BOOK_WIDGETS: "static" (pre-rendered players) or "live"
    env_file: str | None = None  # variables added to the kernel's environment
    edition: str = "master"  # "student": the hand-out is run, whose check cells raise by design

    def variables(self) -> dict[str, str]:
        """The variables this configuration sets in the kernel's environment."""
        variables = {WIDGETS_ENV: self.widgets}
        if self.env_file:
            for line in (ROOT / self.env_file).read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    key, _, value = line.partition("=")
                    variables[key.strip()] = value.strip()
        return variables


CONFIGURATIONS = {
    "book": Configuration("book", widgets="static"),
    "other-cpu": Configuration("other-cpu", widgets="live", env_file="tests/other_cpu.env", edition="student"),
}


def book_notebooks() -> list[Path]:
    """Every notebook of the table of contents (the chapters and the Benchmarks page)."""
    import yaml  # PyYAML, installed with Jupyter Book

    files = []

    def walk(entries):
        for entry in entries:
            if "file" in entry and (ROOT / (entry["file"] + ".ipynb")).is_file():
                files.append(ROOT / (entry["file"] + ".ipynb"))
            walk(entry.get("chapters", []) + entry.get("sections", []))

    walk(yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"])
    return files


def chapter_notebooks() -> list[Path]:
    """The chapters, whose outputs the tests compare with the committed ones."""
    return sorted((ROOT / "chapters").glob("*.ipynb"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# In a student-edition run, the id of a master's exercise cell run after the student's chapter.
BOOK_ANSWER = "{}--book"


def executed_source(notebook: Path, configuration: Configuration):
    """What a run of ``notebook`` under ``configuration`` executes: the notebook itself, or its student
    edition followed by the book's answers, each exercise's solution and check cells as the master
    holds them (ids :data:`BOOK_ANSWER`), so that those run under the configuration too."""
    master = nbformat.read(notebook, as_version=4)
    if configuration.edition == "master":
        return master
    from courseware.exercises import student_version

    run = student_version(master, notebook.stem)
    answers = exercise_cells(master)
    for cell in master.cells:
        if cell.get("id") in answers:
            answer = copy.deepcopy(cell)
            answer.id, answer.outputs, answer.execution_count = BOOK_ANSWER.format(cell.id), [], None
            run.cells.append(answer)
    return run


def exercise_cells(master) -> dict[str, str]:
    """``{cell id: "solution" or "check"}``: the cells of a master notebook's coding exercises."""
    from courseware.exercises import coding_exercises

    cells = {}
    for exercise in coding_exercises(master):
        cells[exercise.solution_cell], cells[exercise.check_cell] = "solution", "check"
    return cells


def run_cell_id(master, cell_id: str, configuration: Configuration) -> str:
    """The id of the cell that runs the master's cell ``cell_id`` in a run under ``configuration``."""
    if configuration.edition == "student" and cell_id in exercise_cells(master):
        return BOOK_ANSWER.format(cell_id)
    return cell_id


def cells_meant_to_fail(notebook: Path, configuration: Configuration) -> set[str]:
    """The ids of the cells that raise in a good run: the student's checks in the student edition."""
    if configuration.edition == "master":
        return set()
    return {name for name, kind in exercise_cells(nbformat.read(notebook, as_version=4)).items() if kind == "check"}


def failed_cells(executed) -> dict[str, str]:
    """``{cell id: the error it raised}`` for every code cell of a run that raised."""
    return {cell.get("id"): f"{output.ename}: {output.evalue}"
            for cell in executed.cells if cell.cell_type == "code"
            for output in cell.outputs if output.output_type == "error"}


def _traceback_end(executed, cell_id: str, lines: int = 6) -> str:
    """The last ``lines`` lines of the traceback of the cell ``cell_id`` of a run, without colours."""
    cell = next(cell for cell in executed.cells if cell.get("id") == cell_id)
    error = next(output for output in cell.outputs if output.output_type == "error")
    return "\n".join(ANSI.sub("", "\n".join(error.traceback)).strip().splitlines()[-lines:])


class UnexpectedFailures(Exception):
    """A student-edition run in which a cell other than a student's check raised (the book's answers
    included), or a student's check did not."""


def code_hash(notebook) -> str:
    """The hash of what a run executes: the code cells (source, metadata) and the kernelspec."""
    cells = [[cell.source, cell.metadata] for cell in notebook.cells if cell.cell_type == "code"]
    kernelspec = notebook.metadata.get("kernelspec", {})
    return _sha256(json.dumps([cells, kernelspec], sort_keys=True).encode())


def environment_hash(configuration: Configuration) -> str:
    """The hash of what every run of ``configuration`` depends on besides code and files read."""
    parts = [sorted(configuration.variables().items()), sys.version, platform.machine()]
    parts += [_sha256((ROOT / name).read_bytes()) for name in ENVIRONMENT_FILES]
    return _sha256(json.dumps(parts).encode())


def run_path(notebook: Path, configuration: Configuration) -> Path:
    """Where the run of ``notebook`` under ``configuration`` is stored (its record beside it)."""
    return RUNS / configuration.name / notebook.relative_to(ROOT).with_suffix(".ipynb")


def record_path(notebook: Path, configuration: Configuration) -> Path:
    return run_path(notebook, configuration).with_suffix(".json")


def _repository_files(paths: list[str]) -> dict[str, str]:
    """``{path relative to the repository: SHA-256}`` of the repository's source files among ``paths``.

    A compiled module (``__pycache__/x.cpython-311.pyc``) stands for its source ``x.py``; files
    under ``_build`` and ``.venv`` and the notebooks themselves are not sources of a run.
    """
    found = {}
    for name in paths:
        path = Path(name)
        if path.parent.name == "__pycache__" and path.suffix == ".pyc":
            path = path.parent.parent / (path.name.split(".")[0] + ".py")
        try:
            relative = path.resolve().relative_to(ROOT)
        except ValueError:
            continue  # outside the repository: an installed package, fixed by the pins
        if relative.parts[0] in ("_build", ".venv") or path.suffix == ".ipynb" or not path.is_file():
            continue
        found[relative.as_posix()] = _sha256(path.read_bytes())
    return found


def stale_reason(notebook: Path, configuration: Configuration) -> str | None:
    """Why the stored run of ``notebook`` cannot be reused, or ``None`` if it can."""
    record_file, run_file = record_path(notebook, configuration), run_path(notebook, configuration)
    if not (record_file.is_file() and run_file.is_file()):
        return "never run"
    record = json.loads(record_file.read_text())
    if record.get("code") != code_hash(executed_source(notebook, configuration)):
        return "its code cells changed"
    if record.get("environment") != environment_hash(configuration):
        return "the configuration, Python or the pins changed"
    for name, digest in record.get("files", {}).items():
        path = ROOT / name
        if not path.is_file() or _sha256(path.read_bytes()) != digest:
            return f"{name} changed"
    return None


def cell_timeout() -> int:
    """The per-cell timeout of the book build (``execute.timeout`` in ``_config.yml``)."""
    import yaml

    return int(yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["timeout"])


def run(notebook: Path, configuration: Configuration) -> float:
    """Execute ``notebook`` under ``configuration`` in a fresh kernel; store the run and its record.

    Raises nbclient's ``CellExecutionError`` (a failing cell or finding) after storing nothing; in
    the student edition, where the checks raise by design, :class:`UnexpectedFailures` if any
    other cell raised or a check did not.
    """
    from nbclient import NotebookClient

    source = executed_source(notebook, configuration)
    executed = copy.deepcopy(source)
    executed.cells.append(nbformat.v4.new_code_cell(_REPORT_OPENS))
    meant_to_fail = cells_meant_to_fail(notebook, configuration)
    # The kernel imports this repository's lib whatever is installed, so the record names its files.
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **configuration.variables(), FRAME_CACHE_ENV: str(FRAME_CACHE), "PYTHONPATH": python_path}
    client = NotebookClient(
        executed, timeout=cell_timeout(), kernel_name="python3", allow_errors=bool(meant_to_fail),
        store_widget_state=False, record_timing=False,
        extra_arguments=[f"--IPKernelApp.exec_lines={json.dumps([_RECORD_OPENS])}",
                         "--IPKernelApp.log_level=ERROR"],  # not its notice that it listens on loopback TCP
        resources={"metadata": {"path": str(notebook.parent)}},
    )
    started, start = time.time(), time.perf_counter()
    client.execute(env=env)
    seconds = time.perf_counter() - start
    report = executed.cells.pop()
    failed = failed_cells(executed)
    if set(failed) != meant_to_fail:
        unexpected = [f"cell {name} raised {error}\n{_traceback_end(executed, name)}"
                      for name, error in failed.items() if name not in meant_to_fail]
        passed = [f"the check {name} did not raise" for name in sorted(meant_to_fail - set(failed))]
        raise UnexpectedFailures("\n".join(unexpected + passed))
    opened = json.loads("".join(output.get("text", "") for output in report.outputs))
    executed.metadata.pop("widgets", None)
    files = _repository_files(opened)
    for name in files:  # edited while the notebook ran: the run may hold either version, so redo it next time
        if (ROOT / name).stat().st_mtime >= started:
            files[name] = "edited during the run"
    record = {
        "notebook": notebook.relative_to(ROOT).as_posix(),
        "code": code_hash(source),
        "environment": environment_hash(configuration),
        "files": files,
        "seconds": round(seconds, 1),
    }
    target = run_path(notebook, configuration)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(executed, target)
    record_path(notebook, configuration).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return seconds


def _run_one(notebook: Path, configuration: Configuration) -> tuple[Path, float | None, str | None]:
    try:
        return notebook, run(notebook, configuration), None
    except Exception as error:  # reported with the others; one failing notebook does not stop the rest
        return notebook, None, f"{type(error).__name__}: {error}"


def _expected_seconds(notebook: Path, configuration: Configuration) -> float:
    """The last run's time, or (never run) the notebook's size as a stand-in: longest first."""
    record_file = record_path(notebook, configuration)
    if record_file.is_file():
        return json.loads(record_file.read_text()).get("seconds", 0.0)
    return notebook.stat().st_size / 1e4


def ensure_runs(notebooks: list[Path], configuration: Configuration, jobs: int | None = None,
                log=print) -> dict[Path, str]:
    """Run every notebook of ``notebooks`` whose stored run is stale; reuse the others.

    Returns ``{notebook: error}`` for the notebooks whose run failed (empty when all succeeded).
    """
    stale = {}
    for notebook in notebooks:
        reason = stale_reason(notebook, configuration)
        if reason is None:
            log(f"{configuration.name}: {notebook.relative_to(ROOT)} reused")
        else:
            stale[notebook] = reason
    order = sorted(stale, key=lambda nb: -_expected_seconds(nb, configuration))
    failures = {}
    if not order:
        return failures
    jobs = min(jobs or len(os.sched_getaffinity(0)), len(order))
    if jobs == 1:
        results = (_run_one(notebook, configuration) for notebook in order)
    else:
        import multiprocessing

        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"))
        results = (done.result() for done in as_completed(
            [pool.submit(_run_one, notebook, configuration) for notebook in order]))
    for notebook, seconds, error in results:
        if error is None:
            log(f"{configuration.name}: {notebook.relative_to(ROOT)} ran in {seconds:.1f} s ({stale[notebook]})")
        else:
            failures[notebook] = error
            last_line = ANSI.sub("", error).strip().splitlines()[-1]
            log(f"{configuration.name}: {notebook.relative_to(ROOT)} FAILED ({stale[notebook]}): {last_line}")
    if jobs > 1:
        pool.shutdown()
    return failures


_loaded: dict[tuple[str, Path], object] = {}


def load_runs(notebooks: list[Path], configuration: Configuration) -> dict:
    """``{notebook: its run, or the error that stopped it}``, making the stale runs (once per process)."""
    missing = [notebook for notebook in notebooks if (configuration.name, notebook) not in _loaded]
    failures = ensure_runs(missing, configuration) if missing else {}
    for notebook in missing:
        _loaded[configuration.name, notebook] = failures.get(notebook) or nbformat.read(
            run_path(notebook, configuration), as_version=4)
    return {notebook: _loaded[configuration.name, notebook] for notebook in notebooks}


def store_in_build_cache(notebooks: list[Path]) -> None:
    """Put the ``book`` runs of ``notebooks`` into myst-nb's execution cache (jupyter-cache).

    myst-nb finds a notebook there by its code cells and merges the stored outputs into the page,
    so the build executes nothing. A run stored again replaces the entry it had; an entry that
    already holds the current run (the same record) is left as it is.
    """
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(JUPYTER_CACHE))
    configuration = CONFIGURATIONS["book"]
    for notebook in notebooks:
        record = record_path(notebook, configuration).read_bytes()
        try:  # found by the code cells, which the committed notebook and its run share
            stored = cache.match_cache_notebook(nbformat.read(notebook, as_version=4))
        except KeyError:
            stored = None
        if stored is not None and stored.data.get("record") == _sha256(record):
            continue
        cache.cache_notebook_bundle(
            CacheBundleIn(nbformat.read(run_path(notebook, configuration), as_version=4), str(notebook),
                          data={"execution_seconds": json.loads(record)["seconds"], "record": _sha256(record)}),
            check_validity=False, overwrite=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configuration", choices=sorted(CONFIGURATIONS))
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="default: the book's notebooks (book) or the chapters (other-cpu)")
    parser.add_argument("--jobs", type=int, default=None, help="runs at a time (default: one per core)")
    parser.add_argument("--dry-run", action="store_true", help="say which runs are stale and why; run nothing")
    args = parser.parse_intermixed_args(argv)
    configuration = CONFIGURATIONS[args.configuration]
    if args.notebooks:
        notebooks = [path.resolve() for path in args.notebooks]
    else:
        notebooks = book_notebooks() if configuration.name == "book" else chapter_notebooks()
    if args.dry_run:
        for notebook in notebooks:
            print(f"{notebook.relative_to(ROOT)}: {stale_reason(notebook, configuration) or 'reused'}")
        return 0
    start = time.perf_counter()
    failures = ensure_runs(notebooks, configuration, args.jobs)
    if configuration.name == "book":
        store_in_build_cache([nb for nb in notebooks if nb not in failures])
    print(f"{configuration.name}: {len(notebooks)} notebooks ready in {time.perf_counter() - start:.0f} s")
    for notebook, error in failures.items():
        print(f"FAILED {notebook.relative_to(ROOT)}: {ANSI.sub('', error)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
