"""Associative memory by neural dynamics: the Hopfield network.

Syllabus MEM5. A Hopfield network (Hopfield, 1982) stores patterns in its weights
and recalls one from a corrupted cue by letting its units update until nothing
changes. It is a content-addressable memory: part of the content is the address.

1. *Storage*, the Hebbian rule: for ``P`` patterns ``xi`` of ``N`` units with
   values ``+-1``, ``W = (1/N) sum_mu xi_mu xi_mu^T`` with a zero diagonal
   (:func:`hebbian_weights`).
2. *Dynamics*: unit ``i`` takes the sign of its local field ``h_i = sum_j W_ij s_j``
   (and keeps its state when ``h_i = 0``; a field within rounding error of 0
   counts as 0, so that ties are broken alike on every CPU). Asynchronously, one
   unit at a time (:func:`update_async`), or synchronously, all at once
   (:func:`update_sync`).
3. *Energy* ``E(s) = -1/2 s^T W s`` (:func:`energy`). Because ``W`` is symmetric
   with a zero diagonal, an asynchronous update changes it by ``-(s_i' - s_i) h_i``.
   By the tie rule a unit flips only when ``h_i != 0`` (beyond rounding error),
   towards its sign, so every flip changes the energy by ``-2 |h_i| < 0``: strictly
   down. The states give finitely many energies, so there are finitely many flips,
   and once every unit has had its turn after the last one the state is a fixed
   point, a local minimum. (A unit allowed to flip at ``h_i = 0`` would leave the
   energy unchanged and could flip forever.) Synchronous updates carry no such
   guarantee and can oscillate between two states.
4. *Capacity*: with random patterns, recall stays nearly perfect while the load
   ``P/N`` is below about 0.138 and collapses above it (Amit, Gutfreund and
   Sompolinsky, 1985). Chapter 12 measures it (``experiments.ch12_memory``).

Conventions: states are float tensors of ``+-1`` with the unit axis last, ``(..., N)``
(``spins("*batch N")`` in a signature); a batch of states ``(B, N)`` is updated in
parallel (each row is its own network run).

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
from typing import Literal, Optional, no_type_check

import torch
from jaxtyping import Float
from torch import Tensor

from lib.checked import (
    Fraction,
    IntegerDtype,
    NonNegative,
    NonNegativeInt,
    PositiveInt,
    same_dtype,
    spins,
)

__all__ = [
    "CAPACITY",
    "HopfieldNetwork",
    "Recall",
    "energy",
    "flip_bits",
    "hebbian_weights",
    "overlap",
    "update_async",
    "update_sync",
]

# The critical load P/N for random patterns (Amit, Gutfreund and Sompolinsky, 1985).
CAPACITY = 0.138


# ---------------------------------------------------------------------------
# Storage, energy and the two update rules.
# ---------------------------------------------------------------------------


def hebbian_weights(patterns: spins("P N")) -> Float[Tensor, "N N"]:
    r"""Store the rows of ``patterns`` with the Hebbian rule,
    :math:`W = \frac{1}{N} \sum_\mu \boldsymbol{\xi}_\mu \boldsymbol{\xi}_\mu^\top`,
    :math:`W_{ii} = 0`."""
    if not len(patterns):
        raise ValueError(
            "patterns must hold at least one pattern (P >= 1); "
            f"found shape {tuple(patterns.shape)}"
        )
    n_units = patterns.shape[1]
    weights = patterns.T @ patterns / n_units  # (N, N): the sum of outer products
    # W_ii = P/N would pull every unit towards its current state: at high load it
    # freezes any state in place, and the energy argument needs W_ii = 0.
    return weights.fill_diagonal_(0.0)


def energy(
    weights: Float[Tensor, "N N"], states: spins("*batch N")
) -> Float[Tensor, "*batch"]:
    r"""The energy :math:`E(\mathbf{s}) = -\tfrac12 \mathbf{s}^\top W \mathbf{s}` of
    each state."""
    same_dtype(weights=weights, states=states)
    return -0.5 * ((states @ weights) * states).sum(-1)  # (*batch,)


def _tie_tolerance(weights: Float[Tensor, "N N"]) -> Float[Tensor, "N"]:
    """Per unit, a bound on the rounding error of a field ``h_i = sum_j W_ji s_j``:
    ``N eps sum_j |W_ji|``. A field that is 0 in exact arithmetic (a tie, common with
    weights ``k / N``) comes out with a sign that depends on the CPU's summation
    order; fields within this bound count as 0, so every CPU breaks ties alike."""
    return weights.shape[0] * torch.finfo(weights.dtype).eps * weights.abs().sum(0)


@no_type_check  # once per unit update: update_sync and update_async checked the states
def _sign_or_keep(
    fields: Float[Tensor, "*shape"],
    states: Float[Tensor, "*shape"],
    tolerance: Float[Tensor, "#N"] | NonNegative,
) -> Float[Tensor, "*shape"]:
    """``sign(h)``, except that a unit with ``|h| <= tolerance`` keeps its state."""
    kept = torch.where(fields < -tolerance, -1.0, states)
    return torch.where(fields > tolerance, 1.0, kept).to(states.dtype)


def update_sync(
    weights: Float[Tensor, "N N"], states: spins("*batch N")
) -> Float[Tensor, "*batch N"]:
    """One synchronous step: every unit takes the sign of its field at once."""
    same_dtype(weights=weights, states=states)
    fields = states @ weights  # (*batch, N): W is symmetric, so s W = (W s)^T
    return _sign_or_keep(fields, states, _tie_tolerance(weights))


def update_async(
    weights: Float[Tensor, "N N"],
    states: spins("*batch N"),
    order: IntegerDtype[Tensor, "K"],
) -> Float[Tensor, "*batch N"]:
    """Update the units one at a time, in ``order`` (repetitions allowed); each sees
    the changes made before it, and every row of ``states`` runs independently."""
    same_dtype(weights=weights, states=states)
    n_units = weights.shape[0]
    if order.numel() and not (0 <= int(order.min()) and int(order.max()) < n_units):
        raise ValueError(
            f"order must hold unit indices in [0, {n_units}); "
            f"found {order.min()}..{order.max()}"
        )
    states, tolerance = states.clone(), _tie_tolerance(weights).tolist()
    for i in order.tolist():
        field = states @ weights[:, i]  # (*batch,): h_i with the current states
        states[..., i] = _sign_or_keep(field, states[..., i], tolerance[i])
    return states


# ---------------------------------------------------------------------------
# The network: store, then recall until a fixed point.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Recall:
    """What :meth:`HopfieldNetwork.recall` returns."""

    states: spins("*batch N")  # the final states
    steps: NonNegativeInt  # sweeps (asynchronous) or steps (synchronous) that were run
    converged: bool  # the last sweep or step changed nothing: a fixed point


class HopfieldNetwork:
    """A Hopfield network that stores the rows of ``patterns`` with the Hebbian rule
    (its ``weights`` are ``(N, N)``)."""

    def __init__(self, patterns: spins("P N")):
        self.weights = hebbian_weights(patterns)
        self.patterns = patterns.clone()

    @property
    def n_units(self) -> int:
        return self.weights.shape[0]

    def energy(self, states: spins("*batch N")) -> Float[Tensor, "*batch"]:
        """:func:`energy` of ``states`` under this network's weights."""
        return energy(self.weights, states)

    def recall(
        self,
        cue: spins("*batch N"),
        mode: Literal["async", "sync"] = "async",
        max_steps: PositiveInt = 50,
        generator: Optional[torch.Generator] = None,
    ) -> Recall:
        """Run the dynamics from ``cue`` until a fixed point or ``max_steps`` sweeps
        (``"async"``: single-unit updates, each sweep in a fresh random order drawn
        from ``generator``) or steps (``"sync"``: all units at once)."""
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


def flip_bits(
    patterns: spins("B N"),
    fraction: Fraction,
    generator: Optional[torch.Generator] = None,
) -> Float[Tensor, "B N"]:
    """A noisy copy of each pattern with exactly ``round(fraction * N)`` units
    flipped, at different positions in every row."""
    batch, n_units = patterns.shape
    n_flips = round(fraction * n_units)
    # Sorting uniform numbers draws a random permutation per row.
    ranks = torch.rand(batch, n_units, generator=generator).argsort(dim=-1)  # (B, N)
    flip = torch.zeros(batch, n_units, dtype=torch.bool)  # (B, N)
    flip.scatter_(1, ranks[:, :n_flips], True)
    return torch.where(flip, -patterns, patterns)


def overlap(
    states: spins("*states N"), patterns: spins("*patterns N")
) -> Float[Tensor, "..."]:
    r"""The overlap :math:`m = \frac1N \boldsymbol{\xi}^\top \mathbf{s}` (1 for a
    perfect recall, -1 for the inverse) of broadcastable states and patterns."""
    try:
        torch.broadcast_shapes(states.shape, patterns.shape)
    except RuntimeError:
        raise ValueError(
            f"states and patterns must broadcast; found {tuple(states.shape)} and "
            f"{tuple(patterns.shape)}"
        ) from None
    return (states * patterns).mean(-1)
