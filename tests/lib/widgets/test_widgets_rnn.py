"""The visuals of chapters 3 and 4 (lib.widgets.rnn): ``compute`` against lib.part2_recurrent.rnn and by hand,
plus smoke tests that each one renders through :func:`lib.widgets.explore`."""
import math

import numpy as np
import pytest
import torch

from lib.part2_recurrent.rnn import LSTMCell, RNNCell, rnn_jacobian_norms
from lib.widgets import explore
from lib.widgets.rnn import (
    CANDIDATE_PATTERNS,
    GradientDecay,
    LSTMGateExplorer,
    candidate_pattern,
    gate_trace,
)

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def decay():
    return GradientDecay()


# ---------------------------------------------------------------------------
# GradientDecay
# ---------------------------------------------------------------------------


def test_decay_uses_scaled_orthogonal_recurrent_weights(decay):
    q = decay.orthogonal
    torch.testing.assert_close(q @ q.T, torch.eye(decay.hidden_size, dtype=torch.float64))
    decay.compute(scale=1.25, length=10, activation="tanh")
    singular_values = torch.linalg.svdvals(decay.cells["tanh"].weight_hh.detach())
    torch.testing.assert_close(singular_values, torch.full((decay.hidden_size,), 1.25, dtype=torch.float64))


@pytest.mark.parametrize("scale", [0.5, 1.0, 1.5])
def test_linear_decay_is_exactly_the_power_of_the_scale(decay, scale):
    data = decay.compute(scale=scale, length=25, activation="linear")
    np.testing.assert_allclose(data["norms"], scale ** (25 - np.arange(26.0)), rtol=1e-9)
    np.testing.assert_allclose(data["bound"], data["norms"], rtol=1e-9)


def test_decay_is_the_geometric_mean_of_lib_jacobian_norms(decay):
    data = decay.compute(scale=1.1, length=10, activation="tanh")
    cell = RNNCell(decay.input_size, decay.hidden_size).double()
    with torch.no_grad():
        cell.weight_ih.copy_(decay.weight_ih), cell.weight_hh.copy_(1.1 * decay.orthogonal)
        cell.bias_ih.zero_(), cell.bias_hh.zero_()
    norms = rnn_jacobian_norms(cell, decay.inputs[:, :10]).numpy()  # (N, 11)
    np.testing.assert_allclose(data["norms"], np.exp(np.log(norms).mean(axis=0)), rtol=1e-9)
    assert data["norms"][-1] == pytest.approx(1.0) and data["first"] == data["norms"][0]


def test_tanh_never_exceeds_the_bound_and_vanishes_at_scale_one(decay):
    data = decay.compute(scale=1.0, length=50, activation="tanh")
    assert (data["norms"] <= data["bound"] * (1 + 1e-9)).all(), "|tanh'| <= 1 caps each factor at ρ"
    assert data["first"] < 1e-3, "with ρ = 1 the saturating tanh alone makes the gradient vanish"


# ---------------------------------------------------------------------------
# LSTMGateExplorer
# ---------------------------------------------------------------------------


def test_gate_trace_by_hand():
    trace = gate_trace(0.5, 1.0, 0.5, np.array([1.0, 0.0, 2.0]))
    np.testing.assert_allclose(trace["c"], [1.0, 0.5, 2.25])
    np.testing.assert_allclose(trace["h"], 0.5 * np.tanh([1.0, 0.5, 2.25]))
    np.testing.assert_allclose(trace["notes_h"], [0.5, 0.25, 1.125])
    np.testing.assert_allclose(trace["written"], [1.0, 0.0, 2.0])


def test_gate_trace_is_what_an_lstm_cell_computes_with_those_gates():
    # A one-unit LSTM whose gates are constant (biases only) and whose candidate is tanh(x_t).
    f, i, o = 0.8, 0.3, 0.6
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    cell = LSTMCell(1, 1).double()
    with torch.no_grad():
        cell.weight_hh.zero_(), cell.bias_hh.zero_()
        cell.weight_ih.copy_(torch.tensor([[0.0], [0.0], [1.0], [0.0]], dtype=torch.float64))
        cell.bias_ih.copy_(torch.tensor([logit(i), logit(f), 0.0, logit(o)], dtype=torch.float64))
    g = np.array([0.9, -0.5, 0.0, 0.7, 0.2])
    h, c = torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64)
    hs, cs = [], []
    for value in g:
        h, c = cell(torch.tensor([[math.atanh(value)]], dtype=torch.float64), (h, c))
        hs.append(h.item()), cs.append(c.item())
    trace = gate_trace(f, i, o, g)
    np.testing.assert_allclose(trace["c"], cs, rtol=1e-12)
    np.testing.assert_allclose(trace["h"], hs, rtol=1e-12)


def test_candidate_patterns():
    np.testing.assert_array_equal(np.nonzero(candidate_pattern("pulse", 30))[0], [2])
    np.testing.assert_array_equal(candidate_pattern("steady", 4), [0.5] * 4)
    np.testing.assert_array_equal(candidate_pattern("switch", 6), [1, 1, -1, -1, 0, 0])
    with pytest.raises(ValueError, match="name must be one of"):
        candidate_pattern("noise", 5)


def test_forget_gate_one_keeps_a_pulse_and_zero_forgets_it():
    explorer = LSTMGateExplorer()
    kept = explorer.compute(forget_gate=1.0, input_gate=1.0, output_gate=1.0, candidate="pulse")
    assert (kept["c"][2:] == 1.0).all() and (kept["c"][:2] == 0).all()
    forgotten = explorer.compute(forget_gate=0.0, input_gate=1.0, output_gate=1.0, candidate="pulse")
    assert forgotten["c"][2] == 1.0 and (forgotten["c"][3:] == 0).all()
    # Steady writing with f = 1 grows the memory without bound; h stays in (-1, 1), the notes' o·c does not.
    steady = explorer.compute(forget_gate=1.0, input_gate=1.0, output_gate=1.0, candidate="steady")
    assert steady["c"][-1] == pytest.approx(15.0) and steady["notes_peak"] == pytest.approx(15.0)
    assert np.abs(steady["h"]).max() < 1.0


# ---------------------------------------------------------------------------
# Both render through explore().
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("visual", [GradientDecay, LSTMGateExplorer])
def test_visuals_render_and_respect_the_frame_budget(visual):
    explorer = explore(visual())
    frames = int(np.prod([len(c.values) for c in visual.controls]))
    assert frames <= 300
    first = explorer.render()
    assert first[8:12] == WEBP_TAG
    changed = {c.name: c.values[0] for c in visual.controls}
    assert explorer.render(**changed) != first
    assert set(CANDIDATE_PATTERNS) == set(LSTMGateExplorer.controls[3].values)
