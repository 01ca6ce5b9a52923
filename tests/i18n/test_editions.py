"""_ext/editions.py's pure parts: where the language switch points, what counts as broken markup."""
import sys
from pathlib import Path

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
    (its priority list has no image type), then what Sphinx's gettext builder extracts."""
    from sphinx.util.nodes import extract_messages

    for bundle in list(document.findall(lambda n: isinstance(n, nodes.container)
                                        and n.get("nb_element") == "mime_bundle")):
        plain = [child for child in bundle.children if child["mime_type"] == "text/plain"]
        bundle.replace_self(plain[0].children if plain else [])
    return [message for _node, message in extract_messages(document)]


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


def _explorer_figure(title: str, html_alt: str | None = None) -> nodes.figure:
    plain = f"Explorer: {title} — rows ∈ {{1, 2}}"
    children = [("text/plain", nodes.literal_block(plain, plain))]
    if html_alt is not None:
        player = (f'<div class="book-explorer"><img class="book-explorer-frame" alt="{html_alt}" '
                  'width="600" height="400" src="data:image/webp;base64,AAAA"></div>')
        children.insert(0, ("text/html", nodes.raw(player, player, format="html")))
    figure = nodes.figure(classes=["book-explorer-figure"])
    figure += _cell_output(*children)
    figure += nodes.caption("A caption.", "A caption.")
    return figure


def test_an_explorers_title_its_frames_alt_text_is_extracted_for_gettext():
    document = _page(_explorer_figure("Why scale by √d"))
    editions.AltTextsForGettext(document).run()
    assert "Why scale by √d" in _as_gettext_sees_it(document)
    assert editions.explorer_title(_explorer_figure("No such explorer")) is None


class _Catalogue:
    def __init__(self, translations):
        self.translations = translations

    def gettext(self, message):
        return self.translations.get(message, message)


def test_the_chinese_frame_shows_the_translated_title_and_nothing_else_changes():
    figure = _explorer_figure("Momentum: the rate of each direction",
                              html_alt="Momentum: the rate of each direction")
    before = figure.deepcopy()
    editions.translate_explorer_alt(figure, _Catalogue({"Momentum: the rate of each direction": "动量法：<每个>方向"}))
    (raw,) = figure.findall(nodes.raw)
    (old,) = before.findall(nodes.raw)
    assert 'alt="动量法：&lt;每个&gt;方向"' in raw.astext()
    assert raw.astext().replace('alt="动量法：&lt;每个&gt;方向"', 'alt="Momentum: the rate of each direction"') == old.astext()
    # an untranslated title, and an English edition's page, keep the English alt
    untouched = _explorer_figure("Heads viewer", html_alt="Heads viewer")
    editions.translate_explorer_alt(untouched, _Catalogue({}))
    assert 'alt="Heads viewer"' in next(untouched.findall(nodes.raw)).astext()
