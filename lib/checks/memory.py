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
UNITS = (128, 256)  # powers of 2: with the factor 1/N, every field k/N is exact in floating point
PATTERNS = 64  # far more than a network of 128 or 256 units holds (about 0.138 N, 18 or 35)


def _random_patterns(generator: torch.Generator) -> torch.Tensor:
    """:data:`PATTERNS` random ±1 patterns of ``N`` units, ``N`` drawn from :data:`UNITS`: ``(P, N)``."""
    units = UNITS[int(torch.randint(len(UNITS), (), generator=generator))]
    spins = torch.randint(0, 2, (PATTERNS, units), generator=generator).to(torch.float64)  # (P, N)
    return 2 * spins - 1


def least_agreement(patterns: torch.Tensor, self_coupling: bool = False) -> list[float]:
    """For ``p = 1, ..., P``: the least ``ξ_i h_i`` over the units of the first ``p`` patterns, in the
    network that stores exactly those ``p`` (``h = W ξ``; Hebbian weights with a zero diagonal, unless
    ``self_coupling``, and without the 1/N, which changes no sign: every number is a whole number).

    All of the first ``p`` patterns are stable when it is ``>= 0``: a unit whose field is 0 keeps
    its state, as in :func:`lib.memory.hopfield.update_sync`. ``> 0`` is the slip that counts a
    zero field as unstable.
    """
    agreement = torch.zeros_like(patterns)  # (P, N): row ν is ξ_νi (W ξ_ν)_i, W with its diagonal p
    least = []
    for count in range(1, len(patterns) + 1):
        new, stored = patterns[count - 1], patterns[:count]  # (N,), (p, N)
        overlaps = stored @ new  # (p,): ξ_μ·ξ_new
        # storing ξ_new adds ξ_new (ξ_new·ξ_ν) to every field W ξ_ν;
        # the new pattern's own field is Σ_μ ξ_μ (ξ_μ·ξ_new)
        agreement[:count - 1] += stored[:-1] * new * overlaps[:-1, None]
        agreement[count - 1] = new * (overlaps @ stored)
        least.append(agreement[:count].min())
    diagonal = 0 if self_coupling else torch.arange(1, len(patterns) + 1)  # W_ii = p, taken out
    return (torch.stack(least) - diagonal).tolist()


def stable_prefixes(patterns: torch.Tensor, self_coupling: bool = False, strict: bool = False) -> list[bool]:
    """For ``p = 1, ..., P``: whether each of the first ``p`` patterns is a fixed point of the network
    that stores exactly those ``p`` (see :func:`least_agreement`). The flags give known wrong
    answers: keeping the diagonal, counting a zero field as unstable."""
    return [value > 0 if strict else value >= 0 for value in least_agreement(patterns, self_coupling)]


def _largest(stable: list[bool]) -> int:
    """The largest p whose first p patterns are all stable, from :func:`stable_prefixes` (0 if none)."""
    return max((p for p, ok in enumerate(stable, start=1) if ok), default=0)


def _before_failure(stable: list[bool]) -> int:
    """The count before the first p that fails (P if none fails)."""
    return stable.index(False) if False in stable else len(stable)


def hopfield_capacity(patterns: torch.Tensor, self_coupling: bool = False, strict: bool = False,
                      stop_at_failure: bool = False, first_failure: bool = False) -> torch.Tensor:
    """The largest ``p`` such that all of the first ``p`` patterns are stable (0 if there is none).

    Stability is not monotone in ``p``: a pattern that the crosstalk of a new pattern made
    unstable can be stable again once another is added, so every ``p`` up to ``P`` is tried (see
    :func:`stable_prefixes`). The flags give the known wrong answers: keeping the diagonal, counting
    a zero field as unstable, stopping at the first ``p`` that fails (and returning ``p - 1``, or
    ``p`` itself with ``first_failure``).

    Shapes
    ------
    patterns ``(P, N)`` -> a 0-dimensional long tensor
    """
    stable = stable_prefixes(patterns, self_coupling, strict)
    if first_failure:
        return torch.tensor(min(_before_failure(stable) + 1, len(patterns)))
    return torch.tensor(_before_failure(stable) if stop_at_failure else _largest(stable))


def hopfield_capacity_cases(generator: torch.Generator, trials: int = 8) -> list[tuple]:
    """Fresh ``(patterns,)`` for :data:`check_hopfield_capacity`: ``trials + 2`` sets of 64 random ±1
    patterns of ``N`` units, far more than a network of ``N`` units holds. ``N`` is 128 or 256, a
    power of 2, so that a solution that keeps the factor 1/N computes every field exactly and a
    field of 0 comes out as 0.

    The last two sets are drawn again until they have what a random set often lacks. In the
    first, stability comes back: the count before the first failure is less than the largest
    stable ``p`` (and no zero field decides). In the second, a field of exactly 0 decides: counting
    it as unstable changes the count (and stability does not come back). So a solution that stops
    at the first failure, or that breaks the tie rule, fails on every draw, each with its own message.
    """
    cases = [(_random_patterns(generator),) for _ in range(trials)]
    for wanted in ("comes back", "zero field"):
        while True:
            patterns = _random_patterns(generator)
            least = least_agreement(patterns)
            stable, strict = [value >= 0 for value in least], [value > 0 for value in least]
            comes_back = _before_failure(stable) != _largest(stable)
            zero_field = _largest(strict) != _largest(stable)
            if (comes_back, zero_field) == (wanted == "comes back", wanted == "zero field"):
                cases.append((patterns,))
                break
    return cases


check_hopfield_capacity = Check(
    "your counts agree with the largest stable p on 10 fresh sets of random patterns",
    hopfield_capacity_cases, hopfield_capacity,
    describe=lambda patterns: f"{patterns.shape[0]} patterns of {patterns.shape[1]} units",
    compared_with="the largest p whose first p patterns are all stable", noun="count",
    layout=" (a 0-dimensional tensor)",
    slips=(
        Slip(lambda patterns: hopfield_capacity(patterns, stop_at_failure=True),
             "you stopped at the first p that fails, but stability can come back: adding a pattern can "
             "make an unstable one stable again. Try every p up to P and return the largest that works"),
        Slip(lambda patterns: hopfield_capacity(patterns, first_failure=True),
             "that is the first p at which a stored pattern is unstable; return the largest p at which "
             "all of the first p are stable"),
        Slip(lambda patterns: hopfield_capacity(patterns) - 1,
             "your count is one less than the largest stable p: p is the number of patterns stored, "
             "patterns[:p], not the index of the last one"),
        Slip(lambda patterns: hopfield_capacity(patterns, self_coupling=True),
             "your weights keep the diagonal: W_ii = p pulls every unit towards its own state and makes "
             "patterns look stable; set the diagonal to 0"),
        Slip(lambda patterns: hopfield_capacity(patterns, strict=True),
             "you counted a unit whose field is exactly 0 as unstable; it keeps its state (ξ_i h_i >= 0 is "
             "enough), as update_sync keeps it. (With the factor 1/N, rounding can push a zero field "
             "below 0: leave 1/N out.)"),
        Slip(lambda patterns: torch.tensor(round(0.138 * patterns.shape[1])),
             "that is 0.138 N, the capacity when a few errors per pattern are allowed; count the patterns "
             "that stay exactly stable instead"),
    ),
    tolerance=dict(atol=0.0, rtol=0.0),
)
