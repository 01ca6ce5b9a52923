"""Training machinery several chapters share: a log and one training step.

Nothing here belongs to one model. :class:`TrainingLog` is what a training loop
measured (chapters 5, 10 and 12); :func:`train_step` is the inner step of every
language-model trainer (chapters 3 and 6): cross-entropy, back-propagation,
optional clipping, one optimiser step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int64
from torch import Tensor, nn

from lib.checked import AnyInt, Number

__all__ = ["TrainingLog", "train_step"]


@dataclass
class TrainingLog:
    """What a training loop measured: the mean loss and the wall time of each epoch."""

    losses: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def train_step(
    optimizer: torch.optim.Optimizer,
    logits: Float[Tensor, "B *positions V"],
    targets: Int64[Tensor, "B *positions"],
    ignore_index: AnyInt = -100,
    clip: Optional[Callable[[list[Tensor]], object]] = None,
) -> Number:
    """One optimiser step on the mean cross-entropy of the targets that are not
    ``ignore_index``; ``clip`` may rescale the gradients first (chapter 3 passes
    :func:`lib.part2_recurrent.rnn.clip_grad_norm`). Returns the loss before the
    step."""
    vocab_size = logits.shape[-1]
    kept = targets[targets != ignore_index]
    if kept.numel() and (kept.min() < 0 or kept.max() >= vocab_size):
        raise ValueError(
            f"targets must hold ids in [0, {vocab_size}) or ignore_index "
            f"({ignore_index}); found ids from {int(kept.min())} to {int(kept.max())}"
        )
    loss = F.cross_entropy(
        logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index
    )
    optimizer.zero_grad()
    loss.backward()
    if clip is not None:
        clip([p for group in optimizer.param_groups for p in group["params"]])
    optimizer.step()
    return loss.item()
