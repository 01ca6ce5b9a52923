"""The Chinese edition as a reader meets it (issue 32): search, interface, font.

* **Search.** Every Chinese word of the glossary's Chinese forms is a term of the zh_CN
  edition's search index (jieba keeps it whole, given ``_ext/zh_search_dict.txt``, which
  ``tools/zh_search_dict.py`` makes from the glossary), and a query typed into the edition's
  search box finds the page that teaches it; the English search still finds English pages.
* **Interface.** The sampled zh_CN pages show none of the English interface strings the
  packages' catalogues leave (``_ext/edition_ui.py``): no header, sidebar or footer text, and no
  ``title``/``aria-label``/``placeholder``, made only of English words.
* **Font.** Chromium draws a zh_CN page's Chinese with a font that has Chinese glyphs (asked of
  Chromium itself, through the DevTools protocol), not the boxes of a font that has none.

The reader's checks of ``tests/book/test_book_html.py`` and ``tests/book/test_fit.py`` run on
``EDITION_SAMPLES`` of each edition too (``in_editions``). Needs ``_build/html`` with its
``zh_CN/`` (``make book``) and Debian's ``chromium`` with a CJK font (``make chromium``).
"""
import json
import re
import subprocess
from html.parser import HTMLParser

import pytest

from book_visits import BUILD, Visit  # (fixtures: tests/book/conftest.py)
from test_book_html import EDITION_SAMPLES, content_pages
from tools.zh_search_dict import (DICTIONARY, GLOSSARY, HAN, chinese_words, dictionary_text,
                                  glossary_forms)

pytestmark = pytest.mark.browser

ZH = "zh_CN"


def zh_build():
    if not (BUILD / ZH / "index.html").is_file():
        pytest.fail(f"the Chinese edition is not built ({BUILD / ZH} has no index.html): run `make book`")
    return BUILD / ZH


def test_every_english_page_has_its_chinese_page():
    missing = [page for page in content_pages() if not (zh_build() / page).is_file()]
    assert missing == [], f"pages with no Chinese edition: {missing}"


# --- search -------------------------------------------------------------------------------------


def search_index(folder) -> dict:
    text = (folder / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def glossary_words() -> list[str]:
    return sorted({word for form in glossary_forms(GLOSSARY.read_text(encoding="utf-8"))
                   for word in chinese_words(form)})


def test_the_search_dictionary_is_the_glossarys():
    """The committed dictionary is what the glossary gives; a changed glossary term shows."""
    glossary = GLOSSARY.read_text(encoding="utf-8")
    assert DICTIONARY.read_text(encoding="utf-8") == dictionary_text(glossary), \
        "stale: run python tools/zh_search_dict.py"
    changed = glossary.replace('<span lang="zh-Hans">注意力</span>', '<span lang="zh-Hans">关注度</span>')
    assert changed != glossary and dictionary_text(changed) != DICTIONARY.read_text(encoding="utf-8")


def test_the_glossary_words_are_split_as_the_search_box_splits_a_query():
    assert chinese_words("截断精度 (modified $n$-gram precision)") == ["截断精度"]
    assert chinese_words("编码器-解码器注意力") == ["编码器", "解码器注意力"]
    assert chinese_words("N 元模型") == ["元模型"] and chinese_words("熵") == []
    assert "梯度裁剪" in glossary_words() and "信息超载" in glossary_words()


def test_jieba_alone_would_split_glossary_terms():
    """Why the dictionary: jieba's own dictionary cuts many of the terms (a fresh tokenizer)."""
    import jieba

    plain = jieba.Tokenizer()
    split = [word for word in glossary_words() if word not in plain.lcut_for_search(word)]
    assert "梯度裁剪" in split and len(split) >= 20, split


def test_the_chinese_search_index_has_every_glossary_term():
    terms = search_index(zh_build())["terms"]
    missing = [word for word in glossary_words() if word not in terms]
    assert missing == [], f"{len(missing)} glossary terms are not search terms: {missing[:20]}"


def test_the_english_search_index_stays_english():
    """Sphinx's English splitter, not jieba: the glossary's Chinese is indexed as written (梯度裁剪
    after " / "), never cut into jieba's words (裁剪); and no Chinese page is in it."""
    index = search_index(BUILD)
    assert "attent" in index["terms"] and "梯度裁剪" in index["terms"] and "裁剪" not in index["terms"]
    assert all(not name.startswith(ZH) for name in index["docnames"])
    assert "裁剪" in search_index(zh_build())["terms"]


# A query typed into a page's search box, and the pages the search page lists for it.
QUERIES = [
    (f"{ZH}/intro.html", "注意力", f"{ZH}/chapters/09_attention.html"),
    (f"{ZH}/chapters/09_attention.html", "梯度裁剪", f"{ZH}/chapters/03_rnn.html"),
    ("intro.html", "attention", "chapters/09_attention.html"),
]


def search_results(visit, server, query: str) -> list[str]:
    """Type ``query`` into the page's search box as a reader does; the pages found, in order."""
    page = visit.page
    page.keyboard.press("Control+k")  # the theme's shortcut opens its search dialog
    box = page.locator("input[name='q']:visible").first
    box.wait_for(state="visible", timeout=3000)
    box.fill(query)
    box.press("Enter")
    page.wait_for_url(re.compile(r"search\.html\?q="), timeout=5000)
    page.wait_for_function("() => { const s = document.querySelector('#search-results p.search-summary');"
                           " return s && s.textContent.trim().length > 0; }", timeout=20000)
    hrefs = page.eval_on_selector_all("#search-results ul.search li a:first-of-type",
                                      "links => links.map(a => a.href)")
    pages = [re.sub(r"^https?://[^/]+/", "", href).split("#")[0].split("?")[0] for href in hrefs]
    return list(dict.fromkeys(pages))  # each page once (a glossary entry and its page both match)


@pytest.mark.parametrize("start, query, expected", QUERIES)
def test_a_query_typed_into_the_search_box_finds_its_page(server, browser, start, query, expected):
    zh_build()
    visit = Visit(browser, f"{server}/{start}")
    try:
        found = search_results(visit, server, query)
        assert expected in found[:5], f"{query!r} from {start}: {found[:8]}"
        edition = start.split("/")[0] + "/" if start.startswith(ZH) else ""
        assert all(page.startswith(ZH) == bool(edition) for page in found), found
        assert visit.errors == [] and visit.foreign_requests() == []
    finally:
        visit.close()


# --- the interface ------------------------------------------------------------------------------


class Interface(HTMLParser):
    """A page's interface text: its text and its ``title``, ``aria-label`` and ``placeholder``
    attributes outside ``<article>`` (the translated content, whose citations' titles and
    explorers' labels may stay as written), scripts, styles, code and the language switch
    (which names the other edition in its own language)."""

    ATTRIBUTES = ("title", "aria-label", "placeholder")
    SKIP = {"script", "style", "pre", "code", "article", "svg", "math", "noscript"}
    VOID = {"meta", "link", "img", "input", "br", "hr", "source", "wbr", "col", "area", "embed", "track"}

    def __init__(self):
        super().__init__()
        self.stack, self.texts = [], []  # (tag, whether it starts a skipped region)

    def skipping(self) -> bool:
        return any(skip for _, skip in self.stack)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        skip = tag in self.SKIP or "book-language-switch" in (attrs.get("class") or "")
        if not (skip or self.skipping()):
            self.texts += [attrs[name] for name in self.ATTRIBUTES if attrs.get(name)]
        if tag not in self.VOID:
            self.stack.append((tag, skip))

    def handle_endtag(self, tag):
        if any(open_tag == tag for open_tag, _ in self.stack):
            while self.stack and self.stack.pop()[0] != tag:
                pass

    def handle_data(self, data):
        if data.strip() and not self.skipping():
            self.texts.append(data.strip())


# Names and symbols that stay as they are in the Chinese edition.
NOT_ENGLISH = {"PDF", "GitHub", "Colab", "Binder", "JupyterLab", "Sphinx", "PyData", "Jupyter", "Book",
               "Theme", "Copyright", "ipynb", "md", "pdf", "CC", "BY", "SA"}


def english_interface(html: str) -> list[str]:
    """The interface texts of ``html`` that are English: two or more Latin words, no Chinese."""
    parser = Interface()
    parser.feed(html)
    found = []
    for text in parser.texts:
        text = re.sub(r"\\\(.*?\\\)", "", text)  # inline maths in a heading (the page's outline)
        words = [w for w in re.findall(r"[A-Za-z][A-Za-z'’-]*", text) if w not in NOT_ENGLISH]
        if len(words) >= 2 and not HAN.search(text):
            found.append(text[:60])
    return sorted(set(found))


# JavaScript strings the packages write into the page (sphinx-togglebutton's hints).
ENGLISH_IN_SCRIPTS = ["Click to show", "Click to hide", "Search this book", "Link to this", "列印"]


@pytest.mark.parametrize("page", EDITION_SAMPLES)
def test_the_chinese_interface_has_no_english_strings(page):
    html = (zh_build() / page).read_text(encoding="utf-8")
    assert english_interface(html) == [], f"{ZH}/{page}: English interface text"
    assert [s for s in ENGLISH_IN_SCRIPTS if s in html] == [], f"{ZH}/{page}: English interface strings"


def test_the_interface_check_sees_english():
    """The check above finds the English edition's interface, and passes Chinese with names."""
    english = english_interface((BUILD / "chapters" / "09_attention.html").read_text(encoding="utf-8"))
    assert any("Search this book" in text for text in english)
    assert "Toggle primary sidebar" in english and "Part I — Building blocks" in english
    assert english_interface('<a title="在 GitHub 上打开">x</a><p>打印为 PDF</p>') == []
    assert english_interface('<button aria-label="Toggle navigation"></button>') == ["Toggle navigation"]
    assert english_interface('<article><p>Attention is all</p><a title="A. Vaswani, N. Shazeer">[1]</a>'
                             '</article><a class="book-language-switch">English edition</a>') == []


# --- the font -----------------------------------------------------------------------------------


def cjk_families() -> set[str]:
    """The font families fontconfig knows with Chinese glyphs (every name of each)."""
    listed = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout
    return {name.strip() for line in listed.splitlines() for name in line.split(",") if name.strip()}


# Marks the first shown element of a selector whose own text (its text children) has Chinese; that text.
PROBE = """selector => {
  const own = e => [...e.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('');
  const element = [...document.querySelectorAll(selector)]
    .find(e => e.getClientRects().length && /[\\u4e00-\\u9fff]/.test(own(e)));
  if (!element) return null;
  element.setAttribute('data-font-probe', '');
  return own(element);
}"""


def platform_fonts(visit, selector: str) -> tuple[str, list[dict]]:
    """The own text of the first ``selector`` with Chinese, and the fonts Chromium drew it with
    (each family and its glyph count), from the DevTools protocol."""
    text = visit.page.evaluate(PROBE, selector)
    assert text, f"no {selector} with Chinese text"
    cdp = visit.context.new_cdp_session(visit.page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "[data-font-probe]"})["nodeId"]
    return text, cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]


def chinese_drawn_by(text: str, fonts: list[dict], families: set[str]) -> tuple[int, int]:
    """(Chinese characters in ``text``, glyphs drawn by fonts in ``families``)."""
    return len(HAN.findall(text)), sum(f["glyphCount"] for f in fonts if f["familyName"] in families)


FONT_SELECTORS = ["main article p", "main article h1", "nav.bd-docs-nav a"]


@pytest.fixture(scope="module")
def drawn_fonts(browser, server) -> dict[str, tuple]:
    """:func:`platform_fonts` of each of FONT_SELECTORS on the Chinese chapter 9, in one visit (each probe's mark
    taken off before the next)."""
    zh_build()
    drawn = {}
    visit = Visit(browser, f"{server}/{ZH}/chapters/09_attention.html")
    try:
        visit.page.evaluate("() => document.fonts.ready")
        for selector in FONT_SELECTORS:
            drawn[selector] = platform_fonts(visit, selector)
            visit.page.evaluate("() => document.querySelectorAll('[data-font-probe]')"
                                ".forEach(e => e.removeAttribute('data-font-probe'))")
    finally:
        visit.close()
    return drawn


@pytest.mark.parametrize("selector", FONT_SELECTORS)
def test_chinese_text_is_drawn_with_a_chinese_font(drawn_fonts, selector):
    families = cjk_families()
    assert families, "fontconfig has no font with Chinese glyphs: run `make chromium` (fonts-wqy-microhei)"
    text, fonts = drawn_fonts[selector]
    chinese, cjk_glyphs = chinese_drawn_by(text, fonts, families)
    assert chinese > 0 and cjk_glyphs >= chinese, f"{selector}: {chinese} Chinese characters, fonts {fonts}"


def test_the_font_check_sees_a_font_without_chinese():
    fonts = [{"familyName": "DejaVu Sans", "glyphCount": 12, "isCustomFont": False}]
    assert chinese_drawn_by("注意力 attention", fonts, {"WenQuanYi Micro Hei"}) == (3, 0)
    fonts.append({"familyName": "WenQuanYi Micro Hei", "glyphCount": 3, "isCustomFont": False})
    assert chinese_drawn_by("注意力 attention", fonts, {"WenQuanYi Micro Hei"}) == (3, 3)
