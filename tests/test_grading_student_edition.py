"""The student edition: the book's HTML with every solution removed (``_ext/student_edition.py``),
and a student repository without the master notebooks."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from lib.exercises import coding_exercises, write_student_repo

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "09_attention.ipynb"


def _solution_lines(notebook) -> list[str]:
    """Text only solutions hold: the function bodies of solution-tagged cells (their docstrings and
    signatures stay in the hand-out), the prose of {solution} blocks outside maths, less any line
    that other cells of the chapter also hold."""
    lines = []
    for cell in notebook.cells:
        if "solution" in cell.metadata.get("tags", []):
            source = cell.source.splitlines()
            for function in ast.walk(ast.parse(cell.source)):
                if isinstance(function, ast.FunctionDef):
                    body = function.body[1:] if ast.get_docstring(function) else function.body
                    lines += source[body[0].lineno - 1:body[-1].end_lineno] if body else []
        elif cell.cell_type == "markdown" and cell.source.lstrip("`: ").startswith("{solution}"):
            prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "\n", cell.source, flags=re.S)
            lines += [chunk for line in prose.splitlines()[1:] for chunk in re.split(r"[*`_\\{}]", line)]
    elsewhere = " ".join(" ".join(cell.source.split()) for cell in notebook.cells
                         if "solution" not in cell.metadata.get("tags", []) and "{solution}" not in cell.source)
    lines = [" ".join(line.split()) for line in lines]
    return [line for line in lines if len(line) > 25 and not line.startswith("#") and line not in elsewhere]


def _build(tmp_path, edition):
    """Build chapter 9 alone (committed outputs, no execution) with the book's extensions."""
    source = tmp_path / edition
    (source / "chapters").mkdir(parents=True)
    (source / "chapters" / CHAPTER.name).write_bytes(CHAPTER.read_bytes())
    (source / "index.md").write_text("# Book\n\n```{toctree}\nchapters/09_attention\n```\n")
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['myst_nb', 'sphinx_exercise', 'student_edition']\n"
        "nb_execution_mode = 'off'\nmyst_enable_extensions = ['dollarmath', 'amsmath']\n"
        "suppress_warnings = ['mystnb.unknown_mime_type']\n")
    env = {**os.environ, "BOOK_EDITION": edition}
    result = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(source), str(source / "html")],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return source / "html"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("editions")
    return {edition: _build(tmp_path, edition) for edition in ("student", "instructor")}


def _text(html_dir: Path) -> str:
    """The text a reader sees on every page, whitespace collapsed."""
    pages = [BeautifulSoup(p.read_text(), "html.parser").get_text("") for p in html_dir.rglob("*.html")]
    return " ".join(" ".join(pages).split())


def test_the_student_edition_holds_no_solution_but_every_exercise(builds):
    notebook = nbformat.read(CHAPTER, as_version=4)
    lines = _solution_lines(notebook)
    assert len(lines) >= 5
    instructor, student = _text(builds["instructor"]), _text(builds["student"])
    assert all(line in instructor for line in lines), [line for line in lines if line not in instructor]
    assert [line for line in lines if line in student] == []
    assert not (builds["student"] / "_sources").exists() and (builds["instructor"] / "_sources").exists()
    for exercise in coding_exercises(notebook):  # the exercises and their check cells stay
        assert f"{exercise.checker}({exercise.function})" in student


def test_the_student_repository_has_no_masters(tmp_path):
    out = write_student_repo(tmp_path / "repo")
    masters = {p.name: nbformat.read(p, as_version=4) for p in (ROOT / "chapters").glob("*.ipynb")}
    handed_out = sorted((out / "chapters").glob("*.ipynb"))
    assert [p.name for p in handed_out] == sorted(masters)
    for path in handed_out:
        text = path.read_text()
        assert not any(line in text for line in _solution_lines(masters[path.name]) if "NotImplementedError" not in line)
        assert nbformat.read(path, as_version=4).metadata["exercises"] == {"master": path.stem}
    assert (out / "lib" / "checks" / "__init__.py").is_file() and (out / "pyproject.toml").is_file()
    # what binder/requirements.txt installs, and chapter 10's trained models
    assert (out / "requirements-runtime.txt").is_file() and list((out / "lib" / "weights").glob("*.pt"))
    assert not (out / "backmatter").exists() and not (out / "tests").exists()
    assert not list(out.rglob("*solution*"))
