"""A character-level recurrent language model on the Zen of Python: chapter 3's experiment.

The model reads ``bos, y_1, ..., y_{t-1}`` one character at a time and predicts
``y_t`` with a softmax over the characters (Elman, 1990; Sutskever et al., 2011;
Karpathy, 2015). Top to bottom:

1. :func:`zen_of_python`, the text (PEP 20, which CPython ships), and
   :class:`CharVocabulary`, its characters as token ids with the newline as ``eos``.
2. :func:`teacher_forcing_batch` and :func:`language_model_batch`: inputs and
   targets for teacher forcing (Williams and Zipser, 1989), padded.
3. :class:`CharLM`, embedding, recurrent layer and softmax layer, whose
   :meth:`NextTokenLM.next_token_log_probs` (shared with chapter 6's
   :class:`lib.lm.NeuralLM`) is the step function that
   :func:`lib.decoding.sample` draws from; :func:`train_char_lm` fits it with
   gradients clipped by :func:`lib.rnn.clip_grad_norm`, optionally measuring
   the loss on held-out lines as it goes.
4. Truncated backpropagation through time (Williams and Peng, 1990; Sutskever,
   2013): :func:`stream_batch` cuts one long text into parallel streams,
   :func:`truncated_bptt_loss` is the loss whose gradient is the truncated one
   (the state is carried from chunk to chunk of ``k`` steps, detached from the
   graph), and :func:`train_truncated_bptt` takes one step per chunk.

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
"""

from __future__ import annotations

import codecs
import math
import contextlib
import io
from dataclasses import dataclass
from functools import partial
from typing import Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.rnn import GATES, State, clip_grad_norm
from lib.training import train_step
from lib.validation import require_choice, require_ids, require_instance, require_int, require_number

__all__ = [
    "NextTokenLM",
    "zen_of_python",
    "CharVocabulary",
    "language_model_batch",
    "teacher_forcing_batch",
    "CharLM",
    "train_char_lm",
    "train_at_clip_thresholds",
    "stream_batch",
    "truncated_bptt_loss",
    "train_truncated_bptt",
]


def zen_of_python() -> str:
    """The Zen of Python (PEP 20), as CPython's ``this`` module ships it (ROT13-encoded).

    Returns
    -------
    str
        Its 21 lines (title, blank line, 19 aphorisms), separated by newlines.

    Shapes
    ------
    No tensors.
    """
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the poem
        import this
    return codecs.decode(this.s, "rot13")


@dataclass
class CharVocabulary:
    """Characters to token ids: ``eos`` is the newline (id 0), ``bos`` an input-only id.

    Output tokens are ``0 .. V - 1``; ``bos = V`` is only ever fed to the model,
    as :func:`lib.decoding.sample` expects.

    Attributes
    ----------
    chars : list of str
        ``chars[i]`` is token ``i``; ``chars[0] == "\\n"``.
    """

    chars: list[str]

    @classmethod
    def from_text(cls, text: str) -> "CharVocabulary":
        """Newline first, then every other character of ``text`` in sorted order."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"text must be a non-empty str; found {text!r}")
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
        if not isinstance(line, str) or "\n" in line:
            raise ValueError(f"line must be a str without a newline (the newline is eos); found {line!r}")
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(line) - set(index))
        if unknown:
            raise ValueError(f"line must use the vocabulary's characters; found unknown characters {unknown}")
        return [index[c] for c in line] + [self.eos]

    def decode(self, tokens: list[int]) -> str:
        """Tokens back to text; ``eos`` (and anything after it) is dropped."""
        out = []
        for token in tokens:
            if token == self.eos:
                break
            out.append(self.chars[token])
        return "".join(out)


def language_model_batch(lines: list[str], vocabulary: CharVocabulary) -> tuple[Tensor, Tensor]:
    """Teacher-forcing inputs and targets for a batch of lines.

    The input at step ``t`` is the true token ``t - 1`` (``bos`` first); the
    target is token ``t``, ending with ``eos``. Shorter lines are padded: inputs
    with ``bos`` (they are never scored), targets with -100, which
    ``F.cross_entropy`` ignores.

    Returns
    -------
    inputs, targets : LongTensor

    Shapes
    ------
    inputs, targets : (N, L) with L = longest line + 1
    """
    require_instance("vocabulary", vocabulary, CharVocabulary)
    return teacher_forcing_batch([vocabulary.encode(line) for line in lines], vocabulary.bos)


def _check_sequences(sequences: object, bos: object) -> None:
    if isinstance(sequences, str) or not isinstance(sequences, (list, tuple)) or not sequences:
        raise (ValueError if isinstance(sequences, (list, tuple)) else TypeError)(
            f"sequences must be a non-empty list of non-empty token lists; found {sequences!r}")
    for n, tokens in enumerate(sequences):
        require_ids(f"sequences[{n}]", tokens)
    require_int("bos", bos, 0)


def teacher_forcing_batch(sequences: list[list[int]], bos: int) -> tuple[Tensor, Tensor]:
    """Teacher-forcing inputs and targets for token sequences of any vocabulary.

    The input at step ``t`` is token ``t - 1`` (``bos`` first); the target is
    token ``t``. Each sequence should end with its ``eos``. Shorter sequences
    are padded: inputs with ``bos``, targets with -100 (ignored by ``F.cross_entropy``).

    Parameters
    ----------
    sequences : list of list of int
        Non-empty token sequences.
    bos : int
        The input-only begin-of-sequence id.

    Returns
    -------
    inputs, targets : LongTensor

    Shapes
    ------
    inputs, targets : (N, L) with L = longest sequence
    """
    _check_sequences(sequences, bos)
    length = max(len(tokens) for tokens in sequences)
    inputs = torch.full((len(sequences), length), bos)  # (N, L)
    targets = torch.full((len(sequences), length), -100)  # (N, L)
    for n, tokens in enumerate(sequences):
        inputs[n, : len(tokens)] = torch.tensor([bos, *tokens[:-1]])
        targets[n, : len(tokens)] = torch.tensor(tokens)
    return inputs, targets


def _check_tokens(tokens: object) -> None:
    if not isinstance(tokens, Tensor) or tokens.dtype != torch.long or tokens.dim() != 2:
        found = (f"{tokens.dtype} of shape {tuple(tokens.shape)}" if isinstance(tokens, Tensor)
                 else type(tokens).__name__)
        raise TypeError(f"tokens must be a LongTensor of shape (N, t); found {found}")


class NextTokenLM:
    """The step function that :mod:`lib.decoding` samples and searches with, for any language model.

    A model whose ``forward`` maps prefixes ``(N, t)`` to next-token logits
    ``(N, t, V)`` inherits it: :class:`CharLM` here and chapter 6's
    :class:`lib.lm.NeuralLM`.
    """

    @torch.no_grad()
    def next_token_log_probs(self, prefixes: Tensor) -> Tensor:
        """The step function of :mod:`lib.decoding`: log-probabilities of the next token.

        Shapes
        ------
        prefixes : (N, t), each starting with ``bos``
        output : (N, V)
        """
        return F.log_softmax(self(prefixes)[:, -1], dim=-1)  # (N, V)


class CharLM(NextTokenLM, nn.Module):
    """A character-level recurrent language model: embedding, recurrent layer, softmax layer.

    :math:`p(y_t \\mid y_{<t}) = \\operatorname{softmax}(\\mathbf{h}_t \\mathbf{W}_{hy}^\\top + \\mathbf{b}_y)`,
    where :math:`\\mathbf{h}_t` is the recurrent state after reading
    ``bos, y_1, ..., y_{t-1}``. The recurrent layer is PyTorch's (fast); because
    the lib layers take the same inputs and load its weights, it can be swapped
    for one of them (``model.recurrent = GRU.from_torch(model.recurrent)``).

    Parameters
    ----------
    vocab_size : int
        ``V`` output tokens; the embedding has ``V + 1`` rows, the last for ``bos``.
    hidden_size : int
    embedding_dim : int
    kind : {"rnn", "gru", "lstm"}

    Shapes
    ------
    tokens : (N, t) LongTensor
    forward output : (N, t, V) logits
    """

    def __init__(self, vocab_size: int, hidden_size: int = 64, embedding_dim: int = 16, kind: str = "gru"):
        require_choice("kind", kind, tuple(GATES)), require_int("vocab_size", vocab_size), require_int(
            "hidden_size", hidden_size), require_int("embedding_dim", embedding_dim)
        super().__init__()
        self.embedding = nn.Embedding(vocab_size + 1, embedding_dim)
        self.recurrent = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}[kind](embedding_dim, hidden_size,
                                                                                batch_first=True)
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.run(tokens)[0]  # (N, t, V)

    def run(self, tokens: Tensor, state: Optional[State] = None) -> tuple[Tensor, State]:
        """The logits and the final recurrent state, starting from ``state`` (zeros if None).

        Shapes
        ------
        tokens : (N, t) LongTensor
        state : (1, N, H), a pair of them for an LSTM
        output : (N, t, V) logits and the final state
        """
        _check_tokens(tokens)
        hidden, state = self.recurrent(self.embedding(tokens), state)  # (N, t, H)
        return self.output(hidden), state  # (N, t, V)


# The optimisers train_char_lm offers: chapter 2's Adam, and plain SGD for the clipping experiment.
OPTIMIZERS = {"adam": torch.optim.Adam, "sgd": torch.optim.SGD}


def _check_training(model: object, lr: object, max_norm: object) -> None:
    require_instance("model", model, nn.Module), require_number("lr", lr, 0.0)
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)):
        raise TypeError(f"max_norm must be a number > 0 (math.inf: no clipping); found {type(max_norm).__name__}")
    if not max_norm > 0:
        raise ValueError(f"max_norm must be a number > 0 (math.inf: no clipping); found {max_norm}")


def _check_held_out(held_out: object, optimizer: object) -> None:
    require_choice("optimizer", optimizer, tuple(OPTIMIZERS))
    if held_out is None:
        return
    if not isinstance(held_out, tuple) or len(held_out) != 2:
        raise TypeError(f"held_out must be a pair (inputs, targets) from language_model_batch or None; "
                        f"found {type(held_out).__name__}")
    _check_tokens(held_out[0])


def _mean_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy per scored token; padding (-100) is ignored."""
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=-100)


def train_char_lm(model: CharLM, inputs: Tensor, targets: Tensor, steps: int, lr: float = 1e-2,
                  max_norm: float = 1.0, held_out: Optional[tuple[Tensor, Tensor]] = None,
                  optimizer: str = "adam") -> dict[str, list[float]]:
    """Fit a language model to a (small) batch by full-batch Adam (or SGD) with clipped gradients.

    Each step minimises the mean cross-entropy of every target token given its
    prefix (teacher forcing) and clips the gradients with :func:`clip_grad_norm`.
    Before each step the loss on ``held_out`` lines, if given, is measured
    too, with the same parameters; after the last step both losses are measured
    once more, so that entry ``i`` of a curve is the loss after ``i`` updates.

    Parameters
    ----------
    model : CharLM
    inputs, targets : LongTensor
        From :func:`language_model_batch`.
    steps : int
    lr : float
        The learning rate.
    max_norm : float
        Global-norm clipping threshold (``math.inf``: no clipping).
    held_out : (inputs, targets), optional
        Lines the model never trains on, from :func:`language_model_batch`.
    optimizer : {"adam", "sgd"}
        Adam, or plain gradient descent (no momentum).

    Returns
    -------
    dict
        ``"train"``: the training loss (nats per token) before each step and after
        the last, ``steps + 1`` floats; ``"held_out"`` (only with ``held_out``): the
        held-out loss at the same points.

    Shapes
    ------
    inputs, targets : (N, L); held-out inputs and targets : (N', L')
    """
    _check_training(model, lr, max_norm), require_int("steps", steps), _check_held_out(held_out, optimizer)
    step_rule = OPTIMIZERS[optimizer](model.parameters(), lr=lr)
    clip = partial(clip_grad_norm, max_norm=max_norm) if math.isfinite(max_norm) else None
    curves: dict[str, list[float]] = {"train": []} if held_out is None else {"train": [], "held_out": []}
    for _ in range(steps):
        if held_out is not None:
            with torch.no_grad():
                curves["held_out"].append(_mean_loss(model(held_out[0]), held_out[1]).item())
        curves["train"].append(train_step(step_rule, model(inputs), targets, clip=clip))
    with torch.no_grad():  # after the last update
        curves["train"].append(_mean_loss(model(inputs), targets).item())
        if held_out is not None:
            curves["held_out"].append(_mean_loss(model(held_out[0]), held_out[1]).item())
    return curves


def train_at_clip_thresholds(vocab_size: int, inputs: Tensor, targets: Tensor, max_norms: tuple[float, ...],
                             seeds: tuple[int, ...], steps: int, lr: float, hidden_size: int = 64,
                             embedding_dim: int = 16, kind: str = "rnn",
                             optimizer: str = "sgd") -> dict[float, list[list[float]]]:
    """Train one fresh :class:`CharLM` per clipping threshold and seed; return every loss curve.

    For each threshold in ``max_norms`` and each seed, ``torch.manual_seed(seed)``
    initialises a ``CharLM(vocab_size, hidden_size, embedding_dim, kind)``, which
    :func:`train_char_lm` then trains on the whole batch with that ``max_norm``. The
    same seed gives the same initial weights under every threshold, so the runs of a
    seed differ only in clipping (chapter 3: clipping rescues a too-large learning rate).

    Parameters
    ----------
    vocab_size : int
    inputs, targets : LongTensor
        From :func:`language_model_batch`.
    max_norms : tuple of float
        Global-norm thresholds, ``math.inf`` for no clipping.
    seeds : tuple of int
    steps : int
    lr : float
    hidden_size, embedding_dim : int
    kind : str
        The recurrent cell, as in :class:`CharLM`.
    optimizer : {"adam", "sgd"}

    Returns
    -------
    dict
        ``max_norm -> [training-loss curve of each seed]``, each curve ``steps + 1`` floats
        (nats per token before each step and after the last; ``nan`` or ``inf`` once a run
        has diverged).

    Shapes
    ------
    inputs, targets : (N, L)
    """
    if not isinstance(max_norms, tuple) or not max_norms:
        raise TypeError(f"max_norms must be a non-empty tuple of thresholds; found {max_norms!r}")
    if not isinstance(seeds, tuple) or not seeds:
        raise TypeError(f"seeds must be a non-empty tuple of ints; found {seeds!r}")
    for seed in seeds:
        require_int("seed", seed, 0)
    runs: dict[float, list[list[float]]] = {}
    for max_norm in max_norms:
        runs[max_norm] = []
        for seed in seeds:
            torch.manual_seed(seed)
            model = CharLM(vocab_size, hidden_size=hidden_size, embedding_dim=embedding_dim, kind=kind)
            runs[max_norm].append(train_char_lm(model, inputs, targets, steps=steps, lr=lr, max_norm=max_norm,
                                                optimizer=optimizer)["train"])
    return runs


# ---------------------------------------------------------------------------
# Truncated backpropagation through time, on one long stream of text.
# ---------------------------------------------------------------------------


def _check_stream_batch(tokens: object, rows: object) -> None:
    require_ids("tokens", tokens)
    require_int("rows", rows, maximum=max(1, len(tokens) - 1))


def stream_batch(tokens: list[int], rows: int) -> tuple[Tensor, Tensor]:
    """Cut one long token stream into ``rows`` parallel streams, for truncated BPTT.

    The inputs are the stream without its last token, the targets the stream
    without its first. Both are cut into ``rows`` contiguous pieces of
    ``L = (n - 1) // rows`` tokens (the last few tokens are dropped): row ``r``
    reads positions ``r L .. (r + 1) L - 1``, so its state, carried along the
    row, always belongs to the text just read.

    Parameters
    ----------
    tokens : list of int
        The whole text as token ids, ``n`` of them.
    rows : int
        How many streams run side by side (the batch).

    Returns
    -------
    inputs, targets : LongTensor

    Shapes
    ------
    inputs, targets : (rows, L)
    """
    _check_stream_batch(tokens, rows)
    length = (len(tokens) - 1) // rows
    stream = torch.tensor(tokens)  # (n,)
    inputs = stream[: rows * length].reshape(rows, length)  # (rows, L)
    targets = stream[1 : rows * length + 1].reshape(rows, length)  # (rows, L)
    return inputs, targets


def _detached(state: State) -> State:
    """The same state, cut from the graph (both halves of an LSTM's pair)."""
    return tuple(part.detach() for part in state) if isinstance(state, tuple) else state.detach()


def _chunks(model: CharLM, inputs: Tensor, k: int) -> Iterator[Tensor]:
    """The logits of each chunk of ``k`` steps, the state carried from chunk to chunk detached.

    Lazy: chunk ``j`` is computed when it is asked for, with the parameters of that moment.

    Shapes
    ------
    inputs : (N, L); each yielded chunk : (N, k, V), the last one possibly shorter
    """
    state = None  # zeros
    for start in range(0, inputs.shape[1], k):
        logits, state = model.run(inputs[:, start : start + k], state)  # (N, k, V)
        state = _detached(state)  # the next chunk starts from its value, not its graph
        yield logits


def _check_stream(model: object, inputs: object, targets: object, k: object) -> None:
    require_instance("model", model, CharLM), _check_tokens(inputs), require_int("k", k)
    _check_tokens(targets)
    if targets.shape != inputs.shape:
        raise ValueError(f"targets must have the shape of inputs, {tuple(inputs.shape)}; "
                         f"found {tuple(targets.shape)}")


def truncated_bptt_loss(model: CharLM, inputs: Tensor, targets: Tensor, k: int) -> Tensor:
    """The mean cross-entropy over long streams, whose gradient is truncated BPTT's.

    The model reads the streams ``k`` steps at a time; each chunk starts from
    the previous chunk's final state, *detached*. The forward pass, and so the
    loss, is exactly the full one; the gradient of a target in a chunk stops
    at the chunk's first step. With ``k >= L`` it is full BPTT.

    Parameters
    ----------
    model : CharLM
    inputs, targets : LongTensor
        From :func:`stream_batch`.
    k : int
        Truncation length: steps per chunk.

    Returns
    -------
    Tensor
        A scalar, attached to the graph of every chunk.

    Shapes
    ------
    inputs, targets : (N, L)
    """
    _check_stream(model, inputs, targets, k)
    logits = torch.cat(list(_chunks(model, inputs, k)), dim=1)  # (N, L, V)
    return _mean_loss(logits, targets)


def train_truncated_bptt(model: CharLM, inputs: Tensor, targets: Tensor, k: int, epochs: int,
                         lr: float = 1e-2, max_norm: float = 1.0) -> list[float]:
    """Train on long streams by truncated BPTT: one clipped Adam step per chunk of ``k`` steps.

    Each epoch reads the streams from a zero state, chunk after chunk. The
    state is carried forward (detached), so the model *sees* the whole past,
    while each step's gradient reaches back at most ``k`` steps.

    Parameters
    ----------
    model : CharLM
    inputs, targets : LongTensor
        From :func:`stream_batch`.
    k : int
        Truncation length.
    epochs : int
    lr : float
        Adam's learning rate.
    max_norm : float
        Global-norm clipping threshold.

    Returns
    -------
    list of float
        The loss (nats per token) of each chunk before its step, ``epochs * ceil(L / k)`` values.

    Shapes
    ------
    inputs, targets : (N, L)
    """
    _check_stream(model, inputs, targets, k), _check_training(model, lr, max_norm), require_int("epochs", epochs)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    clip = partial(clip_grad_norm, max_norm=max_norm)
    losses = []
    for _ in range(epochs):
        for logits, chunk_targets in zip(_chunks(model, inputs, k), targets.split(k, dim=1)):
            losses.append(train_step(optimizer, logits, chunk_targets, clip=clip))
    return losses
