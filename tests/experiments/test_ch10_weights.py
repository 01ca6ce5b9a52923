"""Tests for experiments/ch10_weights.py: a shortened run of the script is deterministic, and the
chapter's saved Luong models are its recipes (the runs of experiments/ch10_seq2seq.py are tested in
tests/experiments/test_ch10_seq2seq.py)."""

from dataclasses import asdict

import torch

from experiments.ch10_seq2seq import WEIGHTS_DIR
from experiments.ch10_weights import LUONG_RECIPES, main
from lib.part4_attention.seq2seq import LuongDecoder, Seq2SeqConfig, load_seq2seq


def test_the_weights_script_runs_and_is_deterministic(tmp_path, capsys):
    """A shortened run of ``python -m experiments.ch10_weights`` (the chapter's weights come from the full run)."""
    arguments = ["--n-train", "48", "--n-test", "8", "--epochs", "1"]
    main(["--out", str(tmp_path / "a"), *arguments])
    main(["--out", str(tmp_path / "b"), *arguments])
    printed = capsys.readouterr().out
    assert printed.count("held-out exact match") == 2 * len(LUONG_RECIPES)
    for name, options in LUONG_RECIPES.items():
        a, b = (torch.load(tmp_path / run / f"{name}.pt", weights_only=True) for run in ("a", "b"))
        assert a["options"] == options
        for key in a["state"]:
            assert torch.equal(a["state"][key], b["state"][key]), f"{name}: {key} differs between two runs"
        assert isinstance(load_seq2seq(tmp_path / "a" / f"{name}.pt").decoder, LuongDecoder)


def test_the_chapters_saved_weights_are_the_recipes_of_the_script():
    for name, options in LUONG_RECIPES.items():
        path = WEIGHTS_DIR / f"{name}.pt"
        assert path.stat().st_size < 500_000, f"{path.name} should stay small"
        saved = torch.load(path, weights_only=True)
        assert saved["decoder"] == "luong" and saved["options"] == options
        assert saved["config"] == asdict(Seq2SeqConfig())
        model = load_seq2seq(path)  # the state dict fits the current code
        assert model.decoder.mode == options["mode"]
