"""The exercise workflow, proved on every chapter (a new chapter joins automatically).

For each master notebook in chapters/: its exercises are well formed; grading the
master passes every coding exercise with no REVIEW flag; the student version fails
exactly the coding exercises and no other cell; tampered submissions fail every
exercise they did not solve. All chapters are graded in one sandboxed run, two at a time.
"""
import copy
import sys
from pathlib import Path

import nbformat
import pytest

from courseware.checks import CHECKS
from courseware.__main__ import table
from courseware.exercises import SOLUTION_TAG, coding_exercises, student_version, stub_source, write_student_versions
from courseware.grading.grader import Report, Verdict, grade_all, load_masters

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import chapter_runs  # noqa: E402  (tools/ is not a package)

CHAPTERS = ROOT / "chapters"
MASTERS = sorted(CHAPTERS.glob("*.ipynb"))
ids = [m.stem for m in MASTERS]
KINDS = ("master", "student", "tampered", "broken")


def read(path):
    return nbformat.read(path, as_version=4)


def write(notebook, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def students(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout")
    return {path.stem: path for path in write_student_versions(CHAPTERS, out)}


def _tampered(master_path, student_path):
    """The student version with every trick that needs no answer: check cells edited to print
    what a passing check prints, the master's outputs pasted in, checker and torch monkey-patched."""
    master, notebook = read(master_path), read(student_path)
    check_ids = {e.check_cell for e in coding_exercises(master)}
    master_cells = {c["id"]: c for c in master.cells}
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = copy.deepcopy(master_cells[cell["id"]].outputs)
        if cell["id"] in check_ids:
            cell.source = "\n".join(f"print({line!r})" for line in
                                    "".join(o.get("text", "") for o in cell.outputs).splitlines())
        if SOLUTION_TAG in cell.metadata.get("tags", []):
            cell.source += (
                "\nimport torch\n"
                "torch.allclose = lambda *a, **k: True\n"
                "torch.testing.assert_close = lambda *a, **k: None\n"
            )
    return notebook


def _broken(master_path):
    """The master's solutions, each broken after it is defined (the checker is 'patched' too)."""
    notebook = read(master_path)
    notebook.metadata["exercises"] = {"master": master_path.stem}
    for exercise in coding_exercises(notebook):
        cell = next(c for c in notebook.cells if c["id"] == exercise.solution_cell)
        cell.source += (
            f"\n_right = {exercise.function}\n"
            f"def {exercise.function}(*args):\n"
            f"    return 0 * _right(*args) + 1\n"
        )
    return notebook


@pytest.fixture(scope="module")
def graded(students, tmp_path_factory):
    """Every chapter's master, student version, tampered and broken copy, graded at once."""
    folder = tmp_path_factory.mktemp("class")
    for master in MASTERS:
        write(read(master), folder / "master" / master.name)
        write(read(students[master.stem]), folder / "student" / master.name)
        write(_tampered(master, students[master.stem]), folder / "tampered" / master.name)
        write(_broken(master), folder / "broken" / master.name)
    reports = grade_all([folder], load_masters(CHAPTERS), jobs=2)
    return {(report.student, report.master): report for report in reports}


def test_there_are_chapters_to_check():
    assert MASTERS, f"no notebooks in {CHAPTERS}"


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_every_chapter_has_well_formed_coding_exercises(master):
    exercises = coding_exercises(read(master))
    assert exercises, f"{master.name} has no auto-checked coding exercise"
    for exercise in exercises:
        assert exercise.checker in CHECKS


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_the_master_passes_every_check_without_review(master, graded):
    report = graded["master", master.stem]
    assert report.all_passed, report.lines()


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_the_student_version_has_no_solution_and_passes_nothing_when_graded(master, students, graded):
    student = read(students[master.stem])
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    assert not any("{solution" in c.source for c in student.cells if c.cell_type == "markdown")
    report = graded["student", master.stem]
    assert report.verdicts and not any(v.passed for v in report.verdicts)
    assert all("NotImplementedError" in v.message for v in report.verdicts), report.lines()


@pytest.mark.other_cpu
@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_the_student_version_fails_exactly_the_coding_exercises(master):
    """Run top to bottom (the other-CPU run of tools/chapter_runs.py: a student's laptop is another
    CPU), the student version raises in its check cells, each telling the student to write the
    function first, and nowhere else; the book's answers run after it pass their checks."""
    run = chapter_runs.load_runs([master], chapter_runs.CONFIGURATIONS["other-cpu"])[master]
    assert not isinstance(run, str), f"the student version of {master.name} did not run as it should:\n{run}"
    failed = chapter_runs.failed_cells(run)
    assert set(failed) == {e.check_cell for e in coding_exercises(read(master))}
    not_the_stub = {cell: error for cell, error in failed.items() if "NotImplementedError" not in error}
    assert not_the_stub == {}


@pytest.mark.parametrize("kind", ["tampered", "broken"])
@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_submissions_that_did_not_solve_anything_pass_nothing(master, kind, graded):
    report = graded[kind, master.stem]
    assert report.verdicts and not any(v.passed for v in report.verdicts), report.lines()


def test_stub_keeps_imports_signatures_and_docstrings():
    source = (
        "import torch\nfrom math import inf\n\n"
        "def my_fn(x, y=2):\n    '''Doc.'''\n    return x + y\n\n"
        "answer = 42\n"
    )
    stub = stub_source(source, "add them")
    namespace = {}
    exec(stub, namespace)
    assert namespace["my_fn"].__doc__ == "Doc."
    with pytest.raises(NotImplementedError, match="add them"):
        namespace["my_fn"](1)
    assert namespace["answer"] is None and "torch" in namespace and namespace["inf"] == float("inf")


def test_malformed_exercises_are_rejected_with_the_reason():
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("check_masked_softmax_backward(f)", metadata={"tags": ["check"]})]
    notebook.cells[0]["id"] = "ex-x-check"
    with pytest.raises(ValueError, match="has no solution cell 'ex-x-solution'"):
        coding_exercises(notebook)
    notebook.cells[0]["id"] = "ex-x-checker"
    with pytest.raises(ValueError, match="must have an id ending in '-check'"):
        coding_exercises(notebook)
    notebook.cells[0]["id"] = "ex-x-check"
    notebook.cells.insert(0, nbformat.v4.new_code_cell("def f(): pass", metadata={"tags": ["solution"]}))
    notebook.cells[0]["id"] = "ex-x-solution"
    notebook.cells[1].source = "check_nothing_known(f)"
    with pytest.raises(ValueError, match="calls check_nothing_known, which courseware.checks does not define"):
        coding_exercises(notebook)


def test_table_lines_up_columns_and_shows_review():
    reports = [Report(Path("a/x.ipynb"), "a", 1, "m", [Verdict("ex-1", True, "", ["opens files (open)"]),
                                                       Verdict("ex-2", False, "")])]
    assert table(reports).splitlines() == ["submission  student  ex-1         ex-2  score",
                                           "a/x.ipynb   a        PASS+REVIEW  FAIL  1/2"]


def test_student_version_records_its_master():
    master = read(MASTERS[0])
    assert student_version(master, MASTERS[0].stem).metadata["exercises"] == {"master": MASTERS[0].stem}
