"""The experiment checker of chapter 4: forget-gate biases that carry the gradient back pass, the
others fail saying why. (Chapter 4's one-step checkers are tested in tests/test_checks_rnn.py.)"""
import functools
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_forget_bias
from lib.checks.gating import LEAST_REACH, first_step_reach, one_thread
from lib.gating import MemoryClassifier


def test_the_checker_is_registered_under_its_name():
    assert CHECKS["check_forget_bias"] is check_forget_bias


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


FAIRNESS = {
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
}
