"""Interactive figures of chapter 10 (sequence-to-sequence models with attention).

:func:`alignment_data` runs trained models once (greedy decoding through
:mod:`lib.part3_words.decoding`, then teacher forcing for the weights) and
:class:`AlignmentExplorer` only slices its result, so every frame is cheap.
:func:`draw_alignment` draws one attention map on a matplotlib ``Axes``, for
the chapter's static figures. ``compute`` is tested in
``tests/lib/widgets/test_widgets_seq2seq.py``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from lib.part4_attention.seq2seq import LuongDecoder, Seq2Seq, alignments
from lib.part4_attention.date_task import DateTask
from lib.part4_attention.pairs import SequencePairs
from lib.widgets.core import Choice, Slider, Visual

EOS_LABEL = "<eos>"


def draw_alignment(ax, weights, source: Sequence[str], target: Sequence[str], title: str = ""):
    """Draw an attention map: one row per output token, one column per source token.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    weights : array-like
        The weights, cropped to the real rows and columns.
    source, target : sequence of str
        Column and row labels.
    title : str

    Returns
    -------
    matplotlib.image.AxesImage

    Shapes
    ------
    weights : (len(target), len(source))
    """
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(target), len(source)):
        raise ValueError(f"weights must have shape (len(target), len(source)) = ({len(target)}, {len(source)}); "
                         f"found {weights.shape}")
    image = ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(source)), [c if c != " " else "␣" for c in source], fontsize=7)
    ax.set_yticks(range(len(target)), list(target), fontsize=7)
    ax.tick_params(length=0)
    if title:
        ax.set_title(title, fontsize=9)
    return image


def _window_of(model: Seq2Seq):
    decoder = model.decoder
    return decoder.window if isinstance(decoder, LuongDecoder) and decoder.mode != "global" else None


def alignment_data(models: dict[str, Seq2Seq], task: DateTask, examples: SequencePairs,
                   windows: Sequence[int]) -> dict:
    """Decode every example with every model (and, for local models, every window ``D``).

    A local model's window is changed only for this computation and restored
    afterwards; its weights stay those it was trained with.

    Parameters
    ----------
    models : dict of str to Seq2Seq
        Attention models (Bahdanau or Luong), by display name.
    task : DateTask
    examples : SequencePairs
        A few held-out examples.
    windows : sequence of int
        The values of ``D`` to try on the local models.

    Returns
    -------
    dict
        ``"sources"`` (list of str), ``"expected"`` (list of str), ``"models"``,
        ``"windows"``, ``"trained_windows"`` (name -> D or None) and ``"frames"``:
        ``(example index, model name, D) -> {"weights": (T, S) float array,
        "output": list of int, "centres": (T,) array or None}`` with ``T`` the
        output's length.

    Shapes
    ------
    examples.src : (N, S)
    """
    sources = [task.source_text(row[:n].tolist()) for row, n in zip(examples.src, examples.src_lens)]
    expected = [task.target_text(row.tolist()) for row in examples.tgt_out]
    frames, trained = {}, {}
    for name, model in models.items():
        trained[name] = _window_of(model)
        for window in (windows if trained[name] is not None else [None]):
            if window is not None:
                model.decoder.window = window
            try:
                outputs, weights = alignments(model, examples, task.bos, task.eos)  # (N, T, S)
                centres = None
                if window is not None:
                    with torch.no_grad():
                        tgt_in = torch.full((len(outputs), weights.shape[1]), task.bos)
                        for i, output in enumerate(outputs):
                            tgt_in[i, 1 : len(output)] = torch.tensor(output[:-1], dtype=torch.long)
                        memory = model.encoder(examples.src, examples.src_lens)
                        centres = model.decoder.centres(tgt_in, memory).numpy()  # (N, T)
            finally:
                if trained[name] is not None:
                    model.decoder.window = trained[name]
            for i, output in enumerate(outputs):
                frame = {
                    "weights": weights[i, : len(output), : len(sources[i])].numpy().astype(float),
                    "output": list(output),
                    "centres": None if centres is None else centres[i, : len(output)].astype(float),
                }
                for shown in (windows if window is None else [window]):
                    frames[(i, name, shown)] = frame
    return {"sources": sources, "expected": expected, "models": list(models), "windows": list(windows),
            "trained_windows": trained, "frames": frames}


def _staircase(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A vertical segment at ``edges[i]`` across each row ``i``, joined into one line (NaN rows are gaps)."""
    rows = np.arange(len(edges))
    return np.repeat(edges, 2), np.stack((rows - 0.5, rows + 0.5), axis=1).ravel()


class AlignmentExplorer(Visual):
    """The attention of trained date normalisers, one output step per row.

    Choose a held-out input and a model. Each row is one output character of
    the model's greedy output, each column a source character; the colour is
    the weight the decoder put on that character when it wrote that output.
    For the local-p model, white dots mark the predicted centre :math:`p_t`
    and the lines the window :math:`[p_t - D, p_t + D]`; the slider changes
    ``D`` at decoding time (the model was trained with one ``D``).

    Parameters
    ----------
    data : dict
        What :func:`alignment_data` returns.
    task : DateTask
        Turns the output ids into characters.
    """

    title = "Alignment explorer"
    caption = (
        "Attention weights of the trained date normalisers: one row per output character, one column "
        "per source character. Compare the global and local models on the same input, and move the "
        "local-p window D away from the trained one to see the alignment change."
    )
    figsize = (4.8, 4.6)
    max_rows = 11  # ten ISO characters and <eos>

    def __init__(self, data: dict, task: DateTask):
        if not isinstance(data, dict) or "frames" not in data:
            raise TypeError(f"data must be the dict of alignment_data; found {type(data).__name__}")
        self.data, self.task = data, task
        self.max_columns = max(len(source) for source in data["sources"])
        local = [name for name, window in data["trained_windows"].items() if window is not None]
        self.controls = (
            Choice("example", tuple(data["sources"]), label="input"),
            Choice("model", tuple(data["models"]), default=local[0] if local else None, label="model"),
            Slider("window", tuple(data["windows"]),
                   default=data["trained_windows"][local[0]] if local else None, label="local-p window D"),
        )

    def inactive(self, example=None, model=None, window=None):
        """The window D belongs to local-p attention: it does nothing for a global model."""
        model = model if model is not None else self.data["models"][0]
        if self.data["trained_windows"].get(model) is None:
            return {"window": f"{model} attends to every source position; only local-p has a window"}
        return {}

    def _labels(self, output: list[int]) -> list[str]:
        return [EOS_LABEL if token == self.task.eos else self.task.target_text([token]) or "?" for token in output]

    def compute(self, example=None, model=None, window=None):
        """One frame: the weights padded with NaN to a fixed grid, labels, window and title.

        Returns
        -------
        dict
            ``weights``: float array ``(max_rows, max_columns)``, NaN outside the
            output's rows and the source's columns; ``row_labels``,
            ``column_labels``; ``centres``: 0-based column of :math:`p_t` per row
            (NaN rows for global models); ``window``: ``D`` or None;
            ``title``; ``correct``.
        """
        index = self.data["sources"].index(example if example is not None else self.data["sources"][0])
        model = model if model is not None else self.data["models"][0]
        window = window if window is not None else self.data["windows"][0]
        frame = self.data["frames"][(index, model, window)]
        rows, columns = len(frame["output"]), len(self.data["sources"][index])
        weights = np.full((self.max_rows, self.max_columns), np.nan)
        weights[:rows, :columns] = frame["weights"]
        centres = np.full(self.max_rows, np.nan)
        local = frame["centres"] is not None
        if local:
            centres[:rows] = frame["centres"] - 1  # p_t counts positions from 1, columns from 0
        output = self.task.target_text(frame["output"])
        expected = self.data["expected"][index]
        correct = output == expected and frame["output"][-1] == self.task.eos
        verdict = "correct" if correct else f"wrong (expected {expected})"
        setting = f", D = {window}" if local else ""
        return {
            "weights": weights,
            "row_labels": self._labels(frame["output"]),
            "column_labels": list(self.data["sources"][index]),
            "centres": centres,
            "window": window if local else None,
            "title": f"{model}{setting}: {output}\n{verdict}",
            "correct": correct,
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        image = ax.imshow(data["weights"], vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
        fig.colorbar(image, ax=ax, label="attention weight", fraction=0.04)
        # Labels are plain texts created once (tick labels would be rebuilt, and laid out, on every frame).
        ax.set_xticks([])
        ax.set_yticks([])
        columns = [ax.text(c, -0.02, "", transform=ax.get_xaxis_transform(), ha="center", va="top")
                   for c in range(self.max_columns)]
        rows = [ax.text(-0.01, r, "", transform=ax.get_yaxis_transform(), ha="right", va="center")
                for r in range(self.max_rows)]
        # The pads leave room for the character labels above, which are plain texts.
        ax.set_xlabel("source character $s$", labelpad=1.6 * columns[0].get_fontsize())
        ax.set_ylabel("output character $t$", labelpad=3.2 * rows[0].get_fontsize())
        (centres,) = ax.plot(np.zeros(self.max_rows), np.arange(self.max_rows), "o", color="white", markersize=3,
                             linestyle="none")
        (left,) = ax.plot(*_staircase(np.zeros(self.max_rows)), color="white", linewidth=1)
        (right,) = ax.plot(*_staircase(np.zeros(self.max_rows)), color="white", linewidth=1)
        ax.set_ylim(self.max_rows - 0.5, -0.5)
        handles = {"ax": ax, "image": image, "columns": columns, "rows": rows, "centres": centres, "left": left,
                   "right": right}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        handles["image"].set_data(np.ma.masked_invalid(data["weights"]))
        columns = data["column_labels"] + [""] * (self.max_columns - len(data["column_labels"]))
        rows = data["row_labels"] + [""] * (self.max_rows - len(data["row_labels"]))
        for text, label in zip(handles["columns"], columns):
            text.set_text(label if label != " " else "␣")
        for text, label in zip(handles["rows"], rows):
            text.set_text(label)
        centres = data["centres"]
        handles["centres"].set_data(centres, np.arange(self.max_rows))
        window = data["window"] if data["window"] is not None else np.nan
        # The window holds the columns c with |c - centre| <= D, cut at the source's ends.
        last = len(data["column_labels"]) - 1
        handles["left"].set_data(*_staircase(np.clip(np.ceil(centres - window), 0, last) - 0.5))
        handles["right"].set_data(*_staircase(np.clip(np.floor(centres + window), 0, last) + 0.5))
        handles["ax"].set_xlim(-0.5, len(data["column_labels"]) - 0.5)  # the source's columns fill the width
        handles["ax"].set_title(data["title"])
