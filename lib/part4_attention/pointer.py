"""Pointer networks: the attention distribution over the input positions is the output.

Chapter 10 (syllabus S2S6). When the answer is a position of the input, as in sorting
(:class:`lib.part4_attention.sorting_task.SortingTask`), convex hulls or the travelling
salesman, the output vocabulary grows with the input. Vinyals et al. (2015) use
attention not to build a context vector but as the output itself: the additive score of
:class:`lib.part4_attention.attention.AdditiveScore` over the encoder's states,
normalised by :func:`lib.part4_attention.attention.masked_softmax`, is the distribution
of the next pointer. The encoder hands over a
:class:`lib.part4_attention.seq2seq.Memory`, as chapter 10's other encoders do. At step
i the decoder state d_i, whose input is the vector pointed at last (a learned start
vector at first), scores every input position, ``u^i_j = v^T tanh(W_1 e_j + W_2 d_i)``,
and ``p(c_i = j) = softmax_j u^i_j``: no weighted average of the inputs and no output
vocabulary, so the number of classes is the input length, whatever it is.

Conventions: batch-first tensors. ``B`` batch, ``n`` input positions, ``m``
output steps, ``H`` the hidden size.

References
----------
.. [1] O. Vinyals, M. Fortunato, N. Jaitly. "Pointer Networks". NeurIPS 2015.
   arXiv:1506.03134.
"""

from __future__ import annotations

from typing import Optional

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lib.part4_attention.attention import AdditiveScore, masked_softmax
from lib.checked import IntegerDtype, PositiveInt, same_dtype
from lib.part4_attention.seq2seq import Memory

__all__ = ["PointerNetwork"]


# (B, n) numbers or (B, n, input_dim) vectors, and the number of real ones in each row
Values = Float[Tensor, "B n *D"]
Lens = Int[Tensor, "B"]  # as lib.part4_attention.seq2seq.Memory holds them


class PointerNetwork(nn.Module):
    r"""A pointer network (Vinyals et al., 2015): the softmax over the input positions
    of :math:`u^i_j = v^\top \tanh(W_1 e_j + W_2 d_i)` is the output of step :math:`i`;
    :math:`d_i` reads the input pointed at last (a learned vector at first)."""

    def __init__(
        self,
        input_dim: PositiveInt = 1,
        hidden_dim: PositiveInt = 64,
        attention_dim: PositiveInt = 64,
    ):
        super().__init__()
        self.input_dim = input_dim
        self.embed = nn.Linear(input_dim, hidden_dim)
        self.encoder = nn.GRU(hidden_dim, hidden_dim, batch_first=True)
        self.start_input = nn.Parameter(torch.zeros(hidden_dim))  # what step 1 reads
        self.cell = nn.GRUCell(hidden_dim, hidden_dim)
        # u_j = v^T tanh(W_1 e_j + W_2 d_i)
        self.pointer = AdditiveScore(hidden_dim, hidden_dim, attention_dim)

    def encode(self, values: Values, lens: Optional[Lens] = None) -> Memory:
        """The encoder states :math:`e_j` (B, n, H); the last one starts the decoder."""
        values, lens = _inputs(values, lens, self)
        embedded = self.embed(values)  # (B, n, H)
        packed = pack_padded_sequence(
            embedded, lens.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, h_n = self.encoder(packed)
        states, _ = pad_packed_sequence(
            outputs, batch_first=True, total_length=values.shape[1]
        )  # (B, n, H)
        return Memory(states, lens, h_n[0])

    def _step(
        self,
        previous: IntegerDtype[Tensor, "B"],
        state: Float[Tensor, "B H"],
        embedded: Float[Tensor, "B n H"],
        memory: Memory,
    ) -> tuple[Float[Tensor, "B n"], Float[Tensor, "B H"]]:
        """One decoder step: the scores of every position and the new state.
        ``previous`` holds the position pointed at last (-1 at the start)."""
        batch = previous.shape[0]
        # x_{c_{i-1}}, embedded: (B, H)
        pointed = embedded[torch.arange(batch), previous.clamp(min=0)]
        start = self.start_input.expand(batch, -1)  # (B, H)
        inputs = torch.where((previous < 0)[:, None], start, pointed)
        state = self.cell(inputs, state)  # d_i: (B, H)
        scores = self.pointer(state[:, None], memory.states)[:, 0]  # (B, n)
        padding = torch.arange(scores.shape[1]) >= memory.lens[:, None]  # (B, n)
        return scores.masked_fill(padding, float("-inf")), state

    def forward(
        self,
        values: Values,
        pointers_in: IntegerDtype[Tensor, "B m"],
        lens: Optional[Lens] = None,
    ) -> Float[Tensor, "B m n"]:
        """Teacher forcing's scores (-inf at padding); pointers_in is -1 at first."""
        values, lens = _inputs(values, lens, self)
        if not pointers_in.shape[1]:
            raise ValueError("pointers_in must hold at least one step; found m = 0")
        # a pointer into a row's padding would feed the decoder a padded value
        if pointers_in.min() < -1 or (pointers_in >= lens[:, None]).any():
            raise ValueError(
                "pointers_in must be -1 (start) or below their row's length in lens; "
                f"found {int(pointers_in.min())} to {int(pointers_in.max())} with lens "
                f"{lens.tolist()}"
            )
        if (pointers_in[:, 1:] < 0).any():  # a later -1 would feed the start again
            raise ValueError(
                "pointers_in may be -1 (start) at the first step only; found -1 at "
                f"step {int((pointers_in[:, 1:] < 0).any(0).nonzero()[0]) + 1} (from 0)"
            )
        memory, embedded = self.encode(values, lens), self.embed(values)  # (B, n, H)
        state, all_scores = memory.summary, []
        for i in range(pointers_in.shape[1]):
            scores, state = self._step(pointers_in[:, i], state, embedded, memory)
            all_scores.append(scores)
        return torch.stack(all_scores, dim=1)  # (B, m, n)

    @torch.no_grad()
    def greedy(
        self,
        values: Values,
        lens: Optional[Lens] = None,
        steps: Optional[PositiveInt] = None,
    ) -> tuple[IntegerDtype[Tensor, "B m"], Float[Tensor, "B m n"]]:
        """Point at the likeliest position ``steps`` times (n by default), feeding each
        choice back in: the positions chosen, and every step's distribution over them.
        """
        values, lens = _inputs(values, lens, self)
        steps = values.shape[1] if steps is None else steps
        memory, embedded = self.encode(values, lens), self.embed(values)
        state, previous = memory.summary, torch.full((values.shape[0],), -1)
        pointers, weights = [], []
        for _ in range(steps):
            scores, state = self._step(previous, state, embedded, memory)
            previous = scores.argmax(dim=-1)  # (B,)
            pointers.append(previous)
            weights.append(masked_softmax(scores, memory.lens))
        # pointers (B, m), weights (B, m, n)
        return torch.stack(pointers, dim=1), torch.stack(weights, dim=1)


def _inputs(
    values: Values, lens: Optional[Lens], net: PointerNetwork
) -> tuple[Float[Tensor, "B n D"], Lens]:
    """``values`` as (B, n, input_dim) for ``net``, and ``lens`` (n in every row by
    default)."""
    if values.dim() == 2 and net.input_dim == 1:
        values = values[..., None]  # (B, n, 1)
    if values.dim() != 3 or values.shape[-1] != net.input_dim:
        raise ValueError(
            f"values must have shape (B, n, {net.input_dim}) (or (B, n) when "
            f"input_dim = 1); found {tuple(values.shape)}"
        )
    batch, width = values.shape[:2]
    if not batch or not width:
        raise ValueError(
            "values must hold at least one row of at least one position; "
            f"found shape {tuple(values.shape)}"
        )
    if not torch.isfinite(values).all():  # a NaN would come out as NaN scores
        raise ValueError("values must be finite; found NaN or inf")
    same_dtype(**{"the module's parameters": net.start_input, "values": values})
    if lens is None:
        return values, torch.full((batch,), width)
    if lens.min() < 1 or lens.max() > width:
        raise ValueError(
            f"lens must lie in [1, n] = [1, {width}]; "
            f"found values from {int(lens.min())} to {int(lens.max())}"
        )
    return values, lens
