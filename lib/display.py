"""Small printing helpers the chapters share: short rounded numbers, lib code as its file
holds it, numbers glued into the prose, a spread over seeds, and the book's plots.

**Plots legible on a phone and sharp on a 2x screen.** Importing this module (every chapter
does, in its first cell) sets matplotlib's text sizes to :data:`PLOT_FONT_PT` and, in a
notebook kernel, shows every figure through :func:`plot_png`: a palette PNG of
:data:`PIXEL_DENSITY` times its CSS size, whose output metadata says its CSS ``width`` (the
book and JupyterLab show it that wide) and the smallest ``font_pt`` drawn in it. A plot is
shown :data:`PLOT_DPI` CSS pixels per figure inch, shrunk to :data:`PHONE_WIDTH_PX` on a
phone; :func:`phone_text_px` is then the height of its smallest text there, which
``tests/book/test_plot_outputs.py`` holds to :data:`MIN_TEXT_PX` (9 pt) for every plot of
every committed chapter, the rule the explorers follow (:mod:`lib.widgets.core`).
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import io
import math
import textwrap

import matplotlib
import torch


def fmt(tensor: torch.Tensor, digits: int = 4) -> str:
    """The entries of ``tensor``, flattened, as a short list rounded to ``digits`` decimals.

    Examples
    --------
    >>> fmt(torch.tensor([[0.1234567, 2.0]]))
    '[0.1235, 2.0000]'
    """
    return (
        "["
        + ", ".join(f"{value:.{digits}f}" for value in tensor.flatten().tolist())
        + "]"
    )


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
        raise TypeError(
            f"glue: value must be a number or a string, got {type(value).__name__}"
        )
    from IPython.display import display

    display(
        {GLUE_PREFIX + "text/plain": repr(value)},
        raw=True,
        metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}},
    )


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
    median = (
        finite[middle] if len(finite) % 2 else (finite[middle - 1] + finite[middle]) / 2
    )
    note = f"; {diverged} of {len(values)} not finite" if diverged else ""
    return f"{median:{spec}} ({finite[0]:{spec}}–{finite[-1]:{spec}}{note})"


# ---- plots -------------------------------------------------------------------------
PLOT_DPI = 100  # CSS pixels per figure inch: a 4.8-inch plot is 480 px wide on a laptop
PIXEL_DENSITY = 2  # device pixels per CSS pixel of the stored PNG: sharp on a 2x screen
# The width a figure shrinks to on a 390 px phone, and the smallest text it may then show:
# the explorers' rule (lib.widgets.core; tests/lib/test_display_plots.py checks they agree).
PHONE_WIDTH_PX = 356
MIN_TEXT_PX = 12  # 9 pt
# Every text of a plot: 12 px on a phone as long as the plot is at most
# PHONE_WIDTH_PX * PLOT_FONT_PT / (MIN_TEXT_PX * 72) = 4.94 inches wide.
PLOT_FONT_PT = 12.0
PLOT_STYLE = {
    "figure.dpi": PLOT_DPI,
    "figure.figsize": (4.8, 3.0),
    "font.size": PLOT_FONT_PT,
    # every kind of text at the base size ("medium"), titles one step larger
    "axes.titlesize": "medium",
    "axes.labelsize": "medium",
    "xtick.labelsize": "medium",
    "ytick.labelsize": "medium",
    "legend.fontsize": "medium",
    "legend.title_fontsize": "medium",
    "figure.titlesize": "large",
    "figure.labelsize": "medium",
}


def phone_text_px(font_pt: float, width_px: float) -> float:
    """Height in CSS pixels, on a phone, of ``font_pt``-point text in a plot shown
    ``width_px`` CSS pixels wide (:data:`PLOT_DPI` per inch, shrunk to the phone's width).
    """
    if not font_pt > 0 or not width_px > 0:
        raise ValueError(
            f"font_pt and width_px must be positive; found {font_pt} and {width_px}"
        )
    return font_pt / 72 * PLOT_DPI * min(1.0, PHONE_WIDTH_PX / width_px)


@contextlib.contextmanager
def _recording_text(sizes: list):
    """Append the size (points) of every non-blank text Agg draws to ``sizes``."""
    from matplotlib.backends.backend_agg import RendererAgg

    draw_text = RendererAgg.draw_text

    def recording(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            sizes.append(prop.get_size_in_points())
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    RendererAgg.draw_text = recording
    try:
        yield
    finally:
        RendererAgg.draw_text = draw_text


def unscaled_colours(fig) -> list[str]:
    """The colour-mapped images and meshes of ``fig`` that a reader cannot decode: no colour
    bar shows their colour map and limits, or their axes lack an x or y axis title (their
    own, or a ``supxlabel``/``supylabel`` of a figure holding them)."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.collections import QuadMesh
    from matplotlib.contour import ContourSet
    from matplotlib.image import AxesImage

    def scale(mappable):
        return mappable.get_cmap().name, mappable.norm.vmin, mappable.norm.vmax

    bars = {
        scale(mappable)
        for mappable in fig.findobj(lambda a: isinstance(a, ScalarMappable))
        if getattr(mappable, "colorbar", None) is not None
    }

    def titled(ax, which):
        if getattr(ax, f"get_{which}label")():
            return True
        figure = ax.get_figure(root=False)
        while True:
            label = getattr(figure, f"_sup{which}label", None)
            if label is not None and label.get_text():
                return True
            if figure.get_figure(root=False) is figure:  # the root figure
                return False
            figure = figure.get_figure(root=False)

    problems = []
    colorbar_axes = {
        m.colorbar.ax
        for m in fig.findobj(lambda a: isinstance(a, ScalarMappable))
        if getattr(m, "colorbar", None)
    }
    for ax in fig.axes:
        if ax in colorbar_axes:
            continue
        for mappable in ax.get_children():
            if not isinstance(mappable, (AxesImage, QuadMesh, ContourSet)):
                continue
            if isinstance(mappable, ContourSet) and not mappable.filled:
                continue  # contour lines of one colour encode nothing by colour
            name = f"{type(mappable).__name__} in {ax.get_title() or 'untitled axes'!r}"
            if scale(mappable) not in bars:
                problems.append(f"{name} has no colour bar")
            if not (titled(ax, "x") and titled(ax, "y")):
                problems.append(f"{name} lacks an axis title")
    return problems


def legend_overlaps(fig, renderer=None) -> list[str]:
    """The legends of ``fig`` that cover data: line vertices or scatter points inside the
    legend's box (the explorers' frames pass it too, tests/lib/widgets). ``renderer``:
    that of a draw of ``fig`` just made, else ``fig`` is drawn here."""
    import numpy as np
    from matplotlib.collections import PathCollection
    from matplotlib.lines import Line2D

    if renderer is None:
        fig.draw_without_rendering()
        renderer = fig._get_renderer()
    problems = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer).padded(-1)
        shown = ax.bbox
        for artist in ax.get_children():
            if isinstance(artist, Line2D) and artist.get_visible():
                points = artist.get_transform().transform(artist.get_xydata())
            elif isinstance(artist, PathCollection) and artist.get_visible():
                points = artist.get_offset_transform().transform(artist.get_offsets())
            else:
                continue
            points = np.asarray(points).reshape(-1, 2)
            points = points[np.isfinite(points).all(axis=1)]
            x, y = points[:, 0], points[:, 1]
            visible = (
                (x >= shown.x0) & (x <= shown.x1) & (y >= shown.y0) & (y <= shown.y1)
            )
            inside = visible & (x > box.x0) & (x < box.x1) & (y > box.y0) & (y < box.y1)
            if inside.any():
                problems.append(
                    f"the legend of {ax.get_title()!r} covers {inside.sum()} points "
                    f"of {artist.get_label()!r}"
                )
    return problems


def plot_png(fig) -> tuple[bytes, dict]:
    """``fig`` as the book shows it: a 256-colour PNG at :data:`PIXEL_DENSITY` times its CSS
    size (cropped to what is drawn, as the inline backend does), and its output metadata:
    the CSS ``width``, the smallest ``font_pt`` drawn and what :func:`unscaled_colours`
    and :func:`legend_overlaps` find."""
    from PIL import Image

    sizes: list[float] = []
    buffer = io.BytesIO()
    with _recording_text(sizes):
        fig.savefig(
            buffer,
            format="png",
            dpi=PLOT_DPI * PIXEL_DENSITY,
            bbox_inches="tight",
            pad_inches=0.05,
            facecolor=fig.get_facecolor(),
            edgecolor=fig.get_edgecolor(),
        )
    with Image.open(buffer) as image:
        rgb = image.convert("RGB")
    # whole CSS pixels: pad an odd width or height with the background
    width, height = (-(-size // PIXEL_DENSITY) * PIXEL_DENSITY for size in rgb.size)
    if (width, height) != rgb.size:
        background = tuple(round(255 * c) for c in fig.get_facecolor()[:3])
        padded = Image.new("RGB", (width, height), background)
        padded.paste(rgb, (0, 0))
        rgb = padded
    out = io.BytesIO()
    rgb.quantize(256).save(out, format="png", optimize=True)
    metadata = {
        "width": width // PIXEL_DENSITY,
        "font_pt": round(min(sizes), 3) if sizes else None,
    }
    for key, check in (
        ("unscaled_colours", unscaled_colours),
        ("legend_overlaps", legend_overlaps),
    ):
        problems = check(fig)
        if problems:
            metadata[key] = problems
    return out.getvalue(), metadata


def _show_plot(fig) -> tuple[str, dict]:
    """IPython's PNG printer for figures: :func:`plot_png`, base64-encoded."""
    data, metadata = plot_png(fig)
    return base64.b64encode(data).decode("ascii"), metadata


def use_book_plots(shell=None) -> None:
    """Set :data:`PLOT_STYLE` and, in an IPython ``shell`` (default: the running one, if
    any), show figures through :func:`plot_png`. Importing this module calls it."""
    matplotlib.rcParams.update(PLOT_STYLE)
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
    if shell is None:
        return
    from matplotlib.figure import Figure

    # Resolve the backend now: a kernel's inline backend sets its own PNG formatter when it
    # loads, which pyplot otherwise does at the first figure, replacing the one below.
    from matplotlib import pyplot

    pyplot.switch_backend(matplotlib.get_backend())

    matplotlib.rcParams.update(PLOT_STYLE)  # the backend may have loaded its own rc
    formatters = shell.display_formatter.formatters
    for mime in ("image/svg+xml", "image/jpeg", "application/pdf"):
        formatters[mime].pop(Figure, None)
    formatters["image/png"].for_type(Figure, _show_plot)


use_book_plots()
