"""Small printing helpers the chapters share: short rounded numbers, lib code as its file
holds it, numbers glued into the prose, and a spread over seeds."""
from __future__ import annotations

import inspect
import math
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


# The longest line the book prints (issue 18): 88 characters fit a code block at 1024 px,
# and black formats lib at that width.
LINE_WIDTH = 88


def code_of(obj) -> str:
    """The source of a function, method or class from ``lib``, exactly as its file holds
    it (the chapter's modules are checked at the signature, :mod:`lib.checked`, and in
    black's format at 88 columns, so the file is what the reader should see)."""
    return textwrap.dedent(inspect.getsource(obj)).rstrip("\n")


def show_code(obj) -> None:
    """Print :func:`code_of` ``obj``: how a chapter shows the lib code it explains."""
    print(code_of(obj))


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
