"""Interactive figures of chapter 2 (optimisers).

The visual runs the optimisers of :mod:`lib.optim` on a 2-D surface at every
update (a few hundred steps take a few tens of milliseconds); ``compute`` is
tested in ``tests/test_widgets_optim.py``.
"""
from __future__ import annotations

import numpy as np
import torch

from lib.optim import SGD, SURFACES, Adam, RMSprop, trajectory
from lib.widgets.core import Choice, Slider, Visual

OPTIMIZER_NAMES = ("momentum", "Nesterov", "RMSProp", "Adam")

# A learning rate per surface and optimiser that converges at β = 0.9; the slider
# multiplies it. Adaptive methods take steps of about lr whatever the gradient, so
# their scale differs from plain gradient descent's by orders of magnitude.
BASE_LR = {
    ("quadratic", "momentum"): 0.02, ("quadratic", "Nesterov"): 0.02,
    ("quadratic", "RMSProp"): 0.1, ("quadratic", "Adam"): 0.1,
    ("rosenbrock", "momentum"): 1e-3, ("rosenbrock", "Nesterov"): 1e-3,
    ("rosenbrock", "RMSProp"): 0.01, ("rosenbrock", "Adam"): 0.1,
}
STEPS = {"quadratic": 100, "rosenbrock": 500}


def optimizer_settings(name: str, lr: float, beta: float) -> tuple[type, dict]:
    """The class and arguments behind one drop-down entry, with ``β`` in its role.

    ``momentum`` and ``Nesterov``: :class:`lib.optim.SGD` with ``momentum = β``
    (``β = 0`` is plain gradient descent). ``RMSProp``: ``alpha = β``, the decay of
    the squared-gradient average. ``Adam``: ``β₁ = β``, ``β₂ = 0.999``.
    """
    if name == "momentum":
        return SGD, dict(lr=lr, momentum=beta)
    if name == "Nesterov":
        return SGD, dict(lr=lr, momentum=beta, nesterov=beta > 0)
    if name == "RMSProp":
        return RMSprop, dict(lr=lr, alpha=beta)
    if name == "Adam":
        return Adam, dict(lr=lr, betas=(beta, 0.999))
    raise ValueError(f"name must be one of {OPTIMIZER_NAMES}; found {name!r}")


class TrajectoryExplorer(Visual):
    """The path of one optimiser on a 2-D surface, for a learning rate and a β.

    The shading shows the loss on a log scale (darker is lower); the star is the
    minimum, the cross the start. A run that overflows is cut and reported as diverged.
    """

    title = "Optimiser trajectories"
    figsize = (4.8, 4.8)
    controls = (
        Choice("surface", tuple(SURFACES), default="rosenbrock", label="surface"),
        Choice("optimizer", OPTIMIZER_NAMES, default="momentum", label="optimiser"),
        Slider("lr_scale", (0.25, 0.5, 1, 2, 4), default=1, label="learning rate × base"),
        Slider("beta", (0.0, 0.5, 0.8, 0.9, 0.95, 0.99), default=0.9, label="β"),
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

    def compute(self, surface="rosenbrock", optimizer="momentum", lr_scale=1, beta=0.9):
        """Run the optimiser and summarise the run.

        Returns
        -------
        dict
            ``path``: float array ``(n, 2)`` of visited points (``n <= steps + 1``);
            ``lr``; ``steps``; ``diverged``; ``final_loss`` and ``distance`` (to the
            minimum) at the last finite point; ``surface``, ``optimizer``, ``beta``.
        """
        spec = SURFACES[surface]
        lr = BASE_LR[surface, optimizer] * lr_scale
        steps = STEPS[surface]
        cls, hyper = optimizer_settings(optimizer, lr, beta)
        path = trajectory(cls, spec, steps, **hyper)  # (n, 2)
        last = path[-1]
        return {
            "path": path.numpy(), "lr": lr, "steps": steps, "diverged": len(path) < steps + 1,
            "final_loss": float(spec.f(last)),
            "distance": float(torch.linalg.vector_norm(last - torch.tensor(spec.minimum, dtype=last.dtype))),
            "surface": surface, "optimizer": optimizer, "beta": beta,
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        contours = {}
        for name, (gx, gy, values) in self.grids.items():
            # Filled bands of log loss: cheaper to draw and to compress than contour lines.
            contours[name] = ax.contourf(gx, gy, np.log10(values + 1e-3), levels=12, cmap="Blues_r", alpha=0.6)
        minimum, = ax.plot([], [], "*", color="gold", markeredgecolor="black", markersize=12, zorder=4)
        start, = ax.plot([], [], "x", color="black", markersize=7, zorder=4)
        line, = ax.plot([], [], "-o", color="tab:red", markersize=2, linewidth=1, zorder=3)
        ax.set_xlabel("$w_1$")
        ax.set_ylabel("$w_2$")
        handles = {"ax": ax, "contours": contours, "minimum": minimum, "start": start, "line": line}
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
        path = data["path"]
        handles["line"].set_data(path[:, 0], path[:, 1])
        if data["diverged"]:
            summary = f"diverged after {len(path) - 1} steps\n "
        else:
            summary = (f"after {data['steps']} steps: loss {data['final_loss']:.2e},\n"
                       f"distance to the minimum {data['distance']:.3f}")
        # The summary is part of the title: a box inside the axes covered the path.
        ax.set_title(f"{data['optimizer']}: lr = {data['lr']:g}, $\\beta$ = {data['beta']:g}\n{summary}")
