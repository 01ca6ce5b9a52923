"""Each chapter's first cell: on Colab, install the book's lib at the notebook's version.

Usage:
    python tools/colab_cell.py --write chapters/*.ipynb   # insert or refresh the cell
    python tools/colab_cell.py --check chapters/*.ipynb   # exit 1 if a chapter lacks the current cell

Colab opens a chapter alone, without the repository, so ``import lib`` would fail there.
The cell pip-installs ``lib`` with its reference libraries from the repository named in
``_config.yml`` (``repository.url`` at ``repository.branch``: the same place and ref the
Colab launch button opens the notebook from). It is tagged ``remove-cell`` (the HTML book
hides it) and ``colab-setup`` (how this tool finds it again), and does nothing unless
``google.colab`` is imported, which is true only in a Colab kernel.

``--write`` is idempotent: a notebook that already starts with the current cell is not
rewritten. Run it after changing the repository in ``_config.yml``, then re-execute the
chapters (``tools/execute_notebooks.py``) so the cell is stored executed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "_config.yml"
PACKAGE = "attention-book-lib"
EXTRAS = "reference"
TAG = "colab-setup"
CELL_TAGS = [TAG, "remove-cell"]
CELL_ID = "colab-setup"


def repository(config_path: Path = CONFIG) -> tuple[str, str]:
    """The repository URL and branch (or tag) of ``_config.yml``'s ``repository`` section.

    Raises
    ------
    ValueError
        If the URL is not an https GitHub repository (``https://github.com/<org>/<repo>``)
        or the branch is missing.
    """
    config = yaml.safe_load(Path(config_path).read_text(encoding="utf-8"))
    section = config.get("repository") or {}
    url = str(section.get("url", "")).rstrip("/")
    branch = str(section.get("branch", "") or "")
    parsed = urlparse(url)
    parts = [p for p in parsed.path.split("/") if p]
    if parsed.scheme != "https" or parsed.netloc != "github.com" or len(parts) != 2:
        raise ValueError(
            f"repository.url in {config_path} must look like https://github.com/<org>/<repo> "
            f"(Colab opens notebooks from GitHub); found {url!r}"
        )
    if not branch or any(c.isspace() for c in branch):
        raise ValueError(f"repository.branch in {config_path} must name a branch or tag; found {branch!r}")
    return url, branch


def requirement(source: str) -> str:
    """The pip requirement that installs lib and its reference libraries from ``source``.

    ``source`` is anything pip accepts after ``@``: ``git+https://...@ref`` on Colab, a
    ``file://`` folder in the packaging test.
    """
    if not isinstance(source, str) or not source:
        raise TypeError(f"source must be a non-empty string (a pip URL); found {source!r}")
    return f"{PACKAGE}[{EXTRAS}] @ {source}"


def cell_source(config_path: Path = CONFIG) -> str:
    """The set-up cell's code for the repository configured in ``config_path``."""
    url, branch = repository(config_path)
    spec = requirement(f"git+{url}@{branch}")
    return (
        "# On Colab only: install the book's code (lib) at this notebook's version.\n"
        "# Anywhere else (JupyterLab, Binder, the book's build) this cell does nothing.\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", {json.dumps(spec)}], check=True)'
    )


def _is_setup_cell(cell) -> bool:
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", [])


def problem(path: Path, source: str) -> str | None:
    """Why ``path`` does not start with the current set-up cell, or None if it does."""
    cells = nbformat.read(path, as_version=4).cells
    if not cells or not _is_setup_cell(cells[0]):
        return f"{path}: the first cell is not the Colab set-up cell (tagged {TAG!r})"
    first = cells[0]
    if first.source != source:
        return f"{path}: the Colab set-up cell is out of date with {CONFIG.name}"
    if set(first.metadata.get("tags", [])) != set(CELL_TAGS):
        return f"{path}: the Colab set-up cell must be tagged exactly {CELL_TAGS}"
    if any(_is_setup_cell(cell) for cell in cells[1:]):
        return f"{path}: the Colab set-up cell appears more than once"
    return None


def write(path: Path, source: str) -> bool:
    """Make ``path`` start with the current set-up cell; return whether the file changed."""
    if problem(path, source) is None:
        return False
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = [cell for cell in notebook.cells if not _is_setup_cell(cell)]
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(CELL_TAGS)})
    cell.id = CELL_ID
    notebook.cells.insert(0, cell)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="insert or refresh the cell")
    mode.add_argument("--check", action="store_true", help="fail if a notebook lacks the current cell")
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    source = cell_source()
    if args.write:
        for path in args.notebooks:
            print(f"{path}: {'written' if write(path, source) else 'already current'}")
        return 0
    problems = [p for p in (problem(path, source) for path in args.notebooks) if p]
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
