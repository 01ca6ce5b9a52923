"""Training machinery shared by several chapters: padded sequence pairs, a log, one training loop.

Nothing here belongs to one model. :class:`SequencePairs` holds the padded
source and target sequences of any sequence-to-sequence task (the tasks of
:mod:`lib.tasks` produce them); :func:`train_seq2seq` trains any model that
maps ``(src, tgt_in, src_lens)`` to next-token logits, as chapter 10's
:class:`lib.seq2seq.Seq2Seq` and chapter 11's
:class:`lib.transformer.Seq2SeqTransformer` do, with teacher forcing (Williams
and Zipser, 1989), Adam (Kingma and Ba, 2015) and cross-entropy;
:class:`TrainingLog` is what a training loop measured, here and in chapters 5
and 12; :func:`train_step` is the inner step of every language-model trainer
(chapters 3 and 6): cross-entropy, back-propagation, optional clipping, one
optimiser step.

Conventions: batch-first tensors. ``N`` pairs, ``S`` source and ``T`` target
positions, ``V`` the target vocabulary.

References
----------
.. [1] R. J. Williams, D. Zipser. "A Learning Algorithm for Continually Running
   Fully Recurrent Neural Networks". Neural Computation 1(2), 1989.
.. [2] D. P. Kingma, J. Ba. "Adam: A Method for Stochastic Optimization".
   ICLR 2015. arXiv:1412.6980.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.validation import require_callable, require_float_tensor, require_instance, require_int

__all__ = ["SequencePairs", "TrainingLog", "train_seq2seq", "train_step"]


@dataclass(frozen=True)
class SequencePairs:
    """Padded source and target sequences of a sequence-to-sequence task.

    Shapes
    ------
    src : (N, S) source tokens, padded with ``pad``
    src_lens : (N,) number of real source tokens
    tgt_in : (N, T) decoder input: ``bos`` then the target (teacher forcing)
    tgt_out : (N, T) what the decoder must predict: the target then ``eos``
    """

    src: Tensor
    src_lens: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def __len__(self) -> int:
        return self.src.shape[0]

    def __getitem__(self, index) -> "SequencePairs":
        return SequencePairs(self.src[index], self.src_lens[index], self.tgt_in[index], self.tgt_out[index])


@dataclass
class TrainingLog:
    """What a training loop measured: the mean loss and the wall time of each epoch."""

    losses: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def train_seq2seq(
    model: nn.Module,
    data: SequencePairs,
    epochs: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    pad: int = 0,
    seed: int = 0,
) -> TrainingLog:
    """Train a sequence-to-sequence model with teacher forcing, Adam and cross-entropy.

    Each epoch visits the training pairs once in a seeded random order. The
    loss ignores padded target positions.

    Parameters
    ----------
    model : nn.Module
        ``model(src, tgt_in, src_lens)`` returns logits ``(B, T, V)``, as
        :class:`lib.seq2seq.Seq2Seq` and :class:`lib.transformer.Seq2SeqTransformer` do.
    data : SequencePairs
    epochs : int
    batch_size : int, default 64
    lr : float, default 3e-3
    pad : int, default 0
        Padding id of the targets.
    seed : int, default 0
        Seed of the order of the examples.

    Returns
    -------
    TrainingLog
        Mean loss per epoch and seconds per epoch.

    Shapes
    ------
    data.src : (N, S); data.tgt_in, data.tgt_out : (N, T)
    """
    require_instance("model", model, nn.Module), require_instance("data", data, SequencePairs), require_int(
        "epochs", epochs), require_int("batch_size", batch_size)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    log = TrainingLog()
    model.train()
    for _ in range(epochs):
        start, total, count = time.perf_counter(), 0.0, 0
        order = torch.randperm(len(data), generator=generator)
        for first in range(0, len(data), batch_size):
            batch = data[order[first : first + batch_size]]
            logits = model(batch.src, batch.tgt_in, batch.src_lens)  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=pad)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total, count = total + loss.item() * len(batch), count + len(batch)
        log.seconds.append(time.perf_counter() - start)
        log.losses.append(total / count)
    model.eval()
    return log


def _check_step(optimizer: object, logits: object, targets: object, ignore_index: object, clip: object) -> None:
    require_instance("optimizer", optimizer, torch.optim.Optimizer), require_float_tensor("logits", logits)
    if logits.dim() < 2:
        raise ValueError(f"logits must have shape (..., V) with at least 2 axes; found shape {tuple(logits.shape)}")
    if not isinstance(targets, Tensor) or targets.dtype != torch.long or targets.shape != logits.shape[:-1]:
        found = (f"{targets.dtype} of shape {tuple(targets.shape)}" if isinstance(targets, Tensor)
                 else type(targets).__name__)
        raise TypeError(f"targets must be a LongTensor of shape {tuple(logits.shape[:-1])} (logits without "
                        f"their last axis); found {found}")
    require_int("ignore_index", ignore_index, minimum=-(2**63))
    if clip is not None:
        require_callable("clip", clip)


def train_step(optimizer: torch.optim.Optimizer, logits: Tensor, targets: Tensor, ignore_index: int = -100,
               clip: Optional[Callable[[list[Tensor]], object]] = None) -> float:
    """One optimiser step on the mean next-token cross-entropy: the inner step of a language-model trainer.

    Takes the mean cross-entropy over every position whose target is not
    ``ignore_index``, clears the old gradients, back-propagates, lets ``clip``
    rescale the gradients of the optimiser's parameters (chapter 3 passes
    :func:`lib.rnn.clip_grad_norm` with its threshold) and takes one step.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        Updates the parameters that ``logits`` depend on.
    logits : Tensor
        The model's scores, still attached to its graph.
    targets : LongTensor
    ignore_index : int, default -100
        Target value of positions that are not scored (padding).
    clip : callable, optional
        Called with the list of the optimiser's parameters after the backward pass.

    Returns
    -------
    float
        The loss (nats per scored token) before the step.

    Shapes
    ------
    logits : (..., V)
    targets : (...) , the shape of ``logits`` without its last axis
    """
    _check_step(optimizer, logits, targets, ignore_index, clip)
    loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
    optimizer.zero_grad()
    loss.backward()
    if clip is not None:
        clip([p for group in optimizer.param_groups for p in group["params"]])
    optimizer.step()
    return loss.item()
