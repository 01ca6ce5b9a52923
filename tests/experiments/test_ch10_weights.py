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


def test_the_digit_models_script_runs_and_is_deterministic(tmp_path, capsys):
    """A shortened run of ``python -m experiments.ch10_weights --digits``: one local-p model per task and
    seed, the same weights twice, each the ablation's loop (ablate_luong) with the local-p variant."""
    from experiments.ch10_seq2seq import ALIGNMENT_SEEDS, ALIGNMENT_TASKS, LOCAL_P_VARIANT, DIGIT_MODEL_FILE

    arguments = ["--digits", "--n-train", "24", "--n-test", "8", "--epochs", "1"]
    main(["--out", str(tmp_path / "a"), *arguments])
    main(["--out", str(tmp_path / "b"), *arguments])
    printed = capsys.readouterr().out
    assert printed.count("local-p, seed") == 2 * len(ALIGNMENT_TASKS) * len(ALIGNMENT_SEEDS)
    for name in ALIGNMENT_TASKS:
        for seed in ALIGNMENT_SEEDS:
            a, b = (torch.load(tmp_path / run / DIGIT_MODEL_FILE.format(task_name=name, seed=seed), weights_only=True) for run in "ab")
            assert a["options"] == LOCAL_P_VARIANT
            for key in a["state"]:
                assert torch.equal(a["state"][key], b["state"][key]), f"{name}, {seed}: {key} differs"
    seed_1 = torch.load(tmp_path / "a" / DIGIT_MODEL_FILE.format(task_name="copy", seed=1), weights_only=True)["state"]
    seed_0 = torch.load(tmp_path / "a" / DIGIT_MODEL_FILE.format(task_name="copy", seed=0), weights_only=True)["state"]
    assert not all(torch.equal(seed_0[key], seed_1[key]) for key in seed_0)  # the seeds differ


def test_the_chapters_digit_models_are_the_recipe_of_the_script():
    from experiments.ch10_seq2seq import ALIGNMENT_SEEDS, ALIGNMENT_TASKS, LOCAL_P_VARIANT, DIGIT_MODEL_FILE
    from experiments.ch10_weights import DIGIT_RECIPE

    assert DIGIT_RECIPE == dict(n_train=3000, n_test=500, epochs=2, settling_epochs=1, lr=1e-2)  # the ablation's
    for name, task in ALIGNMENT_TASKS.items():
        for seed in ALIGNMENT_SEEDS:
            path = WEIGHTS_DIR / DIGIT_MODEL_FILE.format(task_name=name, seed=seed)
            assert path.stat().st_size < 300_000, f"{path.name} should stay small"
            saved = torch.load(path, weights_only=True)
            assert saved["options"] == LOCAL_P_VARIANT and saved["config"] == asdict(Seq2SeqConfig())
            assert saved["src_vocab_size"] == saved["tgt_vocab_size"] == task.vocab_size
            model = load_seq2seq(path)
            assert model.decoder.mode == "local-p" and model.decoder.window == 2
