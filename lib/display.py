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
every committed chapter, the rule the explorers follow (:mod:`lib.widgets.core`). The
smallest text is the smallest glyph: a formula's exponents and subscripts, which mathtext
draws at 0.7 of its size, count, and log axes are labelled in plain text
(:class:`PlainLogFormatter`). The metadata also lists what a reader would misread: colour
scales without a colour bar or axis titles, legends over data, texts colliding with each
other or the data, colour bars between an axes and its axis title.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import inspect
import io
import math
import textwrap

import matplotlib
import matplotlib.ticker
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


def spread(values, spec: str = ".3g", *, leave_out_diverged: bool = False) -> str:
    """``values`` measured over several seeds, as "median (min–max)" formatted with ``spec``.

    The summary holds only numbers and symbols, as both editions of the book glue it into
    their prose. A NaN or infinite value (a run that diverged) raises ``ValueError``, unless
    ``leave_out_diverged``: then such runs are left out of the median and range ("—" if every
    run diverged), and the chapter, whose runs may diverge, counts them and says so in words.

    Examples
    --------
    >>> spread([0.97, 0.99, 0.98], ".0%")
    '98% (97%–99%)'
    >>> spread([1.0, float("nan"), 3.0], ".1f", leave_out_diverged=True)
    '2.0 (1.0–3.0)'
    >>> spread([float("inf"), float("nan")], leave_out_diverged=True)
    '—'
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("spread: values must not be empty")
    finite = sorted(v for v in values if math.isfinite(v))
    if len(finite) < len(values) and not leave_out_diverged:
        raise ValueError(
            f"spread: {len(values) - len(finite)} of {len(values)} values are NaN or "
            "infinite; pass leave_out_diverged=True where the chapter counts them"
        )
    if not finite:
        return "—"
    middle = len(finite) // 2
    median = (
        finite[middle] if len(finite) % 2 else (finite[middle - 1] + finite[middle]) / 2
    )
    return f"{median:{spec}} ({finite[0]:{spec}}–{finite[-1]:{spec}})"


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


# Boxes may share this much (CSS pixels) before they count as overlapping: antialiasing.
TOUCH_PX = 1.0
# What plot_png's metadata has been checked for; tests/book/test_plot_outputs.py refuses a
# plot drawn before one of them existed (its metadata could not show that defect).
PLOT_CHECKS = (
    "font_pt of scripts",
    "unscaled_colours",
    "legend_overlaps of segments",
    "text_overlaps",
    "split_titles",
)


@functools.cache
def _math_parser():
    from matplotlib.mathtext import MathTextParser

    return MathTextParser("path")


# A Unicode subscript or superscript character ("W₂", "2¹⁰") is a small glyph at the text's
# size: DejaVu Sans draws "₂" 4.99 pt tall at 12 pt, "2" 8.91 pt (mathtext's script: 0.7).
UNICODE_SCRIPT_SCALE = 0.56


def _unicode_script(char: str) -> bool:
    import unicodedata

    return unicodedata.decomposition(char).startswith(("<super>", "<sub>"))


def _smallest_glyph_pt(s: str, prop, ismath) -> float:
    """The size (points) of the smallest glyph of text ``s``: a formula's (mathtext)
    exponents and subscripts are drawn at 0.7 of its size, and their own scripts at 0.7
    of that; a Unicode sub- or superscript character counts at
    :data:`UNICODE_SCRIPT_SCALE` of the size it is drawn at."""
    size = prop.get_size_in_points()
    if any(_unicode_script(char) for char in s):
        size *= UNICODE_SCRIPT_SCALE
    if not ismath:
        return size
    glyphs = _math_parser().parse(s, 72, prop).glyphs
    return min(min((glyph[1] for glyph in glyphs), default=size), size)


@contextlib.contextmanager
def _recording_text(sizes: list, texts: dict | None = None):
    """Append the smallest glyph size (points, :func:`_smallest_glyph_pt`) of every
    non-blank text Agg draws to ``sizes`` and, if given, put its text artist in ``texts``
    (keyed by ``id``)."""
    from matplotlib.backends.backend_agg import RendererAgg

    draw_text = RendererAgg.draw_text

    def recording(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            sizes.append(_smallest_glyph_pt(s, prop, ismath))
            if texts is not None and mtext is not None:
                texts[id(mtext)] = mtext
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    RendererAgg.draw_text = recording
    try:
        yield
    finally:
        RendererAgg.draw_text = draw_text


def _draw_recording(fig):
    """Draw ``fig`` at its own dpi (coordinates in CSS pixels); return the renderer and
    the text artists drawn (a tick label outside the view is not)."""
    renderer = fig._get_renderer()
    texts: dict = {}
    with _recording_text([], texts):
        fig.draw(renderer)
    return renderer, list(texts.values())


def unscaled_colours(fig) -> list[str]:
    """The colour-mapped images, meshes and scatter points (``c=values``) of ``fig`` that a
    reader cannot decode: no colour bar shows their colour map and limits, or their axes
    lack an x or y axis title (their own, or a ``supxlabel``/``supylabel`` of a figure
    holding them); and the colour bars that do not say what they show (no label or
    title)."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.collections import PathCollection, QuadMesh
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
    for bar_ax in _colour_bar_axes(fig):
        if not (bar_ax.get_xlabel() or bar_ax.get_ylabel() or bar_ax.get_title()):
            problems.append("a colour bar has no label")
    for ax in fig.axes:
        if ax in colorbar_axes:
            continue
        for mappable in ax.get_children():
            if isinstance(mappable, PathCollection):
                if mappable.get_array() is None:
                    continue  # points of given colours, not colour-mapped values
            elif not isinstance(mappable, (AxesImage, QuadMesh, ContourSet)):
                continue
            if isinstance(mappable, ContourSet) and not mappable.filled:
                continue  # contour lines of one colour encode nothing by colour
            name = f"{type(mappable).__name__} in {ax.get_title() or 'untitled axes'!r}"
            if scale(mappable) not in bars:
                problems.append(f"{name} has no colour bar")
            if not (titled(ax, "x") and titled(ax, "y")):
                problems.append(f"{name} lacks an axis title")
    return problems


def _segments_hit(segments, box) -> "np.ndarray":
    """Which of ``segments`` (M, 2, 2), display coordinates, pass through ``box``
    (Liang-Barsky clipping)."""
    import numpy as np

    start, end = segments[:, 0], segments[:, 1]
    delta = end - start
    low = np.zeros(len(segments))
    high = np.ones(len(segments))
    missed = np.zeros(len(segments), dtype=bool)
    for axis, lo, hi in ((0, box.x0, box.x1), (1, box.y0, box.y1)):
        for p, q in (
            (-delta[:, axis], start[:, axis] - lo),
            (delta[:, axis], hi - start[:, axis]),
        ):
            missed |= (p == 0) & (q < 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = q / p
            low = np.where(p < 0, np.maximum(low, ratio), low)
            high = np.where(p > 0, np.minimum(high, ratio), high)
    return ~missed & (low <= high)


def _data_marks(ax) -> list[tuple[str, "np.ndarray", "np.ndarray", "np.ndarray"]]:
    """``[(label, points (N, 2), their radii (N,), segments (M, 2, 2))]`` of the lines,
    line collections and scatter points of ``ax``, in display coordinates: a line's
    vertices (reaching half its marker's size, if it has one) and the segments drawn
    between them."""
    import numpy as np
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.lines import Line2D

    px_per_pt = ax.figure.dpi / 72
    none = np.zeros((0, 2)), np.zeros(0), np.zeros((0, 2, 2))
    found = []
    for artist in ax.get_children():
        if not artist.get_visible():
            continue
        points, radii, segments = none
        if isinstance(artist, Line2D):
            xy = np.asarray(artist.get_transform().transform(artist.get_xydata()))
            xy = xy.reshape(-1, 2)
            points = xy[np.isfinite(xy).all(axis=1)]  # the line's data points
            radius = 0.0
            if artist.get_marker() not in (None, "None", "", " ", ","):
                radius = (artist.get_markersize() + artist.get_markeredgewidth()) / 2
            radii = np.full(len(points), radius * px_per_pt)
            if (
                artist.get_linestyle() not in ("None", "", " ")
                and artist.get_linewidth()
            ):
                pairs = np.stack([xy[:-1], xy[1:]], axis=1)
                segments = pairs[np.isfinite(pairs).all(axis=(1, 2))]
        elif isinstance(artist, PathCollection):
            points = artist.get_offset_transform().transform(artist.get_offsets())
            points = np.asarray(points).reshape(-1, 2)
            sizes = np.resize(np.asarray(artist.get_sizes(), dtype=float), len(points))
            keep = np.isfinite(points).all(axis=1)
            points, radii = points[keep], np.sqrt(sizes[keep]) / 2 * px_per_pt
        elif isinstance(artist, LineCollection):
            transform = artist.get_transform()
            pieces = []
            for line in artist.get_segments():
                xy = np.asarray(transform.transform(np.asarray(line).reshape(-1, 2)))
                pieces.append(np.stack([xy[:-1], xy[1:]], axis=1))
            if pieces:
                segments = np.concatenate(pieces).reshape(-1, 2, 2)
                segments = segments[np.isfinite(segments).all(axis=(1, 2))]
        else:
            continue
        if len(points) or len(segments):
            found.append((artist.get_label(), points, radii, segments))
    return found


def _data_areas(ax) -> list[tuple[str, object]]:
    """``[(label, path)]`` of the filled shapes of ``ax`` in display coordinates: its
    patches (bars, ``axvspan``) and polygon collections (``fill_between``); a bar is
    named by its bar chart's label."""
    from matplotlib.collections import PolyCollection

    names = {
        id(patch): container.get_label()
        for container in getattr(ax, "containers", [])
        for patch in container
        if hasattr(patch, "get_path")
    }
    found = []
    for patch in ax.patches:
        if patch.get_visible() and patch.get_fill():
            path = patch.get_transform().transform_path(patch.get_path())
            found.append((names.get(id(patch), patch.get_label()), path))
    for collection in ax.collections:
        if isinstance(collection, PolyCollection) and collection.get_visible():
            transform = collection.get_transform()
            for path in collection.get_paths():
                found.append((collection.get_label(), transform.transform_path(path)))
    return found


def _areas_in(box, areas, shown) -> list[str]:
    """The labels of the ``areas`` (:func:`_data_areas`) entering ``box`` by more than
    :data:`TOUCH_PX`, inside ``shown`` (the axes)."""
    from matplotlib.transforms import Bbox

    inner = Bbox.intersection(box, shown)
    if inner is None or inner.width <= 2 * TOUCH_PX or inner.height <= 2 * TOUCH_PX:
        return []
    inner = inner.padded(-TOUCH_PX)
    hit = []
    for label, path in areas:
        if path.intersects_bbox(inner, filled=True) and label not in hit:
            hit.append(label)
    return hit


def _marks_in(box, points, radii, segments, shown) -> tuple[int, int]:
    """How many of the points (reaching ``radii`` around them) and segments enter ``box``
    by more than :data:`TOUCH_PX`, counting only what lies inside ``shown`` (the axes).
    """
    import numpy as np
    from matplotlib.transforms import Bbox

    inner = Bbox.intersection(box, shown)
    if inner is None or inner.width <= 2 * TOUCH_PX or inner.height <= 2 * TOUCH_PX:
        return 0, 0
    inner = inner.padded(-TOUCH_PX)
    x, y = points[:, 0], points[:, 1]
    visible = (x >= shown.x0) & (x <= shown.x1) & (y >= shown.y0) & (y <= shown.y1)
    inside = (
        visible
        & (x > inner.x0 - radii)
        & (x < inner.x1 + radii)
        & (y > inner.y0 - radii)
        & (y < inner.y1 + radii)
    )
    crossing = _segments_hit(segments, inner) if len(segments) else np.zeros(0, bool)
    return int(inside.sum()), int(crossing.sum())


def _what_is_hit(covered: int, crossed: int) -> str:
    """ "3 points" of a line (its vertices) if any, else "2 line segments" between them."""
    if covered:
        return f"{covered} points"
    return f"{crossed} line segments" if crossed else ""


def _legend_artists(fig) -> list:
    """Every legend of ``fig``: its axes' and its own (``fig.legend``)."""
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    return [legend for legend in legends if legend is not None and legend.get_visible()]


def legend_overlaps(fig, renderer=None) -> list[str]:
    """The legends of ``fig`` that cover data: a scatter point or marker reaching into the
    legend's box, a line passing through it (a segment between two vertices outside
    the box counts) or a filled shape (a bar, ``fill_between``) entering it; a figure's
    own legend is held against every axes. The explorers'
    frames pass it too (tests/lib/widgets). ``renderer``: that of a draw of ``fig`` just
    made, else ``fig`` is drawn here."""
    if renderer is None:
        fig.draw_without_rendering()
        renderer = fig._get_renderer()
    problems = []
    for legend in _legend_artists(fig):
        box = legend.get_window_extent(renderer)
        owner = legend.axes if legend.axes is not None else None
        for ax in [owner] if owner is not None else fig.axes:
            for label, points, radii, segments in _data_marks(ax):
                covered, crossed = _marks_in(box, points, radii, segments, ax.bbox)
                what = _what_is_hit(covered, crossed)
                if what:
                    problems.append(
                        f"the legend of {ax.get_title()!r} covers {what} of {label!r}"
                    )
            for label in _areas_in(box, _data_areas(ax), ax.bbox):
                problems.append(
                    f"the legend of {ax.get_title()!r} covers the area of {label!r}"
                )
    return problems


def text_overlaps(fig, renderer=None, texts=None) -> list[str]:
    """The texts of ``fig`` that collide: two text boxes sharing more than
    :data:`TOUCH_PX` both ways, a text and the box of a colour bar or an inset axes not
    its own (its ticks and label are), and a text (a legend's excepted:
    :func:`legend_overlaps` holds the legend's box) that a line, its markers, a scatter
    point or a filled shape (a bar, ``fill_between``) enters.
    ``renderer`` and ``texts``: a draw of ``fig`` and the text artists it drew
    (:func:`_draw_recording`); else ``fig`` is drawn here."""
    from matplotlib.transforms import Bbox

    if renderer is None or texts is None:
        renderer, texts = _draw_recording(fig)
    in_legends = {
        id(text)
        for legend in _legend_artists(fig)
        for text in [*legend.texts, legend.get_title()]
    }
    insets = _inset_axes(fig)
    boxes = [(text, text.get_window_extent(renderer)) for text in texts]
    boxes = [(text, box) for text, box in boxes if box.width > 0 and box.height > 0]
    problems = []
    for i, (text, box) in enumerate(boxes):
        for other, other_box in boxes[i + 1 :]:
            shared = Bbox.intersection(box, other_box)
            if shared is not None and min(shared.width, shared.height) > TOUCH_PX:
                problems.append(f"{text.get_text()!r} overlaps {other.get_text()!r}")
        for inset in insets:
            if text.axes is not inset and _shared(box, inset.bbox):
                problems.append(f"{text.get_text()!r} overlaps {_name_of(inset)}")
        if id(text) in in_legends:
            continue
        for ax in fig.axes:
            for label, points, radii, segments in _data_marks(ax):
                covered, crossed = _marks_in(box, points, radii, segments, ax.bbox)
                what = _what_is_hit(covered, crossed)
                if what:
                    problems.append(f"{text.get_text()!r} touches {what} of {label!r}")
            for label in _areas_in(box, _data_areas(ax), ax.bbox):
                problems.append(f"{text.get_text()!r} touches the area of {label!r}")
    return problems


def _name_of(inset) -> str:
    """ "a colour bar" or "an inset axes 'its title'"."""
    if any(inset is bar for bar in _colour_bar_axes(inset.figure)):
        return "a colour bar"
    return f"an inset axes {inset.get_title()!r}"


def _shared(box, other) -> bool:
    """Whether two display boxes share more than :data:`TOUCH_PX` both ways."""
    from matplotlib.transforms import Bbox

    shared = Bbox.intersection(box, other)
    return shared is not None and min(shared.width, shared.height) > TOUCH_PX


def _inset_axes(fig) -> list:
    """The colour bars of ``fig`` and the axes drawn inside another axes (``inset_axes``)."""
    found = _colour_bar_axes(fig)
    for ax in fig.axes:
        for child in getattr(ax, "child_axes", []):
            if all(child is not other for other in found):
                found.append(child)
    return found


def _colour_bar_axes(fig) -> list:
    from matplotlib.cm import ScalarMappable

    found = []
    for mappable in fig.findobj(lambda a: isinstance(a, ScalarMappable)):
        bar = getattr(mappable, "colorbar", None)
        if bar is not None and all(bar.ax is not ax for ax in found):
            found.append(bar.ax)
    return found


def _axis_title(ax, which):
    """The text naming ``ax``'s ``which`` ("x" or "y") axis: its own label, else the
    ``supxlabel``/``supylabel`` of the nearest figure holding it; None if there is none.
    """
    label = getattr(ax, f"{which}axis").label
    if label.get_visible() and label.get_text():
        return label
    figure = ax.get_figure(root=False)
    while True:
        label = getattr(figure, f"_sup{which}label", None)
        if label is not None and label.get_visible() and label.get_text():
            return label
        if figure.get_figure(root=False) is figure:  # the root figure
            return None
        figure = figure.get_figure(root=False)


def split_titles(fig, renderer=None) -> list[str]:
    """The axis titles of ``fig`` that a colour bar separates from their axes (a bar
    under a plot puts the x title under the bar) or covers: a colour bar's box entering
    the gap between an axes and its title, or the title's box, by more than
    :data:`TOUCH_PX` both ways. A title beyond another plot (a ``supxlabel`` under two
    rows, for the top row) is only the nearest plot's to reach."""
    from matplotlib.transforms import Bbox

    if renderer is None:
        fig.draw_without_rendering()
        renderer = fig._get_renderer()
    bars = _colour_bar_axes(fig)
    problems = []
    for ax in fig.axes:
        if any(ax is bar for bar in bars):
            continue
        frame = ax.bbox
        for which in "xy":
            title = _axis_title(ax, which)
            if title is None:
                continue
            box = title.get_window_extent(renderer)
            # the gap and the title itself: a bar lying on the title hides it as well
            if which == "x" and box.y1 <= frame.y0:  # under the axes
                gap = Bbox([[frame.x0, box.y0], [frame.x1, frame.y0]])
            elif which == "x" and box.y0 >= frame.y1:  # above it
                gap = Bbox([[frame.x0, frame.y1], [frame.x1, box.y1]])
            elif which == "y" and box.x1 <= frame.x0:  # left of it
                gap = Bbox([[box.x0, frame.y0], [frame.x0, frame.y1]])
            elif which == "y" and box.x0 >= frame.x1:  # right of it
                gap = Bbox([[frame.x1, frame.y0], [box.x1, frame.y1]])
            else:
                continue
            if any(
                _shared(gap, other.bbox)
                for other in fig.axes
                if other is not ax
                and other.get_visible()
                and not any(other is bar for bar in bars)
            ):
                continue  # another plot lies between: the title is that plot's to reach
            for bar in bars:
                if _shared(gap, bar.bbox):
                    problems.append(
                        f"a colour bar sits between {ax.get_title() or 'untitled axes'!r}"
                        f" and its {which} title {title.get_text()!r}"
                    )
    return problems


def plot_png(fig) -> tuple[bytes, dict]:
    """``fig`` as the book shows it: a 256-colour PNG at :data:`PIXEL_DENSITY` times its CSS
    size (cropped to what is drawn, as the inline backend does), and its output metadata:
    the CSS ``width``, the smallest ``font_pt`` drawn (a formula's scripts included), what
    :func:`unscaled_colours`, :func:`legend_overlaps`, :func:`text_overlaps` and
    :func:`split_titles` find, and ``checked``: :data:`PLOT_CHECKS`."""
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
    renderer, texts = _draw_recording(fig)
    for key, problems in (
        ("unscaled_colours", unscaled_colours(fig)),
        ("legend_overlaps", legend_overlaps(fig, renderer)),
        ("text_overlaps", text_overlaps(fig, renderer, texts)),
        ("split_titles", split_titles(fig, renderer)),
    ):
        if problems:
            metadata[key] = problems
    metadata["checked"] = list(PLOT_CHECKS)
    return out.getvalue(), metadata


def power_label(value: float, base: float = 10) -> str:
    """A log axis' tick label as plain text at the text's own size: 0.001 to 10000 as
    exact decimals, ``d×10^n`` beyond them as ``1e−10``, another power of ``base`` (2) as
    ``2^17``; never a formula, whose exponent mathtext draws at 0.7 of the text size
    (8.4 pt, under the phone rule). A value none of these writes exactly is rounded to
    three digits (``1.05e6``).

    Examples
    --------
    >>> [power_label(v) for v in (1e-10, 0.002, 1.0, 300.0, 1e5, 2e-7)]
    ['1e−10', '0.002', '1', '300', '1e5', '2e−7']
    >>> [power_label(v, base=2) for v in (2**17, 2**-10, 2**-5, 32768, 2**20)]
    ['2^17', '2^−10', '0.03125', '32768', '2^20']
    >>> power_label(2**20)  # base 10: not d×10^n, so not 1e6
    '1.05e6'
    """
    if not value > 0:
        return ""
    if 1e-3 <= value < 1e5 and float(f"{value:.12g}") == value:
        return f"{value:.12g}"
    rounded = f"{value:.0e}"
    if base != 10 and not math.isclose(float(rounded), value, rel_tol=1e-9):
        exponent = round(math.log(value, base))
        if math.isclose(base**exponent, value, rel_tol=1e-9):
            return f"{base:g}^{exponent}".replace("-", "\N{MINUS SIGN}")
    if 1e-3 <= value < 1e5:
        return f"{value:.3g}"
    if not math.isclose(float(rounded), value, rel_tol=1e-9):
        rounded = f"{value:.2e}"  # not d×10^n: three digits
    mantissa, exponent = rounded.split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}".replace("-", "\N{MINUS SIGN}")


class PlainLogFormatter(matplotlib.ticker.LogFormatter):
    """matplotlib's choice of which log ticks to label, each labelled by
    :func:`power_label` in the axis' base, one notation per axis: if one label needs a
    power (``1e−6``, ``2^20``), every power of the base is written so (``1e0``, ``1e−2``
    beside it, not ``1``, ``0.01``). :func:`use_book_plots` gives it to every log axis.
    """

    def _num_to_string(self, x, vmin, vmax):
        label = power_label(x, self._base)
        if getattr(self, "_powers", False) and "e" not in label and "^" not in label:
            exponent = round(math.log(x, self._base))
            if math.isclose(self._base**exponent, x, rel_tol=1e-9):
                if self._base == 10:
                    return f"1e{exponent}".replace("-", "\N{MINUS SIGN}")
                return f"{self._base:g}^{exponent}".replace("-", "\N{MINUS SIGN}")
        return label

    def format_ticks(self, values):
        self._powers = False
        labels = super().format_ticks(values)
        # matplotlib also formats ticks just outside the view: only those in view decide
        low, high = (
            sorted(self.axis.get_view_interval())
            if self.axis
            else (-math.inf, math.inf)
        )
        shown = [
            label
            for value, label in zip(values, labels)
            if low * (1 - 1e-9) <= value <= high * (1 + 1e-9)
        ]
        if any("e" in label or "^" in label for label in shown):
            self._powers = True
            labels = super().format_ticks(values)
            self._powers = False
        return labels


def _plain_log_ticks(set_default_locators_and_formatters):
    """``LogScale.set_default_locators_and_formatters``, with :class:`PlainLogFormatter`
    for the labels."""

    @functools.wraps(set_default_locators_and_formatters)
    def plain(self, axis):
        set_default_locators_and_formatters(self, axis)
        axis.set_major_formatter(PlainLogFormatter(self.base))
        axis.set_minor_formatter(
            PlainLogFormatter(self.base, labelOnlyBase=(self.subs is not None))
        )

    plain.book_plots = True
    return plain


def _show_plot(fig) -> tuple[str, dict]:
    """IPython's PNG printer for figures: :func:`plot_png`, base64-encoded."""
    data, metadata = plot_png(fig)
    return base64.b64encode(data).decode("ascii"), metadata


def use_book_plots(shell=None) -> None:
    """Set :data:`PLOT_STYLE`, label every log axis with :class:`PlainLogFormatter` and,
    in an IPython ``shell`` (default: the running one, if any), show figures through
    :func:`plot_png`. Importing this module calls it."""
    from matplotlib.scale import LogScale

    matplotlib.rcParams.update(PLOT_STYLE)
    if not getattr(LogScale.set_default_locators_and_formatters, "book_plots", False):
        LogScale.set_default_locators_and_formatters = _plain_log_ticks(
            LogScale.set_default_locators_and_formatters
        )
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
