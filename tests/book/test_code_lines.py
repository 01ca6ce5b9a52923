"""``_ext/code_lines.py``: each indented line of a highlighted block in a span carrying its indentation,
the block's text unchanged. Pygments' own HTML is the reference input (what Sphinx writes)."""
import html
import re
import sys
from pathlib import Path

import pytest
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonConsoleLexer, PythonLexer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_ext"))
from code_lines import HELD_INDENT, TAB_SIZE, indent_blocks, indent_lines  # noqa: E402

SOURCE = '''def f(x):
    """A docstring
      over three lines."""
    if x:
        return {"a": 1,
                "b": 2}  # a comment

    return None
'''
LINE = re.compile(r'<span class="cl" style="--i:(\d+)">')


def pygments_pre(source: str, lexer=PythonLexer) -> str:
    """The inside of the <pre> Pygments writes for ``source``."""
    return highlight(source, lexer(), HtmlFormatter(nowrap=True))


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
    for match in re.finditer(r'<span class="cl" style="--i:(\d+)">(.*?)</span>(?=\n)', out):
        assert "\n" not in match.group(2)
        assert match.group(2).count('<span class="ci">') == 1
        assert re.search(r'<span class="ci">( *)</span>', match.group(2)).group(1) == " " * int(match.group(1))
    assert out.count("\n") == pre.count("\n")
    assert '<span class="cl" style="--i:6"><span class="sd"><span class="ci">      </span>over' in out


def test_indentation_split_over_pieces_is_held_in_each():
    out = indent_lines("<span>  </span>  x = 1\n")
    held = '<span class="ci">  </span>'
    assert out == f'<span class="cl" style="--i:4"><span>{held}</span>{held}x = 1</span>\n'


def test_a_highlighting_span_over_a_newline_is_closed_and_opened_again():
    """Pygments closes its spans at each line's end; a coloured printed output (ANSI colours, as
    myst-nb writes them) may not."""
    coloured = '<span class="ansi-red-fg">Error:\n    <b>bold</b> on\n  two lines</span> after\n'
    out = indent_lines(coloured)
    red, line = '<span class="ansi-red-fg">', '<span class="cl" style="--i:{}">'
    held = '<span class="ci">{}</span>'
    assert out == (f"{red}Error:</span>\n"
                   f"{line.format(4)}{red}{held.format('    ')}<b>bold</b> on</span></span>\n"
                   f"{line.format(2)}{red}{held.format('  ')}two lines</span> after</span>\n")
    assert text(out) == text(coloured)


def test_lines_without_leading_spaces_are_left_alone_and_blocks_are_found_in_a_page():
    assert indent_lines("x = 1\n\ny = 2\n") == "x = 1\n\ny = 2\n"
    page = ('<p>    not code</p><div class="highlight"><pre><span></span>if a:\n    b\n</pre></div>'
            '<pre>    plain, not highlighted</pre>')
    assert indent_blocks(page) == ('<p>    not code</p><div class="highlight"><pre><span></span>if a:\n'
                                   '<span class="cl" style="--i:4"><span class="ci">    </span>b</span>'
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
    assert indent_lines(deep) == f'<span class="cl" style="--i:{HELD_INDENT + 1}">{deep[:-1]}</span>\n'
    held = " " * HELD_INDENT + "x)\n"
    assert '<span class="ci">' in indent_lines(held)


def lines_and_indents(out: str) -> list[tuple[int, str]]:
    """Each line of ``out`` as (its span's --i or 0, its text)."""
    found = []
    for line in out.split("\n"):
        match = LINE.match(line)
        found.append((int(match.group(1)) if match else 0, text(line)))
    return found


def test_a_doctest_line_hangs_under_the_code_after_its_prompt():
    """``>>> `` and ``... `` count as the lead (Pygments' console lexer puts the prompt in its own
    span; a docstring holds it in its text): the code after them is the line's own text."""
    console = ">>> def f(x):\n...     return {'a': 1,\n...             'b': 2}\n>>> f(1)\n{'a': 1, 'b': 2}\n"
    out = indent_lines(pygments_pre(console, PythonConsoleLexer))
    assert text(out) == console
    assert lines_and_indents(out) == [(4, ">>> def f(x):"), (8, "...     return {'a': 1,"),
                                      (16, "...             'b': 2}"), (4, ">>> f(1)"),
                                      (0, "{'a': 1, 'b': 2}"), (0, "")]
    # the prompt and the spaces after it are held with the code: "... " and 4 spaces, in two pieces
    assert ('<span class="gp"><span class="ci">... </span></span><span class="ci">    </span>'
            '<span class="k">return</span>') in out
    docstring = 'def f(x):\n    """\n    >>> f(1)\n    ... # more\n    ..."""\n'
    out = indent_lines(pygments_pre(docstring))
    assert text(out) == docstring
    assert [n for n, _ in lines_and_indents(out)] == [0, 4, 8, 8, 4, 0]  # "..." alone is Python's Ellipsis
    assert '<span class="ci">    &gt;&gt;&gt; </span>f(1)' in out  # an entity is one character
    # only ">>> " and "... " are prompts: a shell's "$ " and IPython's "In [1]: " get no hanging indent
    others = "$ ls\nIn [1]: x\n>>>x\n"
    assert indent_lines(others) == others
    # "... " at a line's start is taken as a prompt wherever it stands, also where it is Python's
    # Ellipsis followed by a comment or the start of a printed output line: harmless, the line
    # hangs 2 columns right of the text after the dots, as a doctest line would, its text unchanged
    ellipsis = "...  # todo\n... and 3 more\n"
    out = indent_lines(ellipsis)
    assert text(out) == ellipsis
    assert [n for n, _ in lines_and_indents(out)] == [5, 4, 0]
    prompt = '<span class="gp">&gt;&gt;&gt; </span>  x = 1\n'  # a lead over two pieces after entities
    assert indent_lines(prompt) == ('<span class="cl" style="--i:6"><span class="gp">'
                                    '<span class="ci">&gt;&gt;&gt; </span></span>'
                                    '<span class="ci">  </span>x = 1</span>\n')


def test_a_tab_reaches_the_next_tab_stop():
    # 7 spaces then a tab reach column 8, not 16 (a tab after the stop's last column goes one column)
    source = "def f():\n\tif x:\n\t\treturn 1\n  \tpass\n\t  y\n       \tz\n"
    out = indent_lines(pygments_pre(source))
    assert text(out) == source
    assert [n for n, _ in lines_and_indents(out)] == [0, TAB_SIZE, 2 * TAB_SIZE, TAB_SIZE, TAB_SIZE + 2,
                                                      TAB_SIZE, 0]
    # the lead held is its characters (2 tabs), not its columns (16): the keyword after it may break
    assert ('<span class="cl" style="--i:16"><span class="ci">\t\t</span>'
            '<span class="k">return</span> <span class="mi">1</span></span>') in out


def test_nested_tags_over_a_newline_close_in_order_and_self_closing_tags_stay_closed():
    nested = '<span class="a"><b>one\n  two</b></span><br/>\n  three\n'
    out = indent_lines(nested)
    assert out == ('<span class="a"><b>one</b></span>\n'
                   '<span class="cl" style="--i:2"><span class="a"><b>'
                   '<span class="ci">  </span>two</b></span><br/></span>\n'
                   '<span class="cl" style="--i:2"><span class="ci">  </span>three</span>\n')
    assert text(out) == text(nested)


def test_whitespace_only_lines_a_last_line_without_newline_and_every_block_of_a_page():
    assert indent_lines("a\n    \n\t\n") == "a\n    \n\t\n"  # no text to hang under
    assert indent_lines("if a:\n  b") == ('if a:\n<span class="cl" style="--i:2">'
                                          '<span class="ci">  </span>b</span>')
    block = '<div class="highlight"><pre>if a:\n  b\n</pre></div>'
    page = indent_blocks(block + "<p>between</p>" + block)
    assert page.count('class="cl"') == 2 and page.split("<p>between</p>")[0] == page.split("<p>between</p>")[1]
