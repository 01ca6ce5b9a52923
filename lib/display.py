"""Small printing helpers the chapters share: short rounded numbers, and lib code shown
as the reader should see it: as its file holds it in a module checked at the signature
(:mod:`lib.checked`), and in the others, until they are rewritten so, without docstrings and
the argument checks that open a function, and with no line longer than 88 characters (a
longer statement is rewrapped the way the black formatter would,
https://black.readthedocs.io/en/stable/the_black_code_style/)."""
from __future__ import annotations

import ast
import inspect
import io
import keyword
import math
import re
import textwrap
import tokenize

import torch

from lib.checked import CHECKED_MODULES


def fmt(tensor: torch.Tensor, digits: int = 4) -> str:
    """The entries of ``tensor``, flattened, as a short list rounded to ``digits`` decimals.

    Examples
    --------
    >>> fmt(torch.tensor([[0.1234567, 2.0]]))
    '[0.1235, 2.0000]'
    """
    return "[" + ", ".join(f"{value:.{digits}f}" for value in tensor.flatten().tolist()) + "]"


def _is_argument_check(statement: ast.stmt) -> bool:
    """Whether ``statement`` only calls argument checks (``require_*``, ``check_*``, ``_check*``),
    e.g. ``require_int("n", n), require_words("tokens", tokens)``."""
    if not isinstance(statement, ast.Expr):
        return False
    calls = statement.value.elts if isinstance(statement.value, ast.Tuple) else [statement.value]

    def name(call: ast.expr) -> str:
        function = call.func if isinstance(call, ast.Call) else None
        return getattr(function, "id", None) or getattr(function, "attr", None) or ""

    return all(re.match(r"_?(require|check)(_|$)", name(call)) for call in calls)


# The longest code line the book shows (issue 18): 88 characters fit a code block at 1024 px.
LINE_WIDTH = 88
_INDENT = "    "
# Where a too-long expression inside brackets may break, strongest first (as black does):
# after commas; before a comprehension's for; before if/else; before or, and;
# before comparisons; before bitwise, additive, multiplicative operators and the power operator.
_BREAKS = [{","}, {"for", "async"}, {"if", "else"}, {"or"}, {"and"},
           {"<", ">", "==", ">=", "<=", "!="}, {"|"}, {"^"}, {"&"}, {"<<", ">>"}, {"+", "-"},
           {"*", "/", "//", "%", "@"}, {"**"}]
_OPEN, _CLOSE = "([{", ")]}"
_KEYWORDS = set(keyword.kwlist) - {"True", "False", "None"}


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of one line of code (which may open or close brackets it does not match)."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text + "\n").readline):
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                  tokenize.ENDMARKER):
                found.append(token)
    except (tokenize.TokenError, IndentationError):  # a bracket the line leaves open
        pass
    return found


def _is_operator(tokens: list[tokenize.TokenInfo], i: int) -> bool:
    """Whether ``tokens[i]`` (``-``, ``*``, ``if`` ...) sits between two operands, not before one."""
    if i == 0:
        return False
    before = tokens[i - 1]
    if before.string in _CLOSE:
        return True
    if before.type == tokenize.NAME:
        return before.string not in _KEYWORDS
    return before.type in (tokenize.NUMBER, tokenize.STRING)


def _delimiter_split(text: str, tokens, indent: str, width: int) -> list[str] | None:
    """``text`` (inside brackets) broken at its strongest delimiter outside nested brackets."""
    depth, spots, until = 0, [], None
    for i, token in enumerate(tokens):
        if token.string in _CLOSE:
            depth -= 1
            if depth < 0:  # a bracket opened on an earlier line closes: stop there
                break
        elif depth == 0 and token.string == until:
            until = None
        elif depth == 0 and token.type in (tokenize.OP, tokenize.NAME):
            # The commas of "for a, b in" and "lambda a, b:" are not places to break.
            until = {"for": "in", "lambda": ":"}.get(token.string, until)
            level = next((n for n, group in enumerate(_BREAKS) if token.string in group), None)
            if level == 0 and until is None or level and _is_operator(tokens, i):
                spots.append((level, token.end[1] if level == 0 else token.start[1]))
        elif depth == 0 and token.type == tokenize.STRING and i + 1 < len(tokens) \
                and tokens[i + 1].type == tokenize.STRING:  # "..." "...": one string, two lines
            spots.append((0.5, token.end[1]))
        if token.string in _OPEN:
            depth += 1
    if not spots:
        return None
    strongest = min(level for level, _ in spots)
    cuts = [0] + [column for level, column in spots if level == strongest] + [len(text)]
    pieces = [text[a:b].strip() for a, b in zip(cuts, cuts[1:]) if text[a:b].strip()]
    if len(pieces) < 2:
        return None
    lines = []
    for piece in pieces:  # commas: as many items a line as fit; operators: one operand a line
        if strongest == 0 and lines and len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines.append(indent + piece)
    return [part for line in lines for part in _split(line.strip(), indent, width, inside=True)]


def _split(text: str, indent: str, width: int, inside: bool) -> list[str]:
    """One line of code ``text`` at ``indent`` as lines of at most ``width`` characters, broken
    only inside brackets (``inside``: the whole line is), so that it parses as before."""
    if len(indent) + len(text) <= width:
        return [indent + text]
    tokens = _tokens(text)
    if inside and len(tokens) == 1 and tokens[0].type == tokenize.STRING:
        return _split_string(text, indent, width)
    if inside:
        lines = _delimiter_split(text, tokens, indent, width)
        if lines is not None:
            return lines
    # Split at a pair of brackets: the head ends with the opening one, the body goes one level
    # deeper, the tail starts with the closing one. The last pair whose head and tail fit is used,
    # unless its body is short and the line is "return ..." or "name = ...": then the value is
    # wrapped in parentheses of its own, which changes nothing in Python.
    stack, pairs, last = [], [], True
    for i in reversed(range(len(tokens))):  # pairs from the end, while only trailers follow
        token = tokens[i]
        if token.string in _CLOSE:
            stack.append(i)
        elif token.string in _OPEN and stack:
            closing = stack.pop()
            if not stack and closing > i + 1:
                pairs.append((closing - i, tokens[i].end[1], tokens[closing].start[1], last))
        elif not stack and (token.string in (",", "=") or token.string in _KEYWORDS
                            or any(token.string in group for group in _BREAKS)
                            or token.type == tokenize.OP and token.string.endswith("=")):
            last = False
    value = None if inside else _value(tokens)
    fitting = [(last, size, start, stop) for size, start, stop, last in pairs
               if len(indent) + max(start, len(text) - stop) <= width]
    if fitting:
        # The pair that holds the most among those followed only by trailers (".x", "[i]", ":").
        last, _, start, stop = max(fitting)
        head, body, tail = text[:start], text[start:stop].strip(), text[stop:]
        if value is None or last and 2 * len(body) >= value[1] - value[0]:
            head, body, tail = _hug(head, body, tail, indent, width)
            return [indent + head, *_split(body, indent + _INDENT, width, True), indent + tail]
    if value is not None:
        start, stop = value
        return [indent + text[:start].rstrip() + " (",
                *_split(text[start:stop].strip(), indent + _INDENT, width, True),
                indent + ")" + text[stop:]]
    return [indent + text]


def _split_string(text: str, indent: str, width: int) -> list[str]:
    """A string literal inside brackets as adjacent literals of at most ``width`` characters,
    each piece ending with a space (Python joins them back into one string)."""
    quote = text[-1]
    prefix = text[: text.index(quote)]
    body = text[len(prefix) + 1:-1]
    if text[len(prefix):].startswith(quote * 3) or "\\" in body:
        return [indent + text]
    lines = []
    while len(indent + prefix) + len(body) + 2 > width:
        depth, cut = 0, None
        for i, char in enumerate(body[: width - len(indent + prefix) - 2]):
            depth += "f" in prefix.lower() and (char == "{") - (char == "}")
            if char == " " and depth == 0:
                cut = i + 1
        if cut is None:
            break
        lines.append(indent + prefix + quote + body[:cut] + quote)
        body = body[cut:]
    return lines + [indent + prefix + quote + body + quote]


def _hug(head: str, body: str, tail: str, indent: str, width: int) -> tuple[str, str, str]:
    """Move a body that is one call or subscript, ``f(...)``, into the head and the tail when
    its inside then fits on one line: ``g(f(`` / inside / ``))`` instead of three levels."""
    tokens, stack = _tokens(body), []
    for i, token in enumerate(tokens):
        if token.string in _OPEN:
            stack.append(i)
        elif token.string in _CLOSE and stack:
            opening = stack.pop()
        elif not stack and (token.type == tokenize.OP and token.string != "."
                            or token.string in _KEYWORDS):
            return head, body, tail  # an operator, comma or keyword outside brackets: not one call
    if not tokens or tokens[-1].string not in _CLOSE or stack or opening == 0:
        return head, body, tail
    start, stop = tokens[opening].end[1], tokens[-1].start[1]
    inner = body[start:stop].strip()
    if inner and len(indent + head) + start <= width and len(indent + _INDENT + inner) <= width:
        return head + body[:start], inner, body[stop:] + tail
    return head, body, tail


def _value(tokens) -> tuple[int, int] | None:
    """Where the expression of a ``return value``, ``name = value`` or ``if condition:`` line
    starts and ends, if the line is one of those: it may be put in parentheses of its own."""
    if len(tokens) < 2:
        return None
    if tokens[0].string in ("if", "elif", "while") and tokens[-1].string == ":":
        return tokens[1].start[1], tokens[-1].start[1]
    if tokens[0].string == "return":
        return tokens[1].start[1], tokens[-1].end[1]
    depth = 0
    for i, token in enumerate(tokens[:-1]):
        depth += (token.string in _OPEN) - (token.string in _CLOSE)
        if depth == 0 and token.type == tokenize.OP and token.string == "=":
            return tokens[i + 1].start[1], tokens[-1].end[1]
    return None


def _same_tree(source: str, tree: str) -> bool:
    try:
        return ast.dump(ast.parse(source)) == tree
    except SyntaxError:
        return False


def _fit(source: str, width: int = LINE_WIDTH) -> str:
    """``source`` with each statement that has a line longer than ``width`` rewrapped: its
    comments move above it and its code breaks inside brackets. A statement is rewrapped only if
    the code still parses to the same syntax tree (one that cannot be split stays as it is)."""
    lines = source.splitlines()
    if all(len(line) <= width for line in lines):
        return source
    try:
        tree = ast.dump(ast.parse(source))
    except SyntaxError:  # e.g. a class whose body was only its docstring
        return source
    last_row, comments, in_string, first = {}, {}, set(), None
    for token in tokenize.generate_tokens(io.StringIO(source + "\n").readline):
        row = token.start[0] - 1
        if token.type == tokenize.COMMENT:
            comments[row] = token.start[1]
        elif token.type == tokenize.NEWLINE and first is not None:
            last_row[first], first = row, None
        elif token.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT) and first is None:
            first = row
        if token.end[0] > token.start[0]:  # a string over several lines: leave them alone
            in_string.update(range(row, token.end[0]))
    fitted, row = [], 0
    while row < len(lines):
        rows = range(row, last_row.get(row, row) + 1)
        new = old = lines[rows.start:rows.stop]
        if any(len(line) > width for line in old) and not in_string.intersection(rows):
            new = _refit(old, [comments.get(r) for r in rows], width)
            if max(map(len, new)) >= max(map(len, old)) or \
                    not _same_tree("\n".join(fitted + new + lines[rows.stop:]), tree):
                new = old
        fitted += new
        row = rows.stop
    return "\n".join(fitted)


def _refit(lines: list[str], comments: list[int | None], width: int) -> list[str]:
    """One statement's ``lines`` (with the column where each one's comment starts) joined into
    one line, its comments above it, then split to ``width``."""
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    notes, code = [], ""
    for line, column in zip(lines, comments):
        if column is not None:
            notes += textwrap.wrap(line[column:].lstrip("#").strip(), width,
                                   initial_indent=indent + "# ", subsequent_indent=indent + "# ",
                                   break_on_hyphens=False)
            line = line[:column]
        piece = line.strip().removesuffix("\\").strip()
        if code.endswith(",") and piece[:1] in _CLOSE:  # a trailing comma before a closing bracket
            code = code[:-1]
        if code and piece and code[-1] not in _OPEN and piece[0] not in _CLOSE:
            code += " "
        code += piece
    return notes + (_split(code, indent, width, inside=False) if code else [])


def code_of(obj, start: str | None = None) -> str:
    """The source of a function, method or class from ``lib``: exactly as its file holds it
    when its module is checked at the signature (:data:`lib.checked.CHECKED_MODULES`);
    otherwise, until that module is rewritten so, without its docstrings and
    without the argument checks that open a function (calls of ``lib.validation``'s
    ``require_*`` and ``check_*`` helpers, or of a module's ``_check*``), every statement with
    a line over :data:`LINE_WIDTH` characters rewrapped (same syntax tree, comments above).

    Parameters
    ----------
    obj : function, method or class
    start : str, optional
        Replace the beginning of the body (typically input validation) by ``...``,
        up to the first line that contains ``start``.

    Raises
    ------
    ValueError
        If no line of the body contains ``start``.
    """
    source = textwrap.dedent(inspect.getsource(obj))
    if obj.__module__ in CHECKED_MODULES:  # its signature is its check: show the file
        if start is not None:
            raise ValueError(f"{obj.__qualname__} is shown whole: its module is checked "
                             "at the signature, so no start is needed")
        return source.rstrip("\n")
    lines, tree = source.splitlines(), ast.parse(source)
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node) is not None:
            docstring = node.body[0]
            hidden.update(range(docstring.lineno - 1, docstring.end_lineno))
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            for statement in body[:-1]:  # a function that only checks still shows its last line
                if not _is_argument_check(statement):
                    break
                hidden.update(range(statement.lineno - 1, statement.end_lineno))
    if start is not None:
        body = tree.body[0].body[0].lineno - 1
        first = next((i for i in range(body, len(lines)) if start in lines[i]), None)
        if first is None:
            raise ValueError(f"no line of {obj.__qualname__} contains {start!r}")
        hidden.update(range(body + 1, first))
        hidden.discard(body)
        lines[body] = " " * (len(lines[first]) - len(lines[first].lstrip())) + "..."
    return _fit("\n".join(line for i, line in enumerate(lines) if i not in hidden))


def show_code(obj, start: str | None = None) -> None:
    """Print :func:`code_of` ``obj``: how a chapter shows the lib code it explains."""
    print(code_of(obj, start))


# myst-nb reads glued values from display outputs with this prefix and metadata (its
# ``glue(..., display=False)`` writes the same); importing myst_nb for it would cost each
# chapter over a second, and it is not installed where readers run the notebooks.
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value) -> None:
    """Store ``value`` under ``name`` for the prose (``{glue:text}`name:.1%```), without showing it.

    The book's build reads glued values from the executed notebook, so a number in the
    text is the number this machine computed. Tensors and NumPy scalars are stored as plain
    Python numbers (their reprs could not be formatted by the text role).

    Raises
    ------
    TypeError
        If ``name`` is not a string, or ``value`` is not a number, a one-element tensor or
        array, or a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"glue: name must be a string, got {type(name).__name__}")
    if hasattr(value, "item"):  # one-element torch tensor or NumPy scalar
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"glue: value must be a number or a string, got {type(value).__name__}")
    from IPython.display import display

    display({GLUE_PREFIX + "text/plain": repr(value)}, raw=True,
            metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}})


def claim(statement: str, holds, *, backs: str | tuple[str, ...]) -> None:
    """Check a claim that the prose draws from a measured result.

    A chapter's measured outputs (training, sampling, timing) change from machine to
    machine, so they are not compared digit by digit; each conclusion the text draws from
    them is checked here instead, with a tolerance that holds over seeds and CPUs.
    ``backs`` names the id of the markdown cell (or cells) whose sentence the claim
    backs, so a reader of a failure, and ``tests/test_notebook_policy.py``, can find it.

    Raises
    ------
    AssertionError
        If ``holds`` is false: the text says something this run did not show.
    TypeError
        If ``backs`` is not a cell id or a tuple of them.
    """
    cells = (backs,) if isinstance(backs, str) else backs
    if not isinstance(cells, tuple) or not cells or not all(isinstance(c, str) and c for c in cells):
        raise TypeError(f"claim: backs must be a markdown cell id or a tuple of them; found {backs!r}")
    if not bool(holds):
        raise AssertionError(f"the chapter claims in cell {', '.join(cells)} that {statement}, "
                             "but this run does not show it")


def spread(values, spec: str = ".3g") -> str:
    """``values`` measured over several seeds, as "median (min–max)" formatted with ``spec``.

    Runs that diverged (NaN or infinite values) are left out of the median and range and
    counted after them, so one diverged seed cannot turn the summary into "nan (nan–nan)".

    Examples
    --------
    >>> spread([0.97, 0.99, 0.98], ".0%")
    '98% (97%–99%)'
    >>> spread([1.0, float("nan"), 3.0], ".1f")
    '2.0 (1.0–3.0; 1 of 3 not finite)'
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("spread: values must not be empty")
    finite = sorted(v for v in values if math.isfinite(v))
    diverged = len(values) - len(finite)
    if not finite:
        return f"not finite in all {len(values)} runs"
    middle = len(finite) // 2
    median = finite[middle] if len(finite) % 2 else (finite[middle - 1] + finite[middle]) / 2
    note = f"; {diverged} of {len(values)} not finite" if diverged else ""
    return f"{median:{spec}} ({finite[0]:{spec}}–{finite[-1]:{spec}}{note})"
