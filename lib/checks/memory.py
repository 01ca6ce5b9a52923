"""Checkers for the exercises of chapter 12 (memory-augmented networks)."""
from __future__ import annotations

import torch

from lib.checks.core import Check, CheckFailed, _require_tensor
from lib.memory.hopfield import hebbian_weights
from lib.memory.ntm import write


def _distinct_sizes(generator: torch.Generator, count: int) -> list[int]:
    """``count`` different sizes from 2 to 7, so that a product over the wrong axis fails loudly."""
    return [int(n) for n in torch.randperm(6, generator=generator)[:count] + 2]


def ntm_write_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(memory, weights, erase, add)`` for :data:`check_ntm_write`.

    ``B``, ``N`` and ``D`` are three different sizes. Weights are softmax
    distributions over the slots (one-hot in the first case, with ``erase = 1``,
    where the write must replace the slot by ``add`` exactly); erase entries are
    in ``[0, 1]``.
    """
    cases = []
    for trial in range(trials):
        batch, slots, size = _distinct_sizes(generator, 3)
        memory = torch.randn(batch, slots, size, generator=generator, dtype=torch.float64)
        weights = torch.softmax(2 * torch.randn(batch, slots, generator=generator, dtype=torch.float64), -1)
        erase = torch.rand(batch, size, generator=generator, dtype=torch.float64)
        add = torch.randn(batch, size, generator=generator, dtype=torch.float64)
        if trial == 0:
            weights = torch.nn.functional.one_hot(torch.randint(0, slots, (batch,), generator=generator), slots)
            weights, erase = weights.to(torch.float64), torch.ones_like(erase)
        cases.append((memory, weights, erase, add))
    return cases


def judge_ntm_write(cases: list[tuple], results: list) -> None:
    """Compare the student's new memory with :func:`lib.memory.ntm.write`."""
    wrong_cases = []
    for (memory, weights, erase, add), found in zip(cases, results, strict=True):
        shapes = f"memory {tuple(memory.shape)}, weights {tuple(weights.shape)}, erase/add {tuple(erase.shape)}"
        found = _require_tensor(found, shapes)
        expected = write(memory, weights, erase, add)
        if found.shape != expected.shape:
            raise CheckFailed(
                f"for {shapes} your memory has shape {tuple(found.shape)}; expected (B, N, D) = "
                f"{tuple(expected.shape)}: w needs a slot axis (B, N, 1), e and a a slot axis (B, 1, D)"
            )
        if torch.isnan(found).any():
            raise CheckFailed(f"your memory contains NaN for {shapes}")
        if not torch.allclose(found.to(expected.dtype), expected, atol=1e-8):
            wrong_cases.append((shapes, memory, weights, erase, add, found.to(expected.dtype), expected))
    if not wrong_cases:
        return
    # Diagnose on the last wrong case: its weights are soft, so every slip gives a different memory
    # (the first case's one-hot weights and erase = 1 make some of them coincide).
    shapes, memory, weights, erase, add, found, expected = wrong_cases[-1]
    w, e, a = weights[:, :, None], erase[:, None, :], add[:, None, :]  # (B, N, 1), (B, 1, D), (B, 1, D)
    diagnoses = (
        ((memory + w * a) * (1 - w * e), "you added before erasing: erase first, then add"),
        (memory * (1 - e) + w * a, "your erase ignores the weights: slot i must lose w_i e, not e"),
        (memory * (1 - w * e), "you erased but did not add w_i a"),
        (memory + w * a, "you added but did not erase: multiply by (1 - w_i e) first"),
        (memory * (1 - w * e) + a, "your add ignores the weights: slot i gains w_i a, not a"),
        (memory * w * e + w * a, "a slot keeps M_i (1 - w_i e) of its content, not M_i w_i e"),
    )
    for wrong, message in diagnoses:
        if torch.allclose(found, wrong, atol=1e-8):
            raise CheckFailed(f"for {shapes}: {message}")
    difference = (found - expected).abs()
    raise CheckFailed(
        f"for {shapes} your memory differs from M ⊙ (1 − w eᵀ) + w aᵀ by up to {difference.max():.3g}"
    )


check_ntm_write = Check(
    "the erase-then-add write agrees with lib.memory.ntm.write on 20 fresh random cases",
    ntm_write_cases, judge_ntm_write,
)


def hebbian_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh ``+-1`` patterns ``(P, N)`` for :data:`check_hebbian_weights`, with ``2 <= P < N`` (with one
    pattern, dividing by P would look like not dividing at all)."""
    cases = []
    for _ in range(trials):
        n_patterns = int(torch.randint(2, 6, (1,), generator=generator))
        n_units = n_patterns + int(torch.randint(1, 8, (1,), generator=generator))
        patterns = torch.randint(0, 2, (n_patterns, n_units), generator=generator).to(torch.float64) * 2 - 1
        cases.append((patterns,))
    return cases


def judge_hebbian_weights(cases: list[tuple], results: list) -> None:
    """Compare the student's weights with :func:`lib.memory.hopfield.hebbian_weights`."""
    for (patterns,), found in zip(cases, results, strict=True):
        n_patterns, n_units = patterns.shape
        context = f"{n_patterns} patterns of {n_units} units"
        found = _require_tensor(found, context)
        expected = hebbian_weights(patterns)
        if found.shape != expected.shape:
            hint = (": patterns @ patterns.T compares patterns; the weights compare units, patterns.T @ patterns"
                    if tuple(found.shape) == (n_patterns, n_patterns) else "")
            raise CheckFailed(
                f"for {context} your weights have shape {tuple(found.shape)}; expected (N, N) = "
                f"{tuple(expected.shape)}{hint}"
            )
        found = found.to(expected.dtype)
        if torch.allclose(found, expected, atol=1e-8):
            continue
        diagonal = found.diagonal()
        if not torch.allclose(diagonal, torch.zeros_like(diagonal), atol=1e-8):
            raise CheckFailed(
                f"for {context} your diagonal is {diagonal[0]:.4f}, not 0: set W_ii = 0 (no self-connections)"
            )
        outer = patterns.T @ patterns  # (N, N): the sum of outer products, unscaled
        outer.fill_diagonal_(0.0)
        for wrong, message in (
            (outer, "you did not divide by N, the number of units"),
            (outer / n_patterns, "you divided by P, the number of patterns; divide by N, the number of units"),
        ):
            if torch.allclose(found, wrong, atol=1e-8):
                raise CheckFailed(f"for {context}: {message}")
        difference = (found - expected).abs()
        raise CheckFailed(
            f"for {context} your weights differ from (1/N) Σ ξ ξᵀ with a zero diagonal "
            f"by up to {difference.max():.3g}"
        )


check_hebbian_weights = Check(
    "Hebbian weights agree with lib.memory.hopfield.hebbian_weights on 20 fresh random cases",
    hebbian_cases, judge_hebbian_weights,
)
