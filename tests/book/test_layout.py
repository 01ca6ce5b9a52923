"""The built book's layout on a phone and a laptop (issue 31, item 6), opened in headless Chromium.

* Explorers scale with the column like the diagrams, centred: a frame is as wide as its column,
  1.3 times its width attribute (at most 1.3 device pixels per image pixel on a 2x screen, the
  same on every screen, so nothing jumps as the pixel ratio changes) or, on a laptop, the width at
  which its foot stays on the screen below the controls, whichever is least, and keeps its
  proportions; its controls start at the frame's left edge and wrap within its width
  (``_static/book.css``).
* A wrapped code line, or a wrapped line of a printed output, continues 2 columns right of its
  own text (after its spaces, tabs and doctest prompt), never left of it (``_ext/code_lines.py``),
  and the copy button and the rendered text still give the code exactly as written.
* On a phone every control of an explorer, every button of the page's bar, every copy button and
  every solution's toggle takes touches over at least 44 x 44 CSS px.
* The phone's drawer shows the book's title once; every page names a favicon that is served,
  and no request of a page fails.

Needs ``_build/html`` (or ``BOOK_HTML``) and Debian's ``chromium``, like
``tests/book/test_book_html.py``, whose page helper it uses (the fixtures: tests/book/conftest.py).
"""
import json
import re
import sys
from pathlib import Path

import pytest
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonConsoleLexer, PythonLexer

from book_visits import BUILD, Visit
from test_book_html import content_pages, explorer_pages

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from code_lines import HELD_INDENT, _columns, indent_lines  # noqa: E402

pytestmark = pytest.mark.browser

CHAPTER = "chapters/09_attention.html"  # explorers, long code cells and listings printed as outputs
PHONE, LAPTOP = 390, 1366


# ---- explorers scale with the column, centred ---------------------------------------------------

# FRAMES_JS (book_visits.py): each frame's size and place in its figure, with its controls' edges.


def frame_problems(frames) -> list[str]:
    """What is wrong with each frame's size and place (``book_visits.FRAMES_JS``): on every screen a frame
    may grow to 1.3 times its width attribute (half its image's width), never past its image's."""
    problems = []
    for f in frames:
        ratio = f["naturalWidth"] / f["naturalHeight"]
        by_height = f["maxHeight"] * ratio if f["maxHeight"] == f["maxHeight"] else float("inf")  # NaN: no limit
        grows_to = min(f["naturalWidth"], 1.3 * f["attribute"])
        wanted = min(f["column"], grows_to, by_height)
        if abs(f["width"] - wanted) > 1:
            problems.append(f"{f['alt']}: {f['width']:.0f} px wide, wanted {wanted:.0f} (column {f['column']:.0f})")
        if abs(f["width"] / f["height"] - ratio) > 0.01:
            problems.append(f"{f['alt']}: shown {f['width']:.0f} x {f['height']:.0f}, drawn {ratio:.3f}:1")
        if abs(f["left"] - f["right"]) > 1:
            problems.append(f"{f['alt']}: not centred ({f['left']:.0f} px left, {f['right']:.0f} px right)")
        if abs(f["controlsLeft"]) > 1 or f["controlsRight"] > 1:
            problems.append(f"{f['alt']}: controls {f['controlsLeft']:+.0f} px left of the frame's left edge, "
                            f"{f['controlsRight']:+.0f} px past its right")
    return problems


def frames_at(frame_visits, page, width, scale=1):
    """``FRAMES_JS`` of ``page`` at ``width`` px and ``scale`` device pixels per CSS pixel, every frame drawn
    (the page's frame visit, shared with the other tests of its explorers: book_visits.FrameVisits)."""
    return frame_visits.of(page, width, scale)["frames"]


@pytest.mark.parametrize("width, scale", [(PHONE, 2), (1024, 1), (LAPTOP, 1), (LAPTOP, 2)])
def test_explorers_fill_their_column_centred_and_keep_their_proportions(frame_visits, width, scale):
    """Old build: every frame 432 px wide (its natural CSS width) at 1366 px, left-aligned; then
    (stop 41) grown on a 2x screen too, to 0.57-0.93 image pixels per device pixel, with its
    controls flush left under a narrower frame; then (stop 42) 757 px at 1x but 432 at 2x."""
    problems, widths = [], []
    for page in explorer_pages():
        frames = frames_at(frame_visits, page, width, scale)
        assert frames, f"{page} lost its explorers"
        problems += [f"{page}: {p}" for p in frame_problems(frames)]
        widths += [(f["width"], f["naturalWidth"] / f["width"], f["column"]) for f in frames]
    density = [r / scale for _, r, _ in widths]  # image pixels per device pixel
    print(f"at {width} px, {scale}x: frames {min(w for w, _, _ in widths):.0f}-{max(w for w, _, _ in widths):.0f} px "
          f"wide in columns of {min(c for _, _, c in widths):.0f}-{max(c for _, _, c in widths):.0f} px, "
          f"{min(r for _, r, _ in widths):.2f}-{max(r for _, r, _ in widths):.2f} image px per CSS px, "
          f"{min(density):.2f}-{max(density):.2f} per device px")
    assert problems == [], f"at {width} px, {scale}x: " + "; ".join(problems)
    if width == LAPTOP:  # the column is wider than a frame's natural width (2 image px per CSS px): frames
        # grow to 1.3 times it (1.54 image px per CSS px); the tallest, held by the screen's height, less (519 px: 1.66)
        assert max(r for _, r, _ in widths) < 1.7, "the frames did not grow with the column"
    # at most 1.3 device pixels per image pixel (1 / 1.3 = 0.77): not soft beside the page's text
    assert min(density) >= 1 / 1.3 - 0.01, "a frame is blown up: an image pixel over more than 1.3 device pixels"


def test_a_frame_keeps_its_width_as_the_pixel_ratio_crosses_one_and_a_half(frame_visits):
    """At 1366 px chapter 9's frames are as wide at 1.49 and at 1.5 device pixels per CSS pixel
    (old build: 757 px at 1.49x, 432 at 1.5x)."""
    below, above = ([round(f["width"]) for f in frames_at(frame_visits, CHAPTER, LAPTOP, scale)]
                    for scale in (1.49, 1.5))
    print(f"at 1.49x {below}, at 1.5x {above}")
    assert below and all(abs(a - b) <= 1 for a, b in zip(below, above, strict=True)), (below, above)


def test_the_frame_check_sees_a_small_a_stretched_an_off_centre_and_a_blown_up_frame():
    frame = {"alt": "x", "width": 700, "height": 500, "left": 28, "right": 29, "column": 757, "attribute": 432,
             "naturalWidth": 864, "naturalHeight": 720, "maxHeight": 756, "controlsLeft": 0, "controlsRight": 0,
             "scale": 1}
    assert frame_problems([{**frame, "width": 561.6, "height": 468, "left": 97.7, "right": 97.7}]) == []
    assert "wanted 562" in frame_problems([{**frame, "width": 757, "height": 630.8, "left": 0, "right": 0}])[0]
    assert frame_problems([{**frame, "column": 358, "width": 358, "height": 298.3, "left": 0, "right": 0}]) == []
    assert len(frame_problems([{**frame, "width": 432, "height": 360, "left": 0, "right": 325}])) == 2
    assert "drawn" in frame_problems([{**frame, "width": 561.6, "height": 400, "left": 97.7, "right": 97.7}])[0]
    tall = {**frame, "naturalHeight": 1188, "width": 550, "height": 756.25, "left": 103.5, "right": 103.5}
    assert frame_problems([tall]) == []  # a tall frame stops where its foot leaves the screen
    assert frame_problems([{**tall, "maxHeight": float("nan")}]) != []
    sharp = {**frame, "scale": 2, "width": 561.6, "height": 468, "left": 97.7, "right": 97.7}
    assert frame_problems([sharp]) == []  # on a 2x screen too: the same cap, no jump at 1.5x
    assert "wanted 562" in frame_problems([{**sharp, "width": 432, "height": 360, "left": 162.5, "right": 162.5}])[0]
    assert "wanted 562" in frame_problems([{**sharp, "width": 757, "height": 630.8, "left": 0, "right": 0}])[0]
    assert "controls -98 px left" in frame_problems([{**sharp, "controlsLeft": -97.7}])[0]
    assert "+20 px past" in frame_problems([{**sharp, "controlsRight": 20}])[0]


def test_every_explorer_and_its_controls_fit_a_laptop_screen(frame_visits):
    """At 1366 x 900 a reader sees an explorer's controls and its whole frame at once below the
    page's bar (chapter 11's frames are the tallest, 4.8 x 6.6 in: grown to the column's width
    they would be 1040 px tall; a frame narrower than the column wraps its controls into up to
    four rows). Old build: chapter 2's optimiser explorer, its seven controls in three rows, 8 px
    too tall; then, with the controls within the frame's width, chapter 12's NTM step by step, 24.
    Measured (book_visits.ROOM_JS) in the page's frame visit at 1366 px, every frame drawn."""
    heights = []
    for page in explorer_pages():
        room, found = frame_visits.of(page, LAPTOP)["room"]
        assert found, f"{page} lost its explorers"
        heights += [(round(h), page) for h in found]
    print(f"room below the bar {room:.0f} px; controls and frame {sorted(h for h, _ in heights)} px")
    assert [(h, page) for h, page in heights if h > room] == []


# ---- wrapped code continues under its own indentation ------------------------------------------

# For every line of every code block and printed output that wraps: its lead (the spaces, tabs and
# doctest prompt before its own text, as _ext/code_lines.py reads it), the x of its text's first
# character and of each continuation's start, and the width of a column (1ch).
WRAPPED_JS = """() => {
  const found = [];
  for (const pre of document.querySelectorAll('main div.highlight pre')) {
    if (!pre.getClientRects().length) continue;
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT), chars = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode())
      for (let i = 0; i < n.data.length; i++) chars.push([n, i]);
    const range = document.createRange(), rectOf = k => {
      range.setStart(chars[k][0], chars[k][1]); range.setEnd(chars[k][0], chars[k][1] + 1);
      return range.getBoundingClientRect(); };
    const text = pre.textContent, ch = rectOf(0).width || 1;
    let start = 0;
    for (const line of text.split('\\n')) {
      const lead = line.match(/^[ \\t]*(?:(?:>>>|\\.\\.\\.)(?=[ \\t])[ \\t]+)?/)[0];
      const end = start + line.length, first = start + lead.length;
      if (line.trim()) {
        const top = rectOf(first).top, x0 = rectOf(first).left, starts = [];
        let lastTop = top;
        for (let k = first + 1; k < end; k++) {
          const r = rectOf(k);
          if (r.width && r.top > lastTop + 2) { starts.push(r.left); lastTop = r.top; }
        }
        if (starts.length) found.push({line: line.slice(0, 60), lead, x0, starts, ch: rectOf(first).width});
      }
      start = end + 1;
    }
  }
  return found;
}"""


def continuation_problems(wrapped) -> list[str]:
    """Continuations not 2 columns right of their line's text, for leads the build holds
    (``code_lines.HELD_INDENT`` columns; deeper ones may wrap alone, and the sideways check covers them)."""
    return [f"lead {w['lead']!r}, {w['line'].strip()[:40]!r}: continues at {(s - w['x0']) / w['ch']:+.1f} columns"
            for w in wrapped for s in w["starts"]
            if _columns(w["lead"]) <= HELD_INDENT and abs(s - w["x0"] - 2 * w["ch"]) > 1]


def test_a_wrapped_line_continues_two_columns_right_of_its_own_text(server, browser):
    """At 390 px the long lines of chapter 9 wrap; each continuation starts 2 columns right of its
    line's first character. Old build: an indented line continued at 2 columns from the block's
    edge (-2 columns for a 4-space line)."""
    visit = Visit(browser, f"{server}/{CHAPTER}", width=PHONE)
    try:
        wrapped = visit.page.evaluate(WRAPPED_JS)
    finally:
        visit.close()
    indented = [w for w in wrapped if w["lead"]]
    print(f"{len(wrapped)} wrapped lines at {PHONE} px, {len(indented)} of them indented")
    assert len(indented) >= 10, "chapter 9 should wrap indented lines on a phone"
    assert continuation_problems(wrapped) == []


def test_the_continuation_check_sees_a_dedented_continuation(server, browser):
    visit = Visit(browser, f"{server}/intro.html", width=PHONE)
    try:
        visit.page.evaluate("""() => document.querySelector('main .bd-article').insertAdjacentHTML('beforeend',
            '<div class="highlight"><pre>    ' + 'word '.repeat(30) + '</pre></div>')""")
        wrapped = visit.page.evaluate(WRAPPED_JS)
    finally:
        visit.close()
    assert len(wrapped) == 1 and wrapped[0]["lead"] == "    "
    assert continuation_problems(wrapped) != []  # a plain <pre> continues 2 columns from its edge


# Code the book does not hold yet, highlighted as Sphinx would and passed through _ext/code_lines.py:
# doctest prompts (a console session and a docstring's example) and tab indentation, each line long
# enough to wrap on a phone.
LONG = "first_argument, second_argument, third_argument, fourth_argument"
PLANTED = [
    (f">>> result = function_with_a_long_name({LONG})\n"
     f"...     return {{'key': [{LONG}]}}\n>>> short = 1\n", PythonConsoleLexer),
    (f'def f():\n    """An example.\n\n    >>> f({LONG})\n    ... # {LONG}\n    """\n', PythonLexer),
    (f"def f():\n\tif x:\n\t\treturn g({LONG})\n\t  h({LONG})\n", PythonLexer),
]


def test_a_wrapped_doctest_or_tab_indented_line_continues_under_its_text(server, browser):
    """Blocks with doctest prompts and tabs, as the build would write them, placed in a page at
    390 px: every wrapped line continues 2 columns right of the code after its prompt or tabs, and
    the block's text, rendered and in the DOM, is the source exactly. Before (stop 41's
    code_lines.py) they continued 2 columns from the block's edge."""
    blocks = "".join('<div class="highlight"><pre>' + indent_lines(highlight(source, lexer(), HtmlFormatter(nowrap=True)))
                     + "</pre></div>" for source, lexer in PLANTED)
    visit = Visit(browser, f"{server}/intro.html", width=PHONE)
    try:
        texts = visit.page.evaluate("""blocks => { const main = document.querySelector('main .bd-article');
            main.querySelectorAll('div.highlight').forEach(b => b.remove());
            main.insertAdjacentHTML('beforeend', blocks);
            return [...main.querySelectorAll('div.highlight pre')].map(p => [p.textContent, p.innerText]); }""", blocks)
        wrapped = visit.page.evaluate(WRAPPED_JS)
    finally:
        visit.close()
    assert texts == [[source, source] for source, _ in PLANTED]
    leads = {w["lead"] for w in wrapped}
    print(f"{len(wrapped)} wrapped lines, leads {sorted(leads)}")
    assert {">>> ", "...     ", "    >>> ", "    ... ", "\t\t", "\t  "} <= leads
    assert continuation_problems(wrapped) == []


def code_sources(page: str) -> set[str]:
    """The code cells' sources of the page's notebook, as the build copied it."""
    source = BUILD / "_sources" / re.sub(r"\.html$", ".ipynb", page)
    cells = json.loads(source.read_text(encoding="utf-8"))["cells"]
    return {"".join(cell["source"]).rstrip("\n") for cell in cells if cell["cell_type"] == "code"}


# Click every copy button; what it copied, and whether its block is a code cell's and its text.
# The clipboard is set to a sentinel first and read once it changed (the copy is asynchronous).
COPY_JS = """async () => {
  const copied = [], sentinel = '\\u0000not copied';
  for (const button of document.querySelectorAll('main button.copybtn')) {
    const pre = document.querySelector(button.dataset.clipboardTarget);
    await navigator.clipboard.writeText(sentinel);
    let text = sentinel;
    for (let clicks = 0; text === sentinel && clicks < 3; clicks++) {  // a busy machine may drop one
      button.click();
      for (let tries = 0; text === sentinel && tries < 100; tries++) {
        await new Promise(r => setTimeout(r, 10));
        text = await navigator.clipboard.readText();
      }
    }
    copied.push({text, input: !!pre.closest('.cell_input'), block: pre.textContent});
  }
  return copied;
}"""


def copy_problems(copied, sources) -> list[str]:
    """Copies that are not the code as written: a code cell's must be its source in the notebook,
    a printed output's its block's text (the build's run prints it; measured numbers change)."""
    return [c["text"][:60] for c in copied
            if (c["text"] not in sources if c["input"] else c["text"] != c["block"].removesuffix("\n"))]


def test_the_copy_button_and_the_page_give_the_code_as_written(server, browser):
    """Every copy button of chapter 9 copies a code cell's source exactly as the notebook holds it
    (a printed output: its text), and each block's rendered text (what a reader selects) is its text."""
    visit = Visit(browser, f"{server}/{CHAPTER}", width=PHONE)
    try:
        visit.context.grant_permissions(["clipboard-read", "clipboard-write"])
        copied = visit.page.evaluate(COPY_JS)
        # (a block in a collapsed solution is hidden: its innerText is empty)
        rendered = visit.page.evaluate(
            "() => [...document.querySelectorAll('main div.highlight pre')].filter(p =>"
            " p.checkVisibility({visibilityProperty: true}) && p.innerText !== p.textContent).length")
        spans = visit.page.locator("main span.cl").count()
    finally:
        visit.close()
    inputs = sum(c["input"] for c in copied)
    print(f"{len(copied)} copy buttons ({inputs} code cells), {spans} indented lines in spans")
    assert inputs >= 30 and len(copied) > inputs
    assert copy_problems(copied, code_sources(CHAPTER)) == []
    assert rendered == 0


def test_the_copy_check_sees_a_changed_character(server, browser):
    visit = Visit(browser, f"{server}/{CHAPTER}", width=PHONE)
    try:
        visit.context.grant_permissions(["clipboard-read", "clipboard-write"])
        visit.page.evaluate("() => document.querySelector('main div.cell_input div.highlight pre')"
                            ".insertAdjacentText('afterbegin', ' ')")
        copied = visit.page.evaluate(COPY_JS)
    finally:
        visit.close()
    planted = next(c for c in copied if c["input"])  # the first code cell's block, one space longer
    assert planted["text"].startswith(" ")
    assert copy_problems(copied, code_sources(CHAPTER))[0] == planted["text"][:60]
    # A line drawn as a block of its own would add a newline to the rendered text.
    visit = Visit(browser, f"{server}/intro.html", width=PHONE)
    try:
        differs = visit.page.evaluate("""() => { document.querySelector('main').insertAdjacentHTML('beforeend',
            '<div class="highlight"><pre>a\\n<span style="display: block">  b</span>\\nc</pre></div>');
            const pre = [...document.querySelectorAll('main div.highlight pre')].pop();
            return pre.innerText !== pre.textContent; }""")
    finally:
        visit.close()
    assert differs
    block = next(c for c in copied if not c["input"])
    assert copy_problems([{**block, "text": block["text"] + " "}], set()) != []


# ---- touch targets, the drawer's title, the favicon ----------------------------------------------

# An explorer's controls, the buttons of the bar above the page (menu, launch, download, ...), the
# code blocks' copy buttons and the solutions' toggles: for each one shown, the rectangle over which
# a touch reaches it (from its centre, in steps of 1 px, as far as elementFromPoint finds it or a
# child of it), with the points of a 5 x 5 grid over that rectangle, its corners left out, that miss it. A copy button draws
# a smaller square than it takes touches over (its ::before), so its box alone would not tell.
TARGETS_JS = """() => {
  const hits = (el, x, y) => { const h = document.elementFromPoint(x, y); return !!h && el.contains(h); };
  return [...document.querySelectorAll('div.book-explorer .book-explorer-control, .bd-header-article .btn,'
                                       + ' main button.copybtn, main button.toggle-button')]
    .filter(el => el.getClientRects().length && el.checkVisibility({visibilityProperty: true})).map(el => {
      el.scrollIntoView({block: 'center', inline: 'center'});
      const r = el.getBoundingClientRect(), cx = r.x + r.width / 2, cy = r.y + r.height / 2;
      const reach = (dx, dy) => { let k = 0; while (k < 60 && hits(el, cx + (k + 1) * dx, cy + (k + 1) * dy)) k++; return k; };
      const left = cx - reach(-1, 0), right = cx + reach(1, 0), top = cy - reach(0, -1), bottom = cy + reach(0, 1);
      let misses = 0;  // (not the 4 corners: Chromium hit-tests a button's rounded corners as drawn)
      for (let i = 0; i <= 4; i++) for (let j = 0; j <= 4; j++)
        misses += (i % 4 || j % 4) && !hits(el, left + (right - left) * i / 4, top + (bottom - top) * j / 4);
      return [el.tagName + '.' + el.className.split(' ')[0], Math.round(right - left + 1), Math.round(bottom - top + 1), misses];
    });
}"""


def test_every_control_and_button_is_a_touch_target_on_a_phone(server, browser):
    """At 390 px a touch anywhere in a 44 x 44 CSS px rectangle reaches every slider and drop-down of
    every explorer, every button of the page's bar, every copy button and every solution's toggle
    (old build: sliders 16 px tall, the bar's buttons 29-34 px; then, stop 41, copy buttons 27 px
    and toggles 24 x 26 px). Measured on the pages without MathJax: some 20,000 hit tests a page cost
    half as much without its maths, of which the check saw at most the first screen typeset (it
    scrolls to each target inside one script, and MathJax typesets what comes into view only after it)."""
    small, kinds = [], {}
    for page in explorer_pages():
        visit = Visit(browser, f"{server}/{page}", width=PHONE, maths=False)
        try:
            targets = visit.page.evaluate(TARGETS_JS)
        finally:
            visit.close()
        assert any(tag.endswith(".book-explorer-control") for tag, *_ in targets), f"{page} lost its explorers"
        for tag, w, h, misses in targets:
            kinds.setdefault(tag, []).append((w, h))
            if w < 44 or h < 44 or misses:
                small.append(f"{page}: {tag} {w}x{h}" + (f", {misses} of 21 points miss it" if misses else ""))
    print({tag: f"{len(sizes)}, from {min(sizes)}" for tag, sizes in kinds.items()})
    assert {"BUTTON.copybtn", "BUTTON.toggle-button", "INPUT.book-explorer-control"} <= set(kinds)
    assert small == [], f"{len(small)} small targets: " + "; ".join(small[:12])


# For each copy button shown: the rectangle over which a touch reaches it (as in TARGETS_JS), its
# drawn square, and every character of its block and every link of the page that lies under that
# rectangle outside the drawn square, where a touch takes the button, not the text (the middle of
# the part of the character's or link's box inside the rectangle, hit-tested).
UNDER_JS = """() => {
  const hits = (el, x, y) => { const h = document.elementFromPoint(x, y); return !!h && el.contains(h); };
  const range = document.createRange(), links = [...document.querySelectorAll('main a')];
  return [...document.querySelectorAll('main button.copybtn')].filter(el => el.getClientRects().length && el.checkVisibility({visibilityProperty: true})).map(btn => {
    btn.scrollIntoView({block: 'center'});
    const b = btn.getBoundingClientRect(), cx = b.x + b.width / 2, cy = b.y + b.height / 2;
    const reach = (dx, dy) => { let k = 0; while (k < 80 && hits(btn, cx + (k + 1) * dx, cy + (k + 1) * dy)) k++; return k; };
    const ring = {left: cx - reach(-1, 0), right: cx + reach(1, 0), top: cy - reach(0, -1), bottom: cy + reach(0, 1)};
    const under = [], check = (r, what) => {
      const l = Math.max(r.left, ring.left), rt = Math.min(r.right, ring.right);
      const t = Math.max(r.top, ring.top), bt = Math.min(r.bottom, ring.bottom);
      if (l >= rt || t >= bt) return;
      const x = (l + rt) / 2, y = (t + bt) / 2;
      if (x >= b.left && x <= b.right && y >= b.top && y <= b.bottom) return;  // the drawn square
      if (hits(btn, x, y)) under.push(what); };
    const pre = btn.closest('div.highlight').querySelector('pre');
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode())
      for (let i = 0; i < n.data.length; i++) if (n.data[i].trim()) {
        range.setStart(n, i); range.setEnd(n, i + 1);
        for (const r of range.getClientRects()) check(r, n.data[i]); }
    for (const a of links) for (const r of a.getClientRects()) check(r, 'link ' + a.textContent.trim().slice(0, 20));
    return {first: pre.textContent.split('\\n')[0].slice(0, 40), ring: [ring.right - ring.left + 1, ring.bottom - ring.top + 1], under};
  });
}"""


@pytest.mark.parametrize("page", [CHAPTER, "chapters/02_optimisers.html"])
def test_no_code_and_no_link_lies_under_a_copy_buttons_ring(server, browser, page):
    """At 390 px a copy button's ring (its 45 px touch target beyond the drawn 27 px square) covers
    no character of its block and no link: a tap on the code's text reaches the text (old build:
    the ring took the right ends of lines 1-2, e.g. chapter 9's "0],", 66 buttons over 6061 px²)."""
    visit = Visit(browser, f"{server}/{page}", width=PHONE)
    try:
        buttons = visit.page.evaluate(UNDER_JS)
    finally:
        visit.close()
    assert buttons, f"{page} lost its copy buttons"
    assert min(min(b["ring"]) for b in buttons) >= 44
    covered = [f"{b['first']!r}: {''.join(c for c in b['under'] if len(c) == 1)!r}"
               + "".join(f", {c}" for c in b["under"] if len(c) > 1) for b in buttons if b["under"]]
    print(f"{len(buttons)} copy buttons, rings {sorted({tuple(map(round, b['ring'])) for b in buttons})}")
    assert covered == [], f"{len(covered)} of {len(buttons)} rings cover the page: " + "; ".join(covered[:8])


def test_a_slider_moves_when_touched_at_the_edge_of_its_target(server, browser):
    """A tap 20 px above a slider's track, at its right end (inside its 44 px box), moves it to its
    last value (old build: the tap missed the 16 px slider)."""
    visit = Visit(browser, f"{server}/{CHAPTER}", width=PHONE)
    try:
        slider = visit.page.locator("div.book-explorer input[type=range]").first
        slider.scroll_into_view_if_needed()
        box = slider.bounding_box()
        last = slider.get_attribute("max")
        assert slider.input_value() != last
        visit.page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2 - 20)
        assert slider.input_value() == last
    finally:
        visit.close()


def test_the_phone_drawer_shows_the_book_title_once(server, browser):
    title = "Attention, Sequence Models and Memory"
    visit = Visit(browser, f"{server}/{CHAPTER}", width=PHONE)
    try:
        visit.page.locator(".primary-toggle:visible").click()
        drawer = visit.page.locator("#pst-primary-sidebar-modal")
        drawer.wait_for(state="visible", timeout=2000)
        shown = drawer.evaluate("""(d, title) => [...d.querySelectorAll('*')].filter(e =>
            e.children.length === 0 && e.textContent.trim() === title && e.getClientRects().length
            && getComputedStyle(e).visibility !== 'hidden').length""", title)
    finally:
        visit.close()
    assert shown == 1


@pytest.mark.parametrize("page", content_pages() if BUILD.is_dir() else ["intro.html"])
def test_every_page_names_a_served_favicon_and_nothing_fails(reader_visits, page):
    """(``index.html`` only redirects to the introduction.) The page's shared visit (book_visits.ReaderVisits)
    records every response from its first request to its end (its maths typeset, its solutions opened, resized
    to each width), and fetches the favicon it names."""
    record = reader_visits.of(page)
    icon = record["favicon"]
    assert icon, f"{page} names no favicon"
    status, content_type = record["favicon_served"]
    assert status == 200 and content_type.startswith("image/"), icon
    assert record["failed"] == [], f"{page}: requests failed"
