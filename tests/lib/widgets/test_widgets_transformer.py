"""The visuals of chapter 11 (lib.widgets.transformer): pure ``compute`` against lib and by hand,
plus smoke tests that each one renders through :func:`lib.widgets.explore`."""
import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from lib.part4_attention.positional import positional_encoding
from lib.part4_attention.transformer import Seq2SeqTransformer, TransformerConfig
from lib.widgets import explore
from lib.widgets.transformer import HeadsViewer, PositionalEncodingExplorer, draw_all_heads
from test_widgets_legibility import assert_legible

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def encoding_explorer():
    return PositionalEncodingExplorer()


# ---------------------------------------------------------------------------
# PositionalEncodingExplorer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("position", "pair"), [(0, 0), (18, 2), (60, 15)])
def test_encoding_explorer_shows_the_columns_of_lib_s_encoding(encoding_explorer, position, pair):
    data = encoding_explorer.compute(position=position, pair=pair)
    encoding = positional_encoding(64, 32, dtype=torch.float64).numpy()
    np.testing.assert_allclose(data["sin"], encoding[:, 2 * pair])
    np.testing.assert_allclose(data["cos"], encoding[:, 2 * pair + 1])
    assert data["wavelength"] == pytest.approx(2 * math.pi * 10000 ** (2 * pair / 32))


def test_encoding_explorer_similarity_is_one_at_t_and_depends_on_the_offset_only(encoding_explorer):
    at_8 = encoding_explorer.compute(position=8)["similarity"]
    at_20 = encoding_explorer.compute(position=20)["similarity"]
    assert at_8[8] == pytest.approx(1.0) and at_20[20] == pytest.approx(1.0)
    assert at_8.max() == pytest.approx(1.0)
    # Similarity of t with t + k is the same for both t (for the offsets both curves contain).
    np.testing.assert_allclose(at_8[:44], at_20[12:56], atol=1e-12)
    # By hand, offset 1: sum_i cos(w_i) / 16.
    by_hand = sum(math.cos(10000 ** (-2 * i / 32)) for i in range(16)) / 16
    assert at_8[9] == pytest.approx(by_hand)


def test_encoding_explorer_renders_every_setting_within_the_frame_budget(encoding_explorer):
    explorer = explore(encoding_explorer)
    assert explorer.render(position=60, pair=15)[8:12] == WEBP_TAG
    assert np.prod([len(c.values) for c in encoding_explorer.controls]) <= 300
    assert "position t ∈ {0, 6, 12" in explorer.describe()


# ---------------------------------------------------------------------------
# HeadsViewer
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_like_maps():
    """Maps of a small untrained model: real shapes, rows that sum to 1, padding."""
    torch.manual_seed(0)
    model = Seq2SeqTransformer(13, 13, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=2, max_len=12))
    src = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    lens = torch.tensor([3, 4])
    tgt = torch.tensor([[1, 5, 4, 3, 0], [1, 9, 8, 7, 6]])
    maps = {kind: value.numpy() for kind, value in model.attention_maps(src, tgt, lens).items()}
    sources = [["0", "1", "2"], ["3", "4", "5", "6"]]
    targets = [["2", "1", "0", "<eos>"], ["6", "5", "4", "3", "<eos>"]]
    return maps, sources, targets


def test_heads_viewer_crops_each_map_to_the_real_tokens(trained_like_maps):
    maps, sources, targets = trained_like_maps
    viewer = HeadsViewer(maps, sources, targets)
    assert [len(c.values) for c in viewer.controls] == [3, 2, 2, 2]
    data = viewer.compute(kind="cross", layer=2, head=1, example=1)
    assert data["row_labels"] == targets[0] and data["column_labels"] == sources[0]
    np.testing.assert_allclose(data["weights"][:4, :3], maps["cross"][1, 0, 0, :4, :3])
    assert np.isnan(data["weights"][4:]).all() and np.isnan(data["weights"][:, 3:]).all()
    np.testing.assert_allclose(data["weights"][:4, :3].sum(1), 1.0, atol=1e-6)  # padding had weight 0


def test_heads_viewer_decoder_map_is_causal_and_labelled_by_inputs(trained_like_maps):
    maps, sources, targets = trained_like_maps
    data = HeadsViewer(maps, sources, targets).compute(kind="decoder", layer=1, head=2, example=2)
    assert data["column_labels"] == ["<bos>", "6", "5", "4", "3"]
    weights = data["weights"][:5, :5]
    assert (np.triu(weights, k=1) == 0).all()
    encoder = HeadsViewer(maps, sources, targets).compute(kind="encoder", example=2)
    assert encoder["row_labels"] == encoder["column_labels"] == sources[1]


def test_heads_viewer_rejects_inconsistent_data(trained_like_maps):
    maps, sources, targets = trained_like_maps
    with pytest.raises(ValueError, match=r"maps must be a dict with keys \['cross', 'decoder', 'encoder'\]"):
        HeadsViewer({"cross": maps["cross"]}, sources, targets)
    with pytest.raises(ValueError, match="must label the N = 2 examples; found 1 and 2"):
        HeadsViewer(maps, sources[:1], targets)
    with pytest.raises(ValueError, match=r"shape \(L, N, H, T, S\)"):
        HeadsViewer({**maps, "cross": maps["cross"][0]}, sources, targets)


def test_heads_viewer_renders_and_the_grid_has_every_map(trained_like_maps):
    viewer = HeadsViewer(*trained_like_maps)
    explorer = explore(viewer)
    assert explorer.render(kind="encoder", layer=2, head=2, example=2)[8:12] == WEBP_TAG
    axes = draw_all_heads(Figure(), viewer, example=2)
    assert axes.shape == (6, 2)
    assert axes[5, 1].get_title() == "cross, layer 2, head 2"


def test_heads_viewer_is_legible_on_a_phone(trained_like_maps):
    assert_legible(HeadsViewer(*trained_like_maps))
