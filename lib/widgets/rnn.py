"""Interactive figures of chapters 3 and 4 (recurrent networks, gating).

Each visual is a pure ``compute`` (tested in ``tests/lib/widgets/test_widgets_rnn.py``)
plus ``draw``/``update`` that only move matplotlib artists.
"""
from __future__ import annotations

import numpy as np
import torch
from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter, NullLocator

from lib.part2_recurrent.rnn import NONLINEARITIES, RNNCell, rnn_jacobian_norms
from lib.widgets.core import Choice, Slider, Visual


class GradientDecay(Visual):
    r"""How much the last hidden state of a random RNN depends on each earlier state.

    A 32-unit RNN cell whose recurrent matrix is ``ρ Q`` (``Q`` a fixed random
    orthogonal matrix, so every singular value is ``ρ``) reads 4 random input
    sequences. The curve is the geometric mean over them of
    :math:`\lVert \partial \mathbf{h}_T / \partial \mathbf{h}_k \rVert_2`
    (:func:`lib.part2_recurrent.rnn.rnn_jacobian_norms`) on a log scale; the dashed line is
    :math:`\rho^{T-k}`, the most it can be when :math:`|f'| \le 1`.
    """

    title = "Gradient decay through time"
    caption = (
        "How much the last hidden state of a random 32-unit RNN depends on each earlier state, "
        "‖∂h_T/∂h_k‖ on a log scale, under the bound ρ^(T−k) (dashed). Move ρ across 1 to see the "
        "gradient vanish or explode, and compare the activations."
    )
    figsize = (4.8, 4.0)
    controls = (
        Slider("scale", (0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5), default=1.0, label="recurrent weight scale ρ"),
        Slider("length", (10, 25, 50, 100), default=50, label="sequence length T"),
        Choice("activation", NONLINEARITIES, default="tanh", label="activation f"),
    )

    hidden_size, input_size, n_sequences = 32, 4, 4
    floor, ceiling = 1e-30, 1e20  # the y range shown; values beyond it are clipped

    def __init__(self, seed: int = 0):
        # Fixed weights and inputs: only the controls change the picture.
        generator = torch.Generator().manual_seed(seed)
        H, D = self.hidden_size, self.input_size
        self.orthogonal, _ = torch.linalg.qr(torch.randn(H, H, generator=generator, dtype=torch.float64))  # (H, H)
        self.weight_ih = torch.randn(H, D, generator=generator, dtype=torch.float64) / D**0.5  # (H, D)
        max_length = max(self.controls[1].values)
        self.inputs = torch.randn(self.n_sequences, max_length, D, generator=generator, dtype=torch.float64)
        self.cells = {}
        for activation in NONLINEARITIES:
            cell = RNNCell(D, H, nonlinearity=activation).double()
            with torch.no_grad():
                cell.weight_ih.copy_(self.weight_ih)
                cell.bias_ih.zero_(), cell.bias_hh.zero_()
            self.cells[activation] = cell

    def compute(self, scale=1.0, length=50, activation="tanh"):
        """Jacobian norms for one setting.

        Returns
        -------
        dict
            ``k``: int array ``(T + 1,)``; ``norms``: their geometric mean over the
            sequences, float array ``(T + 1,)``; ``bound``: ``ρ^(T - k)``;
            ``first``: the value at ``k = 0``; ``length``, ``scale``, ``activation``.
        """
        cell = self.cells[activation]
        with torch.no_grad():
            cell.weight_hh.copy_(scale * self.orthogonal)
        norms = rnn_jacobian_norms(cell, self.inputs[:, :length])  # (N, T + 1)
        # A geometric mean: the norms span dozens of orders of magnitude.
        typical = norms.clamp_min(1e-300).log().mean(dim=0).exp()  # (T + 1,)
        k = np.arange(length + 1)
        return {
            "k": k, "norms": typical.numpy(), "bound": scale ** (length - k).astype(float),
            "first": float(typical[0]), "length": length, "scale": scale, "activation": activation,
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        bound, = ax.plot([], [], "--", color="0.3", linewidth=1, zorder=3, label="$\\rho^{T-k}$")
        curve, = ax.plot([], [], "-", color="tab:blue", linewidth=2,
                         label="$\\|\\partial \\mathbf{h}_T / \\partial \\mathbf{h}_k\\|$")
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_yscale("log")
        ax.set_ylim(self.floor, self.ceiling)
        # Fixed plain-text ticks: matplotlib's default 10^n labels are typeset, which is slow.
        ticks = [10.0**e for e in range(-30, 21, 10)]
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_major_formatter(FixedFormatter([f"1e{e}" if e else "1" for e in range(-30, 21, 10)]))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("step $k$")
        # Above the axes: inside, the legend covered the curves at some settings.
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
        handles = {"ax": ax, "curve": curve, "bound": bound}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        clip = lambda values: np.clip(values, self.floor, self.ceiling)  # noqa: E731
        handles["curve"].set_data(data["k"], clip(data["norms"]))
        handles["bound"].set_data(data["k"], clip(data["bound"]))
        handles["ax"].set_xlim(0, data["length"])
        handles["ax"].set_xlabel(
            f"step $k$\n({data['activation']}, $\\rho$ = {data['scale']:g}, $T$ = {data['length']}: "
            f"$\\|\\partial \\mathbf{{h}}_T / \\partial \\mathbf{{h}}_0\\|$ ≈ {data['first']:.1e})"
        )


CANDIDATE_PATTERNS = ("pulse", "steady", "switch")


def candidate_pattern(name: str, steps: int) -> np.ndarray:
    """The candidate values ``g_t`` written into the LSTM memory in the gate explorer.

    ``"pulse"``: 1 at step 3, 0 elsewhere (one event to remember); ``"steady"``:
    0.5 at every step; ``"switch"``: +1 for the first third of the steps, -1 for
    the second, 0 after (a new value replaces an old one).

    Shapes
    ------
    output : (steps,)
    """
    t = np.arange(1, steps + 1)
    if name == "pulse":
        return (t == 3).astype(float)
    if name == "steady":
        return np.full(steps, 0.5)
    if name == "switch":
        third = steps // 3
        return np.where(t <= third, 1.0, np.where(t <= 2 * third, -1.0, 0.0))
    raise ValueError(f"name must be one of {CANDIDATE_PATTERNS}; found {name!r}")


def gate_trace(f: float, i: float, o: float, candidates: np.ndarray) -> dict:
    """The LSTM memory and output for gates held at fixed values.

    ``c_t = f c_{t-1} + i g_t`` from ``c_0 = 0``, ``h_t = o tanh(c_t)``, and the
    lecture notes' (wrong) output ``o c_t`` for comparison.

    Returns
    -------
    dict
        ``c``, ``h``, ``notes_h``, ``written`` (``i g_t``): float arrays ``(T,)``.

    Shapes
    ------
    candidates : (T,)
    """
    c, memory = 0.0, []
    for g in candidates:
        c = f * c + i * g
        memory.append(c)
    memory = np.array(memory)
    return {"c": memory, "h": o * np.tanh(memory), "notes_h": o * memory, "written": i * candidates}


class LSTMGateExplorer(Visual):
    """The LSTM gate explorer: the forget, input and output gates as sliders.

    With each gate held at one value, the cell state follows
    ``c_t = f c_{t-1} + i g_t`` (top: the bars are what is written, ``i g_t``;
    the line is ``c_t``) and the output is ``h_t = o tanh(c_t)`` (bottom, solid).
    The dashed line is the lecture notes' ``o c_t``: it leaves ``(-1, 1)`` as
    soon as the memory grows.
    """

    title = "LSTM gate explorer"
    caption = (
        "An LSTM cell with each gate held at one value: what is written (bars) and the cell state c_t "
        "(top), and the output h_t = o tanh(c_t) (bottom). Set the forget gate to 1 to let the memory "
        "grow, below 1 to let it fade, and close the output gate to hide it."
    )
    figsize = (4.8, 5.4)
    controls = (
        Slider("forget_gate", (0.0, 0.5, 0.8, 0.95, 1.0), default=0.95, label="forget gate f"),
        Slider("input_gate", (0.0, 0.5, 1.0), default=1.0, label="input gate i"),
        Slider("output_gate", (0.0, 0.5, 1.0), default=1.0, label="output gate o"),
        Choice("candidate", CANDIDATE_PATTERNS, default="steady", label="candidate g_t"),
    )

    steps = 30
    h_limit = 1.6  # the bottom panel's y range: ± this

    def compute(self, forget_gate=0.95, input_gate=1.0, output_gate=1.0, candidate="steady"):
        """Traces for one setting.

        Returns
        -------
        dict
            ``t``: steps ``1 .. T``; the arrays of :func:`gate_trace`;
            ``c_limit`` (the top panel's y range); ``notes_peak`` (largest ``|o c_t|``);
            the gate values.
        """
        g = candidate_pattern(candidate, self.steps)
        trace = gate_trace(forget_gate, input_gate, output_gate, g)
        return {
            "t": np.arange(1, self.steps + 1), **trace, "c_limit": max(1.2, 1.1 * float(np.abs(trace["c"]).max())),
            "notes_peak": float(np.abs(trace["notes_h"]).max()),
            "f": forget_gate, "i": input_gate, "o": output_gate,
        }

    def inactive(self, forget_gate=0.95, input_gate=1.0, output_gate=1.0, candidate="steady"):
        """A closed input gate writes nothing, whatever the candidate."""
        if input_gate == 0:
            return {"candidate": "the input gate i = 0 lets no candidate into the memory"}
        return {}

    def draw(self, fig, data):
        c_ax, h_ax = fig.subplots(2, 1, sharex=True)
        bars = c_ax.bar(data["t"], data["written"], color="tab:orange", alpha=0.6, label="written $i\\,g_t$")
        c_line, = c_ax.plot(data["t"], data["c"], "-o", color="tab:blue", markersize=2.5, label="memory $c_t$")
        h_line, = h_ax.plot(data["t"], data["h"], "-o", color="tab:green", markersize=2.5,
                            label="$h_t = o\\,\\tanh(c_t)$")
        notes_line, = h_ax.plot(data["t"], data["notes_h"], "--", color="0.45", label="notes: $o\\,c_t$")
        for ax in (c_ax, h_ax):
            ax.axhline(0, color="black", linewidth=0.6)
            # Beside the axes' top edge, outside: inside, the legend covered the curves.
            ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, frameon=False, borderaxespad=0.1)
        h_ax.set_ylim(-self.h_limit, self.h_limit)
        readout = h_ax.set_xlabel("step $t$")
        # Tick labels of one width (|c_t| <= 30; U+2007 is as wide as a digit), so the frozen layout fits every frame.
        c_ax.yaxis.set_major_formatter(
            FuncFormatter(lambda value, _: f"{value:.1f}".replace("-", "\u2212").rjust(5, "\u2007")))
        handles = {"c_ax": c_ax, "bars": bars, "c_line": c_line, "h_line": h_line, "notes_line": notes_line,
                   "readout": readout}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        for bar, value in zip(handles["bars"], data["written"]):
            bar.set_height(value)
        handles["c_line"].set_ydata(data["c"])
        handles["h_line"].set_ydata(data["h"])
        handles["notes_line"].set_ydata(np.clip(data["notes_h"], -2 * self.h_limit, 2 * self.h_limit))
        limit = data["c_limit"]
        handles["c_ax"].set_ylim(-limit, limit)
        fig = handles["c_ax"].figure
        fig.suptitle(f"$c_t$ = {data['f']:g} $c_{{t-1}}$ + {data['i']:g} $g_t$,   "
                     f"$h_t$ = {data['o']:g} tanh$(c_t)$")
        handles["readout"].set_text(f"step $t$ (largest $|o\\,c_t|$ of the notes: {data['notes_peak']:.2f})")
