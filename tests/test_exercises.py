"""The exercise workflow, proved on every chapter (a new chapter joins automatically).

For each master notebook in chapters/: its exercises are well formed; grading the
master passes every coding exercise; the student version fails exactly the
coding exercises and no other cell; tampered submissions fail every exercise
they did not solve.
"""
import copy
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat
import pytest

from lib.checks import CHECKS
from lib.exercises import (
    SOLUTION_TAG,
    coding_exercises,
    grade,
    main,
    student_version,
    stub_source,
    table,
    write_student_versions,
)

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"
MASTERS = sorted(CHAPTERS.glob("*.ipynb"))
ids = [m.stem for m in MASTERS]


def read(path):
    return nbformat.read(path, as_version=4)


def write(notebook, path):
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def students(tmp_path_factory):
    out = tmp_path_factory.mktemp("handout")
    return {path.stem: path for path in write_student_versions(CHAPTERS, out)}


def test_there_are_chapters_to_check():
    assert MASTERS, f"no notebooks in {CHAPTERS}"


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_every_chapter_has_well_formed_coding_exercises(master):
    exercises = coding_exercises(read(master))
    assert exercises, f"{master.name} has no auto-checked coding exercise"
    for exercise in exercises:
        assert exercise.checker in CHECKS


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_the_master_passes_every_check(master):
    report = grade(master, CHAPTERS)
    assert [v.passed for v in report.verdicts] == [True] * len(report.verdicts), report.lines()


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_the_student_version_fails_exactly_the_coding_exercises(master, students, tmp_path):
    student_path = students[master.stem]
    student = read(student_path)
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")
    assert not any("{solution" in c.source for c in student.cells if c.cell_type == "markdown")
    # Run the whole student notebook with nbval: the check cells, and only they, fail.
    junit = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", str(student_path), "--nbval-lax", "-q", "-p", "no:cacheprovider",
         f"--junitxml={junit}"],
        cwd=student_path.parent, capture_output=True, text=True, timeout=600,
    )
    code_cells = [c for c in student.cells if c.cell_type == "code"]
    failed = {
        code_cells[int(case.get("name").split()[-1])]["id"]
        for case in ElementTree.parse(junit).iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    }
    assert failed == {e.check_cell for e in coding_exercises(read(master))}
    report = grade(student_path, CHAPTERS)
    assert not any(v.passed for v in report.verdicts)
    assert all("NotImplementedError" in v.message for v in report.verdicts), report.lines()


def _tampered(master_path, student_path):
    """Submissions that try to pass without solving anything."""
    master, student = read(master_path), read(student_path)
    exercises = coding_exercises(master)
    check_ids = {e.check_cell for e in exercises}
    master_cells = {c["id"]: c for c in master.cells}

    edited = copy.deepcopy(student)
    for cell in edited.cells:
        if cell["id"] in check_ids:  # print what a passing check prints
            cell.source = "\n".join(f"print({line!r})" for line in
                                    "".join(o.get("text", "") for o in master_cells[cell["id"]].outputs).splitlines())

    deleted = copy.deepcopy(student)
    deleted.cells = [c for c in deleted.cells if c["id"] not in check_ids]

    pasted = copy.deepcopy(student)
    for cell in pasted.cells:
        if cell.cell_type == "code":
            cell.outputs = copy.deepcopy(master_cells[cell["id"]].outputs)

    patched = copy.deepcopy(student)
    for cell in patched.cells:
        if cell.cell_type == "code" and SOLUTION_TAG in cell.metadata.get("tags", []):
            cell.source += (
                "\nimport torch, lib.checks, lib.attention\n"
                "for _name in list(vars(lib.checks)):\n"
                "    if _name.startswith('check_'):\n"
                "        setattr(lib.checks, _name, lambda *a, **k: print('✓ passed'))\n"
                "lib.checks.CheckFailed = type('Never', (Exception,), {})\n"
                "torch.allclose = lambda *a, **k: True\n"
                "torch.testing.assert_close = lambda *a, **k: None\n"
            )
    return {"edited check cell": edited, "deleted check cell": deleted,
            "pasted master outputs": pasted, "monkey-patched checker": patched}


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_tampered_submissions_are_caught(master, students, tmp_path):
    for kind, notebook in _tampered(master, students[master.stem]).items():
        path = write(notebook, tmp_path / f"{master.stem}-{kind.replace(' ', '-')}.ipynb")
        report = grade(path, CHAPTERS)
        passed = [v.exercise for v in report.verdicts if v.passed]
        assert passed == [], f"a submission with a {kind} passed {passed}"


@pytest.mark.parametrize("master", MASTERS, ids=ids)
def test_a_solution_that_calls_the_patched_checker_still_fails(master, students, tmp_path):
    # The master's own solution cells, but each one breaks its function after defining it
    # and patches the checker to approve: the grader's own comparison still fails it.
    notebook = read(master)
    for exercise in coding_exercises(notebook):
        cell = next(c for c in notebook.cells if c["id"] == exercise.solution_cell)
        cell.source += (
            f"\n_right = {exercise.function}\n"
            f"def {exercise.function}(*args):\n"
            f"    return 0 * _right(*args) + 1\n"
            "import lib.checks\n"
            f"lib.checks.{exercise.checker} = lambda *a, **k: print('✓ passed')\n"
        )
    report = grade(write(notebook, tmp_path / f"{master.stem}-broken.ipynb"), CHAPTERS)
    assert not any(v.passed for v in report.verdicts), report.lines()


def test_a_solution_cell_that_never_finishes_fails_only_its_exercise(tmp_path, monkeypatch):
    import lib.exercises

    monkeypatch.setattr(lib.exercises, "CELL_TIMEOUT", 3)
    master = MASTERS[0]
    notebook = read(master)
    first = coding_exercises(notebook)[0]
    cell = next(c for c in notebook.cells if c["id"] == first.solution_cell)
    cell.source += "\nwhile True:\n    pass\n"
    report = grade(write(notebook, tmp_path / f"{master.stem}-loop.ipynb"), CHAPTERS)
    verdicts = {v.exercise: v for v in report.verdicts}
    assert not verdicts[first.id].passed and "solution cell raised" in verdicts[first.id].message
    assert all(v.passed for e, v in verdicts.items() if e != first.id), report.lines()


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
    notebook.cells = [nbformat.v4.new_code_cell("check_masked_softmax(f)", metadata={"tags": ["check"]})]
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
    with pytest.raises(ValueError, match="calls check_nothing_known, which lib.checks does not define"):
        coding_exercises(notebook)


def test_grading_a_folder_prints_a_table(students, tmp_path, capsys):
    first = MASTERS[0]
    folder = tmp_path / "submissions"
    folder.mkdir()
    solved = read(first)
    solved.metadata["exercises"] = {"master": first.stem}  # as in a handed-out notebook
    write(solved, folder / "alice.ipynb")
    write(read(students[first.stem]), folder / "bob.ipynb")
    assert main(["grade", str(folder), "--chapters", str(CHAPTERS)]) == 1
    out = capsys.readouterr().out
    n = len(coding_exercises(read(first)))
    assert f"score {n}/{n}" in out and f"score 0/{n}" in out
    assert out.strip().splitlines()[-2].startswith("alice.ipynb")
    assert out.strip().splitlines()[-1].startswith("bob.ipynb")


def test_table_lines_up_columns():
    from lib.exercises import Report, Verdict

    reports = [Report(Path("a.ipynb"), Path("m.ipynb"), [Verdict("ex-1", True, ""), Verdict("ex-2", False, "")])]
    assert table(reports).splitlines() == ["submission  ex-1  ex-2  score", "a.ipynb     PASS  FAIL  1/2"]


def test_student_version_records_its_master():
    master = read(MASTERS[0])
    assert student_version(master, MASTERS[0].stem).metadata["exercises"] == {"master": MASTERS[0].stem}
