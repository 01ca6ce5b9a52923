"""The book's plots (lib.display): the style every chapter's figures get, and the PNG each is shown as.

``tests/book/test_plot_outputs.py`` holds every committed plot to the phone rule through the metadata
that :func:`lib.display.plot_png` writes; these tests show that metadata tells the truth and that the
style meets the rule up to the width it promises, and not beyond.
"""
import base64
import io

import matplotlib
import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from matplotlib.figure import Figure
from PIL import Image

import lib.display as display
import lib.widgets.core as core
from lib.display import (MIN_TEXT_PX, PHONE_WIDTH_PX, PIXEL_DENSITY, PLOT_CHECKS, PLOT_DPI, PLOT_FONT_PT,
                         PLOT_STYLE, TOUCH_PX, legend_overlaps, phone_text_px, plot_png, split_titles,
                         text_overlaps, unscaled_colours, use_book_plots)


def every_kind_of_text(width_in: float, height_in: float = 3.0) -> Figure:
    """A figure in the book's style with each kind of text a chapter draws, at its default size."""
    with matplotlib.rc_context(PLOT_STYLE):
        fig = Figure(figsize=(width_in, height_in), layout="constrained")
        ax = fig.add_subplot()
        image = ax.imshow(np.arange(6.0).reshape(2, 3), cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, label="value")
        ax.plot([0, 2], [0, 1], label="a line")
        ax.set(title="title", xlabel="x label", ylabel="y label")
        ax.legend(title="legend")
        ax.text(0.5, 0.5, "text")
        ax.annotate("note", (1, 1))
        fig.suptitle("suptitle")
        fig.supxlabel("supxlabel")
    return fig


def test_the_phone_rule_is_the_explorers():
    assert (PHONE_WIDTH_PX, MIN_TEXT_PX, PIXEL_DENSITY) == (core.PHONE_WIDTH_PX, core.MIN_TEXT_PX,
                                                          core.PIXEL_DENSITY)
    # 12 pt at 100 px per inch is 16.67 px; a plot 480 px wide shrinks to 356 px on a phone.
    assert phone_text_px(12, 300) == pytest.approx(12 / 72 * 100)
    assert phone_text_px(12, 480) == pytest.approx(12 / 72 * 100 * 356 / 480)
    # A wide plot: the same text px as an explorer of the same width in inches (its rule, min_font_pt).
    assert phone_text_px(core.min_font_pt(6.4), 6.4 * PLOT_DPI) == pytest.approx(MIN_TEXT_PX)
    with pytest.raises(ValueError, match="font_pt and width_px must be positive; found 12 and 0"):
        phone_text_px(12, 0)


def test_plot_png_is_twice_the_css_width_a_palette_and_records_the_smallest_text():
    fig = every_kind_of_text(4.8)
    data, metadata = plot_png(fig)
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.mode == "P"
    assert image.size[0] == PIXEL_DENSITY * metadata["width"] and image.size[1] % PIXEL_DENSITY == 0
    assert abs(metadata["width"] - 480) <= 5  # cropped to what is drawn, 0.05 inch around it
    assert metadata["font_pt"] == PLOT_FONT_PT and "unscaled_colours" not in metadata
    # One smaller text anywhere is what it records (here a tick label).
    fig.axes[0].tick_params(axis="y", labelsize=7)
    assert plot_png(fig)[1]["font_pt"] == 7
    # An odd number of pixels is padded to whole CSS pixels with the background.
    odd = Figure(figsize=(1.005, 1.005))
    odd.text(0.5, 0.5, "x")
    odd_data, odd_metadata = plot_png(odd)
    assert Image.open(io.BytesIO(odd_data)).size[0] == 2 * odd_metadata["width"]


def test_the_style_keeps_every_text_legible_on_a_phone_up_to_its_widest_plot_and_not_beyond():
    widest = PHONE_WIDTH_PX * PLOT_FONT_PT / (MIN_TEXT_PX * 72)  # 4.94 inches
    assert widest == pytest.approx(4.944, abs=1e-3)
    _, fits = plot_png(every_kind_of_text(4.8))
    assert phone_text_px(fits["font_pt"], fits["width"]) >= MIN_TEXT_PX
    _, too_wide = plot_png(every_kind_of_text(5.2))
    assert phone_text_px(too_wide["font_pt"], too_wide["width"]) < MIN_TEXT_PX


def test_importing_lib_display_set_the_style():
    assert all(matplotlib.rcParams[key] == value for key, value in PLOT_STYLE.items()
               if key != "figure.figsize")
    assert tuple(matplotlib.rcParams["figure.figsize"]) == PLOT_STYLE["figure.figsize"]


def test_a_colour_scale_needs_a_colour_bar_and_axis_titles():
    def heat_map(bar=True, titles=True, shared=False):
        fig = Figure()
        axes = fig.subplots(1, 2 if shared else 1, squeeze=False)[0]
        images = [ax.imshow(np.eye(3), cmap="Greys", vmin=0, vmax=1) for ax in axes]
        if bar:
            fig.colorbar(images[0], ax=list(axes), label="weight")
        if titles:
            fig.supxlabel("key")
            for ax in axes:
                ax.set_ylabel("query")
        return fig

    assert unscaled_colours(heat_map()) == []
    assert unscaled_colours(heat_map(shared=True)) == []  # one bar for two maps of the same scale
    assert unscaled_colours(heat_map(bar=False)) == ["AxesImage in 'untitled axes' has no colour bar"]
    assert unscaled_colours(heat_map(titles=False)) == ["AxesImage in 'untitled axes' lacks an axis title"]
    # One axis title is not enough: either one missing is found.
    only_x = heat_map()
    only_x.axes[0].set_ylabel("")
    assert unscaled_colours(only_x) == ["AxesImage in 'untitled axes' lacks an axis title"]
    only_y = heat_map(titles=False)
    only_y.axes[0].set_ylabel("query")
    assert unscaled_colours(only_y) == ["AxesImage in 'untitled axes' lacks an axis title"]
    other = heat_map(shared=True)
    other.axes[1].images[0].set_clim(0, 2)  # a bar for another scale does not explain it
    other.axes[1].set_title("other")
    assert unscaled_colours(other) == ["AxesImage in 'other' has no colour bar"]
    # Titles of a sub-figure count; contour lines of one colour encode nothing by colour.
    fig = Figure()
    panel = fig.subfigures(1, 1)
    ax = panel.add_subplot()
    ax.contour(np.random.default_rng(0).random((5, 5)), colors="0.8")
    image = ax.imshow(np.eye(2), vmin=0, vmax=1)
    bar = panel.colorbar(image, ax=ax)
    panel.supxlabel("x")
    ax.set_ylabel("y")
    # A colour bar must say what it shows: a label or a title.
    assert unscaled_colours(fig) == ["a colour bar has no label"]
    bar.ax.set_title("weight")
    assert unscaled_colours(fig) == []
    bar.ax.set_title("")
    bar.set_label("weight")
    assert unscaled_colours(fig) == []
    # Scatter points coloured by values (c=...) need a bar too; points of one given colour do not.
    fig = Figure()
    ax = fig.add_subplot(xlabel="x", ylabel="y")
    points = ax.scatter([0, 1, 2], [0, 1, 2], c=[0.0, 0.5, 1.0])
    ax.scatter([0, 1], [1, 0], c="tab:red")
    assert unscaled_colours(fig) == ["PathCollection in 'untitled axes' has no colour bar"]
    fig.colorbar(points, ax=ax, label="value")
    assert unscaled_colours(fig) == []
    assert plot_png(heat_map(bar=False))[1]["unscaled_colours"] == [
        "AxesImage in 'untitled axes' has no colour bar"]


def test_a_shell_shows_figures_through_plot_png():
    shell = InteractiveShell.instance()
    use_book_plots(shell)
    fig = every_kind_of_text(4.8)
    data, metadata = shell.display_formatter.format(fig)
    assert set(data) == {"image/png", "text/plain"}
    assert data["text/plain"] == "<Figure size 480x300 with 2 Axes>"
    (shown,) = metadata.values()
    assert set(metadata) == {"image/png"} and shown["font_pt"] == PLOT_FONT_PT
    image = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
    assert image.mode == "P" and image.size[0] == PIXEL_DENSITY * shown["width"]
    assert abs(shown["width"] - plot_png(fig)[1]["width"]) <= 1  # a second layout pass may move a pixel


def test_a_legend_over_data_is_found():
    def flat(loc):
        fig = Figure(figsize=(4.8, 3), layout="constrained")
        ax = fig.add_subplot()
        ax.plot(np.linspace(0, 1, 50), np.full(50, 0.5), label="flat")
        ax.scatter([0.5], [0.9], label="dot")
        ax.set_ylim(0, 1)
        if loc == "outside":
            fig.legend(loc="outside lower center")
        else:
            ax.legend(loc=loc)
        return fig

    assert legend_overlaps(flat("lower left")) == []
    assert legend_overlaps(flat("outside")) == []
    (problem,) = legend_overlaps(flat("center"))
    assert problem.startswith("the legend of '' covers") and problem.endswith("points of 'flat'")
    assert legend_overlaps(flat("upper center")) == ["the legend of '' covers 1 points of 'dot'"]
    assert plot_png(flat("center"))[1]["legend_overlaps"] == [problem]


def test_a_legend_over_the_middle_of_a_segment_is_found():
    def diagonal(loc="center", vertices=2, figure_legend=False):
        fig = Figure(figsize=(4.8, 3), layout="constrained")
        ax = fig.add_subplot()
        ax.plot(np.linspace(0, 1, vertices), np.linspace(0, 1, vertices), label="line")
        (fig if figure_legend else ax).legend(loc=loc)
        return fig

    # Two vertices, both far outside the legend: only the segment between them crosses it.
    assert legend_overlaps(diagonal()) == ["the legend of '' covers 1 line segments of 'line'"]
    assert legend_overlaps(diagonal("upper left")) == []
    # A figure's own legend over an axes is held against that axes' data.
    assert legend_overlaps(diagonal(figure_legend=True)) == ["the legend of '' covers 1 line segments of 'line'"]
    assert legend_overlaps(diagonal("outside lower center", figure_legend=True)) == []


def test_a_pcolormesh_and_filled_contours_need_the_same():
    def mesh(bar=True, titles=True, filled=False):
        fig = Figure()
        ax = fig.add_subplot()
        values = np.arange(12.0).reshape(3, 4)
        shown = ax.contourf(values) if filled else ax.pcolormesh(values, cmap="magma")
        if bar:
            fig.colorbar(shown, ax=ax, label="value")
        if titles:
            ax.set(xlabel="column", ylabel="row")
        return fig

    assert unscaled_colours(mesh()) == unscaled_colours(mesh(filled=True)) == []
    assert unscaled_colours(mesh(bar=False)) == ["QuadMesh in 'untitled axes' has no colour bar"]
    assert unscaled_colours(mesh(titles=False)) == ["QuadMesh in 'untitled axes' lacks an axis title"]
    assert unscaled_colours(mesh(bar=False, filled=True)) == [
        f"{type(mesh(filled=True).axes[0].collections[0]).__name__} in 'untitled axes' has no colour bar"]


def test_a_formulas_exponents_and_subscripts_are_measured():
    def labelled(xlabel, log=False, formula_ticks=False):
        with matplotlib.rc_context(PLOT_STYLE):
            fig = Figure(figsize=(4.8, 3), layout="constrained")
            ax = fig.add_subplot()
            ax.plot([1, 10, 100], [1, 2, 3])
            ax.set(xlabel=xlabel, ylabel="y")
            if log:
                ax.set_xscale("log")
            if formula_ticks:  # matplotlib's own log labels: 10^0, 10^1, 10^2 in mathtext
                ax.xaxis.set_major_formatter(matplotlib.ticker.LogFormatterSciNotation())
        return plot_png(fig)[1]

    assert labelled("plain")["font_pt"] == PLOT_FONT_PT
    assert labelled(r"$x$ with no script")["font_pt"] == PLOT_FONT_PT
    assert labelled(r"weight $\alpha_{t,s}$")["font_pt"] == pytest.approx(0.7 * PLOT_FONT_PT)
    assert labelled(r"$e^{x_i}$")["font_pt"] == pytest.approx(0.49 * PLOT_FONT_PT)  # a script's script
    assert labelled("plain", log=True, formula_ticks=True)["font_pt"] == pytest.approx(0.7 * PLOT_FONT_PT)
    assert labelled("plain", log=True)["font_pt"] == PLOT_FONT_PT  # the book's log labels: plain text
    # A Unicode subscript or superscript is a small glyph too (Fig 11.7's "W₂" of stop 42).
    assert labelled("‖∂L/∂W₂‖")["font_pt"] == pytest.approx(display.UNICODE_SCRIPT_SCALE * PLOT_FONT_PT)
    assert labelled("size 2¹⁰")["font_pt"] == pytest.approx(display.UNICODE_SCRIPT_SCALE * PLOT_FONT_PT)
    # with a formula beside it, the Unicode script still counts (not only the formula's glyphs)
    assert labelled("‖∂L/∂W₂‖ of $x$")["font_pt"] == pytest.approx(display.UNICODE_SCRIPT_SCALE * PLOT_FONT_PT)
    assert labelled("‖∂L/∂W2‖, √|V|, ∂h(42)")["font_pt"] == PLOT_FONT_PT
    # 8.4 pt in a 480 px plot is 8.7 px on a phone: the book's test refuses it.
    assert phone_text_px(0.7 * PLOT_FONT_PT, 480) < MIN_TEXT_PX
    assert labelled("plain")["checked"] == list(PLOT_CHECKS)


def bar_and_title(location: str, figure_titles: bool = False, panels: int = 1) -> Figure:
    """Heat maps in a row with one colour bar at ``location`` and axis titles of their own (constrained
    layout puts a bar beyond them) or of the figure (``supxlabel``, ``supylabel``: beyond the bar)."""
    with matplotlib.rc_context(PLOT_STYLE):
        fig = Figure(figsize=(4.8, 3.6), layout="constrained")
        axes = fig.subplots(1, panels, squeeze=False)[0]
        images = [ax.imshow(np.eye(3), vmin=0, vmax=1, aspect="auto") for ax in axes]
        fig.colorbar(images[0], ax=list(axes), location=location, label="weight")
        for ax in axes:
            if not figure_titles:
                ax.set(xlabel="key", ylabel="query")
        if figure_titles:
            fig.supxlabel("key")
            fig.supylabel("query")
    return fig


def test_a_colour_bar_between_an_axes_and_its_title_is_found():
    for location in ("right", "top", "bottom", "left"):  # a bar beyond the axes' own titles
        assert split_titles(bar_and_title(location)) == [], location
    assert split_titles(bar_and_title("right", figure_titles=True)) == []
    assert split_titles(bar_and_title("top", figure_titles=True)) == []
    # Figs 3.5, 10.6, 10.9 and 12.5 of stop 41: the figure's x title under the bottom bar, for each panel.
    assert split_titles(bar_and_title("bottom", figure_titles=True, panels=2)) == [
        "a colour bar sits between 'untitled axes' and its x title 'key'"] * 2
    assert split_titles(bar_and_title("left", figure_titles=True)) == [
        "a colour bar sits between 'untitled axes' and its y title 'query'"]
    # An axes' own x title moved above it, with the bar still below: nothing between them.
    above = bar_and_title("bottom")
    above.axes[0].xaxis.set_label_position("top")
    assert split_titles(above) == []
    # The same x title with the bar moved up against the axes (no constrained layout): found.
    squeezed = bar_and_title("bottom")
    squeezed.set_layout_engine("none")
    squeezed.axes[1].set_position([0.1, 0.05, 0.8, 0.05])  # the bar, between the title and the axes
    squeezed.axes[0].set_position([0.1, 0.4, 0.8, 0.5])
    squeezed.axes[0].xaxis.labelpad = 60
    assert split_titles(squeezed) == ["a colour bar sits between 'untitled axes' and its x title 'key'"]
    # A bar lying on the title itself (no layout engine to move it): found by both checks.
    def bar_on_title(layout):
        with matplotlib.rc_context(PLOT_STYLE):
            fig = Figure(figsize=(4.8, 3), layout=layout)
            ax = fig.add_subplot(xlabel="x title", ylabel="y")
            fig.colorbar(ax.imshow(np.eye(4)), ax=ax, location="bottom", label="v")
        return fig

    on_title = bar_on_title(None)
    assert split_titles(on_title) == ["a colour bar sits between 'untitled axes' and its x title 'x title'"]
    assert text_overlaps(on_title) == ["'x title' overlaps a colour bar"]
    clear = bar_on_title("constrained")  # the layout moves the bar clear
    assert split_titles(clear) == [] and text_overlaps(clear) == []
    # An inset axes (a colour bar drawn by inset_axes) on the title: text_overlaps finds it.
    with matplotlib.rc_context(PLOT_STYLE):
        inset = Figure(figsize=(4.8, 3))
        ax = inset.add_subplot(xlabel="x title", ylabel="y")
        inset.colorbar(ax.imshow(np.eye(4)), cax=ax.inset_axes([0.1, -0.25, 0.8, 0.05]),
                       orientation="horizontal", label="v")
    assert "'x title' overlaps a colour bar" in text_overlaps(inset)
    def zoom(where):
        with matplotlib.rc_context(PLOT_STYLE):
            fig = Figure(figsize=(4.8, 3))
            ax = fig.add_subplot(xlabel="x", ylabel="y", xlim=(0, 1), ylim=(0, 1))
            ax.text(0.1, 0.9, "note", va="top")
            ax.inset_axes(where, xticks=[], yticks=[])
        return fig

    assert text_overlaps(zoom([0.55, 0.1, 0.4, 0.4])) == []
    assert text_overlaps(zoom([0.05, 0.5, 0.4, 0.4])) == ["'note' overlaps an inset axes ''"]  # on the note
    # Two rows sharing a supxlabel, a bar under the top row: the bottom row lies between the top row
    # and the title, so the bar does not separate them (stop 42's false positive).
    with matplotlib.rc_context(PLOT_STYLE):
        rows = Figure(figsize=(4.8, 5), layout="constrained")
        top, bottom = rows.subplots(2, 1)
        for ax in (top, bottom):
            ax.imshow(np.eye(4), vmin=0, vmax=1, aspect="auto")
        rows.colorbar(top.images[0], ax=top, location="bottom", label="v")
        rows.supxlabel("shared x")
        rows.supylabel("shared y")
    assert split_titles(rows) == []
    rows.colorbar(bottom.images[0], ax=bottom, location="bottom", label="v")  # under the bottom row: found
    assert split_titles(rows) == ["a colour bar sits between 'untitled axes' and its x title 'shared x'"]
    assert plot_png(bar_and_title("bottom", figure_titles=True))[1]["split_titles"] == [
        "a colour bar sits between 'untitled axes' and its x title 'key'"]


def test_texts_colliding_with_each_other_or_the_data_are_found():
    def labelled(*where, marker="o", line="-"):
        """A line through (0, 0.5), (0.5, 0.5), (1, 0.5) and a text "label" at each of ``where``."""
        with matplotlib.rc_context(PLOT_STYLE):
            fig = Figure(figsize=(4.8, 3), layout="constrained")
            ax = fig.add_subplot()
            ax.plot([0, 0.5, 1], [0.5, 0.5, 0.5], marker=marker, linestyle=line, label="data")
            ax.set(xlim=(-0.1, 1.1), ylim=(0, 1), xlabel="x", ylabel="y")
            for x, y in where:
                ax.text(x, y, "label", ha="center", va="center")
        return fig

    assert text_overlaps(labelled((0.25, 0.85))) == []
    # Over a vertex drawn with a marker, over a segment (between two vertices outside the text).
    assert text_overlaps(labelled((0.5, 0.5))) == ["'label' touches 1 points of 'data'"]
    assert text_overlaps(labelled((0.5, 0.5), marker="")) == ["'label' touches 1 points of 'data'"]  # a vertex
    assert text_overlaps(labelled((0.25, 0.5))) == ["'label' touches 1 line segments of 'data'"]
    assert text_overlaps(labelled((0.25, 0.5), line="none")) == []
    # A marker's disc reaching into the text's box counts, not only its centre.
    fig = labelled((0.5, 0.5), line="none")
    ax = fig.axes[0]
    fig.draw_without_rendering()
    box = ax.texts[0].get_window_extent(fig._get_renderer())
    radius = (ax.lines[0].get_markersize() + ax.lines[0].get_markeredgewidth()) / 2 * fig.dpi / 72
    for gap, found in ((radius - 2 * TOUCH_PX, 1), (radius + 0.5, 0)):  # px from the box's bottom edge
        y = ax.transData.inverted().transform((0, box.y0 - gap))[1]
        ax.lines[0].set_ydata([y] * 3)
        expected = ["'label' touches 1 points of 'data'"] if found else []
        assert text_overlaps(fig) == expected, gap
    # Two texts on each other; the legend's own texts are the legend check's, not this one's.
    assert text_overlaps(labelled((0.25, 0.85), (0.3, 0.85))) == ["'label' overlaps 'label'"]
    legend = labelled((0.25, 0.85))
    legend.axes[0].legend(loc="center")
    assert text_overlaps(legend) == []
    assert legend_overlaps(legend) == ["the legend of '' covers 1 points of 'data'"]
    # A tick label crowding the next one.
    crowded = labelled()
    crowded.axes[0].set_xticks([0.5, 0.52], ["long tick", "label"])
    assert text_overlaps(crowded) == ["'long tick' overlaps 'label'"]
    # Filled shapes: a text or a legend over a bar or a fill_between area; beside them, nothing.
    def filled(kind, where, legend=None):
        with matplotlib.rc_context(PLOT_STYLE):
            fig = Figure(figsize=(4.8, 3), layout="constrained")
            ax = fig.add_subplot(xlabel="x", ylabel="y")
            if kind == "bar":
                ax.bar([0, 1], [1, 2], width=0.5, label="bars")
            else:
                ax.fill_between([0, 1], [0, 0], [1, 2], label="band")
            ax.set(xlim=(-0.5, 1.5), ylim=(0, 4))
            if where:
                ax.text(*where, "label", ha="center", va="center")
            if legend:
                ax.legend(loc=legend)
        return fig

    assert text_overlaps(filled("bar", (1, 1))) == ["'label' touches the area of 'bars'"]
    assert text_overlaps(filled("bar", (0, 3))) == []
    assert text_overlaps(filled("fill", (0.5, 0.5))) == ["'label' touches the area of 'band'"]
    assert text_overlaps(filled("fill", (0.15, 1.5))) == []  # above the sloping top edge, inside its box
    assert legend_overlaps(filled("bar", None, legend="lower right")) == ["the legend of '' covers the area of 'bars'"]
    assert legend_overlaps(filled("bar", None, legend="upper left")) == []
    assert legend_overlaps(filled("fill", None, legend="lower right")) == ["the legend of '' covers the area of 'band'"]
    assert plot_png(labelled((0.25, 0.5)))[1]["text_overlaps"] == ["'label' touches 1 line segments of 'data'"]


def test_every_log_axis_is_labelled_in_plain_text():
    assert [display.power_label(v) for v in (1e-10, 1e-4, 0.001, 0.5, 1, 250, 12345, 1e5, 3e7, 0, -1)] == [
        "1e\N{MINUS SIGN}10", "1e\N{MINUS SIGN}4", "0.001", "0.5", "1", "250", "12345", "1e5", "3e7", "", ""]
    use_book_plots()  # twice: the log scale's labels are wrapped once
    use_book_plots()
    fig = Figure()
    ax = fig.add_subplot()
    ax.loglog([1e-6, 1e2], [1, 2])
    fig.draw_without_rendering()
    for axis in (ax.xaxis, ax.yaxis):
        assert type(axis.get_major_formatter()) is display.PlainLogFormatter
        assert type(axis.get_minor_formatter()) is display.PlainLogFormatter
    shown = [t.get_text() for t in ax.get_xticklabels() if ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    # One notation per axis: 1e−6 beside 1e−2, not 0.01 (Fig 4.4 of stop 42 mixed them).
    assert shown == ["1e\N{MINUS SIGN}6", "1e\N{MINUS SIGN}4", "1e\N{MINUS SIGN}2", "1e0", "1e2"]
    ax.set_xlim(0.01, 100)  # all decimals: kept
    fig.draw_without_rendering()
    assert [t.get_text() for t in ax.get_xticklabels() if 0.01 <= t.get_position()[0] <= 100] == [
        "0.01", "0.1", "1", "10", "100"]
    # A tick matplotlib formats just outside the view (1e5 beyond 2..1e4) does not decide the
    # notation: the axis of Fig 2.x kept "10 … 10000" (the re-referee found "1e1 … 1e4").
    ax.set_xlim(2, 1e4)
    fig.draw_without_rendering()
    assert [t.get_text() for t in ax.get_xticklabels() if 2 <= t.get_position()[0] <= 1e4] == [
        "10", "100", "1000", "10000"]
    # Less than a decade: matplotlib labels some minor ticks, in plain text too.
    ax.set_ylim(1.1, 1.9)
    fig.draw_without_rendering()
    assert [t.get_text() for t in ax.get_yticklabels(minor=True) if t.get_text()] != []
    assert not any("$" in t.get_text() for t in ax.get_yticklabels(minor=True) + ax.get_yticklabels())
    # A base-2 axis: exact numbers, or powers of 2 where no short exact number exists (not '1e6').
    assert [display.power_label(2.0**e, base=2) for e in (-15, -10, -5, 0, 5, 10, 15, 17, 20)] == [
        "2^\N{MINUS SIGN}15", "2^\N{MINUS SIGN}10", "0.03125", "1", "32", "1024", "32768", "2^17", "2^20"]
    assert display.power_label(2.0**20) == "1.05e6"  # base 10: three digits, not '1e6'
    base2 = Figure()
    ax = base2.add_subplot()
    ax.plot([2.0**-15, 2.0**25], [1, 2])
    ax.set_xscale("log", base=2)
    base2.draw_without_rendering()
    shown = [t.get_text() for t in ax.get_xticklabels() if ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]]
    assert shown and all(label.startswith("2^") for label in shown), shown
