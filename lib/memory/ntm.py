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
   attention: a :class:`CosineScore` and :func:`lib.attention.masked_softmax`
   at temperature ``1 / beta``;
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
(:class:`lib.rnn.LSTMCell`), one write head and one read head, and
:func:`train_copy` trains it on the copy task of the paper.
``python -m lib.memory train-ntm`` trains the model that chapter 12 loads
(:func:`load_copy_model`), which takes a few minutes on a CPU.

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

import argparse
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.attention import masked_softmax
from lib.rnn import LSTMCell, clip_grad_norm
from lib.validation import require_instance, require_number, require_same_dtype

__all__ = [
    "CopyRun",
    "CosineScore",
    "HeadParameters",
    "NTM",
    "NTMConfig",
    "WEIGHTS_PATH",
    "address",
    "circular_shift",
    "content_weights",
    "copy_batch",
    "interpolate",
    "load_copy_model",
    "read",
    "sharpen",
    "train_copy",
    "write",
]

WEIGHTS_PATH = Path(__file__).with_name("ntm_copy.pt")


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_float(name: str, value: object, layout: str, dim: int) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; found {type(value).__name__}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype (e.g. torch.float32); found {value.dtype}")
    if value.dim() != dim:
        raise ValueError(f"{name} must have shape {layout}; found {tuple(value.shape)}")


def _check_memory_and_weights(memory: object, weights: object, **vectors: object) -> None:
    """``memory`` (B, N, D), ``weights`` (B, N) and each of ``vectors`` (B, D), all of one dtype."""
    _require_float("memory", memory, "(B, N, D)", 3)
    _require_float("weights", weights, "(B, N)", 2)
    require_same_dtype("memory", memory, weights=weights)
    if tuple(weights.shape) != tuple(memory.shape[:2]):
        raise ValueError(
            f"weights must have shape (B, N) = {tuple(memory.shape[:2])} to match memory (B, N, D) = "
            f"{tuple(memory.shape)}; found {tuple(weights.shape)}"
        )
    batch, _, size = memory.shape
    for name, vector in vectors.items():
        _check_vector(name, vector, batch, size, "(B, D)")
    require_same_dtype("memory", memory, **vectors)


def _check_vector(name: str, value: object, batch: int, size: int, layout: str) -> None:
    _require_float(name, value, layout, 2)
    if tuple(value.shape) != (batch, size):
        raise ValueError(f"{name} must have shape {layout} = {(batch, size)}; found {tuple(value.shape)}")


def _check_content(memory: object, key: object, strength: object) -> None:
    _require_float("memory", memory, "(B, N, D)", 3)
    batch, _, size = memory.shape
    _check_vector("key", key, batch, size, "(B, D)")
    _require_float("strength", strength, "(B,)", 1)
    if strength.shape[0] != batch:
        raise ValueError(f"strength must have shape (B,) = ({batch},); found {tuple(strength.shape)}")
    require_same_dtype("memory", memory, key=key, strength=strength)
    if bool((strength < 0).any()):
        raise ValueError(f"strength must be >= 0; found {strength.min().item():.4g}")


def _check_shift(weights: object, shift: object) -> None:
    _require_float("weights", weights, "(B, N)", 2)
    _require_float("shift", shift, "(B, 2k + 1)", 2)
    require_same_dtype("weights", weights, shift=shift)
    if shift.shape[0] != weights.shape[0] or shift.shape[1] % 2 == 0:
        raise ValueError(
            f"shift must have shape (B, 2k + 1) with B = {weights.shape[0]} and an odd number of offsets; "
            f"found {tuple(shift.shape)}"
        )


# ---------------------------------------------------------------------------
# Addressing: content, interpolation, shift, sharpening (Graves et al., eqs. 5-9).
# ---------------------------------------------------------------------------


class CosineScore(nn.Module):
    r"""Cosine similarity as an attention score.

    .. math:: K(\mathbf{u}, \mathbf{v}) = \frac{\mathbf{u} \cdot \mathbf{v}}{\lVert\mathbf{u}\rVert \lVert\mathbf{v}\rVert}

    It has the interface of the scoring functions of :mod:`lib.attention`, so it
    can be passed to :func:`lib.attention.attention`. Unlike the dot product it
    ignores the lengths of the vectors: a key matches a slot by direction only,
    and the key strength decides how sharp the match is. A zero vector has
    similarity 0 with everything (its norm is clamped at ``eps``).

    Parameters
    ----------
    eps : float
        Smallest norm used in the division.

    Shapes
    ------
    queries : (B, T, D)
    keys : (B, S, D)
    output : (B, T, S)
    """

    def __init__(self, eps: float = 1e-8):
        super().__init__()
        require_number("eps", eps, 0.0)
        self.eps = eps

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        _require_float("queries", queries, "(B, T, D)", 3)
        _require_float("keys", keys, "(B, S, D)", 3)
        if keys.shape[0] != queries.shape[0] or keys.shape[2] != queries.shape[2]:
            raise ValueError(
                f"keys must have shape (B, S, D) matching queries (B, T, D) = {tuple(queries.shape)}; "
                f"found {tuple(keys.shape)}"
            )
        unit_queries = queries / queries.norm(dim=-1, keepdim=True).clamp_min(self.eps)  # (B, T, D)
        unit_keys = keys / keys.norm(dim=-1, keepdim=True).clamp_min(self.eps)  # (B, S, D)
        return unit_queries @ unit_keys.transpose(1, 2)  # (B, T, S)


def content_weights(memory: Tensor, key: Tensor, strength: Tensor) -> Tensor:
    r"""Content addressing (eq. 5): :math:`w^c_i = \mathrm{softmax}_i\big(\beta\, K(\mathbf{k}, \mathbf{M}_i)\big)`.

    Parameters
    ----------
    memory : Tensor
        The memory, one slot per row.
    key : Tensor
        What to look for, one key per batch element.
    strength : Tensor
        The key strength ``beta > 0``: near 0 every slot gets the same weight,
        large values concentrate the weight on the most similar slot.

    Returns
    -------
    Tensor
        Weights over the slots; each row sums to 1.

    Shapes
    ------
    memory : (B, N, D)
    key : (B, D)
    strength : (B,)
    output : (B, N)
    """
    _check_content(memory, key, strength)
    similarity = CosineScore()(key.unsqueeze(1), memory)  # (B, 1, N)
    return masked_softmax(strength[:, None, None] * similarity).squeeze(1)  # (B, N)


def interpolate(content: Tensor, previous: Tensor, gate: Tensor) -> Tensor:
    r"""Interpolation (eq. 7): :math:`\mathbf{w}^g = g\,\mathbf{w}^c + (1 - g)\,\mathbf{w}_{t-1}`.

    Parameters
    ----------
    content : Tensor
        The content weighting :math:`\mathbf{w}^c`.
    previous : Tensor
        The head's weighting at the previous step.
    gate : Tensor
        :math:`g \in [0, 1]`: 1 uses the content lookup, 0 keeps the previous focus.

    Shapes
    ------
    content, previous : (B, N)
    gate : (B,)
    output : (B, N)
    """
    _require_float("content", content, "(B, N)", 2)
    _check_vector("previous", previous, *content.shape, "(B, N)")
    _require_float("gate", gate, "(B,)", 1)
    require_same_dtype("content", content, previous=previous, gate=gate)
    if gate.shape[0] != content.shape[0]:
        raise ValueError(f"gate must have shape (B,) = ({content.shape[0]},); found {tuple(gate.shape)}")
    gate = gate.unsqueeze(1)  # (B, 1)
    return gate * content + (1 - gate) * previous


def circular_shift(weights: Tensor, shift: Tensor) -> Tensor:
    r"""Rotation by a soft shift (eq. 8): :math:`\tilde w_i = \sum_j w_j\, s_{(i - j) \bmod N}`.

    ``shift`` is a distribution over the offsets ``-k, ..., 0, ..., +k`` (in that
    order, ``2k + 1`` entries). Offset ``+1`` moves the weight of slot ``i`` to slot
    ``i + 1``, and the last slot wraps around to the first.

    Parameters
    ----------
    weights : Tensor
        Weightings to shift.
    shift : Tensor
        One distribution over the ``2k + 1`` offsets per batch element.

    Returns
    -------
    Tensor
        The shifted weightings.

    Shapes
    ------
    weights : (B, N)
    shift : (B, 2k + 1)
    output : (B, N)
    """
    _check_shift(weights, shift)
    reach = shift.shape[1] // 2
    # roll(w, o)[i] = w[i - o]: the weight that offset o brings to slot i.
    rolled = torch.stack([weights.roll(offset, dims=1) for offset in range(-reach, reach + 1)], dim=1)  # (B, 2k+1, N)
    return (shift.unsqueeze(2) * rolled).sum(dim=1)  # (B, N)


def sharpen(weights: Tensor, gamma: Tensor) -> Tensor:
    r"""Sharpening (eq. 9): :math:`w_i = \tilde w_i^{\gamma} / \sum_j \tilde w_j^{\gamma}` with :math:`\gamma \ge 1`.

    Parameters
    ----------
    weights : Tensor
        Non-negative weightings.
    gamma : Tensor
        One exponent ``>= 1`` per batch element; 1 leaves the weights unchanged.

    Shapes
    ------
    weights : (B, N)
    gamma : (B,)
    output : (B, N)
    """
    _require_float("weights", weights, "(B, N)", 2)
    _require_float("gamma", gamma, "(B,)", 1)
    require_same_dtype("weights", weights, gamma=gamma)
    if gamma.shape[0] != weights.shape[0]:
        raise ValueError(f"gamma must have shape (B,) = ({weights.shape[0]},); found {tuple(gamma.shape)}")
    if bool((gamma < 1).any()):
        raise ValueError(f"gamma must be >= 1; found {gamma.min().item():.4g}")
    # Clamping at the smallest positive float keeps d(w^gamma)/d(gamma) = w^gamma log w finite at w = 0.
    powered = weights.clamp_min(torch.finfo(weights.dtype).tiny) ** gamma.unsqueeze(1)  # (B, N)
    return powered / powered.sum(dim=1, keepdim=True)


@dataclass
class HeadParameters:
    """What the controller emits for one head at one step (the write head also ``erase`` and ``add``).

    Shapes: ``key`` (B, D); ``strength``, ``gate``, ``gamma`` (B,); ``shift`` (B, 2k + 1);
    ``erase``, ``add`` (B, D) or None for a read head.
    """

    key: Tensor
    strength: Tensor
    gate: Tensor
    shift: Tensor
    gamma: Tensor
    erase: Optional[Tensor] = None
    add: Optional[Tensor] = None


def address(memory: Tensor, previous: Tensor, head: HeadParameters) -> Tensor:
    """The full addressing pipeline (eqs. 5-9): content, interpolation, shift, sharpening.

    Parameters
    ----------
    memory : Tensor
        The memory the head addresses.
    previous : Tensor
        The head's weighting at the previous step.
    head : HeadParameters
        Key, key strength, gate, shift distribution and sharpening exponent.

    Returns
    -------
    Tensor
        The head's new weighting.

    Shapes
    ------
    memory : (B, N, D)
    previous : (B, N)
    output : (B, N)
    """
    require_instance("head", head, HeadParameters)
    content = content_weights(memory, head.key, head.strength)  # (B, N)
    gated = interpolate(content, previous, head.gate)  # (B, N)
    return sharpen(circular_shift(gated, head.shift), head.gamma)  # (B, N)


# ---------------------------------------------------------------------------
# Reading and writing (eqs. 2-4).
# ---------------------------------------------------------------------------


def read(memory: Tensor, weights: Tensor) -> Tensor:
    r"""Read (eq. 2): :math:`\mathbf{r} = \sum_i w_i \mathbf{M}_i`, the weighted average of the slots.

    Shapes
    ------
    memory : (B, N, D)
    weights : (B, N)
    output : (B, D)
    """
    _check_memory_and_weights(memory, weights)
    return (weights.unsqueeze(1) @ memory).squeeze(1)  # (B, 1, N) @ (B, N, D) -> (B, D)


def write(memory: Tensor, weights: Tensor, erase: Tensor, add: Tensor) -> Tensor:
    r"""Write (eqs. 3-4): erase, then add, each slot in proportion to its weight.

    .. math:: \mathbf{M}_i \leftarrow \mathbf{M}_i \odot (\mathbf{1} - w_i \mathbf{e}) + w_i \mathbf{a}

    A slot with weight 1 and ``erase = 1`` is cleared and then holds exactly
    ``add``; a slot with weight 0 is untouched.

    Parameters
    ----------
    memory : Tensor
        The memory before the write (not modified).
    weights : Tensor
        The write head's weighting.
    erase : Tensor
        Erase vector with entries in ``[0, 1]``.
    add : Tensor
        Add vector.

    Returns
    -------
    Tensor
        The new memory.

    Shapes
    ------
    memory : (B, N, D)
    weights : (B, N)
    erase, add : (B, D)
    output : (B, N, D)
    """
    _check_memory_and_weights(memory, weights, erase=erase, add=add)
    w = weights.unsqueeze(2)  # (B, N, 1)
    erased = memory * (1 - w * erase.unsqueeze(1))  # (B, N, D): w_i e is the share of slot i to forget
    return erased + w * add.unsqueeze(1)  # (B, N, D)


# ---------------------------------------------------------------------------
# The machine: an LSTM controller with one write head and one read head.
# ---------------------------------------------------------------------------


@dataclass
class NTMConfig:
    """Sizes of an :class:`NTM` (defaults: the copy task with 6-bit vectors)."""

    input_size: int = 7  # 6 bits + the end-of-sequence flag
    output_size: int = 6
    controller_size: int = 64
    slots: int = 24  # N
    slot_size: int = 12  # D
    shift_reach: int = 1  # offsets -1, 0, +1

    def __post_init__(self):
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"NTMConfig.{name} must be a positive int; found {value!r}")


class NTM(nn.Module):
    """A Neural Turing Machine with an LSTM controller, one write head and one read head.

    At each step ``t`` the controller reads the input ``x_t`` and the previous read
    vector ``r_{t-1}``; from its new state ``h_t`` two linear layers emit the heads'
    parameters. The write head addresses and writes the memory, the read head
    addresses the updated memory and reads ``r_t``, and the output is a linear
    function of ``r_t`` alone (logits: the copy task applies a sigmoid).

    The output sees only the read vector, so the network cannot answer from its
    controller's state: whatever it recalls must have been written to memory and
    read back. This makes the copy task train in minutes rather than hours on a
    CPU (with an output from ``[h_t; r_t]``, as in the paper, a small LSTM learns
    to memorise short sequences by itself and stalls there). The memory starts as
    the constant ``1e-6`` in every slot, which Collier and Beel (2018) found the
    most reliable initialisation, and both heads start focused on slot 0, so that
    shifting moves them along the slots.

    Parameters
    ----------
    config : NTMConfig

    Shapes
    ------
    inputs : (B, T, input_size)
    logits : (B, T, output_size)
    """

    def __init__(self, config: NTMConfig = NTMConfig()):
        super().__init__()
        require_instance("config", config, NTMConfig)
        self.config = config
        size, offsets = config.slot_size, 2 * config.shift_reach + 1
        self.controller = LSTMCell(config.input_size + size, config.controller_size)
        # key, strength, gate, gamma, shift (+ erase, add for the writer)
        self.read_params = nn.Linear(config.controller_size, size + 3 + offsets)
        self.write_params = nn.Linear(config.controller_size, 3 * size + 3 + offsets)
        self.output = nn.Linear(size, config.output_size)

    def _head(self, raw: Tensor, writer: bool) -> HeadParameters:
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

    def initial_memory(self, batch: int, like: Tensor) -> Tensor:
        """The memory every sequence starts from: ``1e-6`` everywhere, ``(B, N, D)`` with the dtype of ``like``."""
        return like.new_full((batch, self.config.slots, self.config.slot_size), 1e-6)

    def forward(self, inputs: Tensor, trace: bool = False):
        """Run the machine over a sequence.

        Parameters
        ----------
        inputs : Tensor
            Float inputs, batch-first.
        trace : bool
            Also return what the heads did.

        Returns
        -------
        logits : Tensor
            One output vector per step.
        record : dict, only if ``trace``
            ``read``, ``write``: the heads' weightings ``(B, T, N)``; ``memory``: the
            memory after every step ``(B, T, N, D)``; ``erase``, ``add`` ``(B, T, D)``.

        Shapes
        ------
        inputs : (B, T, input_size)
        logits : (B, T, output_size)
        """
        _require_float("inputs", inputs, "(B, T, input_size)", 3)
        if inputs.shape[2] != self.config.input_size:
            raise ValueError(
                f"inputs must have shape (B, T, input_size) with input_size = {self.config.input_size}; "
                f"found {tuple(inputs.shape)}"
            )
        batch, steps, _ = inputs.shape
        memory = self.initial_memory(batch, inputs)  # (B, N, D)
        state = self.controller.zero_state(batch, inputs)
        focus = F.one_hot(torch.zeros(batch, dtype=torch.long), self.config.slots).to(inputs.dtype)  # (B, N)
        read_weights, write_weights = focus, focus
        reading = inputs.new_zeros(batch, self.config.slot_size)  # r_0 (B, D)
        logits, record = [], {name: [] for name in ("read", "write", "memory", "erase", "add")}
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
                for name, value in (("read", read_weights), ("write", write_weights), ("memory", memory),
                                    ("erase", writer.erase), ("add", writer.add)):
                    record[name].append(value.detach())
        logits = torch.stack(logits, dim=1)  # (B, T, O)
        if trace:
            return logits, {name: torch.stack(values, dim=1) for name, values in record.items()}
        return logits


# ---------------------------------------------------------------------------
# The copy task (Graves et al., section 4.1).
# ---------------------------------------------------------------------------


def copy_batch(batch: int, length: int, bits: int, generator: Optional[torch.Generator] = None
               ) -> tuple[Tensor, Tensor, Tensor]:
    """A batch of the copy task: read ``length`` random bit vectors, then write them back.

    The input has ``bits + 1`` channels: the vectors at steps ``0 .. length - 1``,
    a flag on the extra channel at step ``length`` (end of the sequence), and zeros
    while the machine answers at steps ``length + 1 .. 2 length``.

    Returns
    -------
    inputs : Tensor
        ``(B, 2 length + 1, bits + 1)``.
    targets : Tensor
        ``(B, 2 length + 1, bits)``: the vectors again at the answer steps, zeros elsewhere.
    answer : Tensor
        Boolean ``(2 length + 1,)``, True at the answer steps (where the loss counts).
    """
    for name, value in (("batch", batch), ("length", length), ("bits", bits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int; found {value!r}")
    steps = 2 * length + 1
    sequence = torch.randint(0, 2, (batch, length, bits), generator=generator).float()  # (B, L, bits)
    inputs = torch.zeros(batch, steps, bits + 1)
    inputs[:, :length, :bits] = sequence
    inputs[:, length, bits] = 1.0  # end-of-sequence flag
    targets = torch.zeros(batch, steps, bits)
    targets[:, length + 1:] = sequence
    answer = torch.arange(steps) > length  # (T,)
    return inputs, targets, answer


@dataclass
class CopyRun:
    """What :func:`train_copy` measured: the loss (bits per vector) every ``report`` steps."""

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def train_copy(model: NTM, steps: int, min_length: int = 1, max_length: int = 10, batch: int = 32,
               lr: float = 3e-3, seed: int = 0, report: int = 100, log=None) -> CopyRun:
    """Train ``model`` on the copy task with Adam and gradient clipping (global norm 10).

    Each step draws a batch of sequences of one length, uniform in
    ``[min_length, max_length]``; the loss is the binary cross-entropy of the
    answer steps. Returns the mean loss in bits per vector (cross-entropy in
    base 2, summed over the bits of a vector) over each block of ``report`` steps.
    """
    generator = torch.Generator().manual_seed(seed)
    require_instance("model", model, NTM)
    bits = model.config.output_size
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    run, block, start = CopyRun(), [], time.perf_counter()
    for step in range(1, steps + 1):
        length = int(torch.randint(min_length, max_length + 1, (1,), generator=generator))
        inputs, targets, answer = copy_batch(batch, length, bits, generator)
        logits = model(inputs)
        loss = F.binary_cross_entropy_with_logits(logits[:, answer], targets[:, answer])
        optimiser.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), 10.0)
        optimiser.step()
        block.append(loss.item() * bits / 0.6931471805599453)  # nats per bit -> bits per vector
        if step % report == 0 or step == steps:
            run.steps.append(step)
            run.losses.append(sum(block) / len(block))
            block = []
            if log is not None:
                log(f"step {step}: {run.losses[-1]:.4f} bits per vector, {time.perf_counter() - start:.0f} s")
    run.seconds = time.perf_counter() - start
    return run


def load_copy_model(path: Path = WEIGHTS_PATH) -> tuple[NTM, dict]:
    """The NTM trained by ``python -m lib.memory train-ntm`` and what its training measured.

    Returns
    -------
    model : NTM
        In evaluation mode.
    info : dict
        ``config`` (as a dict), ``steps``, ``losses``, ``max_length``, ``seed``.
    """
    saved = torch.load(path, weights_only=True)
    model = NTM(NTMConfig(**saved["config"]))
    model.load_state_dict(saved["state"])
    return model.eval(), {key: value for key, value in saved.items() if key != "state"}


def main(argv: Optional[list[str]] = None) -> None:
    """``python -m lib.memory train-ntm [--steps S] [--out PATH]``: train the chapter's copy model."""
    parser = argparse.ArgumentParser(prog="python -m lib.memory", description=main.__doc__)
    parser.add_argument("command", choices=["train-ntm"])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--max-length", type=int, default=12)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=WEIGHTS_PATH)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    config = NTMConfig()
    model = NTM(config)
    run = train_copy(model, args.steps, max_length=args.max_length, batch=args.batch, lr=args.lr, seed=args.seed,
                     log=print)
    torch.save({
        "config": asdict(config), "state": model.state_dict(), "steps": run.steps, "losses": run.losses,
        "max_length": args.max_length, "seed": args.seed,
    }, args.out)
    print(f"saved to {args.out} after {run.seconds:.0f} s")
