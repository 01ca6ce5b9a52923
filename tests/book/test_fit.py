"""Display maths and tables fit the column, or scroll in their own box with a visible cue (issue 31).

For every content page of the built book, at a phone's, a small laptop's and a desktop's width
(390, 1024, 1366 px), every display equation (MathJax's ``mjx-container[display="true"]``, all
typeset first: the book typesets lazily, as an equation scrolls into view) and every table either
lies wholly inside what a reader sees of the column (the article's content box, cut by every
ancestor that clips), or sits in a box that scrolls sideways and

* is itself inside the column,
* lets the reader reach the content's whole width (the content lies within the box's
  ``scrollWidth``, and nothing between the two clips it),
* clips nothing vertically,
* shows a visible cue on the side that hides more, before and after scrolling to the end:
  a fading edge (a gradient ``mask-image``), scroll shadows (a gradient background with
  ``background-attachment: local``) or an inset shadow.

Solutions and other collapsed blocks are opened first, so that their maths is measured too.
``_static/fit.css`` and ``_static/fit.js`` provide the scroll boxes and the cue; the chapters'
widest equations are broken into aligned rows.

Needs ``_build/html`` (``make book``; ``BOOK_HTML`` names another build) and Debian's
``chromium``, like ``tests/book/test_book_html.py``, whose fixtures and page helper it uses.
"""
import pytest

from test_book_html import BUILD, NARROW, WIDTHS, Visit, browser, content_pages, in_editions, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser

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

# Every display equation and table on the page: what it is, how wide, and what a reader can see of it.
MEASURE = """async () => {
  const frames = () => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  await document.fonts.ready;  // MathJax's fonts load as maths is typeset; measure what they draw
  await frames();
  const article = document.querySelector('main .bd-article') || document.body;
  // After a resize the theme's layout animates for about half a second: measure once it is still.
  for (let last = -1, i = 0; i < 40; i++) {
    const width = article.getBoundingClientRect().width;
    if (width === last) break;
    last = width;
    await new Promise(done => setTimeout(done, 100));
  }
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


# MathJax draws TeX it cannot read as a red error box, which may well fit the column.
ERRORS = """() => [...document.querySelectorAll('mjx-merror')].map(e => {
  const display = e.closest('div.math, mjx-container');
  return (display && (display.id || display.textContent.slice(0, 40))) || e.textContent;
})"""


def measure(visit) -> list[dict]:
    left = visit.page.evaluate(PREPARE)
    assert left == 0, f"{left} equations were left untypeset"
    errors = visit.page.evaluate(ERRORS)
    assert errors == [], f"{visit.page.url}: MathJax could not typeset {errors}"
    return visit.page.evaluate(MEASURE)


@pytest.fixture(scope="module")
def fits(server, browser) -> dict[int, dict[str, list[dict]]]:
    """``MEASURE`` of every content page (and the translated editions' samples, ``in_editions``)
    at every width: each page is loaded and typeset once,
    then the window is resized to each width in turn."""
    found = {width: {} for width in WIDTHS}
    visit = Visit(browser, f"{server}/intro.html")
    try:
        for page in in_editions(content_pages()):
            visit.page.goto(f"{server}/{page}", wait_until="load")
            for width in WIDTHS:
                visit.page.set_viewport_size({"width": width, "height": 844 if width < NARROW else 900})
                found[width][page] = measure(visit)
    finally:
        visit.close()
    return found


def summary(measured: dict[str, list[dict]]) -> str:
    """"display equations: 12 of 190 wider than the column, 0 of them without a cue; tables: ..."."""
    parts = []
    for kind in ("equation", "table"):
        items = [item for page in measured.values() for item in page if item["kind"] == kind]
        wider = [item for item in items if item["wider"]]
        bad = [item for item in items if item["problems"]]
        parts.append(f"{kind}s: {len(wider)} of {len(items)} wider than the column, {len(bad)} cut or with no cue")
    return "; ".join(parts)


@pytest.mark.parametrize("width", WIDTHS)
def test_maths_and_tables_fit_or_scroll_with_a_cue(fits, width):
    problems = [f"{page}: {item['kind']} {item['label']} ({item['width']} px in {item['column']} px): "
                + ", ".join(item["problems"])
                for page, items in fits[width].items() for item in items if item["problems"]]
    assert problems == [], f"at {width} px ({summary(fits[width])}): " + "; ".join(problems)


def test_every_chapter_has_display_maths_measured(fits):
    """The measure sees the typeset equations of every chapter (lazy typesetting drew them all)."""
    for page, items in fits[390].items():
        if page.startswith("chapters/"):
            assert any(item["kind"] == "equation" for item in items), f"{page}: no display equation measured"
    tables = sum(item["kind"] == "table" for items in fits[390].values() for item in items)
    assert tables >= 10, f"only {tables} tables measured"


@pytest.mark.parametrize("width", WIDTHS)
def test_tables_that_may_reflow_are_cards_exactly_where_they_would_not_fit(fits, width):
    """A table marked ``fit-cards`` (chapter 11's five word representations) is read as cards,
    each cell under its column's header, where as a table it would be wider than its box; a
    table where it fits."""
    reflowing = [(page, item) for page, items in fits[width].items() for item in items if "cards" in item]
    assert reflowing, "no table is marked fit-cards"
    for page, item in reflowing:
        cards = item["cards"]
        assert cards["shown"] == (cards["natural"] > cards["room"] + 1), f"{page}: {item['label']}: {cards}"
        assert not cards["shown"] or cards["unlabelled"] == 0, f"{page}: {item['label']}: cells without a header"
    if width == 390:  # chapter 11's six columns cannot fit a phone, in any edition
        assert all(item["cards"]["shown"] for page, item in reflowing if "chapters/11" in page)
    if width == 1366:
        assert not any(item["cards"]["shown"] for _, item in reflowing)


def test_the_fit_check_sees_clipped_cueless_and_unreachable_content(server, browser):
    """The check above finds a clipped equation, a table that scrolls with no cue, and content
    that sticks out of its scroll box on the side no scrolling reaches; it passes what fits."""
    visit = Visit(browser, f"{server}/chapters/09_attention.html", width=390)
    try:
        visit.page.evaluate(PREPARE)
        visit.page.evaluate("""() => {
          const main = document.querySelector('main .bd-article');
          const wide = '<table><tr><th>planted</th><td style="min-width: 900px">wide</td></tr></table>';
          main.insertAdjacentHTML('beforeend',
            '<div style="overflow: hidden">' + wide.replace('planted', 'clipped') + '</div>'
            + '<div style="overflow-x: auto">' + wide.replace('planted', 'no-cue') + '</div>'
            + '<div style="overflow-x: auto; -webkit-mask-image: linear-gradient(to right, #000, transparent)">'
            + wide.replace('planted', 'unreachable').replace('<table>', '<table style="margin-left: -200px">') + '</div>'
            + '<div style="overflow-x: auto; -webkit-mask-image: linear-gradient(to right, #000, transparent)">'
            + wide.replace('planted', 'cued') + '</div>'
            + '<table><tr><th>narrow</th><td>fits</td></tr></table>');
          // An equation of the page made wider than the column, and clipped.
          const maths = document.querySelector('#equation-eq-scores mjx-container');
          maths.style.cssText = 'flex: none; min-width: max-content; overflow: visible; font-size: 300%';
          maths.parentElement.style.overflow = 'hidden';
        }""")
        found = {item["label"].split('"')[1].split(" |")[0] if item["kind"] == "table" else item["label"]: item
                 for item in visit.page.evaluate(MEASURE)}
        assert found["clipped"]["problems"] == ["clipped (overflow hidden)"]
        assert found["no-cue"]["problems"] == ["scrolls with no visible cue"]
        assert found["unreachable"]["problems"] == ["not all of it can be scrolled to"]
        assert found["cued"]["problems"] == [] and found["cued"]["wider"]
        assert found["narrow"]["problems"] == [] and not found["narrow"]["wider"]
        assert found["eq. (9.3)"]["problems"] == ["clipped (overflow hidden)"], found["eq. (9.3)"]
        assert visit.page.evaluate(ERRORS) == []
        # TeX that MathJax cannot read (a stray alignment tab) is typeset as an error box
        visit.page.evaluate("""async () => {
          const node = await MathJax.tex2chtmlPromise('x & y', {display: true});
          document.querySelector('main .bd-article').append(node);
        }""")
        assert visit.page.evaluate(ERRORS) != []
    finally:
        visit.close()
