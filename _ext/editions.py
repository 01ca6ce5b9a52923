"""Sphinx extension for the book: one source, two editions (issue 32).

The English pages are the source; the Chinese edition is the same build with
``language: zh_CN`` and the gettext catalogues of ``locale/`` (``tools/i18n.py build``,
``make book``). Sphinx's own i18n route leaves gaps this extension closes:

* **Language switch.** A link near the top of every page's sidebar (a drawer on a phone) to the
  same page in the other edition (``EDITIONS``: each edition's folder under the English root).
* **Glue in translations.** Sphinx re-parses a translated message in a fresh document that
  has no notebook behind it, so ``{glue:text}`key``` found no data and rendered empty. The
  glue roles of a notebook's page now fall back to myst-nb's cross-document form
  (``09_attention.ipynb::key``), which it resolves after reading from the page's own glue data.
* **Exercise titles.** sphinx-exercise builds the title of ``:::{exercise} Title`` without a
  source, so gettext never extracted it (sphinx-exercise #13, #73); it now carries its
  directive's source, line and raw text, and is extracted and translated like a heading (the
  solution's title, built from sphinx-exercise's own copy of the exercise, too).
* **Explorer captions.** ``_ext/explorers.py`` makes them after Sphinx's translation step; they
  are given a source here (so they are extracted) and translated from the page's catalogue.
* **Alt texts of plots and explorers.** A plot's alt text (a code cell's ``mystnb.image.alt``) is
  an image node's ``alt``, which Sphinx translates, but the gettext builder renders a cell's output
  as its ``text/plain``, so the image, and its alt, never reached the catalogue; each one is now
  extracted (:class:`AltTextsForGettext`). An explorer's frame takes its alt from the explorer's
  title inside the player's HTML (``lib.widgets.core``); the title is extracted, and the Chinese
  edition's frame shows its translation (the frame's pixels, the explorer's labels, stay shared).
* **No maths, no outputs in the catalogues.** Display maths and every node inside a cell's
  output (the Benchmarks page's tables, for one) are marked not translatable: they are shared.
* **Broken markup is a warning.** A translated message that renders a backtick, ``**`` or a
  ``{role}`` as text (an odd backtick, emphasis CommonMark will not close next to Chinese
  punctuation, a role with a typo) logs a warning naming page and message; ``make book`` runs
  with warnings as errors.

Hooks for later work (part B of issue 32): ``EDITIONS`` lists the editions; the
switch is the template ``_ext/templates/book-language-switch.html`` (class
``book-language-switch``); :func:`edition_of` tells an extension which edition it builds.
"""
from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain

logger = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent

# Each edition: its folder under the English edition's root, its label in the switch
# (in its own language), its HTML language tag and the switch's tooltip.
EDITIONS = {
    "en": {"folder": "", "label": "English edition", "hreflang": "en", "title": "This page in English"},
    "zh_CN": {"folder": "zh_CN", "label": "中文版", "hreflang": "zh-Hans", "title": "本页的中文版"},
}

OUTPUT_ELEMENTS = {"cell_code_output", "mime_bundle"}
NOT_PROSE = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.raw,
             nodes.FixedTextElement)
LEFTOVER = [
    (re.compile(r"\{[A-Za-z][\w:-]*\}"), "a role shows as text"),
    (re.compile(r"`"), "a backtick shows as text"),
    (re.compile(r"\*\*"), "'**' shows as text"),
    (re.compile(r"(?<![A-Za-z0-9*])\*(?=\S)[^*]*\S\*(?![A-Za-z0-9*])"), "'*...*' shows as text"),
]


def edition_of(config) -> str:
    """The edition a build makes: ``en`` or one of ``EDITIONS`` (its ``language``)."""
    language = config.language or "en"
    return language if language in EDITIONS else "en"


# --- the language switch ----------------------------------------------------------------------


def other_editions(pagename: str, edition: str) -> list[dict]:
    """Links from ``pagename`` of ``edition`` to the same page in every other edition."""
    depth = pagename.count("/") + (EDITIONS[edition]["folder"].count("/") + 1
                                   if EDITIONS[edition]["folder"] else 0)
    links = []
    for code, other in EDITIONS.items():
        if code == edition:
            continue
        folder = other["folder"] + "/" if other["folder"] else ""
        links.append({**other, "code": code, "href": "../" * depth + folder + pagename + ".html"})
    return links


def _language_switch(app, pagename, templatename, context, doctree):
    context["book_other_editions"] = other_editions(pagename, edition_of(app.config))
    context["book_switch_aria"] = "其他语言版本" if edition_of(app.config) != "en" else "Other editions"


# The theme's primary sidebar (sphinx-book-theme's theme.conf); the switch goes under the title.
# Not the header: at 390 px its buttons already fill the row, one more scrolls the page sideways.
THEME_SIDEBAR = ["navbar-logo.html", "icon-links.html", "search-button-field.html", "sbt-sidebar-nav.html"]


def _add_switch_to_sidebar(app, config):
    templates = str(HERE / "templates")
    if templates not in config.templates_path:
        config.templates_path.append(templates)
    sidebars = dict(config.html_sidebars or {})
    items = list(sidebars.get("**", THEME_SIDEBAR))
    if "book-language-switch.html" not in items:
        items.insert(items.index("navbar-logo.html") + 1 if "navbar-logo.html" in items else 0,
                     "book-language-switch.html")
    sidebars["**"] = items
    config.html_sidebars = sidebars


# --- glue inside a translated message ---------------------------------------------------------


def _glue_from_own_notebook(run, with_format: bool):
    """Wrap a glue role's ``run``: in a document without a notebook (a translated message),
    read the key from the page's own notebook through myst-nb's ``path::key`` form."""

    def wrapped(self):
        env = getattr(self.document.settings, "env", None)
        if "nb_renderer" not in self.document and "::" not in self.text and env is not None:
            path = Path(env.doc2path(env.docname))
            if path.suffix == ".ipynb":
                key, _, fmt = self.text.partition(":")
                self.text = f"{path.name}::{key}" + (f":{fmt or 's'}" if with_format else "")
        return run(self)

    wrapped.book_i18n = True
    return wrapped


def _patch_glue():
    from myst_nb.ext.glue import roles

    if getattr(roles.PasteTextRole.run, "book_i18n", False):
        return
    roles.PasteTextRole.run = _glue_from_own_notebook(roles.PasteTextRole.run, True)
    roles.PasteRoleAny.run = _glue_from_own_notebook(roles.PasteRoleAny.run, False)


# --- exercise titles --------------------------------------------------------------------------


def _patch_exercise_titles():
    from sphinx_exercise.directive import ExerciseDirective
    from sphinx_exercise.nodes import exercise_subtitle

    if getattr(ExerciseDirective.run, "book_i18n", False):
        return
    original = ExerciseDirective.run

    def run(self):
        result = original(self)
        if self.arguments:
            source, line = self.get_source_info()
            for node in result:
                for subtitle in node.findall(exercise_subtitle):
                    subtitle.rawsource = self.arguments[0]
                    subtitle.source, subtitle.line = source, line
        return result

    run.book_i18n = True
    ExerciseDirective.run = run


class ExerciseTitlesForGettext(SphinxPostTransform):
    """For the gettext builder only: sphinx-exercise's post-transform (priority 20) moves a
    title's words into a new title node without a source, which gettext would skip; a copy of
    each titled exercise's subtitle, kept next to its title, is what gettext extracts."""

    default_priority = 19
    builders = ("gettext",)

    def run(self, **kwargs):
        from sphinx_exercise.nodes import exercise_subtitle

        for subtitle in list(self.document.findall(exercise_subtitle)):
            if subtitle.source and subtitle.rawsource:
                copy = subtitle.deepcopy()
                copy.source, copy.line = subtitle.source, subtitle.line
                copy.uid = getattr(subtitle, "uid", "")  # gettext's catalogue skips a node without one
                subtitle.parent.parent.insert(1, copy)


class TranslatedExerciseRegistry(SphinxTransform):
    """After Locale (20): sphinx-exercise keeps a copy of each exercise, made before translation,
    from which it titles the exercise's solution ("Solution to Exercise 9.1 (title)"); give it the
    translated exercise instead."""

    default_priority = 22

    def apply(self, **kwargs):
        from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node

        registry = getattr(self.env, "sphinx_exercise_registry", {})
        if edition_of(self.config) == "en" or not registry:
            return
        for node in self.document.findall(lambda n: isinstance(n, (exercise_node, exercise_enumerable_node))):
            entry = registry.get(node.get("label"))
            if entry is not None and entry.get("docname") == self.env.docname:
                entry["node"] = node.deepcopy()


# --- what is not prose ------------------------------------------------------------------------


class SharedNotTranslated(SphinxTransform):
    """Display maths and everything inside a cell's output are shared by the editions: not
    extracted into the catalogues, never translated. Runs before Sphinx's Locale (20)."""

    default_priority = 15

    def apply(self, **kwargs):
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False
        for container in self.document.findall(nodes.container):
            if container.get("nb_element") in OUTPUT_ELEMENTS:
                for node in container.findall(nodes.TextElement):
                    if not _in_caption(node, container):
                        node["translatable"] = False


def _in_caption(node, top) -> bool:
    """Whether ``node`` is (inside) a figure's caption or legend below ``top``: a cell's figure
    caption (cell metadata) is prose, the rest of the output is not."""
    while node is not None and node is not top:
        if isinstance(node, (nodes.caption, nodes.legend)):
            return True
        node = node.parent
    return False


# --- explorer captions ------------------------------------------------------------------------


def translator_for(env, docname: str):
    """The page's catalogue (a ``gettext`` translations object) in the language built."""
    dirs = [str(Path(env.srcdir) / d) for d in env.config.locale_dirs]
    domain = docname_to_domain(docname, env.config.gettext_compact)
    catalogue, _ = init_locale(dirs, env.config.language, domain)
    return catalogue


class ExplorerCaptions(SphinxTransform):
    """Explorer figures (made by ``_ext/explorers.py`` at priority 500, after Locale): give each
    caption a source so gettext extracts it; in a translated edition, show the catalogue's
    translation of the caption, and of the explorer's title as its frame's alt text
    (:func:`translate_explorer_alt`)."""

    default_priority = 510

    def apply(self, **kwargs):
        figures = [figure for figure in self.document.findall(nodes.figure)
                   if "book-explorer-figure" in figure["classes"]]
        if not figures:
            return
        translate = edition_of(self.config) != "en"
        catalogue = translator_for(self.env, self.env.docname) if translate else None
        for figure in figures:
            if catalogue is not None:
                translate_explorer_alt(figure, catalogue)
            for caption in figure.findall(nodes.caption):
                caption.source = caption.source or self.document["source"]
                caption.line = caption.line or 1
                caption.rawsource = caption.rawsource or caption.astext()
                if catalogue is None:
                    continue
                text = catalogue.gettext(caption.rawsource)
                if text and text != caption.rawsource:
                    caption.children = []
                    caption += nodes.Text(text)
                    caption["translated"] = True


# --- alt texts: plots' and explorers' ------------------------------------------------------------

# The static player's frame (``Explorer.to_html`` in lib.widgets.core), its attributes in any order,
# and the alt attribute inside it: the explorer's title, HTML-escaped.
EXPLORER_FRAME = re.compile(r'<img\s[^>]*(?<=\s)class="book-explorer-frame"[^>]*>')
ALT = re.compile(r'(?<=\s)alt="([^"]*)"')


def _mime_children(bundle, prefix: str):
    return [child for child in bundle.children if child.get("mime_type", "").startswith(prefix)]


def translate_explorer_alt(figure: nodes.figure, catalogue) -> None:
    """Give the frame of the static player in an explorer figure the translation of the explorer's
    title (the figure's ``explorer_title``, set by ``_ext/explorers.py``) from ``catalogue`` as its
    alt text. The player is raw HTML made by ``lib.widgets.core``, whose frame's alt is the title.
    A figure with no frame whose alt is its title is a warning (the build fails): the frame would
    keep its English alt unseen."""
    title = figure.get("explorer_title")
    english = html.escape(title or "")
    rewritten = False

    def translated(frame: re.Match) -> str:
        nonlocal rewritten
        tag, alt = frame.group(), ALT.search(frame.group())
        if not title or alt is None or alt.group(1) != english:
            return tag
        rewritten = True
        return tag[: alt.start(1)] + html.escape(catalogue.gettext(title) or title) + tag[alt.end(1) :]

    for raw in list(figure.findall(nodes.raw)):
        text = raw.astext()
        new = EXPLORER_FRAME.sub(translated, text)
        if new != text:
            raw.replace(raw.children[0], nodes.Text(new))
            raw.rawsource = new
    if not rewritten:
        logger.warning("explorer figure %r: no frame (<img class=\"book-explorer-frame\">) whose alt "
                       "is its title; its alt text is not translated", title, location=figure)


class AltTextsForGettext(SphinxPostTransform):
    """For the gettext builder only, before myst-nb's ``SelectMimeType`` (priority 4), which keeps
    an output's ``text/plain`` for gettext and drops its image: a copy of each output image that has
    an alt text (a plot's ``mystnb.image.alt``), and an image whose alt is the explorer's title for
    each explorer figure, is put beside the output, where gettext extracts the alt."""

    default_priority = 3
    builders = ("gettext",)

    def run(self, **kwargs):
        for bundle in list(self.document.findall(nodes.container)):
            if bundle.get("nb_element") != "mime_bundle":
                continue
            for child in _mime_children(bundle, "image/"):
                for image in child.findall(nodes.image):
                    if image.get("alt"):
                        bundle.parent.insert(bundle.parent.index(bundle), self._message(image["alt"], bundle))
        for figure in list(self.document.findall(nodes.figure)):
            if "book-explorer-figure" in figure["classes"]:
                title = figure.get("explorer_title")
                if not title:
                    logger.warning("explorer figure without a title (explorer_title): its frame's "
                                   "alt text is not extracted", location=figure)
                    continue
                figure.insert(0, self._message(title, figure))

    def _message(self, alt: str, near: nodes.Element) -> nodes.image:
        image = nodes.image(uri="", alt=alt)
        image.source, image.line = near.source or self.document["source"], near.line or 1
        image.uid = ""  # gettext's catalogue skips a node without one
        return image


# --- broken markup in a translation -----------------------------------------------------------


def leftover_markup(node: nodes.Node) -> list[str]:
    """What of a translated node's markup renders as text: each a short description."""
    found = []
    for text in node.findall(nodes.Text):
        parent, skip = text.parent, False
        while parent is not None:
            if isinstance(parent, NOT_PROSE):
                skip = True
                break
            parent = parent.parent
        if skip:
            continue
        for pattern, what in LEFTOVER:
            match = pattern.search(str(text))
            if match:
                start = max(0, match.start() - 12)
                found.append(f"{what}: {str(text)[start:match.end() + 12]!r}")
    return found


class TranslatedMarkupCheck(SphinxTransform):
    """After Locale (20): a translated message whose markup broke is a warning, not silent."""

    default_priority = 21

    def apply(self, **kwargs):
        if edition_of(self.config) == "en":
            return
        for node in self.document.findall(nodes.Element):
            if not node.get("translated"):
                continue
            for problem in leftover_markup(node):
                logger.warning("translated message: %s (fix its msgstr in locale/%s/LC_MESSAGES/%s.po)",
                               problem, self.config.language, self.env.docname,
                               location=node, type="i18n", subtype="markup")


# --- the Chinese edition reuses the English edition's plots -------------------------------------


def _reuse_english_images(app, exception):
    """In a translated edition, take each plot's palette PNG from the English build (same name:
    myst-nb names images by a hash of their content) instead of quantising it again
    (``_ext/palette_images.py`` skips a palette image). Connected before palette_images."""
    if exception is not None or app.builder.format != "html" or edition_of(app.config) == "en":
        return
    english = Path(app.srcdir) / "_build" / "html" / "_images"
    for image in (Path(app.outdir) / "_images").glob("*.png"):
        ready = english / image.name
        if ready.is_file():
            shutil.copy2(ready, image)


def _config_inited(app, config):
    if edition_of(config) != "en":
        config.html_context = {**config.html_context, "book_edition": edition_of(config)}
    _add_switch_to_sidebar(app, config)


def setup(app):
    _patch_glue()
    _patch_exercise_titles()
    app.connect("config-inited", _config_inited)
    app.connect("html-page-context", _language_switch)
    app.connect("build-finished", _reuse_english_images)
    app.add_transform(SharedNotTranslated)
    app.add_post_transform(ExerciseTitlesForGettext)
    app.add_post_transform(AltTextsForGettext)
    app.add_transform(ExplorerCaptions)
    app.add_transform(TranslatedMarkupCheck)
    app.add_transform(TranslatedExerciseRegistry)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
