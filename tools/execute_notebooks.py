"""Execute chapter notebooks in place, the way they are committed.

Usage: python tools/execute_notebooks.py chapters/09_attention.ipynb [...]

Runs each notebook top to bottom in a fresh kernel (cwd = its folder, the cell timeout of
``_config.yml``; live widgets, as a reader's Jupyter runs it), stores the outputs that
tests/book/test_notebook_outputs.py compares with each run of tools/chapter_runs.py, and drops what
would only churn (widget state, execution timestamps). Prints each notebook's wall time.
"""
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from chapter_runs import cell_timeout  # tools/ is this script's folder
from lib.widgets.core import WIDGETS_ENV


def execute(path: Path) -> float:
    notebook = nbformat.read(path, as_version=4)
    os.environ[WIDGETS_ENV] = "live"
    client = NotebookClient(
        notebook, timeout=cell_timeout(), kernel_name="python3", store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    notebook.metadata.pop("widgets", None)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return elapsed


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[1:]:
        print(f"{name}: executed in {execute(Path(name)):.1f} s")
