"""Launching a chapter elsewhere: the links of the built book and Colab's set-up cell.

Both come from one place, ``_config.yml`` (``launch_buttons`` and ``repository``). The
repository there is a placeholder until the book is published, so these tests check the
links' form and that they agree with the configuration, never that they are reachable.
"""
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import colab_cell  # noqa: E402  (tools/ is not a package)

BUILD = ROOT / "_build" / "html"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))


def launch_links(page_html: str) -> dict[str, str]:
    """The launch buttons of a built page, by provider: {"Binder": url, "Colab": url}."""
    return {provider: url for url, provider in
            re.findall(r'<a href="([^"]+)"[^>]*?title="Launch on ([A-Za-z]+)"', page_html)}


def expected_links(notebook: str) -> dict[str, str]:
    """What the book's theme must build from ``_config.yml`` for ``notebook`` (a repository path)."""
    url, branch = colab_cell.repository()
    org, repo = urlparse(url).path.strip("/").split("/")
    buttons = CONFIG["launch_buttons"]
    assert buttons["notebook_interface"] == "jupyterlab"
    return {
        "Binder": f"{buttons['binderhub_url']}/v2/gh/{org}/{repo}/{branch}?urlpath=lab/tree/{notebook}",
        "Colab": f"{buttons['colab_url']}/github/{org}/{repo}/blob/{branch}/{notebook}",
    }


def test_the_configured_repository_and_launch_targets_are_well_formed():
    url, branch = colab_cell.repository()
    assert re.fullmatch(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", url)
    assert re.fullmatch(r"[A-Za-z0-9_./-]+", branch)
    assert CONFIG["repository"]["path_to_book"] == "", "the links below assume the book is the repository's root"
    for key in ("binderhub_url", "colab_url"):
        target = urlparse(CONFIG["launch_buttons"][key])
        assert target.scheme == "https" and target.netloc and target.path in ("", "/"), key


@pytest.mark.parametrize("path", ["http://github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a"])
def test_a_repository_colab_cannot_open_is_refused(tmp_path, path):
    config = tmp_path / "_config.yml"
    config.write_text(f"repository:\n  url: {path}\n  branch: main\n")
    with pytest.raises(ValueError, match=r"must look like https://github.com/<org>/<repo>"):
        colab_cell.repository(config)
    config.write_text("repository:\n  url: https://github.com/a/b\n")
    with pytest.raises(ValueError, match="must name a branch or tag; found ''"):
        colab_cell.repository(config)


def test_built_chapters_launch_their_own_notebook_on_binder_and_colab():
    if not (BUILD / "index.html").is_file():
        pytest.skip(f"the book is not built ({BUILD} has no index.html): `make book`, as `make test` does")
    for notebook in CHAPTERS:
        relative = notebook.relative_to(ROOT).as_posix()
        page = BUILD / Path(relative).with_suffix(".html")
        links = launch_links(page.read_text(encoding="utf-8"))
        assert links == expected_links(relative), f"{page.name} launches elsewhere"
        binder = urlparse(links["Binder"])
        assert binder.scheme == "https" and parse_qs(binder.query)["urlpath"] == [f"lab/tree/{relative}"]
        assert urlparse(links["Colab"]).path.endswith(f"/{relative}")


# ---- Colab's set-up cell ----------------------------------------------------------------
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_starts_with_the_current_colab_setup_cell(path):
    problem = colab_cell.problem(path, colab_cell.cell_source())
    assert problem is None, f"{problem}: run `.venv/bin/python tools/colab_cell.py --write chapters/*.ipynb`"


def run_setup_cell(monkeypatch, on_colab: bool) -> list[list[str]]:
    """Execute the cell's code and return the commands it ran (none are really run)."""
    commands = []
    monkeypatch.setattr("subprocess.run", lambda command, check: commands.append(command))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(colab_cell.cell_source(), {})
    return commands


def test_the_setup_cell_does_nothing_outside_colab(monkeypatch):
    assert run_setup_cell(monkeypatch, on_colab=False) == []


def test_on_colab_the_setup_cell_installs_lib_from_the_configured_repository(monkeypatch):
    url, branch = colab_cell.repository()
    (command,) = run_setup_cell(monkeypatch, on_colab=True)
    assert command == [sys.executable, "-m", "pip", "install", "--quiet",
                       f"attention-book-lib[reference] @ git+{url}@{branch}"]


def test_writing_the_cell_is_idempotent_and_replaces_an_outdated_one(tmp_path):
    notebook = tmp_path / "chapter.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A chapter"),
                                         nbformat.v4.new_code_cell("1 + 1")])
    nbformat.write(nb, notebook)
    source = colab_cell.cell_source()
    assert "first cell is not the Colab set-up cell" in colab_cell.problem(notebook, source)
    assert colab_cell.write(notebook, source) is True
    assert colab_cell.problem(notebook, source) is None
    written = notebook.read_bytes()
    assert colab_cell.write(notebook, source) is False and notebook.read_bytes() == written
    outdated = source + "\n# an older version of the cell"
    assert "out of date" in colab_cell.problem(notebook, outdated)
    assert colab_cell.write(notebook, outdated) is True
    cells = nbformat.read(notebook, as_version=4).cells
    assert [c.source for c in cells] == [outdated, "# A chapter", "1 + 1"]
    assert cells[0].metadata.tags == ["colab-setup", "remove-cell"]


def test_the_tool_checks_and_writes_from_the_command_line(tmp_path, capsys):
    notebook = tmp_path / "chapter.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), notebook)
    assert colab_cell.main(["--check", str(notebook)]) == 1
    assert "not the Colab set-up cell" in capsys.readouterr().err
    assert colab_cell.main(["--write", str(notebook)]) == 0
    assert colab_cell.main(["--check", str(notebook)]) == 0
    with pytest.raises(TypeError, match="source must be a non-empty string"):
        colab_cell.requirement("")
