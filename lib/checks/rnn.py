"""Checkers for the exercises of chapters 3 and 4 (recurrent networks, gating)."""
from __future__ import annotations

import torch

from lib.checks.core import Check, Slip
from lib.rnn import LSTMCell, RNN, RNNCell, bptt_terms



def _sizes(generator: torch.Generator, count: int) -> list[int]:
    """``count`` different sizes in 2..7, so that a product over the wrong axis fails loudly."""
    return [int(n) for n in torch.randperm(6, generator=generator)[:count] + 2]


def _weights(generator: torch.Generator, gates: int, input_size: int, hidden_size: int) -> tuple:
    """``weight_ih (G*H, D), weight_hh (G*H, H), bias_ih (G*H,), bias_hh (G*H,)`` in float64."""
    shapes = [(gates * hidden_size, input_size), (gates * hidden_size, hidden_size),
              (gates * hidden_size,), (gates * hidden_size,)]
    return tuple(0.8 * torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes)


def _load(cell, weights: tuple):
    with torch.no_grad():
        for name, value in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), weights):
            getattr(cell, name).copy_(value)
    return cell


# ---------------------------------------------------------------------------
# Chapter 3: the RNN forward pass.
# ---------------------------------------------------------------------------


def rnn_forward_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(x, h0, weight_ih, weight_hh, bias_ih, bias_hh)`` for :data:`check_rnn_forward`.

    ``x`` is ``(B, T, D)`` and ``h0`` is ``(B, H)`` with four different sizes; ``h0``
    is random, so starting from zeros shows.
    """
    cases = []
    for _ in range(trials):
        batch, steps, input_size, hidden_size = _sizes(generator, 4)
        x = torch.randn(batch, steps, input_size, generator=generator, dtype=torch.float64)
        h0 = torch.randn(batch, hidden_size, generator=generator, dtype=torch.float64)
        cases.append((x, h0, *_weights(generator, 1, input_size, hidden_size)))
    return cases


def _rnn_outputs(x, h0, weight_ih, weight_hh, bias_ih, bias_hh, nonlinearity="tanh"):
    layer = RNN(x.shape[-1], h0.shape[-1], nonlinearity=nonlinearity).double()
    _load(layer.cells[0], (weight_ih, weight_hh, bias_ih, bias_hh))
    with torch.no_grad():
        return layer(x, h0[None])[0]  # (B, T, H)


def _rnn_slip(x, h0, weight_ih, weight_hh, bias_ih, bias_hh, transpose_hh=True, both_biases=True):
    h, outputs = h0, []
    for t in range(x.shape[1]):
        recurrent = h @ (weight_hh.T if transpose_hh else weight_hh)
        h = torch.tanh(x[:, t] @ weight_ih.T + bias_ih + recurrent + (bias_hh if both_biases else 0))
        outputs.append(h)
    return torch.stack(outputs, dim=1)


check_rnn_forward = Check(
    "your RNN's hidden states agree with lib.rnn.RNN on 12 fresh random cases",
    rnn_forward_cases, _rnn_outputs,
    describe=lambda x, h0, *weights: f"x of shape {tuple(x.shape)}, h0 of shape {tuple(h0.shape)}",
    compared_with="lib.rnn's", layout="(B, T, H)",
    slips=(
        Slip(lambda *case: _rnn_outputs(*case, nonlinearity="linear"), "apply tanh to the pre-activation"),
        Slip(lambda x, h0, *weights: _rnn_outputs(x, torch.zeros_like(h0), *weights),
             "start from the given h0, not from zeros"),
        Slip(lambda *case: _rnn_slip(*case, transpose_hh=False),
             "multiply h by weight_hh transposed: h @ weight_hh.T (rows are examples, weights are (out, in))"),
        Slip(lambda *case: _rnn_slip(*case, both_biases=False), "add both biases, bias_ih and bias_hh"),
    ),
    shape_hint=lambda shape, x, h0, *weights: {
        (x.shape[0], x.shape[1] + 1, h0.shape[1]): ": leave out h0, return h_1 .. h_T",
        (x.shape[0], h0.shape[1]): ": return the hidden state at every step, not only the last",
        (x.shape[1], x.shape[0], h0.shape[1]): ": put the batch axis first, (B, T, H)",
    }.get(shape, ""),
    forbidden=("torch.nn.RNN", "torch.nn.RNNCell", "torch.rnn_tanh"),
)


# ---------------------------------------------------------------------------
# Chapter 3: backpropagation through time, step by step.
# ---------------------------------------------------------------------------


def bptt_terms_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh inputs ``(x, h0, weight_ih, weight_hh, bias, g)`` for :data:`check_bptt_terms`.

    One sequence ``x`` of shape ``(T, D)`` read from a random ``h0`` (so that step 1 has a term of
    its own), and ``g``, the gradient of the loss with respect to ``h_T``; ``T``, ``D`` and ``H``
    differ (``T`` from 8 to 13, ``D`` and ``H`` at most 7, so that the sum of the terms, ``(H, H)``,
    never has the shape of one row of each term, ``(T, H)``). The recurrent weights are scaled so
    that the terms of early steps range from vanishing to large.
    """
    cases = []
    for trial in range(trials):
        steps, input_size, hidden_size = _sizes(generator, 3)
        steps += 6
        x = torch.randn(steps, input_size, generator=generator, dtype=torch.float64)
        h0 = torch.randn(hidden_size, generator=generator, dtype=torch.float64).tanh()
        weight_ih = torch.randn(hidden_size, input_size, generator=generator, dtype=torch.float64) / input_size**0.5
        scale = (0.6, 1.0, 1.6)[trial % 3] / hidden_size**0.5
        weight_hh = scale * torch.randn(hidden_size, hidden_size, generator=generator, dtype=torch.float64)
        bias = 0.3 * torch.randn(hidden_size, generator=generator, dtype=torch.float64)
        g = torch.randn(hidden_size, generator=generator, dtype=torch.float64)
        cases.append((x, h0, weight_ih, weight_hh, bias, g))
    return cases


def _bptt_slip(x, h0, weight_ih, weight_hh, bias, g, state="before", slopes="every step", transpose=False,
               order="k = 1 first", start_from_zero=False, first_slope=True, term_of="a"):
    """The terms of the BPTT sum with the usual slips switched on: ``state="after"`` multiplies h_k
    instead of h_(k-1); ``slopes`` is ``"every step"``, ``"none"``, ``"last step only"`` (none when
    going back), ``"lagged"`` (1 - h_(k-1)² instead of 1 - h_k²) or ``"the step left"`` (going back
    from a_k to a_(k-1) with the slope 1 - h_k² of step k); ``first_slope=False`` starts from
    δ_T = g; ``term_of="h"`` pairs ∂L/∂h_k, not δ_k = ∂L/∂a_k, with h_(k-1); ``transpose`` goes back
    with W_hh instead of its transpose."""
    states = [torch.zeros_like(h0) if start_from_zero else h0]
    for x_t in x:
        states.append(torch.tanh(weight_ih @ x_t + weight_hh @ states[-1] + bias))
    steps = len(x)

    def slope(k):  # tanh'(a_k) as the slip has it
        if slopes == "none" or (slopes == "last step only" and k < steps) or (k == steps and not first_slope):
            return torch.ones_like(h0)
        if slopes == "the step left" and k < steps:
            return 1 - states[k + 1] ** 2
        return 1 - states[k - 1 if slopes == "lagged" else k] ** 2

    back = weight_hh if transpose else weight_hh.T
    terms, upstream = [], g  # ∂L/∂h_T
    for k in range(steps, 0, -1):
        delta = slope(k) * upstream  # ∂L/∂a_k
        terms.append(torch.outer(delta if term_of == "a" else upstream, states[k if state == "after" else k - 1]))
        upstream = back @ delta  # ∂L/∂h_(k-1)
    terms = torch.stack(terms[::-1])  # (T, H, H), k = 1 first
    return terms.flip(0) if order == "k = T first" else terms


def _bptt_terms(x, h0, weight_ih, weight_hh, bias, g):
    """:func:`lib.rnn.bptt_terms` of an :class:`lib.rnn.RNNCell` holding these weights."""
    cell = _load(RNNCell(x.shape[1], weight_hh.shape[0]).double(), (weight_ih, weight_hh, bias, torch.zeros_like(bias)))
    return bptt_terms(cell, x[None], g[None], h0[None])[0]  # (T, H, H)


def _split_differently(found, expected, *case) -> str | None:
    if torch.allclose(found.sum(0), expected.sum(0), atol=1e-6, rtol=1e-6):
        return ("your terms add up to the whole gradient, but they are split differently between the steps: "
                "term k is δ_k h_(k-1)ᵀ, step k's own use of W_hh, with δ_k = ∂L/∂a_k")
    return None


check_bptt_terms = Check(
    "your BPTT terms agree with lib.rnn.bptt_terms on 10 fresh random sequences",
    bptt_terms_cases, _bptt_terms,
    describe=lambda x, h0, weight_ih, weight_hh, bias, g: f"x of shape {tuple(x.shape)} and H = {weight_hh.shape[0]}",
    compared_with="lib.rnn's", noun="terms", layout="(T, H, H)",
    slips=(
        Slip(lambda *case: _bptt_slip(*case, state="after"),
             "step k's own use of W_hh multiplies the state it reads, h_(k-1), not the state it writes, h_k: "
             "term k is δ_k h_(k-1)ᵀ"),
        Slip(lambda *case: _bptt_slip(*case, slopes="none"),
             "you left out tanh'(a_k) = 1 - h_k²: δ_T = (1 - h_T²) ⊙ g, and each step back multiplies by the "
             "slope of the step it reaches"),
        Slip(lambda *case: _bptt_slip(*case, slopes="last step only"),
             "going back from a_k to a_(k-1) crosses the tanh of step k-1 too: "
             "δ_(k-1) = (1 - h_(k-1)²) ⊙ W_hhᵀ δ_k, not W_hhᵀ δ_k"),
        Slip(lambda *case: _bptt_slip(*case, slopes="lagged"),
             "the slope of step k is tanh'(a_k) = 1 - h_k², of the state step k writes, not 1 - h_(k-1)² of the "
             "state it reads"),
        Slip(lambda *case: _bptt_slip(*case, first_slope=False),
             "you started from δ_T = g and left out the slope of step T: δ_T = ∂L/∂a_T = (1 - h_T²) ⊙ g, "
             "since h_T = tanh(a_T)"),
        Slip(lambda *case: _bptt_slip(*case, term_of="h"),
             "term k pairs δ_k = ∂L/∂a_k = (1 - h_k²) ⊙ ∂L/∂h_k with h_(k-1): ∂⁺h_k/∂W_hh holds the slope "
             "diag(1 - h_k²) of step k; you multiplied ∂L/∂h_k by h_(k-1)ᵀ and forgot it"),
        Slip(lambda *case: _bptt_slip(*case, slopes="the step left"),
             "going back from a_k to a_(k-1), multiply by the slope of the step you reach: "
             "δ_(k-1) = (1 - h_(k-1)²) ⊙ W_hhᵀ δ_k, not (1 - h_k²) ⊙ W_hhᵀ δ_k of the step you left"),
        Slip(lambda *case: _bptt_slip(*case, transpose=True),
             "going back multiplies by W_hh transposed: a_k = W_hh h_(k-1) + ..., so ∂L/∂h_(k-1) = W_hhᵀ δ_k"),
        Slip(lambda *case: _bptt_slip(*case).transpose(1, 2),
             "entry [i, j] of a term is the derivative with respect to W_hh[i, j], the weight from unit j to "
             "unit i: δ_k[i] h_(k-1)[j]; yours are transposed"),
        Slip(lambda *case: _bptt_slip(*case, order="k = T first"),
             "put the terms in the order of the steps: entry 0 is step k = 1, the last entry step T"),
        Slip(lambda *case: _bptt_slip(*case, start_from_zero=True), "start from the given h0, not from zeros"),
        Slip(lambda *case: _bptt_slip(*case).cumsum(0),
             "return each step's own term; you returned running sums"),
    ),
    shape_hint=lambda shape, x, h0, *rest: (
        ": return the term of every step, not their sum" if shape == (len(h0), len(h0))  # first: T may be H
        else ": one term per step k = 1 .. T (h0 is not a step)" if shape == (x.shape[0] + 1, len(h0), len(h0))
        else ": each term is a matrix the shape of W_hh, δ_k h_(k-1)ᵀ" if shape == (x.shape[0], len(h0))
        else ""),
    rules=_split_differently, tolerance=dict(atol=1e-8, rtol=1e-6),
    forbidden=("torch.autograd", "torch.func", ".backward"),
)


# ---------------------------------------------------------------------------
# Chapter 3: which steps a truncated gradient reaches.
# ---------------------------------------------------------------------------


def gradient_reach_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh ``(length, k)`` for :data:`check_gradient_reach`: ``2 <= k < length``, ``k`` not dividing
    ``length`` in most cases, so that the short last chunk shows."""
    cases = []
    for _ in range(trials):
        length = int(torch.randint(5, 17, (1,), generator=generator))
        cases.append((length, int(torch.randint(2, length, (1,), generator=generator))))
    return cases


def _gradient_reach(length: int, k: int, window: bool = False, causal: bool = True,
                    truncated: bool = True, diagonal: bool = True) -> torch.Tensor:
    """``R[t, s] = 1`` when the loss at step ``t`` back-propagates to the input at step ``s``
    (steps from 0, chunks ``[0, k), [k, 2k), ...``); the flags give the known wrong answers."""
    t, s = torch.arange(length)[:, None], torch.arange(length)[None, :]  # (L, 1), (1, L)
    reach = (s <= t if diagonal else s < t) if causal else torch.ones(length, length, dtype=torch.bool)  # (L, L)
    if truncated:
        reach = reach & ((t - s < k) if window else (t // k == s // k))
    return reach.long()


def _reach_mismatch(found: torch.Tensor, expected: torch.Tensor, length: int, k: int) -> str:
    """Where a 0/1 reach matrix is wrong, in whole numbers: how many entries, and the first of them
    with the reason it must be 0 or 1 (a tolerance means nothing for a matrix of 0s and 1s)."""
    wrong = (found != expected).nonzero().tolist()
    t, s = wrong[0]
    start = (t // k) * k  # the first step of t's chunk
    if expected[t, s] and s == t:
        why = f"it must be 1: the loss at step {t} reaches the input of its own step"
    elif expected[t, s]:
        why = f"it must be 1: steps {s} and {t} lie in the chunk that starts at step {start}, and {s} <= {t}"
    elif s > t:
        why = f"it must be 0: the input at step {s} comes after the loss at step {t}"
    else:
        why = f"it must be 0: the chunk of step {t} starts at step {start}, after step {s}"
    return (f"your reach matrix differs from the book's in {len(wrong)} of its {length * length} entries; the "
            f"first is R[{t}, {s}] = {int(found[t, s])}: {why}")


check_gradient_reach = Check(
    "your reach matrices agree with the chunks of lib.char_lm.truncated_bptt_loss on 10 fresh (length, k)",
    gradient_reach_cases, _gradient_reach,
    describe=lambda length, k: f"length = {length}, k = {k}",
    compared_with="the book's", layout="(L, L)", noun="reach matrix",
    slips=(
        Slip(lambda length, k: _gradient_reach(length, k, truncated=False),
             "that is full BPTT: with truncation the gradient of a loss stops at the first step of its chunk"),
        Slip(lambda length, k: _gradient_reach(length, k, window=True),
             "that is a sliding window of the last k steps; the chunks are fixed, [0, k), [k, 2k), ...: "
             "a loss late in a chunk reaches back further than one early in it"),
        Slip(lambda length, k: _gradient_reach(length, k).T,
             "rows are losses and columns inputs: R[t, s] says whether the loss at step t reaches input s"),
        Slip(lambda length, k: _gradient_reach(length, k, causal=False),
             "a loss at step t cannot reach an input after t: the model had not read it yet"),
        Slip(lambda length, k: _gradient_reach(length, k, diagonal=False),
             "the loss at step t also reaches the input at step t itself, which it was computed from: R[t, t] = 1 "
             "(keep the diagonal)"),
    ),
    shape_hint=lambda shape, length, k: "",
    mismatch=_reach_mismatch,
)


# ---------------------------------------------------------------------------
# Chapter 4: one LSTM step (the GRU's Jacobian is checked in lib.checks.gating).
# ---------------------------------------------------------------------------


def lstm_step_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh)`` for :data:`check_lstm_step`.

    ``c`` is large in some cases (up to ±6), where ``o * tanh(c)`` and ``o * c`` differ most.
    """
    cases = []
    for trial in range(trials):
        batch, input_size, hidden_size = _sizes(generator, 3)
        x = torch.randn(batch, input_size, generator=generator, dtype=torch.float64)
        h = torch.randn(batch, hidden_size, generator=generator, dtype=torch.float64).tanh()
        c = (1 + trial % 3) * 2 * torch.randn(batch, hidden_size, generator=generator, dtype=torch.float64)
        cases.append((x, h, c, *_weights(generator, 4, input_size, hidden_size)))
    return cases


def _lstm_slip(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh, order="ifgo", squash_output=True,
               candidate=torch.tanh):
    a = x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh
    blocks = dict(zip(order, a.chunk(4, dim=-1)))
    i, f, o = torch.sigmoid(blocks["i"]), torch.sigmoid(blocks["f"]), torch.sigmoid(blocks["o"])
    c = f * c + i * candidate(blocks["g"])
    return torch.stack([o * torch.tanh(c) if squash_output else o * c, c])


def _lstm_reference(x, h, c, *weights):
    """``stack([h', c'])`` from :class:`lib.rnn.LSTMCell` holding these weights."""
    cell = _load(LSTMCell(x.shape[1], h.shape[1]).double(), weights)
    with torch.no_grad():
        return torch.stack(cell(x, (h, c)))  # (2, B, H)


check_lstm_step = Check(
    "your LSTM step agrees with lib.rnn.LSTMCell on 12 fresh random cases",
    lstm_step_cases, _lstm_reference,
    describe=lambda x, h, c, *weights: f"x of shape {tuple(x.shape)}, h and c of shape {tuple(h.shape)}",
    compared_with="lib.rnn's", layout="(2, B, H)",
    slips=(
        Slip(lambda *case: _lstm_slip(*case, squash_output=False),
             "the output is h = o ⊙ tanh(c), not the notes' o ⊙ c (see the errata)"),
        Slip(lambda *case: _lstm_reference(*case).flip(0), "stack h first, then c: torch.stack([h, c])"),
        Slip(lambda *case: _lstm_slip(*case, order="ifog"),
             "PyTorch orders the row blocks i, f, g, o (candidate third, output gate last)"),
        Slip(lambda *case: _lstm_slip(*case, order="figo"),
             "the first block of rows is the input gate i, the second the forget gate f"),
        Slip(lambda *case: _lstm_slip(*case, candidate=torch.sigmoid),
             "the candidate g goes through tanh, not sigmoid"),
    ),
    shape_hint=lambda shape, x, h, *rest: {
        tuple(h.shape): ": return torch.stack([h, c]), both new states",
        (h.shape[0], 2 * h.shape[1]): ": stack h and c on a new first axis, torch.stack([h, c])",
    }.get(shape, ""),
    forbidden=("torch.nn.LSTMCell", "torch.nn.LSTM", "torch.lstm_cell"),
)
