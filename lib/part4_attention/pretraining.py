"""Pretraining in miniature: a masked LM on unlabelled strings, then few labels.

Chapter 11 ends with BERT (Devlin et al. [1]_) and GPT (Radford et al. [2]_):
a Transformer is first trained on plenty of unlabelled text with a
self-supervised objective, then reused for a task that has few labels. This
module holds that recipe at a size that trains in seconds, top to bottom (the
chapter's runs of it, with its sets, sizes and seeds, are the book's experiments,
not part of lib):

1. The data (:func:`walks`, :func:`distinct_walks`): digit strings that walk
   around a clock of ten digits, ``x_t = (x_{t-1} + k + e_t) mod 10``, with a
   step ``k`` drawn per string and a wobble ``e_t`` in {-1, 0, 1} drawn per
   move. Tens of thousands of strings are possible (:func:`walk_space_size`),
   so the unlabelled corpus, the held-out set and the labelled training set can
   be drawn as one stream of distinct strings that share none
   (:func:`shared_strings` counts common ones). The unlabelled corpus has
   the strings only; the labelled task asks for ``k``, and
   :func:`best_possible_accuracy` is the expected accuracy of the best
   possible classifier, below 1 since some strings fit more than one step.
2. An encoder stack (:class:`lib.part4_attention.transformer.TransformerStack`:
   embedding plus :class:`lib.part4_attention.transformer_blocks.EncoderBlock` layers)
   reads the strings, with a ``<cls>`` token in front, and :class:`MaskedLM`, the
   encoder with a linear output layer that predicts the original token at each position.
3. :func:`masked_lm_loss`, the cross-entropy over the corrupted positions only, and
   :func:`pretrain_masked_lm`, which corrupts each batch with BERT's rule
   (:func:`lib.part4_attention.pretrained.mask_tokens`) and minimises that loss. A
   masked digit is narrowed down best by inferring ``k`` from the moves the model can
   see, so the step can end up in its features although no label names it.
4. :class:`SequenceClassifier` (a linear head on the mean of the encoder's
   outputs, with the encoder either frozen or fine-tuned) and
   :func:`train_classifier`, which trains it on the few labelled sequences
   and logs held-out accuracy.

Conventions: batch-first tensors. ``B`` (or ``N``, ``M``) strings, ``T`` (or ``S``)
positions (``<cls>`` included), ``D`` the model size, ``V`` the vocabulary size, ``C``
the classes.

References
----------
.. [1] J. Devlin, M.-W. Chang, K. Lee, K. Toutanova. "BERT: Pre-training of Deep
   Bidirectional Transformers for Language Understanding". NAACL 2019.
   arXiv:1810.04805.
.. [2] A. Radford, K. Narasimhan, T. Salimans, I. Sutskever. "Improving Language
   Understanding by Generative Pre-Training". OpenAI technical report, 2018.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int, Int64
from torch import Tensor, nn

from lib.checked import (
    AnyInt,
    Fraction,
    NonNegativeInt,
    Positive,
    PositiveInt,
    distinct_each,
    int_from,
)
from lib.part4_attention.pretrained import mask_tokens
from lib.training import train_step
from lib.part4_attention.transformer import TransformerStack

__all__ = [
    "DIGITS",
    "MASK",
    "CLS",
    "VOCAB_SIZE",
    "STEPS",
    "WOBBLE",
    "walks",
    "walk_space_size",
    "distinct_walks",
    "shared_strings",
    "best_possible_accuracy",
    "MaskedLM",
    "masked_lm_loss",
    "PretrainLog",
    "pretrain_masked_lm",
    "SequenceClassifier",
    "ClassifierLog",
    "train_classifier",
]

DIGITS = 10  # tokens 0 .. 9 are the digits
MASK, CLS = 10, 11  # the two special tokens
VOCAB_SIZE = 12


STEPS = (1, 2, 3, 4)  # the steps k of the chapter's task, one class each
WOBBLE = (-1, 0, 1)  # the wobble e_t added to each move, uniform

# Digits per string: :func:`walk_space_size` raises a number to the power length - 1.
MAX_LENGTH = 1000
Length = int_from(2, MAX_LENGTH)  # a string has at least one move
Steps = distinct_each(int_from(1, DIGITS - 1))  # a step of 0 or 10 would not move


def _draw(
    count: PositiveInt, length: Length, steps: Steps, generator: torch.Generator
) -> tuple[Int64[Tensor, "B T"], Int64[Tensor, "B"]]:
    labels = torch.randint(len(steps), (count,), generator=generator)  # (B,)
    start = torch.randint(DIGITS, (count, 1), generator=generator)  # (B, 1)
    draws = torch.randint(len(WOBBLE), (count, length - 1), generator=generator)
    wobble = torch.tensor(WOBBLE)[draws]  # (B, L - 1)
    moves = torch.tensor(steps)[labels][:, None] + wobble  # (B, L - 1): k + e_t
    digits = torch.cat([start, start + moves.cumsum(dim=1)], dim=1) % DIGITS  # (B, L)
    tokens = torch.cat([torch.full((count, 1), CLS), digits], dim=1)  # (B, L + 1)
    return tokens, labels


def walks(
    count: PositiveInt,
    length: Length = 8,
    steps: Steps = STEPS,
    seed: NonNegativeInt = 0,
) -> tuple[Int64[Tensor, "B T"], Int64[Tensor, "B"]]:
    """``count`` strings ``<cls> x_0 .. x_{L-1}``, ``x_t = (x_{t-1} + k + e_t) mod 10``,
    and the index of each one's ``k`` in ``steps``.

    ``x_0`` is uniform over the digits, ``k`` over ``steps`` (one per string) and the
    wobble ``e_t`` over {-1, 0, 1} (one per move). A string can occur twice; use
    :func:`distinct_walks` for sets that must not overlap.
    """
    return _draw(count, length, tuple(steps), torch.Generator().manual_seed(seed))


def _moves_of(k: int_from(1, DIGITS - 1)) -> frozenset:
    return frozenset((k + e) % DIGITS for e in WOBBLE)


def walk_space_size(length: Length = 8, steps: Steps = STEPS) -> PositiveInt:
    """How many different strings :func:`walks` can produce.

    A string is its first digit and its ``L - 1`` moves, those of step ``k`` in
    ``S_k = {k - 1, k, k + 1}``: 10 times the size of the union of the cubes
    ``S_k^(L-1)``, by inclusion and exclusion (cubes meet in the cube of the
    intersection). E.g. ``walk_space_size(2, (1,))`` is 30.
    """
    union = 0
    for size in range(1, len(steps) + 1):
        for chosen in combinations(steps, size):
            common = frozenset.intersection(*(_moves_of(k) for k in chosen))
            union += (-1) ** (size + 1) * len(common) ** (length - 1)
    return DIGITS * union


def distinct_walks(
    count: PositiveInt,
    length: Length = 8,
    steps: Steps = STEPS,
    seed: NonNegativeInt = 0,
) -> tuple[Int64[Tensor, "B T"], Int64[Tensor, "B"]]:
    """The first ``count`` distinct strings of a stream of :func:`walks`.

    The stream is drawn in fixed chunks from one generator, so the first ``n`` strings
    do not depend on ``count``: consecutive parts of one call's output share no
    string. ``count`` may be at most half of :func:`walk_space_size`, so the stream
    ends quickly.
    """
    space = walk_space_size(length, steps)
    if count > space // 2:
        raise ValueError(
            f"count must be at most half of the {space} possible strings; found {count}"
        )
    generator = torch.Generator().manual_seed(seed)
    seen, rows, labels = set(), [], []
    while len(rows) < count:
        tokens, classes = _draw(1024, length, tuple(steps), generator)
        for row, label in zip(tokens.tolist(), classes.tolist()):
            if len(rows) < count and tuple(row) not in seen:
                seen.add(tuple(row))
                rows.append(row)
                labels.append(label)
    return torch.tensor(rows), torch.tensor(labels)


def shared_strings(
    first: Int[Tensor, "N T"], second: Int[Tensor, "M S"]
) -> NonNegativeInt:
    """How many distinct rows of ``first`` also occur in ``second``; strings of other
    lengths (``S != T``) share none."""
    for name, x in (("first", first), ("second", second)):
        if x.numel() and (x.min() < 0 or x.max() >= VOCAB_SIZE):
            raise ValueError(
                f"{name} must hold ids in [0, {VOCAB_SIZE}); "
                f"found ids from {int(x.min())} to {int(x.max())}"
            )
    return len(set(map(tuple, first.tolist())) & set(map(tuple, second.tolist())))


def best_possible_accuracy(
    tokens: Int[Tensor, "B T"], labels: Int64[Tensor, "B"], steps: Steps = STEPS
) -> Fraction:
    """The expected accuracy of the best classifier of the step (the Bayes rule).

    A string whose moves all lie in ``S_k = {k - 1, k, k + 1}`` has the same
    probability, ``(1/10) (1/3)^(L-1)``, under each such step ``k``; the best a
    classifier can do is pick one of the ``n`` consistent steps, right with
    probability ``1/n``. Returns the mean of ``1/n`` over the strings, after checking
    that each string fits its own step.
    """
    digits = tokens[:, 1:]  # (B, L)
    if not digits.numel():
        raise ValueError(
            "tokens must be <cls> followed by at least one digit, in at least one "
            f"row; found shape {tuple(tokens.shape)}"
        )
    if (tokens[:, 0] != CLS).any():
        raise ValueError(
            f"tokens[:, 0] must be CLS = {CLS}; found {tokens[:, 0].tolist()!r:.60}"
        )
    if digits.min() < 0 or digits.max() >= DIGITS:
        raise ValueError(
            f"tokens[:, 1:] must be digits in [0, {DIGITS}); "
            f"found ids from {int(digits.min())} to {int(digits.max())}"
        )
    if labels.min() < 0 or labels.max() >= len(steps):
        raise ValueError(
            f"labels must be indices into steps, 0 .. {len(steps) - 1}; "
            f"found {labels.tolist()!r:.60}"
        )
    moves = (digits[:, 1:] - digits[:, :-1]) % DIGITS  # (B, L - 1)
    fits = [torch.isin(moves, torch.tensor(sorted(_moves_of(k)))) for k in steps]
    fits = torch.stack([fit.all(dim=1) for fit in fits], dim=1)  # (B, C): moves in S_k?
    if not fits[torch.arange(len(labels)), labels].all():
        raise ValueError(
            "labels must be the steps the strings were drawn with; "
            "some string does not fit its step"
        )
    return (1.0 / fits.sum(dim=1).double()).mean().item()


class MaskedLM(nn.Module):
    """An encoder (every position attends to every other, as in BERT) and a linear
    layer that scores, at every position, which token belongs there."""

    def __init__(self, encoder: TransformerStack, vocab_size: PositiveInt):
        super().__init__()
        self.encoder = encoder
        self.output = nn.Linear(encoder.config.d_model, vocab_size)

    def forward(self, tokens: Int[Tensor, "B T"]) -> Float[Tensor, "B T V"]:
        return self.output(self.encoder(tokens)[0])  # (B, T, V)


def masked_lm_loss(
    logits: Float[Tensor, "*batch V"],
    labels: Int64[Tensor, "*batch"],
    ignore_index: AnyInt = -100,
) -> Float[Tensor, ""]:
    """The mean of ``-log p(x_t)`` over the positions ``t`` whose label is not
    ``ignore_index`` (those :func:`lib.part4_attention.pretrained.mask_tokens`
    selected); NaN if none.
    Equal to ``F.cross_entropy`` with that ``ignore_index``."""
    selected = labels != ignore_index  # (*batch)
    targets = labels[selected]  # (M,)
    if targets.numel() and (targets.min() < 0 or targets.max() >= logits.shape[-1]):
        raise ValueError(
            f"labels must be ids in [0, {logits.shape[-1]}) or ignore_index; "
            f"found ids from {int(targets.min())} to {int(targets.max())}"
        )
    log_probs = F.log_softmax(logits[selected], dim=-1)  # (M, V)
    return -log_probs.gather(1, targets[:, None]).mean()


@dataclass
class PretrainLog:
    """The mean masked-LM loss of each epoch."""

    losses: list[float] = field(default_factory=list)


def pretrain_masked_lm(
    model: MaskedLM,
    tokens: Int64[Tensor, "N T"],
    epochs: PositiveInt = 10,
    batch_size: PositiveInt = 64,
    lr: Positive = 3e-3,
    seed: NonNegativeInt = 0,
) -> PretrainLog:
    """Train ``model`` with Adam to restore the tokens that BERT's corruption
    (:func:`lib.part4_attention.pretrained.mask_tokens`, afresh for every batch;
    ``<cls>`` never selected) changed, minimising :func:`masked_lm_loss`. ``seed`` seeds
    the shuffling and the corruption."""
    if not len(tokens):
        raise ValueError("tokens must hold at least one string; found 0")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    log = PretrainLog()
    model.train()
    for _ in range(epochs):
        total, batches = 0.0, 0
        for index in torch.randperm(len(tokens), generator=generator).split(batch_size):
            corrupted, labels = mask_tokens(
                tokens[index], MASK, DIGITS, special_ids=(CLS,), generator=generator
            )
            if (labels == -100).all():
                continue  # nothing selected in this batch: no loss to take
            loss = masked_lm_loss(model(corrupted), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, batches = total + loss.item(), batches + 1
        log.losses.append(total / max(batches, 1))
    return log


class SequenceClassifier(nn.Module):
    """A linear layer on the mean of the encoder's outputs; with ``freeze`` the encoder
    is not trained.

    BERT classifies from the output at ``<cls>``; here the masked LM never scores that
    position, so the mean over all positions is the summary. Frozen, the encoder is a
    fixed feature extractor (no gradient, always in eval mode), as with ELMo's
    features; fine-tuned, every parameter learns, as with BERT and GPT.
    """

    def __init__(
        self, encoder: TransformerStack, num_classes: int_from(2), freeze: bool
    ):
        super().__init__()
        self.encoder, self.freeze = encoder, freeze
        self.head = nn.Linear(encoder.config.d_model, num_classes)
        encoder.requires_grad_(not freeze)

    def train(self, mode: bool = True) -> SequenceClassifier:
        super().train(mode)
        if self.freeze:
            self.encoder.eval()  # frozen features: no dropout in the encoder either
        return self

    def forward(self, tokens: Int[Tensor, "B T"]) -> Float[Tensor, "B C"]:
        outputs = self.encoder(tokens)[0]  # (B, T, D)
        return self.head(outputs.mean(dim=1))  # (B, D) -> (B, C)


@dataclass
class ClassifierLog:
    """Per epoch: the mean training loss and the held-out accuracy."""

    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)


@torch.no_grad()
def _accuracy(
    model: SequenceClassifier, tokens: Int[Tensor, "B T"], labels: Int64[Tensor, "B"]
) -> Fraction:
    model.eval()
    accuracy = (model(tokens).argmax(-1) == labels).double().mean().item()
    model.train()
    return accuracy


def train_classifier(
    model: SequenceClassifier,
    tokens: Int[Tensor, "N T"],
    labels: Int64[Tensor, "N"],
    test_tokens: Int[Tensor, "M S"],
    test_labels: Int64[Tensor, "M"],
    epochs: PositiveInt = 30,
    batch_size: PositiveInt = 16,
    lr: Positive = 3e-3,
    seed: NonNegativeInt = 0,
) -> ClassifierLog:
    """Train ``model`` (its head, or everything if not frozen) with Adam on the
    labelled strings, in an order ``seed`` shuffles, and score it on the held-out
    strings after every epoch."""
    for name, x in (("tokens", tokens), ("test_tokens", test_tokens)):
        if x.numel() and (x.min() < 0 or x.max() >= VOCAB_SIZE):
            raise ValueError(
                f"{name} must hold ids in [0, {VOCAB_SIZE}); "
                f"found ids from {int(x.min())} to {int(x.max())}"
            )
    classes = model.head.out_features
    for name, y in (("labels", labels), ("test_labels", test_labels)):
        if not len(y) or y.min() < 0 or y.max() >= classes:
            raise ValueError(
                f"{name} must be at least one class in [0, {classes}); "
                f"found {y.tolist()!r:.60}"
            )
    generator = torch.Generator().manual_seed(seed)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trained, lr=lr)
    log = ClassifierLog()
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(tokens), generator=generator)  # (N,)
        losses = [
            train_step(optimizer, model(tokens[index]), labels[index])
            for index in order.split(batch_size)
        ]
        log.losses.append(sum(losses) / len(losses))
        log.accuracies.append(_accuracy(model, test_tokens, test_labels))
    return log
