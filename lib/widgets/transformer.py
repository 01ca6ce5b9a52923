"""Interactive figures of chapter 11 (self-attention and the Transformer).

Each visual is a pure ``compute`` (tested in ``tests/lib/widgets/test_widgets_transformer.py``)
plus ``draw``/``update`` that only move matplotlib artists. :func:`draw_all_heads`
is the static companion of :class:`HeadsViewer`: every map of one example at once.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.textpath import TextPath

from lib.part4_attention.positional import positional_encoding
from lib.widgets.core import Choice, Slider, Visual

KINDS = {
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention (causal)",
    "cross": "encoder-decoder attention",
}


class PositionalEncodingExplorer(Visual):
    """The sinusoidal encodings of 64 positions in 32 dimensions.

    Left: the whole matrix ``P`` (one row per position), with the chosen
    position's row and the chosen pair of columns ``2i, 2i + 1`` outlined.
    Top right: that pair as functions of the position, a sine and a cosine of
    wavelength ``2 pi 10000^(2i/d)``. Bottom right: the similarity
    ``p_t . p_s / (d/2)`` of position ``t`` with every position ``s`` (1 at
    ``s = t``); it depends on ``s - t`` only, so the curve slides with ``t``
    without changing shape.
    """

    title = "Positional encoding explorer"
    caption = (
        "The sinusoidal encodings of 64 positions in 32 dimensions, one pair of columns as a sine and a "
        "cosine, and the similarity of position t with every other position. Move t to see the "
        "similarity curve slide without changing shape, and the pair i to see the wavelength grow."
    )
    figsize = (4.8, 6.6)
    max_len, d_model = 64, 32
    controls = (
        Slider("position", tuple(range(0, 64, 6)), default=18, label="position t"),
        Slider("pair", tuple(range(16)), default=2, label="dimension pair i"),
    )

    def __init__(self):
        self.encoding = positional_encoding(self.max_len, self.d_model, dtype=torch.float64).numpy()  # (T, D)

    def compute(self, position=18, pair=2):
        """The chosen pair of columns and the similarity of ``p_t`` with every position.

        Returns
        -------
        dict
            ``sin`` and ``cos``: float arrays ``(max_len,)``, columns ``2i`` and
            ``2i + 1`` of ``P``; ``similarity``: ``(max_len,)``,
            ``P @ p_t / (d/2)``; ``wavelength``: ``2 pi 10000^(2i/d)``;
            ``position`` and ``pair``.
        """
        p_t = self.encoding[position]  # (D,)
        return {
            "sin": self.encoding[:, 2 * pair],
            "cos": self.encoding[:, 2 * pair + 1],
            "similarity": self.encoding @ p_t / (self.d_model / 2),  # (T,); |p_t|^2 = d/2
            "wavelength": 2 * np.pi * 10000 ** (2 * pair / self.d_model),
            "position": position,
            "pair": pair,
        }

    def draw(self, fig, data):
        # Three panels stacked, so that each keeps the full width on a phone.
        matrix_ax, wave_ax, similarity_ax = fig.subplots(3, 1, gridspec_kw={"height_ratios": (1.4, 1, 1)})
        matrix_ax.imshow(self.encoding, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        matrix_ax.set_xlabel("dimension")
        matrix_ax.set_ylabel("position $t$")
        matrix_ax.set_title("$\\mathbf{P}$ (blue −1, red +1)")
        row = matrix_ax.axhline(0, color="lime", linewidth=1.5)
        columns = Rectangle((0, -0.5), 2, self.max_len, fill=False, edgecolor="lime", linewidth=1.5)
        matrix_ax.add_patch(columns)
        positions = np.arange(self.max_len)
        (sin_line,) = wave_ax.plot(positions, data["sin"], color="tab:blue")
        (cos_line,) = wave_ax.plot(positions, data["cos"], color="tab:orange")
        (wave_dots,) = wave_ax.plot([0, 0], [0, 0], "ko", markersize=4)
        wave_ax.set_ylim(-1.15, 1.15)
        wave_ax.tick_params(labelbottom=False)
        (similarity_line,) = similarity_ax.plot(positions, data["similarity"], color="tab:green")
        (similarity_dot,) = similarity_ax.plot([0], [1], "ko", markersize=4)
        similarity_ax.set_ylim(0, 1.08)
        similarity_ax.set_xlabel("position $s$")
        similarity_ax.set_title("similarity $\\mathbf{p}_t \\cdot \\mathbf{p}_s \\,/\\, (d/2)$")
        for ax in (wave_ax, similarity_ax):
            ax.set_xlim(0, self.max_len - 1)
        handles = {
            "row": row, "columns": columns, "wave_ax": wave_ax, "sin": sin_line, "cos": cos_line,
            "wave_dots": wave_dots, "similarity": similarity_line, "similarity_dot": similarity_dot,
        }
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        t, i = data["position"], data["pair"]
        handles["row"].set_ydata([t, t])
        handles["columns"].set_x(2 * i - 0.5)
        handles["sin"].set_ydata(data["sin"])
        handles["cos"].set_ydata(data["cos"])
        handles["wave_dots"].set_data([t, t], [data["sin"][t], data["cos"][t]])
        handles["wave_ax"].set_title(
            f"$p_{{t,{2 * i}}}$ (sin, blue), $p_{{t,{2 * i + 1}}}$ (cos, orange)\nwavelength {data['wavelength']:.1f}"
        )
        handles["similarity"].set_ydata(data["similarity"])
        handles["similarity_dot"].set_data([t], [data["similarity"][t]])


def _check_maps(maps: dict, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]]) -> tuple[int, int, int]:
    """Validate the data of a heads viewer; return (layers, heads, examples)."""
    if not isinstance(maps, dict) or set(maps) != set(KINDS):
        found = sorted(maps) if isinstance(maps, dict) else type(maps).__name__
        raise ValueError(f"maps must be a dict with keys {sorted(KINDS)}; found {found}")
    shapes = {kind: np.shape(maps[kind]) for kind in KINDS}
    if any(len(shape) != 5 for shape in shapes.values()) or len({shape[:3] for shape in shapes.values()}) != 1:
        raise ValueError(f"every map must have shape (L, N, H, T, S) with the same L, N, H; found {shapes}")
    layers, examples, heads = shapes["encoder"][:3]
    if len(sources) != examples or len(targets) != examples:
        raise ValueError(
            f"sources and targets must label the N = {examples} examples; found {len(sources)} and {len(targets)}"
        )
    return layers, heads, examples


class HeadsViewer(Visual):
    """The attention weights of a trained encoder-decoder Transformer, one head at a time.

    The maps are computed once from the trained model and passed in (the
    visual only slices them). Rows are queries, columns keys; each row sums
    to 1. For the decoder, row ``t`` is labelled by the token position ``t``
    predicts; its columns are the decoder inputs (``<bos>`` and the tokens
    produced so far) or the source tokens.

    Parameters
    ----------
    maps : dict
        ``"encoder"`` ``(L, N, H, S, S)``, ``"decoder"`` ``(L, N, H, T, T)`` and
        ``"cross"`` ``(L, N, H, T, S)`` float arrays (e.g.
        :meth:`lib.part4_attention.transformer.Seq2SeqTransformer.attention_maps` as numpy).
    sources : list of list of str
        The real source tokens of each example (padding excluded).
    targets : list of list of str
        The decoder's outputs of each example (``eos`` included); the decoder
        inputs are ``<bos>`` followed by all but the last.
    """

    title = "Heads viewer"
    caption = (
        "Attention weights of the trained encoder-decoder Transformer, one head at a time (rows are "
        "queries, columns keys). Switch between encoder, decoder and cross attention, and step through "
        "layers, heads and examples to compare what each head attends to."
    )
    figsize = (4.8, 5.0)

    def __init__(self, maps: dict, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]]):
        layers, heads, examples = _check_maps(maps, sources, targets)
        self.maps = {kind: np.asarray(value, dtype=float) for kind, value in maps.items()}
        self.sources = [list(s) for s in sources]
        self.targets = [list(t) for t in targets]
        self.max_rows = max(max(len(s) for s in self.sources), max(len(t) for t in self.targets))
        self.controls = (
            Choice("kind", tuple(KINDS), default="cross", label="attention"),
            Slider("layer", tuple(range(1, layers + 1)), default=1, label="layer"),
            Slider("head", tuple(range(1, heads + 1)), default=1, label="head"),
            Slider("example", tuple(range(1, examples + 1)), default=1, label="example"),
        )

    def compute(self, kind="cross", layer=1, head=1, example=1):
        """The chosen map, cropped to the example's real tokens and padded with NaN to a fixed grid.

        Returns
        -------
        dict
            ``weights``: float array ``(max_rows, max_rows)``, NaN outside the
            real ``(rows, columns)``; ``row_labels``, ``column_labels``: lists
            of str; ``title``; ``xlabel``, ``ylabel``.
        """
        source, target = self.sources[example - 1], self.targets[example - 1]
        decoder_inputs = ["<bos>", *target[:-1]]
        rows, columns = {
            "encoder": (source, source),
            "decoder": (target, decoder_inputs),
            "cross": (target, source),
        }[kind]
        weights = np.full((self.max_rows, self.max_rows), np.nan)
        full = self.maps[kind][layer - 1, example - 1, head - 1]  # (T or S, T or S), padded
        weights[: len(rows), : len(columns)] = full[: len(rows), : len(columns)]
        return {
            "weights": weights,
            "row_labels": list(rows),
            "column_labels": list(columns),
            "title": f"{KINDS[kind]}, layer {layer}, head {head}",
            "ylabel": "source token (query)" if kind == "encoder" else "decoder position (token it predicts)",
            "xlabel": "decoder input (key)" if kind == "decoder" else "source token (key)",
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        image = ax.imshow(data["weights"], vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
        fig.colorbar(image, ax=ax, label="weight $\\alpha_{ts}$")
        handles = {"ax": ax, "image": image}
        self.update(handles, data)
        # Leave the longest token of any example on every tick: the layout, frozen after
        # draw, then has room for all of them (the next update puts the real ones back).
        # Turned only if some frame turns its labels, judged on columns a fifth narrower than
        # now (the layout narrows the axes by less): otherwise the frames' feet stay empty.
        tokens = [token for sentence in (*self.sources, *self.targets) for token in sentence] + ["<bos>"]
        longest = max(tokens, key=len)
        examples = range(1, len(self.sources) + 1)
        turned = any(not fits_upright(ax, self.compute(kind=kind, example=example)["column_labels"], room=0.8)
                     for kind in KINDS for example in examples)
        ax.set_xticks(ax.get_xticks(), [longest] * len(ax.get_xticks()), rotation=90 if turned else 0)
        ax.set_yticks(ax.get_yticks(), [longest] * len(ax.get_yticks()))
        return handles

    def update(self, handles, data):
        ax = handles["ax"]
        handles["image"].set_data(np.ma.masked_invalid(data["weights"]))
        rows, columns = data["row_labels"], data["column_labels"]
        ax.set_xticks(range(len(columns)), columns)
        # Upright where every token fits its column (digits); turned where one would run into the next.
        ax.tick_params(axis="x", labelrotation=0 if fits_upright(ax, columns) else 90)
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlim(-0.5, len(columns) - 0.5)
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_title(data["title"])
        ax.set_xlabel(data["xlabel"])
        ax.set_ylabel(data["ylabel"])


def fits_upright(ax, labels: Sequence[str], room: float = 1.0) -> bool:
    """Whether ``labels``, one per column of ``ax`` (at x = 0, 1, ...), can be drawn upright.

    Each pair of neighbours, drawn in the font of ``ax``'s x tick labels, must keep a third
    of an em between them in columns ``room`` times as wide as ``ax``'s, and the first and
    last must stay inside the figure. Measured on the glyphs' outlines (no renderer needed).
    """
    if len(labels) == 0:
        raise ValueError("labels must name at least one column; found none")
    if not 0 < room <= 1:
        raise ValueError(f"room must be a fraction of the column in (0, 1]; found {room}")
    prop = ax.xaxis.get_majorticklabels()[0].get_fontproperties()
    box = ax.get_position()
    width_pt = ax.figure.get_figwidth() * 72
    column_pt = room * box.width * width_pt / len(labels)
    widths = [TextPath((0, 0), str(label), prop=prop).get_extents().width for label in labels]
    gap = prop.get_size_in_points() / 3
    apart = all((left + right) / 2 + gap <= column_pt for left, right in zip(widths, widths[1:]))
    inside = (box.x0 * width_pt + (column_pt - widths[0]) / 2 >= 0
              and box.x1 * width_pt - (column_pt - widths[-1]) / 2 <= width_pt)
    return bool(apart and inside)


def draw_all_heads(fig: Figure, viewer: HeadsViewer, example: int = 1) -> np.ndarray:
    """Draw every attention map of one example into ``fig``: (kind, layer) rows by head columns.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        An empty figure (e.g. ``plt.figure(layout="constrained")``).
    viewer : HeadsViewer
        Holds the maps and the token labels.
    example : int
        Which example (1-based).

    Returns
    -------
    numpy.ndarray of Axes
        Shape ``(3 L, H)``: encoder, decoder and cross attention for each layer, one column per head.
    """
    layers = len(viewer.controls[1].values)
    heads = len(viewer.controls[2].values)
    axes = fig.subplots(3 * layers, heads, squeeze=False)
    for k, kind in enumerate(KINDS):
        for layer in range(1, layers + 1):
            for head in range(1, heads + 1):
                data = viewer.compute(kind=kind, layer=layer, head=head, example=example)
                ax = axes[k * layers + layer - 1, head - 1]
                rows, columns = len(data["row_labels"]), len(data["column_labels"])
                ax.imshow(data["weights"][:rows, :columns], vmin=0, vmax=1, cmap="viridis", aspect="auto",
                          interpolation="nearest")
                ax.set_xticks(range(columns), data["column_labels"], fontsize=6)
                ax.set_yticks(range(rows), data["row_labels"], fontsize=6)
                ax.set_title(f"{kind}, layer {layer}, head {head}", fontsize=7)
    return axes
