"""Explorers: one definition of an interactive figure, alive in two places.

A chapter describes a visual once, as a :class:`Visual`:

* ``compute(**values)`` — a *pure* function from control values to the data the
  figure shows (unit-tested like any other ``lib`` function);
* ``draw(fig, data)`` — builds the figure's artists once and returns handles to them;
* ``update(handles, data)`` — moves those artists to new data (no figure rebuild).

:func:`explore` turns a visual into an :class:`Explorer`, which displays itself

1. **live** in a Jupyter kernel as ipywidgets controls above an image; each move
   recomputes in Python, updates the artists and re-renders the one figure;
2. **static** in the built HTML book, where no kernel exists: every combination of
   control values (a modest grid) is pre-rendered at build time into a
   self-contained HTML player whose range sliders and drop-downs swap frames.

A live explorer's output also stores a **preview**: a PNG of its default figure with
a one-line hint to run the notebook beneath it. A notebook that is opened but not yet
run has no widget models; JupyterLab then shows the preview instead of the widget
(it renders a not-yet-run, untrusted output with its safe image/png, never with the
widget view). nbval does not compare images, so the preview cannot make it flaky.

Which one is shown depends on the environment variable ``BOOK_WIDGETS``
(``"static"`` or ``"live"``, default live). The book's Sphinx extension
(``_ext/book_assets.py``) sets it to ``"static"`` before notebooks execute, so a
live notebook never pays for frames it does not show.

The player's HTML contract (browser tests rely on it): a ``div.book-explorer``
holding one ``img.book-explorer-frame`` and one ``input[type=range]`` or
``select`` with class ``book-explorer-control`` per control (a :class:`Text`
control is a ``select`` over its presets there).
"""
from __future__ import annotations

import hashlib
import html
import io
import itertools
import json
import os
import time
from base64 import b64encode
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

WIDGETS_ENV = "BOOK_WIDGETS"
# If set, every static player appends its frames' render times to this JSON-lines file
# (the benchmarks read it: a frame is one slider move, compute + update + render).
TIMINGS_ENV = "BOOK_WIDGET_TIMINGS"
MAX_FRAMES = 400  # keeps a chapter page of the HTML book to a few MB
PREVIEW_HINT = "\u25b6 Run the notebook to move the controls; this is the default figure."


@dataclass(frozen=True)
class Slider:
    """A control that steps through an ordered list of numbers.

    Parameters
    ----------
    name : str
        Keyword argument of ``compute`` that receives the value.
    values : sequence of numbers
        The grid of values (the static player pre-renders each one).
    default : number, optional
        Starting value; must be one of ``values``. Defaults to the middle one.
    label : str, optional
        Text shown next to the control (defaults to ``name``).
    fmt : str
        Format spec used to print a value, e.g. ``".2f"``.
    """

    name: str
    values: Sequence[Any]
    default: Any = None
    label: str | None = None
    fmt: str = "g"

    def __post_init__(self):
        _check_control(self, self.values)

    def format(self, value) -> str:
        return format(value, self.fmt)


@dataclass(frozen=True)
class Choice:
    """A control that picks one of a few named options (a drop-down).

    Parameters
    ----------
    name : str
        Keyword argument of ``compute`` that receives the option.
    values : sequence of str
        The options, in display order.
    default : str, optional
        Starting option; must be one of ``values``. Defaults to the first.
    label : str, optional
        Text shown next to the control (defaults to ``name``).
    """

    name: str
    values: Sequence[str]
    default: str | None = None
    label: str | None = None

    def __post_init__(self):
        _check_control(self, self.values)

    def format(self, value) -> str:
        return str(value)


@dataclass(frozen=True)
class Text:
    """A control for free text, such as a sentence to evaluate.

    **Live** (a Jupyter kernel): an ipywidgets ``Text`` box. Anything may be
    typed, and the figure is recomputed with the new text when the edit is
    committed (Enter, or leaving the box), so ``compute`` must accept any
    string, including an empty one.

    **Static** (the HTML book): without a kernel free text cannot be recomputed,
    so the player shows a drop-down over the preset strings in ``values``, each
    pre-rendered like an option of a :class:`Choice`.

    Parameters
    ----------
    name : str
        Keyword argument of ``compute`` that receives the text.
    values : sequence of str
        Preset texts: the static player's options. The live box starts at ``default``.
    default : str, optional
        Starting text; must be one of ``values``. Defaults to the first.
    label : str, optional
        Text shown next to the control (defaults to ``name``).
    """

    name: str
    values: Sequence[str]
    default: str | None = None
    label: str | None = None

    def __post_init__(self):
        _check_control(self, self.values)
        if not all(isinstance(v, str) for v in self.values):
            raise TypeError(f"the presets of text control {self.name!r} must be strings; found {list(self.values)}")

    def format(self, value) -> str:
        return str(value)


Control = Slider | Choice | Text


def _check_control(control, values) -> None:
    if len(values) == 0:
        raise ValueError(f"control {control.name!r} needs at least one value; found none")
    if control.default is not None and control.default not in values:
        raise ValueError(
            f"default of control {control.name!r} must be one of {list(values)}; "
            f"found {control.default!r}"
        )


def _default_value(control: Control):
    if control.default is not None:
        return control.default
    if isinstance(control, Slider):
        return control.values[len(control.values) // 2]
    return control.values[0]


class Visual:
    """Base class of a chapter's interactive figure.

    Subclasses set ``title``, ``controls`` and ``figsize`` and implement the three
    methods below. ``compute`` must be pure: same values in, same data out.
    """

    title: str = ""
    controls: Sequence[Control] = ()
    figsize: tuple[float, float] = (6.0, 4.0)

    def compute(self, **values) -> Any:
        raise NotImplementedError

    def draw(self, fig: Figure, data) -> Any:
        raise NotImplementedError

    def update(self, handles, data) -> None:
        raise NotImplementedError


def _rgb(fig: Figure) -> Image.Image:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3])  # (H, W, 3)


def _palette_png(image: Image.Image, colors: int) -> bytes:
    buffer = io.BytesIO()
    image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT).save(buffer, format="png", optimize=True)
    return buffer.getvalue()


def render_png(fig: Figure, colors: int = 128) -> bytes:
    """Rasterise ``fig`` to a palette PNG (about 4x smaller than RGBA, same look)."""
    return _palette_png(_rgb(fig), colors)


@dataclass
class Explorer:
    """A :class:`Visual` bound to one figure; shows itself live or as a static player.

    Use :func:`explore` to make one. ``render(**values)`` returns the PNG for one
    setting of the controls; ``widget()`` builds the live ipywidgets view;
    ``to_html()`` pre-renders the static player.
    """

    visual: Visual
    dpi: int = 80
    _fig: Figure = field(init=False, repr=False)
    _handles: Any = field(init=False, repr=False)

    def __post_init__(self):
        names = [c.name for c in self.visual.controls]
        if len(set(names)) != len(names):
            raise ValueError(f"control names must be unique; found {names}")
        n_frames = int(np.prod([len(c.values) for c in self.visual.controls]))
        if n_frames > MAX_FRAMES:
            raise ValueError(
                f"the static player would hold {n_frames} frames; at most {MAX_FRAMES} "
                "are allowed: give the controls fewer values"
            )
        self._fig = Figure(figsize=self.visual.figsize, dpi=self.dpi, layout="constrained")
        self._handles = self.visual.draw(self._fig, self.visual.compute(**self.defaults))
        # Lay the figure out once, then freeze it: frames depend only on the control
        # values (not on what was drawn before), the axes do not jump while a slider
        # moves, and each update skips the layout solver.
        FigureCanvasAgg(self._fig).draw()
        self._fig.set_layout_engine("none")

    @property
    def defaults(self) -> dict[str, Any]:
        return {c.name: _default_value(c) for c in self.visual.controls}

    def render(self, **values) -> bytes:
        """Update the artists to ``values`` (missing ones take defaults) and return a PNG."""
        unknown = set(values) - set(self.defaults)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; expected some of {sorted(self.defaults)}")
        self.visual.update(self._handles, self.visual.compute(**{**self.defaults, **values}))
        return render_png(self._fig)

    def preview_png(self) -> bytes:
        """The default figure with :data:`PREVIEW_HINT` beneath it, as a PNG.

        What a live explorer shows in a notebook that is opened but not yet run.
        """
        self.visual.update(self._handles, self.visual.compute(**self.defaults))
        figure = _rgb(self._fig)
        hint_fig = Figure(figsize=(figure.width / self.dpi, 0.3), dpi=self.dpi)
        hint_fig.text(0.01, 0.5, PREVIEW_HINT, ha="left", va="center", fontsize=9, color="0.25")
        hint = _rgb(hint_fig)
        preview = Image.new("RGB", (figure.width, figure.height + hint.height), "white")
        preview.paste(figure, (0, 0))
        preview.paste(hint, (0, figure.height))
        return _palette_png(preview, colors=128)

    # ---- live: ipywidgets ------------------------------------------------------
    def widget(self):
        """The live view: one ipywidgets control per :class:`Control` above an image."""
        import ipywidgets as widgets

        image = widgets.Image(value=self.render(), format="png")
        inputs = {}
        for control in self.visual.controls:
            label = control.label or control.name
            if isinstance(control, Slider):
                inputs[control.name] = widgets.SelectionSlider(
                    options=[(control.format(v), v) for v in control.values],
                    value=_default_value(control), description=label,
                    continuous_update=True, style={"description_width": "initial"},
                )
            elif isinstance(control, Text):
                inputs[control.name] = widgets.Text(
                    value=_default_value(control), description=label, continuous_update=False,
                    style={"description_width": "initial"}, layout=widgets.Layout(width="24em"),
                )
            else:
                inputs[control.name] = widgets.Dropdown(
                    options=list(control.values), value=_default_value(control),
                    description=label, style={"description_width": "initial"},
                )

        def on_change(_change):
            image.value = self.render(**{name: w.value for name, w in inputs.items()})

        for control_widget in inputs.values():
            control_widget.observe(on_change, names="value")
        return widgets.VBox([widgets.HBox(list(inputs.values())), image])

    # ---- static: pre-rendered player ---------------------------------------------
    def frames(self) -> tuple[list[bytes], list[int]]:
        """Render every combination of control values.

        Returns
        -------
        frames : list of bytes
            The distinct PNGs (identical pictures are stored once).
        frame_of : list of int
            For each combination, in row-major order over the controls (the last
            control varies fastest), the index of its picture in ``frames``.
        """
        controls = self.visual.controls
        frames: list[bytes] = []
        index_of_png: dict[bytes, int] = {}
        frame_of: list[int] = []
        seconds: list[float] = []
        for combo in itertools.product(*(c.values for c in controls)):
            start = time.perf_counter()
            png = self.render(**{c.name: v for c, v in zip(controls, combo)})
            seconds.append(time.perf_counter() - start)
            frame_of.append(index_of_png.setdefault(png, len(frames)))
            if frame_of[-1] == len(frames):
                frames.append(png)
        self.render()  # leave the figure at its defaults
        timings_path = os.environ.get(TIMINGS_ENV)
        if timings_path:
            with open(timings_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"visual": type(self.visual).__name__, "title": self.visual.title,
                                      "seconds": seconds}) + "\n")
        return frames, frame_of

    def to_html(self) -> str:
        """A self-contained HTML player (inline data and script, no network)."""
        controls = self.visual.controls
        frames, frame_of = self.frames()
        payload = {
            "sizes": [len(c.values) for c in controls],
            "frame_of": frame_of,
            "frames": [b64encode(png).decode("ascii") for png in frames],
            "labels": [[c.format(v) for v in c.values] for c in controls],
        }
        data = json.dumps(payload, separators=(",", ":"))
        # A content hash, not a random id: rebuilding the book gives identical HTML.
        player_id = "book-explorer-" + hashlib.sha1(data.encode()).hexdigest()[:12]
        start = [list(c.values).index(_default_value(c)) for c in controls]
        first = frame_of[int(np.ravel_multi_index(start, payload["sizes"]))] if controls else 0
        rows = []
        for i, (control, pos) in enumerate(zip(controls, start)):
            label = html.escape(control.label or control.name)
            if isinstance(control, Slider):
                field_html = (
                    f'<input type="range" class="book-explorer-control" data-control="{i}" '
                    f'min="0" max="{len(control.values) - 1}" step="1" value="{pos}" '
                    f'aria-label="{label}">'
                    f'<output>{html.escape(control.format(control.values[pos]))}</output>'
                )
            else:
                options = "".join(
                    f'<option value="{j}"{" selected" if j == pos else ""}>{html.escape(str(v))}</option>'
                    for j, v in enumerate(control.values)
                )
                field_html = (
                    f'<select class="book-explorer-control" data-control="{i}" '
                    f'aria-label="{label}">{options}</select>'
                )
            rows.append(f'<label class="book-explorer-row"><span>{label}</span>{field_html}</label>')
        title = html.escape(self.visual.title)
        return (
            f'<div class="book-explorer" id="{player_id}">{_PLAYER_CSS}'
            f'<div class="book-explorer-controls">{"".join(rows)}</div>'
            f'<img class="book-explorer-frame" alt="{title}" '
            f'src="data:image/png;base64,{payload["frames"][first]}">'
            f'<script type="application/json" class="book-explorer-data">{data}</script>'
            f"<script>{_PLAYER_JS % json.dumps(player_id)}</script>"
            "</div>"
        )

    # ---- display -----------------------------------------------------------------
    def describe(self) -> str:
        """A stable one-line text summary (what nbval compares, what a terminal shows)."""
        parts = [
            f"{c.label or c.name} ∈ {{{', '.join(c.format(v) for v in c.values)}}}"
            for c in self.visual.controls
        ]
        return f"Explorer: {self.visual.title} — " + "; ".join(parts)

    def _repr_mimebundle_(self, include=None, exclude=None):
        mode = os.environ.get(WIDGETS_ENV, "live")
        if mode == "static":
            return {"text/html": self.to_html(), "text/plain": self.describe()}
        if mode != "live":
            raise ValueError(f"{WIDGETS_ENV} must be 'live' or 'static'; found {mode!r}")
        bundle = self.widget()._repr_mimebundle_()
        bundle["image/png"] = b64encode(self.preview_png()).decode("ascii")
        bundle["text/plain"] = self.describe()
        return bundle


def explore(visual: Visual, dpi: int = 80) -> Explorer:
    """Make ``visual`` interactive: live in Jupyter, pre-rendered in the HTML book.

    Parameters
    ----------
    visual : Visual
        The figure's ``compute`` / ``draw`` / ``update`` and its controls.
    dpi : int
        Resolution of the rendered figure.

    Returns
    -------
    Explorer
        Display it (last expression of a cell) to show the controls and figure.
    """
    if not isinstance(visual, Visual):
        raise TypeError(f"explore() expects a lib.widgets.Visual; found {type(visual).__name__}")
    return Explorer(visual, dpi=dpi)


_PLAYER_CSS = (
    "<style>"
    ".book-explorer-controls{display:flex;flex-wrap:wrap;gap:.4em 1.6em;margin:.3em 0 .6em}"
    ".book-explorer-row{display:inline-flex;align-items:center;gap:.5em;margin:0}"
    ".book-explorer-row output{min-width:2.5em;font-variant-numeric:tabular-nums}"
    ".book-explorer-frame{max-width:100%;height:auto}"
    "</style>"
)

# The player script: reads the JSON beside it and swaps the image on every input.
# Kept tiny and dependency-free so the page works offline and without a kernel.
_PLAYER_JS = """(function(){
var root=document.getElementById(%s);if(!root)return;
var d=JSON.parse(root.querySelector('.book-explorer-data').textContent);
var img=root.querySelector('.book-explorer-frame');
var inputs=root.querySelectorAll('.book-explorer-control');
function show(){var flat=0;inputs.forEach(function(el){var i=+el.dataset.control;
flat=flat*d.sizes[i]+(+el.value);var out=el.nextElementSibling;
if(out&&out.tagName==='OUTPUT'){out.textContent=d.labels[i][+el.value];}});
img.src='data:image/png;base64,'+d.frames[d.frame_of[flat]];}
inputs.forEach(function(el){el.addEventListener('input',show);el.addEventListener('change',show);});
})();"""
