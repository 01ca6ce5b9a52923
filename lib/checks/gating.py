"""Checkers for the experiment exercises of chapter 4 (gated recurrent networks).

The one-step LSTM and GRU checkers of chapter 4 live with chapter 3's in :mod:`lib.checks.rnn`.
"""
from __future__ import annotations

import math

import torch

from lib.checks.core import Measured, Slip
from lib.gating import MemoryClassifier

# Above this bias σ'(b) = σ(b)(1 - σ(b)) is below 1.3e-4: the gradient that could teach the gate to forget is gone.
LARGEST_FORGET_BIAS = 9.0
# The least share of the last step's input gradient that must reach the first step.
LEAST_REACH = 0.1


def forget_bias_cases(generator: torch.Generator, trials: int = 6) -> list[tuple]:
    """Sequence lengths ``(length,)`` for :data:`check_forget_bias`: 55 steps first, where the bias 2
    reaches only 0.07 (it passes on about two lengths in three), then fresh lengths from 20 to 60."""
    return [(55,)] + [(int(n),) for n in torch.randint(20, 61, (trials - 1,), generator=generator)]


def forget_bias(length: int) -> torch.Tensor:
    """The book's answer: ``b = ln(2T)``, so that ``σ(b)^T ≈ e^{-1/2}`` of the memory survives ``T`` steps."""
    return torch.tensor(math.log(2 * length), dtype=torch.float64)


def first_step_reach(bias: float, length: int, batch: int = 32) -> float:
    """How much of the gradient reaches the first input of an untrained LSTM with forget-gate bias ``bias``.

    The LSTM is the chapter's :class:`lib.gating.MemoryClassifier` (6 inputs, 32 units, 4 classes),
    initialised with seed ``length`` (the caller's random state is left alone). Returns the mean
    over ``batch`` random sequences of ``‖∂ℓ/∂x_1‖`` divided by that of ``‖∂ℓ/∂x_T‖``, where ``ℓ``
    is the sum of the logits at the last step weighted by random numbers.

    Shapes
    ------
    inputs ``(batch, length, 6)``; logits ``(batch, 4)``
    """
    generator = torch.Generator().manual_seed(length)
    with torch.random.fork_rng():
        torch.manual_seed(length)
        model = MemoryClassifier("lstm", 6, 32, 4, keep_bias=bias).double()
    x = torch.randn(batch, length, 6, generator=generator, dtype=torch.float64, requires_grad=True)  # (B, T, 6)
    weights = torch.randn(batch, 4, generator=generator, dtype=torch.float64)  # (B, 4)
    (grad,) = torch.autograd.grad((model(x) * weights).sum(), x)  # (B, T, 6)
    norms = grad.norm(dim=-1).mean(dim=0)  # (T,)
    return float(norms[0] / norms[-1])


def _forget_bias_rules(found: torch.Tensor, expected: torch.Tensor, length: int) -> str | None:
    """Too large a bias, or too little gradient at the first step; None when the bias is good."""
    bias = float(found)
    if bias > LARGEST_FORGET_BIAS:
        return (f"b = {bias:.3g} holds the gate so far open that σ'(b) < 1.3e-4: training could never teach "
                f"it to forget. Keep b ≤ {LARGEST_FORGET_BIAS:g}")
    reach = first_step_reach(bias, length)
    if reach < LEAST_REACH:
        return (f"with b = {bias:.3g} the gradient reaching step 1 is {reach:.2g} times that at step {length}; it "
                f"must be at least {LEAST_REACH:g}. The memory keeps σ(b)^T of itself over T steps")
    return None


check_forget_bias = Measured(
    f"for T = 55 and 5 fresh lengths from 20 to 60 steps, at least {LEAST_REACH:g} of the last step's gradient "
    "reaches the first step of the chapter's untrained LSTM",
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
