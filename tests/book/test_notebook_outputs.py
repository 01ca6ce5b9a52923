"""Every chapter, run afresh under both numeric configurations, against its committed outputs.

This is ``pytest --nbval`` on one run of each notebook per configuration, shared with the book
build instead of a run of nbval's own. ``tools/chapter_runs.py`` makes the runs (or reuses
them while nothing they read changed); each code cell here is one test that applies nbval's
own comparison (``nbval.plugin.IPyNbCell.compare_outputs``: the same output keys skipped, the
same stream merging, ``tests/nbval_sanitize.cfg``) to the committed outputs and the run's:

* ``book``: as the machine is, with the explorers pre-rendered as the book shows them. An
  explorer's output differs from a live one's only in its player (``text/html``), which is
  set aside; its ``text/plain`` is compared like every other output;
* ``other-cpu`` (marked ``other_cpu``): the chapter a student receives, run under
  ``tests/other_cpu.env``, which imitates another CPU. Its cells are found by id; the exercises'
  own cells (the solution, a stub there, and its check, which raises there) are not compared:
  ``tests/courseware/test_exercises.py`` reads them. Every other cell must show the book's output.

A run fails as a whole when a cell raises (a claim that does not hold; in the student edition, a
cell other than a check); every cell of that notebook then fails with the error. Cells tagged
``nbval-ignore-output`` (measured results) are run but not compared, as in nbval.
"""
import copy
import sys
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbval.plugin import IPyNbCell, coalesce_streams, get_sanitize_patterns, nocolors

from courseware.exercises import coding_exercises

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import chapter_runs  # noqa: E402  (tools/ is not a package)

# nbval's IPyNbFile.skip_compare without --nbdime: the keys nbval never compares.
NBVAL_SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                      "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")
SANITIZE = get_sanitize_patterns((ROOT / "tests" / "nbval_sanitize.cfg").read_text())


class NbvalComparison:
    """nbval's comparison of one cell's outputs, run on outputs that nbval did not collect itself."""

    compare_outputs = IPyNbCell.compare_outputs
    sanitize = IPyNbCell.sanitize
    format_output_compare = IPyNbCell.format_output_compare
    colors = nocolors

    def __init__(self, request):
        self.parent = SimpleNamespace(skip_compare=NBVAL_SKIP_COMPARE, sanitize_patterns=OrderedDict(SANITIZE))
        self.ihook, self.config = request.node.ihook, request.config
        self.comparison_traceback = []

    def differences(self, fresh: list, committed: list) -> str | None:
        """``None`` if nbval finds the outputs equal, else its report."""
        if self.compare_outputs(coalesce_streams(copy.deepcopy(fresh)), coalesce_streams(copy.deepcopy(committed))):
            return None
        return "\n".join(self.comparison_traceback)


def without_players(outputs: list) -> list:
    """``outputs`` with each explorer's pre-rendered player (``text/html``) set aside."""
    kept = copy.deepcopy(outputs)
    for output in kept:
        data = output.get("data", {})
        if str(data.get("text/plain", "")).startswith("Explorer: "):
            data.pop("text/html", None)
    return kept


CHAPTERS = chapter_runs.chapter_notebooks()


def compared_cells(configuration: str) -> list:
    """``pytest.param(configuration, notebook, cell id)`` for every code cell the configuration's run shares
    with the committed notebook, but an exercise's own cells in the student edition."""
    config = chapter_runs.CONFIGURATIONS[configuration]
    marks = [pytest.mark.other_cpu] if configuration == "other-cpu" else []
    cells = []
    for notebook in CHAPTERS:
        run = chapter_runs.executed_source(notebook, config)
        shared = {cell.get("id") for cell in run.cells} - exercise_cells(notebook, config)
        cells += [pytest.param(configuration, notebook, cell.id, marks=marks, id=f"{notebook.stem}::{cell.id}-{configuration}")
                  for cell in nbformat.read(notebook, as_version=4).cells
                  if cell.cell_type == "code" and cell.id in shared]
    return cells


def exercise_cells(notebook, config) -> set[str]:
    """The solution and check cells of ``notebook``'s coding exercises, if ``config`` runs the student edition."""
    if config.edition == "master":
        return set()
    exercises = coding_exercises(nbformat.read(notebook, as_version=4))
    return {e.solution_cell for e in exercises} | {e.check_cell for e in exercises}


@pytest.mark.parametrize("configuration, notebook, cell_id", compared_cells("book") + compared_cells("other-cpu"))
def test_cell_outputs_equal_the_committed_ones(configuration, notebook, cell_id, request):
    config = chapter_runs.CONFIGURATIONS[configuration]
    run = chapter_runs.load_runs(CHAPTERS, config)[notebook]
    if isinstance(run, str):
        pytest.fail(f"{notebook.name} did not run to the end under {configuration}:\n{chapter_runs.ANSI.sub('', run)}",
                    pytrace=False)
    committed = next(cell for cell in nbformat.read(notebook, as_version=4).cells if cell.get("id") == cell_id)
    fresh = next(cell for cell in run.cells if cell.get("id") == cell_id)
    assert fresh.source == committed.source, "the run is of another version of the notebook"
    if "nbval-ignore-output" in committed.metadata.get("tags", []):
        return
    if committed.execution_count is None:
        assert not committed.outputs, f"cell {cell_id} was never run but has outputs"
        return
    report = NbvalComparison(request).differences(without_players(fresh.outputs), committed.outputs)
    if report is not None:
        pytest.fail(f"{notebook.name} cell {cell_id} under {configuration}: outputs differ\n{report}", pytrace=False)


def test_a_changed_output_is_found(request):
    """The comparison can fail: a digit changed, an output missing, an address masked."""
    comparison = NbvalComparison(request)
    stream = nbformat.v4.new_output("stream", name="stdout", text="loss 0.125 at 0x7f00aa\n")
    changed = nbformat.v4.new_output("stream", name="stdout", text="loss 0.126 at 0x7f00aa\n")
    other_address = nbformat.v4.new_output("stream", name="stdout", text="loss 0.125 at 0x5512bc\n")
    assert comparison.differences([stream], [stream]) is None
    assert comparison.differences([other_address], [stream]) is None
    assert "0.126" in NbvalComparison(request).differences([changed], [stream])
    assert NbvalComparison(request).differences([], [stream]) is not None


def test_only_an_explorers_player_is_set_aside():
    player = nbformat.v4.new_output("display_data", data={"text/plain": "Explorer: x — a ∈ {1}", "text/html": "<div>"})
    table = nbformat.v4.new_output("display_data", data={"text/plain": "a table", "text/html": "<table>"})
    assert without_players([player, table]) == [
        nbformat.v4.new_output("display_data", data={"text/plain": "Explorer: x — a ∈ {1}"}), table]
