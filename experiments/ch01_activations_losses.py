"""Chapter 1's experiments: activations through depth, and units that die in training.

* :func:`gradient_sweep`: the weight gradients of a 20-layer network with sigmoid, tanh
  and ReLU (LeCun and He initialisation) over several seeds, the vanishing gradient of
  Glorot and Bengio (2010) and the initialisation of He et al. (2015).
* :func:`dying_units`: a small regression network trained with a moderate and a large
  learning rate, with biases shifted down, and with Leaky ReLU (Maas et al., 2013),
  counting the ReLU units that are dead on every point (the dying ReLU).
* :func:`selu_sweep`: the mean and variance of the activations through 20 layers of
  SELU, tanh and ReLU, the self-normalisation of Klambauer et al. (2017).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from experiments.findings import Finding, Result
from lib.part1_blocks.activations import ACTIVATIONS, dead_units, layer_statistics
from lib.part1_blocks.optim import SGD, fit

# the rows of the gradient table: activation and weight-variance gain (He: 2 for ReLU)
GRADIENT_ROWS = {
    "sigmoid": ("sigmoid", 1.0),
    "tanh": ("tanh", 1.0),
    "relu": ("relu", 1.0),
    "relu (He)": ("relu", 2.0),
}


def _within(values, factor):
    return max(values) <= factor * min(values)


def _same_shape(lecun, he):
    """One common factor (to 1e-9) turns every layer's He gradient into its LeCun
    one."""
    ratio = lecun[0] / he[0]
    return all(abs(a / b - ratio) <= 1e-9 * ratio for a, b in zip(lecun, he))


@dataclass
class GradientSweep(Result):
    seeds: tuple[int, ...]
    # row of GRADIENT_ROWS -> (seeds, layers)
    norms: dict[str, list[list[float]]]

    def orders(self) -> list[float]:
        """Per seed: orders of magnitude from the sigmoid's first-layer gradient to
        its last."""
        return [math.log10(n[-1] / n[0]) for n in self.norms["sigmoid"]]

    FINDINGS = (
        Finding(
            "The sigmoid's last-layer gradient is about 13 orders of magnitude larger "
            "than its first layer's (seed 0's value, to within one order), for each of "
            "5 seeds.",
            backs=("vanishing-read", "summary"),
            holds=lambda r: len(r.seeds) == 5
            and all(abs(o - round(r.orders()[0])) <= 1 for o in r.orders()),
        ),
        Finding(
            "Tanh's layer gradients stay within a factor 6 of each other, for each of "
            "5 seeds.",
            backs=("vanishing-read",),
            holds=lambda r: len(r.seeds) == 5
            and all(_within(n, 6) for n in r.norms["tanh"]),
        ),
        Finding(
            "ReLU's gradients with LeCun weights are below 1e-4 in every layer, for "
            "each of 5 seeds.",
            backs=("vanishing-read",),
            holds=lambda r: len(r.seeds) == 5
            and all(max(n) < 1e-4 for n in r.norms["relu"]),
        ),
        Finding(
            "With He initialisation every layer's gradient is within a factor 12 of "
            "every other's, for each of 5 seeds.",
            backs=("vanishing-read",),
            holds=lambda r: len(r.seeds) == 5
            and all(_within(n, 12) for n in r.norms["relu (He)"]),
        ),
        Finding(
            "The two ReLU rows have the same shape: one common factor (to 1e-9) turns "
            "every layer's He gradient into its LeCun gradient, for each of 5 seeds.",
            backs=("vanishing-read",),
            holds=lambda r: len(r.seeds) == 5
            and all(map(_same_shape, r.norms["relu"], r.norms["relu (He)"])),
        ),
    )


def _layer_gradient_norms(activation, depth, width, seed, gain):
    """Each layer's weight-gradient norm after back-propagating the mean squared output
    of a batch of 256 inputs through ``depth`` layers of random weights."""
    generator = torch.Generator().manual_seed(seed)
    h = torch.randn(256, width, generator=generator, dtype=torch.float64)
    weights = [
        (
            torch.randn(width, width, generator=generator, dtype=torch.float64)
            / math.sqrt(width / gain)  # variance gain / width
        ).requires_grad_()
        for _ in range(depth)
    ]
    for w in weights:
        h = ACTIVATIONS[activation](h @ w)
    h.pow(2).mean().backward()
    return [w.grad.norm().item() for w in weights]


def gradient_sweep(seeds=range(5), depth=20, width=64) -> GradientSweep:
    """_layer_gradient_norms of each row of GRADIENT_ROWS from each seed."""
    norms = {
        row: [
            _layer_gradient_norms(activation, depth, width, seed, gain)
            for seed in seeds
        ]
        for row, (activation, gain) in GRADIENT_ROWS.items()
    }
    return GradientSweep(tuple(seeds), norms)


# the runs of the dying-unit table: activation, learning rate, bias shift
MODERATE, LARGE, SHIFTED, LEAKY = DYING_RUNS = (
    "ReLU, lr 0.05",
    "ReLU, lr 0.3",
    "ReLU, bias shift -1",
    "LeakyReLU, lr 0.3",
)
_RUN_SETTINGS = {
    MODERATE: (nn.ReLU, 0.05, 0.0),
    LARGE: (nn.ReLU, 0.3, 0.0),
    SHIFTED: (nn.ReLU, 0.05, 1.0),
    LEAKY: (nn.LeakyReLU, 0.3, 0.0),
}


def _regression_data():
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(512, 2, generator=generator)
    return inputs, torch.sin(2 * inputs[:, :1]) + inputs[:, 1:] ** 2  # (512, 1)


def _regression_net(activation, seed, bias_shift=0.0):
    torch.manual_seed(seed)  # the initial weights of this seed
    net = nn.Sequential(
        nn.Linear(2, 64),
        activation(),
        nn.Linear(64, 64),
        activation(),
        nn.Linear(64, 1),
    )
    with torch.no_grad():
        net[0].bias -= bias_shift
        net[2].bias -= bias_shift
    return net


def _dead_masks(net, inputs):
    """Which units of each hidden layer are dead on every input: (64,), (64,)."""
    with torch.no_grad():
        h1 = net[1](net[0](inputs))
        h2 = net[3](net[2](h1))
    return dead_units(h1), dead_units(h2)


def _train(net, lr, inputs, targets, seed, steps=200):
    """The losses on the whole set at steps 0 and ``steps``."""
    return fit(
        net,
        SGD(net.parameters(), lr=lr),
        inputs,
        targets,
        F.mse_loss,
        steps=steps,
        batch_size=64,
        generator=torch.Generator().manual_seed(seed + 1),
        loss_every=steps,
    )


def _large_lr_runs_hold(r):
    """Every lr 0.3 run that does not diverge: at least half of layer 2 dead, more of
    layer 1 than with lr 0.05, and a final loss at least 5 times lr 0.05's."""
    return all(
        not math.isfinite(r.final_loss[LARGE][k])
        or (
            r.dead[LARGE, "after", 1][k] >= 0.5
            and r.dead[LARGE, "after", 0][k] > r.dead[MODERATE, "after", 0][k]
            and r.final_loss[LARGE][k] >= 5 * r.final_loss[MODERATE][k]
        )
        for k in range(len(r.seeds))
    )


@dataclass
class DyingUnits(Result):
    seeds: tuple[int, ...]
    # (run, before/after, layer) -> (seeds,)
    dead: dict[tuple[str, str, int], list[float]]
    # run -> (seeds,) layer-1 units dead before, alive after
    revived: dict[str, list[int]]
    first_loss: dict[str, list[float]]  # run -> (seeds,)
    final_loss: dict[str, list[float]]  # run -> (seeds,)
    # (30,) ReLU at lr 0.3 from seeds 0 to 29: NaN or infinite loss
    diverging: list[bool]

    def leaky_below(self) -> int:
        """Seeds where Leaky ReLU's final loss is at most half of ReLU's at lr 0.3."""
        pairs = zip(self.final_loss[LEAKY], self.final_loss[LARGE])
        return sum(math.isfinite(lk + rl) and lk <= 0.5 * rl for lk, rl in pairs)

    FINDINGS = (
        Finding(
            "With lr 0.05 at most 10% of the first layer and 25% of the second are "
            "dead after training, and the loss falls at least tenfold, for every seed.",
            backs=("dying-read",),
            holds=lambda r: max(r.dead[MODERATE, "after", 0]) <= 0.10
            and max(r.dead[MODERATE, "after", 1]) <= 0.25
            and all(
                final <= 0.1 * first
                for first, final in zip(r.first_loss[MODERATE], r.final_loss[MODERATE])
            ),
        ),
        Finding(
            "With lr 0.05 more of the second layer is dead after training than before, "
            "for every seed.",
            backs=("dying-read",),
            holds=lambda r: all(
                a > b
                for a, b in zip(
                    r.dead[MODERATE, "after", 1], r.dead[MODERATE, "before", 1]
                )
            ),
        ),
        Finding(
            "With lr 0.3, every run that does not diverge loses at least half of the "
            "second layer and more of the first layer than with lr 0.05, and its loss "
            "ends at least 5 times above lr 0.05's.",
            backs=("dying-read", "summary"),
            holds=_large_lr_runs_hold,
        ),
        Finding(
            "Shifting the biases kills at least 90% of the second layer before "
            "training, at least 80% is still dead after it, and no dead first-layer "
            "unit comes back, for every seed.",
            backs=("dying-read",),
            holds=lambda r: min(r.dead[SHIFTED, "before", 1]) >= 0.9
            and min(r.dead[SHIFTED, "after", 1]) >= 0.8
            and not any(r.revived[SHIFTED]),
        ),
        Finding(
            "No Leaky ReLU unit is ever dead, and at lr 0.3 its loss ends at most half "
            "of ReLU's for at least two of the three seeds (neither run diverging).",
            backs=("dying-read",),
            holds=lambda r: len(r.seeds) == 3
            and max(
                max(r.dead[LEAKY, when, layer])
                for when in ("before", "after")
                for layer in (0, 1)
            )
            == 0
            and r.leaky_below() >= 2,
        ),
        Finding(
            "A learning rate of 0.3 is close to making the loss diverge: at least one "
            "of 30 ReLU seeds ends with a NaN or infinite loss.",
            backs=("dying-read",),
            holds=lambda r: len(r.diverging) == 30 and sum(r.diverging) >= 1,
        ),
    )


def dying_units(seeds=(0, 1, 2), divergence_seeds=30, steps=200) -> DyingUnits:
    """Train a 2 -> 64 -> 64 -> 1 network for ``steps`` steps of SGD in each run of
    DYING_RUNS from each seed; count its dead units before and after, then train ReLU at
    lr 0.3 from ``divergence_seeds`` seeds to see how many diverge."""
    inputs, targets = _regression_data()
    dead, revived, first_loss, final_loss = {}, {}, {}, {}
    for run, (activation, lr, shift) in _RUN_SETTINGS.items():
        for seed in seeds:
            net = _regression_net(activation, seed, shift)
            before = _dead_masks(net, inputs)
            losses = _train(net, lr, inputs, targets, seed, steps)
            after = _dead_masks(net, inputs)
            for when, masks in (("before", before), ("after", after)):
                for layer in (0, 1):
                    fraction = masks[layer].float().mean().item()
                    dead.setdefault((run, when, layer), []).append(fraction)
            revived.setdefault(run, []).append(int((before[0] & ~after[0]).sum()))
            first_loss.setdefault(run, []).append(losses[0])
            final_loss.setdefault(run, []).append(losses[-1])
    diverging = []
    for seed in range(divergence_seeds):
        if seed in seeds:  # trained above
            loss = final_loss[LARGE][seeds.index(seed)]
        else:
            net = _regression_net(nn.ReLU, seed)
            loss = _train(net, 0.3, inputs, targets, seed, steps)[-1]
        diverging.append(not math.isfinite(loss))
    return DyingUnits(tuple(seeds), dead, revived, first_loss, final_loss, diverging)


SELU_ROWS = ("selu", "tanh", "relu")


def _falls_at_every_layer(stats):
    return bool((stats[1:, 1] < stats[:-1, 1]).all())


@dataclass
class SeluSweep(Result):
    seeds: tuple[int, ...]
    # activation -> (seeds,) of (layers, 2): mean, var
    stats: dict[str, list[torch.Tensor]]

    FINDINGS = (
        Finding(
            "SELU keeps every layer's mean within 0.05 of 0 and its variance within "
            "10% of 1 through all 20 layers, for each of 3 seeds.",
            backs=("selu-read", "summary"),
            holds=lambda r: len(r.seeds) == 3
            and all(
                s[:, 0].abs().max() <= 0.05 and (s[:, 1] - 1).abs().max() <= 0.1
                for s in r.stats["selu"]
            ),
        ),
        Finding(
            "Tanh keeps the mean within 0.01 of 0, its variance falls at every layer "
            "and ends below 0.05, for each of 3 seeds.",
            backs=("selu-read",),
            holds=lambda r: len(r.seeds) == 3
            and all(
                s[:, 0].abs().max() <= 0.01
                and _falls_at_every_layer(s)
                and s[-1, 1] < 0.05
                for s in r.stats["tanh"]
            ),
        ),
        Finding(
            "ReLU's variance falls at every layer and collapses below 1e-3 by layer "
            "20, for each of 3 seeds.",
            backs=("selu-read",),
            holds=lambda r: len(r.seeds) == 3
            and all(
                _falls_at_every_layer(s) and s[-1, 1] < 1e-3 for s in r.stats["relu"]
            ),
        ),
    )


def selu_sweep(seeds=(0, 1, 2), depth=20, width=256, batch=1024) -> SeluSweep:
    """layer_statistics of SELU, tanh and ReLU networks (LeCun-normal weights, no bias)
    from each seed, in float64."""
    stats = {
        name: [
            layer_statistics(
                ACTIVATIONS[name],
                depth=depth,
                width=width,
                batch=batch,
                generator=torch.Generator().manual_seed(seed),
                dtype=torch.float64,
            )
            for seed in seeds
        ]
        for name in SELU_ROWS
    }
    return SeluSweep(tuple(seeds), stats)
