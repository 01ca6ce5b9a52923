"""The checkers of chapter 11: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch
import torch.nn.functional as F

from courseware.checks import (
    check_warmup_for_peak,
    CHECKS, CheckFailed, check_combined_statistics, check_padded_cached_step, check_position_decoding,
)
from courseware.checks.transformer import (
    OFFSET, chunk_cases, chunk_cases_with_rows, chunk_statistics, combined_statistics, decoded_positions, encode,
    longest_wavelength, padded_step_by_sdpa, padded_step_cases, position_cases, position_cases_with_truth,
    rows_with_statistics,
)
from lib.part4_attention.positional import positional_encoding


@pytest.mark.parametrize(("name", "checker"), [("check_position_decoding", check_position_decoding),
                                               ("check_combined_statistics", check_combined_statistics),
                                               ("check_padded_cached_step", check_padded_cached_step)])
def test_the_checker_is_registered_under_its_name(name, checker):
    assert CHECKS[name] is checker


# ---- reading positions off their encodings -------------------------------------------------------
def test_the_encodings_of_whole_positions_are_the_books():
    for d_model in (2, 4, 16, 32):
        assert torch.allclose(encode(torch.arange(50.0), d_model), positional_encoding(50, d_model, torch.float64),
                              rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_the_reference_gives_back_the_positions_that_were_encoded(seed):
    for P, positions in position_cases_with_truth(torch.Generator().manual_seed(seed)):
        assert P.dtype == torch.float64 and P.shape == (len(positions), P.shape[1])
        assert (positions >= 0).all() and (positions < longest_wavelength(P.shape[1])).all()
        assert torch.allclose(decoded_positions(P), positions, rtol=1e-12, atol=1e-9)


def test_the_cases_reach_past_the_wavelength_of_every_pair_but_the_last():
    # otherwise reading the pair before the last, or forgetting to add 2π to atan2's negative
    # angles, could pass
    for seed in range(20):
        for P, positions in position_cases_with_truth(torch.Generator().manual_seed(seed)):
            d_model = P.shape[1]
            wavelength = longest_wavelength(d_model)
            assert positions.max() > wavelength / 2
            if d_model > 2:
                assert positions.max() > 2 * math.pi * 10000 ** ((d_model - 4) / d_model)


def test_the_reference_refuses_rows_that_encode_no_position():
    P, _ = position_cases_with_truth(torch.Generator().manual_seed(0))[1]
    with pytest.raises(ValueError, match="not sinusoidal encodings"):
        decoded_positions(P.flip(1))


def test_position_decoding_first_case_is_worked_by_hand():
    # D = 4: the last pair turns at ω_1 = 10000^(-1/2) = 0.01, so t = 600 is at angle 6 rad (past
    # π: atan2 gives 6 - 2π); the first pair, at ω_0 = 1, gives 600 mod 2π = 3.1416... only.
    (P,) = position_cases(torch.Generator().manual_seed(0))[0]
    assert torch.allclose(P[4], torch.tensor([math.sin(600), math.cos(600), math.sin(6), math.cos(6)],
                                             dtype=torch.float64))
    right = torch.tensor([0.0, 1.0, 2.5, 100.0, 600.0], dtype=torch.float64)
    check_position_decoding.judge([(P,)], [right])
    with pytest.raises(CheckFailed, match="you read the first pair"):
        check_position_decoding.judge([(P,)], [torch.remainder(right, 2 * math.pi)])
    with pytest.raises(CheckFailed, match="some of your positions are negative"):
        check_position_decoding.judge([(P,)], [torch.tensor([0.0, 1.0, 2.5, 100.0, 600 - 200 * math.pi])])


def decode_coarse_to_fine(P):
    """The clock read hand by hand: the last pair fixes t; each faster pair, whose whole turns the
    estimate so far decides, refines it."""
    d_model = P.shape[1]
    omegas = [10000 ** (-2 * i / d_model) for i in range(d_model // 2)]
    angles = torch.atan2(P[:, 0::2], P[:, 1::2]) % (2 * math.pi)  # (N, D/2)
    estimate = angles[:, -1] / omegas[-1]
    for i in range(d_model // 2 - 2, -1, -1):
        turns = torch.round((estimate * omegas[i] - angles[:, i]) / (2 * math.pi))
        estimate = (angles[:, i] + 2 * math.pi * turns) / omegas[i]
    return estimate


def decode_with_loops(P):
    """Row by row with Python's math: the angle of the last pair, quadrant by quadrant."""
    d_model = P.shape[1]
    omega = math.pow(10000.0, -(d_model - 2) / d_model)
    positions = []
    for sine, cosine in P[:, -2:].tolist():
        angle = math.acos(max(-1.0, min(1.0, cosine)))  # in [0, π]
        if sine < 0:
            angle = 2 * math.pi - angle  # the lower half of the circle
        positions.append(angle / omega)
    return torch.tensor(positions, dtype=torch.float64)


def decode_float32(P):
    P = P.float()
    d_model = P.shape[1]
    angle = torch.atan2(P[:, -2], P[:, -1])
    return torch.where(angle < 0, angle + 2 * math.pi, angle) / 10000 ** (-(d_model - 2) / d_model)


def last_pair_omega(P, exponent=2):
    d_model = P.shape[1]
    return 10000.0 ** (-exponent * (d_model // 2 - 1) / d_model)


def first_pair(P):
    return torch.atan2(P[:, 0], P[:, 1]) % (2 * math.pi)


def pair_before_last(P):
    d_model = P.shape[1]
    if d_model == 2:
        return first_pair(P)
    omega = 10000.0 ** (-(d_model - 4) / d_model)
    return torch.atan2(P[:, -4], P[:, -3]) % (2 * math.pi) / omega


def without_remainder(P):
    return torch.atan2(P[:, -2], P[:, -1]) / last_pair_omega(P)


def by_arcsin(P):
    return torch.arcsin(P[:, -2]) / last_pair_omega(P)


def by_arccos(P):
    return torch.arccos(P[:, -1].clamp(-1, 1)) / last_pair_omega(P)


def sine_and_cosine_swapped(P):
    return torch.atan2(P[:, -1], P[:, -2]) % (2 * math.pi) / last_pair_omega(P)


def frequency_i_over_d(P):
    return torch.atan2(P[:, -2], P[:, -1]) % (2 * math.pi) / last_pair_omega(P, exponent=1)


def the_angle(P):
    return torch.atan2(P[:, -2], P[:, -1]) % (2 * math.pi)


@pytest.mark.parametrize("answer", [decode_coarse_to_fine, decode_with_loops, decode_float32])
def test_position_decoding_accepts_right_answers_written_differently(answer, capsys):
    check_position_decoding(answer)
    assert capsys.readouterr().out.startswith("✓ the positions read off the encodings are the ones encoded")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (first_pair, "you read the first pair"),
        (pair_before_last, "you read the pair before the last"),
        (without_remainder, "some of your positions are negative"),
        (by_arcsin, "arcsin of the sine column"),
        (by_arccos, "arccos of the cosine column"),
        (sine_and_cosine_swapped, "you swapped them"),
        (frequency_i_over_d, r"you divided by 10000\^\(-i/D\)"),
        (the_angle, "you returned the last pair's angle"),
        (lambda P: decode_coarse_to_fine(P) + 0.01, r"your position for row \d+ is .*; that row encodes t = "),
        (lambda P: -decode_coarse_to_fine(P) - 1, "a position is negative"),
        (lambda P: torch.where(decode_coarse_to_fine(P) < 1e-9, longest_wavelength(P.shape[1]),
                               decode_coarse_to_fine(P)), r"that row encodes t = 0\b"),
        (lambda P: decode_coarse_to_fine(P)[:-1], r"have shape \(\d+,\); expected \(N,\)"),
        (lambda P: decode_coarse_to_fine(P).long(), "return floats"),
        (lambda P: decode_coarse_to_fine(P).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda P: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_position_decoding_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_position_decoding(answer)


# ---- layer norm's statistics from chunks ------------------------------------------------------------
@pytest.mark.parametrize("seed", range(10))
def test_the_reference_is_the_hidden_rows_mean_and_variance(seed):
    for counts, means, m2s, x in chunk_cases_with_rows(torch.Generator().manual_seed(seed)):
        assert means.dtype == m2s.dtype == torch.float64 and counts.dtype == torch.long
        assert (counts == 1).any() and not (counts == counts[0]).all() and x.shape[1] == counts.sum()
        rows = rows_with_statistics(counts, means, m2s)
        assert all(torch.allclose(a, b, rtol=1e-12, atol=1e-9)
                   for a, b in zip(chunk_statistics(rows, counts), (means, m2s)))
        expected = torch.stack([x.mean(-1), x.var(-1, unbiased=False)], -1)
        assert torch.allclose(combined_statistics(counts, means, m2s), expected, rtol=1e-11, atol=1e-11)


def test_normalising_with_the_combined_statistics_is_torchs_layer_norm():
    for counts, means, m2s, x in chunk_cases_with_rows(torch.Generator().manual_seed(0)):
        mean, var = combined_statistics(counts, means, m2s).unbind(-1)
        normalised = (x - mean[:, None]) / torch.sqrt(var[:, None] + 1e-5)
        assert torch.allclose(normalised, F.layer_norm(x, x.shape[-1:], eps=1e-5), rtol=1e-7, atol=1e-7)


def test_the_cases_need_the_between_chunk_term_and_a_stable_combination():
    # the chunk means differ by far more than the tolerance in every case, and a third of the cases
    # have rows far from 0, where E[x²] - E[x]² loses digits
    for seed in range(20):
        cases = chunk_cases(torch.Generator().manual_seed(seed))
        assert sum(float(means.mean()) > OFFSET / 2 for _, means, _ in cases) == 4
        for counts, means, m2s in cases:
            assert (means.max(-1).values - means.min(-1).values > 0.01).all()


def combine_by_folding(counts, means, m2s):
    """Chan, Golub and LeVeque's pairwise update, chunk after chunk, row by row in Python floats."""
    out = []
    for row_means, row_m2s in zip(means.tolist(), m2s.tolist()):
        n, mean, m2 = 0, 0.0, 0.0
        for n_b, mean_b, m2_b in zip(counts.tolist(), row_means, row_m2s):
            delta = mean_b - mean
            m2 += m2_b + delta * delta * n * n_b / (n + n_b)
            mean += delta * n_b / (n + n_b)
            n += n_b
        out.append([mean, m2 / n])
    return torch.tensor(out, dtype=torch.float64)


def combine_shifted_sums(counts, means, m2s):
    """Sums of squares about a shift near the data (the first chunk's mean), which keeps them small."""
    c = counts.to(torch.float64)
    shifted = means - means[:, :1]
    n = c.sum()
    mean_shift = (c * shifted).sum(-1) / n
    square = (m2s + c * shifted**2).sum(-1) / n
    return torch.stack([means[:, 0] + mean_shift, square - mean_shift**2], -1)


def weights(counts):
    return counts.to(torch.float64)


def only_within(counts, means, m2s):
    mean = (weights(counts) * means).sum(-1) / counts.sum()
    return torch.stack([mean, m2s.sum(-1) / counts.sum()], -1)


def mean_of_variances(counts, means, m2s):
    mean = (weights(counts) * means).sum(-1) / counts.sum()
    return torch.stack([mean, (m2s / weights(counts)).mean(-1)], -1)


def unweighted_means(counts, means, m2s):
    mean = means.mean(-1)
    return torch.stack([mean, (m2s.sum(-1) + (weights(counts) * (means - mean[:, None]) ** 2).sum(-1))
                        / counts.sum()], -1)


def unbiased(counts, means, m2s):
    right = combine_by_folding(counts, means, m2s)
    n = int(counts.sum())
    return torch.stack([right[:, 0], right[:, 1] * n / (n - 1)], -1)


def fold_with(counts, means, m2s, factor):
    c = weights(counts)
    n, mean, m2 = c[0], means[:, 0], m2s[:, 0]
    for k in range(1, len(c)):
        delta = means[:, k] - mean
        m2 = m2 + m2s[:, k] + delta**2 * factor(n, c[k], c.sum())
        mean = mean + delta * c[k] / (n + c[k])
        n = n + c[k]
    return torch.stack([mean, m2 / n], -1)


def fold_without_factor(counts, means, m2s):
    return fold_with(counts, means, m2s, lambda n_a, n_b, n: 1.0)


def fold_by_whole_count(counts, means, m2s):
    return fold_with(counts, means, m2s, lambda n_a, n_b, n: n_a * n_b / n)


def sums_of_squares(counts, means, m2s):
    c = weights(counts)
    mean = (c * means).sum(-1) / c.sum()
    return torch.stack([mean, (m2s + c * means**2).sum(-1) / c.sum() - mean**2], -1)


@pytest.mark.parametrize("answer", [combine_by_folding, combine_shifted_sums])
def test_combined_statistics_accepts_right_answers_written_differently(answer, capsys):
    check_combined_statistics(answer)
    assert capsys.readouterr().out.startswith("✓ the mean and variance combined from the chunks")


@pytest.mark.parametrize(("answer", "message"), [
    (only_within, "the chunks' M2s summed"),
    (mean_of_variances, "plain mean of the chunk variances"),
    (unweighted_means, "averaged the chunk means without weights"),
    (unbiased, "divided the combined M2 by n - 1"),
    (fold_without_factor, "without that factor"),
    (fold_by_whole_count, "divided by the whole row's n"),
    (sums_of_squares, r"E\[x²\] - E\[x\]²"),
    (lambda *case: combine_by_folding(*case)[:, :1], r"have shape \(\d+, 1\); expected \(B, 2\)"),
    (lambda *case: combine_by_folding(*case) + 1, r"your (mean|variance) of row \d+ is"),
])
def test_combined_statistics_names_the_slip(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_combined_statistics(answer)


def test_combined_statistics_case_worked_by_hand():
    # the row (1, 2, 3 | 10): chunk means 2 and 10, M2s 2 and 0. μ = (3·2 + 10)/4 = 4; M2 = 2 + 0 +
    # (10 - 2)² · 3·1/4 = 50, so the variance is 12.5 (the chunk variances alone give 2/4 = 0.5).
    counts = torch.tensor([3, 1])
    means, m2s = torch.tensor([[2.0, 10.0]], dtype=torch.float64), torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(combined_statistics(counts, means, m2s), torch.tensor([[4.0, 12.5]], dtype=torch.float64))
    assert torch.isclose(torch.tensor([1.0, 2.0, 3.0, 10.0]).var(unbiased=False), torch.tensor(12.5))
    with pytest.raises(CheckFailed, match="the chunks' M2s summed"):
        check_combined_statistics.judge([(counts, means, m2s)], [torch.tensor([[4.0, 0.5]], dtype=torch.float64)])


# ---- one step over a left-padded cache -----------------------------------------------------------
def test_the_cases_are_left_padded_with_rows_unlike_the_real_ones():
    for seed in range(20):
        for q, k_new, v_new, keys, values, lengths in padded_step_cases(torch.Generator().manual_seed(seed)):
            t = keys.shape[1]
            assert (lengths >= 1).all() and (lengths <= t).all() and (lengths < t).any()
            padding = torch.arange(t) < (t - lengths)[:, None]
            assert (values[padding] > 5).all() and (values[~padding] < 5).all()


def test_the_reference_is_attention_over_each_sequences_real_rows():
    for q, k_new, v_new, keys, values, lengths in padded_step_cases(torch.Generator().manual_seed(1)):
        t = keys.shape[1]
        for b, n in enumerate(lengths.tolist()):
            real_keys = torch.cat([keys[b, t - n:], k_new[b, None]])
            real_values = torch.cat([values[b, t - n:], v_new[b, None]])
            weights = torch.softmax(real_keys @ q[b] / math.sqrt(q.shape[1]), 0)
            assert torch.allclose(padded_step_by_sdpa(q, k_new, v_new, keys, values, lengths)[b],
                                  weights @ real_values, rtol=1e-12, atol=1e-12)


def padded_step_loops(q, k_new, v_new, keys, values, lengths):
    """Sequence by sequence in Python: scores of the real rows and the new one, a stable softmax, a sum."""
    t, d = keys.shape[1], q.shape[1]
    outputs = []
    for b, n in enumerate(lengths.tolist()):
        rows_k = keys[b, t - n:].tolist() + [k_new[b].tolist()]
        rows_v = values[b, t - n:].tolist() + [v_new[b].tolist()]
        scores = [sum(a * c for a, c in zip(q[b].tolist(), key)) / math.sqrt(d) for key in rows_k]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        total = sum(exps)
        outputs.append([sum(e / total * row[j] for e, row in zip(exps, rows_v)) for j in range(len(rows_v[0]))])
    return torch.tensor(outputs, dtype=torch.float64)


def padded_step_sliced_sdpa(q, k_new, v_new, keys, values, lengths):
    """Each sequence's real rows cut out, then torch's attention without any mask."""
    t = keys.shape[1]
    outputs = []
    for b, n in enumerate(lengths.tolist()):
        real_keys = torch.cat([keys[b, t - n:], k_new[b, None]])
        real_values = torch.cat([values[b, t - n:], v_new[b, None]])
        outputs.append(F.scaled_dot_product_attention(q[b, None, None], real_keys[None], real_values[None])[0, 0])
    return torch.stack(outputs)


def padded_step_float32(q, k_new, v_new, keys, values, lengths):
    q, k_new, v_new, keys, values = (a.float() for a in (q, k_new, v_new, keys, values))
    t = keys.shape[1]
    scores = torch.cat([keys, k_new[:, None]], 1) @ q[:, :, None] / math.sqrt(q.shape[1])  # (B, t + 1, 1)
    padding = torch.cat([torch.arange(t) < (t - lengths)[:, None], torch.zeros(len(lengths), 1, dtype=bool)], 1)
    weights = torch.softmax(scores[..., 0] - 1e30 * padding, -1)
    return torch.einsum("bs,bsv->bv", weights, torch.cat([values, v_new[:, None]], 1))


def step_with(q, k_new, v_new, keys, values, keep, append=True, scale=None, zero_fill=False):
    """Attention of q over the cached rows where ``keep`` (B, t) is True, and the new row if ``append``."""
    if append:
        keys, values = torch.cat([keys, k_new[:, None]], 1), torch.cat([values, v_new[:, None]], 1)
        keep = torch.cat([keep, torch.ones(len(keep), 1, dtype=torch.bool)], 1)
    scores = (keys @ q[:, :, None])[..., 0] / (math.sqrt(q.shape[1]) if scale is None else scale)
    weights = torch.softmax(torch.where(keep, scores, torch.tensor(0.0 if zero_fill else -math.inf)), -1)
    return (weights[..., None] * values).sum(1)


def left(keys, lengths, shift=0):
    t = keys.shape[1]
    return torch.arange(t) >= (t - lengths + shift)[:, None]


def padding_ignored(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, torch.ones(K.shape[:2], dtype=torch.bool))


def padded_on_the_right(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, torch.arange(K.shape[1]) < n[:, None])


def lengths_include_the_new_row(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, left(K, n, shift=1))


def one_padding_row_kept(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, left(K, n, shift=-1))


def new_row_left_out(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, left(K, n), append=False)


def new_row_first_mask_by_index(q, k, v, K, V, n):
    t = K.shape[1]
    keys, values = torch.cat([k[:, None], K], 1), torch.cat([v[:, None], V], 1)
    keep = torch.arange(t + 1) >= (t - n)[:, None]  # as if the new row came last
    scores = (keys @ q[:, :, None])[..., 0] / math.sqrt(q.shape[1])
    return torch.softmax(scores.masked_fill(~keep, -math.inf), -1)[:, None] @ values


def padding_scored_zero(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, left(K, n), zero_fill=True)


def weights_zeroed_after_softmax(q, k, v, K, V, n):
    keys, values = torch.cat([K, k[:, None]], 1), torch.cat([V, v[:, None]], 1)
    weights = torch.softmax((keys @ q[:, :, None])[..., 0] / math.sqrt(q.shape[1]), -1)
    keep = torch.cat([left(K, n), torch.ones(len(n), 1, dtype=torch.bool)], 1)
    return ((weights * keep)[..., None] * values).sum(1)


def mask_inverted(q, k, v, K, V, n):
    """torch's attention given the padding mask (True on the rows to hide) as attn_mask."""
    t = K.shape[1]
    hide = torch.cat([torch.arange(t) < (t - n)[:, None], torch.zeros(len(n), 1, dtype=torch.bool)], 1)
    keys, values = torch.cat([K, k[:, None]], 1), torch.cat([V, v[:, None]], 1)
    return F.scaled_dot_product_attention(q[:, None], keys, values, attn_mask=hide[:, None])[:, 0]


def value_not_appended(q, k, v, K, V, n):
    t = K.shape[1]
    keep = torch.cat([torch.arange(t) >= (t - n)[:, None], torch.ones(len(n), 1, dtype=torch.bool)], 1)
    keys = torch.cat([K, k[:, None]], 1)
    return F.scaled_dot_product_attention(q[:, None], keys, V, attn_mask=keep[:, None])[:, 0]


def unscaled(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, left(K, n), scale=1.0)


def scaled_by_positions(q, k, v, K, V, n):
    return step_with(q, k, v, K, V, left(K, n), scale=math.sqrt(K.shape[1] + 1))


@pytest.mark.parametrize("answer", [padded_step_loops, padded_step_sliced_sdpa, padded_step_float32])
def test_padded_step_accepts_right_answers_written_differently(answer, capsys):
    check_padded_cached_step(answer)
    assert capsys.readouterr().out.startswith("✓ one decoding step over a left-padded key-value cache")


@pytest.mark.parametrize(("answer", "message"), [
    (padding_ignored, "attended to the padding too"),
    (padded_on_the_right, "as if the padding were on the right"),
    (lengths_include_the_new_row, r"only the last lengths\[b\] - 1 cached rows"),
    (one_padding_row_kept, r"the last lengths\[b\] \+ 1 cached rows, one of them padding"),
    (new_row_left_out, "cached positions only"),
    (lambda *case: new_row_first_mask_by_index(*case)[:, 0], "the new row goes last"),
    (padding_scored_zero, "a score of 0"),
    (weights_zeroed_after_softmax, "after the softmax"),
    (unscaled, r"divide the scores by sqrt\(d\), d the key size"),
    (scaled_by_positions, "square root of the number of positions"),
    (mask_inverted, "boolean attn_mask is True where attention is allowed, the opposite of key_padding_mask"),
    (value_not_appended, "append the new value too"),
    (lambda *case: padded_step_loops(*case)[:, :-1], r"has shape \(\d+, \d+\); expected \(B, d_v\)"),
    (lambda *case: padded_step_loops(*case) + 0.01, "differs from masked attention by up to"),
])
def test_padded_step_names_the_slip(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_padded_cached_step(answer)


# ---- the warm-up for a peak rate --------------------------------------------------------------------


def warmup_by_bisection(d_models, peaks):
    """A right answer by another method: bisection on the schedule's own maximum, the rate at the last
    warm-up step, computed as the paper writes it (min of the two branches)."""
    answers = []
    for d_model, peak in zip(d_models.tolist(), peaks.tolist()):
        def too_high(w):
            return d_model**-0.5 * min(w**-0.5, w * w**-1.5) > peak
        low, high = 0, 1  # too_high(low) (or low = 0), not too_high(high)
        while too_high(high):
            low, high = high, 2 * high
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if too_high(middle) else (low, middle)
        answers.append(high)
    return torch.tensor(answers)


def warmup_vectorised(d_models, peaks):
    """A right answer in one tensor expression, float64 throughout."""
    return torch.ceil(1 / (d_models.double() * peaks**2)).long()


def warmup_float32(d_models, peaks):
    """Right in float32 too: the cases keep 1/(D peak²) 10⁻⁵ of itself away from a whole number."""
    return torch.ceil(1 / (d_models.float() * peaks.float() ** 2)).long()


def warmup_rounded_down(d_models, peaks):
    return torch.floor(1 / (d_models.double() * peaks**2)).long()


def warmup_without_d_model(d_models, peaks):
    return torch.ceil(1 / peaks**2).long()


def warmup_peak_not_squared(d_models, peaks):
    return torch.ceil(1 / (d_models.double() * peaks)).long()


def warmup_rounded_to_nearest(d_models, peaks):
    return torch.round(1 / (d_models.double() * peaks**2)).long()


def warmup_slope_for_peak(d_models, peaks):
    """Sets the warm-up's slope d^(-1/2) W^(-3/2), not its peak, to the rate: too small a warm-up."""
    return torch.ceil((d_models.double() ** -0.5 / peaks) ** (2 / 3)).long()


def warmup_int32(d_models, peaks):
    """Right, as int32: the statement asks for an integer tensor."""
    return torch.ceil(1 / (d_models.double() * peaks**2)).int()


def test_warmup_cases_are_far_from_whole_numbers():
    for d_models, peaks in check_warmup_for_peak.make_cases(torch.Generator().manual_seed(0)):
        exact = 1 / (d_models.double() * peaks**2)
        assert (exact >= 2).all() and ((exact - exact.round()).abs() >= (1e-5 * exact).clamp(min=0.01)).all()


@pytest.mark.parametrize("answer", [warmup_by_bisection, warmup_vectorised, warmup_float32, warmup_int32])
def test_warmup_for_peak_accepts_right_answers(answer, capsys):
    check_warmup_for_peak(answer)
    assert capsys.readouterr().out.startswith("✓ the warm-ups are the smallest")


def test_warmup_for_peak_reference_is_the_smallest_warmup():
    """The chapter's d_model = 32 and peak 0.03 give the 35 steps of its run, and 34 peaks above 0.03."""
    from lib.part4_attention.transformer_recipe import warmup_rate
    assert check_warmup_for_peak.reference(torch.tensor([32]), torch.tensor([0.03], dtype=torch.float64)).tolist() == [35]
    assert warmup_rate(35, 32, 35) <= 0.03 < warmup_rate(34, 32, 34)


@pytest.mark.parametrize(("answer", "message"), [
    (warmup_rounded_down, "round 1/\(D · peak²\) up, not down"),
    (lambda d, p: warmup_vectorised(d, p) + 1, "one more step than needed"),
    (warmup_without_d_model, "you left out d_model"),
    (warmup_peak_not_squared, "you did not square the peak"),
    (lambda d, p: torch.ceil(d.double() ** -0.5 / p).long(), "not d_model\^\(-1/2\)/warmup"),
    (warmup_rounded_to_nearest, r"your warm-up W = \d+ makes the schedule peak at \(D · W\)\^\(-1/2\) = "
                                r"[\d.]+, above the peak [\d.]+ asked for: .* round 1/\(D · peak²\) up$"),
    (warmup_slope_for_peak, r"at index \d+ your warm-up W = \d+ makes the schedule peak at .* above the peak"),
    (lambda d, p: warmup_vectorised(d, p) + (torch.arange(len(d)) == len(d) - 1) * 2,
     r"at index \d+ your warm-up W = \d+ is larger than needed: W - 1 = \d+ already keeps the schedule at or "
     r"below the peak \(its peak \(D · \(W - 1\)\)\^\(-1/2\) = [\d.]+ is at most [\d.]+\)"),
    (lambda d, p: torch.zeros_like(d), "your warm-up is 0; a warm-up is a whole number of steps, at least 1"),
    (lambda d, p: warmup_vectorised(d, p).double(), "return integers"),
    (lambda d, p: warmup_vectorised(d, p)[:-1], "expected \(N,\)"),
])
def test_warmup_for_peak_names_the_slip(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_warmup_for_peak(answer)


# ---- fairness: independent right answers and the most plausible wrong ones, over 20 seeds ----------
# (tests/courseware/test_exercise_fairness.py runs each on 20 draws of the cases). The right answers are written
# from the exercise statements alone, by other methods than the book's solutions.
FAIRNESS = {
    "check_position_decoding": {
        "right": [decode_coarse_to_fine, decode_with_loops],
        "wrong": [
            (first_pair, "you read the first pair"),
            (pair_before_last, "you read the pair before the last"),
            (without_remainder, "some of your positions are negative"),
            (by_arcsin, "arcsin of the sine column"),
            (by_arccos, "arccos of the cosine column"),
            (sine_and_cosine_swapped, "you swapped them"),
            (frequency_i_over_d, r"you divided by 10000\^\(-i/D\)"),
        ],
    },
    "check_combined_statistics": {
        "right": [combine_by_folding, combine_shifted_sums],
        "wrong": [
            (only_within, "the chunks' M2s summed"),
            (mean_of_variances, "plain mean of the chunk variances"),
            (unweighted_means, "averaged the chunk means without weights"),
            (unbiased, "divided the combined M2 by n - 1"),
            (fold_without_factor, "without that factor"),
            (fold_by_whole_count, "divided by the whole row's n"),
            (sums_of_squares, r"E\[x²\] - E\[x\]²"),
        ],
    },
    "check_padded_cached_step": {
        "right": [padded_step_loops, padded_step_sliced_sdpa],
        "wrong": [
            (padding_ignored, "attended to the padding too"),
            (padded_on_the_right, "as if the padding were on the right"),
            (lengths_include_the_new_row, r"only the last lengths\[b\] - 1 cached rows"),
            (new_row_left_out, "cached positions only"),
            (padding_scored_zero, "a score of 0"),
            (weights_zeroed_after_softmax, "after the softmax"),
            (unscaled, r"divide the scores by sqrt\(d\), d the key size"),
            (scaled_by_positions, "square root of the number of positions"),
            (mask_inverted, "boolean attn_mask is True where attention is allowed"),
            (value_not_appended, "append the new value too"),
        ],
    },
    "check_warmup_for_peak": {
        "right": [warmup_by_bisection, warmup_vectorised, warmup_float32],
        "wrong": [
            (warmup_rounded_down, "round 1/\\(D · peak²\\) up, not down"),
            (warmup_rounded_to_nearest, "round 1/\\(D · peak²\\) up"),
            (warmup_without_d_model, "you left out d_model"),
            (warmup_peak_not_squared, "you did not square the peak"),
        ],
    },
}
