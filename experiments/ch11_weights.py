"""``python -m experiments.ch11_weights pretraining-runs``: chapter 11's pretraining
runs, made offline.

:func:`pretraining_sweep` pretrains a masked LM (BERT, Devlin et al. [1]_) on unlabelled
walks of :mod:`lib.part4_attention.pretraining`, then trains classifiers of the walk's
step from scratch, on the frozen encoder and fine-tuned, with few labels
(:func:`experiments.ch11_transformer.pretraining_splits`). The command runs it for the
chapter's model and seeds on one thread and stores what it returns, with its recipe,
:func:`experiments.findings.run_arithmetic` and the CPU seconds, in
:data:`experiments.ch11_transformer.PRETRAINING_RUNS_PATH`; the chapter reads it
through :func:`experiments.ch11_transformer.load_pretraining_runs`, which refuses
another recipe.
The tests (``tests/experiments/test_ch11_weights.py``) run the command shortened and
retrain one seed in full.

References
----------
.. [1] J. Devlin, M.-W. Chang, K. Lee, K. Toutanova. "BERT: Pre-training of Deep
   Bidirectional Transformers for Language Understanding". NAACL 2019. arXiv:1810.04805.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Optional

import torch

from experiments.ch11_transformer import (
    PRETRAIN_CONFIG,
    PRETRAIN_SIZES,
    PRETRAINING_RUNS_PATH,
    SEEDS,
    PretrainingRuns,
    _pretraining_recipe,
    pretraining_splits,
)
from experiments.findings import run_arithmetic
from lib.part4_attention.pretraining import (
    STEPS,
    VOCAB_SIZE,
    ClassifierLog,
    MaskedLM,
    PretrainLog,
    SequenceClassifier,
    best_possible_accuracy,
    pretrain_masked_lm,
    train_classifier,
)
from lib.part4_attention.transformer import (
    TransformerConfig,
    TransformerStack,
    embedding,
)


def _with_and_without_pretraining(
    config: TransformerConfig, splits, pretrain_epochs: int, epochs: int, seed: int
) -> tuple[PretrainLog, dict[str, ClassifierLog]]:
    """Pretrain a masked LM of ``config``'s size on the corpus, then train three
    classifiers of the step on the same labelled strings: ``"scratch"`` (a fresh
    encoder, all trained), ``"frozen"`` (the pretrained encoder fixed, the head trained)
    and ``"fine-tuned"`` (both trained). ``seed`` seeds the initialisation, the
    shuffling and the corruption."""
    corpus, (train_tokens, train_labels), (test_tokens, test_labels) = splits
    torch.manual_seed(seed)
    model = MaskedLM(
        TransformerStack(embedding(VOCAB_SIZE, config), config), VOCAB_SIZE
    )
    pretrain_log = pretrain_masked_lm(model, corpus, epochs=pretrain_epochs, seed=seed)
    logs = {}
    for name in ("scratch", "frozen", "fine-tuned"):
        torch.manual_seed(seed)
        encoder = TransformerStack(embedding(VOCAB_SIZE, config), config)  # fresh ...
        if name != "scratch":
            encoder.load_state_dict(model.encoder.state_dict())  # ... or pretrained
        classifier = SequenceClassifier(encoder, len(STEPS), freeze=name == "frozen")
        logs[name] = train_classifier(
            classifier,
            train_tokens,
            train_labels,
            test_tokens,
            test_labels,
            epochs=epochs,
            seed=seed,
        )
    return pretrain_log, logs


def pretraining_sweep(
    config: TransformerConfig,
    seeds: tuple[int, ...] = SEEDS,
    num_labels: int = 32,
    pretrain_epochs: int = 30,
    epochs: int = 40,
) -> PretrainingRuns:
    """Per seed, on its own :func:`pretraining_splits`: pretrain a masked LM for
    ``pretrain_epochs``, then train the classifiers from scratch, frozen and fine-tuned
    on ``num_labels`` labelled strings for ``epochs`` each."""
    runs = PretrainingRuns([], {}, [], VOCAB_SIZE)
    for seed in seeds:
        splits = pretraining_splits(num_labels, seed=seed)
        pretrain_log, logs = _with_and_without_pretraining(
            config, splits, pretrain_epochs, epochs, seed
        )
        runs.mlm_losses.append(pretrain_log.losses)
        for name, log in logs.items():
            runs.accuracy.setdefault(name, []).append(log.accuracies[-1])
        runs.best_possible.append(best_possible_accuracy(*splits[2]))
    return runs


def _main(argv: Optional[list[str]] = None) -> None:
    """``python -m experiments.ch11_weights pretraining-runs [--pretrain-epochs P]
    [--epochs E] [--seeds 0 1 2] [--out PATH]``: run :func:`pretraining_sweep` for the
    chapter's model, on one thread, and store what it returns."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.ch11_weights", description=_main.__doc__
    )
    parser.add_argument("command", choices=["pretraining-runs"])
    parser.add_argument(
        "--pretrain-epochs", type=int, default=PRETRAIN_SIZES["pretrain_epochs"]
    )
    parser.add_argument("--epochs", type=int, default=PRETRAIN_SIZES["epochs"])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=PRETRAINING_RUNS_PATH)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the same numbers on every run
    _save_pretraining_runs(args)


def _save_pretraining_runs(args: argparse.Namespace) -> None:
    """The ``pretraining-runs`` command of :func:`_main`."""
    sizes = dict(
        PRETRAIN_SIZES, pretrain_epochs=args.pretrain_epochs, epochs=args.epochs
    )
    seeds = tuple(args.seeds)
    start = time.process_time()
    runs = pretraining_sweep(PRETRAIN_CONFIG, seeds, **sizes)
    seconds = time.process_time() - start
    out = args.out
    fields = ("mlm_losses", "accuracy", "best_possible", "vocab_size")
    saved = dict(
        recipe=_pretraining_recipe(PRETRAIN_CONFIG, seeds, sizes),
        runs={name: getattr(runs, name) for name in fields},
        arithmetic=run_arithmetic(),
        cpu_seconds=seconds,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(saved, out)
    for name, accuracies in runs.accuracy.items():
        print(f"{name}: held-out accuracy per seed {[f'{a:.3f}' for a in accuracies]}")
    print(f"saved to {out} after {seconds:.0f} s of CPU time")


if __name__ == "__main__":
    _main()
