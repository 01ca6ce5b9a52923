"""The visuals of chapter 10 (lib.widgets.seq2seq): pure ``compute`` against lib, plus smoke
tests that the explorer renders through :func:`lib.widgets.explore`."""
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from lib.part4_attention.seq2seq import Seq2SeqConfig, alignments, build_seq2seq
from lib.part4_attention.date_task import DateTask
from lib.widgets import explore
from lib.widgets.seq2seq import AlignmentExplorer, alignment_data, draw_alignment
from test_widgets_legibility import assert_legible

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP
WINDOWS = (1, 2, 4)
CONFIG = Seq2SeqConfig(embed_dim=6, hidden_dim=5, attention_dim=7)


@pytest.fixture(scope="module")
def setup():
    task = DateTask()
    _, test, texts = task.split(10, 3, seed=0)
    models = {}
    for name, decoder, options in (
        ("Bahdanau", "bahdanau", {}),
        ("Luong global", "luong", {"mode": "global"}),
        ("Luong local-p", "luong", {"mode": "local-p", "window": 2}),
    ):
        torch.manual_seed(len(models))
        models[name] = build_seq2seq(decoder, task.src_vocab_size, task.tgt_vocab_size, CONFIG, **options).eval()
    data = alignment_data(models, task, test, WINDOWS)
    return task, test, texts, models, data


def test_alignment_data_holds_every_frame_and_restores_the_window(setup):
    task, test, texts, models, data = setup
    assert data["sources"] == texts
    assert data["trained_windows"] == {"Bahdanau": None, "Luong global": None, "Luong local-p": 2}
    assert models["Luong local-p"].decoder.window == 2, "the model's window must be restored"
    assert len(data["frames"]) == 3 * 3 * len(WINDOWS)
    for name in ("Bahdanau", "Luong global"):  # the window does not apply: one frame shared by every D
        assert all(data["frames"][(0, name, D)] is data["frames"][(0, name, 1)] for D in WINDOWS)


@pytest.mark.parametrize("name", ["Bahdanau", "Luong global"])
def test_frames_are_the_weights_of_lib_seq2seq_alignments(setup, name):
    task, test, texts, models, data = setup
    outputs, weights = alignments(models[name], test, task.bos, task.eos)
    for i, output in enumerate(outputs):
        frame = data["frames"][(i, name, 4)]
        assert frame["output"] == output and frame["centres"] is None
        np.testing.assert_allclose(frame["weights"], weights[i, : len(output), : len(texts[i])].numpy(), atol=1e-6)


def test_local_p_frames_use_the_chosen_window_and_vanish_outside_it(setup):
    task, test, texts, models, data = setup
    model = models["Luong local-p"]
    for D in WINDOWS:
        model.decoder.window = D
        try:
            outputs, weights = alignments(model, test, task.bos, task.eos)
        finally:
            model.decoder.window = 2
        for i, output in enumerate(outputs):
            frame = data["frames"][(i, "Luong local-p", D)]
            np.testing.assert_allclose(frame["weights"], weights[i, : len(output), : len(texts[i])].numpy(),
                                       atol=1e-6)
            positions = np.arange(1, len(texts[i]) + 1)
            outside = np.abs(positions[None, :] - frame["centres"][:, None]) > D
            assert (frame["weights"][outside] == 0).all()
            assert ((0 <= frame["centres"]) & (frame["centres"] <= len(texts[i]))).all()


def test_compute_pads_with_nan_and_labels_rows_and_columns(setup):
    task, test, texts, models, data = setup
    viewer = AlignmentExplorer(data, task)
    assert [c.name for c in viewer.controls] == ["example", "model", "window"]
    assert viewer.controls[1].default == "Luong local-p" and viewer.controls[2].default == 2
    frame = data["frames"][(1, "Luong local-p", 4)]
    shown = viewer.compute(example=texts[1], model="Luong local-p", window=4)
    rows, columns = len(frame["output"]), len(texts[1])
    assert shown["weights"].shape == (11, max(len(t) for t in texts))
    np.testing.assert_array_equal(shown["weights"][:rows, :columns], frame["weights"])
    assert np.isnan(shown["weights"][rows:]).all() and np.isnan(shown["weights"][:, columns:]).all()
    assert shown["column_labels"] == list(texts[1])
    assert len(shown["row_labels"]) == rows
    np.testing.assert_allclose(shown["centres"][:rows], frame["centres"] - 1)  # columns count from 0
    assert shown["window"] == 4 and "D = 4" in shown["title"]
    output = task.target_text(frame["output"])
    assert shown["title"].startswith(f"Luong local-p, D = 4: {output}")
    assert shown["correct"] == (output == task.target_text(test.tgt_out[1].tolist()))
    global_frame = viewer.compute(example=texts[0], model="Luong global", window=1)
    assert global_frame["window"] is None and np.isnan(global_frame["centres"]).all()
    assert "D =" not in global_frame["title"]


def test_the_explorer_renders_every_control(setup):
    task, test, texts, models, data = setup
    explorer = explore(AlignmentExplorer(data, task))
    pictures = {explorer.render(model=m, window=w) for m in data["models"] for w in WINDOWS}
    assert all(png[8:12] == WEBP_TAG for png in pictures)
    assert len({explorer.render(window=w) for w in WINDOWS}) > 1, "the window must change the local-p picture"
    assert len({explorer.render(example=t) for t in texts}) == len(texts)


def test_draw_alignment_checks_its_shape():
    ax = Figure().add_subplot()
    image = draw_alignment(ax, np.eye(2), "ab", ["x", "y"], title="t")
    assert image.get_array().shape == (2, 2) and ax.get_title() == "t"
    with pytest.raises(ValueError, match=r"weights must have shape \(len\(target\), len\(source\)\) = \(2, 3\)"):
        draw_alignment(ax, np.eye(2), "abc", ["x", "y"])
    with pytest.raises(TypeError, match="data must be the dict of alignment_data; found list"):
        AlignmentExplorer([], DateTask())


def test_the_explorer_is_legible_on_a_phone_and_disables_the_window_of_global_models(setup):
    task, test, texts, models, data = setup
    visual = AlignmentExplorer(data, task)
    assert_legible(visual)
    explorer = explore(visual)
    for model, trained in data["trained_windows"].items():
        reasons = explorer.inactive(model=model)
        assert ("window" in reasons) == (trained is None), model
        if trained is None:
            assert len({explorer.render(model=model, window=w) for w in WINDOWS}) == 1
