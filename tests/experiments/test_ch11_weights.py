"""Tests for experiments/ch11_weights.py: the pretraining runs chapter 11 loads are those
``python -m experiments.ch11_weights pretraining-runs`` makes on the chapter's recipe (a
shortened run of the command, the stored file against the chapter's own config, and one seed
retrained in full); the loader of experiments/ch11_transformer.py refuses another recipe."""

from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
import torch

import experiments.ch11_transformer as ch11
import experiments.ch11_weights as weights
from experiments.findings import run_arithmetic
from lib.part4_attention.transformer import TransformerConfig

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


def test_pretraining_sweep_runs():
    runs = weights.pretraining_sweep(TransformerConfig(d_model=8, num_heads=2, d_ff=16, num_layers=1, max_len=9,
                                                    learned_positions=True),
                                  seeds=(0,), num_labels=8, pretrain_epochs=1, epochs=1)
    assert set(runs.accuracy) == {"scratch", "frozen", "fine-tuned"} and len(runs.mlm_losses[0]) == 1


def test_the_pretraining_command_stores_what_pretraining_sweep_returns(tmp_path, capsys):
    """A shortened run of ``python -m experiments.ch11_weights pretraining-runs`` (the
    chapter's numbers come from the full run): equal to a direct call, with a recipe the loader
    refuses for the chapter's sizes."""
    path = tmp_path / "pretraining.pt"
    weights._main(["pretraining-runs", "--pretrain-epochs", "1", "--epochs", "1", "--seeds", "1",
                "--out", str(path)])
    assert "saved to" in capsys.readouterr().out
    saved = torch.load(path, weights_only=True)
    sizes = dict(ch11.PRETRAIN_SIZES, pretrain_epochs=1, epochs=1)
    direct = weights.pretraining_sweep(ch11.PRETRAIN_CONFIG, (1,), **sizes)
    assert saved["runs"] == {"mlm_losses": direct.mlm_losses, "accuracy": direct.accuracy,
                             "best_possible": direct.best_possible, "vocab_size": direct.vocab_size}
    assert saved["recipe"] == ch11._pretraining_recipe(ch11.PRETRAIN_CONFIG, (1,), sizes)
    assert saved["arithmetic"] == run_arithmetic()
    with pytest.raises(ValueError, match="differ from this recipe in \\['seeds', 'sizes', 'splits_sha256'\\]"):
        ch11.load_pretraining_runs(ch11.PRETRAIN_CONFIG, path=path)


def test_the_stored_pretraining_runs_are_the_chapters_recipe():
    """The file the chapter loads holds the three seeds' full runs of the chapter's model (the
    chapter's cell builds the same config), and the loader refuses another recipe."""
    path = ch11.PRETRAINING_RUNS_PATH
    assert path.stat().st_size < 20_000, f"{path.name} should stay small"
    loaded = ch11.load_pretraining_runs(ch11.PRETRAIN_CONFIG)
    assert loaded.failing() == [] and [len(losses) for losses in loaded.mlm_losses] == [30] * 3
    assert loaded.accuracy["fine-tuned"][0] == pytest.approx(0.604)  # as the chapter printed it
    saved = torch.load(path, weights_only=True)
    assert loaded.cpu_seconds == saved["cpu_seconds"] > 0  # the chapter glues it as stored
    cells = {cell.get("id"): cell.source
             for cell in nbformat.read(ROOT / "chapters" / "11_transformer.ipynb", as_version=4).cells}
    config_lines = "\n".join(cells["pretraining-run"].splitlines()[:2])  # pretrain_config = ...
    assert config_lines.startswith("pretrain_config = TransformerConfig(")
    chapter = {"TransformerConfig": TransformerConfig}
    exec(config_lines, chapter)  # noqa: S102, the chapter's own lines
    assert chapter["pretrain_config"] == ch11.PRETRAIN_CONFIG
    with pytest.raises(ValueError, match="differ from this recipe in \\['config'\\]"):
        ch11.load_pretraining_runs(replace(ch11.PRETRAIN_CONFIG, d_ff=32))
    with pytest.raises(ValueError, match="differ from this recipe in \\['seeds', 'splits_sha256'\\]"):
        ch11.load_pretraining_runs(ch11.PRETRAIN_CONFIG, seeds=(0, 1, 3))


def test_one_stored_pretraining_run_retrained_in_full_is_bit_equal():
    """Seed 2 at the chapter's sizes: equal to the stored numbers where the arithmetic is the
    command's; elsewhere the low bits part, and the seed's findings still hold."""
    saved = torch.load(ch11.PRETRAINING_RUNS_PATH, weights_only=True)
    runs = weights.pretraining_sweep(ch11.PRETRAIN_CONFIG, (2,), **ch11.PRETRAIN_SIZES)
    if run_arithmetic() == saved["arithmetic"]:
        assert runs.mlm_losses[0] == saved["runs"]["mlm_losses"][2]
        assert {name: [a[2]] for name, a in saved["runs"]["accuracy"].items()} == runs.accuracy
    else:  # another processor or settings: the low bits part, the losses stay close
        assert runs.mlm_losses[0] == pytest.approx(saved["runs"]["mlm_losses"][2], rel=0.01)
        assert runs.failing() == []
    with pytest.raises(FileNotFoundError, match="no stored pretraining runs .*none.pt: make them with "
                       "python -m experiments.ch11_weights pretraining-runs --out .*none.pt"):
        ch11.load_pretraining_runs(ch11.PRETRAIN_CONFIG, path=ch11.PRETRAINING_RUNS_PATH.with_name("none.pt"))
