"""Sphinx extension for the book: the Chinese edition's interface and search (issue 32).

The theme's, Sphinx's and sphinx-exercise's zh_CN catalogues translate most of the interface;
this closes what they leave:

* **Interface strings.** ``_ext/locale/<language>/LC_MESSAGES/<domain>.po`` hold overrides of
  the ``sphinx`` domain (Sphinx and the PyData theme: "Link to this heading" and its kin, which
  Sphinx's zh_CN catalogue leaves empty, "Breadcrumb", "Color mode") and of sphinx-book-theme's
  ``booktheme`` domain (its zh_CN catalogue's Taiwan wording, 列印 for 打印). They are read ahead
  of the packages' catalogues (merged into the translator objects the templates already hold).
  They live under ``_ext/``, not ``locale/``: ``locale/`` holds one catalogue per page, which
  ``tools/po_check.py`` and the catalogue tests match against the extracted pages.
* **Settings the packages fix in English.** sphinx-togglebutton translates its hint when it is
  imported, before the language is known (and ships ``zh-cn``, not ``zh_CN``); Jupyter Book
  sets the search box's placeholder as a theme option; the book's title and author come from
  ``_config.yml``. They are set here per edition (``UI``). sphinx-book-theme writes its sidebar
  buttons' titles into two templates in English: ``_ext/templates-translated/`` has them
  through ``_()``, ahead of the theme's in a translated edition's ``templates_path``.
* **The parts' captions** in the sidebar (``ToctreeCaptions``).
* **Chinese search.** Sphinx's zh search segments text with jieba; ``html_search_options["dict"]``
  (the zh builds only; an absolute path, since Sphinx opens it from the current directory) is
  ``_ext/zh_search_dict.txt``, the glossary's Chinese terms (``tools/zh_search_dict.py``), so a
  term such as 梯度裁剪 is indexed whole and a reader's query for it finds its pages.
* **Chinese typography** (``_static/zh.css``, linked from the Chinese pages only; ``ChineseTypography``
  marks what it styles): an ``<em>`` holding Chinese is ``class="zh-em"``, drawn with emphasis dots
  (着重号), not a slanted imitation of an italic no CJK font has. It stays one inline element whose
  Chinese runs stay whole Text nodes, so search (jieba), find-in-page, line breaking (避头尾) and
  screen readers see words, not characters; a run of Latin letters or digits inside it is
  ``span.zh-latin`` (no dots, letters keep their italics); an ``<em>`` of Latin words alone,
  *et al.*, is untouched. A line holding dots is drawn a few pixels taller, as browsers do;
  inline code of at most ``SHORT_CODE`` characters is ``class="zh-short"`` and does not wrap inside
  itself; the first of two full-width punctuation marks that meet (``），`` ``。（`` ``，“``) is
  ``span.zh-pair`` (a stop, half an em narrower) or ``span.zh-pair-bracket`` (a bracket, a third of an
  em), as Chinese typesetting compresses such pairs (标点挤压): the
  fonts a reader may have (WenQuanYi Micro Hei on Debian) lack the ``halt``/``chws`` features that
  Chromium's ``text-spacing-trim`` needs.

The English build (language ``en``) is untouched: no class, no span, no ``zh.css``.
"""
from __future__ import annotations

import gettext
import io
import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx import locale as sphinx_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

HERE = Path(__file__).resolve().parent
CATALOGUES = HERE / "locale"
# sphinx-book-theme components whose English is written into the template, made translatable.
TEMPLATES = HERE / "templates-translated"
SEARCH_DICTIONARY = HERE / "zh_search_dict.txt"

UI = {
    "zh_CN": {
        "html_title": "注意力、序列模型与记忆",  # the book's title, as the sidebar and <title> show it
        "author": "本书作者",
        "search_bar_text": "搜索本书…",
        "togglebutton_hint": "点击显示",
        "togglebutton_hint_hide": "点击隐藏",
    },
}


# The Chinese edition's style sheet (_static/zh.css): Jupyter Book links every sheet of _static from
# every page, so the English edition drops it from its list (and from its build's _static).
ZH_SHEET = "zh.css"


def _language(config) -> str:
    return config.language or "en"


def read_catalogue(po: Path) -> gettext.GNUTranslations:
    """A .po file as a translations object (compiled in memory with Babel, Sphinx's own)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with po.open("rb") as handle:
        catalogue = read_po(handle)
    buffer = io.BytesIO()
    write_mo(buffer, catalogue)
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


def _config_inited(app, config):
    language = _language(config)
    if language.startswith("zh"):
        config.html_search_options = {**(config.html_search_options or {}),
                                      "dict": str(SEARCH_DICTIONARY)}
    sheets = [entry for entry in config.html_css_files
               if (entry[0] if isinstance(entry, tuple) else entry) != ZH_SHEET]
    # Last, after book.css and fit.css, whose rules it refines.
    config.html_css_files = sheets + [ZH_SHEET] if language.startswith("zh") else sheets
    settings = UI.get(language)
    if settings:
        config.html_title, config.author = settings["html_title"], settings["author"]
        if str(TEMPLATES) not in config.templates_path:
            config.templates_path = [str(TEMPLATES), *config.templates_path]
        config.html_theme_options = {**(config.html_theme_options or {}),
                                     "search_bar_text": settings["search_bar_text"]}
        for name in ("togglebutton_hint", "togglebutton_hint_hide"):
            if name in config:
                setattr(config, name, settings[name])


def _override_catalogues(app):
    """Our catalogues ahead of the packages': merged into the translator each domain already
    has (the templates hold a reference to the ``sphinx`` one), or installed if it has none."""
    folder = CATALOGUES / _language(app.config) / "LC_MESSAGES"
    for po in sorted(folder.glob("*.po")):
        ours = read_catalogue(po)
        key = ("general", po.stem)  # (namespace, catalogue), as sphinx.locale.init keys them
        existing = sphinx_locale.translators.get(key)
        if isinstance(existing, gettext.GNUTranslations):
            existing._catalog.update({k: v for k, v in ours._catalog.items() if k != ""})
        else:
            sphinx_locale.translators[key] = ours


class ToctreeCaptions(SphinxTransform):
    """The parts of ``_toc.yml`` ("Part I — Building blocks"), the sidebar's captions:
    sphinx-external-toc inserts its toctrees (priority 100) after Sphinx's translation step, so
    their captions stayed English; translated here from the page's catalogue, which has them."""

    default_priority = 101

    def apply(self, **kwargs):
        if _language(self.config) == "en":
            return
        from editions import translator_for

        toctrees = [node for node in self.document.findall(addnodes.toctree) if node.get("caption")]
        if not toctrees:
            return
        catalogue = translator_for(self.env, self.env.docname)
        for toctree in toctrees:
            text = catalogue.gettext(toctree["caption"])
            if text:
                toctree["caption"] = toctree["rawcaption"] = text


CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
# A run of Latin letters or digits (with + and the spaces and ASCII punctuation inside it) within
# Chinese emphasis: one span, drawn without dots (zh.css), the Chinese around it left whole.
LATIN_RUN = re.compile(r"[A-Za-z0-9\u00c0-\u024f+](?:[A-Za-z0-9\u00c0-\u024f+ .,'’-]*[A-Za-z0-9\u00c0-\u024f.+])?")
# Inline code of at most this many characters (a shape, a name) is not wrapped inside itself.
SHORT_CODE = 20
# Full-width marks in Chinese (simplified) fonts: stops and closing brackets have their ink on the
# left of their em box, opening brackets on the right.
STOPS, CLOSING, OPENING = "，。、：；", "）】》」』〉〕］｝", "（【《「『〈〔［｛"
# The first mark of a pair, followed by the second, gives up blank space (pair_class): a stop or
# closing bracket before any of these marks, a stop before an opening quotation mark (drawn by the
# Latin font, narrow), an opening bracket before another. Never ！？ (centred in some fonts), never a
# quotation mark first (its blank side depends on the font that draws it).
PAIR = re.compile("[%s%s](?=[%s%s%s])|[%s](?=[“‘])|[%s](?=[%s])" % (
    STOPS, CLOSING, STOPS, CLOSING, OPENING, STOPS, OPENING, OPENING))


def pair_class(mark: str) -> str:
    """``zh-pair`` for a stop (its ink in the left third of its em box in simplified-Chinese fonts:
    half an em is blank), ``zh-pair-bracket`` for a bracket, whose ink some fonts draw nearer the
    middle (WenQuanYi Micro Hei's ） leaves 0.38 em, its 。 0.02 em: half an em would make them touch)."""
    return "zh-pair" if mark in STOPS else "zh-pair-bracket"


# Text set as written (code, maths, raw HTML): never split. FixedTextElement covers literal_block,
# math_block and comment.
_NOT_PROSE = (nodes.literal, nodes.math, nodes.raw, nodes.FixedTextElement)


def _in_prose(text: nodes.Text) -> bool:
    node = text.parent
    while node is not None:
        if isinstance(node, _NOT_PROSE):
            return False
        node = node.parent
    return True


def _split(text: str, pattern: re.Pattern, make) -> list[nodes.Node]:
    """``text`` as Text nodes with each match of ``pattern`` made a node by ``make``."""
    parts, start = [], 0
    for match in pattern.finditer(text):
        if match.start() > start:
            parts.append(nodes.Text(text[start:match.start()]))
        parts.append(make(match.group(0)))
        start = match.end()
    if start < len(text):
        parts.append(nodes.Text(text[start:]))
    return parts


def _replace_text(text_node: nodes.Text, pattern: re.Pattern, make) -> None:
    if pattern.search(text_node.astext()):
        parent = text_node.parent
        index = parent.index(text_node)
        parent[index:index + 1] = _split(text_node.astext(), pattern, make)


class ChineseTypography(SphinxPostTransform):
    """The classes and spans ``_static/zh.css`` styles, in a Chinese edition's pages as they are
    written (after sphinx-exercise has built its titles, so exercise and solution titles too)."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs):
        if not _language(self.config).startswith("zh"):
            return
        for emphasis in list(self.document.findall(nodes.emphasis)):
            if CJK.search(emphasis.astext()):
                emphasis["classes"].append("zh-em")
                for text in list(emphasis.findall(nodes.Text)):
                    if _in_prose(text):
                        _replace_text(text, LATIN_RUN,
                                      lambda run: nodes.inline(run, run, classes=["zh-latin"]))
        for literal in self.document.findall(nodes.literal):
            if len(literal.astext()) <= SHORT_CODE:
                literal["classes"].append("zh-short")
        for text in list(self.document.findall(nodes.Text)):
            if _in_prose(text):
                _replace_text(text, PAIR, lambda mark: nodes.inline(mark, mark, classes=[pair_class(mark)]))


def _drop_english_zh_sheet(app, exception):
    """The English build's _static without zh.css (its pages never link it)."""
    if exception is None and app.builder.format == "html" and not _language(app.config).startswith("zh"):
        (Path(app.outdir) / "_static" / ZH_SHEET).unlink(missing_ok=True)


def setup(app):
    # Before sphinx-togglebutton's own handler (priority 500), which writes its hints into the pages.
    app.connect("config-inited", _config_inited, priority=400)
    app.connect("builder-inited", _override_catalogues)
    app.add_transform(ToctreeCaptions)
    app.add_post_transform(ChineseTypography)
    app.connect("build-finished", _drop_english_zh_sheet, priority=400)  # before page_assets' trimming
    return {"parallel_read_safe": True, "parallel_write_safe": True}
