"""Checkers for the exercises of chapter 9 (attention mechanisms)."""
from __future__ import annotations

import torch

from lib.attention import masked_softmax, scaled_dot_product_attention
from lib.checks.core import Check, Measured, Slip, solve_increasing


def masked_softmax_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, valid_lens)`` for :data:`check_masked_softmax`.

    Scores have shape ``(B, Q, K)``; valid lengths are integers of shape ``(B,)``,
    some of them 0 (padding-only rows must come out as zeros). The first case
    always has an empty row and a partly masked one, so forgetting the mask or
    the empty rows fails on every seed.
    """
    cases = [(3 * torch.randn(2, 3, 4, generator=generator, dtype=torch.float64), torch.tensor([0, 2]))]
    for _ in range(trials - 1):
        batch, queries, keys = (int(n) for n in torch.randint(1, 6, (3,), generator=generator))
        scores = 3 * torch.randn(batch, queries, keys, generator=generator, dtype=torch.float64)
        valid_lens = torch.randint(0, keys + 1, (batch,), generator=generator)
        cases.append((scores, valid_lens))
    return cases


def _masked_softmax_rules(found: torch.Tensor, expected: torch.Tensor, scores, valid_lens) -> str | None:
    """The mask and the row sums, which every right answer respects."""
    for b, n in enumerate(valid_lens.tolist()):
        beyond = found[b, :, n:]
        if beyond.numel() and beyond.abs().max() > 1e-6:
            return (f"batch {b} has valid length {n}, but your weights at key positions >= {n} are not 0 "
                    f"(largest: {beyond.abs().max():.3g})")
        row_sums = found[b, :, :n].sum(-1)
        target = 1.0 if n > 0 else 0.0
        bad = (row_sums - target).abs() > 1e-6
        if bad.any():
            q = int(bad.nonzero()[0])
            return f"in batch {b}, your weights for query {q} sum to {row_sums[q]:.4f}; expected {target:g} " \
                   f"(valid length {n})"
    return None


def _not_the_softmax(found: torch.Tensor, expected: torch.Tensor, scores, valid_lens) -> str:
    difference = (found - expected).abs()
    where = tuple(int(i) for i in torch.unravel_index(difference.argmax(), expected.shape))
    return ("your weights are valid distributions but not the softmax of the scores (largest difference "
            f"{difference.max():.3g} at index {where}): apply exp to the valid scores only and divide by their sum")


check_masked_softmax = Check(
    "masked softmax agrees with lib.attention.masked_softmax on 20 fresh random cases",
    masked_softmax_cases, masked_softmax,
    describe=lambda scores, valid_lens: f"scores of shape {tuple(scores.shape)}, valid_lens {valid_lens.tolist()}",
    compared_with="lib.attention.masked_softmax", noun="weights", layout="(B, Q, K)",
    nan_hint=": a row whose valid length is 0 must be all zeros",
    rules=_masked_softmax_rules, mismatch=_not_the_softmax, tolerance=dict(atol=1e-6, rtol=0.0),
)


def scaled_dot_product_attention_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(q, k, v)`` for :data:`check_scaled_dot_product_attention`.

    Shapes are ``(B, T, D)``, ``(B, S, D)``, ``(B, S, Dv)`` or, in every other case,
    with an extra head axis ``(B, H, T, D)`` and so on. ``T``, ``S``, ``D`` and ``Dv``
    are four different sizes, so a product over the wrong axis fails loudly
    instead of passing by accident.
    """
    cases = []
    for trial in range(trials):
        queries, keys, dim, value_dim = (int(n) for n in torch.randperm(6, generator=generator)[:4] + 2)
        leading = tuple(int(n) for n in torch.randint(1, 4, (1 + trial % 2,), generator=generator))
        q = 1.5 * torch.randn(*leading, queries, dim, generator=generator, dtype=torch.float64)
        k = 1.5 * torch.randn(*leading, keys, dim, generator=generator, dtype=torch.float64)
        v = torch.randn(*leading, keys, value_dim, generator=generator, dtype=torch.float64)
        cases.append((q, k, v))
    return cases


def _attend(q, k, v, divisor: float = 1.0, dim: int = -1) -> torch.Tensor:
    """softmax(q kᵀ / divisor) v with the softmax over ``dim`` of the (..., T, S) scores."""
    return torch.softmax(q @ k.transpose(-2, -1) / divisor, dim) @ v


check_scaled_dot_product_attention = Check(
    "softmax(q kᵀ / √d) v agrees with lib.attention on 20 fresh random cases",
    scaled_dot_product_attention_cases, lambda q, k, v: scaled_dot_product_attention(q, k, v)[0],
    describe=lambda q, k, v: f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}",
    compared_with="softmax(q kᵀ / √d) v", noun="output", layout="(..., T, Dv)",
    slips=(
        Slip(_attend, "you did not divide the scores by √d (d = size of q and k)"),
        Slip(lambda q, k, v: _attend(q, k, v, q.shape[-1]), "you divided the scores by d; divide by √d"),
        Slip(lambda q, k, v: _attend(q, k, v, q.shape[-1] ** 0.5, dim=-2),
             "your softmax runs over the queries; it must run over the keys (the last axis of the scores)"),
    ),
    shape_hint=lambda shape, q, k, v: ": multiply the (..., T, S) weights by v last",
    # q @ k (no transpose) is the commonest slip: say so when the shapes clash.
    error_hint=". If it comes from the scores: they are q @ k.transpose(-2, -1), of shape (..., T, S); q @ k does "
               "not fit",
    tolerance=dict(atol=1e-6, rtol=1e-5),
    forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention"),
)


# ---- experiment: the scale that makes attention nearly hard ------------------------------
def sharpening_scale_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh ``(scores, top)`` for :data:`check_sharpening_scale`: 3 to 12 float64 scores with a
    unique largest one (the others at least 0.05 below it) and a target weight ``top`` in
    ``[0.5, 0.99]``, above the uniform ``1/N`` so that a scale ``c > 0`` reaches it."""
    cases = []
    for _ in range(trials):
        scores = torch.randn(int(torch.randint(3, 13, (), generator=generator)), generator=generator,
                             dtype=torch.float64)
        best = scores.argmax()
        scores[best] = scores.max() + 0.05
        top = float(torch.empty((), dtype=torch.float64).uniform_(0.5, 0.99, generator=generator))
        cases.append((scores, top))
    return cases


def sharpening_scale(scores: torch.Tensor, top: float) -> torch.Tensor:
    """The scale ``c > 0`` at which the largest weight of ``softmax(c * scores)`` equals ``top``.

    That weight grows monotonically with ``c`` (its log has derivative ``max(s) - E_α[s] >= 0``),
    from ``1/N`` at ``c = 0`` to 1, so halving or doubling ``c`` brackets the answer and bisection finds it.

    Shapes
    ------
    scores ``(N,)`` -> a 0-dimensional tensor
    """
    scale = solve_increasing(lambda c: float(torch.softmax(c * scores, dim=0).max()), top)
    return torch.tensor(scale, dtype=torch.float64)


def _two_score_scale(scores: torch.Tensor, top: float) -> torch.Tensor:
    """The scale two scores alone would need: σ(c Δ) = top for the gap Δ between the two largest."""
    first, second = scores.topk(2).values
    return torch.log(torch.tensor(top / (1 - top), dtype=torch.float64)) / (first - second)


SHARPENING_RTOL = 1e-6  # the statement's relative error, on the largest weight
# How close a wrong c must come to a known slip for the message to name it: within _SLIP_RTOL of it,
# and _SLIP_CLOSER times closer to it than to the right scale; and the slip itself must miss the
# bound by a clear margin (its weight at least _SLIP_CLEAR times the allowed error away). Some slips
# land near the right c (the two-score scale is within 0.1% of it on about one draw in fifteen, and
# sometimes within 1e-6, inside the bound): a search that only just misses the bound must be told by
# how much, not that it made a slip.
_SLIP_RTOL, _SLIP_CLOSER, _SLIP_CLEAR = 1e-3, 10, 2
_SHARPENING_SLIPS = (
    (lambda scores, top: 1 / sharpening_scale(scores, top),
     "that is the temperature τ = 1/c; return the factor c that multiplies the scores"),
    (_two_score_scale,
     "that scale is right for the two largest scores alone; the other scores share the weight too, so "
     "softmax(c * scores).max() is still below top there: search for c numerically"),
    (lambda scores, top: torch.tensor(top, dtype=torch.float64),
     "you returned top, the weight asked for; return the scale c at which the largest weight reaches it"),
)


def _weight_error(scale: float, scores: torch.Tensor, top: float) -> float:
    """The relative error of the largest weight of ``softmax(scale * scores)`` against ``top``."""
    return (float(torch.softmax(scale * scores.to(torch.float64), dim=0).max()) - top) / top


def _named_slip(scale: float, right: float, scores: torch.Tensor, top: float) -> str | None:
    """The message of the known slip nearest to ``scale`` that explains it (see ``_SLIP_RTOL``), or None."""
    named = []
    for answer, message in _SHARPENING_SLIPS:
        slip = float(answer(scores, top))
        distance = abs(scale - slip)
        if (distance <= _SLIP_RTOL * abs(slip) and _SLIP_CLOSER * distance < abs(scale - right)
                and slip > 0 and abs(_weight_error(slip, scores, top)) > _SLIP_CLEAR * SHARPENING_RTOL):
            named.append((distance, message))
    return min(named)[1] if named else None


def _sharpening_rules(found: torch.Tensor, expected: torch.Tensor, scores: torch.Tensor, top: float) -> str | None:
    """What the statement names, measured at the student's scale: the largest weight of
    ``softmax(c * scores)`` must equal ``top`` to a relative error of ``SHARPENING_RTOL``. Every
    such ``c`` passes, however the search stopped. A ``c`` that fails is explained by the slip it
    reproduces, else by the relative error of its weight, printed with as many digits as it takes
    to differ from the bound."""
    scale = float(found)
    if not scale > 0:
        return f"your c = {scale:.6g} is not positive; the scale c > 0 multiplies the scores"
    error = _weight_error(scale, scores, top)
    if abs(error) <= SHARPENING_RTOL + 1e-15:  # (+ float64 rounding of the weight)
        return None
    slip = _named_slip(scale, float(expected), scores, top)
    if slip:
        return slip
    digits = 2  # "1.04e-06", never "1e-06" beside the bound 1e-6
    while float(f"{abs(error):.{digits}g}") == SHARPENING_RTOL and digits < 17:
        digits += 1
    side, fix = ("below", "larger") if error < 0 else ("above", "smaller")
    return (f"at your c = {scale:.6g} the largest weight of softmax(c * scores) is {side} top by a relative "
            f"error of {abs(error):.{digits}g} (allowed: 1e-6): c must be {fix}")


check_sharpening_scale = Measured(
    "your scales give the largest weight asked for on 12 fresh score vectors",
    sharpening_scale_cases, sharpening_scale,
    describe=lambda scores, top: f"{len(scores)} scores and top = {top:.3f}",
    compared_with="the scale found by bisection", noun="scale", layout=" (a 0-dimensional tensor)",
    # No Slip here: the rules name a slip only where it, and not a near miss, explains c (_SLIP_RTOL).
    rules=_sharpening_rules,
)
