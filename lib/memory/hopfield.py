"""Associative memory by neural dynamics: the Hopfield network.

Syllabus MEM5. A Hopfield network (Hopfield, 1982) stores patterns in its weights
and recalls one from a corrupted cue by letting its units update until nothing
changes. It is a content-addressable memory: part of the content is the address.

1. *Storage*, the Hebbian rule: for ``P`` patterns ``xi`` of ``N`` units with
   values ``+-1``, ``W = (1/N) sum_mu xi_mu xi_mu^T`` with a zero diagonal
   (:func:`hebbian_weights`).
2. *Dynamics*: unit ``i`` takes the sign of its local field ``h_i = sum_j W_ij s_j``
   (and keeps its state when ``h_i = 0``; a field within rounding error of 0
   counts as 0, so that ties are broken alike on every CPU). Asynchronously, one unit at a time
   (:func:`update_async`), or synchronously, all at once (:func:`update_sync`).
3. *Energy* ``E(s) = -1/2 s^T W s`` (:func:`energy`). Because ``W`` is symmetric
   with a zero diagonal, an asynchronous update changes it by ``-(s_i' - s_i) h_i``.
   By the tie rule a unit flips only when ``h_i != 0`` (beyond rounding error), towards
   its sign, so every flip changes the energy by ``-2 |h_i| < 0``: strictly down. The
   states give finitely many energies, so there are finitely many flips, and once every
   unit has had its turn after the last one the state is a fixed point, a local minimum.
   (A unit allowed to flip at ``h_i = 0`` would leave the energy unchanged and could flip
   forever.) Synchronous updates carry no such guarantee and can oscillate between two
   states.
4. *Capacity*: with random patterns, recall stays nearly perfect while the load
   ``P/N`` is below about 0.138 and collapses above it (Amit, Gutfreund and
   Sompolinsky, 1985). :func:`recall_experiment` measures it.

Conventions: states are float tensors of ``+-1`` with the unit axis last, ``(..., N)``;
a batch of states ``(B, N)`` is updated in parallel (each row is its own network run).

References
----------
.. [1] J. J. Hopfield. "Neural Networks and Physical Systems with Emergent
   Collective Computational Abilities". PNAS 79(8), 1982.
.. [2] D. J. Amit, H. Gutfreund, H. Sompolinsky. "Storing Infinite Numbers of
   Patterns in a Spin-Glass Model of Neural Networks". Physical Review Letters
   55(14), 1985.
.. [3] R. J. McEliece, E. C. Posner, E. R. Rodemich, S. S. Venkatesh. "The
   Capacity of the Hopfield Associative Memory". IEEE Transactions on
   Information Theory 33(4), 1987.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from lib.validation import require_int, require_number

__all__ = [
    "CAPACITY",
    "MAX_UNITS",
    "HopfieldNetwork",
    "Recall",
    "energy",
    "flip_bits",
    "hebbian_weights",
    "overlap",
    "recall_experiment",
    "update_async",
    "update_sync",
]

CAPACITY = 0.138  # critical load P/N for random patterns (Amit, Gutfreund and Sompolinsky, 1985)
MAX_UNITS = 4096  # recall_experiment's largest network: its (N, N) float64 weights take 128 MiB


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_spins(name: str, value: object, layout: str, dim: Optional[int] = None) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; found {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype holding +1 and -1; found {value.dtype}")
    if value.dim() < 1 or (dim is not None and value.dim() != dim):
        raise ValueError(f"{name} must have shape {layout}; found {tuple(value.shape)}")
    if not bool(((value == 1) | (value == -1)).all()):
        bad = value[(value != 1) & (value != -1)][0].item()
        raise ValueError(f"{name} must hold only +1 and -1; found {bad}")


def _check_weights_and_states(weights: object, states: object) -> None:
    if not isinstance(weights, Tensor) or weights.dim() != 2 or weights.shape[0] != weights.shape[1]:
        found = tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise ValueError(f"weights must be a square (N, N) tensor; found {found}")
    _require_spins("states", states, "(..., N)")
    if states.shape[-1] != weights.shape[0]:
        raise ValueError(
            f"states must have shape (..., N) with N = {weights.shape[0]} units; found {tuple(states.shape)}"
        )
    if states.dtype != weights.dtype:
        raise TypeError(f"states must have the dtype of the weights ({weights.dtype}); found {states.dtype}")


def _check_weights_states_and_order(weights: object, states: object, order: object) -> None:
    _check_weights_and_states(weights, states)
    if not isinstance(order, Tensor) or order.dim() != 1 or order.is_floating_point():
        found = f"{order.dtype} of shape {tuple(order.shape)}" if isinstance(order, Tensor) else type(order).__name__
        raise TypeError(f"order must be a 1-D integer tensor of unit indices; found {found}")
    n_units = weights.shape[0]
    if order.numel() and not (0 <= int(order.min()) and int(order.max()) < n_units):
        raise ValueError(f"order must hold unit indices in [0, {n_units}); found {order.min()}..{order.max()}")


# ---------------------------------------------------------------------------
# Storage, energy and the two update rules.
# ---------------------------------------------------------------------------


def hebbian_weights(patterns: Tensor) -> Tensor:
    r"""Store ``P`` patterns with the Hebbian rule.

    .. math:: W = \frac{1}{N} \sum_{\mu=1}^{P} \boldsymbol{\xi}_\mu \boldsymbol{\xi}_\mu^\top,
              \qquad W_{ii} = 0

    "Units that are on together are wired together": ``W_ij`` grows when units ``i``
    and ``j`` agree in a pattern and shrinks when they disagree. Keeping the diagonal,
    ``W_ii = P/N``, would add ``(P/N) s_i`` to every field ``h_i``: a pull towards the
    unit's current state. At low load it changes little (noisy cues are still
    recalled), but it grows as ``P/N`` while the crosstalk grows as ``sqrt(P/N)``, so at
    high load it freezes states, stored or not, in place. The energy argument
    (``Delta E = -Delta s_i h_i``) also needs ``W_ii = 0``.

    Parameters
    ----------
    patterns : Tensor
        Float tensor of ``+-1``, one pattern per row.

    Returns
    -------
    Tensor
        The symmetric weight matrix, with the dtype of ``patterns``.

    Shapes
    ------
    patterns : (P, N)
    output : (N, N)
    """
    _require_spins("patterns", patterns, "(P, N)", dim=2)
    n_units = patterns.shape[1]
    weights = patterns.T @ patterns / n_units  # (N, P) @ (P, N) -> (N, N): sum of outer products
    return weights.fill_diagonal_(0.0)


def energy(weights: Tensor, states: Tensor) -> Tensor:
    r"""The energy :math:`E(\mathbf{s}) = -\tfrac12 \mathbf{s}^\top W \mathbf{s}` of each state.

    Parameters
    ----------
    weights : Tensor
        Symmetric weights with a zero diagonal.
    states : Tensor
        Float ``+-1`` states with the dtype of ``weights``.

    Returns
    -------
    Tensor
        One energy per state.

    Shapes
    ------
    weights : (N, N)
    states : (..., N)
    output : (...)
    """
    _check_weights_and_states(weights, states)
    return -0.5 * ((states @ weights) * states).sum(-1)  # (...,)


def _tie_tolerance(weights: Tensor) -> Tensor:
    """Per unit, a bound on the rounding error of a field ``h_i = sum_j W_ji s_j``: ``N eps sum_j |W_ji|``.

    A field is a sum of ``N`` terms ``+-W_ji``; in any summation order its rounding
    error is at most about ``N eps sum_j |W_ji|``. A field that is exactly 0 in exact
    arithmetic (a tie, common with Hebbian weights ``k / N``) can come out as a tiny
    positive or negative number, with a sign that depends on the CPU's summation
    order. Fields within this bound count as 0, so every CPU breaks ties alike.

    Shapes
    ------
    weights : (N, N)
    output : (N,)
    """
    return weights.shape[0] * torch.finfo(weights.dtype).eps * weights.abs().sum(0)


def _sign_or_keep(fields: Tensor, states: Tensor, tolerance: Tensor | float = 0.0) -> Tensor:
    """``sign(h)``, except that a unit with ``h = 0`` keeps its state (Hopfield's threshold rule).

    ``|h| <= tolerance`` counts as ``h = 0`` (see :func:`_tie_tolerance`).
    """
    return torch.where(fields > tolerance, 1.0, torch.where(fields < -tolerance, -1.0, states)).to(states.dtype)


def update_sync(weights: Tensor, states: Tensor) -> Tensor:
    """One synchronous step: every unit takes the sign of its field at once.

    Parameters
    ----------
    weights : Tensor
        Symmetric weights.
    states : Tensor
        Float ``+-1`` states.

    Returns
    -------
    Tensor
        The new states (a new tensor).

    Shapes
    ------
    weights : (N, N)
    states : (..., N)
    output : (..., N)
    """
    _check_weights_and_states(weights, states)
    return _sign_or_keep(states @ weights, states, _tie_tolerance(weights))  # W is symmetric: s W = (W s)^T


def update_async(weights: Tensor, states: Tensor, order: Tensor) -> Tensor:
    """Update units one at a time, in ``order``; each sees the changes made before it.

    A unit whose field is 0 keeps its state; a field within rounding error of 0
    (:func:`_tie_tolerance`) counts as 0, so the result does not depend on the
    order in which the CPU sums the field.

    Parameters
    ----------
    weights : Tensor
        Symmetric weights with a zero diagonal.
    states : Tensor
        Float ``+-1`` states; every row runs the same order independently.
    order : Tensor
        Integer unit indices, repetitions allowed (e.g. a random permutation per sweep).

    Returns
    -------
    Tensor
        The states after ``len(order)`` single-unit updates (a new tensor).

    Shapes
    ------
    weights : (N, N)
    states : (..., N)
    order : (K,)
    output : (..., N)
    """
    _check_weights_states_and_order(weights, states, order)
    states, tolerance = states.clone(), _tie_tolerance(weights).tolist()  # (N,): |h_i| below it is a tie
    for i in order.tolist():
        field = states @ weights[:, i]  # (...,): h_i = sum_j W_ji s_j with the current states
        states[..., i] = _sign_or_keep(field, states[..., i], tolerance[i])
    return states


# ---------------------------------------------------------------------------
# The network: store, then recall until a fixed point.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Recall:
    """What :meth:`HopfieldNetwork.recall` returns."""

    states: Tensor  # (..., N) the final states
    steps: int  # sweeps (asynchronous) or steps (synchronous) that were run
    converged: bool  # the last sweep or step changed nothing: a fixed point


class HopfieldNetwork:
    """A Hopfield network that stores ``patterns`` with the Hebbian rule.

    Parameters
    ----------
    patterns : Tensor
        Float ``+-1`` patterns, one per row.

    Shapes
    ------
    patterns : (P, N)
    weights : (N, N)
    """

    def __init__(self, patterns: Tensor):
        self.weights = hebbian_weights(patterns)
        self.patterns = patterns.clone()

    @property
    def n_units(self) -> int:
        return self.weights.shape[0]

    def energy(self, states: Tensor) -> Tensor:
        """:func:`energy` of ``states`` (..., N) under this network's weights."""
        return energy(self.weights, states)

    def recall(self, cue: Tensor, mode: str = "async", max_steps: int = 50,
               generator: Optional[torch.Generator] = None) -> Recall:
        """Run the dynamics from ``cue`` until a fixed point (or ``max_steps``).

        Parameters
        ----------
        cue : Tensor
            Float ``+-1`` starting states.
        mode : {"async", "sync"}
            ``"async"``: sweeps of single-unit updates, each sweep in a fresh random
            order drawn from ``generator``; ``"sync"``: all units at once.
        max_steps : int
            Largest number of sweeps or synchronous steps.
        generator : torch.Generator, optional
            Source of the asynchronous update orders.

        Returns
        -------
        Recall
            Final states, the number of sweeps or steps, and whether they converged.

        Shapes
        ------
        cue : (..., N)
        Recall.states : (..., N)
        """
        if mode not in ("async", "sync"):
            raise ValueError(f"mode must be 'async' or 'sync'; found {mode!r}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1; found {max_steps!r}")
        states = cue
        for step in range(1, max_steps + 1):
            if mode == "async":
                order = torch.randperm(self.n_units, generator=generator)
                new = update_async(self.weights, states, order)
            else:
                new = update_sync(self.weights, states)
            if torch.equal(new, states):
                return Recall(new, step, converged=True)
            states = new
        return Recall(states, max_steps, converged=False)


def flip_bits(patterns: Tensor, fraction: float, generator: Optional[torch.Generator] = None) -> Tensor:
    """A noisy copy of each pattern with exactly ``round(fraction * N)`` units flipped.

    Parameters
    ----------
    patterns : Tensor
        Float ``+-1`` patterns.
    fraction : float
        Share of units to flip, in ``[0, 1]``.
    generator : torch.Generator, optional
        Source of the flipped positions (different ones in every row).

    Returns
    -------
    Tensor
        The corrupted patterns (a new tensor).

    Shapes
    ------
    patterns : (B, N)
    output : (B, N)
    """
    _require_spins("patterns", patterns, "(B, N)", dim=2)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1]; found {fraction}")
    batch, n_units = patterns.shape
    n_flips = round(fraction * n_units)
    ranks = torch.rand(batch, n_units, generator=generator).argsort(dim=-1)  # (B, N): a random permutation per row
    flip = torch.zeros(batch, n_units, dtype=torch.bool).scatter_(1, ranks[:, :n_flips], True)  # (B, N)
    return torch.where(flip, -patterns, patterns)


def overlap(states: Tensor, patterns: Tensor) -> Tensor:
    r"""The overlap :math:`m = \frac1N \boldsymbol{\xi}^\top \mathbf{s}`: 1 for a perfect recall, -1 for the inverse.

    Shapes
    ------
    states, patterns : (..., N), broadcastable
    output : (...)
    """
    _require_spins("states", states, "(..., N)"), _require_spins("patterns", patterns, "(..., N)")
    if states.shape[-1] != patterns.shape[-1]:
        raise ValueError(f"states and patterns must have the same number N of units (last axis); "
                         f"found {tuple(states.shape)} and {tuple(patterns.shape)}")
    return (states * patterns).mean(-1)


def recall_experiment(n_units: int, n_patterns: int, noise: float, trials: int = 1,
                      seed: int = 0, max_steps: int = 30) -> dict[str, float]:
    """Store random patterns, cue every one with noise, and measure the recall.

    ``trials`` independent networks are built, each with ``n_patterns`` random
    patterns of ``n_units`` units; every stored pattern is cued with ``noise``
    of its units flipped and the network runs asynchronously to a fixed point.

    Parameters
    ----------
    n_units, n_patterns : int
        ``N`` and ``P``; the load is ``P / N``.
    noise : float
        Share of flipped units in each cue.
    trials : int
        Number of independent networks.
    seed : int
        Seeds patterns, noise and update orders: the result is deterministic.
    max_steps : int
        Largest number of asynchronous sweeps.

    Returns
    -------
    dict
        ``exact``: share of cues recalled without a single wrong unit;
        ``overlap``: mean final overlap with the cued pattern;
        ``load``: ``P / N``.
    """
    require_int("n_units", n_units, 1, MAX_UNITS), require_int("n_patterns", n_patterns, 1)
    require_int("trials", trials, 1, MAX_UNITS), require_number("noise", noise, 0.0, 1.0)
    require_int("seed", seed, 0), require_int("max_steps", max_steps, 0)
    generator = torch.Generator().manual_seed(seed)
    exact, overlaps = [], []
    for _ in range(trials):
        patterns = torch.randint(0, 2, (n_patterns, n_units), generator=generator).double() * 2 - 1  # (P, N)
        network = HopfieldNetwork(patterns)
        cues = flip_bits(patterns, noise, generator)  # (P, N): every pattern cued once
        final = network.recall(cues, max_steps=max_steps, generator=generator).states
        exact.append((final == patterns).all(-1).double())
        overlaps.append((final * patterns).sum(-1))  # (P,): N times the overlap, an integer
    # Integer sums divided once: the means are the same double on every CPU, whatever its summation order.
    cues = trials * n_patterns
    return {
        "exact": float(torch.cat(exact).sum()) / cues,
        "overlap": float(torch.cat(overlaps).sum()) / (cues * n_units),
        "load": n_patterns / n_units,
    }
