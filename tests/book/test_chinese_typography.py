"""The Chinese edition's typography (issue 32): emphasis, inline code, punctuation, no sideways scroll.

``_ext/edition_ui.py`` marks, in the Chinese pages only, what ``_static/zh.css`` styles (that
sheet is linked from the Chinese pages only, and minified as the book's other sheets are):

* an ``<em>`` holding Chinese is drawn with emphasis dots (着重号) and no slant: CJK fonts have
  no italic, and Chromium would tilt the glyphs; the dots do not make their lines taller; Latin
  words inside keep their italics, and the English edition's ``<em>`` stays italic;
* inline code of at most 20 characters (a shape such as ``(B, T, D)``, a name) never breaks
  inside itself; longer code still wraps, so no Chinese page scrolls sideways on a phone;
* two full-width marks that meet (``），``, ``。（``, ``，“``) are compressed: the first gives up
  half an em when it is a stop (，。、：；), a third when it is a bracket.

Needs ``_build/html`` with its ``zh_CN/`` (``make book``) and Debian's ``chromium`` with a CJK
font (``make chromium``), like ``tests/book/test_chinese_search_and_interface.py``.
"""
import html as html_lib
import re
import sys
from pathlib import Path

import pytest

from test_book_html import BUILD, Visit, browser, content_pages, server  # noqa: F401  (fixtures)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from edition_ui import PAIR, SHORT_CODE, STOPS  # noqa: E402
from page_assets import minify_css  # noqa: E402

pytestmark = pytest.mark.browser

ZH = "zh_CN"
PHONE = 390
SHEET = Path(__file__).resolve().parents[2] / "_static" / "zh.css"


def zh_pages() -> list[str]:
    if not (BUILD / ZH / "index.html").is_file():
        pytest.fail(f"the Chinese edition is not built ({BUILD / ZH} has no index.html): run `make book`")
    return [f"{ZH}/{page}" for page in content_pages() if (BUILD / ZH / page).is_file()]


# Per page at 390 px: how far it scrolls sideways; Chinese text drawn slanted; each <em> holding
# Chinese with its computed style; inline code of at most SHORT (12) characters in a paragraph
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
SHORT = 12  # the bound: a shape or a name; the build keeps up to SHORT_CODE (20) whole


def pair_pattern() -> str:
    """``edition_ui.PAIR`` as a JavaScript pattern (the same syntax: classes and lookaheads)."""
    return PAIR.pattern


@pytest.fixture(scope="module")
def zh_layouts(server, browser) -> dict[str, dict]:
    """``PAGE_JS`` of every Chinese content page at 390 px, its maths typeset."""
    found = {}
    visit = Visit(browser, f"{server}/{ZH}/intro.html", width=PHONE)
    try:
        for page in zh_pages():
            visit.page.goto(f"{server}/{page}", wait_until="load")
            visit.wait_for_maths()
            found[page] = visit.page.evaluate(PAGE_JS, [SHORT, pair_pattern()])
    finally:
        visit.close()
    return found


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


# Paragraphs of ch 4 and ch 9 with Chinese emphasis and nothing taller than text (no maths, code,
# images): their height in lines of their line-height, which a line made taller makes fractional.
LINES_JS = """() => [...document.querySelectorAll('main p')]
  .filter(p => p.querySelector('em.zh-em') && !p.querySelector('mjx-container, .math, code, img, sup, sub'))
  .map(p => [p.textContent.slice(0, 20), p.getBoundingClientRect().height / parseFloat(getComputedStyle(p).lineHeight)])"""
UNDO_DOTS_FIX = "em.zh-em { display: inline } em.zh-em .zh-dot { display: inline; margin: 0 }"


@pytest.mark.parametrize("width", [PHONE, 1366])
def test_emphasis_dots_leave_the_lines_evenly_spaced(server, browser, width):
    """A line holding emphasis dots is as tall as any other: each paragraph with Chinese emphasis
    is a whole number of lines tall; and with the dots' boxes undone, the same check sees lines
    grow (it can fail)."""
    fractional, undone = [], []
    for chapter in ("04_gating", "09_attention"):
        visit = Visit(browser, f"{server}/{ZH}/chapters/{chapter}.html", width=width)
        try:
            lines = visit.page.evaluate(LINES_JS)
            assert lines, f"{chapter}: no paragraph with Chinese emphasis and no maths"
            fractional += [(chapter, text, round(n, 2)) for text, n in lines if abs(n - round(n)) > 0.05]
            visit.page.add_style_tag(content=UNDO_DOTS_FIX)
            undone += [n for _, n in visit.page.evaluate(LINES_JS) if abs(n - round(n)) > 0.05]
        finally:
            visit.close()
    assert fractional == [], f"paragraphs made taller by emphasis dots at {width} px: {fractional}"
    assert undone, "the check did not see the lines grow with the dots' boxes undone"


def test_short_inline_code_never_wraps_inside_itself(zh_layouts):
    problems = [f"{page}: {code!r}" for page, layout in zh_layouts.items() for code in layout["wrapped"]]
    assert problems == [], f"inline code of at most {SHORT} characters over two lines at {PHONE} px: " + "; ".join(problems)


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
