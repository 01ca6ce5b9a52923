"""Small printing helpers the chapters share: short rounded numbers, and lib code shown
as the reader should see it (without docstrings, optionally without input checks)."""
from __future__ import annotations

import ast
import inspect
import textwrap

import torch


def fmt(tensor: torch.Tensor, digits: int = 4) -> str:
    """The entries of ``tensor``, flattened, as a short list rounded to ``digits`` decimals.

    Examples
    --------
    >>> fmt(torch.tensor([[0.1234567, 2.0]]))
    '[0.1235, 2.0000]'
    """
    return "[" + ", ".join(f"{value:.{digits}f}" for value in tensor.flatten().tolist()) + "]"


def code_of(obj, start: str | None = None) -> str:
    """The source of a function, method or class from ``lib``, without its docstrings.

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
    lines, tree = source.splitlines(), ast.parse(source)
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node) is not None:
            docstring = node.body[0]
            hidden.update(range(docstring.lineno - 1, docstring.end_lineno))
    if start is not None:
        body = tree.body[0].body[0].lineno - 1
        first = next((i for i in range(body, len(lines)) if start in lines[i]), None)
        if first is None:
            raise ValueError(f"no line of {obj.__qualname__} contains {start!r}")
        hidden.update(range(body + 1, first))
        hidden.discard(body)
        lines[body] = " " * (len(lines[first]) - len(lines[first].lstrip())) + "..."
    return "\n".join(line for i, line in enumerate(lines) if i not in hidden)


def show_code(obj, start: str | None = None) -> None:
    """Print :func:`code_of` ``obj``: how a chapter shows the lib code it explains."""
    print(code_of(obj, start))
