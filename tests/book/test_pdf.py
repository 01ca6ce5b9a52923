"""The printed book: the print stylesheet and script, and the PDF edition that ``make pdf`` writes.

``tools/pdf.py`` prints chapter 9 (display equations, explorers, numbered figures and
equations, citations) and the bibliography it cites into one PDF here, as ``make pdf``
prints the whole book, and pypdf reads it back: every display equation has MathJax's glyphs
where it landed on its page (lazy typesetting prints blank formulas: shown by printing
without waiting), the text can be extracted, the page count is sane, the outline lists parts,
chapters and sections at their pages, and the links of a numref, an equation reference and a
citation jump inside the PDF to the page that holds their target. In the browser, with print
media, the navigation and an explorer's controls are hidden, its print-only line is shown, and
a moved explorer goes back to its default frame for printing.

Needs ``_build/html`` (``make book``), Debian's ``chromium`` and pypdf, like
``tests/book/test_book_html.py`` (the fixtures: tests/book/conftest.py).
"""

import functools
import io
import re
import sys
import unicodedata
from pathlib import Path

import pytest

from book_visits import BUILD, Visit  # (fixtures: tests/book/conftest.py)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import pdf  # noqa: E402  (tools/ is not a package)

pytestmark = pytest.mark.browser

PAGES = ["chapters/09_attention", "backmatter/bibliography"]
PX = 0.75  # PDF points per CSS pixel: Chromium prints at scale 1
MATHJAX_FONT = re.compile(r"\bMathJax_")  # MathJax's fonts as Chromium embeds them: MathJax_Math-Italic, ...


def read(data: bytes):
    from pypdf import PdfReader

    return PdfReader(io.BytesIO(data))


def font_name(font) -> str:
    """A font's name (a Type 3 font, as Chromium embeds a web font, names it in its descriptor only)."""
    font = font or {}
    name = font.get("/BaseFont")
    if name is None and "/FontDescriptor" in font:
        name = font["/FontDescriptor"].get_object().get("/FontName")
    return str(name or "")


def per_page(function):
    """Read each PDF page once (extracting text is slow): the result kept by the page object."""
    kept = {}

    @functools.wraps(function)
    def read_once(page):
        if id(page) not in kept:
            kept[id(page)] = (page, function(page))
        return kept[id(page)][1]

    return read_once


@per_page
def runs(page) -> list[tuple[str, float, float, str]]:
    """The text runs of a PDF page: (text, x, y, font name), y measured up from the foot."""
    found = []

    def visit(text, cm, tm, font, size):
        if text.strip():
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
            y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            found.append((text, x, y, font_name(font)))

    page.extract_text(visitor_text=visit)
    return found


def blank_equations(reader, entry) -> list[str]:
    """Display equations of ``entry`` with no MathJax glyph in the box where they were printed."""
    dests = pdf._destinations(reader, 0, pdf.top_margin_pt(BUILD))
    blank = []
    glyphs = {}
    for math in entry.maths:
        where = dests.get(math["id"])
        if where is None:
            blank.append(f"{math['id']} (not in the PDF)")
            continue
        number, _, top = where
        if number not in glyphs:
            glyphs[number] = [y for text, x, y, font in runs(reader.pages[number]) if MATHJAX_FONT.search(font)]
        bottom = top - math["height"] * PX
        if not any(bottom - 2 <= y <= top + 2 for y in glyphs[number]):
            blank.append(math["id"])
    return blank


def mathjax_glyphs(reader) -> int:
    return sum(len(text) for page in reader.pages for text, *_, font in runs(page) if MATHJAX_FONT.search(font))


def stray_links(reader) -> list[str]:
    """Links of the PDF that still point at the server it was printed from (not into the PDF)."""
    stray = []
    for number, page in enumerate(reader.pages):
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            action = annot.get("/A")
            uri = str(action.get_object().get("/URI", "")) if action is not None else ""
            if uri.startswith("http://127.0.0.1") or isinstance(annot.get("/Dest"), str):
                stray.append(f"page {number + 1}: {uri or annot.get('/Dest')}")
    return stray


@pytest.fixture(scope="module")
def book(browser, tmp_path_factory):
    """Chapter 9 and the bibliography printed as ``make pdf`` prints the book, and read back."""
    if not (BUILD / "index.html").is_file():
        pytest.fail(f"the book is not built ({BUILD} has no index.html): run `make book` first")
    out = tmp_path_factory.mktemp("pdf") / "book.pdf"
    entries = pdf.build_pdf(BUILD, out, pages=PAGES, browser=browser)
    from pypdf import PdfReader

    return entries, PdfReader(out)


def entry_pages(entries, reader, docname) -> range:
    index = [e.docname for e in entries].index(docname)
    end = entries[index + 1].first if index + 1 < len(entries) else len(reader.pages)
    return range(entries[index].first, end)


def plain(text: str) -> str:
    """``text`` with ligatures (ﬁ) spelled out and every run of white space one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def page_text(reader, number) -> str:
    """The text of a PDF page, its runs in the order they are drawn, ligatures spelled out."""
    return plain(" ".join(text for text, *_ in runs(reader.pages[number])))


def test_every_display_equation_is_typeset(book):
    entries, reader = book
    chapter = entries[0]
    assert len(chapter.maths) >= 10, "chapter 9 lost its display equations"
    assert blank_equations(read(chapter.pdf), chapter) == []
    # Inline formulas too: every formula of the page is at least one glyph in MathJax's fonts.
    assert mathjax_glyphs(read(chapter.pdf)) >= chapter.formulas > 100


def test_the_maths_check_sees_blank_formulas(browser):
    """Printed as a page stands (MathJax's lazy typesetting left to itself), formulas are blank."""
    [lazy] = [entry for entry in pdf.toc_entries() if entry.docname == PAGES[0]]
    with pdf.serve(BUILD) as url:
        pdf.print_entries(browser, url, BUILD, [lazy], BUILD.as_uri() + "/", ready=False, ranges="1-8")
    printed = read(lazy.pdf)
    blank = [name for name in blank_equations(printed, lazy) if "not in the PDF" not in name]
    assert len(blank) >= 3, f"only {blank} printed blank without waiting for MathJax"
    assert mathjax_glyphs(printed) < 50


def test_page_count_and_text(book):
    entries, reader = book
    chapter, bibliography = entries
    contents = chapter.first
    assert 1 <= contents <= 2, f"{contents} pages of contents for two pages of the book"
    pages = entry_pages(entries, reader, chapter.docname)
    # A sanity range, not a layout measure: the chapter prints on about 40 A4 pages, and how many
    # depends on the fonts a machine has (CI printed 41 where this machine printed 40). Printing only
    # its first screen, or every formula twice, falls outside it.
    assert 8 <= len(pages) <= 60, f"chapter 9 printed on {len(pages)} pages"
    assert len(reader.pages) == contents + len(read(chapter.pdf).pages) + len(read(bibliography.pdf).pages)
    text = " ".join(page_text(reader, n) for n in pages)
    assert chapter.title.startswith("9") and "Attention" in chapter.title
    for words in ("Fig. 9.1", "(9.3)", "Interactive in the HTML edition"):
        assert words in text, f"{words!r} is not in chapter 9's extracted text"
    # Every page of the book (not the contents) carries its printed number at the foot.
    for number in range(contents, len(reader.pages)):
        foot = [t for t, x, y, f in runs(reader.pages[number]) if y < 40]
        assert str(number - contents + 1) in "".join(foot), f"page {number + 1} has no page number"


def test_explorers_print_as_their_frame_with_a_link(book):
    entries, reader = book
    chapter = entries[0]
    players = (BUILD / chapter.path).read_text().count('class="book-explorer"')
    lines = 0
    for number in entry_pages(entries, reader, chapter.docname):
        text = page_text(reader, number)
        count = text.count("Interactive in the HTML edition")
        lines += count
        if count:
            # The frame (a picture) and the figure's caption are on the line's page.
            assert len(reader.pages[number].images) >= count, f"page {number + 1}: a line without its frame"
            assert re.search(r"Fig\. 9\.\d+", text), f"page {number + 1}: an explorer without its caption"
            assert "09_attention.html#fig-explorer-" in text.replace(" ", "")
    assert lines == players >= 2


def link_targets(reader, pages) -> list[tuple[str, int, float]]:
    """Each link of ``pages`` that jumps inside the PDF: the text it covers, the page and height it goes to."""
    found = []
    for number in pages:
        page = reader.pages[number]
        texts = runs(page)
        for ref in page.get("/Annots") or []:
            annot = ref.get_object()
            dest = annot.get("/Dest")
            if dest is None or isinstance(dest, str):
                continue
            x0, y0, x1, y1 = (float(v) for v in annot["/Rect"])
            covered = "".join(t for t, x, y, f in texts if x0 - 1 <= x <= x1 and y0 - 1 <= y <= y1 + 1)
            found.append((plain(covered), reader.get_page_number(dest[0].get_object()), float(dest[3])))
    return found


def near(reader, page, top, pattern) -> bool:
    """Whether text matching ``pattern`` starts on ``page`` at most 150 pt below ``top`` (and not above it)."""
    return any(re.match(pattern, plain(t)) and top - 150 <= y <= top + 2 for t, x, y, f in runs(reader.pages[page]))


def test_internal_links_jump_inside_the_pdf(book):
    entries, reader = book
    chapter, bibliography = entries
    assert stray_links(reader) == []
    assert chapter.unresolved == [] and bibliography.unresolved == [], "links to places with no destination"
    links = link_targets(reader, entry_pages(entries, reader, chapter.docname))
    figures = [link for link in links if re.match(r"Fig\. 9\.\d+$", link[0])]
    equations = [link for link in links if re.match(r"\(9\.\d+\)", link[0])]
    citations = [link for link in links if link[1] in entry_pages(entries, reader, bibliography.docname)]
    assert figures and equations and citations, f"no numref, equation or citation link among {links}"
    for text, page, top in figures:
        # A figure's destination is the figure: its caption ("Fig. 9.1 ...") follows on that page.
        number = text.split()[-1]
        assert f"Fig. {number} " in page_text(reader, page), f"{text!r} jumps to page {page + 1}"
    for text, page, top in equations:
        number = re.match(r"\(9\.\d+\)", text).group(0)
        assert near(reader, page, top, re.escape(number)), f"{text!r} jumps to page {page + 1}, {top:.0f} pt"
    for text, page, top in citations:
        # A citation goes to its entry of the bibliography: the author's name begins near there.
        author = re.match(r"\[?([A-Z][\w-]+)", text)
        if author:
            assert author.group(1) in page_text(reader, page), f"citation {text!r} jumps to page {page + 1}"


def test_the_link_check_sees_links_that_leave_the_pdf(book):
    """Chromium's own PDF of a page points every link to another page back at the server."""
    entries, _ = book
    assert stray_links(read(entries[0].pdf)), "the check found no stray link in a page printed alone"


def test_the_outline_lists_parts_chapters_and_sections(book):
    entries, reader = book
    chapter, bibliography = entries
    outline = reader.outline
    titles = [item.title for item in outline if not isinstance(item, list)]
    assert titles == ["Contents", chapter.part, bibliography.part]
    part_children = outline[2]
    assert part_children[0].title == chapter.title
    assert reader.get_destination_page_number(part_children[0]) == chapter.first
    sections = part_children[1]
    assert len(sections) == len(chapter.sections) >= 3
    for item in sections:
        number = reader.get_destination_page_number(item)
        heading = re.sub(r"^[\d.]+\s*", "", item.title)[:25]
        assert heading in page_text(reader, number), f"outline item {item.title!r} goes to page {number + 1}"


PRINT_LAYOUT_JS = """() => {
  const shown = el => el && getComputedStyle(el).display !== 'none' && el.getClientRects().length > 0;
  const all = sel => [...document.querySelectorAll(sel)];
  return {
    navigation: all('.bd-sidebar-primary, .bd-sidebar-secondary, .bd-header, .bd-header-article, '
                    + '.prev-next-footer, .bd-footer').some(shown),
    controls: all('.book-explorer-controls').some(shown),
    lines: all('.book-explorer-print-line').filter(shown).length,
    players: all('.book-explorer').length,
    unwrapped: all('div.highlight pre').filter(pre => getComputedStyle(pre).whiteSpace !== 'pre-wrap').length,
    splittable: all('figure').filter(f => getComputedStyle(f).breakInside !== 'avoid').length,
  };
}"""


def test_print_media_hides_the_navigation_and_the_controls(server, browser):
    visit = Visit(browser, f"{server}/chapters/09_attention.html")
    try:
        screen = visit.page.evaluate(PRINT_LAYOUT_JS)
        assert screen["lines"] == 0 and screen["controls"], "the print-only line shows on screen"
        visit.page.emulate_media(media="print")
        paper = visit.page.evaluate(PRINT_LAYOUT_JS)
    finally:
        visit.close()
    assert paper == {
        "navigation": False,
        "controls": False,
        "lines": paper["players"],
        "players": paper["players"],
        "unwrapped": 0,
        "splittable": 0,
    }
    assert paper["players"] >= 2


def test_a_moved_explorer_prints_its_default_frame(server, browser):
    visit = Visit(browser, f"{server}/chapters/09_attention.html")
    try:
        page = visit.page
        img = page.locator("img.book-explorer-frame").first
        default = img.get_attribute("src")
        slider = page.locator("div.book-explorer input[type=range]").first
        slider.evaluate("el => { el.value = el.max; el.dispatchEvent(new Event('input')); }")
        moved = img.get_attribute("src")
        assert moved != default, "moving the slider did not change the frame"
        page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
        assert img.get_attribute("src") == default, "the print shows the reader's frame, not the default"
        page.evaluate("() => window.dispatchEvent(new Event('afterprint'))")
        assert img.get_attribute("src") == moved, "after printing the reader's frame did not come back"
    finally:
        visit.close()


BLANK_JS = """() => [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-c')).length"""


def test_a_print_from_the_browser_menu_has_every_formula(server, browser):
    """``beforeprint`` typesets every formula before the event returns (no print waits for more)."""
    visit = Visit(browser, f"{server}/chapters/09_attention.html")
    try:
        visit.wait_for_maths()
        visit.page.evaluate("() => window.bookPrintPreloaded")
        before, after = visit.page.evaluate(
            f"() => {{ const blank = {BLANK_JS}; const before = blank();"
            " window.dispatchEvent(new Event('beforeprint')); return [before, blank()]; }"
        )
    finally:
        visit.close()
    assert before > 0, "every formula was typeset before printing: the page no longer shows MathJax's lazy typesetting"
    assert after == 0, f"{after} formulas were still blank when beforeprint returned"
