"""Checkers for chapter 4 (gated recurrent networks): an LSTM layer with a projection, the
one-step Jacobian of a GRU, and the experiment on the forget-gate bias."""
from __future__ import annotations

import math

import torch

from courseware.checks.core import Check, Measured, Slip, one_thread
from lib.part2_recurrent.gating import MemoryClassifier

# Above this bias σ'(b) = σ(b)(1 - σ(b)) is below 1.3e-4: the gradient that could teach the gate to forget is gone.
LARGEST_FORGET_BIAS = 9.0
# The least ratio ρ = mean ‖∂ℓ/∂x_1‖ / mean ‖∂ℓ/∂x_T‖ that the checker accepts.
LEAST_REACH = 0.1
# ρ is compared with LEAST_REACH to this relative tolerance, so that rounding (a float32 measurement,
# another order of sums) cannot fail a bias that a search stopped at ρ = 0.1 exactly.
REACH_RTOL = 1e-4


def forget_bias_cases(generator: torch.Generator, trials: int = 6) -> list[tuple]:
    """Sequence lengths ``(length,)`` for :data:`check_forget_bias`: 55 steps first, where the bias 2
    gives ρ = 0.07 (it passes on about two lengths in three), then fresh lengths from 20 to 60."""
    return [(55,)] + [(int(n),) for n in torch.randint(20, 61, (trials - 1,), generator=generator)]


def forget_bias(length: int) -> torch.Tensor:
    """The book's answer: ``b = ln(2T)``, so that ``σ(b)^T ≈ e^{-1/2}`` of the memory survives ``T`` steps."""
    return torch.tensor(math.log(2 * length), dtype=torch.float64)


def first_step_reach(bias: float, length: int, batch: int = 32, seed: int | None = None) -> float:
    """The ratio ρ of the gradient's norm at the first input to its norm at the last, for an untrained LSTM.

    The LSTM is the chapter's :class:`lib.part2_recurrent.gating.MemoryClassifier` (6 inputs, 32 units, 4 classes)
    with forget-gate bias ``bias``, built right after ``torch.manual_seed(seed)`` and converted to
    float64 (the caller's random state is left alone). From ``torch.Generator().manual_seed(seed)``
    come, in this order, ``batch`` random sequences ``x`` and random weights ``w`` for the logits;
    with ``ℓ = Σ w ⊙ logits``, returns

        ρ = mean over the batch of ‖∂ℓ/∂x_1‖ / mean over the batch of ‖∂ℓ/∂x_T‖.

    ρ is not the share of a gradient that survives ``T`` steps: the two inputs reach the loss along
    different paths, and ρ exceeds 1 for large biases. It changes severalfold from one random model
    to the next, hence the fixed seed, ``length`` unless ``seed`` is given, which the exercise states.

    Shapes
    ------
    inputs ``(batch, length, 6)``; logits ``(batch, 4)``
    """
    seed = length if seed is None else seed
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MemoryClassifier("lstm", 6, 32, 4, keep_bias=bias).double()
    x = torch.randn(batch, length, 6, generator=generator, dtype=torch.float64, requires_grad=True)  # (B, T, 6)
    weights = torch.randn(batch, 4, generator=generator, dtype=torch.float64)  # (B, 4)
    with one_thread():
        (grad,) = torch.autograd.grad((model(x) * weights).sum(), x)  # (B, T, 6)
    norms = grad.norm(dim=-1).mean(dim=0)  # (T,)
    return float(norms[0] / norms[-1])


def _distinct(value: float, other: float) -> str:
    """``value`` with enough digits (at least 2) not to print like ``other``."""
    for digits in range(2, 12):
        if f"{value:.{digits}g}" != f"{other:.{digits}g}":
            return f"{value:.{digits}g}"
    return repr(value)


def _forget_bias_rules(found: torch.Tensor, expected: torch.Tensor, length: int) -> str | None:
    """Too large a bias, or too small a ratio ρ; None when the bias is good."""
    bias = float(found)
    if bias > LARGEST_FORGET_BIAS:
        return (f"b = {bias:.3g} holds the gate so far open that σ'(b) < 1.3e-4: training could never teach "
                f"it to forget. Keep b ≤ {LARGEST_FORGET_BIAS:g}")
    reach = first_step_reach(bias, length)
    if reach < LEAST_REACH * (1 - REACH_RTOL):
        return (f"with b = {_distinct(bias, reach)} the gradient's norm at the first input is "
                f"{_distinct(reach, LEAST_REACH)} times its norm at the last (ρ, each norm averaged over the "
                "batch); ρ must be at least a tenth. The memory keeps σ(b)^T of itself over T steps")
    return None


check_forget_bias = Measured(
    f"for T = 55 and 5 fresh lengths from 20 to 60 steps, the gradient's norm at the first input of the "
    f"chapter's untrained LSTM is at least {LEAST_REACH:g} times its norm at the last",
    forget_bias_cases, forget_bias,
    describe=lambda length: f"T = {length}",
    compared_with="b = ln(2T)", noun="bias", layout=" (a 0-dimensional tensor)",
    slips=(
        Slip(lambda length: torch.tensor(1.0, dtype=torch.float64),
             "b = 1, the bias Jozefowicz et al. recommend, keeps σ(1)^T ≈ 0.73^T: far too little over "
             "tens of steps"),
        Slip(lambda length: torch.tensor(0.0, dtype=torch.float64),
             "b = 0, PyTorch's default, halves the memory at every step"),
    ),
    rules=_forget_bias_rules,
)


# ---------------------------------------------------------------------------
# An LSTM layer with a projection, LSTMP, over a whole sequence (exercise ex-gate-lstm-projection).
# ---------------------------------------------------------------------------


def lstmp_layer_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)`` for
    :data:`check_lstmp_layer`.

    ``B``, ``D``, ``P`` and ``H`` are four different sizes in 2..7 with ``P < H`` (PyTorch requires it)
    and ``H ≠ 2P``, so that the usual wrong widths of a step's states, ``2H`` (no projection), ``2P``
    (the memory projected too), ``P`` and ``H`` (one state only), differ from ``P + H`` and from each
    other; ``T`` is 3 to 6 steps and differs from ``B``, so that a time-major result has a shape of its
    own. ``x`` is ``(B, T, D)``, ``h0 = tanh(N(0, 1))`` is ``(B, P)`` and ``c0`` is ``(B, H)``, large in
    some cases (up to ±6), where ``o ⊙ tanh(c)`` and ``o ⊙ c`` differ most; weights and biases are
    ``0.8 × N(0, 1)``, all float64.
    """
    cases = []
    while len(cases) < trials:
        batch, input_size, low, high = (int(n) for n in torch.randperm(6, generator=generator)[:4] + 2)
        proj_size, hidden_size = min(low, high), max(low, high)
        steps = int(torch.randint(3, 7, (1,), generator=generator))
        if hidden_size == 2 * proj_size or steps == batch:
            continue
        scale = (1 + len(cases) % 3) * 2
        x = torch.randn(batch, steps, input_size, generator=generator, dtype=torch.float64)
        h0 = torch.randn(batch, proj_size, generator=generator, dtype=torch.float64).tanh()
        c0 = scale * torch.randn(batch, hidden_size, generator=generator, dtype=torch.float64)
        shapes = [(4 * hidden_size, input_size), (4 * hidden_size, proj_size), (4 * hidden_size,),
                  (4 * hidden_size,), (proj_size, hidden_size)]
        weights = [0.8 * torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes]
        cases.append((x, h0, c0, *weights))
    return cases


def _torch_lstmp(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr) -> torch.nn.LSTM:
    """``torch.nn.LSTM(D, H, proj_size=P, batch_first=True)`` in float64 holding these weights, built
    under ``fork_rng`` so that the caller's random state is left alone."""
    proj_size, hidden_size = weight_hr.shape
    with torch.random.fork_rng():
        layer = torch.nn.LSTM(weight_ih.shape[1], hidden_size, proj_size=proj_size, batch_first=True).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"),
                               (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)):
            getattr(layer, name).copy_(value)
    return layer


def lstmp_layer_by_torch(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr) -> torch.Tensor:
    """The reference: ``torch.nn.LSTM(D, H, proj_size=P, batch_first=True)`` holding these weights, in
    float64, run from ``(h0, c0)``. Its output is ``h_1 .. h_T``; it returns the memory after the last
    step only, so ``c_t`` comes from the same layer run on ``x[:, :t]``, the first ``t`` steps.

    Shapes
    ------
    x : (B, T, D); h0 : (B, P); c0 : (B, H); weight_ih : (4H, D); weight_hh : (4H, P); biases : (4H,);
    weight_hr : (P, H); output : (B, T, P + H), ``[:, t] = [h_(t+1), c_(t+1)]``
    """
    layer = _torch_lstmp(weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)
    state = (h0[None], c0[None])
    with torch.no_grad():
        output, _ = layer(x, state)  # (B, T, P)
        memories = [layer(x[:, :steps], state)[1][1][0] for steps in range(1, x.shape[1] + 1)]  # T × (B, H)
    return torch.cat([output, torch.stack(memories, dim=1)], dim=2)


def lstmp_layer_with(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr, order="ifgo",
                     candidate=torch.tanh, output="o tanh(c')", squash_after=False, h_first=True,
                     carry=("h", "c"), start="given", states="after") -> torch.Tensor:
    """The layer written out, with the known slips as options. Within a step: ``order`` of the row
    blocks, the ``candidate``'s squashing, the ``output`` before the projection (``"o c'"``, the
    notes'; ``"o tanh(c)"``, the old memory), a tanh after the projection (``squash_after``), ``c_t``
    first (``h_first=False``). Along the sequence: ``carry`` names the states fed to the next step
    (a state left out stays at its initial value), ``start="zeros"`` ignores ``h0`` and ``c0``, and
    ``states="before"`` returns the states each step reads, ``h_0 .. h_(T-1)``."""
    if start == "zeros":
        h0, c0 = torch.zeros_like(h0), torch.zeros_like(c0)
    h, c, rows = h0, c0, []
    for t in range(x.shape[1]):
        if states == "before":
            rows.append(torch.cat([h, c] if h_first else [c, h], dim=1))
        blocks = (x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=1)
        gates = dict(zip(order, blocks))
        i, f, o = (torch.sigmoid(gates[gate]) for gate in "ifo")
        c_new = f * c + i * candidate(gates["g"])
        shown = {"o tanh(c')": o * torch.tanh(c_new), "o c'": o * c_new, "o tanh(c)": o * torch.tanh(c)}[output]
        h_new = shown @ weight_hr.T  # (B, P)
        if squash_after:
            h_new = torch.tanh(h_new)
        if states == "after":
            rows.append(torch.cat([h_new, c_new] if h_first else [c_new, h_new], dim=1))
        h = h_new if "h" in carry else h
        c = c_new if "c" in carry else c
    return torch.stack(rows, dim=1)  # (B, T, P + H)


def _lstmp_shape_hint(shape, x, h0, c0, *weights):
    batch, steps, proj_size, hidden_size = x.shape[0], x.shape[1], h0.shape[1], c0.shape[1]
    both = ": return both states at every step, torch.cat([h_t, c_t], dim=1) for each t, stacked on dim 1"
    if shape == (batch, proj_size + hidden_size):
        return both
    if shape == (steps, batch, proj_size + hidden_size):
        return ": batch first: stack the steps on dim 1, (B, T, P + H)"
    if shape == (batch, steps + 1, proj_size + hidden_size):
        return ": one row per step t = 1 .. T, after the step; leave out the initial state"
    if len(shape) != 3 or shape[:2] != (batch, steps):
        return ": one row per sequence and step, each torch.cat([h_t, c_t], dim=1)"
    return {
        2 * hidden_size: (": h_t has P units, not H: project the output, h_t = (o ⊙ tanh(c_t)) @ "
                          "weight_hr.T"),
        2 * proj_size: ": only h is projected; the memory c_t keeps its H units",
        proj_size: both,
        hidden_size: both,
    }.get(shape[2], "")


check_lstmp_layer = Check(
    "your LSTMP layer agrees with torch.nn.LSTM(proj_size=P) on 12 fresh random sequences",
    lstmp_layer_cases, lstmp_layer_by_torch,
    describe=lambda x, h0, c0, *weights: (f"x of shape {tuple(x.shape)}, h0 of shape {tuple(h0.shape)} and "
                                          f"c0 of shape {tuple(c0.shape)}"),
    compared_with="torch.nn.LSTM's", noun="states", layout="(B, T, P + H)",
    slips=(
        Slip(lambda *case: lstmp_layer_with(*case, output="o c'"),
             "the cell shows o ⊙ tanh(c_t), not the notes' o ⊙ c_t (see the errata): project "
             "(o ⊙ tanh(c_t)) @ weight_hr.T"),
        Slip(lambda *case: lstmp_layer_with(*case, output="o tanh(c)"),
             "the output reads the new memory: h_t = (o ⊙ tanh(c_t)) @ weight_hr.T, with c_t = f ⊙ c_(t-1) "
             "+ i ⊙ g; you used the old memory c_(t-1)"),
        Slip(lambda *case: lstmp_layer_with(*case, squash_after=True),
             "the projection is linear: h_t = (o ⊙ tanh(c_t)) @ weight_hr.T, with no tanh after it"),
        Slip(lambda *case: lstmp_layer_with(*case, order="ifog"),
             "PyTorch orders the row blocks i, f, g, o (candidate third, output gate last)"),
        Slip(lambda *case: lstmp_layer_with(*case, order="figo"),
             "the first block of rows is the input gate i, the second the forget gate f"),
        Slip(lambda *case: lstmp_layer_with(*case, candidate=torch.sigmoid),
             "the candidate g goes through tanh, not sigmoid"),
        Slip(lambda *case: lstmp_layer_with(*case, h_first=False),
             "put h_t first in each row: torch.cat([h_t, c_t], dim=1), P units then H"),
        Slip(lambda *case: lstmp_layer_with(*case, carry=("h",)),
             "carry the memory along: step t + 1 starts from c_t, not from c0 again"),
        Slip(lambda *case: lstmp_layer_with(*case, carry=("c",)),
             "feed the new state back: the gates of step t + 1 read h_t, not h0 again"),
        Slip(lambda *case: lstmp_layer_with(*case, start="zeros"), "start from the given h0 and c0, not from zeros"),
        Slip(lambda *case: lstmp_layer_with(*case, states="before"),
             "you returned the states each step reads, h_0 .. h_(T-1); return those it writes, h_1 .. h_T "
             "(row t of the result comes after reading x[:, t])"),
    ),
    shape_hint=_lstmp_shape_hint,
    error_hint=("; mind the shapes: h_t (B, P) and c_t (B, H) differ in width, so join them with "
                "torch.cat(..., dim=1), not torch.stack; h (B, P) meets weight_hh (4H, P), and o ⊙ tanh(c_t) "
                "(B, H) meets weight_hr (P, H): multiply by the transposes, as PyTorch stores weights as "
                "(out, in)"),
    forbidden=("torch.nn.LSTM", "torch.nn.LSTMCell", "torch.lstm_cell"),
)


# ---------------------------------------------------------------------------
# The one-step Jacobian ∂h'/∂h of PyTorch's GRU (exercise ex-gate-gru-jacobian).
# ---------------------------------------------------------------------------


def gru_jacobian_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(x, h, weight_ih, weight_hh, bias_ih, bias_hh)`` for :data:`check_gru_jacobian`.

    ``B``, ``D`` and ``H`` are three different sizes in 2..7, so that a result over the wrong axes has
    the wrong shape; weights and biases are ``0.8 × N(0, 1)`` in float64, and ``h = tanh(N(0, 1))``,
    a state a GRU can reach. Each path of the Jacobian (:func:`gru_jacobian_terms`), and ``b_hn`` in
    the path through ``r``, then moves some entry of every case by more than 1e-4, and of some case
    of every draw by more than 0.1 (``tests/courseware/test_checks_gating.py`` tries 20 draws): leaving one out
    fails, in float32 too.
    """
    cases = []
    for _ in range(trials):
        batch, input_size, hidden_size = (int(n) for n in torch.randperm(6, generator=generator)[:3] + 2)
        x = torch.randn(batch, input_size, generator=generator, dtype=torch.float64)
        h = torch.randn(batch, hidden_size, generator=generator, dtype=torch.float64).tanh()
        shapes = [(3 * hidden_size, input_size), (3 * hidden_size, hidden_size), (3 * hidden_size,), (3 * hidden_size,)]
        weights = [0.8 * torch.randn(*shape, generator=generator, dtype=torch.float64) for shape in shapes]
        cases.append((x, h, *weights))
    return cases


def gru_jacobian_by_autograd(x, h, weight_ih, weight_hh, bias_ih, bias_hh) -> torch.Tensor:
    """The reference: ``J[b, i, j] = ∂h'[b, i] / ∂h[b, j]`` from autograd through ``torch.nn.GRUCell``.

    Row ``b`` of ``h'`` depends on row ``b`` of ``h`` only, so the Jacobian of ``h ↦ Σ_b h'[b]``
    (``(H, B, H)``) holds every row's own Jacobian. The cell is built under ``fork_rng``, so the
    caller's random state is left alone.

    Shapes
    ------
    x : (B, D); h : (B, H); weight_ih : (3H, D); weight_hh : (3H, H); bias_ih, bias_hh : (3H,)
    output : (B, H, H)
    """
    with torch.random.fork_rng():
        cell = torch.nn.GRUCell(x.shape[1], h.shape[1]).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                               (weight_ih, weight_hh, bias_ih, bias_hh)):
            getattr(cell, name).copy_(value)
    with one_thread():
        jacobian = torch.autograd.functional.jacobian(lambda state: cell(x, state).sum(dim=0), h)  # (H, B, H)
    return jacobian.permute(1, 0, 2).detach()  # (B, H, H)


def gru_jacobian_terms(x, h, weight_ih, weight_hh, bias_ih, bias_hh, reset_bias=True, mistake=None) -> dict:
    """The four paths of ``∂h'/∂h`` for PyTorch's GRU, each ``(B, H, H)``: their sum is the Jacobian.

    With ``h' = (1 - z) ⊙ n + z ⊙ h``, ``n = tanh(x_n + r ⊙ h_n)`` and ``h_n = h W_hnᵀ + b_hn``:
    ``"kept"`` = diag(z); ``"update"`` = diag((h - n) z (1 - z)) W_hz; ``"candidate"`` =
    diag((1 - z)(1 - n²) r) W_hn; ``"reset"`` = diag((1 - z)(1 - n²) h_n r (1 - r)) W_hr. With
    ``reset_bias=False`` the last one uses ``h W_hnᵀ`` alone (a slip). ``mistake`` names another
    slip: ``"W transposed"`` (diag(v) Wᵀ in every path), ``"n - h"`` (the update path's sign),
    ``"I"`` (the identity for diag(z)), ``"no 1 - z"`` (∂n/∂h without its factor 1 - z),
    ``"candidate without 1 - z"`` (that factor left out of the candidate path alone), ``"σ"`` (σ for
    σ' = σ(1 - σ) in both gates) or ``"1 - n"`` (1 - n for tanh' = 1 - n²).
    """
    hidden = h.shape[1]
    W_hr, W_hz, W_hn = (w.T if mistake == "W transposed" else w for w in weight_hh.split(hidden))
    pre_x, pre_h = x @ weight_ih.T + bias_ih, h @ weight_hh.T + bias_hh  # (B, 3H) each
    r = torch.sigmoid(pre_x[:, :hidden] + pre_h[:, :hidden])
    z = torch.sigmoid(pre_x[:, hidden:2 * hidden] + pre_h[:, hidden:2 * hidden])
    h_n = pre_h[:, 2 * hidden:]
    n = torch.tanh(pre_x[:, 2 * hidden:] + r * h_n)
    scaled = h_n if reset_bias else h @ weight_hh[2 * hidden:].T
    d_r, d_z = (r, z) if mistake == "σ" else (r * (1 - r), z * (1 - z))  # σ' of each gate
    d_n = 1 - n if mistake == "1 - n" else 1 - n**2  # tanh'
    write = torch.ones_like(z) if mistake == "no 1 - z" else 1 - z  # the share of n in h'
    write_candidate = torch.ones_like(z) if mistake == "candidate without 1 - z" else write
    kept = torch.diag_embed(torch.ones_like(z) if mistake == "I" else z)
    gap = n - h if mistake == "n - h" else h - n

    def rows(scale, matrix):  # diag(scale) @ matrix for every row of the batch: (B, H, H)
        return scale[:, :, None] * matrix

    return {
        "kept": kept,
        "update": rows(gap * d_z, W_hz),
        "candidate": rows(write_candidate * d_n * r, W_hn),
        "reset": rows(write * d_n * scaled * d_r, W_hr),
    }


def _jacobian_without(*left_out, **options):
    """A slip: the sum of the paths of :func:`gru_jacobian_terms` but ``left_out`` (with ``options``, a
    slip within the paths kept)."""
    def answer(*case):
        terms = gru_jacobian_terms(*case, **options)
        return sum(term for name, term in terms.items() if name not in left_out)
    return answer


def _jacobian_of_variant(reset="after", keep="z"):
    """A slip: autograd's Jacobian of a GRU step with the reset gate ``before`` the product (the notes')
    or with the update gate's roles swapped (``keep="1-z"``)."""
    def step(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
        hidden = h.shape[1]
        x_r, x_z, x_n = (x @ weight_ih.T + bias_ih).split(hidden, dim=1)
        h_r, h_z, h_n = (h @ weight_hh.T + bias_hh).split(hidden, dim=1)
        r, z = torch.sigmoid(x_r + h_r), torch.sigmoid(x_z + h_z)
        if reset == "after":
            n = torch.tanh(x_n + r * h_n)
        else:
            n = torch.tanh(x_n + (r * h) @ weight_hh[2 * hidden:].T + bias_hh[2 * hidden:])
        return (1 - z) * n + z * h if keep == "z" else z * n + (1 - z) * h

    def answer(x, h, *weights):
        with one_thread():
            jacobian = torch.autograd.functional.jacobian(lambda state: step(x, state, *weights).sum(dim=0), h)
        return jacobian.permute(1, 0, 2)

    return answer


def _gru_jacobian_shape_hint(shape, x, h, *weights):
    batch, hidden = h.shape
    return {
        (batch, hidden, batch, hidden): (": keep only each row's own Jacobian, J[b] = ∂h'[b]/∂h[b]; row b of h' "
                                         "does not depend on another row of h"),
        (hidden, hidden): ": return one H × H Jacobian per row of the batch, stacked on a first axis",
        (batch, hidden): ": return the whole matrix ∂h'_i/∂h_j for each row, not only its diagonal",
    }.get(tuple(shape), "")


check_gru_jacobian = Check(
    "your ∂h'/∂h agrees with autograd through torch.nn.GRUCell on 12 fresh random cases",
    gru_jacobian_cases, gru_jacobian_by_autograd,
    describe=lambda x, h, *weights: f"x of shape {tuple(x.shape)}, h of shape {tuple(h.shape)}",
    compared_with="autograd's", noun="Jacobian", layout="(B, H, H)",
    slips=(
        Slip(_jacobian_without("update", "candidate", "reset"),
             "you returned diag(z), the path that copies the kept share of h; the candidate n and the gates r "
             "and z depend on h too"),
        Slip(_jacobian_without("update"),
             "the update gate z depends on h too: add diag((h - n) ⊙ z ⊙ (1 - z)) W_hz, the path through z"),
        Slip(_jacobian_without("reset"),
             "the reset gate r depends on h too: n = tanh(x_n + r ⊙ h_n) has, by the product rule, a path "
             "through r, diag((1 - z) ⊙ (1 - n²) ⊙ h_n ⊙ r ⊙ (1 - r)) W_hr"),
        Slip(_jacobian_without("update", "reset"),
             "you left out both gates' paths: r and z depend on h too, through W_hr and W_hz"),
        Slip(_jacobian_without("candidate", "reset"),
             "n depends on h too: add diag(1 - z) ∂n/∂h, the path through the candidate (and through r "
             "inside it)"),
        Slip(_jacobian_without(mistake="W transposed"),
             "every path multiplies by the transpose of the weights it needs, a mix-up of the row- and "
             "column-vector conventions: h_n = h W_hnᵀ + b_hn gives ∂(h_n)_i/∂h_j = W_hn[i, j], so a path is "
             "diag(v) W_hn with PyTorch's stored W_hn, not diag(v) W_hnᵀ"),
        Slip(_jacobian_without(mistake="n - h"),
             "the path through z has the wrong sign: h' = (1 - z) ⊙ n + z ⊙ h gives ∂h'/∂z = h - n, so the "
             "path is diag((h - n) ⊙ z ⊙ (1 - z)) W_hz; you have n - h"),
        Slip(_jacobian_without(mistake="I"),
             "the copy path is diag(z), not the identity: h' keeps only the share z of h"),
        Slip(_jacobian_without(mistake="no 1 - z"),
             "n enters h' scaled by 1 - z: the path through n is diag(1 - z) ∂n/∂h, and you left out the "
             "factor 1 - z"),
        Slip(_jacobian_without(mistake="candidate without 1 - z"),
             "n enters h' scaled by 1 - z: the candidate path diag((1 - z) ⊙ (1 - n²) ⊙ r) W_hn lacks its "
             "factor 1 - z"),
        Slip(_jacobian_without(mistake="σ"),
             "a gate's derivative is σ'(a) = σ(a)(1 - σ(a)): you used σ(a) itself, r for r ⊙ (1 - r) and z "
             "for z ⊙ (1 - z)"),
        Slip(_jacobian_without(mistake="1 - n"),
             "tanh' = 1 - tanh²: the paths through n need 1 - n², not 1 - n"),
        Slip(_jacobian_without(reset_bias=False),
             "in the path through r, the reset gate scales h_n = h W_hnᵀ + b_hn, bias included: you left "
             "out b_hn"),
        Slip(lambda *case: gru_jacobian_by_autograd(*case).transpose(1, 2),
             "you returned the transpose: J[b, i, j] = ∂h'_i/∂h_j, row i for the output unit, column j for "
             "the state unit"),
        Slip(_jacobian_of_variant(reset="before"),
             "that is the Jacobian of the GRU with the reset gate before the matrix product, W_hn (r ⊙ h) (the "
             "notes'); PyTorch's applies it after: r ⊙ (W_hn h + b_hn)"),
        Slip(_jacobian_of_variant(keep="1-z"),
             "z is the share of the old state that is kept: h' = (1 - z) ⊙ n + z ⊙ h, so the copy path is "
             "diag(z), not diag(1 - z)"),
    ),
    shape_hint=_gru_jacobian_shape_hint,
    forbidden=("torch.autograd", "torch.func", ".backward", "torch.nn.GRUCell", "torch.nn.GRU", "torch.gru_cell"),
)
