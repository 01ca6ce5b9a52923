"""Chapter 6's runs made offline (experiments.ch06_weights): each command, shortened,
stores what direct calls return; the stored files are the chapter's recipe; one seed of
each, retrained in full, is bit-equal to them on the arithmetic that made them; and the
loaders of experiments.ch06_language_models refuse any other recipe."""

from pathlib import Path

import nbformat
import pytest
import torch

from experiments import ch06_language_models as ch06
from experiments import ch06_weights as ch06w
from experiments.findings import run_arithmetic
from lib.part3_words.lm import CountingLanguage, EpsilonSchedule

pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]


def chapter_cells():
    notebook = nbformat.read(ROOT / "chapters" / "06_language_models.ipynb", as_version=4)
    return {cell.get("id"): cell.source for cell in notebook.cells}


@pytest.fixture(scope="module")
def lee():
    """The chapter's vocabulary and batches, as the neural-lms command rebuilds them."""
    return ch06w.chapter_lee_batches()


def _same_neural_runs(saved, runs, seeds):
    assert [s.keys() for s in saved["models"]] == [
        runs.models[seed].state_dict().keys() for seed in seeds
    ]
    for state, seed in zip(saved["models"], seeds):
        for name, tensor in runs.models[seed].state_dict().items():
            assert torch.equal(state[name], tensor), f"seed {seed}, {name}"
    for name in ch06._NEURAL_FIELDS:
        assert saved["runs"][name] == getattr(runs, name), name


def test_the_neural_lms_command_stores_what_train_neural_lms_trains(
    tmp_path, capsys, lee
):
    """A shortened run of ``python -m experiments.ch06_language_models neural-lms``
    (three steps, one seed) equals a direct call; the loader refuses it for the chapter
    (another number of steps) and its recipe is that of the shortened run."""
    vocabulary, batches = lee
    path = tmp_path / "lms.pt"
    ch06w.main(["neural-lms", "--steps", "3", "--seeds", "1", "--out", str(path)])
    assert "saved to" in capsys.readouterr().out
    saved = torch.load(path, weights_only=True)
    V = len(vocabulary)
    direct = ch06w.train_neural_lms(batches, V, (1,), steps=3)
    _same_neural_runs(saved, direct, (1,))
    assert saved["recipe"] == ch06._neural_recipe(batches, V, (1,), 3)
    assert saved["arithmetic"] == run_arithmetic() and saved["cpu_seconds"] > 0
    with pytest.raises(ValueError, match=r"differ from this recipe in \['training'\]"):
        ch06.load_neural_lms(batches, V, (1,), path=path)


def test_the_stored_neural_lms_are_the_chapters_recipe(lee):
    """The file the chapter loads holds its three models at full length, trained on the
    batches the chapter's own cells build, and it stays small."""
    path = ch06.NEURAL_LMS_PATH
    assert path.stat().st_size < 3_000_000, f"{path.name} should stay small"
    saved = torch.load(path, weights_only=True)
    vocabulary, batches = lee
    recipe = ch06._neural_recipe(batches, len(vocabulary), ch06.SEEDS)
    assert saved["recipe"] == recipe and recipe["training"]["steps"] == 106
    # the chapter's cells lee-code and neural-train-code, up to the loader's call
    cells = chapter_cells()
    train_lines = cells["neural-train-code"].split("show_code(")[0]
    assert "load_neural_lms(batches, V, seeds)" in cells["neural-train-code"]
    chapter = {}
    exec(cells["setup"], chapter)  # noqa: S102, the chapter's own lines
    chapter.update(glue=lambda *args: None, print=lambda *args, **kwargs: None)
    exec(cells["lee-code"] + "\n" + train_lines, chapter)  # noqa: S102
    assert chapter["seeds"] == ch06.SEEDS and chapter["V"] == len(vocabulary)
    assert ch06._neural_recipe(chapter["batches"], chapter["V"], chapter["seeds"]) == recipe


def test_one_stored_neural_lm_retrained_in_full_is_bit_equal(lee):
    """Seed 2, all 106 steps: the stored weights and numbers, bit for bit, where the
    arithmetic is the command's; elsewhere its loss still falls by more than 2 nats."""
    vocabulary, batches = lee
    saved = torch.load(ch06.NEURAL_LMS_PATH, weights_only=True)
    runs = ch06w.train_neural_lms(batches, len(vocabulary), (2,))
    if run_arithmetic() == saved["arithmetic"]:
        stored = {
            "models": saved["models"][2:],
            "runs": {name: saved["runs"][name][2:] for name in saved["runs"]},
        }
        _same_neural_runs(stored, runs, (2,))
    else:  # another processor or settings: the low bits part, the outcome does not
        assert runs.start_loss[0] - runs.end_loss[0] > 2


def test_the_neural_lms_loader_refuses_another_recipe(lee, tmp_path):
    vocabulary, batches = lee
    V = len(vocabulary)
    loaded = ch06.load_neural_lms(batches, V)
    assert loaded.failing() == [] and list(loaded.models) == [0, 1, 2]
    saved = torch.load(ch06.NEURAL_LMS_PATH, weights_only=True)
    assert torch.equal(loaded.models[1].output.weight, saved["models"][1]["output.weight"])
    with pytest.raises(ValueError, match=r"differ from this recipe in \['seeds'\]"):
        ch06.load_neural_lms(batches, V, (0, 1, 3))
    fewer = dict(batches, valid=tuple(part[:-1] for part in batches["valid"]))
    with pytest.raises(ValueError, match=r"differ from this recipe in \['batches_sha256'\]"):
        ch06.load_neural_lms(fewer, V)
    with pytest.raises(ValueError, match=r"in \['model'\]; run python -m experiments"):
        ch06.load_neural_lms(batches, V + 1)
    with pytest.raises(FileNotFoundError, match="python -m experiments.ch06_weights neural-lms"):
        ch06.load_neural_lms(batches, V, path=tmp_path / "missing.pt")


@pytest.fixture(scope="module")
def clock_data():
    return ch06w.chapter_clock_data()


def test_the_clock_command_stores_what_the_clock_runs_give(tmp_path, clock_data):
    """A shortened ``clock-runs`` (one seed, 3 training and 2 REINFORCE steps) equals
    direct calls of the chapter's functions; the loaders refuse it for the chapter."""
    path = tmp_path / "clock.pt"
    ch06w.main(["clock-runs", "--steps", "3", "--reinforce-steps", "2", "--seeds", "1",
                "--out", str(path)])  # fmt: skip
    saved = torch.load(path, weights_only=True)
    language, sentences, test_sentences, schedule = clock_data
    drifted = ch06.exposure_drift(language, sentences, test_sentences, (1,), steps=3)
    scheduled = ch06w.scheduled_sampling_drift(
        language, sentences, test_sentences, schedule, drifted, (1,), steps=3
    )
    tuned = ch06w.reinforce_clock_models(
        drifted, language, sentences, test_sentences, 3e-3, "leave-one-out", steps=2
    )
    plain = ch06w.reinforce_without_baseline(
        drifted, language, sentences, test_sentences, steps=2
    )
    runs = saved["runs"]
    assert list(runs["scheduled"]) == [1]
    assert all(torch.equal(a, b) for a, b in zip(runs["scheduled"][1], scheduled.scheduled[1]))
    assert all(torch.equal(a, b) for a, b in zip(runs["teacher_forced"][1], drifted.curves[1]))
    assert runs["before"] == tuned.before and runs["after"] == tuned.after
    assert runs["at_3e3"] == plain.at_3e3 and runs["at_1e3"] == plain.at_1e3
    assert saved["recipe"] == ch06._clock_recipe(*clock_data, (1,), 3, 2)
    with pytest.raises(ValueError, match=r"in \['steps', 'reinforce'\]"):
        ch06.load_reinforce_without_baseline(*clock_data, (1,), path=path)


def test_the_stored_clock_runs_are_the_chapters_recipe(clock_data):
    """The stored clock runs are made on the language, sentences and schedule the
    chapter's own cells build, at the rate and baseline its REINFORCE cell names."""
    path = ch06.CLOCK_RUNS_PATH
    assert path.stat().st_size < 50_000, f"{path.name} should stay small"
    saved = torch.load(path, weights_only=True)
    recipe = ch06._clock_recipe(*clock_data, ch06.SEEDS)
    assert saved["recipe"] == recipe and recipe["steps"] == 200
    assert recipe["reinforce"]["steps"] == 100 and list(saved["runs"]["after"]) == [0, 1, 2]
    cells = chapter_cells()
    lines = [cells["counting-code"].splitlines()[:2], cells["exposure-train-code"].splitlines()[:1],
             cells["scheduled-train-code"].splitlines()[:1], ["seeds = (0, 1, 2)"]]
    chapter = {"torch": torch, "CountingLanguage": CountingLanguage,
               "EpsilonSchedule": EpsilonSchedule}
    exec("\n".join(line for part in lines for line in part), chapter)  # noqa: S102
    found = (chapter[name] for name in ("language", "sentences", "test_sentences", "schedule"))
    assert ch06._clock_recipe(*found, chapter["seeds"]) == recipe
    assert 'lr=3e-3, baseline="leave-one-out"' in cells["reinforce-clock-code"]
    assert (ch06.CLOCK_LR, ch06.CLOCK_BASELINE) == (3e-3, "leave-one-out")


def test_one_stored_clock_seed_retrained_in_full_is_bit_equal(clock_data):
    """Seed 2 in full: its teacher-forced model, scheduled sampling and REINFORCE with
    the leave-one-out baseline (the runs without a baseline take the same path, which
    the shortened command checks): equal to the stored numbers where the arithmetic is
    the command's; elsewhere REINFORCE still raises the reward and lowers the error
    after own prefixes."""
    saved = torch.load(ch06.CLOCK_RUNS_PATH, weights_only=True)
    stored = saved["runs"]
    language, sentences, test_sentences, schedule = clock_data
    drifted = ch06.exposure_drift(language, sentences, test_sentences, (2,))
    scheduled = ch06w.scheduled_sampling_drift(
        language, sentences, test_sentences, schedule, drifted, (2,)
    )
    tuned = ch06w.reinforce_clock_models(
        drifted, language, sentences, test_sentences, ch06.CLOCK_LR, ch06.CLOCK_BASELINE
    )
    if run_arithmetic() == saved["arithmetic"]:
        assert all(
            torch.equal(a, b) for a, b in zip(drifted.curves[2], stored["teacher_forced"][2])
        )
        assert all(
            torch.equal(a, b) for a, b in zip(scheduled.scheduled[2], stored["scheduled"][2])
        )
        assert tuned.before[2] == stored["before"][2]
        assert tuned.after[2] == stored["after"][2]
    else:  # another processor or settings: the low bits part, the outcome does not
        after, before = tuned.after[2], tuned.before[2]
        assert after["reward (bigram precision)"] > before["reward (bigram precision)"]
        assert after["KL after own"] < before["KL after own"]


def test_the_clock_loaders_refuse_another_recipe(clock_data):
    language, sentences, test_sentences, schedule = clock_data
    assert ch06.load_reinforce_clock_models(*clock_data).failing() == []
    assert ch06.load_reinforce_without_baseline(*clock_data).failing() == []
    with pytest.raises(ValueError, match=r"differ from this recipe in \['seeds'\]"):
        ch06.load_reinforce_clock_models(*clock_data, (0, 1))
    with pytest.raises(ValueError, match=r"in \['sentences_sha256'\]"):
        ch06.load_reinforce_without_baseline(language, sentences[1:], test_sentences, schedule)
    other = EpsilonSchedule("inverse_sigmoid", k=40)
    with pytest.raises(ValueError, match=r"differ from this recipe in \['schedule'\]"):
        ch06.load_reinforce_clock_models(language, sentences, test_sentences, other)
    with pytest.raises(ValueError, match="lr=0.003 and baseline='leave-one-out'; found lr=0.001"):
        ch06.load_reinforce_clock_models(*clock_data, lr=1e-3)


TRAIN = dict(ch06.CLOCK_TRAIN)


@pytest.mark.parametrize(
    "name, other, key",
    [
        ("CLOCK_MODEL", {"vocab_size": 12, "context": 3, "embedding_dim": 16, "hidden_size": 32},
         "model"),
        ("CLOCK_TRAIN", {**TRAIN, "batch_size": 64}, "training"),
        ("CLOCK_TRAIN", {**TRAIN, "lr": 2e-2}, "training"),
        ("CLOCK_TRAIN", {**TRAIN, "max_norm": float("inf")}, "training"),
        ("CLOCK_TRAIN", {**TRAIN, "seed": 1}, "training"),
        ("REINFORCE_BATCH", 32, "reinforce"),
        ("NO_BASELINE_LRS", (3e-3, 3e-4), "reinforce"),
        ("CLOCK_PROMPT", 4, "prompt"),
        ("CLOCK_BOS", 11, "bos"),
        ("DRIFT_SEED_OFFSET", 6, "drift_seed_offset"),
        ("train_lm", lambda *args, **kwargs: None, "code_sha256"),
        ("reinforce_fine_tune", lambda *args, **kwargs: None, "code_sha256"),
    ],
)
def test_the_clock_loaders_refuse_runs_of_another_model_training_or_sampling(
    monkeypatch, clock_data, name, other, key
):
    """Every setting of the clock runs, and the code that trains, samples and scores,
    is in the stored recipe: changing one makes each loader refuse the file and name
    what differs."""
    monkeypatch.setattr(ch06, name, other)
    for load in (ch06.load_reinforce_clock_models, ch06.load_reinforce_without_baseline):
        with pytest.raises(ValueError, match=rf"in \[[^]]*'{key}'"):
            load(*clock_data)


def test_the_scheduled_runs_load_only_beside_the_teacher_forced_models_they_came_from(
    clock_data,
):
    """The stored scheduled-sampling curves are compared with live teacher-forced ones:
    the loader takes the curves the file's runs started from, and refuses others."""
    saved = torch.load(ch06.CLOCK_RUNS_PATH, weights_only=True)
    stored = saved["runs"]["teacher_forced"]
    same = ch06.ExposureDrift({}, stored)
    loaded = ch06.load_scheduled_sampling_drift(*clock_data, same)
    assert loaded.teacher_forced is stored
    shifted = {seed: (on_data, on_own * 1.1) for seed, (on_data, on_own) in stored.items()}
    with pytest.raises(ValueError, match="teacher-forced curves of seed 0 differ"):
        ch06.load_scheduled_sampling_drift(*clock_data, ch06.ExposureDrift({}, shifted))
