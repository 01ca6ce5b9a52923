"""``_ext/code_lines.py``: each indented line of a highlighted block in a span carrying its indentation,
the block's text unchanged. Pygments' own HTML is the reference input (what Sphinx writes)."""
import html
import re
import sys
from pathlib import Path

import pytest
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from code_lines import HELD_INDENT, indent_blocks, indent_lines  # noqa: E402

SOURCE = '''def f(x):
    """A docstring
      over three lines."""
    if x:
        return {"a": 1,
                "b": 2}  # a comment

    return None
'''
LINE = re.compile(r'<span class="code-line" style="--indent:(\d+)">')


def pygments_pre(source: str) -> str:
    """The inside of the <pre> Pygments writes for ``source``."""
    return highlight(source, PythonLexer(), HtmlFormatter(nowrap=True))


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]*>", "", fragment))


def test_each_indented_line_is_one_span_with_its_indentation_and_the_text_is_unchanged():
    pre = pygments_pre(SOURCE)
    out = indent_lines(pre)
    assert text(out) == text(pre) == SOURCE
    indents = [int(n) for n in LINE.findall(out)]
    expected = [len(line) - len(line.lstrip(" ")) for line in SOURCE.split("\n") if line.strip()]
    assert indents == [n for n in expected if n]
    # Every span holds exactly one line: no newline inside, one after each; its indentation is
    # held in one span (Pygments writes it as one piece of text, a docstring's inside its span).
    for match in re.finditer(r'<span class="code-line" style="--indent:(\d+)">(.*?)</span>(?=\n)', out):
        assert "\n" not in match.group(2)
        assert match.group(2).count('<span class="code-indent">') == 1
        assert re.search(r'<span class="code-indent">( *)</span>', match.group(2)).group(1) == " " * int(match.group(1))
    assert out.count("\n") == pre.count("\n")
    assert '<span class="code-line" style="--indent:6"><span class="sd"><span class="code-indent">      </span>over' in out


def test_indentation_split_over_pieces_is_held_in_each():
    out = indent_lines("<span>  </span>  x = 1\n")
    held = '<span class="code-indent">  </span>'
    assert out == f'<span class="code-line" style="--indent:4"><span>{held}</span>{held}x = 1</span>\n'


def test_a_highlighting_span_over_a_newline_is_closed_and_opened_again():
    """Pygments closes its spans at each line's end; a coloured printed output (ANSI colours, as
    myst-nb writes them) may not."""
    coloured = '<span class="ansi-red-fg">Error:\n    <b>bold</b> on\n  two lines</span> after\n'
    out = indent_lines(coloured)
    red, line = '<span class="ansi-red-fg">', '<span class="code-line" style="--indent:{}">'
    held = '<span class="code-indent">{}</span>'
    assert out == (f"{red}Error:</span>\n"
                   f"{line.format(4)}{red}{held.format('    ')}<b>bold</b> on</span></span>\n"
                   f"{line.format(2)}{red}{held.format('  ')}two lines</span> after</span>\n")
    assert text(out) == text(coloured)


def test_lines_without_leading_spaces_are_left_alone_and_blocks_are_found_in_a_page():
    assert indent_lines("x = 1\n\ny = 2\n") == "x = 1\n\ny = 2\n"
    page = ('<p>    not code</p><div class="highlight"><pre><span></span>if a:\n    b\n</pre></div>'
            '<pre>    plain, not highlighted</pre>')
    assert indent_blocks(page) == ('<p>    not code</p><div class="highlight"><pre><span></span>if a:\n'
                                   '<span class="code-line" style="--indent:4"><span class="code-indent">    </span>b</span>'
                                   '\n</pre></div>'
                                   '<pre>    plain, not highlighted</pre>')


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="pre must be the HTML inside a <pre> as str; found bytes"):
        indent_lines(b"x")
    with pytest.raises(ValueError, match="pre must close only the tags it opened; found '</span>' with none open"):
        indent_lines("x</span>")


def test_an_indentation_deeper_than_half_a_phone_is_not_held():
    """An argument aligned far right keeps its span (its hanging indent) but its spaces may wrap
    alone: held, 48 spaces would push the line past a phone's 44-column block."""
    deep = " " * (HELD_INDENT + 1) + "x)\n"
    assert indent_lines(deep) == f'<span class="code-line" style="--indent:{HELD_INDENT + 1}">{deep[:-1]}</span>\n'
    held = " " * HELD_INDENT + "x)\n"
    assert '<span class="code-indent">' in indent_lines(held)
