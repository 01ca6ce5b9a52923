"""Chapter 2's experiments: the optimisers at work, each run over three seeds or starts.

* :func:`gradient_descent_variants` — batch, mini-batch and single-example gradient
  descent on two Gaussian clouds (the variants of Robbins & Monro's stochastic
  approximation [1]);
* :func:`surface_race` — eight optimisers on an ill-conditioned quadratic and on
  Rosenbrock's valley [2];
* :func:`spiral_race` — nine optimisers training :func:`spiral_net` on three spirals;
* :func:`generalisation_strategies` — Adam, SGD with momentum, and Adam then SGD, on a
  train and a test set of spirals: the comparison of Wilson et al. [3] and the switch of
  Keskar & Socher [4] at a small scale;
* :func:`schedule_race` — the excess loss of mini-batch SGD under step decay, cosine
  annealing [5] and warm-up + cosine [6], against constant rates.

References
----------
.. [1] H. Robbins, S. Monro. "A Stochastic Approximation Method". The Annals of
   Mathematical Statistics 22, 1951.
.. [2] H. H. Rosenbrock. "An Automatic Method for Finding the Greatest or Least Value of
   a Function". The Computer Journal 3, 1960.
.. [3] A. C. Wilson, R. Roelofs, M. Stern, N. Srebro, B. Recht. "The Marginal Value of
   Adaptive Gradient Methods in Machine Learning". NeurIPS 2017.
.. [4] N. S. Keskar, R. Socher. "Improving Generalization Performance by Switching from
   Adam to SGD". arXiv:1712.07628, 2017.
.. [5] I. Loshchilov, F. Hutter. "SGDR: Stochastic Gradient Descent with Warm
   Restarts". ICLR 2017.
.. [6] P. Goyal et al. "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour".
   arXiv:1706.02677, 2017.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim.lr_scheduler import LambdaLR

from experiments.findings import Finding, Result
from lib.part1_blocks.optim import (
    SGD,
    SURFACES,
    Adadelta,
    Adagrad,
    Adam,
    AdamW,
    NAdam,
    RMSprop,
    fit,
    spirals,
    trajectory,
)

SEEDS = (0, 1, 2)

# ---------------------------------------------------------------------------
# Batch, mini-batch and single-example gradient descent
# ---------------------------------------------------------------------------

POINTS = 512  # two Gaussian clouds of 256 points each
BATCHES = {None: 0.5, 32: 0.5, 1: 0.05}  # batch size (None: all 512 points) -> lr


def _per_epoch(batch_size: int | None) -> int:
    """Updates per pass over the points."""
    return 1 if batch_size is None else POINTS // batch_size


@dataclass
class GradientDescentVariants(Result):
    # (batch size, seed) -> full-data loss before training and after each epoch
    epoch_losses: dict[tuple[int | None, int], list[float]]
    # (batch size, seed) -> full-data loss every 16 steps (at most) of the last epoch
    last_epoch: dict[tuple[int | None, int], list[float]]
    seeds: tuple[int, ...]
    epochs: int

    def updates(self, batch_size: int | None) -> int:
        """How many updates the run made with ``batch_size`` (None: all the points)."""
        return self.epochs * _per_epoch(batch_size)

    @property
    def single_example_rises(self) -> list[int]:
        """Per seed: how often the loss goes up again in single examples' last epoch."""
        return [
            sum(b > a for a, b in zip(curve, curve[1:]))
            for curve in (self.last_epoch[1, seed] for seed in self.seeds)
        ]

    FINDINGS = (
        Finding(
            "After 3 epochs, full-batch descent's loss is still above the loss of "
            "mini-batches of 32 after one epoch, for every seed.",
            backs=("gd-variants-read",),
            holds=lambda r: all(
                r.epoch_losses[None, s][3] > r.epoch_losses[32, s][1] for s in r.seeds
            ),
        ),
        Finding(
            "Mini-batches of 32 make at least 90% of their 3 epochs' progress in the "
            "first epoch, for every seed.",
            backs=("gd-variants-read",),
            holds=lambda r: all(
                loss[0] - loss[1] >= 0.9 * (loss[0] - loss[3])
                for loss in (r.epoch_losses[32, s] for s in r.seeds)
            ),
        ),
        Finding(
            "With single examples the loss goes up again at least 5 times in the last "
            "epoch (32 measurements), for every seed.",
            backs=("gd-variants-read",),
            holds=lambda r: min(r.single_example_rises) >= 5
            and all(len(r.last_epoch[1, s]) == 33 for s in r.seeds),
        ),
    )


def gradient_descent_variants(seeds=SEEDS, epochs=3) -> GradientDescentVariants:
    """A linear classifier on two Gaussian clouds of 256 points each, trained by
    gradient descent on all the data, on mini-batches of 32 and on single examples."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.cat([torch.zeros(256), torch.ones(256)]).long()
    # (512, 2)
    points = torch.randn(512, 2, generator=generator) + 1.5 * (2 * labels[:, None] - 1)
    epoch_losses, last_epoch = {}, {}
    for batch_size, lr in BATCHES.items():
        per_epoch = _per_epoch(batch_size)
        every = min(per_epoch, 16)  # compute the full-data loss every 16 steps at most
        for seed in seeds:
            torch.manual_seed(seed)
            model = nn.Linear(2, 2)
            losses = fit(
                model,
                SGD(model.parameters(), lr=lr),
                points,
                labels,
                F.cross_entropy,
                steps=epochs * per_epoch,
                batch_size=batch_size,
                generator=torch.Generator().manual_seed(seed + 1),
                loss_every=every,
            )
            epoch_losses[batch_size, seed] = losses[:: per_epoch // every]
            last_epoch[batch_size, seed] = losses[-(per_epoch // every) - 1 :]
    return GradientDescentVariants(epoch_losses, last_epoch, tuple(seeds), epochs)


# ---------------------------------------------------------------------------
# Trajectories on the two surfaces
# ---------------------------------------------------------------------------

# optimiser -> (class, settings, (lr on the quadratic, lr on Rosenbrock)), tuned by hand
ON_SURFACES = {
    "GD": (SGD, {}, (0.09, 1e-3)),
    "momentum": (SGD, dict(momentum=0.9), (0.02, 1e-3)),
    "Nesterov": (SGD, dict(momentum=0.9, nesterov=True), (0.02, 1e-3)),
    "AdaGrad": (Adagrad, {}, (1.0, 0.5)),
    "RMSProp": (RMSprop, dict(alpha=0.9), (0.1, 0.01)),
    "AdaDelta": (Adadelta, {}, (1.0, 1.0)),
    "Adam": (Adam, {}, (0.3, 0.1)),
    "NAdam": (NAdam, {}, (0.3, 0.1)),
}
STEPS = {"quadratic": 100, "rosenbrock": 500}
ADAPTIVE = ("AdaGrad", "RMSProp", "Adam", "NAdam")
SWINGING = ("RMSProp", "Adam")  # at a constant rate, still circling the minimum


def _starts(surface) -> list[Tensor]:
    """The usual start, then two random points around it."""
    classic = torch.tensor(surface.start, dtype=torch.float64)
    offsets = [
        torch.randn(
            2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
        )
        for seed in (1, 2)
    ]
    return [classic] + [classic + 0.1 * offset for offset in offsets]


def _detour(path: Tensor, minimum: Tensor, radius=0.5) -> float:
    """The length of the path until it first comes within `radius` of the minimum, over
    the straight line from the start to that point: 1 for a straight path."""
    reached = int(((path - minimum).norm(dim=1) < radius).nonzero()[0])
    length = (path[1 : reached + 1] - path[:reached]).norm(dim=1).sum()
    return float(length / (path[reached] - path[0]).norm())


def _rises(path: Tensor, minimum: Tensor, last=20) -> int:
    """How often the distance to the minimum grows again over the last steps."""
    distance = (path - minimum).norm(dim=1)[-last - 1 :]
    return int((distance[1:] > distance[:-1]).sum())


_ORIGIN = torch.tensor(SURFACES["quadratic"].minimum, dtype=torch.float64)


@dataclass
class SurfaceRace(Result):
    # (surface, optimiser) -> one (steps + 1, 2) path per start
    paths: dict[tuple[str, str], list[Tensor]]
    # (surface, optimiser) -> final distance to the minimum, per start
    distances: dict[tuple[str, str], list[float]]

    @property
    def detours(self) -> dict[str, list[float]]:
        """On the quadratic, per start: path length over the straight line, until within
        0.5 of the minimum (AdaDelta never gets there)."""
        return {
            name: [_detour(path, _ORIGIN) for path in self.paths["quadratic", name]]
            for name in ("GD", *ADAPTIVE)
        }

    def quadratic(self, name: str) -> list[float]:
        return self.distances["quadratic", name]

    def rosenbrock(self, name: str) -> list[float]:
        return self.distances["rosenbrock", name]

    FINDINGS = (
        Finding(
            "On the quadratic, gradient descent ends within 1e-3 of the minimum from "
            "every start.",
            backs=("surfaces-read",),
            holds=lambda r: max(r.quadratic("GD")) < 1e-3,
        ),
        Finding(
            "On the quadratic, momentum swings past the minimum in both coordinates, "
            "by more than 20% of the start's distance in that coordinate, from every "
            "start.",
            backs=("surfaces-read",),
            holds=lambda r: all(
                path[:, 0].max() > 0.2 * abs(path[0, 0])
                and path[:, 1].min() < -0.2 * abs(path[0, 1])
                for path in r.paths["quadratic", "momentum"]
            ),
        ),
        Finding(
            "On the quadratic, AdaGrad, RMSProp, Adam and NAdam head almost straight "
            "for the minimum: until they first come within 0.5 of it, each path is at "
            "most 1.25 times the straight line it covers, while gradient descent's is "
            "at least 2 times it, from every start.",
            backs=("surfaces-read",),
            holds=lambda r: max(max(r.detours[name]) for name in ADAPTIVE) <= 1.25
            and min(r.detours["GD"]) >= 2,
        ),
        Finding(
            "On the quadratic, RMSProp and Adam are still swinging around the minimum "
            "after 100 steps: their distance to it grows again at least 3 times in the "
            "last 20 steps, and they end at least 20 times farther from it than "
            "gradient descent, from every start.",
            backs=("surfaces-read",),
            holds=lambda r: all(
                _rises(path, _ORIGIN) >= 3 and len(path) == 101
                for name in SWINGING
                for path in r.paths["quadratic", name]
            )
            and all(
                mine >= 20 * descent
                for name in SWINGING
                for mine, descent in zip(r.quadratic(name), r.quadratic("GD"))
            ),
        ),
        Finding(
            "On the quadratic, AdaGrad ends closest to the minimum from every start.",
            backs=("surfaces-read",),
            holds=lambda r: all(
                r.quadratic("AdaGrad")[k]
                == min(r.quadratic(name)[k] for name in ON_SURFACES)
                for k in range(len(r.quadratic("AdaGrad")))
            ),
        ),
        Finding(
            "On the quadratic, RMSProp (α = 0.1) ends between α/10 and α from the "
            "minimum from every start.",
            backs=("surfaces-read",),
            holds=lambda r: all(0.01 <= d <= 0.1 for d in r.quadratic("RMSProp")),
        ),
        Finding(
            "On the quadratic, AdaDelta is still at least 80% of the starting distance "
            "away after 100 steps.",
            backs=("surfaces-read",),
            holds=lambda r: all(
                d >= 0.8 * float((path[0] - _ORIGIN).norm()) and len(path) == 101
                for d, path in zip(
                    r.quadratic("AdaDelta"), r.paths["quadratic", "AdaDelta"]
                )
            ),
        ),
        Finding(
            "On Rosenbrock, gradient descent is still more than 1 from the minimum "
            "after 500 steps, from every start.",
            backs=("surfaces-read",),
            holds=lambda r: min(r.rosenbrock("GD")) > 1
            and all(len(path) == 501 for path in r.paths["rosenbrock", "GD"]),
        ),
        Finding(
            "On Rosenbrock, momentum and Nesterov end within 0.2 of the minimum, and "
            "closer than GD, AdaGrad, RMSProp and AdaDelta, from every start.",
            backs=("surfaces-read",),
            holds=lambda r: max(r.rosenbrock("momentum") + r.rosenbrock("Nesterov"))
            <= 0.2
            and all(
                max(r.rosenbrock("momentum")[k], r.rosenbrock("Nesterov")[k])
                < min(
                    r.rosenbrock(name)[k]
                    for name in ("GD", "AdaGrad", "RMSProp", "AdaDelta")
                )
                for k in range(len(r.rosenbrock("GD")))
            ),
        ),
        Finding(
            "On Rosenbrock, Adam's final distance changes at least twofold between "
            "starts.",
            backs=("surfaces-read",),
            holds=lambda r: max(r.rosenbrock("Adam")) >= 2 * min(r.rosenbrock("Adam")),
        ),
    )


def surface_race(steps=STEPS) -> SurfaceRace:
    """Each optimiser of :data:`ON_SURFACES` on both surfaces, from three starts."""
    paths, distances = {}, {}
    for name, (optimizer_class, settings, rates) in ON_SURFACES.items():
        for (surface_name, surface), lr in zip(SURFACES.items(), rates):
            paths[surface_name, name] = [
                trajectory(
                    optimizer_class,
                    surface,
                    steps[surface_name],
                    start=start,
                    lr=lr,
                    **settings,
                )
                for start in _starts(surface)
            ]
            distances[surface_name, name] = [
                float((path[-1] - torch.tensor(surface.minimum)).norm())
                for path in paths[surface_name, name]
            ]
    return SurfaceRace(paths, distances)


# ---------------------------------------------------------------------------
# A small network on three spirals
# ---------------------------------------------------------------------------


def spiral_net(seed=0) -> nn.Sequential:
    """The chapter's network: two hidden layers of 64 ReLU units, 3 classes."""
    torch.manual_seed(seed)  # the same initial weights for every optimiser
    return nn.Sequential(
        nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3)
    )


# optimiser -> (class, settings): a typical learning rate for each, picked by hand
ON_SPIRALS = {
    "SGD": (SGD, dict(lr=0.1)),
    "momentum": (SGD, dict(lr=0.1, momentum=0.9)),
    "Nesterov": (SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    "AdaGrad": (Adagrad, dict(lr=0.05)),
    "RMSProp": (RMSprop, dict(lr=3e-3)),
    "AdaDelta": (Adadelta, dict(lr=1.0)),
    "Adam": (Adam, dict(lr=3e-3)),
    "NAdam": (NAdam, dict(lr=3e-3)),
    "AdamW": (AdamW, dict(lr=3e-3, weight_decay=1e-2)),
}


@dataclass
class SpiralRace(Result):
    # (optimiser, seed) -> loss on all the points before training and every 10 steps
    curves: dict[tuple[str, int], list[float]]
    # (optimiser, seed) -> training accuracy at the end
    accuracy: dict[tuple[str, int], float]
    seeds: tuple[int, ...]

    FINDINGS = (
        Finding(
            "Plain SGD stays below 85% accuracy after 300 steps, for every seed.",
            backs=("network-read",),
            holds=lambda r: all(
                r.accuracy["SGD", s] < 0.85 and len(r.curves["SGD", s]) == 31
                for s in r.seeds
            ),
        ),
        Finding(
            "Every optimiser with momentum or an adaptive scale reaches at least 97% "
            "accuracy, for every seed.",
            backs=("network-read",),
            holds=lambda r: min(
                r.accuracy[name, s]
                for name in ON_SPIRALS
                if name != "SGD"
                for s in r.seeds
            )
            >= 0.97,
        ),
        Finding(
            "Adam and AdamW end within 0.005 in loss and 1% in accuracy of each other, "
            "for every seed.",
            backs=("network-read",),
            holds=lambda r: all(
                abs(r.curves["Adam", s][-1] - r.curves["AdamW", s][-1]) <= 0.005
                and abs(r.accuracy["Adam", s] - r.accuracy["AdamW", s]) <= 0.01
                for s in r.seeds
            ),
        ),
    )


def spiral_race(inputs, labels, seeds=SEEDS, steps=300) -> SpiralRace:
    """Each optimiser of :data:`ON_SPIRALS` trains :func:`spiral_net` on mini-batches of
    64, from the same initial weights and batches for a seed."""
    curves, accuracy = {}, {}
    for name, (optimizer_class, settings) in ON_SPIRALS.items():
        for seed in seeds:
            model = spiral_net(seed)
            curves[name, seed] = fit(
                model,
                optimizer_class(model.parameters(), **settings),
                inputs,
                labels,
                F.cross_entropy,
                steps=steps,
                batch_size=64,
                generator=torch.Generator().manual_seed(seed + 1),
                loss_every=10,
            )
            with torch.no_grad():
                predicted = model(inputs).argmax(dim=1)
                accuracy[name, seed] = (predicted == labels).float().mean().item()
    return SpiralRace(curves, accuracy, tuple(seeds))


# ---------------------------------------------------------------------------
# Adam, SGD, or Adam then SGD: test accuracy
# ---------------------------------------------------------------------------

# strategy -> its phases: (class, settings, steps), each a new optimiser over the model
STRATEGIES = {
    "Adam": [(Adam, dict(lr=3e-3), 600)],
    "SGD + momentum": [(SGD, dict(lr=0.05, momentum=0.9), 600)],
    "Adam -> SGD": [
        (Adam, dict(lr=3e-3), 300),
        (SGD, dict(lr=0.01, momentum=0.9), 300),
    ],
}


@dataclass
class GeneralisationStrategies(Result):
    # (strategy, seed) -> (train loss, test loss, test accuracy)
    results: dict[tuple[str, int], tuple[float, float, float]]
    seeds: tuple[int, ...]

    @property
    def gaps(self) -> list[float]:
        """Per seed: the best strategy's test accuracy minus the worst's."""
        return [
            max(self.results[s, seed][2] for s in STRATEGIES)
            - min(self.results[s, seed][2] for s in STRATEGIES)
            for seed in self.seeds
        ]

    FINDINGS = (
        Finding(
            "The three strategies reach at least 98% test accuracy, for every seed, so "
            "they lie within 2 points of each other.",
            backs=("generalisation",),
            holds=lambda r: min(result[2] for result in r.results.values()) >= 0.98,
        ),
    )


def generalisation_strategies(seeds=SEEDS, steps=600) -> GeneralisationStrategies:
    """Each strategy of :data:`STRATEGIES` trains :func:`spiral_net` on 300 noisy spiral
    points (mini-batches of 32) for ``steps`` steps, shared by its phases in the ratio
    of theirs, and is tested on 900 others."""
    # (300, 2)
    train_x, train_y = spirals(
        100, noise=0.3, generator=torch.Generator().manual_seed(0)
    )
    # (900, 2)
    test_x, test_y = spirals(300, noise=0.3, generator=torch.Generator().manual_seed(1))
    results = {}
    for strategy, phases in STRATEGIES.items():
        for seed in seeds:
            model, generator = spiral_net(seed), torch.Generator().manual_seed(seed + 1)
            for optimizer_class, settings, share in phases:
                length = max(1, share * steps // sum(phase[2] for phase in phases))
                fit(
                    model,
                    optimizer_class(model.parameters(), **settings),
                    train_x,
                    train_y,
                    F.cross_entropy,
                    steps=length,
                    batch_size=32,
                    generator=generator,
                    loss_every=length,
                )
            with torch.no_grad():
                train_loss = F.cross_entropy(model(train_x), train_y).item()
                test_logits = model(test_x)
                results[strategy, seed] = (
                    train_loss,
                    F.cross_entropy(test_logits, test_y).item(),
                    (test_logits.argmax(1) == test_y).float().mean().item(),
                )
    return GeneralisationStrategies(results, tuple(seeds))


# ---------------------------------------------------------------------------
# Learning-rate schedules: the excess loss of mini-batch SGD
# ---------------------------------------------------------------------------

RATES = (0.1, 0.03, 0.01, 0.003)  # the grid of constant rates; the first is the base
COSINES = ("cosine", "warm-up + cosine")
RESERVED = frozenset({"constant", "best constant"})  # schedule_race's own baselines


def _excess_loss(
    schedules: Mapping[str, Callable[[int], float]],
    seeds,
    steps: int,
    lr=0.1,
    batch_size=8,
    loss_every=10,
    n=512,
    dim=10,
    noise=0.5,
) -> dict[tuple[str, int], list[float]]:
    """The excess loss of mini-batch SGD under each schedule.

    For each seed: ``n`` points ``x`` (``dim`` normal features), ``y = x w + noise ε``
    and the least-squares optimum; then for each schedule (a ``LambdaLR`` multiplier)
    a bias-free ``nn.Linear(dim, 1)`` seeded by ``seed``, trained by :func:`fit` with
    :class:`SGD` at rate ``lr`` on batches seeded by ``seed + 10``. Returns
    ``(name, seed) ->`` the loss minus the optimum before training and after every
    ``loss_every``-th step (``steps // loss_every + 1`` values).
    """
    excess = {}
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(n, dim, generator=generator)  # (n, dim)
        y = x @ torch.randn(dim, 1, generator=generator)  # (n, 1)
        y += noise * torch.randn(n, 1, generator=generator)
        best = F.mse_loss(x @ torch.linalg.lstsq(x, y).solution, y).item()
        for name, schedule in schedules.items():
            torch.manual_seed(seed)
            model = nn.Linear(dim, 1, bias=False)
            optimizer = SGD(model.parameters(), lr=lr)
            losses = fit(
                model,
                optimizer,
                x,
                y,
                F.mse_loss,
                steps=steps,
                batch_size=batch_size,
                generator=torch.Generator().manual_seed(seed + 10),
                loss_every=loss_every,
                scheduler=LambdaLR(optimizer, schedule),
            )
            excess[name, seed] = [loss - best for loss in losses]
    return excess


@dataclass
class ScheduleRace(Result):
    # (schedule, seed) -> excess loss before training and every 10 steps; the schedules
    # are "constant" (the base rate), "best constant" and the decays
    excess: dict[tuple[str, int], list[float]]
    # constant rate of the grid -> its median excess loss at the end
    median_final: dict[float, float]
    best_rate: float  # the grid's rate of the lowest median_final
    decays: tuple[str, ...]
    seeds: tuple[int, ...]

    def final(self, name: str) -> list[float]:
        """Per seed: the excess loss of schedule ``name`` at the end."""
        return [self.excess[name, seed][-1] for seed in self.seeds]

    @property
    def gains(self) -> dict[str, list[float]]:
        """Per decay and seed: how many times less excess loss than the base rate."""
        return {
            name: [c / d for c, d in zip(self.final("constant"), self.final(name))]
            for name in self.decays
        }

    @property
    def step_gain(self) -> list[float]:
        """Per seed: how many times lower step decay ends than the tuned constant
        rate."""
        return [
            c / d for c, d in zip(self.final("best constant"), self.final("step decay"))
        ]

    @property
    def cosine_ratio(self) -> list[float]:
        """The cosine decays' excess loss over the tuned constant rate's, per seed."""
        return [
            mine / tuned
            for name in COSINES
            for mine, tuned in zip(self.final(name), self.final("best constant"))
        ]

    @property
    def decay_spread(self) -> list[float]:
        """Per seed: the worst decay's excess loss over the best decay's."""
        finals = [self.final(name) for name in self.decays]
        return [max(ends) / min(ends) for ends in zip(*finals)]

    FINDINGS = (
        Finding(
            "Every decaying schedule ends with at least 5 times less excess loss than "
            "the constant rate, for every seed.",
            backs=("schedules-read", "summary"),
            holds=lambda r: min(min(gain) for gain in r.gains.values()) >= 5,
        ),
        Finding(
            "Which decay is used matters much less than decaying at all: step decay, "
            "cosine and warm-up + cosine end within a factor 3 of one another, and "
            "each at least 3 times that factor below the constant rate, for every "
            "seed.",
            backs=("schedules-read", "summary"),
            holds=lambda r: max(r.decay_spread) <= 3
            and all(
                min(r.gains[name][k] for name in r.decays) >= 3 * r.decay_spread[k]
                for k in range(len(r.seeds))
            ),
        ),
        Finding(
            "Warm-up changes little here: warm-up + cosine ends within a factor 2 of "
            "cosine alone, for every seed.",
            backs=("schedules-read",),
            holds=lambda r: all(
                0.5 <= warm / cold <= 2
                for warm, cold in zip(r.final("warm-up + cosine"), r.final("cosine"))
            ),
        ),
        Finding(
            "The grid brackets the best constant rate: neither its largest nor its "
            "smallest rate is best.",
            backs=("schedules-experiment-text",),
            holds=lambda r: min(RATES) < r.best_rate < max(RATES),
        ),
        Finding(
            "Step decay from the base rate ends below the tuned constant rate on every "
            "seed, by a factor 1.1 at least.",
            backs=("schedules-read", "summary"),
            holds=lambda r: min(r.step_gain) >= 1.1,
        ),
        Finding(
            "Cosine and warm-up + cosine end within a factor 2.5 of the tuned constant "
            "rate on every seed, above it on some seed and below it on another.",
            backs=("schedules-read", "summary"),
            holds=lambda r: max(max(q, 1 / q) for q in r.cosine_ratio) <= 2.5
            and max(r.cosine_ratio) > 1.1
            and min(r.cosine_ratio) < 1 / 1.1,
        ),
        Finding(
            "The constant rate's excess loss is no lower after 300 steps than after "
            "150 on some seed, while every decaying schedule's is lower, for every "
            "seed.",
            backs=("schedules-read",),
            holds=lambda r: any(
                r.excess["constant", s][-1] >= r.excess["constant", s][15]
                for s in r.seeds
            )
            and all(len(r.excess["constant", s]) == 31 for s in r.seeds)
            and all(
                r.excess[name, s][-1] < r.excess[name, s][15]
                for name in r.decays
                for s in r.seeds
            ),
        ),
    )


def schedule_race(decays, seeds=SEEDS, steps=300) -> ScheduleRace:
    """Mini-batch SGD (batches of 8, base rate 0.1) on noisy linear data under each of
    ``decays`` (name -> multiplier λ(t)) and under the constant rates of :data:`RATES`;
    the best of these by the median excess loss at the end is the tuned baseline."""
    if not decays or RESERVED & set(decays):
        raise ValueError(
            f"schedule_race: decays must name at least one schedule, none of "
            f"{sorted(RESERVED)}; found {list(decays)}"
        )
    if not seeds or not all(isinstance(s, int) and s >= 0 for s in seeds):
        raise ValueError(
            f"schedule_race: seeds must be one or more integers >= 0; found {seeds!r}"
        )
    base = RATES[0]
    excess = _excess_loss({"constant": lambda t: 1.0, **decays}, seeds, steps, lr=base)
    grid = _excess_loss(
        {f"{rate:g}": lambda t, m=rate / base: m for rate in RATES[1:]},
        seeds,
        steps,
        lr=base,
    )
    grid.update({(f"{base:g}", seed): excess["constant", seed] for seed in seeds})
    median_final = {
        rate: statistics.median(grid[f"{rate:g}", seed][-1] for seed in seeds)
        for rate in RATES
    }
    best_rate = min(RATES, key=median_final.get)
    for seed in seeds:
        excess["best constant", seed] = grid[f"{best_rate:g}", seed]
    return ScheduleRace(excess, median_final, best_rate, tuple(decays), tuple(seeds))
