"""A character-level recurrent language model, and the loops that train it: on a batch
of lines, or on one long text by truncated backpropagation through time.

The model reads ``bos, y_1, ..., y_{t-1}`` one character at a time and predicts
``y_t`` with a softmax over the characters (Elman, 1990; Sutskever et al., 2011;
Karpathy, 2015). Top to bottom:

1. :func:`zen_of_python`, the text (PEP 20, which CPython ships), and
   :class:`CharVocabulary`, its characters as token ids with the newline as ``eos``.
2. :func:`teacher_forcing_batch` and :func:`language_model_batch`: inputs and
   targets for teacher forcing (Williams and Zipser, 1989), padded.
3. :class:`CharLM`, embedding, recurrent layer and softmax layer, whose
   :meth:`NextTokenLM.next_token_log_probs` (shared with chapter 6's
   :class:`lib.part3_words.lm.NeuralLM`) is the step function that
   :func:`lib.part3_words.decoding.sample` draws from; :func:`train_char_lm` fits it
   with gradients clipped by :func:`lib.part2_recurrent.rnn.clip_grad_norm`, optionally
   measuring the loss on held-out lines as it goes.
4. Truncated backpropagation through time (Williams and Peng, 1990; Sutskever,
   2013): :func:`stream_batch` cuts one long text into parallel streams,
   :func:`truncated_bptt_loss` is the loss whose gradient is the truncated one
   (the state is carried from chunk to chunk of ``k`` steps, detached from the
   graph), and :func:`train_truncated_bptt` takes one step per chunk; with ``k2``,
   both use overlapping windows, Williams and Peng's BPTT(h; h'), with h = k2 steps
   backpropagated every h' = k1 steps (Sutskever calls them k1, k2): the backward
   pass also runs through the ``k2 - k1`` steps before each chunk.
5. Randomised truncation (Tallec and Ollivier, 2017; Zhang et al., 2023, §9.7.1):
   :func:`truncation_factors` draws a factor per step, ``1 / keep`` or 0, and
   :func:`randomized_bptt_loss` scales by it the gradient into each earlier state, an
   unbiased estimate of full BPTT's gradient.

Chapter 3's runs, with its text, sizes and seeds, are :mod:`experiments.ch03_rnn`.

References
----------
.. [1] J. L. Elman. "Finding Structure in Time". Cognitive Science 14(2), 1990.
.. [2] I. Sutskever, J. Martens, G. E. Hinton. "Generating Text with Recurrent
   Neural Networks". ICML 2011.
.. [3] A. Karpathy. "The Unreasonable Effectiveness of Recurrent Neural
   Networks". Blog post, 2015.
.. [4] R. J. Williams, D. Zipser. "A Learning Algorithm for Continually Running
   Fully Recurrent Neural Networks". Neural Computation 1(2), 1989.
.. [5] R. J. Williams, J. Peng. "An Efficient Gradient-Based Algorithm for
   On-Line Training of Recurrent Network Trajectories". Neural Computation
   2(4), 1990.
.. [6] I. Sutskever. "Training Recurrent Neural Networks". PhD thesis,
   University of Toronto, 2013.
.. [7] C. Tallec, Y. Ollivier. "Unbiasing Truncated Backpropagation Through Time".
   arXiv:1705.08209, 2017.
.. [8] A. Zhang, Z. C. Lipton, M. Li, A. J. Smola. "Dive into Deep Learning".
   Cambridge University Press, 2023.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from numbers import Integral
from typing import Literal, Optional, Union

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int64
from torch import Tensor, nn

from lib.checked import (
    Fraction,
    NonNegative,
    NonNegativeInt,
    PositiveInt,
    PositiveOrInf,
    each,
    is_a_token_id,
)
from lib.part2_recurrent.rnn import (
    LSTM,
    MAX_PARAMETERS,
    Kind,
    clip_grad_norm,
    parameter_count,
)
from lib.training import train_step

__all__ = [
    "NextTokenLM",
    "zen_of_python",
    "CharVocabulary",
    "language_model_batch",
    "teacher_forcing_batch",
    "CharLM",
    "train_char_lm",
    "stream_batch",
    "truncated_bptt_loss",
    "train_truncated_bptt",
    "truncation_factors",
    "randomized_bptt_loss",
]


def zen_of_python() -> str:
    """The Zen of Python (PEP 20), as CPython's ``this`` module ships it (ROT13): its
    21 lines (title, blank line, 19 aphorisms), separated by newlines."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the poem
        import this
    return codecs.decode(this.s, "rot13")


@dataclass
class CharVocabulary:
    """Characters to token ids: ``chars[i]`` is token ``i``, ``eos`` the newline (id 0).

    Output tokens are ``0 .. V - 1``; ``bos = V`` is only ever fed to the model, as
    :func:`lib.part3_words.decoding.sample` expects.
    """

    chars: each(str)

    def __post_init__(self) -> None:
        chars = self.chars
        single = all(isinstance(c, str) and len(c) == 1 for c in chars)
        if not (
            chars and single and chars[0] == "\n" and len(set(chars)) == len(chars)
        ):
            raise ValueError(
                "chars must be distinct single characters, the newline (eos) first; "
                f"found {chars!r}"
            )

    @classmethod
    def from_text(cls, text: str) -> CharVocabulary:
        """Newline first, then every other character of ``text`` in sorted order."""
        if not text:
            raise ValueError("text must hold at least one character; found ''")
        return cls(["\n", *sorted(set(text) - {"\n"})])

    @property
    def size(self) -> int:
        """``V``, the number of output tokens."""
        return len(self.chars)

    @property
    def eos(self) -> int:
        return 0

    @property
    def bos(self) -> int:
        return len(self.chars)

    def encode(self, line: str) -> list[int]:
        """The tokens of one line, ``eos`` appended."""
        if "\n" in line:
            raise ValueError(
                f"line must be a str without a newline (the newline is eos); "
                f"found {line!r}"
            )
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(line) - set(index))
        if unknown:
            raise ValueError(
                "line must use the vocabulary's characters; "
                f"found unknown characters {unknown}"
            )
        return [index[c] for c in line] + [self.eos]

    def decode(self, tokens: Sequence[Integral]) -> str:
        """Tokens back to text; ``eos`` (and anything after it) is dropped."""
        size, eos = self.size, self.eos  # read once: each read is a checked call
        out = []
        for n, token in enumerate(tokens):
            if not (is_a_token_id(token) and token < size):
                raise ValueError(
                    f"tokens must be output ids 0 .. V - 1 = {size - 1}; "
                    f"found tokens[{n}] = {token!r}"
                )
            if token == eos:
                break
            out.append(self.chars[token])
        return "".join(out)


def language_model_batch(
    lines: each(str), vocabulary: CharVocabulary
) -> tuple[Int64[Tensor, "N L"], Int64[Tensor, "N L"]]:
    """Teacher-forcing inputs and targets for a batch of lines, as
    :func:`teacher_forcing_batch` pads them (``L`` = longest line + 1)."""
    if isinstance(lines, str):  # a str is a sequence of one-character lines
        raise TypeError(f"lines must be a list of str, not one str; found {lines!r}")
    return teacher_forcing_batch(
        [vocabulary.encode(line) for line in lines], vocabulary.bos
    )


def teacher_forcing_batch(
    sequences: Sequence[Sequence[Integral]], bos: NonNegativeInt
) -> tuple[Int64[Tensor, "N L"], Int64[Tensor, "N L"]]:
    """Inputs and targets for teacher forcing: the input at step ``t`` is token
    ``t - 1`` (``bos`` first), the target token ``t``; each sequence ends with its eos.

    Shorter sequences are padded: inputs with ``bos``, targets with -100 (which
    ``F.cross_entropy`` ignores); ``L`` is the longest sequence.
    """
    if not sequences:
        raise ValueError("sequences must hold at least one sequence; found []")
    for n, tokens in enumerate(sequences):
        if not tokens:
            raise ValueError(
                f"sequences[{n}] must be a non-empty list of token ids; found []"
            )
        # every token, where beartype alone looks at one drawn at random
        bad = next((i for i, t in enumerate(tokens) if not is_a_token_id(t)), None)
        if bad is not None:
            raise ValueError(
                f"sequences[{n}] must hold token ids (ints >= 0); "
                f"found sequences[{n}][{bad}] = {tokens[bad]!r}"
            )
    length = max(len(tokens) for tokens in sequences)
    inputs = torch.full((len(sequences), length), bos)  # (N, L)
    targets = torch.full((len(sequences), length), -100)  # (N, L)
    for n, tokens in enumerate(sequences):
        inputs[n, : len(tokens)] = torch.tensor([bos, *tokens[:-1]])
        targets[n, : len(tokens)] = torch.tensor(tokens)
    return inputs, targets


# The recurrent layer's state: h of shape (1, N, H), or an LSTM's pair (h, c).
Hidden = Float[Tensor, "1 N H"]
State = Union[Hidden, tuple[Hidden, Hidden]]


class NextTokenLM:
    """The step function that :mod:`lib.part3_words.decoding` samples and searches with.

    A model whose ``forward`` maps prefixes ``(N, t)`` to next-token logits
    ``(N, t, V)`` inherits it: :class:`CharLM` here and chapter 6's
    :class:`lib.part3_words.lm.NeuralLM`.
    """

    @torch.no_grad()
    def next_token_log_probs(
        self, prefixes: Int64[Tensor, "N t"]
    ) -> Float[Tensor, "N V"]:
        """Log-probabilities of the next token after each prefix (``bos`` first)."""
        return F.log_softmax(self(prefixes)[:, -1], dim=-1)  # (N, V)


class CharLM(NextTokenLM, nn.Module):
    r"""A character-level recurrent language model: embedding, recurrent layer, softmax
    layer, :math:`p(y_t \mid y_{<t}) = \operatorname{softmax}(\mathbf{h}_t
    \mathbf{W}_{hy}^\top + \mathbf{b}_y)`.

    The embedding has ``V + 1`` rows, the last for ``bos``. The recurrent layer is
    PyTorch's (fast); a lib layer takes the same inputs and loads its weights, so it can
    be swapped in (``model.recurrent = GRU.from_torch(model.recurrent)``).
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        hidden_size: PositiveInt = 64,
        embedding_dim: PositiveInt = 16,
        kind: Kind = "gru",
    ):
        # numpy ints too, as PositiveInt allows: torch's layers take only int
        vocab_size, hidden_size = int(vocab_size), int(hidden_size)
        embedding_dim = int(embedding_dim)
        recurrent = parameter_count(kind, embedding_dim, hidden_size)
        output = (hidden_size + 1) * vocab_size  # weights and biases
        size = (vocab_size + 1) * embedding_dim + recurrent + output
        if size > MAX_PARAMETERS:  # torch would try to allocate them, or loop for hours
            raise ValueError(
                f"CharLM of vocab_size={vocab_size}, hidden_size={hidden_size}, "
                f"embedding_dim={embedding_dim} would hold {size:.3g} parameters; "
                "at most 2**31 fit"
            )
        super().__init__()
        self.embedding = nn.Embedding(vocab_size + 1, embedding_dim)
        layer = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[kind]
        self.recurrent = layer(embedding_dim, hidden_size, batch_first=True)
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens: Int64[Tensor, "N t"]) -> Float[Tensor, "N t V"]:
        return self.run(tokens)[0]

    def run(
        self, tokens: Int64[Tensor, "N t"], state: Optional[State] = None
    ) -> tuple[Float[Tensor, "N t V"], State]:
        """The logits and the final state ``(1, N, H)`` (a pair for an LSTM), starting
        from ``state`` (zeros if None)."""
        bos = self.output.out_features  # the embedding's last row
        if tokens.numel() == 0 or tokens.min() < 0 or tokens.max() > bos:
            raise ValueError(
                f"tokens must hold N, t >= 1 ids from 0 to bos = {bos}; found shape "
                f"{tuple(tokens.shape)}, ids {tokens.unique().tolist()[:8]}"
            )
        lstm = isinstance(self.recurrent, (nn.LSTM, LSTM))  # torch's or lib's
        parts = state if isinstance(state, tuple) else (state,)
        h, dtype = self.output.in_features, self.output.weight.dtype
        if state is not None and (
            len(parts) != 1 + lstm or parts[0].shape[2] != h or parts[0].dtype != dtype
        ):
            expected = "a pair (h, c) of" if lstm else "one"
            raise TypeError(
                f"state must be {expected} {dtype} (1, N, H = {h}) for this "
                f"{type(self.recurrent).__name__}; found "
                f"{[(p.dtype, tuple(p.shape)) for p in parts]}"
            )
        hidden, state = self.recurrent(self.embedding(tokens), state)  # (N, t, H)
        return self.output(hidden), state  # (N, t, V)


# The optimisers train_char_lm offers: chapter 2's Adam, and plain SGD (no momentum),
# which a step too large can throw off course (chapter 3 clips it).
OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}
Optimizer = Literal["adam", "sgd"]


def _mean_loss(
    logits: Float[Tensor, "*batch V"], targets: Int64[Tensor, "*batch"]
) -> Float[Tensor, ""]:
    """Cross-entropy per scored token; padding (-100) is ignored."""
    scored, v = targets[targets != -100], logits.shape[-1]  # padding aside
    if scored.numel() == 0 or scored.min() < 0 or scored.max() >= v:
        raise ValueError(
            f"targets must hold ids 0 .. V - 1 = {v - 1} or -100 (padding), at least "
            f"one not padding; found {targets.unique().tolist()[:8]}"
        )
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=-100)


def train_char_lm(
    model: nn.Module,
    inputs: Int64[Tensor, "N L"],
    targets: Int64[Tensor, "N L"],
    steps: PositiveInt,
    lr: NonNegative = 1e-2,
    max_norm: PositiveOrInf = 1.0,
    held_out: Optional[tuple[Int64[Tensor, "M S"], Int64[Tensor, "M S"]]] = None,
    optimizer: Optimizer = "adam",
) -> dict[str, list[float]]:
    """Fit a language model to a batch by full-batch Adam (or SGD), gradients clipped
    to global norm ``max_norm`` (``math.inf``: no clipping); return the loss curves.

    ``"train"`` holds the training loss (nats per token) before each step and after the
    last, ``steps + 1`` floats; ``"held_out"`` (only with ``held_out``, lines never
    trained on) the loss on those lines at the same points, with the same weights.
    """
    with (
        torch.no_grad()
    ):  # train_step's loss would say only 'Target 7 is out of bounds'
        _mean_loss(model(inputs), targets)
    step_rule = OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    clip = (
        partial(clip_grad_norm, max_norm=max_norm) if math.isfinite(max_norm) else None
    )
    curves: dict[str, list[float]] = {"train": []}
    if held_out is not None:
        curves["held_out"] = []
    for _ in range(steps):
        if held_out is not None:
            with torch.no_grad():
                loss = _mean_loss(model(held_out[0]), held_out[1])
                curves["held_out"].append(loss.item())
        curves["train"].append(train_step(step_rule, model(inputs), targets, clip=clip))
    with torch.no_grad():  # after the last update
        curves["train"].append(_mean_loss(model(inputs), targets).item())
        if held_out is not None:
            loss = _mean_loss(model(held_out[0]), held_out[1])
            curves["held_out"].append(loss.item())
    return curves


# Truncated backpropagation through time, on one long stream of text.


def stream_batch(
    tokens: Sequence[Integral], rows: PositiveInt
) -> tuple[Int64[Tensor, "N L"], Int64[Tensor, "N L"]]:
    """Cut one stream of ``n`` tokens into ``rows`` parallel streams of
    ``L = (n - 1) // rows`` steps (the last few tokens dropped), for truncated BPTT.

    The inputs are the stream without its last token, the targets without its first;
    row ``r`` reads positions ``r L .. (r + 1) L - 1``, so its state, carried along the
    row, always belongs to the text just read.
    """
    if len(tokens) < 2:  # an input and its target
        raise ValueError(f"tokens must hold at least 2 ids; found {tokens!r}")
    # every token, where beartype alone looks at one drawn at random
    bad = next((i for i, t in enumerate(tokens) if not is_a_token_id(t)), None)
    if bad is not None:
        raise ValueError(
            f"tokens must be ids (ints >= 0); found tokens[{bad}] = {tokens[bad]!r}"
        )
    if rows > len(tokens) - 1:
        raise ValueError(
            f"rows must be at most len(tokens) - 1 = {len(tokens) - 1}; found {rows}"
        )
    length = (len(tokens) - 1) // rows
    stream = torch.tensor(tokens)  # (n,)
    inputs = stream[: rows * length].reshape(rows, length)  # (rows, L)
    targets = stream[1 : rows * length + 1].reshape(rows, length)  # (rows, L)
    return inputs, targets


def _detached(state: State) -> State:
    """The same state, cut from the graph (both halves of an LSTM's pair)."""
    if isinstance(state, tuple):
        return tuple(part.detach() for part in state)
    return state.detach()


def _chunks(
    model: CharLM, inputs: Int64[Tensor, "N L"], k: PositiveInt
) -> Iterator[Float[Tensor, "N _ V"]]:
    """The logits of each chunk of ``k`` steps (the last one possibly shorter), the
    state carried from chunk to chunk detached; chunk ``j`` is computed when it is
    asked for, with the parameters of that moment."""
    if inputs.shape[1] == 0:  # no chunk at all: nothing to score or train
        raise ValueError(
            f"inputs must hold L >= 1 steps; found shape {tuple(inputs.shape)}"
        )
    state = None  # zeros
    for start in range(0, inputs.shape[1], k):
        logits, state = model.run(inputs[:, start : start + k], state)  # (N, k, V)
        state = _detached(state)  # the next chunk starts from its value, not its graph
        yield logits


def _windows(
    model: CharLM, inputs: Int64[Tensor, "N L"], k1: PositiveInt, k2: PositiveInt
) -> Iterator[Float[Tensor, "N _ V"]]:
    """BPTT(k1, k2): the logits of each chunk of ``k1`` steps, computed in a window
    that adds the ``k2 - k1`` steps before the chunk, from the detached state before
    the window, so that the gradient runs back through the whole window (``k2 = k1``:
    :func:`_chunks`)."""
    if k2 < k1:
        raise ValueError(f"k2 must be at least k1 = {k1}; found k2 = {k2}")
    if inputs.shape[1] == 0:  # no chunk at all: nothing to score or train
        raise ValueError(
            f"inputs must hold L >= 1 steps; found shape {tuple(inputs.shape)}"
        )
    state, begin = None, 0  # the window starts from this state, before step begin
    length = inputs.shape[1]
    for start in range(0, length, k1):
        end = min(start + k1, length)  # the window: steps start - (k2 - k1) .. end - 1
        middle = min(max(0, start + k1 - (k2 - k1)), end)  # the next window's begin
        pieces, middle_state = [], state
        if middle > begin:  # steps begin .. middle - 1, in the graph
            logits, middle_state = model.run(inputs[:, begin:middle], state)
            pieces.append(logits)
        if end > middle:  # steps middle .. end - 1, in the graph
            pieces.append(model.run(inputs[:, middle:end], middle_state)[0])
        yield torch.cat(pieces, dim=1)[:, start - begin :]  # the chunk's steps
        if middle_state is not None:  # None: the next window also starts at step 0
            state, begin = _detached(middle_state), middle


def truncated_bptt_loss(
    model: CharLM,
    inputs: Int64[Tensor, "N L"],
    targets: Int64[Tensor, "N L"],
    k: PositiveInt,
    k2: Optional[PositiveInt] = None,
) -> Float[Tensor, ""]:
    """The mean cross-entropy over long streams, read ``k`` steps a chunk, whose
    gradient is truncated BPTT's: the loss is the full one, the gradient of a target
    stops at its chunk's first step (with ``k >= L``, full BPTT); with ``k2``,
    BPTT(k, k2)'s, which stops ``k2 - k`` steps before it (full BPTT when ``k2 - k``
    reaches the last chunk's first step, ``k2 >= L`` if ``k`` divides ``L``)."""
    chunks = _chunks(model, inputs, k) if k2 is None else _windows(model, inputs, k, k2)
    logits = torch.cat(list(chunks), dim=1)  # (N, L, V)
    return _mean_loss(logits, targets)


def train_truncated_bptt(
    model: CharLM,
    inputs: Int64[Tensor, "N L"],
    targets: Int64[Tensor, "N L"],
    k: PositiveInt,
    epochs: PositiveInt,
    lr: NonNegative = 1e-2,
    max_norm: PositiveOrInf = 1.0,
    k2: Optional[PositiveInt] = None,
) -> list[float]:
    """Train on long streams by truncated BPTT, one clipped Adam step per chunk of
    ``k`` steps; return each chunk's loss (nats per token) before its step.

    Each epoch reads the streams from a zero state. The state is carried forward
    (detached), so the model *sees* the whole past, while each target's gradient
    reaches back at most ``k - 1`` steps; with ``k2``, BPTT(k, k2): at most
    ``k2 - 1`` steps back and at least ``k2 - k`` (fewer only in the first ``k2 - k``
    steps of the streams, which have no more past).
    """
    scored = targets[targets != -100]  # padding aside
    vocab_size = model.output.out_features
    if scored.numel() and (scored.min() < 0 or scored.max() >= vocab_size):
        raise ValueError(  # train_step would say only 'Target 7 is out of bounds'
            f"targets must hold ids 0 .. V - 1 = {vocab_size - 1} or -100 (padding); "
            f"found {scored.min()} .. {scored.max()}"
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    clip = partial(clip_grad_norm, max_norm=max_norm)
    losses = []
    for _ in range(epochs):
        windows = (
            _chunks(model, inputs, k) if k2 is None else _windows(model, inputs, k, k2)
        )
        for logits, chunk_targets in zip(windows, targets.split(k, dim=1)):
            losses.append(train_step(optimizer, logits, chunk_targets, clip=clip))
    return losses


def truncation_factors(
    length: PositiveInt, keep: Fraction, generator: Optional[torch.Generator] = None
) -> Float[Tensor, "L"]:
    """d2l's randomised truncation (Zhang et al., 2023, §9.7.1): for each step an
    independent factor, ``1 / keep`` with probability ``keep`` and 0 otherwise, whose
    mean is 1."""
    if keep == 0:
        raise ValueError("keep must be a probability above 0; found 0")
    kept = torch.rand(length, generator=generator, dtype=torch.float64) < keep
    return kept.double() / keep  # (L,)


def randomized_bptt_loss(
    model: CharLM,
    inputs: Int64[Tensor, "N L"],
    targets: Int64[Tensor, "N L"],
    factors: Float[Tensor, "L"],
) -> Float[Tensor, ""]:
    """The mean cross-entropy over long streams, read one step at a time, whose
    gradient is the randomised one: the gradient that flows from step ``t`` into the
    state before it is multiplied by ``factors[t]`` (0 cuts it, as ``.detach()``
    does); the loss itself is the full one."""
    if inputs.shape[1] == 0:  # no step at all: nothing to score
        raise ValueError(
            f"inputs must hold L >= 1 steps; found shape {tuple(inputs.shape)}"
        )
    bad = ~(factors.isfinite() & (factors >= 0))
    if bad.any():  # a negative factor flips a path's gradient, NaN poisons the loss
        t = int(bad.nonzero()[0])
        raise ValueError(
            f"factors must be finite and >= 0; found factors[{t}] = {factors[t].item()}"
        )
    state, logits = None, []
    for t in range(inputs.shape[1]):
        if state is not None:  # the same value; its gradient times factors[t]
            xi = factors[t].to(model.output.weight.dtype)
            state = _scaled(state, xi)
        step_logits, state = model.run(inputs[:, t : t + 1], state)  # (N, 1, V)
        logits.append(step_logits)
    return _mean_loss(torch.cat(logits, dim=1), targets)


def _scaled(state: State, xi: Tensor) -> State:
    """The same state, the gradient through it multiplied by ``xi``."""
    if isinstance(state, tuple):
        return tuple(_scaled(part, xi) for part in state)
    return state.detach() + xi * (state - state.detach())
