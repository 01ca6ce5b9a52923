"""Sequence-to-sequence models: a recurrent encoder, and decoders without attention, Bahdanau's and Luong's.

The module follows chapter 10 (syllabus S2S1-S2S5), top to bottom:

1. :class:`Encoder`, a recurrent encoder (GRU or LSTM, optionally bidirectional)
   that returns a :class:`Memory`: every source state :math:`\\bar h_s` and a
   fixed-size summary (the last states).
2. Three decoders, each one GRU cell run step by step, that differ only in where
   their context vector comes from:

   * :class:`PlainDecoder`: the summary, the same at every step (Cho et al., 2014;
     Sutskever et al., 2014);
   * :class:`BahdanauDecoder`: additive attention with the *previous* decoder
     state as query, its context fed into the recurrence (Bahdanau et al., 2015);
   * :class:`LuongDecoder`: attention with the *current* state as query, its
     context combined with the state afterwards, with the scores ``"dot"``,
     ``"general"`` and ``"concat"``, the modes ``"global"``, ``"local-m"`` and
     ``"local-p"`` and optional input feeding (Luong et al., 2015).

   :func:`local_weights` is the local attention on its own.
3. :class:`Seq2Seq` joins an encoder and a decoder; it trains with
   :func:`lib.training.train_seq2seq` and decodes through :mod:`lib.decoding`
   (:meth:`Seq2Seq.step_fn`, :func:`greedy_translate`). :func:`build_seq2seq`
   makes one from a name and :class:`Seq2SeqConfig`; :func:`save_seq2seq` /
   :func:`load_seq2seq` store it.
4. Evaluation: :func:`exact_matches`, :func:`accuracy_by_length` and
   :func:`alignments` (greedy outputs and the weights that produced them).
5. :func:`train_model`, a seeded initialisation then training, and
   :data:`WEIGHTS_DIR`, where the models too slow to train in the chapter are
   kept (``python -m lib.weights`` makes them).

The chapter's task, dates in human formats to ISO 8601, is
:class:`lib.tasks.DateTask`; its pointer network is :mod:`lib.pointer`.

The scores, the masked softmax and the weighted average all come from
:mod:`lib.attention`; the recurrent layers are ``torch.nn``'s, which chapters 3-4
showed equal to :mod:`lib.rnn`'s cells written from their equations.

Conventions: batch-first tensors. ``B`` batch, ``S`` source positions, ``T``
target positions (decoder steps), ``E`` embedding size, ``H`` encoder states per
direction, ``De`` the size of a source state (``H`` or ``2H``), ``V`` the target
vocabulary. Source positions are counted from 1 in the formulas (as in the
papers) and from 0 in tensors.

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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lib.attention import AdditiveScore, BilinearScore, DotScore, attention, masked_softmax
from lib.decoding import beam_search_batch
from lib.tasks.reversal import ReversalTask
from lib.training import SequencePairs, TrainingLog, train_seq2seq
from lib.validation import (require_float_tensors, require_instance, require_int, require_ints, require_lengths,
                             require_number, require_tokens)

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
    "exact_matches",
    "accuracy_by_length",
    "alignments",
    "train_model",
    "LUONG_VARIANTS",
    "LuongAblation",
    "ablate_luong",
    "WEIGHTS_DIR",
]

LUONG_SCORES = ("dot", "general", "concat")
LUONG_MODES = ("global", "local-m", "local-p")
DECODERS = ("plain", "bahdanau", "luong")


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_choice(name: str, value: object, choices: Sequence[str]) -> None:
    # The choices are listed as 'a', 'b' rather than as a tuple, as this module's messages always were.
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; found {value!r}")


def _check_encoder(cell: object, bidirectional: object, **sizes: object) -> None:
    # Encoder's arguments: a cell name, a bool, and sizes that are ints >= 1.
    _require_choice("cell", cell, ("gru", "lstm"))
    require_instance("bidirectional", bidirectional, bool)
    require_ints(**sizes)


def _check_memory(memory: object, memory_dim: int) -> None:
    # A decoder's memory: a Memory whose source states have the decoder's memory_dim.
    if not isinstance(memory, Memory) or memory.states.shape[-1] != memory_dim:
        found = tuple(memory.states.shape) if isinstance(memory, Memory) else type(memory).__name__
        raise ValueError(f"memory must be a Memory with states (B, S, {memory_dim}); found {found}")


def _check_luong(score: object, mode: object, input_feeding: object, **sizes: object) -> None:
    # LuongDecoder's arguments: two choices, a bool, and sizes (window included) that are ints >= 1.
    _require_choice("score", score, LUONG_SCORES)
    _require_choice("mode", mode, LUONG_MODES)
    require_instance("input_feeding", input_feeding, bool)
    require_ints(**sizes)


def _check_local(scores: object, lens: object, centre: object, window: object) -> None:
    # local_weights' arguments: float scores (B, S) and centres (B,), integer lengths (B,), an int window.
    require_float_tensors(scores=scores, centre=centre)
    require_int("window", window)
    if scores.dim() != 2 or centre.shape != scores.shape[:1]:
        raise ValueError(f"scores must have shape (B, S), lens and centre (B,); found {tuple(scores.shape)}, "
                         f"{tuple(getattr(lens, 'shape', ()))}, {tuple(centre.shape)}")
    require_lengths("lens", lens, *scores.shape)


def _check_parts(encoder: object, decoder: object) -> None:
    # Seq2Seq's parts: an Encoder and a decoder whose memory_dim is the size of the encoder's states.
    if not isinstance(encoder, Encoder):
        raise TypeError(f"encoder must be an Encoder; found {type(encoder).__name__}")
    if not isinstance(decoder, _Decoder):
        raise TypeError(f"decoder must be a PlainDecoder, BahdanauDecoder or LuongDecoder; found "
                        f"{type(decoder).__name__}")
    if encoder.output_dim != decoder.memory_dim:
        raise ValueError(f"the decoder's memory_dim must equal the encoder's output size {encoder.output_dim}; "
                         f"found {decoder.memory_dim}")


def _check_greedy(bos: object, eos: object, max_len: object, vocab_size: int) -> None:
    # Seq2Seq.greedy's arguments: bos and eos are target ids, max_len a number of tokens >= 1.
    require_int("bos", bos, 0, maximum=vocab_size - 1)
    require_int("eos", eos, 0, maximum=vocab_size - 1)
    require_int("max_len", max_len)


def _check_build(decoder: object, config: object, options: dict) -> None:
    # build_seq2seq's arguments: a decoder name, a Seq2SeqConfig, and options only for the Luong decoder.
    _require_choice("decoder", decoder, DECODERS)
    require_instance("config", config, Seq2SeqConfig)
    if options and decoder != "luong":
        raise ValueError(f"only the 'luong' decoder takes options; found {sorted(options)} for {decoder!r}")


def _check_bins(correct: object, lens: object, edges: object) -> None:
    # accuracy_by_length's arguments: two tensors of shape (N,) and at least two increasing int edges.
    require_instance("correct", correct, Tensor)
    require_instance("lens", lens, Tensor)
    if correct.shape != lens.shape or correct.dim() != 1:
        raise ValueError(f"correct and lens must have the same shape (N,); found {tuple(correct.shape)} and "
                         f"{tuple(lens.shape)}")
    if not isinstance(edges, Sequence) or len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be at least two increasing ints; found {edges!r}")


def _check_pairs(model: object, data: object, greedy: bool = False) -> None:
    # The evaluation functions: a model that decodes (a Seq2Seq when greedy) and a SequencePairs.
    if greedy:
        require_instance("model", model, Seq2Seq)
    elif not callable(getattr(model, "step_fn", None)):
        raise TypeError(f"model must have a step_fn(src, src_lens) method (Seq2Seq, Seq2SeqTransformer); "
                        f"found {type(model).__name__}")
    require_instance("data", data, SequencePairs)


@dataclass(frozen=True)
class Memory:
    """What the encoder hands the decoder.

    Shapes
    ------
    states : (B, S, De), the source states h̄_1 .. h̄_S (zeros at padding)
    lens : (B,), the number of real source tokens
    summary : (B, De), the fixed-size summary u (the last states)
    """

    states: Tensor
    lens: Tensor
    summary: Tensor

    def select(self, index: Tensor) -> "Memory":
        """The memories of the sources ``index`` (rows may repeat, as in beam search)."""
        return Memory(self.states[index], self.lens[index], self.summary[index])


class Encoder(nn.Module):
    r"""A recurrent encoder: :math:`\bar{h}_s = f(\bar{h}_{s-1}, x_s)` for :math:`s = 1, \dots, S`.

    With ``bidirectional=True`` a second network reads the source from its
    end, :math:`\overleftarrow{h}_s = f(\overleftarrow{h}_{s+1}, x_s)`, and
    :math:`\bar{h}_s = [\overrightarrow{h}_s; \overleftarrow{h}_s]` describes
    token ``s`` with both its left and its right context (Bahdanau et al.).
    The summary is the state after the last real token,
    :math:`u = \bar{h}_S`, or :math:`[\overrightarrow{h}_S; \overleftarrow{h}_1]`
    for two directions. Padded sources are packed, so neither direction reads
    padding.

    Parameters
    ----------
    vocab_size, embed_dim, hidden_dim : int
        ``V_src``, ``E`` and ``H`` (per direction).
    cell : {"gru", "lstm"}
    bidirectional : bool

    Returns
    -------
    Memory
        ``forward(src, src_lens)``.

    Shapes
    ------
    src : (B, S)
    src_lens : (B,)
    memory.states : (B, S, De) with De = H * directions
    memory.summary : (B, De)
    """

    def __init__(self, vocab_size: int, embed_dim: int, hidden_dim: int, cell: str = "gru",
                 bidirectional: bool = True):
        _check_encoder(cell, bidirectional, vocab_size=vocab_size, embed_dim=embed_dim, hidden_dim=hidden_dim)
        super().__init__()
        self.vocab_size, self.cell = vocab_size, cell
        self.output_dim = hidden_dim * (2 if bidirectional else 1)
        self.embed = nn.Embedding(vocab_size, embed_dim)
        recurrent = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = recurrent(embed_dim, hidden_dim, batch_first=True, bidirectional=bidirectional)

    def forward(self, src: Tensor, src_lens: Optional[Tensor] = None) -> Memory:
        require_tokens("src", src, self.vocab_size)
        batch, width = src.shape
        lens = torch.full((batch,), width) if src_lens is None else require_lengths("src_lens", src_lens, batch, width)
        packed = pack_padded_sequence(self.embed(src), lens.cpu(), batch_first=True, enforce_sorted=False)
        outputs, final = self.rnn(packed)
        states, _ = pad_packed_sequence(outputs, batch_first=True, total_length=width)  # (B, S, De)
        h_n = final[0] if self.cell == "lstm" else final  # (directions, B, H); an LSTM's c_n is not passed on
        summary = torch.cat(tuple(h_n), dim=-1)  # (B, De): [h_S] or [forward h_S; backward h_1]
        return Memory(states, lens, summary)


# ---------------------------------------------------------------------------
# Decoders. Each runs a GRU cell one step at a time; they differ in the context.
# ---------------------------------------------------------------------------


class _Decoder(nn.Module):
    """What the three decoders share: embedding, GRU cell, the teacher-forced loop.

    Subclasses implement ``step(token, state, memory, t)`` returning
    ``(logits (B, V), state, weights (B, S) or None)``; ``t`` is the 1-based step.
    """

    def __init__(self, vocab_size: int, embed_dim: int, memory_dim: int, input_dim: int):
        # The subclasses check the sizes before they compute input_dim from them.
        super().__init__()
        self.vocab_size, self.memory_dim = vocab_size, memory_dim
        self.embed = nn.Embedding(vocab_size, embed_dim)
        # The decoder's state has the size of a source state, so u can start it
        # and the dot score can compare the two directly.
        self.cell = nn.GRUCell(input_dim, memory_dim)

    def start(self, memory: Memory):
        """The state before the first step: the encoder's summary, h_0 = u."""
        return memory.summary

    def forward(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, Optional[Tensor]]:
        """Teacher forcing: run every step on the given inputs.

        Returns
        -------
        logits : Tensor
        weights : Tensor or None
            The attention weights of every step (None for :class:`PlainDecoder`).

        Shapes
        ------
        tgt_in : (B, T)
        logits : (B, T, V)
        weights : (B, T, S)
        """
        logits, weights, _ = self.unroll(tgt_in, memory)
        return logits, weights

    def unroll(self, tgt_in: Tensor, memory: Memory) -> tuple[Tensor, Optional[Tensor], list]:
        """:meth:`forward`, plus the decoder's state after every step.

        Shapes
        ------
        tgt_in : (B, T)
        logits : (B, T, V); weights : (B, T, S) or None; states : a list of T states
        """
        require_tokens("tgt_in", tgt_in, self.vocab_size), _check_memory(memory, self.memory_dim)
        state, all_logits, all_weights, states = self.start(memory), [], [], []
        for t in range(tgt_in.shape[1]):
            logits, state, weights = self.step(tgt_in[:, t], state, memory, t + 1)
            all_logits.append(logits)
            all_weights.append(weights)
            states.append(state)
        weights = None if all_weights[0] is None else torch.stack(all_weights, dim=1)  # (B, T, S)
        return torch.stack(all_logits, dim=1), weights, states  # (B, T, V), (B, T, S), T states


class PlainDecoder(_Decoder):
    r"""The encoder-decoder without attention: the context is the summary at every step.

    .. math:: h_0 = u, \qquad h_t = f(h_{t-1}, [y_{t-1}; u]), \qquad o_t = \mathrm{softmax}(W_o h_t)

    Feeding ``u`` at every step (Cho et al., 2014) keeps it from fading as
    the state changes; it is still one vector of fixed size for any source.

    Shapes
    ------
    See :meth:`_Decoder.forward`: logits (B, T, V), weights None.
    """

    def __init__(self, vocab_size: int, embed_dim: int, memory_dim: int):
        require_ints(vocab_size=vocab_size, embed_dim=embed_dim, memory_dim=memory_dim)
        super().__init__(vocab_size, embed_dim, memory_dim, input_dim=embed_dim + memory_dim)
        self.output = nn.Linear(memory_dim, vocab_size)

    def step(self, token: Tensor, state: Tensor, memory: Memory, t: int):
        """One step: the logits of token ``t`` and the new state, from the previous token.

        Shapes
        ------
        token : (B,), y_(t-1)
        logits : (B, V)
        weights : (B, S), here None
        """
        h = self.cell(torch.cat((self.embed(token), memory.summary), dim=-1), state)  # (B, De)
        return self.output(h), h, None


class BahdanauDecoder(_Decoder):
    r"""Attention before the recurrence (Bahdanau et al., 2015).

    The previous state asks the question; the answer enters the new state:

    .. math::
        \alpha_{t,s} = \mathrm{softmax}_s\big(v^\top \tanh(W h_{t-1} + U \bar{h}_s)\big), \qquad
        c_t = \textstyle\sum_s \alpha_{t,s} \bar{h}_s, \\
        h_t = f(h_{t-1}, [y_{t-1}; c_t]), \qquad
        o_t = \mathrm{softmax}(W_o [h_t; c_t; y_{t-1}])

    (The paper's output layer has a maxout hidden layer; here it is linear.)

    Parameters
    ----------
    vocab_size, embed_dim : int
    memory_dim : int
        ``De``, the size of a source state (and of the decoder's state).
    attention_dim : int
        Hidden width of the additive score.

    Shapes
    ------
    See :meth:`_Decoder.forward`: logits (B, T, V), weights (B, T, S).
    """

    def __init__(self, vocab_size: int, embed_dim: int, memory_dim: int, attention_dim: int = 32):
        require_ints(vocab_size=vocab_size, embed_dim=embed_dim, memory_dim=memory_dim, attention_dim=attention_dim)
        super().__init__(vocab_size, embed_dim, memory_dim, input_dim=embed_dim + memory_dim)
        self.score = AdditiveScore(memory_dim, memory_dim, attention_dim)
        self.output = nn.Linear(2 * memory_dim + embed_dim, vocab_size)

    def step(self, token: Tensor, state: Tensor, memory: Memory, t: int):
        """One step: the logits of token ``t`` and the new state, from the previous token.

        Shapes
        ------
        token : (B,), y_(t-1)
        logits : (B, V)
        weights : (B, S)
        """
        embedded = self.embed(token)  # (B, E)
        context, weights = attention(state[:, None], memory.states, memory.states, self.score, memory.lens)
        context, weights = context[:, 0], weights[:, 0]  # (B, De), (B, S)
        h = self.cell(torch.cat((embedded, context), dim=-1), state)  # (B, De)
        return self.output(torch.cat((h, context, embedded), dim=-1)), h, weights


def local_weights(scores: Tensor, lens: Tensor, centre: Tensor, window: int, gaussian: bool) -> Tensor:
    r"""Local attention weights (Luong et al., 2015) around a centre :math:`p_t`.

    Only the positions :math:`s` (counted from 1) with :math:`|s - p_t| \le D`
    and :math:`s \le` the source length take part: the scores of the others
    are set to :math:`-\infty` before :func:`lib.attention.masked_softmax`, so
    their weights are exactly 0. With ``gaussian=True`` (local-p) the window's
    softmax is multiplied by :math:`\exp(-(s - p_t)^2 / 2\sigma^2)` with
    :math:`\sigma = D/2`, as in the paper; the weights then sum to less than 1
    (the paper does not renormalise). A window with no source position in it
    gives all-zero weights.

    Parameters
    ----------
    scores : Tensor
        Alignment scores of every source position.
    lens : Tensor
        Source lengths.
    centre : Tensor
        :math:`p_t`, in source positions counted from 1 (a float).
    window : int
        :math:`D \ge 1`, the half-width of the window.
    gaussian : bool
        Multiply by the Gaussian (local-p) or not (local-m).

    Returns
    -------
    Tensor
        The weights :math:`a_t(s)`.

    Shapes
    ------
    scores : (B, S)
    lens : (B,)
    centre : (B,)
    output : (B, S)
    """
    _check_local(scores, lens, centre, window)
    positions = torch.arange(1, scores.shape[1] + 1, dtype=scores.dtype)  # (S,): s = 1 .. S
    distance = positions - centre[:, None]  # (B, S): s - p_t
    outside = distance.abs() > window  # (B, S)
    weights = masked_softmax(scores.masked_fill(outside, float("-inf")), lens)  # (B, S)
    if gaussian:
        sigma = window / 2
        weights = weights * torch.exp(-(distance**2) / (2 * sigma**2))  # (B, S)
    return weights


class LuongDecoder(_Decoder):
    r"""Attention after the recurrence (Luong et al., 2015).

    The new state asks the question; the answer is combined with it to predict:

    .. math::
        h_t = f(h_{t-1}, [y_{t-1}; \tilde{h}_{t-1}]) \;\text{(input feeding; else } f(h_{t-1}, y_{t-1})\text{)}, \\
        a_t(s) = \mathrm{align}(h_t, \bar{h}_s), \quad c_t = \textstyle\sum_s a_t(s) \bar{h}_s, \quad
        \tilde{h}_t = \tanh(W_c [c_t; h_t]), \quad o_t = \mathrm{softmax}(W_s \tilde{h}_t)

    Scores: ``"dot"`` :math:`h_t^\top \bar{h}_s`, ``"general"``
    :math:`h_t^\top W_a \bar{h}_s` (:class:`lib.attention.BilinearScore`) and
    ``"concat"`` :math:`v_a^\top \tanh(W_a [h_t; \bar{h}_s])`, which is the
    additive score with ``W_a`` split into its query and key halves
    (:class:`lib.attention.AdditiveScore`).

    Modes: ``"global"`` softmaxes over all source positions. ``"local-m"``
    uses the window :math:`[p_t - D, p_t + D]` with :math:`p_t = t`;
    ``"local-p"`` predicts :math:`p_t = S \cdot \mathrm{sigmoid}(v_p^\top \tanh(W_p h_t))`
    (``S`` = the source length) and multiplies by a Gaussian with
    :math:`\sigma = D/2` (:func:`local_weights`).

    Parameters
    ----------
    vocab_size, embed_dim, memory_dim : int
        As :class:`BahdanauDecoder`.
    score : {"dot", "general", "concat"}
    mode : {"global", "local-m", "local-p"}
    window : int
        ``D`` for the local modes.
    input_feeding : bool
        Feed :math:`\tilde{h}_{t-1}` into the next step.
    attention_dim : int
        Hidden width of the ``"concat"`` score and of the ``p_t`` predictor.

    Shapes
    ------
    See :meth:`_Decoder.forward`: logits (B, T, V), weights (B, T, S).
    """

    def __init__(self, vocab_size: int, embed_dim: int, memory_dim: int, score: str = "general",
                 mode: str = "global", window: int = 3, input_feeding: bool = True, attention_dim: int = 32):
        _check_luong(score, mode, input_feeding, vocab_size=vocab_size, embed_dim=embed_dim, memory_dim=memory_dim,
                     window=window, attention_dim=attention_dim)
        super().__init__(vocab_size, embed_dim, memory_dim,
                         input_dim=embed_dim + (memory_dim if input_feeding else 0))
        self.mode, self.window, self.input_feeding = mode, window, input_feeding
        if score == "dot":
            self.score = DotScore()
        elif score == "general":
            self.score = BilinearScore(memory_dim, memory_dim)
        else:
            self.score = AdditiveScore(memory_dim, memory_dim, attention_dim)
        if mode == "local-p":
            self.position = nn.Sequential(  # v_p^T tanh(W_p h_t)
                nn.Linear(memory_dim, attention_dim, bias=False), nn.Tanh(), nn.Linear(attention_dim, 1, bias=False)
            )
        self.combine = nn.Linear(2 * memory_dim, memory_dim, bias=False)  # W_c
        self.output = nn.Linear(memory_dim, vocab_size)  # W_s

    def start(self, memory: Memory):
        # h_0 = u; the attentional vector fed into step 1 is zero.
        return memory.summary, torch.zeros_like(memory.summary)

    def centre(self, h: Tensor, memory: Memory, t: int) -> Tensor:
        """The window's centre :math:`p_t` (1-based source position) for the local modes.

        Shapes
        ------
        h : (B, De)
        output : (B,)
        """
        if self.mode == "local-m":
            return torch.full(memory.lens.shape, float(t), dtype=h.dtype)
        return memory.lens.to(h.dtype) * torch.sigmoid(self.position(h)[:, 0])  # S * sigmoid(...)

    def centres(self, tgt_in: Tensor, memory: Memory) -> Tensor:
        """:math:`p_t` of every step under teacher forcing (local modes), for plotting the windows.

        Shapes
        ------
        tgt_in : (B, T)
        output : (B, T)
        """
        if self.mode == "global":
            raise ValueError("global attention has no window centre; use mode 'local-m' or 'local-p'")
        _, _, states = self.unroll(tgt_in, memory)
        return torch.stack([self.centre(h, memory, t + 1) for t, (h, _) in enumerate(states)], dim=1)

    def step(self, token: Tensor, state, memory: Memory, t: int):
        """One step: the logits of token ``t`` and the new state, from the previous token.

        Shapes
        ------
        token : (B,), y_(t-1)
        logits : (B, V)
        weights : (B, S); the state is the pair (h_t, h~_t)
        """
        h_prev, attentional_prev = state
        embedded = self.embed(token)  # (B, E)
        inputs = torch.cat((embedded, attentional_prev), dim=-1) if self.input_feeding else embedded
        h = self.cell(inputs, h_prev)  # (B, De)
        scores = self.score(h[:, None], memory.states)[:, 0]  # (B, S)
        if self.mode == "global":
            weights = masked_softmax(scores, memory.lens)  # (B, S)
        else:
            centre = self.centre(h, memory, t)  # (B,)
            weights = local_weights(scores, memory.lens, centre, self.window, gaussian=self.mode == "local-p")
        context = (weights[:, None] @ memory.states)[:, 0]  # (B, 1, S) @ (B, S, De) -> (B, De)
        attentional = torch.tanh(self.combine(torch.cat((context, h), dim=-1)))  # h~_t: (B, De)
        return self.output(attentional), (h, attentional), weights


# ---------------------------------------------------------------------------
# Encoder + decoder.
# ---------------------------------------------------------------------------


class Seq2Seq(nn.Module):
    """An encoder and a decoder; the interface of :func:`lib.training.train_seq2seq`.

    Parameters
    ----------
    encoder : Encoder
    decoder : PlainDecoder, BahdanauDecoder or LuongDecoder

    Shapes
    ------
    src : (B, S)
    tgt_in : (B, T)
    src_lens : (B,)
    output : (B, T, V)
    """

    def __init__(self, encoder: Encoder, decoder: _Decoder):
        _check_parts(encoder, decoder)
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, src: Tensor, tgt_in: Tensor, src_lens: Optional[Tensor] = None) -> Tensor:
        return self.decoder(tgt_in, self.encoder(src, src_lens))[0]

    def attend(self, src: Tensor, tgt_in: Tensor, src_lens: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor]]:
        """Logits and attention weights of every decoder step (teacher forcing).

        Shapes
        ------
        logits : (B, T, V)
        weights : (B, T, S), or None for a plain decoder
        """
        return self.decoder(tgt_in, self.encoder(src, src_lens))

    @torch.no_grad()
    def step_fn(self, src: Tensor, src_lens: Optional[Tensor] = None) -> Callable[[Tensor, Tensor], Tensor]:
        """A batched step function for :func:`lib.decoding.beam_search_batch`.

        The sources are encoded once. Each call re-runs the decoder over the
        given prefixes (the plain reference: no state is cached between calls),
        so a prefix's log-probabilities are exactly those of teacher forcing.

        Shapes
        ------
        prefixes : (N, t), starting with bos
        sources : (N,)
        output : (N, V) log-probabilities of the next token
        """
        memory = self.encoder(src, src_lens)

        @torch.no_grad()
        def step(prefixes: Tensor, sources: Tensor) -> Tensor:
            logits, _ = self.decoder(prefixes, memory.select(sources))  # (N, t, V)
            return F.log_softmax(logits[:, -1], dim=-1)  # (N, V)

        return step

    @torch.no_grad()
    def greedy(self, src: Tensor, src_lens: Optional[Tensor], bos: int, eos: int,
               max_len: int) -> tuple[list[list[int]], Optional[Tensor]]:
        """Greedy decoding that keeps the decoder's state from step to step.

        The fast path: one decoder step per output token, where :meth:`step_fn`
        with :mod:`lib.decoding` re-runs the decoder over every prefix. The
        tests check that both give the same outputs, and that the weights are
        those of teacher forcing the outputs.

        Returns
        -------
        outputs : list of list of int
            Without ``bos``, ending with ``eos`` if it was emitted within ``max_len`` tokens.
        weights : Tensor or None
            The attention weights of every step; rows after an output's last
            token are zero. None for a plain decoder.

        Shapes
        ------
        src : (B, S)
        weights : (B, T, S), T = the longest output
        """
        _check_greedy(bos, eos, max_len, self.decoder.vocab_size)
        memory = self.encoder(src, src_lens)
        state, token = self.decoder.start(memory), torch.full((src.shape[0],), bos)
        tokens, weights = [], []
        finished = torch.zeros(src.shape[0], dtype=torch.bool)
        for t in range(1, max_len + 1):
            logits, state, step_weights = self.decoder.step(token, state, memory, t)
            token = logits.argmax(dim=-1)  # (B,); the first maximum on ties, as lib.decoding
            tokens.append(token)
            weights.append(step_weights)
            finished = finished | (token == eos)
            if bool(finished.all()):
                break
        outputs = [row[: row.index(eos) + 1] if eos in row else row for row in torch.stack(tokens, 1).tolist()]
        if weights[0] is None:
            return outputs, None
        lengths = torch.tensor([len(output) for output in outputs])
        width = int(lengths.max())
        after_end = torch.arange(width) >= lengths[:, None]  # (B, T): steps after an output's eos
        return outputs, torch.stack(weights[:width], dim=1).masked_fill(after_end[..., None], 0.0)


@dataclass(frozen=True)
class Seq2SeqConfig:
    """Sizes shared by the chapter's models.

    ``hidden_dim`` is per encoder direction; every decoder state has the size
    of a source state, ``De = hidden_dim * (2 if bidirectional else 1)``.
    """

    embed_dim: int = 16
    hidden_dim: int = 32
    cell: str = "gru"
    bidirectional: bool = True
    attention_dim: int = 32


def build_seq2seq(decoder: str, src_vocab_size: int, tgt_vocab_size: int,
                  config: Seq2SeqConfig = Seq2SeqConfig(), **options) -> Seq2Seq:
    """An :class:`Encoder` and a decoder of the given kind with the sizes of ``config``.

    Parameters
    ----------
    decoder : {"plain", "bahdanau", "luong"}
    src_vocab_size, tgt_vocab_size : int
    config : Seq2SeqConfig
    **options
        Extra arguments of :class:`LuongDecoder` (``score``, ``mode``,
        ``window``, ``input_feeding``).

    Returns
    -------
    Seq2Seq

    Shapes
    ------
    As :class:`Seq2Seq`.
    """
    _check_build(decoder, config, options)
    encoder = Encoder(src_vocab_size, config.embed_dim, config.hidden_dim, config.cell, config.bidirectional)
    memory_dim = encoder.output_dim
    if decoder == "plain":
        model = Seq2Seq(encoder, PlainDecoder(tgt_vocab_size, config.embed_dim, memory_dim))
    elif decoder == "bahdanau":
        model = Seq2Seq(encoder, BahdanauDecoder(tgt_vocab_size, config.embed_dim, memory_dim, config.attention_dim))
    else:
        model = Seq2Seq(encoder, LuongDecoder(tgt_vocab_size, config.embed_dim, memory_dim,
                                              attention_dim=config.attention_dim, **options))
    # What rebuilds the model: save_seq2seq stores it beside the weights.
    model.spec = {"decoder": decoder, "src_vocab_size": src_vocab_size, "tgt_vocab_size": tgt_vocab_size,
                  "config": asdict(config), "options": dict(options)}
    return model


def save_seq2seq(model: Seq2Seq, path) -> None:
    """Save a model made by :func:`build_seq2seq`: its recipe and its weights, in one file.

    The file holds only dicts, strings, numbers and tensors, so
    ``torch.load(path, weights_only=True)`` reads it.
    """
    if not isinstance(model, Seq2Seq) or not hasattr(model, "spec"):
        raise TypeError(f"model must be a Seq2Seq made by build_seq2seq; found {type(model).__name__}")
    torch.save({**model.spec, "state": model.state_dict()}, path)


def load_seq2seq(path) -> Seq2Seq:
    """The model saved by :func:`save_seq2seq` at ``path``, in evaluation mode.

    Returns
    -------
    Seq2Seq
    """
    saved = torch.load(path, weights_only=True)
    model = build_seq2seq(saved["decoder"], saved["src_vocab_size"], saved["tgt_vocab_size"],
                          Seq2SeqConfig(**saved["config"]), **saved["options"])
    model.load_state_dict(saved["state"])
    return model.eval()


# ---------------------------------------------------------------------------
# Evaluation: exact match, accuracy by length, alignments.
# ---------------------------------------------------------------------------


def _references(data: SequencePairs, eos: int) -> list[list[int]]:
    """Each target up to and including its ``eos``."""
    rows = data.tgt_out.tolist()
    return [row[: row.index(eos) + 1] if eos in row else row for row in rows]


def greedy_translate(model: nn.Module, data: SequencePairs, bos: int, eos: int, max_len: int) -> list[list[int]]:
    """Greedy outputs for every source, with :func:`lib.decoding.beam_search_batch` and one beam.

    Parameters
    ----------
    model : nn.Module
        Has ``step_fn(src, src_lens)`` (:class:`Seq2Seq`, :class:`lib.transformer.Seq2SeqTransformer`).
    data : SequencePairs
    bos, eos : int
    max_len : int
        Largest number of output tokens (``eos`` included).

    Returns
    -------
    list of list of int
        One output per source, without ``bos``, ending with ``eos`` if emitted.

    Shapes
    ------
    data.src : (N, S) -> N outputs
    """
    _check_pairs(model, data)
    step = model.step_fn(data.src, data.src_lens)
    hypotheses = beam_search_batch(step, len(data), bos, eos, beam_size=1, max_len=max_len)
    return [best[0][0] for best in hypotheses]


def exact_matches(model: nn.Module, data: SequencePairs, bos: int, eos: int) -> Tensor:
    """Which greedy outputs equal their references exactly (every token and ``eos``).

    A :class:`Seq2Seq` decodes with its fast :meth:`Seq2Seq.greedy`; any other
    model with a ``step_fn`` through :func:`greedy_translate`
    (:mod:`lib.decoding`, one beam). Outputs have at most as many tokens as
    ``data.tgt_out`` has columns.

    Returns
    -------
    Tensor
        Booleans, one per example.

    Shapes
    ------
    data.src : (N, S)
    output : (N,)
    """
    _check_pairs(model, data)
    max_len = data.tgt_out.shape[1]
    if isinstance(model, Seq2Seq):
        outputs, _ = model.greedy(data.src, data.src_lens, bos, eos, max_len)
    else:
        outputs = greedy_translate(model, data, bos, eos, max_len)
    return torch.tensor([o == r for o, r in zip(outputs, _references(data, eos))])


def alignments(model: Seq2Seq, data: SequencePairs, bos: int, eos: int) -> tuple[list[list[int]], Tensor]:
    """Greedy outputs and the attention weights the model used to produce them (:meth:`Seq2Seq.greedy`).

    Returns
    -------
    outputs : list of list of int
        Without ``bos``, ending with ``eos`` if emitted.
    weights : Tensor
        Rows after an example's last output token are zero.

    Shapes
    ------
    data.src : (N, S)
    weights : (N, T, S), T = the longest output
    """
    _check_pairs(model, data, greedy=True)
    outputs, weights = model.greedy(data.src, data.src_lens, bos, eos, max_len=data.tgt_out.shape[1])
    if weights is None:
        raise ValueError("a plain decoder has no attention weights; use a Bahdanau or Luong decoder")
    return outputs, weights


def accuracy_by_length(correct: Tensor, lens: Tensor, edges: Sequence[int]) -> tuple[list[str], Tensor, Tensor]:
    """Exact-match accuracy in bins of source length.

    Parameters
    ----------
    correct : Tensor
        Booleans, one per example (:func:`exact_matches`).
    lens : Tensor
        Source lengths.
    edges : sequence of int
        Increasing bin edges: bin ``k`` holds lengths ``edges[k] <= n < edges[k + 1]``.

    Returns
    -------
    labels : list of str
        ``"a-b"`` for each bin (inclusive).
    accuracy : Tensor
        NaN for an empty bin.
    counts : Tensor

    Shapes
    ------
    correct, lens : (N,)
    accuracy, counts : (len(edges) - 1,)
    """
    _check_bins(correct, lens, edges)
    labels, accuracy, counts = [], [], []
    for low, high in zip(edges, edges[1:]):
        inside = (lens >= low) & (lens < high)  # (N,)
        labels.append(f"{low}-{high - 1}" if high - 1 > low else f"{low}")
        counts.append(int(inside.sum()))
        accuracy.append(correct[inside].float().mean() if inside.any() else torch.tensor(float("nan")))
    return labels, torch.stack(accuracy), torch.tensor(counts)


# ---------------------------------------------------------------------------
# Training a model from a seeded initialisation, and where the trained weights are kept.
# ---------------------------------------------------------------------------


# The models of chapter 10 that are trained by the script, not in the notebook, and where they are kept.
WEIGHTS_DIR = Path(__file__).with_name("weights")  # shipped with the package: chapter 10 runs from a wheel
def train_model(decoder: str, src_vocab_size: int, tgt_vocab_size: int, train: SequencePairs, epochs: int,
                lr: float = 1e-2, batch_size: int = 64, seed: int = 0, config: Seq2SeqConfig = Seq2SeqConfig(),
                **options) -> tuple[Seq2Seq, TrainingLog]:
    """Build a model (:func:`build_seq2seq`) from a seeded initialisation and train it.

    Training is :func:`lib.training.train_seq2seq`: Adam, cross-entropy,
    teacher forcing, a seeded order of the examples.

    Returns
    -------
    model : Seq2Seq
        In evaluation mode.
    log : TrainingLog

    Shapes
    ------
    train.src : (N, S); train.tgt_in, train.tgt_out : (N, T)
    """
    torch.manual_seed(seed)
    model = build_seq2seq(decoder, src_vocab_size, tgt_vocab_size, config, **options)
    log = train_seq2seq(model, train, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    return model, log


# Chapter 10's ablation of two of Luong's choices: name -> options of build_seq2seq("luong", ...).
LUONG_VARIANTS = {"global": dict(mode="global"),
                  "local-m": dict(mode="local-m", window=2),
                  "global, no input feeding": dict(mode="global", input_feeding=False)}


@dataclass
class LuongAblation:
    """What :func:`ablate_luong` measured, keyed by ``(task name, variant name)``.

    Attributes
    ----------
    data : dict
        Task name -> ``(train, test)`` :class:`lib.training.SequencePairs`.
    exact : dict
        Exact match of each seed on all test strings, a float tensor ``(seeds,)``.
    exact_long : dict
        The same on the test strings of at least ``long_from`` tokens.
    models : dict
        The model trained from the first seed (in evaluation mode).
    """

    data: dict[str, tuple[SequencePairs, SequencePairs]]
    exact: dict[tuple[str, str], Tensor]
    exact_long: dict[tuple[str, str], Tensor]
    models: dict[tuple[str, str], Seq2Seq]


def ablate_luong(tasks: Mapping[str, ReversalTask], runs: Sequence[tuple[str, str]], seeds: Sequence[int],
                 variants: Mapping[str, dict] = LUONG_VARIANTS, n_train: int = 1000, n_test: int = 500,
                 data_seed: int = 0, epochs: int = 3, settling_epochs: int = 0, lr: float = 1e-2,
                 long_from: int = 6) -> LuongAblation:
    """Train Luong models of several variants on several digit tasks, from several seeds; score them.

    Each task first draws its ``n_train`` training and ``n_test`` test strings with
    ``task.split(..., seed=data_seed)`` (tasks of the same lengths draw the same
    strings). Then, for each ``(task name, variant name)`` of ``runs`` in order and
    each seed, :func:`train_model` trains ``"luong"`` with the variant's options for
    ``epochs`` passes at the learning rate ``lr`` from that seed, then
    ``settling_epochs`` more passes at a tenth of it (a fresh Adam; as
    ``python -m lib.weights`` settles the date models), and :func:`exact_matches`
    decodes the test strings greedily.

    Parameters
    ----------
    tasks : mapping of str to ReversalTask
        Task name -> a digit task (:class:`lib.tasks.ReversalTask`, :class:`lib.tasks.CopyTask`).
    runs : sequence of (str, str)
        The ``(task name, variant name)`` pairs to train.
    seeds : sequence of int
    variants : mapping of str to dict
        Variant name -> keyword options of :func:`build_seq2seq` for ``"luong"``.
    n_train, n_test, data_seed, epochs : int
    settling_epochs : int
        Passes at ``lr / 10`` after the ``epochs`` at ``lr`` (0: none).
    lr : float
        The learning rate of Adam for the first ``epochs`` passes.
    long_from : int
        The shortest source length that counts as long.

    Returns
    -------
    LuongAblation

    Shapes
    ------
    exact[key], exact_long[key] : (len(seeds),)
    """
    if not isinstance(tasks, Mapping):
        raise TypeError(f"tasks must map names to digit tasks; found {type(tasks).__name__}")
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a sequence of (task name, variant name) pairs; found {type(runs).__name__}")
    for name, task in tasks.items():
        require_instance(f"tasks[{name!r}]", task, ReversalTask)
    for task_name, variant in runs:
        if task_name not in tasks or variant not in variants:
            raise ValueError(f"runs must pair a task of {sorted(tasks)} with a variant of {sorted(variants)}; "
                             f"found {(task_name, variant)!r}")
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise TypeError(f"seeds must be a non-empty sequence of ints; found {seeds!r}")
    require_ints(n_train=n_train, n_test=n_test, epochs=epochs, long_from=long_from)
    require_int("data_seed", data_seed, 0), require_int("settling_epochs", settling_epochs, 0)
    require_number("lr", lr, 1e-9, 1.0)
    data = {name: task.split(n_train=n_train, n_test=n_test, seed=data_seed) for name, task in tasks.items()}
    result = LuongAblation(data, {}, {}, {})
    for task_name, variant in runs:
        task, (train, test) = tasks[task_name], data[task_name]
        correct = []
        for seed in seeds:
            model, _ = train_model("luong", task.vocab_size, task.vocab_size, train, epochs=epochs, lr=lr,
                                   seed=seed, **variants[variant])
            if settling_epochs:
                train_seq2seq(model, train, epochs=settling_epochs, lr=lr / 10, seed=seed)
            correct.append(exact_matches(model, test, task.bos, task.eos))
            result.models.setdefault((task_name, variant), model)
        correct = torch.stack(correct).float()  # (seeds, n_test)
        result.exact[task_name, variant] = correct.mean(1)  # (seeds,)
        result.exact_long[task_name, variant] = correct[:, test.src_lens >= long_from].mean(1)
    return result
