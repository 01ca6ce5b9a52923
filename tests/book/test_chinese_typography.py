"""The Chinese edition's typography (issue 32): emphasis, inline code, punctuation, no sideways scroll.

``_ext/edition_ui.py`` marks, in the Chinese pages only, what ``_static/zh.css`` styles (that
sheet is linked from the Chinese pages only, and minified as the book's other sheets are):

* an ``<em>`` holding Chinese is drawn with emphasis dots (着重号) and no slant: CJK fonts have
  no italic, and Chromium would tilt the glyphs; Latin words inside keep their italics, and the
  English edition's ``<em>`` stays italic. It stays one inline element with its Chinese whole:
  search finds an emphasised term, find-in-page finds an emphasised word, and no line starts
  with a stop or closing bracket (避头尾). (A line holding dots is a few pixels taller, as
  Chromium draws it: no line-height short of 2.2 holds WenQuanYi's dots in its leading, so no
  test asks for even spacing.)
* inline code of at most 20 characters (a shape such as ``(B, T, D)``, a name) never breaks
  inside itself; longer code still wraps, so no Chinese page scrolls sideways on a phone;
* two full-width marks that meet (``），``, ``。（``, ``，“``) are compressed: the first gives up
  half an em when it is a stop (，。、：；), a third when it is a bracket.

Needs ``_build/html`` with its ``zh_CN/`` (``make book``) and Debian's ``chromium`` with a CJK
font (``make chromium``), like ``tests/book/test_chinese_search_and_interface.py``.
"""
import html as html_lib
import json
import re
import sys
from pathlib import Path

import pytest

from book_visits import BUILD, Visit  # (fixtures: tests/book/conftest.py)
from test_book_html import content_pages

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from edition_ui import SHORT_CODE, STOPS  # noqa: E402
from page_assets import minify_css  # noqa: E402

pytestmark = pytest.mark.browser

ZH = "zh_CN"
PHONE = 390
SHEET = Path(__file__).resolve().parents[2] / "_static" / "zh.css"


def zh_pages() -> list[str]:
    if not (BUILD / ZH / "index.html").is_file():
        pytest.fail(f"the Chinese edition is not built ({BUILD / ZH} has no index.html): run `make book`")
    return [f"{ZH}/{page}" for page in content_pages() if (BUILD / ZH / page).is_file()]


# PAGE_JS (book_visits.py): per page at 390 px, how far it scrolls sideways; Chinese text drawn slanted; each
# <em> holding Chinese with its computed style; inline code of at most SHORT_CODE characters in a paragraph or
# list item that spans two lines; pairs of full-width marks left uncompressed in the prose.


@pytest.fixture(scope="module")
def zh_layouts(zh_visits) -> dict[str, dict]:
    """``PAGE_JS`` of every Chinese content page at 390 px, its maths typeset (each page's shared visit,
    book_visits.ZhVisits: loaded at 1366 px, then resized to 390)."""
    return {page: zh_visits.of(page)["layout"] for page in zh_pages()}


def test_chinese_emphasis_has_dots_and_no_slant(zh_layouts):
    """Every <em> around Chinese on a Chinese chapter is upright with emphasis dots, and no Chinese
    text of any page is drawn slanted (an <em>, <cite>, <i> or a theme's italic: the figures'
    numbers, 图 9.1)."""
    chapters = [page for page in zh_layouts if "/chapters/" in page]
    assert sum(len(zh_layouts[page]["ems"]) for page in chapters) > 50, "the chapters lost their emphasis"
    problems = [f"{page}: <em>{em['text']}</em> is {em['fontStyle']}, emphasis {em['emphasis']!r}"
                for page in chapters for em in zh_layouts[page]["ems"]
                if em["fontStyle"] != "normal" or em["emphasis"] in ("", "none")]
    problems += [f"{page}: slanted Chinese {text!r}" for page, layout in zh_layouts.items()
                 for text in layout["slanted"]]
    assert problems == [], f"{len(problems)} problems: " + "; ".join(problems[:12])


def test_short_inline_code_never_wraps_inside_itself(zh_layouts):
    problems = [f"{page}: {code!r}" for page, layout in zh_layouts.items() for code in layout["wrapped"]]
    assert problems == [], f"inline code of at most {SHORT_CODE} characters over two lines at {PHONE} px: " + "; ".join(problems)


def test_no_chinese_page_scrolls_sideways_on_a_phone(zh_layouts):
    assert len(zh_layouts) >= 15
    problems = {page: layout["overflow"] for page, layout in zh_layouts.items() if layout["overflow"] > 0}
    assert problems == {}, f"Chinese pages that scroll sideways at {PHONE} px (px): {problems}"


def test_full_width_marks_that_meet_are_compressed(zh_layouts):
    problems = [f"{page}: {text!r}" for page, layout in zh_layouts.items() for text in layout["uncompressed"]]
    assert problems == [], f"{len(problems)} pairs of full-width marks not compressed: " + "; ".join(problems[:12])


def test_a_compressed_mark_is_half_an_em_and_latin_in_chinese_emphasis_is_italic(server, browser):
    """On ch 4: a compressed stop is drawn half an em wide, a compressed bracket two thirds; and a
    Chinese <em> built with a Latin word keeps the word italic and undotted (written into the page:
    the chapters have none)."""
    visit = Visit(browser, f"{server}/{ZH}/chapters/04_gating.html", width=PHONE)
    try:
        widths = visit.page.evaluate("""() => [...document.querySelectorAll('main [class^=zh-pair]')].map(span =>
            [span.textContent, span.getBoundingClientRect().width / parseFloat(getComputedStyle(span).fontSize)])""")
        stops = [width for mark, width in widths if mark in STOPS]
        brackets = [width for mark, width in widths if mark not in STOPS]
        assert len(stops) >= 2 and all(abs(width - 0.5) < 0.05 for width in stops), widths
        assert len(brackets) > 20 and all(abs(width - 0.67) < 0.05 for width in brackets), widths
        style = visit.page.evaluate("""() => {
            const p = document.querySelector('main p');
            p.insertAdjacentHTML('beforeend', '<em class="zh-em">修正 <span class="zh-latin">Adam</span></em>');
            const latin = p.querySelector('em.zh-em:last-child .zh-latin'), s = getComputedStyle(latin);
            return [s.fontStyle, s.textEmphasisStyle || s.webkitTextEmphasisStyle];
        }""")
        assert style[0] == "italic" and style[1] == "none", style
    finally:
        visit.close()


@pytest.mark.parametrize("page", ["chapters/04_gating.html", "chapters/09_attention.html"])
def test_english_emphasis_stays_italic(server, browser, page):
    """The English edition loads no zh.css and its <em> is italic with no dots."""
    visit = Visit(browser, f"{server}/{page}", width=PHONE)
    try:
        found = visit.page.evaluate("""() => ({
            sheets: [...document.styleSheets].map(s => s.href || '').filter(h => /zh\\.css/.test(h)),
            ems: [...document.querySelectorAll('main p em')].map(em => {
                const s = getComputedStyle(em); return [s.fontStyle, s.textEmphasisStyle || s.webkitTextEmphasisStyle]; })})""")
        assert found["sheets"] == []
        assert found["ems"] and all(em == ["italic", "none"] for em in found["ems"]), found["ems"]
    finally:
        visit.close()


def test_the_sheet_is_on_chinese_pages_only_and_minified_whole():
    """Every Chinese page links zh.css after book.css and fit.css, no English page links it or has
    its classes, and the served sheet is the source minified with every rule kept (no purge)."""
    pages = zh_pages()
    problems = []
    for page in pages:
        links = re.findall(r'<link rel="stylesheet"[^>]*href="[^"]*_static/([^"?]+)', (BUILD / page).read_text())
        if not links or links[-1] != "zh.css" or "book.css" not in links:
            problems.append(f"{page} links {links}")
    for page in content_pages():
        html = (BUILD / page).read_text()
        if "zh.css" in html or re.search(r'class="[^"]*\bzh-(?:em|short|pair|latin)\b', html):
            problems.append(f"English {page} has the Chinese typography")
    assert problems == []
    assert not (BUILD / "_static" / "zh.css").exists(), "the English edition ships zh.css"
    served = (BUILD / ZH / "_static" / "zh.css").read_text(encoding="utf-8")
    assert served == minify_css(SHEET.read_text(encoding="utf-8"))
    for rule in ("em.zh-em{", ".zh-pair{", ".zh-pair-bracket{", "code.literal.zh-short", "em.zh-em .zh-latin{"):
        assert rule in served, rule


def test_the_build_marks_short_code_within_its_bound():
    html = (BUILD / ZH / "chapters" / "09_attention.html").read_text()
    short = re.findall(r'<code class="[^"]*\bzh-short\b[^"]*">(.*?)</code>', html)
    long_ = re.findall(r'<code class="docutils literal notranslate">(.*?)</code>', html)
    text = lambda code: html_lib.unescape(re.sub(r"<[^>]+>", "", code))  # noqa: E731
    assert short and all(len(text(code)) <= SHORT_CODE for code in short)
    assert all(len(text(code)) > SHORT_CODE for code in long_)


# --- emphasis kept whole: search, find-in-page, line breaking -------------------------------------

# Emphasised terms of the Chinese chapters and the page each is emphasised on (an <em> whose
# characters were split into elements of their own left jieba one character per Text node, and
# the index without these terms).
EMPHASISED_TERMS = [("早停", "chapters/03_rnn"), ("切换", "chapters/04_gating"), ("有害", "chapters/07_decoding"),
                    ("置换", "chapters/11_transformer"), ("分布式", "chapters/12_memory")]


@pytest.mark.parametrize("term, page", EMPHASISED_TERMS)
def test_the_search_index_has_the_emphasised_terms(term, page):
    zh_pages()
    text = (BUILD / ZH / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    html = re.sub(r"</?span[^>]*>", "", (BUILD / ZH / f"{page}.html").read_text())
    assert re.search(f"<em[^>]*>[^<]*{term}", html), f"{term} is not emphasised on {page}"
    found = index["terms"].get(term, [])
    found = [found] if isinstance(found, int) else found
    assert page in [index["docnames"][i] for i in found], f"searching for {term} does not find {page}"


# Every <em> around Chinese only on the page, looked for with the browser's find-in-page
# (window.find, from the top of the page): the words it does not find. Not those in a collapsed
# solution (visibility: hidden until opened, out of find's reach as any hidden text).
FIND_JS = r"""() => {
  const visible = em => em.parentElement.checkVisibility({visibilityProperty: true, opacityProperty: true});
  const words = [...new Set([...document.querySelectorAll('main em')].filter(visible).map(em => em.textContent.trim())
    .filter(text => /^[\u3400-\u9fff]{2,}$/.test(text)))];
  const missed = words.filter(word => {
    getSelection().removeAllRanges();
    return !window.find(word, false, false, true);
  });
  return [words.length, missed];
}"""


@pytest.mark.parametrize("chapter", ["03_rnn", "04_gating", "11_transformer"])
def test_find_in_page_finds_emphasised_words(server, browser, chapter):
    visit = Visit(browser, f"{server}/{ZH}/chapters/{chapter}.html", width=PHONE)
    try:
        count, missed = visit.page.evaluate(FIND_JS)
    finally:
        visit.close()
    assert count >= 1 and missed == [], f"{chapter}: find-in-page misses {missed} of {count} emphasised words"


# The lines of an element that start next to emphasis (their first character in an <em>, or the
# last character of the line before): that first character with the line before's last (one Range
# per character: a new line where the character's box starts below the previous one's).
LINE_STARTS_JS = r"""(element) => {
  const range = document.createRange(), walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const starts = []; let top = null, last = null;
  for (let node = walker.nextNode(); node; node = walker.nextNode())
    for (let k = 0; k < node.length; k++) {
      range.setStart(node, k); range.setEnd(node, k + 1);
      const box = range.getClientRects()[0];
      if (!box || !node.data[k].trim()) continue;
      const here = {char: node.data[k], em: !!node.parentElement.closest('em')};
      if (top !== null && box.top > top + 5 && (here.em || last.em)) starts.push(last.char + here.char);
      if (top === null || box.top > top + 5) top = box.top;
      last = here;
    }
  return starts;
}"""
NO_LINE_START = "，。：；）、"  # 避头尾: marks that never begin a line
# A Chinese <em> followed by a comma, in columns of 5 to 9 em: at some width the comma falls at a
# line's start unless the browser keeps it with the character before it.
PLANTED = "".join(f'<p class="planted" style="width:{width}em">一二三四五六{{em}}，八九十</p>' for width in range(5, 10))
WHOLE = '<em class="zh-em">梯度</em>'
SPLIT = '<em class="zh-em"><span style="display:inline-block">梯</span><span style="display:inline-block">度</span></em>'


def _bad_line_starts(page, selector: str) -> list[str]:
    starts = page.eval_on_selector_all(selector, f"elements => elements.flatMap(e => ({LINE_STARTS_JS})(e))")
    return [pair for pair in starts if pair[1] in NO_LINE_START]


LINE_WIDTHS = [364, 375, PHONE]


@pytest.fixture(scope="module")
def line_starts(browser, server, chapter: str) -> dict[int, tuple]:
    """For each width of LINE_WIDTHS: the bad line starts of the chapter's paragraphs, list items and cells that
    hold Chinese emphasis, of planted paragraphs with a whole <em>, and of the same with an <em> split into inline
    blocks. The chapter (a parameter of module scope) is opened once, at the first width, then resized to each
    other (the planted paragraphs taken out again each time)."""
    found = {}
    visit = Visit(browser, f"{server}/{ZH}/chapters/{chapter}.html", width=LINE_WIDTHS[0])
    try:
        page = visit.page
        for width in LINE_WIDTHS:
            page.set_viewport_size({"width": width, "height": 844})
            page.evaluate("() => document.querySelectorAll('main p, main li, main td')"
                          ".forEach(e => { if (e.querySelector('em.zh-em')) e.classList.add('zh-em-holder'); })")
            holders = page.locator("main .zh-em-holder").count()
            bad = _bad_line_starts(page, "main .zh-em-holder")
            page.evaluate("(html) => document.querySelector('main').insertAdjacentHTML('afterbegin', html)",
                          PLANTED.format(em=WHOLE))
            planted_whole = _bad_line_starts(page, "main p.planted")
            page.evaluate("(html) => { document.querySelectorAll('main p.planted').forEach(p => p.remove());"
                          " document.querySelector('main').insertAdjacentHTML('afterbegin', html); }",
                          PLANTED.format(em=SPLIT))
            planted_split = _bad_line_starts(page, "main p.planted")
            page.evaluate("() => document.querySelectorAll('main p.planted').forEach(p => p.remove())")
            found[width] = (holders, bad, planted_whole, planted_split)
    finally:
        visit.close()
    return found


@pytest.mark.parametrize("width", LINE_WIDTHS)
@pytest.mark.parametrize("chapter", ["03_rnn", "04_gating", "09_attention", "11_transformer"], scope="module")
def test_no_line_with_emphasis_starts_with_a_stop(line_starts, chapter, width):
    """On phones (364 to 390 px) no line of a paragraph, list item or cell holding Chinese emphasis starts with
    ，。：；）、 next to the emphasis; and the same check sees it on a planted <em> split into inline
    blocks. (Such a mark after inline maths, an inline block, may start a line: ch 3, 4 and 11 have
    four at 390 px, none next to emphasis; not this check's business.) Each chapter is opened once for the
    three widths (:func:`line_starts`)."""
    holders, bad, planted_whole, planted_split = line_starts[width]
    assert holders >= 1
    assert bad == [] and planted_whole == [], f"{chapter} at {width} px: lines starting with a stop: {bad + planted_whole}"
    assert planted_split, "the check did not see a split <em> leave a comma at a line's start"
