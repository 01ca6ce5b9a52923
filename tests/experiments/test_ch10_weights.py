"""Tests for experiments/ch10_weights.py: a shortened run of the script is deterministic, and the
chapter's saved Luong models are its recipes (the runs of experiments/ch10_seq2seq.py are tested in
tests/experiments/test_ch10_seq2seq.py)."""

from dataclasses import asdict

import pytest
import torch

from experiments.ch10_seq2seq import WEIGHTS_DIR
from experiments.ch10_weights import LUONG_RECIPES, main
from experiments.findings import run_arithmetic
from lib.part4_attention.seq2seq import LuongDecoder, Seq2SeqConfig, load_seq2seq


def _made_with_this_arithmetic() -> bool:
    """Whether this machine computes as the one that made the shipped models did (the
    ablation's files record it; the digit models were made by the same command there)."""
    from experiments.ch10_seq2seq import _ablation_model_file

    recorded = torch.load(WEIGHTS_DIR / _ablation_model_file("copy", "local-m", 2),
                          weights_only=True)["arithmetic"]
    return recorded == run_arithmetic()


def _assert_same_model(fresh: dict, shipped: dict) -> None:
    """The same recipe; and, where the arithmetic is the one that made the shipped file, the
    same tensors bit for bit (another processor's low bits part the runs from the first
    step: the chapter then checks only the conclusion, and so does this test, by skipping)."""
    meta = lambda saved: {k: v for k, v in saved.items() if k not in ("state", "arithmetic")}
    assert meta(fresh) == meta(shipped)
    assert fresh["state"].keys() == shipped["state"].keys()
    if not _made_with_this_arithmetic():
        pytest.skip("another arithmetic than the one that made the shipped models")
    for key in shipped["state"]:
        assert torch.equal(fresh["state"][key], shipped["state"][key]), f"{key} differs from the shipped model"


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


def test_a_shipped_digit_model_is_the_full_recipe_retrained(tmp_path, capsys):
    """One (task, seed) retrained by the script's own function at the full recipe (about 7 s): the same
    tensors, bit for bit, as the file the chapter loads."""
    from experiments.ch10_seq2seq import DIGIT_MODEL_FILE
    from experiments.ch10_weights import train_digit_models

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script does
    try:
        train_digit_models(tmp_path, task_names=("reversal",), seeds=(1,))
    finally:
        torch.set_num_threads(threads)
    assert capsys.readouterr().out.count("local-p, seed") == 1
    name = DIGIT_MODEL_FILE.format(task_name="reversal", seed=1)
    _assert_same_model(torch.load(tmp_path / name, weights_only=True),
                       torch.load(WEIGHTS_DIR / name, weights_only=True))


def test_the_digit_options_reach_the_ablation(tmp_path, monkeypatch):
    """Every option given on the command line reaches ablate_luong (0 included, which it then refuses);
    the ones not given are DIGIT_RECIPE's."""
    import pytest

    import experiments.ch10_weights as script

    calls = []

    def ablate(tasks, runs, seeds, variants, **options):
        calls.append(options)
        raise RuntimeError("stop")

    monkeypatch.setattr(script, "ablate_luong", ablate)
    for arguments, expected in [
        ([], script.DIGIT_RECIPE),
        (["--n-train", "24", "--n-test", "8", "--epochs", "1", "--lr", "0.5"],
         {**script.DIGIT_RECIPE, "n_train": 24, "n_test": 8, "epochs": 1, "lr": 0.5}),
        (["--epochs", "0"], {**script.DIGIT_RECIPE, "epochs": 0}),
    ]:
        with pytest.raises(RuntimeError, match="stop"):
            main(["--digits", "--out", str(tmp_path), *arguments])
        assert calls.pop() == expected, arguments
    monkeypatch.undo()
    with pytest.raises(TypeError, match="parameter 'epochs'[\\s\\S]*Actual value: 0"):
        main(["--digits", "--out", str(tmp_path), "--epochs", "0"])


def test_the_digit_recipe_is_the_ablation_cells():
    """DIGIT_RECIPE is what chapter 10's cell ablation-code passes to ablate_luong (its defaults filled
    in), with the same seeds and tasks: the shipped local-p models are trained like the ablation's."""
    import ast
    import inspect
    import json
    from pathlib import Path

    from experiments.ch10_seq2seq import ALIGNMENT_SEEDS, ALIGNMENT_TASKS, ablate_luong
    from experiments.ch10_weights import DIGIT_RECIPE

    notebook = json.loads((Path(__file__).parents[2] / "chapters" / "10_seq2seq.ipynb").read_text())
    sources = {cell.get("id"): "".join(cell["source"]) for cell in notebook["cells"]}
    calls = [node for node in ast.walk(ast.parse(sources["ablation-code"]))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ablate_luong"]
    assert len(calls) == 1
    defaults = {name: p.default for name, p in inspect.signature(ablate_luong).parameters.items()}
    keywords = {keyword.arg: keyword.value for keyword in calls[0].keywords}
    assert ast.unparse(keywords.pop("weights")) == "ch10.WEIGHTS_DIR"  # the shipped models, loaded
    given = {name: ast.literal_eval(value) for name, value in keywords.items()}
    assert {key: given.get(key, defaults[key]) for key in DIGIT_RECIPE} == DIGIT_RECIPE
    assert set(given) <= set(DIGIT_RECIPE)  # nothing else changed, such as data_seed
    seeds = [ast.literal_eval(node.value) for source in sources.values() if source and "seeds = " in source
             for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Assign)
             and [getattr(t, "id", None) for t in node.targets] == ["seeds"]]
    assert seeds == [ALIGNMENT_SEEDS]
    from experiments.ch10_seq2seq import ABLATION_RUNS

    runs = [ast.literal_eval(node.value) for node in ast.walk(ast.parse(sources["ablation-code"]))
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["runs"]]
    assert runs == [list(ABLATION_RUNS)]  # the runs whose models the script ships
    tasks = "short_tasks = " + sources["ablation-code"].split("short_tasks = ", 1)[1].split("\nruns", 1)[0]
    built = {}
    exec(tasks, {"CopyTask": type(ALIGNMENT_TASKS["copy"]), "ReversalTask": type(ALIGNMENT_TASKS["reversal"])}, built)
    assert {name: (type(task), vars(task)) for name, task in built["short_tasks"].items()} == {
        name: (type(task), vars(task)) for name, task in ALIGNMENT_TASKS.items()}


def test_the_ablation_models_script_runs_and_is_deterministic(tmp_path, capsys):
    """A shortened run of ``python -m experiments.ch10_weights --ablation``: one model per run of the
    ablation and seed, the same weights twice, each saved with its recipe."""
    from experiments.ch10_seq2seq import ABLATION_RUNS, ALIGNMENT_SEEDS, LUONG_VARIANTS, _ablation_model_file

    arguments = ["--ablation", "--n-train", "24", "--n-test", "8", "--epochs", "1"]
    main(["--out", str(tmp_path / "a"), *arguments])
    main(["--out", str(tmp_path / "b"), *arguments])
    printed = capsys.readouterr().out
    assert printed.count(", seed ") == 2 * len(ABLATION_RUNS) * len(ALIGNMENT_SEEDS)
    for task_name, variant in ABLATION_RUNS:
        for seed in ALIGNMENT_SEEDS:
            name = _ablation_model_file(task_name, variant, seed)
            a, b = (torch.load(tmp_path / run / name, weights_only=True) for run in "ab")
            assert a["options"] == LUONG_VARIANTS[variant] == a["recipe"]["options"]
            assert (a["recipe"]["seed"], a["recipe"]["n_train"], a["recipe"]["epochs"]) == (seed, 24, 1)
            for key in a["state"]:
                assert torch.equal(a["state"][key], b["state"][key]), f"{name}: {key} differs"
    import pytest

    with pytest.raises(SystemExit):  # one kind of model at a time
        main(["--out", str(tmp_path / "c"), "--digits", *arguments])


def test_the_chapters_ablation_models_are_the_recipe_of_the_script():
    from experiments.ch10_seq2seq import (ABLATION_RUNS, ALIGNMENT_SEEDS, ALIGNMENT_TASKS, LUONG_VARIANTS,
                                          _ablation_model_file, _ablation_recipe)
    from experiments.ch10_weights import DIGIT_RECIPE

    total = 0
    for task_name, variant in ABLATION_RUNS:
        for seed in ALIGNMENT_SEEDS:
            path = WEIGHTS_DIR / _ablation_model_file(task_name, variant, seed)
            total += path.stat().st_size
            assert path.stat().st_size < 250_000, f"{path.name} should stay small"
            saved = torch.load(path, weights_only=True)
            options = LUONG_VARIANTS[variant]
            assert saved["recipe"] == _ablation_recipe(ALIGNMENT_TASKS[task_name], options, seed, data_seed=0,
                                                      **DIGIT_RECIPE)
            assert saved["options"] == options and saved["config"] == asdict(Seq2SeqConfig())
            assert load_seq2seq(path).decoder.mode == options["mode"]
    assert total < 3_200_000


def test_a_shipped_ablation_model_is_the_full_recipe_retrained(tmp_path, capsys):
    """One model of the ablation retrained by the script's own function at the full recipe (about 3 s):
    the same tensors, bit for bit, as the file the chapter loads."""
    from experiments.ch10_seq2seq import _ablation_model_file
    from experiments.ch10_weights import train_ablation_models

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script does
    try:
        train_ablation_models(tmp_path, runs=[("copy", "local-m")], seeds=(2,))
    finally:
        torch.set_num_threads(threads)
    assert capsys.readouterr().out.count(", seed ") == 1
    name = _ablation_model_file("copy", "local-m", 2)
    _assert_same_model(torch.load(tmp_path / name, weights_only=True),
                       torch.load(WEIGHTS_DIR / name, weights_only=True))


def test_the_ablation_refuses_a_file_of_another_recipe(tmp_path):
    """ablate_luong(..., weights=folder) loads only a model trained by its own recipe: another number of
    passes, another seed, another variant's file put in its place are each refused by name."""
    import shutil

    import pytest

    from experiments.ch10_seq2seq import ALIGNMENT_TASKS, ablate_luong, _ablation_model_file, _load_ablation_model
    from experiments.ch10_weights import DIGIT_RECIPE

    run = [("copy", "local-m")]
    with pytest.raises(ValueError, match="luong_copy_local_m_seed0.pt must hold a model trained by .*'epochs': 3"):
        ablate_luong(ALIGNMENT_TASKS, run, [0], weights=WEIGHTS_DIR, **{**DIGIT_RECIPE, "epochs": 3})
    shutil.copy(WEIGHTS_DIR / _ablation_model_file("copy", "local-m", 1), tmp_path / _ablation_model_file("copy", "local-m", 0))
    with pytest.raises(ValueError, match="found one trained by .*'seed': 1"):
        ablate_luong(ALIGNMENT_TASKS, run, [0], weights=tmp_path, **DIGIT_RECIPE)
    shutil.copy(WEIGHTS_DIR / _ablation_model_file("copy", "global", 0), tmp_path / _ablation_model_file("copy", "local-m", 0))
    with pytest.raises(ValueError, match="'mode': 'global'"):
        ablate_luong(ALIGNMENT_TASKS, run, [0], weights=tmp_path, **DIGIT_RECIPE)
    # a folder without the model names the command that makes it
    with pytest.raises(ValueError, match=f"no stored model {tmp_path / 'empty'}/luong_copy_local_m_seed0.pt: make the "
                       f"ablation's models with python -m experiments.ch10_weights --ablation --out {tmp_path / 'empty'}$"):
        ablate_luong(ALIGNMENT_TASKS, run, [0], weights=tmp_path / "empty", **DIGIT_RECIPE)
    # a date model has no recipe
    with pytest.raises(ValueError, match="found one trained by None"):
        _load_ablation_model(WEIGHTS_DIR / "luong_global.pt", {"seed": 0})
    # the right file loads, and scores as the chapter's table
    loaded = ablate_luong(ALIGNMENT_TASKS, run, [0], weights=WEIGHTS_DIR, **DIGIT_RECIPE)
    assert round(loaded.exact["copy", "local-m"][0].item(), 3) == 0.980
