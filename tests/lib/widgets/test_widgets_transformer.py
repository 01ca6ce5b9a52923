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
from lib.widgets.transformer import HeadsViewer, PositionalEncodingExplorer, draw_all_heads, fits_upright
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


def key_labels(viewer, values):
    """The x tick labels of the frame of ``values`` as drawn: [(text, rotation, window box)]."""
    from test_widgets_legibility import frame_texts

    explorer = explore(viewer)
    renderer, _ = frame_texts(explorer, values)
    ax = explorer._handles["ax"]
    return [(t.get_text(), t.get_rotation(), t.get_window_extent(renderer)) for t in ax.get_xticklabels()]


def assert_apart(labels):
    for (a, _, box_a), (b, _, box_b) in zip(labels, labels[1:]):
        assert box_a.x1 <= box_b.x0, f"key labels {a!r} and {b!r} overlap: {box_a.bounds} and {box_b.bounds}"


WORDS = (
    [["tokenisation", "embedding", "attention", "softmax", "projection", "residual"]] * 2,
    [["normalisation", "feedforward", "dropout", "positional", "encoding", "<eos>"]] * 2,
)


def test_heads_viewer_draws_short_key_labels_upright_and_turns_long_ones(trained_like_maps):
    """Digits (and <bos> beside them) stand upright and apart in every frame; words too wide for
    their columns are turned, apart, and the layout left room for them (issue 31: single digits
    were turned by 90 degrees)."""
    maps, sources, targets = trained_like_maps
    viewer = HeadsViewer(maps, sources, targets)
    for kind in ("encoder", "decoder", "cross"):
        for example in (1, 2):
            labels = key_labels(viewer, {"kind": kind, "example": example})
            assert [rotation for _, rotation, _ in labels] == [0.0] * len(labels), (kind, example, labels)
            assert_apart(labels)
    torch.manual_seed(0)
    model = Seq2SeqTransformer(13, 13, TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=12))
    src, tgt = torch.randint(3, 13, (2, 6)), torch.randint(3, 13, (2, 6))
    wide = {kind: value.numpy() for kind, value in model.attention_maps(src, tgt, torch.tensor([6, 6])).items()}
    words = HeadsViewer(wide, *WORDS)
    labels = key_labels(words, {"kind": "cross"})
    assert {rotation for _, rotation, _ in labels} == {90.0}
    assert [text for text, _, _ in labels] == WORDS[0][0]
    assert all(box_a.x1 <= box_b.x0 for (_, _, box_a), (_, _, box_b) in zip(labels, labels[1:]))
    assert_legible(words)  # turned labels inside the frame: the frozen layout left room


def test_fits_upright_measures_neighbours_and_names_bad_arguments(trained_like_maps):
    fig = Figure(figsize=(4.8, 5.0))
    ax = fig.add_subplot()
    # the labels' size set here: lib.display, once imported, makes matplotlib's default 12 pt
    ax.set_xticks(range(4), ["0", "1", "2", "3"], fontsize=10)
    assert fits_upright(ax, ["0", "1", "2", "3"])
    assert fits_upright(ax, ["<bos>", "1", "2", "3"])  # a wide label beside narrow ones
    assert not fits_upright(ax, ["<bos>", "<bos>", "<bos>", "<bos>"], room=0.5)
    assert fits_upright(ax, ["tokenisation", "embedding", "attention", "softmax"]) is True
    ax.set_xticks(range(6), WORDS[0][0])
    assert fits_upright(ax, WORDS[0][0]) is False
    with pytest.raises(ValueError, match="labels must name at least one column; found none"):
        fits_upright(ax, [])
    with pytest.raises(ValueError, match=r"room must be a fraction of the column in \(0, 1\]; found 0"):
        fits_upright(ax, ["0"], room=0)
