"""Pretraining in miniature: a masked LM on unlabelled sequences, then a classifier with few labels.

Chapter 11 ends with BERT (Devlin et al. [1]_) and GPT (Radford et al. [2]_):
a Transformer is first trained on plenty of unlabelled text with a
self-supervised objective, then reused for a task that has few labels. This
module runs that recipe at a size that trains in seconds, top to bottom:

1. The data (:func:`walks`, :func:`distinct_walks`): digit strings that walk
   around a clock of ten digits, ``x_t = (x_{t-1} + k + e_t) mod 10``, with a
   step ``k`` drawn per string and a wobble ``e_t`` in {-1, 0, 1} drawn per
   move. Tens of thousands of strings are possible (:func:`walk_space_size`),
   so :func:`pretraining_splits` draws the unlabelled corpus, the held-out set
   and the labelled training set as one stream of distinct strings, and checks
   that they share none (:func:`shared_strings`). The unlabelled corpus has
   the strings only; the labelled task asks for ``k``, and
   :func:`best_possible_accuracy` is the expected accuracy of the best
   possible classifier, below 1 since some strings fit more than one step.
2. An encoder stack (:class:`lib.transformer.TransformerStack`: embedding plus
   :class:`lib.transformer_blocks.EncoderBlock` layers) reads the strings, with a
   ``<cls>`` token in front, and :class:`MaskedLM`, the encoder with a linear
   output layer that predicts the original token at each position.
3. :func:`masked_lm_loss`, the cross-entropy over the corrupted positions only,
   and :func:`pretrain_masked_lm`, which corrupts each batch with BERT's rule
   (:func:`lib.pretrained.mask_tokens`) and minimises that loss. A masked
   digit is narrowed down best by inferring ``k`` from the moves the model can
   see, so the step can end up in its features although no label names it.
4. :class:`SequenceClassifier` (a linear head on the mean of the encoder's
   outputs, with the encoder either frozen or fine-tuned) and
   :func:`train_classifier`, which trains it on the few labelled sequences
   and logs held-out accuracy.

Conventions: batch-first tensors. ``B`` batch, ``T`` positions (``<cls>``
included), ``D`` the model size, ``V`` the vocabulary size, ``C`` the classes.

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
from torch import Tensor, nn

from lib.pretrained import mask_tokens
from lib.training import train_step
from lib.transformer import TransformerConfig, TransformerStack, embedding
from lib.validation import require_instance, require_int, require_number, require_tokens

__all__ = [
    "DIGITS", "MASK", "CLS", "VOCAB_SIZE", "STEPS", "WOBBLE", "walks", "walk_space_size", "distinct_walks",
    "shared_strings", "best_possible_accuracy", "MaskedLM", "masked_lm_loss",
    "PretrainLog", "pretrain_masked_lm", "SequenceClassifier", "ClassifierLog", "train_classifier",
    "pretraining_splits", "compare_with_and_without_pretraining",
]

DIGITS = 10  # tokens 0 .. 9 are the digits
MASK, CLS = 10, 11  # the two special tokens
VOCAB_SIZE = 12


STEPS = (1, 2, 3, 4)  # the steps k of the chapter's task, one class each
WOBBLE = (-1, 0, 1)  # the wobble e_t added to each move, uniform


MAX_LENGTH = 1000  # digits per string; :func:`walk_space_size` raises a number to the power length - 1


def _check_walks(count: object, length: object, steps: object, seed: object) -> None:
    require_int("count", count), require_int("length", length, 2, MAX_LENGTH), require_int("seed", seed, 0)
    if not isinstance(steps, (list, tuple)) or not steps or len(set(steps)) != len(steps) or not all(
        isinstance(k, int) and not isinstance(k, bool) and 1 <= k < DIGITS for k in steps
    ):
        raise ValueError(f"steps must be a non-empty list of distinct ints in 1 .. {DIGITS - 1}; found {steps!r}")


def _draw(count: int, length: int, steps: tuple, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    labels = torch.randint(len(steps), (count,), generator=generator)  # (B,)
    start = torch.randint(DIGITS, (count, 1), generator=generator)  # (B, 1)
    wobble = torch.tensor(WOBBLE)[torch.randint(len(WOBBLE), (count, length - 1), generator=generator)]
    moves = torch.tensor(steps)[labels][:, None] + wobble  # (B, L - 1): k + e_t
    digits = torch.cat([start, start + moves.cumsum(dim=1)], dim=1) % DIGITS  # (B, L)
    return torch.cat([torch.full((count, 1), CLS), digits], dim=1), labels  # (B, L + 1), (B,)


def walks(count: int, length: int = 8, steps: tuple = STEPS, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Sequences ``<cls> x_0 .. x_{L-1}`` with ``x_t = (x_{t-1} + k + e_t) mod 10``, and the class of each ``k``.

    ``x_0`` is uniform over the digits, ``k`` uniform over ``steps`` (one per
    sequence) and each wobble ``e_t`` uniform over {-1, 0, 1} (one per move);
    the label is the index of ``k`` in ``steps``. The same ``seed`` gives the
    same sequences. Draws are independent, so a string can occur twice; use
    :func:`distinct_walks` for sets that must not overlap.

    Parameters
    ----------
    count : int
        Number of sequences ``B``.
    length : int, default 8
        Digits per sequence ``L``.
    steps : tuple of int, default (1, 2, 3, 4)
        The possible steps, distinct, each in 1 .. 9.
    seed : int, default 0

    Returns
    -------
    tokens : LongTensor
        ``CLS`` then the digits.
    labels : LongTensor
        Index of each sequence's step in ``steps``.

    Shapes
    ------
    tokens : (B, L + 1)
    labels : (B,)
    """
    _check_walks(count, length, steps, seed)
    return _draw(count, length, tuple(steps), torch.Generator().manual_seed(seed))


def _moves_of(k: int) -> frozenset:
    return frozenset((k + e) % DIGITS for e in WOBBLE)


def walk_space_size(length: int = 8, steps: tuple = STEPS) -> int:
    """How many different strings :func:`walks` can produce.

    A string is its first digit and its ``L - 1`` moves ``(x_t - x_{t-1}) mod 10``;
    the moves of step ``k`` lie in ``S_k = {k - 1, k, k + 1}``, so the strings
    are 10 times the size of the union of the cubes ``S_k^(L-1)``, counted by
    inclusion and exclusion (the intersection of cubes is the cube of the
    intersection).

    Examples
    --------
    >>> walk_space_size(2, (1,))  # 10 first digits, 3 moves
    30
    """
    _check_walks(1, length, steps, 0)
    union = 0
    for size in range(1, len(steps) + 1):
        for chosen in combinations(steps, size):
            common = frozenset.intersection(*(_moves_of(k) for k in chosen))
            union += (-1) ** (size + 1) * len(common) ** (length - 1)
    return DIGITS * union


def distinct_walks(count: int, length: int = 8, steps: tuple = STEPS, seed: int = 0) -> tuple[Tensor, Tensor]:
    """The first ``count`` distinct strings of a stream of :func:`walks`: no string occurs twice.

    The stream is drawn in fixed chunks from one generator, so the first
    ``n`` strings do not depend on ``count``: splitting one call's output
    into consecutive parts gives sets that share no string, and asking for
    more strings only adds strings at the end.

    Parameters
    ----------
    count : int
        At most half of :func:`walk_space_size`, so the stream ends quickly.
    length, steps, seed
        As in :func:`walks`.

    Returns
    -------
    tokens : LongTensor
    labels : LongTensor

    Shapes
    ------
    tokens : (count, L + 1)
    labels : (count,)
    """
    _check_walks(count, length, steps, seed)
    space = walk_space_size(length, steps)
    if count > space // 2:
        raise ValueError(f"count must be at most half of the {space} possible strings; found {count}")
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


def shared_strings(first: Tensor, second: Tensor) -> int:
    """How many distinct rows of ``first`` also occur in ``second``.

    Shapes
    ------
    first : (N, T)
    second : (M, T)
    """
    require_tokens("first", first, VOCAB_SIZE), require_tokens("second", second, VOCAB_SIZE)
    return len(set(map(tuple, first.tolist())) & set(map(tuple, second.tolist())))


def best_possible_accuracy(tokens: Tensor, labels: Tensor, steps: tuple = STEPS) -> float:
    """The expected accuracy of the best classifier of the step: the Bayes rule of :func:`walks`.

    Every string whose moves all lie in ``S_k = {k - 1, k, k + 1}`` has the same
    probability, ``(1/10) (1/3)^(L-1)``, under each such step ``k``, so the
    best any classifier can do is to pick one of the ``n`` consistent steps,
    and it is right with probability ``1/n``. The mean of ``1/n`` over the
    strings is that rule's expected accuracy (the true step is always
    consistent, which this function checks).

    Parameters
    ----------
    tokens : LongTensor
        ``CLS`` then the digits, as from :func:`walks`.
    labels : LongTensor
        Index of each string's step in ``steps``.
    steps : tuple of int

    Shapes
    ------
    tokens : (B, L + 1)
    labels : (B,)
    """
    require_tokens("tokens", tokens, VOCAB_SIZE)
    _check_walks(1, 2, steps, 0)
    if tokens.shape[1] < 2 or (tokens[:, 1:] >= DIGITS).any():
        raise ValueError(f"tokens must be <cls> followed by at least one digit; found shape {tuple(tokens.shape)} "
                         f"with ids up to {int(tokens.max()) if tokens.numel() else None}")
    if not isinstance(labels, Tensor) or labels.dtype != torch.long or labels.shape != tokens.shape[:1]:
        found = f"shape {tuple(labels.shape)}, {labels.dtype}" if isinstance(labels, Tensor) else type(labels).__name__
        raise TypeError(f"labels must be a LongTensor of shape ({len(tokens)},); found {found}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= len(steps)):
        raise ValueError(f"labels must be indices into steps, 0 .. {len(steps) - 1}; found {labels.tolist()!r:.60}")
    moves = (tokens[:, 2:] - tokens[:, 1:-1]) % DIGITS  # (B, L - 1)
    # (B, C): does every move of the string lie in S_k?
    fits = torch.stack([torch.isin(moves, torch.tensor(sorted(_moves_of(k)))).all(dim=1) for k in steps], dim=1)
    if not fits[torch.arange(len(labels)), labels].all():
        raise ValueError("labels must be the steps the strings were drawn with; some string does not fit its step")
    return (1.0 / fits.sum(dim=1).double()).mean().item()


class MaskedLM(nn.Module):
    """An encoder with a linear layer that scores, at every position, which token belongs there.

    Parameters
    ----------
    encoder : TransformerStack
        An encoder stack (every position attends to every other, as in BERT).
    vocab_size : int

    Shapes
    ------
    tokens : (B, T)
    output : (B, T, V)
    """

    def __init__(self, encoder: TransformerStack, vocab_size: int):
        super().__init__()
        require_instance("encoder", encoder, TransformerStack), require_int("vocab_size", vocab_size)
        self.encoder = encoder
        self.output = nn.Linear(encoder.config.d_model, vocab_size)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.output(self.encoder(tokens)[0])  # (B, T, V)


def _check_loss(logits: object, labels: object, ignore_index: object) -> None:
    if not isinstance(logits, Tensor) or not logits.is_floating_point() or logits.dim() < 2:
        raise TypeError(f"logits must be a float tensor of shape (..., V); found {logits!r:.60}")
    if not isinstance(labels, Tensor) or labels.dtype != torch.long or labels.shape != logits.shape[:-1]:
        found = f"shape {tuple(labels.shape)}, {labels.dtype}" if isinstance(labels, Tensor) else type(labels).__name__
        raise TypeError(f"labels must be a LongTensor of shape {tuple(logits.shape[:-1])}; found {found}")
    require_int("ignore_index", ignore_index, minimum=-(2**63))


def masked_lm_loss(logits: Tensor, labels: Tensor, ignore_index: int = -100) -> Tensor:
    r"""The masked-LM loss: mean negative log-probability of the original token at the corrupted positions.

    .. math:: \mathcal{L} = -\frac{1}{|M|} \sum_{t \in M} \log p_\theta(x_t \mid \tilde{\mathbf{x}})

    ``M`` is the set of positions whose label is not ``ignore_index`` (the
    ones :func:`lib.pretrained.mask_tokens` selected); the rest do not count.
    Equal to ``F.cross_entropy(logits, labels, ignore_index=ignore_index)``
    over the flattened positions.

    Parameters
    ----------
    logits : Tensor
        Scores of every token at every position.
    labels : LongTensor
        The original token where selected, ``ignore_index`` elsewhere.
    ignore_index : int, default -100

    Returns
    -------
    Tensor
        A scalar (NaN when no position is selected).

    Shapes
    ------
    logits : (B, T, V)
    labels : (B, T)
    """
    _check_loss(logits, labels, ignore_index)
    selected = labels != ignore_index  # (B, T)
    log_probs = F.log_softmax(logits[selected], dim=-1)  # (|M|, V)
    return -log_probs.gather(1, labels[selected][:, None]).mean()


@dataclass
class PretrainLog:
    """The mean masked-LM loss of each epoch."""

    losses: list[float] = field(default_factory=list)


def _check_training(model: object, expected: type, tokens: object, epochs: object, batch_size: object,
                    lr: object, seed: object) -> None:
    require_instance("model", model, expected)
    require_tokens("tokens", tokens, VOCAB_SIZE)
    require_int("epochs", epochs), require_int("batch_size", batch_size), require_int("seed", seed, 0)
    require_number("lr", lr, 1e-8, 1.0)


def pretrain_masked_lm(model: MaskedLM, tokens: Tensor, epochs: int = 10, batch_size: int = 64, lr: float = 3e-3,
                       seed: int = 0) -> PretrainLog:
    """Train ``model`` to restore the tokens that BERT's corruption changed, with Adam.

    Each batch is corrupted afresh by :func:`lib.pretrained.mask_tokens`
    (15 % selected; of those 80 % masked, 10 % random, 10 % kept; ``<cls>``
    never selected), and the step minimises :func:`masked_lm_loss`.

    Parameters
    ----------
    model : MaskedLM
    tokens : LongTensor
        The unlabelled corpus (e.g. from :func:`distinct_walks`).
    epochs, batch_size : int
    lr : float, default 3e-3
    seed : int, default 0
        Seeds the shuffling and the corruption.

    Returns
    -------
    PretrainLog

    Shapes
    ------
    tokens : (N, T)
    """
    _check_training(model, MaskedLM, tokens, epochs, batch_size, lr, seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    log = PretrainLog()
    model.train()
    for _ in range(epochs):
        total, batches = 0.0, 0
        for index in torch.randperm(len(tokens), generator=generator).split(batch_size):
            corrupted, labels = mask_tokens(tokens[index], MASK, DIGITS, special_ids=(CLS,), generator=generator)
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
    """A linear layer on the mean of the encoder's outputs; with ``freeze`` the encoder is not trained.

    BERT classifies from the output at ``<cls>``; here the masked LM never
    scores that position's output (it is never selected), so the mean over all
    positions is the summary, as in many sentence encoders. Frozen, the encoder is a fixed feature extractor (its parameters get no
    gradient and it stays in eval mode) and only the head learns, as with
    ELMo's features. Fine-tuned, every parameter learns, as with BERT and GPT.

    Parameters
    ----------
    encoder : TransformerStack
        An encoder stack (every position attends to every other, as in BERT).
    num_classes : int
    freeze : bool

    Shapes
    ------
    tokens : (B, T), position 0 holds ``<cls>``
    output : (B, C) logits
    """

    def __init__(self, encoder: TransformerStack, num_classes: int, freeze: bool):
        super().__init__()
        require_instance("encoder", encoder, TransformerStack), require_int("num_classes", num_classes, 2)
        require_instance("freeze", freeze, bool)
        self.encoder, self.freeze = encoder, freeze
        self.head = nn.Linear(encoder.config.d_model, num_classes)
        encoder.requires_grad_(not freeze)

    def train(self, mode: bool = True) -> "SequenceClassifier":
        super().train(mode)
        if self.freeze:
            self.encoder.eval()  # frozen features: no dropout in the encoder either
        return self

    def forward(self, tokens: Tensor) -> Tensor:
        return self.head(self.encoder(tokens)[0].mean(dim=1))  # (B, T, D) -> mean (B, D) -> (B, C)


@dataclass
class ClassifierLog:
    """Per epoch: the mean training loss and the held-out accuracy."""

    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)


@torch.no_grad()
def _accuracy(model: SequenceClassifier, tokens: Tensor, labels: Tensor) -> float:
    model.eval()
    accuracy = (model(tokens).argmax(-1) == labels).double().mean().item()
    model.train()
    return accuracy


def train_classifier(model: SequenceClassifier, tokens: Tensor, labels: Tensor, test_tokens: Tensor,
                     test_labels: Tensor, epochs: int = 30, batch_size: int = 16, lr: float = 3e-3,
                     seed: int = 0) -> ClassifierLog:
    """Train ``model`` (head, or everything if not frozen) with Adam on the labelled sequences.

    Parameters
    ----------
    model : SequenceClassifier
    tokens, labels : LongTensor
        The few labelled training sequences and their classes.
    test_tokens, test_labels : LongTensor
        Held-out sequences, scored after every epoch.
    epochs, batch_size : int
    lr : float, default 3e-3
    seed : int, default 0
        Seeds the shuffling.

    Returns
    -------
    ClassifierLog

    Shapes
    ------
    tokens : (N, T)
    labels : (N,)
    test_tokens : (M, T)
    test_labels : (M,)
    """
    _check_training(model, SequenceClassifier, tokens, epochs, batch_size, lr, seed)
    require_tokens("test_tokens", test_tokens, VOCAB_SIZE)
    for name, x, y in (("labels", tokens, labels), ("test_labels", test_tokens, test_labels)):
        if not isinstance(y, Tensor) or y.dtype != torch.long or y.shape != x.shape[:1]:
            raise TypeError(f"{name} must be a LongTensor of shape ({len(x)},); found {y!r:.60}")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    log = ClassifierLog()
    model.train()
    for _ in range(epochs):
        losses = [train_step(optimizer, model(tokens[index]), labels[index])
                  for index in torch.randperm(len(tokens), generator=generator).split(batch_size)]
        log.losses.append(sum(losses) / len(losses))
        log.accuracies.append(_accuracy(model, test_tokens, test_labels))
    return log


def pretraining_splits(
    num_labels: int = 32, corpus_size: int = 1000, test_size: int = 250, seed: int = 0,
) -> tuple[Tensor, tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """The chapter's three sets of strings, which share none: unlabelled corpus, labelled set, held-out set.

    They are consecutive parts of one stream of :func:`distinct_walks`: first
    the corpus, then the held-out strings, then the labelled ones, so for a
    given ``seed`` the corpus and the held-out set do not depend on
    ``num_labels``, and a larger labelled set contains the smaller ones.
    Every pair of sets is checked to share no string.

    Parameters
    ----------
    num_labels, corpus_size, test_size : int
    seed : int, default 0

    Returns
    -------
    corpus : LongTensor
    labelled : (tokens, labels)
    held_out : (tokens, labels)

    Raises
    ------
    AssertionError
        If two of the sets share a string (they cannot, by construction).

    Shapes
    ------
    corpus : (corpus_size, 9)
    labelled : (num_labels, 9), (num_labels,)
    held_out : (test_size, 9), (test_size,)
    """
    for name, value in (("num_labels", num_labels), ("corpus_size", corpus_size), ("test_size", test_size)):
        require_int(name, value)
    require_int("seed", seed, 0)
    total, space = corpus_size + test_size + num_labels, walk_space_size()
    if total > space // 2:
        raise ValueError(f"num_labels + corpus_size + test_size must be at most half of the {space} possible "
                         f"strings; found {total}")
    tokens, labels = distinct_walks(total, seed=seed)
    corpus = tokens[:corpus_size]
    held_out = tokens[corpus_size:corpus_size + test_size], labels[corpus_size:corpus_size + test_size]
    labelled = tokens[corpus_size + test_size:], labels[corpus_size + test_size:]
    sets = {"unlabelled": corpus, "labelled": labelled[0], "held-out": held_out[0]}
    for (first, a), (second, b) in combinations(sets.items(), 2):
        if shared := shared_strings(a, b):  # not `assert`: it must hold under python -O too
            raise AssertionError(f"the {first} and {second} strings share {shared}; they must be disjoint")
    return corpus, labelled, held_out


def compare_with_and_without_pretraining(
    config: TransformerConfig, num_labels: int = 32, corpus_size: int = 1000, test_size: int = 250,
    pretrain_epochs: int = 30, epochs: int = 40, seed: int = 0,
) -> tuple[PretrainLog, dict[str, ClassifierLog]]:
    """The chapter's experiment for one seed: pretrain a masked LM, then train three classifiers of the step.

    The unlabelled corpus, the labelled training set and the held-out set are
    :func:`pretraining_splits`, which share no string. The three classifiers
    share the architecture, the labelled data and the number of epochs:
    ``"scratch"`` (a fresh encoder, all trained), ``"frozen"`` (the pretrained
    encoder fixed, a linear head trained) and ``"fine-tuned"`` (the pretrained
    encoder and the head trained).

    Parameters
    ----------
    config : TransformerConfig
        The encoder's sizes (``max_len`` >= 9).
    num_labels : int, default 32
        Labelled training sequences.
    corpus_size, test_size : int
        Unlabelled and held-out sequences.
    pretrain_epochs, epochs : int
        Epochs of pretraining and of each classifier's training.
    seed : int, default 0
        Seeds the strings, the initialisation, the shuffling and the corruption.

    Returns
    -------
    pretrain_log : PretrainLog
    logs : dict
        ``"scratch"``, ``"frozen"``, ``"fine-tuned"`` to their :class:`ClassifierLog`.

    Shapes
    ------
    Sequences are ``<cls>`` and 8 digits: (N, 9).
    """
    require_instance("config", config, TransformerConfig), require_int("seed", seed, 0)
    corpus, (train_tokens, train_labels), (test_tokens, test_labels) = pretraining_splits(
        num_labels, corpus_size, test_size, seed)
    torch.manual_seed(seed)
    model = MaskedLM(TransformerStack(embedding(VOCAB_SIZE, config), config), VOCAB_SIZE)
    pretrain_log = pretrain_masked_lm(model, corpus, epochs=pretrain_epochs, seed=seed)
    logs = {}
    for name in ("scratch", "frozen", "fine-tuned"):
        torch.manual_seed(seed)
        encoder = TransformerStack(embedding(VOCAB_SIZE, config), config)  # a fresh encoder ...
        if name != "scratch":
            encoder.load_state_dict(model.encoder.state_dict())  # ... or a copy of the pretrained one
        classifier = SequenceClassifier(encoder, len(STEPS), freeze=name == "frozen")
        logs[name] = train_classifier(classifier, train_tokens, train_labels, test_tokens, test_labels,
                                      epochs=epochs, seed=seed)
    return pretrain_log, logs
