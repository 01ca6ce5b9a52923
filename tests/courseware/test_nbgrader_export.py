"""The nbgrader export, proved with nbgrader itself.

Every chapter exports to a well-formed nbgrader source notebook. One light chapter
(09_attention) then goes through nbgrader's own command line in a temporary course
folder: ``generate_assignment`` makes the release version, three submissions (the
master solutions; one exercise wrong, with its test cell edited to skip the check;
the release version untouched) are autograded, and nbgrader's sqlite gradebook must
give 3/3, 2/3 and 0/3. Everything runs locally (kernels on 127.0.0.1, no network).
"""
import ast
import copy
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from courseware.exercises import coding_exercises
from courseware.grading.nbgrader_export import solution_regions, write_course

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
CHAPTER = "09_attention"
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


def test_every_chapter_exports_well_formed_nbgrader_cells(tmp_path):
    written = write_course(CHAPTERS, tmp_path)
    assert (tmp_path / "nbgrader_config.py").is_file()
    assert written, "no chapter has coding exercises"
    for path in written:
        master = nbformat.read(CHAPTERS / path.name, as_version=4)
        masters = {cell.get("id"): cell.source for cell in master.cells}
        cells = {cell.id: cell for cell in nbformat.read(path, as_version=4).cells}
        for exercise in coding_exercises(master):
            solution, test = cells[exercise.solution_cell], cells[exercise.check_cell]
            assert solution.metadata["nbgrader"] == {"grade": False, "solution": True, "locked": False,
                                                     "grade_id": exercise.solution_cell, "schema_version": 3}
            assert test.metadata["nbgrader"] == {"grade": True, "solution": False, "locked": True, "points": 1,
                                                 "grade_id": exercise.check_cell, "schema_version": 3}
            # Without its markers the solution cell is the master's, and the signature stays outside them.
            lines = solution.source.splitlines()
            assert [line for line in lines if line.strip() not in MARKERS] == masters[exercise.solution_cell].rstrip("\n").splitlines()
            assert lines.index(next(line for line in lines if line.lstrip().startswith(f"def {exercise.function}("))) \
                < next(i for i, line in enumerate(lines) if line.strip() == MARKERS[0])
            hidden = test.source.split("### BEGIN HIDDEN TESTS")
            assert len(hidden) == 2 and f"{exercise.checker}({exercise.function})" in hidden[1]
            assert f"from courseware.checks import {exercise.checker}" in hidden[0]


def test_solution_regions_keep_imports_signatures_and_docstrings():
    source = 'import torch\n\n\ndef f(x,\n      y):\n    """Doc."""\n    # the idea\n    return x + y\n'
    marked = solution_regions(source)
    assert marked == ('import torch\n\n\ndef f(x,\n      y):\n    """Doc."""\n    ### BEGIN SOLUTION\n'
                      '    # the idea\n    return x + y\n    ### END SOLUTION\n')
    ast.parse(marked)


def _nbgrader(course: Path, *args: str) -> None:
    """Run the venv's nbgrader command line in ``course``; its config comes only from that folder."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",  # nbgrader calls `alembic`
               JUPYTER_CONFIG_DIR=str(course / ".jupyter"), JUPYTER_RUNTIME_DIR=str(course / ".runtime"),
               PYTHONPATH=str(ROOT))
    result = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=course, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


def _submit(course: Path, student: str, sources: dict) -> None:
    """Hand in the release version with some cells' sources replaced."""
    notebook = copy.deepcopy(nbformat.read(course / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4))
    for cell in notebook.cells:
        cell.source = sources.get(cell.get("id"), cell.source)
    target = course / "submitted" / student / CHAPTER / f"{CHAPTER}.ipynb"
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)


def test_nbgrader_generates_and_autogrades_right_and_wrong_submissions(tmp_path):
    course = tmp_path / "course"
    write_course(CHAPTERS, course, [CHAPTER])
    _nbgrader(course, "generate_assignment", CHAPTER, "--force")
    release = (course / "release" / CHAPTER / f"{CHAPTER}.ipynb").read_text(encoding="utf-8")
    assert "raise NotImplementedError()" in release and "HIDDEN TESTS" not in release
    assert "(g * weights).sum(dim=-1" not in release  # the solution is not handed out

    master = {cell.get("id"): cell.source for cell in nbformat.read(CHAPTERS / f"{CHAPTER}.ipynb", as_version=4).cells}
    exercises = [e.id for e in coding_exercises(nbformat.read(CHAPTERS / f"{CHAPTER}.ipynb", as_version=4))]
    assert {"ex-att-softmax-backward", "ex-att-sdpa-backward"} <= set(exercises)
    right = {f"{exercise}-solution": master[f"{exercise}-solution"] for exercise in exercises}
    unscaled = master["ex-att-sdpa-backward-solution"].replace("scale = 1 / math.sqrt(q.shape[-1])", "scale = 1.0")
    assert unscaled != master["ex-att-sdpa-backward-solution"]
    _submit(course, "right", right)
    _submit(course, "wrong", {**right, "ex-att-sdpa-backward-solution": unscaled,
                              "ex-att-sdpa-backward-check": 'print("✓ skipped")'})  # nbgrader restores locked cells
    _submit(course, "stub", {})
    _nbgrader(course, "autograde", CHAPTER, "--force", "--create")

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        def scores(student):
            notebook = gradebook.find_submission_notebook(CHAPTER, CHAPTER, student)
            return {grade.name: (grade.score, grade.max_score) for grade in notebook.grades}

        checks = [f"{exercise}-check" for exercise in exercises]
        assert scores("right") == {check: (1, 1) for check in checks}
        assert scores("wrong") == {check: (int(check != "ex-att-sdpa-backward-check"), 1) for check in checks}
        assert scores("stub") == {check: (0, 1) for check in checks}
        assert gradebook.find_submission(CHAPTER, "right").score == len(checks)
    graded = (course / "autograded" / "wrong" / CHAPTER / f"{CHAPTER}.ipynb").read_text(encoding="utf-8")
    assert "you left out the 1/√d" in graded  # the checker's own diagnosis, as feedback
