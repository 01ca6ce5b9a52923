"""Tests for experiments/ch10_seq2seq.py and experiments/ch10_weights.py (moved from
tests/lib/part4_attention/test_seq2seq.py with _train_model, the ablation and the weights script).

Each result's findings are tried on results made by hand, one that shows them and one
that contradicts them; the runs are checked against the loops they stand for, at tiny sizes.
"""

from dataclasses import asdict

import pytest
import torch

from experiments.ch10_seq2seq import (
    LUONG_VARIANTS, WEIGHTS_DIR, BahdanauMonthWeight, BahdanauReversal, DateTraining, LuongAblation,
    LuongMonthWeight, PlainReversal, PointerSorting, ablate_luong, bahdanau_month_weight, luong_month_weight,
    _train_model,
)
from experiments.ch10_weights import LUONG_RECIPES, main
from lib.part4_attention.seq2seq import LuongDecoder, Seq2SeqConfig, build_seq2seq, exact_matches, load_seq2seq
from lib.part4_attention.date_task import DateTask
from lib.part4_attention.reversal_task import CopyTask, ReversalTask
from lib.part4_attention.pairs import train_seq2seq

SMALL = Seq2SeqConfig(embed_dim=5, hidden_dim=4, attention_dim=6)


def verdicts(result):
    """Which of the result's findings hold, in order."""
    return [bool(finding.holds(result)) for finding in result.FINDINGS]


# ---------------------------------------------------------------------------
# The findings, on results made by hand.
# ---------------------------------------------------------------------------


def reversal(three_digits, nine_on, eight_on=None):
    """(seeds = 2, lengths 3 .. 12) accuracies: one value for 3 digits, one from 9 digits on
    and one for 4 to 8 (or ``eight_on`` for length 8)."""
    accuracy = torch.full((2, 10), 0.5)
    accuracy[:, 0], accuracy[:, 6:] = three_digits, nine_on
    if eight_on is not None:
        accuracy[:, 5] = eight_on
    return accuracy


def test_plain_reversal_findings():
    assert verdicts(PlainReversal(reversal(0.8, 0.02))) == [True, True]
    assert verdicts(PlainReversal(reversal(0.7, 0.10))) == [False, False]


def test_bahdanau_reversal_findings():
    plain = reversal(0.8, 0.02, eight_on=0.1)
    assert verdicts(BahdanauReversal(reversal(0.9, 0.6), plain)) == [True, True]
    assert verdicts(BahdanauReversal(reversal(0.9, 0.34), plain)) == [False, True]
    assert verdicts(BahdanauReversal(reversal(0.9, 0.4, eight_on=0.35), plain)) == [True, False]


def dates(bahdanau, plain, losses=((1.0, 0.6), (1.0, 0.6)), bahdanau_bins=0.5, plain_bins=0.1):
    seeds = len(bahdanau)
    return DateTraining(
        n_train=2500, epochs=2, models={}, correct={},
        losses={"Bahdanau": [torch.tensor(losses[0])] * seeds, "plain": [torch.tensor(losses[1])] * seeds},
        accuracy={"Bahdanau": torch.tensor(bahdanau), "plain": torch.tensor(plain)},
        by_length={"Bahdanau": torch.full((seeds, 7), bahdanau_bins), "plain": torch.full((seeds, 7), plain_bins)},
    )


def test_date_training_findings():
    assert verdicts(dates([0.5, 0.6], [0.1, 0.12])) == [True] * 6
    assert verdicts(dates([0.3, 0.45], [0.2, 0.12], losses=((1.0, 0.8), (1.0, 0.6)),
                          bahdanau_bins=0.25, plain_bins=0.25)) == [False, False, False, False, False, False]
    # four times as many: 0.4 against 0.11 fails although both bounds hold
    assert verdicts(dates([0.4], [0.11])) == [True, True, False, True, True, True]
    assert torch.allclose(dates([0.5], [0.1], losses=((2.0, 1.0), (1.0, 0.6))).loss_drop, torch.tensor([0.5, 0.4]))


def test_month_weight_findings():
    assert verdicts(BahdanauMonthWeight(100, [torch.tensor(0.6), torch.tensor(0.7)])) == [True]
    assert verdicts(BahdanauMonthWeight(100, [torch.tensor(0.6), torch.tensor(0.4)])) == [False]
    bahdanau = [torch.tensor(0.6), torch.tensor(0.8)]
    luong = {"Luong global": torch.tensor(0.9), "Luong local-p": torch.tensor(0.1)}
    assert verdicts(LuongMonthWeight(luong, bahdanau)) == [True]
    assert verdicts(LuongMonthWeight({**luong, "Luong global": torch.tensor(0.7)}, bahdanau)) == [False]


def ablation(copy_global=0.95, copy_local=0.9, rev_global=0.95, rev_local=0.4, feeding=0.95, no_feeding=0.93):
    long = {("copy", "global"): copy_global, ("copy", "local-m"): copy_local,
            ("reversal", "global"): rev_global, ("reversal", "local-m"): rev_local}
    exact = {("reversal", "global"): feeding, ("reversal", "global, no input feeding"): no_feeding}
    as_seeds = lambda values: {key: torch.tensor([value, value]) for key, value in values.items()}  # noqa: E731
    return LuongAblation({}, as_seeds(exact), as_seeds(long), {})


def test_luong_ablation_findings():
    assert verdicts(ablation()) == [True] * 8
    assert verdicts(ablation(copy_global=0.7)) == [False, True, False, True, True, True, True, True]
    assert verdicts(ablation(copy_local=0.65)) == [True, False, False, True, True, False, True, True]
    assert verdicts(ablation(rev_local=0.62)) == [True, True, True, False, True, False, True, True]
    assert verdicts(ablation(no_feeding=0.85)) == [True, True, True, True, True, True, False, False]


def pointers(per_position, permutation=(0.8, 0.9)):
    per_position = torch.tensor(per_position)
    return PointerSorting(None, [], per_position, [], [torch.tensor(p) for p in permutation], None, None)


def test_pointer_sorting_findings():
    assert verdicts(pointers([[0.99, 0.9, 0.88, 0.9, 0.98]] * 2)) == [True, True, True]
    assert verdicts(pointers([[0.99, 0.9, 0.99, 0.9, 0.98]] * 2, permutation=(0.6, 0.9))) == [False, False, True]
    assert verdicts(pointers([[0.99, 0.8, 0.88, 0.9, 0.98]] * 2)) == [True, True, False]


# ---------------------------------------------------------------------------
# The runs.
# ---------------------------------------------------------------------------


def test_the_month_weights_are_the_mean_over_the_dates_with_a_month_word():
    task = DateTask()
    _, test, texts = task.split(8, 40, seed=0)
    torch.manual_seed(0)
    model = build_seq2seq("bahdanau", task.src_vocab_size, task.tgt_vocab_size, SMALL).eval()
    result = bahdanau_month_weight([model, model], task, test, texts)
    spans = [(i, task.month_span(text)) for i, text in enumerate(texts) if task.month_span(text)]
    assert result.n_dates == len(spans) > 0
    per_date = []
    for i, (start, end) in spans:  # one date at a time: its weights on the month word
        _, weights = model.greedy(test.src[i:i + 1], test.src_lens[i:i + 1], task.bos, task.eos,
                                  test.tgt_out.shape[1])
        per_date.append(weights[0, 5:7, start:end].sum(-1).mean())
    torch.testing.assert_close(result.per_seed[0], torch.stack(per_date).mean())
    assert torch.equal(result.per_seed[0], result.per_seed[1])
    luong = luong_month_weight({"Luong global": model}, task, test, texts, result)
    assert torch.equal(luong.per_model["Luong global"], result.per_seed[0])
    assert luong.bahdanau == result.per_seed and verdicts(luong) == [False]  # not more than itself


def test_training_is_seeded_and_lowers_the_loss():
    task = DateTask()
    train, _, _ = task.split(64, 1, seed=0)
    runs = [_train_model("bahdanau", task.src_vocab_size, task.tgt_vocab_size, train, epochs=2, lr=1e-2,
                        batch_size=32, config=SMALL)
            for _ in range(2)]
    assert runs[0][1].losses == runs[1][1].losses
    assert runs[0][1].losses[1] < runs[0][1].losses[0]
    assert not runs[0][0].training


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


def test_ablate_luong_is_the_seeds_by_variants_loop_written_out():
    tasks = {"copy": CopyTask(min_len=3, max_len=5), "reversal": ReversalTask(min_len=3, max_len=5)}
    runs = [("copy", "local-m"), ("reversal", "global, no input feeding")]
    config = dict(n_train=48, n_test=24, data_seed=1, epochs=1, long_from=5)
    result = ablate_luong(tasks, runs, (0, 1), **config)
    assert list(result.exact) == list(result.exact_long) == list(result.models) == runs
    for task_name, variant in runs:
        task = tasks[task_name]
        train, test = task.split(n_train=48, n_test=24, seed=1)
        assert torch.equal(result.data[task_name][1].src, test.src)
        correct = []
        for seed in (0, 1):
            model, _ = _train_model("luong", task.vocab_size, task.vocab_size, train, epochs=1, seed=seed,
                                   **LUONG_VARIANTS[variant])
            correct.append(exact_matches(model, test, task.bos, task.eos).float())
            if seed == 0:  # the kept model is seed 0's: the same weights
                for got, want in zip(result.models[task_name, variant].parameters(), model.parameters()):
                    assert torch.equal(got, want)
        correct = torch.stack(correct)  # (2, 24)
        assert torch.equal(result.exact[task_name, variant], correct.mean(1))
        assert torch.equal(result.exact_long[task_name, variant], correct[:, test.src_lens >= 5].mean(1))
    assert torch.equal(tasks["copy"].split(48, 24, seed=1)[0].src, result.data["reversal"][0].src)
    assert result.models["copy", "local-m"].decoder.mode == "local-m"


def test_the_ablation_s_held_out_strings_never_occur_in_its_training_strings():
    """Chapter 10's ablation (3,000 training and 500 held-out strings of 3 to 8 digits, data seed 0): no
    held-out string is a training string, and they are distinct, so exact match measures generalisation."""
    train, test = ReversalTask(min_len=3, max_len=8).split(n_train=3000, n_test=500, seed=0)

    def strings(pairs):
        return [tuple(row[:n].tolist()) for row, n in zip(pairs.src, pairs.src_lens)]

    held_out = strings(test)
    assert len(set(held_out)) == 500 and not set(held_out) & set(strings(train))


def test_ablate_luong_settles_at_a_tenth_of_the_rate_and_takes_the_exercise_s_own_variant():
    """settling_epochs adds passes at lr / 10 (a fresh Adam) after the ``epochs`` at ``lr``; and the call
    of exercise ex-s2s-reach, a variant of the reader's own under the name "local-m", trains that one."""
    tasks = {"reversal": ReversalTask(min_len=3, max_len=5)}
    variants = {"local-m": dict(mode="local-m", window=4)}
    result = ablate_luong(tasks, [("reversal", "local-m")], (3,), variants=variants, n_train=40, n_test=16,
                          epochs=1, settling_epochs=1, lr=2e-2)
    task, (train, test) = tasks["reversal"], tasks["reversal"].split(n_train=40, n_test=16, seed=0)
    model, _ = _train_model("luong", task.vocab_size, task.vocab_size, train, epochs=1, lr=2e-2, seed=3,
                           mode="local-m", window=4)
    train_seq2seq(model, train, epochs=1, lr=2e-3, seed=3)
    kept = result.models["reversal", "local-m"]
    assert kept.decoder.window == 4 and kept.decoder.mode == "local-m"
    for got, want in zip(kept.parameters(), model.parameters()):
        assert torch.equal(got, want)
    assert torch.equal(result.exact["reversal", "local-m"],
                       exact_matches(model, test, task.bos, task.eos).float().mean()[None])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(tasks={"copy": "digits"}), TypeError, "(?s)parameter 'tasks'.*Actual value: \\{'copy': 'digits'\\}"),
    (dict(tasks={"copy": CopyTask(min_len=3, max_len=4), "other": "digits"}), TypeError,
     "tasks\\['other'\\] must be a ReversalTask; found str"),
    (dict(tasks=None), TypeError, "(?s)parameter 'tasks'.*Actual value: None"),
    (dict(runs="copy"), TypeError, "(?s)parameter 'runs'.*Actual value: 'copy'"),
    (dict(runs=[("copy", "local-p")]), ValueError, "runs must pair a task of \\['copy'\\] with a variant"),
    (dict(seeds=()), ValueError, "seeds must be a non-empty sequence"),
    (dict(n_train=0), TypeError, "(?s)parameter 'n_train'.*Actual value: 0.*n_train: .*is_at_least_1"),
    (dict(settling_epochs=-1), TypeError, "(?s)parameter 'settling_epochs'.*Actual value: -1.*settling_epochs: .*is_at_least_0"),
    (dict(lr=0.0), TypeError, "(?s)parameter 'lr'.*Actual value: 0.0.*lr: .*is_above_0"),
    (dict(runs=[("copy", "global"), ("copy", "global", 3)]), TypeError,
     "(?s)parameter 'runs'.*Actual value: \\[\\('copy', 'global'\\), \\('copy', 'global', 3\\)\\]"),
    (dict(seeds=[0, 0.5]), TypeError, "(?s)parameter 'seeds'.*Actual value: \\[0, 0.5\\]"),
])
def test_ablate_luong_names_bad_arguments(kwargs, error, match):
    call = dict(tasks={"copy": CopyTask(min_len=3, max_len=4)}, runs=[("copy", "global")], seeds=(0,))
    with pytest.raises(error, match=match):
        ablate_luong(**{**call, **kwargs})

