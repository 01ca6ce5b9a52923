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

The English build (language ``en``) is untouched.
"""
from __future__ import annotations

import gettext
import io
from pathlib import Path

from sphinx import addnodes
from sphinx import locale as sphinx_locale
from sphinx.transforms import SphinxTransform

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


def setup(app):
    # Before sphinx-togglebutton's own handler (priority 500), which writes its hints into the pages.
    app.connect("config-inited", _config_inited, priority=400)
    app.connect("builder-inited", _override_catalogues)
    app.add_transform(ToctreeCaptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
