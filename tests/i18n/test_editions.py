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
