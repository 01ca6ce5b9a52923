"""Checkers for the exercises of chapter 11 (self-attention and the Transformer)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lib.checks.core import Check, Slip
from lib.positional import positional_encoding


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


def _angles(max_len: int, d_model: int, exponent) -> torch.Tensor:
    """t / 10000^exponent for every position t and every entry of ``exponent``: (T, len(exponent))."""
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]  # (T, 1)
    return positions * 10000.0 ** (-exponent)


def _pairs(max_len: int, d_model: int, exponent, first=torch.sin, second=torch.cos) -> torch.Tensor:
    """Columns 2i and 2i + 1 hold first(t w_i) and second(t w_i), w_i = 10000^-exponent_i."""
    angles = _angles(max_len, d_model, exponent)  # (T, D/2)
    return torch.stack((first(angles), second(angles)), dim=-1).reshape(max_len, d_model)  # (T, D)


def _pair_exponent(d_model: int) -> torch.Tensor:
    return torch.arange(0, d_model, 2, dtype=torch.float64) / d_model  # 2i / d_model


def _sines_then_cosines(max_len: int, d_model: int) -> torch.Tensor:
    angles = _angles(max_len, d_model, _pair_exponent(d_model))  # (T, D/2)
    return torch.cat((torch.sin(angles), torch.cos(angles)), dim=-1)  # (T, D)


def _column_exponent(max_len: int, d_model: int) -> torch.Tensor:
    columns = torch.arange(d_model, dtype=torch.float64)  # (D,): exponent j/d for column j
    angles = _angles(max_len, d_model, columns / d_model)  # (T, D)
    return torch.where(columns % 2 == 1, torch.cos(angles), torch.sin(angles))


def _reference_pe(max_len: int, d_model: int) -> torch.Tensor:
    return positional_encoding(max_len, d_model, dtype=torch.float64)


def _worst_entry(found: torch.Tensor, expected: torch.Tensor, max_len: int, d_model: int) -> str:
    t, j = (int(k) for k in torch.unravel_index((found - expected).abs().argmax(), expected.shape))
    function = "sin" if j % 2 == 0 else "cos"
    return (f"your P[{t}, {j}] = {found[t, j]:.6f}; expected {function}({t} / 10000^({j - j % 2}/{d_model})) = "
            f"{expected[t, j]:.6f}")


check_positional_encoding = Check(
    "positional encodings agree with lib.positional.positional_encoding on 12 fresh sizes",
    positional_encoding_cases, _reference_pe,
    describe=lambda max_len, d_model: f"max_len={max_len}, d_model={d_model}",
    compared_with="lib.positional.positional_encoding", noun="encoding", layout="(max_len, d_model)",
    slips=(
        Slip(_sines_then_cosines,
             "you put all the sines first and then all the cosines; they must alternate: column 2i is sin(t w_i), "
             "column 2i + 1 is cos(t w_i)"),
        Slip(lambda n, d: _pairs(n, d, _pair_exponent(d), torch.cos, torch.sin),
             "sine and cosine are swapped: even columns 2i hold sin(t w_i), odd columns 2i + 1 hold cos(t w_i)"),
        Slip(_column_exponent, "the cosine in column 2i + 1 must use the same frequency as the sine in column 2i: "
                               "w_i = 1 / 10000^(2i / d_model), with i the pair index, not the column index"),
        Slip(lambda n, d: _pairs(n, d, _pair_exponent(d) / 2), "the exponent is 2i / d_model, not i / d_model"),
        Slip(lambda n, d: _reference_pe(n + 1, d)[1:],
             "positions start at t = 0 (the first row is sin 0 = 0, cos 0 = 1 alternating)"),
        Slip(lambda n, d: _reference_pe(n, d).T,
             "you returned the transpose: one row per position t, one column per dimension"),
    ),
    shape_hint=lambda shape, max_len, d_model: ": one row per position",
    # float32 angles t * w are off by about t * 6e-8, so 1e-4 accepts any sound float32 answer.
    mismatch=_worst_entry, tolerance=dict(atol=1e-4, rtol=0.0),
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


def _normalise(x, gamma, beta, eps, variance="biased", eps_inside=True, scale=True, shift=True, dim=-1):
    """gamma (x - mean) / sqrt(var + eps) + beta over ``dim``; the keywords switch on the usual slips."""
    centred = x - x.mean(dim, keepdim=True)
    var = x.var(dim, correction=int(variance == "unbiased"), keepdim=True)
    out = centred / (torch.sqrt(var + eps) if eps_inside else torch.sqrt(var) + eps)
    return (gamma * out if scale else out) + (beta if shift else 0.0)


check_layer_norm = Check(
    "layer norm agrees with torch.nn.functional.layer_norm on 15 fresh random cases",
    layer_norm_cases, lambda x, gamma, beta, eps: F.layer_norm(x, (x.shape[-1],), gamma, beta, eps),
    describe=lambda x, gamma, beta, eps: f"x of shape {tuple(x.shape)}, eps={eps:g}",
    compared_with="gamma (x - mean) / sqrt(var + eps) + beta", noun="output", layout="x.shape",
    slips=(
        Slip(lambda *case: _normalise(*case, variance="unbiased"),
             "you divided by the unbiased variance (n - 1); layer norm uses the mean of squared deviations (n)"),
        Slip(lambda *case: _normalise(*case, eps_inside=False),
             "eps goes inside the square root: divide by sqrt(var + eps), not sqrt(var) + eps"),
        Slip(lambda x, gamma, beta, eps: _normalise(x, gamma, beta, 0.0),
             "you left out eps: divide by sqrt(var + eps), which keeps a vector of equal entries finite"),
        Slip(lambda *case: _normalise(*case, scale=False, shift=False),
             "you normalised correctly but forgot the scale gamma and the shift beta"),
        Slip(lambda *case: _normalise(*case, shift=False), "you forgot to add beta"),
        Slip(lambda *case: _normalise(*case, dim=0), "you normalised over the first axis; normalise each vector over "
                                                     "its features (the last axis, dim=-1)"),
    ),
    forbidden=("torch.nn.functional.layer_norm", "torch.nn.LayerNorm", "torch.layer_norm"),
)


def cached_step_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(q, k_new, v_new, keys, values)`` for :data:`check_cached_attention_step`.

    ``t`` cached positions (1 to 8) with keys of size ``d`` (2 to 8) and values
    of another size; the scores are large enough that a missing scale shows.
    """
    cases = []
    for _ in range(trials):
        t = int(torch.randint(1, 9, (), generator=generator))
        d = int(torch.randint(2, 9, (), generator=generator))
        dv = d + 1
        q, k_new = (3 * torch.randn(d, generator=generator, dtype=torch.float64) for _ in range(2))
        keys = 3 * torch.randn(t, d, generator=generator, dtype=torch.float64)
        v_new = torch.randn(dv, generator=generator, dtype=torch.float64)
        values = torch.randn(t, dv, generator=generator, dtype=torch.float64)
        cases.append((q, k_new, v_new, keys, values))
    return cases


def _cached_step(q, k_new, v_new, keys, values, append=True, scale=None):
    """softmax(q K^T / scale) V over the cached rows and (if ``append``) the new one."""
    if append:
        keys, values = torch.cat([keys, k_new[None]]), torch.cat([values, v_new[None]])  # (t + 1, d)
    scale = q.shape[0] ** 0.5 if scale is None else scale
    return torch.softmax(keys @ q / scale, dim=0) @ values  # (dv,)


check_cached_attention_step = Check(
    "one decoding step over a key-value cache agrees with attention over the whole prefix on 12 fresh cases",
    cached_step_cases, _cached_step,
    describe=lambda q, k_new, v_new, keys, values: (
        f"{keys.shape[0]} cached positions, keys of size {keys.shape[1]}, values of size {values.shape[1]}"),
    compared_with="softmax(q [K; k_new]^T / sqrt(d)) [V; v_new]", noun="output", layout="(dv,)",
    slips=(
        Slip(lambda *case: _cached_step(*case, append=False),
             "you attended to the cached positions only: append the new key and value first, since the "
             "new position may attend to itself"),
        Slip(lambda q, k, v, K, V: v, "you returned the new value: the new position attends to every "
             "cached position as well as to itself"),
        Slip(lambda *case: _cached_step(*case, scale=1.0), "divide the scores by sqrt(d), d the key size"),
        Slip(lambda *case: _cached_step(*case, scale=float(case[0].shape[0])),
             "divide the scores by sqrt(d), not by d"),
        Slip(lambda *case: _cached_step(*case, scale=case[2].shape[0] ** 0.5),
             "you divided the scores by the square root of the value size; divide by sqrt(d), d the "
             "size of the query and the keys"),
        Slip(lambda *case: _cached_step(*case, scale=(case[3].shape[0] + 1) ** 0.5),
             "you divided the scores by the square root of the number of positions; divide by sqrt(d), "
             "d the size of the query and the keys"),
        Slip(lambda q, k, v, K, V: torch.softmax(torch.cat([K, k[None]]) @ q / q.shape[0] ** 0.5, 0)[:-1] @ V,
             "you appended the new key but not the new value, so the new position's weight multiplies "
             "nothing: append v_new to the values too"),
        Slip(lambda q, k, v, K, V: torch.softmax(torch.cat([k[None], K]) @ q / q.shape[0] ** 0.5, 0)
             @ torch.cat([V, v[None]]),
             "you put the new key at the start and the new value at the end, so each weight multiplies "
             "another position's value: add both at the same end"),
    ),
)
