"""Sequence-to-sequence models: a recurrent encoder, and decoders without attention,
Bahdanau's and Luong's (chapter 10, syllabus S2S1-S2S5).

1. :class:`Encoder` (GRU or LSTM, optionally bidirectional) returns a :class:`Memory`:
   every source state and a fixed-size summary (the last states).
2. Three decoders, each a GRU cell run step by step, differ in their context vector:
   :class:`PlainDecoder` the summary at every step (Cho et al., 2014; Sutskever et al.,
   2014); :class:`BahdanauDecoder` additive attention queried by the *previous* state
   (Bahdanau et al., 2015); :class:`LuongDecoder` attention queried by the *current*
   state, with the scores "dot", "general", "concat", the modes "global", "local-m",
   "local-p" and optional input feeding (Luong et al., 2015). :func:`local_weights` is
   the local attention on its own.
3. :class:`Seq2Seq` joins an encoder and a decoder; :func:`build_seq2seq` makes one from
   a name and a :class:`Seq2SeqConfig`; :func:`save_seq2seq` / :func:`load_seq2seq`
   store it.
4. Evaluation: :func:`exact_matches`, :func:`accuracy_by_length`, :func:`alignments`;
   :func:`greedy_translate` and :func:`beam_translate` decode any model with a
   ``step_fn``.
5. Alignments against gold ones (copying and reversing digits, whose
   :meth:`lib.part4_attention.reversal_task.ReversalTask.gold_alignment` is known):
   :func:`gold_mass`, :func:`hard_alignment` and the alignment error rate
   :func:`alignment_error_rate` of Och and Ney (2003, section 5), with which Luong et
   al. (2015, section 5.4) scored their models' alignments.

The scores, the masked softmax and the weighted average come from
:mod:`lib.part4_attention.attention`. Tensors are batch-first: ``B`` batch, ``S`` source
positions, ``T`` target positions (decoder steps), ``De`` the size of a source state
(``H`` or ``2H``), ``V`` the target vocabulary. Source positions count from 1 in the
formulas and from 0 in tensors.

References
----------
.. [1] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate". ICLR 2015. arXiv:1409.0473.
.. [2] M.-T. Luong, H. Pham, C. D. Manning. "Effective Approaches to
   Attention-based Neural Machine Translation". EMNLP 2015. arXiv:1508.04025.
.. [3] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks". NeurIPS 2014. arXiv:1409.3215.
.. [4] K. Cho, B. van Merriënboer, C. Gulcehre, D. Bahdanau, F. Bougares,
   H. Schwenk, Y. Bengio. "Learning Phrase Representations using RNN
   Encoder-Decoder for Statistical Machine Translation". EMNLP 2014.
.. [5] F. J. Och, H. Ney. "A Systematic Comparison of Various Statistical Alignment
   Models". Computational Linguistics 29(1), 2003.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from numbers import Integral
from dataclasses import asdict, dataclass
from typing import Literal, Optional, Union, get_args, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lib.part4_attention.attention import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    attention,
    masked_softmax,
)
from lib.checked import Fraction, NonNegativeInt, PositiveInt, each, same_dtype
from lib.part3_words.decoding import Alpha, beam_search_batch, normalised_score
from lib.part4_attention.pairs import SequencePairs

__all__ = [
    "Memory",
    "Encoder",
    "PlainDecoder",
    "BahdanauDecoder",
    "LuongDecoder",
    "LUONG_SCORES",
    "LUONG_MODES",
    "local_weights",
    "Seq2Seq",
    "Seq2SeqConfig",
    "build_seq2seq",
    "DECODERS",
    "save_seq2seq",
    "load_seq2seq",
    "greedy_translate",
    "beam_translate",
    "exact_matches",
    "accuracy_by_length",
    "alignments",
    "gold_mass",
    "hard_alignment",
    "alignment_error_rate",
]

Cell = Literal["gru", "lstm"]
LuongScore = Literal["dot", "general", "concat"]
LuongMode = Literal["global", "local-m", "local-p"]
DecoderName = Literal["plain", "bahdanau", "luong"]
LUONG_SCORES = get_args(LuongScore)
LUONG_MODES = get_args(LuongMode)
DECODERS = get_args(DecoderName)

State = Float[Tensor, "B De"]  # a decoder's state h_t
LuongState = tuple[State, State]  # (h_t, the attentional vector h~_t)


@dataclass(frozen=True)
class Memory:
    """What the encoder hands the decoder: the source states (zeros at padding), the
    source lengths and the summary u (the last states)."""

    states: Float[Tensor, "B S De"]
    lens: Int[Tensor, "B"]
    summary: Float[Tensor, "B De"]

    def __post_init__(self) -> None:
        width = self.states.shape[1]
        if len(self.lens) and (self.lens.min() < 1 or self.lens.max() > width):
            raise ValueError(
                f"lens must lie in [1, S] = [1, {width}]; "
                f"found values from {int(self.lens.min())} to {int(self.lens.max())}"
            )

    def select(self, index: Int[Tensor, "N"]) -> Memory:
        """The memories of the sources ``index`` (rows may repeat: beam search;
        negative ones count from the end)."""
        batch = len(self.lens)
        if len(index) and (index.min() < -batch or index.max() >= batch):
            raise ValueError(
                f"index must hold sources in [-B, B) = [-{batch}, {batch}); "
                f"found values from {int(index.min())} to {int(index.max())}"
            )
        return Memory(self.states[index], self.lens[index], self.summary[index])


class Encoder(nn.Module):
    r"""A recurrent encoder, :math:`\bar h_s = f(\bar h_{s-1}, x_s)`.

    With ``bidirectional=True`` a second network reads the source from its end and
    :math:`\bar h_s = [\overrightarrow{h}_s; \overleftarrow{h}_s]`; the summary is then
    :math:`[\overrightarrow{h}_S; \overleftarrow{h}_1]`. Padding is packed away, so
    neither direction reads it. ``hidden_dim`` is per direction.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        embed_dim: PositiveInt,
        hidden_dim: PositiveInt,
        cell: Cell = "gru",
        bidirectional: bool = True,
    ):
        super().__init__()
        self.vocab_size, self.cell = vocab_size, cell
        self.output_dim = hidden_dim * (2 if bidirectional else 1)
        self.embed = nn.Embedding(vocab_size, embed_dim)
        recurrent = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = recurrent(
            embed_dim, hidden_dim, batch_first=True, bidirectional=bidirectional
        )

    def forward(
        self, src: Int[Tensor, "B S"], src_lens: Optional[Int[Tensor, "B"]] = None
    ) -> Memory:
        batch, width = src.shape
        if not src.numel():
            raise ValueError(
                f"src must hold at least one token; found shape {(batch, width)}"
            )
        if src.min() < 0 or src.max() >= self.vocab_size:
            raise ValueError(
                f"src must hold ids in [0, {self.vocab_size}); "
                f"found ids from {int(src.min())} to {int(src.max())}"
            )
        if src_lens is None:
            src_lens = torch.full((batch,), width)
        elif src_lens.min() < 1 or src_lens.max() > width:
            raise ValueError(
                f"src_lens must lie in [1, S] = [1, {width}]; "
                f"found values from {int(src_lens.min())} to {int(src_lens.max())}"
            )
        packed = pack_padded_sequence(
            self.embed(src), src_lens.cpu(), batch_first=True, enforce_sorted=False
        )
        outputs, final = self.rnn(packed)
        states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=width)
        h_n = final[0] if self.cell == "lstm" else final  # (directions, B, H); no c_n
        summary = torch.cat(tuple(h_n), dim=-1)  # (B, De): [h_S] or [fwd h_S; bwd h_1]
        return Memory(states, src_lens, summary)


class _Decoder(nn.Module):
    """What the three decoders share: the embedding, the GRU cell and the loop over the
    steps. A subclass's ``step(token, state, memory, t)`` (``t`` counts from 1) returns
    the logits (B, V), the new state and the attention weights (B, S) or None."""

    def __init__(
        self,
        vocab_size: PositiveInt,
        embed_dim: PositiveInt,
        memory_dim: PositiveInt,
        input_dim: PositiveInt,
    ):
        super().__init__()
        self.vocab_size, self.memory_dim = vocab_size, memory_dim
        self.embed = nn.Embedding(vocab_size, embed_dim)
        # The state has the size of a source state: u can start it, "dot" can score it.
        self.cell = nn.GRUCell(input_dim, memory_dim)

    paired_state = False  # LuongDecoder's state is a pair (h_t, h~_t)

    @no_type_check  # once a time step, from step: a few ifs, no signature check
    def _check_step(self, token: Tensor, state: object, memory: Memory, t: int) -> None:
        """What a caller of ``step`` could get wrong (unroll and greedy get it right):
        the memory, the step t >= 1, the (B,) token ids below V, the (B, De) state."""
        if not isinstance(memory, Memory):
            raise TypeError(f"memory must be a Memory; found {type(memory).__name__}")
        if not (type(t) is int or isinstance(t, Integral) and type(t) is not bool):
            raise TypeError(f"t must be an int (steps count from 1); found {t!r}")
        if t < 1:
            raise ValueError(f"t must be >= 1 (steps count from 1); found {t}")
        batch, dtype = len(memory.lens), memory.states.dtype
        if (
            not isinstance(token, Tensor)
            or token.dtype not in (torch.int64, torch.int32)
            or token.shape != (batch,)
        ):
            raise TypeError(
                f"token must be an int64 or int32 tensor of shape (B,) = ({batch},); "
                f"found {_described(token)}"
            )
        if batch:
            low, high = map(int, torch.aminmax(token))  # ints: compared 3x faster
            if low < 0 or high >= self.vocab_size:
                raise ValueError(
                    f"token must hold ids in [0, {self.vocab_size}); "
                    f"found ids from {low} to {high}"
                )
        if self.paired_state and not (isinstance(state, tuple) and len(state) == 2):
            raise TypeError(f"state must be a pair (h, h~); found {_described(state)}")
        for h in state if self.paired_state else (state,):
            if (
                not isinstance(h, Tensor)
                or h.dtype != dtype
                or h.shape != (batch, self.memory_dim)
            ):
                what = "two tensors" if self.paired_state else "a tensor"
                raise TypeError(
                    f"state must be {what} of shape (B, De) = ({batch}, "
                    f"{self.memory_dim}) and memory's dtype {dtype}; "
                    f"found {_described(h)}"
                )

    def start(self, memory: Memory) -> State:
        """The state before the first step: h_0 = u."""
        return memory.summary

    def forward(
        self, tgt_in: Int[Tensor, "B T"], memory: Memory
    ) -> tuple[Float[Tensor, "B T V"], Optional[Float[Tensor, "B T S"]]]:
        """Teacher forcing: the logits and attention weights (None if the decoder has
        none) of every step, on the given inputs."""
        logits, weights, _ = self.unroll(tgt_in, memory)
        return logits, weights

    def unroll(
        self, tgt_in: Int[Tensor, "B T"], memory: Memory
    ) -> tuple[Float[Tensor, "B T V"], Optional[Float[Tensor, "B T S"]], list]:
        """:meth:`forward`, plus the state after every step."""
        if not tgt_in.numel():
            raise ValueError(
                "tgt_in must hold at least one token; "
                f"found shape {tuple(tgt_in.shape)}"
            )
        if tgt_in.min() < 0 or tgt_in.max() >= self.vocab_size:
            raise ValueError(
                f"tgt_in must hold ids in [0, {self.vocab_size}); "
                f"found ids from {int(tgt_in.min())} to {int(tgt_in.max())}"
            )
        batch, source, width = memory.states.shape
        if (batch, width) != (len(tgt_in), self.memory_dim):
            raise ValueError(
                f"memory must hold states (B, S, De) = ({len(tgt_in)}, S, "
                f"{self.memory_dim}); found {(batch, source, width)}"
            )
        state, all_logits, all_weights, states = self.start(memory), [], [], []
        for t in range(tgt_in.shape[1]):
            logits, state, weights = self.step(tgt_in[:, t], state, memory, t + 1)
            all_logits.append(logits)
            all_weights.append(weights)
            states.append(state)
        logits = torch.stack(all_logits, dim=1)  # (B, T, V)
        if all_weights[0] is None:
            return logits, None, states
        return logits, torch.stack(all_weights, dim=1), states  # weights (B, T, S)


class PlainDecoder(_Decoder):
    r"""The decoder without attention: the summary is the context of every step.

    :math:`h_0 = u`, :math:`h_t = f(h_{t-1}, [y_{t-1}; u])`,
    :math:`o_t = \mathrm{softmax}(W_o h_t)`. Feeding u at every step (Cho et al.) keeps
    it from fading; it is still one vector of fixed size for any source.
    """

    def __init__(
        self, vocab_size: PositiveInt, embed_dim: PositiveInt, memory_dim: PositiveInt
    ):
        super().__init__(vocab_size, embed_dim, memory_dim, embed_dim + memory_dim)
        self.output = nn.Linear(memory_dim, vocab_size)

    @no_type_check  # once a time step: unroll and greedy checked the shapes
    def step(
        self, token: Int[Tensor, "B"], state: State, memory: Memory, t: PositiveInt
    ) -> tuple[Float[Tensor, "B V"], State, None]:
        """One step: the logits of token t and the new state, from token t - 1."""
        self._check_step(token, state, memory, t)
        inputs = torch.cat((self.embed(token), memory.summary), dim=-1)  # (B, E + De)
        h = self.cell(inputs, state)  # (B, De)
        return self.output(h), h, None


class BahdanauDecoder(_Decoder):
    r"""Attention before the recurrence (Bahdanau et al., 2015): the previous state
    asks, the answer enters the new state.

    :math:`\alpha_{t,s} = \mathrm{softmax}_s(v^\top \tanh(W h_{t-1} + U \bar h_s))`,
    :math:`c_t = \sum_s \alpha_{t,s} \bar h_s`,
    :math:`h_t = f(h_{t-1}, [y_{t-1}; c_t])`,
    :math:`o_t = \mathrm{softmax}(W_o [h_t; c_t; y_{t-1}])` (the paper's output layer
    has a maxout layer; this one is linear). ``memory_dim`` is ``De``, the size of a
    source state; ``attention_dim`` the width of the additive score.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        embed_dim: PositiveInt,
        memory_dim: PositiveInt,
        attention_dim: PositiveInt = 32,
    ):
        super().__init__(vocab_size, embed_dim, memory_dim, embed_dim + memory_dim)
        self.score = AdditiveScore(memory_dim, memory_dim, attention_dim)
        self.output = nn.Linear(2 * memory_dim + embed_dim, vocab_size)

    @no_type_check  # once a time step: unroll and greedy checked the shapes
    def step(
        self, token: Int[Tensor, "B"], state: State, memory: Memory, t: PositiveInt
    ) -> tuple[Float[Tensor, "B V"], State, Float[Tensor, "B S"]]:
        """One step: the logits of token t and the new state, from token t - 1."""
        self._check_step(token, state, memory, t)
        embedded = self.embed(token)  # (B, E)
        query, states = state[:, None], memory.states  # (B, 1, De), (B, S, De)
        context, weights = attention(query, states, states, self.score, memory.lens)
        context, weights = context[:, 0], weights[:, 0]  # (B, De), (B, S)
        h = self.cell(torch.cat((embedded, context), dim=-1), state)  # (B, De)
        return self.output(torch.cat((h, context, embedded), dim=-1)), h, weights


def local_weights(
    scores: Float[Tensor, "B S"],
    lens: Int[Tensor, "B"],
    centre: Float[Tensor, "B"],
    window: PositiveInt,
    gaussian: bool,
) -> Float[Tensor, "B S"]:
    r"""Luong's local attention weights around the centre :math:`p_t` (counted from 1).

    Only the positions with :math:`|s - p_t| \le D` = ``window`` inside the source take
    part (the others get weight exactly 0; an empty window, all zeros). With
    ``gaussian`` (local-p) the softmax is multiplied by
    :math:`\exp(-(s - p_t)^2 / 2\sigma^2)`, :math:`\sigma = D/2`, not renormalised.
    """
    same_dtype(scores=scores, centre=centre)
    if not centre.isfinite().all():
        raise ValueError(f"centre must be finite; found {centre.tolist()}")
    if len(lens) and (lens.min() < 1 or lens.max() > scores.shape[1]):
        raise ValueError(
            f"lens must lie in [1, S] = [1, {scores.shape[1]}]; "
            f"found values from {int(lens.min())} to {int(lens.max())}"
        )
    positions = torch.arange(1, scores.shape[1] + 1, dtype=scores.dtype)  # (S,)
    distance = positions - centre[:, None]  # (B, S): s - p_t
    outside = distance.abs() > window  # (B, S)
    weights = masked_softmax(scores.masked_fill(outside, float("-inf")), lens)
    if gaussian:
        sigma = window / 2
        weights = weights * torch.exp(-(distance**2) / (2 * sigma**2))  # (B, S)
    return weights


class LuongDecoder(_Decoder):
    r"""Attention after the recurrence (Luong et al., 2015): the new state asks, and the
    answer is combined with it to predict.

    :math:`h_t = f(h_{t-1}, [y_{t-1}; \tilde h_{t-1}])` (input feeding; else
    :math:`f(h_{t-1}, y_{t-1})`), :math:`a_t = \mathrm{align}(h_t, \bar h_s)`,
    :math:`c_t = \sum_s a_t(s) \bar h_s`, :math:`\tilde h_t = \tanh(W_c [c_t; h_t])`,
    :math:`o_t = \mathrm{softmax}(W_s \tilde h_t)`. Scores: "dot" :math:`h_t^\top \bar
    h_s`, "general" :math:`h_t^\top W_a \bar h_s`, "concat" (the additive score). Modes:
    "global" (every position), "local-m" (the window :math:`[t - D, t + D]`), "local-p"
    (:math:`p_t = S\,\mathrm{sigmoid}(v_p^\top \tanh(W_p h_t))` and a Gaussian).
    ``attention_dim`` is the width of "concat" and of the :math:`p_t` predictor.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        embed_dim: PositiveInt,
        memory_dim: PositiveInt,
        score: LuongScore = "general",
        mode: LuongMode = "global",
        window: PositiveInt = 3,
        input_feeding: bool = True,
        attention_dim: PositiveInt = 32,
    ):
        fed = memory_dim if input_feeding else 0
        super().__init__(vocab_size, embed_dim, memory_dim, embed_dim + fed)
        self.mode, self.window, self.input_feeding = mode, window, input_feeding
        if score == "dot":
            self.score = DotScore()
        elif score == "general":
            self.score = BilinearScore(memory_dim, memory_dim)
        else:
            self.score = AdditiveScore(memory_dim, memory_dim, attention_dim)
        if mode == "local-p":
            self.position = nn.Sequential(  # v_p^T tanh(W_p h_t)
                nn.Linear(memory_dim, attention_dim, bias=False),
                nn.Tanh(),
                nn.Linear(attention_dim, 1, bias=False),
            )
        self.combine = nn.Linear(2 * memory_dim, memory_dim, bias=False)  # W_c
        self.output = nn.Linear(memory_dim, vocab_size)  # W_s

    paired_state = True

    def start(self, memory: Memory) -> LuongState:
        """h_0 = u, and a zero attentional vector to feed into step 1."""
        return memory.summary, torch.zeros_like(memory.summary)

    def centre(
        self, h: Float[Tensor, "B De"], memory: Memory, t: PositiveInt
    ) -> Float[Tensor, "B"]:
        """The window's centre p_t (a source position counted from 1), local modes."""
        if h.dtype != self.combine.weight.dtype:
            raise TypeError(
                f"h must have the decoder's dtype ({self.combine.weight.dtype}); "
                f"found {h.dtype}"
            )
        if self.mode == "local-m":
            return torch.full(memory.lens.shape, float(t), dtype=h.dtype)
        return memory.lens.to(h.dtype) * torch.sigmoid(self.position(h)[:, 0])

    def centres(
        self, tgt_in: Int[Tensor, "B T"], memory: Memory
    ) -> Float[Tensor, "B T"]:
        """p_t of every step, teacher forced (local modes), to plot the windows."""
        if self.mode == "global":
            raise ValueError(
                "global attention has no window centre; use mode 'local-m' or 'local-p'"
            )
        _, _, states = self.unroll(tgt_in, memory)
        centres = [self.centre(h, memory, t) for t, (h, _) in enumerate(states, 1)]
        return torch.stack(centres, dim=1)

    @no_type_check  # once a time step: unroll and greedy checked the shapes
    def step(
        self, token: Int[Tensor, "B"], state: LuongState, memory: Memory, t: PositiveInt
    ) -> tuple[Float[Tensor, "B V"], LuongState, Float[Tensor, "B S"]]:
        """One step: the logits of token t and the new state (h_t, h~_t)."""
        self._check_step(token, state, memory, t)
        h_prev, fed = state
        inputs = self.embed(token)  # (B, E)
        if self.input_feeding:
            inputs = torch.cat((inputs, fed), dim=-1)  # (B, E + De)
        h = self.cell(inputs, h_prev)  # (B, De)
        scores = self.score(h[:, None], memory.states)[:, 0]  # (B, S)
        if self.mode == "global":
            weights = masked_softmax(scores, memory.lens)  # (B, S)
        else:
            centre, gaussian = self.centre(h, memory, t), self.mode == "local-p"
            weights = local_weights(scores, memory.lens, centre, self.window, gaussian)
        context = (weights[:, None] @ memory.states)[:, 0]  # (B, 1, S) @ (B, S, De)
        attentional = torch.tanh(self.combine(torch.cat((context, h), dim=-1)))
        return self.output(attentional), (h, attentional), weights  # h~_t: (B, De)


class Seq2Seq(nn.Module):
    """An encoder and a decoder whose states have the size of the encoder's; the
    interface of :func:`lib.part4_attention.pairs.train_seq2seq` and
    :mod:`lib.part3_words.decoding`."""

    def __init__(self, encoder: Encoder, decoder: _Decoder):
        if encoder.output_dim != decoder.memory_dim:
            raise ValueError(
                "the decoder's memory_dim must equal the encoder's output size "
                f"{encoder.output_dim}; found {decoder.memory_dim}"
            )
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(
        self,
        src: Int[Tensor, "B S"],
        tgt_in: Int[Tensor, "B T"],
        src_lens: Optional[Int[Tensor, "B"]] = None,
    ) -> Float[Tensor, "B T V"]:
        return self.decoder(tgt_in, self.encoder(src, src_lens))[0]

    def attend(
        self,
        src: Int[Tensor, "B S"],
        tgt_in: Int[Tensor, "B T"],
        src_lens: Optional[Int[Tensor, "B"]] = None,
    ) -> tuple[Float[Tensor, "B T V"], Optional[Float[Tensor, "B T S"]]]:
        """Logits and attention weights (None: plain) of every step, teacher forced."""
        return self.decoder(tgt_in, self.encoder(src, src_lens))

    @torch.no_grad()
    def step_fn(
        self, src: Int[Tensor, "B S"], src_lens: Optional[Int[Tensor, "B"]] = None
    ) -> Callable[[Tensor, Tensor], Tensor]:
        """A step function for :func:`lib.part3_words.decoding.beam_search_batch`:
        the sources are encoded once, and each call re-runs the decoder over the
        prefixes (no state is kept), so its log-probabilities are exactly those of
        teacher forcing."""
        memory = self.encoder(src, src_lens)

        @torch.no_grad()
        def step(
            prefixes: Int[Tensor, "N t"], sources: Int[Tensor, "N"]
        ) -> Float[Tensor, "N V"]:
            logits, _ = self.decoder(prefixes, memory.select(sources))  # (N, t, V)
            return F.log_softmax(logits[:, -1], dim=-1)

        return step

    @torch.no_grad()
    def greedy(
        self,
        src: Int[Tensor, "B S"],
        src_lens: Optional[Int[Tensor, "B"]],
        bos: NonNegativeInt,
        eos: NonNegativeInt,
        max_len: PositiveInt,
    ) -> tuple[list[list[int]], Optional[Float[Tensor, "B T S"]]]:
        """Greedy decoding that keeps the decoder's state from step to step (the fast
        path; :meth:`step_fn` re-runs every prefix). The outputs lack bos and end with
        eos if emitted; the weights (None: plain) are zero after an output's end."""
        for name, token in (("bos", bos), ("eos", eos)):
            if token >= self.decoder.vocab_size:
                raise ValueError(
                    f"{name} must be an int <= {self.decoder.vocab_size - 1}; "
                    f"found {token}"
                )
        memory = self.encoder(src, src_lens)
        state, token = self.decoder.start(memory), torch.full((src.shape[0],), bos)
        tokens, weights = [], []
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        for t in range(1, max_len + 1):
            logits, state, step_weights = self.decoder.step(token, state, memory, t)
            # (B,); the first maximum, as lib.part3_words.decoding
            token = logits.argmax(dim=-1)
            tokens.append(token)
            weights.append(step_weights)
            finished = finished | (token == eos)
            if bool(finished.all()):
                break
        rows = torch.stack(tokens, 1).tolist()
        outputs = [row[: row.index(eos) + 1] if eos in row else row for row in rows]
        if weights[0] is None:
            return outputs, None
        lengths = torch.tensor([len(output) for output in outputs])
        width = int(lengths.max())
        after_end = torch.arange(width) >= lengths[:, None]  # (B, T): past the eos
        weights = torch.stack(weights[:width], dim=1)  # (B, T, S)
        return outputs, weights.masked_fill(after_end[..., None], 0.0)


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Sizes shared by the chapter's models; ``hidden_dim`` is per encoder direction."""

    embed_dim: PositiveInt = 16
    hidden_dim: PositiveInt = 32
    cell: Cell = "gru"
    bidirectional: bool = True
    attention_dim: PositiveInt = 32


def build_seq2seq(
    decoder: DecoderName,
    src_vocab_size: PositiveInt,
    tgt_vocab_size: PositiveInt,
    config: Seq2SeqConfig = Seq2SeqConfig(),
    **options,
) -> Seq2Seq:
    """An :class:`Encoder` and a decoder of the kind ``decoder``, of the sizes of
    ``config``; ``options`` go to :class:`LuongDecoder` (score, mode, window, ...)."""
    if options and decoder != "luong":
        raise ValueError(
            f"only the 'luong' decoder takes options; "
            f"found {sorted(options)} for {decoder!r}"
        )
    embed_dim, hidden_dim = config.embed_dim, config.hidden_dim
    encoder = Encoder(
        src_vocab_size, embed_dim, hidden_dim, config.cell, config.bidirectional
    )
    sizes = (tgt_vocab_size, embed_dim, encoder.output_dim)
    if decoder == "plain":
        model = Seq2Seq(encoder, PlainDecoder(*sizes))
    elif decoder == "bahdanau":
        model = Seq2Seq(encoder, BahdanauDecoder(*sizes, config.attention_dim))
    else:
        luong = LuongDecoder(*sizes, attention_dim=config.attention_dim, **options)
        model = Seq2Seq(encoder, luong)
    # What rebuilds the model: save_seq2seq stores it beside the weights.
    model.spec = {
        "decoder": decoder,
        "src_vocab_size": src_vocab_size,
        "tgt_vocab_size": tgt_vocab_size,
        "config": asdict(config),
        "options": dict(options),
    }
    return model


def save_seq2seq(model: Seq2Seq, path: Union[str, os.PathLike]) -> None:
    """Save a model of :func:`build_seq2seq`, its recipe and weights, in one file that
    ``torch.load(path, weights_only=True)`` reads (dicts, strings, numbers, tensors)."""
    if not hasattr(model, "spec"):
        raise TypeError(
            "model must be a Seq2Seq made by build_seq2seq; found one built by hand"
        )
    _check_path(path)
    torch.save({**model.spec, "state": model.state_dict()}, path)


def load_seq2seq(path: Union[str, os.PathLike]) -> Seq2Seq:
    """The model saved by :func:`save_seq2seq` at ``path``, in evaluation mode."""
    _check_path(path)
    saved = torch.load(path, weights_only=True)
    config = Seq2SeqConfig(**saved["config"])
    sizes = saved["src_vocab_size"], saved["tgt_vocab_size"]
    model = build_seq2seq(saved["decoder"], *sizes, config, **saved["options"])
    model.load_state_dict(saved["state"])
    return model.eval()


def _check_path(path: Union[str, os.PathLike]) -> None:
    if not os.fspath(path):
        raise ValueError("path must name a file; found ''")


def _references(data: SequencePairs, eos: NonNegativeInt) -> list[list[int]]:
    """Each target up to and including its ``eos``."""
    rows = data.tgt_out.tolist()
    return [row[: row.index(eos) + 1] if eos in row else row for row in rows]


def greedy_translate(
    model: nn.Module,
    data: SequencePairs,
    bos: NonNegativeInt,
    eos: NonNegativeInt,
    max_len: PositiveInt,
) -> list[list[int]]:
    """Greedy outputs (no bos; eos if emitted, within ``max_len`` tokens) of a model
    with a ``step_fn`` (:class:`Seq2Seq`,
    :class:`lib.part4_attention.transformer.Seq2SeqTransformer`),
    by :func:`lib.part3_words.decoding.beam_search_batch` with one beam."""
    if not callable(getattr(model, "step_fn", None)):
        raise TypeError(
            "model must have a step_fn(src, src_lens) method (Seq2Seq, "
            f"Seq2SeqTransformer); found {type(model).__name__}"
        )
    step = model.step_fn(data.src, data.src_lens)
    hypotheses = beam_search_batch(
        step, len(data), bos, eos, beam_size=1, max_len=max_len
    )
    return [best[0][0] for best in hypotheses]


def beam_translate(
    model: nn.Module,
    data: SequencePairs,
    bos: NonNegativeInt,
    eos: NonNegativeInt,
    beam_size: PositiveInt,
    max_len: PositiveInt,
    alphas: each(Alpha) = (0.0,),
) -> list[list[list[int]]]:
    """For each length-normalisation exponent of ``alphas``, the beam-search output of
    every source (no bos; eos if emitted, within ``max_len`` tokens). One search serves
    every ``alpha``: :func:`lib.part3_words.decoding.beam_search_batch` applies it only
    to rank the finished hypotheses, so each is re-ranked here by
    :func:`lib.part3_words.decoding.normalised_score` (ties: the search's order)."""
    if not callable(getattr(model, "step_fn", None)):
        raise TypeError(
            "model must have a step_fn(src, src_lens) method (Seq2Seq, "
            f"Seq2SeqTransformer); found {type(model).__name__}"
        )
    if not alphas:
        raise ValueError("alphas must hold at least one exponent; found none")
    step = model.step_fn(data.src, data.src_lens)
    hypotheses = beam_search_batch(step, len(data), bos, eos, beam_size, max_len)
    outputs = []
    for alpha in alphas:
        rank = lambda h: normalised_score(h[1], len(h[0]), alpha)  # noqa: E731
        outputs.append([max(finished, key=rank)[0] for finished in hypotheses])
    return outputs


def exact_matches(
    model: nn.Module, data: SequencePairs, bos: NonNegativeInt, eos: NonNegativeInt
) -> Bool[Tensor, "N"]:
    """Which greedy outputs (at most as long as ``data.tgt_out``) equal their targets,
    every token and eos; a :class:`Seq2Seq` decodes with :meth:`Seq2Seq.greedy`, any
    other model with :func:`greedy_translate`."""
    max_len = data.tgt_out.shape[1]
    if isinstance(model, Seq2Seq):
        outputs, _ = model.greedy(data.src, data.src_lens, bos, eos, max_len)
    else:
        outputs = greedy_translate(model, data, bos, eos, max_len)
    pairs = zip(outputs, _references(data, eos))
    return torch.tensor([output == reference for output, reference in pairs])


def alignments(
    model: Seq2Seq, data: SequencePairs, bos: NonNegativeInt, eos: NonNegativeInt
) -> tuple[list[list[int]], Float[Tensor, "N T S"]]:
    """Greedy outputs and the attention weights that produced them (zero after an
    output's end), by :meth:`Seq2Seq.greedy`."""
    max_len = data.tgt_out.shape[1]
    outputs, weights = model.greedy(data.src, data.src_lens, bos, eos, max_len)
    if weights is None:
        raise ValueError(
            "a plain decoder has no attention weights; use a Bahdanau or Luong decoder"
        )
    return outputs, weights


def accuracy_by_length(
    correct: Bool[Tensor, "N"], lens: Int[Tensor, "N"], edges: each(NonNegativeInt)
) -> tuple[list[str], Float[Tensor, "K"], Int[Tensor, "K"]]:
    """Exact-match accuracy (NaN for an empty bin), its labels "a-b" and counts, in bins
    of source length: bin k holds ``edges[k] <= n < edges[k + 1]``."""
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be at least two increasing ints; found {edges!r}")
    if len(lens) and (lens.min() < edges[0] or lens.max() >= edges[-1]):
        raise ValueError(
            f"lens must lie in the bins, [edges[0], edges[-1]) = [{edges[0]}, "
            f"{edges[-1]}); found lengths from {int(lens.min())} to {int(lens.max())}"
        )
    labels, accuracy, counts = [], [], []
    for low, high in zip(edges, edges[1:]):
        inside = (lens >= low) & (lens < high)  # (N,)
        labels.append(f"{low}-{high - 1}" if high - 1 > low else f"{low}")
        counts.append(int(inside.sum()))
        nan = torch.tensor(float("nan"))
        accuracy.append(correct[inside].float().mean() if inside.any() else nan)
    return labels, torch.stack(accuracy), torch.tensor(counts)


def gold_mass(
    weights: Float[Tensor, "N T S"], gold: Bool[Tensor, "N T S"]
) -> Float[Tensor, ""]:
    """The mean attention weight on the gold source positions, over the output steps
    that have one (a row of ``gold`` with no True, such as an end-of-sequence step, is
    left out)."""
    steps = gold.any(-1)  # (N, T)
    if not steps.any():
        raise ValueError("gold must link at least one output step; found none")
    on_gold = (weights * gold).sum(-1)  # (N, T)
    return on_gold[steps].mean()


def hard_alignment(
    weights: Float[Tensor, "N T S"], steps: Bool[Tensor, "N T"]
) -> Bool[Tensor, "N T S"]:
    """One link per output step in ``steps``, to the source position of its largest
    weight (the first, on a tie); no link from the other steps."""
    best = weights.argmax(-1)  # (N, T)
    links = best[..., None] == torch.arange(weights.shape[-1])  # (N, T, S)
    return links & steps[..., None]


def alignment_error_rate(
    alignment: Bool[Tensor, "N T S"],
    sure: Bool[Tensor, "N T S"],
    possible: Optional[Bool[Tensor, "N T S"]] = None,
) -> Fraction:
    r"""Och and Ney's (2003, section 5) alignment error rate of the links
    ``alignment`` = A, against the gold links ``sure`` = S and ``possible`` = P (S when
    None), all counted over the whole corpus:
    :math:`1 - (|A \cap S| + |A \cap P|) / (|A| + |S|)`. With P = S it is 1 minus the
    F-score of A against S."""
    if possible is None:
        possible = sure
    if (sure & ~possible).any():
        raise ValueError(
            "possible must contain every sure link; found a sure link outside"
        )
    total = int(alignment.sum()) + int(sure.sum())
    if total == 0:
        raise ValueError("alignment and sure must hold at least one link; found none")
    agree = int((alignment & sure).sum()) + int((alignment & possible).sum())
    return 1 - agree / total


def _described(value: object) -> str:
    if isinstance(value, Tensor):
        return f"{value.dtype} of shape {tuple(value.shape)}"
    return type(value).__name__
