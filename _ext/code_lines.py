"""Sphinx extension for the book: a wrapped code line continues under its own indentation.

Code cells and printed outputs wrap where a line does not fit (a phone, a zoomed page;
``_static/book.css``). The ``<pre>`` of a block can give its continuation lines one hanging
indent only, which puts the continuation of an indented line left of the line's own start, so
it reads as a dedented statement. This extension puts every indented line of every
highlighted block (``div.highlight pre``: code cells, code blocks and printed outputs alike)
into its own ``span.cl`` whose ``--i`` is the column where the line's own text
starts: its leading spaces, its tabs (to the next multiple of :data:`TAB_SIZE`, the
``tab-size`` ``book.css`` gives code blocks) and, on a doctest line, the prompt (``>>> `` or
``... ``) and the spaces after it; ``book.css`` gives that span a hanging indent of those
columns plus 2, so a wrapped piece starts 2 columns right of the line's own text. That lead
(whitespace and prompt) goes in ``span.ci``\ s that cannot break (else a line whose
first word is long breaks after its indentation and shows it alone), up to
:data:`HELD_INDENT` columns. Lines without a lead keep the block's 2 columns. Only ``>>>`` and
``...`` followed by a space or tab are prompts (a shell's ``$ `` and IPython's ``In [1]: `` are
not). ``... `` at a line's start counts as a prompt wherever it stands, also where it is Python's
Ellipsis before a comment (``...  # todo``) or the start of a printed output line: harmless, such
a line hangs 2 columns right of the text after the dots, like a doctest line, and its text is
unchanged.

The names are short (``cl`` for a code line, ``--i`` for its indentation, ``ci`` for its held lead)
because they are written once per indented line: chapter 11 has 662 such lines, and the long names
(``code-line``, ``--indent``, ``code-indent``) cost it 14 KB of its first load (issue 31, item 7).

The text of a block is unchanged, character for character: the spans hold the lines without
their newlines, which stay between them, and a highlighting span that runs over a newline
(a docstring) is closed before it and opened again after it. What the copy button copies
and what a reader selects are therefore the code as written (``tests/book/test_layout.py``).

Runs on ``html-page-context``, on the body of each page as it is written, so an incremental
build treats only the pages it writes.
"""

import html
import re

# A highlighted block as Pygments and myst-nb write it (its <pre> holds only spans and text).
BLOCK = re.compile(r'(<div class="highlight"><pre[^>]*>)(.*?)(</pre>)', re.S)
TAG = re.compile(r"(<[^>]*>)")
TAG_NAME = re.compile(r"<([A-Za-z][A-Za-z0-9]*)")
# The deepest indentation held to its line's first character: more than half of the 44 columns of
# a phone's code block (an argument aligned under an opening bracket far right) may wrap on its
# own rather than push the line past the block's edge.
HELD_INDENT = 24
# The columns of a tab stop, as book.css sets ``tab-size`` for code blocks (the CSS default).
TAB_SIZE = 8
# A line's lead: leading spaces and tabs, then a doctest prompt and the spaces and tabs after it.
LEAD = re.compile(r"[ \t]*(?:(?:>>>|\.\.\.)(?= |\t)[ \t]+)?")
# One character of HTML text: an entity (``&gt;``) or a character.
CHAR = re.compile(r"&(?:#[0-9]+|#x[0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);|.", re.S)


def _columns(lead: str) -> int:
    """The column where text written after ``lead`` starts (tabs stop every :data:`TAB_SIZE`)."""
    column = 0
    for char in lead:
        column = (column // TAB_SIZE + 1) * TAB_SIZE if char == "\t" else column + 1
    return column


def _hold_lead(pieces: list[str], length: int) -> list[str]:
    """``pieces`` with the line's first ``length`` characters of text in ``span.ci``\ (s).

    ``book.css`` draws that span ``white-space: pre``: a line cannot break between its lead and
    its first character (the indentation alone on a line, the code below it). Characters are
    counted in the text the HTML shows (``&gt;`` is one).
    """
    held, left = [], length
    for piece in pieces:
        if left and piece and not piece.startswith("<"):
            chars = CHAR.findall(piece)[:left]
            cut = sum(len(c) for c in chars)
            piece = f'<span class="ci">{piece[:cut]}</span>{piece[cut:]}'
            left -= len(chars)
        held.append(piece)
    return held


def _line_html(pieces: list[str], still_open: list[str]) -> str:
    """One line: its pieces, the tags still open at its end closed, and, if it has a lead, the
    span that carries its indentation around it."""
    text = html.unescape(TAG.sub("", "".join(pieces)))
    lead = LEAD.match(text).group(0)
    indent = _columns(lead) if lead != text else 0  # a line of whitespace only has no text to hang under
    if 0 < indent <= HELD_INDENT:
        pieces = _hold_lead(pieces, len(lead))
    body = "".join(pieces) + "".join(
        f"</{TAG_NAME.match(tag).group(1)}>" for tag in reversed(still_open)
    )
    if indent == 0:
        return body
    return f'<span class="cl" style="--i:{indent}">{body}</span>'


def indent_lines(pre: str) -> str:
    """The inner HTML ``pre`` of a highlighted ``<pre>`` with each line that has a lead (indentation,
    a doctest prompt) in a ``span.cl``.

    Removing every ``span.cl`` start tag and its matching end tag, and every end tag
    added before a newline with the start tag added after it, gives ``pre`` back; the text
    (tags removed) is ``pre``'s text exactly.
    """
    if not isinstance(pre, str):
        raise TypeError(
            f"pre must be the HTML inside a <pre> as str; found {type(pre).__name__}"
        )
    out: list[str] = []
    pieces: list[str] = []
    open_tags: list[str] = []  # the start tags of the spans open at this point
    for token in TAG.split(pre):
        if token.startswith("<"):
            if token.startswith("</"):
                if not open_tags:
                    raise ValueError(
                        f"pre must close only the tags it opened; found {token!r} with none open"
                    )
                open_tags.pop()
            elif not token.endswith("/>"):
                open_tags.append(token)
            pieces.append(token)
            continue
        *complete, rest = token.split("\n")
        for piece in complete:
            pieces.append(piece)
            out.append(_line_html(pieces, open_tags) + "\n")
            pieces = list(open_tags)  # the next line opens again what this one closed
        pieces.append(rest)
    out.append(
        _line_html(pieces, [])
    )  # the last line (usually empty) closes its own tags
    return "".join(out)


def indent_blocks(body: str) -> str:
    """``body`` (a page's HTML) with :func:`indent_lines` applied to every highlighted block."""
    return BLOCK.sub(lambda m: m.group(1) + indent_lines(m.group(2)) + m.group(3), body)


def _indent_code_lines(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = indent_blocks(context["body"])


def setup(app):
    app.connect("html-page-context", _indent_code_lines)
    # Raising env_version makes the next build re-read and so re-write every page.
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 3}
