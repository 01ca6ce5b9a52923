"""The labels of the diagrams in figures/ as Chromium draws them (issue 31, item 5).

Every ``figures/*.svg`` is opened on its own in headless Chromium, and every ``<text>`` is
measured: its ``getBBox()`` (the union of its glyph cells, tspans included: a tspan belongs
to its text), mapped into the SVG's user space (the viewBox) through the text's own
transforms. Then

- no two labels overlap, by more than :data:`TOLERANCE` user units in both directions (half a
  unit: anti-aliasing and rounding of glyph metrics, far below what a reader could see);
- every label lies inside the canvas (the viewBox), within the same tolerance: a subscript
  cut at the bottom edge fails;
- a superscript that follows a subscript stands above it, starting within
  :data:`STACK_TOLERANCE` of the subscript's start (``XW_q`` with ``(m)`` stacked over the ``q``,
  not beside it);
- no label crosses the edge of a filled box, node or bar: it lies inside the shape's box (within
  the tolerance) or clear of it ("× N" running into an "add & LN" box fails; outlines drawn
  with ``fill="none"``, such as the dashed frames of a repeated block, are not boxes);
- no label contains a combining mark (U+0300-U+036F): ``h`` + U+0304 is drawn by no
  single font here, so Chromium takes the pair from a fallback font (a monospace ``h̄``);
  an overline or a precomposed character does the job;
- every glyph of every label comes from the font its generic family (serif, sans-serif,
  monospace) resolves to on this machine: DevTools' ``CSS.getPlatformFontsForNode`` names the
  fonts that drew each text node, and a label drawn partly by another font is a fallback.

The checks are pure functions of the measurements, tested on planted defects below.
Needs Debian's ``chromium``, like ``tests/book/test_book_html.py``, whose browser fixture it uses;
it does not need the built book.
"""
import itertools
import re
import unicodedata
from pathlib import Path

import pytest

from test_book_html import browser  # noqa: F401  (fixture)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SVGS = sorted((ROOT / "figures").glob("*.svg"))
TOLERANCE = 0.5  # user units
STACK_TOLERANCE = 1.0  # user units
COMBINING = re.compile("[\u0300-\u036f]")
GENERIC_FAMILIES = ("serif", "sans-serif", "monospace")

# Each label: its text, its box [x0, y0, x1, y1] in the root's user space, and for each
# subscript directly followed by a superscript (no text between), both boxes; each filled
# rect, circle or ellipse (a box, a node, a bar): its markup and its box.
MEASURE_JS = """() => {
  const svg = document.documentElement, vb = svg.viewBox.baseVal;
  const toRoot = svg.getScreenCTM().inverse();
  const box = element => {
    const b = element.getBBox(), m = toRoot.multiply(element.getScreenCTM());
    const corners = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
    const xs = corners.map(c => c[0]), ys = corners.map(c => c[1]);
    return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
  };
  const shift = element => element.getAttribute('baseline-shift') || getComputedStyle(element).baselineShift;
  const labels = [...svg.querySelectorAll('text')].map(text => {
    const stacks = [];
    for (const tspan of text.querySelectorAll('tspan')) {
      let next = tspan.nextSibling;
      while (next && next.nodeType === Node.TEXT_NODE && !next.textContent.trim()) next = next.nextSibling;
      if (shift(tspan) === 'sub' && next && next.nodeType === Node.ELEMENT_NODE && shift(next) === 'super')
        stacks.push({sub: tspan.textContent, sup: next.textContent, subBox: box(tspan), supBox: box(next)});
    }
    return {text: text.textContent.replace(/\\s+/g, ' ').trim(), box: box(text), stacks};
  });
  const shapes = [...svg.querySelectorAll('rect, circle, ellipse')]
    .filter(shape => !shape.closest('defs, marker, clipPath, mask, pattern, symbol') && getComputedStyle(shape).fill !== 'none')
    .map(shape => ({what: shape.outerHTML.replace(/ xmlns="[^"]*"/, '').replace(/\s+/g, ' ').slice(0, 80), box: box(shape)}))
    .filter(shape => !(shape.box[0] <= vb.x && shape.box[1] <= vb.y && shape.box[2] >= vb.x + vb.width
                       && shape.box[3] >= vb.y + vb.height));  // the background: labels_outside's business
  return {viewBox: [vb.x, vb.y, vb.x + vb.width, vb.y + vb.height], labels, shapes};
}"""


def overlapping_labels(labels: list[dict], tolerance: float = TOLERANCE) -> list[str]:
    """Pairs of labels whose boxes overlap by more than ``tolerance`` in x and in y."""
    found = []
    for a, b in itertools.combinations(labels, 2):
        dx = min(a["box"][2], b["box"][2]) - max(a["box"][0], b["box"][0])
        dy = min(a["box"][3], b["box"][3]) - max(a["box"][1], b["box"][1])
        if dx > tolerance and dy > tolerance:
            found.append(f"{a['text']!r} overlaps {b['text']!r} by {dx:.1f} x {dy:.1f}")
    return found


def labels_outside(labels: list[dict], view_box: list[float], tolerance: float = TOLERANCE) -> list[str]:
    """Labels that reach more than ``tolerance`` past an edge of the viewBox [x0, y0, x1, y1]."""
    found = []
    for label in labels:
        x0, y0, x1, y1 = label["box"]
        past = {"left": view_box[0] - x0, "top": view_box[1] - y0, "right": x1 - view_box[2], "bottom": y1 - view_box[3]}
        found += [f"{label['text']!r} is {by:.1f} past the {edge} edge" for edge, by in past.items() if by > tolerance]
    return found


def labels_across_shapes(labels: list[dict], shapes: list[dict], tolerance: float = TOLERANCE) -> list[str]:
    """Labels that cross the edge of a filled shape: neither inside its box nor clear of it.

    ``shapes`` are in paint order; an edge is hidden where a later shape that holds the whole
    label is painted over it (a card in front of the shadows of the cards behind it).
    """

    def inside(box, shape):
        return (box[0] >= shape[0] - tolerance and box[1] >= shape[1] - tolerance
                and box[2] <= shape[2] + tolerance and box[3] <= shape[3] + tolerance)

    found = []
    for label in labels:
        x0, y0, x1, y1 = label["box"]
        for index, shape in enumerate(shapes):
            s0, t0, s1, t1 = shape["box"]
            dx, dy = min(x1, s1) - max(x0, s0), min(y1, t1) - max(y0, t0)
            hidden = any(inside(label["box"], later["box"]) for later in shapes[index + 1:])
            if dx > tolerance and dy > tolerance and not inside(label["box"], shape["box"]) and not hidden:
                found.append(f"{label['text']!r} crosses the edge of {shape['what']} by {dx:.1f} x {dy:.1f}")
    return found


def unstacked_scripts(labels: list[dict], tolerance: float = STACK_TOLERANCE) -> list[str]:
    """Superscripts that follow a subscript but start right of it (beside it, not above it)."""
    found = []
    for label in labels:
        for stack in label["stacks"]:
            offset = stack["supBox"][0] - stack["subBox"][0]
            if abs(offset) > tolerance:
                found.append(f"{label['text']!r}: superscript {stack['sup']!r} starts {offset:.1f} right of subscript {stack['sub']!r}")
    return found


def combining_marks(labels: list[dict]) -> list[str]:
    return [f"{label['text']!r} has a combining {unicodedata.name(mark)}"
            for label in labels for mark in COMBINING.findall(label["text"])]


def fallback_fonts(runs: list[dict], resolved: dict[str, str]) -> list[str]:
    """Text runs drawn (partly) by a font other than the one their generic family resolves to.

    ``runs``: for each text node, its text, its element's first font family and the fonts that
    drew it (``familyName``, ``glyphCount``); ``resolved``: generic family -> font family name.
    """
    found = []
    for run in runs:
        wanted = resolved.get(run["family"])
        others = [f"{font['familyName']} ({font['glyphCount']} glyphs)" for font in run["fonts"] if font["familyName"] != wanted]
        if wanted is None:
            found.append(f"{run['text']!r}: font family {run['family']!r} is not one of {GENERIC_FAMILIES}")
        elif others:
            found.append(f"{run['text']!r} ({run['family']}, {wanted}) is drawn by {', '.join(others)}")
    return found


def font_runs(context, page) -> tuple[list[dict], dict[str, str]]:
    """Every text node's text, generic family and the platform fonts that drew it; and what each
    generic family resolves to (the font that draws a plain "Hxg" in it). Adds three texts to the page."""
    page.evaluate("""() => { const ns = 'http://www.w3.org/2000/svg';
          for (const family of %r) { const t = document.createElementNS(ns, 'text');
            t.setAttribute('font-family', family); t.setAttribute('class', 'reference-font'); t.setAttribute('y', -50);
            t.textContent = 'Hxg'; document.documentElement.appendChild(t); } }""" % (list(GENERIC_FAMILIES),))
    cdp = context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1, "pierce": False})["root"]
    runs, resolved = [], {}

    def walk(node, parent=None):
        if node.get("nodeType") == 3 and parent is not None and parent["localName"] in ("text", "tspan"):
            if node["nodeValue"].strip():
                style = cdp.send("CSS.getComputedStyleForNode", {"nodeId": parent["nodeId"]})["computedStyle"]
                family = next(p["value"] for p in style if p["name"] == "font-family")
                family = family.split(",")[0].strip().strip("'\"")
                fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]})["fonts"]
                classes = dict(zip(parent.get("attributes", [])[::2], parent.get("attributes", [])[1::2]))
                if classes.get("class") == "reference-font":
                    resolved[family] = max(fonts, key=lambda f: f["glyphCount"])["familyName"]
                else:
                    runs.append({"text": node["nodeValue"].strip(), "family": family, "fonts": fonts})
        for child in node.get("children", []):
            walk(child, node)

    walk(root)
    return runs, resolved


def label_problems(browser, path: Path) -> list[str]:  # noqa: F811  (the fixture's value)
    """Everything the checks find in the SVG file at ``path``, opened on its own in ``browser``."""
    context = browser.new_context(viewport={"width": 960, "height": 960}, device_scale_factor=1)
    try:
        page = context.new_page()
        page.goto(path.resolve().as_uri(), wait_until="load")
        measured = page.evaluate(MEASURE_JS)
        runs, resolved = font_runs(context, page)
    finally:
        context.close()
    labels = measured["labels"]
    return (overlapping_labels(labels) + labels_outside(labels, measured["viewBox"])
            + labels_across_shapes(labels, measured["shapes"]) + unstacked_scripts(labels)
            + combining_marks(labels) + fallback_fonts(runs, resolved))


def test_there_are_diagrams():
    assert len(SVGS) >= 15


@pytest.mark.parametrize("svg", SVGS, ids=lambda path: path.name)
def test_labels_do_not_overlap_stay_on_the_canvas_and_use_their_own_font(browser, svg):  # noqa: F811
    assert label_problems(browser, svg) == []


PLANTED = """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 100" role="img"><title>t</title>
  <style>svg {{ font-family: serif; font-size: 17px; }}</style>{}</svg>"""


@pytest.mark.parametrize(
    "fragment, problem",
    [
        ('<text x="10" y="40">left</text><text x="30" y="44">right</text>', "overlaps"),
        ('<text x="10" y="40">A</text><text x="10" y="40" transform="rotate(90 10 40)">rotated</text>', "overlaps"),
        ('<text x="10" y="98">g<tspan baseline-shift="sub" font-size="13px">k</tspan></text>', "bottom edge"),
        ('<text x="170" y="40">width</text>', "right edge"),
        ('<g transform="translate(0 -30)"><text x="10" y="20">up</text></g>', "top edge"),
        ('<text x="10" y="40">XW<tspan baseline-shift="sub">q</tspan><tspan baseline-shift="super">(m)</tspan></text>',
         "starts"),
        ('<rect x="5" y="20" width="40" height="30" fill="#eee"/><text x="30" y="40">× N</text>', "crosses the edge"),
        ('<rect x="5" y="20" width="40" height="30" fill="#eee"/><rect x="5" y="30" width="40" height="30" fill="#ddd"/>'
         '<text x="8" y="42">x</text>', "crosses the edge"),
        ('<text x="10" y="40">h\u0304</text>', "COMBINING MACRON"),
        ('<text x="10" y="40">h\u0304</text>', "is drawn by"),
        ('<text x="10" y="40">K<tspan baseline-shift="super">\u22a4</tspan></text>', "is drawn by"),
    ],
)
def test_the_checks_see_each_planted_defect(browser, tmp_path, fragment, problem):  # noqa: F811
    good = tmp_path / "good.svg"
    good.write_text(PLANTED.format('<rect x="70" y="10" width="80" height="50" fill="#eee"/><rect x="60" y="20" width="80" height="50" fill="#fff"/>'
                                   '<text x="64" y="40">card</text><text x="10" y="40">left</text><text x="10" y="80">X<tspan baseline-shift="sub" x="30">q</tspan>'
                                   '<tspan baseline-shift="super" x="30">m</tspan></text>'), encoding="utf-8")
    assert label_problems(browser, good) == []
    bad = tmp_path / "bad.svg"
    bad.write_text(PLANTED.format(fragment), encoding="utf-8")
    problems = label_problems(browser, bad)
    assert any(problem in message for message in problems), problems


def test_the_overlap_tolerance_is_half_a_unit():
    a = {"text": "a", "box": [0, 0, 10, 10]}
    assert overlapping_labels([a, {"text": "b", "box": [9.5, 0, 20, 10]}]) == []
    assert overlapping_labels([a, {"text": "b", "box": [9.4, 0, 20, 10]}]) != []
    assert labels_outside([{"text": "a", "box": [-0.5, 0, 10, 10.5]}], [0, 0, 10, 10]) == []
    assert labels_outside([{"text": "a", "box": [0, 0, 10, 10.6]}], [0, 0, 10, 10]) != []
