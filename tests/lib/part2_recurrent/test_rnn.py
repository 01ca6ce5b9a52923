"""Tests for lib/part2_recurrent/rnn.py.

References: PyTorch's own recurrent modules and cells with copied weights
(``from_torch``), the lecture notes' GRU formula transcribed literally, autograd
on the unrolled graph for the Jacobian products, ``torch.nn.utils.clip_grad_norm_``,
the parameters PyTorch allocates, and small cases computed by hand.
"""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part2_recurrent.rnn import (
    GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, bptt_terms, clip_grad_norm, jacobian_norms, parameter_count,
    rnn_jacobian_norms,
)

FAST = settings(max_examples=20, deadline=None, database=None)
LAYERS = {"rnn": (RNN, torch.nn.RNN), "gru": (GRU, torch.nn.GRU), "lstm": (LSTM, torch.nn.LSTM)}
CELLS = {"rnn": (RNNCell, torch.nn.RNNCell), "gru": (GRUCell, torch.nn.GRUCell), "lstm": (LSTMCell, torch.nn.LSTMCell)}


def randn(*shape, dtype=torch.float64, seed=0):
    return torch.randn(*shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def torch_module(cls, *args, seed=0, dtype=torch.float32, **kwargs):
    torch.manual_seed(seed)
    return cls(*args, **kwargs).to(dtype)


# ---------------------------------------------------------------------------
# Cells against PyTorch's cells.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize(("input_size", "hidden_size", "bias"), [(3, 5, True), (7, 2, True), (4, 4, False)])
def test_cell_matches_torch_cell(kind, input_size, hidden_size, bias):
    lib_cls, torch_cls = CELLS[kind]
    reference = torch_module(torch_cls, input_size, hidden_size, bias=bias, dtype=torch.float64)
    cell = lib_cls.from_torch(reference)
    x, h, c = randn(6, input_size, seed=1), randn(6, hidden_size, seed=2), randn(6, hidden_size, seed=3)
    if kind == "lstm":
        expected, found = reference(x, (h, c)), cell(x, (h, c))
        torch.testing.assert_close(found[0], expected[0], atol=1e-12, rtol=0)
        torch.testing.assert_close(found[1], expected[1], atol=1e-12, rtol=0)
    else:
        torch.testing.assert_close(cell(x, h), reference(x, h), atol=1e-12, rtol=0)


def test_relu_cell_matches_torch_relu_cell():
    reference = torch_module(torch.nn.RNNCell, 3, 4, nonlinearity="relu", dtype=torch.float64)
    cell = RNNCell.from_torch(reference)
    assert cell.nonlinearity == "relu"
    x, h = randn(5, 3, seed=1), randn(5, 4, seed=2)
    torch.testing.assert_close(cell(x, h), reference(x, h), atol=1e-12, rtol=0)


def test_rnn_cell_by_hand():
    # One unit, D = 1: h' = tanh(0.5 x + 0.1 + 2 h - 0.2) = tanh(0.5 * 2 + 0.1 + 2 * 0.25 - 0.2) = tanh(1.4).
    cell = RNNCell(1, 1).double()
    with torch.no_grad():
        cell.weight_ih.fill_(0.5), cell.bias_ih.fill_(0.1), cell.weight_hh.fill_(2.0), cell.bias_hh.fill_(-0.2)
    found = cell(torch.tensor([[2.0]], dtype=torch.float64), torch.tensor([[0.25]], dtype=torch.float64))
    assert found.item() == pytest.approx(math.tanh(1.4), abs=1e-15)
    cell.nonlinearity = "linear"
    assert cell(torch.tensor([[2.0]], dtype=torch.float64), torch.tensor([[0.25]], dtype=torch.float64)).item() == (
        pytest.approx(1.4, abs=1e-15))


def test_lstm_cell_by_hand():
    # One unit with all weights 0: a = bias, so i = σ(b_i), f = σ(b_f), g = tanh(b_g), o = σ(b_o).
    cell = LSTMCell(1, 1).double()
    with torch.no_grad():
        cell.weight_ih.zero_(), cell.weight_hh.zero_(), cell.bias_hh.zero_()
        # i = 1/2, f = 3/4, g = tanh(1), o = 1/4
        cell.bias_ih.copy_(torch.tensor([0.0, math.log(3.0), 1.0, -math.log(3.0)], dtype=torch.float64))
    x, h, c = torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64), torch.full(
        (1, 1), 2.0, dtype=torch.float64)
    h_new, c_new = cell(x, (h, c))
    expected_c = 0.75 * 2.0 + 0.5 * math.tanh(1.0)
    assert c_new.item() == pytest.approx(expected_c, abs=1e-15)
    assert h_new.item() == pytest.approx(0.25 * math.tanh(expected_c), abs=1e-15)


def test_lstm_output_is_o_times_tanh_c_not_the_notes_o_times_c():
    # Note 004 writes a = Γ_o * c. PyTorch's LSTM (and lib's) output o * tanh(c): checked on a
    # cell that has accumulated a large memory, where the two differ most, and h stays in (-1, 1).
    reference = torch_module(torch.nn.LSTMCell, 2, 3, dtype=torch.float64)
    cell = LSTMCell.from_torch(reference)
    x, h, c = randn(4, 2, seed=1), randn(4, 3, seed=2), 5 * randn(4, 3, seed=3)
    h_torch, c_torch = reference(x, (h, c))
    h_lib, c_lib = cell(x, (h, c))
    torch.testing.assert_close(h_lib, h_torch, atol=1e-12, rtol=0)
    a = x @ cell.weight_ih.T + cell.bias_ih + h @ cell.weight_hh.T + cell.bias_hh
    o = torch.sigmoid(a.chunk(4, dim=-1)[3])
    torch.testing.assert_close(h_torch, o * torch.tanh(c_torch), atol=1e-12, rtol=0)
    assert (h_torch - o * c_torch).abs().max() > 0.5, "the notes' o * c is a different function"
    assert h_lib.abs().max() < 1 < (o * c_lib).abs().max()


# ---------------------------------------------------------------------------
# Layers against PyTorch's modules.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_layer_matches_torch(kind, num_layers, bidirectional, batch_first):
    lib_cls, torch_cls = LAYERS[kind]
    for seed, (input_size, hidden_size, batch, steps) in enumerate([(3, 5, 4, 7), (6, 2, 1, 3)]):
        reference = torch_module(torch_cls, input_size, hidden_size, num_layers=num_layers, seed=seed,
                                 bidirectional=bidirectional, batch_first=batch_first)
        layer = lib_cls.from_torch(reference)
        shape = (batch, steps, input_size) if batch_first else (steps, batch, input_size)
        x = randn(*shape, dtype=torch.float32, seed=seed + 10)
        states = (num_layers * (2 if bidirectional else 1), batch, hidden_size)
        h0, c0 = randn(*states, dtype=torch.float32, seed=seed + 20), randn(*states, dtype=torch.float32, seed=30)
        for state in (None, (h0, c0) if kind == "lstm" else h0):
            expected_output, expected_state = reference(x, state)
            for step_by_step in (False, True):
                output, final = layer(x, state, reference=step_by_step)
                torch.testing.assert_close(output, expected_output, atol=1e-5, rtol=0)
                for found, expected in zip(final if kind == "lstm" else [final],
                                           expected_state if kind == "lstm" else [expected_state]):
                    torch.testing.assert_close(found, expected, atol=1e-5, rtol=0)


def test_relu_rnn_layer_matches_torch():
    reference = torch_module(torch.nn.RNN, 4, 6, num_layers=2, nonlinearity="relu", bidirectional=True,
                             batch_first=True)
    layer = RNN.from_torch(reference)
    x = randn(3, 9, 4, dtype=torch.float32)
    torch.testing.assert_close(layer(x)[0], reference(x)[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(layer(x)[1], reference(x)[1], atol=1e-5, rtol=0)


def test_layers_agree_in_float64_to_machine_precision():
    reference = torch_module(torch.nn.LSTM, 3, 4, num_layers=2, bidirectional=True, dtype=torch.float64)
    layer = LSTM.from_torch(reference)
    x = randn(5, 2, 3)  # (T, B, D): PyTorch's default layout
    torch.testing.assert_close(layer(x)[0], reference(x)[0], atol=1e-12, rtol=0)


def gradients(layer, x, state, **options):
    """Outputs, final states and the gradients of a fixed function of both w.r.t. x, the state and the weights."""
    x = x.detach().clone().requires_grad_()
    leaves = tuple(s.detach().clone().requires_grad_() for s in state) if isinstance(state, tuple) else \
        state.detach().clone().requires_grad_()
    output, final = layer(x, leaves, **options)
    finals = final if isinstance(final, tuple) else (final,)
    # Weights that differ from step to step and unit to unit, so no gradient entry is left out.
    loss = (output * torch.linspace(-1, 2, output.numel(), dtype=output.dtype).view_as(output)).sum()
    loss = loss + sum((f ** 2).sum() for f in finals)
    inputs = [x, *(leaves if isinstance(leaves, tuple) else (leaves,)), *layer.parameters()]
    return (output, *finals, *torch.autograd.grad(loss, inputs))


@pytest.mark.parametrize(("kind", "options"), [
    ("rnn", {}), ("rnn", {"nonlinearity": "relu", "bias": False}), ("gru", {}), ("gru", {"reset": "before"}),
    ("gru", {"bias": False}), ("lstm", {}), ("lstm", {"bias": False}),
])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_whole_sequence_projection_equals_the_step_by_step_reference(kind, options, bidirectional):
    # The fast path projects every x_t before the time loop; reference=True calls the cell
    # (its forward, the equations) at each step. Same outputs, states and gradients in float64.
    torch.manual_seed(3)
    layer = LAYERS[kind][0](3, 4, num_layers=2, bidirectional=bidirectional, **options).double()
    x = randn(2, 6, 3, seed=4)
    h0 = randn(layer.num_layers * layer.num_directions, 2, 4, seed=5)
    state = (h0, randn(*h0.shape, seed=6)) if kind == "lstm" else h0
    fast, reference = gradients(layer, x, state), gradients(layer, x, state, reference=True)
    assert len(fast) == len(reference)
    for found, expected in zip(fast, reference):
        torch.testing.assert_close(found, expected, atol=1e-13, rtol=0)


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_layer_gradients_match_torch(kind):
    lib_cls, torch_cls = LAYERS[kind]
    reference = torch_module(torch_cls, 3, 5, num_layers=2, bidirectional=True, batch_first=True,
                             dtype=torch.float64)
    layer = lib_cls.from_torch(reference)
    x = randn(4, 7, 3, seed=1)
    h0 = randn(4, 4, 5, seed=2)
    state = (h0, randn(4, 4, 5, seed=3)) if kind == "lstm" else h0
    expected = gradients(reference, x, state)
    for step_by_step in (False, True):
        found = gradients(layer, x, state, reference=step_by_step)
        for a, b in zip(found, expected, strict=True):
            torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_default_is_batch_first_and_layouts_agree():
    layer = GRU(3, 4, num_layers=2, bidirectional=True).double()
    assert layer.batch_first
    x = randn(2, 5, 3)
    time_first = GRU(3, 4, num_layers=2, bidirectional=True, batch_first=False).double()
    time_first.load_state_dict(layer.state_dict())
    output, h_n = layer(x)
    output_t, h_n_t = time_first(x.transpose(0, 1))
    torch.testing.assert_close(output_t.transpose(0, 1), output)
    torch.testing.assert_close(h_n_t, h_n)


@FAST
@given(batch=st.integers(1, 3), steps=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_backward_direction_reads_the_reversed_sequence(batch, steps, seed):
    # The backward half of a bidirectional layer is a forward layer run on x reversed in time,
    # with its outputs reversed back.
    torch.manual_seed(seed)
    bidirectional = RNN(2, 3, bidirectional=True).double()
    backward = RNN(2, 3).double()
    backward.cells[0].load_state_dict(bidirectional.cells[1].state_dict())
    x = randn(batch, steps, 2, seed=seed)
    output, h_n = bidirectional(x)
    reversed_output, reversed_h = backward(x.flip(1))
    torch.testing.assert_close(output[..., 3:], reversed_output.flip(1))
    torch.testing.assert_close(h_n[1], reversed_h[0])
    assert torch.equal(output[:, 0, 3:], h_n[1]), "the backward direction ends at step 0"


def test_layers_are_differentiable_gradcheck():
    layer = LSTM(2, 3, num_layers=2, bidirectional=True).double()
    x = randn(2, 4, 2).requires_grad_()
    assert torch.autograd.gradcheck(lambda inputs: layer(inputs)[0], (x,))
    assert torch.autograd.gradcheck(lambda inputs: layer(inputs, reference=True)[0], (x,))


def test_from_torch_rejects_other_modules_and_projections():
    with pytest.raises(TypeError, match="GRU.from_torch expects a torch.nn.GRU; found LSTM"):
        GRU.from_torch(torch.nn.LSTM(2, 3))
    with pytest.raises(ValueError, match="expected proj_size = 0; found 2"):
        LSTM.from_torch(torch.nn.LSTM(2, 3, proj_size=2))
    with pytest.raises(TypeError, match="LSTMCell.from_torch expects a LSTMCell; found GRUCell"):
        LSTMCell.from_torch(torch.nn.GRUCell(2, 3))


def test_bad_inputs_raise_with_what_was_expected():
    layer = LSTM(3, 4)
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps of D = 3 features; found T = 5, D = 4"):
        layer(torch.zeros(2, 5, 4))
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps of D = 3 features; found T = 0, D = 3"):
        LSTM(3, 4, batch_first=False)(torch.zeros(0, 2, 3))  # torch.stack would fail cryptically
    with pytest.raises(TypeError, match=r"x must have the dtype of parameters \(torch.float32\); found torch.float64"):
        layer(torch.zeros(2, 5, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"state must be a pair \(h_0, c_0\); found Tensor"):
        layer(torch.zeros(2, 5, 3), torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match=r"h_0 must be \(L \* directions, B, H\) = \(1, 2, 4\); found \(2, 2, 4\)"):
        layer(torch.zeros(2, 5, 3), (torch.zeros(2, 2, 4), torch.zeros(2, 2, 4)))
    with pytest.raises(TypeError, match=r"c_0 must have the dtype of x \(torch.float32\); found torch.float16"):
        layer(torch.zeros(2, 5, 3), (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4, dtype=torch.float16)))
    with pytest.raises(TypeError, match=r"(?s)parameter 'x'.*Actual value: i64\[2,5,3\]"):
        RNN(3, 4)(torch.zeros(2, 5, 3, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'reference'.*Actual value: 'yes'"):
        RNN(3, 4)(torch.zeros(2, 5, 3), reference="yes")
    with pytest.raises(TypeError, match=r"(?s)parameter 'nonlinearity'.*Actual value: 'sigmoid'.*Literal\['tanh'"):
        RNNCell(3, 4, nonlinearity="sigmoid")
    with pytest.raises(TypeError, match=r"(?s)parameter 'reset'.*Actual value: 'middle'.*Literal\['after'"):
        GRUCell(3, 4, reset="middle")
    with pytest.raises(TypeError, match=r"(?s)parameter 'hidden_size'.*Actual value: 0.*is_at_least_1"):
        GRU(3, 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'num_layers'.*Actual value: 0.*is_at_least_1"):
        LSTM(3, 4, num_layers=0)
    with pytest.raises(ValueError, match=r"LSTM of num_layers=1000000000000, hidden_size=4 would hold 1.6e\+14 parameters; at most 2\*\*31 fit"):
        LSTM(3, 4, num_layers=10**12)  # refused before any cell is built
    with pytest.raises(ValueError, match=r"RNN of num_layers=1, hidden_size=1000000 would hold 1e\+12 parameters"):
        RNN(3, 10**6)
    with pytest.raises(ValueError, match=r"h_0 must be \(L \* directions, B, H\) = \(1, 2, 4\); found \(1, 3, 4\)"):
        RNN(3, 4)(torch.zeros(2, 5, 3), torch.zeros(1, 3, 4))  # B of h_0 is not B of x
    with pytest.raises(TypeError, match=r"state must be a pair \(h, c\); found Tensor"):
        jacobian_norms(LSTMCell(3, 4), torch.zeros(2, 5, 3), torch.zeros(2, 4))
    for steps, width in ((5, 4), (0, 3)):  # a cell of D = 3
        with pytest.raises(ValueError, match=rf"x must hold T >= 1 steps of D = 3 features; found shape \(2, {steps}, {width}\)"):
            rnn_jacobian_norms(RNNCell(3, 4), torch.zeros(2, steps, width))
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps; found shape \(2, 0, 3\)"):
        jacobian_norms(GRUCell(3, 4), torch.zeros(2, 0, 3))



def test_cells_name_a_wrong_state():
    """The fuzz found torch's 'mat1 and mat2 must have the same dtype' for a half state."""
    x = torch.zeros(2, 3)
    for cell, state in ((RNNCell(3, 4), torch.zeros(2, 4, dtype=torch.float16)),
                        (GRUCell(3, 4), torch.zeros(2, 4, dtype=torch.float16)),
                        (LSTMCell(3, 4), (torch.zeros(2, 4, dtype=torch.float16), torch.zeros(2, 4)))):
        with pytest.raises(TypeError, match=r"h must have the dtype of weight_ih \(torch.float32\); found torch.float16"):
            cell(x, state)
    with pytest.raises(TypeError, match=r"x must have the dtype of weight_ih \(torch.float32\); found torch.float64"):
        RNNCell(3, 4)(x.double(), torch.zeros(2, 4))
    with pytest.raises(TypeError, match=r"state must be a pair \(h, c\); found Tensor"):
        LSTMCell(3, 4)(x, torch.zeros(2, 4))
    with pytest.raises(TypeError, match=r"state must be a tensor h; found tuple"):
        GRUCell(3, 4)(x, (torch.zeros(2, 4), torch.zeros(2, 4)))
    with pytest.raises(ValueError, match=r"x and h must be \(B, 3\) and \(B, 4\); found \(2, 3\) and \(2, 5\)"):
        RNNCell(3, 4)(x, torch.zeros(2, 5))
    with pytest.raises(TypeError, match=r"(?s)parameter 'state'.*Actual value: f32\[3,4\]"):
        RNNCell(3, 4)(x, torch.zeros(3, 4))  # B of x is 2


ROWS = {"rnn": 4, "gru": 12, "lstm": 16}  # G*H of a cell of H = 4
BAD_STEPS = [  # (argument, bad value for G*H = R, error, message): the fuzz's calls; what torch said before
    ("x_part", lambda R: torch.zeros(2, R, dtype=torch.float16), TypeError,
     r"x_part must have the cell's dtype torch.float32; found torch.float16"),  # mat1 and mat2
    ("x_part", lambda R: torch.zeros(2, R, dtype=torch.float64), TypeError, r"x_part must have .* found torch.float64"),
    ("x_part", lambda R: torch.zeros(2, R, dtype=torch.int64), TypeError, r"x_part must have .* found torch.int64"),
    ("x_part", lambda R: torch.zeros(2, R, dtype=torch.bool), TypeError, r"x_part must have .* found torch.bool"),
    ("x_part", lambda R: [[0.0] * R] * 2, TypeError, r"x_part must be a tensor; found list"),  # no attribute 'chunk'
    ("x_part", lambda R: torch.zeros(R), ValueError, r"x_part must have shape \(B, G\*H\) = \(2, R\); found \(R,\)"),
    ("x_part", lambda R: torch.zeros(1, 2, R), ValueError, r"x_part must have shape .* found \(1, 2, R\)"),
    ("x_part", lambda R: torch.zeros(0, R), ValueError, r"x_part must have shape .* = \(2, R\); found \(0, R\)"),
    ("x_part", lambda R: torch.zeros(1, R), ValueError, r"x_part must have shape .* = \(2, R\); found \(1, R\)"),
    ("x_part", lambda R: torch.zeros(2, R + 1), ValueError, r"x_part must have shape .* = \(2, R\); found \(2, R\+1\)"),
    ("h", lambda R: torch.zeros(2, 4, dtype=torch.float16), TypeError,
     r"h must have the cell's dtype torch.float32; found torch.float16"),
    ("h", lambda R: torch.zeros(2, 4, dtype=torch.int64), TypeError, r"h must have the cell's dtype .* found torch.int64"),
    ("h", lambda R: torch.zeros(2, 4, dtype=torch.bool), TypeError, r"h must have the cell's dtype .* found torch.bool"),
    ("h", lambda R: [[0.0] * 4] * 2, TypeError, r"h must be a tensor; found list"),
    ("h", lambda R: torch.zeros(4), ValueError, r"h must have shape \(B, H\) = \(2, 4\); found \(4,\)"),
    ("h", lambda R: torch.zeros(1, 2, 4), ValueError, r"h must have shape \(B, H\) = \(2, 4\); found \(1, 2, 4\)"),
    ("h", lambda R: torch.zeros(2, 5), ValueError, r"h must have shape \(B, H\) = \(2, 4\); found \(2, 5\)"),
    ("h", lambda R: torch.zeros(1, 4), ValueError, r"x_part must have shape .* = \(1, R\); found \(2, R\)"),  # B from h
]


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("argument, bad, error, message", BAD_STEPS)
def test_cell_steps_name_a_wrong_argument(kind, argument, bad, error, message):
    """The fuzz found 'mat1 and mat2', expand and unpack errors, and silent broadcasts
    (a rank-1 x_part, an int one) in step: the per-time-step method checks its inputs."""
    cell, rows = CELLS[kind][0](3, 4), ROWS[kind]
    x_part, h = cell.project(torch.zeros(2, 3)), torch.zeros(2, 4)
    if argument == "x_part":
        x_part = bad(rows)
    else:
        h = bad(rows)
    message = message.replace(r"R\+1", str(rows + 1)).replace("R", str(rows))
    if kind == "lstm":
        message = message.replace("h must", "state's h must")
    with pytest.raises(error, match=message):
        cell.step(x_part, (h, torch.zeros(2, 4)) if kind == "lstm" else h)
    if kind == "lstm" and argument == "h" and isinstance(h, torch.Tensor):  # c is checked alike
        if h.shape == (1, 4):  # B is h's: now 2, so c is the odd one out
            message = r"state's h must have shape \(B, H\) = \(2, 4\); found \(1, 4\)"
        with pytest.raises(error, match=message.replace("state's h", "state's c")):
            cell.step(x_part, (torch.zeros(2, 4), h))


def test_lstm_step_names_a_state_that_is_not_a_pair():
    cell = LSTMCell(3, 4)
    x_part = cell.project(torch.zeros(2, 3))
    for state, found in (((), r"\(\)"), ("abc", "'abc'"), (None, "None"), ((torch.zeros(2, 4),) * 3, r"\(tensor")):
        with pytest.raises(TypeError, match=rf"state must be a pair \(h, c\); found {found}"):
            cell.step(x_part, state)


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_cell_projections_name_a_wrong_x(kind):
    """The fuzz found 'mat1 and mat2 shapes cannot be multiplied' and the like in project."""
    cell = CELLS[kind][0](3, 4)
    for x, error, message in (
        (torch.zeros(2, 3, dtype=torch.float16), TypeError, r"x must have the cell's dtype torch.float32; found torch.float16"),
        (torch.zeros(2, 3, dtype=torch.float64), TypeError, r"x must have the cell's dtype torch.float32; found torch.float64"),
        (torch.zeros(2, 3, dtype=torch.int64), TypeError, r"found torch.int64"),
        (torch.zeros(2, 3, dtype=torch.bool), TypeError, r"found torch.bool"),
        ([[0.0] * 3] * 2, TypeError, r"x must be a tensor; found list"),
        (torch.zeros(2, 4), ValueError, r"x must have shape \(..., D\) = \(..., 3\); found \(2, 4\)"),
        (torch.tensor(0.0), ValueError, r"x must have shape \(..., D\) = \(..., 3\); found \(\)"),
    ):
        with pytest.raises(error, match=message):
            cell.project(x)
    assert cell.project(torch.zeros(5, 2, 3)).shape == (5, 2, ROWS[kind])  # any leading axes


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
def test_checked_steps_still_follow_a_cells_dtype(kind):
    """The checks compare with the cell's own dtype, not float32: a float64 cell takes float64."""
    cell = CELLS[kind][0](3, 4).double()
    x = torch.zeros(2, 3, dtype=torch.float64)
    state = (torch.zeros(2, 4, dtype=torch.float64),) * 2 if kind == "lstm" else torch.zeros(2, 4, dtype=torch.float64)
    out = cell.step(cell.project(x), state)
    assert (out[0] if kind == "lstm" else out).dtype == torch.float64
    with pytest.raises(TypeError, match=r"x must have the cell's dtype torch.float64; found torch.float32"):
        cell.project(x.float())

# ---------------------------------------------------------------------------
# The GRU's two reset placements.
# ---------------------------------------------------------------------------


def notes_gru_step(x, c, cell):
    """Note 004's GRU, transcribed literally with concatenations [c, x] and one bias per gate.

    Γ_r = σ(W_r [c, x] + b_r), Γ_u = σ(W_u [c, x] + b_u), c̃ = tanh(W_c [Γ_r * c, x] + b_c),
    c' = Γ_u * c̃ + (1 - Γ_u) * c. The weights come from a lib cell: W_r = [W_hr | W_ir] and so
    on, b_r = b_ir + b_hr; the notes' update gate replaces the state, PyTorch's z keeps it, so
    Γ_u = 1 - z = σ(-(...)): W_u and b_u are the negated z weights.
    """
    H = cell.hidden_size
    blocks = lambda w: (w[:H], w[H:2 * H], w[2 * H:])  # noqa: E731
    (W_ir, W_iz, W_in), (W_hr, W_hz, W_hn) = blocks(cell.weight_ih), blocks(cell.weight_hh)
    (b_ir, b_iz, b_in), (b_hr, b_hz, b_hn) = blocks(cell.bias_ih), blocks(cell.bias_hh)
    W_r, b_r = torch.cat([W_hr, W_ir], dim=1), b_ir + b_hr
    W_u, b_u = -torch.cat([W_hz, W_iz], dim=1), -(b_iz + b_hz)
    W_c, b_c = torch.cat([W_hn, W_in], dim=1), b_in + b_hn
    out = torch.empty_like(c)
    for b in range(x.shape[0]):  # one example at a time, columns as in the notes
        cx = torch.cat([c[b], x[b]])
        gamma_r = torch.sigmoid(W_r @ cx + b_r)
        gamma_u = torch.sigmoid(W_u @ cx + b_u)
        c_tilde = torch.tanh(W_c @ torch.cat([gamma_r * c[b], x[b]]) + b_c)
        out[b] = gamma_u * c_tilde + (1 - gamma_u) * c[b]
    return out


@pytest.mark.parametrize(("input_size", "hidden_size"), [(3, 5), (6, 2)])
def test_gru_reset_before_is_the_notes_formula(input_size, hidden_size):
    torch.manual_seed(0)
    cell = GRUCell(input_size, hidden_size, reset="before").double()
    x, c = randn(4, input_size, seed=1), randn(4, hidden_size, seed=2)
    torch.testing.assert_close(cell(x, c), notes_gru_step(x, c, cell), atol=1e-12, rtol=0)


def test_gru_reset_after_is_torch_and_differs_from_reset_before():
    reference = torch_module(torch.nn.GRUCell, 3, 4, dtype=torch.float64)
    after, before = GRUCell.from_torch(reference), GRUCell.from_torch(reference, reset="before")
    x, h = randn(5, 3, seed=1), randn(5, 4, seed=2)
    torch.testing.assert_close(after(x, h), reference(x, h), atol=1e-12, rtol=0)
    assert (after(x, h) - before(x, h)).abs().max() > 1e-3, "the two placements are different functions"
    assert (after(x, h) - notes_gru_step(x, h, after)).abs().max() > 1e-3, "PyTorch's GRU is not the notes' GRU"


def test_gru_reset_placements_coincide_when_the_reset_gate_is_open():
    # r = 1 (a huge reset bias): r ⊙ (W h + b) = W (r ⊙ h) + b.
    torch.manual_seed(1)
    after = GRUCell(3, 4).double()
    with torch.no_grad():
        after.bias_ih[:4] = 50.0
    before = GRUCell(3, 4, reset="before").double()
    before.load_state_dict(after.state_dict())
    x, h = randn(5, 3, seed=1), randn(5, 4, seed=2)
    torch.testing.assert_close(after(x, h), before(x, h), atol=1e-12, rtol=0)


def test_gru_layer_with_reset_before_loads_torch_weights():
    reference = torch_module(torch.nn.GRU, 3, 4, num_layers=2)
    layer = GRU.from_torch(reference, reset="before")
    assert all(cell.reset == "before" for cell in layer.cells)
    assert torch.equal(layer.cells[1].weight_hh, reference.weight_hh_l1)


# ---------------------------------------------------------------------------
# Backpropagation through time: Jacobian products against autograd.
# ---------------------------------------------------------------------------


def autograd_norms(cell, x, state=None):
    """‖∂h_T/∂s_k‖₂ from autograd: for each k, restart from s_k as a leaf and differentiate h_T."""
    batch, steps = x.shape[0], x.shape[1]
    state = cell.zero_state(batch, x) if state is None else state
    states = [state]
    with torch.no_grad():
        for t in range(steps):
            states.append(cell(x[:, t], states[-1]))
    lstm = isinstance(cell, LSTMCell)
    norms = torch.empty(batch, steps + 1, dtype=x.dtype)
    for k in range(steps + 1):
        for b in range(batch):
            def h_T(flat):  # noqa: B023 -- evaluated at once
                s = tuple(flat[None].split(cell.hidden_size, dim=-1)) if lstm else flat[None]
                for t in range(k, steps):
                    s = cell(x[b:b + 1, t], s)
                return (s[0] if lstm else s)[0]
            start = torch.cat([s[b] for s in states[k]]) if lstm else states[k][b]
            jacobian = torch.autograd.functional.jacobian(h_T, start)  # (H, S)
            norms[b, k] = torch.linalg.matrix_norm(jacobian, ord=2)
    return norms


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu", "linear"])
def test_rnn_jacobian_norms_match_autograd(nonlinearity):
    torch.manual_seed(0)
    cell = RNNCell(3, 4, nonlinearity=nonlinearity).double()
    x, h0 = randn(2, 6, 3, seed=1), randn(2, 4, seed=2)
    expected = autograd_norms(cell, x, h0)
    torch.testing.assert_close(rnn_jacobian_norms(cell, x, h0), expected, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(jacobian_norms(cell, x, h0), expected, atol=1e-10, rtol=1e-10)
    assert torch.allclose(expected[:, -1], torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("cell_factory", [
    lambda: GRUCell(3, 4), lambda: GRUCell(3, 4, reset="before"), lambda: LSTMCell(3, 4)
], ids=["gru-after", "gru-before", "lstm"])
def test_gated_jacobian_norms_match_autograd(cell_factory):
    torch.manual_seed(0)
    cell = cell_factory().double()
    x = randn(2, 5, 3, seed=1)
    torch.testing.assert_close(jacobian_norms(cell, x), autograd_norms(cell, x), atol=1e-10, rtol=1e-10)


def test_linear_rnn_with_scaled_orthogonal_weights_decays_like_a_power():
    # h_t = x W_ih^T + h W_hh^T with W_hh = ρ Q (Q orthogonal): ∂h_T/∂h_k = (ρ Q)^(T-k), norm ρ^(T-k).
    cell = RNNCell(2, 5, nonlinearity="linear").double()
    q, _ = torch.linalg.qr(randn(5, 5, seed=3))
    for rho in (0.5, 1.0, 1.5):
        with torch.no_grad():
            cell.weight_hh.copy_(rho * q)
        norms = rnn_jacobian_norms(cell, randn(1, 8, 2, seed=4))[0]
        torch.testing.assert_close(norms, rho ** torch.arange(8, -1, -1, dtype=torch.float64))


def test_scalar_tanh_rnn_jacobian_by_hand():
    # H = 1: ∂h_T/∂h_k = ∏_{t>k} w (1 - h_t²).
    cell = RNNCell(1, 1).double()
    with torch.no_grad():
        cell.weight_ih.fill_(1.0), cell.weight_hh.fill_(0.8), cell.bias_ih.zero_(), cell.bias_hh.zero_()
    x = torch.tensor([[[0.5], [-1.0], [2.0]]], dtype=torch.float64)
    h1 = math.tanh(0.5)
    h2 = math.tanh(-1.0 + 0.8 * h1)
    h3 = math.tanh(2.0 + 0.8 * h2)
    d = [0.8 * (1 - h ** 2) for h in (h1, h2, h3)]
    expected = [d[0] * d[1] * d[2], d[1] * d[2], d[2], 1.0]
    assert rnn_jacobian_norms(cell, x)[0].tolist() == pytest.approx(expected, abs=1e-15)


def test_a_large_recurrent_weight_is_necessary_not_sufficient_for_exploding_gradients():
    # Note 004 says a large W_s makes gradients explode. Without an activation, w = 1.5 does:
    # |∂h_T/∂h_k| = 1.5^(T-k). With tanh every factor is w (1 - h_t²) <= w, and inputs that
    # saturate the unit make the factors tiny: the same weight gives a vanishing gradient.
    x = 3.0 * torch.tensor([1.0, -1.0] * 15, dtype=torch.float64).reshape(1, 30, 1)
    norms = {}
    for nonlinearity in ("linear", "tanh"):
        cell = RNNCell(1, 1, nonlinearity=nonlinearity).double()
        with torch.no_grad():
            cell.weight_ih.fill_(1.0), cell.weight_hh.fill_(1.5), cell.bias_ih.zero_(), cell.bias_hh.zero_()
        norms[nonlinearity] = rnn_jacobian_norms(cell, x)[0]
    torch.testing.assert_close(norms["linear"], 1.5 ** torch.arange(30, -1, -1, dtype=torch.float64))
    assert norms["linear"][0] > 1e5 and norms["tanh"][0] < 1e-20
    assert (norms["tanh"] <= norms["linear"] * (1 + 1e-12)).all(), "|tanh'| <= 1: the bound w^(T-k) holds"


def test_jacobian_functions_reject_wrong_cells_and_inputs():
    with pytest.raises(TypeError, match=r"(?s)parameter 'cell'.*Actual value: LSTMCell.*RNNCell"):
        rnn_jacobian_norms(LSTMCell(2, 3), torch.zeros(1, 4, 2))
    with pytest.raises(TypeError, match=r"(?s)parameter 'cell'.*Actual value: RNN\(.*LSTMCell"):
        jacobian_norms(RNN(2, 3), torch.zeros(1, 4, 2))
    with pytest.raises(TypeError, match=r"(?s)parameter 'x'.*Actual value: f32\[4,2\]"):
        jacobian_norms(GRUCell(2, 3), torch.zeros(4, 2))
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps of D = 2 features; found shape \(1, 4, 5\)"):
        rnn_jacobian_norms(RNNCell(2, 3), torch.zeros(1, 4, 5))  # named x's whole shape
    for value in (math.nan, math.inf):  # the fuzz found torch.linalg's LinAlgError
        with pytest.raises(ValueError, match=r"x must be finite; found NaN or inf"):
            jacobian_norms(LSTMCell(2, 3), torch.full((1, 4, 2), value))


def autograd_bptt_terms(cell, x, grad, h0):
    """Step k's term of the BPTT sum by brute force: each step gets its own copy of W_hh, and the
    gradient of copy k is step k's contribution (all copies equal W_hh, so their sum is W_hh's)."""
    terms = []
    for b in range(x.shape[0]):
        copies = [cell.weight_hh.detach().clone().requires_grad_() for _ in range(x.shape[1])]
        h = h0[b:b + 1]
        for t, weight_hh in enumerate(copies):
            a = x[b:b + 1, t] @ cell.weight_ih.T + cell.bias_ih + h @ weight_hh.T + cell.bias_hh
            h = {"tanh": torch.tanh, "relu": torch.relu, "linear": lambda v: v}[cell.nonlinearity](a)
        terms.append(torch.stack(torch.autograd.grad((h[0] * grad[b]).sum(), copies)))
    return torch.stack(terms)  # (B, T, H, H)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu", "linear"])
def test_bptt_terms_are_each_steps_share_of_the_gradient(nonlinearity):
    torch.manual_seed(0)
    cell = RNNCell(3, 4, nonlinearity=nonlinearity).double()
    x, grad, h0 = randn(2, 6, 3, seed=1), randn(2, 4, seed=2), randn(2, 4, seed=3)
    terms = bptt_terms(cell, x, grad, h0)
    assert terms.shape == (2, 6, 4, 4)
    torch.testing.assert_close(terms, autograd_bptt_terms(cell, x, grad, h0), atol=1e-12, rtol=1e-12)
    # together they are the whole gradient, as one backward pass through the layer computes it
    layer = RNN(3, 4, nonlinearity=nonlinearity).double()
    layer.cells[0].load_state_dict(cell.state_dict())
    output, _ = layer(x, h0[None])
    (output[:, -1] * grad).sum().backward()
    torch.testing.assert_close(terms.sum(dim=(0, 1)), layer.cells[0].weight_hh.grad, atol=1e-12, rtol=1e-12)


def test_bptt_terms_by_hand_for_two_steps_of_one_unit():
    # Chapter 3's "two steps by hand": w = 0.8, u = 1, h_0 = 0.5, x = (1, -0.5) and
    # L = (h_2 - y)^2 / 2, so g = h_2 - y; the terms are delta_2 h_1 (k = 2) and delta_2 w (1 - h_1^2) h_0 (k = 1).
    cell = RNNCell(1, 1).double()
    with torch.no_grad():
        cell.weight_ih.fill_(1.0), cell.weight_hh.fill_(0.8), cell.bias_ih.zero_(), cell.bias_hh.zero_()
    h_1 = math.tanh(0.8 * 0.5 + 1.0)
    h_2 = math.tanh(0.8 * h_1 - 0.5)
    delta_2 = (h_2 - 0.3) * (1 - h_2**2)
    x = torch.tensor([[[1.0], [-0.5]]], dtype=torch.float64)
    terms = bptt_terms(cell, x, torch.tensor([[h_2 - 0.3]], dtype=torch.float64),
                       torch.tensor([[0.5]], dtype=torch.float64))
    torch.testing.assert_close(terms.flatten(), torch.tensor([delta_2 * 0.8 * (1 - h_1**2) * 0.5, delta_2 * h_1],
                                                             dtype=torch.float64), atol=1e-15, rtol=1e-12)


def test_bptt_terms_reject_wrong_cells_and_gradients():
    with pytest.raises(TypeError, match=r"(?s)parameter 'cell'.*Actual value: GRUCell.*RNNCell"):
        bptt_terms(GRUCell(2, 3), torch.zeros(1, 4, 2), torch.zeros(1, 3))
    with pytest.raises(TypeError, match=r"(?s)parameter 'grad'.*Actual value: f32\[3\]"):
        bptt_terms(RNNCell(2, 3), torch.zeros(1, 4, 2), torch.zeros(3))
    with pytest.raises(ValueError, match=r"grad must be \(B, 3\); found \(1, 4\)"):
        bptt_terms(RNNCell(2, 3), torch.zeros(1, 4, 2), torch.zeros(1, 4))
    with pytest.raises(ValueError, match=r"x must hold T >= 1 steps; found \(1, 0, 2\)"):
        bptt_terms(RNNCell(2, 3), torch.zeros(1, 0, 2), torch.zeros(1, 3))
    with pytest.raises(TypeError, match=r"grad must have the dtype of x \(torch.float32\); found torch.float64"):
        bptt_terms(RNNCell(2, 3), torch.zeros(1, 4, 2), torch.zeros(1, 3, dtype=torch.float64))


# ---------------------------------------------------------------------------
# Gradient clipping against torch.nn.utils.clip_grad_norm_.
# ---------------------------------------------------------------------------


def parameters_with_grads(grads):
    params = []
    for grad in grads:
        shape = grad.shape if grad is not None else (2,)
        p = torch.zeros(shape, requires_grad=True, dtype=grad.dtype if grad is not None else torch.float32)
        p.grad = None if grad is None else grad.clone()
        params.append(p)
    return params


def both_clipped(grads, max_norm, **kwargs):
    mine, theirs = parameters_with_grads(grads), parameters_with_grads(grads)
    total_mine = clip_grad_norm(mine, max_norm, **kwargs)
    total_theirs = torch.nn.utils.clip_grad_norm_(theirs, max_norm, **kwargs)
    return (total_mine, [p.grad for p in mine]), (total_theirs, [p.grad for p in theirs])


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.1, 1.0, 100.0, 0.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clip_grad_norm_is_torch_bit_for_bit(norm_type, max_norm, dtype):
    grads = [randn(3, 4, dtype=dtype, seed=1), None, 5 * randn(7, dtype=dtype, seed=2), randn(2, 2, 2, dtype=dtype)]
    (total, clipped), (expected_total, expected) = both_clipped(grads, max_norm, norm_type=norm_type)
    assert torch.equal(total, expected_total)
    for found, reference in zip(clipped, expected):
        assert (found is None and reference is None) or torch.equal(found, reference)


def test_clip_grad_norm_by_hand():
    # Gradients (3, 4) and (12): global norm √(9 + 16 + 144) = 13; clipped to 5 by 5 / (13 + 1e-6).
    a, b = torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)
    a.grad, b.grad = torch.tensor([3.0, 4.0]), torch.tensor([12.0])
    total = clip_grad_norm([a, b], 5.0)
    assert total.item() == 13.0
    scale = 5.0 / (13.0 + 1e-6)
    torch.testing.assert_close(a.grad, torch.tensor([3.0, 4.0]) * scale)
    assert torch.linalg.vector_norm(torch.cat([a.grad, b.grad])).item() == pytest.approx(5.0, abs=1e-5)
    # Below the threshold nothing changes: the coefficient is capped at exactly 1.
    before = a.grad.clone()
    assert clip_grad_norm(a, 100.0).item() == pytest.approx(5.0 * 5 / 13, abs=1e-5)
    assert torch.equal(a.grad, before)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_clip_grad_norm_handles_nonfinite_gradients_as_torch(bad):
    grads = [torch.tensor([1.0, bad, 2.0]), torch.tensor([3.0, -4.0])]
    (total, clipped), (expected_total, expected) = both_clipped(grads, 1.0)
    torch.testing.assert_close(total, expected_total, equal_nan=True, atol=0, rtol=0)
    for found, reference in zip(clipped, expected):
        torch.testing.assert_close(found, reference, equal_nan=True, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="must be finite"):
        clip_grad_norm(parameters_with_grads(grads), 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(parameters_with_grads(grads), 1.0, error_if_nonfinite=True)


def test_clip_grad_norm_edge_cases():
    assert torch.equal(clip_grad_norm([], 1.0), torch.nn.utils.clip_grad_norm_([], 1.0))
    no_grad = torch.zeros(3, requires_grad=True)
    assert clip_grad_norm([no_grad], 1.0).item() == 0.0
    zero = torch.zeros(3, requires_grad=True)
    zero.grad = torch.zeros(3)
    assert clip_grad_norm(zero, 1.0).item() == 0.0 and torch.equal(zero.grad, torch.zeros(3))
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_norm'.*Actual value: -1.*is_at_least_0_or_inf"):
        clip_grad_norm([zero], -1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_norm'.*Actual value: nan"):
        clip_grad_norm([zero], math.nan)
    with pytest.raises(TypeError, match=r"(?s)parameter 'norm_type'.*Actual value: 0.*is_above_0_or_inf"):
        clip_grad_norm([zero], 1.0, norm_type=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'parameters'.*Actual value: \[\[1\.0\]\]"):
        clip_grad_norm([[1.0]], 1.0)
    with pytest.raises(TypeError, match="parameters must be tensors; found list"):
        clip_grad_norm((item for item in [[1.0]]), 1.0)  # a generator is read in the body
    with pytest.raises(TypeError, match=r"(?s)parameter 'parameters'.*Actual value: 'ab'"):
        clip_grad_norm("ab", 1.0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'parameters'.*Actual value: None"):
        clip_grad_norm(None, 1.0)


# ---------------------------------------------------------------------------
# Parameter counts: the formula against what PyTorch and lib allocate.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize(("num_layers", "bidirectional", "bias"),
                         [(1, False, True), (2, True, True), (3, False, False)])
def test_parameter_count_matches_modules(kind, num_layers, bidirectional, bias):
    lib_cls, torch_cls = LAYERS[kind]
    expected = parameter_count(kind, 7, 5, num_layers, bidirectional, bias)
    for module in (torch_cls(7, 5, num_layers=num_layers, bidirectional=bidirectional, bias=bias),
                   lib_cls(7, 5, num_layers=num_layers, bidirectional=bidirectional, bias=bias)):
        assert sum(p.numel() for p in module.parameters()) == expected


def test_parameter_count_by_hand_and_ratios():
    # D = H = 1, one layer: G (1 + 1 + 2) = 4G.
    assert [parameter_count(k, 1, 1) for k in ("rnn", "gru", "lstm")] == [4, 12, 16]
    rnn = parameter_count("rnn", 100, 200)
    assert parameter_count("gru", 100, 200) == 3 * rnn and parameter_count("lstm", 100, 200) == 4 * rnn
    with pytest.raises(TypeError, match=r"(?s)parameter 'kind'.*Actual value: 'transformer'.*Literal\['rnn'"):
        parameter_count("transformer", 1, 1)
