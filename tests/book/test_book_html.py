"""The built HTML book, opened as a reader would: headless Chromium, no kernel, no network.

Needs ``_build/html`` (``make book``; ``make test`` builds it first; ``BOOK_HTML`` names
another build) and Debian's
``chromium``. For every page of the book it proves that maths is typeset, that
every control of every kernel-free explorer changes the figure it shows, that no
request leaves 127.0.0.1, and that the console stays free of errors; at a phone's,
a small laptop's and a desktop's width, that the navigation opens, that neither a page
nor any code block or printed output in it scrolls sideways, that one search box shows, that no TeX or Markdown is left raw,
and that figures have captions and images alt text.
"""
import functools
import re

import pytest

# The page helper and what the shared visits read (the fixtures: tests/book/conftest.py)
from book_visits import BUILD, LAYOUT, NARROW, VISIBLE_TEXT, WIDTHS, Visit

pytestmark = pytest.mark.browser

# BOOK_HTML tests another build of the book (e.g. one made with --path-output elsewhere): book_visits.BUILD.
# WIDTHS: a phone, a small laptop (drawer navigation below NARROW px, the themes' breakpoint), a desktop.
# The translated editions (issue 32, ``_ext/editions.py``): each a folder of BUILD holding the
# same pages. A reader's checks (offline, maths typeset, explorers respond, nothing cut at any
# width, captions and alt text, no raw TeX) also run on these pages of each: the introduction,
# the chapters with the most explorers and the widest tables, and the glossary. A translation
# changes the prose around the shared code, maths and figures; a sample keeps the time small.
EDITIONS = ["zh_CN"]
EDITION_SAMPLES = ["intro.html", "chapters/09_attention.html", "chapters/11_transformer.html",
                   "backmatter/glossary.html"]


def book_pages() -> list[str]:
    """The English edition's pages (the translated editions' folders excluded)."""
    skip = {"genindex.html", "search.html"}
    return sorted(
        p.relative_to(BUILD).as_posix()
        for p in BUILD.rglob("*.html")
        if not p.relative_to(BUILD).parts[0].startswith("_") and p.name not in skip
        and p.relative_to(BUILD).parts[0] not in EDITIONS
    )


def in_editions(pages: list[str]) -> list[str]:
    """``pages``, then those of them in ``EDITION_SAMPLES`` in each translated edition."""
    return pages + [f"{edition}/{page}" for edition in EDITIONS for page in pages
                    if page in EDITION_SAMPLES and (BUILD / edition / page).is_file()]


def content_pages() -> list[str]:
    """The book's pages less those that only redirect (``index.html``)."""
    return [page for page in book_pages() if 'http-equiv="Refresh"' not in (BUILD / page).read_text()]


def explorer_pages() -> list[str]:
    return [page for page in book_pages() if 'class="book-explorer"' in (BUILD / page).read_text()]


@functools.cache
def shared_pages() -> frozenset:
    """The pages that ``reader_visits`` visits once for the session's tests (``book_visits.ReaderVisits``):
    every content page, and the translated editions' samples."""
    return frozenset(in_editions(content_pages()))


def test_the_book_has_pages_and_explorers():
    assert "chapters/09_attention.html" in book_pages()
    assert "chapters/09_attention.html" in explorer_pages()


@pytest.mark.parametrize("page", in_editions(book_pages()) if BUILD.is_dir() else ["index.html"])
def test_page_is_offline_and_error_free(server, browser, reader_visits, page):
    """From its first request to the end of its shared visit (its maths typeset, its solutions opened, resized
    to each width), a content page asks no other host and logs no console error; a page that only redirects is
    watched for 300 ms."""
    if page in shared_pages():
        record = reader_visits.of(page)
        assert record["foreign"] == [], f"{page} asked another host"
        assert record["errors"] == [], f"{page} logged console errors"
        return
    visit = Visit(browser, f"{server}/{page}")
    try:
        visit.page.wait_for_timeout(300)
        assert visit.foreign_requests() == [], f"{page} asked another host"
        assert visit.errors == [], f"{page} logged console errors"
    finally:
        visit.close()


def maths_pages() -> list[str]:
    return [page for page in book_pages() if 'class="math' in (BUILD / page).read_text()]


def test_chapters_and_intro_have_maths():
    pages = maths_pages()
    assert "intro.html" in pages and all(p in pages for p in book_pages() if p.startswith("chapters/"))


@pytest.mark.parametrize("page", in_editions(maths_pages()) if BUILD.is_dir() else [])
def test_maths_is_typeset(reader_visits, page):
    """Once MathJax's startup has typeset the page (book_visits.TYPESET, in the page's shared visit)."""
    typeset = reader_visits.of(page)["typeset"]
    assert typeset["maths"] > 0, f"{page} has no maths"
    assert typeset["containers"] >= typeset["maths"]
    assert typeset["untypeset"] == 0
    assert typeset["errors"] == 0, "MathJax reported a TeX error"


@pytest.mark.parametrize("page", in_editions(explorer_pages()) if BUILD.is_dir() else [])
def test_every_control_changes_the_figure(server, browser, page):
    """Driven from the keyboard, MathJax running as a reader's page has it: the console must stay free of errors
    while the controls move and the maths is typeset."""
    visit = Visit(browser, f"{server}/{page}")
    try:
        players = visit.page.locator("div.book-explorer")
        assert players.count() > 0
        for p in range(players.count()):
            player = players.nth(p)
            image = player.locator("img.book-explorer-frame")
            controls = player.locator(".book-explorer-control")
            assert controls.count() > 0
            for c in range(controls.count()):
                control = controls.nth(c)
                start = control.input_value()
                seen = set()
                if control.evaluate("e => e.tagName") == "SELECT":
                    for value in control.locator("option").evaluate_all("os => os.map(o => o.value)"):
                        control.select_option(value)
                        seen.add(image.get_attribute("src"))
                    control.select_option(start)
                else:
                    # Drive the slider with the keyboard, as a reader would.
                    control.focus()
                    control.press("Home")
                    seen.add(image.get_attribute("src"))
                    for _ in range(int(control.get_attribute("max"))):
                        control.press("ArrowRight")
                        seen.add(image.get_attribute("src"))
                    assert control.input_value() == control.get_attribute("max")
                    control.press("Home")
                    for _ in range(int(start)):
                        control.press("ArrowRight")
                assert len(seen) > 1, f"player {p} control {c} of {page} never changed the figure"
        assert visit.errors == []
        assert visit.foreign_requests() == []
    finally:
        visit.close()


# --- Every screen: navigation, layout, raw source left on the page -------------------------------

def chapter_and_backmatter_samples() -> list[str]:
    """The pages whose layout differs: the introduction, a chapter, and the widest back-matter pages."""
    wanted = ["intro.html", "chapters/09_attention.html", "backmatter/benchmarks.html",
              "backmatter/instructor_guide.html"]
    return [page for page in wanted if (BUILD / page).is_file()]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("page", chapter_and_backmatter_samples() if BUILD.is_dir() else [])
def test_the_navigation_opens_and_closes(server, browser, page, width):
    visit = Visit(browser, f"{server}/{page}", width=width)
    try:
        toggle = visit.page.locator(".primary-toggle:visible")
        assert toggle.count() == 1, f"{page} at {width} px shows {toggle.count()} menu buttons"
        nav_link = visit.page.locator("nav.bd-docs-nav a.reference").filter(has_text="Attention mechanisms")
        if width < NARROW:
            assert not nav_link.is_visible(), "the drawer is open before the menu button is pressed"
            toggle.click()
            drawer = visit.page.locator("#pst-primary-sidebar-modal")
            drawer.wait_for(state="visible", timeout=2000)
            assert nav_link.is_visible(), f"{page} at {width} px: the menu opened no navigation"
            visit.page.keyboard.press("Escape")
            drawer.wait_for(state="hidden", timeout=2000)
            contents = visit.page.locator(".secondary-toggle:visible")
            if contents.count():  # pages with sections: the "contents" button opens the page's outline
                contents.click()
                visit.page.locator("#pst-secondary-sidebar-modal").wait_for(state="visible", timeout=2000)
        else:
            assert nav_link.is_visible(), f"{page} at {width} px: the sidebar is not shown"
            toggle.click()
            visit.page.wait_for_function("() => getComputedStyle(document.querySelector("
                                         "'#pst-primary-sidebar')).visibility === 'hidden'", timeout=2000)
            toggle.click()
            nav_link.wait_for(state="visible", timeout=2000)
        assert visit.errors == []
    finally:
        visit.close()


@pytest.fixture(scope="module")
def layouts(reader_visits) -> dict[int, dict[str, dict]]:
    """``LAYOUT`` (book_visits: what would scroll sideways) of every content page at every width, from the
    page's shared visit: loaded once and its maths typeset, then resized to each width in turn and measured
    once the layout is still, its solutions closed as a reader finds them."""
    return {width: {page: reader_visits.of(page)["layout"][width] for page in in_editions(content_pages())}
            for width in WIDTHS}


@pytest.mark.parametrize("width", WIDTHS)
def test_nothing_scrolls_sideways_and_one_search_box_shows(layouts, width):
    """No page is wider than the screen, one search box shows, and no code cell, printed output
    or code block needs sideways scrolling. From 1024 px up no line even wraps: code lines and
    printed lines are at most 88 characters, which fit a block there (on a phone they wrap with
    a hanging indent, book.css)."""
    problems = []
    for page, layout in layouts[width].items():
        if layout["overflow"] > 0:
            problems.append(f"{page} scrolls {layout['overflow']} px sideways")
        if layout["searches"] != 1:
            problems.append(f"{page} shows {layout['searches']} search boxes")
        problems += [f"{page}: a {kind} ({chars} characters a line) scrolls sideways"
                     for kind, chars in layout["wide"]]
        if width >= NARROW:
            problems += [f"{page}: a {kind} has a line too long to fit ({chars} characters)"
                         for kind, chars in layout["wrapped"]]
    assert problems == [], f"at {width} px: " + "; ".join(problems)


def test_the_layout_check_sees_long_lines_and_blocks_that_scroll(server, browser):
    """The check above finds a code line too long to fit unwrapped, a block that scrolls, and a
    page made too wide; and 88 characters fit a code block at 1024 px."""
    visit = Visit(browser, f"{server}/intro.html", width=1024)
    try:
        visit.page.evaluate("""() => document.querySelector('main .bd-article').insertAdjacentHTML('beforeend',
            '<div class="highlight"><pre>x = [' + '1234567, '.repeat(20) + ']</pre></div>'
            + '<div class="highlight"><pre style="white-space: pre">' + 'y'.repeat(100) + '</pre></div>'
            + '<div class="highlight"><pre>' + 'z'.repeat(88) + '</pre></div>'
            + '<div style="width: 3000px">wide</div>')""")
        layout = visit.page.evaluate(LAYOUT)
        assert layout["wrapped"] == [["code", 186], ["code", 100]]
        assert layout["wide"] == [["code", 100]] and layout["overflow"] > 1000
    finally:
        visit.close()


RAW_TEX = ("$", "\\frac", "\\begin", "\\mathbf", "\\langle", "^{", "_{")


def _leftovers(texts: list[str], markers) -> list[str]:
    return [text.strip()[:80] for text in texts if any(marker in text for marker in markers)]


@pytest.mark.parametrize("page", in_editions(content_pages()) if BUILD.is_dir() else [])
def test_no_raw_tex_or_markdown_is_left_on_the_page(reader_visits, page):
    """The text a reader sees (``VISIBLE_TEXT``) once MathJax's startup has typeset the page (its shared visit)."""
    texts = reader_visits.of(page)["texts"]
    assert _leftovers(texts, RAW_TEX) == [], f"{page} shows TeX that was not typeset"
    # A Markdown table parsed without table support comes out as a paragraph of pipes.
    assert [t for t in texts if t.lstrip().startswith("|") and "|---" in t.replace(" ", "")] == [], \
        f"{page} shows a Markdown table as text"


def test_the_raw_text_check_sees_what_a_reader_sees(server, browser):
    """The check above finds raw TeX and pipe tables in visible prose, and not in code."""
    visit = Visit(browser, f"{server}/intro.html")
    try:
        visit.page.evaluate("""() => {
            const main = document.querySelector('main');
            main.insertAdjacentHTML('beforeend',
              '<p>+ W_{ax} x$ and \\\\frac{a}{b}</p><p>| a | b |\\n|---|---|</p><pre>$x$ \\\\frac</pre>');
        }""")
        texts = visit.page.evaluate(VISIBLE_TEXT)
        assert len(_leftovers(texts, RAW_TEX)) == 1
        assert any(t.startswith("| a |") for t in texts)
    finally:
        visit.close()


def test_benchmark_tables_are_tables():
    page = BUILD / "backmatter" / "benchmarks.html"
    if not page.is_file():
        pytest.fail(f"{page} is not built")
    assert page.read_text().count("<table") >= 7, "the Benchmarks page's Markdown tables were not rendered"


@pytest.mark.parametrize("page", in_editions(content_pages()) if BUILD.is_dir() else [])
def test_figures_have_captions_and_images_alt_text(reader_visits, page):
    """As the page loaded (book_visits.UNCAPTIONED and NO_ALT, in its shared visit)."""
    record = reader_visits.of(page)
    assert record["uncaptioned"] == [], f"{page}: figures without a caption"
    # An alt text says what the picture shows; a file name or nothing says nothing.
    assert record["no_alt"] == [], f"{page}: images without alt text"


def test_the_build_ships_every_frame_a_page_names_and_no_other(server):
    """Frames are files named by their content (``externalise_frames``): an incremental build must
    not leave the frames of changed explorers behind, nor a page name one that is missing. The
    theme's message catalogues (read only while building) are not shipped either."""
    named = set()
    for page in BUILD.rglob("*.html"):
        named.update(re.findall(r"explorer-frames/([0-9a-f]{16}\.webp)", page.read_text(encoding="utf-8")))
    shipped = {frame.name for frame in (BUILD / "_static" / "explorer-frames").glob("*.webp")}
    assert named, "no page names an explorer frame"
    assert not named - shipped, f"pages name missing frames: {sorted(named - shipped)[:5]}"
    assert not shipped - named, f"{len(shipped - named)} frames no page names, e.g. {sorted(shipped - named)[:3]}"
    assert not (BUILD / "_static" / "locales").exists()


def test_the_plots_are_palette_images(server):
    """``_ext/palette_images.py`` stores every plot with a palette (a chapter page stays under 3 MB)."""
    from PIL import Image

    plots = sorted((BUILD / "_images").glob("*.png"))
    assert plots, "the build has no plots"
    full_colour = [plot.name for plot in plots if Image.open(plot).mode != "P"]
    assert not full_colour, f"{len(full_colour)} plots keep full colour, e.g. {full_colour[:3]}"
