"""Checkers for the exercises of chapter 12 (memory-augmented networks)."""
from __future__ import annotations

from typing import Callable

import torch

from lib.checks.core import Check, Slip
from lib.memory.hopfield import hebbian_weights
from lib.memory.ntm import write


def _distinct_sizes(generator: torch.Generator, count: int) -> list[int]:
    """``count`` different sizes from 2 to 7, so that a product over the wrong axis fails loudly."""
    return [int(n) for n in torch.randperm(6, generator=generator)[:count] + 2]


def ntm_write_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(memory, weights, erase, add)`` for :data:`check_ntm_write`.

    ``B``, ``N`` and ``D`` are three different sizes. Weights are softmax
    distributions over the slots (one-hot in the first case, with ``erase = 1``,
    where the write must replace the slot by ``add`` exactly); erase entries are
    in ``[0, 1]``.
    """
    cases = []
    for trial in range(trials):
        batch, slots, size = _distinct_sizes(generator, 3)
        memory = torch.randn(batch, slots, size, generator=generator, dtype=torch.float64)
        weights = torch.softmax(2 * torch.randn(batch, slots, generator=generator, dtype=torch.float64), -1)
        erase = torch.rand(batch, size, generator=generator, dtype=torch.float64)
        add = torch.randn(batch, size, generator=generator, dtype=torch.float64)
        if trial == 0:
            weights = torch.nn.functional.one_hot(torch.randint(0, slots, (batch,), generator=generator), slots)
            weights, erase = weights.to(torch.float64), torch.ones_like(erase)
        cases.append((memory, weights, erase, add))
    return cases


def _written(slip: Callable) -> Callable:
    """A wrong write, computed by ``slip(M, w, e, a)`` from the case with the slot and size axes broadcast."""
    def answer(memory, weights, erase, add):
        return slip(memory, weights[:, :, None], erase[:, None, :], add[:, None, :])  # (B, N, 1), (B, 1, D) twice
    return answer


check_ntm_write = Check(
    "the erase-then-add write agrees with lib.memory.ntm.write on 20 fresh random cases",
    ntm_write_cases, write,
    describe=lambda memory, weights, erase, add: (f"memory {tuple(memory.shape)}, weights {tuple(weights.shape)}, "
                                                  f"erase/add {tuple(erase.shape)}"),
    compared_with="M ⊙ (1 − w eᵀ) + w aᵀ", noun="memory", layout="(B, N, D)",
    slips=(
        Slip(_written(lambda m, w, e, a: (m + w * a) * (1 - w * e)), "you added before erasing: erase first, then add"),
        Slip(_written(lambda m, w, e, a: m * (1 - e) + w * a),
             "your erase ignores the weights: slot i must lose w_i e, not e"),
        Slip(_written(lambda m, w, e, a: m * (1 - w * e)), "you erased but did not add w_i a"),
        Slip(_written(lambda m, w, e, a: m + w * a), "you added but did not erase: multiply by (1 - w_i e) first"),
        Slip(_written(lambda m, w, e, a: m * (1 - w * e) + a),
             "your add ignores the weights: slot i gains w_i a, not a"),
        Slip(_written(lambda m, w, e, a: m * w * e + w * a),
             "a slot keeps M_i (1 - w_i e) of its content, not M_i w_i e"),
    ),
    shape_hint=lambda shape, *case: ": w needs a slot axis (B, N, 1), e and a a slot axis (B, 1, D)",
    tolerance=dict(atol=1e-8, rtol=0.0),
)


def hebbian_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh ``+-1`` patterns ``(P, N)`` for :data:`check_hebbian_weights`, with ``2 <= P < N`` (with one
    pattern, dividing by P would look like not dividing at all)."""
    cases = []
    for _ in range(trials):
        n_patterns = int(torch.randint(2, 6, (1,), generator=generator))
        n_units = n_patterns + int(torch.randint(1, 8, (1,), generator=generator))
        patterns = torch.randint(0, 2, (n_patterns, n_units), generator=generator).to(torch.float64) * 2 - 1
        cases.append((patterns,))
    return cases


def _unscaled(patterns: torch.Tensor) -> torch.Tensor:
    """The sum of the patterns' outer products with a zero diagonal: (N, N)."""
    return patterns.T @ patterns - torch.diag((patterns**2).sum(0))


def _nonzero_diagonal(found: torch.Tensor, expected: torch.Tensor, patterns) -> str | None:
    diagonal = found.diagonal()
    if diagonal.abs().max() > 1e-8:
        return f"your diagonal is {diagonal[0]:.4f}, not 0: set W_ii = 0 (no self-connections)"
    return None


check_hebbian_weights = Check(
    "Hebbian weights agree with lib.memory.hopfield.hebbian_weights on 20 fresh random cases",
    hebbian_cases, hebbian_weights,
    describe=lambda patterns: f"{patterns.shape[0]} patterns of {patterns.shape[1]} units",
    compared_with="(1/N) Σ ξ ξᵀ with a zero diagonal", noun="weights", layout="(N, N)",
    slips=(
        Slip(_unscaled, "you did not divide by N, the number of units"),
        Slip(lambda patterns: _unscaled(patterns) / patterns.shape[0],
             "you divided by P, the number of patterns; divide by N, the number of units"),
    ),
    shape_hint=lambda shape, patterns: (
        ": patterns @ patterns.T compares patterns; the weights compare units, patterns.T @ patterns"
        if shape == (patterns.shape[0],) * 2 else ""),
    rules=_nonzero_diagonal, tolerance=dict(atol=1e-8, rtol=0.0),
)


# ---- experiment: how many patterns a Hopfield network holds ------------------------------
def hopfield_capacity_cases(generator: torch.Generator, trials: int = 8) -> list[tuple]:
    """Fresh ``(patterns,)`` for :data:`check_hopfield_capacity`: ``N // 2`` random ±1 patterns
    of ``N`` units, ``N`` from 40 to 120, far more than a network of ``N`` units holds."""
    cases = []
    for _ in range(trials):
        units = int(torch.randint(40, 121, (), generator=generator))
        spins = torch.randint(0, 2, (units // 2, units), generator=generator).to(torch.float64)  # (P, N)
        cases.append((2 * spins - 1,))
    return cases


def hopfield_capacity(patterns: torch.Tensor, self_coupling: bool = False, strict: bool = False,
                      first_failure: bool = False) -> torch.Tensor:
    """How many of the first patterns can be stored before one of the stored patterns stops being stable.

    Patterns are added one at a time with the Hebbian rule (without the 1/N, which changes no
    sign, so every number is a whole number). Pattern ``ξ`` is stable when no unit disagrees with
    its field, ``ξ_i h_i >= 0`` with ``h = W ξ``: a unit whose field is 0 keeps its state, as in
    :func:`lib.memory.hopfield.update_sync`, so ``ξ`` is a fixed point. Returns the count ``p`` such that
    the first ``p`` patterns are all stable and the first ``p + 1`` are not (``P`` if all are).
    The flags give the known wrong answers: keeping the diagonal, counting a zero field as
    unstable, returning the first count that fails.

    Shapes
    ------
    patterns ``(P, N)`` -> a 0-dimensional long tensor
    """
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]  # (p, N)
        weights = stored.T @ stored  # (N, N)
        if not self_coupling:
            weights.fill_diagonal_(0.0)
        agreement = stored * (stored @ weights)  # (p, N): ξ_i h_i
        if not (agreement > 0 if strict else agreement >= 0).all():
            return torch.tensor(count if first_failure else count - 1)
    return torch.tensor(len(patterns))


check_hopfield_capacity = Check(
    "your counts agree with adding patterns one at a time on 8 fresh sets of random patterns",
    hopfield_capacity_cases, hopfield_capacity,
    describe=lambda patterns: f"{patterns.shape[0]} patterns of {patterns.shape[1]} units",
    compared_with="the count found by adding patterns one at a time", noun="count",
    layout=" (a 0-dimensional tensor)",
    slips=(
        Slip(lambda patterns: hopfield_capacity(patterns, first_failure=True),
             "that is the first count at which a stored pattern is unstable; return the count before it"),
        Slip(lambda patterns: hopfield_capacity(patterns, self_coupling=True),
             "your weights keep the diagonal: W_ii = p pulls every unit towards its own state and makes "
             "patterns look stable; set the diagonal to 0"),
        Slip(lambda patterns: hopfield_capacity(patterns, strict=True),
             "you counted a unit whose field is exactly 0 as unstable; it keeps its state (ξ_i h_i >= 0 is "
             "enough), as update_sync keeps it"),
        Slip(lambda patterns: torch.tensor(round(0.138 * patterns.shape[1])),
             "that is 0.138 N, the capacity when a few errors per pattern are allowed; count the patterns "
             "that stay exactly stable instead"),
    ),
    tolerance=dict(atol=0.0, rtol=0.0),
)
