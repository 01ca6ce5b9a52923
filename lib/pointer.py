"""Pointer networks: the attention distribution over the input positions is the output.

Chapter 10 (syllabus S2S6). When the answer is a position of the input, as in
sorting (:class:`lib.tasks.SortingTask`), convex hulls or the travelling
salesman, the output vocabulary grows with the input. Vinyals et al. (2015)
use attention not to build a context vector but as the output itself: the
additive score of :class:`lib.attention.AdditiveScore` over the encoder's states,
normalised by :func:`lib.attention.masked_softmax`, is the distribution of the
next pointer. The encoder hands over a :class:`lib.seq2seq.Memory`, as chapter
10's other encoders do.

Conventions: batch-first tensors. ``B`` batch, ``n`` input positions, ``m``
output steps.

References
----------
.. [1] O. Vinyals, M. Fortunato, N. Jaitly. "Pointer Networks". NeurIPS 2015.
   arXiv:1506.03134.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lib.attention import AdditiveScore, masked_softmax
from lib.seq2seq import Memory
from lib.validation import INTEGER_DTYPES, check_module_dtype, require_int, require_ints, require_lengths

__all__ = ["PointerNetwork"]


def _check_pointers(pointers_in: object, width: int) -> None:
    # PointerNetwork.forward's pointers_in: integers (B, m), each a position in [0, n) or -1 (start).
    if not isinstance(pointers_in, Tensor) or pointers_in.dtype not in INTEGER_DTYPES or pointers_in.dim() != 2:
        found = (pointers_in.dtype, tuple(pointers_in.shape)) if isinstance(pointers_in, Tensor) else \
            type(pointers_in).__name__
        raise TypeError(f"pointers_in must be an integer tensor (B, m); found {found}")
    if pointers_in.numel() and (int(pointers_in.min()) < -1 or int(pointers_in.max()) >= width):
        raise ValueError(f"pointers_in must hold positions in [0, {width}) or -1 (start); found "
                         f"{int(pointers_in.min())} to {int(pointers_in.max())}")


class PointerNetwork(nn.Module):
    r"""A pointer network (Vinyals et al., 2015): it outputs positions of its input.

    An encoder reads the input vectors :math:`x_1, \dots, x_n` into states
    :math:`e_j`. At step :math:`i` a decoder state :math:`d_i` (its input is the
    vector it pointed at last, :math:`x_{c_{i-1}}`, or a learned start vector)
    scores every input position with the additive score, and the softmax of the
    scores *is* the output distribution:

    .. math::
        u^i_j = v^\top \tanh(W_1 e_j + W_2 d_i), \qquad
        p(c_i = j \mid c_{<i}, x) = \mathrm{softmax}_j\, u^i_j

    There is no weighted average of the inputs and no output vocabulary: the
    number of classes is the input length, whatever it is.

    Parameters
    ----------
    input_dim : int
        Size of each input vector (1 for numbers).
    hidden_dim : int
        Size of the encoder and decoder states.
    attention_dim : int
        Hidden width of the score.

    Shapes
    ------
    values : (B, n) numbers or (B, n, input_dim) vectors
    pointers_in : (B, m) previous pointers, -1 at the start
    lens : (B,) number of real inputs
    output : (B, m, n), the scores of teacher forcing; ``-inf`` at padded positions
    """

    def __init__(self, input_dim: int = 1, hidden_dim: int = 64, attention_dim: int = 64):
        require_ints(input_dim=input_dim, hidden_dim=hidden_dim, attention_dim=attention_dim)
        super().__init__()
        self.input_dim = input_dim
        self.embed = nn.Linear(input_dim, hidden_dim)
        self.encoder = nn.GRU(hidden_dim, hidden_dim, batch_first=True)
        self.start_input = nn.Parameter(torch.zeros(hidden_dim))  # what step 1 reads
        self.cell = nn.GRUCell(hidden_dim, hidden_dim)
        self.pointer = AdditiveScore(hidden_dim, hidden_dim, attention_dim)  # u_j = v^T tanh(W_1 e_j + W_2 d_i)

    def _inputs(self, values: Tensor, lens: Optional[Tensor]) -> tuple[Tensor, Tensor]:
        if not isinstance(values, Tensor) or not values.is_floating_point():
            found = values.dtype if isinstance(values, Tensor) else type(values).__name__
            raise TypeError(f"values must be a floating-point torch.Tensor; found {found}")
        if values.dim() == 2 and self.input_dim == 1:
            values = values[..., None]  # (B, n, 1)
        if values.dim() != 3 or values.shape[-1] != self.input_dim:
            raise ValueError(f"values must have shape (B, n, {self.input_dim}) (or (B, n) when input_dim = 1); "
                             f"found {tuple(values.shape)}")
        check_module_dtype("values", values, self)
        batch, width = values.shape[:2]
        lens = torch.full((batch,), width) if lens is None else require_lengths("lens", lens, batch, width)
        return values, lens

    def encode(self, values: Tensor, lens: Optional[Tensor] = None) -> Memory:
        """The encoder states :math:`e_j` and the last one, which starts the decoder.

        Shapes
        ------
        values : (B, n) or (B, n, input_dim)
        memory.states : (B, n, hidden)
        """
        values, lens = self._inputs(values, lens)
        embedded = self.embed(values)  # (B, n, hidden)
        packed = pack_padded_sequence(embedded, lens.cpu(), batch_first=True, enforce_sorted=False)
        outputs, h_n = self.encoder(packed)
        states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=values.shape[1])  # (B, n, hidden)
        return Memory(states, lens, h_n[0])

    def _step(self, previous: Tensor, state: Tensor, embedded: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """One decoder step: the scores of every position and the new state.

        ``previous`` holds the position pointed at last (-1 at the start).
        """
        batch = previous.shape[0]
        pointed = embedded[torch.arange(batch), previous.clamp(min=0)]  # (B, hidden): x_{c_{i-1}}, embedded
        inputs = torch.where((previous < 0)[:, None], self.start_input.expand(batch, -1), pointed)
        state = self.cell(inputs, state)  # d_i: (B, hidden)
        scores = self.pointer(state[:, None], memory.states)[:, 0]  # (B, n)
        padding = torch.arange(scores.shape[1]) >= memory.lens[:, None]  # (B, n)
        return scores.masked_fill(padding, float("-inf")), state

    def forward(self, values: Tensor, pointers_in: Tensor, lens: Optional[Tensor] = None) -> Tensor:
        values, lens = self._inputs(values, lens)
        _check_pointers(pointers_in, values.shape[1])
        memory, embedded = self.encode(values, lens), self.embed(values)  # embedded: (B, n, hidden)
        state, all_scores = memory.summary, []
        for i in range(pointers_in.shape[1]):
            scores, state = self._step(pointers_in[:, i], state, embedded, memory)
            all_scores.append(scores)
        return torch.stack(all_scores, dim=1)  # (B, m, n)

    @torch.no_grad()
    def greedy(self, values: Tensor, lens: Optional[Tensor] = None,
               steps: Optional[int] = None) -> tuple[Tensor, Tensor]:
        """Point at the most probable position at every step, feeding each choice back in.

        Returns
        -------
        pointers : Tensor
            The chosen positions (from 0).
        weights : Tensor
            The output distributions (the attention weights) of every step.

        Shapes
        ------
        values : (B, n) or (B, n, input_dim)
        pointers : (B, m) with m = steps (default n)
        weights : (B, m, n)
        """
        values, lens = self._inputs(values, lens)
        steps = values.shape[1] if steps is None else steps
        require_int("steps", steps)
        memory, embedded = self.encode(values, lens), self.embed(values)
        state = memory.summary
        previous = torch.full((values.shape[0],), -1)
        pointers, weights = [], []
        for _ in range(steps):
            scores, state = self._step(previous, state, embedded, memory)
            previous = scores.argmax(dim=-1)  # (B,)
            pointers.append(previous)
            weights.append(masked_softmax(scores, memory.lens))
        return torch.stack(pointers, dim=1), torch.stack(weights, dim=1)  # (B, m), (B, m, n)
