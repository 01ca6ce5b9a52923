"""Grade submissions: one sandboxed run per submission, one fresh process per exercise.

:func:`grade_submission` never raises for anything a submission contains: a corrupt
file, a wrong nbformat, an unknown or malicious master name, a crash or a timeout is
that submission's (or that exercise's) FAIL with a plain-text reason.
:func:`grade_all` grades many submissions in parallel and hands each
:class:`Report` to a callback as soon as it is finished. Whatever a class folder holds —
links, FIFOs, devices, names in any encoding or of any length — every regular notebook
in it is graded, and every other entry named ``*.ipynb`` is reported, not opened.
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nbformat
import torch

from courseware.checks import CHECKS, CheckFailed
from courseware.exercises import BOOK_CHAPTERS, CodingExercise, coding_exercises
from courseware.grading import sandbox
from courseware.grading.results import FrameReader, plain_text, read_outcome
from courseware.grading.scan import review_flags

CELL_TIMEOUT = 120  # seconds (wall and CPU) each exercise may run
MEMORY_LIMIT = 3 << 30  # bytes of address space per process (torch alone maps about 1 GiB)
FILE_LIMIT = 64 << 20  # bytes per file the submission writes
PROCESS_MARGIN = 64  # processes the sandbox may add to its user's count
STARTUP_SECONDS = 120  # for the sandbox to start and import torch
STALL_SECONDS = 10  # beyond an exercise's timeout, for the probe to report it; then it is killed
MAX_NOTEBOOK_BYTES = 20 << 20
MAX_RESULT_BYTES = 256 << 20  # every result of one submission, in all
NAME_CHARACTERS = 120  # of a student or submission name as printed and recorded
MASTER_NAME = re.compile(r"[0-9]{2}_[a-z0-9_]+")
PROBE_SOURCE = Path(__file__).parents[1] / "probe.py"


@dataclass(frozen=True)
class Master:
    """A chapter of the book and its coding exercises."""

    name: str  # e.g. "09_attention"
    exercises: tuple[CodingExercise, ...]


def load_masters(chapters: Path) -> dict[str, Master]:
    """Every chapter's coding exercises, read once before any submission is graded.

    Raises
    ------
    ValueError
        When ``chapters`` holds no notebook (or a master is malformed).
    """
    masters = {}
    for path in sorted(Path(chapters).glob("*.ipynb")):
        exercises = coding_exercises(nbformat.read(path, as_version=4))
        if exercises:
            masters[path.stem] = Master(path.stem, tuple(exercises))
    if not masters:
        raise ValueError(f"no chapter with coding exercises in {chapters}")
    return masters


@dataclass
class Verdict:
    """One exercise of one submission."""

    exercise: str
    passed: bool
    message: str
    review: list[str] = field(default_factory=list)  # reasons for a human to look (REVIEW)


@dataclass
class Report:
    """One submission's grades; ``error`` is set when it could not be graded at all.

    ``submission`` and ``student`` are names as printed (see :func:`plain_text`), not paths."""

    submission: str  # relative to the folder that was graded
    student: str
    seed: int
    master: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0
    key: str = ""  # a hash of the submission's path as bytes: tells apart names that print alike

    @property
    def points(self) -> int:
        return sum(v.passed for v in self.verdicts)

    @property
    def score(self) -> str:
        return "error" if self.error else f"{self.points}/{len(self.verdicts)}"

    @property
    def all_passed(self) -> bool:
        return not self.error and bool(self.verdicts) and all(v.passed and not v.review for v in self.verdicts)

    def lines(self) -> list[str]:
        """The report as printed: one line per exercise, then the score."""
        out = [f"{self.submission} (student {self.student}, master {self.master or 'unknown'}, seed {self.seed})"]
        if self.error:
            return out + [f"  FAIL  cannot grade this submission: {self.error}", "  score error"]
        for verdict in self.verdicts:
            review = f"  REVIEW: {'; '.join(verdict.review)}" if verdict.review else ""
            out.append(f"  {'PASS' if verdict.passed else 'FAIL'}  {verdict.exercise}: {verdict.message}{review}")
        return out + [f"  score {self.score}"]


def student_id(submission: Path, folder: Path | None) -> str:
    """The student a submission belongs to: its top folder inside ``folder``, else its file name
    (as printed: see :func:`plain_text`)."""
    if folder is not None:
        relative = submission.relative_to(folder)
        if len(relative.parts) > 1:
            return plain_text(relative.parts[0], NAME_CHARACTERS)
    return plain_text(submission.stem, NAME_CHARACTERS)


def _new_report(path: Path, folder: Path | None, seed: int) -> Report:
    relative = path.relative_to(folder) if folder else Path(path.name)
    key = hashlib.sha256(os.fsencode(relative)).hexdigest()[:10]
    return Report(plain_text(relative, 2 * NAME_CHARACTERS), student_id(path, folder), seed, key=key)


def find_master(notebook, file_name: str, masters: dict[str, Master]) -> Master:
    """The chapter a submission answers: ``metadata.exercises.master``, else the file name.

    Only names of the book's own chapters are accepted (no paths).

    Raises
    ------
    ValueError
        When the metadata names something that is not a chapter of the book, or
        neither the metadata nor the file name identifies one.
    """
    recorded = notebook.metadata.get("exercises", {}).get("master") if isinstance(
        notebook.metadata.get("exercises"), dict) else None
    if recorded is not None:
        if isinstance(recorded, str) and MASTER_NAME.fullmatch(recorded) and recorded in masters:
            return masters[recorded]
        raise ValueError(f"its metadata.exercises.master is {plain_text(repr(recorded), 80)}, which is not a "
                         f"chapter of the book (expected one of {sorted(masters)})")
    for name in sorted(masters, key=len, reverse=True):
        if file_name.startswith(name):
            return masters[name]
    raise ValueError(f"it has no metadata.exercises.master and its name starts with none of {sorted(masters)}")


def _defines(source: str, function: str) -> bool:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # nested too deeply to parse: not a definition
        return False
    return any(isinstance(node, ast.FunctionDef) and node.name == function for node in tree.body)


def solution_sources(notebook, exercises) -> dict[str, str]:
    """Each exercise's solution source: the cell with its id, else the last cell defining its function.

    The second rule finds answers in notebooks without cell ids (nbformat 4.4) and in
    copies whose cells were recreated.
    """
    code = [cell for cell in notebook.cells if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str)]
    by_id = {cell.get("id"): cell.source for cell in code}
    sources = {}
    for exercise in exercises:
        if exercise.solution_cell in by_id:
            sources[exercise.id] = by_id[exercise.solution_cell]
            continue
        defining = [cell.source for cell in code if _defines(cell.source, exercise.function)]
        if defining:
            sources[exercise.id] = defining[-1]
    return sources


def _file_kind(mode: int) -> str:
    """What a directory entry that is not a regular file is, in words."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISDIR, "a folder"))
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")


def read_submission(path: Path):
    """The notebook at ``path`` as nbformat 4.

    The file is opened without following a link and without blocking, and read only if it
    is a regular file of at most :data:`MAX_NOTEBOOK_BYTES`.

    Raises
    ------
    ValueError
        With a plain-text reason when it is not a readable notebook.
    """
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        if os.path.islink(path):
            raise ValueError("it is a symbolic link: links are not followed, so it is not graded") from None
        raise ValueError(f"it cannot be opened ({os.strerror(error.errno)})") from None
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"it is {_file_kind(info.st_mode)}, not a regular file: not graded")
        raw = file.read(MAX_NOTEBOOK_BYTES + 1)
    if len(raw) > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"the file is larger than {MAX_NOTEBOOK_BYTES >> 20} MB")
    try:
        text = raw.decode("utf-8")
        version = json.loads(text).get("nbformat")
    except Exception as error:  # not UTF-8, not JSON, nested too deep, not an object: not a notebook
        reason = plain_text(f"{type(error).__name__}: {error}", 160)
        raise ValueError(f"it is not a readable notebook ({reason})") from None
    if version != 4:
        raise ValueError(f"it is not an nbformat 4 notebook (nbformat {plain_text(repr(version), 20)}); "
                         f"open it in Jupyter (version 4 or newer) and save it again")
    try:
        notebook = nbformat.reads(text, as_version=4)
    except Exception as error:  # nbformat raises many types for invalid notebooks
        reason = plain_text(f"{type(error).__name__}: {error}", 160)
        raise ValueError(f"it is not a readable notebook ({reason})") from None
    if not isinstance(notebook.get("cells"), list):
        raise ValueError("it is not an nbformat 4 notebook (it has no list of cells)")
    return notebook


def _run_probe(work: Path, jobs: list[dict], unsafe: bool, timeout: int) -> tuple[FrameReader, str]:
    """Run the probe on ``jobs`` (their inputs are in ``work/job``).

    Returns the reader of the probe's frames and what the sandbox or the probe printed on
    stderr (the submission's code cannot reach either stream): empty unless the sandbox
    itself failed. A probe that sends nothing for longer than its next step may take (the
    start, then each exercise's timeout plus :data:`STALL_SECONDS`) is killed: the submission
    can stop it (SIGSTOP), and must not hold the grader.
    """
    job_dir, out_dir = work / "job", work / "out"
    out_dir.mkdir()  # used only by an unsafe probe; the sandbox's /out is a memory file system
    shutil.copyfile(PROBE_SOURCE, job_dir / "probe.py")
    uid = sandbox.sandbox_uid()
    _, packages = sandbox.python_paths()
    limits = {"memory_bytes": MEMORY_LIMIT, "cpu_seconds": timeout, "file_bytes": FILE_LIMIT,
              "processes": sandbox.processes_of(uid) + PROCESS_MARGIN}
    (job_dir / "job.json").write_text(json.dumps({
        "site_packages": [str(p) for p in packages], "sandboxed": not unsafe, "limits": limits,
        "exercises": jobs}))
    for path in (work, job_dir, *job_dir.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    command = sandbox.probe_command(job_dir, out_dir, uid, unsafe=unsafe)
    scratch = work / "scratch"
    scratch.mkdir()
    with contextlib.ExitStack() as stack:
        group = [] if unsafe else stack.enter_context(sandbox.limited_group(f"book-grader-{work.name}"))
        with open(work / "stderr", "wb") as stderr:
            process = subprocess.Popen(group + command, cwd=scratch, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                                       env={"PATH": "/usr/bin:/bin", "HOME": str(scratch), "OMP_NUM_THREADS": "1"})
        reader = FrameReader(process.stdout, FILE_LIMIT, MAX_RESULT_BYTES)
        reader.start()
        try:
            while process.poll() is None and not reader.failure:
                allowed = timeout + STALL_SECONDS if reader.ready else STARTUP_SECONDS
                if time.monotonic() - reader.progress > allowed:
                    break
                time.sleep(0.05)
        finally:
            _kill_group(process)
    reader.join(STALL_SECONDS)
    process.stdout.close()
    with open(work / "stderr", "rb") as stderr:
        stderr.seek(max(0, os.fstat(stderr.fileno()).st_size - 2000))
        return reader, stderr.read().decode(errors="replace")


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()


def _judge(exercise: CodingExercise, cases: list, outcome) -> tuple[bool, str]:
    if outcome.problem:
        return False, outcome.problem
    if outcome.cell_error:
        return False, f"your solution cell raised {outcome.cell_error}"
    try:
        CHECKS[exercise.checker].judge(cases, outcome.results)
    except CheckFailed as failure:
        return False, plain_text(str(failure), 600)
    except Exception as error:  # the checker met a result it could not compare: the submission's FAIL
        return False, plain_text(f"the checker could not compare your result ({type(error).__name__}: {error})")
    return True, "correct on the grader's inputs"


def grade_submission(path: Path, masters: dict[str, Master], folder: Path | None = None, seed: int | None = None,
                     unsafe: bool = False, timeout: int = CELL_TIMEOUT) -> Report:
    """Grade one submitted notebook.

    Parameters
    ----------
    path : Path
        The submitted notebook.
    masters : dict
        :func:`load_masters` of the book's chapters.
    folder : Path, optional
        The folder being graded: the report names the submission relative to it
        and takes the student id from its first sub-folder.
    seed : int, optional
        Seed of the inputs (drawn at random and recorded when not given): the same
        seed replays the same inputs.
    unsafe : bool
        Run the submission's code without the sandbox.
    timeout : int
        Seconds each exercise may run.
    """
    started = time.monotonic()
    seed = secrets.randbits(48) if seed is None else int(seed)
    report = _new_report(path, folder, seed)
    try:
        notebook = read_submission(path)
        master = find_master(notebook, path.name, masters)
    except (ValueError, OSError) as error:
        report.error = plain_text(_without_paths(str(error), folder), 400)
        report.seconds = time.monotonic() - started
        return report
    report.master = master.name
    links = os.lstat(path).st_nlink
    linked = [f"the file has {links} hard links: it may be another file (a master?) under this name"] if links > 1 else []
    sources = solution_sources(notebook, master.exercises)
    cases, jobs = {}, []
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        work = Path(tmp)
        (work / "job").mkdir()
        for index, exercise in enumerate(master.exercises):
            if exercise.id not in sources:
                continue
            cases[exercise.id] = CHECKS[exercise.checker].make_cases(torch.Generator().manual_seed(seed))
            torch.save(cases[exercise.id], work / "job" / f"{index}.pt")
            jobs.append({"id": exercise.id, "function": exercise.function, "source": sources[exercise.id],
                         "inputs": f"{index}.pt"})
        reader, errors = _run_probe(work, jobs, unsafe, timeout) if jobs else (None, "")
        if errors.strip():
            report.error = (f"the sandbox or the grader's probe failed: "
                            f"{plain_text(_without_paths(errors[-400:], folder, work))}")
            report.seconds = time.monotonic() - started
            return report
        for exercise in master.exercises:
            if exercise.id not in sources:
                report.verdicts.append(Verdict(exercise.id, False, f"no solution cell: neither a cell with id "
                                               f"{exercise.solution_cell!r} nor one that defines {exercise.function}"))
                continue
            outcome = read_outcome(reader.frames.get(exercise.id), exercise.function, len(cases[exercise.id]),
                                   timeout)
            if exercise.id not in reader.frames and reader.failure:
                outcome.problem = reader.failure
            passed, message = _judge(exercise, cases[exercise.id], outcome)
            message = _without_paths(message, folder, work)
            review = review_flags(sources[exercise.id], CHECKS[exercise.checker].forbidden)
            review += ([outcome.review] if outcome.review else []) + linked
            report.verdicts.append(Verdict(exercise.id, passed, message, review))
    report.seconds = time.monotonic() - started
    return report


def _grade_isolated(path: Path, masters: dict[str, Master], folder: Path | None, seed: int | None,
                    unsafe: bool, timeout: int, problem: str = "") -> Report:
    """:func:`grade_submission`, with any failure of the grader itself turned into that submission's
    error; an entry found with a ``problem`` is reported, not graded."""
    if problem:
        report = _new_report(path, folder, -1 if seed is None else seed)
        report.error = problem
        return report
    try:
        return grade_submission(path, masters, folder, seed, unsafe, timeout)
    except Exception as error:  # a grader bug must cost one submission, not the class's results
        report = _new_report(path, folder, -1 if seed is None else seed)
        report.error = plain_text(_without_paths(
            f"the grader failed on this submission ({type(error).__name__}: {error})", folder))
        return report


def _without_paths(text: str, *folders: Path | None) -> str:
    """``text`` with the grader's own absolute paths (the graded folder, a work folder, the book,
    the home folder) replaced by names, for messages a student reads."""
    names = [(folder, "<submissions>") for folder in folders[:1] if folder is not None]
    names += [(folder, "<work>") for folder in folders[1:] if folder is not None]
    names += [(BOOK_CHAPTERS.parent, "<book>"), (Path.home(), "~")]
    for folder, name in names:
        absolute = str(Path(folder).resolve())
        if absolute != "/":  # a home of "/" would turn every slash into "~"
            text = text.replace(absolute, name)
    return text


MAX_DEPTH = 8  # folders below a folder given: a class is <student>/<notebook>, an unzipped one a few more


def _walk(top: Path) -> list[tuple[Path, str]]:
    """Every ``*.ipynb`` entry under ``top``, and every linked folder, with a reason when a folder
    cannot be entered (unreadable, or deeper than :data:`MAX_DEPTH`); iterative, so no depth of
    folders can exhaust the grader's stack."""
    found, stack = [], [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: os.fsencode(entry.name))
        except OSError as error:
            found.append((folder, f"the folder cannot be read ({os.strerror(error.errno)}): nothing in it was graded"))
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                if entry.name.endswith(".ipynb") or entry.is_dir():  # read_submission says it is a link
                    found.append((path, ""))
            elif entry.is_dir(follow_symlinks=False):
                if entry.name == ".ipynb_checkpoints":
                    continue
                if depth + 1 > MAX_DEPTH:
                    found.append((path, f"more than {MAX_DEPTH} folders deep: not entered, nothing in it graded"))
                else:
                    stack.append((path, depth + 1))
            elif entry.name.endswith(".ipynb"):
                found.append((path, ""))
    return found


def submissions_in(paths: list[Path]) -> list[tuple[Path, Path | None, str]]:
    """Every ``*.ipynb`` entry to grade: its path, the folder it was found in (``None`` for a file
    given directly) and, for a folder that could not be entered, why (else empty).

    Folders are walked without following links; linked folders and ``*.ipynb`` entries that
    are not regular files are listed too, and :func:`read_submission` reports each as not
    graded. ``.ipynb_checkpoints`` folders are skipped.

    Raises
    ------
    ValueError
        When a path given is neither a notebook nor a folder.
    """
    found = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            found += [(entry, path, problem) for entry, problem in _walk(path)]
        elif path.suffix == ".ipynb" and path.is_file():
            found.append((path, None, ""))
        else:
            raise ValueError(f"expected a notebook or a folder of notebooks; found {plain_text(path)}")
    return sorted(found, key=lambda entry: os.fsencode(entry[0]))


def grade_all(paths: list[Path], masters: dict[str, Master], jobs: int = 1, seed: int | None = None,
              unsafe: bool = False, timeout: int = CELL_TIMEOUT,
              on_report: Callable[[Report], None] = lambda report: None) -> list[Report]:
    """Grade every submission in ``paths``, ``jobs`` at a time.

    ``on_report`` is called with each :class:`Report` as soon as it is finished (in
    the calling thread, one at a time); the reports are returned in input order.

    Raises
    ------
    ValueError
        When ``jobs`` is not a positive integer or a path is not a notebook or folder.
    SandboxUnavailable
        When bubblewrap is missing and ``unsafe`` is false (checked before grading).
    """
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer; found {jobs!r}")
    if not isinstance(timeout, int) or timeout < 1:
        raise ValueError(f"timeout must be a positive number of seconds; found {timeout!r}")
    if not unsafe:
        sandbox.bwrap_path()
    submissions = submissions_in(paths)
    reports: list[Report | None] = [None] * len(submissions)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_grade_isolated, path, masters, folder, seed, unsafe, timeout, problem): index
                   for index, (path, folder, problem) in enumerate(submissions)}
        for future in as_completed(futures):
            report = reports[futures[future]] = future.result()
            try:
                on_report(report)
            except Exception as error:  # recording one submission failed: the others are still recorded
                reason = plain_text(f"{type(error).__name__}: {error}")
                print(f"error: could not record {report.submission}: {reason}", file=sys.stderr)
    return reports
