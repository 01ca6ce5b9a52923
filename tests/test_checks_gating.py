"""The experiment checker of chapter 4: forget-gate biases that carry the gradient back pass, the
others fail saying why. (Chapter 4's one-step checkers are tested in tests/test_checks_rnn.py.)"""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_forget_bias
from lib.checks.gating import first_step_reach


def test_the_checker_is_registered_under_its_name():
    assert CHECKS["check_forget_bias"] is check_forget_bias


def test_the_reach_falls_with_a_smaller_bias_and_a_longer_sequence():
    assert first_step_reach(1.0, 40) < 1e-3 < 0.1 < first_step_reach(5.0, 40)
    assert first_step_reach(2.0, 60) < first_step_reach(2.0, 20)


def test_the_reach_leaves_the_callers_random_state_alone():
    state = torch.get_rng_state()
    first_step_reach(3.0, 30)
    assert torch.equal(torch.get_rng_state(), state)


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
        (lambda length: torch.tensor(1.5), "the gradient reaching step 1 is .* it must be at least 0.1"),
        (lambda length: torch.tensor(2.0), "for T = 55: with b = 2 the gradient reaching step 1 is 0.07"),
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
