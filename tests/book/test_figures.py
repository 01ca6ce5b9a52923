"""The diagrams in figures/ and how the chapters use them (issue 18, items 1 and 2).

Every diagram is a hand-written SVG that a contributor can edit as text. It must stand alone
in a browser with no network (no external links, no web fonts, only the generic font
families), be accessible (`role="img"` and a `<title>`) and stay legible when a phone shrinks
it to about 360 px (a viewBox at most 640 wide and no text under 12 units). The chapters show
each one as a numbered MyST figure with a name, alt text and a caption, and refer to it with
`{numref}`; every SVG in figures/ is used. Key equations are labelled (`$$ ... $$ (eq-...)`),
each label once in the book, at least three per chapter, and every `{eq}` reference names a
label that exists.
"""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "figures"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SVGS = sorted(FIGURES.glob("*.svg"))

SVG_NS = "{http://www.w3.org/2000/svg}"
GENERIC_FONTS = {"serif", "sans-serif", "monospace"}
MIN_FONT_SIZE = 12.0
MAX_VIEWBOX_WIDTH = 640.0

FIGURE_BLOCK = re.compile(r"```\{figure\}\s*(?P<path>\S+)\n(?P<body>.*?)\n```", re.S)
EQUATION_LABEL = re.compile(r"\$\$ \((?P<label>[A-Za-z0-9_-]+)\)")
EQ_REFERENCE = re.compile(r"\{eq\}`(?P<label>[^`]+)`")


def svg_problems(text):
    """What keeps an SVG source from being a self-contained, accessible, legible figure."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as error:
        return [f"does not parse: {error}"]
    problems = []
    if root.tag != f"{SVG_NS}svg":
        problems.append(f"root element is {root.tag}, not an SVG <svg>")
    if root.get("role") != "img":
        problems.append('the <svg> element lacks role="img"')
    title = root.find(f"{SVG_NS}title")
    if title is None or not (title.text or "").strip():
        problems.append("no non-empty <title> as a child of <svg>")
    view_box = (root.get("viewBox") or "").split()
    if len(view_box) != 4:
        problems.append("no viewBox")
    elif float(view_box[2]) > MAX_VIEWBOX_WIDTH:
        problems.append(f"viewBox is {view_box[2]} wide, more than {MAX_VIEWBOX_WIDTH:g}")
    for element in root.iter():
        for name, value in element.attrib.items():
            if name.endswith("href") and not value.startswith("#"):
                problems.append(f"external link {name}={value!r}")
    for url in re.findall(r"url\(\s*['\"]?([^)'\"]*)", text):
        if not url.startswith("#"):
            problems.append(f"external url({url})")
    if "@import" in text or "@font-face" in text:
        problems.append("loads a style sheet or a web font")
    for families in re.findall(r"font-family\s*[:=]\s*[\"']?([^;\"'}]+)", text):
        for family in families.split(","):
            if family.strip().strip("'\"") not in GENERIC_FONTS:
                problems.append(f"font family {family.strip()!r} is not generic")
    for size in re.findall(r"font-size\s*[:=]\s*[\"']?([0-9.]+)", text):
        if float(size) < MIN_FONT_SIZE:
            problems.append(f"font size {size} is below {MIN_FONT_SIZE:g}")
    return problems


def figure_problems(markdown, references):
    """What a MyST figure directive in `markdown` lacks; `references` is the text that cites it."""
    problems = []
    for block in FIGURE_BLOCK.finditer(markdown):
        lines = block["body"].split("\n")
        options = {}
        while lines and lines[0].startswith(":"):
            key, _, value = lines.pop(0)[1:].partition(":")
            options[key] = value.strip()
        caption = "\n".join(lines).strip()
        where = block["path"]
        if not options.get("name"):
            problems.append(f"{where}: no :name:")
        if len(options.get("alt", "")) < 20:
            problems.append(f"{where}: no :alt: text that describes the figure")
        if not caption:
            problems.append(f"{where}: no caption")
        name = options.get("name")
        if name and f"{{numref}}`{name}`" not in references:
            problems.append(f"{where}: {name} is never referenced with {{numref}}")
    return problems


def markdown_of(path):
    return [cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "markdown"]


def test_there_are_diagrams():
    assert len(SVGS) >= 15


@pytest.mark.parametrize("svg", SVGS, ids=lambda path: path.name)
def test_svg_is_self_contained_accessible_and_legible(svg):
    assert svg_problems(svg.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "fragment, problem",
    [
        ('<image href="https://example.org/a.png"/>', "external link"),
        ('<text style="font-family: Helvetica">a</text>', "not generic"),
        ('<text font-size="9">a</text>', "below 12"),
        ('<rect fill="url(https://example.org/p)"/>', "external url"),
    ],
)
def test_svg_checker_catches_each_defect(fragment, problem):
    good = (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 200" role="img">'
        "<title>t</title>{}</svg>"
    )
    assert svg_problems(good.format("")) == []
    assert any(problem in message for message in svg_problems(good.format(fragment)))


def test_svg_checker_needs_title_role_and_narrow_viewbox():
    wide = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 900 200"><rect/></svg>'
    problems = " ".join(svg_problems(wide))
    assert "role" in problems and "<title>" in problems and "900 wide" in problems
    broken = svg_problems("<svg")
    assert len(broken) == 1 and "parse" in broken[0]


def test_figure_checker_catches_missing_parts():
    bare = "```{figure} ../figures/x.svg\n:name: fig-x\n```"
    problems = " ".join(figure_problems(bare, references=""))
    assert ":alt:" in problems and "caption" in problems and "numref" in problems
    full = (
        "```{figure} ../figures/x.svg\n:name: fig-x\n:alt: a box with an arrow to another box\n\n"
        "A caption.\n```"
    )
    assert figure_problems(full, references="see {numref}`fig-x`") == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_chapter_figures_are_named_described_captioned_and_cited(chapter):
    cells = markdown_of(chapter)
    text = "\n".join(cells)
    problems = []
    for cell in cells:
        problems += figure_problems(cell, references=text)
    for block in FIGURE_BLOCK.finditer(text):
        if not (chapter.parent / block["path"]).is_file():
            problems.append(f"{block['path']} does not exist")
    assert problems == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_chapter_has_a_diagram_and_labelled_equations(chapter):
    text = "\n".join(markdown_of(chapter))
    assert FIGURE_BLOCK.search(text), "no figure directive"
    assert len(EQUATION_LABEL.findall(text)) >= 3, "fewer than 3 labelled equations"


def test_every_svg_is_shown_in_a_chapter():
    used = set()
    for chapter in CHAPTERS:
        for block in FIGURE_BLOCK.finditer("\n".join(markdown_of(chapter))):
            used.add((chapter.parent / block["path"]).resolve())
    assert [svg.name for svg in SVGS if svg.resolve() not in used] == []


def test_equation_labels_are_unique_and_every_reference_resolves():
    labels, references = [], set()
    for chapter in CHAPTERS:
        text = "\n".join(markdown_of(chapter))
        labels += EQUATION_LABEL.findall(text)
        references |= set(EQ_REFERENCE.findall(text))
    assert sorted({label for label in labels if labels.count(label) > 1}) == []
    assert sorted(references - set(labels)) == []


def test_student_hand_outs_carry_the_diagrams(tmp_path):
    from courseware.exercises import write_student_versions

    written = write_student_versions(ROOT / "chapters", tmp_path)
    missing = []
    for notebook in written:
        for cell in nbformat.read(notebook, as_version=4).cells:
            for block in FIGURE_BLOCK.finditer(cell.source if cell.cell_type == "markdown" else ""):
                if not (notebook.parent / block["path"]).is_file():
                    missing.append(f"{notebook.name}: {block['path']}")
    assert len(written) == len(CHAPTERS) and missing == []
