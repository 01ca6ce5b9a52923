"""How the chapters are committed, so that nbval's strict comparison (tests/book/test_notebook_outputs.py)
means something on any CPU.

* Every code cell is committed executed, without errors.
* A *measured* output (training, sampling, timing) is tagged ``nbval-ignore-output``, and
  every such cell is followed, before the next measured cell, by a visible cell that calls a
  result's ``check()`` (:class:`experiments.findings.Result`): it prints the findings the
  prose draws from the run, ticked, and nbval compares those lines exactly.
* A chapter's experiments are ``experiments.ch<notebook name>``: every finding there backs
  (``backs=``) markdown cells that exist in that chapter, and the chapter itself calls every public
  function of its module that returns a result, so no declared experiment goes unrun (the module's
  other public functions it at least names).
* nbval's other escapes (skipping cells, or comparing loosely) are not used.
"""
import ast
import importlib
import inspect
import types
from pathlib import Path

import nbformat
import pytest

from experiments.findings import Result

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MEASURED = "nbval-ignore-output"


def code_cells(path):
    return [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


def tags(cell):
    return set(cell.metadata.get("tags", []))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_code_cell_is_committed_executed_without_errors(path):
    for index, cell in enumerate(code_cells(path)):
        assert cell.execution_count is not None, f"code cell {index} was never executed"
        errors = [out for out in cell.outputs if out.output_type == "error"]
        assert not errors, f"code cell {index} is committed with an error: {errors[0].ename}"


def checks_a_result(cell) -> bool:
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "check" and not node.args for node in ast.walk(ast.parse(cell.source)))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_measured_cell_is_followed_by_a_visible_check_of_its_findings(path):
    pending = None  # the measured cell still waiting for its findings to be checked
    for index, cell in enumerate(code_cells(path)):
        if MEASURED in tags(cell):
            assert pending is None, f"measured code cell {pending} has no check() before the next one"
            pending = index
        if checks_a_result(cell):
            assert not tags(cell) & {MEASURED, "remove-cell", "remove-input"}, (
                f"code cell {index} checks findings, but hides them or is not compared: {sorted(tags(cell))}")
            pending = None
    assert pending is None, f"measured code cell {pending} is never followed by a check() of its findings"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_chapter_hides_a_claim_in_a_cell(path):
    for index, cell in enumerate(code_cells(path)):
        assert "claim(" not in cell.source and "claim" not in tags(cell), (
            f"code cell {index}: a conclusion is a Finding of its experiment's result, not a hidden claim")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_cell_escapes_nbval_otherwise(path):
    for index, cell in enumerate(code_cells(path)):
        escapes = tags(cell) & {"nbval-skip", "nbval-raises-exception", "nbval-ignore-output-lax"}
        assert not escapes, f"code cell {index} is tagged {sorted(escapes)}"


def experiments_of(path):
    """The chapter's experiments module, ``experiments.ch<notebook name>``, or None."""
    name = f"experiments.ch{path.stem}"
    if not (ROOT / Path(*name.split("."))).with_suffix(".py").is_file():
        return None
    return importlib.import_module(name)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_finding_backs_markdown_cells_of_its_chapter(path):
    module = experiments_of(path)
    if module is None:
        return
    notebook = nbformat.read(path, as_version=4)
    markdown = {cell.get("id") for cell in notebook.cells if cell.cell_type == "markdown"}
    results = [obj for obj in vars(module).values()
               if isinstance(obj, type) and issubclass(obj, Result) and obj.__module__ == module.__name__]
    assert results, f"{module.__name__} declares no result with findings"
    for result in results:
        for finding in result.FINDINGS:
            missing = [cell for cell in finding.backs if cell not in markdown]
            assert not missing, f"{result.__name__}: {finding.says!r} backs {missing}, not cells of {path.name}"


def returns_a_result(function) -> bool:
    """Whether ``function``'s return annotation is a :class:`Result` (a string annotation, as under
    ``from __future__ import annotations``, is read in the function's own module)."""
    annotation = inspect.signature(function).return_annotation
    if isinstance(annotation, str):
        annotation = eval(annotation, inspect.unwrap(function).__globals__)  # noqa: S307
    return isinstance(annotation, type) and issubclass(annotation, Result)


def unrun_experiments(module, sources) -> list[str]:
    """The public functions of ``module`` that the code cells ``sources`` leave out: one that returns a
    :class:`Result` (an experiment) must be called by a cell itself, not merely by a function of the
    module that a cell calls (that call may sit in a branch that never runs); any other public function
    must at least be named in a cell, as ``chNN.name`` or ``name`` (``show_code(ch10.train_model)``)."""
    trees = [ast.parse(source) for source in sources]
    called = {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
              for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Call)}
    named = {node.attr if isinstance(node, ast.Attribute) else node.id
             for tree in trees for node in ast.walk(tree) if isinstance(node, (ast.Attribute, ast.Name))}
    public = {name: obj for name, obj in vars(module).items() if inspect.isfunction(obj)
              and obj.__module__ == module.__name__ and not name.startswith("_")}
    return [name for name, function in public.items()
            if name not in (called if returns_a_result(function) else named)]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_the_chapter_runs_every_experiment_of_its_module(path):
    module = experiments_of(path)
    if module is None:
        return
    unrun = unrun_experiments(module, [cell.source for cell in code_cells(path)])
    assert not unrun, (f"{module.__name__} declares experiments chapter {path.stem} never runs, or "
                       f"functions it never names: {unrun}")


DEAD_BRANCH = """
from __future__ import annotations
from experiments.findings import Result


class Hidden(Result):
    FINDINGS = ()


def hidden() -> Hidden:
    return Hidden()


def helper(n: int) -> int:
    return n


def shown() -> Hidden:
    if False:  # never runs: hidden() is reached only on paper
        return hidden()
    return Hidden()
"""


def test_the_runs_check_is_not_fooled_by_an_experiment_reached_only_through_the_module():
    """The referee's trick against following calls into the module: ``hidden`` returns a Result and is
    called only in a dead branch of ``shown``, which the chapter runs. It must be called by the chapter;
    ``helper``, which returns no Result, is enough named, and not enough left unnamed."""
    module = types.ModuleType("experiments.ch99_dead_branch")
    exec(compile(DEAD_BRANCH, module.__name__, "exec"), vars(module))  # noqa: S102
    assert returns_a_result(module.hidden) and not returns_a_result(module.helper)
    assert unrun_experiments(module, ["ch99.shown()", "show_code(ch99.helper)"]) == ["hidden"]
    assert unrun_experiments(module, ["ch99.shown()", "print(1)"]) == ["hidden", "helper"]
    assert unrun_experiments(module, ["ch99.shown()\nx = ch99.hidden()", "helper"]) == []
    # naming an experiment is not running it
    assert unrun_experiments(module, ["ch99.shown()", "show_code(ch99.hidden, ch99.helper)"]) == ["hidden"]


SHOWN_LINE = 88  # characters of code that fit a code block at 1366 px (tests/book/test_book_html.py measures it)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_shown_code_and_printed_lines_fit_the_page(path):
    """What the reader sees, checked before the browser test has to find it in the built book: code
    cells not removed from the page, and what they print (explorers print HTML, not this text)."""
    for index, cell in enumerate(code_cells(path)):
        if tags(cell) & {"remove-cell", "remove-input"}:
            continue
        long = [line for line in cell.source.splitlines() if len(line) > SHOWN_LINE]
        assert not long, f"code cell {index} ({cell.get('id')}) shows a line of {len(long[0])} characters"
        printed = "".join(out.get("text", "") for out in cell.outputs if out.output_type == "stream")
        long = [line for line in printed.splitlines() if len(line) > SHOWN_LINE]
        assert not long, f"code cell {index} ({cell.get('id')}) prints a line of {len(long[0])} characters"
