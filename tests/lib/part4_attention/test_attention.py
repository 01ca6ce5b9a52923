"""Tests for lib/part4_attention/attention.py.

The tests compare against independent references: PyTorch's own
``scaled_dot_product_attention`` and ``nn.MultiheadAttention``, formulas
written out element by element, and small cases computed by hand.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lib.part4_attention.attention import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    MultiHeadAttention,
    ScaledDotScore,
    attention,
    hard_attention,
    make_score,
    masked_softmax,
    scaled_dot_product_attention,
)
from lib.part4_attention.attention import _softmax_over_kept, _softmax_reference  # the fused path and its reference

LN3 = math.log(3.0)
FAST = settings(max_examples=30, deadline=None, database=None)
TOLERANCES = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-10, rtol=1e-10)}


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def fixed_score(scores):
    """A score 'function' that ignores q and k, so tests can choose the distribution directly."""
    return lambda queries, keys: scores


# ---------------------------------------------------------------------------
# Scoring functions, each against its formula written out explicitly.
# ---------------------------------------------------------------------------


def test_additive_score_matches_formula():
    score = AdditiveScore(query_dim=3, key_dim=4, hidden_dim=5).double()
    queries, keys = randn(2, 3, 3, seed=1), randn(2, 4, 4, seed=2)
    W_q, W_k, v = score.query_proj.weight, score.key_proj.weight, score.score_proj.weight[0]
    expected = torch.empty(2, 3, 4, dtype=torch.float64)
    for b in range(2):
        for t in range(3):
            for s in range(4):
                expected[b, t, s] = v @ torch.tanh(W_q @ queries[b, t] + W_k @ keys[b, s])
    torch.testing.assert_close(score(queries, keys), expected)


def test_dot_and_scaled_dot_scores_match_formula():
    queries, keys = randn(2, 3, 6, seed=1), randn(2, 4, 6, seed=2)
    expected = torch.empty(2, 3, 4, dtype=torch.float64)
    for b in range(2):
        for t in range(3):
            for s in range(4):
                expected[b, t, s] = sum(queries[b, t, i] * keys[b, s, i] for i in range(6))
    torch.testing.assert_close(DotScore()(queries, keys), expected)
    torch.testing.assert_close(ScaledDotScore()(queries, keys), expected / math.sqrt(6))


def test_scaled_dot_score_has_unit_variance_while_dot_score_has_variance_d():
    # The ScaledDotScore docstring argues Var(q.k) = d for iid unit-variance entries.
    # q.k has kurtosis 3 + 6/d, so the sample variance of n draws has relative standard
    # error sqrt((2 + 6/d) / n), about 1% for n = 20000; 6% is a 6-sigma tolerance.
    d, n = 64, 20000
    queries, keys = randn(n, 1, d, seed=3), randn(n, 1, d, seed=4)  # n independent (q, k) pairs
    assert abs(DotScore()(queries, keys).var().item() / d - 1) < 0.06
    assert abs(ScaledDotScore()(queries, keys).var().item() - 1) < 0.06


def test_bilinear_full_matches_formula():
    score = BilinearScore(query_dim=3, key_dim=5).double()
    queries, keys = randn(2, 3, 3, seed=1), randn(2, 4, 5, seed=2)
    W = score.weight
    expected = torch.empty(2, 3, 4, dtype=torch.float64)
    for b in range(2):
        for t in range(3):
            for s in range(4):
                expected[b, t, s] = queries[b, t] @ W @ keys[b, s]
    torch.testing.assert_close(score(queries, keys), expected)


def test_bilinear_factorised_equals_low_rank_bilinear_form():
    score = BilinearScore(query_dim=6, key_dim=7, rank=2).double()
    U, V = score.query_factor.weight, score.key_factor.weight
    assert U.shape == (2, 6) and V.shape == (2, 7)
    queries, keys = randn(2, 3, 6, seed=1), randn(2, 4, 7, seed=2)
    W = U.T @ V  # (6, 7), rank 2
    expected = torch.einsum("bti,ij,bsj->bts", queries, W, keys)
    torch.testing.assert_close(score(queries, keys), expected)
    assert sum(p.numel() for p in score.parameters()) == 2 * (6 + 7) < 6 * 7
    assert torch.linalg.matrix_rank(W) == 2


def test_make_score_builds_each_kind():
    assert isinstance(make_score("additive", 3, 4, hidden_dim=5), AdditiveScore)
    assert isinstance(make_score("dot", 4, 4), DotScore)
    assert isinstance(make_score("scaled_dot", 4, 4), ScaledDotScore)
    assert make_score("bilinear", 3, 4).weight.shape == (3, 4)
    assert make_score("bilinear", 3, 4, rank=2).query_factor.weight.shape == (2, 3)


def test_make_score_errors_name_expected_and_found():
    with pytest.raises(TypeError, match=r"(?s)parameter 'name'.*Actual value: 'cosine'.*Literal\['additive', 'dot', 'scaled_dot', 'bilinear'\]"):
        make_score("cosine", 3, 3)
    with pytest.raises(ValueError, match="needs hidden_dim.*found None"):
        make_score("additive", 3, 4)
    with pytest.raises(ValueError, match="query_dim == key_dim; found query_dim=3, key_dim=4"):
        make_score("dot", 3, 4)


def test_score_input_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'keys'.*Actual value: f32\[2,5,6\].*B S D"):
        DotScore()(torch.zeros(2, 3, 4), torch.zeros(2, 5, 6))
    with pytest.raises(TypeError, match=r"(?s)parameter 'keys'.*Actual value: f32\[3,5,4\].*B S D.*B=2"):
        ScaledDotScore()(torch.zeros(2, 3, 4), torch.zeros(3, 5, 4))
    with pytest.raises(TypeError, match=r"(?s)parameter 'queries'.*Actual value: f32\[3,4\].*B T D"):
        DotScore()(torch.zeros(3, 4), torch.zeros(2, 5, 4))
    with pytest.raises(ValueError, match=r"queries must have shape \(B, T, Dq\) with Dq = query_dim = 3; found \(1, 2, 4\)"):
        AdditiveScore(3, 4, 5)(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    with pytest.raises(TypeError, match=r"(?s)parameter 'queries'.*Actual value: i64\[1,2,3\].*Float\["):
        DotScore()(torch.zeros(1, 2, 3, dtype=torch.long), torch.zeros(1, 2, 3))
    with pytest.raises(TypeError, match="keys must have the dtype of queries \\(torch.float32\\); found torch.float64"):
        DotScore()(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="queries must have the dtype of parameters \\(torch.float32\\); found torch.float64"):
        BilinearScore(3, 3)(torch.zeros(1, 2, 3, dtype=torch.float64), torch.zeros(1, 2, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"(?s)parameter 'rank'.*Actual value: 0"):
        BilinearScore(3, 3, rank=0)
    with pytest.raises(ValueError, match=r"keys must have shape \(B, S, Dk\) with Dk = key_dim = 4; found \(1, 2, 3\)"):
        BilinearScore(3, 4, rank=2)(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3))


# ---------------------------------------------------------------------------
# masked_softmax
# ---------------------------------------------------------------------------


def test_masked_softmax_hand_computed():
    # softmax([0, ln 3]) = [1, 3] / 4
    weights = masked_softmax(torch.tensor([[[0.0, LN3]]], dtype=torch.float64))
    torch.testing.assert_close(weights, torch.tensor([[[0.25, 0.75]]], dtype=torch.float64))


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 4, 3, 5)])
def test_masked_softmax_without_lengths_equals_torch_softmax(shape):
    scores = randn(*shape, seed=5) * 3
    torch.testing.assert_close(masked_softmax(scores), torch.softmax(scores, dim=-1))


def test_masked_softmax_batch_lengths_zero_exactly_beyond_length():
    scores = randn(2, 3, 5, seed=6)
    weights = masked_softmax(scores, torch.tensor([2, 4]))
    assert (weights[0, :, 2:] == 0).all() and (weights[1, :, 4:] == 0).all()
    torch.testing.assert_close(weights[0, :, :2], torch.softmax(scores[0, :, :2], -1))
    torch.testing.assert_close(weights[1, :, :4], torch.softmax(scores[1, :, :4], -1))


def test_masked_softmax_per_query_lengths():
    scores = randn(2, 3, 4, seed=7)
    lengths = torch.tensor([[1, 2, 4], [3, 3, 2]], dtype=torch.int32)
    weights = masked_softmax(scores, lengths)
    for b in range(2):
        for q in range(3):
            n = int(lengths[b, q])
            assert (weights[b, q, n:] == 0).all()
            torch.testing.assert_close(weights[b, q, :n], torch.softmax(scores[b, q, :n], -1))


def test_masked_softmax_lengths_broadcast_over_heads():
    scores = randn(2, 3, 4, 5, seed=8)  # (B, H, Q, K)
    weights = masked_softmax(scores, torch.tensor([[1, 2, 3, 5], [5, 4, 3, 2]]))
    assert (weights[0, :, 0, 1:] == 0).all() and (weights[1, :, 3, 2:] == 0).all()
    torch.testing.assert_close(weights[1, :, 3, :2], torch.softmax(scores[1, :, 3, :2], -1))


def test_masked_softmax_zero_length_gives_zeros_not_nan():
    weights = masked_softmax(randn(2, 3, 4, seed=9), torch.tensor([0, 2]))
    assert (weights[0] == 0).all()
    torch.testing.assert_close(weights[1].sum(-1), torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("offset", [1e4, -1e4])
def test_masked_softmax_is_stable_for_large_scores(dtype, offset):
    # A naive exp(s) / sum(exp(s)) gives inf / inf or 0 / 0 = NaN here.
    scores = torch.tensor([[[offset, offset + LN3, offset - 1e4]]], dtype=dtype)
    weights = masked_softmax(scores, torch.tensor([3]))
    assert torch.isfinite(weights).all()
    # In float32 the spacing of numbers near 1e4 is ~1e-3, so ln 3 is only represented to ~1e-3.
    tolerance = 1e-3 if dtype == torch.float32 else 1e-9
    torch.testing.assert_close(weights, torch.tensor([[[0.25, 0.75, 0.0]]], dtype=dtype), atol=tolerance, rtol=0)


def test_masked_softmax_handles_minus_infinity():
    inf = float("inf")
    scores = torch.tensor([[[-inf, 0.0, LN3], [-inf, -inf, -inf]]])
    weights = masked_softmax(scores)
    torch.testing.assert_close(weights, torch.tensor([[[0.0, 0.25, 0.75], [0.0, 0.0, 0.0]]]))


def test_masked_softmax_errors_name_expected_and_found():
    scores = torch.zeros(2, 3, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'valid_lens'.*Actual value: f32\[2\].*IntegerDtype"):
        masked_softmax(scores, torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'valid_lens'.*Actual value: \[1, 2\]"):
        masked_softmax(scores, [1, 2])
    with pytest.raises(ValueError, match=r"\(B,\) = \(2,\) or \(B, Q\) = \(2, 3\).*found \(3,\)"):
        masked_softmax(scores, torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'valid_lens'.*Actual value: i64\[2,4\].*Q=3"):
        masked_softmax(scores, torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="must be >= 0; found minimum -1"):
        masked_softmax(scores, torch.tensor([-1, 2]))
    with pytest.raises(ValueError, match="K = 4; found maximum 5"):
        masked_softmax(scores, torch.tensor([5, 2]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'scores'.*Actual value: i64\[2,3\]"):
        masked_softmax(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="found NaN or \\+inf"):
        masked_softmax(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'scores'.*Actual value: f32\[3\].*\*batch Q K"):
        masked_softmax(torch.zeros(3))


def test_masked_softmax_ignores_nan_at_masked_positions():
    weights = masked_softmax(torch.tensor([[[0.0, LN3, float("nan")]]]), torch.tensor([2]))
    torch.testing.assert_close(weights, torch.tensor([[[0.25, 0.75, 0.0]]]))


# ---------------------------------------------------------------------------
# Soft attention pooling
# ---------------------------------------------------------------------------


def test_attention_hand_computed_example():
    # One query, two keys: dot scores [0, ln 3] give weights [0.25, 0.75].
    queries = torch.tensor([[[1.0, 0.0]]], dtype=torch.float64)  # (1, 1, 2)
    keys = torch.tensor([[[0.0, 5.0], [LN3, 7.0]]], dtype=torch.float64)  # (1, 2, 2)
    values = torch.tensor([[[10.0, 0.0], [20.0, 4.0]]], dtype=torch.float64)  # (1, 2, 2)
    output, weights = attention(queries, keys, values, DotScore())
    torch.testing.assert_close(weights, torch.tensor([[[0.25, 0.75]]], dtype=torch.float64))
    torch.testing.assert_close(output, torch.tensor([[[17.5, 3.0]]], dtype=torch.float64))
    # temperature 2 halves the scores: weights proportional to [1, sqrt(3)].
    _, tempered = attention(queries, keys, values, DotScore(), temperature=2.0)
    r3 = math.sqrt(3)
    torch.testing.assert_close(tempered, torch.tensor([[[1 / (1 + r3), r3 / (1 + r3)]]], dtype=torch.float64))


def test_attention_with_values_equal_keys_is_weighted_average_of_inputs():
    x, query = randn(1, 4, 3, seed=10), randn(1, 1, 3, seed=11)
    output, weights = attention(query, x, x, ScaledDotScore())
    alpha = torch.softmax(torch.stack([query[0, 0] @ x[0, i] / math.sqrt(3) for i in range(4)]), 0)
    torch.testing.assert_close(weights[0, 0], alpha)
    torch.testing.assert_close(output[0, 0], sum(alpha[i] * x[0, i] for i in range(4)))


def test_attention_respects_valid_lengths():
    queries, keys, values = randn(2, 3, 4, seed=12), randn(2, 5, 4, seed=13), randn(2, 5, 2, seed=14)
    output, weights = attention(queries, keys, values, DotScore(), valid_lens=torch.tensor([2, 0]))
    assert (weights[0, :, 2:] == 0).all()
    assert (weights[1] == 0).all() and (output[1] == 0).all()
    expected, _ = attention(queries[:1], keys[:1, :2], values[:1, :2], DotScore())
    torch.testing.assert_close(output[:1], expected)


def test_attention_gradcheck_additive():
    score = AdditiveScore(3, 4, 5).double()
    queries = randn(2, 2, 3, seed=15).requires_grad_()
    keys = randn(2, 4, 4, seed=16).requires_grad_()
    values = randn(2, 4, 2, seed=17).requires_grad_()
    lengths = torch.tensor([3, 0])
    assert torch.autograd.gradcheck(
        lambda q, k, v: attention(q, k, v, score, valid_lens=lengths, temperature=0.7),
        (queries, keys, values),
    )


def test_attention_errors_name_expected_and_found():
    q, k, v = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)
    with pytest.raises(TypeError, match=r"(?s)parameter 'values'.*Actual value: f32\[2,4,6\].*B S Dv.*S=5"):
        attention(q, k, torch.zeros(2, 4, 6), DotScore())
    with pytest.raises(TypeError, match=r"(?s)parameter 'temperature'.*Actual value: 0"):
        attention(q, k, v, DotScore(), temperature=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'temperature'.*Actual value: -1.5"):
        attention(q, k, v, DotScore(), temperature=-1.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'temperature'.*Actual value: '1'"):
        attention(q, k, v, DotScore(), temperature="1")
    with pytest.raises(ValueError, match=r"\(B, T, S\) = \(2, 3, 5\); found \(2, 5, 3\)"):
        attention(q, k, v, lambda a, b: torch.zeros(2, 5, 3))
    with pytest.raises(TypeError, match=r"values must have the dtype of queries \(torch.float32\); found torch.float64"):
        attention(q, k, v.double(), DotScore())
    with pytest.raises(TypeError, match=r"(?s)parameter 'score'.*Actual value: 'dot'.*Callable"):
        attention(q, k, v, "dot")


# ---------------------------------------------------------------------------
# Hard attention
# ---------------------------------------------------------------------------


def test_hard_attention_argmax_selects_most_likely_key():
    score = AdditiveScore(3, 3, 4).double()
    queries, keys, values = randn(2, 4, 3, seed=18), randn(2, 5, 3, seed=19), randn(2, 5, 2, seed=20)
    output, weights = hard_attention(queries, keys, values, score)
    _, soft = attention(queries, keys, values, score)
    chosen = soft.argmax(-1)  # (B, T)
    torch.testing.assert_close(weights, F.one_hot(chosen, 5).double())
    for b in range(2):
        for t in range(4):
            assert torch.equal(output[b, t], values[b, chosen[b, t]])


def test_hard_attention_sampling_frequencies_match_soft_weights():
    # Each of n identical queries draws one key from p. A category's empirical frequency has
    # standard error sqrt(p (1 - p) / n) (<= 0.0035 for n = 20000); allowing 5 standard errors
    # makes a false failure of a correct sampler about a 1-in-a-million event (the seed fixes it anyway).
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    n = 20000
    scores = torch.log(p).expand(1, n, 4)
    values = torch.arange(4, dtype=torch.float64).reshape(1, 4, 1)
    output, weights = hard_attention(
        torch.zeros(1, n, 1, dtype=torch.float64), torch.zeros(1, 4, 1, dtype=torch.float64), values,
        fixed_score(scores), mode="sample", generator=torch.Generator().manual_seed(0),
    )
    frequencies = weights[0].mean(0)
    assert (frequencies - p).abs().max() < 5 * torch.sqrt(p * (1 - p) / n).max()
    # Every output is the value row of the sampled key.
    torch.testing.assert_close(output[0, :, 0], weights[0].argmax(-1).double())


def test_hard_attention_sampling_is_reproducible_and_respects_masks():
    queries, keys, values = randn(2, 50, 3, seed=21), randn(2, 6, 3, seed=22), randn(2, 6, 2, seed=23)
    lengths = torch.tensor([2, 0])

    def run(seed):
        generator = torch.Generator().manual_seed(seed)
        return hard_attention(queries, keys, values, DotScore(), mode="sample", valid_lens=lengths, generator=generator)

    output, weights = run(1)
    assert torch.equal(weights, run(1)[1])
    assert (weights[0].sum(-1) == 1).all() and (weights[0, :, 2:] == 0).all()
    assert (weights[1] == 0).all() and (output[1] == 0).all()
    selected = weights[0].argmax(-1)
    torch.testing.assert_close(output[0], values[0, selected])


def test_hard_attention_passes_no_gradient_to_queries_or_keys():
    queries = randn(1, 2, 3, seed=24).requires_grad_()
    keys = randn(1, 4, 3, seed=25).requires_grad_()
    values = randn(1, 4, 2, seed=26).requires_grad_()
    output, weights = hard_attention(queries, keys, values, DotScore())
    assert not weights.requires_grad
    grad_q, grad_k, grad_v = torch.autograd.grad(output.sum(), (queries, keys, values), allow_unused=True)
    assert grad_q is None and grad_k is None
    torch.testing.assert_close(grad_v[0].sum(-1), 2 * weights[0].sum(0))  # each selection adds 1 per value feature


def test_hard_attention_rejects_unknown_mode():
    with pytest.raises(TypeError, match=r"(?s)parameter 'mode'.*Actual value: 'soft'.*Literal\['argmax', 'sample'\]"):
        hard_attention(torch.zeros(1, 1, 2), torch.zeros(1, 3, 2), torch.zeros(1, 3, 2), DotScore(), mode="soft")


# ---------------------------------------------------------------------------
# Scaled dot-product attention
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (2, 2, 3, 5, 4)])  # (..., T, S, D)
def test_sdpa_matches_torch(dtype, shape):
    *leading, t, s, d = shape
    q = randn(*leading, t, d, dtype=dtype, seed=27)
    k = randn(*leading, s, d, dtype=dtype, seed=28)
    v = randn(*leading, s, 6, dtype=dtype, seed=29)
    output, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v), **TOLERANCES[dtype])
    expected_weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d), dim=-1)
    torch.testing.assert_close(weights, expected_weights, **TOLERANCES[dtype])


@pytest.mark.parametrize("mask_shape", [(2, 3, 5), (3, 5), (2, 1, 5), (5,)])
def test_sdpa_with_mask_matches_torch(mask_shape):
    q, k, v = randn(2, 3, 4, seed=30), randn(2, 5, 4, seed=31), randn(2, 5, 6, seed=32)
    mask = torch.rand(mask_shape, generator=torch.Generator().manual_seed(33)) > 0.4
    mask[..., 0] = True  # keep every row non-empty; torch returns NaN for empty rows
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert (weights[~mask.expand(2, 3, 5)] == 0).all()


def test_sdpa_fully_masked_row_gives_zero_weights_and_output():
    q, k, v = randn(2, 3, 4, seed=34), randn(2, 5, 4, seed=35), randn(2, 5, 6, seed=36)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[1, 2] = False
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert (weights[1, 2] == 0).all() and (output[1, 2] == 0).all()
    reference, _ = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(output[0], reference[0])


def test_sdpa_gradcheck_with_mask():
    q = randn(2, 2, 3, 4, seed=37).requires_grad_()
    k = randn(2, 2, 5, 4, seed=38).requires_grad_()
    v = randn(2, 2, 5, 3, seed=39).requires_grad_()
    mask = torch.tensor([[True, True, False, True, False], [False] * 5, [True] * 5])  # (T, S), one empty row
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, mask), (q, k, v))


@pytest.mark.parametrize("need_weights", [True, False])
def test_sdpa_errors_name_expected_and_found(need_weights):
    q, k, v = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)

    def sdpa(*args, **kwargs):
        return scaled_dot_product_attention(*args, **kwargs, need_weights=need_weights)

    with pytest.raises(TypeError, match=r"(?s)parameter 'mask'.*Actual value: i64\[2,3,5\].*Bool\["):
        sdpa(q, k, v, mask=torch.ones(2, 3, 5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'mask'.*Actual value: f32\[3,5\]"):
        sdpa(q, k, v, mask=torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"broadcastable to \(\.\.\., T, S\) = \(2, 3, 5\); found \(3, 4\)"):
        sdpa(q, k, v, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"(?s)parameter 'k'.*Actual value: f32\[2,5,3\].*B \*heads S D.*D=4"):
        sdpa(q, torch.zeros(2, 5, 3), v)
    with pytest.raises(TypeError, match=r"(?s)parameter 'v'.*Actual value: f32\[2,4,6\].*B \*heads S Dv.*S=5"):
        sdpa(q, k, torch.zeros(2, 4, 6))
    with pytest.raises(TypeError, match=r"(?s)parameter 'q'.*Actual value: f32\[3,4\].*B \*heads T D"):
        sdpa(torch.zeros(3, 4), k, v)
    with pytest.raises(TypeError, match=r"v must have the dtype of q \(torch.float32\); found torch.float64"):
        sdpa(q, k, v.double())


def test_sdpa_need_weights_must_be_a_bool():
    q, k, v = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)
    with pytest.raises(TypeError, match=r"(?s)parameter 'need_weights'.*Actual value: 0.*bool"):
        scaled_dot_product_attention(q, k, v, need_weights=0)


def _grads(output, *inputs):
    """Gradients of a fixed random projection of ``output`` with respect to ``inputs``."""
    direction = torch.randn(output.shape, dtype=output.dtype, generator=torch.Generator().manual_seed(99))
    return torch.autograd.grad((output * direction).sum(), inputs)


def _random_mask(shape, seed, empty_row):
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.4
    if empty_row:
        mask[(0,) * (len(shape) - 1)] = False  # one query with nothing to attend to
    return mask


@pytest.mark.parametrize("leading", [(2,), (2, 3)])  # (B,) or (B, H)
@pytest.mark.parametrize("mask_kind", [None, "causal", "random", "random with an empty row", "keys", "scalar"])
def test_sdpa_without_weights_equals_the_written_out_path(leading, mask_kind):
    t, s = (5, 5) if mask_kind == "causal" else (4, 6)
    q = randn(*leading, t, 3, seed=50).requires_grad_()
    k = randn(*leading, s, 3, seed=51).requires_grad_()
    v = randn(*leading, s, 3, seed=52).requires_grad_()  # Dv = D: four axes reach FlashAttention
    mask = {
        None: None,
        "causal": torch.ones(t, s, dtype=torch.bool).tril(),  # (T, S)
        "random": _random_mask((*leading, t, s), 53, empty_row=False),
        "random with an empty row": _random_mask((*leading, t, s), 54, empty_row=True),
        "keys": torch.arange(s) < 4,  # (S,): the last keys are padding
        "scalar": torch.tensor(True),
    }[mask_kind]
    reference, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    fast, no_weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False)
    assert no_weights is None and weights is not None
    torch.testing.assert_close(fast, reference, **TOLERANCES[torch.float64])
    for fast_grad, reference_grad in zip(_grads(fast, q, k, v), _grads(reference, q, k, v)):
        torch.testing.assert_close(fast_grad, reference_grad, **TOLERANCES[torch.float64])
    if mask_kind == "causal":
        torch.testing.assert_close(fast, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    if mask_kind == "random with an empty row":
        assert (fast[(0,) * len(leading)][0] == 0).all()


def test_sdpa_without_weights_is_torchs_fused_kernel():
    # Bit for bit: the fast path did not fall back to the written-out one (float32 rounds differently).
    q, k, v = (randn(2, 3, 16, 8, dtype=torch.float32, seed=seed) for seed in (55, 56, 57))
    mask = _random_mask((2, 1, 16, 16), 58, empty_row=False)
    assert torch._fused_sdp_choice(q, k, v, attn_mask=mask) == 1  # SDPBackend.FLASH_ATTENTION
    fast, _ = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=False)
    torch.testing.assert_close(fast, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=0, rtol=0)
    reference, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    assert not torch.equal(fast, reference)


def test_sdpa_without_weights_falls_back_where_torch_gives_nan():
    q, k, v = randn(2, 3, 4, seed=59), randn(2, 5, 4, seed=60), randn(2, 5, 6, seed=61)
    mask = torch.ones(2, 3, 5, dtype=torch.bool)
    mask[:, :, 4] = False
    k_nan = k.clone()
    k_nan[:, 4] = float("nan")  # NaN scores, but only at the masked key: the written-out path ignores them
    fast, _ = scaled_dot_product_attention(q, k_nan, v, mask=mask, need_weights=False)
    reference, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.isnan(F.scaled_dot_product_attention(q, k_nan, v, attn_mask=mask)).any()  # torch's kernel alone
    torch.testing.assert_close(fast, reference, atol=0, rtol=0)
    q_inf = q.clone()
    q_inf[0, 0, 0] = float("inf")  # +inf and NaN scores at attended keys
    for need_weights in (True, False):
        with pytest.raises(ValueError, match=r"scores must be finite or -inf at attended positions; found NaN or \+inf"):
            scaled_dot_product_attention(q_inf, k, v, need_weights=need_weights)


# ---------------------------------------------------------------------------
# Multi-head attention against torch.nn.MultiheadAttention
# ---------------------------------------------------------------------------


def torch_mha(embed_dim=8, num_heads=2, bias=True, kdim=None, vdim=None, batch_first=True, dtype=torch.float32):
    reference = torch.nn.MultiheadAttention(
        embed_dim, num_heads, bias=bias, kdim=kdim, vdim=vdim, batch_first=batch_first, dtype=dtype
    )
    generator = torch.Generator().manual_seed(40)
    with torch.no_grad():  # torch initialises biases to 0; random ones make the copy test meaningful
        for parameter in reference.parameters():
            parameter.normal_(0, 0.5, generator=generator)
    return reference.eval()


def run_torch(reference, query, key, value, **kwargs):
    """Call torch's module with batch-first inputs whatever its own batch_first setting."""
    if not reference.batch_first:
        query, key, value = (x.transpose(0, 1) for x in (query, key, value))
    output, weights = reference(query, key, value, **kwargs)
    return (output if reference.batch_first else output.transpose(0, 1)), weights


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("kdim,vdim", [(None, None), (5, 3)])
def test_mha_matches_torch(dtype, batch_first, bias, kdim, vdim):
    reference = torch_mha(bias=bias, kdim=kdim, vdim=vdim, batch_first=batch_first, dtype=dtype)
    ours = MultiHeadAttention.from_torch(reference)
    query = randn(2, 4, 8, dtype=dtype, seed=41)
    key = randn(2, 6, kdim or 8, dtype=dtype, seed=42)
    value = randn(2, 6, vdim or 8, dtype=dtype, seed=43)
    with torch.no_grad():
        expected, expected_weights = run_torch(reference, query, key, value)
        _, expected_per_head = run_torch(reference, query, key, value, average_attn_weights=False)
        output, weights = ours(query, key, value)
        _, per_head = ours(query, key, value, average_weights=False)
    assert per_head.shape == (2, 2, 4, 6)
    torch.testing.assert_close(output, expected, **TOLERANCES[dtype])
    torch.testing.assert_close(weights, expected_weights, **TOLERANCES[dtype])
    torch.testing.assert_close(per_head, expected_per_head, **TOLERANCES[dtype])


def test_mha_masks_match_torch_key_padding_and_attn_mask():
    reference = torch_mha(embed_dim=12, num_heads=3)
    ours = MultiHeadAttention(12, 3).load_torch_weights(reference)
    query, key, value = (randn(2, length, 12, dtype=torch.float32, seed=seed) for length, seed in ((4, 44), (5, 45), (5, 46)))
    lengths = torch.tensor([3, 5])
    key_padding_mask = torch.arange(5) >= lengths[:, None]  # (B, S); torch: True = ignore
    causal = torch.ones(4, 5, dtype=torch.bool).triu(1)  # (T, S); torch: True = not allowed
    with torch.no_grad():
        expected, expected_weights = reference(query, key, value, key_padding_mask=key_padding_mask, attn_mask=causal)
        # Our convention is the opposite (True = may attend), hence the negations.
        via_mask = ours(query, key, value, mask=~key_padding_mask[:, None, :] & ~causal)
        via_lengths = ours(query, key, value, mask=~causal, valid_lens=lengths)
    for output, weights in (via_mask, via_lengths):
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=1e-5)
    assert (via_lengths[1][0, :, 3:] == 0).all()


@pytest.mark.parametrize("masking", ["none", "mask and valid_lens", "causal"])
def test_mha_without_weights_equals_the_written_out_path_and_torch(masking):
    reference = torch_mha(embed_dim=12, num_heads=3, dtype=torch.float64)
    ours = MultiHeadAttention.from_torch(reference)
    query = randn(2, 4, 12, seed=62).requires_grad_()
    key, value = randn(2, 5, 12, seed=63), randn(2, 5, 12, seed=64)
    causal = torch.ones(4, 5, dtype=torch.bool).tril()  # (T, S); True = may attend
    lengths = torch.tensor([3, 5])
    options, torch_options = {
        "none": ({}, {}),
        "mask and valid_lens": (dict(mask=causal, valid_lens=lengths),
                                dict(attn_mask=~causal, key_padding_mask=torch.arange(5) >= lengths[:, None])),
        "causal": (dict(mask=causal), dict(attn_mask=~causal)),
    }[masking]
    output, weights = ours(query, key, value, **options)
    fast, no_weights = ours(query, key, value, **options, need_weights=False)
    expected, _ = reference(query, key, value, **torch_options, need_weights=False)
    assert no_weights is None and weights.shape == (2, 4, 5)
    for found in (fast, expected):
        torch.testing.assert_close(found, output, **TOLERANCES[torch.float64])
    parameters = (query, *ours.parameters())
    for fast_grad, reference_grad in zip(_grads(fast, *parameters), _grads(output, *parameters)):
        torch.testing.assert_close(fast_grad, reference_grad, **TOLERANCES[torch.float64])
    with pytest.raises(TypeError, match=r"(?s)parameter 'need_weights'.*Actual value: 'no'.*bool"):
        ours(query, key, value, need_weights="no")


def test_mha_fully_masked_row_gives_zero_weights():
    ours = MultiHeadAttention.from_torch(torch_mha())
    mask = torch.ones(1, 3, 4, dtype=torch.bool)
    mask[0, 1] = False
    query, key, value = (randn(1, length, 8, dtype=torch.float32, seed=seed) for length, seed in ((3, 47), (4, 48), (4, 49)))
    output, weights = ours(query, key, value, mask=mask, average_weights=False)
    assert (weights[0, :, 1] == 0).all() and torch.isfinite(output).all()
    # Zero head outputs leave only the output projection's bias.
    torch.testing.assert_close(output[0, 1], ours.out_proj.bias.detach())


def test_mha_errors_name_expected_and_found():
    with pytest.raises(ValueError, match="embed_dim=10, num_heads=3"):
        MultiHeadAttention(10, 3)
    ours = MultiHeadAttention(8, 2, kdim=5)
    with pytest.raises(ValueError, match=r"key must have shape \(B, S, Ek\) with S >= 1, Ek = kdim = 5; found \(2, 4, 8\)"):
        ours(torch.zeros(2, 3, 8), torch.zeros(2, 4, 8), torch.zeros(2, 4, 8))
    with pytest.raises(ValueError, match=r"key must have shape \(B, S, Ek\) with S >= 1, .*; found \(2, 0, 5\)"):
        ours(torch.zeros(2, 3, 8), torch.zeros(2, 0, 5), torch.zeros(2, 0, 8))  # returned zeros
    with pytest.raises(ValueError, match=r"k must hold at least one key \(S >= 1\); found \(2, 0, 4\)"):
        scaled_dot_product_attention(torch.zeros(2, 3, 4), torch.zeros(2, 0, 4), torch.zeros(2, 0, 4))
    with pytest.raises(ValueError, match=r"projected must have shape \(B, L, E\) .*; found \(3, 8\)"):
        ours.split_heads(torch.zeros(3, 8))  # was reshaped silently
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, E\) with E = embed_dim = 8; found \(2, 3, 7\)"):
        ours(torch.zeros(2, 3, 7), torch.zeros(2, 4, 5), torch.zeros(2, 4, 8))
    with pytest.raises(TypeError, match=r"(?s)parameter 'value'.*Actual value: f32\[2,3,8\].*B S Ev.*S=4"):
        ours(torch.zeros(2, 3, 8), torch.zeros(2, 4, 5), torch.zeros(2, 3, 8))
    with pytest.raises(ValueError, match=r"value must have shape \(B, S, Ev\) with Ev = vdim = 8; found \(2, 4, 6\)"):
        ours(torch.zeros(2, 3, 8), torch.zeros(2, 4, 5), torch.zeros(2, 4, 6))
    with pytest.raises(ValueError, match=r"projected must have shape \(B, L, E\) with E = embed_dim = 8; found \(2, 3, 6\)"):
        ours.split_heads(torch.zeros(2, 3, 6))
    with pytest.raises(ValueError, match=r"heads must have shape \(B, H, L, Dh\) = \(B, 2, L, 4\); found \(2, 4, 3, 2\)"):
        ours.merge_heads(torch.zeros(2, 4, 3, 2))
    with pytest.raises(TypeError, match=r"query must have the dtype of parameters \(torch.float32\); found torch.float64"):
        ours(torch.zeros(2, 3, 8, dtype=torch.float64), torch.zeros(2, 4, 5), torch.zeros(2, 4, 8))
    with pytest.raises(ValueError, match=r"broadcastable to \(B, T, S\) = \(2, 3, 4\); found \(3, 3\)"):
        ours(torch.zeros(2, 3, 8), torch.zeros(2, 4, 5), torch.zeros(2, 4, 8), mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"(?s)parameter 'mha'.*Actual value: Linear.*MultiheadAttention"):
        MultiHeadAttention.from_torch(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="add_bias_kv=True"):
        MultiHeadAttention.from_torch(torch.nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match=r"mha must have \(embed_dim, num_heads, kdim, vdim, bias\) = \(8, 2, 8, 8, True\); found \(8, 4, 8, 8, True\)"):
        MultiHeadAttention(8, 2).load_torch_weights(torch.nn.MultiheadAttention(8, 4))


# ---------------------------------------------------------------------------
# Properties (hypothesis)
# ---------------------------------------------------------------------------

small = st.integers(min_value=1, max_value=4)
score_values = st.floats(min_value=-50, max_value=50, allow_nan=False)


@st.composite
def scores_and_lengths(draw):
    batch, rows, keys = draw(small), draw(small), draw(small)
    scores = draw(arrays(np.float64, (batch, rows, keys), elements=score_values))
    lengths = draw(arrays(np.int64, (batch, rows), elements=st.integers(1, keys)))
    return torch.from_numpy(scores), torch.from_numpy(lengths)


@FAST
@given(scores_and_lengths())
def test_property_rows_sum_to_one(case):
    scores, lengths = case
    weights = masked_softmax(scores, lengths)
    torch.testing.assert_close(weights.sum(-1), torch.ones(lengths.shape, dtype=torch.float64))
    assert (weights >= 0).all()


@FAST
@given(scores_and_lengths(), st.data())
def test_property_adding_a_constant_to_a_row_changes_nothing(case, data):
    scores, lengths = case
    shifts = data.draw(arrays(np.float64, scores.shape[:-1] + (1,), elements=st.floats(-1e3, 1e3)))
    shifted = scores + torch.from_numpy(shifts)
    torch.testing.assert_close(masked_softmax(shifted, lengths), masked_softmax(scores, lengths), atol=1e-10, rtol=1e-8)


@FAST
@given(small, small, small, st.randoms(use_true_random=False), st.sampled_from(["dot", "scaled_dot", "additive", "bilinear"]))
def test_property_permuting_keys_and_values_permutes_weights_only(batch, num_queries, num_keys, rng, name):
    with torch.random.fork_rng():  # seed the parameter initialisation without leaking global state
        torch.manual_seed(rng.randint(0, 2**31))
        score = make_score(name, 3, 3, hidden_dim=4, rank=2).double()
    queries = randn(batch, num_queries, 3, seed=rng.randint(0, 2**31))
    keys = randn(batch, num_keys, 3, seed=rng.randint(0, 2**31))
    values = randn(batch, num_keys, 2, seed=rng.randint(0, 2**31))
    permutation = torch.tensor(rng.sample(range(num_keys), num_keys))
    output, weights = attention(queries, keys, values, score)
    permuted_output, permuted_weights = attention(queries, keys[:, permutation], values[:, permutation], score)
    torch.testing.assert_close(permuted_output, output)
    torch.testing.assert_close(permuted_weights, weights[..., permutation])
    sdpa_output, sdpa_weights = scaled_dot_product_attention(queries, keys, values)
    permuted = scaled_dot_product_attention(queries, keys[:, permutation], values[:, permutation])
    torch.testing.assert_close(permuted[0], sdpa_output)
    torch.testing.assert_close(permuted[1], sdpa_weights[..., permutation])


@FAST
@given(small, small, small, st.randoms(use_true_random=False))
def test_property_fully_masked_rows_give_zeros(batch, num_queries, num_keys, rng):
    generator = torch.Generator().manual_seed(rng.randint(0, 2**31))
    q, k, v = (torch.randn(batch, length, 3, generator=generator) for length in (num_queries, num_keys, num_keys))
    mask = torch.rand(batch, num_queries, num_keys, generator=generator) > 0.5
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    empty = ~mask.any(-1)  # (B, T)
    assert (weights[empty] == 0).all() and (output[empty] == 0).all()
    torch.testing.assert_close(weights[~empty].sum(-1), torch.ones(int((~empty).sum())))
    assert (weights[~mask] == 0).all()
    lengths = torch.tensor([rng.randint(0, num_keys) for _ in range(batch)])
    soft = masked_softmax(torch.randn(batch, num_queries, num_keys, generator=generator), lengths)
    assert (soft[lengths == 0] == 0).all() and not torch.isnan(soft).any()


@FAST
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 6), keys=st.integers(1, 7), empty_rows=st.booleans())
def test_fused_softmax_equals_the_written_out_reference(seed, rows, keys, empty_rows):
    scores = randn(2, rows, keys, seed=seed) * 10
    keep = torch.rand(2, rows, keys, generator=torch.Generator().manual_seed(seed)) < 0.6
    keep[..., 0] = True  # every row attends somewhere: the fused path answers
    if empty_rows:
        keep[0, 0] = False  # one row with nothing to attend to: the reference answers
    expected = _softmax_reference(scores.masked_fill(~keep, float("-inf")))
    torch.testing.assert_close(_softmax_over_kept(scores, keep), expected, atol=1e-12, rtol=1e-12)
    assert (expected[0, 0] == 0).all() if empty_rows else torch.allclose(expected.sum(-1), torch.ones(2, rows, dtype=torch.float64))
