"""The explorers of the built book as a reader meets them: numbered figures with text they can read.

Every explorer is a numbered figure ("Fig. 9.2") whose caption is its visual's
``caption`` and whose anchor is :func:`lib.widgets.core.figure_label`
(``_ext/explorers.py`` wraps it), and its frame has alt text. At a phone's and a
desktop's width, the smallest text of every frame is at least
:data:`lib.widgets.core.MIN_TEXT_PX` CSS pixels (9 pt) tall as displayed: a frame
states the dpi it was drawn at and the smallest font size it draws
(``data-dpi``, ``data-font-pt``; ``tests/lib/widgets/test_widgets_legibility.py`` proves no text
is drawn smaller), so text of ``pt`` points is ``pt / 72 * dpi`` image pixels tall,
and the browser shows the image at ``clientWidth / naturalWidth`` of its pixel size.

Needs ``_build/html`` (``make book``) and Debian's ``chromium``, like
``tests/book/test_book_html.py``; the frames are measured in the pages' frame visits (``book_visits.py``).
"""
import re

import pytest

from lib.widgets.core import MIN_TEXT_PX, book_visuals, figure_label
from book_visits import BUILD
from test_book_html import explorer_pages

pytestmark = pytest.mark.browser

WIDTHS = [390, 1366]  # a phone, a desktop

# PLAYERS_JS (book_visits.py): for each player, its figure's anchor, number and caption, its frame's alt
# text and sizes.


def displayed_text_px(player: dict) -> float:
    """CSS pixels of the frame's smallest text as the browser shows the frame."""
    return player["fontPt"] / 72 * player["dpi"] * player["clientWidth"] / player["naturalWidth"]


def test_every_visual_of_lib_widgets_is_a_figure_of_the_book():
    if not BUILD.is_dir():
        pytest.fail(f"the book is not built ({BUILD} is missing): run `make book` first")
    anchors = set()
    for page in explorer_pages():
        anchors |= set(re.findall(r'<figure class="book-explorer-figure[^"]*" id="([^"]+)"', (BUILD / page).read_text()))
    assert anchors == {figure_label(visual) for visual in book_visuals().values()}


def straight_quotes(text: str) -> str:
    """``text`` with Sphinx's typographic quotes made straight again."""
    return text.translate(str.maketrans("\u2018\u2019\u201c\u201d", "''\"\""))


@pytest.mark.parametrize("width", WIDTHS)
def test_every_explorer_is_numbered_captioned_and_legible(frame_visits, width):
    """Each page's frame visit at ``width`` px (book_visits.FrameVisits, shared with tests/book/test_layout.py):
    without MathJax, every frame drawn."""
    visuals = book_visuals()
    found = []
    for page in explorer_pages():
        players = frame_visits.of(page, width)["players"]
        assert players, f"{page} lost its explorers"
        for player in players:
            name = f"{page}: {player['alt'] or player['id'] or 'explorer'}"
            assert player["alt"] in visuals, f"{name}: the frame's alt text is not its visual's title"
            visual = visuals[player["alt"]]
            assert player["id"] == figure_label(visual), f"{name} is not in a figure labelled {figure_label(visual)}"
            assert re.fullmatch(r"Fig\. \d+\.\d+", player["number"]), f"{name} has no figure number"
            assert straight_quotes(player["caption"]) == visual.caption.strip(), f"{name}: caption {player['caption']!r}"
            assert player["clientWidth"] > 0 and player["dpi"] > 0 and player["fontPt"] > 0, f"{name}: {player}"
            found.append((displayed_text_px(player), name, player["clientWidth"]))
    assert len(found) == len(visuals)
    smallest = min(found)
    print(f"at {width} px the smallest text of an explorer frame shows {smallest[0]:.2f} CSS px "
          f"({smallest[1]}, frame {smallest[2]} px wide)")
    too_small = [f"{name}: {px:.2f} px (frame {shown} px wide)" for px, name, shown in found if px < MIN_TEXT_PX]
    assert too_small == [], f"at {width} px, text below {MIN_TEXT_PX} CSS px"
