"""Sequence-to-sequence models with attention: Bahdanau, Luong (global and local) and pointer networks.

The module follows chapter 10 (syllabus S2S1-S2S6), top to bottom:

1. :class:`DateTask`, the chapter's toy translation task: dates written in eleven
   human formats (``"Sat, Apr 3, 2021"``, ``"03.04.2021"``, ...) to ISO
   ``2021-04-03``, generated with the standard library's :mod:`datetime`.
2. :class:`Encoder`, a recurrent encoder (GRU or LSTM, optionally bidirectional)
   that returns a :class:`Memory`: every source state :math:`\\bar h_s` and a
   fixed-size summary (the last states).
3. Three decoders, each one GRU cell run step by step, that differ only in where
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
4. :class:`Seq2Seq` joins an encoder and a decoder; it trains with
   :func:`lib.transformer.train_seq2seq` and decodes through :mod:`lib.decoding`
   (:meth:`Seq2Seq.step_fn`). :func:`build_seq2seq` makes one from a name and
   :class:`Seq2SeqConfig`; :func:`save_seq2seq` / :func:`load_seq2seq` store it.
5. Evaluation: :func:`exact_matches`, :func:`accuracy_by_length` and
   :func:`alignments` (greedy outputs and the weights that produced them).
6. :class:`PointerNetwork`, whose output distribution *is* the attention over
   the input positions (Vinyals et al., 2015), and :class:`SortingTask`.
7. The chapter's experiments: :func:`train_model`, and :func:`main`, the
   deterministic script ``python -m lib.seq2seq`` that trains the Luong models
   the chapter loads from :data:`WEIGHTS_DIR`.

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
.. [3] O. Vinyals, M. Fortunato, N. Jaitly. "Pointer Networks". NeurIPS 2015.
   arXiv:1506.03134.
.. [4] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks". NeurIPS 2014. arXiv:1409.3215.
.. [5] K. Cho, B. van Merriënboer, C. Gulcehre, D. Bahdanau, F. Bougares,
   H. Schwenk, Y. Bengio. "Learning Phrase Representations using RNN
   Encoder-Decoder for Statistical Machine Translation". EMNLP 2014.
"""

from __future__ import annotations

import argparse
import datetime
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lib.attention import AdditiveScore, BilinearScore, DotScore, attention, masked_softmax
from lib.transformer import SequencePairs, TrainingLog, greedy_translate, train_seq2seq
from lib.validation import INTEGER_DTYPES, check_module_dtype, require_int, require_tokens

__all__ = [
    "DateTask",
    "DATE_FORMATS",
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
    "exact_matches",
    "accuracy_by_length",
    "alignments",
    "SortingTask",
    "PointerNetwork",
    "train_model",
    "LUONG_RECIPES",
    "WEIGHTS_DIR",
    "main",
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


def _require_lens(lens: object, batch: int, width: int) -> Tensor:
    if not isinstance(lens, Tensor) or lens.dtype not in INTEGER_DTYPES:
        found = lens.dtype if isinstance(lens, Tensor) else type(lens).__name__
        raise TypeError(f"src_lens must be an integer torch.Tensor; found {found}")
    if tuple(lens.shape) != (batch,):
        raise ValueError(f"src_lens must have shape (B,) = ({batch},); found {tuple(lens.shape)}")
    if batch and (int(lens.min()) < 1 or int(lens.max()) > width):
        raise ValueError(
            f"src_lens must lie in [1, S] = [1, {width}]; found values from {int(lens.min())} to {int(lens.max())}"
        )
    return lens


# ---------------------------------------------------------------------------
# The task: dates in human formats -> ISO 8601.
# ---------------------------------------------------------------------------

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _ordinal(day: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


# Each format writes a date one way. The numeric ones are unambiguous because the
# separator tells the order: dots are day.month.year, slashes month/day/year.
DATE_FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "d.m.yyyy": lambda d: f"{d.day}.{d.month}.{d.year}",
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "mm/dd/yyyy": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
    "d Mon yyyy": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}",
    "d Month yyyy": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",
    "Month d, yyyy": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "MON d yyyy": lambda d: f"{MONTHS[d.month - 1][:3].upper()} {d.day} {d.year}",
    "Day, Mon d, yyyy": lambda d: f"{WEEKDAYS[d.weekday()][:3]}, {MONTHS[d.month - 1][:3]} {d.day}, {d.year}",
    "dth of Month yyyy": lambda d: f"{_ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",
    "Weekday, d Month yyyy": lambda d: f"{WEEKDAYS[d.weekday()]}, {d.day} {MONTHS[d.month - 1]} {d.year}",
    "Weekday, Month dth, yyyy": lambda d: (
        f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {_ordinal(d.day)}, {d.year}"
    ),
}


# Every character the formats can write: digits, separators, and the letters of the names.
SOURCE_CHARS = "".join(sorted(set(" ,./0123456789" + "".join(MONTHS + WEEKDAYS) + "".join(MONTHS).upper()
                                  + "stndrdth of")))


@dataclass(frozen=True)
class DateTask:
    """Normalise dates written in human formats to ISO ``YYYY-MM-DD``.

    A source is a string of characters (one token each), written in one of the
    :data:`DATE_FORMATS`; the target is the ten characters of the ISO date.
    Both vocabularies start with ``pad = 0``, ``bos = 1``, ``eos = 2``.
    Dates are drawn uniformly between 1 January ``first_year`` and
    31 December ``last_year``, formats uniformly.

    Shapes
    ------
    :meth:`pairs` returns :class:`lib.transformer.SequencePairs` with
    src (N, S), tgt_in and tgt_out (N, 11).
    """

    first_year: int = 1900
    last_year: int = 2099
    pad: int = 0
    bos: int = 1
    eos: int = 2
    source_chars: str = SOURCE_CHARS
    target_chars: str = "-0123456789"

    def __post_init__(self):
        require_int("first_year", self.first_year)
        require_int("last_year", self.last_year, self.first_year)
        if self.last_year > 9999:
            raise ValueError(f"last_year must be <= 9999 (four-digit years); found {self.last_year}")

    @property
    def src_vocab_size(self) -> int:
        return 3 + len(self.source_chars)

    @property
    def tgt_vocab_size(self) -> int:
        return 3 + len(self.target_chars)

    def write(self, date: datetime.date, fmt: str) -> str:
        """The date as a human would write it in format ``fmt`` (a key of :data:`DATE_FORMATS`)."""
        _require_choice("fmt", fmt, tuple(DATE_FORMATS))
        return DATE_FORMATS[fmt](date)

    def encode_source(self, text: str) -> list[int]:
        """Characters to source ids."""
        unknown = sorted(set(text) - set(self.source_chars))
        if unknown:
            raise ValueError(f"text may use only the characters {self.source_chars!r}; found {unknown}")
        return [3 + self.source_chars.index(c) for c in text]

    def source_text(self, tokens: Sequence[int]) -> str:
        """Source ids to characters (special tokens are dropped)."""
        return "".join(self.source_chars[t - 3] for t in tokens if t >= 3)

    def target_text(self, tokens: Sequence[int]) -> str:
        """Target ids to characters, up to the first ``eos`` (special tokens are dropped)."""
        tokens = list(tokens)
        if self.eos in tokens:
            tokens = tokens[: tokens.index(self.eos)]
        return "".join(self.target_chars[t - 3] for t in tokens if t >= 3)

    def format_of(self, text: str, date: datetime.date) -> str:
        """The name of a format that writes ``date`` as ``text`` (the first, if several do)."""
        for name, write in DATE_FORMATS.items():
            if write(date) == text:
                return name
        raise ValueError(f"no format writes {date.isoformat()} as {text!r}")

    def month_span(self, text: str) -> Optional[tuple[int, int]]:
        """Where the month is written as a word: ``(start, end)`` character positions, or None.

        Positions count from 0 and ``end`` is exclusive; numeric dates give None.
        """
        for month in MONTHS:
            for form in (month, month[:3], month[:3].upper()):  # the full name first: "March" before "Mar"
                start = text.find(form)
                if start >= 0:
                    return start, start + len(form)
        return None

    def pairs(self, texts: Sequence[str], dates: Sequence[datetime.date]) -> SequencePairs:
        """Pad the sources and build the ISO targets (``bos`` + target, target + ``eos``).

        Shapes
        ------
        output.src : (N, S), S = the longest text; output.src_lens : (N,)
        output.tgt_in, output.tgt_out : (N, 11)
        """
        if len(texts) != len(dates):
            raise ValueError(f"texts and dates must have the same length; found {len(texts)} and {len(dates)}")
        sources = [self.encode_source(text) for text in texts]
        targets = [[3 + self.target_chars.index(c) for c in date.isoformat()] for date in dates]
        width = max((len(s) for s in sources), default=1)
        src = torch.full((len(texts), width), self.pad)
        for i, tokens in enumerate(sources):
            src[i, : len(tokens)] = torch.tensor(tokens)
        lens = torch.tensor([len(tokens) for tokens in sources], dtype=torch.long)
        tgt = torch.tensor(targets, dtype=torch.long).reshape(len(texts), 10)  # (N, 10)
        tgt_in = torch.cat((torch.full((len(texts), 1), self.bos), tgt), dim=1)  # (N, 11)
        tgt_out = torch.cat((tgt, torch.full((len(texts), 1), self.eos)), dim=1)  # (N, 11)
        return SequencePairs(src, lens, tgt_in, tgt_out)

    def sample(self, n: int, seed: int = 0, exclude: frozenset = frozenset()) -> tuple[list[str], list[datetime.date]]:
        """``n`` random (text, date) pairs with distinct dates, none of them in ``exclude``.

        Each date is drawn with its format, so the first ``k`` pairs of a
        larger sample are the sample of size ``k`` with the same seed.

        Returns
        -------
        texts : list of str
        dates : list of datetime.date
        """
        require_int("n", n)
        first = datetime.date(self.first_year, 1, 1).toordinal()
        last = datetime.date(self.last_year, 12, 31).toordinal()
        if n > last - first + 1 - len(exclude):
            raise ValueError(
                f"n must be at most the {last - first + 1 - len(exclude)} available dates; found n = {n}"
            )
        rng, formats = random.Random(seed), list(DATE_FORMATS)
        texts: list[str] = []
        dates: list[datetime.date] = []
        seen = set(exclude)
        while len(dates) < n:
            date, fmt = datetime.date.fromordinal(rng.randint(first, last)), rng.choice(formats)
            if date not in seen:
                seen.add(date)
                texts.append(self.write(date, fmt))
                dates.append(date)
        return texts, dates

    def split(self, n_train: int, n_test: int, seed: int = 0) -> tuple[SequencePairs, SequencePairs, list[str]]:
        """Training and held-out sets; no held-out *date* occurs in training, in any format.

        The held-out set depends on ``n_test`` and ``seed`` only, and a smaller
        training set is the beginning of a larger one.

        Returns
        -------
        train, test : SequencePairs
        test_texts : list of str
            The held-out sources as text.
        """
        test_texts, test_dates = self.sample(n_test, seed)
        train_texts, train_dates = self.sample(n_train, seed + 1, exclude=frozenset(test_dates))
        return self.pairs(train_texts, train_dates), self.pairs(test_texts, test_dates), test_texts


# ---------------------------------------------------------------------------
# The encoder.
# ---------------------------------------------------------------------------


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
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim), ("hidden_dim", hidden_dim)):
            require_int(name, value)
        _require_choice("cell", cell, ("gru", "lstm"))
        self.vocab_size, self.cell = vocab_size, cell
        self.output_dim = hidden_dim * (2 if bidirectional else 1)
        self.embed = nn.Embedding(vocab_size, embed_dim)
        recurrent = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = recurrent(embed_dim, hidden_dim, batch_first=True, bidirectional=bidirectional)

    def forward(self, src: Tensor, src_lens: Optional[Tensor] = None) -> Memory:
        require_tokens("src", src, self.vocab_size)
        batch, width = src.shape
        lens = torch.full((batch,), width) if src_lens is None else _require_lens(src_lens, batch, width)
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
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim), ("memory_dim", memory_dim)):
            require_int(name, value)
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
        require_tokens("tgt_in", tgt_in, self.vocab_size)
        if not isinstance(memory, Memory) or memory.states.shape[-1] != self.memory_dim:
            found = tuple(memory.states.shape) if isinstance(memory, Memory) else type(memory).__name__
            raise ValueError(f"memory must be a Memory with states (B, S, {self.memory_dim}); found {found}")
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
    require_int("window", window)
    if scores.dim() != 2 or centre.shape != scores.shape[:1] or lens.shape != scores.shape[:1]:
        raise ValueError(
            "scores must have shape (B, S), lens and centre (B,); found "
            f"{tuple(scores.shape)}, {tuple(lens.shape)}, {tuple(centre.shape)}"
        )
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
        _require_choice("score", score, LUONG_SCORES)
        _require_choice("mode", mode, LUONG_MODES)
        require_int("window", window)
        if not isinstance(input_feeding, bool):
            raise TypeError(f"input_feeding must be a bool; found {type(input_feeding).__name__}")
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
    """An encoder and a decoder; the interface of :func:`lib.transformer.train_seq2seq`.

    Parameters
    ----------
    encoder : Encoder
    decoder : PlainDecoder, BahdanauDecoder or LuongDecoder

    Returns
    -------
    Tensor
        Calling the model returns next-token logits.

    Shapes
    ------
    src : (B, S)
    tgt_in : (B, T)
    src_lens : (B,)
    output : (B, T, V)
    """

    def __init__(self, encoder: Encoder, decoder: _Decoder):
        super().__init__()
        if not isinstance(encoder, Encoder):
            raise TypeError(f"encoder must be an Encoder; found {type(encoder).__name__}")
        if not isinstance(decoder, _Decoder):
            raise TypeError(f"decoder must be a PlainDecoder, BahdanauDecoder or LuongDecoder; found "
                            f"{type(decoder).__name__}")
        if encoder.output_dim != decoder.memory_dim:
            raise ValueError(f"the decoder's memory_dim must equal the encoder's output size {encoder.output_dim}; "
                             f"found {decoder.memory_dim}")
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
    _require_choice("decoder", decoder, DECODERS)
    if not isinstance(config, Seq2SeqConfig):
        raise TypeError(f"config must be a Seq2SeqConfig; found {type(config).__name__}")
    if options and decoder != "luong":
        raise ValueError(f"only the 'luong' decoder takes options; found {sorted(options)} for {decoder!r}")
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


def exact_matches(model: nn.Module, data: SequencePairs, bos: int, eos: int) -> Tensor:
    """Which greedy outputs equal their references exactly (every token and ``eos``).

    A :class:`Seq2Seq` decodes with its fast :meth:`Seq2Seq.greedy`; any other
    model with a ``step_fn`` through :func:`lib.transformer.greedy_translate`
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
    if correct.shape != lens.shape or correct.dim() != 1:
        raise ValueError(f"correct and lens must have the same shape (N,); found {tuple(correct.shape)} and "
                         f"{tuple(lens.shape)}")
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"edges must be at least two increasing ints; found {list(edges)}")
    labels, accuracy, counts = [], [], []
    for low, high in zip(edges, edges[1:]):
        inside = (lens >= low) & (lens < high)  # (N,)
        labels.append(f"{low}-{high - 1}" if high - 1 > low else f"{low}")
        counts.append(int(inside.sum()))
        accuracy.append(correct[inside].float().mean() if inside.any() else torch.tensor(float("nan")))
    return labels, torch.stack(accuracy), torch.tensor(counts)


# ---------------------------------------------------------------------------
# Pointer networks: the attention distribution is the output.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SortingTask:
    """Sort ``length`` numbers drawn uniformly from [0, 1): output their positions, smallest first.

    For ``0.6, 0.1, 0.4`` the output is ``2, 3, 1`` (positions counted from 1;
    the tensors count from 0). A pointer network reads the numbers and points
    at one input position per step.

    Shapes
    ------
    :meth:`sample` returns :class:`lib.transformer.SequencePairs` with
    src (N, n) float numbers, src_lens (N,), tgt_in (N, n) the previous
    pointer (``-1`` = start) and tgt_out (N, n) the pointers to predict.
    """

    length: int = 5

    def __post_init__(self):
        require_int("length", self.length, 2)

    def sample(self, n: int, seed: int = 0) -> SequencePairs:
        """``n`` random lists and their sorting permutations."""
        require_int("n", n)
        generator = torch.Generator().manual_seed(seed)
        values = torch.rand(n, self.length, generator=generator)  # (N, n)
        order = values.argsort(dim=1)  # (N, n): c_1 .. c_n, the position of the i-th smallest
        start = torch.full((n, 1), -1)
        return SequencePairs(values, torch.full((n,), self.length), torch.cat((start, order[:, :-1]), 1), order)


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

    Returns
    -------
    Tensor
        Calling the model with the previous pointers (teacher forcing) returns
        the scores; padded positions are ``-inf``.

    Shapes
    ------
    values : (B, n) numbers or (B, n, input_dim) vectors
    pointers_in : (B, m) previous pointers, -1 at the start
    lens : (B,) number of real inputs
    output : (B, m, n)
    """

    def __init__(self, input_dim: int = 1, hidden_dim: int = 64, attention_dim: int = 64):
        super().__init__()
        for name, value in (("input_dim", input_dim), ("hidden_dim", hidden_dim), ("attention_dim", attention_dim)):
            require_int(name, value)
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
        lens = torch.full((batch,), width) if lens is None else _require_lens(lens, batch, width)
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
        if not isinstance(pointers_in, Tensor) or pointers_in.dtype not in INTEGER_DTYPES or pointers_in.dim() != 2:
            found = (pointers_in.dtype, tuple(pointers_in.shape)) if isinstance(pointers_in, Tensor) else \
                type(pointers_in).__name__
            raise TypeError(f"pointers_in must be an integer tensor (B, m); found {found}")
        if pointers_in.numel() and (int(pointers_in.min()) < -1 or int(pointers_in.max()) >= values.shape[1]):
            raise ValueError(f"pointers_in must hold positions in [0, {values.shape[1]}) or -1 (start); found "
                             f"{int(pointers_in.min())} to {int(pointers_in.max())}")
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


# ---------------------------------------------------------------------------
# The chapter's experiments: training, and the script that makes the saved weights.
# ---------------------------------------------------------------------------


# The models of chapter 10 that are trained by the script, not in the notebook, and where they are kept.
WEIGHTS_DIR = Path(__file__).with_name("weights")  # shipped with the package: chapter 10 runs from a wheel
LUONG_RECIPES = {
    "luong_global": {"score": "general", "mode": "global", "input_feeding": True},
    "luong_local_p": {"score": "general", "mode": "local-p", "window": 4, "input_feeding": True},
}


def train_model(decoder: str, src_vocab_size: int, tgt_vocab_size: int, train: SequencePairs, epochs: int,
                lr: float = 1e-2, batch_size: int = 64, seed: int = 0, config: Seq2SeqConfig = Seq2SeqConfig(),
                **options) -> tuple[Seq2Seq, TrainingLog]:
    """Build a model (:func:`build_seq2seq`) from a seeded initialisation and train it.

    Training is :func:`lib.transformer.train_seq2seq`: Adam, cross-entropy,
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


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Train chapter 10's Luong models and save them in :data:`WEIGHTS_DIR`: ``python -m lib.seq2seq``.

    Each model trains ``--epochs`` passes at ``--lr``, then one last pass at a
    tenth of it, which settles the weights (without it, the local-p model's
    final accuracy depends on the noise of the last large steps).
    Deterministic for a given version of the code: one thread, fixed seeds.
    Prints each model's exact match on the held-out dates.
    """
    parser = argparse.ArgumentParser(prog="python -m lib.seq2seq",
                                     description="Train chapter 10's Luong models and save their weights.")
    parser.add_argument("--out", type=Path, default=WEIGHTS_DIR, help="folder for the .pt files")
    parser.add_argument("--n-train", type=int, default=10_000, help="training dates")
    parser.add_argument("--n-test", type=int, default=1_000, help="held-out dates")
    parser.add_argument("--epochs", type=int, default=8, help="passes at the full learning rate")
    parser.add_argument("--lr", type=float, default=5e-3, help="learning rate of Adam")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the same weights on every run
    task = DateTask()
    train, test, _ = task.split(args.n_train, args.n_test, seed=0)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, options in LUONG_RECIPES.items():
        model, _ = train_model("luong", task.src_vocab_size, task.tgt_vocab_size, train, args.epochs, lr=args.lr,
                               **options)
        log = train_seq2seq(model, train, epochs=1, lr=args.lr / 10, seed=args.epochs)  # the settling pass
        save_seq2seq(model, args.out / f"{name}.pt")
        accuracy = exact_matches(model, test, task.bos, task.eos).float().mean()
        print(f"{name}: final loss {log.losses[-1]:.4f}, held-out exact match {accuracy:.1%}")


if __name__ == "__main__":
    main()
