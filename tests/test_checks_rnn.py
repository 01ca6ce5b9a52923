"""The checkers of chapters 3 and 4: right answers pass however they are written; wrong
ones fail with a message that says what is wrong."""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_bptt_terms, check_lstm_step, check_rnn_forward


@pytest.mark.parametrize("name", ["check_rnn_forward", "check_bptt_terms", "check_lstm_step"])
def test_checkers_are_registered_under_their_names(name):
    assert name in CHECKS


# ---------------------------------------------------------------------------
# The RNN forward pass.
# ---------------------------------------------------------------------------


def rnn_loop(x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    h, outputs = h0, []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def rnn_via_torch(x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    layer = torch.nn.RNN(x.shape[-1], h0.shape[-1], batch_first=True).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"),
                               (weight_ih, weight_hh, bias_ih, bias_hh)):
            getattr(layer, name).copy_(value)
        return layer(x, h0[None])[0]


def rnn_einsum(x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    inputs = torch.einsum("btd,hd->bth", x, weight_ih) + bias_ih + bias_hh  # all steps at once
    h, outputs = h0, []
    for t in range(x.shape[1]):
        h = torch.tanh(inputs[:, t] + torch.einsum("bj,ij->bi", h, weight_hh))
        outputs.append(h)
    return torch.stack(outputs, dim=1).float()  # float32 is accepted


@pytest.mark.parametrize("answer", [rnn_loop, rnn_via_torch, rnn_einsum])
def test_rnn_forward_accepts_right_answers(answer, capsys):
    check_rnn_forward(answer)
    assert capsys.readouterr().out.startswith("✓ your RNN's hidden states agree with lib.rnn.RNN")


def _linear(x, h0, wi, wh, bi, bh):
    h, outputs = h0, []
    for t in range(x.shape[1]):
        h = x[:, t] @ wi.T + bi + h @ wh.T + bh
        outputs.append(h)
    return torch.stack(outputs, dim=1)


def _untransposed(x, h0, wi, wh, bi, bh):
    h, outputs = h0, []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ wi.T + bi + h @ wh + bh)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_linear, "apply tanh"),
        (lambda x, h0, *w: rnn_loop(x, torch.zeros_like(h0), *w), "start from the given h0"),
        (_untransposed, "weight_hh transposed"),
        (lambda x, h0, wi, wh, bi, bh: rnn_loop(x, h0, wi, wh, bi, torch.zeros_like(bh)), "add both biases"),
        (lambda x, h0, *w: torch.cat([h0[:, None], rnn_loop(x, h0, *w)], dim=1), "leave out h0"),
        (lambda *a: rnn_loop(*a)[:, -1], "not only the last"),
        (lambda *a: rnn_loop(*a).transpose(0, 1), "batch axis first"),
        (lambda *a: rnn_loop(*a) + 1e-4, "differs from lib.rnn's by up to 0.0001"),
        (lambda *a: (rnn_loop(*a), None), "must return a torch.Tensor; it returned tuple"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_rnn_forward_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_rnn_forward(answer)


# ---------------------------------------------------------------------------
# The terms of backpropagation through time.
# ---------------------------------------------------------------------------


def _states(x, h0, weight_ih, weight_hh, bias):
    """h_0 .. h_T of the tanh RNN, columns."""
    states = [h0]
    for x_t in x:
        states.append(torch.tanh(weight_ih @ x_t + weight_hh @ states[-1] + bias))
    return states


def bptt_backward(x, h0, weight_ih, weight_hh, bias, g, slope=True, transpose=True, state_after=False):
    """The vector δ_k = ∂L/∂a_k carried back one step at a time; the keywords give slips."""
    states = _states(x, h0, weight_ih, weight_hh, bias)
    back = weight_hh.T if transpose else weight_hh
    delta = (1 - states[-1] ** 2) * g if slope else g
    terms = []
    for k in range(len(x), 0, -1):
        terms.append(torch.outer(delta, states[k] if state_after else states[k - 1]))
        delta = back @ delta * ((1 - states[k - 1] ** 2) if slope else 1)
    return torch.stack(terms[::-1])


def bptt_per_step_copies(x, h0, weight_ih, weight_hh, bias, g):
    """Autograd with a copy of W_hh per step: the gradient of copy k is step k's term."""
    copies = [weight_hh.clone().requires_grad_() for _ in x]
    h = h0
    for x_t, w in zip(x, copies):
        h = torch.tanh(weight_ih @ x_t + w @ h + bias)
    return torch.stack(torch.autograd.grad(h @ g, copies))


def bptt_by_jacobian_products(x, h0, weight_ih, weight_hh, bias, g):
    """For each k on its own, in float32: g^T ∂h_T/∂h_k from the product of one-step Jacobians (the
    latest on the left), then ∂⁺h_k/∂W_hh[i, j] = (1 - h_k[i]²) h_(k-1)[j]."""
    states = [s.float() for s in _states(x, h0, weight_ih, weight_hh, bias)]
    w, g = weight_hh.float(), g.float()
    terms = []
    for k in range(1, len(x) + 1):
        product = torch.eye(len(g))
        for t in range(k + 1, len(x) + 1):
            product = torch.diag(1 - states[t] ** 2) @ w @ product  # J_t on the left: ∂h_t/∂h_k
        upstream = g @ product  # (H,): ∂L/∂h_k
        terms.append(torch.outer(upstream * (1 - states[k] ** 2), states[k - 1]))
    return torch.stack(terms)


@pytest.mark.parametrize("answer", [bptt_backward, bptt_per_step_copies, bptt_by_jacobian_products])
def test_bptt_terms_accepts_right_answers(answer, capsys):
    check_bptt_terms(answer)
    assert capsys.readouterr().out.startswith("✓ your BPTT terms agree with lib.rnn.bptt_terms")


def bptt_lagged_slope(x, h0, weight_ih, weight_hh, bias, g):
    """The slip of taking the slope of the state a step reads, 1 - h_(k-1)², for step k."""
    states = _states(x, h0, weight_ih, weight_hh, bias)
    delta = (1 - states[-2] ** 2) * g
    terms = []
    for k in range(len(x), 0, -1):
        terms.append(torch.outer(delta, states[k - 1]))
        if k > 1:
            delta = (weight_hh.T @ delta) * (1 - states[k - 2] ** 2)
    return torch.stack(terms[::-1])


def bptt_slope_at_the_end_only(x, h0, weight_ih, weight_hh, bias, g):
    """The slip of multiplying by tanh' at step T only: δ_(k-1) = W_hhᵀ δ_k."""
    states = _states(x, h0, weight_ih, weight_hh, bias)
    delta, terms = (1 - states[-1] ** 2) * g, []
    for k in range(len(x), 0, -1):
        terms.append(torch.outer(delta, states[k - 1]))
        delta = weight_hh.T @ delta
    return torch.stack(terms[::-1])


def bptt_without_the_first_slope(x, h0, weight_ih, weight_hh, bias, g):
    """The slip of starting from δ_T = g: the slope of step T left out, every other slope kept."""
    states = _states(x, h0, weight_ih, weight_hh, bias)
    delta, terms = g, []
    for k in range(len(x), 0, -1):
        terms.append(torch.outer(delta, states[k - 1]))
        delta = (weight_hh.T @ delta) * (1 - states[k - 1] ** 2)
    return torch.stack(terms[::-1])


def bptt_terms_of_dl_dh(x, h0, weight_ih, weight_hh, bias, g):
    """The slip of pairing ∂L/∂h_k with h_(k-1): the diag(1 - h_k²) of ∂⁺h_k/∂W_hh forgotten (the
    vector carried back is right)."""
    states = _states(x, h0, weight_ih, weight_hh, bias)
    upstream, terms = g, []  # ∂L/∂h_k
    for k in range(len(x), 0, -1):
        terms.append(torch.outer(upstream, states[k - 1]))
        upstream = weight_hh.T @ ((1 - states[k] ** 2) * upstream)
    return torch.stack(terms[::-1])


def bptt_slope_of_the_step_left(x, h0, weight_ih, weight_hh, bias, g):
    """The slip δ_(k-1) = (1 - h_k²) ⊙ W_hhᵀ δ_k: going back with the slope of the step just left."""
    states = _states(x, h0, weight_ih, weight_hh, bias)
    delta, terms = (1 - states[-1] ** 2) * g, []
    for k in range(len(x), 0, -1):
        terms.append(torch.outer(delta, states[k - 1]))
        delta = (1 - states[k] ** 2) * (weight_hh.T @ delta)
    return torch.stack(terms[::-1])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda *a: bptt_backward(*a, state_after=True), "multiplies the state it reads, h_\\(k-1\\)"),
        (lambda *a: bptt_backward(*a, slope=False), "you left out tanh'"),
        (bptt_slope_at_the_end_only, "crosses the tanh of step k-1 too"),
        (bptt_lagged_slope, "not 1 - h_\\(k-1\\)² of the state it reads"),
        (lambda *a: bptt_backward(*a, transpose=False), "W_hh transposed"),
        (lambda *a: bptt_backward(*a).transpose(1, 2), "yours are transposed"),
        (lambda *a: bptt_backward(*a).flip(0), "entry 0 is step k = 1"),
        (lambda x, h0, *rest: bptt_backward(x, torch.zeros_like(h0), *rest), "start from the given h0"),
        (lambda *a: bptt_backward(*a).cumsum(0), "running sums"),
        (lambda *a: bptt_backward(*a)[:, 0], "the shape of W_hh"),
        (bptt_without_the_first_slope, "started from δ_T = g"),
        (bptt_terms_of_dl_dh, "forgot it"),
        (bptt_slope_of_the_step_left, "the slope of the step you reach"),
        (lambda *a: bptt_backward(*a).roll(1, dims=0), "split differently between the steps"),
        (lambda *a: bptt_backward(*a) + 1e-4, "differ from lib.rnn's by up to 0.0001"),
    ],
)
def test_bptt_terms_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_bptt_terms(answer)


def test_the_sum_of_the_terms_is_named_as_a_sum_on_every_seed():
    """Returning Σ_k term k, of the shape of W_hh, is told so, on 200 seeded draws (T never equals H, and
    the shape hint tries the sum first)."""
    for seed in range(200):
        cases = check_bptt_terms.make_cases(torch.Generator().manual_seed(seed))
        with pytest.raises(CheckFailed, match="return the term of every step, not their sum"):
            check_bptt_terms.judge(cases, [bptt_backward(*case).sum(0) for case in cases])


# ---------------------------------------------------------------------------
# One LSTM step.
# ---------------------------------------------------------------------------


def lstm_step(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh, output=lambda o, c: o * torch.tanh(c)):
    i, f, g, o = (x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=-1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.stack([output(torch.sigmoid(o), c), c])


def lstm_via_torch(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    cell = torch.nn.LSTMCell(x.shape[1], h.shape[1]).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"),
                               (weight_ih, weight_hh, bias_ih, bias_hh)):
            getattr(cell, name).copy_(value)
        return torch.stack(cell(x, (h, c)))


@pytest.mark.parametrize("answer", [lstm_step, lstm_via_torch])
def test_lstm_step_accepts_right_answers(answer, capsys):
    check_lstm_step(answer)
    assert capsys.readouterr().out.startswith("✓ your LSTM step agrees with lib.rnn.LSTMCell")


def _reordered(order, candidate=torch.tanh):
    def step(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
        blocks = dict(zip(order, (x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh).chunk(4, dim=-1)))
        c = torch.sigmoid(blocks["f"]) * c + torch.sigmoid(blocks["i"]) * candidate(blocks["g"])
        return torch.stack([torch.sigmoid(blocks["o"]) * torch.tanh(c), c])
    return step


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda *a: lstm_step(*a, output=lambda o, c: o * c), "not the notes' o ⊙ c"),
        (lambda *a: lstm_step(*a).flip(0), "stack h first, then c"),
        (_reordered("ifog"), "PyTorch orders the row blocks i, f, g, o"),
        (_reordered("figo"), "the first block of rows is the input gate"),
        (_reordered("ifgo", candidate=torch.sigmoid), "the candidate g goes through tanh"),
        (lambda *a: lstm_step(*a)[0], "return torch.stack\\(\\[h, c\\]\\)"),
        (lambda *a: torch.cat(list(lstm_step(*a)), dim=-1), "on a new first axis"),
    ],
)
def test_lstm_step_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_lstm_step(answer)


# ---------------------------------------------------------------------------
# The grader's path: results saved and judged apart.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "answer"), [
    (check_rnn_forward, rnn_loop), (check_bptt_terms, bptt_backward),
    (check_lstm_step, lstm_step),
])
def test_results_survive_torch_save_and_the_judge_runs_apart(check, answer, tmp_path):
    cases = check.make_cases(torch.Generator().manual_seed(0))
    torch.save(cases, tmp_path / "cases.pt")
    cases = torch.load(tmp_path / "cases.pt", weights_only=True)
    torch.save([answer(*args) for args in cases], tmp_path / "results.pt")
    check.judge(cases, torch.load(tmp_path / "results.pt", weights_only=True))
    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check.judge(cases, ["NotImplementedError: write it"] * len(cases))


# ---------------------------------------------------------------------------
# Which steps a truncated gradient reaches (chapter 3's experiment exercise).
# ---------------------------------------------------------------------------


def test_gradient_reach_reference_is_what_autograd_finds_in_truncated_bptt_loss():
    from lib.char_lm import CharLM, truncated_bptt_loss
    from lib.checks import check_gradient_reach

    length, k = 8, 3
    torch.manual_seed(0)
    # The inputs are the positions themselves, so row s of the embedding is the input at step s.
    model = CharLM(vocab_size=length, hidden_size=4, embedding_dim=3, kind="rnn").double()
    positions = torch.arange(length)[None]  # (1, L)
    reach = torch.zeros(length, length, dtype=torch.long)
    for t in range(length):
        targets = torch.full((1, length), -100)
        targets[0, t] = 0  # the loss at step t alone
        model.zero_grad()
        truncated_bptt_loss(model, positions, targets, k).backward()
        reach[t] = (model.embedding.weight.grad[:length].abs().sum(dim=1) > 0).long()
    assert torch.equal(reach, check_gradient_reach.reference(length, k))


def test_check_gradient_reach_passes_right_answers_and_names_slips(capsys):
    from lib.checks import check_gradient_reach

    def by_loops(length, k):
        reach = torch.zeros(length, length, dtype=torch.bool)
        for t in range(length):
            reach[t, (t // k) * k : t + 1] = True
        return reach

    def by_chunks(length, k):
        steps = torch.arange(length)
        return ((steps[:, None] // k == steps // k) & (steps <= steps[:, None])).float()

    check_gradient_reach(by_loops)
    check_gradient_reach(by_chunks)
    assert capsys.readouterr().out.count("✓") == 2

    def full(length, k):
        return torch.ones(length, length).tril()

    def window(length, k):
        steps = torch.arange(length)
        return ((steps[:, None] - steps < k) & (steps <= steps[:, None])).long()

    for wrong, message in ((full, "that is full BPTT"), (window, "sliding window"),
                           (lambda length, k: by_loops(length, k).T, "rows are losses"),
                           (lambda length, k: by_loops(length, k) & ~torch.eye(length, dtype=torch.bool),
                            "keep the diagonal")):
        with pytest.raises(CheckFailed, match=message):
            check_gradient_reach(wrong)


def test_a_wrong_reach_matrix_is_explained_in_whole_entries_without_a_tolerance():
    """A 0/1 matrix that matches no slip is told which entry is wrong and why, not "a int64 result may
    differ by atol ..."."""
    from lib.checks import check_gradient_reach

    one_more = lambda length, k: reach_by_loops(length, k).long().index_put_(  # noqa: E731
        (torch.tensor([length - 1]), torch.tensor([0])), torch.tensor(1))
    one_less = lambda length, k: reach_by_loops(length, k).long().index_put_(  # noqa: E731
        (torch.tensor([length - 1]), torch.tensor([length - 2])), torch.tensor(0))
    with pytest.raises(CheckFailed, match=r"differs from the book's in 1 of its \d+ entries; the first is "
                                          r"R\[\d+, 0\] = 1: it must be 0: the chunk of step \d+ starts at step"):
        check_gradient_reach(one_more)
    with pytest.raises(CheckFailed, match=r"R\[\d+, \d+\] = 0: it must be 1: steps \d+ and \d+ lie in the chunk"):
        check_gradient_reach(one_less)
    with pytest.raises(CheckFailed) as failure:
        check_gradient_reach(one_more)
    assert "atol" not in str(failure.value) and "rtol" not in str(failure.value)


# ---------------------------------------------------------------------------
# The fairness table (tests/test_exercise_fairness.py): for each checker an independent right
# answer, written from the exercise's statement by another method, and the plausible slips.
# ---------------------------------------------------------------------------


def rnn_unit_by_unit(x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """Each hidden unit's pre-activation as an explicit sum over its inputs, in plain Python loops."""
    batch, steps, _ = x.shape
    hidden = weight_hh.shape[0]
    states = torch.zeros(batch, steps, hidden, dtype=torch.float64)
    for b in range(batch):
        h = h0[b].tolist()
        for t in range(steps):
            inputs = x[b, t].tolist()
            h = [math.tanh(sum(w * v for w, v in zip(weight_ih[i].tolist(), inputs))
                           + sum(w * v for w, v in zip(weight_hh[i].tolist(), h))
                           + bias_ih[i].item() + bias_hh[i].item())
                 for i in range(hidden)]
            states[b, t] = torch.tensor(h, dtype=torch.float64)
    return states


def reach_by_loops(length, k):
    reach = torch.zeros(length, length, dtype=torch.bool)
    for t in range(length):
        reach[t, (t // k) * k : t + 1] = True
    return reach


def reach_full(length, k):
    return torch.ones(length, length).tril()


def reach_window(length, k):
    steps = torch.arange(length)
    return ((steps[:, None] - steps < k) & (steps <= steps[:, None])).long()


def reach_not_causal(length, k):
    steps = torch.arange(length)
    return (steps[:, None] // k == steps // k).long()


def reach_without_diagonal(length, k):
    """The slip of reading "back-propagates to" as "to an earlier step": s < t, the diagonal left out."""
    return torch.tensor([[1 if (t // k) * k <= s < t else 0 for s in range(length)] for t in range(length)])


def lstm_by_slices(x, h, c, weight_ih, weight_hh, bias_ih, bias_hh):
    """Each gate from its own slice of rows (i, f, g, o in PyTorch's order), in float32."""
    H = h.shape[1]
    x, h, c = x.float(), h.float(), c.float()

    def gate(k):  # the pre-activation of block k
        rows = slice(k * H, (k + 1) * H)
        return (x @ weight_ih[rows].float().T + h @ weight_hh[rows].float().T
                + bias_ih[rows].float() + bias_hh[rows].float())

    i, f, g, o = torch.sigmoid(gate(0)), torch.sigmoid(gate(1)), torch.tanh(gate(2)), torch.sigmoid(gate(3))
    c_new = f * c + i * g
    return torch.stack([o * torch.tanh(c_new), c_new])


FAIRNESS = {
    "check_rnn_forward": {
        "right": [rnn_unit_by_unit, rnn_einsum],
        "wrong": [
            (_linear, "apply tanh"),
            (lambda x, h0, *w: rnn_loop(x, torch.zeros_like(h0), *w), "start from the given h0"),
            (_untransposed, "weight_hh transposed"),
            (lambda x, h0, wi, wh, bi, bh: rnn_loop(x, h0, wi, wh, bi, torch.zeros_like(bh)), "add both biases"),
        ],
    },
    "check_bptt_terms": {
        "right": [bptt_per_step_copies, bptt_by_jacobian_products],
        "wrong": [
            (lambda *a: bptt_backward(*a, state_after=True), "multiplies the state it reads, h_\\(k-1\\)"),
            (lambda *a: bptt_backward(*a, slope=False), "you left out tanh'"),
            (bptt_slope_at_the_end_only, "crosses the tanh of step k-1 too"),
            (lambda *a: bptt_backward(*a, transpose=False), "W_hh transposed"),
            (lambda *a: bptt_backward(*a).transpose(1, 2), "yours are transposed"),
            (lambda *a: bptt_backward(*a).flip(0), "entry 0 is step k = 1"),
            (bptt_lagged_slope, "not 1 - h_\\(k-1\\)² of the state it reads"),
            (lambda x, h0, *rest: bptt_backward(x, torch.zeros_like(h0), *rest), "start from the given h0"),
            (bptt_without_the_first_slope, "started from δ_T = g and left out the slope of step T"),
            (bptt_terms_of_dl_dh, "diag\\(1 - h_k²\\) of step k; you multiplied ∂L/∂h_k by h_\\(k-1\\)ᵀ"),
            (bptt_slope_of_the_step_left, "multiply by the slope of the step you reach"),
        ],
    },
    "check_gradient_reach": {
        "right": [reach_by_loops],
        "wrong": [
            (reach_full, "that is full BPTT"),
            (reach_window, "sliding window"),
            (lambda length, k: reach_by_loops(length, k).T, "rows are losses"),
            (reach_not_causal, "cannot reach an input after t"),
            (reach_without_diagonal, "reaches the input at step t itself.*keep the diagonal"),
        ],
    },
    "check_lstm_step": {
        "right": [lstm_by_slices],
        "wrong": [
            (lambda *a: lstm_step(*a, output=lambda o, c: o * c), "not the notes' o ⊙ c"),
            (_reordered("ifog"), "PyTorch orders the row blocks i, f, g, o"),
            (_reordered("figo"), "the first block of rows is the input gate"),
            (_reordered("ifgo", candidate=torch.sigmoid), "the candidate g goes through tanh"),
        ],
    },
}
