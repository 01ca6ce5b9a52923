"""Checkers for the exercises of chapter 11 (self-attention and the Transformer)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lib.checks.core import Check, CheckFailed, _require_tensor
from lib.transformer import positional_encoding

# float32 angles t * w are off by about t * 6e-8, so 1e-4 accepts any sound float32 answer.
_PE_TOLERANCE = 1e-4


def positional_encoding_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(max_len, d_model)`` for :data:`check_positional_encoding`.

    ``d_model`` is even, from 2 to 64; ``max_len`` from 2 to 60. The first case
    is the smallest (2, 2).
    """
    cases = [(2, 2)]
    for _ in range(trials - 1):
        max_len = int(torch.randint(2, 61, (), generator=generator))
        d_model = 2 * int(torch.randint(1, 33, (), generator=generator))
        cases.append((max_len, d_model))
    return cases


def _pe_variants(max_len: int, d_model: int) -> list[tuple[torch.Tensor, str]]:
    """Common slips, each with what to say when a student's answer equals it."""
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    angles = positions * 10000.0 ** (-two_i / d_model)  # (T, D/2)
    sin, cos = torch.sin(angles), torch.cos(angles)
    columns = torch.arange(d_model, dtype=torch.float64)  # (D,)
    column_angles = positions * 10000.0 ** (-columns / d_model)  # (T, D): exponent j/d for column j
    odd = columns % 2 == 1
    from_one = positional_encoding(max_len + 1, d_model, dtype=torch.float64)[1:]
    return [
        (torch.cat((sin, cos), dim=-1),
         "you put all the sines first and then all the cosines; they must alternate: "
         "column 2i is sin(t w_i), column 2i + 1 is cos(t w_i)"),
        (torch.stack((cos, sin), dim=-1).reshape(max_len, d_model),
         "sine and cosine are swapped: even columns 2i hold sin(t w_i), odd columns 2i + 1 hold cos(t w_i)"),
        (torch.where(odd, torch.cos(column_angles), torch.sin(column_angles)),
         "the cosine in column 2i + 1 must use the same frequency as the sine in column 2i: "
         "w_i = 1 / 10000^(2i / d_model), with i the pair index, not the column index"),
        (torch.stack((torch.sin(positions / 10000.0 ** (two_i / 2 / d_model)),
                      torch.cos(positions / 10000.0 ** (two_i / 2 / d_model))), dim=-1).reshape(max_len, d_model),
         "the exponent is 2i / d_model, not i / d_model"),
        (from_one, "positions start at t = 0 (the first row is sin 0 = 0, cos 0 = 1 alternating)"),
    ] + ([(positional_encoding(max_len, d_model, dtype=torch.float64).T,
           "you returned the transpose: one row per position t, one column per dimension")]
         if max_len == d_model else [])


def judge_positional_encoding(cases: list[tuple], results: list) -> None:
    """Compare the student's encodings with :func:`lib.transformer.positional_encoding`."""
    for (max_len, d_model), found in zip(cases, results, strict=True):
        context = f"max_len={max_len}, d_model={d_model}"
        found = _require_tensor(found, context)
        if tuple(found.shape) != (max_len, d_model):
            raise CheckFailed(
                f"for {context} your encoding has shape {tuple(found.shape)}; expected (max_len, d_model) = "
                f"({max_len}, {d_model}): one row per position"
            )
        if not found.is_floating_point():
            raise CheckFailed(f"your encoding has dtype {found.dtype}; return floats")
        found = found.double()
        if torch.isnan(found).any():
            raise CheckFailed(f"your encoding contains NaN for {context}")
        expected = positional_encoding(max_len, d_model, dtype=torch.float64)
        if torch.allclose(found, expected, atol=_PE_TOLERANCE, rtol=0):
            continue
        for wrong, message in _pe_variants(max_len, d_model):
            if torch.allclose(found, wrong, atol=_PE_TOLERANCE, rtol=0):
                raise CheckFailed(f"for {context}: {message}")
        difference = (found - expected).abs()
        t, j = (int(k) for k in torch.unravel_index(difference.argmax(), expected.shape))
        function = "sin" if j % 2 == 0 else "cos"
        raise CheckFailed(
            f"for {context} your P[{t}, {j}] = {found[t, j]:.6f}; expected "
            f"{function}({t} / 10000^({j - j % 2}/{d_model})) = {expected[t, j]:.6f}"
        )


check_positional_encoding = Check(
    "positional encodings agree with lib.transformer.positional_encoding on 12 fresh sizes",
    positional_encoding_cases, judge_positional_encoding,
)


def layer_norm_cases(generator: torch.Generator, trials: int = 15) -> list[tuple]:
    """Fresh inputs ``(x, gamma, beta, eps)`` for :data:`check_layer_norm`.

    ``x`` has shape ``(D,)``, ``(T, D)`` or ``(B, T, D)`` with a non-zero mean and
    a spread far from 1; ``eps`` is large in some cases so that a misplaced
    ``eps`` shows. The batch and position sizes differ from ``D`` so that
    normalising over the wrong axis cannot pass by accident.
    """
    cases = []
    for trial in range(trials):
        dim = int(torch.randint(3, 9, (), generator=generator))
        leading = [(), (dim + 2,), (2, dim + 1)][trial % 3]
        x = 3 * torch.randn(*leading, dim, generator=generator, dtype=torch.float64) + 1.5
        gamma = torch.randn(dim, generator=generator, dtype=torch.float64)
        beta = torch.randn(dim, generator=generator, dtype=torch.float64)
        eps = [1e-5, 0.5][trial % 2]
        cases.append((x, gamma, beta, eps))
    return cases


def judge_layer_norm(cases: list[tuple], results: list) -> None:
    """Compare the student's output with :func:`torch.nn.functional.layer_norm`."""
    for (x, gamma, beta, eps), found in zip(cases, results, strict=True):
        context = f"x of shape {tuple(x.shape)}, eps={eps:g}"
        found = _require_tensor(found, context)
        expected = F.layer_norm(x, (x.shape[-1],), gamma, beta, eps)
        if found.shape != expected.shape:
            raise CheckFailed(f"for {context} your output has shape {tuple(found.shape)}; expected {tuple(x.shape)}")
        found = found.to(expected.dtype)
        if torch.isnan(found).any():
            raise CheckFailed(f"your output contains NaN for {context}")
        if torch.allclose(found, expected, atol=1e-6):
            continue
        mean = x.mean(-1, keepdim=True)
        centred = x - mean
        biased = centred.pow(2).mean(-1, keepdim=True)
        diagnoses = [
            (gamma * centred / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta,
             "you divided by the unbiased variance (n - 1); layer norm uses the mean of squared deviations (n)"),
            (gamma * centred / (torch.sqrt(biased) + eps) + beta,
             "eps goes inside the square root: divide by sqrt(var + eps), not sqrt(var) + eps"),
            (centred / torch.sqrt(biased + eps),
             "you normalised correctly but forgot the scale gamma and the shift beta"),
            (gamma * centred / torch.sqrt(biased + eps),
             "you forgot to add beta"),
        ]
        if x.dim() > 1:
            over_first = (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, unbiased=False, keepdim=True) + eps)
            diagnoses.append((gamma * over_first + beta,
                              "you normalised over the first axis; normalise each vector over its features "
                              "(the last axis, dim=-1)"))
        for wrong, message in diagnoses:
            if wrong.shape == found.shape and torch.allclose(found, wrong, atol=1e-6):
                raise CheckFailed(f"for {context}: {message}")
        difference = (found - expected).abs().max()
        raise CheckFailed(
            f"for {context} your output differs from gamma (x - mean) / sqrt(var + eps) + beta by up to "
            f"{difference:.3g}"
        )


check_layer_norm = Check(
    "layer norm agrees with torch.nn.functional.layer_norm on 15 fresh random cases",
    layer_norm_cases, judge_layer_norm,
    forbidden=("torch.nn.functional.layer_norm", "torch.nn.LayerNorm", "torch.layer_norm"),
)
