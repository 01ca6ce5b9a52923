"""The built editions (``make book``): English in ``_build/html``, Chinese in ``_build/html/zh_CN``.

* Every page of each edition links, from its header, to the same page in the other edition.
* A Chinese page whose translation is complete (``locale/complete.txt``) shows no block of English
  prose (6 or more Latin words in a row with no Chinese) outside code, maths, outputs and the
  bibliography, and no markup left as text (``**``, a backtick, ``{role}``).
* No page's doctree holds the build environment (through a node of a parsed translation's
  document: ``_ext/translated_build.py``).
* Nor an image whose alt text is English: a plot's (its cell's ``mystnb.image.alt``), a diagram's,
  an explorer frame's (its title). An alt text with no Chinese ideograph and a Latin word is
  English, be it a plot's description or an explorer's one-word title; so is one with a run of
  English prose outside quotation marks, as in a paragraph (a half-translated alt text).

``BOOK_HTML`` names another build (its root, the English edition).
"""
import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
from bs4 import BeautifulSoup

from tests.i18n.test_catalogues import complete_pages

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
CHINESE = BUILD / "zh_CN"
CHINESE_DOCTREES = BUILD.parent / "zh_CN" / ".doctrees"  # tools/i18n.py builds into _build/zh_CN

CJK = "\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef"
LATIN_RUN = re.compile(r"(?:[A-Za-z][A-Za-z'’.-]*[^\w" + CJK + r"]+){5,}[A-Za-z][A-Za-z'’-]*")
LEFTOVER = re.compile(r"\*\*|`|\{[a-z][a-z:-]*\}")
QUOTED = re.compile(r"“[^”]*”|‘[^’]*’|「[^」]*」|《[^》]*》")
# What is not prose, or is shared with the English edition: code and its outputs, maths,
# bibliography entries, the explorers' own labels, print-only lines and the page's chrome.
NOT_PROSE = ["pre", "code", "script", "style", "svg", "math", ".math", "mjx-container", ".cell_output",
             ".output", ".highlight", ".citation", ".bibliography", "#bibliography", "dl.citation",
             ".book-explorer", ".book-print-only", ".headerlink", ".footnote", "img"]


def edition_pages(root: Path, exclude: Path | None = None) -> list[str]:
    """An edition's pages, less those that only redirect (``index.html``)."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html")
                  if not p.relative_to(root).parts[0].startswith("_")
                  and not (exclude and p.is_relative_to(exclude))
                  and 'http-equiv="Refresh"' not in p.read_text(encoding="utf-8")[:2000])


def switch_target(root: Path, page: str) -> Path | None:
    soup = BeautifulSoup((root / page).read_text(encoding="utf-8"), "html.parser")
    link = soup.select_one("a.book-language-switch")
    if link is None:
        return None
    href = urlparse(link["href"]).path
    return Path(os.path.normpath((root / page).parent / href))


def english_prose(html: str) -> list[str]:
    """Blocks of English prose and markup left as text in a page's article, each a short quote."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article") or soup
    for selector in NOT_PROSE:
        for node in article.select(selector):
            node.decompose()
    found = []
    for block in article.find_all(["p", "li", "h1", "h2", "h3", "h4", "figcaption", "caption", "td",
                                   "th", "dt", "dd", "span"]):
        if block.find(["p", "li", "div", "table"]):
            continue
        text = " ".join(block.get_text(" ").split())
        # English in Chinese quotation marks is quoted on purpose: example sentences the code scores,
        # strings a program prints, a paper's title
        quoted = QUOTED.sub(" ", text)
        for match in LATIN_RUN.finditer(quoted):
            found.append(f"English prose: {match.group()[:80]!r}")
        for match in LEFTOVER.finditer(text):
            found.append(f"markup left as text: {text[max(0, match.start() - 20):match.end() + 20]!r}")
    return sorted(set(found))


IDEOGRAPH = re.compile("[\u3400-\u9fff]")


def english_alts(html: str) -> list[str]:
    """The alt texts of a page's images (in its article) that are English, each a short quote.

    English: no Chinese character (an ideograph: full-width punctuation is no Chinese) outside
    quotation marks, which quote English on purpose, and a Latin word; or, Chinese or not, a run
    of English prose outside them as :func:`english_prose` finds it (a half-translated alt text).
    A Chinese alt text that quotes English words (the example sentence ch. 8's diagram scores)
    is Chinese."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article") or soup
    found = []
    for image in article.find_all("img"):
        alt = image.get("alt", "")
        unquoted = QUOTED.sub(" ", alt)
        if (not IDEOGRAPH.search(unquoted) and re.search(r"[A-Za-z]{2,}", unquoted)) or LATIN_RUN.search(unquoted):
            found.append(f"English alt text of <img class={' '.join(image.get('class', []))!r}>: "
                         f"{alt[:80]!r}")
    return found


@pytest.fixture(scope="module")
def built():
    if not (CHINESE / "intro.html").is_file():
        pytest.fail(f"the Chinese edition is not built ({CHINESE} has no intro.html): run `make book`")


def test_both_editions_have_the_same_pages(built):
    assert edition_pages(BUILD, exclude=CHINESE) == edition_pages(CHINESE)


@pytest.mark.parametrize("edition", ["en", "zh_CN"])
def test_every_page_switches_to_the_same_page_in_the_other_edition(built, edition):
    root, other = (BUILD, CHINESE) if edition == "en" else (CHINESE, BUILD)
    wrong = []
    for page in edition_pages(root, exclude=CHINESE if edition == "en" else None):
        target = switch_target(root, page)
        if target != other / page or not target.is_file():
            wrong.append(f"{page} -> {target}")
    assert not wrong, "\n".join(wrong[:20])


@pytest.mark.parametrize("page", complete_pages())
def test_complete_chinese_page_has_no_english_prose(built, page):
    found = english_prose((CHINESE / f"{page}.html").read_text(encoding="utf-8"))
    assert not found, f"zh_CN/{page}.html:\n" + "\n".join(found[:30])


@pytest.mark.parametrize("page", complete_pages())
def test_complete_chinese_page_has_no_english_alt_text(built, page):
    found = english_alts((CHINESE / f"{page}.html").read_text(encoding="utf-8"))
    assert not found, f"zh_CN/{page}.html:\n" + "\n".join(found)


# The checks above, shown to fail on planted pages.


def test_english_alt_texts_are_found():
    english = ['Two line plots. Top: rate per step against curvature from 0.5 to 24.',
               '两幅折线图。Top: rate per step against curvature from 0.5 to 24.',  # half translated
               'Loss against margin：',  # full-width punctuation is no Chinese
               'Heatmap',  # one English word
               '“the cat” against the mat',
               '上面是候选 the cat sat on the mat，下面是参考序列']  # an example sentence, unquoted
    chinese = ['两幅折线图。上图：每步收敛率随曲率（0.5 到 24）的变化。',
               '两行词框：上面是候选“the cat sat on the mat”，下面是参考序列',  # a quoted example
               '“where is the apple? the model says it is here”',  # English in quotation marks
               'BLEU 分解', '√d', 'K = 4', '']
    html = ('<img alt="Logo of the book"><article>'
            + "".join(f'<img class="book-explorer-frame" alt="{alt}">' for alt in english + chinese)
            + '<img></article>')
    found = english_alts(html)
    assert len(found) == len(english), found
    for alt, problem in zip(english, found):
        assert repr(alt[:80]) in problem and "'book-explorer-frame'" in problem, (alt, problem)


def test_english_prose_and_leftover_markup_are_found():
    html = ("<article><p>注意力机制 This sentence was never translated into Chinese.</p>"
            "<p>中文段落 **注意力** 以及 {term}`x`</p><pre>print('six latin words in a row here')</pre>"
            "<p>Vaswani 等人（2017）提出了 Transformer。</p></article>")
    found = english_prose(html)
    assert any("This sentence was never translated" in line for line in found), found
    assert sum("markup left as text" in line for line in found) >= 2, found
    assert not any("six latin words" in line or "Vaswani" in line for line in found), found


def test_a_wrong_or_missing_switch_is_found(tmp_path):
    (tmp_path / "zh_CN" / "chapters").mkdir(parents=True)
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "a.html").write_text(
        '<a class="book-language-switch" href="../zh_CN/chapters/b.html">中文</a>')
    (tmp_path / "zh_CN" / "chapters" / "a.html").write_text("<p>no switch</p>")
    assert switch_target(tmp_path, "chapters/a.html") == tmp_path / "zh_CN" / "chapters" / "b.html"
    assert switch_target(tmp_path / "zh_CN", "chapters/a.html") is None


def test_no_chinese_doctree_holds_the_build_environment():
    """A translated message is parsed as a document of its own, whose settings hold the build
    environment; no page's doctree keeps a node of it (_ext/translated_build.py)."""
    if not CHINESE_DOCTREES.is_dir() and "BOOK_HTML" in os.environ:
        pytest.skip(f"no Chinese doctrees beside BOOK_HTML ({CHINESE_DOCTREES})")
    doctrees = sorted(CHINESE_DOCTREES.rglob("*.doctree"))
    assert len(doctrees) >= 18, f"{CHINESE_DOCTREES} holds {len(doctrees)} doctrees"
    holding = [path.relative_to(CHINESE_DOCTREES).as_posix() for path in doctrees
               if b"BuildEnvironment" in path.read_bytes()]
    assert not holding, f"these doctrees hold the build environment: {holding}"
