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
``chromium``, like ``tests/book/test_book_html.py``. Each page is measured in its shared visit
(``book_visits.py``), which the other browser tests of every page read too.
"""
import pytest

from book_visits import ERRORS, MEASURE, PREPARE, WIDTHS, Visit
from test_book_html import content_pages, in_editions

pytestmark = pytest.mark.browser

# PREPARE opens what is collapsed (sphinx-togglebutton's solutions, <details>), then typesets every
# equation: MathJax's lazy typesetting (ui/lazy) draws only what has been in view. MEASURE finds every
# display equation and table on the page: what it is, how wide, and what a reader can see of it (the
# checks the docstring lists). ERRORS: MathJax draws TeX it cannot read as a red error box, which may
# well fit the column. All three live in book_visits.py, run by each page's shared visit.


@pytest.fixture(scope="module")
def fits(reader_visits) -> dict[int, dict[str, list[dict]]]:
    """``MEASURE`` of every content page (and the translated editions' samples, ``in_editions``)
    at every width, from its shared visit: each page is loaded and typeset once, then the window is
    resized to each width in turn, where what is collapsed is opened and every equation typeset
    (``PREPARE``; none left, no error box) before it is measured."""
    found = {width: {} for width in WIDTHS}
    for page in in_editions(content_pages()):
        record = reader_visits.of(page)
        for width in WIDTHS:
            left, errors = record["untypeset"][width], record["maths_errors"][width]
            assert left == 0, f"{page} at {width} px: {left} equations were left untypeset"
            assert errors == [], f"{page} at {width} px: MathJax could not typeset {errors}"
            found[width][page] = record["fit"][width]
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
