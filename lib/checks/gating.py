"""Checkers for the experiment exercises of chapter 4 (gated recurrent networks).

The one-step LSTM and GRU checkers of chapter 4 live with chapter 3's in :mod:`lib.checks.rnn`.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch

from lib.checks.core import Measured, Slip
from lib.gating import MemoryClassifier

# Above this bias σ'(b) = σ(b)(1 - σ(b)) is below 1.3e-4: the gradient that could teach the gate to forget is gone.
LARGEST_FORGET_BIAS = 9.0
# The least ratio ρ = mean ‖∂ℓ/∂x_1‖ / mean ‖∂ℓ/∂x_T‖ that the checker accepts.
LEAST_REACH = 0.1
# ρ is compared with LEAST_REACH to this relative tolerance, so that rounding (a float32 measurement,
# another order of sums) cannot fail a bias that a search stopped at ρ = 0.1 exactly.
REACH_RTOL = 1e-4


def forget_bias_cases(generator: torch.Generator, trials: int = 6) -> list[tuple]:
    """Sequence lengths ``(length,)`` for :data:`check_forget_bias`: 55 steps first, where the bias 2
    gives ρ = 0.07 (it passes on about two lengths in three), then fresh lengths from 20 to 60."""
    return [(55,)] + [(int(n),) for n in torch.randint(20, 61, (trials - 1,), generator=generator)]


def forget_bias(length: int) -> torch.Tensor:
    """The book's answer: ``b = ln(2T)``, so that ``σ(b)^T ≈ e^{-1/2}`` of the memory survives ``T`` steps."""
    return torch.tensor(math.log(2 * length), dtype=torch.float64)


def first_step_reach(bias: float, length: int, batch: int = 32, seed: int | None = None) -> float:
    """The ratio ρ of the gradient's norm at the first input to its norm at the last, for an untrained LSTM.

    The LSTM is the chapter's :class:`lib.gating.MemoryClassifier` (6 inputs, 32 units, 4 classes)
    with forget-gate bias ``bias``, built right after ``torch.manual_seed(seed)`` and converted to
    float64 (the caller's random state is left alone). From ``torch.Generator().manual_seed(seed)``
    come, in this order, ``batch`` random sequences ``x`` and random weights ``w`` for the logits;
    with ``ℓ = Σ w ⊙ logits``, returns

        ρ = mean over the batch of ‖∂ℓ/∂x_1‖ / mean over the batch of ‖∂ℓ/∂x_T‖.

    ρ is not the share of a gradient that survives ``T`` steps: the two inputs reach the loss along
    different paths, and ρ exceeds 1 for large biases. It changes severalfold from one random model
    to the next, hence the fixed seed, ``length`` unless ``seed`` is given, which the exercise states.

    Shapes
    ------
    inputs ``(batch, length, 6)``; logits ``(batch, 4)``
    """
    seed = length if seed is None else seed
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = MemoryClassifier("lstm", 6, 32, 4, keep_bias=bias).double()
    x = torch.randn(batch, length, 6, generator=generator, dtype=torch.float64, requires_grad=True)  # (B, T, 6)
    weights = torch.randn(batch, 4, generator=generator, dtype=torch.float64)  # (B, 4)
    with one_thread():
        (grad,) = torch.autograd.grad((model(x) * weights).sum(), x)  # (B, T, 6)
    norms = grad.norm(dim=-1).mean(dim=0)  # (T,)
    return float(norms[0] / norms[-1])


@contextmanager
def one_thread():
    """Run the block on one thread, then restore the caller's count: these tensors are so small that
    a second thread only waits, many times slower on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _distinct(value: float, other: float) -> str:
    """``value`` with enough digits (at least 2) not to print like ``other``."""
    for digits in range(2, 12):
        if f"{value:.{digits}g}" != f"{other:.{digits}g}":
            return f"{value:.{digits}g}"
    return repr(value)


def _forget_bias_rules(found: torch.Tensor, expected: torch.Tensor, length: int) -> str | None:
    """Too large a bias, or too small a ratio ρ; None when the bias is good."""
    bias = float(found)
    if bias > LARGEST_FORGET_BIAS:
        return (f"b = {bias:.3g} holds the gate so far open that σ'(b) < 1.3e-4: training could never teach "
                f"it to forget. Keep b ≤ {LARGEST_FORGET_BIAS:g}")
    reach = first_step_reach(bias, length)
    if reach < LEAST_REACH * (1 - REACH_RTOL):
        return (f"with b = {_distinct(bias, reach)} the gradient's norm at the first input is "
                f"{_distinct(reach, LEAST_REACH)} times its norm at the last (ρ, each norm averaged over the "
                "batch); ρ must be at least a tenth. The memory keeps σ(b)^T of itself over T steps")
    return None


check_forget_bias = Measured(
    f"for T = 55 and 5 fresh lengths from 20 to 60 steps, the gradient's norm at the first input of the "
    f"chapter's untrained LSTM is at least {LEAST_REACH:g} times its norm at the last",
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
