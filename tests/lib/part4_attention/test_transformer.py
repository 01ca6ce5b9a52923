"""Tests for lib/part4_attention/transformer_blocks.py and lib/part4_attention/transformer.py.

References: the formulas written out element by element (positional encoding,
self-attention in the notes' column convention, layer norm, the FFN), PyTorch's
own ``TransformerEncoderLayer`` / ``TransformerDecoderLayer`` / ``LayerNorm`` /
``LSTM`` / ``Conv1d`` with copied weights, hypothesis properties (causality,
permutation equivariance, the rotation of positional encodings) and binomial
statistics for BERT's masking.
"""

import dataclasses
import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from lib.part4_attention.attention import MultiHeadAttention
from lib.part3_words.decoding import greedy_search
from lib.part4_attention.seq2seq import Seq2SeqConfig, build_seq2seq
from lib.part4_attention.positional import offset_rotation, positional_encoding
from lib.part4_attention.transformer import (
    DecoderOnlyLM, Seq2SeqTransformer, TransformerConfig, TransformerEmbedding, critical_path_length,
    teacher_forced_loss,
)
from lib.part4_attention.transformer_blocks import (
    DecoderBlock, Dropout, EncoderBlock, FeedForward, KVCache, LayerNorm, Residual, SelfAttention, causal_mask,
)

FAST = settings(max_examples=25, deadline=None, database=None)
TOLERANCES = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-10, rtol=1e-10)}


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def seeded(module_factory, seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return module_factory().to(dtype)


# ---------------------------------------------------------------------------
# Positional encoding.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("max_len", "d_model"), [(1, 2), (7, 4), (50, 16), (20, 34)])
def test_positional_encoding_matches_the_formula_entry_by_entry(max_len, d_model):
    encoding = positional_encoding(max_len, d_model, dtype=torch.float64)
    assert encoding.shape == (max_len, d_model) and encoding.dtype == torch.float64
    for t in range(max_len):
        for i in range(d_model // 2):
            angle = t / 10000 ** (2 * i / d_model)
            assert encoding[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert encoding[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_positional_encoding_hand_computed_rows():
    # d = 4: frequencies 1 and 1/100. Row 0 is (0, 1, 0, 1); row 1 is (sin 1, cos 1, sin .01, cos .01).
    encoding = positional_encoding(3, 4, dtype=torch.float64)
    torch.testing.assert_close(encoding[0], torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64))
    expected = [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]
    torch.testing.assert_close(encoding[1], torch.tensor(expected, dtype=torch.float64))
    assert positional_encoding(3, 4).dtype == torch.float32


def test_positional_encoding_errors_name_expected_and_found():
    with pytest.raises(ValueError, match="d_model must be even .*found 5"):
        positional_encoding(10, 5)
    with pytest.raises(TypeError, match="(?s)parameter 'max_len'.*Actual value: 0.*is_at_least_1"):
        positional_encoding(0, 4)
    with pytest.raises(TypeError, match="(?s)parameter 'd_model'.*Actual value: 4.0.*Integral"):
        positional_encoding(3, 4.0)
    with pytest.raises(TypeError, match="(?s)parameter 'dtype'.*Actual value: torch.int64.*is_a_float_dtype"):
        positional_encoding(3, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="d_model must be even"):
        offset_rotation(2, 7)
    with pytest.raises(TypeError, match="(?s)parameter 'offset'.*Actual value: 1.5.*Integral"):
        offset_rotation(1.5, 4)


@pytest.mark.parametrize("d_model", [2, 8, 32])
def test_for_every_offset_one_fixed_rotation_maps_every_position_to_its_shift(d_model):
    max_len = 60
    encoding = positional_encoding(max_len, d_model, dtype=torch.float64)  # (T, D)
    for offset in range(-20, 21):
        rotation = offset_rotation(offset, d_model, dtype=torch.float64)  # (D, D)
        start, stop = max(0, -offset), min(max_len, max_len - offset)
        shifted = encoding[start:stop] @ rotation.T  # row convention of R @ P[t]
        torch.testing.assert_close(shifted, encoding[start + offset : stop + offset], atol=1e-9, rtol=0)


def test_offset_rotation_is_block_diagonal_with_two_by_two_rotations():
    rotation = offset_rotation(3, 8, dtype=torch.float64)
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(8, dtype=torch.float64))
    for i in range(4):
        block = rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2]
        angle = 3 / 10000 ** (2 * i / 8)
        expected = [[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]]
        torch.testing.assert_close(block, torch.tensor(expected, dtype=torch.float64))
        off_block = rotation[2 * i : 2 * i + 2].clone()
        off_block[:, 2 * i : 2 * i + 2] = 0
        assert (off_block == 0).all()
    # Rotations compose: shifting by 3 then by -3 is the identity.
    torch.testing.assert_close(offset_rotation(-3, 8, dtype=torch.float64) @ rotation, torch.eye(8, dtype=torch.float64))


@FAST
@given(st.integers(1, 16), st.integers(0, 200), st.integers(-100, 100))
def test_property_rotation_depends_on_the_offset_only(half, t, offset):
    d_model = 2 * half
    encoding = positional_encoding(t + abs(offset) + 1 + max(0, -offset), d_model, dtype=torch.float64)
    t = t + max(0, -offset)  # keep t + offset >= 0
    rotation = offset_rotation(offset, d_model, dtype=torch.float64)
    torch.testing.assert_close(rotation @ encoding[t], encoding[t + offset], atol=1e-9, rtol=0)


def test_dot_product_of_two_encodings_depends_on_their_offset_only():
    d_model, max_len = 16, 80
    encoding = positional_encoding(max_len, d_model, dtype=torch.float64)
    frequencies = torch.tensor([10000 ** (-2 * i / d_model) for i in range(d_model // 2)], dtype=torch.float64)
    for offset in range(0, 30):
        dots = (encoding[: max_len - offset] * encoding[offset:]).sum(-1)  # P[t] . P[t + offset] for every t
        expected = torch.cos(offset * frequencies).sum()  # sum over i = 0 .. d/2 - 1
        torch.testing.assert_close(dots, expected.expand_as(dots))


def test_pe_dot_product_sums_j_from_0_to_d_over_2_minus_1_not_to_d_over_2():
    # Errata (note 002): p_m . p_n = sum_{j=0}^{d/2 - 1} cos((m - n) w_j); the note's upper limit d/2 adds a term.
    d_model = 8
    encoding = positional_encoding(20, d_model, dtype=torch.float64)

    def dot_by_the_formula(m, n, last):
        return sum(math.cos((m - n) / 10000 ** (2 * j / d_model)) for j in range(last + 1))

    for m, n in [(0, 0), (5, 5), (3, 11), (17, 2)]:
        actual = float(encoding[m] @ encoding[n])
        assert actual == pytest.approx(dot_by_the_formula(m, n, d_model // 2 - 1), abs=1e-12)
        assert abs(actual - dot_by_the_formula(m, n, d_model // 2)) > 0.5  # the note's sum is off
    # At offset 0 each pair gives sin^2 + cos^2 = 1: exactly d/2, not d/2 + 1.
    torch.testing.assert_close((encoding * encoding).sum(-1), torch.full((20,), d_model / 2, dtype=torch.float64))


# ---------------------------------------------------------------------------
# Self-attention.
# ---------------------------------------------------------------------------


def test_self_attention_is_v_softmax_kt_q_over_sqrt_dk_with_q_k_v_all_from_h():
    # Errata (notes 000, 003): self-att is V softmax(K^T Q / sqrt(d_k)) in the column convention,
    # with Q, K and V all computed from the same H -- not softmax(K^T Q / sqrt(d_h) V) with K, V from X.
    d_h, d_k, d_v, length = 6, 3, 4, 5
    attention = seeded(lambda: SelfAttention(d_h, d_k, d_v))
    H = randn(d_h, length, seed=1)  # columns are positions, as in the notes
    W_q, W_k, W_v = attention.query_proj.weight, attention.key_proj.weight, attention.value_proj.weight
    Q, K, V = W_q @ H, W_k @ H, W_v @ H  # (d_k, T), (d_k, T), (d_v, T)
    column_formula = V @ torch.softmax(K.T @ Q / math.sqrt(d_k), dim=0)  # softmax over each column
    with torch.no_grad():
        output, weights = attention(H.T[None])  # rows are positions: (1, T, d_h)
    torch.testing.assert_close(output[0].T, column_formula)
    torch.testing.assert_close(weights[0].T, torch.softmax(K.T @ Q / math.sqrt(d_k), dim=0))
    # The note's formula does not even have matching shapes: (T x T) times (d_v x T).
    with pytest.raises(RuntimeError):
        torch.softmax(K.T @ Q / math.sqrt(d_h) @ V, dim=0)
    # Dividing by sqrt(d_h) (the input size) instead of sqrt(d_k) gives other weights.
    assert not torch.allclose(V @ torch.softmax(K.T @ Q / math.sqrt(d_h), dim=0), column_formula)
    # Keys and values from another sequence X make it cross-attention, with another result.
    X = randn(d_h, length, seed=2)
    cross = (W_v @ X) @ torch.softmax((W_k @ X).T @ Q / math.sqrt(d_k), dim=0)
    assert not torch.allclose(cross, column_formula)


def test_self_attention_uses_the_same_parameters_for_any_length():
    attention = seeded(lambda: SelfAttention(4, 3, 2))
    n_parameters = sum(p.numel() for p in attention.parameters())
    assert n_parameters == 4 * 3 + 4 * 3 + 4 * 2
    for length in (1, 3, 17):
        with torch.no_grad():
            output, weights = attention(randn(2, length, 4))
        assert output.shape == (2, length, 2) and weights.shape == (2, length, length)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, length, dtype=torch.float64))


def test_one_head_of_multihead_attention_is_self_attention_followed_by_the_output_projection():
    mha = seeded(lambda: MultiHeadAttention(6, 1, bias=False))
    single = SelfAttention(6, 6, 6).double()
    single.load_state_dict({
        "query_proj.weight": mha.query_proj.weight, "key_proj.weight": mha.key_proj.weight,
        "value_proj.weight": mha.value_proj.weight,
    })
    x = randn(2, 5, 6)
    with torch.no_grad():
        expected, _ = mha(x, x, x)
        head, _ = single(x)
    torch.testing.assert_close(mha.out_proj(head), expected)


def test_self_attention_input_errors():
    attention = SelfAttention(4, 3, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D\) with D = 4; found \(2, 3, 5\)"):
        attention(torch.randn(2, 3, 5))
    with pytest.raises(TypeError, match=r"(?s)parameter 'x'.*Actual value: i64\[2,3,4\].*Float\[Tensor, 'B T D'\]"):
        attention(torch.ones(2, 3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"x must have the dtype of parameters \(torch.float32\); found torch.float64"):
        attention(torch.randn(2, 3, 4, dtype=torch.float64))


# ---------------------------------------------------------------------------
# Layer norm, feed-forward network, causal mask.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 4, 6)])
def test_layer_norm_matches_torch(shape):
    norm = LayerNorm(shape[-1], eps=1e-3).double()
    with torch.no_grad():
        norm.weight.copy_(randn(shape[-1], seed=1))
        norm.bias.copy_(randn(shape[-1], seed=2))
    x = 3 * randn(*shape, seed=3) + 2
    expected = F.layer_norm(x, (shape[-1],), norm.weight, norm.bias, eps=1e-3)
    torch.testing.assert_close(norm(x), expected)


def test_layer_norm_normalises_each_position_alone_and_has_the_right_gradient():
    norm = LayerNorm(4).double()
    x = randn(2, 3, 4)
    out = norm(x)
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 3, dtype=torch.float64), atol=1e-12, rtol=0)
    # Biased variance: the mean of squares is var / (var + eps), which is close to 1, not to (D - 1) / D.
    variance = x.var(-1, unbiased=False)
    torch.testing.assert_close((out**2).mean(-1), variance / (variance + 1e-5))
    changed = x.clone()
    changed[0, 1] += 10.0  # another position
    torch.testing.assert_close(norm(changed)[0, 0], out[0, 0])
    assert torch.autograd.gradcheck(lambda z: norm(z), (randn(2, 4).requires_grad_(),))


def test_layer_norm_errors():
    with pytest.raises(ValueError, match=r"z must be a float tensor of shape \(\.\.\., D\) with D = 4; found torch.float32 of shape \(2, 5\)"):
        LayerNorm(4)(torch.randn(2, 5))
    with pytest.raises(TypeError, match="(?s)parameter 'eps'.*Actual value: 0.*eps: .*is_above_0"):
        LayerNorm(4, eps=0)
    for bad in (torch.ones(2, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool)):
        with pytest.raises(TypeError, match=rf"z must be a float tensor; found {bad.dtype}"):
            LayerNorm(4)(bad)  # torch failed in mean()
    with pytest.raises(ValueError, match=r"with D = 4; found torch.float32 of shape \(\)"):
        LayerNorm(4)(torch.tensor(1.0))  # torch failed in shape[-1]
    with pytest.raises(TypeError, match=r"z must be a float tensor; found list"):
        LayerNorm(4)([[1.0, 2.0, 3.0, 4.0]])
    with pytest.raises(ValueError, match=r"keys and values must have one shape \(B, H, L, Dh\); found \(1, 2, 3, 4\) and \(1, 2, 5, 4\)"):
        KVCache().append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4))  # was accepted


def test_ffn_is_w2_relu_of_w1z_plus_b1_plus_b2():
    # Errata (note 001): FFN(z) = W_2 ReLU(W_1 z + b_1) + b_2 -- a product with W_2, not the sum W_2 + ReLU(...) + b_2.
    ffn = seeded(lambda: FeedForward(4, 6))
    W1, b1, W2, b2 = ffn.linear1.weight, ffn.linear1.bias, ffn.linear2.weight, ffn.linear2.bias
    z = randn(2, 3, 4)
    by_hand = torch.empty(2, 3, 4, dtype=torch.float64)
    for b in range(2):
        for t in range(3):  # position by position: the same network everywhere
            by_hand[b, t] = W2 @ torch.clamp(W1 @ z[b, t] + b1, min=0) + b2
    torch.testing.assert_close(ffn(z), by_hand)
    with pytest.raises(RuntimeError):  # W_2 is (4 x 6), ReLU(...) a 6-vector: the note's sum is undefined
        W2 + torch.relu(W1 @ z[0, 0] + b1) + b2


def test_ffn_is_a_one_by_one_convolution():
    ffn = seeded(lambda: FeedForward(4, 6))
    conv1 = nn.Conv1d(4, 6, kernel_size=1).double()
    conv2 = nn.Conv1d(6, 4, kernel_size=1).double()
    with torch.no_grad():
        for conv, linear in ((conv1, ffn.linear1), (conv2, ffn.linear2)):
            conv.weight.copy_(linear.weight[:, :, None])
            conv.bias.copy_(linear.bias)
    z = randn(2, 5, 4)
    convolved = conv2(torch.relu(conv1(z.transpose(1, 2)))).transpose(1, 2)  # Conv1d wants (B, D, T)
    torch.testing.assert_close(ffn(z), convolved)


def test_ffn_gelu_matches_torch_and_bad_activation_is_rejected():
    ffn = seeded(lambda: FeedForward(3, 5, activation="gelu"))
    z = randn(4, 3)
    torch.testing.assert_close(ffn(z), ffn.linear2(F.gelu(ffn.linear1(z))))
    with pytest.raises(TypeError, match=r"(?s)parameter 'activation'.*Actual value: 'tanh'.*Literal\['relu', 'gelu'\]"):
        FeedForward(3, 5, activation="tanh")


def test_causal_mask_is_lower_triangular_like_torch():
    mask = causal_mask(5)
    assert mask.dtype == torch.bool and mask.shape == (5, 5)
    torch_mask = nn.Transformer.generate_square_subsequent_mask(5)  # float: -inf above the diagonal
    assert torch.equal(mask, torch_mask == 0)
    assert mask[2].tolist() == [True, True, True, False, False]
    with pytest.raises(TypeError, match="(?s)parameter 'length'.*Actual value: 0.*length: .*is_at_least_1"):
        causal_mask(0)


# ---------------------------------------------------------------------------
# Blocks against torch.nn.TransformerEncoderLayer / TransformerDecoderLayer.
# ---------------------------------------------------------------------------

SIZES = [(8, 2, 16), (12, 3, 7), (16, 4, 32)]


def run_batch_first(layer, batch_first, *inputs, **kwargs):
    """Call a torch layer with (B, T, D) inputs whatever its batch_first."""
    if batch_first:
        return layer(*inputs, **kwargs)
    return layer(*(x.transpose(0, 1) for x in inputs), **kwargs).transpose(0, 1)


@pytest.mark.parametrize(("d_model", "heads", "d_ff"), SIZES)
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_encoder_block_matches_torch_with_padding(d_model, heads, d_ff, batch_first, dtype):
    torch.manual_seed(d_model)
    layer = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout=0.0, batch_first=batch_first, dtype=dtype)
    ours = EncoderBlock.from_torch(layer)
    x = randn(3, 6, d_model, dtype=dtype, seed=d_model)
    lens = torch.tensor([6, 4, 1])
    padding = torch.arange(6)[None] >= lens[:, None]  # torch: True = ignore
    with torch.no_grad():
        for mode in (layer.train, layer.eval):
            mode()
            expected = run_batch_first(layer, batch_first, x, src_key_padding_mask=padding)
            output, weights = ours(x, valid_lens=lens)
            torch.testing.assert_close(output, expected, **TOLERANCES[dtype])
    assert weights.shape == (3, heads, 6, 6)
    assert (weights[2, :, :, 1:] == 0).all(), "a sequence of length 1 attends to its first position only"


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_matches_torch_with_an_attention_mask_and_gelu(activation):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, activation=activation, batch_first=True,
                                       dtype=torch.float64)
    ours = EncoderBlock.from_torch(layer)
    assert ours.ffn.activation == activation
    x = randn(2, 5, 8)
    with torch.no_grad():
        expected = layer(x, src_mask=~causal_mask(5))  # torch's masks: True = masked
        output, _ = ours(x, mask=causal_mask(5))
    torch.testing.assert_close(output, expected, **TOLERANCES[torch.float64])


def test_stacked_encoder_blocks_match_torch_transformer_encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    encoder = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
    blocks = [EncoderBlock.from_torch(torch_layer) for torch_layer in encoder.layers]
    x, lens = randn(2, 5, 8), torch.tensor([5, 2])
    with torch.no_grad():
        expected = encoder(x, src_key_padding_mask=torch.arange(5)[None] >= lens[:, None])
        h = x
        for block in blocks:
            h, _ = block(h, valid_lens=lens)
    torch.testing.assert_close(h[0], expected[0])
    torch.testing.assert_close(h[1, :2], expected[1, :2])  # padded outputs are not meaningful


@pytest.mark.parametrize(("d_model", "heads", "d_ff"), SIZES)
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decoder_block_matches_torch_with_causal_and_memory_padding_masks(d_model, heads, d_ff, batch_first, dtype):
    torch.manual_seed(d_model + 1)
    layer = nn.TransformerDecoderLayer(d_model, heads, d_ff, dropout=0.0, batch_first=batch_first, dtype=dtype)
    ours = DecoderBlock.from_torch(layer)
    y, memory = randn(3, 5, d_model, dtype=dtype, seed=1), randn(3, 7, d_model, dtype=dtype, seed=2)
    memory_lens = torch.tensor([7, 3, 1])
    memory_padding = torch.arange(7)[None] >= memory_lens[:, None]
    with torch.no_grad():
        for mode in (layer.train, layer.eval):
            mode()
            expected = run_batch_first(
                layer, batch_first, y, memory, tgt_mask=~causal_mask(5), memory_key_padding_mask=memory_padding
            )
            output, self_weights, cross_weights = ours(y, memory, memory_valid_lens=memory_lens)
            torch.testing.assert_close(output, expected, **TOLERANCES[dtype])
    assert self_weights.shape == (3, heads, 5, 5) and cross_weights.shape == (3, heads, 5, 7)
    assert (self_weights.triu(diagonal=1) == 0).all(), "no weight on later target positions"
    assert (cross_weights[1, :, :, 3:] == 0).all(), "no weight on padded source positions"


def test_decoder_block_ignores_target_padding_at_real_positions_like_torch():
    # Padding comes last, so the causal mask already hides it from every real position.
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    ours = DecoderBlock.from_torch(layer)
    y, memory = randn(2, 6, 8, seed=3), randn(2, 4, 8, seed=4)
    target_lens = torch.tensor([6, 3])
    with torch.no_grad():
        expected = layer(y, memory, tgt_mask=~causal_mask(6),
                         tgt_key_padding_mask=torch.arange(6)[None] >= target_lens[:, None])
        output, _, _ = ours(y, memory)
    torch.testing.assert_close(output[0], expected[0])
    torch.testing.assert_close(output[1, :3], expected[1, :3])


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_pre_norm_encoder_block_matches_torch_norm_first(activation):
    torch.manual_seed(5)
    layer = nn.TransformerEncoderLayer(12, 3, 20, dropout=0.0, activation=activation, norm_first=True,
                                       batch_first=True, dtype=torch.float64)
    ours = EncoderBlock.from_torch(layer)
    assert ours.residual1.norm_first
    x, lens = randn(3, 6, 12, seed=5), torch.tensor([6, 4, 2])
    with torch.no_grad():
        expected = layer(x, src_key_padding_mask=torch.arange(6)[None] >= lens[:, None])
        output, _ = ours(x, valid_lens=lens)
    torch.testing.assert_close(output, expected, **TOLERANCES[torch.float64])


def test_pre_norm_is_x_plus_sublayer_of_norm_x_and_differs_from_post_norm():
    # The reference written out with torch.nn parts: x + MHA(LN1(x)), then z + FFN(LN2(z)).
    torch.manual_seed(6)
    pre = EncoderBlock(8, 2, 16, norm_first=True).to(torch.float64)
    with torch.no_grad():
        for norm in (pre.residual1.norm, pre.residual2.norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    post = EncoderBlock(8, 2, 16).to(torch.float64)
    post.load_state_dict(pre.state_dict())
    torch_mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([pre.self_attn.query_proj.weight, pre.self_attn.key_proj.weight,
                                                  pre.self_attn.value_proj.weight]))
        torch_mha.in_proj_bias.copy_(torch.cat([pre.self_attn.query_proj.bias, pre.self_attn.key_proj.bias,
                                                pre.self_attn.value_proj.bias]))
        torch_mha.out_proj.load_state_dict(pre.self_attn.out_proj.state_dict())
    ln1, ln2 = (nn.LayerNorm(8, dtype=torch.float64) for _ in range(2))
    ln1.load_state_dict(pre.residual1.norm.state_dict())
    ln2.load_state_dict(pre.residual2.norm.state_dict())
    x = randn(2, 5, 8, seed=6)
    with torch.no_grad():
        h = ln1(x)
        z = x + torch_mha(h, h, h, need_weights=False)[0]
        expected = z + pre.ffn.linear2(F.relu(pre.ffn.linear1(ln2(z))))
        torch.testing.assert_close(pre(x)[0], expected, **TOLERANCES[torch.float64])
        assert (post(x)[0] - expected).abs().max() > 0.1, "the same weights in post-norm give another function"


def test_pre_norm_decoder_block_matches_torch_norm_first():
    torch.manual_seed(7)
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, norm_first=True, batch_first=True,
                                       dtype=torch.float64)
    ours = DecoderBlock.from_torch(layer)
    y, memory, memory_lens = randn(2, 5, 8, seed=7), randn(2, 4, 8, seed=8), torch.tensor([4, 2])
    with torch.no_grad():
        expected = layer(y, memory, tgt_mask=~causal_mask(5),
                         memory_key_padding_mask=torch.arange(4)[None] >= memory_lens[:, None])
        output, _, _ = ours(y, memory, memory_valid_lens=memory_lens)
    torch.testing.assert_close(output, expected, **TOLERANCES[torch.float64])


def test_pre_norm_models_close_each_stack_with_a_layer_norm():
    torch.manual_seed(8)
    encoder_layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True, batch_first=True,
                                               dtype=torch.float64)
    encoder = nn.TransformerEncoder(encoder_layer, 2, norm=nn.LayerNorm(8, dtype=torch.float64),
                                    enable_nested_tensor=False)
    model = Seq2SeqTransformer(9, 9, TransformerConfig(d_model=8, num_heads=2, d_ff=16, norm_first=True))
    model.to(torch.float64)
    for ours, theirs in zip(model.encoder.blocks, encoder.layers):
        ours.load_state_dict(EncoderBlock.from_torch(theirs).state_dict())
    model.encoder.final_norm.load_state_dict(encoder.norm.state_dict())
    src = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        torch.testing.assert_close(model.encode(src)[0], encoder(model.encoder.embed(src)))
    assert isinstance(Seq2SeqTransformer(9, 9).encoder.final_norm, nn.Identity), "post-norm stacks end normalised"


def test_from_torch_rejects_what_it_cannot_copy():
    with pytest.raises(TypeError, match="(?s)parameter 'layer'.*Actual value: TransformerDecoderLayer.*TransformerEncoderLayer"):
        EncoderBlock.from_torch(nn.TransformerDecoderLayer(8, 2, 16))
    with pytest.raises(ValueError, match="only relu and exact gelu activations can be copied"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh))


def test_block_input_errors():
    block = EncoderBlock(8, 2, 16)
    with pytest.raises(ValueError, match=r"x must have shape \(B, T, D\) with D = 8; found \(2, 3, 4\)"):
        block(torch.randn(2, 3, 4))
    decoder = DecoderBlock(8, 2, 16)
    with pytest.raises(TypeError, match=r"(?s)parameter 'memory'.*Actual value: f32\[2,3\].*Float\[Tensor, 'B S D'\]"):
        decoder(torch.randn(2, 3, 8), torch.randn(2, 3))
    with pytest.raises(TypeError, match="(?s)parameter 'norm_first'.*Actual value: 'yes'.*bool"):
        EncoderBlock(8, 2, 16, norm_first="yes")
    with pytest.raises(TypeError, match="(?s)parameter 'norm_first'.*Actual value: 1.*bool"):
        TransformerConfig(norm_first=1)


# ---------------------------------------------------------------------------
# Properties: causality and permutation equivariance.
# ---------------------------------------------------------------------------


@FAST
@given(st.integers(2, 7), st.data())
def test_property_decoder_block_outputs_up_to_t_ignore_inputs_after_t(length, data):
    block = seeded(lambda: DecoderBlock(8, 2, 16), seed=length)
    t = data.draw(st.integers(0, length - 2))
    y, memory = randn(2, length, 8, seed=length), randn(2, 4, 8, seed=length + 1)
    changed = y.clone()
    changed[:, t + 1 :] = randn(2, length - t - 1, 8, seed=data.draw(st.integers(0, 10**6)))
    with torch.no_grad():
        before, after = block(y, memory)[0], block(changed, memory)[0]
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1])
    assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


@FAST
@given(st.integers(2, 8), st.data())
def test_property_language_model_logits_at_t_ignore_tokens_after_t(length, data):
    torch.manual_seed(0)
    lm = DecoderOnlyLM(11, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=2, learned_positions=True))
    tokens = torch.tensor(data.draw(st.lists(st.integers(0, 10), min_size=length, max_size=length)))[None]
    t = data.draw(st.integers(0, length - 2))
    changed = tokens.clone()
    changed[0, t + 1 :] = torch.tensor(data.draw(st.lists(st.integers(0, 10), min_size=length - t - 1,
                                                           max_size=length - t - 1)))
    with torch.no_grad():
        torch.testing.assert_close(lm(changed)[:, : t + 1], lm(tokens)[:, : t + 1])


@FAST
@given(st.integers(2, 6), st.data())
def test_property_seq2seq_logits_at_t_ignore_target_tokens_after_t(length, data):
    torch.manual_seed(1)
    model = Seq2SeqTransformer(9, 9, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=2))
    src = torch.tensor([[3, 4, 5, 6, 0]])
    tgt = torch.tensor(data.draw(st.lists(st.integers(0, 8), min_size=length, max_size=length)))[None]
    t = data.draw(st.integers(0, length - 2))
    changed = tgt.clone()
    changed[0, t + 1 :] = (changed[0, t + 1 :] + 1) % 9
    with torch.no_grad():
        before = model(src, tgt, torch.tensor([4]))
        after = model(src, changed, torch.tensor([4]))
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1])


@FAST
@given(st.integers(1, 7), st.randoms(use_true_random=False))
def test_property_encoder_without_positions_is_permutation_equivariant(length, rng):
    blocks = [seeded(lambda: EncoderBlock(8, 2, 16), seed=s) for s in range(2)]
    x = randn(2, length, 8, seed=length)
    permutation = list(range(length))
    rng.shuffle(permutation)

    def encode(h):
        for block in blocks:
            h, _ = block(h)
        return h

    with torch.no_grad():
        torch.testing.assert_close(encode(x[:, permutation]), encode(x)[:, permutation])


def test_positional_encoding_breaks_the_permutation_equivariance():
    embed = TransformerEmbedding(10, 8, max_len=6).double()
    block = seeded(lambda: EncoderBlock(8, 2, 16))
    tokens = torch.tensor([[1, 2, 3, 4]])
    reversed_tokens = tokens.flip(1)
    with torch.no_grad():
        forward = block(embed(tokens))[0]
        backward = block(embed(reversed_tokens))[0]
    assert not torch.allclose(backward, forward.flip(1), atol=1e-3)


def test_embedding_sums_token_and_position_vectors_of_the_same_size():
    # Errata (note 000): H^(0) = [e_x1 + p_1, ...] -- a sum (size D), not the concatenation e ⊕ p (size 2D).
    embed = TransformerEmbedding(10, 6, max_len=8).double()
    tokens = torch.tensor([[4, 1, 7]])
    output = embed(tokens)
    assert output.shape == (1, 3, 6)
    expected = embed.token.weight[tokens[0]] + positional_encoding(3, 6, dtype=torch.float64)
    torch.testing.assert_close(output[0], expected)
    learned = TransformerEmbedding(10, 5, max_len=8, learned_positions=True)
    torch.testing.assert_close(learned(tokens)[0], learned.token.weight[tokens[0]] + learned.position.weight[:3])
    with pytest.raises(ValueError, match="must fit in max_len = 8 positions; found start = 0, T = 9"):
        embed(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match=r"ids in \[0, 10\); found ids from 0 to 10"):
        embed(torch.tensor([[0, 10]]))


# ---------------------------------------------------------------------------
# Whole models.
# ---------------------------------------------------------------------------


def small_seq2seq(seed=0):
    torch.manual_seed(seed)
    return Seq2SeqTransformer(9, 7, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=2, max_len=10))


def test_seq2seq_step_fn_agrees_with_the_teacher_forced_forward_pass():
    model = small_seq2seq()
    src, lens = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]]), torch.tensor([3, 2])
    tgt = torch.tensor([[1, 4, 2], [1, 3, 5]])
    step = model.step_fn(src, lens)
    with torch.no_grad():
        full = F.log_softmax(model(src, tgt, lens), dim=-1)  # (B, T, V)
    for t in range(1, 4):
        torch.testing.assert_close(step(tgt[:, :t], torch.tensor([0, 1])), full[:, t - 1])
    # Rows may continue any source, in any order.
    torch.testing.assert_close(step(tgt[[1, 0, 0], :2], torch.tensor([1, 0, 0])), full[[1, 0, 0], 1])


def test_seq2seq_ignores_padded_source_tokens():
    model = small_seq2seq()
    lens = torch.tensor([3])
    tgt = torch.tensor([[1, 4, 2]])
    with torch.no_grad():
        a = model(torch.tensor([[3, 4, 5, 0, 0]]), tgt, lens)
        b = model(torch.tensor([[3, 4, 5, 8, 6]]), tgt, lens)
    torch.testing.assert_close(a, b)


def test_attention_maps_have_one_distribution_per_head_layer_and_query():
    model = small_seq2seq()
    src, lens, tgt = torch.tensor([[3, 4, 5, 0]]), torch.tensor([3]), torch.tensor([[1, 4, 2, 6, 6]])
    maps = model.attention_maps(src, tgt, lens)
    assert maps["encoder"].shape == (2, 1, 2, 4, 4)
    assert maps["decoder"].shape == (2, 1, 2, 5, 5)
    assert maps["cross"].shape == (2, 1, 2, 5, 4)
    for weights in maps.values():
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert (maps["cross"][..., 3] == 0).all() and (maps["encoder"][..., 3] == 0).all()


def test_config_errors_name_expected_and_found():
    with pytest.raises(ValueError, match="d_model must be divisible by num_heads; found d_model=10, num_heads=4"):
        TransformerConfig(d_model=10, num_heads=4)
    with pytest.raises(ValueError, match="d_model must be even"):
        TransformerConfig(d_model=9, num_heads=3)
    TransformerConfig(d_model=9, num_heads=3, learned_positions=True)  # learned positions need no pairs
    with pytest.raises(TypeError, match="(?s)parameter 'activation'.*Actual value: 'swish'"):
        TransformerConfig(activation="swish")
    with pytest.raises(TypeError, match="(?s)parameter 'config'.*Actual value: {'d_model': 8}.*TransformerConfig"):
        Seq2SeqTransformer(5, 5, {"d_model": 8})


def test_language_model_step_decodes_with_lib_decoding():
    torch.manual_seed(0)
    lm = DecoderOnlyLM(6, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, learned_positions=True))
    prefixes = torch.tensor([[0, 3, 4], [0, 1, 1]])
    torch.testing.assert_close(lm.step(prefixes), F.log_softmax(lm(prefixes)[:, -1], -1).detach())
    tokens, log_prob = greedy_search(lm.step, bos=0, eos=5, max_len=6)
    assert 1 <= len(tokens) <= 6 and log_prob <= 0


# ---------------------------------------------------------------------------
# Incremental decoding with a KV cache.
# ---------------------------------------------------------------------------


@FAST
@given(st.integers(1, 3), st.sampled_from([(8, 1), (8, 2), (12, 3)]), st.booleans(), st.booleans(),
       st.integers(1, 5), st.integers(1, 12), st.integers(0, 10**6))
def test_property_cached_generation_equals_recomputing_the_prefix(
    layers, size, norm_first, learned, prompt_len, steps, seed
):
    d_model, heads = size
    config = TransformerConfig(d_model=d_model, num_heads=heads, d_ff=16, num_layers=layers, max_len=20,
                               learned_positions=learned, norm_first=norm_first)
    lm = seeded(lambda: DecoderOnlyLM(7, config), seed=seed)
    prompt = torch.randint(0, 7, (2, prompt_len), generator=torch.Generator().manual_seed(seed))
    cached_tokens, cached_logits = lm.generate(prompt, steps)
    tokens, logits = lm.generate(prompt, steps, use_cache=False)
    assert torch.equal(cached_tokens, tokens)
    torch.testing.assert_close(cached_logits, logits, **TOLERANCES[torch.float64])
    with torch.no_grad():  # and both equal the teacher-forced pass over the generated sequence
        full = lm(tokens[:, :-1])[:, prompt_len - 1 :]
    torch.testing.assert_close(cached_logits, full, **TOLERANCES[torch.float64])


@FAST
@given(st.integers(1, 3), st.booleans(), st.integers(1, 10), st.integers(0, 10**6))
def test_property_cached_seq2seq_decoding_equals_recomputing_the_prefix(layers, norm_first, steps, seed):
    config = TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=layers, max_len=12, norm_first=norm_first)
    model = seeded(lambda: Seq2SeqTransformer(9, 7, config), seed=seed)
    src = torch.randint(3, 9, (3, 5), generator=torch.Generator().manual_seed(seed))
    lens = torch.tensor([5, 3, 1])
    cached_tokens, cached_logits = model.greedy_decode(src, 1, steps, lens)
    tokens, logits = model.greedy_decode(src, 1, steps, lens, use_cache=False)
    assert torch.equal(cached_tokens, tokens) and (tokens[:, 0] == 1).all()
    torch.testing.assert_close(cached_logits, logits, **TOLERANCES[torch.float64])
    with torch.no_grad():
        torch.testing.assert_close(cached_logits, model(src, tokens[:, :-1], lens), **TOLERANCES[torch.float64])


def test_feeding_a_sequence_in_chunks_through_the_cache_equals_one_forward_pass():
    lm = seeded(lambda: DecoderOnlyLM(7, TransformerConfig(d_model=8, num_heads=2, d_ff=16, max_len=12)))
    tokens = torch.randint(0, 7, (2, 10), generator=torch.Generator().manual_seed(1))
    cache = lm.new_cache()
    with torch.no_grad():
        chunks = [lm(tokens[:, a:b], cache=cache) for a, b in ((0, 3), (3, 4), (4, 9), (9, 10))]
        torch.testing.assert_close(torch.cat(chunks, dim=1), lm(tokens), **TOLERANCES[torch.float64])
    assert all(c.length == 10 and c.keys.shape == (2, 2, 10, 4) for c in cache)


def test_cache_errors_name_expected_and_found():
    lm = DecoderOnlyLM(7, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=2, max_len=6))
    with pytest.raises(TypeError, match="cache must be a list of 2 KVCache objects"):
        lm(torch.tensor([[1, 2]]), cache=[KVCache()])
    with pytest.raises(ValueError, match="with a cache the attention is causal over all positions"):
        EncoderBlock(8, 2, 16)(torch.randn(1, 2, 8), mask=causal_mask(2), cache=KVCache())
    with pytest.raises(TypeError, match="(?s)parameter 'cache'.*Actual value: {}.*KVCache"):
        EncoderBlock(8, 2, 16)(torch.randn(1, 2, 8), cache={})
    with pytest.raises(ValueError, match=r"must fit in max_len = 6 positions; found start = 4, T = 3"):
        lm.stack.embed(torch.tensor([[1, 2, 3]]), start=4)
    lm.generate(torch.tensor([[1, 2]]), 5)  # 7 tokens: the last is never fed, the others fit
    with pytest.raises(ValueError, match=r"max_len = 6 positions; found start = 6, T = 1"):
        lm.generate(torch.tensor([[1, 2]]), 6)
    with pytest.raises(TypeError, match="(?s)parameter 'steps'.*Actual value: 0.*steps: .*is_at_least_1"):
        lm.generate(torch.tensor([[1]]), 0)


def test_critical_path_counts_the_longest_chain_of_operations():
    x = torch.ones(3, requires_grad=True)
    assert critical_path_length(((x * 2) + 1) * 3) == 4  # three operations and the leaf's accumulator
    y = x * 2
    assert critical_path_length(y.exp().exp().exp() + y) == 6  # the longer branch counts
    with pytest.raises(ValueError, match="found a tensor without grad_fn"):
        critical_path_length(torch.ones(2))


def test_critical_path_grows_with_length_for_a_gru_but_not_for_a_transformer():
    gru = build_seq2seq("plain", 9, 7, Seq2SeqConfig(embed_dim=4, hidden_dim=6, bidirectional=False))
    transformer = small_seq2seq()
    paths = {"transformer": [], "gru": []}
    for length in (2, 4, 8):
        src, tgt = torch.full((1, length), 3), torch.full((1, length), 4)
        paths["transformer"].append(critical_path_length(transformer(src, tgt).sum()))
        paths["gru"].append(critical_path_length(gru(src, tgt).sum()))
    assert len(set(paths["transformer"])) == 1
    steps = [b - a for a, b in zip(paths["gru"], paths["gru"][1:])]
    assert steps[0] > 0 and steps[1] == 2 * steps[0], "the GRU's chain grows linearly with the length"


# ---------------------------------------------------------------------------
# The sqrt(D) embedding scaling (the rest of the recipe: tests/lib/part4_attention/test_transformer_recipe.py).
# ---------------------------------------------------------------------------


def test_scaled_embedding_multiplies_the_token_vector_by_sqrt_d():
    embed = TransformerEmbedding(10, 16, max_len=8, scale=True).double()
    tokens = torch.tensor([[4, 1, 7]])
    expected = 4.0 * embed.token.weight[tokens[0]] + positional_encoding(3, 16, dtype=torch.float64)
    torch.testing.assert_close(embed(tokens)[0], expected)
    model = Seq2SeqTransformer(9, 9, TransformerConfig(d_model=8, num_heads=2, d_ff=16, scale_embedding=True))
    assert model.encoder.embed.token_scale == model.decoder.embed.token_scale == math.sqrt(8)
    assert Seq2SeqTransformer(9, 9).encoder.embed.token_scale == 1.0
    with pytest.raises(TypeError, match="(?s)parameter 'scale_embedding'.*Actual value: 'yes'.*bool"):
        TransformerConfig(scale_embedding="yes")


# ---------------------------------------------------------------------------
# Dropout.
# ---------------------------------------------------------------------------


def test_dropout_keeps_or_zeroes_each_entry_and_scales_the_kept_ones_by_one_over_one_minus_p():
    torch.manual_seed(0)
    x = randn(200, 50, seed=1)
    layer = Dropout(0.25)
    out = layer(x)
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] / 0.75, rtol=0, atol=0)
    assert abs(kept.double().mean().item() - 0.75) < 0.02  # 10 000 Bernoulli(0.75) draws: sd 0.004
    assert not torch.equal(out, layer(x))  # a new mask at every call


def test_dropout_is_unbiased_and_the_identity_in_eval_mode_or_at_p_0():
    torch.manual_seed(0)
    x = randn(4, 6, seed=2)
    layer = Dropout(0.5)
    mean = torch.stack([layer(x) for _ in range(20000)]).mean(0)
    torch.testing.assert_close(mean, x, atol=0.05, rtol=0)  # sd of the mean <= |x| / sqrt(20000) ~ 0.02
    assert layer.eval()(x) is x
    assert Dropout(0.0)(x) is x


@pytest.mark.parametrize("p", [0.1, 0.3])
@pytest.mark.parametrize("norm_first", [False, True])
def test_blocks_with_dropout_match_torch_in_eval_mode_and_drop_in_train_mode(p, norm_first):
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=p, norm_first=norm_first, batch_first=True,
                                       dtype=torch.float64)
    ours = EncoderBlock.from_torch(layer)
    assert ours.residual1.dropout.p == ours.residual2.dropout.p == ours.ffn.dropout.p == p
    x = randn(2, 5, 8, seed=3)
    layer.eval(), ours.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(x)[0], layer(x), atol=1e-6, rtol=0)
    decoder_layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=p, norm_first=norm_first, batch_first=True,
                                               dtype=torch.float64).eval()
    decoder = DecoderBlock.from_torch(decoder_layer).eval()
    memory = randn(2, 4, 8, seed=4)
    with torch.no_grad():
        expected = decoder_layer(x, memory, tgt_mask=nn.Transformer.generate_square_subsequent_mask(5).double())
        torch.testing.assert_close(decoder(x, memory)[0], expected, atol=1e-6, rtol=0)
    ours.train()
    first, second = ours(x)[0], ours(x)[0]
    assert not torch.allclose(first, second)


def test_config_dropout_reaches_every_dropout_layer_and_a_model_is_deterministic_in_eval_mode():
    model = Seq2SeqTransformer(7, 7, TransformerConfig(d_model=8, num_heads=2, d_ff=16, dropout=0.2))
    rates = {m.p for m in model.modules() if isinstance(m, Dropout)}
    assert rates == {0.2}
    # 2 embeddings; each sublayer's residual and each FFN's hidden layer in 2 encoder and 2 decoder blocks
    assert sum(isinstance(m, Dropout) for m in model.modules()) == 2 + 2 * (2 + 1) + 2 * (3 + 1)
    src, tgt = torch.randint(7, (3, 5)), torch.randint(7, (3, 4))
    model.eval()
    torch.testing.assert_close(model(src, tgt), model(src, tgt), rtol=0, atol=0)
    model.train()
    assert not torch.allclose(model(src, tgt), model(src, tgt))
    torch.manual_seed(0)
    plain = Seq2SeqTransformer(7, 7, TransformerConfig(d_model=8, num_heads=2, d_ff=16)).train()
    torch.testing.assert_close(plain(src, tgt), plain(src, tgt), rtol=0, atol=0)  # p = 0: no randomness


@pytest.mark.parametrize("bad", [1.0, -0.1, True, "0.1", float("nan")])
def test_bad_dropout_rates_are_rejected(bad):
    with pytest.raises(TypeError, match=f"(?s)parameter 'p'.*Actual value: {bad!r}.*is_a_rate"):
        Dropout(bad)
    with pytest.raises(TypeError, match=f"(?s)parameter 'dropout'.*Actual value: {bad!r}.*is_a_rate"):
        TransformerConfig(dropout=bad)


def test_teacher_forced_loss_is_the_mean_negative_log_probability_of_the_unpadded_targets_in_eval_mode():
    from lib.part4_attention.reversal_task import ReversalTask
    task = ReversalTask(min_len=2, max_len=4)
    data, _ = task.split(n_train=6, n_test=1, seed=0)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(task.vocab_size, task.vocab_size,
                               TransformerConfig(d_model=8, num_heads=2, d_ff=16, dropout=0.3)).train()
    loss = teacher_forced_loss(model, data)
    assert model.training  # the mode is restored
    model.eval()
    with torch.no_grad():
        log_probs = F.log_softmax(model(data.src, data.tgt_in, data.src_lens), dim=-1)
    terms = [-log_probs[i, t, y].item() for i in range(len(data)) for t, y in enumerate(data.tgt_out[i].tolist())
             if y != 0]  # brute force over the unpadded targets
    assert loss == pytest.approx(sum(terms) / len(terms), rel=1e-6)
    assert teacher_forced_loss(model.train(), data) == loss  # deterministic: no dropout while measuring
    with pytest.raises(TypeError, match=r"(?s)parameter 'data'.*Actual value: \(i64\[6,4\].*SequencePairs"):
        teacher_forced_loss(model, (data.src, data.tgt_in))
    with pytest.raises(ValueError, match=r"data.tgt_out must hold target ids in \[0, \d+\) besides pad = 0; found only pad"):
        teacher_forced_loss(model, dataclasses.replace(data, tgt_out=torch.zeros_like(data.tgt_out)))  # was NaN
    with pytest.raises(ValueError, match=r"data.tgt_out must hold target ids in \[0, \d+\) besides pad = 0; found 1..99"):
        teacher_forced_loss(model, dataclasses.replace(data, tgt_out=data.tgt_out.clamp(min=1).index_fill(1, torch.tensor([0]), 99)))


def test_per_step_blocks_called_by_hand_name_what_is_wrong():
    """The blocks' forwards are unchecked (@no_type_check, per step); a cheap if names
    what a caller could still get wrong: no tensor, not float, a wrong size or dtype."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4)
    ffn, residual, dropout = FeedForward(4, 8), Residual(4), Dropout(0.5)
    assert ffn(x).shape == x.shape and residual(x, ffn)[0].shape == x.shape
    for bad, found in ((x.long(), "torch.int64"), (x.bool(), "torch.bool"), (x.tolist(), "list")):
        for name, call in (("z", ffn), ("x", lambda v: residual(v, ffn)), ("x", dropout), ("x", dropout.eval())):
            with pytest.raises(TypeError, match=rf"{name} must be a float tensor; found {found}"):
                call(bad)  # Dropout returned ints, bools and lists as they were
        dropout.train()
    for bad, found in ((x.double(), r"torch.float64 of shape \(2, 3, 4\)"), (x.half(), "torch.float16"),
                       (torch.randn(2, 3, 5), r"torch.float32 of shape \(2, 3, 5\)")):
        with pytest.raises(ValueError, match=rf"z must have shape \(\.\.\., D\) with D = 4 and the dtype torch.float32; found {found}"):
            ffn(bad)
    for bad in (x[0], x[None]):  # a missing or extra axis broadcast silently
        with pytest.raises(ValueError, match=rf"x must have shape \(B, T, D\); found {re.escape(str(tuple(bad.shape)))}"):
            residual(bad, ffn)
    for bad in (None, "x", 3):
        with pytest.raises(TypeError, match=rf"sublayer must be callable; found {re.escape(repr(bad))}"):
            residual(x, bad)


def test_kv_cache_and_heads_called_by_hand_name_what_is_wrong():
    torch.manual_seed(0)
    attention, h = MultiHeadAttention(8, 2), torch.randn(2, 3, 8)
    out, weights = KVCache().attend(attention, h)
    assert out.shape == (2, 3, 8) and weights.shape == (2, 2, 3, 3)
    for bad in (None, "x", 3):
        with pytest.raises(TypeError, match=rf"attention must be a MultiHeadAttention; found {re.escape(repr(bad))}"):
            KVCache().attend(bad, h)
    for bad, found in ((h.long(), "torch.int64"), (h.bool(), "torch.bool"), (h.tolist(), "list")):
        with pytest.raises(TypeError, match=rf"h must be a float tensor; found {found}"):
            KVCache().attend(attention, bad)
    for bad, found in ((h.double(), r"torch.float64 of shape \(2, 3, 8\)"), (h.half(), "torch.float16"),
                       (torch.randn(2, 3, 9), r"torch.float32 of shape \(2, 3, 9\)"), (h[0], r"torch.float32 of shape \(3, 8\)")):
        with pytest.raises(ValueError, match=rf"h must have shape \(B, L, E\) with E = 8 and the dtype torch.float32; found {found}"):
            KVCache().attend(attention, bad)
    keys = torch.randn(1, 2, 3, 4)
    for name, args in (("keys", (keys.long(), keys)), ("values", (keys, keys.bool())), ("keys", (keys.tolist(), keys))):
        with pytest.raises(TypeError, match=rf"{name} must be a float tensor; found"):
            KVCache().append(*args)  # int and bool keys were cached silently
    with pytest.raises(ValueError, match=r"keys and values must have one shape \(B, H, L, Dh\); found \(2, 3, 4\)"):
        KVCache().append(keys[0], keys[0])
    projected = torch.randn(2, 3, 8)
    assert torch.equal(attention.merge_heads(attention.split_heads(projected)), projected)
    for bad, found in ((projected.long(), "torch.int64"), (projected.bool(), "torch.bool"), (projected.tolist(), "list")):
        with pytest.raises(TypeError, match=rf"projected must be a float tensor; found {found}"):
            attention.split_heads(bad)
        heads = bad if isinstance(bad, list) else bad.view(2, 3, 2, 4).transpose(1, 2)
        with pytest.raises(TypeError, match=rf"heads must be a float tensor; found {found}"):
            attention.merge_heads(heads)
