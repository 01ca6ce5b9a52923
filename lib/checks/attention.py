"""Checkers for the exercises of chapter 9 (attention mechanisms)."""
from __future__ import annotations

import torch

from lib.attention import masked_softmax, scaled_dot_product_attention
from lib.checks.core import Check, CheckFailed, _require_tensor, tolerance_for


def masked_softmax_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, valid_lens)`` for :data:`check_masked_softmax`.

    Scores have shape ``(B, Q, K)``; valid lengths are integers of shape ``(B,)``,
    some of them 0 (padding-only rows must come out as zeros). The first case
    always has an empty row and a partly masked one, so forgetting the mask or
    the empty rows fails on every seed.
    """
    cases = [(3 * torch.randn(2, 3, 4, generator=generator, dtype=torch.float64), torch.tensor([0, 2]))]
    for _ in range(trials - 1):
        batch, queries, keys = (int(n) for n in torch.randint(1, 6, (3,), generator=generator))
        scores = 3 * torch.randn(batch, queries, keys, generator=generator, dtype=torch.float64)
        valid_lens = torch.randint(0, keys + 1, (batch,), generator=generator)
        cases.append((scores, valid_lens))
    return cases


def judge_masked_softmax(cases: list[tuple], results: list) -> None:
    """Compare the student's weights with :func:`lib.attention.masked_softmax`."""
    for (scores, valid_lens), found in zip(cases, results, strict=True):
        found = _require_tensor(found, f"scores of shape {tuple(scores.shape)}, valid_lens {valid_lens.tolist()}")
        tolerance = tolerance_for(found, dict(atol=1e-6, rtol=0.0))["atol"]
        expected = masked_softmax(scores, valid_lens)
        if found.shape != expected.shape:
            raise CheckFailed(
                f"for scores of shape {tuple(scores.shape)} your weights have shape "
                f"{tuple(found.shape)}; expected {tuple(expected.shape)}"
            )
        found = found.to(expected.dtype)
        if torch.isnan(found).any():
            raise CheckFailed(
                f"your weights contain NaN (valid_lens = {valid_lens.tolist()}): a row whose "
                "valid length is 0 must be all zeros"
            )
        for b, n in enumerate(valid_lens.tolist()):
            beyond = found[b, :, n:]
            if beyond.numel() and beyond.abs().max() > tolerance:
                raise CheckFailed(
                    f"batch {b} has valid length {n}, but your weights at key positions >= {n} "
                    f"are not 0 (largest: {beyond.abs().max():.3g})"
                )
            row_sums = found[b, :, :n].sum(-1)
            target = 1.0 if n > 0 else 0.0
            bad = (row_sums - target).abs() > tolerance
            if bad.any():
                q = int(bad.nonzero()[0])
                raise CheckFailed(
                    f"in batch {b}, your weights for query {q} sum to {row_sums[q]:.4f}; "
                    f"expected {target:g} (valid length {n})"
                )
        if not torch.allclose(found, expected, atol=tolerance):
            difference = (found - expected).abs()
            where = tuple(int(i) for i in torch.unravel_index(difference.argmax(), expected.shape))
            raise CheckFailed(
                "your weights are valid distributions but not the softmax of the scores "
                f"(largest difference {difference.max():.3g} at index {where}): "
                "apply exp to the valid scores only and divide by their sum"
            )


check_masked_softmax = Check(
    "masked softmax agrees with lib.attention.masked_softmax on 20 fresh random cases",
    masked_softmax_cases, judge_masked_softmax,
)


def scaled_dot_product_attention_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(q, k, v)`` for :func:`check_scaled_dot_product_attention`.

    Shapes are ``(B, T, D)``, ``(B, S, D)``, ``(B, S, Dv)`` or, in every other case,
    with an extra head axis ``(B, H, T, D)`` and so on. ``T``, ``S``, ``D`` and ``Dv``
    are four different sizes, so a product over the wrong axis fails loudly
    instead of passing by accident.
    """
    cases = []
    for trial in range(trials):
        queries, keys, dim, value_dim = (int(n) for n in torch.randperm(6, generator=generator)[:4] + 2)
        leading = tuple(int(n) for n in torch.randint(1, 4, (1 + trial % 2,), generator=generator))
        q = 1.5 * torch.randn(*leading, queries, dim, generator=generator, dtype=torch.float64)
        k = 1.5 * torch.randn(*leading, keys, dim, generator=generator, dtype=torch.float64)
        v = torch.randn(*leading, keys, value_dim, generator=generator, dtype=torch.float64)
        cases.append((q, k, v))
    return cases


def judge_scaled_dot_product_attention(cases: list[tuple], results: list) -> None:
    """Compare the student's outputs with :func:`lib.attention.scaled_dot_product_attention`.

    ``results[i]`` is what the student's function returned for ``cases[i]``, or the
    text ``"ErrorType: message"`` of the exception it raised. Raises
    :class:`CheckFailed` with a message that says what to fix.
    """
    for (q, k, v), found in zip(cases, results, strict=True):
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        # q @ k (no transpose) is the commonest slip: say so when the shapes clash.
        hint = (". If it comes from the scores: they are q @ k.transpose(-2, -1), of shape (..., T, S); "
                "q @ k does not fit") if isinstance(found, str) and found.startswith("RuntimeError") else ""
        found = _require_tensor(found, shapes, hint)
        expected, _ = scaled_dot_product_attention(q, k, v)
        if found.shape != expected.shape:
            raise CheckFailed(
                f"for {shapes} your output has shape {tuple(found.shape)}; expected (..., T, Dv) = "
                f"{tuple(expected.shape)}: multiply the (..., T, S) weights by v last"
            )
        if torch.isnan(found).any():
            raise CheckFailed(f"your output contains NaN for {shapes}")
        tolerance = tolerance_for(found, dict(atol=1e-6, rtol=1e-5))
        found = found.to(expected.dtype)
        if torch.allclose(found, expected, **tolerance):
            continue
        scores = q @ k.transpose(-2, -1)  # (..., T, S), unscaled
        dim = q.shape[-1]
        diagnoses = (
            (torch.softmax(scores, -1) @ v, "you did not divide the scores by √d (d = size of q and k)"),
            (torch.softmax(scores / dim, -1) @ v, "you divided the scores by d; divide by √d"),
            (torch.softmax(scores / dim**0.5, -2) @ v,
             "your softmax runs over the queries; it must run over the keys (the last axis of the scores)"),
        )
        for wrong, message in diagnoses:
            if torch.allclose(found, wrong, **tolerance):
                raise CheckFailed(f"for {shapes}: {message}")
        difference = (found - expected).abs()
        raise CheckFailed(
            f"for {shapes} your output differs from softmax(q kᵀ / √d) v by up to {difference.max():.3g}"
        )


check_scaled_dot_product_attention = Check(
    "softmax(q kᵀ / √d) v agrees with lib.attention on 20 fresh random cases",
    scaled_dot_product_attention_cases, judge_scaled_dot_product_attention,
    forbidden=("torch.nn.functional.scaled_dot_product_attention", "torch.nn.MultiheadAttention"),
)
