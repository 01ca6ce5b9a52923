"""The checkers of chapter 6: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch
import torch.nn.functional as F

from lib.checks import CHECKS, CheckFailed, check_add_delta, check_nce_loss


def test_the_checks_are_registered():
    assert CHECKS["check_add_delta"] is check_add_delta
    assert CHECKS["check_nce_loss"] is check_nce_loss


# ---- add-delta -------------------------------------------------------------------------------------
def add_delta_vectorised(counts, delta):
    return (counts + delta) / (counts.sum(-1, keepdim=True) + delta * counts.shape[1])


def add_delta_with_loops(counts, delta):
    out = torch.empty_like(counts)
    for h in range(counts.shape[0]):
        total = float(counts[h].sum())
        for w in range(counts.shape[1]):
            out[h, w] = (float(counts[h, w]) + delta) / (total + delta * counts.shape[1])
    return out


def add_delta_in_logs(counts, delta):
    logs = torch.log(counts + delta) - torch.log(counts.sum(-1, keepdim=True) + delta * counts.shape[1])
    return logs.exp().float()


@pytest.mark.parametrize("answer", [add_delta_vectorised, add_delta_with_loops, add_delta_in_logs])
def test_add_delta_accepts_right_answers_written_differently(answer, capsys):
    check_add_delta(answer)
    assert capsys.readouterr().out.startswith("✓ add-delta probabilities agree with lib.ngram.add_delta_log_prob")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda c, d: (c + d) / (c.sum(-1, keepdim=True) + d), "sums to .*, not 1: the denominator"),
        (lambda c, d: c / c.sum(-1, keepdim=True), "contains NaN|unsmoothed"),
        (lambda c, d: c / c.sum(-1, keepdim=True).clamp(min=1), "unsmoothed relative frequencies"),
        (lambda c, d: add_delta_vectorised(c, d)[:, :-1], "has shape"),
        (lambda c, d: add_delta_vectorised(c.T, d).T, "differ from|sums to|has shape"),
        (lambda c, d: add_delta_vectorised(c, d).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda c, d: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_add_delta_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_add_delta(answer)


def test_add_delta_judge_on_a_case_worked_by_hand():
    counts = torch.tensor([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    judge = check_add_delta.judge
    # (2 + 1) / (3 + 3) = 1/2, (0 + 1) / 6, (1 + 1) / 6; the unseen context is uniform.
    judge([(counts, 1.0)], [torch.tensor([[0.5, 1 / 6, 1 / 3], [1 / 3, 1 / 3, 1 / 3]])])
    with pytest.raises(CheckFailed, match="row 0 sums to 1.5000"):
        judge([(counts, 1.0)], [torch.tensor([[0.75, 0.25, 0.5], [1 / 3, 1 / 3, 1 / 3]])])


# ---- NCE ---------------------------------------------------------------------------------------------
def nce_with_bce(data, noise, data_q, noise_q):
    k = noise.shape[1]
    logits = torch.cat([data - math.log(k) - data_q, (noise - math.log(k) - noise_q).flatten()])
    labels = torch.cat([torch.ones_like(data), torch.zeros(noise.numel(), dtype=data.dtype)])
    return F.binary_cross_entropy_with_logits(logits, labels)


def nce_with_probabilities(data, noise, data_q, noise_q):
    k = noise.shape[1]
    p_data = data.exp() / (data.exp() + k * data_q.exp())
    p_noise = noise.exp() / (noise.exp() + k * noise_q.exp())
    return -(p_data.log().sum() + (1 - p_noise).log().sum()) / (data.numel() + noise.numel())


@pytest.mark.parametrize("answer", [nce_with_bce, nce_with_probabilities])
def test_nce_accepts_right_answers_written_differently(answer, capsys):
    check_nce_loss(answer)
    assert capsys.readouterr().out.startswith("✓ the NCE loss agrees with lib.softmax_approx.nce_loss")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        # Shifting the scores by log K cancels the log K inside: the logits become s - log q.
        (lambda d, n, dq, nq: nce_with_bce(d + math.log(n.shape[1]), n + math.log(n.shape[1]), dq, nq),
         "miss the log K"),
        (lambda d, n, dq, nq: nce_with_bce(d, n, dq, nq) * (n.numel() + d.numel()) / d.numel(), "divided by B only"),
        (lambda d, n, dq, nq: -nce_with_bce(d, n, dq, nq), "wrong sign"),
        (lambda d, n, dq, nq: nce_with_bce(d, n, dq, nq).expand(2), "return one number"),
        (lambda d, n, dq, nq: nce_with_bce(n.mean(1), n, dq, nq), "your loss is .*; expected"),
        (lambda d, n, dq, nq: float(nce_with_bce(d, n, dq, nq)), "must return a torch.Tensor; it returned float"),
    ],
)
def test_nce_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_nce_loss(answer)


def test_nce_judge_on_a_case_worked_by_hand():
    # One data word with exp(s) = 1/2 and two noise words (exp(s) = 1/2, 1/6), q = 1/4: the loss is
    # -(log 1/2 + log 1/2 + log 3/4) / 3 = 0.5580.
    q = math.log(0.25)
    case = (torch.tensor([math.log(0.5)], dtype=torch.float64),
            torch.tensor([[math.log(0.5), math.log(1 / 6)]], dtype=torch.float64),
            torch.tensor([q], dtype=torch.float64), torch.tensor([[q, q]], dtype=torch.float64))
    expected = -(math.log(0.5) + math.log(0.5) + math.log(0.75)) / 3
    check_nce_loss.judge([case], [torch.tensor(expected)])
    with pytest.raises(CheckFailed, match="expected 0.5579"):
        check_nce_loss.judge([case], [torch.tensor(0.6)])


# ---- the best constant baseline (REINFORCE) ----------------------------------------------------------
def variance_of_estimate(scores, reward, b):
    """Total variance of the one-sample REINFORCE estimate with baseline b, summed exactly over the words,
    each word's estimate taken from lib.reinforce.reinforce_loss by autograd."""
    from lib.reinforce import reinforce_loss

    p = torch.softmax(scores, 0)
    estimates = []
    for word in range(len(scores)):
        logits = scores.clone().requires_grad_()
        loss = reinforce_loss(torch.log_softmax(logits, 0)[word:word + 1], reward[word:word + 1], float(b))
        estimates.append(-torch.autograd.grad(loss, logits)[0])
    estimates = torch.stack(estimates)  # (V, V)
    mean = p @ estimates
    return float((p * ((estimates - mean) ** 2).sum(1)).sum())


def baseline_by_grid(scores, reward):
    candidates = torch.linspace(float(reward.min()), float(reward.max()), 2001, dtype=torch.float64)
    p = torch.softmax(scores, 0)
    grads = torch.eye(len(p), dtype=p.dtype) - p  # (V, V): grad of log p(x) for each word x
    exact = (p * reward) @ grads
    variances = torch.stack([(p * ((((reward - b)[:, None] * grads) - exact) ** 2).sum(1)).sum()
                             for b in candidates])
    return candidates[variances.argmin()]


def test_the_reference_baseline_minimises_the_variance_of_reinforce():
    from lib.checks.lm import _best_baseline, baseline_cases

    for scores, reward in baseline_cases(torch.Generator().manual_seed(0), trials=4):
        best = float(_best_baseline(scores, reward))
        at_best = variance_of_estimate(scores, reward, best)
        for step in (-0.05, -0.005, 0.005, 0.05):
            assert variance_of_estimate(scores, reward, best + step) > at_best
        mean_reward = float((torch.softmax(scores, 0) * reward).sum())
        assert at_best <= variance_of_estimate(scores, reward, mean_reward)


def test_best_baseline_accepts_the_grid_experiment_and_the_formula(capsys):
    from lib.checks import check_best_baseline

    check_best_baseline(baseline_by_grid)
    check_best_baseline(lambda s, r: (lambda p, n: (p * n * r).sum() / (p * n).sum())(
        torch.softmax(s, 0), 1 - 2 * torch.softmax(s, 0) + (torch.softmax(s, 0) ** 2).sum()))
    assert capsys.readouterr().out.count("✓ the baseline agrees") == 2


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s, r: (torch.softmax(s, 0) * r).sum(), "mean reward E\\[G\\]"),
        (lambda s, r: torch.zeros((), dtype=torch.float64), "you returned 0"),
        (lambda s, r: r.mean(), "your baseline is .*; expected"),
        (lambda s, r: r, "shape"),
    ],
)
def test_best_baseline_rejects_wrong_answers_saying_why(answer, message):
    from lib.checks import check_best_baseline

    with pytest.raises(CheckFailed, match=message):
        check_best_baseline(answer)


# ---- fairness: right answers written from the statements, the likeliest wrong ones -----------------
def add_delta_without_the_vocabulary_size(counts, delta):
    return (counts + delta) / (counts.sum(-1, keepdim=True) + delta)


def add_delta_unsmoothed(counts, delta):
    return counts / counts.sum(-1, keepdim=True)


def add_delta_times_the_number_of_contexts(counts, delta):
    return (counts + delta) / (counts.sum(-1, keepdim=True) + delta * counts.shape[0])


def add_delta_normalised_over_contexts(counts, delta):
    return (counts + delta) / (counts.sum(0, keepdim=True) + delta * counts.shape[0])


def nce_without_log_k(data, noise, data_q, noise_q):
    k = noise.shape[1]
    return nce_with_bce(data + math.log(k), noise + math.log(k), data_q, noise_q)


def nce_divided_by_b(data, noise, data_q, noise_q):
    return nce_with_bce(data, noise, data_q, noise_q) * (noise.numel() + data.numel()) / data.numel()


def nce_wrong_sign(data, noise, data_q, noise_q):
    return -nce_with_bce(data, noise, data_q, noise_q)


def nce_log_q_added(data, noise, data_q, noise_q):
    return nce_with_bce(data, noise, -data_q, -noise_q)


def _variance_with_loops(scores, reward, b):
    """E ||(G(x) - b) grad log p(x) - grad J||^2, summed over the words with Python floats."""
    p = torch.softmax(scores, 0).tolist()
    g = reward.tolist()
    words = range(len(p))
    score_function = [[(1.0 if i == x else 0.0) - p[i] for i in words] for x in words]
    exact = [sum(p[x] * g[x] * score_function[x][i] for x in words) for i in words]
    return sum(p[x] * sum(((g[x] - b) * score_function[x][i] - exact[i]) ** 2 for i in words) for x in words)


def baseline_by_golden_section(scores, reward):
    """A search that stops on the named quantity's argument to 1e-7, well inside the 0.001 allowed."""
    low, high = float(reward.min()), float(reward.max())
    ratio = (math.sqrt(5) - 1) / 2
    while high - low > 1e-7:
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if _variance_with_loops(scores, reward, left) < _variance_with_loops(scores, reward, right):
            high = right
        else:
            low = left
    return torch.tensor((low + high) / 2)


def baseline_from_three_points(scores, reward):
    """The variance is a quadratic in b: its vertex from the values at b = 0, 1 and 2."""
    v0, v1, v2 = (_variance_with_loops(scores, reward, b) for b in (0.0, 1.0, 2.0))
    return torch.tensor(1.0 - (v2 - v0) / (2 * (v2 - 2 * v1 + v0)), dtype=torch.float64)


def baseline_mean_reward(scores, reward):
    return (torch.softmax(scores, 0) * reward).sum()


def baseline_zero(scores, reward):
    return torch.zeros((), dtype=torch.float64)


def baseline_unweighted_mean(scores, reward):
    return reward.mean()


def baseline_weighted_by_p_squared(scores, reward):
    p = torch.softmax(scores, 0)
    return (p * p * reward).sum() / (p * p).sum()


FAIRNESS = {
    "check_add_delta": {
        "right": [add_delta_with_loops, add_delta_in_logs],
        "wrong": [
            (add_delta_without_the_vocabulary_size, "sums to .*, not 1: the denominator"),
            (add_delta_unsmoothed, "unsmoothed relative frequencies|contains NaN"),
            (add_delta_times_the_number_of_contexts, "sums to .*, not 1: the denominator"),
            (add_delta_normalised_over_contexts, "has shape|sums to .*, not 1"),
        ],
    },
    "check_nce_loss": {
        "right": [nce_with_bce, nce_with_probabilities],
        "wrong": [
            (nce_without_log_k, "miss the log K"),
            (nce_divided_by_b, "divided by B only"),
            (nce_wrong_sign, "wrong sign"),
            (nce_log_q_added, "your loss is .*; expected"),
        ],
    },
    "check_best_baseline": {
        "right": [baseline_by_golden_section, baseline_from_three_points],
        "wrong": [
            (baseline_mean_reward, r"mean reward E\[G\]"),
            (baseline_zero, "you returned 0"),
            (baseline_unweighted_mean, "your baseline is .*; expected"),
            (baseline_weighted_by_p_squared, "your baseline is .*; expected"),
        ],
    },
}
