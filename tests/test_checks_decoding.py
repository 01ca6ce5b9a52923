"""The checkers of chapter 7: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from lib.checks import (
    CHECKS, CheckFailed, check_expand_and_prune, check_perplexity_temperature, check_sampling_distribution,
)


def test_the_checks_are_registered():
    assert CHECKS["check_expand_and_prune"] is check_expand_and_prune
    assert CHECKS["check_sampling_distribution"] is check_sampling_distribution


# ---- one beam step ----------------------------------------------------------------------
def prune_with_topk(beam_scores, log_probs, beam_size):
    return (beam_scores[:, None] + log_probs).flatten().topk(beam_size).indices


def prune_with_loops(beam_scores, log_probs, beam_size):
    vocab_size = log_probs.shape[1]
    scored = [(float(beam_scores[k] + log_probs[k, v]), k * vocab_size + v)
              for k in range(len(beam_scores)) for v in range(vocab_size)]
    return torch.tensor([index for _, index in sorted(scored, reverse=True)[:beam_size]])


@pytest.mark.parametrize("answer", [prune_with_topk, prune_with_loops])
def test_expand_and_prune_accepts_right_answers_written_differently(answer, capsys):
    check_expand_and_prune(answer)
    assert capsys.readouterr().out.startswith("✓ the kept candidates agree with lib.decoding.expand_and_prune")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s, lp, k: lp.flatten().topk(k).indices, "by the new token's log-probability alone"),
        (lambda s, lp, k: prune_with_topk(s, lp, k) % lp.shape[1] if lp.shape[0] > 1 else torch.tensor([-1] * k),
         "returned the token ids|are not the"),
        (lambda s, lp, k: torch.full((k,), -1), "are not the 1 best|are not the 2 best|are not the"),
        (lambda s, lp, k: prune_with_topk(s, lp, k)[:1].expand(k + 1), "has shape"),
        (lambda s, lp, k: prune_with_topk(s, lp, k).double(), "return integers"),
        (lambda s, lp, k: prune_with_topk(s, lp, k).tolist(), "must return a torch.Tensor; it returned list"),
    ],
)
def test_expand_and_prune_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_expand_and_prune(answer)


def test_expand_and_prune_diagnoses_on_a_case_worked_by_hand():
    # Candidates: row 0 scores -3.36, -4.61, -5.30; row 1 scores -2.40, -3.50, -0.72.
    cases = [(torch.tensor([-3.0, -0.5], dtype=torch.float64),
              torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.15, 0.05, 0.8]], dtype=torch.float64)), 3)]
    judge = check_expand_and_prune.judge
    judge(cases, [torch.tensor([5, 3, 0])])  # flat index = parent * 3 + token
    with pytest.raises(CheckFailed, match="you returned the token ids"):
        judge(cases, [torch.tensor([2, 0, 0])])
    with pytest.raises(CheckFailed, match="list them best first"):
        judge(cases, [torch.tensor([0, 3, 5])])
    with pytest.raises(CheckFailed, match="new token's log-probability alone"):
        judge(cases, [torch.tensor([5, 0, 1])])


# ---- the sampling distribution ------------------------------------------------------------
def tempered_top_k(log_probs, temperature, top_k):
    scaled = log_probs / temperature
    if top_k is not None:
        threshold = scaled.topk(top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < threshold, -math.inf)
    return torch.softmax(scaled, dim=-1)


def tempered_by_powers(log_probs, temperature, top_k):
    powered = torch.exp(log_probs) ** (1 / temperature)  # softmax(log p / T) ∝ p ** (1/T)
    if top_k is not None:
        keep = torch.zeros_like(powered, dtype=torch.bool).scatter(-1, powered.topk(top_k, dim=-1).indices, True)
        powered = powered * keep
    return powered / powered.sum(-1, keepdim=True)


@pytest.mark.parametrize("answer", [tempered_top_k, tempered_by_powers])
def test_sampling_distribution_accepts_right_answers_written_differently(answer, capsys):
    check_sampling_distribution(answer)
    assert capsys.readouterr().out.startswith("✓ tempered top-k probabilities agree")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda lp, t, k: tempered_top_k(lp, t, None), "outside the"),
        (lambda lp, t, k: tempered_top_k(lp * t, 1.0, k), "multiplied by the temperature"),
        (lambda lp, t, k: tempered_top_k(lp, 1.0, k), "temperature has no effect"),
        (lambda lp, t, k: tempered_top_k(lp, t, k) * 0.5, "sum to 0.5000"),
        (lambda lp, t, k: torch.softmax(lp / t, -1) * (tempered_top_k(lp, t, k) > 0), "renormalise|sum to"),
        (lambda lp, t, k: tempered_top_k(lp, t, k)[..., :-1], "have shape"),
        (lambda lp, t, k: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_sampling_distribution_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_sampling_distribution(answer)


# ---- experiment: the temperature for a given perplexity ------------------------------------
def perplexity_at(log_probs, temperature):
    probs = torch.softmax(log_probs / temperature, dim=0)
    return math.exp(float(torch.special.entr(probs).sum()))  # entr(p) = -p ln p, 0 at p = 0


def temperature_by_bisection_on_log_t(log_probs, perplexity):
    low, high = -10.0, 10.0  # log T
    for _ in range(80):
        middle = (low + high) / 2
        if perplexity_at(log_probs, math.exp(middle)) < perplexity:
            low = middle
        else:
            high = middle
    return torch.tensor(math.exp(high))


def temperature_by_grid_then_secant(log_probs, perplexity):
    """A coarse grid (the experiment), then the secant method on log T, in float32."""
    grid = [0.05 * 1.2**n for n in range(60)]
    above = next(t for t in grid if perplexity_at(log_probs, t) >= perplexity)
    a, b = math.log(above / 1.2), math.log(above)
    for _ in range(50):
        fa = perplexity_at(log_probs, math.exp(a)) - perplexity
        fb = perplexity_at(log_probs, math.exp(b)) - perplexity
        if fb == fa:
            break
        a, b = b, b - fb * (b - a) / (fb - fa)
    return torch.tensor(math.exp(b), dtype=torch.float32)


@pytest.mark.parametrize("answer", [temperature_by_bisection_on_log_t, temperature_by_grid_then_secant])
def test_perplexity_temperature_accepts_different_searches(answer, capsys):
    check_perplexity_temperature(answer)
    assert capsys.readouterr().out.startswith("✓ your temperatures give the perplexity asked for")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda lp, k: 1 / temperature_by_bisection_on_log_t(lp, k), "that is 1/T"),
        (lambda lp, k: temperature_by_bisection_on_log_t(lp, 2 ** math.log(k)), "2\\^H = perplexity with H in nats"),
        (lambda lp, k: temperature_by_bisection_on_log_t(lp, k) * 1.01, "the perplexity is .* it must be"),
        (lambda lp, k: -temperature_by_bisection_on_log_t(lp, k), "a temperature must be > 0"),
        (lambda lp, k: temperature_by_bisection_on_log_t(lp, k).repeat(2), "expected a scalar"),
        (lambda lp, k: float(temperature_by_bisection_on_log_t(lp, k)), "must return a torch.Tensor"),
    ],
)
def test_perplexity_temperature_rejects_wrong_temperatures_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_perplexity_temperature(answer)
