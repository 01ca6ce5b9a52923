"""Interactive figures of chapter 1 (activation functions and loss functions).

Each visual is a pure ``compute`` (tested in ``tests/lib/widgets/test_widgets_activations.py``)
plus ``draw``/``update`` that only move matplotlib artists.
"""
from __future__ import annotations

import math

import torch

from lib.part1_blocks.activations import ACTIVATIONS
from lib.part1_blocks.losses import MARGIN_LOSSES
from lib.widgets.core import Choice, Slider, Visual

_N_POINTS = 401


def _three_decimals(value: float) -> str:
    return f"{0.0 if abs(value) < 5e-4 else value:.3f}"  # no "-0.000"


class ActivationExplorer(Visual):
    """An activation function (left) and its derivative (right) on ``[-r, r]``.

    The parameter slider sets the slope of ``leaky_relu`` and the ``alpha`` of
    ``elu``; the other functions have no parameter and ignore it. The grey curve
    on the left is ReLU, for comparison.
    """

    title = "Activation explorer"
    caption = (
        "An activation function (left) and its derivative (right), with ReLU in grey for comparison. "
        "Pick ELU or leaky ReLU and move α / slope to change what happens to negative inputs, then "
        "compare where each derivative is close to zero."
    )
    figsize = (4.6, 4.6)
    parameters = (0.01, 0.1, 0.2, 0.3, 0.5, 1.0, 1.5)
    controls = (
        Choice("activation", tuple(ACTIVATIONS), default="elu", label="activation"),
        Slider("parameter", parameters, default=1.0, label="α / slope"),
        Slider("x_range", (2, 4, 6, 8), default=4, label="input range ±"),
    )

    def compute(self, activation="elu", parameter=1.0, x_range=4):
        """Curves and headline numbers for one setting.

        Returns
        -------
        dict
            ``x``, ``y``, ``dy``, ``relu``: float arrays ``(401,)``; ``label`` (the
            name, with the parameter if the function has one); ``max_grad``; the
            derivative at both ends, ``grad_left`` and ``grad_right``; ``x_range``.
        """
        spec = ACTIVATIONS[activation]
        x = torch.linspace(-x_range, x_range, _N_POINTS, dtype=torch.float64)  # (401,)
        y = spec(x, parameter)
        dy = spec.derivative(x, parameter)
        label = activation if spec.parameter is None else f"{activation} ({spec.parameter} = {parameter:g})"
        return {
            "x": x.numpy(), "y": y.numpy(), "dy": dy.numpy(), "relu": x.clamp_min(0).numpy(),
            "label": label, "max_grad": float(dy.max()),
            "grad_left": float(dy[0]), "grad_right": float(dy[-1]), "x_range": x_range,
        }

    def inactive(self, activation="elu", parameter=1.0, x_range=4):
        """The parameter slider does nothing for a function without a parameter (SELU's α is fixed)."""
        if ACTIVATIONS[activation].parameter is None:
            return {"parameter": f"{activation} has no free parameter"}
        return {}

    def draw(self, fig, data):
        value_ax, grad_ax = fig.subplots(2, 1, sharex=True)  # stacked: each keeps the full width on a phone
        relu_line, = value_ax.plot(data["x"], data["relu"], color="0.75", linewidth=1, label="relu")
        value_line, = value_ax.plot(data["x"], data["y"], color="tab:blue", linewidth=2)
        grad_line, = grad_ax.plot(data["x"], data["dy"], color="tab:orange", linewidth=2)
        for ax in (value_ax, grad_ax):
            ax.axhline(0, color="black", linewidth=0.6)
            ax.axvline(0, color="black", linewidth=0.6)
        grad_ax.set_xlabel("$x$")
        value_ax.set_ylabel("$f(x)$")
        grad_ax.set_ylabel("$f\\,'(x)$")
        handles = {"value_ax": value_ax, "grad_ax": grad_ax, "relu": relu_line,
                   "value": value_line, "grad": grad_line}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        x = data["x"]
        handles["relu"].set_data(x, data["relu"])
        handles["value"].set_data(x, data["y"])
        handles["grad"].set_data(x, data["dy"])
        r = data["x_range"]
        low = min(float(data["y"].min()), -0.2 * r)
        handles["value_ax"].set_xlim(-r, r)
        handles["value_ax"].set_ylim(low - 0.1, max(float(data["y"].max()), 1.0) + 0.1)
        handles["grad_ax"].set_xlim(-r, r)
        handles["grad_ax"].set_ylim(min(float(data["dy"].min()), 0.0) - 0.1, max(data["max_grad"], 1.0) + 0.15)
        handles["value_ax"].set_title(data["label"])
        left, right = (_three_decimals(data[key]) for key in ("grad_left", "grad_right"))
        handles["grad_ax"].set_title(f"max $f\\,'$ {data['max_grad']:.3f}; at $\\mp${r}: {left}, {right}")


class MarginLossExplorer(Visual):
    """Every margin loss as a function of the margin ``m = y f(x)``, on one plot.

    One loss is highlighted; the marker shows each loss at the chosen margin. The
    log loss is drawn in base 2, ``log₂(1 + e^{-m})``, so that like the others it
    passes through ``(0, 1)`` and lies above the 0-1 loss.
    """

    title = "Loss against margin"
    caption = (
        "Every margin loss against the margin m = y f(x), one highlighted, with a marker at the chosen "
        "margin. Move the margin from positive to negative to compare how hard each loss punishes a "
        "wrong prediction."
    )
    figsize = (4.6, 5.0)
    margins = (-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5)
    controls = (
        Choice("highlight", tuple(MARGIN_LOSSES), default="hinge", label="highlighted loss"),
        Slider("margin", margins, default=0.5, label="margin m = y f(x)", fmt=".1f"),
    )
    colors = {"0-1": "black", "hinge": "tab:blue", "log": "tab:green", "exponential": "tab:red",
              "squared": "tab:purple", "absolute": "tab:brown"}

    def compute(self, highlight="hinge", margin=0.5):
        """All curves, and every loss at ``margin``.

        Returns
        -------
        dict
            ``m``: float array ``(551,)`` on ``[-2.5, 3]``; ``curves`` and ``at_margin``:
            dicts loss name -> array ``(551,)`` / float (log loss in base 2);
            ``highlight``; ``margin``.
        """
        m = torch.linspace(-2.5, 3.0, 551, dtype=torch.float64)  # (551,), step 0.01
        at = torch.tensor([margin], dtype=torch.float64)
        curves, at_margin = {}, {}
        for name, loss in MARGIN_LOSSES.items():
            scale = 1 / math.log(2) if name == "log" else 1.0
            curves[name] = (scale * loss(m)).numpy()
            at_margin[name] = float(scale * loss(at))
        return {"m": m.numpy(), "curves": curves, "at_margin": at_margin, "highlight": highlight, "margin": margin}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        lines = {}
        for name, curve in data["curves"].items():
            label = "log (base 2)" if name == "log" else name
            lines[name], = ax.plot(data["m"], curve, color=self.colors[name], label=label)
        dots = {name: ax.plot([], [], "o", color=self.colors[name], markersize=4)[0] for name in data["curves"]}
        marker = ax.axvline(0, color="0.4", linestyle="--", linewidth=1)
        ax.set_xlim(-2.5, 3.0)
        ax.set_ylim(-0.1, 5.0)
        ax.set_xlabel("margin $m = y\\,f(x)$ ($m > 0$: correct side)")
        ax.set_ylabel("loss")
        # The legend sits below the axes (inside, it covered curves on a narrow frame) and
        # reads out every loss at the chosen margin.
        legend = fig.legend(handles=list(lines.values()), loc="outside lower center", ncols=2, frameon=False)
        handles = {"ax": ax, "lines": lines, "dots": dots, "marker": marker, "legend": legend}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        margin = data["margin"]
        for name, line in handles["lines"].items():
            chosen = name == data["highlight"]
            line.set_linewidth(3.0 if chosen else 1.2)
            line.set_alpha(1.0 if chosen else 0.35)
            line.set_zorder(3 if chosen else 2)
            handles["dots"][name].set_data([margin], [data["at_margin"][name]])
        handles["marker"].set_xdata([margin, margin])
        for text, (name, value) in zip(handles["legend"].get_texts(), data["at_margin"].items()):
            text.set_text(f"{'log₂' if name == 'log' else name}: {value:.3f}")
            text.set_fontweight("bold" if name == data["highlight"] else "normal")
        handles["ax"].set_title(f"each loss at $m$ = {margin:.1f} (dots, legend)")
