"""Checkers for the book's coding exercises.

A check cell in a chapter calls one ``check_*`` function with the student's
function. The checker runs it on *fresh* random inputs (a new seed every call, so
hard-coding the answers shown in the chapter does not pass), compares the result
with the book's tested implementation, and either prints one line starting with
``✓`` or raises :class:`CheckFailed` with a message a student can act on.

The printed line does not depend on the random inputs, so a passing check cell
has a stable output that nbval can compare. Every checker is registered in
:data:`CHECKS` under the name a check cell calls it by.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch

from lib.attention import masked_softmax, scaled_dot_product_attention


class CheckFailed(AssertionError):
    """The student's answer is wrong; the message says how."""


def fresh_generator() -> torch.Generator:
    """A generator seeded from the operating system: new inputs on every call."""
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(os.urandom(8), "little"))
    return generator


def _outcome(student_fn, args):
    """What the student's function returned, or ``"ErrorType: message"`` if it raised."""
    try:
        return student_fn(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    except Exception as error:  # reported to the student with its type, as the grader does
        return f"{type(error).__name__}: {error}"


def _require_tensor(found, context: str, hint: str = "") -> torch.Tensor:
    """Turn a raised error or a non-tensor result into a :class:`CheckFailed`."""
    if isinstance(found, str):
        if found.startswith("NotImplementedError"):
            raise CheckFailed("your function still raises NotImplementedError: write its body first")
        raise CheckFailed(f"your function raised {found.splitlines()[0].rstrip('.')} for {context}{hint}")
    if not isinstance(found, torch.Tensor):
        raise CheckFailed(f"your function must return a torch.Tensor; it returned {type(found).__name__}")
    return found


@dataclass(frozen=True)
class Check:
    """The checker of one coding exercise.

    ``make_cases(generator)`` draws the inputs (a list of argument tuples);
    ``judge(cases, results)`` compares what the student's function returned for
    each case with the book's implementation and raises :class:`CheckFailed`.
    A check cell calls the ``Check`` with the student's function; the grader
    (:mod:`lib.exercises`) calls ``make_cases`` and ``judge`` in its own process
    and lets only the student's function run in the student's kernel.
    """

    success: str  # printed after "✓ " when every case passes
    make_cases: Callable[[torch.Generator], list[tuple]]
    judge: Callable[[list[tuple], list], None]

    def __call__(self, student_fn) -> None:
        if not callable(student_fn):
            raise CheckFailed(f"expected a function; found {type(student_fn).__name__}")
        cases = self.make_cases(fresh_generator())
        self.judge(cases, [_outcome(student_fn, args) for args in cases])
        print(f"✓ {self.success}")


def masked_softmax_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, valid_lens)`` for :data:`check_masked_softmax`.

    Scores have shape ``(B, Q, K)``; valid lengths are integers of shape ``(B,)``,
    some of them 0 (padding-only rows must come out as zeros).
    """
    cases = []
    for _ in range(trials):
        batch, queries, keys = (int(n) for n in torch.randint(1, 6, (3,), generator=generator))
        scores = 3 * torch.randn(batch, queries, keys, generator=generator, dtype=torch.float64)
        valid_lens = torch.randint(0, keys + 1, (batch,), generator=generator)
        cases.append((scores, valid_lens))
    return cases


def judge_masked_softmax(cases: list[tuple], results: list) -> None:
    """Compare the student's weights with :func:`lib.attention.masked_softmax`."""
    for (scores, valid_lens), found in zip(cases, results, strict=True):
        found = _require_tensor(found, f"scores of shape {tuple(scores.shape)}, valid_lens {valid_lens.tolist()}")
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
            if beyond.numel() and beyond.abs().max() > 1e-6:
                raise CheckFailed(
                    f"batch {b} has valid length {n}, but your weights at key positions >= {n} "
                    f"are not 0 (largest: {beyond.abs().max():.3g})"
                )
            row_sums = found[b, :, :n].sum(-1)
            target = 1.0 if n > 0 else 0.0
            bad = (row_sums - target).abs() > 1e-6
            if bad.any():
                q = int(bad.nonzero()[0])
                raise CheckFailed(
                    f"in batch {b}, your weights for query {q} sum to {row_sums[q]:.4f}; "
                    f"expected {target:g} (valid length {n})"
                )
        if not torch.allclose(found, expected, atol=1e-6):
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
        found = found.to(expected.dtype)
        if torch.allclose(found, expected, atol=1e-6):
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
            if torch.allclose(found, wrong, atol=1e-6):
                raise CheckFailed(f"for {shapes}: {message}")
        difference = (found - expected).abs()
        raise CheckFailed(
            f"for {shapes} your output differs from softmax(q kᵀ / √d) v by up to {difference.max():.3g}"
        )


check_scaled_dot_product_attention = Check(
    "softmax(q kᵀ / √d) v agrees with lib.attention on 20 fresh random cases",
    scaled_dot_product_attention_cases, judge_scaled_dot_product_attention,
)

# The name a check cell calls → its checker (the grader looks checkers up here).
CHECKS: dict[str, Check] = {
    name: value for name, value in globals().items() if name.startswith("check_") and isinstance(value, Check)
}
