"""The explorer machinery of lib.widgets.core: controls, live view, static player."""
import base64
import io
import itertools
import json
import re

import numpy as np
import pytest
from PIL import Image

from lib.widgets import Choice, Explorer, Slider, Text, Visual, explore
from lib.widgets.core import (CSS_PX_PER_INCH, MAX_FRAMES, PIXEL_DENSITY, TIMINGS_ENV, WIDGETS_ENV,
                              book_visuals, figure_label, min_font_pt)


class Line(Visual):
    """y = slope * x in a chosen colour; ``unused`` changes nothing on purpose."""

    title = "A line"
    figsize = (2.0, 1.5)
    controls = (
        Slider("slope", (-1.0, 0.0, 1.0, 2.0), default=1.0),
        Choice("colour", ("red", "blue")),
        Slider("unused", (1, 2)),
    )

    def compute(self, slope=1.0, colour="red", unused=1):
        x = np.linspace(0, 1, 5)
        return {"x": x, "y": slope * x, "colour": colour}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        ax.set_ylim(-1, 2)
        (line,) = ax.plot(data["x"], data["y"], color=data["colour"])
        return line

    def update(self, line, data):
        line.set_data(data["x"], data["y"])
        line.set_color(data["colour"])


def live_rgb(png: bytes) -> bytes:
    """The pixels of a live frame (a fast PNG of the unquantised figure)."""
    return Image.open(io.BytesIO(png)).convert("RGB").tobytes()


def rendered_rgb(explorer, **values) -> bytes:
    """The unquantised pixels of the figure at ``values``."""
    return explorer._draw(values).tobytes()


def player_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" class="book-explorer-data">(.*?)</script>', html)
    assert match, "the player has no data script"
    return json.loads(match.group(1))


def test_controls_reject_defaults_outside_their_values():
    with pytest.raises(ValueError, match=r"default of control 'a' must be one of \[1, 2\]; found 3"):
        Slider("a", (1, 2), default=3)
    with pytest.raises(ValueError, match="needs at least one value"):
        Choice("b", ())


def test_explore_rejects_what_is_not_a_visual():
    with pytest.raises(TypeError, match="expects a lib.widgets.Visual; found function"):
        explore(lambda: None)


def test_explorer_rejects_duplicate_names_and_oversized_grids():
    class Twice(Line):
        controls = (Slider("a", (1, 2)), Slider("a", (3, 4)))

    with pytest.raises(ValueError, match="control names must be unique"):
        explore(Twice())

    class Huge(Line):
        controls = (Slider("slope", tuple(range(MAX_FRAMES + 1))),)

    with pytest.raises(ValueError, match=f"would hold {MAX_FRAMES + 1} frames"):
        explore(Huge())


def test_render_updates_the_same_artists_instead_of_rebuilding():
    explorer = explore(Line())
    fig = explorer._fig
    axes_before, lines_before = list(fig.axes), list(fig.axes[0].lines)
    assert len(lines_before) == 1
    first = explorer.render(slope=-1.0)
    second = explorer.render(slope=2.0, colour="blue")
    assert first[:4] == b"RIFF" and first[8:12] == b"WEBP" and second[8:12] == b"WEBP"
    assert first != second
    assert fig.axes == axes_before and list(fig.axes[0].lines) == lines_before
    assert explorer.render(slope=-1.0) == first  # rendering is deterministic
    with pytest.raises(ValueError, match=r"unknown controls \['slant'\]"):
        explorer.render(slant=1.0)


def test_frames_cover_every_combination_and_store_identical_pictures_once():
    explorer = explore(Line())
    frames, frame_of = explorer.frames()
    assert len(frame_of) == 4 * 2 * 2
    # 'unused' does not change the picture: 8 distinct frames, each shared by 2 combinations.
    assert len(frames) == 8
    combos = list(itertools.product(*(c.values for c in Line.controls)))
    for combo, index in zip(combos, frame_of):
        assert frames[index] == explorer.render(**dict(zip(["slope", "colour", "unused"], combo)))


def test_frame_times_are_logged_only_when_asked(tmp_path, monkeypatch):
    log = tmp_path / "frames.jsonl"
    monkeypatch.delenv(TIMINGS_ENV, raising=False)
    explore(Line()).frames()
    assert not log.exists()
    monkeypatch.setenv(TIMINGS_ENV, str(log))
    explore(Line()).frames()
    explore(Line()).frames()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["visual"] for e in entries] == ["Line", "Line"]
    assert entries[0]["title"] == "A line" and len(entries[0]["seconds"]) == 16
    assert all(0 < s < 10 for s in entries[0]["seconds"])


def test_static_player_is_self_contained_and_indexes_frames_row_major():
    explorer = explore(Line())
    html = explorer.to_html()
    assert html == explorer.to_html()  # same book, same page: no random ids
    assert "http://" not in html and "https://" not in html
    assert len(re.findall(r'<input type="range" class="book-explorer-control"', html)) == 2
    assert len(re.findall(r'<select class="book-explorer-control"', html)) == 1
    data = player_data(html)
    assert data["sizes"] == [4, 2, 2]
    assert data["labels"][0] == ["-1", "0", "1", "2"]
    # The first image shown is the default setting (slope 1, red, unused 2 = middle value).
    first = re.search(r'class="book-explorer-frame" alt="A line" width="180" height="135" '
                      r'src="data:image/webp;base64,([^"]+)"', html)
    assert base64.b64decode(first.group(1)) == explorer.render(slope=1.0, colour="red", unused=2)
    # The script computes flat = ((slope_i * 2) + colour_i) * 2 + unused_i, numpy's row-major order.
    flat = np.ravel_multi_index((0, 1, 0), data["sizes"])
    assert base64.b64decode(data["frames"][data["frame_of"][flat]]) == explorer.render(slope=-1.0, colour="blue", unused=1)


def test_display_follows_the_environment(monkeypatch):
    explorer = explore(Line())
    monkeypatch.setenv(WIDGETS_ENV, "static")
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert bundle["text/plain"] == "Explorer: A line — slope ∈ {-1, 0, 1, 2}; colour ∈ {red, blue}; unused ∈ {1, 2}"
    monkeypatch.setenv(WIDGETS_ENV, "live")
    bundle, metadata = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" not in bundle
    assert metadata == {"image/png": {"width": 180}}  # the 2x preview is shown at its CSS size
    monkeypatch.setenv(WIDGETS_ENV, "both")
    with pytest.raises(ValueError, match="must be 'live' or 'static'; found 'both'"):
        explorer._repr_mimebundle_()


def test_live_controls_recompute_the_image():
    explorer = explore(Line())
    box = explorer.widget()
    controls, note, image = box.children
    assert controls.layout.flex_flow == "row wrap"  # a narrow notebook wraps the controls
    slope, colour, unused = controls.children
    before = image.value
    slope.value = -1.0
    assert live_rgb(image.value) == rendered_rgb(explorer, slope=-1.0) and image.value != before
    colour.value = "blue"
    assert live_rgb(image.value) == rendered_rgb(explorer, slope=-1.0, colour="blue")


def test_explorer_is_a_dataclass_bound_to_one_figure():
    assert explore(Line())._fig.dpi == 180  # 90 CSS px per inch, 2 device px per CSS px
    explorer = explore(Line(), dpi=50)
    assert isinstance(explorer, Explorer)
    assert explorer._fig.dpi == 50
    width, height = explorer._fig.get_size_inches()
    assert (width, height) == Line.figsize


# ---- the Text control: free text live, presets in the static player ------------------
class Echo(Visual):
    """Draws the number of words of a free-text control (any string must work)."""

    title = "Word count"
    figsize = (2.0, 1.5)
    controls = (Text("sentence", ("the cat sat", "a dog"), label="sentence"), Slider("scale", (1, 2)))

    def compute(self, sentence="the cat sat", scale=1):
        return {"height": scale * len(sentence.split())}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        ax.set_ylim(0, 12)
        (bar,) = ax.bar([0], [data["height"]])
        return bar

    def update(self, bar, data):
        bar.set_height(data["height"])


def test_text_control_checks_its_presets():
    with pytest.raises(ValueError, match=r"default of control 't' must be one of \['a'\]; found 'b'"):
        Text("t", ("a",), default="b")
    with pytest.raises(TypeError, match=r"presets of text control 't' must be strings; found \['a', 3\]"):
        Text("t", ("a", 3))
    assert explore(Echo()).defaults == {"sentence": "the cat sat", "scale": 2}


def test_text_control_is_a_select_over_its_presets_in_the_static_player():
    explorer = explore(Echo())
    html = explorer.to_html()
    assert len(re.findall(r'<select class="book-explorer-control"', html)) == 1
    assert '<option value="0" selected>the cat sat</option><option value="1">a dog</option>' in html
    data = player_data(html)
    assert data["sizes"] == [2, 2] and data["labels"][0] == ["the cat sat", "a dog"]
    frames, frame_of = explorer.frames()
    assert frames[frame_of[np.ravel_multi_index((1, 0), data["sizes"])]] == explorer.render(sentence="a dog", scale=1)
    assert explorer.describe() == "Explorer: Word count — sentence ∈ {the cat sat, a dog}; scale ∈ {1, 2}"


def test_text_control_is_a_free_text_box_live():
    import ipywidgets

    explorer = explore(Echo())
    controls, note, image = explorer.widget().children
    box, scale = controls.children
    assert isinstance(box, ipywidgets.Text) and box.value == "the cat sat"
    box.value = "five words typed by hand"  # not a preset: the live view recomputes anyway
    assert live_rgb(image.value) == rendered_rgb(explorer, sentence="five words typed by hand", scale=2)
    box.value = ""
    assert live_rgb(image.value) == rendered_rgb(explorer, sentence="", scale=2)


def test_externalised_frames_are_files_the_player_fetches_by_url(tmp_path):
    from lib.widgets.core import externalise_frames

    explorer = explore(Line())
    html = explorer.to_html()
    inline = player_data(html)
    page = f"<html><body><p>text</p>{html}<p>more</p>{html}</body></html>"  # one player twice: files shared
    moved = externalise_frames(page, tmp_path / "frames", "../_static/frames/")
    data = player_data(moved)
    assert "frames" not in data and len(data["urls"]) == len(inline["frames"]) == 8
    assert {k: v for k, v in data.items() if k != "urls"} == {k: v for k, v in inline.items() if k != "frames"}
    for url, encoded in zip(data["urls"], inline["frames"]):
        assert url.startswith("../_static/frames/") and url.endswith(".webp")
        assert (tmp_path / "frames" / url.rsplit("/", 1)[1]).read_bytes() == base64.b64decode(encoded)
    assert len(list((tmp_path / "frames").iterdir())) == 8
    # The first frame stays inline (no request before the first paint); the script reads urls when present.
    assert moved.count('src="data:image/webp;base64,') == 2 and "d.urls?d.urls[k]" in moved
    assert len(moved) < len(page) / 3
    assert externalise_frames(moved, tmp_path / "frames", "../_static/frames/") == moved  # idempotent
    with pytest.raises(ValueError, match="url_prefix must end with '/'; found 'x'"):
        externalise_frames(page, tmp_path, "x")


def test_every_book_visual_has_a_specific_caption_and_its_own_label():
    visuals = book_visuals()
    assert len(visuals) >= 19 and Line not in visuals.values()  # only lib.widgets' own visuals
    labels = [figure_label(visual) for visual in visuals.values()]
    assert len(set(labels)) == len(labels)
    for title, visual in visuals.items():
        caption = visual.caption
        sentences = re.findall(r"[.!?](?:\s|$)", caption)
        assert caption.strip() and caption.strip() != title, f"{visual.__name__} has no caption of its own"
        assert 1 <= len(sentences) <= 2 and caption.endswith("."), f"{visual.__name__}: {caption!r}"
    assert figure_label(visuals["LSTM gate explorer"]) == "fig-explorer-lstm-gate"
    assert figure_label(visuals["NTM memory: writing and reading step by step"]) == "fig-explorer-ntm-memory-stepper"
    with pytest.raises(TypeError, match="visual_type must be a Visual subclass; found <class 'int'>"):
        figure_label(int)


def test_static_frame_states_its_dpi_and_smallest_font_size():
    explorer = explore(Line())
    frame = re.search(r'<img class="book-explorer-frame"[^>]*>', explorer.to_html()).group(0)
    assert f'data-dpi="{CSS_PX_PER_INCH * PIXEL_DENSITY}"' in frame
    assert float(re.search(r'data-font-pt="([0-9.]+)"', frame).group(1)) == pytest.approx(explorer.font_pt)
    assert explorer.font_pt == pytest.approx(min_font_pt(Line.figsize[0]))
