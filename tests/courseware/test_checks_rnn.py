"""The checkers of chapter 3: right answers pass however they are written; wrong ones fail with a
message that says what is wrong. (Chapter 4's are tested in tests/courseware/test_checks_gating.py.)"""

import pytest
import torch

from courseware.checks import CHECKS, CheckFailed, check_bptt_terms, check_rnn_last_state
from courseware.checks.rnn import last_state_by_packing, last_state_cases


@pytest.mark.parametrize("name", ["check_rnn_last_state", "check_bptt_terms"])
def test_checkers_are_registered_under_their_names(name):
    assert name in CHECKS


# ---------------------------------------------------------------------------
# The last valid state of each sequence of a padded batch.
# ---------------------------------------------------------------------------


def states_of_every_step(x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """h_0 .. h_T, padding read like the rest: (B, T + 1, H)."""
    states = [h0]
    for t in range(x.shape[1]):
        states.append(torch.tanh(x[:, t] @ weight_ih.T + bias_ih + states[-1] @ weight_hh.T + bias_hh))
    return torch.stack(states, dim=1)


def last_state_frozen(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """The master's method: a sequence that has ended keeps its state."""
    h = h0
    for t in range(x.shape[1]):
        h_next = torch.tanh(x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh)
        h = torch.where((t < lengths)[:, None], h_next, h)
    return h


def last_state_gathered(x, lengths, h0, *weights):
    """Run every step, padding included, then pick h_L: the state at step L does not depend on later
    inputs."""
    return states_of_every_step(x, h0, *weights)[torch.arange(len(lengths)), lengths]


def last_state_one_by_one(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """Each sequence alone, cut to its length, in float32, each unit's sum written out."""
    rows = []
    for b, length in enumerate(lengths.tolist()):
        h = h0[b].float()
        for t in range(length):
            h = torch.stack([torch.tanh((weight_ih[i].float() * x[b, t].float()).sum() + bias_ih[i].float()
                                        + (weight_hh[i].float() * h).sum() + bias_hh[i].float())
                             for i in range(len(h))])
        rows.append(h)
    return torch.stack(rows)


def last_state_sorted_by_length(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """Packing's own method by hand: sort the sequences by length, longest first, shrink the batch as
    they end, then undo the sort."""
    order = torch.argsort(lengths, descending=True, stable=True)
    xs, hs, ls = x[order], h0[order].clone(), lengths[order]
    for t in range(int(ls[0])):
        alive = int((ls > t).sum())  # the first `alive` sequences have step t
        hs[:alive] = torch.tanh(xs[:alive, t] @ weight_ih.T + bias_ih + hs[:alive] @ weight_hh.T + bias_hh)
    result = torch.empty_like(hs)
    result[order] = hs
    return result


def last_state_ignoring_lengths(x, lengths, h0, *weights):
    return states_of_every_step(x, h0, *weights)[:, -1]


def last_state_one_too_far(x, lengths, h0, *weights):
    """Indexes the states h_1 .. h_T at L (h_(L+1)): raises IndexError where L = T."""
    return states_of_every_step(x, h0, *weights)[:, 1:][torch.arange(len(lengths)), lengths]


def last_state_one_short(x, lengths, h0, *weights):
    """Indexes the states h_1 .. h_T at L - 1 but keeps h_0 in front: h_(L-1)."""
    return states_of_every_step(x, h0, *weights)[torch.arange(len(lengths)), lengths - 1]


def last_state_of_the_padded_output(x, lengths, h0, *weights):
    """The last column after zeroing the padded steps, as pad_packed_sequence returns the outputs."""
    states = states_of_every_step(x, h0, *weights)[:, 1:]
    valid = torch.arange(x.shape[1])[None, :] < lengths[:, None]  # (B, T)
    return (states * valid[:, :, None])[:, -1]


def last_state_without_tanh(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """Every step run, padding included, with no tanh, then h_L gathered."""
    states = [h0]
    for t in range(x.shape[1]):
        states.append(x[:, t] @ weight_ih.T + bias_ih + states[-1] @ weight_hh.T + bias_hh)
    return torch.stack(states, dim=1)[torch.arange(len(lengths)), lengths]


def last_state_untransposed(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """The frozen loop with h @ weight_hh, which runs because W_hh is square."""
    h = h0
    for t in range(x.shape[1]):
        h_next = torch.tanh(x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh + bias_hh)
        h = torch.where((t < lengths)[:, None], h_next, h)
    return h


def last_state_one_bias(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """bias_hh left out (the notes have one bias per layer)."""
    return last_state_gathered(x, lengths, h0, weight_ih, weight_hh, bias_ih, torch.zeros_like(bias_hh))


def last_state_of_zeroed_padding(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    """The padding set to zero, then all T steps run: a zero input is taken to change nothing."""
    valid = (torch.arange(x.shape[1])[None, :] < lengths[:, None]).double()  # (B, T)
    return states_of_every_step(x * valid[:, :, None], h0, weight_ih, weight_hh, bias_ih, bias_hh)[:, -1]


def last_state_left_sorted(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh, descending=True):
    """Packing's method by hand, the sort never undone: the rows come out in order of length."""
    order = torch.argsort(lengths, descending=descending)
    xs, hs, ls = x[order], h0[order], lengths[order]
    for t in range(x.shape[1]):
        h_next = torch.tanh(xs[:, t] @ weight_ih.T + bias_ih + hs @ weight_hh.T + bias_hh)
        hs = torch.where((t < ls)[:, None], h_next, hs)
    return hs


def test_the_reference_is_the_state_at_each_sequences_length_and_ignores_the_padding():
    for case in last_state_cases(torch.Generator().manual_seed(0)):
        x, lengths, h0, *weights = case
        expected = last_state_by_packing(*case)
        assert torch.allclose(last_state_gathered(*case), expected, atol=1e-12, rtol=0)
        padding = torch.arange(x.shape[1])[None, :, None] >= lengths[:, None, None]
        repadded = torch.where(padding, 100 * torch.randn_like(x), x)
        assert torch.allclose(last_state_by_packing(repadded, lengths, h0, *weights), expected, atol=1e-12, rtol=0)


def test_the_cases_hold_lengths_below_t_first_and_rows_of_length_1_and_t():
    for seed in range(20):
        cases = last_state_cases(torch.Generator().manual_seed(seed))
        for index, (x, lengths, *rest) in enumerate(cases):
            assert lengths.dtype == torch.int64 and 1 <= int(lengths.min()) and int(lengths.max()) <= x.shape[1]
            if index % 3 == 0:
                assert int(lengths.max()) < x.shape[1]
            if index % 3 == 1:
                assert int(lengths.min()) == 1 and int(lengths.max()) == x.shape[1]


def test_the_reference_leaves_the_callers_random_state_alone():
    state = torch.get_rng_state()
    last_state_by_packing(*last_state_cases(torch.Generator().manual_seed(0))[0])
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("answer", [last_state_frozen, last_state_gathered, last_state_one_by_one,
                                    last_state_sorted_by_length])
def test_rnn_last_state_accepts_right_answers(answer, capsys):
    check_rnn_last_state(answer)
    assert capsys.readouterr().out.startswith("✓ your last states agree with torch.nn.RNN")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (last_state_ignoring_lengths, "the state after all T steps for every sequence"),
        (last_state_one_too_far, "one step too far"),
        (last_state_one_short, "one step short"),
        (last_state_of_the_padded_output, "your state is 0 for every sequence shorter than T"),
        (lambda x, lengths, h0, *w: last_state_frozen(x, lengths, torch.zeros_like(h0), *w),
         "start from the given h0"),
        (lambda x, lengths, h0, *w: states_of_every_step(x, h0, *w)[:, 1:], "not the state at every step"),
        (lambda x, lengths, h0, *w: last_state_frozen(x, lengths, h0, *w)[None], "leave out the"),
        (lambda *a: last_state_frozen(*a).T, "one row per sequence"),
        (lambda *a: last_state_frozen(*a) + 1e-4, "differ from torch.nn.RNN's by up to 0.0001"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
        (last_state_without_tanh, "apply tanh to the pre-activation"),
        (last_state_untransposed, "multiply h by weight_hh transposed"),
        (last_state_one_bias, "add both biases"),
        (lambda x, lengths, h0, wi, wh, bi, bh: last_state_gathered(x, lengths, h0, wi, wh, torch.zeros_like(bi), bh),
         "add both biases"),
        (last_state_of_zeroed_padding, "a zero input still changes the state"),
        (last_state_left_sorted, "your rows are sorted by length: undo the sort"),
        (lambda *a: last_state_left_sorted(*a, descending=False), "your rows are sorted by length: undo the sort"),
        (lambda *a: last_state_frozen(*a).roll(1, dims=0), "the right states in another order"),
    ],
)
def test_rnn_last_state_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_rnn_last_state(answer)


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
    assert capsys.readouterr().out.startswith("✓ your BPTT terms agree with lib.part2_recurrent.rnn.bptt_terms")


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
        (lambda *a: bptt_backward(*a) + 1e-4, "differ from lib.part2_recurrent.rnn's by up to 0.0001"),
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
# The grader's path: results saved and judged apart.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("check", "answer"), [
    (check_rnn_last_state, last_state_frozen), (check_bptt_terms, bptt_backward),
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
    from lib.part2_recurrent.char_lm import CharLM, truncated_bptt_loss
    from courseware.checks import check_gradient_reach

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
    from courseware.checks import check_gradient_reach

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
    from courseware.checks import check_gradient_reach

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
# Which steps the gradient of BPTT(k1, k2) reaches (chapter 3's overlapping windows).
# ---------------------------------------------------------------------------


def test_window_reach_reference_is_what_autograd_finds_in_truncated_bptt_loss():
    from lib.part2_recurrent.char_lm import CharLM, truncated_bptt_loss
    from courseware.checks import check_window_reach

    for length, k1, k2 in ((11, 3, 5), (10, 4, 8), (7, 2, 3)):
        torch.manual_seed(0)
        model = CharLM(vocab_size=length, hidden_size=4, embedding_dim=3, kind="rnn").double()
        positions = torch.arange(length)[None]  # (1, L): row s of the embedding is the input at step s
        reach = torch.zeros(length, length, dtype=torch.long)
        for t in range(length):
            targets = torch.full((1, length), -100)
            targets[0, t] = 0  # the loss at step t alone
            model.zero_grad()
            truncated_bptt_loss(model, positions, targets, k1, k2=k2).backward()
            reach[t] = (model.embedding.weight.grad[:length].abs().sum(dim=1) > 0).long()
        assert torch.equal(reach, check_window_reach.reference(length, k1, k2)), (length, k1, k2)


def window_reach_by_loops(length, k1, k2):
    """From the statement, step by step: walk back from t to the first step of its chunk, then k2 - k1 more
    steps, stopping at 0."""
    reach = torch.zeros(length, length, dtype=torch.bool)
    for t in range(length):
        first = t - t % k1 - (k2 - k1)
        for s in range(max(first, 0), t + 1):
            reach[t, s] = True
    return reach


def window_reach_by_chunks(length, k1, k2):
    """Chunk by chunk: every loss of the chunk [c, c + k1) reaches every input from its window's first step
    up to itself."""
    reach = torch.zeros(length, length, dtype=torch.int64)
    for c in range(0, length, k1):
        begin = max(0, c - (k2 - k1))
        for t in range(c, min(c + k1, length)):
            reach[t, begin : t + 1] = 1
    return reach


def window_reach_plain(length, k1, k2):
    return reach_by_loops(length, k1)


def window_reach_sliding(length, k1, k2):
    steps = torch.arange(length)
    return ((steps[:, None] - steps < k2) & (steps <= steps[:, None])).long()


def window_reach_from_the_end(length, k1, k2):
    reach = torch.zeros(length, length, dtype=torch.bool)
    for c in range(0, length, k1):
        end = min(c + k1, length)
        for t in range(c, end):
            reach[t, max(0, end - k2) : t + 1] = True
    return reach


def window_reach_k2_before(length, k1, k2):
    return window_reach_by_loops(length, k1, k2 + k1)


def window_reach_one_late(length, k1, k2):
    """Off by one: the window starts at c - (k2 - k1) + 1, k2 - 1 steps in all."""
    reach = torch.zeros(length, length, dtype=torch.bool)
    for t in range(length):
        reach[t, max(0, t - t % k1 - (k2 - k1) + 1) : t + 1] = True
    return reach


def window_reach_one_early(length, k1, k2):
    """Off by one the other way: k2 + 1 steps, the window starting at c - (k2 - k1) - 1."""
    return window_reach_by_loops(length, k1, k2 + 1)


def test_check_window_reach_passes_right_answers_and_names_slips(capsys):
    from courseware.checks import check_window_reach

    check_window_reach(window_reach_by_loops)
    check_window_reach(window_reach_by_chunks)
    assert capsys.readouterr().out.count("✓") == 2
    for wrong, message in FAIRNESS["check_window_reach"]["wrong"]:
        with pytest.raises(CheckFailed, match=message):
            check_window_reach(wrong)


def test_a_wrong_window_reach_is_explained_in_whole_entries():
    from courseware.checks import check_window_reach

    one_less = lambda length, k1, k2: window_reach_by_loops(length, k1, k2).long().index_put_(  # noqa: E731
        (torch.tensor([length - 1]), torch.tensor([length - 2])), torch.tensor(0))
    with pytest.raises(CheckFailed, match=r"in 1 of its \d+ entries; the first is R\[\d+, \d+\] = 0: it must be 1: "
                                          r"the chunk of step \d+ starts at c = \d+, its window at max\(0, c - \(k2 - k1\)\) = "):
        check_window_reach(one_less)
    # in the first chunk the window is clamped at step 0: the message says so, not "k2 - k1 steps earlier"
    first_chunk = lambda length, k1, k2: window_reach_by_loops(length, k1, k2).long().index_put_(  # noqa: E731
        (torch.tensor([1]), torch.tensor([0])), torch.tensor(0))
    with pytest.raises(CheckFailed, match=r"R\[1, 0\] = 0: it must be 1: the chunk of step 1 starts at c = 0, "
                                          r"its window at max\(0, c - \(k2 - k1\)\) = max\(0, 0 - \d\) = 0, "
                                          r"and 0 <= 0 <= 1$") as failure:
        check_window_reach(first_chunk)
    assert "earlier" not in str(failure.value)
    future = lambda length, k1, k2: window_reach_by_loops(length, k1, k2).long().index_put_(  # noqa: E731
        (torch.tensor([0]), torch.tensor([1])), torch.tensor(1))
    with pytest.raises(CheckFailed, match=r"R\[0, 1\] = 1: it must be 0: the input at step 1 comes after"):
        check_window_reach(future)


# ---------------------------------------------------------------------------
# The fairness table (tests/courseware/test_exercise_fairness.py): for each checker an independent right
# answer, written from the exercise's statement by another method, and the plausible slips.
# ---------------------------------------------------------------------------


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


FAIRNESS = {
    "check_rnn_last_state": {
        "right": [last_state_gathered, last_state_one_by_one, last_state_sorted_by_length],
        "wrong": [
            (last_state_ignoring_lengths, "the state after all T steps for every sequence"),
            (last_state_one_too_far, "one step too far: .* yours is h_\\(L\\+1\\)"),
            (last_state_one_short, "one step short: .* yours is h_\\(L-1\\)"),
            (last_state_of_the_padded_output, "0 for every sequence shorter than T: that is the last column"),
            (lambda x, lengths, h0, *w: last_state_gathered(x, lengths, torch.zeros_like(h0), *w),
             "start from the given h0, not from zeros"),
            (last_state_without_tanh, "apply tanh to the pre-activation"),
            (last_state_untransposed, "multiply h by weight_hh transposed: h @ weight_hh.T"),
            (last_state_one_bias, "add both biases, bias_ih and bias_hh"),
            (last_state_of_zeroed_padding, "a zero input still changes the state.*the steps after L must leave it alone"),
            (last_state_left_sorted, "your rows are sorted by length: undo the sort"),
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
    "check_window_reach": {
        "right": [window_reach_by_loops, window_reach_by_chunks],
        "wrong": [
            (window_reach_plain, "that is plain truncation in chunks of k1"),
            (window_reach_sliding, "sliding window of the last k2 steps"),
            (window_reach_from_the_end, "the last chunk is shorter than k1"),
            (window_reach_k2_before, "starts k2 - k1 steps before the chunk, not k2"),
            (window_reach_one_late, r"one step late \(off by one\).*holds k2 steps, not k2 - 1"),
            (window_reach_one_early, r"one step early \(off by one\).*holds k2 steps, not k2 \+ 1"),
            (lambda length, k1, k2: window_reach_by_loops(length, k1, k2).T, "rows are losses"),
        ],
    },
}
