"""Exercises for instructors: hand out the student version, grade what comes back.

Every chapter notebook in ``chapters/`` is a *master copy*. A coding exercise in it
is two code cells with ids that share a stem:

* ``<exercise>-solution`` (tag ``solution``): the book's answer. It must be
  self-contained (it imports what it uses), because grading runs it on its own.
* ``<exercise>-check`` (tag ``check``): one call ``check_<name>(<function>)`` of a
  checker from :mod:`lib.checks`.

Commands (``python -m lib.exercises --help``)::

    python -m lib.exercises student [--chapters chapters] [--out student]
    python -m lib.exercises grade SUBMISSION_OR_FOLDER [...] [--chapters chapters]

**Student version.** Solution cells become stubs (imports and signatures kept,
bodies ``raise NotImplementedError(hint)``), worked solutions of conceptual
exercises and the solution drop-down markers are removed, outputs are cleared.

**Grading** cannot be fooled by what a submission does to its own notebook:

1. only the submission's *solution cells* are read (matched by cell id); check
   cells, stored outputs and every other cell of the submission are ignored;
2. those cells run with nbval in a fresh kernel, each followed by a probe that
   calls the student's function on inputs the grader drew (a fresh seed) and
   saves the results;
3. the grader compares the results with the book's implementation in *its own*
   process, so monkey-patching the checker, the reference or torch inside the
   kernel changes nothing.
"""
from __future__ import annotations

import argparse
import ast
import copy
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import torch

from lib.checks import CHECKS, CheckFailed, fresh_generator

SOLUTION_TAG, CHECK_TAG = "solution", "check"
SOLUTION_SUFFIX, CHECK_SUFFIX = "-solution", "-check"
# Markdown cells that carry solutions (sphinx-exercise directives): hidden from students.
SOLUTION_DIRECTIVES = ("{solution}", "{solution-start}", "{solution-end}")
CELL_TIMEOUT = 120  # seconds a submitted cell may run: an endless loop fails its exercise


@dataclass(frozen=True)
class CodingExercise:
    """One auto-checked exercise of a master notebook."""

    id: str  # e.g. "ex-att-masked-softmax"
    checker: str  # name of the lib.checks function the check cell calls
    function: str  # name of the student's function it is called with
    hint: str

    @property
    def solution_cell(self) -> str:
        return self.id + SOLUTION_SUFFIX

    @property
    def check_cell(self) -> str:
        return self.id + CHECK_SUFFIX


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _parse_check_call(source: str, cell_id: str) -> tuple[str, str]:
    """``check_x(my_fn)`` in a check cell → ``("check_x", "my_fn")``."""
    calls = [
        node for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("check_")
    ]
    if len(calls) != 1 or len(calls[0].args) != 1 or not isinstance(calls[0].args[0], ast.Name):
        raise ValueError(
            f"check cell {cell_id!r} must contain exactly one call check_<name>(<function>); found {source!r}"
        )
    return calls[0].func.id, calls[0].args[0].id


def coding_exercises(notebook) -> list[CodingExercise]:
    """The coding exercises of a master notebook, in order, validated.

    Raises
    ------
    ValueError
        When a ``check`` cell has no matching ``solution`` cell (or the reverse),
        a cell id does not follow the ``<exercise>-solution`` / ``-check``
        convention, or a check cell names a checker that ``lib.checks`` lacks.
    """
    cells = {cell.get("id"): cell for cell in notebook.cells}
    solutions = [c for c in notebook.cells if c.cell_type == "code" and SOLUTION_TAG in _tags(c)]
    checks = [c for c in notebook.cells if c.cell_type == "code" and CHECK_TAG in _tags(c)]
    for cell, suffix in [(c, SOLUTION_SUFFIX) for c in solutions] + [(c, CHECK_SUFFIX) for c in checks]:
        if not str(cell.get("id", "")).endswith(suffix):
            raise ValueError(f"a cell tagged {suffix[1:]!r} must have an id ending in {suffix!r}; found {cell.get('id')!r}")
    exercises = []
    for check in checks:
        stem = check["id"][: -len(CHECK_SUFFIX)]
        solution = cells.get(stem + SOLUTION_SUFFIX)
        if solution is None or SOLUTION_TAG not in _tags(solution):
            raise ValueError(f"check cell {check['id']!r} has no solution cell {stem + SOLUTION_SUFFIX!r}")
        checker, function = _parse_check_call(check.source, check["id"])
        if checker not in CHECKS:
            raise ValueError(f"check cell {check['id']!r} calls {checker}, which lib.checks does not define")
        hint = solution.metadata.get("hint", f"write {function}; the exercise above says what it must do")
        exercises.append(CodingExercise(stem, checker, function, hint))
    unchecked = {c["id"][: -len(SOLUTION_SUFFIX)] for c in solutions} - {e.id for e in exercises}
    if unchecked:
        raise ValueError(f"solution cells without a check cell: {sorted(unchecked)}")
    return exercises


# ---- the student version ------------------------------------------------------------
def stub_source(source: str, hint: str) -> str:
    """Keep a solution cell's imports and signatures; every body raises NotImplementedError."""
    tree = ast.parse(source)
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept.append(ast.unparse(node))
        elif isinstance(node, ast.FunctionDef):
            stub = copy.deepcopy(node)
            docstring = ast.get_docstring(node)
            stub.body = ([ast.Expr(ast.Constant(docstring))] if docstring else []) + [
                ast.parse(f"raise NotImplementedError({hint!r})").body[0]
            ]
            kept.append(ast.unparse(stub))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            kept.append(f"{' = '.join(ast.unparse(t) for t in targets)} = None  # replace None: {hint}")
    return "\n\n".join(kept) + "\n"


def _is_solution_prose(cell) -> bool:
    if cell.cell_type != "markdown":
        return False
    head = cell.source.lstrip().lstrip("`:").lstrip()
    return head.startswith(SOLUTION_DIRECTIVES)


def student_version(master, master_name: str):
    """The notebook a student receives: stubs for solutions, no worked solutions, no outputs."""
    exercises = {e.solution_cell: e for e in coding_exercises(master)}
    student = copy.deepcopy(master)
    student.cells = [cell for cell in student.cells if not _is_solution_prose(cell)]
    for cell in student.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        if cell.get("id") in exercises:
            cell.source = stub_source(cell.source, exercises[cell["id"]].hint)
    student.metadata["exercises"] = {"master": master_name}
    return student


def write_student_versions(chapters: Path, out: Path) -> list[Path]:
    """Write the student version of every notebook in ``chapters`` to ``out/chapters``."""
    written = []
    for master_path in sorted(chapters.glob("*.ipynb")):
        master = nbformat.read(master_path, as_version=4)
        target = out / chapters.name / master_path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_version(master, master_path.stem), target)
        written.append(target)
    return written


# ---- grading -------------------------------------------------------------------------
@dataclass
class Verdict:
    exercise: str
    passed: bool
    message: str


@dataclass
class Report:
    submission: Path
    master: Path
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def score(self) -> str:
        return f"{sum(v.passed for v in self.verdicts)}/{len(self.verdicts)}"

    def lines(self) -> list[str]:
        out = [f"{self.submission.name} (master: {self.master.name})"]
        for verdict in self.verdicts:
            out.append(f"  {'PASS' if verdict.passed else 'FAIL'}  {verdict.exercise}: {verdict.message}")
        out.append(f"  score {self.score}")
        return out


def find_master(submission, submission_path: Path, chapters: Path) -> Path:
    """The master a submission answers: named in its metadata, else by file name."""
    name = submission.metadata.get("exercises", {}).get("master")
    candidates = [chapters / f"{name}.ipynb"] if name else sorted(
        p for p in chapters.glob("*.ipynb") if submission_path.stem.startswith(p.stem)
    )
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ValueError(
        f"cannot tell which chapter {submission_path.name} answers: it has no "
        f"metadata.exercises.master and its name starts with none of {[p.stem for p in chapters.glob('*.ipynb')]}"
    )


_PROBE = """\
import torch as _torch
_results = []
for _args in _torch.load({inputs!r}, weights_only=True):
    try:
        _found = {function}(*_args)
        _results.append(_found if isinstance(_found, _torch.Tensor) else
                        f"TypeError: your function must return a torch.Tensor; it returned {{type(_found).__name__}}")
    except Exception as _error:
        _results.append(f"{{type(_error).__name__}}: {{_error}}")
_torch.save(_results, {outputs!r})
"""


def _run_nbval(notebook_path: Path, junit: Path) -> dict[int, str]:
    """Run nbval (lax: errors fail, outputs are not compared); failure text of each failing code cell."""
    subprocess.run(
        [sys.executable, "-m", "pytest", str(notebook_path), "--nbval-lax", "-q", "-p", "no:cacheprovider",
         f"--nbval-cell-timeout={CELL_TIMEOUT}", f"--junitxml={junit}", "--rootdir", str(notebook_path.parent)],
        cwd=notebook_path.parent, capture_output=True, text=True, timeout=600,
    )
    failures = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        problem = case.find("failure")
        problem = case.find("error") if problem is None else problem
        if problem is not None:
            failures[int(case.get("name").split()[-1])] = (problem.text or problem.get("message") or "").strip()
    return failures


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line.split(":")[0] or line.startswith("CheckFailed")]
    return (errors or lines or ["(no message)"])[-1]


def grade(submission_path: Path, chapters: Path) -> Report:
    """Grade one submitted notebook against its master copy in ``chapters``."""
    submission = nbformat.read(submission_path, as_version=4)
    master_path = find_master(submission, submission_path, chapters)
    exercises = coding_exercises(nbformat.read(master_path, as_version=4))
    submitted = {cell.get("id"): cell for cell in submission.cells if cell.cell_type == "code"}
    report = Report(submission_path, master_path)
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        work = Path(tmp)
        grading = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
        cases, cell_of = {}, {}
        for exercise in exercises:
            if exercise.solution_cell not in submitted:
                continue
            cases[exercise.id] = CHECKS[exercise.checker].make_cases(fresh_generator())
            inputs, outputs = work / f"{exercise.id}.inputs.pt", work / f"{exercise.id}.outputs.pt"
            torch.save(cases[exercise.id], inputs)
            cell_of[exercise.id] = len(grading.cells)
            grading.cells.append(nbformat.v4.new_code_cell(submitted[exercise.solution_cell].source))
            grading.cells.append(nbformat.v4.new_code_cell(
                _PROBE.format(inputs=str(inputs), outputs=str(outputs), function=exercise.function)
            ))
        failures = {}
        if grading.cells:
            notebook_path = work / "grading.ipynb"
            nbformat.write(grading, notebook_path)
            failures = _run_nbval(notebook_path, work / "junit.xml")
        for exercise in exercises:
            if exercise.id not in cases:
                report.verdicts.append(Verdict(exercise.id, False, f"the solution cell {exercise.solution_cell!r} is missing"))
                continue
            solution_index = cell_of[exercise.id]
            if solution_index in failures:
                report.verdicts.append(Verdict(
                    exercise.id, False, f"your solution cell raised {_last_error_line(failures[solution_index])}"
                ))
                continue
            outputs = work / f"{exercise.id}.outputs.pt"
            if solution_index + 1 in failures or not outputs.is_file():
                report.verdicts.append(Verdict(
                    exercise.id, False,
                    f"{exercise.function} could not be called: {_last_error_line(failures.get(solution_index + 1, 'not defined'))}",
                ))
                continue
            try:
                CHECKS[exercise.checker].judge(cases[exercise.id], torch.load(outputs, weights_only=True))
                report.verdicts.append(Verdict(exercise.id, True, "correct on fresh inputs"))
            except CheckFailed as failure:
                report.verdicts.append(Verdict(exercise.id, False, str(failure)))
    return report


def submissions_in(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts))
        elif path.suffix == ".ipynb":
            found.append(path)
        else:
            raise ValueError(f"expected a notebook or a folder of notebooks; found {path}")
    return found


def table(reports: list[Report]) -> str:
    """One row per submission, one column per exercise."""
    exercises = sorted({v.exercise for r in reports for v in r.verdicts})
    header = ["submission", *exercises, "score"]
    rows = [[r.submission.name, *[
        next(("PASS" if v.passed else "FAIL" for v in r.verdicts if v.exercise == e), "—") for e in exercises
    ], r.score] for r in reports]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lib.exercises", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    student = commands.add_parser("student", help="write the student version of every chapter")
    student.add_argument("--chapters", type=Path, default=Path("chapters"))
    student.add_argument("--out", type=Path, default=Path("student"))
    grader = commands.add_parser("grade", help="grade submitted notebooks (files or folders)")
    grader.add_argument("submissions", type=Path, nargs="+")
    grader.add_argument("--chapters", type=Path, default=Path("chapters"))
    args = parser.parse_args(argv)
    if args.command == "student":
        for path in write_student_versions(args.chapters, args.out):
            print(f"wrote {path}")
        return 0
    reports = [grade(path, args.chapters) for path in submissions_in(args.submissions)]
    for report in reports:
        print("\n".join(report.lines()))
    if len(reports) > 1:
        print("\n" + table(reports))
    return 0 if all(v.passed for r in reports for v in r.verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
