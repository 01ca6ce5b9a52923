"""The student edition: the book's HTML with every solution removed (``_ext/student_edition.py``),
and a student repository without the master notebooks.

A *solution* is what students must not see: the bodies of ``solution``-tagged code cells (their
imports, signatures and docstrings stay in the hand-out) with what those cells print, every
markdown cell that starts with a solution directive, and every cell between a ``{solution-start}``
and its ``{solution-end}``. A line of a solution is *distinctive* when no other cell of any chapter
holds it, in its source or in what it prints.

Three ways an answer has reached students, each tested here for every chapter:

* the build shows a solution: ``test_the_student_edition_holds_no_solution`` builds the whole book in
  both editions from the committed outputs (no execution, about 15 s each) and searches every page,
  the search index and every other file the student edition ships; the instructor's edition, where
  the same searches must find every solution, is built without the step that only trims a finished
  build (:data:`NOT_IN_THE_CONTROL`);
* a solution's prose sits outside its directive, so both editions show it
  (``test_solution_prose_lives_only_inside_its_solution``);
* the chapter itself prints the answer, in a listing of ``lib`` code, above the exercise that asks
  for it (``test_no_listing_prints_the_code_an_exercise_asks_for``).
"""
import ast
import functools
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import lxml.etree
import lxml.html
import nbformat
import pytest
import yaml

from courseware.exercises import SOLUTION_DIRECTIVES, _outside_solutions, coding_exercises, write_student_repo

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MIN_LENGTH = 25  # shorter lines ("return weights", "import torch") are common to many cells

# Lines a solution shares with the chapter's own code that give nothing away.
NOT_AN_ANSWER = {
    "generator = torch.Generator().manual_seed(seed)",  # ex-act-revive: how every experiment of ch 1 seeds
    "for t in range(x.shape[1]):",  # a loop over time steps: ch 3's whole listings (no start=) hold it
}


# ---- what is a solution ---------------------------------------------------------------------------
def _opens_with_solution_directive(cell) -> bool:
    head = cell.source.lstrip().lstrip("`:").lstrip()
    return cell.cell_type == "markdown" and head.startswith(SOLUTION_DIRECTIVES)


def _is_solution_code(cell) -> bool:
    return cell.cell_type == "code" and "solution" in cell.metadata.get("tags", [])


def _directive(cell) -> str:
    return cell.source.split("\n", 1)[0] if _opens_with_solution_directive(cell) else ""


def _solution_cells(notebook) -> list:
    """The cells that belong to solutions: those that open with a solution directive, the code cells
    tagged ``solution``, and every cell between a ``{solution-start}`` and its ``{solution-end}``."""
    cells, inside = [], False
    for cell in notebook.cells:
        inside = inside or "{solution-start}" in _directive(cell)
        if inside or _opens_with_solution_directive(cell) or _is_solution_code(cell):
            cells.append(cell)
        inside = inside and "{solution-end}" not in _directive(cell)
    return cells


def _normal(text: str) -> str:
    """Whitespace collapsed, and the typography Sphinx applies to prose (smart quotes, ellipses) undone."""
    text = text.translate(str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "…": "..."}))
    return " ".join(text.split())


def _printed(cell) -> list[str]:
    """The lines a code cell's outputs show as text."""
    lines = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            lines += output["text"].splitlines()
        elif "text/plain" in output.get("data", {}) and "text/html" not in output["data"]:
            lines += output["data"]["text/plain"].splitlines()
    return lines


def _solution_code_lines(source: str) -> list[str]:
    """The lines a hand-out does not keep: function bodies without docstrings, and every top-level
    statement but imports and definitions."""
    lines, kept = source.splitlines(), []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            kept += lines[body[0].lineno - 1:body[-1].end_lineno] if body else []
        else:
            kept += lines[node.lineno - 1:node.end_lineno]
    return kept


def _prose_lines(source: str) -> list[str]:
    """A solution cell's markdown after its directive line, outside maths, cut at markup (emphasis,
    code, roles, links) and without list markers, as the rendered page shows it."""
    body = source.split("\n", 1)[1] if "\n" in source else ""
    prose = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", "\n", body, flags=re.S)
    return [chunk for line in prose.splitlines()
            for chunk in re.split(r"[*`_\\{}\[\]]", re.sub(r"^\s*(?:\d+\.|[-*+])\s+", "", line))]


def _shown(notebooks) -> str:
    """Everything the chapters show outside solutions: every other cell's source and printed lines."""
    texts = []
    for notebook in notebooks:
        solutions = [id(cell) for cell in _solution_cells(notebook)]
        texts += [cell.source + "\n" + "\n".join(_printed(cell))
                  for cell in notebook.cells if id(cell) not in solutions]
    return _normal(" ".join(texts))


def _lines(raw: list[str]) -> list[str]:
    lines = [_normal(line) for line in raw]
    return list(dict.fromkeys(line for line in lines if len(line) > MIN_LENGTH and not line.startswith("#")))


def _solution_lines(notebook, shown: str) -> list[str]:
    """The distinctive lines of a chapter's solutions: code bodies, what solution cells print and the
    prose of solution cells, less any line the book shows elsewhere (``shown``)."""
    raw = []
    for cell in _solution_cells(notebook):
        if _is_solution_code(cell):
            raw += _solution_code_lines(cell.source) + _printed(cell)
        elif cell.cell_type == "markdown":
            raw += _prose_lines(cell.source if _opens_with_solution_directive(cell) else "\n" + cell.source)
        else:  # an untagged code cell inside a solution: all of it
            raw += cell.source.splitlines() + _printed(cell)
    return [line for line in _lines(raw) if line not in shown]


@pytest.fixture(scope="module")
def masters():
    return {path.stem: nbformat.read(path, as_version=4) for path in CHAPTERS}


@pytest.fixture(scope="module")
def shown(masters):
    return _shown(masters.values())


@pytest.fixture(scope="module")
def solution_lines(masters, shown):
    lines = {name: _solution_lines(notebook, shown) for name, notebook in masters.items()}
    assert all(len(found) >= 5 for found in lines.values()), {name: len(found) for name, found in lines.items()}
    return lines


# ---- the build -----------------------------------------------------------------------------------
# What the instructor guide has an instructor do before ``make student-book``: point the launch
# buttons at the student repository.
STUDENT_REPOSITORY = "https://github.com/a-course/book-student"


# What the instructor's edition is built without. It is the control: it shows that the searches below
# find every solution where one is shown, and what they search (each page's text and links, the search
# index, the page sources) is written by Sphinx before the build-finished step of _ext/page_assets.py,
# which only trims the finished build (style sheets, icon fonts, the pages' script tags, image and
# code-token markup: no text, link or index entry changes). A fifth of a build's time, it runs in the
# student edition, which is tested as `make student-book` ships it.
NOT_IN_THE_CONTROL = ("page_assets",)


def _config(tmp_path: Path, edition: str) -> Path:
    """The book's _config.yml with execution off (the pages show the committed outputs), its paths
    made absolute so that it can live outside the repository; the student edition's names the
    student repository, the instructor's leaves out :data:`NOT_IN_THE_CONTROL`."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    config["sphinx"]["local_extensions"] = {name: str(ROOT / folder)
                                            for name, folder in config["sphinx"]["local_extensions"].items()
                                            if edition == "student" or name not in NOT_IN_THE_CONTROL}
    config["bibtex_bibfiles"] = [str(ROOT / name) for name in config["bibtex_bibfiles"]]
    if edition == "student":
        config["repository"]["url"] = STUDENT_REPOSITORY
    path = tmp_path / f"_config_{edition}.yml"
    path.write_text(yaml.safe_dump(config))
    return path


EDITIONS = ("student", "instructor")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The whole book in both editions, built side by side from the repository's sources
    (``jupyter-book build --all``, each with ``BOOK_EDITION`` set to its edition), by one helper that
    imports the build's stack once and forks the two builds (tests/courseware/edition_builds.py)."""
    tmp_path = tmp_path_factory.mktemp("editions")
    builds = [f"{edition}=" + json.dumps(["build", str(ROOT), "--path-output", str(tmp_path / edition), "--config",
                                          str(_config(tmp_path, edition)), "--all", "-q"]) for edition in EDITIONS]
    helper = subprocess.Popen([sys.executable, str(Path(__file__).with_name("edition_builds.py")), str(tmp_path),
                               *builds], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        log, _ = helper.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(helper.pid, signal.SIGKILL)  # the helper and the two builds it forked
        raise
    assert helper.returncode == 0, log[-6000:]
    return {edition: tmp_path / edition / "_build" / "html" for edition in EDITIONS}


# What BeautifulSoup's get_text() leaves out: the contents of scripts, style sheets, templates and
# ruby annotations (and comments, which lxml keeps as elements whose tag is not a string).
NOT_TEXT = {"script", "style", "template", "rt", "rp"}


def _read_page(path: Path) -> tuple[str, list[str]]:
    """A page's text, as BeautifulSoup's ``get_text("")`` gives it once whitespace is collapsed
    (``_normal``), and the targets of its links.

    Parsed by lxml without building a BeautifulSoup tree: ten times faster on the book's 23
    pages per edition, and the same collapsed text and links, page by page (checked against
    BeautifulSoup's html.parser on both editions when this replaced it)."""
    root = lxml.html.fromstring(path.read_bytes())
    pieces, hidden = [], 0
    for event, element in lxml.etree.iterwalk(root, events=("start", "end")):
        ordinary = isinstance(element.tag, str)  # not a comment or processing instruction
        if event == "start":
            if ordinary and element.tag in NOT_TEXT:
                hidden += 1
            elif ordinary and not hidden and element.text:
                pieces.append(element.text)
        else:
            if ordinary and element.tag in NOT_TEXT:
                hidden -= 1
            if not hidden and element.tail and element is not root:
                pieces.append(element.tail)
    return "".join(pieces), [link.get("href") for link in root.iter("a") if link.get("href") is not None]


@functools.lru_cache(maxsize=None)
def _pages(html_dir: Path) -> dict[Path, tuple[str, list[str]]]:
    return {path: _read_page(path) for path in sorted(html_dir.rglob("*.html"))}


@functools.lru_cache(maxsize=None)
def _page_text(html_dir: Path) -> str:
    """The text a reader sees on every page."""
    return _normal(" ".join(text for text, _ in _pages(html_dir).values()))


TEXT_SUFFIXES = {".ipynb", ".md", ".py", ".txt", ".rst", ".json", ".js", ".tex", ".csv", ".yml", ".yaml"}


def _shipped_files(html_dir: Path) -> dict[Path, str]:
    """Every file of the build other than its pages and search index that may hold text: everything
    outside the themes' and MathJax's assets (``_static``) and the plots (``_images``), and any
    notebook, markdown, Python or text file wherever it is."""
    files = {}
    for path in html_dir.rglob("*"):
        relative = path.relative_to(html_dir)
        if not path.is_file() or path.suffix == ".html" or relative == Path("searchindex.js"):
            continue
        if relative.parts[0] in ("_static", "_images") and path.suffix not in TEXT_SUFFIXES - {".js", ".json"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if path.suffix == ".ipynb":  # the cells' text, not their JSON escapes
            text = "\n".join(cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
                             for cell in json.loads(text)["cells"])
        files[relative] = _normal(text)
    return files


def _index_terms(html_dir: Path) -> set[str]:
    """The words (stemmed, as Sphinx stores them) of the search index."""
    text = (html_dir / "searchindex.js").read_text()
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    return {term.lower() for term in (*index["terms"], *index["titleterms"])}


def _index_words(texts) -> set[str]:
    """The search-index terms that ``texts`` give, split and stemmed by Sphinx's English indexer."""
    from sphinx.search.en import SearchEnglish

    language = SearchEnglish({})
    words = {word.lower() for text in texts for word in language.split(text)}
    return words | {language.stem(word) for word in words}


@pytest.fixture(scope="module")
def solution_only_terms(masters):
    """Index terms that only the chapters' solutions give: no other cell, page or bibliography entry."""
    # The explorers' captions are written in lib/widgets: their words are on the pages too.
    pages = [*ROOT.glob("*.md"), *(ROOT / "backmatter").glob("*.md"), ROOT / "references.bib",
             *(ROOT / "lib" / "widgets").glob("*.py")]
    solutions, others = [], [path.read_text() for path in pages]
    for notebook in masters.values():
        inside = [id(cell) for cell in _solution_cells(notebook)]
        for cell in notebook.cells:
            (solutions if id(cell) in inside else others).append(cell.source + "\n" + "\n".join(_printed(cell)))
    terms = {term for term in _index_words(solutions) - _index_words(others) if not term.isdigit()}
    assert len(terms) >= 50, terms
    return terms


def test_the_student_edition_holds_no_solution(builds, solution_lines):
    instructor, student = _page_text(builds["instructor"]), _page_text(builds["student"])
    # Every distinctive line is found where it is shown, so not finding it means it is not there.
    missing = {name: found for name, lines in solution_lines.items()
               if (found := [line for line in lines if line not in instructor])}
    assert missing == {}, "lines of solutions the instructor's edition does not show"
    leaked = {name: found for name, lines in solution_lines.items()
              if (found := [line for line in lines if line in student])}
    assert leaked == {}, "the student edition shows lines of solutions"
    shipped = _shipped_files(builds["student"])
    assert shipped, "the scan of the other files found none"
    leaked = {str(path): found for path, text in shipped.items()
              if (found := [line for lines in solution_lines.values() for line in lines if line in text])}
    assert leaked == {}, "files of the student edition hold lines of solutions"
    assert not (builds["student"] / "_sources").exists() and (builds["instructor"] / "_sources").exists()
    assert not list(builds["student"].rglob("*.ipynb")), "the student edition ships notebooks"


def test_the_student_edition_search_index_holds_no_solution_word(builds, solution_only_terms):
    """The search index stores words, not lines: it must hold no word that only solutions use."""
    assert len(solution_only_terms & _index_terms(builds["instructor"])) >= 50  # so the test can see them
    assert sorted(solution_only_terms & _index_terms(builds["student"])) == []


def test_the_student_edition_links_to_no_master(builds):
    """No page links to a page's source (the master notebook) or to the book's own repository: the
    source downloads are gone, and the launch buttons (Binder, Colab) open the student repository
    that the configuration names."""
    book = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]

    def links(html_dir):
        return {href for _, hrefs in _pages(html_dir).values() for href in hrefs}

    def to_masters(hrefs):
        return sorted(href for href in hrefs if "_sources" in href or book in href
                      or (".ipynb" in href and "://" not in href))

    assert to_masters(links(builds["instructor"]))  # the instructor's book has them, so the test sees them
    student = links(builds["student"])
    assert to_masters(student) == []
    launch = [href for href in student if "mybinder.org/v2/" in href or "colab.research.google.com/github/" in href]
    assert launch and all("a-course/book-student" in href for href in launch)


def test_the_student_edition_keeps_every_exercise_and_check(builds, masters):
    student = _page_text(builds["student"])
    for notebook in masters.values():
        for exercise in coding_exercises(notebook):  # the exercises and their check cells stay
            assert f"{exercise.checker}({exercise.function})" in student
            assert f"{exercise.id}-solution" not in student


# ---- the structure of the solutions --------------------------------------------------------------
def _fence_violations(cell) -> list[str]:
    """What a cell that opens with a solution directive holds outside it, or in the wrong place."""
    source = cell.source.strip()
    directive = re.match(r"([`:]{3,})\s*(\{solution(?:-start|-end)?\})", source)
    if directive is None:
        return ["does not start with a solution directive"]
    fence, name = directive.groups()
    lines = source.splitlines()
    closing = next((i for i, line in enumerate(lines[1:], 1)
                    if line.strip().startswith(fence) and not line.strip().lstrip(fence[0])), None)
    if closing is None:
        return [f"its {name} is never closed"]
    after = "\n".join(lines[closing + 1:]).strip()
    if after and name != "{solution-start}":  # after a start, the prose is inside the solution
        return [f"holds text after its {name} closes, which both editions show outside the solution: "
                f"{after[:80]!r}"]
    return []


def solution_structure_violations(notebook) -> list[str]:
    """Where a solution's text would reach students (``courseware.exercises`` drops exactly the cells that
    start with a solution directive, ``_ext/student_edition.py`` the directives' content):

    * a markdown cell that holds a solution directive but does not start with it;
    * text after a ``{solution}`` or ``{solution-end}`` closes;
    * between ``{solution-start}`` and ``{solution-end}``, a code cell not tagged ``solution``
      (markdown there is the solution's prose: both editions drop it);
    * a ``{solution-start}`` without its ``{solution-end}``, or the reverse.
    """
    problems, open_since = [], None
    for cell in notebook.cells:
        where = cell.get("id", "?")
        if cell.cell_type == "markdown" and "{solution" in cell.source and not _opens_with_solution_directive(cell):
            problems.append(f"{where}: holds a solution directive after other text")
        if _opens_with_solution_directive(cell):
            problems += [f"{where}: {problem}" for problem in _fence_violations(cell)]
            if "{solution-start}" in cell.source.split("\n", 1)[0]:
                if open_since:
                    problems.append(f"{where}: a solution starts inside the one that {open_since} started")
                open_since = where
            elif "{solution-end}" in cell.source.split("\n", 1)[0]:
                if not open_since:
                    problems.append(f"{where}: a solution ends that never started")
                open_since = None
        elif open_since and cell.cell_type == "code" and not _is_solution_code(cell):
            problems.append(f"{where}: a code cell inside the solution that {open_since} starts is not "
                            "tagged solution")
    if open_since:
        problems.append(f"{open_since}: the solution never ends")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=[path.stem for path in CHAPTERS])
def test_solution_prose_lives_only_inside_its_solution(path):
    problems = solution_structure_violations(nbformat.read(path, as_version=4))
    assert problems == []


def test_the_structure_check_finds_text_outside_a_solution():
    cell = nbformat.v4.new_markdown_cell
    code = nbformat.v4.new_code_cell("def f():\n    return 1\n", metadata={"tags": ["solution"]})
    notebook = nbformat.v4.new_notebook(cells=[
        cell("```{solution-start} ex-a\n:class: dropdown\n```\nInside: fine.", id="a-start"), code,
        cell("```{solution-end}\n```\nAs the temperature goes to 0 ...", id="a-end"),
        cell("```{solution} ex-b\n:class: dropdown\n\nAnswer.\n```\n\nMore answer.", id="b"),
        cell("First a sentence.\n\n```{solution} ex-c\nAnswer.\n```", id="c"),
        cell("```{solution-start} ex-d\n```", id="d-start"), cell("A remark.", id="d-remark"),
        nbformat.v4.new_code_cell("x = 1", id="d-untagged"), cell("```{solution-end}\n```", id="d-end"),
        cell("````{solution} ex-e\n```python\nf()\n```\n````", id="e"),  # a nested fence is fine
    ])
    problems = solution_structure_violations(notebook)
    assert [problem.split(":")[0] for problem in problems] == ["a-end", "b", "c", "d-untagged"], problems
    # Prose between a solution's start and end is the solution's: the hand-out drops it with the directives.
    kept = [cell.get("id") for cell in _outside_solutions(notebook.cells, keep=set())]
    assert "d-remark" not in kept and "d-untagged" not in kept and "a-end" not in kept and "c" in kept
    assert "As the temperature" in problems[0] and "More answer" in problems[1]


# ---- listings that print an exercise's answer ----------------------------------------------------
def printed_answers(notebooks) -> dict[str, list[str]]:
    """For each coding exercise, the lines of its solution's code that the book shows outside
    solutions: in a listing of ``lib`` code (``show_code``) above it, or in any other cell."""
    shown = _shown(notebooks)
    found = {}
    for notebook in notebooks:
        cells = {cell.get("id"): cell for cell in notebook.cells}
        for exercise in coding_exercises(notebook):
            lines = [line for line in _lines(_solution_code_lines(cells[exercise.solution_cell].source))
                     if line in shown and line not in NOT_AN_ANSWER]
            if lines:
                found[exercise.id] = lines
    return found


def test_no_listing_prints_the_code_an_exercise_asks_for(masters):
    assert printed_answers(list(masters.values())) == {}


def test_the_listing_check_finds_a_printed_answer():
    listing = nbformat.v4.new_code_cell("show_code(weights)", id="show")
    listing.outputs = [nbformat.v4.new_output("stream", text="def weights(x):\n    distance = positions - "
                                                             "centre[:, None]  # (B, S): s - p_t\n")]
    notebook = nbformat.v4.new_notebook(cells=[
        listing,
        nbformat.v4.new_code_cell("import torch\n\n\ndef my_weights(x):\n    distance = positions - "
                                  "centre[:, None]  # (B, S): s - p_t\n    return distance\n",
                                  id="ex-w-solution", metadata={"tags": ["solution"]}),
        nbformat.v4.new_code_cell("from courseware.checks import check_centre_gradient\n\n"
                                  "check_centre_gradient(my_weights)", id="ex-w-check", metadata={"tags": ["check"]}),
    ])
    assert printed_answers([notebook]) == {"ex-w": ["distance = positions - centre[:, None] # (B, S): s - p_t"]}


# ---- the student repository ----------------------------------------------------------------------
def test_the_student_repository_has_no_masters(tmp_path, masters, shown):
    out = write_student_repo(tmp_path / "repo")
    handed_out = sorted((out / "chapters").glob("*.ipynb"))
    assert [p.stem for p in handed_out] == sorted(masters)
    for path in handed_out:
        notebook = nbformat.read(path, as_version=4)
        text = _normal(" ".join(cell.source + "\n" + "\n".join(_printed(cell)) for cell in notebook.cells))
        lines = [line for line in _solution_lines(masters[path.stem], shown) if "NotImplementedError" not in line]
        assert [line for line in lines if line in text] == [], path.name
        assert notebook.metadata["exercises"] == {"master": path.stem}
    assert (out / "courseware" / "checks" / "__init__.py").is_file() and (out / "pyproject.toml").is_file()
    # what binder/requirements.txt installs, and every stored model and run the chapters load
    assert (out / "requirements-runtime.txt").is_file()
    shipped = sorted(path.name for path in (ROOT / "experiments" / "weights").glob("*.pt"))
    assert len(shipped) >= 3
    assert sorted(path.name for path in (out / "experiments" / "weights").glob("*.pt")) == shipped
    assert not (out / "backmatter").exists() and not (out / "tests").exists()
    assert not list(out.rglob("*solution*"))
