"""The book's coding exercises: where they are in the master notebooks, and the student version.

Every chapter notebook in ``chapters/`` is a *master copy*. A coding exercise in it
is two code cells with ids that share a stem:

* ``<exercise>-solution`` (tag ``solution``): the book's answer. It must be
  self-contained (it imports what it uses), because grading runs it on its own.
* ``<exercise>-check`` (tag ``check``): one call ``check_<name>(<function>)`` of a
  checker from :mod:`courseware.checks`.

The command line that hands out and grades them is :mod:`courseware.__main__`.

**Student version.** Solution cells become stubs (imports and signatures kept,
bodies ``raise NotImplementedError(hint)``), worked solutions of conceptual
exercises and the solution drop-down markers are removed, outputs are cleared.

**Grading** (:mod:`courseware.grading`) reads only a submission's solution cells, runs
each exercise in a fresh process inside a bubblewrap sandbox on inputs drawn from
a recorded seed, and compares the results with the book's implementation in the
grader's own process; a static scan flags suspicious code for a human (REVIEW).
Masters come only from the book's ``chapters/``.
"""
from __future__ import annotations

import ast
import copy
import shutil
from dataclasses import dataclass
from pathlib import Path

import nbformat

from courseware.checks import CHECKS

SOLUTION_TAG, CHECK_TAG = "solution", "check"
SOLUTION_SUFFIX, CHECK_SUFFIX = "-solution", "-check"
# Markdown cells that carry solutions (sphinx-exercise directives): hidden from students.
SOLUTION_DIRECTIVES = ("{solution}", "{solution-start}", "{solution-end}")
BOOK_CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"  # the masters: the only ones grading uses


@dataclass(frozen=True)
class CodingExercise:
    """One auto-checked exercise of a master notebook."""

    id: str  # e.g. "ex-att-softmax-backward"
    checker: str  # name of the courseware.checks function the check cell calls
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
        convention, or a check cell names a checker that ``courseware.checks`` lacks.
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
            raise ValueError(f"check cell {check['id']!r} calls {checker}, which courseware.checks does not define")
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


def _outside_solutions(cells, keep: set[str]) -> list:
    """``cells`` without worked solutions: every cell that opens with a solution directive, and every
    cell between a ``{solution-start}`` and its ``{solution-end}`` but those whose ids are in ``keep``."""
    kept, inside = [], False
    for cell in cells:
        if _is_solution_prose(cell):
            opening = cell.source.lstrip().lstrip("`:").lstrip()
            inside = opening.startswith("{solution-start}") or (inside and not opening.startswith("{solution-end}"))
        elif not inside or cell.get("id") in keep:
            kept.append(cell)
    return kept


def student_version(master, master_name: str):
    """The notebook a student receives: stubs for solutions, no worked solutions, no outputs."""
    exercises = {e.solution_cell: e for e in coding_exercises(master)}
    student = copy.deepcopy(master)
    student.cells = _outside_solutions(student.cells, keep=set(exercises))
    for cell in student.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        if cell.get("id") in exercises:
            cell.source = stub_source(cell.source, exercises[cell["id"]].hint)
    student.metadata["exercises"] = {"master": master_name}
    return student


def write_student_versions(chapters: Path, out: Path) -> list[Path]:
    """Write the student version of every notebook in ``chapters`` to ``out/chapters``.

    The diagrams the chapters show (``figures/`` beside ``chapters``, referenced as
    ``../figures/*.svg``) are copied to ``out/figures`` so that the hand-outs display them.
    Returns the notebooks written.
    """
    written = []
    for master_path in sorted(chapters.glob("*.ipynb")):
        master = nbformat.read(master_path, as_version=4)
        target = out / chapters.name / master_path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student_version(master, master_path.stem), target)
        written.append(target)
    figures = chapters.parent / "figures"
    if figures.is_dir():
        shutil.copytree(figures, out / "figures", dirs_exist_ok=True)
    return written


# What a student needs to run the chapters: lib, the chapters' runs (experiments, with the
# trained weights), the checkers their check cells call (courseware), the reader's pins
# (requirements-runtime.txt, which Binder installs) and the Binder environment.
STUDENT_REPO_FILES = ("lib", "experiments", "courseware", "pyproject.toml", "requirements-runtime.txt",
                      "binder")
STUDENT_REPO_README = """# Attention, Sequence Models and Memory: student repository

The chapters in `chapters/` are the hand-out versions: every coding exercise's solution cell
raises `NotImplementedError` until you write it, and the worked solutions are not included.
Install the book's environment (`python -m venv .venv && .venv/bin/pip install -r
requirements-runtime.txt && .venv/bin/pip install -e .`) or open it on Binder, then run the chapters.
Keep everything an answer needs inside its solution cell (imports included) and do not import
the book's own `lib`, `experiments` or `courseware` there: your instructor's grader runs only
those cells, without any of them.
"""


def write_student_repo(out: Path, root: Path = BOOK_CHAPTERS.parent) -> Path:
    """A repository to give students: the library, the environment and the student chapters.

    Copies ``lib/``, ``experiments/`` (without caches, with the trained weights),
    ``courseware/``, ``pyproject.toml``, ``requirements-runtime.txt`` and ``binder/`` from
    ``root`` and writes the student version of every chapter to ``out/chapters``, with the diagrams they show in
    ``out/figures``. The master notebooks, the instructor guide, the tests and the rest of
    the book are left out.

    Raises
    ------
    ValueError
        When ``out`` exists and is not empty.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: the student repository is written to a new folder")
    for name in STUDENT_REPO_FILES:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, out / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
        elif source.is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
    write_student_versions(root / "chapters", out)
    (out / "README.md").write_text(STUDENT_REPO_README, encoding="utf-8")
    return out
