"""A live explorer's stored preview: its default figure and a hint, for a notebook not yet run."""
import base64
import io

import numpy as np
from PIL import Image

from lib.widgets import explore
from lib.widgets.core import WIDGETS_ENV
from test_widgets import Line


def rgb(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)


def test_the_live_output_stores_a_preview_of_the_default_figure_beside_the_widget(monkeypatch):
    explorer = explore(Line())
    monkeypatch.setenv(WIDGETS_ENV, "live")
    bundle, metadata = explorer._repr_mimebundle_()
    assert set(bundle) == {"application/vnd.jupyter.widget-view+json", "image/png", "text/plain"}
    assert metadata == {"image/png": {"width": explorer.css_width}}
    preview = rgb(base64.b64decode(bundle["image/png"]))
    explorer.render(slope=-1.0)  # the preview shows the defaults whatever was shown before
    assert base64.b64decode(explorer._repr_mimebundle_()[0]["image/png"]) == base64.b64decode(bundle["image/png"])
    figure = rgb(explorer.render())
    height, width, _ = figure.shape
    assert preview.shape[1] == width and preview.shape[0] > height
    # The same picture on top (both are palette images, so allow for the palettes' rounding) ...
    assert np.abs(preview[:height] - figure).mean() < 2.0
    # ... and a hint beneath it: dark text on white.
    hint = preview[height:]
    assert hint.min() < 128 and np.median(hint) == 255


def test_the_text_nbval_compares_is_the_same_in_both_modes(monkeypatch):
    explorer = explore(Line())
    monkeypatch.setenv(WIDGETS_ENV, "live")
    live = explorer._repr_mimebundle_()[0]["text/plain"]
    monkeypatch.setenv(WIDGETS_ENV, "static")
    static = explorer._repr_mimebundle_()
    assert live == static["text/plain"] == explorer.describe()
    assert "image/png" not in static  # the HTML book's player is unchanged
