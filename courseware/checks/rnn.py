"""Checkers for the exercises of chapter 3 (recurrent networks); chapter 4's are in :mod:`courseware.checks.gating`."""
from __future__ import annotations

import torch

from courseware.checks.core import Check, Slip
from lib.part2_recurrent.rnn import RNNCell, bptt_terms



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
# Chapter 3: the last valid state of each sequence of a padded batch.
# ---------------------------------------------------------------------------


def last_state_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh)`` for :data:`check_rnn_last_state`.

    ``x`` is ``(B, T, D)`` with ``T`` from 5 to 9 and ``B``, ``D``, ``H`` three different sizes in
    2..7; the padding is random like the rest of ``x``. ``lengths`` is ``(B,)`` (int64) in ``1..T``:
    below ``T`` in every row of cases 0, 3, 6 and 9 (so that an answer that reads one step too far
    returns a value there before it can run off the end), with one row of length 1 and one of length
    ``T`` in cases 1, 4, 7 and 10, and drawn freely in the others. ``h0`` is random, so starting from
    zeros shows.
    """
    cases = []
    for trial in range(trials):
        batch, input_size, hidden_size = _sizes(generator, 3)
        steps = int(torch.randint(5, 10, (1,), generator=generator))
        x = torch.randn(batch, steps, input_size, generator=generator, dtype=torch.float64)
        h0 = torch.randn(batch, hidden_size, generator=generator, dtype=torch.float64)
        lengths = torch.randint(1, steps + 1, (batch,), generator=generator)
        if trial % 3 == 0:
            lengths = lengths.clamp(max=steps - 1)
        elif trial % 3 == 1:
            short, full = torch.randperm(batch, generator=generator)[:2].tolist()
            lengths[short], lengths[full] = 1, steps
        cases.append((x, lengths, h0, *_weights(generator, 1, input_size, hidden_size)))
    return cases


def last_state_by_packing(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh) -> torch.Tensor:
    """The reference: ``h_n`` of ``torch.nn.RNN`` (tanh, these weights, float64) run on the batch packed
    with ``pack_padded_sequence(..., enforce_sorted=False)``, which returns it in the batch's own order.
    The layer is built under ``fork_rng``, so the caller's random state is left alone.

    Shapes
    ------
    x : (B, T, D); lengths : (B,); h0 : (B, H); weight_ih : (H, D); weight_hh : (H, H); biases : (H,)
    output : (B, H)
    """
    with torch.random.fork_rng():
        layer = torch.nn.RNN(x.shape[2], h0.shape[1], batch_first=True).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"),
                               (weight_ih, weight_hh, bias_ih, bias_hh)):
            getattr(layer, name).copy_(value)
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return layer(packed, h0[None])[1][0]  # h_n: (1, B, H) -> (B, H)


def _every_state(x, h0, weight_ih, weight_hh, bias_ih, bias_hh) -> torch.Tensor:
    """``h_0 .. h_T`` of the tanh RNN run over every step, padding included: ``(B, T + 1, H)``."""
    states = [h0]
    for t in range(x.shape[1]):
        states.append(torch.tanh(x[:, t] @ weight_ih.T + bias_ih + states[-1] @ weight_hh.T + bias_hh))
    return torch.stack(states, dim=1)


def _state_after(steps, zero_start=False):
    """A slip: the state after ``steps(lengths, T)`` steps of each sequence (from zeros with
    ``zero_start``); the right answer is ``steps = lengths``."""
    def answer(x, lengths, h0, *weights):
        states = _every_state(x, torch.zeros_like(h0) if zero_start else h0, *weights)
        return states[torch.arange(len(lengths)), steps(lengths, x.shape[1])]
    return answer


def _zeros_for_the_short(x, lengths, h0, *weights):
    """A slip: the last column of a padded output (as pad_packed_sequence gives it), 0 for every
    sequence shorter than T."""
    last = _every_state(x, h0, *weights)[:, -1]
    return torch.where((lengths == x.shape[1])[:, None], last, torch.zeros_like(last))


def _masked_loop(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh, activation=torch.tanh,
                 transpose_hh=True, zero_padding=False):
    """The master's loop, in which a sequence that has ended keeps its state, with a slip of the RNN step
    switched on: another ``activation`` (the identity: no tanh), ``h @ weight_hh`` untransposed, or a
    zeroed bias passed in. With ``zero_padding`` the padded inputs are zeroed instead and every sequence
    runs all T steps."""
    running = torch.arange(x.shape[1])[None, :] < lengths[:, None]  # (B, T)
    if zero_padding:
        x, running = x * running[:, :, None], torch.ones_like(running)
    h = h0
    for t in range(x.shape[1]):
        recurrent = h @ (weight_hh.T if transpose_hh else weight_hh)
        h = torch.where(running[:, t, None], activation(x[:, t] @ weight_ih.T + bias_ih + recurrent + bias_hh), h)
    return h


def _rows_reordered(found, expected, x, lengths, *weights) -> str | None:
    """The right states in another order of the rows: sorted by length, or otherwise; else None."""
    close = torch.isclose(found[:, None, :], expected[None, :, :], atol=1e-4, rtol=1e-4).all(dim=2)  # (B, B)
    if not bool(close.any(dim=1).all()):
        return None
    order = close.to(torch.int8).argmax(dim=1)  # row b of found is the state of sequence order[b]
    if sorted(order.tolist()) != list(range(len(order))) or order.tolist() == list(range(len(order))):
        return None  # not a permutation of the rows, or the rows in place (then the values are wrong)
    steps = lengths[order].diff()
    if bool((steps <= 0).all()) or bool((steps >= 0).all()):
        return ("your rows are sorted by length: undo the sort, so that row b holds the state of sequence b "
                "(packing sorts the batch too, and h_n comes back in the batch's own order)")
    return "your rows hold the right states in another order: row b must hold the state of sequence b"


def _last_state_shape_hint(shape, x, lengths, h0, *weights):
    batch, steps, hidden = x.shape[0], x.shape[1], h0.shape[1]
    if shape in ((batch, steps, hidden), (batch, steps + 1, hidden)):
        return ": return one state per sequence, its last valid one, not the state at every step"
    return {
        (1, batch, hidden): ": leave out the (layers × directions) axis of h_n and return (B, H)",
        (hidden, batch): ": one row per sequence, (B, H)",
        (batch,): ": return the whole state vector of each sequence, (B, H)",
    }.get(shape, "")


check_rnn_last_state = Check(
    "your last states agree with torch.nn.RNN on 12 fresh random packed batches",
    last_state_cases, last_state_by_packing,
    describe=lambda x, lengths, h0, *weights: (f"x of shape {tuple(x.shape)}, lengths {lengths.tolist()}, "
                                               f"H = {h0.shape[1]}"),
    compared_with="torch.nn.RNN's", noun="last states", layout="(B, H)",
    slips=(
        Slip(_state_after(lambda lengths, steps: torch.full_like(lengths, steps)),
             "you returned the state after all T steps for every sequence: a sequence of length L ends "
             "with h_L, and the steps after it read padding, which must not change its state"),
        Slip(_zeros_for_the_short,
             "your state is 0 for every sequence shorter than T: that is the last column of a padded "
             "output (pad_packed_sequence fills the padding with zeros); return each sequence's own "
             "last state h_L"),
        Slip(_state_after(lambda lengths, steps: (lengths + 1).clamp(max=steps)),
             "you went one step too far: a sequence of length L has read x[b, 0] .. x[b, L-1] after L "
             "steps, so its last state is h_L; yours is h_(L+1), which has read one step of padding"),
        Slip(_state_after(lambda lengths, steps: lengths - 1),
             "you stopped one step short: a sequence of length L ends with h_L, after reading x[b, 0] "
             ".. x[b, L-1]; yours is h_(L-1) (h0 itself for L = 1)"),
        Slip(_state_after(lambda lengths, steps: lengths, zero_start=True), "start from the given h0, not from zeros"),
        Slip(lambda *case: _masked_loop(*case, zero_padding=True),
             "you ran the padded steps on zero inputs: a zero input still changes the state, "
             "h ↦ tanh(h W_hhᵀ + b_ih + b_hh); the steps after L must leave it alone"),
        Slip(lambda *case: _masked_loop(*case, activation=lambda a: a),
             "apply tanh to the pre-activation: h_t = tanh(x_t W_ihᵀ + b_ih + h_(t-1) W_hhᵀ + b_hh)"),
        Slip(lambda *case: _masked_loop(*case, transpose_hh=False),
             "multiply h by weight_hh transposed: h @ weight_hh.T (rows are examples, weights are (out, in))"),
        Slip(lambda x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh: _masked_loop(
                 x, lengths, h0, weight_ih, weight_hh, bias_ih, torch.zeros_like(bias_hh)),
             "add both biases, bias_ih and bias_hh"),
        Slip(lambda x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh: _masked_loop(
                 x, lengths, h0, weight_ih, weight_hh, torch.zeros_like(bias_ih), bias_hh),
             "add both biases, bias_ih and bias_hh"),
    ),
    shape_hint=_last_state_shape_hint, rules=_rows_reordered,
    forbidden=("torch.nn.RNN", "torch.nn.RNNCell", "torch.rnn_tanh", "torch.nn.utils.rnn"),
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
    """:func:`lib.part2_recurrent.rnn.bptt_terms` of an :class:`lib.part2_recurrent.rnn.RNNCell` holding these weights."""
    cell = _load(RNNCell(x.shape[1], weight_hh.shape[0]).double(), (weight_ih, weight_hh, bias, torch.zeros_like(bias)))
    return bptt_terms(cell, x[None], g[None], h0[None])[0]  # (T, H, H)


def _split_differently(found, expected, *case) -> str | None:
    if torch.allclose(found.sum(0), expected.sum(0), atol=1e-6, rtol=1e-6):
        return ("your terms add up to the whole gradient, but they are split differently between the steps: "
                "term k is δ_k h_(k-1)ᵀ, step k's own use of W_hh, with δ_k = ∂L/∂a_k")
    return None


check_bptt_terms = Check(
    "your BPTT terms agree with lib.part2_recurrent.rnn.bptt_terms on 10 fresh random sequences",
    bptt_terms_cases, _bptt_terms,
    describe=lambda x, h0, weight_ih, weight_hh, bias, g: f"x of shape {tuple(x.shape)} and H = {weight_hh.shape[0]}",
    compared_with="lib.part2_recurrent.rnn's", noun="terms", layout="(T, H, H)",
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
    "your reach matrices agree with the chunks of lib.part2_recurrent.char_lm.truncated_bptt_loss on 10 fresh (length, k)",
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
# Chapter 3: which steps the gradient of BPTT(k1, k2) reaches.
# ---------------------------------------------------------------------------


def window_reach_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh ``(length, k1, k2)`` for :data:`check_window_reach`: ``2 <= k1 < k2 <= k1 + 4``, at least three
    chunks and ``k1`` never dividing ``length``, so that the short last chunk shows."""
    cases = []
    for _ in range(trials):
        k1 = int(torch.randint(2, 5, (1,), generator=generator))
        k2 = k1 + int(torch.randint(1, 5, (1,), generator=generator))
        chunks, rest = int(torch.randint(3, 5, (1,), generator=generator)), int(torch.randint(1, k1, (1,), generator=generator))
        cases.append((k1 * chunks + rest, k1, k2))
    return cases


def _window_reach(length: int, k1: int, k2: int, begin: str = "chunk", sliding: bool = False) -> torch.Tensor:
    """``R[t, s] = 1`` when the loss at step ``t`` back-propagates to the input at step ``s`` under
    BPTT(k1, k2): its chunk starts at ``c = k1 (t // k1)``, its window at ``max(0, c - (k2 - k1))``;
    ``begin`` and ``sliding`` give the known wrong answers."""
    t, s = torch.arange(length)[:, None], torch.arange(length)[None, :]  # (L, 1), (1, L)
    chunk = k1 * (t // k1)  # (L, 1)
    first = {
        "chunk": chunk - (k2 - k1),
        "plain": chunk,  # k2 ignored
        "end": (chunk + k1).clamp(max=length) - k2,  # k2 steps back from the chunk's end
        "k2 before": chunk - k2,  # k2 extra steps, not k2 - k1
        "late": chunk - (k2 - k1) + 1,  # off by one: windows of k2 - 1 steps
        "early": chunk - (k2 - k1) - 1,  # off by one: windows of k2 + 1 steps
    }[begin]
    if sliding:
        first = t - k2 + 1  # every loss gets exactly k2 steps
    return ((first.clamp(min=0) <= s) & (s <= t)).long()


def _window_mismatch(found: torch.Tensor, expected: torch.Tensor, length: int, k1: int, k2: int) -> str:
    """Where a 0/1 reach matrix of BPTT(k1, k2) is wrong, in whole numbers, with the reason."""
    wrong = (found != expected).nonzero().tolist()
    t, s = wrong[0]
    chunk = k1 * (t // k1)
    begin = max(0, chunk - (k2 - k1))
    starts = (f"the chunk of step {t} starts at c = {chunk}, its window at max(0, c - (k2 - k1)) = "
              f"max(0, {chunk} - {k2 - k1}) = {begin}")
    if expected[t, s]:
        why = f"it must be 1: {starts}, and {begin} <= {s} <= {t}"
    elif s > t:
        why = f"it must be 0: the input at step {s} comes after the loss at step {t}"
    else:
        why = f"it must be 0: {starts}, after step {s}"
    return (f"your reach matrix differs from the book's in {len(wrong)} of its {length * length} entries; the "
            f"first is R[{t}, {s}] = {int(found[t, s])}: {why}")


check_window_reach = Check(
    "your reach matrices agree with lib.part2_recurrent.char_lm.truncated_bptt_loss(..., k2=k2) on 10 fresh "
    "(length, k1, k2)",
    window_reach_cases, _window_reach,
    describe=lambda length, k1, k2: f"length = {length}, k1 = {k1}, k2 = {k2}",
    compared_with="the book's", layout="(L, L)", noun="reach matrix",
    slips=(
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2, begin="plain"),
             "that is plain truncation in chunks of k1: BPTT(k1, k2) starts each chunk's window k2 - k1 steps "
             "before the chunk"),
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2, sliding=True),
             "that is a sliding window of the last k2 steps for every loss; the windows belong to the chunks: "
             "a loss early in its chunk reaches back k2 - k1 + 1 steps, the chunk's last one k2"),
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2, begin="end"),
             "the last chunk is shorter than k1, but its window still starts k2 - k1 steps before the chunk's "
             "first step, not k2 steps before its end"),
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2, begin="k2 before"),
             "the window holds k2 steps in all, the chunk's k1 among them: it starts k2 - k1 steps before the "
             "chunk, not k2"),
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2, begin="late"),
             "your windows start one step late (off by one): the window of the chunk that starts at step c "
             "starts at max(0, c - (k2 - k1)), so it holds k2 steps, not k2 - 1"),
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2, begin="early"),
             "your windows start one step early (off by one): the window of the chunk that starts at step c "
             "starts at max(0, c - (k2 - k1)), so it holds k2 steps, not k2 + 1"),
        Slip(lambda length, k1, k2: _window_reach(length, k1, k2).T,
             "rows are losses and columns inputs: R[t, s] says whether the loss at step t reaches input s"),
    ),
    shape_hint=lambda shape, length, k1, k2: "",
    mismatch=_window_mismatch,
)
