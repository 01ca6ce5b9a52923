"""Explorer frames a reader can read on a phone: text size, clipping, legends, weight, disabled controls.

``assert_legible(visual)`` draws a visual at its defaults, at each value of each
control (the others at their defaults) and at the first and last value of every
control, and checks what the renderer actually drew. The test files of the
visuals that need data (word vectors, trained models) call it with their fixtures.
"""
import io
import itertools
from unittest import mock

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from PIL import Image

import lib.widgets.core as core
from lib.display import legend_overlaps
from lib.widgets import Choice, Slider, explore
from lib.widgets.activations import ActivationExplorer, MarginLossExplorer
from lib.widgets.attention import AttentionHeatmap, MultiHeadWeights, ScalingSaturation
from lib.widgets.core import (CSS_PX_PER_INCH, MIN_TEXT_PX, PHONE_WIDTH_PX, PIXEL_DENSITY, _palette_png,
                              _palette_webp, min_font_pt)
from lib.widgets.decoding import BeamSearchTree
from lib.widgets.memory import HopfieldRecall, ModernHopfieldBeta, NTMMemoryStepper
from lib.widgets.metrics import BleuBreakdown
from lib.widgets.optim import MomentumRateExplorer, TrajectoryExplorer
from lib.widgets.rnn import GradientDecay, LSTMGateExplorer
from lib.widgets.transformer import PositionalEncodingExplorer
from test_widgets import Line

DATA_FREE = (ActivationExplorer, MarginLossExplorer, AttentionHeatmap, ScalingSaturation, MultiHeadWeights,
             BeamSearchTree, NTMMemoryStepper, HopfieldRecall, ModernHopfieldBeta, BleuBreakdown, TrajectoryExplorer,
             MomentumRateExplorer,
             GradientDecay, LSTMGateExplorer, PositionalEncodingExplorer)


def settings(visual) -> list[dict]:
    """Defaults, every value of every control alone, and all-first / all-last values."""
    names = [c.name for c in visual.controls]
    found = [{}]
    for control in visual.controls:
        found += [{control.name: v} for v in control.values]
    found += [dict(zip(names, (c.values[0] for c in visual.controls))),
              dict(zip(names, (c.values[-1] for c in visual.controls)))]
    return found


def drawn_texts(fig):
    """Draw ``fig`` and return (renderer, [(text artist, font size in points)]) of what was drawn."""
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    drawn = []
    draw_text = renderer.draw_text

    def recording(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if s.strip():
            drawn.append((mtext, prop.get_size_in_points(), s))
        return draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    renderer.draw_text = recording
    canvas.draw()
    assert canvas.get_renderer() is renderer
    return renderer, drawn


def frame_texts(explorer, values):
    """Draw the frame of ``values`` as a player does (``Explorer._draw``), recording that one draw
    of the figure: (renderer, [(text artist, font size in points, text)]), like :func:`drawn_texts`."""
    recorded = []

    def rasterise(fig):  # in place of core._rgb: the frame's own draw, recorded, not rasterised again
        recorded.append(drawn_texts(fig))

    with mock.patch.object(core, "_rgb", rasterise):
        explorer._draw(values)
    (found,) = recorded
    return found


def assert_legible(visual) -> None:
    """Every setting in :func:`settings`: text ≥ the phone minimum, inside the frame, legends on no data.

    A frame is a function of the control values alone, so settings that give the same values
    (a control set to its default is the defaults) are drawn once."""
    explorer = explore(visual)
    fig = explorer._fig
    seen = []
    for values in settings(visual):
        if explorer._values(values) in seen:
            continue
        seen.append(explorer._values(values))
        renderer, drawn = frame_texts(explorer, values)
        assert drawn, "the figure shows no text"
        width, height = fig.canvas.get_width_height()
        for artist, size, text in drawn:
            assert size >= explorer.font_pt - 1e-9, f"{values}: {text!r} is {size:.1f} pt < {explorer.font_pt:.1f} pt"
            if artist is None:  # a piece of a composite text (e.g. an offset label); its size is checked above
                continue
            box = artist.get_window_extent(renderer)
            assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, (
                f"{type(visual).__name__} {values}: {text!r} is clipped: {box.bounds} outside {width}x{height}")
        problems = legend_overlaps(fig, renderer)
        assert not problems, f"{type(visual).__name__} {values}: {problems}"


# ---- the rule itself ---------------------------------------------------------------
def test_min_font_keeps_text_twelve_css_pixels_tall_on_a_phone():
    assert MIN_TEXT_PX == 12 and PHONE_WIDTH_PX == 356 and CSS_PX_PER_INCH == 90 and PIXEL_DENSITY == 2
    # A 6.4-inch figure shrinks to 356 px, 55.625 px per inch: 12 px is 864 / 55.625 = 15.53 pt.
    assert min_font_pt(6.4) == pytest.approx(864 / 55.625)
    # A 3-inch figure is shown at its natural 270 px: 12 px at 90 px per inch is 9.6 pt.
    assert min_font_pt(3.0) == pytest.approx(9.6)
    with pytest.raises(ValueError, match="width_in must be positive; found 0"):
        min_font_pt(0)


def test_small_text_is_raised_to_the_minimum_and_the_frame_is_rendered_at_twice_its_css_size():
    class Tiny(Line):
        def draw(self, fig, data):
            line = super().draw(fig, data)
            fig.axes[0].set_title("tiny", fontsize=4)
            return line

    explorer = explore(Tiny())
    _, drawn = drawn_texts(explorer._fig)
    assert {text for _, _, text in drawn} >= {"tiny", "0.0", "1.0"}
    assert min(size for _, size, _ in drawn) == pytest.approx(min_font_pt(2.0))
    frame = Image.open(io.BytesIO(explorer.render()))
    assert frame.format == "WEBP" and frame.size == (2 * explorer.css_width, 2 * 135)


def test_the_checks_fail_on_clipped_text_and_on_a_legend_over_data():
    class Clipped(Line):
        def draw(self, fig, data):
            line = super().draw(fig, data)
            fig.axes[0].set_title("a title far too long for a figure two inches wide")
            return line

    with pytest.raises(AssertionError, match="is clipped"):
        assert_legible(Clipped())

    class Covered(Line):
        def draw(self, fig, data):
            ax = fig.add_subplot()
            (line,) = ax.plot(np.linspace(0, 1, 50), np.full(50, 0.5), label="flat")
            ax.legend(loc="center")
            return line

        def update(self, line, data):
            pass

    explorer = explore(Covered())
    renderer, _ = drawn_texts(explorer._fig)
    (problem,) = legend_overlaps(explorer._fig, renderer)
    assert problem.startswith("the legend of '' covers") and problem.endswith("points of 'flat'")


@pytest.mark.parametrize("visual_class", DATA_FREE, ids=lambda v: v.__name__)
def test_every_data_free_visual_is_legible_on_a_phone(visual_class):
    assert_legible(visual_class())


# ---- weight and fidelity -----------------------------------------------------------
def test_frames_are_lossless_webp_of_a_palette_smaller_than_png_and_close_to_the_figure():
    explorer = explore(PositionalEncodingExplorer())  # a heat map: the most colours of any explorer
    original = explorer._draw({"position": 30, "pair": 5})
    webp = _palette_webp(original)
    png = _palette_png(original, colors=128)  # the former encoding
    assert len(webp) < 0.85 * len(png)  # measured: 0.82
    decoded = np.asarray(Image.open(io.BytesIO(webp)).convert("RGB"), dtype=float)
    error = np.abs(decoded - np.asarray(original, dtype=float)).max(axis=-1)  # (H, W)
    assert error.mean() < 1.0  # levels of 255
    assert error.max() <= 16


# ---- controls that do nothing ------------------------------------------------------
class Power(Line):
    """``exponent`` matters only for the "power" shape."""

    controls = (Choice("shape", ("line", "power")), Slider("exponent", (1, 2, 3)))

    def compute(self, shape="line", exponent=2):
        x = np.linspace(0, 1, 5)
        return {"x": x, "y": x ** exponent if shape == "power" else x, "colour": "red"}

    def inactive(self, shape="line", exponent=2):
        return {"exponent": "only the power shape has an exponent"} if shape == "line" else {}


def test_inactive_controls_are_disabled_live_with_the_reason():
    explorer = explore(Power())
    controls, note, _ = explorer.widget().children
    shape, exponent = controls.children
    assert exponent.disabled and note.value == "exponent: only the power shape has an exponent"
    shape.value = "power"
    assert not exponent.disabled and note.value == ""


def test_inactive_controls_are_disabled_in_the_static_player_with_the_reason():
    from test_widgets import player_data

    explorer = explore(Power())
    html = explorer.to_html()
    data = player_data(html)
    assert data["states"] == [{"1": "only the power shape has an exponent"}, {}]
    assert data["state_of"] == [0, 0, 0, 1, 1, 1]
    assert data["names"] == ["shape", "exponent"]
    # The first frame (shape "line") arrives with the exponent disabled and the note filled in.
    assert 'data-control="1" min="0" max="2" step="1" value="1" aria-label="exponent" disabled>' in html
    assert '<p class="book-explorer-note" aria-live="polite">exponent: only the power shape has an exponent</p>' in html
    # Every "line" frame is the same picture: the disabled slider really does nothing there.
    frames, frame_of = explorer.frames()
    assert len(set(frame_of[:3])) == 1 and len(set(frame_of[3:])) == 3


def test_inactive_names_only_existing_controls_and_takes_defaults():
    explorer = explore(Power())
    assert explorer.inactive() == {"exponent": "only the power shape has an exponent"}
    assert explorer.inactive(shape="power") == {}
    with pytest.raises(ValueError, match=r"unknown controls \['shap'\]"):
        explorer.inactive(shap="power")


def frames_over(explorer, name, values, **others) -> set[bytes]:
    return {explorer.render(**others, **{name: v}) for v in values}


def test_the_chapters_disabled_controls_really_do_nothing():
    activation = explore(ActivationExplorer())
    assert activation.inactive(activation="selu") == {"parameter": "selu has no free parameter"}
    assert activation.inactive(activation="elu") == {}
    assert len(frames_over(activation, "parameter", ActivationExplorer.parameters, activation="selu")) == 1

    attention = explore(AttentionHeatmap())
    assert attention.inactive(n_keys=4, valid_len=6) == {
        "valid_len": "6 > 4 keys, so every key is valid (add keys to use it)"}
    assert attention.inactive(n_keys=4, valid_len=4) == {} and attention.inactive(n_keys=8, valid_len=8) == {}
    assert len(frames_over(attention, "valid_len", (4, 6, 8), n_keys=4)) == 1

    lstm = explore(LSTMGateExplorer())
    assert set(lstm.inactive(input_gate=0.0)) == {"candidate"} and lstm.inactive(input_gate=0.5) == {}
    candidates = lstm.visual.controls[3].values
    assert len(frames_over(lstm, "candidate", candidates, input_gate=0.0)) == 1
    assert len(frames_over(lstm, "candidate", candidates, input_gate=0.5)) == len(candidates)

    ntm = explore(NTMMemoryStepper())
    assert set(ntm.inactive(step=0)) == {"erase", "add", "beta"}
    assert set(ntm.inactive(step=4)) == {"beta"} and ntm.inactive(step=5) == {}
    assert len(frames_over(ntm, "beta", (1.0, 3.0, 10.0, 30.0), step=4)) == 1
    assert len(frames_over(ntm, "erase", (0.0, 0.5, 1.0), step=0)) == 1
    assert len(frames_over(ntm, "beta", (1.0, 3.0, 10.0, 30.0), step=5)) > 1
