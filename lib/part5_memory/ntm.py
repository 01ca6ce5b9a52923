"""The Neural Turing Machine: soft addressing, reading and writing, and the copy task.

Syllabus MEM2, MEM4. A Neural Turing Machine (Graves et al., 2014) is a controller
network coupled to a memory matrix ``M`` of ``N`` slots of size ``D``, in the
roles of a Turing machine's finite control and tape. Its heads never pick *one*
slot: each step they compute a *weighting* ``w`` (``N`` non-negative numbers
summing to 1) and read or write every slot in proportion to it, so the whole
machine is differentiable. The weighting is built in four stages (the paper's
equations 5-9, functions of this module in brackets):

1. content (:func:`content_weights`): ``w^c = softmax(beta * K(k, M_i))`` with the
   cosine similarity ``K`` and a key strength ``beta > 0``. This is chapter 9's
   attention: a :class:`CosineScore` and
   :func:`lib.part4_attention.attention.masked_softmax` at temperature ``1 / beta``;
2. interpolation (:func:`interpolate`): ``w^g = g w^c + (1 - g) w_{t-1}``: the gate
   ``g`` chooses between a fresh content lookup and the previous weighting;
3. shift (:func:`circular_shift`): ``w~_i = sum_j w^g_j s_{(i - j) mod N}``, a
   circular convolution with a distribution ``s`` over the offsets ``-1, 0, +1``
   that moves the focus to the neighbouring slots;
4. sharpening (:func:`sharpen`): ``w_i = w~_i^gamma / sum_j w~_j^gamma`` with
   ``gamma >= 1``, which undoes the blur of the shift.

A head then reads ``r = sum_i w_i M_i`` (:func:`read`, eq. 2) or writes with an
erase vector ``e`` in ``[0, 1]^D`` and an add vector ``a`` (:func:`write`, eqs. 3-4):
``M_i <- M_i * (1 - w_i e) + w_i a``.

:class:`NTM` puts the pieces together with an LSTM controller
(:class:`lib.part2_recurrent.rnn.LSTMCell`), one write head and one read head, and
:func:`train_copy` trains it on the copy task of the paper.
The model chapter 12 loads is trained with it by ``python -m experiments.ch12_memory
train-ntm``, which takes a few minutes on a CPU.

Conventions: the memory is batch-first ``(B, N, D)``, one slot per row (the lecture
notes store slots as columns, ``M in R^{D x N}``); weightings are ``(B, N)``.

References
----------
.. [1] A. Graves, G. Wayne, I. Danihelka. "Neural Turing Machines".
   arXiv:1410.5401, 2014.
.. [2] M. Collier, J. Beel. "Implementing Neural Turing Machines". ICANN 2018.
   arXiv:1807.08518.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn

from lib.part4_attention.attention import masked_softmax
from lib.checked import (
    NonNegative,
    NonNegativeInt,
    Positive,
    PositiveInt,
    each,
    same_dtype,
)
from lib.part2_recurrent.rnn import LSTMCell, clip_grad_norm

__all__ = [
    "CopyRun",
    "CosineScore",
    "HeadParameters",
    "NTM",
    "NTMConfig",
    "address",
    "circular_shift",
    "content_weights",
    "copy_batch",
    "interpolate",
    "read",
    "sharpen",
    "train_copy",
    "write",
]

# ---------------------------------------------------------------------------
# Addressing: content, interpolation, shift, sharpening (Graves et al., eqs. 5-9).
# ---------------------------------------------------------------------------


class CosineScore(nn.Module):
    r"""Cosine similarity as an attention score, :math:`K(\mathbf{u}, \mathbf{v}) =
    \mathbf{u} \cdot \mathbf{v} / (\lVert\mathbf{u}\rVert \lVert\mathbf{v}\rVert)`,
    with the interface of :mod:`lib.part4_attention.attention`'s scores.

    Unlike the dot product it ignores the lengths of the vectors: a key matches a slot
    by direction only, and the key strength decides how sharp the match is. A zero
    vector has similarity 0 with everything (norms are clamped at ``eps``).
    """

    def __init__(self, eps: NonNegative = 1e-8):
        super().__init__()
        self.eps = eps

    def forward(
        self, queries: Float[Tensor, "B T D"], keys: Float[Tensor, "B S D"]
    ) -> Float[Tensor, "B T S"]:
        same_dtype(queries=queries, keys=keys)
        unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(self.eps)
        unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(self.eps)
        return unit_queries @ unit_keys.transpose(1, 2)  # (B, T, S)


def content_weights(
    memory: Float[Tensor, "B N D"],
    key: Float[Tensor, "B D"],
    strength: Float[Tensor, "B"],
) -> Float[Tensor, "B N"]:
    r"""Content addressing (eq. 5), :math:`w^c_i = \mathrm{softmax}_i(\beta\,
    K(\mathbf{k}, \mathbf{M}_i))`: a key strength ``beta`` near 0 weighs every slot
    alike, a large one concentrates the weight on the most similar slot."""
    same_dtype(memory=memory, key=key, strength=strength)
    if not bool(((strength >= 0) & (strength < math.inf)).all()):  # NaN fails >= 0
        wrong = ~(strength.isfinite() & (strength >= 0))  # (B,)
        raise ValueError(
            f"strength must be >= 0 and finite; found {strength[wrong][0].item():.4g}"
        )
    similarity = CosineScore()(key.unsqueeze(1), memory)  # (B, 1, N)
    return masked_softmax(strength[:, None, None] * similarity).squeeze(1)  # (B, N)


def interpolate(
    content: Float[Tensor, "B N"],
    previous: Float[Tensor, "B N"],
    gate: Float[Tensor, "B"],
) -> Float[Tensor, "B N"]:
    r"""Interpolation (eq. 7), :math:`\mathbf{w}^g = g\,\mathbf{w}^c + (1 - g)\,
    \mathbf{w}_{t-1}`: a gate of 1 uses the content lookup, 0 keeps the previous
    focus."""
    same_dtype(content=content, previous=previous, gate=gate)
    gate = gate.unsqueeze(1)  # (B, 1)
    return gate * content + (1 - gate) * previous


def circular_shift(
    weights: Float[Tensor, "B N"], shift: Float[Tensor, "B S"]
) -> Float[Tensor, "B N"]:
    r"""Rotation by a soft shift (eq. 8), :math:`\tilde w_i = \sum_j w_j\,
    s_{(i - j) \bmod N}`, with ``shift`` a distribution over the ``S = 2k + 1``
    offsets ``-k, ..., 0, ..., +k``. Offset ``+1`` moves the weight of slot ``i`` to
    slot ``i + 1``, and the last slot wraps around to the first."""
    same_dtype(weights=weights, shift=shift)
    if shift.shape[1] % 2 == 0:
        raise ValueError(
            "shift must have shape (B, 2k + 1), an odd number of offsets; "
            f"found {tuple(shift.shape)}"
        )
    reach = shift.shape[1] // 2
    # roll(w, o)[i] = w[i - o]: the weight that offset o brings to slot i.
    offsets = range(-reach, reach + 1)
    rolled = torch.stack([weights.roll(o, dims=1) for o in offsets], dim=1)  # (B, S, N)
    return (shift.unsqueeze(2) * rolled).sum(dim=1)  # (B, N)


def sharpen(
    weights: Float[Tensor, "B N"], gamma: Float[Tensor, "B"]
) -> Float[Tensor, "B N"]:
    r"""Sharpening (eq. 9), :math:`w_i = \tilde w_i^{\gamma} / \sum_j \tilde
    w_j^{\gamma}` with :math:`\gamma \ge 1`; 1 leaves the weights unchanged."""
    same_dtype(weights=weights, gamma=gamma)
    if not bool(((gamma >= 1) & (gamma < math.inf)).all()):  # NaN fails >= 1
        wrong = ~(gamma.isfinite() & (gamma >= 1))  # (B,)
        raise ValueError(
            f"gamma must be >= 1 and finite; found {gamma[wrong][0].item():.4g}"
        )
    # Clamping at the smallest positive float keeps d(w^gamma)/d(gamma) = w^gamma log w
    # finite at w = 0.
    tiny = torch.finfo(weights.dtype).tiny
    powered = weights.clamp_min(tiny) ** gamma.unsqueeze(1)  # (B, N)
    return powered / powered.sum(dim=1, keepdim=True)


@dataclass
class HeadParameters:
    """What the controller emits for one head at one step (``erase`` and ``add``: the
    write head's only)."""

    key: Float[Tensor, "B D"]
    strength: Float[Tensor, "B"]
    gate: Float[Tensor, "B"]
    shift: Float[Tensor, "B S"]
    gamma: Float[Tensor, "B"]
    erase: Optional[Float[Tensor, "B D"]] = None
    add: Optional[Float[Tensor, "B D"]] = None


def address(
    memory: Float[Tensor, "B N D"], previous: Float[Tensor, "B N"], head: HeadParameters
) -> Float[Tensor, "B N"]:
    """The full addressing pipeline (eqs. 5-9): content, interpolation, shift,
    sharpening."""
    content = content_weights(memory, head.key, head.strength)  # (B, N)
    gated = interpolate(content, previous, head.gate)  # (B, N)
    return sharpen(circular_shift(gated, head.shift), head.gamma)  # (B, N)


# ---------------------------------------------------------------------------
# Reading and writing (eqs. 2-4).
# ---------------------------------------------------------------------------


def read(
    memory: Float[Tensor, "B N D"], weights: Float[Tensor, "B N"]
) -> Float[Tensor, "B D"]:
    r"""Read (eq. 2), :math:`\mathbf{r} = \sum_i w_i \mathbf{M}_i`: the weighted
    average of the slots."""
    same_dtype(memory=memory, weights=weights)
    # (B, 1, N) @ (B, N, D) -> (B, 1, D) -> (B, D)
    return (weights.unsqueeze(1) @ memory).squeeze(1)


def write(
    memory: Float[Tensor, "B N D"],
    weights: Float[Tensor, "B N"],
    erase: Float[Tensor, "B D"],
    add: Float[Tensor, "B D"],
) -> Float[Tensor, "B N D"]:
    r"""Write (eqs. 3-4), :math:`\mathbf{M}_i \leftarrow \mathbf{M}_i \odot
    (\mathbf{1} - w_i \mathbf{e}) + w_i \mathbf{a}`, into a new memory: a slot with
    weight 1 and ``erase = 1`` then holds exactly ``add``, one with weight 0 is
    untouched."""
    same_dtype(memory=memory, weights=weights, erase=erase, add=add)
    w = weights.unsqueeze(2)  # (B, N, 1)
    # w_i e is the share of slot i to forget.
    erased = memory * (1 - w * erase.unsqueeze(1))  # (B, N, D)
    return erased + w * add.unsqueeze(1)  # (B, N, D)


# ---------------------------------------------------------------------------
# The machine: an LSTM controller with one write head and one read head.
# ---------------------------------------------------------------------------


@dataclass
class NTMConfig:
    """Sizes of an :class:`NTM` (defaults: the copy task with 6-bit vectors)."""

    input_size: PositiveInt = 7  # 6 bits + the end-of-sequence flag
    output_size: PositiveInt = 6
    controller_size: PositiveInt = 64
    slots: PositiveInt = 24  # N
    slot_size: PositiveInt = 12  # D
    shift_reach: PositiveInt = 1  # offsets -1, 0, +1


class NTM(nn.Module):
    """A Neural Turing Machine with an LSTM controller, a write head and a read head.

    At step ``t`` the controller reads ``x_t`` and the previous read vector
    ``r_{t-1}``; from its state ``h_t`` two linear layers emit the heads' parameters.
    The write head addresses and writes the memory, the read head addresses the new
    memory and reads ``r_t``, and the output (logits) is a linear function of ``r_t``
    alone: whatever the network recalls must have been written and read back, which
    makes the copy task train in minutes on a CPU (from ``[h_t; r_t]``, as in the
    paper, a small LSTM memorises short sequences by itself and stalls there). The
    memory starts as ``1e-6`` in every slot (Collier and Beel, 2018), and both heads
    on slot 0, so that shifting moves them along the slots.
    """

    def __init__(self, config: NTMConfig = NTMConfig()):
        super().__init__()
        self.config = config
        size, offsets = config.slot_size, 2 * config.shift_reach + 1
        self.controller = LSTMCell(config.input_size + size, config.controller_size)
        # key, strength, gate, gamma, shift (+ erase, add for the writer)
        self.read_params = nn.Linear(config.controller_size, size + 3 + offsets)
        self.write_params = nn.Linear(config.controller_size, 3 * size + 3 + offsets)
        self.output = nn.Linear(size, config.output_size)

    def _head(self, raw: Float[Tensor, "B P"], writer: bool) -> HeadParameters:
        """Squash the controller's raw outputs into the ranges the addressing needs."""
        size, offsets = self.config.slot_size, 2 * self.config.shift_reach + 1
        sizes = [size, 1, 1, 1, offsets] + ([size, size] if writer else [])
        key, strength, gate, gamma, shift, *rest = raw.split(sizes, dim=1)
        head = HeadParameters(
            key=torch.tanh(key),
            strength=F.softplus(strength.squeeze(1)),  # beta > 0
            gate=torch.sigmoid(gate.squeeze(1)),  # g in (0, 1)
            shift=torch.softmax(shift, dim=1),  # a distribution over the offsets
            gamma=1 + F.softplus(gamma.squeeze(1)),  # gamma >= 1
        )
        if writer:
            erase, add = rest  # (B, D) each
            head.erase, head.add = torch.sigmoid(erase), torch.tanh(add)
        return head

    def initial_memory(
        self, batch: NonNegativeInt, like: Float[Tensor, "..."]
    ) -> Float[Tensor, "B N D"]:
        """The memory every sequence starts from: ``1e-6`` everywhere."""
        return like.new_full((batch, self.config.slots, self.config.slot_size), 1e-6)

    def forward(
        self, inputs: Float[Tensor, "B T I"], trace: bool = False
    ) -> Float[Tensor, "B T O"] | tuple[Float[Tensor, "B T O"], dict[str, Tensor]]:
        """The logits of every step; with ``trace``, also a record of what the heads
        did: ``read``, ``write`` (their weightings, ``(B, T, N)``), ``memory`` (after
        every step, ``(B, T, N, D)``), ``erase`` and ``add`` (``(B, T, D)``)."""
        batch, steps, width = inputs.shape
        if width != self.config.input_size or steps == 0:
            raise ValueError(
                "inputs must have shape (B, T, input_size) with T >= 1 and "
                f"input_size = {self.config.input_size}; found {tuple(inputs.shape)}"
            )
        memory = self.initial_memory(batch, inputs)  # (B, N, D)
        state = self.controller.zero_state(batch, inputs)
        slot_0 = torch.zeros(batch, dtype=torch.long)
        focus = F.one_hot(slot_0, self.config.slots).to(inputs.dtype)  # (B, N)
        read_weights, write_weights = focus, focus
        reading = inputs.new_zeros(batch, self.config.slot_size)  # r_0 (B, D)
        names = ("read", "write", "memory", "erase", "add")
        logits, record = [], {name: [] for name in names}
        for t in range(steps):
            state = self.controller(torch.cat([inputs[:, t], reading], dim=1), state)
            hidden = state[0]  # (B, H)
            writer = self._head(self.write_params(hidden), writer=True)
            write_weights = address(memory, write_weights, writer)  # (B, N)
            memory = write(memory, write_weights, writer.erase, writer.add)  # (B, N, D)
            reader = self._head(self.read_params(hidden), writer=False)
            read_weights = address(memory, read_weights, reader)  # (B, N)
            reading = read(memory, read_weights)  # (B, D)
            logits.append(self.output(reading))  # (B, O): the answer comes from memory
            if trace:
                values = (read_weights, write_weights, memory, writer.erase, writer.add)
                for name, value in zip(names, values):
                    record[name].append(value.detach())
        logits = torch.stack(logits, dim=1)  # (B, T, O)
        if trace:
            return logits, {name: torch.stack(v, dim=1) for name, v in record.items()}
        return logits


# ---------------------------------------------------------------------------
# The copy task (Graves et al., section 4.1).
# ---------------------------------------------------------------------------


def copy_batch(
    batch: PositiveInt,
    length: PositiveInt,
    bits: PositiveInt,
    generator: Optional[torch.Generator] = None,
) -> tuple[Float[Tensor, "B T I"], Float[Tensor, "B T O"], Bool[Tensor, "T"]]:
    """A batch of the copy task: read ``length`` random bit vectors, then write them
    back. The ``T = 2 length + 1`` input steps hold the vectors, then a flag on an
    extra channel (the end of the sequence), then zeros while the machine answers;
    the targets hold the vectors again at the answer steps, where ``answer`` is True
    (and the loss counts)."""
    steps = 2 * length + 1
    sequence = torch.randint(0, 2, (batch, length, bits), generator=generator).float()
    inputs = torch.zeros(batch, steps, bits + 1)
    inputs[:, :length, :bits] = sequence
    inputs[:, length, bits] = 1.0  # end-of-sequence flag
    targets = torch.zeros(batch, steps, bits)
    targets[:, length + 1 :] = sequence
    answer = torch.arange(steps) > length  # (T,)
    return inputs, targets, answer


@dataclass
class CopyRun:
    """What :func:`train_copy` measured: the loss (bits per vector) every ``report``
    steps."""

    steps: each(NonNegativeInt) = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_copy(
    model: NTM,
    steps: NonNegativeInt,
    min_length: PositiveInt = 1,
    max_length: PositiveInt = 10,
    batch: PositiveInt = 32,
    lr: Positive = 3e-3,
    seed: NonNegativeInt = 0,
    report: PositiveInt = 100,
    log: Optional[Callable[[str], object]] = None,
) -> CopyRun:
    """Train ``model`` on the copy task with Adam, the gradient clipped at a global
    norm of 10. Each step draws a batch of one length, uniform in ``[min_length,
    max_length]``; the loss is the binary cross-entropy of the answer steps. Returns
    its mean in bits per vector over each block of ``report`` steps."""
    if min_length > max_length:
        raise ValueError(
            f"max_length must be >= min_length = {min_length}; found {max_length}"
        )
    generator = torch.Generator().manual_seed(seed)
    bits = model.config.output_size
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    run, block, start = CopyRun(), [], time.perf_counter()
    for step in range(1, steps + 1):
        draw = torch.randint(min_length, max_length + 1, (1,), generator=generator)
        inputs, targets, answer = copy_batch(batch, int(draw), bits, generator)
        logits = model(inputs)
        loss = F.binary_cross_entropy_with_logits(logits[:, answer], targets[:, answer])
        optimiser.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), 10.0)
        optimiser.step()
        block.append(loss.item() * bits / 0.6931471805599453)  # nats/bit -> bits/vector
        if step % report == 0 or step == steps:
            run.steps.append(step)
            run.losses.append(sum(block) / len(block))
            block = []
            if log is not None:
                loss, seconds = run.losses[-1], time.perf_counter() - start
                log(f"step {step}: {loss:.4f} bits per vector, {seconds:.0f} s")
    run.seconds = time.perf_counter() - start
    return run
