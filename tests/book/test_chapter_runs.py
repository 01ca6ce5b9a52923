"""tools/chapter_runs.py: a run records what it read, and is redone exactly when that changes."""
import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import chapter_runs  # noqa: E402  (tools/ is not a package)

LIVE = chapter_runs.Configuration("test", widgets="live")


@pytest.fixture
def notebook(tmp_path, monkeypatch):
    """A small notebook inside the repository that imports one lib module and reads one data file."""
    monkeypatch.setattr(chapter_runs, "RUNS", tmp_path / "runs")
    folder = Path(chapter_runs.ROOT / "_build" / "test-chapter-runs")
    folder.mkdir(parents=True, exist_ok=True)
    data = ROOT / "tests" / "chapter_runs_probe.txt"  # a repository file the notebook opens
    data.write_text("3\n")
    path = folder / f"probe_{tmp_path.name}.ipynb"
    cells = ["from lib.part3_words.decoding import greedy_search", "print(int(open('../../tests/chapter_runs_probe.txt').read()) * 2)"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, path)
    yield path
    path.unlink()
    data.unlink()


def test_a_run_records_the_lib_modules_it_imported_and_the_files_it_read(notebook):
    assert chapter_runs.stale_reason(notebook, LIVE) == "never run"
    chapter_runs.run(notebook, LIVE)
    record = json.loads(chapter_runs.record_path(notebook, LIVE).read_text())
    assert {"lib/part3_words/decoding.py", "lib/checked.py", "tests/chapter_runs_probe.txt"} <= set(record["files"])
    assert not any(name.startswith(("lib/part5_memory", "lib/part4_attention", "lib/widgets")) for name in record["files"])
    executed = nbformat.read(chapter_runs.run_path(notebook, LIVE), as_version=4)
    assert executed.cells[-1].outputs[0]["text"] == "6\n"  # the probe cell is not kept
    assert len(executed.cells) == 2 and chapter_runs.stale_reason(notebook, LIVE) is None


def test_a_run_is_redone_when_its_code_or_a_file_it_read_changes_and_not_for_prose(notebook):
    chapter_runs.run(notebook, LIVE)
    source = nbformat.read(notebook, as_version=4)
    source.cells.append(nbformat.v4.new_markdown_cell("A sentence."))
    nbformat.write(source, notebook)
    assert chapter_runs.stale_reason(notebook, LIVE) is None
    (ROOT / "tests" / "chapter_runs_probe.txt").write_text("4\n")
    assert chapter_runs.stale_reason(notebook, LIVE) == "tests/chapter_runs_probe.txt changed"
    chapter_runs.run(notebook, LIVE)
    source.cells[1].source += "  # a comment"
    nbformat.write(source, notebook)
    assert chapter_runs.stale_reason(notebook, LIVE) == "its code cells changed"
    assert chapter_runs.stale_reason(notebook, chapter_runs.Configuration("test", widgets="static")) is not None


def test_a_failing_cell_stores_no_run(notebook):
    source = nbformat.read(notebook, as_version=4)
    source.cells.append(nbformat.v4.new_code_cell("assert False, 'a claim that does not hold'"))
    nbformat.write(source, notebook)
    failures = chapter_runs.ensure_runs([notebook], LIVE, jobs=1, log=lambda line: None)
    assert "a claim that does not hold" in failures[notebook]
    assert chapter_runs.stale_reason(notebook, LIVE) == "never run"


def test_the_other_configuration_sets_the_variables_of_other_cpu_env():
    variables = chapter_runs.CONFIGURATIONS["other-cpu"].variables()
    assert variables["ATEN_CPU_CAPABILITY"] == "default" and variables["OMP_NUM_THREADS"] == "1"
    assert variables["BOOK_WIDGETS"] == "live" and chapter_runs.CONFIGURATIONS["book"].variables() == {
        "BOOK_WIDGETS": "static"}


def test_the_book_runs_every_notebook_of_the_table_of_contents():
    names = [path.relative_to(ROOT).as_posix() for path in chapter_runs.book_notebooks()]
    assert names[:12] == [path.relative_to(ROOT).as_posix() for path in chapter_runs.chapter_notebooks()]
    assert names[12:] == ["backmatter/benchmarks.ipynb"]


STUDENT = chapter_runs.Configuration("test-student", widgets="live", edition="student")


@pytest.fixture
def exercise_notebook(tmp_path, monkeypatch):
    """A small master with one coding exercise (chapter 1's GELU derivative) and one other cell."""
    monkeypatch.setattr(chapter_runs, "RUNS", tmp_path / "runs")
    master = nbformat.read(ROOT / "chapters" / "01_activations_losses.ipynb", as_version=4)
    cells = [cell for cell in master.cells if cell.get("id", "").startswith("ex-act-gelu-grad")]
    cells.append(nbformat.v4.new_code_cell("print(2 + 2)", id="after-the-exercise"))
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder = Path(chapter_runs.ROOT / "_build" / "test-chapter-runs")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"exercise_{tmp_path.name}.ipynb"
    nbformat.write(notebook, path)
    yield path
    path.unlink()


def test_the_student_edition_runs_the_stubs_and_stores_the_checks_failure(exercise_notebook):
    chapter_runs.run(exercise_notebook, STUDENT)
    executed = nbformat.read(chapter_runs.run_path(exercise_notebook, STUDENT), as_version=4)
    solution = next(cell for cell in executed.cells if cell.id == "ex-act-gelu-grad-solution")
    assert "raise NotImplementedError" in solution.source and "torch.erf" not in solution.source
    failed = chapter_runs.failed_cells(executed)
    assert list(failed) == ["ex-act-gelu-grad-check"] and "NotImplementedError" in failed["ex-act-gelu-grad-check"]
    after = next(cell for cell in executed.cells if cell.id == "after-the-exercise")
    assert after.outputs[0]["text"] == "4\n"  # the run went on past the failing check
    # Then the book's answer and its check, which passes under this configuration too.
    assert [cell.id for cell in executed.cells[-2:]] == ["ex-act-gelu-grad-solution--book", "ex-act-gelu-grad-check--book"]
    assert "torch.erf" in executed.cells[-2].source and not failed.keys() & {"ex-act-gelu-grad-check--book"}
    assert chapter_runs.stale_reason(exercise_notebook, STUDENT) is None
    # The master's run of the same notebook is another run: the solution is executed, the check passes.
    master = chapter_runs.Configuration("test-student", widgets="live")
    assert chapter_runs.stale_reason(exercise_notebook, master) == "its code cells changed"


def test_a_student_edition_where_another_cell_fails_or_a_check_passes_stores_no_run(exercise_notebook):
    notebook = nbformat.read(exercise_notebook, as_version=4)
    position = next(i for i, cell in enumerate(notebook.cells) if cell.get("id") == "ex-act-gelu-grad-check")
    notebook.cells[position:position] = [
        nbformat.v4.new_code_cell("assert 2 + 2 == 5, 'a claim that does not hold'", id="planted-claim"),
        # The answer given away in a cell the student sees: the check passes without the student's work.
        nbformat.v4.new_code_cell("def my_gelu_grad(x):\n    x = x.detach().requires_grad_()\n"
                                  "    return torch.autograd.grad(torch.nn.functional.gelu(x).sum(), x)[0]",
                                  id="planted-answer")]
    nbformat.write(notebook, exercise_notebook)
    failures = chapter_runs.ensure_runs([exercise_notebook], STUDENT, jobs=1, log=lambda line: None)
    found = failures.get(exercise_notebook, "no failure recorded")
    assert "cell planted-claim raised AssertionError: a claim that does not hold" in found
    assert "assert 2 + 2 == 5" in found  # the traceback's end shows the line
    assert "the check ex-act-gelu-grad-check did not raise" in found
    assert chapter_runs.stale_reason(exercise_notebook, STUDENT) == "never run"


def test_the_books_answers_that_fail_their_check_store_no_run(exercise_notebook):
    notebook = nbformat.read(exercise_notebook, as_version=4)
    solution = next(cell for cell in notebook.cells if cell.get("id") == "ex-act-gelu-grad-solution")
    solution.source = solution.source.replace("cdf + x * density", "cdf")  # the book's answer, wrong
    nbformat.write(notebook, exercise_notebook)
    failures = chapter_runs.ensure_runs([exercise_notebook], STUDENT, jobs=1, log=lambda line: None)
    assert "cell ex-act-gelu-grad-check--book raised CheckFailed" in failures.get(exercise_notebook, "no failure recorded")
