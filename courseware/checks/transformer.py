"""Checkers for the exercises of chapter 11 (self-attention and the Transformer): reading positions
back from their sinusoidal encodings, layer norm's mean and variance combined from chunks of a row,
one decoding step over the key-value cache of a left-padded batch, and the warm-up that makes the paper's
learning-rate schedule peak at a given rate."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from courseware.checks.core import Check, Slip, _distinct, one_thread


# ---------------------------------------------------------------------------
# Reading positions back from their encodings (exercise ex-tr-position-decoding).
# ---------------------------------------------------------------------------


def frequency(d_model: int, pair: int) -> float:
    """``ω_i = 10000^(-2i / d_model)``, the angular frequency of pair ``i`` (columns 2i and 2i + 1)."""
    return 10000.0 ** (-2 * pair / d_model)


def longest_wavelength(d_model: int) -> float:
    """``λ = 2π · 10000^((D - 2) / D)``, the wavelength of the last, slowest pair: the positions of
    :data:`check_position_decoding` lie in ``[0, λ)``."""
    return 2 * math.pi / frequency(d_model, d_model // 2 - 1)


def encode(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """The sinusoidal encodings of real ``positions`` (N,), one row each, sine and cosine of every
    frequency side by side: ``(N, D)``, float64."""
    omegas = torch.tensor([frequency(d_model, i) for i in range(d_model // 2)], dtype=torch.float64)
    angles = positions.to(torch.float64)[:, None] * omegas  # (N, D/2)
    return torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).reshape(len(positions), d_model)


def position_cases_with_truth(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """``(P, t)`` pairs: encodings ``P`` (N, D) and the positions ``t`` (N,) they encode.

    The first case is ``D = 4`` (λ = 200π ≈ 628) at ``t = 0, 1, 2.5, 100, 600``; then ``D`` even from 2
    to 32 and 5 to 10 real positions in ``[0, 0.97 λ)``, one of them a whole number and one in
    ``[0.6 λ, 0.95 λ)``: past half a turn of the last pair (an angle that ``atan2`` returns negative)
    and past the wavelength of the pair before it, ``10000^(-2/D) λ ≤ 0.57 λ`` for ``D ≤ 32``.
    """
    first = torch.tensor([0.0, 1.0, 2.5, 100.0, 600.0], dtype=torch.float64)
    cases = [(encode(first, 4), first)]
    for _ in range(trials - 1):
        d_model = 2 * int(torch.randint(1, 17, (), generator=generator))
        count = int(torch.randint(5, 11, (), generator=generator))
        wavelength = longest_wavelength(d_model)
        positions = 0.97 * wavelength * torch.rand(count, generator=generator, dtype=torch.float64)
        positions[0] = wavelength * (0.6 + 0.35 * torch.rand((), generator=generator, dtype=torch.float64))
        positions[1] = positions[1].floor()  # a whole position, as in a sequence
        positions = positions[torch.randperm(count, generator=generator)]
        cases.append((encode(positions, d_model), positions))
    return cases


def position_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(P,)`` for :data:`check_position_decoding` (see :func:`position_cases_with_truth`)."""
    return [(P,) for P, _ in position_cases_with_truth(generator, trials)]


def _angle_of_pair(P: torch.Tensor, pair: int) -> torch.Tensor:
    """The angle in ``[0, 2π)`` of the point (sin, cos) in columns ``2 pair`` and ``2 pair + 1``."""
    return torch.remainder(torch.atan2(P[:, 2 * pair], P[:, 2 * pair + 1]), 2 * math.pi)


def decoded_positions(P: torch.Tensor) -> torch.Tensor:
    """The reference: the positions ``t`` in ``[0, λ)`` whose encodings are the rows of ``P``.

    The last pair turns less than once over ``[0, λ)``, so its angle in ``[0, 2π)`` divided by its
    frequency is the one such ``t``. Re-encoding ``t`` must give back every column of ``P``, the
    fast pairs included, which proves it.
    """
    d_model = P.shape[1]
    positions = _angle_of_pair(P, d_model // 2 - 1) / frequency(d_model, d_model // 2 - 1)  # (N,)
    if not torch.allclose(encode(positions, d_model), P, rtol=0.0, atol=1e-9):
        raise ValueError("the rows of P are not sinusoidal encodings of positions in [0, λ)")
    return positions


def _read_pair(pair_of, reading="atan2", exponent=2):
    """A slip: the angle of one pair (``pair_of(D)``) read by ``reading``, divided by ``10000^(-exponent i / D)``.

    ``reading``: ``"atan2"`` (in [0, 2π)), ``"no remainder"`` (atan2's (-π, π]), ``"asin"``, ``"acos"``,
    ``"swapped"`` (atan2(cos, sin)) or ``"angle"`` (the angle, not divided by the frequency).
    """
    def answer(P):
        d_model = P.shape[1]
        pair = pair_of(d_model)
        sine, cosine = P[:, 2 * pair], P[:, 2 * pair + 1]
        angle = {
            "atan2": lambda: torch.remainder(torch.atan2(sine, cosine), 2 * math.pi),
            "no remainder": lambda: torch.atan2(sine, cosine),
            "asin": lambda: torch.asin(sine.clamp(-1, 1)),
            "acos": lambda: torch.acos(cosine.clamp(-1, 1)),
            "swapped": lambda: torch.remainder(torch.atan2(cosine, sine), 2 * math.pi),
            "angle": lambda: torch.remainder(torch.atan2(sine, cosine), 2 * math.pi),
        }[reading]()
        if reading == "angle":
            return angle
        return angle / 10000.0 ** (-exponent * pair / d_model)
    return answer


def _last(d_model: int) -> int:
    return d_model // 2 - 1


def _position_rules(found, expected, P) -> str | None:
    # only rows out of even a float32 result's tolerance: -1e-17 for t = 0 is 0
    if ((found < 0) & ((found - expected).abs() > 1e-4 * (1 + expected.abs()))).any():
        return "a position is negative: every t lies in [0, λ), so take each angle in [0, 2π)"
    return None


def _position_mismatch(found, expected, P) -> str:
    row = int((found - expected).abs().argmax())
    yours, wanted = _distinct(found[row].item(), expected[row].item())
    return f"your position for row {row} is {yours}; that row encodes t = {wanted}"


check_position_decoding = Check(
    "the positions read off the encodings are the ones encoded, for 12 fresh sizes",
    position_cases, decoded_positions,
    describe=lambda P: f"d_model = {P.shape[1]} and {P.shape[0]} positions",
    compared_with="the positions encoded", noun="positions", layout="(N,)",
    slips=(
        Slip(_read_pair(lambda d: 0),
             "you read the first pair, which turns once every 2π ≈ 6.28 positions: its angle gives t only up to "
             "whole turns. Read the last pair, the only one that turns less than once over [0, λ)"),
        Slip(_read_pair(lambda d: max(d // 2 - 2, 0)),
             "you read the pair before the last (columns D - 4 and D - 3), whose wavelength is shorter than λ, "
             "so far positions wrap around: read the last pair, columns D - 2 and D - 1"),
        Slip(_read_pair(_last, "no remainder"),
             "some of your positions are negative: atan2 returns angles in (-π, π], and past half a turn of the "
             "last pair (t > λ/2) the angle must be taken in [0, 2π): add 2π to the negative ones"),
        Slip(_read_pair(_last, "asin"),
             "arcsin of the sine column gives angles in [-π/2, π/2] only and cannot tell a quarter turn from "
             "three quarters: use both columns, atan2(sin, cos)"),
        Slip(_read_pair(_last, "acos"),
             "arccos of the cosine column gives angles in [0, π] only and cannot tell t from λ - t (same cosine, "
             "opposite sine): use both columns, atan2(sin, cos)"),
        Slip(_read_pair(_last, "swapped"),
             "the sine is in the even column 2i and the cosine in the odd one 2i + 1, so the angle is "
             "atan2(P[:, 2i], P[:, 2i + 1]): you swapped them"),
        Slip(_read_pair(_last, exponent=1),
             "pair i turns at ω_i = 10000^(-2i/D): you divided by 10000^(-i/D)"),
        Slip(_read_pair(_last, "angle"),
             "you returned the last pair's angle t ω; divide it by ω = 10000^(-(D - 2)/D) to get t"),
    ),
    rules=_position_rules, mismatch=_position_mismatch,
)


# ---------------------------------------------------------------------------
# Layer norm's statistics from chunks of a row (exercise ex-tr-layer-norm-chunks).
# ---------------------------------------------------------------------------

OFFSET = 1e4  # the mean of the far rows, whose spread is about 1


def chunk_statistics(x: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-chunk means and M2s (sums of squared deviations from the chunk's own mean) of the rows
    ``x`` (B, n) split into consecutive chunks of ``counts`` (K,) entries: two ``(B, K)`` tensors."""
    parts = torch.split(x, counts.tolist(), dim=-1)
    means = torch.stack([part.mean(-1) for part in parts], -1)
    m2s = torch.stack([((part - part.mean(-1, keepdim=True)) ** 2).sum(-1) for part in parts], -1)
    return means, m2s


def chunk_cases_with_rows(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """``(counts, means, m2s, x)``: the inputs of :data:`check_combined_statistics` and the hidden rows.

    ``K`` from 2 to 6 chunks of 1 to 12 entries, one chunk of a single entry and the sizes never all
    equal; 2 to 4 rows. One case in three has chunk means far apart (shifts of about 10 against a
    spread of about 1, so that the spread between the chunks dominates), one in three rows whose
    mean is about ``OFFSET`` = 10⁴ with a spread of about 1, and the rest spreads of about 3 around
    1.5 with chunk shifts of about 2.
    """
    cases = []
    for trial in range(trials):
        chunks = int(torch.randint(2, 7, (), generator=generator))
        counts = torch.randint(1, 13, (chunks,), generator=generator)
        counts[int(torch.randint(chunks, (), generator=generator))] = 1
        if (counts == counts[0]).all():
            counts[0] = 5
        rows = int(torch.randint(2, 5, (), generator=generator))
        n = int(counts.sum())
        kind = trial % 3
        spread, shift, offset = [(1.0, 10.0, 0.0), (1.0, 0.5, OFFSET), (3.0, 2.0, 1.5)][kind]
        shifts = shift * torch.randn(rows, chunks, generator=generator, dtype=torch.float64)
        base = offset * (1 + 0.01 * torch.randn(rows, 1, generator=generator, dtype=torch.float64))
        x = (base + torch.repeat_interleave(shifts, counts, dim=1)
             + spread * torch.randn(rows, n, generator=generator, dtype=torch.float64))
        means, m2s = chunk_statistics(x, counts)
        cases.append((counts, means, m2s, x))
    return cases


def chunk_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(counts, means, m2s)`` for :data:`check_combined_statistics`."""
    return [case[:3] for case in chunk_cases_with_rows(generator, trials)]


def rows_with_statistics(counts, means, m2s) -> torch.Tensor:
    """Rows ``(B, n)`` whose chunks of ``counts`` entries have exactly the given means and M2s: chunk
    ``k`` of row ``b`` is ``means[b, k] + sqrt(m2s[b, k] / n_k) z`` with ``z`` the entries
    ``0, 1, ..., n_k - 1`` standardised (mean 0, mean square 1; ``z = 0`` for a single entry). Every
    row with those chunk statistics has the same mean and variance, so these stand for the hidden
    ones."""
    parts = []
    for k, n_k in enumerate(counts.tolist()):
        z = torch.arange(n_k, dtype=means.dtype)
        z = (z - z.mean()) / z.std(unbiased=False) if n_k > 1 else torch.zeros(1, dtype=means.dtype)
        parts.append(means[:, k, None] + torch.sqrt(m2s[:, k, None] / n_k) * z)
    return torch.cat(parts, -1)


def combined_statistics(counts, means, m2s) -> torch.Tensor:
    """The reference: ``x.mean(-1)`` and ``x.var(-1, unbiased=False)`` side by side, ``(B, 2)``, for rows
    ``x`` with these chunk statistics (:func:`rows_with_statistics`; the tests hold it to the hidden
    rows themselves and to ``torch.nn.functional.layer_norm``)."""
    x = rows_with_statistics(counts, means, m2s)
    with one_thread():
        return torch.stack([x.mean(-1), x.var(-1, unbiased=False)], -1)


def _fold(counts, means, m2s, factor):
    """Chan's pairwise merge, chunk after chunk, with ``factor(n_a, n_b, n)`` for ``n_a n_b / (n_a + n_b)``."""
    c = counts.to(means.dtype)
    n_a, mean, m2 = c[0], means[:, 0], m2s[:, 0]
    for k in range(1, len(counts)):
        n_b = c[k]
        delta = means[:, k] - mean
        m2 = m2 + m2s[:, k] + delta**2 * factor(n_a, n_b, c.sum())
        mean = mean + delta * n_b / (n_a + n_b)
        n_a = n_a + n_b
    return torch.stack([mean, m2 / n_a], -1)


def _combined(counts, means, m2s, weigh_means=True, weigh_between=True, between=True, divisor=0):
    """The law of total variance with the usual slips: unweighted means, the between-chunk term left
    out or unweighted, ``M2 / (n - divisor)``."""
    c = counts.to(means.dtype)
    n = c.sum()
    mean = (c * means).sum(-1) / n if weigh_means else means.mean(-1)
    spread = (means - mean[:, None]) ** 2
    m2 = m2s.sum(-1) + (((c * spread) if weigh_between else spread).sum(-1) if between else 0)
    return torch.stack([mean, m2 / (n - divisor)], -1)


def _chunk_rules(found, expected, counts, means, m2s) -> str | None:
    if found.dtype != torch.float64:
        return (f"your result is {str(found.dtype).removeprefix('torch.')}: on rows with a mean of about 10⁴ "
                "and a spread of about 1 the variance needs float64's digits; work in float64")
    mean_ok = torch.allclose(found[:, 0], expected[:, 0], rtol=1e-9, atol=1e-9)
    error = float((found[:, 1] - expected[:, 1]).abs().max())
    if mean_ok and error < 1e-5:
        return (f"your variances are off by up to {error:.1e}, more than rounding in float64 allows. If you "
                "combined sums of squares, E[x²] - E[x]², note that on rows with a mean of about 10⁴ and a "
                "spread of about 1 the two terms agree in their first 8 digits, which the difference loses: "
                "combine the M2s with the squared differences of the means instead")
    return None


def _chunk_mismatch(found, expected, counts, means, m2s) -> str:
    excess = (found - expected).abs() / (1 + expected.abs())  # the worst entry against the tolerance
    row, column = (int(i) for i in torch.unravel_index(excess.argmax(), found.shape))
    yours, wanted = _distinct(found[row, column].item(), expected[row, column].item())
    what = ["mean", "variance"][column]
    return f"your {what} of row {row} is {yours}; the whole row's {what} is {wanted}"


check_combined_statistics = Check(
    "the mean and variance combined from the chunks are the whole rows', on 12 fresh splits",
    chunk_cases, combined_statistics,
    describe=lambda counts, means, m2s: (f"{means.shape[0]} rows split into chunks of {counts.tolist()} "
                                         f"entries with means near {means.mean().item():.3g}"),
    compared_with="the whole rows' statistics", noun="statistics", layout="(B, 2)",
    slips=(
        Slip(lambda *case: _combined(*case, between=False),
             "your variance is the chunks' M2s summed (the weighted mean of the chunk variances): it leaves "
             "out how far the chunk means lie from the row's mean, which is part of the row's spread too"),
        Slip(lambda counts, means, m2s: torch.stack(
                 [_combined(counts, means, m2s)[:, 0], (m2s / counts).mean(-1)], -1),
             "your variance is the plain mean of the chunk variances: chunks of different sizes count by their "
             "entries, and the spread of the chunk means about the row's mean belongs to the row's variance"),
        Slip(lambda *case: _combined(*case, weigh_means=False),
             "you averaged the chunk means without weights: chunks of different sizes count by their entries"),
        Slip(lambda *case: _combined(*case, divisor=1),
             "you divided the combined M2 by n - 1: layer norm's variance is the biased one, M2 / n"),
        Slip(lambda *case: _combined(*case, weigh_between=False),
             "in the spread of the chunk means each chunk counts by its entries; you left out n_k"),
        Slip(lambda *case: _fold(*case, lambda n_a, n_b, n: 1.0),
             "merging chunks a and b adds δ² n_a n_b / (n_a + n_b) to M2, δ = mean_b - mean_a; you added δ² "
             "without that factor"),
        Slip(lambda *case: _fold(*case, lambda n_a, n_b, n: n_a * n_b / n),
             "merging chunks a and b adds δ² n_a n_b / (n_a + n_b) to M2, with the counts of the two parts "
             "being merged; you divided by the whole row's n"),
        Slip(lambda *case: _fold(*case, lambda n_a, n_b, n: n_a * n_b / (n_a + n_b - 1)),
             "merging chunks a and b adds δ² n_a n_b / (n_a + n_b) to M2; you divided by n_a + n_b - 1"),
    ),
    rules=_chunk_rules, mismatch=_chunk_mismatch,
    tolerance=dict(atol=1e-9, rtol=1e-9),
)


# ---------------------------------------------------------------------------
# One decoding step over the KV cache of a left-padded batch (exercise ex-tr-kv-cache).
# ---------------------------------------------------------------------------


def padded_step_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(q, k_new, v_new, keys, values, lengths)`` for :data:`check_padded_cached_step`.

    A batch of 2 to 4 sequences with ``t`` cached rows (2 to 8), keys of size ``d`` (2 to 8) and values
    of size ``d + 1``. Sequence ``b``'s real rows are its last ``lengths[b]`` (1 to ``t``); at least one
    sequence is padded. The padding rows hold large random keys and values far from the real ones
    (what a pad token's projections might give), and the scores are large enough that a missing
    scale shows.
    """
    cases = []
    for _ in range(trials):
        batch = int(torch.randint(2, 5, (), generator=generator))
        t = int(torch.randint(2, 9, (), generator=generator))
        d = int(torch.randint(2, 9, (), generator=generator))
        lengths = torch.randint(1, t + 1, (batch,), generator=generator)
        lengths[int(torch.randint(batch, (), generator=generator))] = int(torch.randint(1, t, (), generator=generator))
        q, k_new = (3 * torch.randn(batch, d, generator=generator, dtype=torch.float64) for _ in range(2))
        v_new = torch.randn(batch, d + 1, generator=generator, dtype=torch.float64)
        keys = 3 * torch.randn(batch, t, d, generator=generator, dtype=torch.float64)
        values = torch.randn(batch, t, d + 1, generator=generator, dtype=torch.float64)
        padding = (torch.arange(t) < (t - lengths)[:, None])[..., None]  # (B, t, 1)
        keys = torch.where(padding, 5 * torch.randn(keys.shape, generator=generator, dtype=torch.float64), keys)
        values = torch.where(padding, 10 + torch.randn(values.shape, generator=generator, dtype=torch.float64),
                             values)
        cases.append((q, k_new, v_new, keys, values, lengths))
    return cases


def padded_step_by_sdpa(q, k_new, v_new, keys, values, lengths) -> torch.Tensor:
    """The reference: ``torch.nn.functional.scaled_dot_product_attention`` of the new query over the cache
    with the new row appended, under a boolean mask that keeps each sequence's last ``lengths[b]``
    cached rows and the new one. Shapes: q, k_new (B, d); v_new (B, d_v); keys (B, t, d); values
    (B, t, d_v); lengths (B,); output (B, d_v)."""
    t = keys.shape[1]
    keys, values = torch.cat([keys, k_new[:, None]], dim=1), torch.cat([values, v_new[:, None]], dim=1)
    allowed = torch.arange(t + 1) >= (t - lengths)[:, None]  # (B, t + 1)
    with one_thread():
        return F.scaled_dot_product_attention(q[:, None], keys, values, attn_mask=allowed[:, None])[:, 0]


def _padded_step(q, k_new, v_new, keys, values, lengths, allowed=None, new="append", scale=None, fill="-inf",
                 after=False):
    """The new position's output under the slip the keywords name: ``allowed(t, lengths)`` gives the
    kept cached rows (B, t) (default: the last ``lengths[b]``); ``new`` is ``"append"``, ``"prepend"``
    (the new row first, the mask still read by index over the t + 1 rows) or ``"none"``; ``scale``
    replaces ``sqrt(d)``; ``fill="zero"`` gives the masked scores 0 instead of -inf; ``after=True``
    zeroes the masked weights after the softmax without renormalising."""
    batch, t, d = keys.shape
    kept = torch.arange(t) >= (t - lengths)[:, None] if allowed is None else allowed(t, lengths)  # (B, t)
    if new == "append":
        keys, values = torch.cat([keys, k_new[:, None]], 1), torch.cat([values, v_new[:, None]], 1)
        kept = torch.cat([kept, torch.ones(batch, 1, dtype=torch.bool)], 1)
    elif new == "prepend":
        keys, values = torch.cat([k_new[:, None], keys], 1), torch.cat([v_new[:, None], values], 1)
        kept = torch.cat([kept, torch.ones(batch, 1, dtype=torch.bool)], 1)  # the index-based mask, unmoved
    scores = torch.einsum("bsd,bd->bs", keys, q) / (math.sqrt(d) if scale is None else scale)
    if after:
        weights = torch.softmax(scores, -1) * kept
    else:
        weights = torch.softmax(scores.masked_fill(~kept, 0.0 if fill == "zero" else -math.inf), -1)
    return torch.einsum("bs,bsv->bv", weights, values)


def _step_slip(**options):
    return lambda *case: _padded_step(*case, **options)


def _inverted_mask(q, k_new, v_new, keys, values, lengths):
    """The slip of a boolean mask that is True on the rows to hide (key_padding_mask's convention) passed
    to scaled_dot_product_attention, which attends where it is True: only the padding, not even the
    new row (a sequence without padding gets what torch gives a row that attends to nothing)."""
    t = keys.shape[1]
    padding = torch.arange(t + 1) < (t - lengths)[:, None]  # (B, t + 1): True on the padding
    keys, values = torch.cat([keys, k_new[:, None]], 1), torch.cat([values, v_new[:, None]], 1)
    with one_thread():
        return F.scaled_dot_product_attention(q[:, None], keys, values, attn_mask=padding[:, None])[:, 0]


MASK_CONVENTION = ("scaled_dot_product_attention's boolean attn_mask is True where attention is allowed, the "
                   "opposite of key_padding_mask (True on the positions to hide)")


check_padded_cached_step = Check(
    "one decoding step over a left-padded key-value cache agrees with masked attention on 12 fresh batches",
    padded_step_cases, padded_step_by_sdpa,
    describe=lambda q, k_new, v_new, keys, values, lengths: (
        f"a batch of {keys.shape[0]} with {keys.shape[1]} cached rows, real ones per sequence "
        f"{lengths.tolist()}, keys of size {keys.shape[2]}"),
    compared_with="masked attention", noun="output", layout="(B, d_v)",
    slips=(
        Slip(_step_slip(allowed=lambda t, lengths: torch.ones(len(lengths), t, dtype=torch.bool)),
             "the new position attended to the padding too: mask the first t - lengths[b] cached rows of "
             "sequence b"),
        Slip(_step_slip(allowed=lambda t, lengths: torch.arange(t) < lengths[:, None]),
             "you kept the first lengths[b] cached rows, as if the padding were on the right; the batch is "
             "padded on the left, so the real rows are the last lengths[b]"),
        Slip(_step_slip(allowed=lambda t, lengths: torch.arange(t) >= (t - lengths + 1)[:, None]),
             "you kept only the last lengths[b] - 1 cached rows: lengths[b] counts the real cached rows, the "
             "new position not included"),
        Slip(_step_slip(allowed=lambda t, lengths: torch.arange(t) >= (t - lengths - 1)[:, None]),
             "you kept the last lengths[b] + 1 cached rows, one of them padding: lengths[b] counts the real "
             "cached rows"),
        Slip(_step_slip(new="none"),
             "you attended to the cached positions only: append the new key and value, since the new "
             "position attends to itself"),
        Slip(_step_slip(new="prepend"),
             "you put the new key and value before the cache but masked the rows by their index as if it "
             "came after: the new row goes last, after the cache"),
        Slip(_step_slip(fill="zero"),
             "you gave the padding a score of 0, and exp(0) still weighs: give it -inf, so that its weight "
             "is 0"),
        Slip(_step_slip(after=True),
             "you zeroed the padding's weights after the softmax, so the weights no longer sum to 1: mask the "
             "scores before the softmax"),
        Slip(_inverted_mask, f"you attended to the padding and hid the real rows: {MASK_CONVENTION}"),
        Slip(lambda q, *rest: _padded_step(q, *rest, scale=1.0), "divide the scores by sqrt(d), d the key size"),
        Slip(lambda q, *rest: _padded_step(q, *rest, scale=float(q.shape[1])),
             "divide the scores by sqrt(d), not by d"),
        Slip(lambda q, k, v, *rest: _padded_step(q, k, v, *rest, scale=math.sqrt(v.shape[1])),
             "you divided the scores by the square root of the value size; divide by sqrt(d), d the size of "
             "the query and the keys"),
        Slip(lambda q, k, v, K, *rest: _padded_step(q, k, v, K, *rest, scale=math.sqrt(K.shape[1] + 1)),
             "you divided the scores by the square root of the number of positions; divide by sqrt(d), d the "
             "size of the query and the keys"),
    ),
    error_hint=(": if you appended the new key to the cache, append the new value too (the values need as many "
                "rows as the keys)"),
    nan_hint=(": a sequence whose mask allows no row at all gets NaN. If you passed a boolean mask, "
              f"{MASK_CONVENTION}, and the new position is always allowed"),
)


# ---------------------------------------------------------------------------
# The warm-up that makes the paper's schedule peak at a given rate (exercise ex-tr-warmup-peak).
# ---------------------------------------------------------------------------


def warmup_peak_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh inputs ``(d_models, peaks)`` for :data:`check_warmup_for_peak`: 3 to 8 model sizes (int64,
    multiples of 8 from 16 to 1024) and peak rates (float64, log-uniform in [1e-4, 0.05]), each pair with
    ``1/(D · peak²)`` at least 2 and at least 0.01 (and 10⁻⁵ of itself) away from a whole number, so that
    rounding down, rounding up and one more are three different answers, whichever float precision computes it."""
    cases = []
    for _ in range(trials):
        count = int(torch.randint(3, 9, (), generator=generator))
        d_models, peaks = [], []
        while len(d_models) < count:
            d_model = 8 * int(torch.randint(2, 129, (), generator=generator))
            peak = 10 ** (-4 + 2.7 * float(torch.rand((), generator=generator, dtype=torch.float64)))
            exact = 1 / (d_model * peak**2)
            if exact >= 2 and abs(exact - round(exact)) >= max(0.01, 1e-5 * exact):
                d_models.append(d_model)
                peaks.append(peak)
        cases.append((torch.tensor(d_models), torch.tensor(peaks, dtype=torch.float64)))
    return cases


def _peak_rate(d_model: int, warmup: int) -> float:
    """The schedule's largest rate, reached at step ``warmup``: ``(d_model · warmup)^(-1/2)``."""
    return d_model**-0.5 * min(warmup**-0.5, warmup * warmup**-1.5)


def warmup_for_peak(d_models: torch.Tensor, peaks: torch.Tensor) -> torch.Tensor:
    """The reference: per pair, the smallest whole warm-up whose schedule never exceeds the peak, found
    from ``ceil(1/(D peak²))`` and moved until the schedule's own maximum decides it."""
    answers = []
    for d_model, peak in zip(d_models.tolist(), peaks.tolist()):
        warmup = max(1, math.ceil(1 / (d_model * peak**2)))
        while warmup > 1 and _peak_rate(d_model, warmup - 1) <= peak:
            warmup -= 1
        while _peak_rate(d_model, warmup) > peak:
            warmup += 1
        answers.append(warmup)
    return torch.tensor(answers)


def _warmup_mismatch(found: torch.Tensor, expected: torch.Tensor, d_models: torch.Tensor,
                     peaks: torch.Tensor) -> str:
    """The first warm-up that is wrong, judged on its own: too small peaks above the rate, too large has a
    smaller one that already stays at or below it."""
    index = int((found != expected).nonzero()[0, 0])
    warmup, d_model, peak = int(found[index]), int(d_models[index]), float(peaks[index])
    if warmup < 1:
        return f"at index {index} your warm-up is {warmup}; a warm-up is a whole number of steps, at least 1"
    if warmup < int(expected[index]):
        rate, asked = _distinct(_peak_rate(d_model, warmup), peak)
        return (f"at index {index} your warm-up W = {warmup} makes the schedule peak at (D · W)^(-1/2) = {rate}, "
                f"above the peak {asked} asked for: the peak falls as W grows, so round 1/(D · peak²) up")
    rate, asked = _distinct(_peak_rate(d_model, warmup - 1), peak)
    return (f"at index {index} your warm-up W = {warmup} is larger than needed: W - 1 = {warmup - 1} already keeps "
            f"the schedule at or below the peak (its peak (D · (W - 1))^(-1/2) = {rate} is at most {asked})")


def _warmup_slip(formula):
    return lambda d_models, peaks: torch.tensor(
        [formula(d, p) for d, p in zip(d_models.tolist(), peaks.tolist())])


check_warmup_for_peak = Check(
    "the warm-ups are the smallest whose schedule stays at or below the peak, for 10 fresh sets of sizes and "
    "peaks",
    warmup_peak_cases, warmup_for_peak,
    describe=lambda d_models, peaks: (
        f"d_models {d_models.tolist()} and peaks {[float(f'{p:.4g}') for p in peaks.tolist()]}"),
    compared_with="the smallest such warm-up", noun="warm-ups", layout="(N,)",
    slips=(
        Slip(_warmup_slip(lambda d, p: math.floor(1 / (d * p**2))),
             "with your warm-up the schedule peaks above the rate asked for: the peak (D · warmup)^(-1/2) "
             "falls as the warm-up grows, so round 1/(D · peak²) up, not down"),
        Slip(_warmup_slip(lambda d, p: math.ceil(1 / (d * p**2)) + 1),
             "one more step than needed: the warm-up one below yours already keeps the schedule at or below "
             "the peak"),
        Slip(_warmup_slip(lambda d, p: math.ceil(1 / p**2)),
             "you left out d_model: the schedule is multiplied by d_model^(-1/2), so its peak is "
             "(d_model · warmup)^(-1/2)"),
        Slip(_warmup_slip(lambda d, p: math.ceil(1 / (d * p))),
             "the peak is (d_model · warmup)^(-1/2), a square root: warmup = 1/(d_model · peak²), you did not "
             "square the peak"),
        Slip(_warmup_slip(lambda d, p: math.ceil(d**-0.5 / p)),
             "the peak is (d_model · warmup)^(-1/2), not d_model^(-1/2)/warmup: the rate at the end of the "
             "warm-up is warmup · warmup^(-3/2) = warmup^(-1/2) times d_model^(-1/2)"),
    ),
    mismatch=lambda found, expected, d_models, peaks: (
        f"(warm-ups {found.tolist()}): {_warmup_mismatch(found, expected, d_models, peaks)}"),
    tolerance=dict(atol=0.0, rtol=0.0), integers=True,
)
