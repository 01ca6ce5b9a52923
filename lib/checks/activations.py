"""Checkers for the exercises of chapter 1 (activation functions and loss functions)."""
from __future__ import annotations

import math

import torch

from lib.activations import gelu_grad
from lib.checks.core import Check, CheckFailed, _require_tensor, tolerance_for
from lib.losses import binary_cross_entropy, cross_entropy


def _largest_difference(found: torch.Tensor, expected: torch.Tensor) -> str:
    difference = (found - expected).abs()
    where = tuple(int(i) for i in torch.unravel_index(difference.argmax(), expected.shape))
    return f"{difference.max():.3g} at index {where}"


# ---- the derivative of GELU -------------------------------------------------------------
def gelu_grad_cases(generator: torch.Generator, trials: int = 10) -> list[tuple]:
    """Fresh inputs ``(x,)`` for :data:`check_gelu_grad`: float64 tensors of 1 to 3
    axes, with entries up to ±6 and always the points 0 and 1 (where φ(x) and a
    slipped exponent differ clearly, however far out the random entries fall)."""
    cases = []
    for trial in range(trials):
        shape = tuple(int(n) for n in torch.randint(2, 6, (1 + trial % 3,), generator=generator))
        x = 3 * torch.randn(*shape, generator=generator, dtype=torch.float64)
        x.view(-1)[:2] = torch.tensor([0.0, 1.0], dtype=torch.float64)
        cases.append((x.clamp(-6, 6),))
    return cases


def judge_gelu_grad(cases: list[tuple], results: list) -> None:
    """Compare the student's derivative with :func:`lib.activations.gelu_grad` (exact form)."""
    for (x,), found in zip(cases, results, strict=True):
        found = _require_tensor(found, f"x of shape {tuple(x.shape)}")
        tolerance = tolerance_for(found, dict(atol=1e-10, rtol=0.0))
        expected = gelu_grad(x)
        if found.shape != expected.shape:
            raise CheckFailed(f"for x of shape {tuple(x.shape)} your derivative has shape {tuple(found.shape)}; "
                              "it must have the shape of x (the derivative is taken element by element)")
        found = found.to(expected.dtype)
        if not torch.isfinite(found).all():
            raise CheckFailed(f"your derivative contains NaN or inf for x of shape {tuple(x.shape)}")
        if torch.allclose(found, expected, **tolerance):
            continue
        cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
        diagnoses = (
            (cdf, "you returned Φ(x) only: by the product rule, (x Φ(x))' = Φ(x) + x φ(x)"),
            (x * torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi),
             "you returned x φ(x) only: by the product rule, (x Φ(x))' = Φ(x) + x φ(x)"),
            (gelu_grad(x, "tanh"), "that is the derivative of the tanh approximation; differentiate the exact x Φ(x)"),
            (gelu_grad(x, "sigmoid"), "that is the derivative of the sigmoid approximation x σ(1.702x); "
                                      "differentiate the exact x Φ(x)"),
            (cdf + x * torch.exp(-(x**2)) / math.sqrt(2 * math.pi),
             "the normal density is φ(x) = exp(-x²/2) / √(2π): check the exponent"),
        )
        for wrong, message in diagnoses:
            if torch.allclose(found, wrong, atol=1e-8, rtol=0):
                raise CheckFailed(message)
        raise CheckFailed(f"your derivative differs from Φ(x) + x φ(x) by up to {_largest_difference(found, expected)}")


check_gelu_grad = Check(
    "GELU'(x) = Φ(x) + x φ(x) agrees with lib.activations.gelu_grad on 10 fresh random tensors",
    gelu_grad_cases, judge_gelu_grad,
    forbidden=("torch.nn.functional.gelu", "torch.autograd", "torch.func", ".backward"),
)


# ---- softmax cross-entropy from logits --------------------------------------------------
def cross_entropy_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(logits, targets)`` for :data:`check_cross_entropy`.

    Logits ``(B, C)`` in float64 with ``B != C``; every third case has logits in
    the hundreds, shifted so that every row's maximum is 1000 or -1000 in turn,
    where exp overflows (or underflows to 0) unless the row maximum is subtracted
    first: a missing max-shift fails on every seed. Targets are class indices ``(B,)``.
    """
    cases = []
    for trial in range(trials):
        batch, classes = (int(n) for n in torch.randperm(6, generator=generator)[:2] + 2)
        scale = 400.0 if trial % 3 == 2 else 2.0
        logits = scale * torch.randn(batch, classes, generator=generator, dtype=torch.float64)
        if trial % 3 == 2:
            logits += (1000.0 if trial % 2 else -1000.0) - logits.max(-1, keepdim=True).values
        targets = torch.randint(0, classes, (batch,), generator=generator)
        cases.append((logits, targets))
    return cases


def judge_cross_entropy(cases: list[tuple], results: list) -> None:
    """Compare the student's loss with :func:`lib.losses.cross_entropy` (mean over the batch)."""
    for (logits, targets), found in zip(cases, results, strict=True):
        shapes = f"logits of shape {tuple(logits.shape)}"
        found = _require_tensor(found, shapes)
        tolerance = tolerance_for(found, dict(atol=1e-8, rtol=1e-10))
        expected = cross_entropy(logits, targets)
        per_example = cross_entropy(logits, targets, reduction="none")  # (B,)
        if found.shape == per_example.shape and torch.allclose(found.to(per_example.dtype), per_example, atol=1e-8):
            raise CheckFailed("you returned one loss per example; return their mean over the batch (a scalar)")
        if found.numel() != 1:
            raise CheckFailed(f"for {shapes} your loss has shape {tuple(found.shape)}; expected a scalar (the mean)")
        value = found.reshape(()).to(expected.dtype)
        if not torch.isfinite(value):
            raise CheckFailed(
                f"your loss is {value.item()} for {shapes} with entries up to {logits.abs().max():.0f}: exp "
                "overflows or underflows; subtract each row's maximum before exponentiating (the log-sum-exp trick)"
            )
        if torch.isclose(value, expected, **tolerance):
            continue
        batch = logits.shape[0]
        q = torch.softmax(logits, -1)
        one_hot = torch.nn.functional.one_hot(targets, logits.shape[1]).to(logits.dtype)
        diagnoses = (
            (per_example.sum(), "you summed the losses; divide by the batch size (the mean)"),
            (-expected, "your loss has the wrong sign: it is minus the log-probability of the true class"),
            (binary_cross_entropy(q, one_hot, reduction="sum") / batch,
             "that is the two-class formula -Σ (p log q + (1-p) log(1-q)) summed over the classes; "
             "for C classes the cross-entropy is -Σ p log q (only the true class counts)"),
            (-torch.log_softmax(logits, dim=0).gather(1, targets[:, None]).mean(),
             "your softmax runs over the batch; it must run over the classes (the last axis)"),
        )
        for wrong, message in diagnoses:
            if torch.isclose(value, wrong, **tolerance):
                raise CheckFailed(f"for {shapes}: {message}")
        raise CheckFailed(f"for {shapes} your loss is {value.item():.6g}; expected {expected.item():.6g}")


check_cross_entropy = Check(
    "softmax cross-entropy agrees with lib.losses.cross_entropy on 12 fresh random batches, large logits included",
    cross_entropy_cases, judge_cross_entropy,
    forbidden=("torch.nn.functional", "torch.nn.CrossEntropyLoss", "torch.log_softmax", "torch.softmax", ".log_softmax", ".softmax", ".logsumexp", "torch.logsumexp"),
)
