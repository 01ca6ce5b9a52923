"""Interactive figures of chapter 2 (optimisers).

The visual overlays the paths of several optimisers of :mod:`lib.part1_blocks.optim` on one 2-D
surface, sharing one learning-rate multiplier, one β₁ and one β₂. Each path depends
only on its own settings, so it is computed once per setting and reused by every
combination of the optimiser toggles (:func:`optimizer_path`); ``compute`` is tested in
``tests/lib/widgets/test_widgets_optim.py`` against ``torch.optim``.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from lib.part1_blocks.heavy_ball import direction_rates
from lib.part1_blocks.optim import SGD, SURFACES, Adam, RMSprop, trajectory
from lib.widgets.core import Choice, Slider, Visual

OPTIMIZER_NAMES = ("momentum", "RMSProp", "Adam")
TOGGLES = {"momentum": "show_momentum", "RMSProp": "show_rmsprop", "Adam": "show_adam"}
STYLES = {"momentum": ("tab:red", "o"), "RMSProp": ("darkorange", "s"), "Adam": ("black", "^")}

# A learning rate per surface and optimiser that converges at β₁ = 0.9, β₂ = 0.999;
# the slider multiplies it. Adaptive methods take steps of about lr whatever the
# gradient, so their scale differs from plain gradient descent's by orders of magnitude.
BASE_LR = {
    ("quadratic", "momentum"): 0.02, ("quadratic", "RMSProp"): 0.1, ("quadratic", "Adam"): 0.1,
    ("rosenbrock", "momentum"): 1e-3, ("rosenbrock", "RMSProp"): 0.01, ("rosenbrock", "Adam"): 0.1,
}
STEPS = {"quadratic": 100, "rosenbrock": 500}


def optimizer_settings(name: str, lr: float, beta1: float, beta2: float) -> tuple[type, dict]:
    """The class and arguments of one optimiser, with ``β₁`` and ``β₂`` in their roles.

    ``momentum``: :class:`lib.part1_blocks.optim.SGD` with ``momentum = β₁`` (``β₁ = 0`` is plain
    gradient descent). ``RMSProp``: ``alpha = β₂``, the decay of the squared-gradient
    average (it has no first moment). ``Adam``: ``betas = (β₁, β₂)``.
    """
    if name == "momentum":
        return SGD, dict(lr=lr, momentum=beta1)
    if name == "RMSProp":
        return RMSprop, dict(lr=lr, alpha=beta2)
    if name == "Adam":
        return Adam, dict(lr=lr, betas=(beta1, beta2))
    raise ValueError(f"name must be one of {OPTIMIZER_NAMES}; found {name!r}")


@lru_cache(maxsize=None)
def optimizer_path(surface: str, name: str, lr: float, beta1: float, beta2: float) -> np.ndarray:
    """The points one optimiser visits on ``SURFACES[surface]`` in ``STEPS[surface]`` steps,
    shape ``(n, 2)`` with ``n <= steps + 1`` (a diverging run is cut); read-only, cached."""
    cls, hyper = optimizer_settings(name, lr, beta1, beta2)
    path = trajectory(cls, SURFACES[surface], STEPS[surface], **hyper).numpy()  # (n, 2)
    path.setflags(write=False)
    return path


class TrajectoryExplorer(Visual):
    """The paths of several optimisers on a 2-D surface, for a learning rate, a β₁ and a β₂.

    A toggle per optimiser shows or hides its path; each runs at its own base learning
    rate times the shared multiplier. The shading shows the loss on a log scale (darker
    is lower); the star is the minimum, the cross the start. A run that overflows is cut
    and reported as diverged.
    """

    title = "Optimiser trajectories"
    caption = (
        "The paths of momentum, RMSProp and Adam on one loss surface (darker is lower, the star is the "
        "minimum), each switched on or off, with their distances from the minimum beneath. Raise β₁ to "
        "0.99 to see momentum overshoot, or move β₂ from 0.9 to 0.999 to see RMSProp's first step grow "
        "while Adam's bias-corrected start does not."
    )
    figsize = (4.8, 5.6)
    controls = (
        Choice("surface", tuple(SURFACES), default="rosenbrock", label="surface"),
        *(Choice(toggle, ("on", "off"), default="on", label=name) for name, toggle in TOGGLES.items()),
        Slider("lr_scale", (0.5, 1, 2), default=1, label="learning rate × base"),
        Slider("beta1", (0.0, 0.9, 0.99), default=0.9, label="β₁"),
        Slider("beta2", (0.9, 0.999), default=0.999, label="β₂"),
    )

    def __init__(self, grid_size: int = 160):
        # The contour grids depend on the surface only: computed once, not per update.
        self.grids = {}
        for name, surface in SURFACES.items():
            xs = torch.linspace(*surface.xlim, grid_size, dtype=torch.float64)
            ys = torch.linspace(*surface.ylim, grid_size, dtype=torch.float64)
            gx, gy = torch.meshgrid(xs, ys, indexing="xy")  # (grid, grid) each
            values = surface.f(torch.stack([gx, gy], dim=-1))  # (grid, grid)
            self.grids[name] = (gx.numpy(), gy.numpy(), values.numpy())

    def compute(self, surface="rosenbrock", show_momentum="on", show_rmsprop="on", show_adam="on",
                lr_scale=1, beta1=0.9, beta2=0.999):
        """Run every shown optimiser and summarise each run.

        Returns
        -------
        dict
            ``runs``: for each shown optimiser, in :data:`OPTIMIZER_NAMES` order, a dict
            with ``path`` (float array ``(n, 2)``, ``n <= steps + 1``), ``lr``,
            ``diverged``, and ``final_loss`` and ``distance`` (to the minimum) at the
            last finite point; ``steps``, ``surface``, ``lr_scale``, ``beta1``, ``beta2``.
        """
        shown = {"momentum": show_momentum, "RMSProp": show_rmsprop, "Adam": show_adam}
        spec = SURFACES[surface]
        minimum = np.array(spec.minimum)
        runs = {}
        for name in OPTIMIZER_NAMES:
            if shown[name] != "on":
                continue
            lr = BASE_LR[surface, name] * lr_scale
            path = optimizer_path(surface, name, lr, beta1, beta2)  # (n, 2)
            runs[name] = {
                "path": path, "lr": lr, "diverged": len(path) < STEPS[surface] + 1,
                "final_loss": float(spec.f(torch.from_numpy(path[-1].copy()))),
                "distance": float(np.linalg.norm(path[-1] - minimum)),
            }
        return {"runs": runs, "steps": STEPS[surface], "surface": surface, "lr_scale": lr_scale,
                "beta1": beta1, "beta2": beta2}

    def inactive(self, surface="rosenbrock", show_momentum="on", show_rmsprop="on", show_adam="on",
                 lr_scale=1, beta1=0.9, beta2=0.999):
        reasons = {}
        if "on" not in (show_momentum, show_rmsprop, show_adam):
            reasons["lr_scale"] = "no optimiser is shown"
        if "on" not in (show_momentum, show_adam):
            reasons["beta1"] = "only momentum and Adam have a first moment; neither is shown"
        if "on" not in (show_rmsprop, show_adam):
            reasons["beta2"] = "only RMSProp and Adam have a second moment; neither is shown"
        return reasons

    def draw(self, fig, data):
        ax = fig.add_subplot()
        contours = {}
        for name, (gx, gy, values) in self.grids.items():
            # Filled bands of log loss: cheaper to draw and to compress than contour lines.
            contours[name] = ax.contourf(gx, gy, np.log10(values + 1e-3), levels=12, cmap="Blues_r", alpha=0.6)
        minimum, = ax.plot([], [], "*", color="gold", markeredgecolor="black", markersize=12, zorder=4)
        start, = ax.plot([], [], "x", color="black", markersize=7, zorder=4)
        lines, summaries = {}, {}
        for row, name in enumerate(OPTIMIZER_NAMES):
            color, marker = STYLES[name]
            lines[name], = ax.plot([], [], "-", marker=marker, color=color, markersize=3.5, linewidth=1.2, zorder=3)
            # One summary line per optimiser under the axes, in its path's colour: a legend
            # inside the axes covered the paths.
            summaries[name] = fig.text(0.02, 0.02 + 0.055 * (len(OPTIMIZER_NAMES) - 1 - row), "", color=color,
                                       ha="left", va="bottom")
        ax.set_xlabel("$w_1$")
        ax.set_ylabel("$w_2$")
        fig.get_layout_engine().set(rect=(0, 0.18, 1, 0.82))  # the bottom 18% holds the summaries
        handles = {"ax": ax, "contours": contours, "minimum": minimum, "start": start, "lines": lines,
                   "summaries": summaries}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        spec = SURFACES[data["surface"]]
        for name, contour in handles["contours"].items():
            contour.set_visible(name == data["surface"])
        ax = handles["ax"]
        ax.set_xlim(*spec.xlim)
        ax.set_ylim(*spec.ylim)
        handles["minimum"].set_data([spec.minimum[0]], [spec.minimum[1]])
        handles["start"].set_data([spec.start[0]], [spec.start[1]])
        for name in OPTIMIZER_NAMES:
            line, summary = handles["lines"][name], handles["summaries"][name]
            run = data["runs"].get(name)
            line.set_visible(run is not None)
            summary.set_visible(run is not None)
            if run is None:
                continue
            line.set_data(run["path"][:, 0], run["path"][:, 1])
            line.set_markevery(max(1, data["steps"] // 50))  # about 50 markers: the path stays visible
            if run["diverged"]:
                result = f"diverged after {len(run['path']) - 1} steps"
            else:
                result = f"distance {run['distance']:.3f}"
            summary.set_text(f"{name}, lr {run['lr']:g}: {result}")
        # Only the β's of the shown optimisers: a control without effect leaves the frame unchanged.
        title = [f"{data['steps']} steps"]
        if {"momentum", "Adam"} & set(data["runs"]):
            title.append(f"$\\beta_1$ = {data['beta1']:g}")
        if {"RMSProp", "Adam"} & set(data["runs"]):
            title.append(f"$\\beta_2$ = {data['beta2']:g}")
        ax.set_title(", ".join(title))


# ---------------------------------------------------------------------------
# Why momentum works: each eigen-direction's rate for a learning rate and a β.
# ---------------------------------------------------------------------------

RATE_CURVATURES = (1.0, 20.0)  # the chapter's quadratic ½(w₁² + 20 w₂²)
RATE_GRID = np.linspace(0.25, 25.0, 400)  # the curvatures λ drawn as a curve


class MomentumRateExplorer(Visual):
    """Each eigen-direction's convergence rate under ``SGD(lr, momentum=β)``.

    The curve is the spectral radius of the iteration matrix ``R`` for every curvature
    λ (:func:`lib.part1_blocks.heavy_ball.direction_rates`), gradient descent's at the
    same learning rate dashed; the dots are the quadratic's two directions, λ = 1 and
    λ = 20, and the shaded band the curvatures whose roots are complex (rate √β).
    """

    title = "Momentum: the rate of each direction"
    caption = (
        "The convergence rate per step of every curvature λ under momentum (solid) and gradient descent "
        "(dashed) at one learning rate; the dots are the quadratic's directions λ = 1 and 20, and the band "
        "the curvatures that spiral in at √β. Try α = 0.132 with β = 0.41, near Polyak's optimum: both dots "
        "fall to about 0.64, against 0.90 for gradient descent at its best α = 0.095."
    )
    figsize = (4.8, 4.4)
    controls = (
        Slider("lr", (0.02, 0.05, 0.095, 0.132, 0.2), default=0.095, label="learning rate α"),
        Slider("beta", (0.0, 0.2, 0.41, 0.6, 0.9), default=0.0, label="momentum β"),
    )

    def compute(self, lr=0.095, beta=0.0):
        """The rates over :data:`RATE_GRID` and at :data:`RATE_CURVATURES`.

        Returns
        -------
        dict
            ``grid`` and ``rates`` (momentum) and ``gd_rates`` (β = 0), float arrays of
            the grid's length; ``dots``: the two directions' rates; ``band``: the
            complex region ``((1-√β)²/α, (1+√β)²/α)`` of λ, or None when β = 0;
            ``worst``: the larger dot; ``lr`` and ``beta``.
        """
        grid = torch.from_numpy(RATE_GRID)
        rates = direction_rates(grid, lr, beta).numpy()
        gd_rates = direction_rates(grid, lr, 0.0).numpy()
        dots = direction_rates(torch.tensor(RATE_CURVATURES, dtype=torch.float64), lr, beta).numpy()
        root = beta**0.5
        band = ((1 - root) ** 2 / lr, (1 + root) ** 2 / lr) if beta > 0 else None
        return {"grid": RATE_GRID, "rates": rates, "gd_rates": gd_rates, "dots": dots, "band": band,
                "worst": float(dots.max()), "lr": lr, "beta": beta}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        band = ax.axvspan(0, 1, color="tab:blue", alpha=0.12, linewidth=0)
        gd_line, = ax.plot([], [], "--", color="0.45", linewidth=1.3, label="gradient descent")
        line, = ax.plot([], [], "-", color="tab:red", linewidth=2, label="momentum")
        dots, = ax.plot([], [], "o", color="black", markersize=7, zorder=4)
        ax.axhline(1.0, color="0.3", linewidth=0.8)
        ax.set_xlim(RATE_GRID[0], RATE_GRID[-1])
        ax.set_ylim(0, 1.6)
        ax.set_xlabel("curvature λ")
        ax.set_ylabel("rate per step (above 1: diverges)")
        fig.legend(handles=[line, gd_line], loc="outside lower center", ncol=2)  # off the curves
        handles = {"ax": ax, "band": band, "gd": gd_line, "line": line, "dots": dots}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        handles["gd"].set_data(data["grid"], np.minimum(data["gd_rates"], 1.6))
        handles["line"].set_data(data["grid"], np.minimum(data["rates"], 1.6))
        handles["dots"].set_data(list(RATE_CURVATURES), np.minimum(data["dots"], 1.6))
        band = data["band"]
        handles["band"].set_visible(band is not None)
        if band is not None:
            low, high = band
            handles["band"].set_x(low)  # a Rectangle spanning the axes' height
            handles["band"].set_width(high - low)
        slow, steep = data["dots"]
        handles["ax"].set_title(f"α = {data['lr']:g}, β = {data['beta']:g}: "
                                f"λ=1 at {slow:.3f}, λ=20 at {steep:.3f}")
