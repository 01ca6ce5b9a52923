"""Export the book's coding exercises as an nbgrader course.

For courses run on JupyterHub with `nbgrader <https://nbgrader.readthedocs.io>`_:
``python -m courseware nbgrader --out course`` writes, for each chapter with
coding exercises, ``course/source/<chapter>/<chapter>.ipynb`` and a
``course/nbgrader_config.py``. Each exercise becomes three cells:

* its statement (markdown, from the chapter's ``{exercise}`` directive);
* the solution cell, with nbgrader's ``solution`` metadata and every function
  body between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (imports and
  signatures stay visible, as in the book's student version);
* a locked, autograded test cell worth one point that calls the same
  :mod:`courseware.checks` checker as the chapter; between ``### BEGIN HIDDEN TESTS``
  and ``### END HIDDEN TESTS`` it calls it again, so at grading time the
  checker draws inputs the student has never seen.

nbgrader's own ``generate_assignment`` then makes the release version and
``autograde`` grades submissions into its sqlite gradebook; the kernel that
runs them needs the book's ``lib`` installed (``pip install -e .``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

from courseware.exercises import coding_exercises

SCHEMA_VERSION = 3
CONFIG = '''\
# nbgrader configuration written by `python -m courseware nbgrader`; run nbgrader from this folder.
c = get_config()  # noqa: F821 (provided by nbgrader)
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.db_url = "sqlite:///gradebook.db"  # nbgrader's gradebook, in this folder
c.ExecutePreprocessor.timeout = 120  # seconds each cell may run when autograding
'''
INTRO = """# {chapter}: coding exercises

Write each function in its solution cell, replacing `raise NotImplementedError()`; keep
everything the answer needs (imports included) in that cell and do not import the book's own
`lib` there. The cell after it checks your function on random inputs; when you submit, the
autograder checks it again on inputs you have not seen (one point per exercise).
"""


def _metadata(grade_id: str, solution: bool, points: int = 0) -> dict:
    """The ``nbgrader`` cell metadata of a solution cell or an autograded test cell."""
    if solution:
        return {"grade": False, "solution": True, "locked": False, "grade_id": grade_id,
                "schema_version": SCHEMA_VERSION}
    return {"grade": True, "solution": False, "locked": True, "points": points, "grade_id": grade_id,
            "schema_version": SCHEMA_VERSION}


def solution_regions(source: str) -> str:
    """Mark the body of every top-level function as an nbgrader solution region.

    Parameters
    ----------
    source : str
        A master solution cell: imports and function definitions.

    Returns
    -------
    str
        The same code with ``### BEGIN SOLUTION`` / ``### END SOLUTION`` around each
        function body (after its docstring, if any), indented like the body, so that
        nbgrader's release version keeps the signatures and docstrings. Top-level
        statements other than imports and functions are marked as a whole.
    """
    lines = source.rstrip("\n").splitlines()
    regions = []  # (first line, last line, indentation), 0-based and inclusive
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            documented = ast.get_docstring(node) is not None and len(node.body) > 1
            header_end = node.body[0].end_lineno if documented else node.lineno  # 1-based: def or docstring
            first = node.body[1 if documented else 0].lineno - 1
            while first > header_end and lines[first - 1].lstrip().startswith("#"):
                first -= 1  # comments that open the body belong to the solution
            indent = re.match(r"\s*", lines[first]).group()
        else:
            first, indent = node.lineno - 1, ""
        regions.append((first, node.end_lineno - 1, indent))
    for first, last, indent in reversed(regions):
        lines[last + 1:last + 1] = [indent + "### END SOLUTION"]
        lines[first:first] = [indent + "### BEGIN SOLUTION"]
    return "\n".join(lines) + "\n"


def statement(source: str) -> str:
    """An ``{exercise}`` directive of the book as plain markdown (title as a heading)."""
    lines = source.strip().strip("`:").strip().splitlines()
    head = lines[0].removeprefix("{exercise}").strip()
    body = [line for line in lines[1:] if not line.startswith(":label:")]
    return f"## Exercise: {head}\n\n" + "\n".join(body).strip() + "\n"


def source_notebook(master, chapter: str):
    """The nbgrader source notebook of one chapter: statement, solution, test per exercise.

    Parameters
    ----------
    master : nbformat.NotebookNode
        A chapter notebook of the book (its coding exercises follow :mod:`courseware.exercises`).
    chapter : str
        Its name without ``.ipynb``, e.g. ``"09_attention"``.
    """
    cells = {cell.get("id"): cell for cell in master.cells}
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells.append(nbformat.v4.new_markdown_cell(INTRO.format(chapter=chapter), id="intro"))
    for exercise in coding_exercises(master):
        if exercise.id in cells:
            notebook.cells.append(nbformat.v4.new_markdown_cell(statement(cells[exercise.id].source),
                                                                id=exercise.id))
        solution = nbformat.v4.new_code_cell(solution_regions(cells[exercise.solution_cell].source),
                                             id=exercise.solution_cell)
        solution.metadata["nbgrader"] = _metadata(exercise.solution_cell, solution=True)
        call = f"{exercise.checker}({exercise.function})"
        test = nbformat.v4.new_code_cell(
            f"from courseware.checks import {exercise.checker}\n\n{call}\n"
            f"### BEGIN HIDDEN TESTS\n{call}  # the autograder's own, fresh random inputs\n### END HIDDEN TESTS\n",
            id=exercise.check_cell)
        test.metadata["nbgrader"] = _metadata(exercise.check_cell, solution=False, points=1)
        notebook.cells += [solution, test]
    return notebook


def write_course(chapters: Path, out: Path, names: list[str] | None = None,
                 course_id: str = "attention-book") -> list[Path]:
    """Write an nbgrader course folder: ``nbgrader_config.py`` and ``source/<chapter>/<chapter>.ipynb``.

    Parameters
    ----------
    chapters : Path
        The folder of master notebooks (the book's ``chapters/``).
    out : Path
        The course folder (created if missing; existing source notebooks are overwritten).
    names : list of str, optional
        Chapters to export (``"09_attention"``; ``.ipynb`` may be given); default every
        chapter with coding exercises.
    course_id : str
        nbgrader's ``CourseDirectory.course_id``.

    Returns
    -------
    list of Path
        The source notebooks written.

    Raises
    ------
    ValueError
        When a chapter in ``names`` does not exist.
    """
    out = Path(out)
    paths = ([chapters / f"{Path(name).stem}.ipynb" for name in names] if names
             else sorted(Path(chapters).glob("*.ipynb")))
    missing = [path.name for path in paths if not path.is_file()]
    if missing:
        raise ValueError(f"no such chapter in {chapters}: {', '.join(missing)}")
    written = []
    for path in paths:
        master = nbformat.read(path, as_version=4)
        if not coding_exercises(master):
            continue
        target = out / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(source_notebook(master, path.stem), target)
        written.append(target)
    (out / "nbgrader_config.py").write_text(CONFIG.format(course_id=course_id), encoding="utf-8")
    return written
