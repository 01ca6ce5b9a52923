"""How the chapters are committed, so that nbval's strict comparison (tests/test_notebook_outputs.py)
means something on any CPU.

* Every code cell is committed executed, without errors.
* A *measured* output (training, sampling, timing) is tagged ``nbval-ignore-output``, and
  every such cell is followed, before the next measured cell, by a ``claim`` cell that
  checks with :func:`lib.display.claim` what the prose concludes from it. Claim cells are
  also tagged ``remove-cell``: they run in every run of the chapter, but are not shown.
* Every ``claim`` call names, with ``backs=``, the markdown cell (by id) whose sentence it
  backs, and that cell exists in the same chapter: a sentence and its evidence stay linked
  when either moves.
* nbval's other escapes (skipping cells, or comparing loosely) are not used.
"""
import ast
from pathlib import Path

import nbformat
import pytest

CHAPTERS = sorted((Path(__file__).parent.parent / "chapters").glob("*.ipynb"))
MEASURED, CLAIM = "nbval-ignore-output", "claim"


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


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_measured_cell_is_followed_by_a_claim_check(path):
    pending = None  # the measured cell still waiting for its claim check
    for index, cell in enumerate(code_cells(path)):
        if MEASURED in tags(cell):
            assert pending is None, f"measured code cell {pending} has no claim cell before the next one"
            pending = index
        if CLAIM in tags(cell):
            assert "claim(" in cell.source, f"claim cell {index} does not call lib.display.claim"
            assert "remove-cell" in tags(cell), f"claim cell {index} is not tagged remove-cell"
            pending = None
    assert pending is None, f"measured code cell {pending} is never followed by a claim cell"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_no_cell_escapes_nbval_otherwise(path):
    for index, cell in enumerate(code_cells(path)):
        escapes = tags(cell) & {"nbval-skip", "nbval-raises-exception", "nbval-ignore-output-lax"}
        assert not escapes, f"code cell {index} is tagged {sorted(escapes)}"


def claims_and_their_cells(path):
    """``(code cell index, the claim's statement, ids it backs)`` for every claim call, and the
    ids of the chapter's markdown cells."""
    notebook = nbformat.read(path, as_version=4)
    markdown = {cell.get("id") for cell in notebook.cells if cell.cell_type == "markdown"}
    found = []
    for index, cell in enumerate(code_cells(path)):
        if "claim(" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "claim":
                statement = ast.unparse(node.args[0]) if node.args else "?"
                backs = next((k.value for k in node.keywords if k.arg == "backs"), None)
                found.append((index, statement[:60], backs))
    return found, markdown


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_claim_names_an_existing_markdown_cell_it_backs(path):
    claims, markdown = claims_and_their_cells(path)
    for index, statement, backs in claims:
        assert backs is not None, f"code cell {index}: claim {statement} has no backs= (the sentence it backs)"
        ids = ast.literal_eval(backs)
        ids = (ids,) if isinstance(ids, str) else ids
        missing = [i for i in ids if i not in markdown]
        assert not missing, f"code cell {index}: claim {statement} backs {missing}, not markdown cells of {path.name}"


SHOWN_LINE = 88  # characters of code that fit a code block at 1366 px (tests/test_book_html.py measures it)


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
