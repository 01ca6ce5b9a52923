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
(``_ext/explorers.py``) sets it to ``"static"`` before notebooks execute, so a
live notebook never pays for frames it does not show.

The player's HTML contract (browser tests rely on it): a ``div.book-explorer``
holding one ``img.book-explorer-frame`` and one ``input[type=range]`` or
``select`` with class ``book-explorer-control`` per control (a :class:`Text`
control is a ``select`` over its presets there), and one ``p.book-explorer-note``
that says why a control is disabled.

**Legible on a phone.** A frame is shown at most :data:`CSS_PX_PER_INCH` CSS pixels
per figure inch and shrinks with the page, to about :data:`PHONE_WIDTH_PX` on a phone.
Every text of the figure is drawn at least :func:`min_font_pt` points, which keeps it
:data:`MIN_TEXT_PX` CSS pixels (9 pt) tall there; frames are rendered at
:data:`PIXEL_DENSITY` times their CSS size, so they stay crisp on a 2x screen.

**Numbered in the book.** Each visual declares a ``caption`` (what the figure
shows and what to try, at most two sentences). The book's Sphinx extension wraps
the static player in a numbered figure with that caption and the label
:func:`figure_label` (``fig-explorer-lstm-gate``, for ``{numref}``), finding the visual
by the title its output names (:meth:`Explorer.describe`). The player's frame carries its
``data-dpi`` and ``data-font-pt`` (the smallest font size drawn), from which a
browser test computes the smallest text a reader sees.

**Controls that do nothing.** ``Visual.inactive(**values)`` names the controls
that have no effect in a state, with the reason; both views disable them and
show the reason.

**Weight.** Frames are palette images (:data:`PALETTE_COLORS` colours) stored as
lossless WebP, about 20% smaller than the same palette as PNG. The built book moves
them out of its pages into files (:func:`externalise_frames`): a page carries each
player's first frame, and the browser fetches the others as a reader reaches them.

**Rendered once.** A frame is a pure function of the visual's code, the data ``compute``
returns for the frame and for the defaults (which fix the layout), and the visual's own state.
If the environment variable ``BOOK_FRAME_CACHE`` names a folder (the book's runs set it,
``tools/chapter_runs.py``), each frame is stored there under a hash of all of these
(:meth:`Explorer.frame_key`) and taken from there the next time: a rebuild renders only the
frames whose inputs changed, and gives the same bytes as rendering them anew.
"""
from __future__ import annotations

import hashlib
import html
import io
import itertools
import inspect
import json
import os
import pickle
import re
import sys
import time
from base64 import b64decode, b64encode
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import matplotlib
import PIL
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text as TextArtist
from PIL import Image

WIDGETS_ENV = "BOOK_WIDGETS"
# If set, every static player appends its frames' render times to this JSON-lines file
# (the benchmarks read it: a frame is one slider move, compute + update + render).
TIMINGS_ENV = "BOOK_WIDGET_TIMINGS"
# If set, a folder where rendered frames are kept by content hash and reused (timed runs bypass it).
FRAME_CACHE_ENV = "BOOK_FRAME_CACHE"
MAX_FRAMES = 400  # keeps a chapter page of the HTML book to a few MB
CSS_PX_PER_INCH = 90  # a frame's natural width on the page: figure inches x this (CSS px)
PIXEL_DENSITY = 2  # device pixels per CSS pixel at that width: crisp on a 2x screen
# The page width a frame shrinks to on a 390 px phone: the book shows it 358 px wide there
# (tests/book/test_explorer_figures.py measures it); 2 px less keeps 9 pt text above 12 px.
PHONE_WIDTH_PX = 356
MIN_TEXT_PX = 12  # 9 pt: the smallest text a frame may show at that width
PALETTE_COLORS = 128  # colours of a frame: every pixel within 11 levels of 255 even in a heat map
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

    Subclasses set ``title``, ``caption``, ``controls`` and ``figsize`` and implement
    the three methods below. ``compute`` must be pure: same values in, same data out.
    ``caption`` is the book's figure caption: what the figure shows and what to try,
    in at most two sentences of plain text.
    """

    title: str = ""
    caption: str = ""
    controls: Sequence[Control] = ()
    figsize: tuple[float, float] = (6.0, 4.0)

    def compute(self, **values) -> Any:
        raise NotImplementedError

    def draw(self, fig: Figure, data) -> Any:
        raise NotImplementedError

    def update(self, handles, data) -> None:
        raise NotImplementedError

    def inactive(self, **values) -> dict[str, str]:
        """The controls that change nothing at these ``values``, each with the reason.

        Both views disable them and show the reason (``{name: reason}``); by default
        every control is active.
        """
        return {}


def figure_label(visual_type: type) -> str:
    """The book's label of a visual's figure: ``fig-explorer-`` and its class name in kebab case.

    A trailing ``Explorer`` is dropped: ``LSTMGateExplorer`` gives ``fig-explorer-lstm-gate``.
    """
    if not (isinstance(visual_type, type) and issubclass(visual_type, Visual)):
        raise TypeError(f"visual_type must be a Visual subclass; found {visual_type!r}")
    name = visual_type.__name__.removesuffix("Explorer") or visual_type.__name__
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", name)
    return "fig-explorer-" + "-".join(word.lower() for word in words)


def book_visuals() -> dict[str, type[Visual]]:
    """Every visual that ``lib.widgets`` defines, by title (imports each chapter's module).

    The book's Sphinx extension finds an explorer's caption and label here from the
    title its output names.
    """
    import importlib
    import pkgutil

    package = importlib.import_module("lib.widgets")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"lib.widgets.{module.name}")
    found, pending = {}, list(Visual.__subclasses__())
    while pending:
        visual = pending.pop()
        pending += visual.__subclasses__()
        if not visual.__module__.startswith("lib.widgets."):
            continue
        if visual.title in found:
            raise ValueError(f"visual titles must be unique; {visual.__name__} and "
                             f"{found[visual.title].__name__} share {visual.title!r}")
        found[visual.title] = visual
    return found


def min_font_pt(width_in: float) -> float:
    """Smallest font size (points) that stays :data:`MIN_TEXT_PX` tall on a phone.

    A figure ``width_in`` inches wide is shown ``width_in * CSS_PX_PER_INCH`` CSS
    pixels wide, or :data:`PHONE_WIDTH_PX` if that is narrower; a point is 1/72 inch.
    """
    if width_in <= 0:
        raise ValueError(f"width_in must be positive; found {width_in}")
    shown_px_per_inch = min(CSS_PX_PER_INCH, PHONE_WIDTH_PX / width_in)
    return MIN_TEXT_PX * 72 / shown_px_per_inch


def _font_rc(size: float) -> dict[str, float]:
    """rcParams that draw every kind of text at ``size`` points."""
    keys = ("font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize", "ytick.labelsize",
            "legend.fontsize", "legend.title_fontsize", "figure.titlesize")
    return {key: size for key in keys}


def _raise_small_text(fig: Figure, size: float) -> None:
    """Draw every text of ``fig`` smaller than ``size`` points at ``size`` points."""
    for text in fig.findobj(TextArtist):
        if text.get_fontsize() < size:
            text.set_fontsize(size)


def _rgb(fig: Figure) -> Image.Image:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3])  # (H, W, 3)


def _palette_png(image: Image.Image, colors: int) -> bytes:
    buffer = io.BytesIO()
    image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT).save(buffer, format="png", optimize=True)
    return buffer.getvalue()


def _palette_webp(image: Image.Image, colors: int = PALETTE_COLORS) -> bytes:
    """``image`` reduced to ``colors`` colours, as lossless WebP.

    Maximum-coverage quantisation keeps every pixel within a few levels of the
    original; WebP effort 4 is as small as 6 within 5% and 100x faster.
    """
    buffer = io.BytesIO()
    image.quantize(colors=colors, method=Image.Quantize.MAXCOVERAGE).save(
        buffer, format="webp", lossless=True, quality=100, method=4)
    return buffer.getvalue()


def _fast_png(image: Image.Image) -> bytes:
    """``image`` as a quickly compressed PNG: the live view's frames, sent to the browser at once."""
    buffer = io.BytesIO()
    image.save(buffer, format="png", compress_level=1)
    return buffer.getvalue()


def render_png(fig: Figure, colors: int = 128) -> bytes:
    """Rasterise ``fig`` to a palette PNG (about 4x smaller than RGBA, same look)."""
    return _palette_png(_rgb(fig), colors)


class _StablePickler(pickle.Pickler):
    """Pickles equal values to equal bytes in every process (for hashing, never loading).

    A tensor pickles as its dtype, shape and bytes (torch's own pickle holds a fresh
    serialisation id each process); a set as its items in sorted order (string hashing, and
    so a set's order, changes from process to process). ``persistent_id`` sees every object,
    sets included, which ``reducer_override`` would not.
    """

    def persistent_id(self, obj):
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor):
            values = obj.detach().cpu().contiguous().reshape(-1)  # (N,)
            return ("tensor", str(obj.dtype), tuple(obj.shape), values.view(torch.uint8).numpy().tobytes())
        if type(obj) in (set, frozenset):
            return (type(obj).__name__, sorted(obj, key=repr))
        return None


def _stable_pickle(value) -> bytes:
    buffer = io.BytesIO()
    _StablePickler(buffer, protocol=5).dump(value)
    return buffer.getvalue()


def _code_digest(visual_type: type) -> str:
    """A hash of the source that draws ``visual_type``'s frames.

    ``lib.widgets.core``, the modules of the visual's classes, and every ``lib`` module those
    modules refer to (a module they import, or the module of a function or class they import).
    Raises ``TypeError`` for a class with no source file (one defined in a notebook).
    """
    modules = {sys.modules[__name__]}
    for cls in visual_type.__mro__[:-1]:  # all but object
        module = sys.modules.get(cls.__module__)
        if getattr(module, "__file__", None) is None:
            raise TypeError(f"{cls.__name__} has no source file to hash")
        if module not in modules:
            modules.add(module)
            for value in vars(module).values():
                owner = value if inspect.ismodule(value) else sys.modules.get(getattr(value, "__module__", "") or "")
                if owner is not None and owner.__name__.startswith("lib."):
                    modules.add(owner)
    digest = hashlib.sha256()
    for module in sorted(modules, key=lambda m: m.__name__):
        digest.update(module.__name__.encode() + b"\0" + Path(module.__file__).read_bytes())
    return digest.hexdigest()


@dataclass
class Explorer:
    """A :class:`Visual` bound to one figure; shows itself live or as a static player.

    Use :func:`explore` to make one. ``render(**values)`` returns the frame (a
    lossless WebP) for one setting of the controls; ``widget()`` builds the live
    ipywidgets view; ``to_html()`` pre-renders the static player.
    """

    visual: Visual
    dpi: int = CSS_PX_PER_INCH * PIXEL_DENSITY
    _fig: Figure = field(init=False, repr=False)
    _handles: Any = field(init=False, repr=False)
    _frame_context: bytes | None = field(init=False, repr=False, default=None)

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
        self.font_pt = min_font_pt(self.visual.figsize[0])
        with matplotlib.rc_context(_font_rc(self.font_pt)):
            self._fig = Figure(figsize=self.visual.figsize, dpi=self.dpi, layout="constrained")
            # Margins of half a line: a tick label at an axis' end may grow as the limits move.
            self._fig.get_layout_engine().set(w_pad=0.5 * self.font_pt / 72, h_pad=0.5 * self.font_pt / 72)
            self._handles = self.visual.draw(self._fig, self.visual.compute(**self.defaults))
            _raise_small_text(self._fig, self.font_pt)
            # Lay the figure out once, then freeze it: frames depend only on the control
            # values (not on what was drawn before), the axes do not jump while a slider
            # moves, and each update skips the layout solver.
            FigureCanvasAgg(self._fig).draw()
        self._fig.set_layout_engine("none")

    @property
    def defaults(self) -> dict[str, Any]:
        return {c.name: _default_value(c) for c in self.visual.controls}

    def _values(self, values: dict[str, Any]) -> dict[str, Any]:
        unknown = set(values) - set(self.defaults)
        if unknown:
            raise ValueError(f"unknown controls {sorted(unknown)}; expected some of {sorted(self.defaults)}")
        return {**self.defaults, **values}

    def inactive(self, **values) -> dict[str, str]:
        """The visual's disabled controls at ``values`` (missing ones take defaults)."""
        return self.visual.inactive(**self._values(values))

    def _draw(self, values: dict[str, Any]) -> Image.Image:
        """Update the artists to ``values`` and rasterise the figure."""
        return self._draw_data(self.visual.compute(**self._values(values)))

    def _draw_data(self, data) -> Image.Image:
        """Update the artists to ``data`` (what ``compute`` returned) and rasterise the figure."""
        with matplotlib.rc_context(_font_rc(self.font_pt)):
            self.visual.update(self._handles, data)
            _raise_small_text(self._fig, self.font_pt)
            return _rgb(self._fig)

    def render(self, **values) -> bytes:
        """Update the artists to ``values`` (missing ones take defaults) and return the frame."""
        return _palette_webp(self._draw(values))

    def frame_key(self, data) -> str | None:
        """The content hash of the frame that ``data`` (a result of ``compute``) gives.

        It covers everything a frame is a function of: the source of ``lib.widgets.core``, of the
        visual's classes and of the ``lib`` modules their modules import; matplotlib's, Pillow's and
        NumPy's versions; the figure's size, resolution and font size; the visual's state and the
        data of its defaults (which fix the layout); and ``data``. ``None`` when the state or the
        data cannot be pickled (such a frame is always rendered).
        """
        try:
            if self._frame_context is None:
                context = [_code_digest(type(self.visual)), matplotlib.__version__, PIL.__version__,
                           np.__version__, self.dpi, self.font_pt, tuple(self.visual.figsize),
                           vars(self.visual), self.visual.compute(**self.defaults)]
                self._frame_context = hashlib.sha256(_stable_pickle(context)).digest()
            return hashlib.sha256(self._frame_context + _stable_pickle(data)).hexdigest()
        except (pickle.PicklingError, TypeError, AttributeError, RuntimeError):
            return None

    def _frame(self, values: dict[str, Any], cache: Path | None) -> bytes:
        """The frame for ``values``: from ``cache`` (a folder, or ``None``) if there, else rendered."""
        data = self.visual.compute(**self._values(values))
        key = self.frame_key(data) if cache is not None else None
        if key is not None and (cache / f"{key}.webp").is_file():
            return (cache / f"{key}.webp").read_bytes()
        frame = _palette_webp(self._draw_data(data))
        if key is not None:
            cache.mkdir(parents=True, exist_ok=True)
            partial = cache / f"{key}.{os.getpid()}.part"  # written whole, then renamed: no torn reads
            partial.write_bytes(frame)
            os.replace(partial, cache / f"{key}.webp")
        return frame

    def preview_png(self) -> bytes:
        """The default figure with :data:`PREVIEW_HINT` beneath it, as a PNG.

        What a live explorer shows in a notebook that is opened but not yet run
        (notebook front ends show a PNG output, not a WebP one).
        """
        figure = self._draw({})
        hint_fig = Figure(figsize=(figure.width / self.dpi, 3 * self.font_pt / 72), dpi=self.dpi)
        hint_fig.text(0.01, 0.5, PREVIEW_HINT.replace("; ", ";\n"), ha="left", va="center",
                      fontsize=self.font_pt, color="0.25")
        hint = _rgb(hint_fig)
        preview = Image.new("RGB", (figure.width, figure.height + hint.height), "white")
        preview.paste(figure, (0, 0))
        preview.paste(hint, (0, figure.height))
        return _palette_png(preview, colors=PALETTE_COLORS)

    @property
    def css_width(self) -> int:
        """The frame's natural width on the page, in CSS pixels."""
        return round(self.visual.figsize[0] * CSS_PX_PER_INCH)

    # ---- live: ipywidgets ------------------------------------------------------
    def widget(self):
        """The live view: ipywidgets controls (wrapping rows), a note, and the image."""
        import ipywidgets as widgets

        image = widgets.Image(value=_fast_png(self._draw({})), format="png", width=self.css_width,
                              layout=widgets.Layout(max_width="100%", height="auto"))
        inputs = {}
        for control in self.visual.controls:
            label = control.label or control.name
            style = {"description_width": "initial"}
            if isinstance(control, Slider):
                inputs[control.name] = widgets.SelectionSlider(
                    options=[(control.format(v), v) for v in control.values],
                    value=_default_value(control), description=label, continuous_update=True,
                    style=style, layout=widgets.Layout(min_width="16em"),
                )
            elif isinstance(control, Text):
                inputs[control.name] = widgets.Text(
                    value=_default_value(control), description=label, continuous_update=False,
                    style=style, layout=widgets.Layout(width="24em", max_width="100%"),
                )
            else:
                inputs[control.name] = widgets.Dropdown(
                    options=list(control.values), value=_default_value(control),
                    description=label, style=style, layout=widgets.Layout(min_width="12em"),
                )
        note = widgets.HTML()

        def show_inactive(values):
            reasons = self.inactive(**values)
            for name, control_widget in inputs.items():
                control_widget.disabled = name in reasons
            note.value = _note_html(self.visual.controls, reasons)

        def on_change(_change):
            values = {name: w.value for name, w in inputs.items()}
            image.value = _fast_png(self._draw(values))
            show_inactive(values)

        for control_widget in inputs.values():
            control_widget.observe(on_change, names="value")
        show_inactive({})
        # Rows wrap: in a narrow notebook a control moves to the next line instead of shrinking to nothing.
        controls = widgets.HBox(list(inputs.values()), layout=widgets.Layout(flex_flow="row wrap"))
        return widgets.VBox([controls, note, image])

    # ---- static: pre-rendered player ---------------------------------------------
    def frames(self) -> tuple[list[bytes], list[int]]:
        """Render every combination of control values.

        Returns
        -------
        frames : list of bytes
            The distinct frames (identical pictures are stored once).
        frame_of : list of int
            For each combination, in row-major order over the controls (the last
            control varies fastest), the index of its picture in ``frames``.
        """
        controls = self.visual.controls
        frames: list[bytes] = []
        index_of_frame: dict[bytes, int] = {}
        frame_of: list[int] = []
        seconds: list[float] = []
        timings_path = os.environ.get(TIMINGS_ENV)
        # A timed run measures rendering, so it renders every frame.
        cache = Path(os.environ[FRAME_CACHE_ENV]) if os.environ.get(FRAME_CACHE_ENV) and not timings_path else None
        for combo in itertools.product(*(c.values for c in controls)):
            start = time.perf_counter()
            frame = self._frame({c.name: v for c, v in zip(controls, combo)}, cache)
            seconds.append(time.perf_counter() - start)
            frame_of.append(index_of_frame.setdefault(frame, len(frames)))
            if frame_of[-1] == len(frames):
                frames.append(frame)
        self._draw({})  # leave the figure at its defaults
        if timings_path:
            with open(timings_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"visual": type(self.visual).__name__, "title": self.visual.title,
                                      "seconds": seconds}) + "\n")
        return frames, frame_of

    def inactive_states(self) -> tuple[list[dict[str, str]], list[int]]:
        """The disabled controls of every combination, like :meth:`frames`.

        Returns
        -------
        states : list of dict
            The distinct ``{control index (as str): reason}`` maps.
        state_of : list of int
            For each combination (row-major), the index of its map in ``states``.
        """
        controls = self.visual.controls
        names = [c.name for c in controls]
        states: list[dict[str, str]] = []
        state_of: list[int] = []
        for combo in itertools.product(*(c.values for c in controls)):
            reasons = self.inactive(**dict(zip(names, combo)))
            state = {str(names.index(name)): reason for name, reason in reasons.items()}
            if state not in states:
                states.append(state)
            state_of.append(states.index(state))
        return states, state_of

    def to_html(self) -> str:
        """A self-contained HTML player (inline data and script, no network)."""
        controls = self.visual.controls
        frames, frame_of = self.frames()
        states, state_of = self.inactive_states()
        payload = {
            "sizes": [len(c.values) for c in controls],
            "frame_of": frame_of,
            "frames": [b64encode(frame).decode("ascii") for frame in frames],
            "labels": [[c.format(v) for v in c.values] for c in controls],
            "names": [c.label or c.name for c in controls],
            "states": states,
            "state_of": state_of,
        }
        data = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        # A content hash, not a random id: rebuilding the book gives identical HTML.
        player_id = "book-explorer-" + hashlib.sha1(data.encode()).hexdigest()[:12]
        start = [list(c.values).index(_default_value(c)) for c in controls]
        flat = int(np.ravel_multi_index(start, payload["sizes"])) if controls else 0
        first = frame_of[flat]
        reasons = {controls[int(i)].name: reason for i, reason in states[state_of[flat]].items()}
        rows = []
        for i, (control, pos) in enumerate(zip(controls, start)):
            label = html.escape(control.label or control.name)
            disabled = " disabled" if control.name in reasons else ""
            if isinstance(control, Slider):
                field_html = (
                    f'<input type="range" class="book-explorer-control" data-control="{i}" '
                    f'min="0" max="{len(control.values) - 1}" step="1" value="{pos}" '
                    f'aria-label="{label}"{disabled}>'
                    f'<output>{html.escape(control.format(control.values[pos]))}</output>'
                )
            else:
                options = "".join(
                    f'<option value="{j}"{" selected" if j == pos else ""}>{html.escape(str(v))}</option>'
                    for j, v in enumerate(control.values)
                )
                field_html = (
                    f'<select class="book-explorer-control" data-control="{i}" '
                    f'aria-label="{label}"{disabled}>{options}</select>'
                )
            rows.append(f'<label class="book-explorer-row"><span>{label}</span>{field_html}</label>')
        title = html.escape(self.visual.title)
        width, height = Image.open(io.BytesIO(frames[first])).size
        data_html = data.replace("</", "<\\/")  # JSON text that cannot close the script element
        return (
            f'<div class="book-explorer" id="{player_id}">{_PLAYER_CSS}'
            f'<div class="book-explorer-controls">{"".join(rows)}</div>'
            f'<p class="book-explorer-note" aria-live="polite">{_note_html(controls, reasons)}</p>'
            f'<img class="book-explorer-frame" alt="{title}" width="{self.css_width}" '
            f'height="{round(self.css_width * height / width)}" '
            f'src="data:image/webp;base64,{payload["frames"][first]}" '
            f'data-dpi="{self.dpi}" data-font-pt="{self.font_pt:.6g}">'
            f'<script type="application/json" class="book-explorer-data">{data_html}</script>'
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
        # The preview is rendered at PIXEL_DENSITY: show it at its CSS size.
        return bundle, {"image/png": {"width": self.css_width}}


_PLAYER_DATA = re.compile(r'(<script type="application/json" class="book-explorer-data">)(.*?)(</script>)', re.S)


def externalise_frames(page: str, frames_dir: Path, url_prefix: str) -> str:
    """Move the frames of every static player in an HTML ``page`` into files.

    Each distinct frame is written once, as ``frames_dir/<content hash>.webp``, and
    the player's data lists ``url_prefix + name`` instead of the inline picture, so a
    page carries its first frames only and the browser fetches another frame when a
    control reaches it. The built book calls this on every page (``_ext/explorers.py``).

    Parameters
    ----------
    page : str
        HTML holding zero or more players made by :meth:`Explorer.to_html`.
    frames_dir : Path
        Directory for the frame files (created if needed).
    url_prefix : str
        The URL of ``frames_dir`` relative to the page, ending in ``/``.

    Returns
    -------
    str
        The page with every player's ``frames`` replaced by ``urls``.
    """
    if not url_prefix.endswith("/"):
        raise ValueError(f"url_prefix must end with '/'; found {url_prefix!r}")

    def move(match: re.Match) -> str:
        data = json.loads(match.group(2))
        if "frames" not in data:
            return match.group(0)
        urls = []
        for encoded in data.pop("frames"):
            frame = b64decode(encoded)
            name = hashlib.sha1(frame).hexdigest()[:16] + ".webp"
            target = frames_dir / name
            if not target.exists():
                frames_dir.mkdir(parents=True, exist_ok=True)
                target.write_bytes(frame)
            urls.append(url_prefix + name)
        data["urls"] = urls
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("</", "<\\/")
        return match.group(1) + text + match.group(3)

    return _PLAYER_DATA.sub(move, page)


def _note_html(controls: Sequence[Control], reasons: dict[str, str]) -> str:
    """The note under the controls: why each disabled control is disabled."""
    return "<br>".join(
        f"{html.escape(c.label or c.name)}: {html.escape(reasons[c.name])}" for c in controls if c.name in reasons
    )


def explore(visual: Visual, dpi: int = CSS_PX_PER_INCH * PIXEL_DENSITY) -> Explorer:
    """Make ``visual`` interactive: live in Jupyter, pre-rendered in the HTML book.

    Parameters
    ----------
    visual : Visual
        The figure's ``compute`` / ``draw`` / ``update`` and its controls.
    dpi : int
        Resolution of the rendered figure (the default renders :data:`PIXEL_DENSITY`
        device pixels per CSS pixel).

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
    # In the book the player sits in a figure, which the theme centres and whose spans it shrinks;
    # Sphinx pads figures by .5em a side, which would take 16 px from the frame on a phone.
    "figure.book-explorer-figure{padding-left:0;padding-right:0}"
    ".book-explorer{text-align:start}.book-explorer-row>span{font-size:1em}"
    ".book-explorer-controls{display:flex;flex-wrap:wrap;gap:.4em 1.6em;margin:.3em 0 .2em}"
    ".book-explorer-row{display:inline-flex;align-items:center;gap:.5em;margin:0}"
    ".book-explorer-row output{min-width:2.5em;font-variant-numeric:tabular-nums}"
    ".book-explorer-row:has(:disabled){opacity:.45}"
    ".book-explorer-note{min-height:1.4em;margin:0 0 .3em;font-size:.9em;font-style:italic}"
    ".book-explorer-frame{max-width:100%;height:auto}"
    "</style>"
)

# The player script: reads the JSON beside it, swaps the image on every input, and
# disables the controls that do nothing in the new state (with the reason in the note).
# Frames are inline (base64) or, after externalise_frames, files the browser fetches
# only when a reader moves a control there.
# Kept tiny and dependency-free so the page works offline and without a kernel.
_PLAYER_JS = """(function(){
var root=document.getElementById(%s);if(!root)return;
var d=JSON.parse(root.querySelector('.book-explorer-data').textContent);
var img=root.querySelector('.book-explorer-frame');
var note=root.querySelector('.book-explorer-note');
var inputs=root.querySelectorAll('.book-explorer-control');
function show(){var flat=0;inputs.forEach(function(el){var i=+el.dataset.control;
flat=flat*d.sizes[i]+(+el.value);var out=el.nextElementSibling;
if(out&&out.tagName==='OUTPUT'){out.textContent=d.labels[i][+el.value];}});
var k=d.frame_of[flat];img.src=d.urls?d.urls[k]:'data:image/webp;base64,'+d.frames[k];
var state=d.states[d.state_of[flat]],lines=[];
inputs.forEach(function(el){var i=el.dataset.control;el.disabled=(i in state);
if(i in state){lines.push(d.names[+i]+': '+state[i]);}});
note.textContent='';lines.forEach(function(line,k){if(k)note.appendChild(document.createElement('br'));
note.appendChild(document.createTextNode(line));});}
inputs.forEach(function(el){el.addEventListener('input',show);el.addEventListener('change',show);});
})();"""
