"""The labels of the diagrams in figures/ as Chromium draws them (issue 31, item 5).

Every ``figures/*.svg`` is opened on its own in headless Chromium, and every ``<text>`` is
measured: its ``getBBox()`` (the union of its glyph cells, tspans included: a tspan belongs
to its text), mapped into the SVG's user space (the viewBox) through the text's own
transforms. Then

- no two labels overlap, by more than :data:`TOLERANCE` user units in both directions (half a
  unit: anti-aliasing and rounding of glyph metrics, far below what a reader could see);
- every label lies inside the canvas (the viewBox), within the same tolerance: a subscript
  cut at the bottom edge fails;
- a superscript next to a subscript (after it or before it) stands above it, starting within
  :data:`STACK_TOLERANCE` of the subscript's start (``XW_q`` with ``(m)`` stacked over the ``q``,
  not beside it); a script is a tspan with ``baseline-shift`` sub or super, or one that the
  ``dy`` attributes before it in its text (their first numbers, summed) put below or above the
  text's start;
- no label crosses the edge of a filled box, node, bar or filled path or polygon: it lies
  inside the shape's box (within the tolerance) or clear of it ("× N" running into an "add & LN"
  box fails; outlines drawn with ``fill="none"``, such as the dashed frames of a repeated block,
  are not boxes);
- no stroked ``line``, ``path``, ``polyline`` or ``polygon`` and no arrowhead (its start and
  end markers) reaches into a label's box by more than the tolerance: a line is sampled every
  unit along its length and widened by half its stroke width; a marker by the outline of its
  shapes, every half unit, placed, scaled and turned as Chromium draws it (``orient`` auto,
  auto-start-reverse or an angle; ``markerUnits``; the viewBox scaled to markerWidth/Height
  with the default ``meet``). Parts of a line under a filled shape painted after it (an edge
  ending under a node's circle) are hidden and not counted. Exempt: paths of class ``glyph``
  (a tilde, hat or ∇ drawn as part of a label) and of class ``halo`` (background-coloured,
  to make a gap).
- no label contains a combining mark (U+0300-U+036F): ``h`` + U+0304 is drawn by no
  single font here, so Chromium takes the pair from a fallback font (a monospace ``h̄``);
  an overline or a precomposed character does the job;
- every glyph of every label comes from the font its generic family (serif, sans-serif,
  monospace) resolves to on this machine: DevTools' ``CSS.getPlatformFontsForNode`` names the
  fonts that drew each text node, and a label drawn partly by another font is a fallback.

Not checked: ``marker-mid``; a marker's interior (only its outline is sampled, so an arrowhead
that swallows a whole label smaller than itself would pass); the ink of glyphs (a label's box
is its glyph cells, ascent to descent, so a line through the empty descent of "x" counts as a
touch: stricter than the eye); ``dy`` lists beyond their first number; strokes of rects,
circles and ellipses (a label across them is caught by the filled-shape check only if filled).

The checks are pure functions of the measurements, tested on planted defects below.
Needs Debian's ``chromium``, like ``tests/book/test_book_html.py`` (the browser fixture: tests/book/conftest.py);
it does not need the built book.
"""
import itertools
import re
import unicodedata
from pathlib import Path

import pytest


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
  // a script's level: baseline-shift sub/super, or else the running sum of the dy attributes
  // (their first number) before it within its text, relative to the text's own start
  const levels = new Map();
  const level = element => {
    const s = shift(element);
    if (s === 'sub' || s === 'super') return s;
    const offset = levels.get(element) || 0;
    return offset > 0.5 ? 'sub' : offset < -0.5 ? 'super' : null;
  };
  const labels = [...svg.querySelectorAll('text')].map(text => {
    let running = 0;
    for (const element of text.querySelectorAll('tspan')) {
      const dy = parseFloat(element.getAttribute('dy'));
      if (!isNaN(dy)) running += dy;
      levels.set(element, running);
    }
    const stacks = [];
    for (const tspan of text.querySelectorAll('tspan')) {
      let next = tspan.nextSibling;
      while (next && next.nodeType === Node.TEXT_NODE && !next.textContent.trim()) next = next.nextSibling;
      if (!next || next.nodeType !== Node.ELEMENT_NODE) continue;
      const pair = [level(tspan), level(next)];
      if (pair[0] === 'sub' && pair[1] === 'super')
        stacks.push({sub: tspan.textContent, sup: next.textContent, subBox: box(tspan), supBox: box(next), supFirst: false});
      else if (pair[0] === 'super' && pair[1] === 'sub')
        stacks.push({sub: next.textContent, sup: tspan.textContent, subBox: box(next), supBox: box(tspan), supFirst: true});
    }
    return {text: text.textContent.replace(/\\s+/g, ' ').trim(), box: box(text), stacks};
  });
  const shapes = [...svg.querySelectorAll('rect, circle, ellipse, path, polygon')]
    .filter(shape => !shape.closest('defs, marker, clipPath, mask, pattern, symbol') && getComputedStyle(shape).fill !== 'none'
                     && shape.getAttribute('fill') !== 'none')
    .map(shape => ({what: shape.outerHTML.replace(/ xmlns="[^"]*"/, '').replace(/\s+/g, ' ').slice(0, 80), box: box(shape)}))
    .filter(shape => !(shape.box[0] <= vb.x && shape.box[1] <= vb.y && shape.box[2] >= vb.x + vb.width
                       && shape.box[3] >= vb.y + vb.height));  // the background: labels_outside's business
  // every stroked line, path, polyline or polygon (not a part of a glyph, class "glyph"; not a
  // halo, class "halo", which paints the background over lines to make a gap): points every
  // unit along it, in the root's user space, with half its stroke width; and each of its
  // start and end markers (arrowheads): the outline of the marker's shapes, every half unit
  const point = (m, x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
  const outline = (element, step) => {
    const length = element.getTotalLength(), points = [];
    for (let at = 0; at < length; at += step) { const p = element.getPointAtLength(at); points.push([p.x, p.y]); }
    const p = element.getPointAtLength(length); points.push([p.x, p.y]);
    return points;
  };
  const strokes = [];
  for (const line of svg.querySelectorAll('line, path, polyline, polygon')) {
    if (line.closest('defs, marker, clipPath, mask, pattern, symbol') || line.matches('.glyph, .halo')) continue;
    const style = getComputedStyle(line);
    if (style.stroke === 'none' || style.visibility === 'hidden') continue;
    const m = toRoot.multiply(line.getScreenCTM()), width = parseFloat(style.strokeWidth) || 1;
    const scale = Math.hypot(m.a, m.b);
    const what = line.outerHTML.replace(/ xmlns="[^"]*"/, '').replace(/\s+/g, ' ').slice(0, 70);
    // a point is hidden under a filled shape painted after the line (a node's circle over the ends of its edges)
    const covers = [...svg.querySelectorAll('rect, circle, ellipse, path, polygon')].filter(shape =>
      !shape.closest('defs, marker, clipPath, mask, pattern, symbol') && getComputedStyle(shape).fill !== 'none'
      && shape.getAttribute('fill') !== 'none' && (line.compareDocumentPosition(shape) & Node.DOCUMENT_POSITION_FOLLOWING));
    const visible = ([x, y]) => !covers.some(shape => {
      const inv = toRoot.multiply(shape.getScreenCTM()).inverse();
      return shape.isPointInFill(new DOMPoint(inv.a * x + inv.c * y + inv.e, inv.b * x + inv.d * y + inv.f));
    });
    strokes.push({what, half: width * scale / 2, points: outline(line, 1).map(([x, y]) => point(m, x, y)).filter(visible)});
    const length = line.getTotalLength();
    for (const [end, property] of [['start', 'markerStart'], ['end', 'markerEnd']]) {
      const url = style[property];
      if (!url || url === 'none') continue;
      const marker = svg.querySelector(url.replace(/^url\\(["']?(?:[^#]*)?(#[^"')]+)["']?\\)$/, '$1'));
      if (!marker) continue;
      const at = end === 'end' ? length : 0, tip = line.getPointAtLength(at);
      const near = line.getPointAtLength(end === 'end' ? Math.max(0, length - 0.5) : Math.min(length, 0.5));
      let angle = end === 'end' ? Math.atan2(tip.y - near.y, tip.x - near.x) : Math.atan2(near.y - tip.y, near.x - tip.x);
      const orient = marker.getAttribute('orient') || '0';
      if (orient === 'auto-start-reverse' && end === 'start') angle += Math.PI;
      else if (orient !== 'auto' && orient !== 'auto-start-reverse') angle = parseFloat(orient) * Math.PI / 180;
      const view = marker.viewBox.baseVal;
      const mw = marker.markerWidth.baseVal.value, mh = marker.markerHeight.baseVal.value;
      const units = marker.getAttribute('markerUnits') === 'userSpaceOnUse' ? 1 : width;
      const k = units * (view && view.width ? Math.min(mw / view.width, mh / view.height) : 1);
      const refX = marker.refX.baseVal.value, refY = marker.refY.baseVal.value;
      const cos = Math.cos(angle), sin = Math.sin(angle);
      for (const part of marker.querySelectorAll('path, polygon, polyline, line, rect, circle, ellipse')) {
        const points = outline(part, 0.5).map(([x, y]) => {
          const u = (x - refX) * k, v = (y - refY) * k;
          return point(m, tip.x + u * cos - v * sin, tip.y + u * sin + v * cos);
        });
        strokes.push({what: `the ${end} marker (${marker.id}) of ${what}`, half: 0, points: points.filter(visible)});
      }
    }
  }
  return {viewBox: [vb.x, vb.y, vb.x + vb.width, vb.y + vb.height], labels, shapes, strokes};
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
    """Superscripts next to a subscript (after it or before it) that do not start where it starts
    (beside it, not above it)."""
    found = []
    for label in labels:
        for stack in label["stacks"]:
            offset = stack["supBox"][0] - stack["subBox"][0]
            if abs(offset) > tolerance:
                where = "before" if stack.get("supFirst") else "after"
                found.append(f"{label['text']!r}: superscript {stack['sup']!r} ({where} subscript {stack['sub']!r})"
                             f" starts {offset:.1f} right of it")
    return found


def strokes_through_labels(labels: list[dict], strokes: list[dict], tolerance: float = TOLERANCE) -> list[str]:
    """Lines, paths and arrowheads that reach into a label's box by more than ``tolerance``.

    ``strokes``: each a description, points along it (for an arrowhead, along its outline) and
    half its stroke width; a point reaches into a box by the stroke's half width past it.
    """
    found = []
    for label in labels:
        x0, y0, x1, y1 = label["box"]
        for stroke in strokes:
            reach = stroke["half"] - tolerance
            depth = max((min(x - x0, x1 - x, y - y0, y1 - y) + stroke["half"] for x, y in stroke["points"]
                         if x0 - reach < x < x1 + reach and y0 - reach < y < y1 + reach), default=None)
            if depth is not None:
                found.append(f"{label['text']!r} is touched by {stroke['what']} ({depth:.1f} deep)")
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


def label_problems(browser, path: Path) -> list[str]:
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
            + strokes_through_labels(labels, measured["strokes"])
            + combining_marks(labels) + fallback_fonts(runs, resolved))


def test_there_are_diagrams():
    assert len(SVGS) >= 15


@pytest.mark.parametrize("svg", SVGS, ids=lambda path: path.name)
def test_labels_do_not_overlap_stay_on_the_canvas_and_use_their_own_font(browser, svg):
    assert label_problems(browser, svg) == []


PLANTED = """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 100" role="img"><title>t</title>
  <style>svg {{ font-family: serif; font-size: 17px; }}</style>{}</svg>"""


# A drawing with every kind of element the checks see, placed where none of them has anything to report.
GOOD = PLANTED.format('<rect x="70" y="10" width="80" height="50" fill="#eee"/><rect x="60" y="20" width="80" height="50" fill="#fff"/>'
                      '<text x="64" y="40">card</text><text x="10" y="40">left</text><text x="10" y="80">X<tspan baseline-shift="sub" x="30">q</tspan>'
                      '<tspan baseline-shift="super" x="30">m</tspan></text>'
                      '<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
                      '<path d="M0,0L10,5L0,10z"/></marker></defs><path d="M54,75V55" stroke="#000" stroke-width="1.6" marker-end="url(#a)"/>'
                      '<path class="glyph" d="M10,27h8" stroke="#000"/><path class="halo" d="M0,38H50" stroke="#fff"/>'
                      '<path d="M160,90H195" stroke="#000"/><circle cx="180" cy="90" r="12" fill="#fff"/><text x="176" y="94">n</text>'
                      '<text x="100" y="92">W<tspan dy="3" font-size="12px" x="116">q</tspan><tspan dy="-9" font-size="12px" x="116">m</tspan></text>')


@pytest.fixture(scope="module")
def good_drawing_problems(browser, tmp_path_factory) -> list[str]:
    """What the checks find in :data:`GOOD` (drawn once for every planted case)."""
    good = tmp_path_factory.mktemp("good") / "good.svg"
    good.write_text(GOOD, encoding="utf-8")
    return label_problems(browser, good)


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
        # lines, arrowheads and filled paths (the referee's blind cases)
        ('<path d="M0,36H200" stroke="#000" stroke-width="2"/><text x="10" y="40">label</text>', "is touched by <path"),
        ('<defs><marker id="a" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
         '<path d="M0,0L10,5L0,10z"/></marker></defs><text x="10" y="40">x<tspan baseline-shift="sub">1</tspan></text>'
         '<path d="M16,66V50" stroke="#000" stroke-width="1.6" marker-end="url(#a)"/>', "end marker (a)"),
        ('<line x1="0" y1="36" x2="200" y2="36" stroke="#000"/><text x="10" y="40">label</text>', "is touched by <line"),
        ('<polyline points="0,60 40,36 80,60" stroke="#000" fill="none"/><text x="10" y="40">label</text>', "is touched by <polyline"),
        ('<path d="M5,20H45V50H5Z" fill="#eee" stroke="#000"/><text x="30" y="40">× N</text>', "crosses the edge of <path"),
        # a superscript before its subscript, or placed by dy, standing beside it
        ('<text x="10" y="40">w<tspan baseline-shift="super">c</tspan><tspan baseline-shift="sub">t</tspan></text>',
         "(before subscript 't') starts"),
        ('<text x="10" y="40">W<tspan dy="4" font-size="12px">q</tspan><tspan dy="-10" font-size="12px">(m)</tspan></text>',
         "(after subscript 'q') starts"),
    ],
)
def test_the_checks_see_each_planted_defect(browser, tmp_path, good_drawing_problems, fragment, problem):
    """The good drawing (:data:`GOOD`, the same for every case: checked once, :func:`good_drawing_problems`) passes
    and the one with ``fragment`` planted fails with ``problem``."""
    assert good_drawing_problems == []
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
