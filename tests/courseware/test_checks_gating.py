"""The checkers of chapter 4: an LSTM layer with a projection, the one-step Jacobian of
PyTorch's GRU, and the experiment in which forget-gate biases that carry the gradient back pass and
the others fail saying why."""
import functools
import math
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from courseware.checks import CHECKS, CheckFailed, check_forget_bias
from courseware.checks.gating import (
    LEAST_REACH, _torch_lstmp, check_gru_jacobian, check_lstmp_layer, first_step_reach, gru_jacobian_by_autograd,
    gru_jacobian_cases, gru_jacobian_terms, lstmp_layer_by_torch, lstmp_layer_cases, lstmp_layer_with, one_thread,
)
from lib.part2_recurrent.gating import MemoryClassifier


@pytest.mark.parametrize(("name", "checker"), [("check_forget_bias", check_forget_bias),
                                               ("check_gru_jacobian", check_gru_jacobian),
                                               ("check_lstmp_layer", check_lstmp_layer)])
def test_the_checker_is_registered_under_its_name(name, checker):
    assert CHECKS[name] is checker


def test_the_reach_falls_with_a_smaller_bias_and_a_longer_sequence():
    assert first_step_reach(1.0, 40) < 1e-3 < 0.1 < first_step_reach(5.0, 40)
    assert first_step_reach(2.0, 60) < first_step_reach(2.0, 20)


def test_the_reach_is_defined_by_its_seed_the_length_unless_another_is_given():
    assert first_step_reach(2.0, 30) == first_step_reach(2.0, 30, seed=30) != first_step_reach(2.0, 30, seed=0)


def test_the_reach_leaves_the_callers_random_state_and_thread_count_alone():
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    first_step_reach(3.0, 30)
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads


@pytest.mark.parametrize("answer", [
    lambda length: torch.tensor(math.log(2 * length)),
    lambda length: torch.tensor(5.0, dtype=torch.float32),
    # solve σ(b)^T = 1/2: b = -ln(2^(1/T) - 1)
    lambda length: -torch.log(torch.tensor(2.0, dtype=torch.float64) ** (1 / length) - 1),
])
def test_biases_that_keep_the_memory_pass(answer, capsys):
    check_forget_bias(answer)
    assert capsys.readouterr().out.startswith("✓ for T = 55 and 5 fresh lengths from 20 to 60")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda length: torch.tensor(1.0), "b = 1, the bias Jozefowicz et al. recommend"),
        (lambda length: torch.tensor(0.0), "PyTorch's default, halves the memory"),
        (lambda length: torch.tensor(1.5), "norm at the first input is .* ρ must be at least a tenth"),
        (lambda length: torch.tensor(2.0), "for T = 55: with b = 2 the gradient's norm at the first input is 0.07"),
        (lambda length: torch.tensor(12.0), "training could never teach it to forget"),
        (lambda length: torch.tensor([5.0, 5.0]), "expected a scalar"),
        (lambda length: 5.0, "must return a torch.Tensor; it returned float"),
        (lambda length: torch.tensor(float("nan")), "NaN or inf"),
    ],
)
def test_biases_that_lose_the_memory_or_freeze_the_gate_fail_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_forget_bias(answer)


def test_the_lengths_the_checker_draws_separate_ln_2t_from_b_1():
    """The verdicts do not depend on the seed: ln(2T) passes and b = 1 fails on every fifth length in
    20..60 here (all 41 lengths were tried once: ln(2T) reaches at least 0.43, b = 1 at most 0.032)."""
    for length in range(20, 61, 5):
        assert first_step_reach(math.log(2 * length), length) >= 0.1 > first_step_reach(1.0, length)


def test_a_bias_a_hair_below_the_threshold_passes_and_a_clear_miss_prints_distinct_numbers():
    """The tolerance is on ρ, the quantity the statement names: a search that stopped where its own
    (float32, say) measurement gave ρ = 0.1 passes; a miss prints ρ with enough digits not to read 0.1."""
    low, high = 2.0, 2.2  # at T = 55, ρ(2) < 0.1 < ρ(2.2)
    assert first_step_reach(low, 55) < LEAST_REACH < first_step_reach(high, 55)
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if first_step_reach(middle, 55) < LEAST_REACH else (low, middle)
    assert first_step_reach(high, 55) >= LEAST_REACH > first_step_reach(low, 55)
    below = torch.tensor(low, dtype=torch.float64) - 2e-4  # ρ about 1e-4 below a tenth
    check_forget_bias.judge([(55,)], [torch.tensor(high, dtype=torch.float64)])
    check_forget_bias.judge([(55,)], [torch.tensor(low, dtype=torch.float32)])  # within the rounding allowed
    with pytest.raises(CheckFailed, match=r"is 0\.099\d* times"):
        check_forget_bias.judge([(55,)], [below])


# ---- fairness: written from the statement of ex-gate-remember -------------------------------------
def ratio_with_a_loop(bias, length):
    """ρ measured as the statement says, with an LSTM written out step by step instead of torch.nn.LSTM:
    the model built after torch.manual_seed(T), then x and w drawn from Generator().manual_seed(T)."""
    with torch.random.fork_rng():
        torch.manual_seed(length)
        model = MemoryClassifier("lstm", 6, 32, 4, keep_bias=bias)
    lstm = model.recurrent
    weight_ih, weight_hh = lstm.weight_ih_l0.detach().double(), lstm.weight_hh_l0.detach().double()
    bias_both = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach().double()
    generator = torch.Generator().manual_seed(length)
    x = torch.randn(32, length, 6, generator=generator, dtype=torch.float64)
    w = torch.randn(32, 4, generator=generator, dtype=torch.float64)
    inputs = [x[:, t].clone().requires_grad_() for t in range(length)]
    h = c = torch.zeros(32, 32, dtype=torch.float64)
    with one_thread():
        for x_t in inputs:
            i, f, g, o = (x_t @ weight_ih.T + h @ weight_hh.T + bias_both).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        logits = h @ model.output.weight.detach().double().T + model.output.bias.detach().double()
        first, last = torch.autograd.grad((logits * w).sum(), [inputs[0], inputs[-1]])
    return float(first.norm(dim=1).mean() / last.norm(dim=1).mean())


@functools.lru_cache(maxsize=None)
def _smallest_passing_bias(length):
    """Regula falsi (Illinois) on ln ρ(b) - ln 0.1, stopped when ρ itself is within 1% above 0.1."""
    def gap(b):
        return math.log(ratio_with_a_loop(b, length) / 0.1)

    low, high = 1.0, 4.0  # ρ < 0.1 at b = 1 and ρ > 0.1 at b = 4 for every length from 20 to 60
    gap_low, gap_high = gap(low), gap(high)
    while True:
        middle = high - gap_high * (high - low) / (gap_high - gap_low)
        gap_middle = gap(middle)
        if 0 <= gap_middle < 0.01:
            return middle
        if gap_middle < 0:
            low, gap_low = middle, gap_middle
            gap_high /= 2
        else:
            high, gap_high = middle, gap_middle
            gap_low /= 2


def smallest_bias_by_search(length):
    """The least bias that passes at each length, found by a search on ρ ≥ 0.1 itself."""
    return torch.tensor(_smallest_passing_bias(length), dtype=torch.float64)


def one_constant_for_every_length(length):
    """The statement asks whether one constant passes on every length from 20 to 60: b = 3 does."""
    return torch.tensor(3.0, dtype=torch.float64)


def half_life_of_t_steps(length):
    """σ(b)^T = 1/2: b = -ln(2^(1/T) - 1)."""
    return -torch.log(torch.tensor(2.0, dtype=torch.float64) ** (1 / length) - 1)


def log_of_the_length(length):
    """The chapter's rule of thumb, a bias near ln T (Tallec and Ollivier)."""
    return torch.tensor(math.log(length))


# ---- an LSTM layer with a projection (ex-gate-lstm-projection) -------------------------------------
def lstmp_by_units(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    """Unit by unit in Python floats, one sequence at a time: gate k of unit j reads row k·H + j of the
    weights (i, f, g, o)."""
    batch, steps = x.shape[:2]
    hidden, proj = c0.shape[1], h0.shape[1]
    wi, wh, bi, bh, wr = (t.tolist() for t in (weight_ih, weight_hh, bias_ih, bias_hh, weight_hr))
    out = torch.zeros(batch, steps, proj + hidden, dtype=torch.float64)
    for b in range(batch):
        hs, cs = h0[b].tolist(), c0[b].tolist()
        for t in range(steps):
            xs = x[b, t].tolist()

            def pre(row):
                return (sum(w * v for w, v in zip(wi[row], xs)) + sum(w * v for w, v in zip(wh[row], hs))
                        + bi[row] + bh[row])

            shown, memory = [], []
            for j in range(hidden):
                i, f, o = (1 / (1 + math.exp(-pre(k * hidden + j))) for k in (0, 1, 3))
                memory.append(f * cs[j] + i * math.tanh(pre(2 * hidden + j)))
                shown.append(o * math.tanh(memory[-1]))
            hs, cs = [sum(w * v for w, v in zip(wr[p], shown)) for p in range(proj)], memory
            out[b, t] = torch.tensor(hs + cs, dtype=torch.float64)
    return out


def lstmp_by_slices_float32(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    """The input's share of every step computed first for the whole sequence, each gate from its own
    slice of rows, in float32; the projection as an einsum."""
    hidden = c0.shape[1]
    x, h, c, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr = (
        t.float() for t in (x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr))
    from_x = torch.einsum("btd,gd->btg", x, weight_ih) + bias_ih + bias_hh  # (B, T, 4H)
    hs, cs = [], []
    for t in range(x.shape[1]):
        def gate(k):
            rows = slice(k * hidden, (k + 1) * hidden)
            return from_x[:, t, rows] + h @ weight_hh[rows].T

        i, f, g, o = torch.sigmoid(gate(0)), torch.sigmoid(gate(1)), torch.tanh(gate(2)), torch.sigmoid(gate(3))
        c = f * c + i * g
        h = torch.einsum("bh,ph->bp", o * torch.tanh(c), weight_hr)
        hs.append(h)
        cs.append(c)
    return torch.cat([torch.stack(hs, dim=1), torch.stack(cs, dim=1)], dim=2)


def lstmp_without_projection(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    """An ordinary LSTM step, h_t = o ⊙ tanh(c_t) of H units, each step reading h0, the only state of
    P units at hand."""
    rows = []
    for t in range(x.shape[1]):
        i, f, g, o = (x[:, t] @ weight_ih.T + bias_ih + h0 @ weight_hh.T + bias_hh).chunk(4, dim=1)
        c0 = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
        rows.append(torch.cat([torch.sigmoid(o) * torch.tanh(c0), c0], dim=1))
    return torch.stack(rows, dim=1)


def lstmp_memory_projected_too(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    both = lstmp_layer_with(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr)
    return torch.cat([both[:, :, :h0.shape[1]], both[:, :, h0.shape[1]:] @ weight_hr.T], dim=2)


def lstmp_projection_untransposed(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    """(B, H) @ (P, H): a shape error, since P < H."""
    i, f, g, o = (x[:, 0] @ weight_ih.T + bias_ih + h0 @ weight_hh.T + bias_hh).chunk(4, dim=1)
    c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    return ((torch.sigmoid(o) * torch.tanh(c)) @ weight_hr)[:, None]


def lstmp_stacked_states(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    """torch.stack([h_t, c_t]): a shape error, since P < H."""
    i, f, g, o = (x[:, 0] @ weight_ih.T + bias_ih + h0 @ weight_hh.T + bias_hh).chunk(4, dim=1)
    c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
    return torch.stack([(torch.sigmoid(o) * torch.tanh(c)) @ weight_hr.T, c])


def lstmp_carrying_only_h(x, h0, c0, weight_ih, weight_hh, bias_ih, bias_hh, weight_hr):
    """Every step starts from the memory c0: the loop updates h and forgets to carry c."""
    h, rows = h0, []
    for t in range(x.shape[1]):
        i, f, g, o = (x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=1)
        c = torch.sigmoid(f) * c0 + torch.sigmoid(i) * torch.tanh(g)
        h = (torch.sigmoid(o) * torch.tanh(c)) @ weight_hr.T
        rows.append(torch.cat([h, c], dim=1))
    return torch.stack(rows, dim=1)


def lstmp_states_read(x, h0, c0, *weights):
    """h_0 .. h_(T-1): the states each step reads, the initial one first."""
    written = lstmp_by_slices_float32(x, h0, c0, *weights).double()
    return torch.cat([torch.cat([h0, c0], dim=1)[:, None], written[:, :-1]], dim=1)


def test_the_layer_written_out_is_torchs_and_the_sizes_keep_the_wrong_shapes_apart():
    for seed in range(20):
        for case in lstmp_layer_cases(torch.Generator().manual_seed(seed)):
            x, h0, c0, *_, weight_hr = case
            proj, hidden = weight_hr.shape
            assert h0.shape[1] == proj < hidden == c0.shape[1] and hidden != 2 * proj
            assert len({x.shape[0], x.shape[2], proj, hidden}) == 4 and x.shape[1] != x.shape[0]
            assert len({proj + hidden, 2 * hidden, 2 * proj, proj, hidden}) == 5
            if seed < 3:
                expected = lstmp_layer_by_torch(*case)
                assert torch.allclose(lstmp_layer_with(*case), expected, atol=1e-12, rtol=0)
                # the memory at every step, taken from runs on the first t steps, is the memory a
                # run over the whole sequence returns at its end, and h_T is its last output
                layer = _torch_lstmp(*case[3:])
                with torch.no_grad():
                    _, (h_n, c_n) = layer(x, (h0[None], c0[None]))
                assert torch.equal(expected[:, -1], torch.cat([h_n[0], c_n[0]], dim=1))


def lstm_count(**projection):
    return sum(p.numel() for p in torch.nn.LSTM(512, 1024, **projection).parameters())


def lstm_multiplications(**projection):
    """Multiplications of the matrix products of one step for one example, counted by FlopCounterMode
    (2 flops each) in torch.nn.LSTM itself; without oneDNN, whose fused kernel it cannot see into."""
    layer = torch.nn.LSTM(512, 1024, batch_first=True, **projection)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # oneDNN's notes on TF32 and on projections
        with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as counter:
            layer(torch.randn(1, 1, 512))
    return counter.get_total_flops() // 2


def test_the_counts_in_the_solution_of_ex_gate_lstm_projection():
    """D = 512, H = 1024: 4(HD + H² + 2H) parameters without a projection, 4(HD + HP + 2H) + PH with
    one; 4HD + 4H² multiplications in the matrix products of a step, 4HD + 4HP + PH with a projection.
    Both fall exactly while 5P < 4H, that is P ≤ 819, whatever D."""
    assert lstm_count() == 6_299_648 and lstm_count(proj_size=256) == 3_416_064
    assert round(100 * 3_416_064 / 6_299_648) == 54
    assert lstm_count(proj_size=819) == 6_298_624 < 6_299_648 < lstm_count(proj_size=820) == 6_303_744
    assert lstm_multiplications() == 4 * 1024 * 512 + 4 * 1024**2 == 6_291_456
    assert lstm_multiplications(proj_size=256) == 4 * 1024 * 512 + 5 * 1024 * 256 == 3_407_872
    assert lstm_multiplications(proj_size=819) < 6_291_456 < lstm_multiplications(proj_size=820)
    # with the three element-wise products f ⊙ c, i ⊙ g, o ⊙ tanh(c) of H each, as the solution counts
    assert 6_291_456 + 3 * 1024 == 6_294_528 and 3_407_872 + 3 * 1024 == 3_410_944
    for input_size in (1, 100, 2048):  # the bound does not depend on D
        def count(proj_size):
            return sum(p.numel() for p in torch.nn.LSTM(input_size, 40, proj_size=proj_size).parameters())
        plain = sum(p.numel() for p in torch.nn.LSTM(input_size, 40).parameters())
        assert count(31) < plain == count(32) < count(33)  # 5P = 4H at P = 32


def test_the_lstmp_reference_leaves_the_callers_random_state_alone():
    state = torch.get_rng_state()
    lstmp_layer_by_torch(*lstmp_layer_cases(torch.Generator().manual_seed(0))[0])
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("answer", [lstmp_layer_with, lstmp_by_units, lstmp_by_slices_float32])
def test_lstmp_layer_accepts_right_answers(answer, capsys):
    check_lstmp_layer(answer)
    assert capsys.readouterr().out.startswith("✓ your LSTMP layer agrees with torch.nn.LSTM(proj_size=P)")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda *a: lstmp_layer_with(*a, output="o c'"), "not the notes' o ⊙ c_t"),
        (lambda *a: lstmp_layer_with(*a, output="o tanh(c)"), "you used the old memory"),
        (lambda *a: lstmp_layer_with(*a, squash_after=True), "the projection is linear"),
        (lambda *a: lstmp_layer_with(*a, order="ifog"), "PyTorch orders the row blocks i, f, g, o"),
        (lambda *a: lstmp_layer_with(*a, order="figo"), "the first block of rows is the input gate"),
        (lambda *a: lstmp_layer_with(*a, candidate=torch.sigmoid), "the candidate g goes through tanh"),
        (lambda *a: lstmp_layer_with(*a, h_first=False), "put h_t first"),
        (lstmp_carrying_only_h, "carry the memory along"),
        (lambda *a: lstmp_layer_with(*a, carry=("c",)), "feed the new state back"),
        (lambda *a: lstmp_layer_with(*a, start="zeros"), "start from the given h0 and c0"),
        (lstmp_states_read, "you returned the states each step reads"),
        (lstmp_without_projection, "h_t has P units, not H: project the output"),
        (lstmp_memory_projected_too, "only h is projected"),
        (lambda *a: lstmp_layer_with(*a)[:, :, :a[1].shape[1]], "return both states at every step"),
        (lambda *a: lstmp_layer_with(*a)[:, -1], "return both states at every step"),
        (lambda *a: lstmp_layer_with(*a).transpose(0, 1), "batch first"),
        (lambda x, h0, c0, *w: torch.cat([torch.cat([h0, c0], dim=1)[:, None], lstmp_layer_with(x, h0, c0, *w)],
                                         dim=1), "leave out the initial state"),
        (lambda x, h0, c0, *w: torch.stack([h0, h0]), "one row per sequence and step"),
        (lstmp_projection_untransposed, "raised RuntimeError.*mind the shapes"),
        (lstmp_stacked_states, "raised RuntimeError: stack expects .*join them with torch.cat"),
        (lambda *a: lstmp_layer_with(*a) + 1e-4, "differ from torch.nn.LSTM's by up to 0.0001"),
    ],
)
def test_lstmp_layer_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_lstmp_layer(answer)


# ---- the one-step Jacobian of a GRU (ex-gate-gru-jacobian) -----------------------------------------
def gru_step_by_hand(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    """PyTorch's GRU step, written out (r, z, n blocks; the reset gate after the product)."""
    hidden = h.shape[1]
    a = x @ weight_ih.T + bias_ih  # (B, 3H)
    b = h @ weight_hh.T + bias_hh  # (B, 3H)
    r = torch.sigmoid(a[:, :hidden] + b[:, :hidden])
    z = torch.sigmoid(a[:, hidden:2 * hidden] + b[:, hidden:2 * hidden])
    n = torch.tanh(a[:, 2 * hidden:] + r * b[:, 2 * hidden:])
    return (1 - z) * n + z * h


def jacobian_by_loops(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    """Entry by entry in Python floats, from the chain rule on h'_i = (1 - z_i) n_i + z_i h_i."""
    batch, hidden = h.shape
    wi, wh, bi, bh, xs, hs = (t.tolist() for t in (weight_ih, weight_hh, bias_ih, bias_hh, x, h))

    def sig(v):
        return 1 / (1 + math.exp(-v))

    out = torch.zeros(batch, hidden, hidden, dtype=torch.float64)
    for b in range(batch):
        for i in range(hidden):
            pre = [sum(wi[g * hidden + i][d] * xs[b][d] for d in range(len(xs[b]))) + bi[g * hidden + i]
                   for g in range(3)]
            rec = [sum(wh[g * hidden + i][k] * hs[b][k] for k in range(hidden)) + bh[g * hidden + i]
                   for g in range(3)]
            r, z = sig(pre[0] + rec[0]), sig(pre[1] + rec[1])
            n = math.tanh(pre[2] + r * rec[2])
            for j in range(hidden):
                dr = r * (1 - r) * wh[i][j]
                dz = z * (1 - z) * wh[hidden + i][j]
                dn = (1 - n * n) * (dr * rec[2] + r * wh[2 * hidden + i][j])
                out[b, i, j] = (i == j) * z + dz * (hs[b][i] - n) + (1 - z) * dn
    return out


def jacobian_in_the_notes_form_float32(x, h, weight_ih, weight_hh, bias_ih, bias_hh):
    """The chapter's three terms, diag(1 - Γ_u) + diag(Γ_u) ∂c̃/∂c + diag(c̃ - c) ∂Γ_u/∂c, with
    Γ_u = 1 - z, c̃ = n and ∂c̃/∂c a product of matrices, in float32."""
    x, h, weight_ih, weight_hh, bias_ih, bias_hh = (t.float() for t in (x, h, weight_ih, weight_hh, bias_ih, bias_hh))
    hidden = h.shape[1]
    W_hr, W_hz, W_hn = weight_hh.split(hidden)
    a = x @ weight_ih.T + bias_ih
    b = h @ weight_hh.T + bias_hh
    r = torch.sigmoid(a[:, :hidden] + b[:, :hidden])
    gamma_u = torch.sigmoid(-(a[:, hidden:2 * hidden] + b[:, hidden:2 * hidden]))  # 1 - z
    n = torch.tanh(a[:, 2 * hidden:] + r * b[:, 2 * hidden:])
    d_r = torch.diag_embed(r * (1 - r)) @ W_hr  # (B, H, H)
    d_gamma = -torch.diag_embed(gamma_u * (1 - gamma_u)) @ W_hz
    d_candidate = torch.diag_embed(1 - n**2) @ (torch.diag_embed(r) @ W_hn + torch.diag_embed(b[:, 2 * hidden:]) @ d_r)
    return (torch.diag_embed(1 - gamma_u) + torch.diag_embed(gamma_u) @ d_candidate
            + torch.diag_embed(n - h) @ d_gamma)


def jacobian_by_central_differences(x, h, *weights):
    """Column j from (h'(h + ε e_j) - h'(h - ε e_j)) / 2ε, in float64 (an error near 1e-10)."""
    eps, hidden = 1e-6, h.shape[1]
    columns = []
    for j in range(hidden):
        step = torch.zeros_like(h)
        step[:, j] = eps
        columns.append((gru_step_by_hand(x, h + step, *weights) - gru_step_by_hand(x, h - step, *weights)) / (2 * eps))
    return torch.stack(columns, dim=2)  # (B, H_out, H_in)


def gru_jacobian_with(x, h, weight_ih, weight_hh, bias_ih, bias_hh, paths=("kept", "update", "candidate", "reset"),
                      reset_bias=True, reset="after", keep="z", weights="W", sign=1, copy="z", n_share="1-z",
                      gate_slope="σ(1-σ)", tanh_slope="1-n²"):
    """Wrong answers: some paths left out, b_hn left out of the reset path, the notes' reset placement
    (reset="before") or the update gate's roles swapped (keep="1-z"), differentiated by hand; and, for
    PyTorch's placement, W_hᵀ for W_h in every path (weights="Wᵀ"), the update path's sign flipped
    (sign=-1), the identity for diag(z) (copy="I"), ∂n/∂h without its factor 1 - z (n_share="1": in the
    candidate path alone with n_share="1 in candidate"), σ for σ' (gate_slope="σ") and 1 - n for
    tanh' (tanh_slope="1-n")."""
    hidden = h.shape[1]
    W_hr, W_hz, W_hn = (w.T if weights == "Wᵀ" else w for w in weight_hh.split(hidden))
    b_hn = bias_hh[2 * hidden:]
    a = x @ weight_ih.T + bias_ih
    b = h @ weight_hh.T + bias_hh
    r = torch.sigmoid(a[:, :hidden] + b[:, :hidden])
    z = torch.sigmoid(a[:, hidden:2 * hidden] + b[:, hidden:2 * hidden])

    def sigmoid_slope(s):
        return s if gate_slope == "σ" else s * (1 - s)

    d_r = sigmoid_slope(r)[:, :, None] * W_hr
    d_z = sigmoid_slope(z)[:, :, None] * W_hz
    if reset == "after":
        h_n = b[:, 2 * hidden:] if reset_bias else h @ weight_hh[2 * hidden:].T
        n = torch.tanh(a[:, 2 * hidden:] + r * b[:, 2 * hidden:])
        slope = 1 - n if tanh_slope == "1-n" else 1 - n**2
        candidate = slope[:, :, None] * r[:, :, None] * W_hn
        through_r = slope[:, :, None] * h_n[:, :, None] * d_r
    else:  # n = tanh(x_n + (r ⊙ h) W_hnᵀ + b_hn): ∂n/∂h = diag(1 - n²) W_hn (diag(r) + diag(h) ∂r/∂h)
        n = torch.tanh(a[:, 2 * hidden:] + (r * h) @ W_hn.T + b_hn)
        candidate = (1 - n**2)[:, :, None] * (W_hn * r[:, None, :])
        through_r = (1 - n**2)[:, :, None] * ((W_hn * h[:, None, :]) @ d_r)
    keep_share, write_share, d_keep = (z, 1 - z, d_z) if keep == "z" else (1 - z, z, -d_z)
    one = torch.ones_like(write_share)
    terms = {
        "kept": torch.eye(hidden, dtype=h.dtype).repeat(h.shape[0], 1, 1) if copy == "I"
        else torch.diag_embed(keep_share),
        "update": sign * (h - n)[:, :, None] * d_keep,
        "candidate": (write_share if n_share == "1-z" else one)[:, :, None] * candidate,
        "reset": (one if n_share == "1" else write_share)[:, :, None] * through_r,
    }
    return sum(terms[name] for name in paths)


def test_the_paths_add_up_to_autograds_jacobian_and_autograd_to_central_differences():
    for case in gru_jacobian_cases(torch.Generator().manual_seed(3)):
        expected = gru_jacobian_by_autograd(*case)
        assert torch.allclose(sum(gru_jacobian_terms(*case).values()), expected, atol=1e-12, rtol=0)
        assert torch.allclose(jacobian_by_central_differences(*case), expected, atol=1e-8, rtol=0)


def test_every_path_is_large_enough_to_tell_apart():
    """Each path, and b_hn in the path through r, moves some entry of every case by more than 1e-4 (a
    hundred times the float64 tolerance), and of some case of every draw by more than 0.1 (a thousand
    times float32's): leaving one out fails even in float32."""
    for seed in range(20):
        largest = torch.zeros(5, dtype=torch.float64)
        for case in gru_jacobian_cases(torch.Generator().manual_seed(seed)):
            terms = gru_jacobian_terms(*case)
            without_bias = terms["reset"] - gru_jacobian_terms(*case, reset_bias=False)["reset"]
            moved = torch.stack([term.abs().max() for term in [*terms.values(), without_bias]])
            assert moved.min() > 1e-4
            largest = torch.maximum(largest, moved)
        assert largest.min() > 0.1


def test_an_update_gate_near_one_makes_the_jacobian_the_identity():
    """The chapter's claim in PyTorch's convention: z ≈ 1 copies the state and its gradient."""
    x, h, weight_ih, weight_hh, bias_ih, bias_hh = gru_jacobian_cases(torch.Generator().manual_seed(0))[0]
    hidden = h.shape[1]
    bias_ih = bias_ih.clone()
    bias_ih[hidden:2 * hidden] = 30.0
    jacobian = gru_jacobian_by_autograd(x, h, weight_ih, weight_hh, bias_ih, bias_hh)
    assert torch.allclose(jacobian, torch.eye(hidden, dtype=torch.float64).expand_as(jacobian), atol=1e-9)


def test_the_reference_leaves_the_callers_random_state_and_thread_count_alone():
    state, threads = torch.get_rng_state(), torch.get_num_threads()
    gru_jacobian_by_autograd(*gru_jacobian_cases(torch.Generator().manual_seed(0))[0])
    assert torch.equal(torch.get_rng_state(), state) and torch.get_num_threads() == threads


def test_gru_jacobian_accepts_right_answers(capsys):
    for answer in (jacobian_in_the_notes_form_float32, jacobian_by_central_differences):
        check_gru_jacobian(answer)
        assert capsys.readouterr().out.startswith("✓ your ∂h'/∂h agrees with autograd through torch.nn.GRUCell")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda x, h, *w: gru_jacobian_by_autograd(x, h, *w)[0], r"shape \(\d, \d\); expected \(B, H, H\) = .*"
                                                                 "one H × H Jacobian per row"),
        (lambda x, h, *w: torch.diagonal(gru_jacobian_by_autograd(x, h, *w), dim1=1, dim2=2),
         "not only its diagonal"),
        (lambda x, h, *w: torch.zeros(h.shape[0], h.shape[1], h.shape[0], h.shape[1], dtype=torch.float64),
         "keep only each row's own Jacobian"),
        (lambda *a: gru_jacobian_with(*a, paths=("kept", "update")),
         r"n depends on h too: add diag\(1 - z\) ∂n/∂h"),
        (lambda *a: gru_jacobian_with(*a, paths=("kept", "candidate")), "you left out both gates' paths"),
    ],
)
def test_gru_jacobian_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_gru_jacobian(answer)


FAIRNESS = {
    "check_lstmp_layer": {
        "right": [lstmp_by_units, lstmp_by_slices_float32],
        "wrong": [
            (lambda *a: lstmp_layer_with(*a, output="o c'"), "the cell shows o ⊙ tanh\\(c_t\\), not the notes'"),
            (lambda *a: lstmp_layer_with(*a, order="ifog"), "PyTorch orders the row blocks i, f, g, o"),
            (lambda *a: lstmp_layer_with(*a, squash_after=True), "the projection is linear"),
            (lambda *a: lstmp_layer_with(*a, output="o tanh(c)"), "the output reads the new memory"),
            (lstmp_without_projection, "h_t has P units, not H: project the output"),
            (lstmp_memory_projected_too, "only h is projected; the memory c_t keeps its H units"),
            (lstmp_carrying_only_h, "carry the memory along: step t \\+ 1 starts from c_t"),
            (lambda *a: lstmp_layer_with(*a, carry=("c",)), "the gates of step t \\+ 1 read h_t, not h0"),
            (lstmp_states_read, "you returned the states each step reads, h_0 .. h_\\(T-1\\)"),
            (lstmp_stacked_states, "differ in width, so join them with torch.cat"),
        ],
    },
    "check_forget_bias": {
        "right": [smallest_bias_by_search, half_life_of_t_steps, log_of_the_length,
                  one_constant_for_every_length],
        "wrong": [
            (lambda length: torch.tensor(1.0), "b = 1, the bias Jozefowicz et al. recommend"),
            (lambda length: torch.tensor(0.0), "PyTorch's default"),
            (lambda length: torch.tensor(float(length)), "training could never teach it to forget"),
            # the gate value σ(b) = 1 - 1/(2T) returned instead of the bias b
            (lambda length: torch.tensor(1 - 1 / (2 * length)), "ρ must be at least a tenth"),
            (lambda length: torch.tensor(2.0), "T = 55: .* ρ must be at least a tenth"),
        ],
    },
    "check_gru_jacobian": {
        "right": [jacobian_by_loops, jacobian_in_the_notes_form_float32, jacobian_by_central_differences],
        "wrong": [
            (lambda *a: gru_jacobian_with(*a, paths=("kept",)), r"you returned diag\(z\), the path that copies"),
            (lambda *a: gru_jacobian_with(*a, paths=("kept", "candidate", "reset")),
             "the update gate z depends on h too"),
            (lambda *a: gru_jacobian_with(*a, paths=("kept", "update", "candidate")),
             "the reset gate r depends on h too"),
            (lambda *a: gru_jacobian_with(*a).transpose(1, 2), "you returned the transpose"),
            (lambda *a: gru_jacobian_with(*a, reset_bias=False), "you left out b_hn"),
            (lambda *a: gru_jacobian_with(*a, reset="before"), "reset gate before the matrix product"),
            (lambda *a: gru_jacobian_with(*a, keep="1-z"), "z is the share of the old state that is kept"),
            (lambda *a: gru_jacobian_with(*a, paths=("kept", "update")),
         r"n depends on h too: add diag\(1 - z\) ∂n/∂h"),
            (lambda *a: gru_jacobian_with(*a, weights="Wᵀ"), r"multiplies by the transpose of the weights it needs"),
            (lambda *a: gru_jacobian_with(*a, sign=-1), "the path through z has the wrong sign"),
            (lambda *a: gru_jacobian_with(*a, copy="I"), r"the copy path is diag\(z\), not the identity"),
            (lambda *a: gru_jacobian_with(*a, n_share="1"), "the path through n is .* you left out the factor 1 - z"),
            (lambda *a: gru_jacobian_with(*a, n_share="1 in candidate"),
             "the candidate path .* lacks its factor 1 - z"),
            (lambda *a: gru_jacobian_with(*a, gate_slope="σ"), r"you used σ\(a\) itself"),
            (lambda *a: gru_jacobian_with(*a, tanh_slope="1-n"), "need 1 - n², not 1 - n"),
        ],
    },
}
