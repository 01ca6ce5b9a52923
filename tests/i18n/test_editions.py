"""_ext/editions.py's pure parts: where the language switch points, what counts as broken markup,
which alt texts gettext extracts and how the Chinese edition puts their translations in."""
import html
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
import editions  # noqa: E402  (_ext/ is Sphinx's local extension folder, not a package)


@pytest.mark.parametrize("page, edition, href", [
    ("intro", "en", "zh_CN/intro.html"),
    ("chapters/09_attention", "en", "../zh_CN/chapters/09_attention.html"),
    ("intro", "zh_CN", "../intro.html"),
    ("chapters/09_attention", "zh_CN", "../../chapters/09_attention.html"),
    ("backmatter/glossary", "zh_CN", "../../backmatter/glossary.html"),
])
def test_the_switch_points_at_the_same_page_of_the_other_edition(page, edition, href):
    (link,) = editions.other_editions(page, edition)
    assert link["href"] == href
    assert link["code"] == ("zh_CN" if edition == "en" else "en")


def _paragraph(*children):
    paragraph = nodes.paragraph()
    for child in children:
        paragraph += child
    return paragraph


@pytest.mark.parametrize("text, what", [
    ("最大池化保留最强的响应，**“门控”**决定", "'**' shows as text"),
    ("调用 `f(x) 的结果", "a backtick shows as text"),
    ("见 {numref}图 9.1", "a role shows as text"),
    ("这是*“斜体”*文字", "'*...*' shows as text"),
])
def test_markup_left_as_text_is_found(text, what):
    found = editions.leftover_markup(_paragraph(nodes.Text(text)))
    assert any(what in problem for problem in found), found


def test_markup_inside_code_and_maths_is_not_prose():
    paragraph = _paragraph(nodes.Text("调用 "), nodes.literal("`x` ** 2", "`x` ** 2"),
                           nodes.Text(" 与 "), nodes.math("a^{**}", "a^{**}"), nodes.Text("。"))
    assert editions.leftover_markup(paragraph) == []


def test_rendered_emphasis_is_not_markup():
    paragraph = _paragraph(nodes.Text("“"), nodes.strong("注意力", "注意力"), nodes.Text("”机制"))
    assert editions.leftover_markup(paragraph) == []


# --- alt texts: a plot's (cell metadata mystnb.image.alt) and an explorer's (its title) -----------

PLOT_ALT = "Two line plots. Top: rate per step against curvature from 0.5 to 24."


def _cell_output(*mime_children) -> nodes.container:
    """A cell's output as myst-nb reads it: a mime bundle with one container per mime type."""
    bundle = nodes.container(nb_element="mime_bundle")
    for mime_type, child in mime_children:
        holder = nodes.container(mime_type=mime_type)
        holder += child
        bundle += holder
    output = nodes.container(nb_element="cell_code_output")
    output += bundle
    return output


def _page(*children) -> nodes.document:
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    document = new_document("chapters/02_optimisers.ipynb", get_default_settings(Parser))
    for child in children:
        document += child
    return document


def _as_gettext_sees_it(document: nodes.document) -> list[str]:
    """Keep each mime bundle's text/plain only, as myst-nb's SelectMimeType does for gettext
    (its priority list has no image type), then put what Sphinx extracts into a catalogue as its
    gettext builder does (``Catalog.add``, which skips a node without a ``uid``)."""
    from sphinx.builders.gettext import Catalog
    from sphinx.util.nodes import extract_messages

    for bundle in list(document.findall(lambda n: isinstance(n, nodes.container)
                                        and n.get("nb_element") == "mime_bundle")):
        plain = [child for child in bundle.children if child["mime_type"] == "text/plain"]
        bundle.replace_self(plain[0].children if plain else [])
    catalogue = Catalog()
    for node, message in extract_messages(document):
        catalogue.add(message, node)
    return [message.text for message in catalogue]


def test_a_plots_alt_text_is_extracted_for_gettext():
    image = nodes.image(uri="plot.png", alt=PLOT_ALT)
    plain = nodes.literal_block("<Figure size 640x480 with 2 Axes>", "<Figure size 640x480 with 2 Axes>")
    document = _page(_cell_output(("image/png", image), ("text/plain", plain)))
    editions.AltTextsForGettext(document).run()
    assert PLOT_ALT in _as_gettext_sees_it(document)
    # without the extension's transform, gettext never sees the image, so never its alt
    document = _page(_cell_output(("image/png", image.deepcopy()), ("text/plain", plain.deepcopy())))
    assert PLOT_ALT not in _as_gettext_sees_it(document)


def test_the_gettext_builder_runs_the_alt_text_extraction_before_myst_nb_selects_a_mime_type():
    from myst_nb.sphinx_ import SelectMimeType

    registered = []

    class App:
        def __getattr__(self, name):
            return lambda *args, **kwargs: registered.append((name, args))

    editions.setup(App())
    assert ("add_post_transform", (editions.AltTextsForGettext,)) in registered
    assert editions.AltTextsForGettext.builders == ("gettext",)
    assert editions.AltTextsForGettext.default_priority < SelectMimeType.default_priority


TITLE = 'Why scale by √d: <"q·k"> & more'  # what HTML must escape, in an alt and in its translation


def _explorer_output(title: str, frame: str | None = None):
    """An explorer's output: its text/plain (``Explorer.describe``) and, when ``frame`` is given
    (an <img> tag), a static player's HTML around it."""
    plain = f"Explorer: {title} — rows ∈ {{1, 2}}"
    children = [("text/plain", nodes.literal_block(plain, plain))]
    if frame is not None:
        player = f'<div class="book-explorer">{frame}<script>/* player */</script></div>'
        children.insert(0, ("text/html", nodes.raw(player, player, format="html")))
    return _cell_output(*children)


def _frame(alt: str) -> str:
    """The frame's tag as ``lib.widgets.core`` writes it (class first, then the escaped alt)."""
    return (f'<img class="book-explorer-frame" alt="{html.escape(alt)}" width="600" height="400" '
            'src="data:image/webp;base64,AAAA">')


def _explorer_page(monkeypatch, title: str, frame: str | None = None) -> nodes.document:
    """A page holding one explorer's output after ``_ext/explorers.py``'s ExplorerFigures."""
    import explorers
    from lib.widgets.core import Visual

    visual = type("ScalingExplorer", (Visual,), {"title": title, "caption": "A caption."})
    monkeypatch.setattr(explorers, "_visuals", lambda: {title: visual})
    document = _page(_explorer_output(title, frame))
    document.settings.env = SimpleNamespace(docname="chapters/09_attention",
                                            config=SimpleNamespace(language="zh_CN"))
    explorers.ExplorerFigures(document).apply()
    return document


def _figure(document) -> nodes.figure:
    (figure,) = document.findall(nodes.figure)
    return figure


def test_explorer_figures_keep_the_explorers_title(monkeypatch):
    assert _figure(_explorer_page(monkeypatch, TITLE))["explorer_title"] == TITLE


def test_an_explorers_title_its_frames_alt_text_is_extracted_for_gettext(monkeypatch):
    document = _explorer_page(monkeypatch, TITLE)
    editions.AltTextsForGettext(document).run()
    assert TITLE in _as_gettext_sees_it(document)
    # without the extension's transform, gettext extracts the caption only (it has no uid here)
    assert TITLE not in _as_gettext_sees_it(_explorer_page(monkeypatch, TITLE))


class _Catalogue:
    def __init__(self, translations):
        self.translations = translations

    def gettext(self, message):
        return self.translations.get(message, message)


CHINESE = '为什么按 √d 缩放：<"q·k"> 及其他'


@pytest.fixture
def warnings(monkeypatch):
    found = []
    monkeypatch.setattr(editions.logger, "warning", lambda message, *args, **kwargs: found.append(message % args))
    return found


def test_the_chinese_edition_translates_an_explorers_frame_alt_and_nothing_else(monkeypatch, warnings):
    """ExplorerCaptions, as the Chinese build runs it, rewrites the frame's alt (escaped)."""
    document = _explorer_page(monkeypatch, TITLE, _frame(TITLE))
    (old,) = (raw.astext() for raw in document.findall(nodes.raw))
    monkeypatch.setattr(editions, "translator_for", lambda env, docname: _Catalogue({TITLE: CHINESE}))
    editions.ExplorerCaptions(document).apply()
    (raw,) = document.findall(nodes.raw)
    assert f'alt="{html.escape(CHINESE)}"' in raw.astext()
    assert raw.astext() == old.replace(f'alt="{html.escape(TITLE)}"', f'alt="{html.escape(CHINESE)}"')
    assert raw.rawsource == raw.astext() and warnings == []


def test_the_english_edition_keeps_the_frame_alt(monkeypatch, warnings):
    document = _explorer_page(monkeypatch, TITLE, _frame(TITLE))
    document.settings.env.config.language = "en"
    monkeypatch.setattr(editions, "translator_for", lambda env, docname: _Catalogue({TITLE: CHINESE}))
    editions.ExplorerCaptions(document).apply()
    assert f'alt="{html.escape(TITLE)}"' in next(document.findall(nodes.raw)).astext()


def test_the_frame_is_found_whatever_the_order_of_its_attributes(warnings):
    figure = nodes.figure(classes=["book-explorer-figure"], explorer_title="Heads viewer")
    figure += _explorer_output("Heads viewer", '<img alt="Heads viewer" width="9" class="book-explorer-frame">')
    editions.translate_explorer_alt(figure, _Catalogue({"Heads viewer": "注意力头查看器"}))
    assert '<img alt="注意力头查看器" width="9" class="book-explorer-frame">' in next(figure.findall(nodes.raw)).astext()
    assert warnings == []


@pytest.mark.parametrize("frame", [
    None,  # no static player: no frame at all
    '<img class="book-explorer-still" alt="Heads viewer">',  # a frame lib.widgets renamed
    '<img class="book-explorer-frame" data-alt="Heads viewer">',  # no alt attribute
    '<img class="book-explorer-frame" alt="Heads">',  # an alt that is not the title
])
def test_a_frame_whose_alt_is_not_rewritten_is_a_warning(warnings, frame):
    figure = nodes.figure(classes=["book-explorer-figure"], explorer_title="Heads viewer")
    figure += _explorer_output("Heads viewer", frame)
    editions.translate_explorer_alt(figure, _Catalogue({"Heads viewer": "注意力头查看器"}))
    assert len(warnings) == 1 and "alt text is not translated" in warnings[0], warnings
