"""``python -m experiments.ch10_weights [--digits | --ablation] [--out DIR]
[--n-train N] [--n-test N] [--epochs E] [--lr LR]``.

Trains chapter 10's Luong models on :class:`lib.part4_attention.date_task.DateTask` and
saves them where the chapter loads them from
(:data:`experiments.ch10_seq2seq.WEIGHTS_DIR`), in about a minute of CPU time. With
``--digits``, trains instead the local-p models of the chapter's ablation on copying and
reversing digits (:data:`DIGIT_RECIPE`, three seeds, about a minute too), which the
section on scoring alignments loads beside the ablation's own global and local-m models.
With ``--ablation``, trains the ablation's own models (:data:`ABLATION_RUNS`, the same
recipe and seeds, about 40 s) and saves each with its recipe, which the chapter's
ablation loads instead of training them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

import torch

from experiments.findings import run_arithmetic
from experiments.ch10_seq2seq import (
    ABLATION_RUNS,
    DIGIT_MODEL_FILE,
    ALIGNMENT_SEEDS,
    ALIGNMENT_TASKS,
    LOCAL_P_VARIANT,
    WEIGHTS_DIR,
    ablate_luong,
    _ablation_model_file,
    train_model,
)
from lib.part4_attention.seq2seq import exact_matches, save_seq2seq
from lib.part4_attention.date_task import DateTask
from lib.part4_attention.pairs import train_seq2seq

# The recipes of the saved models: LuongDecoder options, by file name.
LUONG_RECIPES = {
    "luong_global": {"score": "general", "mode": "global", "input_feeding": True},
    "luong_local_p": {
        "score": "general",
        "mode": "local-p",
        "window": 4,
        "input_feeding": True,
    },
}
# Their training, the defaults of the command line: N_TRAIN dates, EPOCHS passes at the
# learning rate LR, then SETTLING_EPOCHS at a tenth of it. Chapter 10 compares these
# amounts with its own models'.
N_TRAIN, EPOCHS, LR, SETTLING_EPOCHS = 10_000, 8, 5e-3, 1
# The digit models (--digits): the recipe of chapter 10's ablation (cell ablation-code),
# options of experiments.ch10_seq2seq.ablate_luong.
DIGIT_RECIPE = dict(n_train=3000, n_test=500, epochs=2, settling_epochs=1, lr=1e-2)


def train_digit_models(
    out: Path,
    task_names: Sequence[str] = tuple(ALIGNMENT_TASKS),
    seeds: Sequence[int] = ALIGNMENT_SEEDS,
    **recipe,
) -> None:
    """Train a local-p model (:data:`experiments.ch10_seq2seq.LOCAL_P_VARIANT`) on each
    of :data:`ALIGNMENT_TASKS` named in ``task_names`` from each of ``seeds`` (all of
    them by default; each task draws its strings alone, each model is seeded alone, so a
    subset gives the same models) by the ablation's own loop, save it as
    :data:`DIGIT_MODEL_FILE` and print its held-out exact match."""
    tasks = {name: ALIGNMENT_TASKS[name] for name in task_names}
    runs = [(name, "local-p") for name in tasks]
    variants = {"local-p": LOCAL_P_VARIANT}
    result = ablate_luong(tasks, runs, seeds, variants, **{**DIGIT_RECIPE, **recipe})
    for task_name, variant in runs:
        models = result.every_seed[task_name, variant]
        for seed, model, exact in zip(seeds, models, result.exact[task_name, variant]):
            save_seq2seq(
                model, out / DIGIT_MODEL_FILE.format(task_name=task_name, seed=seed)
            )
            print(
                f"{task_name}, local-p, seed {seed}: held-out exact match {exact:.1%}"
            )


def train_ablation_models(
    out: Path,
    runs: Sequence[tuple[str, str]] = ABLATION_RUNS,
    seeds: Sequence[int] = ALIGNMENT_SEEDS,
    **recipe,
) -> None:
    """Train the models of chapter 10's ablation (``runs`` of :data:`ABLATION_RUNS`,
    from each of ``seeds``; a subset gives the same models) by
    :func:`experiments.ch10_seq2seq.ablate_luong` with :data:`DIGIT_RECIPE`, save each
    with its recipe and the arithmetic that made it (torch, processor, settings) as
    :func:`_ablation_model_file`, and print its held-out exact match."""
    tasks = {name: ALIGNMENT_TASKS[name] for name, _ in runs}
    result = ablate_luong(tasks, runs, seeds, **{**DIGIT_RECIPE, **recipe})
    for task_name, variant in runs:
        key = task_name, variant
        for seed, model, recipe_, exact in zip(
            seeds, result.every_seed[key], result.recipes[key], result.exact[key]
        ):
            path = out / _ablation_model_file(task_name, variant, seed)
            saved = dict(
                state=model.state_dict(), recipe=recipe_, arithmetic=run_arithmetic()
            )
            torch.save({**model.spec, **saved}, path)
            print(
                f"{task_name}, {variant}, seed {seed}: held-out exact match {exact:.1%}"
            )


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Train chapter 10's Luong models and save them in :data:`WEIGHTS_DIR`.

    Each model trains ``--epochs`` passes at ``--lr``, then one last pass at a tenth of
    it, which settles the weights (without it, the local-p model's final accuracy
    depends on the noise of the last large steps). Deterministic for a given version of
    the code: one thread, fixed seeds. Prints each model's exact match on the held-out
    dates.
    """
    parser = argparse.ArgumentParser(
        prog="python -m experiments.ch10_weights",
        description="Train chapter 10's Luong models and save their weights.",
    )
    parser.add_argument(
        "--digits",
        action="store_true",
        help="train the local-p models on copying and reversing digits instead",
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="train the models of the ablation on copying and reversing digits instead",
    )
    parser.add_argument(
        "--out", type=Path, default=WEIGHTS_DIR, help="folder for the .pt files"
    )
    parser.add_argument("--n-train", type=int, help="training examples")
    parser.add_argument("--n-test", type=int, help="held-out examples")
    parser.add_argument("--epochs", type=int, help="passes at the full learning rate")
    parser.add_argument("--lr", type=float, help="learning rate of Adam")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the same weights on every run
    args.out.mkdir(parents=True, exist_ok=True)
    if args.digits and args.ablation:
        parser.error("give --digits or --ablation, not both")
    if args.digits or args.ablation:
        given = dict(
            n_train=args.n_train, n_test=args.n_test, epochs=args.epochs, lr=args.lr
        )
        # an option given as 0 reaches ablate_luong, which refuses it by name
        train = train_digit_models if args.digits else train_ablation_models
        train(
            args.out,
            **{key: value for key, value in given.items() if value is not None},
        )
        return
    defaults = dict(n_train=N_TRAIN, n_test=1_000, epochs=EPOCHS, lr=LR)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    task = DateTask()
    train, test, _ = task.split(args.n_train, args.n_test, seed=0)
    sizes = (task.src_vocab_size, task.tgt_vocab_size)
    for name, options in LUONG_RECIPES.items():
        model, _ = train_model(
            "luong", *sizes, train, args.epochs, lr=args.lr, **options
        )
        # the settling pass
        log = train_seq2seq(
            model, train, epochs=SETTLING_EPOCHS, lr=args.lr / 10, seed=args.epochs
        )
        save_seq2seq(model, args.out / f"{name}.pt")
        accuracy = exact_matches(model, test, task.bos, task.eos).float().mean()
        print(
            f"{name}: final loss {log.losses[-1]:.4f}, "
            f"held-out exact match {accuracy:.1%}"
        )


if __name__ == "__main__":
    main()
