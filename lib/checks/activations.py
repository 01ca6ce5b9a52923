"""Checkers for the exercises of chapter 1 (activation functions and loss functions)."""
from __future__ import annotations

import math

import torch

from lib.activations import gelu_grad
from lib.checks.core import Check, Slip
from lib.losses import binary_cross_entropy, cross_entropy


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


def _cdf(x: torch.Tensor) -> torch.Tensor:
    """Φ(x), the standard normal distribution function."""
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


check_gelu_grad = Check(
    "GELU'(x) = Φ(x) + x φ(x) agrees with lib.activations.gelu_grad on 10 fresh random tensors",
    gelu_grad_cases, gelu_grad,
    describe=lambda x: f"x of shape {tuple(x.shape)}",
    compared_with="Φ(x) + x φ(x)", noun="derivative", layout="x.shape",
    slips=(
        Slip(_cdf, "you returned Φ(x) only: by the product rule, (x Φ(x))' = Φ(x) + x φ(x)"),
        Slip(lambda x: x * torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi),
             "you returned x φ(x) only: by the product rule, (x Φ(x))' = Φ(x) + x φ(x)"),
        Slip(lambda x: gelu_grad(x, "tanh"),
             "that is the derivative of the tanh approximation; differentiate the exact x Φ(x)"),
        Slip(lambda x: gelu_grad(x, "sigmoid"), "that is the derivative of the sigmoid approximation x σ(1.702x); "
                                                "differentiate the exact x Φ(x)"),
        Slip(lambda x: _cdf(x) + x * torch.exp(-(x**2)) / math.sqrt(2 * math.pi),
             "the normal density is φ(x) = exp(-x²/2) / √(2π): check the exponent"),
    ),
    shape_hint=lambda shape, x: ": it must have the shape of x (the derivative is taken element by element)",
    tolerance=dict(atol=1e-10, rtol=0.0),
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


def _two_class_formula(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-Σ (p log q + (1-p) log(1-q)) over the classes, averaged over the batch."""
    one_hot = torch.nn.functional.one_hot(targets, logits.shape[1]).to(logits.dtype)  # (B, C)
    return binary_cross_entropy(torch.softmax(logits, -1), one_hot, reduction="sum") / logits.shape[0]


check_cross_entropy = Check(
    "softmax cross-entropy agrees with lib.losses.cross_entropy on 12 fresh random batches, large logits included",
    cross_entropy_cases, cross_entropy,
    describe=lambda logits, targets: f"logits of shape {tuple(logits.shape)}",
    compared_with="lib.losses.cross_entropy", noun="loss", layout=" (the mean over the batch)",
    slips=(
        Slip(lambda logits, targets: cross_entropy(logits, targets, reduction="sum"),
             "you summed the losses; divide by the batch size (the mean)"),
        Slip(lambda logits, targets: -cross_entropy(logits, targets),
             "your loss has the wrong sign: it is minus the log-probability of the true class"),
        Slip(_two_class_formula,
             "that is the two-class formula -Σ (p log q + (1-p) log(1-q)) summed over the classes; for C classes "
             "the cross-entropy is -Σ p log q (only the true class counts)"),
        Slip(lambda logits, targets: -torch.log_softmax(logits, dim=0).gather(1, targets[:, None]).mean(),
             "your softmax runs over the batch; it must run over the classes (the last axis)"),
    ),
    shape_hint=lambda shape, logits, targets: (
        ": you returned one loss per example; return their mean over the batch" if shape == (logits.shape[0],)
        else ""),
    nan_hint=": exp overflows or underflows; subtract each row's maximum before exponentiating (the log-sum-exp "
             "trick)",
    tolerance=dict(atol=1e-8, rtol=1e-10),
    forbidden=("torch.nn.functional", "torch.nn.CrossEntropyLoss", "torch.log_softmax", "torch.softmax",
               ".log_softmax", ".softmax", ".logsumexp", "torch.logsumexp"),
)
