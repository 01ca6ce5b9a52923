"""``python -m experiments.ch06_weights neural-lms`` and ``python -m
experiments.ch06_weights clock-runs``: chapter 6's longest runs, made offline.

* :func:`train_neural_lms`: the feed-forward neural language model of Bengio et al.
  (2003) on the Lee corpus, three seeds; ``neural-lms`` stores its models and numbers
  in :data:`experiments.ch06_language_models.NEURAL_LMS_PATH`.
* :func:`scheduled_sampling_drift`, :func:`reinforce_clock_models` and
  :func:`reinforce_without_baseline`: scheduled sampling (Bengio et al., 2015) and
  REINFORCE fine-tuning (Williams, 1992) of the clock-language models, with the
  leave-one-out baseline (Kool et al., 2019) and without one; ``clock-runs`` stores
  what :func:`clock_runs` returns in
  :data:`experiments.ch06_language_models.CLOCK_RUNS_PATH`.

Each file holds the recipe of its runs (what they depend on, the data by its SHA-256),
:func:`experiments.findings.run_arithmetic` and the CPU seconds; the chapter reads it
through the loaders of :mod:`experiments.ch06_language_models`, which refuse another
recipe. The tests (``tests/experiments/test_ch06_weights.py``) run each command
shortened and retrain one seed of each in full.
"""

from __future__ import annotations

import argparse
import copy
import time
from functools import partial
from pathlib import Path
from typing import Optional

import torch

from experiments.ch06_language_models import (
    _NEURAL_FIELDS,
    CLOCK_BASELINE,
    CLOCK_BOS,
    CLOCK_LR,
    CLOCK_PROMPT,
    CLOCK_RUNS_PATH,
    CLOCK_STEPS,
    NEURAL_BATCH,
    NEURAL_LM,
    NEURAL_LMS_PATH,
    NEURAL_LR,
    NEURAL_STEPS,
    NO_BASELINE_LRS,
    REINFORCE_BATCH,
    REINFORCE_STEPS,
    SEEDS,
    ClockFineTuning,
    ExposureDrift,
    NeuralLMRuns,
    ScheduledDrift,
    WithoutBaseline,
    _clock_recipe,
    _drift_runs,
    _judge_clock_model,
    _neural_recipe,
    exposure_drift,
    split_stories,
)
from experiments.findings import run_arithmetic
from lib.corpus import Vocabulary, read_sentences
from lib.part2_recurrent.char_lm import teacher_forcing_batch
from lib.part3_words.lm import (
    CountingLanguage,
    EpsilonSchedule,
    NeuralLM,
    token_log_probs,
    train_lm,
)
from lib.part3_words.ngram import EOS, UNK, perplexity
from lib.part3_words.reinforce import bigram_precision, reinforce_fine_tune


def train_neural_lms(
    batches, vocab_size, seeds=SEEDS, steps=NEURAL_STEPS
) -> NeuralLMRuns:
    """Bengio et al.'s model with a trigram's history (:data:`NEURAL_LM`), two passes
    over the training stories (``batches[part] = (inputs, targets)``), one model per
    seed."""
    runs = NeuralLMRuns({}, [], [], [], [])
    for seed in seeds:
        torch.manual_seed(seed)
        model = NeuralLM(vocab_size, **NEURAL_LM)
        losses = train_lm(
            model, *batches["train"], steps=steps, batch_size=NEURAL_BATCH, lr=NEURAL_LR
        )
        runs.models[seed] = model
        runs.start_loss.append(losses[0])
        runs.end_loss.append(sum(losses[-10:]) / 10)
        for part, found in (
            ("valid", runs.valid_perplexity),
            ("test", runs.test_perplexity),
        ):
            found.append(perplexity(token_log_probs(model, *batches[part])))
    return runs


def scheduled_sampling_drift(
    language, sentences, test_sentences, schedule, teacher_forced: ExposureDrift,
    seeds=SEEDS, steps=CLOCK_STEPS,
) -> ScheduledDrift:  # fmt: skip
    """The same models trained with scheduled sampling (``schedule``), measured the
    same way."""
    runs = _drift_runs(language, sentences, test_sentences, schedule, seeds, steps)
    return ScheduledDrift(
        teacher_forced.curves, {seed: curves for seed, (_, curves) in runs.items()}
    )


def reinforce_clock_models(
    drifted: ExposureDrift,
    language,
    sentences,
    test_sentences,
    lr=3e-3,
    baseline="leave-one-out",
    steps=REINFORCE_STEPS,
) -> ClockFineTuning:
    """For each seed: judge a copy of the teacher-forced model (the original is left
    untouched), fine-tune it on ``sentences`` by REINFORCE (bigram precision as reward,
    ``steps`` steps of ``REINFORCE_BATCH`` samples, seeded with the seed), and judge it
    again."""
    before, after = {}, {}
    for seed, trained in drifted.models.items():
        model = copy.deepcopy(trained)
        before[seed] = _judge_clock_model(
            model, language, test_sentences, seed, drifted.curves[seed]
        )
        reinforce_fine_tune(
            model, sentences, partial(bigram_precision, prompt=CLOCK_PROMPT),
            prompt=CLOCK_PROMPT, bos=CLOCK_BOS, steps=steps,
            batch_size=REINFORCE_BATCH, lr=lr, baseline=baseline, seed=seed,
        )  # fmt: skip
        after[seed] = _judge_clock_model(model, language, test_sentences, seed)
    return ClockFineTuning(before, after)


def reinforce_without_baseline(
    drifted: ExposureDrift, language, sentences, test_sentences, steps=REINFORCE_STEPS
) -> WithoutBaseline:
    """The exercise's runs: the same fine-tuning with no baseline, at each rate of
    :data:`NO_BASELINE_LRS` (3e-3, then 1e-3)."""
    fast, slow = (
        reinforce_clock_models(
            drifted, language, sentences, test_sentences, lr, None, steps
        )
        for lr in NO_BASELINE_LRS
    )
    return WithoutBaseline(fast.change, slow.change)


def clock_runs(
    language, sentences, test_sentences, schedule, seeds=SEEDS,
    steps=CLOCK_STEPS, reinforce_steps=REINFORCE_STEPS,
) -> dict:  # fmt: skip
    """Chapter 6's runs on the clock language: the teacher-forced models' curves
    (REINFORCE starts from these models, and scheduled sampling is compared with
    them), the scheduled-sampling curves, the REINFORCE fine-tuning with the
    leave-one-out baseline (its four numbers before and after) and without a baseline
    (the changes at each rate of :data:`NO_BASELINE_LRS`)."""
    drifted = exposure_drift(language, sentences, test_sentences, seeds, steps)
    scheduled = scheduled_sampling_drift(
        language, sentences, test_sentences, schedule, drifted, seeds, steps
    )
    fine_tuned = reinforce_clock_models(
        drifted, language, sentences, test_sentences,
        CLOCK_LR, CLOCK_BASELINE, reinforce_steps,
    )  # fmt: skip
    plain = reinforce_without_baseline(
        drifted, language, sentences, test_sentences, reinforce_steps
    )
    return {
        "teacher_forced": drifted.curves,
        "scheduled": scheduled.scheduled,
        "before": fine_tuned.before,
        "after": fine_tuned.after,
        "at_3e3": plain.at_3e3,
        "at_1e3": plain.at_1e3,
    }


def chapter_lee_batches():
    """The chapter's vocabulary and ``batches`` (its cells ``lee-code`` and
    ``neural-train-code``), rebuilt for the ``neural-lms`` command."""
    stories = read_sentences()
    train, valid, test = split_stories(stories)
    vocabulary = Vocabulary.from_sentences(train, min_count=2, specials=(EOS, UNK))
    eos = vocabulary.index(EOS)

    def encode(part):
        return [
            vocabulary.encode([w if w in vocabulary else UNK for w in s], unknown=UNK)
            + [eos]
            for s in part
        ]

    bos = len(vocabulary)
    batches = {
        name: teacher_forcing_batch(encode(part), bos=bos)
        for name, part in (("train", train), ("valid", valid), ("test", test))
    }
    return vocabulary, batches


def chapter_clock_data():
    """The chapter's clock language, training and test sentences and schedule (its
    cells ``counting-code``, ``exposure-train-code`` and ``scheduled-train-code``)."""
    language = CountingLanguage(hours=12, steps=(1, 2, 3), length=16, typo=0.002)
    sentences = language.sample(2000, torch.Generator().manual_seed(2))
    test_sentences = language.sample(1000, torch.Generator().manual_seed(6))
    schedule = EpsilonSchedule("inverse_sigmoid", k=50)
    return language, sentences, test_sentences, schedule


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m experiments.ch06_weights neural-lms [--steps S] [--seeds 0 1
    2] [--out PATH]``: train :func:`train_neural_lms` on the chapter's stories, on one
    thread, and store the models and their numbers.

    ``python -m experiments.ch06_weights clock-runs [--steps S]
    [--reinforce-steps R] [--seeds 0 1 2] [--out PATH]``: run :func:`clock_runs` on the
    chapter's clock language, on one thread, and store what it returns."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.ch06_weights", description=main.__doc__
    )
    parser.add_argument("command", choices=["neural-lms", "clock-runs"])
    parser.add_argument("--steps", type=int)
    parser.add_argument("--reinforce-steps", type=int, default=REINFORCE_STEPS)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the same numbers on every run
    seeds = tuple(args.seeds)
    start = time.process_time()
    if args.command == "neural-lms":
        steps = args.steps or NEURAL_STEPS
        vocabulary, batches = chapter_lee_batches()
        runs = train_neural_lms(batches, len(vocabulary), seeds, steps)
        saved = dict(
            recipe=_neural_recipe(batches, len(vocabulary), seeds, steps),
            models=[runs.models[seed].state_dict() for seed in seeds],
            runs={name: getattr(runs, name) for name in _NEURAL_FIELDS},
        )
        out = args.out or NEURAL_LMS_PATH
        report = f"test perplexity per seed {runs.test_perplexity}"
    else:
        steps = args.steps or CLOCK_STEPS
        data = chapter_clock_data()
        found = clock_runs(*data, seeds, steps, args.reinforce_steps)
        saved = dict(
            recipe=_clock_recipe(*data, seeds, steps, args.reinforce_steps),
            runs=found,
        )
        out = args.out or CLOCK_RUNS_PATH
        report = f"reward after REINFORCE per seed {found['after']}"
    seconds = time.process_time() - start
    saved.update(arithmetic=run_arithmetic(), cpu_seconds=seconds)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(saved, out)
    print(report)
    print(f"saved to {out} after {seconds:.0f} s of CPU time")


if __name__ == "__main__":
    main()
