"""A recurrent layer that must remember: the classifier of chapter 4's memory task.

:class:`MemoryClassifier` reads a sequence with a plain RNN, a GRU (Cho et al., 2014) or
an LSTM (Hochreiter and Schmidhuber, 1997) and classifies its last state; its
``keep_bias`` opens the gate that keeps the state from the start, as Jozefowicz et al.
(2015) recommend for the forget gate. For
:class:`lib.part2_recurrent.recall_task.MemoryTask`, :func:`sequence_symbols` gives the
symbols of a batch and :func:`unseen_batch` draws sequences outside a set already seen,
to test a model on sequences it never trained on. :func:`train_memory_task` trains one
classifier on fresh batches of the task; chapter 4's seeds and sweeps are
:mod:`experiments.ch04_gating`.

References
----------
.. [1] S. Hochreiter, J. Schmidhuber. "Long Short-Term Memory". Neural
   Computation 9(8), 1997.
.. [2] K. Cho, B. van Merrienboer, C. Gulcehre, D. Bahdanau, F. Bougares,
   H. Schwenk, Y. Bengio. "Learning Phrase Representations using RNN
   Encoder-Decoder for Statistical Machine Translation". EMNLP 2014.
.. [3] R. Jozefowicz, W. Zaremba, I. Sutskever. "An Empirical Exploration of
   Recurrent Network Architectures". ICML 2015.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Union

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int, Int8
from torch import Tensor, nn

from lib.checked import Finite, NonNegative, NonNegativeInt, PositiveInt
from lib.part2_recurrent.rnn import (
    GRU,
    LSTM,
    MAX_PARAMETERS,
    RNN,
    Kind,
    clip_grad_norm,
    parameter_count,
)
from lib.part2_recurrent.recall_task import MemoryTask

__all__ = [
    "MemoryClassifier",
    "MemoryRun",
    "sequence_symbols",
    "train_memory_task",
    "unseen_batch",
]


class MemoryClassifier(nn.Module):
    """A recurrent layer read at its last step by a linear classifier.

    The recurrent layer is PyTorch's (fast, for training); :meth:`lib_layer` returns
    the lib layer that computes the same function. ``keep_bias`` is the initial bias of
    the gate that keeps the state (the LSTM's forget gate, the GRU's update gate ``z``;
    0 for the plain RNN, which has no gate): a large value starts with a long memory.
    """

    def __init__(
        self,
        kind: Kind,
        input_size: PositiveInt,
        hidden_size: PositiveInt,
        classes: PositiveInt,
        keep_bias: Finite = 0.0,
    ):
        if kind == "rnn" and keep_bias != 0:
            raise ValueError(
                f"a plain RNN has no gate: expected keep_bias = 0; found {keep_bias}"
            )
        # numpy ints too, as PositiveInt allows: torch's layers take only int
        input_size, hidden_size = int(input_size), int(hidden_size)
        classes = int(classes)
        recurrent = parameter_count(kind, input_size, hidden_size)
        size = recurrent + (hidden_size + 1) * classes  # output weights and biases
        if size > MAX_PARAMETERS:  # torch would try to allocate them, or loop for hours
            raise ValueError(
                f"MemoryClassifier of input_size={input_size}, hidden_size="
                f"{hidden_size}, classes={classes} would hold {size:.3g} parameters; "
                "at most 2**31 fit"
            )
        super().__init__()
        self.kind = kind
        layer = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[kind]
        self.recurrent = layer(input_size, hidden_size, batch_first=True)
        self.output = nn.Linear(hidden_size, classes)
        if kind != "rnn":
            # The keep gate, the second block of rows: GRU (r, z, n), LSTM (i, f, g, o).
            keep = slice(hidden_size, 2 * hidden_size)
            with torch.no_grad():
                self.recurrent.bias_ih_l0[keep] = keep_bias
                self.recurrent.bias_hh_l0[keep] = 0.0

    def forward(self, x: Float[Tensor, "B T D"]) -> Float[Tensor, "B C"]:
        weight = self.recurrent.weight_ih_l0  # (G * H, D)
        if x.shape[1] == 0 or x.shape[2] != weight.shape[1]:
            raise ValueError(
                f"x must hold T >= 1 steps of D = {weight.shape[1]} features; "
                f"found shape {tuple(x.shape)}"
            )
        if x.dtype != weight.dtype:
            raise TypeError(
                f"x must be {weight.dtype}, as the weights; found {x.dtype}"
            )
        hidden, _ = self.recurrent(x)  # (B, T, H)
        return self.output(hidden[:, -1])  # (B, C)

    def lib_layer(self) -> Union[RNN, GRU, LSTM]:
        """The recurrent layer as a lib layer (same weights, same function)."""
        return {"rnn": RNN, "gru": GRU, "lstm": LSTM}[self.kind].from_torch(
            self.recurrent
        )


@dataclass
class MemoryRun:
    """The outcome of :func:`train_memory_task`.

    ``train_symbols`` and ``test_symbols`` hold the symbols of every training and test
    sequence (the stored one, then the distractors), one row each; no row of the second
    occurs in the first. ``replaced`` counts the test draws that were training
    sequences and were drawn again. ``untrained`` is the model as it was initialised.
    """

    kind: Kind
    length: NonNegativeInt
    accuracy: float  # on test sequences none of which occurs in training
    losses: list[float] = field(repr=False)
    model: MemoryClassifier = field(repr=False)
    # a copy of the model before training
    untrained: MemoryClassifier = field(repr=False)
    train_symbols: Int8[Tensor, "N S"] = field(repr=False)  # N = steps * batch_size
    test_symbols: Int8[Tensor, "M S"] = field(repr=False)  # M = test_size
    replaced: NonNegativeInt = 0


def sequence_symbols(
    x: Float[Tensor, "B T D"], symbols: PositiveInt
) -> Int8[Tensor, "B T-1"]:
    """The symbols of a batch of :class:`MemoryTask` sequences, without the recall step
    (``D = symbols + 2``)."""
    if x.shape[1] == 0 or x.shape[-1] != symbols + 2:
        raise ValueError(
            f"x must have T >= 1 steps and D = symbols + 2 = {symbols + 2} features; "
            f"found shape {tuple(x.shape)}"
        )
    return x[:, :-1, :symbols].argmax(dim=-1).to(torch.int8)


def unseen_batch(
    task: MemoryTask,
    batch_size: PositiveInt,
    generator: torch.Generator,
    seen: set,
    rounds: PositiveInt = 100,
) -> tuple[Float[Tensor, "B T D"], Int[Tensor, " B"], int]:
    """``batch_size`` sequences of ``task`` none of which is in ``seen``, and how many
    draws were replaced.

    Draws batches from ``generator`` and keeps, in order, the sequences whose symbols
    (a tuple, as :func:`sequence_symbols` gives them) are not in ``seen``; ``replaced``
    counts the draws in ``seen`` before the last one kept.
    """
    kept_x, kept_y, kept, replaced = [], [], 0, 0
    for _ in range(rounds):
        x, y = task.batch(batch_size, generator)
        rows = sequence_symbols(x, task.symbols).tolist()
        fresh = torch.tensor([tuple(row) not in seen for row in rows])  # (batch_size,)
        needed = batch_size - kept
        position = torch.nonzero(fresh).flatten()[:needed]  # the first fresh draws
        if len(position) == needed:  # stop at the last draw kept
            replaced += int((~fresh[: int(position[-1]) + 1]).sum())
        else:
            replaced += int((~fresh).sum())
        kept_x.append(x[position])
        kept_y.append(y[position])
        kept += len(position)
        if kept == batch_size:
            return torch.cat(kept_x), torch.cat(kept_y), replaced
    raise ValueError(
        f"{rounds} batches of {batch_size} gave only {kept} sequences outside the "
        f"{len(seen)} seen: the task has only {task.symbols}^{task.length + 1} "
        "distinct sequences"
    )


def train_memory_task(
    kind: Kind,
    length: NonNegativeInt,
    steps: PositiveInt = 300,
    hidden_size: PositiveInt = 32,
    batch_size: PositiveInt = 64,
    lr: NonNegative = 3e-3,
    keep_bias: Finite = 0.0,
    symbols: PositiveInt = 4,
    test_size: PositiveInt = 1000,
    seed: NonNegativeInt = 0,
) -> MemoryRun:
    """Train a :class:`MemoryClassifier` on fresh batches of a :class:`MemoryTask`, then
    test it on ``test_size`` sequences none of which occurs in training.

    Adam, cross-entropy on the answer at the recall step, gradients clipped to global
    norm 1. Every step draws a new batch, so the model cannot memorise a training set;
    a test draw that repeats a training sequence is replaced (:func:`unseen_batch`).
    The model is initialised from ``seed``, the batches from ``seed + 1``, the test
    from ``seed + 2``; the caller's random state stays.
    """
    task = MemoryTask(length, symbols)
    with torch.random.fork_rng():  # a seeded initialisation; the caller's state stays
        torch.manual_seed(seed)
        model = MemoryClassifier(kind, task.input_size, hidden_size, symbols, keep_bias)
    untrained = copy.deepcopy(model)  # draws no random numbers
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed + 1)
    losses, trained_on = [], []
    for _ in range(steps):
        # x: (batch_size, length + 2, symbols + 2)
        x, y = task.batch(batch_size, generator)
        trained_on.append(sequence_symbols(x, symbols))
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    train_symbols = torch.cat(trained_on)  # (steps * batch_size, length + 1)
    seen = set(map(tuple, train_symbols.tolist()))
    test = torch.Generator().manual_seed(seed + 2)
    x, y, replaced = unseen_batch(task, test_size, test, seen)
    test_symbols = sequence_symbols(x, symbols)  # (test_size, length + 1)
    if not seen.isdisjoint(map(tuple, test_symbols.tolist())):
        raise AssertionError("a test sequence occurs in training")
    with torch.no_grad():
        accuracy = float((model(x).argmax(dim=1) == y).float().mean())
    return MemoryRun(
        kind,
        length,
        accuracy,
        losses,
        model,
        untrained,
        train_symbols,
        test_symbols,
        replaced,
    )
