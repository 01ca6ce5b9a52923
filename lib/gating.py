"""Chapter 4's experiment: how far back plain and gated recurrent layers remember.

A recurrent layer read at its last step by a linear classifier
(:class:`MemoryClassifier`) is trained on fresh batches of
:class:`lib.tasks.recall.MemoryTask` (:func:`train_memory_task`). A plain RNN
fails once the gap is long; a GRU (Cho et al., 2014) or an LSTM (Hochreiter and
Schmidhuber, 1997) whose keep gate starts open, as Jozefowicz et al. (2015)
recommend for the forget gate, carries the symbol across it.

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

from dataclasses import dataclass, field
from typing import Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.rnn import GATES, GRU, LSTM, RNN, clip_grad_norm
from lib.tasks.recall import MemoryTask
from lib.validation import require_choice, require_float_tensor, require_instance, require_int, require_real

__all__ = ["MemoryClassifier", "MemoryRun", "sequence_symbols", "train_memory_task", "unseen_batch"]


def _check_classifier(kind: object, keep_bias: object) -> None:
    require_choice("kind", kind, tuple(GATES)), require_real("keep_bias", keep_bias)
    if kind == "rnn" and keep_bias != 0:
        raise ValueError(f"a plain RNN has no gate: expected keep_bias = 0; found {keep_bias}")


class MemoryClassifier(nn.Module):
    """A recurrent layer read at its last step by a linear classifier.

    The recurrent layer is PyTorch's (fast, for training); the tests show that
    the lib layers compute the same function, and :meth:`lib_layer` returns one.

    Parameters
    ----------
    kind : {"rnn", "gru", "lstm"}
    input_size, hidden_size, classes : int
    keep_bias : float
        Initial bias of the gate that keeps the state: the LSTM's forget gate,
        the GRU's update gate ``z`` (0 for the plain RNN, which has no gate).
        A large value starts the gated network with a long memory.

    Shapes
    ------
    x : (B, T, input_size)
    output : (B, classes) logits
    """

    def __init__(self, kind: str, input_size: int, hidden_size: int, classes: int, keep_bias: float = 0.0):
        _check_classifier(kind, keep_bias)
        super().__init__()
        self.kind = kind
        self.recurrent = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[kind](input_size, hidden_size,
                                                                                batch_first=True)
        self.output = nn.Linear(hidden_size, classes)
        if kind != "rnn":
            # The keep gate is the second block of rows in both layouts: GRU (r, z, n), LSTM (i, f, g, o).
            with torch.no_grad():
                self.recurrent.bias_ih_l0[hidden_size: 2 * hidden_size] = keep_bias
                self.recurrent.bias_hh_l0[hidden_size: 2 * hidden_size] = 0.0

    def forward(self, x: Tensor) -> Tensor:
        hidden, _ = self.recurrent(x)  # (B, T, H)
        return self.output(hidden[:, -1])  # (B, classes)

    def lib_layer(self) -> Union[RNN, GRU, LSTM]:
        """The recurrent layer as a lib layer (same weights, same function)."""
        return {"rnn": RNN, "gru": GRU, "lstm": LSTM}[self.kind].from_torch(self.recurrent)


@dataclass
class MemoryRun:
    """The outcome of :func:`train_memory_task`.

    ``train_symbols`` and ``test_symbols`` hold the symbols of every training and
    test sequence (the stored one, then the distractors), one row each; no row of
    the second occurs in the first. ``replaced`` counts the test draws that were
    training sequences and were drawn again.
    """

    kind: str
    length: int
    accuracy: float  # on test sequences none of which occurs in training
    losses: list[float] = field(repr=False)
    model: MemoryClassifier = field(repr=False)
    train_symbols: Tensor = field(repr=False)  # (steps * batch_size, length + 1)
    test_symbols: Tensor = field(repr=False)  # (test_size, length + 1)
    replaced: int = 0


def sequence_symbols(x: Tensor, symbols: int) -> Tensor:
    """The symbols of a batch of :class:`MemoryTask` sequences, without the recall step.

    Shapes
    ------
    x : (B, T + 2, symbols + 2); output : (B, T + 1), int8
    """
    require_float_tensor("x", x), require_int("symbols", symbols)
    if x.dim() != 3 or x.shape[-1] != symbols + 2:
        raise ValueError(f"x must have shape (B, T + 2, symbols + 2) = (B, T + 2, {symbols + 2}); "
                         f"found {tuple(x.shape)}")
    return x[:, :-1, :symbols].argmax(dim=-1).to(torch.int8)


def unseen_batch(task: MemoryTask, batch_size: int, generator: torch.Generator, seen: set,
                 rounds: int = 100) -> tuple[Tensor, Tensor, int]:
    """``batch_size`` sequences of ``task`` none of which is in ``seen``.

    Draws batches of ``batch_size`` from ``generator`` and keeps, in order, the
    sequences whose symbols (a tuple, as :func:`sequence_symbols` gives them) are
    not in ``seen``, until it has ``batch_size`` of them.

    Returns
    -------
    x, y : the batch, as :meth:`MemoryTask.batch` returns it
    replaced : int
        How many draws before the last one kept were in ``seen``.

    Raises
    ------
    ValueError
        If ``rounds`` batches do not give enough unseen sequences: the task has too
        few distinct sequences next to ``seen``.
    """
    require_instance("task", task, MemoryTask), require_instance("generator", generator, torch.Generator)
    require_instance("seen", seen, set), require_int("batch_size", batch_size), require_int("rounds", rounds)
    kept_x, kept_y, kept, replaced = [], [], 0, 0
    for _ in range(rounds):
        x, y = task.batch(batch_size, generator)
        fresh = torch.tensor([tuple(row) not in seen for row in sequence_symbols(x, task.symbols).tolist()])
        needed = batch_size - kept
        position = torch.nonzero(fresh).flatten()[:needed]  # the first fresh draws, in order
        if len(position) == needed:  # stop at the last draw kept
            replaced += int((~fresh[: int(position[-1]) + 1]).sum())
        else:
            replaced += int((~fresh).sum())
        kept_x.append(x[position]), kept_y.append(y[position])
        kept += len(position)
        if kept == batch_size:
            return torch.cat(kept_x), torch.cat(kept_y), replaced
    raise ValueError(f"{rounds} batches of {batch_size} gave only {kept} sequences outside the {len(seen)} seen: "
                     f"the task has only {task.symbols}^{task.length + 1} distinct sequences")


def train_memory_task(kind: str, length: int, steps: int = 300, hidden_size: int = 32, batch_size: int = 64,
                      lr: float = 3e-3, keep_bias: float = 0.0, symbols: int = 4, test_size: int = 1000,
                      seed: int = 0) -> MemoryRun:
    """Train a :class:`MemoryClassifier` on fresh batches of a :class:`MemoryTask`, then test it.

    Adam, cross-entropy on the answer at the recall step, gradients clipped to
    global norm 1. Every step draws a new batch, so the model cannot memorise
    a training set. The accuracy is measured on ``test_size`` sequences none of
    which occurs in training: a test draw that repeats a training sequence is
    replaced by a fresh one (:func:`unseen_batch`), and the two sets are checked
    disjoint before the run is returned.

    Raises
    ------
    ValueError
        If the task has too few distinct sequences for a test set disjoint from
        the training sequences.

    Returns
    -------
    MemoryRun

    Shapes
    ------
    Training batches : (batch_size, length + 2, symbols + 2)
    """
    require_int("steps", steps), require_int("seed", seed, 0)
    task = MemoryTask(length, symbols)
    with torch.random.fork_rng():  # a seeded initialisation that leaves the caller's random state alone
        torch.manual_seed(seed)
        model = MemoryClassifier(kind, task.input_size, hidden_size, symbols, keep_bias)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed + 1)
    losses, trained_on = [], []
    for _ in range(steps):
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
    x, y, replaced = unseen_batch(task, test_size, torch.Generator().manual_seed(seed + 2), seen)
    test_symbols = sequence_symbols(x, symbols)  # (test_size, length + 1)
    if not seen.isdisjoint(map(tuple, test_symbols.tolist())):
        raise AssertionError("a test sequence occurs in training")
    with torch.no_grad():
        accuracy = float((model(x).argmax(dim=1) == y).float().mean())
    return MemoryRun(kind, length, accuracy, losses, model, train_symbols, test_symbols, replaced)
