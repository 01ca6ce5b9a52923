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
from lib.display import (MIN_TEXT_PX, PHONE_WIDTH_PX, PIXEL_DENSITY, PLOT_DPI, PLOT_FONT_PT, PLOT_STYLE,
                         legend_overlaps, phone_text_px, plot_png, unscaled_colours,
                         use_book_plots)


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
    panel.colorbar(image, ax=ax)
    panel.supxlabel("x")
    ax.set_ylabel("y")
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
