"""Every chapter, run afresh under both numeric configurations, against its committed outputs.

This is ``pytest --nbval`` on one run of each notebook per configuration, shared with the book
build instead of a run of nbval's own. ``tools/chapter_runs.py`` makes the runs (or reuses
them while nothing they read changed); each code cell here is one test that applies nbval's
own comparison (``nbval.plugin.IPyNbCell.compare_outputs``: the same output keys skipped, the
same stream merging, ``tests/nbval_sanitize.cfg``) to the committed outputs and the run's:

* ``book``: as the machine is, with the explorers pre-rendered as the book shows them. An
  explorer's output differs from a live one's only in its player (``text/html``), which is
  set aside; its ``text/plain`` is compared like every other output;
* ``other-cpu`` (marked ``other_cpu``): the chapter a student receives, then the book's answers
  (each exercise's solution and check cells), run under ``tests/other_cpu.env``, which imitates
  another CPU. Cells are found by id, an exercise's cells through their copies among the answers
  (``chapter_runs.run_cell_id``); the student's stubs and failing checks are read by
  ``tests/courseware/test_exercises.py``.

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


CELLS = [(notebook, cell.id) for notebook in CHAPTERS
         for cell in nbformat.read(notebook, as_version=4).cells if cell.cell_type == "code"]


@pytest.mark.parametrize("configuration", ["book", pytest.param("other-cpu", marks=pytest.mark.other_cpu)])
@pytest.mark.parametrize("notebook, cell_id", CELLS, ids=[f"{nb.stem}::{cell_id}" for nb, cell_id in CELLS])
def test_cell_outputs_equal_the_committed_ones(configuration, notebook, cell_id, request):
    config = chapter_runs.CONFIGURATIONS[configuration]
    run = chapter_runs.load_runs(CHAPTERS, config)[notebook]
    if isinstance(run, str):
        pytest.fail(f"{notebook.name} did not run to the end under {configuration}:\n{chapter_runs.ANSI.sub('', run)}",
                    pytrace=False)
    master = nbformat.read(notebook, as_version=4)
    committed = next(cell for cell in master.cells if cell.get("id") == cell_id)
    run_id = chapter_runs.run_cell_id(master, cell_id, config)
    fresh = next((cell for cell in run.cells if cell.get("id") == run_id), None)
    if fresh is None:
        pytest.fail(f"{notebook.name}: the code cell {cell_id} is not in the run under {configuration}; the student "
                    "edition leaves out every cell inside a solution block but the exercise's solution cell: move "
                    "it out of the block", pytrace=False)
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
