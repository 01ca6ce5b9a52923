"""Chapter 10's experiments: the runs behind the chapter's claims about
sequence-to-sequence models, each returning a result that declares the findings the text
draws from it.

1. :func:`plain_reversal` and :func:`bahdanau_reversal`: exact match by length of digit
   strings reversed by an encoder-decoder without attention (Sutskever et al., 2014)
   and with Bahdanau's; the fall with length and its fix, as Bahdanau et al. (2015,
   figure 2) measured them for translation.
2. :func:`train_on_dates`: both models on the chapter's dates, per seed and length bin.
3. :func:`bahdanau_month_weight` and :func:`luong_month_weight`: how much of the month
   digits' attention falls on the month word (the soft alignments of Bahdanau et al.,
   figure 3).
4. :func:`ablate_luong`: two of Luong et al.'s (2015) choices, local-m against global
   attention and input feeding, which they compared on translation, here on copying and
   reversing digits.
5. :func:`sort_with_pointers`: pointer networks (Vinyals et al., 2015) sorting five
   numbers.
6. :func:`score_alignments`: the ablation's models and local-p ones
   (:func:`load_local_p_models`) scored against the known alignments of copying and
   reversing: the weight on the gold position and the alignment error rate of Och and
   Ney (2003, section 5), as Luong et al. (2015, section 5.4) scored theirs.
7. :func:`_beam_sizes_on_dates`: BLEU, exact match and output length against beam size,
   with and without length normalisation (Koehn and Knowles, 2017, section 3.6), stored
   by ``python -m experiments.ch10_seq2seq beam-sizes`` and read by
   :func:`load_beam_sizes`.

:func:`train_model` (a seeded initialisation, then training) makes every
encoder-decoder here; :data:`WEIGHTS_DIR` holds the Luong models too slow to train in
the chapter, made by ``python -m experiments.ch10_weights``. The runs' sizes default to
the chapter's; ``tests/experiments/test_ch10_seq2seq.py`` runs each at a tiny size.

References
----------
.. [1] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate". ICLR 2015. arXiv:1409.0473.
.. [2] M.-T. Luong, H. Pham, C. D. Manning. "Effective Approaches to
   Attention-based Neural Machine Translation". EMNLP 2015. arXiv:1508.04025.
.. [3] O. Vinyals, M. Fortunato, N. Jaitly. "Pointer Networks". NeurIPS 2015.
   arXiv:1506.03134.
.. [4] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks". NeurIPS 2014. arXiv:1409.3215.
.. [5] F. J. Och, H. Ney. "A Systematic Comparison of Various Statistical Alignment
   Models". Computational Linguistics 29(1), 2003.
.. [6] P. Koehn, R. Knowles. "Six Challenges for Neural Machine Translation".
   Workshop on Neural Machine Translation, 2017. arXiv:1706.03872.
"""

from __future__ import annotations

import argparse
import multiprocessing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch
from jaxtyping import Float, jaxtyped
from torch import Tensor

from experiments.findings import Finding, Result, run_arithmetic
from lib.checked import (
    NonNegative,
    NonNegativeInt,
    Positive,
    PositiveInt,
    each,
    typechecked,
)
from lib.part4_attention.pointer import PointerNetwork
from lib.part4_attention.seq2seq import (
    DecoderName,
    Seq2Seq,
    Seq2SeqConfig,
    accuracy_by_length,
    alignment_error_rate,
    alignments,
    beam_translate,
    build_seq2seq,
    exact_matches,
    gold_mass,
    hard_alignment,
    load_seq2seq,
)
from lib.part4_attention.date_task import DateTask
from lib.part4_attention.reversal_task import CopyTask, ReversalTask
from lib.part4_attention.sorting_task import SortingTask
from lib.part4_attention.pairs import SequencePairs, train_seq2seq
from lib.part3_words.decoding import MAX_EXPANSIONS
from lib.part3_words.metrics import corpus_bleu
from lib.training import TrainingLog

# The Luong models of chapter 10 that python -m experiments.ch10_weights trains; shipped
# with the package, so that chapter 10 runs from a wheel.
WEIGHTS_DIR = Path(__file__).with_name("weights")


@jaxtyped(typechecker=typechecked)
def train_model(
    decoder: DecoderName,
    src_vocab_size: PositiveInt,
    tgt_vocab_size: PositiveInt,
    train: SequencePairs,
    epochs: PositiveInt,
    lr: Positive = 1e-2,
    batch_size: PositiveInt = 64,
    seed: NonNegativeInt = 0,
    config: Seq2SeqConfig = Seq2SeqConfig(),
    **options,
) -> tuple[Seq2Seq, TrainingLog]:
    """A model of :func:`lib.part4_attention.seq2seq.build_seq2seq` from a seeded
    initialisation, trained by :func:`lib.part4_attention.pairs.train_seq2seq` (Adam,
    cross-entropy, teacher forcing, a seeded order of the examples) and returned in
    evaluation mode."""
    torch.manual_seed(seed)
    model = build_seq2seq(decoder, src_vocab_size, tgt_vocab_size, config, **options)
    log = train_seq2seq(
        model, train, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed
    )
    return model, log


# ---------------------------------------------------------------------------
# 1. Reversing 3 to 12 digits, without attention and with Bahdanau's


LENGTHS = list(range(3, 13))  # the reversal strings' lengths


@jaxtyped(typechecker=typechecked)
def reversal_by_length(
    decoder: DecoderName,
    seeds: each(NonNegativeInt),
    n_train: PositiveInt = 2000,
    n_test: PositiveInt = 1000,
    epochs: PositiveInt = 3,
) -> Tensor:
    """Exact match of each seed's model for each length, (seeds, lengths): ``epochs``
    passes over ``n_train`` strings, ``n_test`` held out."""
    if not seeds:
        raise ValueError("seeds must be a non-empty sequence of ints; found none")
    task = ReversalTask(min_len=3, max_len=12)
    train, test = task.split(n_train=n_train, n_test=n_test, seed=0)
    edges, accuracy = LENGTHS + [LENGTHS[-1] + 1], []  # one bin per length
    for seed in seeds:
        model, _ = train_model(
            decoder, task.vocab_size, task.vocab_size, train, epochs, seed=seed
        )
        correct = exact_matches(model, test, task.bos, task.eos)
        accuracy.append(accuracy_by_length(correct, test.src_lens, edges)[1])
    return torch.stack(accuracy)


@dataclass
class PlainReversal(Result):
    """Reversals by the encoder-decoder without attention."""

    accuracy: Tensor  # (seeds, lengths 3 .. 12): exact match

    FINDINGS = (
        Finding(
            "Every plain model reverses 75% or more of the 3-digit strings.",
            backs=("capacity-discussion",),
            holds=lambda r: r.accuracy[:, 0].min() >= 0.75,
        ),
        Finding(
            "From 9 digits on, every plain model reverses at most 5% of the strings.",
            backs=("capacity-discussion", "summary"),
            holds=lambda r: r.accuracy[:, 6:].max() <= 0.05,
        ),
    )


@jaxtyped(typechecker=typechecked)
def plain_reversal(seeds: each(NonNegativeInt), **sizes: PositiveInt) -> PlainReversal:
    """The plain encoder-decoder's reversals, one model per seed (``sizes``: those of
    :func:`reversal_by_length`, the chapter's by default)."""
    return PlainReversal(reversal_by_length("plain", seeds, **sizes))


@dataclass
class BahdanauReversal(Result):
    """Reversals with Bahdanau's attention, beside the plain models of the same
    seeds."""

    accuracy: Tensor  # (seeds, lengths 3 .. 12): exact match
    plain: Tensor  # (seeds, lengths 3 .. 12): the plain models' exact match

    FINDINGS = (
        Finding(
            "Every Bahdanau model reverses 35% or more of the strings of every "
            "length.",
            backs=("bahdanau-reversal-text", "length-discussion", "summary"),
            holds=lambda r: r.accuracy.min() >= 0.35,
        ),
        Finding(
            "From 8 digits on, every Bahdanau model beats its plain one by 30 "
            "points or more.",
            backs=(
                "capacity-discussion",
                "bahdanau-reversal-text",
                "length-discussion",
                "summary",
            ),
            holds=lambda r: (r.accuracy[:, 5:] - r.plain[:, 5:]).min() >= 0.3,
        ),
    )


@jaxtyped(typechecker=typechecked)
def bahdanau_reversal(
    seeds: each(NonNegativeInt), plain: PlainReversal, **sizes: PositiveInt
) -> BahdanauReversal:
    """Bahdanau models trained as :func:`plain_reversal` trained the plain ones."""
    if len(plain.accuracy) != len(seeds):
        raise ValueError(
            f"plain must be the run of the same {len(seeds)} seeds; found "
            f"{len(plain.accuracy)} rows"
        )
    return BahdanauReversal(
        reversal_by_length("bahdanau", seeds, **sizes), plain.accuracy
    )


# ---------------------------------------------------------------------------
# 2. Dates to ISO, without attention and with Bahdanau's

# The date bins' edges of source length (characters), each bin holding a few dozen
# of the held-out dates.
DATE_EDGES = [8, 11, 14, 17, 20, 23, 26, 32]


@dataclass
class DateTraining(Result):
    """The chapter's Bahdanau and plain models on dates, by name ("Bahdanau",
    "plain")."""

    n_train: int  # training dates
    epochs: int  # passes over them
    models: dict[str, list[Seq2Seq]]  # the model of each seed
    correct: dict[str, list[Tensor]]  # of each seed, (held-out dates,): exact match
    losses: dict[str, list[Tensor]]  # of each seed, (epochs,): mean loss of each pass
    accuracy: dict[str, Tensor]  # (seeds,): held-out exact match
    by_length: dict[str, Tensor]  # (seeds, bins of DATE_EDGES): exact match

    @property
    def loss_drop(self) -> Tensor:
        """How much the second pass lowered each model's loss, (models,)."""
        losses = [torch.stack(runs) for runs in self.losses.values()]  # (seeds, epochs)
        return torch.cat([1 - run[:, 1] / run[:, 0] for run in losses])

    FINDINGS = (
        Finding(
            "Every Bahdanau model gets 40% or more of the held-out dates right.",
            backs=("length-discussion", "summary"),
            holds=lambda r: r.accuracy["Bahdanau"].min() >= 0.4,
        ),
        Finding(
            "Every plain model gets at most 15% of them right.",
            backs=("length-discussion", "summary"),
            holds=lambda r: r.accuracy["plain"].max() <= 0.15,
        ),
        Finding(
            "Every Bahdanau model gets four times as many right as the plain one, "
            "or more.",
            backs=("length-discussion", "summary"),
            holds=lambda r: (r.accuracy["Bahdanau"] >= 4 * r.accuracy["plain"]).all(),
        ),
        Finding(
            "Both still improving between passes: every model's second-pass mean "
            "training loss is 30% or more below its first-pass one.",
            backs=("length-discussion",),
            holds=lambda r: r.loss_drop.min() >= 0.3,
        ),
        Finding(
            "Every plain model stays at or below 20% in every length bin of the dates.",
            backs=("length-discussion",),
            holds=lambda r: r.by_length["plain"].max() <= 0.2,
        ),
        Finding(
            "Every Bahdanau model beats the plain model of its seed in every length "
            "bin.",
            backs=("length-discussion",),
            holds=lambda r: (r.by_length["Bahdanau"] > r.by_length["plain"]).all(),
        ),
    )


@jaxtyped(typechecker=typechecked)
def train_on_dates(
    task: DateTask,
    train: SequencePairs,
    test: SequencePairs,
    seeds: each(NonNegativeInt),
    n_train: PositiveInt = 2500,
    epochs: PositiveInt = 2,
) -> DateTraining:
    """A Bahdanau and a plain model per seed, ``epochs`` passes over the first
    ``n_train`` training dates, scored on the held-out ones."""
    if not seeds:
        raise ValueError("seeds must be a non-empty sequence of ints; found none")
    if n_train > len(train):
        raise ValueError(
            f"n_train must be at most the {len(train)} training dates; found {n_train}"
        )
    sizes = (task.src_vocab_size, task.tgt_vocab_size)
    first = train[torch.arange(n_train)]
    models = {"Bahdanau": [], "plain": []}
    correct = {"Bahdanau": [], "plain": []}
    losses = {"Bahdanau": [], "plain": []}
    for seed in seeds:
        for name in models:
            model, log = train_model(name.lower(), *sizes, first, epochs, seed=seed)
            models[name].append(model)
            correct[name].append(exact_matches(model, test, task.bos, task.eos))
            losses[name].append(torch.tensor(log.losses))
    accuracy = {name: torch.stack(c).float().mean(1) for name, c in correct.items()}
    by_length = {
        name: torch.stack(
            [accuracy_by_length(c, test.src_lens, DATE_EDGES)[1] for c in runs]
        )
        for name, runs in correct.items()
    }
    return DateTraining(n_train, epochs, models, correct, losses, accuracy, by_length)


# ---------------------------------------------------------------------------
# 3. Attention on the month word


def _weight_on_month_word(
    model: Seq2Seq, task: DateTask, test: SequencePairs, texts: list[str]
) -> Tensor:
    """The mean weight the two month digits of the output put on the month word, over
    the held-out dates that have one (a 0-dim tensor)."""
    with_word = [(i, task.month_span(text)) for i, text in enumerate(texts)]
    with_word = [(i, span) for i, span in with_word if span]
    index = torch.tensor([i for i, _ in with_word])
    _, weights = alignments(model, test[index], task.bos, task.eos)  # (N, T, S)
    per_date = [
        weights[k, 5:7, start:end].sum(-1).mean()  # output characters 5, 6: the month
        for k, (_, (start, end)) in enumerate(with_word)
    ]
    return torch.stack(per_date).mean()


@dataclass
class BahdanauMonthWeight(Result):
    """The Bahdanau models' weight on the month word while they write the month."""

    n_dates: int  # held-out dates with a month word
    per_seed: list[Tensor]  # of each seed, a 0-dim tensor

    FINDINGS = (
        Finding(
            "Every Bahdanau model puts half of the month digits' weight or more on "
            "the word.",
            backs=("c5f6c23c", "summary"),
            holds=lambda r: min(r.per_seed) >= 0.5,
        ),
    )


def bahdanau_month_weight(
    models: list[Seq2Seq], task: DateTask, test: SequencePairs, texts: list[str]
) -> BahdanauMonthWeight:
    """The month-word weight of each of ``models`` (one per seed)."""
    n_dates = sum(1 for text in texts if task.month_span(text))
    per_seed = [_weight_on_month_word(model, task, test, texts) for model in models]
    return BahdanauMonthWeight(n_dates, per_seed)


@dataclass
class LuongMonthWeight(Result):
    """The saved Luong models' weight on the month word, beside the Bahdanau models'."""

    per_model: dict[str, Tensor]  # "Luong global", "Luong local-p": 0-dim tensors
    bahdanau: list[Tensor]  # of each Bahdanau seed

    FINDINGS = (
        Finding(
            "Luong's global model puts more weight on the month word than any Bahdanau "
            "model.",
            backs=("luong-discussion",),
            holds=lambda r: r.per_model["Luong global"] > max(r.bahdanau),
        ),
    )


def luong_month_weight(
    models: Mapping[str, Seq2Seq],
    task: DateTask,
    test: SequencePairs,
    texts: list[str],
    bahdanau: BahdanauMonthWeight,
) -> LuongMonthWeight:
    """The month-word weight of each of ``models`` (by name)."""
    per_model = {
        name: _weight_on_month_word(model, task, test, texts)
        for name, model in models.items()
    }
    return LuongMonthWeight(per_model, bahdanau.per_seed)


# ---------------------------------------------------------------------------
# 4. Two of Luong's choices: local-m and input feeding

# The ablation's variants: name -> options of build_seq2seq.
LUONG_VARIANTS = {
    "global": dict(mode="global"),
    "local-m": dict(mode="local-m", window=2),
    "global, no input feeding": dict(mode="global", input_feeding=False),
}


@dataclass
class LuongAblation(Result):
    """What :func:`ablate_luong` measured, keyed by (task name, variant name): the
    exact match of each seed on all test strings and on those of at least
    ``long_from`` tokens, and the model of the first seed; ``data`` maps a task name to
    its (train, test) pairs. The findings are those of the chapter's runs."""

    data: dict[str, tuple[SequencePairs, SequencePairs]]
    exact: dict[tuple[str, str], Float[Tensor, "seeds"]]
    exact_long: dict[tuple[str, str], Float[Tensor, "seeds"]]
    models: dict[tuple[str, str], Seq2Seq]
    # the model of every seed, in the order of the seeds
    every_seed: dict[tuple[str, str], list[Seq2Seq]] = field(default_factory=dict)
    # how each of those models was trained (_ablation_recipe), in the same order
    recipes: dict[tuple[str, str], list[dict]] = field(default_factory=dict)

    FINDINGS = (
        Finding(
            "Every global model has learnt copying and reversing: 85% or more of "
            "6-8 digits.",
            backs=("ablation-text", "ablation-discussion"),
            holds=lambda r: min(
                r.exact_long["copy", "global"].min(),
                r.exact_long["reversal", "global"].min(),
            )
            >= 0.85,
        ),
        Finding(
            "Every local-m model has learnt copying: 80% or more of 6-8 digits.",
            backs=("ablation-discussion", "summary"),
            holds=lambda r: r.exact_long["copy", "local-m"].min() >= 0.80,
        ),
        Finding(
            "On copying 6-8 digits, local-m and global are within 15 points on every "
            "seed.",
            backs=("ablation-discussion", "summary"),
            holds=lambda r: (
                r.exact_long["copy", "local-m"] - r.exact_long["copy", "global"]
            )
            .abs()
            .max()
            <= 0.15,
        ),
        Finding(
            "On reversals of 6-8 digits, every local-m model is right at most 60%.",
            backs=("ablation-discussion", "ablation-after"),
            holds=lambda r: r.exact_long["reversal", "local-m"].max() <= 0.60,
        ),
        Finding(
            "On reversals of 6-8 digits, every global model beats local-m by 30 "
            "points or more.",
            backs=("ablation-discussion", "summary"),
            holds=lambda r: (
                r.exact_long["reversal", "global"] - r.exact_long["reversal", "local-m"]
            ).min()
            >= 0.30,
        ),
        Finding(
            "Every local-m model copies 6-8 digits 30 points or more better than "
            "it reverses them.",
            backs=("ablation-discussion",),
            holds=lambda r: (
                r.exact_long["copy", "local-m"] - r.exact_long["reversal", "local-m"]
            ).min()
            >= 0.30,
        ),
        Finding(
            "With and without input feeding, every model reverses 90% or more of "
            "all strings.",
            backs=("ablation-discussion", "summary"),
            holds=lambda r: min(
                r.exact["reversal", "global"].min(),
                r.exact["reversal", "global, no input feeding"].min(),
            )
            >= 0.90,
        ),
        Finding(
            "No consistent difference: input feeding changes no seed's exact match by "
            "more than 5 points.",
            backs=("ablation-discussion", "summary"),
            holds=lambda r: (
                r.exact["reversal", "global"]
                - r.exact["reversal", "global, no input feeding"]
            )
            .abs()
            .max()
            <= 0.05,
        ),
    )


# The runs of chapter 10's ablation (cell ablation-code), whose models
# python -m experiments.ch10_weights --ablation trains and saves as ABLATION_MODEL_FILE.
ABLATION_RUNS = (
    ("copy", "global"),
    ("copy", "local-m"),
    ("reversal", "global"),
    ("reversal", "local-m"),
    ("reversal", "global, no input feeding"),
)
ABLATION_MODEL_FILE = "luong_{task_name}_{variant}_seed{seed}.pt"


def _ablation_model_file(task_name: str, variant: str, seed: int) -> str:
    """The file name of the ablation's model of ``task_name``, ``variant`` and ``seed``
    (the variant's spaces, commas and hyphens become underscores)."""
    slug = variant.replace(", ", "_").replace(" ", "_").replace("-", "_")
    return ABLATION_MODEL_FILE.format(task_name=task_name, variant=slug, seed=seed)


def _ablation_recipe(task: ReversalTask, options: dict, seed: int, **training) -> dict:
    """Everything that makes one model of :func:`ablate_luong`: the task (its class and
    settings), the variant's options, the seed and the training options (``n_train``,
    ``n_test``, ``data_seed``, ``epochs``, ``settling_epochs``, ``lr``). Saved with each
    shipped model and compared when it is loaded."""
    return dict(
        task=type(task).__name__,
        **{f"task_{key}": value for key, value in sorted(vars(task).items())},
        options=dict(options),
        seed=seed,
        **training,
    )


def _load_ablation_model(path: Path, recipe: dict) -> Seq2Seq:
    """The model saved at ``path`` by ``python -m experiments.ch10_weights
    --ablation``, in evaluation mode, after checking that it was trained by ``recipe``
    (:func:`_ablation_recipe`); a file of another recipe raises ValueError."""
    if not Path(path).is_file():
        raise ValueError(
            f"no stored model {path}: make the ablation's models with python -m "
            f"experiments.ch10_weights --ablation --out {Path(path).parent}"
        )
    saved = torch.load(path, weights_only=True)
    if saved.get("recipe") != recipe:
        raise ValueError(
            f"{Path(path).name} must hold a model trained by the recipe {recipe}; "
            f"found one trained by {saved.get('recipe')}"
        )
    return load_seq2seq(path)


@dataclass
class AblationRederived(Result):
    """Models of :func:`ablate_luong` trained again here, beside the loaded ones of the
    same run and seed, keyed by (task name, variant name, seed): whether their weights
    are equal bit for bit, and the exact match of each on the held-out strings."""

    equal: dict[tuple[str, str, int], bool]
    exact_here: dict[tuple[str, str, int], float]
    exact_loaded: dict[tuple[str, str, int], float]
    same_arithmetic: bool  # this torch, processor and settings made the loaded files

    FINDINGS = (
        Finding(
            "With the arithmetic that made the shipped models, every model trained "
            "again here equals the loaded one bit for bit.",
            backs=("ablation-redo-text",),
            holds=lambda r: not r.same_arithmetic or all(r.equal.values()),
        ),
        Finding(
            "Every model trained again here is within 5 points of the loaded one's "
            "exact match.",
            backs=("ablation-redo-text",),
            holds=lambda r: all(
                abs(r.exact_here[key] - r.exact_loaded[key]) <= 0.05
                for key in r.exact_here
            ),
        ),
    )


def compare_ablation_models(
    here: LuongAblation, loaded: LuongAblation, folder: Path = WEIGHTS_DIR
) -> AblationRederived:
    """Every model of ``here`` (trained by :func:`ablate_luong`) beside the model of
    ``loaded`` (loaded from ``folder`` by ``ablate_luong(..., weights=folder)``) that
    has the same recipe; the arithmetic is compared with the one saved in its file."""
    equal, exact_here, exact_loaded, same = {}, {}, {}, True
    for run, recipes in here.recipes.items():
        for i, recipe in enumerate(recipes):
            if recipe not in loaded.recipes.get(run, []):
                raise ValueError(
                    f"loaded must hold a model of {run} trained by the recipe "
                    f"{recipe}; found none"
                )
            j = loaded.recipes[run].index(recipe)
            a = here.every_seed[run][i].state_dict()
            b = loaded.every_seed[run][j].state_dict()
            key = (*run, recipe["seed"])
            equal[key] = a.keys() == b.keys() and all(
                torch.equal(a[name], b[name]) for name in b
            )
            exact_here[key] = here.exact[run][i].item()
            exact_loaded[key] = loaded.exact[run][j].item()
            path = Path(folder) / _ablation_model_file(*run, recipe["seed"])
            saved = torch.load(path, weights_only=True)
            same = same and saved.get("arithmetic") == run_arithmetic()
    return AblationRederived(equal, exact_here, exact_loaded, same)


@jaxtyped(typechecker=typechecked)
def ablate_luong(
    tasks: Mapping[str, ReversalTask],
    runs: each(tuple[str, str]),
    seeds: each(NonNegativeInt),
    variants: Mapping[str, dict] = LUONG_VARIANTS,
    n_train: PositiveInt = 1000,
    n_test: PositiveInt = 500,
    data_seed: NonNegativeInt = 0,
    epochs: PositiveInt = 3,
    settling_epochs: NonNegativeInt = 0,
    lr: Positive = 1e-2,
    long_from: PositiveInt = 6,
    weights: Optional[Path] = None,
) -> LuongAblation:
    """Train "luong" models of several ``variants`` (options of
    :func:`lib.part4_attention.seq2seq.build_seq2seq`) on several digit tasks from
    several seeds, and score them.

    Each task draws its strings with ``task.split(..., seed=data_seed)``. For each
    (task, variant) of ``runs`` and each seed, :func:`train_model` trains ``epochs``
    passes at ``lr``, then ``settling_epochs`` at ``lr / 10`` (a fresh Adam, as
    ``python -m experiments.ch10_weights`` settles the date models), and
    :func:`lib.part4_attention.seq2seq.exact_matches` decodes the test strings.
    With ``weights`` (a folder), each model is instead loaded from the file that
    ``python -m experiments.ch10_weights --ablation`` saved there
    (:func:`_ablation_model_file`), which must have been trained by the same recipe
    (:func:`_load_ablation_model`), and scored the same way.
    """
    for name, task in tasks.items():  # the signature checks one item of a mapping
        if not isinstance(task, ReversalTask):
            raise TypeError(
                f"tasks[{name!r}] must be a ReversalTask; found {type(task).__name__}"
            )
    for task_name, variant in runs:
        if task_name not in tasks or variant not in variants:
            raise ValueError(
                f"runs must pair a task of {sorted(tasks)} with a variant of "
                f"{sorted(variants)}; found {(task_name, variant)!r}"
            )
    if not seeds:
        raise ValueError("seeds must be a non-empty sequence of ints; found none")
    split = dict(n_train=n_train, n_test=n_test, seed=data_seed)
    data = {name: task.split(**split) for name, task in tasks.items()}
    result = LuongAblation(data, {}, {}, {})
    for task_name, variant in runs:
        task, (train, test) = tasks[task_name], data[task_name]
        vocab, options = task.vocab_size, variants[variant]
        correct = []
        for seed in seeds:
            recipe = _ablation_recipe(
                task,
                options,
                seed,
                n_train=n_train,
                n_test=n_test,
                data_seed=data_seed,
                epochs=epochs,
                settling_epochs=settling_epochs,
                lr=lr,
            )
            if weights is not None:
                path = Path(weights) / _ablation_model_file(task_name, variant, seed)
                model = _load_ablation_model(path, recipe)
            else:
                model, _ = train_model(
                    "luong", vocab, vocab, train, epochs, lr, seed=seed, **options
                )
                if settling_epochs:
                    train_seq2seq(
                        model, train, epochs=settling_epochs, lr=lr / 10, seed=seed
                    )
            correct.append(exact_matches(model, test, task.bos, task.eos))
            result.models.setdefault((task_name, variant), model)
            result.every_seed.setdefault((task_name, variant), []).append(model)
            result.recipes.setdefault((task_name, variant), []).append(recipe)
        correct = torch.stack(correct).float()  # (seeds, n_test)
        result.exact[task_name, variant] = correct.mean(1)  # (seeds,)
        long = test.src_lens >= long_from  # (n_test,)
        result.exact_long[task_name, variant] = correct[:, long].mean(1)
    return result


# ---------------------------------------------------------------------------
# 5. Pointer networks sorting five numbers


@dataclass
class PointerSorting(Result):
    """Pointer networks sorting lists of five numbers, one per seed."""

    test: SequencePairs  # the held-out lists
    losses: list[list[float]]  # of each seed, the mean loss of each pass
    per_position: Tensor  # (seeds, 5): accuracy at each output position
    whole_list: list[Tensor]  # of each seed: lists right at every position
    permutation: list[Tensor]  # of each seed: outputs that point at every input once
    pointers: Tensor  # (lists, 5): seed 0's outputs
    weights: Tensor  # (lists, 5, 5): seed 0's attention

    FINDINGS = (
        Finding(
            "For every seed, the first and last positions beat every middle one.",
            backs=("pointer-heatmap-text",),
            holds=lambda r: (
                r.per_position[:, [0, 4]].amin(1) > r.per_position[:, 1:4].amax(1)
            ).all(),
        ),
        Finding(
            "Every seed points at every input once in 70% or more of the lists.",
            backs=("pointer-heatmap-text",),
            holds=lambda r: min(r.permutation) >= 0.7,
        ),
        Finding(
            "Every seed is right at every output position 85% or more of the time.",
            backs=("pointer-heatmap-text", "summary"),
            holds=lambda r: r.per_position.min() >= 0.85,
        ),
    )


@jaxtyped(typechecker=typechecked)
def sort_with_pointers(
    seeds: each(NonNegativeInt), n_train: PositiveInt = 5000, n_test: PositiveInt = 1000
) -> PointerSorting:
    """Per seed, a pointer network trained two passes over ``n_train`` lists at 1e-2
    and a last one at 1e-3, then decoded greedily on ``n_test`` held-out lists."""
    if not seeds:
        raise ValueError("seeds must be a non-empty sequence of ints; found none")
    sorting = SortingTask(length=5)
    train, test = sorting.sample(n_train, seed=0), sorting.sample(n_test, seed=1)
    losses, per_position, whole_list, permutation = [], [], [], []
    for seed in seeds:
        torch.manual_seed(seed)
        net = PointerNetwork(input_dim=1, hidden_dim=32, attention_dim=32)
        # pad=-1: no target is ignored
        log = train_seq2seq(net, train, epochs=2, lr=1e-2, pad=-1, seed=seed)
        finish = train_seq2seq(net, train, epochs=1, lr=1e-3, pad=-1, seed=seed)
        chosen, weights = net.greedy(test.src)  # (N, 5), (N, 5, 5)
        losses.append(log.losses + finish.losses)
        per_position.append((chosen == test.tgt_out).float().mean(0))
        whole_list.append((chosen == test.tgt_out).all(1).float().mean())
        in_order = chosen.sort(1).values == torch.arange(5)  # (N, 5)
        permutation.append(in_order.all(1).float().mean())
        if seed == seeds[0]:
            pointers, pointer_weights = chosen, weights
    return PointerSorting(
        test,
        losses,
        torch.stack(per_position),
        whole_list,
        permutation,
        pointers,
        pointer_weights,
    )


# ---------------------------------------------------------------------------
# 6. Alignments scored against the gold ones of copying and reversing

# The ablation's digit tasks (chapter 10's cell ablation-code), its seeds, and the
# local-p variant that python -m experiments.ch10_weights --digits trains on them with
# the ablation's recipe (the window of local-m).
ALIGNMENT_TASKS = {
    "copy": CopyTask(min_len=3, max_len=8),
    "reversal": ReversalTask(min_len=3, max_len=8),
}
ALIGNMENT_SEEDS = (0, 1, 2)
LOCAL_P_VARIANT = dict(mode="local-p", window=2)


# Where the weights script saves the local-p model of a digit task and seed.
DIGIT_MODEL_FILE = "luong_{task_name}_local_p_seed{seed}.pt"


def load_local_p_models(
    folder: Path = WEIGHTS_DIR,
) -> dict[tuple[str, str], list[Seq2Seq]]:
    """The local-p models of ``python -m experiments.ch10_weights --digits``, keyed like
    :attr:`LuongAblation.every_seed`: (task name, "local-p") -> one model per seed."""
    return {
        (name, "local-p"): [
            load_seq2seq(
                Path(folder) / DIGIT_MODEL_FILE.format(task_name=name, seed=seed)
            )
            for seed in ALIGNMENT_SEEDS
        ]
        for name in ALIGNMENT_TASKS
    }


@dataclass
class AlignmentScores(Result):
    """Teacher-forced attention of each model against the gold alignment of its task,
    keyed by (task name, variant name), one number per seed: the mean weight on the
    gold position (``mass``), the summed weight (``given``, below 1 for local-p), the
    alignment error rate of each step's largest weight (``aer``), the digits predicted
    right (``steps_right``), and greedy exact match (``exact``); and, for the steps
    whose gold position lies inside local-m's window (|s - t| <= D,
    :data:`LUONG_VARIANTS`), the share of the argmax links on it (``hits_in_reach``),
    and the digits predicted right at the other steps (``right_out_of_reach``, NaN when
    there are none). ``reach`` maps each task to the share of its digit steps inside
    that window: a model whose weights are 0 outside it has an AER of at least
    ``1 - reach`` and a gold mass of at most ``reach``. The findings are those of the
    chapter's runs."""

    mass: dict[tuple[str, str], Float[Tensor, "seeds"]]
    given: dict[tuple[str, str], Float[Tensor, "seeds"]]
    aer: dict[tuple[str, str], Float[Tensor, "seeds"]]
    steps_right: dict[tuple[str, str], Float[Tensor, "seeds"]]
    exact: dict[tuple[str, str], Float[Tensor, "seeds"]]
    hits_in_reach: dict[tuple[str, str], Float[Tensor, "seeds"]] = field(
        default_factory=dict
    )
    right_out_of_reach: dict[tuple[str, str], Float[Tensor, "seeds"]] = field(
        default_factory=dict
    )
    reach: dict[str, float] = field(default_factory=dict)

    FINDINGS = (
        Finding(
            "Every global model puts 90% or more of its weight on the gold position "
            "and has an AER of 2% or less, copying and reversing.",
            backs=("align-discussion", "summary"),
            holds=lambda r: all(
                r.mass[task, "global"].min() >= 0.90
                and r.aer[task, "global"].max() <= 0.02
                for task in ("copy", "reversal")
            ),
        ),
        Finding(
            "Copying, every local-m and local-p model has an AER of 2.5% or less.",
            backs=("align-discussion", "summary"),
            holds=lambda r: max(
                r.aer["copy", "local-m"].max(), r.aer["copy", "local-p"].max()
            )
            <= 0.025,
        ),
        Finding(
            "Reversing, every local-m model puts its largest weight on the gold "
            "position at 85% or more of the steps whose gold digit is inside its "
            "window.",
            backs=("align-discussion", "summary"),
            holds=lambda r: r.hits_in_reach["reversal", "local-m"].min() >= 0.85,
        ),
        Finding(
            "Reversing, every local-m model predicts the right digit at 80% or more "
            "of the steps (teacher forced).",
            backs=("align-discussion",),
            holds=lambda r: r.steps_right["reversal", "local-m"].min() >= 0.80,
        ),
        Finding(
            "Every local-p model reverses 90% or more of the held-out strings, with "
            "an AER of 2% or less.",
            backs=("align-discussion", "summary"),
            holds=lambda r: r.exact["reversal", "local-p"].min() >= 0.90
            and r.aer["reversal", "local-p"].max() <= 0.02,
        ),
        Finding(
            "On both tasks, every local-p model puts less weight on the gold position "
            "than every global model, and gives less than 95% of its weight in all.",
            backs=("align-discussion",),
            holds=lambda r: all(
                r.mass[task, "local-p"].max() < r.mass[task, "global"].min()
                and r.given[task, "local-p"].max() < 0.95
                for task in ("copy", "reversal")
            ),
        ),
        Finding(
            "With and without input feeding, every global model reverses with an AER "
            "of 2% or less.",
            backs=("align-discussion", "summary"),
            holds=lambda r: max(
                r.aer["reversal", "global"].max(),
                r.aer["reversal", "global, no input feeding"].max(),
            )
            <= 0.02,
        ),
        Finding(
            "Reversing, on every seed the global model without input feeding puts less "
            "weight on the gold position than the one with it.",
            backs=("align-discussion",),
            holds=lambda r: bool(
                (
                    r.mass["reversal", "global, no input feeding"]
                    < r.mass["reversal", "global"]
                ).all()
            ),
        ),
        Finding(
            "Reversing, every local-m model predicts the right digit at 75% or more "
            "of the steps whose gold digit is outside its window (teacher forced).",
            backs=("align-discussion",),
            holds=lambda r: r.right_out_of_reach["reversal", "local-m"].min() >= 0.75,
        ),
    )


@torch.no_grad()
def score_alignments(
    models: Mapping[tuple[str, str], list[Seq2Seq]],
    tasks: Mapping[str, ReversalTask],
    tests: Mapping[str, SequencePairs],
) -> AlignmentScores:
    """Score each model of ``models`` ((task name, variant) -> one model per seed) on
    its task's held-out pairs ``tests[task name]``: the teacher-forced weights
    (:meth:`Seq2Seq.attend`) against ``tasks[task name].gold_alignment``, the hard
    alignment one link per digit step (:func:`hard_alignment`), and greedy exact
    match."""
    if not isinstance(models, Mapping) or not models:
        raise ValueError(
            "models must map (task name, variant) to a list of models, at least one "
            f"entry; found {models!r}"
        )
    result = AlignmentScores({}, {}, {}, {}, {})
    names = ("mass", "given", "aer", "steps_right", "exact")
    names += ("hits_in_reach", "right_out_of_reach")
    window = LUONG_VARIANTS["local-m"]["window"]
    for (task_name, variant), seed_models in models.items():
        if task_name not in tasks or task_name not in tests:
            raise ValueError(
                f"models must be keyed by a task of tasks and tests, {sorted(tasks)}; "
                f"found {task_name!r}"
            )
        if not seed_models:
            raise ValueError(
                f"models[{(task_name, variant)!r}] must hold at least one model; "
                "found none"
            )
        task, test = tasks[task_name], tests[task_name]
        gold = task.gold_alignment(test)  # (N, T, S)
        steps = gold.any(-1)  # (N, T): the digit steps
        # inside local-m's window: the gold position s of step t has |s - t| <= D
        near = (gold & _window_mask(gold.shape, window)).any(-1)  # (N, T)
        result.reach[task_name] = near[steps].float().mean().item()
        scores = {name: [] for name in names}
        for model in seed_models:
            logits, weights = model.attend(test.src, test.tgt_in, test.src_lens)
            right = logits.argmax(-1) == test.tgt_out  # (N, T)
            scores["mass"].append(gold_mass(weights, gold))
            scores["given"].append(weights.sum(-1)[steps].mean())
            hard = hard_alignment(weights, steps)
            scores["aer"].append(torch.tensor(alignment_error_rate(hard, gold)))
            scores["steps_right"].append(right[steps].float().mean())
            correct = exact_matches(model, test, task.bos, task.eos)
            scores["exact"].append(correct.float().mean())
            on_gold = (hard & gold).any(-1)  # (N, T)
            scores["hits_in_reach"].append(on_gold[near].float().mean())
            scores["right_out_of_reach"].append(right[steps & ~near].float().mean())
        for name, values in scores.items():
            getattr(result, name)[task_name, variant] = torch.stack(values).float()
    return result


def _window_mask(shape: tuple[int, int, int], window: int) -> Tensor:
    """``(1, T, S)``: True where source position s is within ``window`` of step t."""
    _, steps, width = shape
    t = torch.arange(steps)[:, None]  # (T, 1)
    s = torch.arange(width)[None]  # (1, S)
    return ((s - t).abs() <= window)[None]


# ---------------------------------------------------------------------------
# 7. Beam size on trained models (Koehn and Knowles, 2017, section 3.6)

BEAM_SIZES = (1, 2, 4, 8, 16, 32, 64)
ALPHAS = (0.0, 1.0)  # without and with length normalisation
# The sweep the chapter shows, made by python -m experiments.ch10_seq2seq beam-sizes.
BEAM_SIZES_FILE = WEIGHTS_DIR / "ch10_beam_sizes.pt"
# The models swept: the shipped Luong models, and Bahdanau models trained from each
# seed on the first n_train dates for `epochs` passes: the chapter's recipe and a
# shorter one.
UNDERTRAINED = "Bahdanau, 1,000 dates"
BEAM_GROUPS = {
    "Bahdanau": dict(n_train=2500, epochs=2),
    UNDERTRAINED: dict(n_train=1000, epochs=1),
}


@jaxtyped(typechecker=typechecked)
def beam_size_sweep(
    model: Seq2Seq,
    task: DateTask,
    data: SequencePairs,
    beam_sizes: each(PositiveInt) = BEAM_SIZES,
    alphas: each(NonNegative) = ALPHAS,
) -> tuple[Tensor, Tensor, Tensor]:
    """Decode ``data`` with every beam size and rank the finished hypotheses with every
    ``alpha``; return corpus BLEU on characters (sacreBLEU's smoothing), exact match and
    the output characters per reference character, each (alphas, beam sizes)."""
    if not beam_sizes:
        raise ValueError("beam_sizes must hold at least one beam size; found none")
    references = [list(task.target_text(row)) for row in data.tgt_out.tolist()]
    width = data.tgt_out.shape[1]
    bleu, exact, length = [], [], []
    for beam_size in beam_sizes:
        # beam_search_batch takes at most MAX_EXPANSIONS source-beam-steps per call
        chunk = max(1, MAX_EXPANSIONS // (beam_size * (width + 5)))
        runs = [[] for _ in alphas]
        for start in range(0, len(data), chunk):
            part = data[torch.arange(start, min(start + chunk, len(data)))]
            found = beam_translate(
                model, part, task.bos, task.eos, beam_size, width + 5, alphas
            )
            for outputs, more in zip(runs, found):
                outputs.extend(more)
        for outputs in runs:
            texts = [list(task.target_text(output)) for output in outputs]
            score = corpus_bleu(texts, [[r] for r in references], smooth="exp").score
            bleu.append(score)
            ended = [output[-1:] == [task.eos] for output in outputs]
            right = [t == r and e for t, r, e in zip(texts, references, ended)]
            exact.append(sum(right) / len(right))
            length.append(sum(map(len, texts)) / sum(map(len, references)))
    shape = (len(beam_sizes), len(alphas))
    as_table = lambda values: torch.tensor(values).reshape(shape).T  # noqa: E731
    return as_table(bleu), as_table(exact), as_table(length)


@dataclass
class BeamSizes(Result):
    """BLEU, exact match and relative length against beam size, by group of models
    (``"Luong"``: global and local-p; the Bahdanau groups: one model per seed), each
    (models, alphas, beam sizes)."""

    beam_sizes: list[int]
    alphas: list[float]
    n_test: int  # held-out dates decoded
    bleu: dict[str, Tensor]
    exact: dict[str, Tensor]
    length: dict[str, Tensor]

    def at(self, table: str, group: str, alpha: float, beam_size: int) -> Tensor:
        """The ``table`` ("bleu", "exact" or "length") of each model of ``group`` at
        one ``alpha`` and beam size, (models,)."""
        a, k = self.alphas.index(alpha), self.beam_sizes.index(beam_size)
        return getattr(self, table)[group][:, a, k]

    FINDINGS = (
        Finding(
            "Each Luong model scores at every K, with and without normalisation, what "
            "it scores with greedy search (BLEU, exact match and length).",
            backs=("beam-size-discussion",),
            holds=lambda r: all(
                (t["Luong"] == t["Luong"][:, :1, :1]).all()
                for t in (r.bleu, r.exact, r.length)
            ),
        ),
        Finding(
            "Every Bahdanau model of the chapter's recipe writes, in total, within "
            "0.1% of the references' number of characters at every beam size and "
            "alpha.",
            backs=("beam-size-discussion",),
            holds=lambda r: (r.length["Bahdanau"] - 1).abs().max() <= 0.001,
        ),
        Finding(
            "At every K and alpha, no Bahdanau model of the chapter's recipe scores a "
            "lower exact match than with greedy search, and none a BLEU more than "
            "0.02 from greedy search's.",
            backs=("beam-size-discussion",),
            holds=lambda r: (
                (r.exact["Bahdanau"] >= r.exact["Bahdanau"][..., :1]).all()
                and (r.bleu["Bahdanau"] - r.bleu["Bahdanau"][..., :1]).abs().max()
                <= 0.02
            ),
        ),
        Finding(
            "Without normalisation, every model trained on 1,000 dates scores a BLEU "
            "at K = 64 that is 0.03 or more below its best over the beam sizes.",
            backs=("beam-size-discussion",),
            holds=lambda r: (
                r.bleu[UNDERTRAINED][:, 0].amax(1) - r.at("bleu", UNDERTRAINED, 0.0, 64)
            ).min()
            >= 0.03,
        ),
        Finding(
            "Without normalisation, every model trained on 1,000 dates writes 10% "
            "or more fewer characters at K = 64 than at K = 1.",
            backs=("beam-size-discussion",),
            holds=lambda r: (
                r.at("length", UNDERTRAINED, 0.0, 64)
                <= 0.9 * r.at("length", UNDERTRAINED, 0.0, 1)
            ).all(),
        ),
        Finding(
            "With normalisation, every model trained on 1,000 dates writes at K = 64 "
            "90% or more of the references' characters.",
            backs=("beam-size-discussion",),
            holds=lambda r: r.at("length", UNDERTRAINED, 1.0, 64).min() >= 0.9,
        ),
        Finding(
            "At K = 64, normalisation raises the BLEU of every model trained on "
            "1,000 dates.",
            backs=("beam-size-discussion",),
            holds=lambda r: (
                r.at("bleu", UNDERTRAINED, 1.0, 64)
                > r.at("bleu", UNDERTRAINED, 0.0, 64)
            ).all(),
        ),
    )

    def to_dict(self) -> dict:
        """What :func:`_save_beam_sizes` stores (``torch.load(weights_only=True)``)."""
        return {
            "beam_sizes": list(self.beam_sizes),
            "alphas": list(self.alphas),
            "n_test": self.n_test,
            "bleu": dict(self.bleu),
            "exact": dict(self.exact),
            "length": dict(self.length),
        }


@jaxtyped(typechecker=typechecked)
def _beam_sizes_on_dates(
    seeds: each(NonNegativeInt),
    n_test: PositiveInt = 200,
    beam_sizes: each(PositiveInt) = BEAM_SIZES,
    groups: Mapping[str, dict] = BEAM_GROUPS,
    weights_dir: Path = WEIGHTS_DIR,
    luong: bool = True,
) -> BeamSizes:
    """The sweep of :func:`beam_size_sweep` on the first ``n_test`` held-out dates of
    the chapter's split, for the shipped Luong models (float64) and, for each group
    and seed, a Bahdanau model trained by :func:`train_model` as the group says."""
    if not seeds and not luong:
        raise ValueError("seeds must be a non-empty sequence of ints; found none")
    if n_test > 1000:
        raise ValueError(
            "n_test must be at most the 1,000 held-out dates of the split; "
            f"found {n_test}"
        )
    task = DateTask()
    train, test, _ = task.split(n_train=5000, n_test=1000, seed=0)
    data = test[torch.arange(n_test)]
    sweeps = {"Luong": []} if luong else {}
    for name in ("luong_global", "luong_local_p") if luong else ():
        model = load_seq2seq(weights_dir / f"{name}.pt").double()
        sweeps["Luong"].append(beam_size_sweep(model, task, data, beam_sizes))
    sizes = (task.src_vocab_size, task.tgt_vocab_size)
    for group, recipe in groups.items():
        first = train[torch.arange(recipe["n_train"])]
        sweeps[group] = []
        for seed in seeds:
            model, _ = train_model(
                "bahdanau", *sizes, first, recipe["epochs"], seed=seed
            )
            sweeps[group].append(
                beam_size_sweep(model.double(), task, data, beam_sizes)
            )
    tables = [
        {group: torch.stack([run[k] for run in runs]) for group, runs in sweeps.items()}
        for k in range(3)
    ]
    return BeamSizes(list(beam_sizes), list(ALPHAS), n_test, *tables)


def _save_beam_sizes(result: BeamSizes, path: Path = BEAM_SIZES_FILE) -> None:
    """Store a sweep of :func:`_beam_sizes_on_dates` where the chapter loads it."""
    torch.save(result.to_dict(), path)


def load_beam_sizes(path: Path = BEAM_SIZES_FILE) -> BeamSizes:
    """The sweep stored by :func:`_save_beam_sizes`."""
    return BeamSizes(**torch.load(path, weights_only=True))


def _merge_beam_sizes(parts: Sequence[BeamSizes]) -> BeamSizes:
    """One sweep from ``parts`` run on the same dates and beam sizes: each group's
    models in the order of ``parts`` (Luong from the part that ran it)."""
    first = parts[0]
    for part in parts:
        if (part.beam_sizes, part.alphas, part.n_test) != (
            first.beam_sizes,
            first.alphas,
            first.n_test,
        ):
            raise ValueError(
                "parts must share beam sizes, alphas and n_test; found "
                f"{(part.beam_sizes, part.alphas, part.n_test)} and "
                f"{(first.beam_sizes, first.alphas, first.n_test)}"
            )
    tables = []
    for table in ("bleu", "exact", "length"):
        merged: dict[str, list[Tensor]] = {}
        for part in parts:
            for group, values in getattr(part, table).items():
                merged.setdefault(group, []).append(values)
        tables.append({group: torch.cat(runs) for group, runs in merged.items()})
    return BeamSizes(first.beam_sizes, first.alphas, first.n_test, *tables)


def _beam_sizes_part(job: tuple) -> BeamSizes:
    """One process's part of :func:`_main`: the Luong models (no seeds) or one seed."""
    seeds, n_test, beam_sizes, groups = job
    torch.set_num_threads(1)  # the same models on every run
    luong = not seeds
    return _beam_sizes_on_dates(
        seeds, n_test, beam_sizes, groups if seeds else {}, luong=luong
    )


def _main(argv: Optional[Sequence[str]] = None) -> None:
    """``python -m experiments.ch10_seq2seq beam-sizes [--out FILE] [--n-test N]
    [--seeds S ...] [--beam-sizes K ...] [--jobs J]``: run :func:`_beam_sizes_on_dates`
    for the Luong models and for each seed in its own single-threaded process
    (deterministic; ``J`` at a time), merge the parts in that order and save it. The
    stored file is this command's output at its defaults; see the chapter for its
    CPU time."""
    parser = argparse.ArgumentParser(prog="python -m experiments.ch10_seq2seq")
    parser.add_argument("run", choices=["beam-sizes"])
    parser.add_argument("--out", type=Path, default=BEAM_SIZES_FILE)
    parser.add_argument("--n-test", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=list(BEAM_SIZES))
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args(argv)
    groups = BEAM_GROUPS  # looked up at the call: a test shortens the training
    jobs = [([], args.n_test, args.beam_sizes, groups)] + [
        ([seed], args.n_test, args.beam_sizes, groups) for seed in args.seeds
    ]
    if args.jobs == 1:
        parts = [_beam_sizes_part(job) for job in jobs]
    else:
        context = multiprocessing.get_context("spawn")
        with context.Pool(args.jobs) as pool:
            parts = pool.map(_beam_sizes_part, jobs)  # in the order of jobs
    result = _merge_beam_sizes(parts)
    _save_beam_sizes(result, args.out)
    for group, bleu in result.bleu.items():
        print(group, "BLEU (models, alphas, beam sizes):", bleu)


if __name__ == "__main__":
    _main()
