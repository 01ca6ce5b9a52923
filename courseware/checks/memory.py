"""Checkers for the exercises of chapter 12 (memory-augmented networks)."""
from __future__ import annotations

from typing import Callable

import torch

from courseware.checks.core import Check, Slip, by_value
from lib.part5_memory.modern_hopfield import modern_update
from lib.part5_memory.ntm import write


def _distinct_sizes(generator: torch.Generator, count: int) -> list[int]:
    """``count`` different sizes from 2 to 7, so that a product over the wrong axis fails loudly."""
    return [int(n) for n in torch.randperm(6, generator=generator)[:count] + 2]


def multi_write_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(memory, weights, erase, add)`` for :data:`check_multi_head_write`.

    ``memory`` is ``(B, N, D)``, ``weights`` ``(B, R, N)`` (each head's a softmax over the slots),
    ``erase`` ``(B, R, D)`` in ``[0, 1]`` and ``add`` ``(B, R, D)``, float64, with ``B``, ``R``, ``N``
    and ``D`` four different sizes from 2 to 7. In the first case heads 0 and 1 both write to one
    slot with all their weight and ``erase = 1``: written head by head, head 1 would wipe out what
    head 0 added, where the paper's order keeps both adds.
    """
    cases = []
    for trial in range(trials):
        batch, heads, slots, size = _distinct_sizes(generator, 4)
        memory = torch.randn(batch, slots, size, generator=generator, dtype=torch.float64)
        weights = torch.softmax(2 * torch.randn(batch, heads, slots, generator=generator, dtype=torch.float64), -1)
        erase = torch.rand(batch, heads, size, generator=generator, dtype=torch.float64)
        add = torch.randn(batch, heads, size, generator=generator, dtype=torch.float64)
        if trial == 0:
            slot = torch.randint(0, slots, (batch,), generator=generator)
            weights[:, :2] = torch.nn.functional.one_hot(slot, slots).to(torch.float64)[:, None]
            erase[:, :2] = 1.0
        cases.append((memory, weights, erase, add))
    return cases


def multi_write_head_by_head(memory, weights, erase, add) -> torch.Tensor:
    """The multi-head write with :func:`lib.part5_memory.ntm.write`: every head's erase (``a = 0``), then every
    head's add (``e = 0``), one head at a time, the only order in which both of Graves et al.'s claims
    of order-independence hold.

    Shapes
    ------
    memory ``(B, N, D)``, weights ``(B, R, N)``, erase and add ``(B, R, D)`` -> ``(B, N, D)``
    """
    heads = range(weights.shape[1])
    for r in heads:
        memory = write(memory, weights[:, r], erase[:, r], torch.zeros_like(add[:, r]))
    for r in heads:
        memory = write(memory, weights[:, r], torch.zeros_like(erase[:, r]), add[:, r])
    return memory


def multi_write_closed_form(memory, weights, erase, add, combine_erase="product", combine_add="sum",
                            adds_first=False) -> torch.Tensor:
    """``M ⊙ Π_r (1 - w_r e_rᵀ) + Σ_r w_r a_rᵀ``; the keywords give the known wrong answers: the erase
    factors combined as ``"sum"`` (``1 - Σ_r w_r e_r``) or ``"mean"``, the adds as ``"mean"``, and the
    adds made before the erasures (``adds_first=True``)."""
    w = weights[..., None]  # (B, R, N, 1)
    erased = w * erase[:, :, None, :]  # (B, R, N, D): w_r(i) e_r
    keep = {"product": (1 - erased).prod(dim=1), "sum": 1 - erased.sum(dim=1),
            "mean": 1 - erased.mean(dim=1)}[combine_erase]  # (B, N, D)
    added = w * add[:, :, None, :]  # (B, R, N, D)
    added = added.sum(dim=1) if combine_add == "sum" else added.mean(dim=1)
    return (memory + added) * keep if adds_first else memory * keep + added


def _interleaved(order: int = 1):
    """A slip: one whole write per head (erase, then add), the heads taken in ``order`` (1: first to
    last, -1: last to first)."""
    def answer(memory, weights, erase, add):
        for r in list(range(weights.shape[1]))[::order]:
            memory = write(memory, weights[:, r], erase[:, r], add[:, r])
        return memory
    return answer


def _one_head(r: int):
    """A slip: the write of head ``r`` alone."""
    return lambda memory, weights, erase, add: write(memory, weights[:, r], erase[:, r], add[:, r])


def _mean_of_single_writes(memory, weights, erase, add):
    """A slip: each head's whole write applied to the old memory, and the results averaged."""
    return torch.stack([write(memory, weights[:, r], erase[:, r], add[:, r])
                        for r in range(weights.shape[1])]).mean(dim=0)


def _multi_write_shape_hint(shape, memory, weights, *rest) -> str:
    batch, heads, slots = weights.shape
    if tuple(shape) == (batch, heads, slots, memory.shape[2]):
        return ": combine the heads into one new memory"
    return ": w_r needs a size axis (B, R, N, 1), e_r and a_r a slot axis (B, R, 1, D)"


_HEAD_BY_HEAD = ("you wrote head by head, each erasing and then adding: a later head's erase then removes part of "
                 "what an earlier head added, and the memory depends on the order of the heads, against Graves "
                 "et al.'s claims")

check_multi_head_write = Check(
    "your multi-head write agrees with Graves et al.'s on 20 fresh random cases",
    multi_write_cases, multi_write_head_by_head,
    describe=lambda memory, weights, erase, add: (f"memory {tuple(memory.shape)}, weights {tuple(weights.shape)}, "
                                                  f"erase/add {tuple(erase.shape)}"),
    compared_with="the paper's write", noun="memory", layout="(B, N, D)",
    slips=(
        Slip(_interleaved(1), _HEAD_BY_HEAD),
        Slip(_interleaved(-1), _HEAD_BY_HEAD),
        Slip(lambda *case: multi_write_closed_form(*case, combine_erase="sum"),
             "multiply the heads' erase factors: slot i keeps M_i ⊙ Π_r (1 - w_r(i) e_r), not "
             "M_i ⊙ (1 - Σ_r w_r(i) e_r)"),
        Slip(lambda *case: multi_write_closed_form(*case, combine_erase="mean"),
             "each head erases its own share: multiply the factors (1 - w_r(i) e_r), do not average them"),
        Slip(lambda *case: multi_write_closed_form(*case, combine_add="mean"),
             "every head adds its own w_r(i) a_r: sum the adds, do not average them"),
        Slip(lambda *case: multi_write_closed_form(*case, adds_first=True),
             "you added before erasing, against Graves et al., who add each add vector \"after the erase "
             "step has been performed\""),
        Slip(_mean_of_single_writes,
             "you averaged one whole write per head, each from the old memory: the heads' erasures "
             "multiply and their adds sum"),
        Slip(_one_head(0), "you wrote with the first head only: every head r erases and adds"),
        Slip(_one_head(-1), "you wrote with the last head only: every head r erases and adds"),
    ),
    shape_hint=_multi_write_shape_hint,
    tolerance=dict(atol=1e-8, rtol=0.0),
)


# ---- the projection (pseudo-inverse) rule ----------------------------------------------------
MAX_CONDITION = 30.0  # of the patterns' Gram matrix ΞΞᵀ: a float32 answer is then accurate to about 1e-6


def projection_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh ``+-1`` patterns ``(P, N)`` for :data:`check_projection_weights`: ``2 <= P <= 5`` and ``N``
    odd with ``P + 2 <= N <= P + 9``, so that ``(P, P)`` is never ``(N, N)``.

    The rows are linearly independent, with a Gram matrix ``ΞΞᵀ`` whose condition number is at most
    :data:`MAX_CONDITION` (a draw that fails is drawn again), so a float32 answer is accurate to about
    1e-6. With ``N`` odd every overlap ``ξ_μ·ξ_ν`` is odd, never 0: no two patterns are orthogonal
    (for orthogonal patterns the projection is the Hebbian weights), and ``1 / (ΞΞᵀ)`` taken entry
    by entry stays finite.
    """
    cases = []
    while len(cases) < trials:
        n_patterns = int(torch.randint(2, 6, (1,), generator=generator))
        n_units = n_patterns + 2 + int(torch.randint(0, 7, (1,), generator=generator))
        n_units += 1 - n_units % 2  # odd
        patterns = torch.randint(0, 2, (n_patterns, n_units), generator=generator).to(torch.float64) * 2 - 1
        independent = torch.linalg.matrix_rank(patterns) == n_patterns
        if independent and torch.linalg.cond(patterns @ patterns.T) <= MAX_CONDITION:
            cases.append((patterns,))
    return cases


def _zero_diagonal(weights: torch.Tensor) -> torch.Tensor:
    return weights - torch.diag(torch.diagonal(weights))


def projector(patterns: torch.Tensor) -> torch.Tensor:
    """``C = Ξ⁺Ξ``, the orthogonal projection onto the span of the patterns, from torch's pseudo-inverse;
    for linearly independent rows ``Ξ⁺ = Ξᵀ(ΞΞᵀ)⁻¹``, so ``C = Ξᵀ(ΞΞᵀ)⁻¹Ξ``.

    Shapes
    ------
    patterns ``(P, N)`` -> ``(N, N)``
    """
    return torch.linalg.pinv(patterns) @ patterns


def projection_weights(patterns: torch.Tensor) -> torch.Tensor:
    """The projection rule's weights ``W = Ξᵀ(ΞΞᵀ)⁻¹Ξ`` with ``W_ii = 0`` (Personnaz, Guyon and Dreyfus,
    1985; the zero diagonal as in Kanter and Sompolinsky, 1987): ``(P, N)`` -> ``(N, N)``.

    ``C = Ξᵀ(ΞΞᵀ)⁻¹Ξ`` maps every stored pattern to itself, so the field at a stored pattern is
    ``(Wξ)_i = (1 - C_ii) ξ_i``, of the pattern's own sign or 0: in exact arithmetic, with the tie rule,
    every linearly independent set is stored as fixed points. Where ``C_ii = 1`` (``e_i`` in the span)
    row ``i`` of ``W`` is 0: the unit is disconnected, and its field is a rounding error of either sign.
    """
    return _zero_diagonal(projector(patterns))


def _through(gram: Callable[[torch.Tensor], torch.Tensor]) -> Callable:
    """A wrong rule ``Ξᵀ gram(ΞΞᵀ) Ξ`` with a zero diagonal, ``gram`` in place of the matrix inverse."""
    return lambda patterns: _zero_diagonal(patterns.T @ gram(patterns @ patterns.T) @ patterns)


def _nonzero_diagonal(found: torch.Tensor, expected: torch.Tensor, patterns) -> str | None:
    """Names the diagonal entry farthest from 0 (an off-by-one zeroing leaves only the last one)."""
    diagonal = found.diagonal()
    index = int(diagonal.abs().argmax())
    if diagonal[index].abs() > 1e-8:
        return (f"your diagonal is not 0: W_ii = {diagonal[index]:.4g} at i = {index}, its largest |W_ii|; "
                "set W_ii = 0 for every i (no self-connections)")
    return None


check_projection_weights = Check(
    "the projection-rule weights agree with Ξᵀ(ΞΞᵀ)⁻¹Ξ with a zero diagonal, computed by torch.linalg, "
    "on 20 fresh random cases",
    projection_cases, projection_weights,
    describe=lambda patterns: f"{patterns.shape[0]} patterns of {patterns.shape[1]} units",
    compared_with="Ξᵀ(ΞΞᵀ)⁻¹Ξ with a zero diagonal", noun="weights", layout="(N, N)",
    slips=(
        Slip(lambda patterns: _zero_diagonal(patterns.T @ patterns) / patterns.shape[1],
             "those are the Hebbian weights (1/N) Σ ξ ξᵀ, to which the projection rule reduces when the "
             "patterns are orthogonal; it puts the inverse of their overlaps between the two factors: "
             "Ξᵀ(ΞΞᵀ)⁻¹Ξ"),
        Slip(lambda patterns: _zero_diagonal(patterns.T @ patterns),
             "those are ΞᵀΞ with a zero diagonal, the Hebbian weights without their 1/N: you left out (ΞΞᵀ)⁻¹, "
             "the inverse of the patterns' overlaps, which goes between Ξᵀ and Ξ"),
        Slip(projector, "you kept the projection's diagonal C_ii; set W_ii = 0 for every i (no self-connections)"),
        Slip(lambda patterns: projector(patterns) - torch.eye(patterns.shape[1], dtype=patterns.dtype),
             "you subtracted the identity, but the projection's diagonal C_ii is not 1 (it lies between 0 and 1 "
             "and averages P/N): set W_ii = 0 instead"),
        Slip(_through(lambda gram: gram),
             "you multiplied by ΞΞᵀ, the patterns' overlaps; the rule needs its matrix inverse (ΞΞᵀ)⁻¹ "
             "(torch.linalg.inv, or torch.linalg.solve)"),
        Slip(_through(lambda gram: 1 / gram),
             "you took 1/x entry by entry of ΞΞᵀ; (ΞΞᵀ)⁻¹ is the matrix inverse (torch.linalg.inv, or "
             "torch.linalg.solve)"),
        Slip(lambda patterns: projection_weights(patterns) / patterns.shape[1],
             "you divided by N as the Hebbian rule does; the projection rule has no 1/N, the inverse (ΞΞᵀ)⁻¹ "
             "already scales it"),
        Slip(lambda patterns: projection_weights(patterns) * patterns.shape[1],
             "your weights are N times too large: with the overlaps Q = ΞΞᵀ/N the rule is (1/N) Ξᵀ Q⁻¹ Ξ"),
    ),
    shape_hint=lambda shape, patterns: (
        ": that is (P, P), one entry per pair of patterns; the weights connect units, Ξᵀ(ΞΞᵀ)⁻¹Ξ is (N, N)"
        if shape == (patterns.shape[0],) * 2 else ""),
    nan_hint=": is ΞΞᵀ inverted as a matrix (torch.linalg.inv or solve), not entry by entry?",
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


def least_agreement_by_state(patterns: torch.Tensor, self_coupling: bool = False
                             ) -> dict[int, list[float]]:
    """For ``p = 1, ..., P`` and each state ``s`` (+1, -1): the least ``ξ_i h_i`` over the units of the
    first ``p`` patterns that are in state ``s`` in their pattern, in the network that stores exactly
    those ``p`` (``h = W ξ``; Hebbian weights with a zero diagonal, unless ``self_coupling``, and
    without the 1/N, which changes no sign: every number is a whole number).

    All of the first ``p`` patterns are stable when both are ``>= 0``: a unit whose field is 0 keeps
    its state, as in :func:`lib.part5_memory.hopfield.update_sync`. A value of exactly 0 is a deciding
    zero field; the tie conventions that break it one way fail only at the units of one state.
    """
    return _least_agreement_by_state(patterns, bool(self_coupling))


@by_value()
def _least_agreement_by_state(patterns: torch.Tensor, self_coupling: bool) -> dict[int, list[float]]:
    """:func:`least_agreement_by_state`, remembered by value: the reference, most slips and the drawing of
    the cases all start from it, on the same patterns."""
    agreement = torch.zeros_like(patterns)  # (P, N): row ν is ξ_νi (W ξ_ν)_i, W with its diagonal p
    plus = patterns > 0  # (P, N): the units in state +1
    least = []  # per p: (least over the units at +1, least over those at -1)
    for count in range(1, len(patterns) + 1):
        new, stored = patterns[count - 1], patterns[:count]  # (N,), (p, N)
        overlaps = stored @ new  # (p,): ξ_μ·ξ_new
        # storing ξ_new adds ξ_new (ξ_new·ξ_ν) to every field W ξ_ν;
        # the new pattern's own field is Σ_μ ξ_μ (ξ_μ·ξ_new)
        agreement[:count - 1] += stored[:-1] * new * overlaps[:-1, None]
        agreement[count - 1] = new * (overlaps @ stored)
        rows, at_plus = agreement[:count], plus[:count]
        least.append(torch.stack([torch.where(at_plus, rows, torch.inf).min(),
                                  torch.where(at_plus, torch.inf, rows).min()]))
    least = torch.stack(least)  # (P, 2)
    if not self_coupling:  # W_ii = p adds p to every ξ_i h_i: taken out
        least -= torch.arange(1, len(patterns) + 1, dtype=least.dtype)[:, None]
    return {1: least[:, 0].tolist(), -1: least[:, 1].tolist()}


def least_agreement(patterns: torch.Tensor, self_coupling: bool = False) -> list[float]:
    """For ``p = 1, ..., P``: the least ``ξ_i h_i`` over all units of the first ``p`` patterns (see
    :func:`least_agreement_by_state`)."""
    least = least_agreement_by_state(patterns, self_coupling)
    return [min(plus, minus) for plus, minus in zip(least[1], least[-1])]


def stable_prefixes(patterns: torch.Tensor, self_coupling: bool = False, strict: bool = False,
                    zero_to: int | None = None) -> list[bool]:
    """For ``p = 1, ..., P``: whether each of the first ``p`` patterns is a fixed point of the network
    that stores exactly those ``p`` (see :func:`least_agreement_by_state`). The flags give known wrong
    answers: keeping the diagonal; counting a zero field as unstable (``strict``, as
    ``torch.sign(h) == ξ``); sending a unit whose field is 0 to ``zero_to`` instead of keeping its
    state (+1 as ``torch.where(h >= 0, 1, -1)``, -1 as ``torch.where(h > 0, 1, -1)``), which breaks
    only the units in the other state."""
    flips = tuple(state for state in (1, -1) if strict or zero_to == -state)  # a zero field flips them
    return _stable(least_agreement_by_state(patterns, self_coupling), flips)


def _largest(stable: list[bool]) -> int:
    """The largest p whose first p patterns are all stable, from :func:`stable_prefixes` (0 if none)."""
    return max((p for p, ok in enumerate(stable, start=1) if ok), default=0)


def _before_failure(stable: list[bool]) -> int:
    """The count before the first p that fails (P if none fails)."""
    return stable.index(False) if False in stable else len(stable)


def hopfield_capacity(patterns: torch.Tensor, self_coupling: bool = False, strict: bool = False,
                      stop_at_failure: bool = False, first_failure: bool = False,
                      zero_to: int | None = None) -> torch.Tensor:
    """The largest ``p`` such that all of the first ``p`` patterns are stable (0 if there is none).

    Stability is not monotone in ``p``: a pattern that the crosstalk of a new pattern made
    unstable can be stable again once another is added, so every ``p`` up to ``P`` is tried (see
    :func:`stable_prefixes`). The flags give the known wrong answers: keeping the diagonal, counting
    a zero field as unstable, sending it to ``zero_to``, stopping at the first ``p`` that fails (and
    returning ``p - 1``, or ``p`` itself with ``first_failure``).

    Shapes
    ------
    patterns ``(P, N)`` -> a 0-dimensional long tensor
    """
    stable = stable_prefixes(patterns, self_coupling, strict, zero_to)
    if first_failure:
        return torch.tensor(min(_before_failure(stable) + 1, len(patterns)))
    return torch.tensor(_before_failure(stable) if stop_at_failure else _largest(stable))


def _stable(least: dict[int, list[float]], flips: tuple[int, ...] = ()) -> list[bool]:
    """Stability per ``p`` from :func:`least_agreement_by_state`, when a zero field flips the units in
    the states ``flips`` (none by the tie rule)."""
    return [all(values[state] > 0 if state in flips else values[state] >= 0 for state in values)
            for values in ({1: plus, -1: minus} for plus, minus in zip(least[1], least[-1]))]


def _features(patterns: torch.Tensor) -> tuple[bool, bool, bool]:
    """Whether stability comes back, and whether a zero field at a unit in state +1 (resp. -1) decides
    the count: flipping such a unit (sign(0) = -1, resp. +1) changes the count."""
    least = least_agreement_by_state(patterns)
    right = _stable(least)
    largest = _largest(right)
    return (_before_failure(right) != largest, _largest(_stable(least, (1,))) != largest,
            _largest(_stable(least, (-1,))) != largest)


def _zeros_moved_to(patterns: torch.Tensor, state: int) -> torch.Tensor | None:
    """``patterns`` with some units negated in every pattern, so that each zero field of the largest
    stable set sits at a unit in ``state`` (None if a unit has zero fields in both states).

    Negating unit ``i`` in every pattern negates ``W_ij`` for ``j != i`` and ``ξ_i``, so every
    ``ξ_j h_j`` is unchanged, for every ``p``: the counts stay the same, only the state of unit ``i``
    in each pattern changes.
    """
    count = int(hopfield_capacity(patterns))
    stored = patterns[:count]  # (p, N)
    weights = stored.T @ stored
    weights.fill_diagonal_(0.0)
    zero = stored * (stored @ weights) == 0  # (p, N): the zero fields
    at_plus, at_minus = (zero & (stored > 0)).any(0), (zero & (stored < 0)).any(0)  # (N,) each
    if (at_plus & at_minus).any():
        return None
    wrong = at_minus if state > 0 else at_plus  # (N,): units whose zero fields are in the other state
    return patterns * torch.where(wrong, -1.0, 1.0).to(patterns.dtype)


def hopfield_capacity_cases(generator: torch.Generator, trials: int = 7) -> list[tuple]:
    """Fresh ``(patterns,)`` for :data:`check_hopfield_capacity`: ``trials + 3`` sets of 64 random ±1
    patterns of ``N`` units, far more than a network of ``N`` units holds. ``N`` is 128 or 256, a
    power of 2, so that a solution that keeps the factor 1/N computes every field exactly and a
    field of 0 comes out as 0.

    The last three sets have what a random set often lacks. In the first, stability comes back: the
    count before the first failure is less than the largest stable ``p`` (and no zero field decides).
    In the other two a field of exactly 0 decides the count: a set drawn again until one does, with
    units negated (:func:`_zeros_moved_to`) so that every deciding zero field sits at a unit in state
    +1 in the second set and -1 in the third. A solution that stops at the first failure fails on
    every draw; so does one that breaks the tie rule either way, sign(0) = +1 (``torch.where(h >= 0,
    1, -1)``) as surely as sign(0) = -1 or 0, each with its own message.
    """
    cases = [(_random_patterns(generator),) for _ in range(trials)]
    comes_back = zero_field = None
    while comes_back is None or zero_field is None:
        patterns = _random_patterns(generator)
        back, *zero = _features(patterns)
        if comes_back is None and back and not any(zero):
            comes_back = patterns
        elif zero_field is None and any(zero):
            moved = [_zeros_moved_to(patterns, state) for state in (1, -1)]
            zero_field = None if moved[0] is None else moved
    return cases + [(comes_back,), (zero_field[0],), (zero_field[1],)]


TIE_RULE = "by the tie rule a unit whose field is exactly 0 keeps its state (ξ_i h_i >= 0 is enough)"

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
             f"you counted a unit whose field is exactly 0 as unstable (as torch.sign(h) == ξ does, or a "
             f"factor such as 1/p that rounds a zero field below 0: use W as the statement gives it); "
             f"{TIE_RULE}, as update_sync keeps it"),
        Slip(lambda patterns: hopfield_capacity(patterns, zero_to=1),
             f"you sent a unit whose field is exactly 0 to +1 (sign(0) = +1, as torch.where(h >= 0, 1, -1) "
             f"does), so a unit at -1 with a zero field looks unstable; {TIE_RULE}"),
        Slip(lambda patterns: hopfield_capacity(patterns, zero_to=-1),
             f"you sent a unit whose field is exactly 0 to -1 (sign(0) = -1, as torch.where(h > 0, 1, -1) "
             f"does), so a unit at +1 with a zero field looks unstable; {TIE_RULE}"),
        Slip(lambda patterns: torch.tensor(round(0.138 * patterns.shape[1])),
             "that is 0.138 N, the capacity when a few errors per pattern are allowed; count the patterns "
             "that stay exactly stable instead"),
    ),
    tolerance=dict(atol=0.0, rtol=0.0),
)


# ---- one update of a modern Hopfield network ----------------------------------------------
def modern_update_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh ``(patterns, states, beta)`` for :data:`check_modern_update`: ``patterns`` ``(P, N)`` and
    ``states`` ``(B, N)`` float64 with entries of standard deviation 1, ``2 <= B <= 5`` (so that a softmax
    over the batch axis is not one of ones), ``beta`` a float between 0.2 and 3 at least 0.25 away from 1
    (so that leaving it out shows). The first two cases are square, ``P = N``, so that ``Xᵀ`` taken for
    the values has the right shape and can be recognised; in the others ``P != N`` and ``B != P``.
    """
    cases = []
    for trial in range(trials):
        batch = int(torch.randint(2, 6, (1,), generator=generator))
        n_units = int(torch.randint(2, 9, (1,), generator=generator))
        if trial < 2:
            n_patterns = n_units
        else:
            choices = [p for p in range(2, 10) if p not in (n_units, batch)]
            n_patterns = choices[int(torch.randint(0, len(choices), (1,), generator=generator))]
        patterns = torch.randn(n_patterns, n_units, generator=generator, dtype=torch.float64)
        states = torch.randn(batch, n_units, generator=generator, dtype=torch.float64)
        beta = 1.0
        while abs(beta - 1) < 0.25:
            beta = 0.2 + 2.8 * float(torch.rand((), generator=generator, dtype=torch.float64))
        cases.append((patterns, states, round(beta, 3)))
    return cases


def modern_update_reference(patterns, states, beta) -> torch.Tensor:
    """:func:`lib.part5_memory.modern_hopfield.modern_update`: ``(P, N), (B, N)`` -> ``(B, N)``."""
    return modern_update(patterns, states, beta)


def _values_transposed(patterns, states, beta) -> torch.Tensor:
    """A slip: ``Xᵀ`` (the patterns' columns) as the values, computable only when ``P = N``."""
    if patterns.shape[0] != patterns.shape[1]:
        return torch.full((states.shape[0], patterns.shape[1]), float("nan"), dtype=states.dtype)
    return torch.softmax(beta * states @ patterns.T, dim=-1) @ patterns.T


def _cosine_scores(patterns, states, beta) -> torch.Tensor:
    """A slip: the NTM's content addressing, softmax(β cos(ξ, x)), instead of dot products."""
    cosine = torch.nn.functional.cosine_similarity(states[:, None, :], patterns[None], dim=-1)
    return torch.softmax(beta * cosine, dim=-1) @ patterns


def _to_a_fixed_point(patterns, states, beta) -> torch.Tensor:
    """A slip: the update repeated until the states stop moving, instead of applied once."""
    for _ in range(10_000):
        new = torch.softmax(beta * states @ patterns.T, dim=-1) @ patterns
        if torch.allclose(new, states, rtol=0.0, atol=1e-13):
            return new
        states = new
    return states


check_modern_update = Check(
    "your update agrees with X softmax(β Xᵀ ξ) on 20 fresh random cases",
    modern_update_cases, modern_update_reference,
    describe=lambda patterns, states, beta: (f"{patterns.shape[0]} patterns of N = {patterns.shape[1]}, "
                                             f"{states.shape[0]} states, β = {beta}"),
    compared_with="X softmax(β Xᵀ ξ)", noun="new states", layout="(B, N)",
    slips=(
        Slip(lambda patterns, states, beta: torch.softmax(beta * states @ patterns.T, dim=0) @ patterns,
             "your softmax ran over the states (axis 0); each state's weights are a softmax over the P "
             "stored patterns (the last axis of the scores, shape (B, P))"),
        Slip(lambda patterns, states, beta: torch.softmax(states @ patterns.T, dim=-1) @ patterns,
             "you left out β: the weights are softmax(β Xᵀ ξ), the scores multiplied by β before the softmax"),
        Slip(lambda patterns, states, beta: torch.softmax(states @ patterns.T / beta, dim=-1) @ patterns,
             "you divided the scores by β; β is an inverse temperature: multiply them by it"),
        Slip(lambda patterns, states, beta: torch.softmax(states @ patterns.T / patterns.shape[1] ** 0.5, dim=-1)
             @ patterns,
             "you scaled the scores by 1/√N as the transformer does; the modern Hopfield update scales them by β"),
        Slip(_cosine_scores,
             "you scored the states by cosine similarity, softmax(β cos(ξ, x)), the NTM's content addressing; "
             "the modern Hopfield update scores them by the dot product β xᵀξ, lengths included"),
        Slip(_to_a_fixed_point,
             "you repeated the update until the states stopped moving; the exercise asks for one update "
             "(a fixed point is where repeated updates end, not the update itself)"),
        Slip(lambda patterns, states, beta: torch.sign(torch.softmax(beta * states @ patterns.T, dim=-1) @ patterns),
             "you took the sign of the update, as the classical network does; the modern network's states are "
             "continuous: return the weighted average itself"),
        Slip(_values_transposed,
             "you averaged the columns of the patterns (Xᵀ) instead of the patterns themselves: the values are "
             "the stored patterns, the same rows as the keys"),
    ),
    error_hint=("; mind the shapes: the scores β ξ Xᵀ are (B, P), one per state and pattern, and the new states "
                "average the stored patterns, the rows of patterns (P, N), with those weights"),
    forbidden=("lib.part5_memory.modern_hopfield", "lib.part5_memory.modern_update", "lib.part4_attention",
               "torch.nn.functional.scaled_dot_product_attention"),
)
