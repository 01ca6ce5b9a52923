"""The visuals of chapter 9 (lib.widgets.attention): pure ``compute`` against lib and by hand,
plus smoke tests that each one renders through :func:`lib.widgets.explore`."""
import math

import numpy as np
import pytest
import torch

from lib.part4_attention.attention import MultiHeadAttention, masked_softmax
from lib.widgets import explore
from lib.widgets.attention import AttentionHeatmap, MultiHeadWeights, ScalingSaturation

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def heatmap():
    return AttentionHeatmap()


@pytest.fixture(scope="module")
def scaling():
    return ScalingSaturation()


@pytest.fixture(scope="module")
def heads():
    return MultiHeadWeights()


# ---------------------------------------------------------------------------
# AttentionHeatmap
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "additive", "bilinear"])
def test_heatmap_weights_match_lib_and_mark_absent_keys_nan(heatmap, score):
    data = heatmap.compute(score=score, temperature=0.5, n_keys=6, valid_len=4)
    weights = data["weights"]
    assert weights.shape == (heatmap.n_queries, heatmap.max_keys)
    assert np.isnan(weights[:, 6:]).all(), "keys 7 and 8 do not exist and must be NaN"
    with torch.no_grad():
        scores = heatmap.scores[score](heatmap.queries, heatmap.keys[:, :6])  # (1, 4, 6)
        expected = masked_softmax(scores / 0.5, torch.tensor([4]))[0].numpy()
    np.testing.assert_allclose(weights[:, :6], expected, atol=1e-6)
    assert (weights[:, 4:6] == 0).all(), "keys beyond the valid length must get weight exactly 0"
    np.testing.assert_allclose(weights[:, :4].sum(axis=1), 1.0, atol=1e-6)


def test_heatmap_scaled_dot_is_dot_at_temperature_sqrt_d(heatmap):
    # Dividing the scores by √d is the same as a temperature of √d = √8.
    scaled = heatmap.compute(score="scaled_dot", temperature=1.0, n_keys=8, valid_len=8)["weights"]
    with torch.no_grad():
        by_hand = torch.softmax(heatmap.queries @ heatmap.keys.transpose(1, 2) / math.sqrt(8), -1)[0]
    np.testing.assert_allclose(scaled, by_hand.numpy(), atol=1e-6)


def test_heatmap_clips_valid_length_to_the_number_of_keys(heatmap):
    data = heatmap.compute(score="dot", temperature=1.0, n_keys=4, valid_len=8)
    assert data["valid_len"] == 4 and data["n_keys"] == 4
    np.testing.assert_allclose(data["weights"][:, :4].sum(axis=1), 1.0, atol=1e-6)


def test_heatmap_valid_length_one_puts_all_weight_on_the_first_key(heatmap):
    weights = heatmap.compute(score="additive", temperature=4.0, n_keys=8, valid_len=1)["weights"]
    assert (weights[:, 0] == 1).all() and (weights[:, 1:] == 0).all()


# ---------------------------------------------------------------------------
# ScalingSaturation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dim", ScalingSaturation.dims)
def test_scaling_scores_are_dot_products_divided_by_sqrt_d_only_when_scaled(scaling, dim):
    q, k = scaling.queries[dim][0, 0], scaling.keys[dim][0]  # (d,), (S, d)
    dots = (k @ q).numpy()  # (S,)
    unscaled = scaling.compute(dim=dim, scaling="unscaled")
    scaled = scaling.compute(dim=dim, scaling="scaled")
    np.testing.assert_allclose(unscaled["scores"], dots, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(scaled["scores"], dots / math.sqrt(dim), rtol=1e-5, atol=1e-5)
    assert unscaled["spread"] == pytest.approx(math.sqrt(dim)) and scaled["spread"] == 1.0
    for data in (unscaled, scaled):
        assert data["scores"].shape == data["weights"].shape == (scaling.n_keys,)
        weights = np.exp(data["scores"] - data["scores"].max())
        np.testing.assert_allclose(data["weights"], weights / weights.sum(), atol=1e-6)
        assert data["max_weight"] == pytest.approx(data["weights"].max())


def test_scaling_jacobian_norm_matches_autograd(scaling):
    data = scaling.compute(dim=16, scaling="scaled")
    scores = torch.tensor(data["scores"], dtype=torch.float64)
    jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, 0), scores)  # (S, S)
    assert data["jacobian_norm"] == pytest.approx(float(torch.linalg.matrix_norm(jacobian)), abs=1e-6)


def test_scaling_unscaled_softmax_saturates_as_d_grows(scaling):
    # The point of the figure: without the scale the weights turn one-hot and the gradient vanishes.
    big = scaling.compute(dim=1024, scaling="unscaled")
    assert big["max_weight"] > 0.98 and big["jacobian_norm"] < 0.05
    for dim in ScalingSaturation.dims:
        assert scaling.compute(dim=dim, scaling="scaled")["max_weight"] < 0.5


# ---------------------------------------------------------------------------
# MultiHeadWeights
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", MultiHeadWeights.head_counts)
def test_heads_rows_are_the_per_head_weights_of_the_layer(heads, num_heads):
    data = heads.compute(num_heads=num_heads, query=2, valid_len=5)
    weights = data["weights"]
    rows = 1 + max(MultiHeadWeights.head_counts)
    assert weights.shape == (rows, heads.n_tokens)
    assert np.isnan(weights[1 + num_heads :]).all(), "rows of absent heads must be NaN"
    x = heads.tokens
    with torch.no_grad():
        _, expected = heads.layers[num_heads](x, x, x, valid_lens=torch.tensor([5]), average_weights=False)
    np.testing.assert_allclose(weights[1 : 1 + num_heads], expected[0, :, 1].numpy(), atol=1e-6)
    np.testing.assert_allclose(weights[0], expected[0, :, 1].mean(0).numpy(), atol=1e-6)
    assert (weights[: 1 + num_heads, 5:] == 0).all(), "keys beyond the valid length must get weight 0"
    np.testing.assert_allclose(weights[: 1 + num_heads].sum(axis=1), 1.0, atol=1e-6)


def test_heads_share_one_set_of_parameters(heads):
    # The slider only re-splits the same projections into heads.
    states = [layer.state_dict() for layer in heads.layers.values()]
    for state in states[1:]:
        for name, tensor in state.items():
            assert torch.equal(tensor, states[0][name])


def test_one_head_is_single_scaled_dot_product_attention(heads):
    # With one head the layer is softmax(QKᵀ/√E) over the projected tokens.
    layer: MultiHeadAttention = heads.layers[1]
    x = heads.tokens[0]  # (T, E)
    with torch.no_grad():
        q, k = layer.query_proj(x), layer.key_proj(x)
        expected = torch.softmax(q @ k.T / math.sqrt(heads.embed_dim), -1)[3]  # query position 4
    weights = heads.compute(num_heads=1, query=4, valid_len=6)["weights"]
    np.testing.assert_allclose(weights[1], expected.numpy(), atol=1e-6)
    np.testing.assert_allclose(weights[0], weights[1], atol=1e-12)


# ---------------------------------------------------------------------------
# Rendering through the explorer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "visual, settings",
    [
        (AttentionHeatmap, [{}, {"score": "additive", "temperature": 0.25, "n_keys": 4, "valid_len": 2}]),
        (ScalingSaturation, [{}, {"dim": 4, "scaling": "scaled"}]),
        (MultiHeadWeights, [{}, {"num_heads": 8, "query": 6, "valid_len": 3}]),
    ],
)
def test_each_visual_renders_png_for_several_settings(visual, settings):
    explorer = explore(visual())
    pictures = [explorer.render(**values) for values in settings]
    assert all(png[8:12] == WEBP_TAG for png in pictures)
    assert len(set(pictures)) == len(pictures), "different settings must give different pictures"


def test_smallest_visual_pre_renders_every_frame():
    explorer = explore(ScalingSaturation())
    frames, frame_of = explorer.frames()
    n_combinations = len(ScalingSaturation.dims) * 2
    assert len(frame_of) == n_combinations
    assert len(frames) == n_combinations, "every setting of this visual shows a different picture"
    assert all(png[8:12] == WEBP_TAG for png in frames)


@pytest.mark.parametrize("visual", [ScalingSaturation, MultiHeadWeights])
def test_chapter_visuals_keep_their_static_players_small(visual):
    # Every frame is pre-rendered into the HTML page; 120 keeps the page and the build light.
    assert int(np.prod([len(c.values) for c in visual.controls])) <= 120
