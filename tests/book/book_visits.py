"""Visits to the built book that several browser test modules share (``tests/book/conftest.py``).

Opening a page of the book and typesetting its maths is most of what a browser test costs, and the
modules used to do it again and again for the same page: one visit to see that it is offline and
error-free, one that its maths is typeset, one for raw TeX, one for captions, one for its favicon,
one for the style rules the build purged, and two more (their own loop over the pages) to see that
nothing scrolls sideways and that maths and tables fit. :class:`ReaderVisits` opens each content page
once, in a fresh context at 1366 px, records what every one of those tests reads, in the order that
gives each of them the page in the state it asked for, and keeps the record for the session:

1. from the start: every request, console error, page error and failed response (until the end of
   the visit, so later steps are covered too);
2. as soon as ``load`` has fired: the purged selectors that match an element
   (``test_site_weight.py``), the figures without a caption and the images without alt text, the
   favicon (and whether it is served as an image);
3. once MathJax has typeset the page (:meth:`Visit.wait_for_maths`): whether every ``.math`` is
   typeset and free of MathJax's errors, and the text a reader sees outside code and maths (raw TeX);
4. then at 390, 1024 and 1366 px, in turn, once the resized layout is still: ``LAYOUT`` (what
   scrolls sideways), the solutions closed as the page loaded; every solution opened and every
   equation typeset (``PREPARE``, which typesets them the first time); MathJax's error boxes;
   ``MEASURE`` (maths and tables that fit); the solutions closed again.

:class:`FrameVisits` does the same for the explorers' frames: one visit per (page, pixel ratio),
without MathJax, every frame fetched, resized to each width the layout and legibility tests read; and
:class:`ZhVisits` for the Chinese edition's pages: the purged selectors at 1366 px, then its typography
at 390 px.

Each kind of visit keeps its records for the session (:class:`KeptVisits`): the first test to ask for a page pays
for its visit, and its failure is reported by every test that reads it (the page is not visited again).

The session has one Chromium (``tests/book/conftest.py``: ``browser``) and one server: if Chromium crashes, every
later browser test of the session that opens a page errors (``TargetClosedError``: its browser is gone), not only
the test that was running; records kept before the crash still serve. The first failure is the one to read.
"""
from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
# BOOK_HTML tests another build of the book (e.g. one made with --path-output elsewhere).
BUILD = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
sys.path.insert(0, str(ROOT / "_ext"))
import page_assets  # noqa: E402  (the book's Sphinx extensions, plain modules)
from edition_ui import PAIR, SHORT_CODE  # noqa: E402
WIDTHS = [390, 1024, 1366]  # a phone, a small laptop (drawer navigation below 992 px), a desktop
NARROW = 992  # the themes' breakpoint: below it the sidebars are drawers


def viewport(width: int) -> dict:
    return {"width": width, "height": 844 if width < NARROW else 900}


class Visit:
    """A page opened in a fresh context that records requests, console errors and failed responses.

    ``maths=False`` (for a test of what the maths cannot move or break: an explorer's frame and its controls, the
    touch targets) refuses MathJax's requests: the page loads in about half the time, its maths left as TeX. The
    console's report of that refused request is not recorded as an error (any other error is)."""

    def __init__(self, browser, url, width=1366, color_scheme="light", maths=True):
        self.context = browser.new_context(viewport=viewport(width), color_scheme=color_scheme)
        self.page = self.context.new_page()
        self.maths = maths
        self.requests, self.errors, self.failed = [], [], []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        # Anything bound elsewhere is recorded above, then refused at once (no waiting on a dead network).
        self.page.route(
            "**/*",
            lambda route: route.continue_()
            if urlparse(route.request.url).hostname == "127.0.0.1" else route.abort(),
        )
        if not maths:  # MathJax's requests refused (not recorded as foreign)
            self.page.route("**/_static/mathjax/**", lambda route: route.abort())
        self.page.goto(url, wait_until="load")

    def _console(self, msg):
        if msg.type != "error":
            return
        if (not self.maths and msg.text.startswith("Failed to load resource")
                and "/_static/mathjax/" in (msg.location or {}).get("url", "")):
            return  # the MathJax request that maths=False refused
        self.errors.append(msg.text)

    def wait_for_maths(self):
        """Wait until MathJax (on pages that load it) has typeset the page."""
        self.page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
        self.page.evaluate("() => window.MathJax && MathJax.startup.promise")

    def wait_for_frames(self):
        """Fetch every explorer's default frame now and wait until each is drawn. The frames are lazy images
        (_ext/explorers.py): out of view, a browser leaves them unfetched, and a test of every frame's size would
        wait forever; turning them eager fetches them at once."""
        self.page.evaluate("() => document.querySelectorAll('img.book-explorer-frame').forEach(img => img.loading = 'eager')")
        self.page.wait_for_function("() => [...document.querySelectorAll('img.book-explorer-frame')]"
                                    ".every(img => img.complete && img.naturalWidth > 0)")

    def foreign_requests(self):
        return [u for u in self.requests if urlparse(u).scheme in ("http", "https", "ws", "wss")
                and urlparse(u).hostname != "127.0.0.1"]

    def resize(self, width: int):
        """Resize the window to ``width`` (:func:`viewport`) and wait until the layout is still (``STILL``): after
        a resize the theme's layout animates for about half a second, and what is measured sooner is a width
        between the two."""
        self.page.set_viewport_size(viewport(width))
        self.page.evaluate(STILL)

    def close(self):
        self.context.close()


class Scaled:
    """``browser`` whose new contexts have ``scale`` device pixels per CSS pixel (for :class:`Visit`)."""

    def __init__(self, browser, scale):
        self.browser, self.scale = browser, scale

    def new_context(self, **options):
        return self.browser.new_context(device_scale_factor=self.scale, **options)


# ---- what the shared page visit reads ---------------------------------------------------------------------------

# What a reader would have to scroll sideways: the page itself, and every code cell, printed
# output or code block of the text (with the longest line of each), plus the search boxes shown.
LAYOUT = """() => {
  const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const blocks = [...document.querySelectorAll('main div.highlight pre, main div.output pre')];
  const describe = p => [p.closest('.cell_output, .output') ? 'printed output' : 'code',
                          Math.max(...p.textContent.split('\\n').map(l => l.length))];
  const wide = blocks.filter(p => shown(p) && p.scrollWidth > p.clientWidth + 1).map(describe);
  // Lines that would not fit their block unwrapped (book.css wraps them where they do not).
  const wrapped = blocks.filter(shown).filter(p => {
    p.style.whiteSpace = 'pre';
    const over = p.scrollWidth > p.clientWidth + 1;
    p.style.whiteSpace = '';
    return over;
  }).map(describe);
  return {
    overflow: document.documentElement.scrollWidth - innerWidth,
    searches: [...document.querySelectorAll('.search-button__button, form.bd-search')].filter(shown).length,
    wide, wrapped,
  };
}"""

# Text nodes a reader sees, outside code, typeset maths and scripts.
VISIBLE_TEXT = """() => {
  const skip = 'pre, code, kbd, samp, script, style, textarea, mjx-container, .highlight, .MathJax';
  const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip) || !parent.getClientRects().length) continue;
    if (node.textContent.trim()) texts.push(node.textContent);
  }
  return texts;
}"""

# Figures without a caption, images whose alt text says nothing (a file name, a data URL or nothing).
UNCAPTIONED = ("() => [...document.querySelectorAll('main figure')]"
               ".filter(f => !(f.querySelector('figcaption') || {textContent: ''}).textContent.trim())"
               ".map(f => (f.id || f.className || 'figure'))")
NO_ALT = ("() => [...document.querySelectorAll('main img')].filter(i => { const a = (i.alt || '').trim();"
          " return !a || /\\.(png|jpe?g|svg|gif|webp)$/i.test(a) || a.startsWith('data:'); })"
          ".map(i => (i.getAttribute('src') || '').slice(0, 60))")

# Whether every piece of maths was typeset: counts of .math, of MathJax's containers, of .math without one,
# and of MathJax's error boxes.
TYPESET = """() => ({
  maths: document.querySelectorAll('.math').length,
  containers: document.querySelectorAll('mjx-container').length,
  untypeset: [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')).length,
  errors: document.querySelectorAll('mjx-merror').length,
})"""

# The purged selectors (``test_site_weight.py``) that match an element of the page.
MATCHING = """selectors => selectors.filter(s => { try { return document.querySelector(s) !== null; }
                                                     catch (e) { return false; } })"""

# Open what is collapsed (sphinx-togglebutton's solutions, <details>), then typeset every equation:
# MathJax's lazy typesetting (ui/lazy) draws only what has been in view.
PREPARE = """async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  if (window.MathJax) {
    await MathJax.startup.promise;
    const doc = MathJax.startup.document;
    if (doc.lazyTypesetAll) await doc.lazyTypesetAll();
  }
  return document.querySelectorAll('mjx-lazy').length;
}"""

# What PREPARE opens is marked first (closed <details>, content sphinx-togglebutton hides) and shut again after it
# was measured: at the next width LAYOUT sees the solutions as a reader does, closed.
MARK_CLOSED = """() => {
  document.querySelectorAll('details:not([open])').forEach(d => d.setAttribute('data-book-closed', ''));
  document.querySelectorAll('.toggle-hidden').forEach(e => e.setAttribute('data-book-hidden', ''));
}"""
CLOSE = """() => {
  document.querySelectorAll('details[data-book-closed]').forEach(d => { d.open = false; });
  document.querySelectorAll('[data-book-hidden]').forEach(e => e.classList.add('toggle-hidden'));
}"""

# Resolves once the article's width has stopped changing (after a resize the theme's layout animates for about
# half a second), two frames later: what :meth:`Visit.resize` waits for, so MEASURE measures a still layout.
STILL = """async () => {
  const frames = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  await frames();
  const article = document.querySelector('main .bd-article') || document.body;
  for (let last = -1, i = 0; i < 40; i++) {
    const width = article.getBoundingClientRect().width;
    if (width === last) break;
    last = width;
    await new Promise(done => setTimeout(done, 100));
  }
  await frames();
}"""

# MathJax draws TeX it cannot read as a red error box, which may well fit the column.
ERRORS = """() => [...document.querySelectorAll('mjx-merror')].map(e => {
  const display = e.closest('div.math, mjx-container');
  return (display && (display.id || display.textContent.slice(0, 40))) || e.textContent;
})"""

# Every display equation and table on the page: what it is, how wide, and what a reader can see of it
# (``test_fit.py`` says what is checked). Measure after :meth:`Visit.resize` (a still layout).
MEASURE = """async () => {
  const frames = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  await document.fonts.ready;  // MathJax's fonts load as maths is typeset; measure what they draw
  await frames();
  const article = document.querySelector('main .bd-article') || document.body;
  const style = e => getComputedStyle(e);
  const px = v => parseFloat(v) || 0;
  const box = e => e.getBoundingClientRect();
  const articleBox = box(article), articleStyle = style(article);
  const column = {
    left: Math.max(0, articleBox.left + px(articleStyle.borderLeftWidth) + px(articleStyle.paddingLeft)),
    right: Math.min(innerWidth, articleBox.right - px(articleStyle.borderRightWidth) - px(articleStyle.paddingRight)),
  };
  const clips = e => style(e).overflowX !== 'visible';
  const scrolls = e => ['auto', 'scroll'].includes(style(e).overflowX);
  // The padding box of a clipping element: what of its content it lets through.
  const window_ = e => { const r = box(e); const left = r.left + e.clientLeft; return {left, right: left + e.clientWidth}; };
  const cut = (a, b) => ({left: Math.max(a.left, b.left), right: Math.min(a.right, b.right)});
  // What the ancestors of e (from `from` up to the article) let a reader see, and the clippers met.
  const visibleFrom = (from) => {
    let seen = {...column};
    const clippers = [];
    for (let a = from; a && a !== article; a = a.parentElement) {
      if (clips(a)) { seen = cut(seen, window_(a)); clippers.push(a); }
    }
    return {seen, clippers};
  };
  // The extent of the content itself: a table's box; an equation's glyphs and boxes (the
  // container may be as wide as the column while the maths inside is wider).
  const extent = (item) => {
    if (item.tagName === 'TABLE') { const r = box(item); return {left: r.left, right: r.right}; }
    let left = Infinity, right = -Infinity;
    item.querySelectorAll(':scope > :not(mjx-assistive-mml), :scope > :not(mjx-assistive-mml) *').forEach(e => {
      const r = box(e);
      if (r.width > 0) { left = Math.min(left, r.left); right = Math.max(right, r.right); }
    });
    return {left, right};
  };
  const cue = e => {
    const s = style(e);
    const mask = (s.maskImage || '') + ' ' + (s.webkitMaskImage || '');
    if (mask.includes('gradient')) return true;
    if (s.backgroundAttachment.includes('local') && s.backgroundImage.includes('gradient')) return true;
    return s.boxShadow.includes('inset');
  };
  const label = item => {
    const display = item.closest('div.math');
    const number = display && display.querySelector('.eqno');
    if (number) return 'eq. ' + number.textContent.replace('#', '').trim();
    const section = item.closest('section[id]');
    const head = item.tagName === 'TABLE'
      ? 'table "' + [...item.querySelectorAll('th')].map(t => t.textContent.trim()).join(' | ').slice(0, 60) + '"'
      : 'equation ' + ((item.querySelector('mjx-assistive-mml') || item).textContent.trim().slice(0, 40));
    return head + ' in #' + (section ? section.id : 'page');
  };
  const items = [...document.querySelectorAll('main mjx-container[display="true"], main table')];
  const found = [];
  for (const item of items) {
    if (!item.getClientRects().length) continue;  // not shown (a hidden cell)
    const kind = item.tagName === 'TABLE' ? 'table' : 'equation';
    const content = extent(item);
    const width = Math.round(content.right - content.left);
    const all = visibleFrom(item);
    const result = {kind, label: label(item), width, column: Math.round(column.right - column.left),
                    wider: width > column.right - column.left + 1, problems: []};
    found.push(result);
    if (kind === 'table' && item.classList.contains('fit-cards')) {
      // A table the Markdown lets reflow: shown as cards exactly when it would not fit as a table.
      const shown = item.classList.contains('fit-as-cards');
      item.classList.remove('fit-as-cards');
      const natural = item.offsetWidth, room = item.parentElement.clientWidth;
      item.classList.toggle('fit-as-cards', shown);
      // Every cell but a card's title (its row's first) carries its column's header.
      const cells = [...item.querySelectorAll(':scope > tbody > tr > td:not(:first-child)')];
      result.cards = {shown, natural, room, unlabelled: cells.filter(td => !td.dataset.label).length};
    }
    const tall = e => style(e).overflowY !== 'visible' && e.scrollHeight > e.clientHeight + 1;
    if (kind === 'equation' && tall(item)) result.problems.push('cut off at the top or bottom');
    if (content.left >= all.seen.left - 1 && content.right <= all.seen.right + 1) continue;  // fits
    // It does not fit: the innermost ancestor that cuts it off must be a box that scrolls.
    const scroller = all.clippers.find(c => { const w = window_(c); return content.left < w.left - 1 || content.right > w.right + 1; });
    if (!scroller) { result.problems.push('wider than the column, in no scroll box'); continue; }
    if (!scrolls(scroller)) { result.problems.push('clipped (overflow ' + style(scroller).overflowX + ')'); continue; }
    const outer = visibleFrom(scroller.parentElement).seen, own = box(scroller);
    if (own.left < outer.left - 1 || own.right > outer.right + 1) result.problems.push('its scroll box is wider than the column');
    const origin = box(scroller).left + scroller.clientLeft - scroller.scrollLeft;
    if (content.left - origin < -1 || content.right - origin > scroller.scrollWidth + 1) result.problems.push('not all of it can be scrolled to');
    if (scroller !== item && tall(scroller)) result.problems.push('cut off at the top or bottom');
    const start = scroller.scrollLeft;
    const cueAtStart = cue(scroller);
    scroller.scrollLeft = scroller.scrollWidth;
    scroller.dispatchEvent(new Event('scroll'));
    await frames();
    const cueAtEnd = cue(scroller);
    scroller.scrollLeft = start;
    scroller.dispatchEvent(new Event('scroll'));
    await frames();
    if (!cueAtStart || !cueAtEnd) result.problems.push('scrolls with no visible cue' + (cueAtStart ? ' once scrolled' : ''));
  }
  return found;
}"""


# ---- the style rules the build's purge dropped (_ext/page_assets.py; test_site_weight.py checks them) ----------

def original_style_sheets() -> dict:
    """The style sheets as their packages ship them, by their path in the build (those that exist there)."""
    import myst_nb
    import sphinx_book_theme
    import sphinx_copybutton
    import sphinx_togglebutton

    def package(module, *parts):
        return Path(module.__file__).parent.joinpath(*parts)

    sources = {
        "styles/pydata-sphinx-theme.css": page_assets.theme_fonts().parents[2] / "styles" / "pydata-sphinx-theme.css",
        "styles/sphinx-book-theme.css": package(sphinx_book_theme, "theme", "sphinx_book_theme", "static", "styles",
                                                "sphinx-book-theme.css"),
        "togglebutton.css": package(sphinx_togglebutton, "_static", "togglebutton.css"),
        "copybutton.css": package(sphinx_copybutton, "_static", "copybutton.css"),
        "book.css": ROOT / "_static" / "book.css",
    }
    mystnb = package(myst_nb, "static", "mystnb.css")
    sources[f"mystnb.{hashlib.sha256(mystnb.read_bytes()).hexdigest()}.css"] = mystnb
    return {name: path.read_text(encoding="utf-8") for name, path in sources.items() if path.is_file()}


def purged_style_sheets() -> dict:
    """Of :func:`original_style_sheets`, those the build purges (``page_assets.PURGED_SHEETS``), as shipped."""
    return {name: css for name, css in original_style_sheets().items()
            if any(fnmatch.fnmatch(name, pattern) for pattern in page_assets.PURGED_SHEETS)}


class Words(frozenset):
    """``words`` for :func:`page_assets.can_match`, which tests ``name in words`` and iterates over the words for
    those ending in ``-`` on every call: iterating over just those gives it the same answers, without going over
    thousands of words for each of thousands of rules (20 s of the purge test)."""

    def __new__(cls, words):
        self = super().__new__(cls, words)
        self._prefixes = [word for word in words if word.endswith("-")]
        return self

    def __iter__(self):
        return iter(self._prefixes)


def build_words() -> set:
    return page_assets.build_words(BUILD)  # the words the build purged with


def dropped_selectors(words: set) -> list[str]:
    """Selectors of the rules purge_css drops from the third-party sheets (as their packages ship them) given
    ``words``, made plain for querySelector: pseudo-classes and pseudo-elements taken off."""
    import tinycss2

    selectors = set()
    words = Words(words)
    for css in purged_style_sheets().values():
        def walk(rules):
            for rule in rules:
                if rule.type == "qualified-rule":
                    prelude = tinycss2.serialize(rule.prelude)
                    if not page_assets.can_match(prelude, words):
                        selectors.update(s.strip() for s in page_assets._split_selectors(prelude))
                elif rule.type == "at-rule" and rule.content is not None and rule.lower_at_keyword in (
                        "media", "supports", "container", "layer"):
                    walk(tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True))

        walk(tinycss2.parse_stylesheet(css, skip_comments=True, skip_whitespace=True))
    plain = set()
    for selector in selectors:
        text = selector
        while True:
            lighter = re.sub(r"::?[A-Za-z-]+\([^()]*\)", "", text)
            if lighter == text:
                break
            text = lighter
        text = re.sub(r"::?[A-Za-z-]+", "", text).strip()
        if text and not text.endswith((">", "+", "~")):
            plain.add(text)
    return sorted(plain)


@functools.cache
def purge_selectors() -> tuple[tuple, tuple]:
    """The selectors of the rules the build's purge dropped (:func:`dropped_selectors`), and those it would drop
    with the class ``bd-header`` missing from its words (the planted omission)."""
    words = build_words()
    return tuple(dropped_selectors(words)), tuple(dropped_selectors(words - {"bd-header"}))


def purge_probe() -> list[str]:
    """Both lists of :func:`purge_selectors` in one, sorted: a visit matches them at once."""
    dropped, planted = purge_selectors()
    return sorted(set(dropped) | set(planted))


class KeptVisits:
    """The records of a kind of shared visit, kept for the session, a failed visit's error included: the first test
    to ask for a record pays for its visit, and a visit that raised raises again (not visited again) for every
    test that reads it."""

    def __init__(self, browser, server):
        self.browser, self.server, self.records = browser, server, {}

    def _kept(self, key, keys, visit):
        """The record of ``key``. If it is not kept, ``visit()`` makes the records of ``keys`` (one visit may measure
        several, a dict by key), all kept; or its error is kept for each of ``keys``."""
        if key not in self.records:
            try:
                self.records.update(visit())
            except Exception as error:  # noqa: BLE001  (kept, and raised again for each test that reads it)
                self.records.update(dict.fromkeys(keys, error))
        record = self.records[key]
        if isinstance(record, Exception):
            raise RuntimeError(f"the shared visit to {key} failed: {record}") from record
        return record

    def of(self, page: str) -> dict:
        """The record of ``page`` (a dict), made by one visit of its own (``_visit``)."""
        return self._kept(page, [page], lambda: {page: self._visit(page)})


class ReaderVisits(KeptVisits):
    """One visit per content page, shared by the session's tests (the module's docstring lists what it records):
    :meth:`of` gives a page's record (a dict)."""

    def _visit(self, page: str) -> dict:
        probe = purge_probe()
        visit = Visit(self.browser, f"{self.server}/{page}")
        try:
            record = {"purge_matches": visit.page.evaluate(MATCHING, probe)}
            record["uncaptioned"] = visit.page.evaluate(UNCAPTIONED)
            record["no_alt"] = visit.page.evaluate(NO_ALT)
            icon = visit.page.evaluate("() => { const l = document.querySelector('link[rel~=icon]'); return l && l.href; }")
            record["favicon"] = icon
            if icon:
                response = visit.context.request.get(icon)
                record["favicon_served"] = [response.status, response.headers.get("content-type", "")]
            visit.wait_for_maths()
            record["typeset"] = visit.page.evaluate(TYPESET)
            record["texts"] = visit.page.evaluate(VISIBLE_TEXT)
            record["layout"], record["fit"], record["untypeset"], record["maths_errors"] = {}, {}, {}, {}
            visit.page.evaluate(MARK_CLOSED)
            for width in WIDTHS:
                visit.resize(width)
                record["layout"][width] = visit.page.evaluate(LAYOUT)  # as the page loaded, solutions closed
                record["untypeset"][width] = visit.page.evaluate(PREPARE)  # the first time: opens, typesets all
                record["maths_errors"][width] = visit.page.evaluate(ERRORS)
                record["fit"][width] = visit.page.evaluate(MEASURE)
                visit.page.evaluate(CLOSE)
            record["errors"], record["failed"] = list(visit.errors), list(visit.failed)
            record["foreign"] = visit.foreign_requests()
        finally:
            visit.close()
        return record


# ---- the explorers' frames --------------------------------------------------------------------------------------

# Each frame's size and place in its figure, with its controls' edges (``test_layout.py``).
FRAMES_JS = """() => [...document.querySelectorAll('img.book-explorer-frame')].map(img => {
  const box = img.getBoundingClientRect(), column = img.closest('figure').getBoundingClientRect();
  const controls = img.closest('div.book-explorer').querySelector('.book-explorer-controls').getBoundingClientRect();
  const limit = parseFloat(getComputedStyle(img).maxHeight);  // NaN for "none"
  return {alt: img.alt, width: box.width, height: box.height, left: box.left - column.left,
          right: column.right - box.right, column: column.width, attribute: +img.getAttribute('width'),
          naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight, maxHeight: limit,
          controlsLeft: controls.left - box.left, controlsRight: controls.right - box.right,
          scale: devicePixelRatio};
})"""

# For each player: its figure's anchor, number and caption, its frame's alt text and sizes (``test_explorer_figures.py``).
PLAYERS_JS = """() => [...document.querySelectorAll('div.book-explorer')].map(player => {
  const figure = player.closest('figure'), img = player.querySelector('img.book-explorer-frame');
  const part = selector => ((figure && figure.querySelector(selector)) || {textContent: ''}).textContent.trim();
  return {id: figure ? figure.id : '', number: part('figcaption .caption-number'),
          caption: part('figcaption .caption-text'), alt: (img.alt || '').trim(),
          clientWidth: img.clientWidth, naturalWidth: img.naturalWidth,
          dpi: parseFloat(img.dataset.dpi), fontPt: parseFloat(img.dataset.fontPt)};
})"""

# The room below the page's bar, and for each explorer the height from its controls' top to its frame's foot
# (``test_layout.py``: on a laptop a reader sees both at once).
ROOM_JS = """() => {
    const bar = document.querySelector('.bd-header-article').getBoundingClientRect().height;
    return [innerHeight - bar, [...document.querySelectorAll('div.book-explorer')].map(p =>
        p.querySelector('img.book-explorer-frame').getBoundingClientRect().bottom
        - p.querySelector('.book-explorer-controls').getBoundingClientRect().top)]; }"""


# The widths the tests ask for at each pixel ratio (test_layout.py, test_explorer_figures.py), in the order one
# visit measures them: opened at the first, then resized to each other (the explorers' layout is all CSS).
FRAME_WIDTHS = {1: (1366, 1024, 390), 2: (390, 1366)}


class FrameVisits(KeptVisits):
    """One visit per (page, pixel ratio): the page without MathJax (its maths cannot move a frame or its
    controls), every explorer's frame fetched and drawn, then at each width of :data:`FRAME_WIDTHS` (opened at the
    first, resized to the others, measured once the layout is still) ``FRAMES_JS``, ``PLAYERS_JS`` and
    ``ROOM_JS``, kept for the session (:meth:`of`; a failed visit is kept for each of its widths)."""

    def of(self, page: str, width: int, scale=1) -> dict:
        widths = FRAME_WIDTHS.get(scale, ())
        widths = widths if width in widths else (width,)
        return self._kept((page, width, scale), [(page, each, scale) for each in widths],
                          lambda: self._visit(page, widths, scale))

    def _visit(self, page: str, widths: tuple, scale) -> dict:
        records = {}
        visit = Visit(Scaled(self.browser, scale), f"{self.server}/{page}", width=widths[0], maths=False)
        try:
            visit.wait_for_frames()
            for each in widths:
                visit.resize(each)  # at the first width, the size it was opened at: waits for a still layout
                records[page, each, scale] = {
                    "frames": visit.page.evaluate(FRAMES_JS), "players": visit.page.evaluate(PLAYERS_JS),
                    "room": visit.page.evaluate(ROOM_JS)}
        finally:
            visit.close()
        return records


# ---- the Chinese edition's pages ------------------------------------------------------------------------------

# Per page at 390 px (``test_chinese_typography.py``): how far it scrolls sideways; Chinese text drawn slanted;
# each <em> holding Chinese with its computed style; inline code of at most SHORT_CODE characters in a paragraph
# or list item that spans two lines; pairs of full-width marks left uncompressed in the prose.
PAGE_JS = r"""([short, pair]) => {
  const cjk = /[\u3400-\u9fff]/, pairs = new RegExp(pair, 'g');
  const skip = 'pre, code, kbd, samp, script, style, textarea, mjx-container, .highlight, .MathJax';
  const slanted = [], uncompressed = [];
  const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || !parent.getClientRects().length) continue;
    if (cjk.test(node.textContent) && getComputedStyle(parent).fontStyle !== 'normal')
      slanted.push(node.textContent.trim().slice(0, 40));
    if (!parent.closest(skip))
      for (const match of node.textContent.matchAll(pairs))
        if (!/^zh-pair/.test(parent.className)) uncompressed.push(node.textContent.slice(Math.max(0, match.index - 4), match.index + 5));
  }
  const ems = [...document.querySelectorAll('main em')].filter(em => cjk.test(em.textContent)).map(em => {
    const style = getComputedStyle(em);
    return {text: em.textContent.slice(0, 30), fontStyle: style.fontStyle,
            emphasis: style.textEmphasisStyle || style.webkitTextEmphasisStyle};
  });
  const wrapped = [...document.querySelectorAll('main p code.literal, main li code.literal')]
    .filter(code => code.textContent.length <= short && code.getClientRects().length > 1)
    .map(code => code.textContent);
  return {overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          slanted, ems, wrapped, uncompressed};
}"""


class ZhVisits(KeptVisits):
    """One visit per Chinese content page: at 1366 px, as soon as it has loaded, the purged selectors that match an
    element (``test_site_weight.py``); then resized to 390 px (:meth:`Visit.resize`: once the layout is still) and,
    once MathJax's startup has typeset the page, ``PAGE_JS`` (``test_chinese_typography.py``), kept for the session
    (:meth:`of`)."""

    def _visit(self, page: str) -> dict:
        visit = Visit(self.browser, f"{self.server}/{page}")
        try:
            record = {"purge_matches": visit.page.evaluate(MATCHING, purge_probe())}
            visit.resize(390)  # measured once the resized layout is still, as the reader and frame visits are
            visit.wait_for_maths()
            # PAIR's syntax (classes, lookaheads) is JavaScript's too.
            record["layout"] = visit.page.evaluate(PAGE_JS, [SHORT_CODE, PAIR.pattern])
        finally:
            visit.close()
        return record
