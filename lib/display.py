"""Small printing helpers the chapters share: short rounded numbers, and lib code shown
as the reader should see it (without docstrings and the argument checks that open a
function)."""
from __future__ import annotations

import ast
import math
import re
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


def code_of(obj, start: str | None = None) -> str:
    """The source of a function, method or class from ``lib``, without its docstrings and
    without the argument checks that open a function (calls of ``lib.validation``'s
    ``require_*`` and ``check_*`` helpers, or of a module's ``_check*``).

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
    return "\n".join(line for i, line in enumerate(lines) if i not in hidden)


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


def claim(statement: str, holds) -> None:
    """Check a claim that the prose draws from a measured result.

    A chapter's measured outputs (training, sampling, timing) change from machine to
    machine, so they are not compared digit by digit; each conclusion the text draws from
    them is checked here instead, with a tolerance that holds over seeds and CPUs.

    Raises
    ------
    AssertionError
        If ``holds`` is false: the text says something this run did not show.
    """
    if not bool(holds):
        raise AssertionError(f"the chapter claims that {statement}, but this run does not show it")


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
