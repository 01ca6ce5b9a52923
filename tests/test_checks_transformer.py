"""The checkers of chapter 11: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch
import torch.nn.functional as F

from lib.checks import (
    CHECKS, CheckFailed, check_cached_attention_step, check_layer_norm, check_positional_encoding,
)


def test_the_checks_are_registered():
    assert CHECKS["check_positional_encoding"] is check_positional_encoding
    assert CHECKS["check_layer_norm"] is check_layer_norm
    assert CHECKS["check_cached_attention_step"] is check_cached_attention_step


# ---- positional encoding ----------------------------------------------------------------
def pe_with_loops(max_len, d_model):
    encoding = torch.zeros(max_len, d_model)
    for t in range(max_len):
        for i in range(d_model // 2):
            encoding[t, 2 * i] = math.sin(t / 10000 ** (2 * i / d_model))
            encoding[t, 2 * i + 1] = math.cos(t / 10000 ** (2 * i / d_model))
    return encoding


def pe_with_exp_log_and_slices(max_len, d_model):
    positions = torch.arange(max_len).unsqueeze(1).float()
    frequencies = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    encoding = torch.empty(max_len, d_model)
    encoding[:, 0::2] = torch.sin(positions * frequencies)
    encoding[:, 1::2] = torch.cos(positions * frequencies)
    return encoding


@pytest.mark.parametrize("answer", [pe_with_loops, pe_with_exp_log_and_slices])
def test_positional_encoding_accepts_right_answers_written_differently(answer, capsys):
    check_positional_encoding(answer)
    assert capsys.readouterr().out.startswith("✓ positional encodings agree with lib.positional")


def concatenated(max_len, d_model):
    angles = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    return torch.cat((torch.sin(angles), torch.cos(angles)), dim=-1)


def swapped(max_len, d_model):
    return pe_with_exp_log_and_slices(max_len, d_model).reshape(max_len, -1, 2).flip(-1).reshape(max_len, d_model)


def column_exponent(max_len, d_model):
    angles = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(d_model) / d_model)
    return torch.where(torch.arange(d_model) % 2 == 1, torch.cos(angles), torch.sin(angles))


def i_over_d(max_len, d_model):
    encoding = torch.empty(max_len, d_model)
    angles = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(d_model // 2) / d_model)
    encoding[:, 0::2], encoding[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return encoding


def from_one(max_len, d_model):
    return pe_with_exp_log_and_slices(max_len + 1, d_model)[1:]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (concatenated, "all the sines first"),
        (swapped, "sine and cosine are swapped"),
        (column_exponent, "pair index, not the column index"),
        (i_over_d, "the exponent is 2i / d_model, not i / d_model"),
        (from_one, "positions start at t = 0"),
        (lambda n, d: pe_with_loops(n, d).T, "you returned the transpose"),
        (lambda n, d: pe_with_loops(n, d)[:, :-1] if n == d else pe_with_loops(n, d).T,
         r"has shape \(\d+, \d+\); expected \(max_len, d_model\)"),
        (lambda n, d: pe_with_loops(n, d) + 0.01, r"your P\[\d+, \d+\] = .*; expected (sin|cos)"),
        (lambda n, d: pe_with_loops(n, d).long(), "return floats"),
        (lambda n, d: pe_with_loops(n, d).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda n, d: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_positional_encoding_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_positional_encoding(answer)


def test_positional_encoding_first_case_is_worked_by_hand():
    # P for max_len = 2, d_model = 2: rows (sin 0, cos 0) = (0, 1) and (sin 1, cos 1).
    judge = check_positional_encoding.judge
    judge([(2, 2)], [torch.tensor([[0.0, 1.0], [math.sin(1), math.cos(1)]])])
    with pytest.raises(CheckFailed, match="swapped"):
        judge([(2, 2)], [torch.tensor([[1.0, 0.0], [math.cos(1), math.sin(1)]])])


# ---- layer norm -----------------------------------------------------------------------------
def layer_norm_by_hand(x, gamma, beta, eps):
    mean = x.sum(-1, keepdim=True) / x.shape[-1]
    variance = ((x - mean) ** 2).sum(-1, keepdim=True) / x.shape[-1]
    return gamma * (x - mean) * torch.rsqrt(variance + eps) + beta


def layer_norm_with_torch_var(x, gamma, beta, eps):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return torch.addcmul(beta, gamma, (x - mean) / (var + eps).sqrt())


@pytest.mark.parametrize("answer", [layer_norm_by_hand, layer_norm_with_torch_var])
def test_layer_norm_accepts_right_answers_written_differently(answer, capsys):
    check_layer_norm(answer)
    assert capsys.readouterr().out.startswith("✓ layer norm agrees with torch.nn.functional.layer_norm")


def centred(x):
    return x - x.mean(-1, keepdim=True)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda x, g, b, e: g * centred(x) / torch.sqrt(x.var(-1, keepdim=True) + e) + b, "unbiased variance"),
        (lambda x, g, b, e: g * centred(x) / (x.std(-1, unbiased=False, keepdim=True) + e) + b,
         "eps goes inside the square root"),
        (lambda x, g, b, e: centred(x) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + e),
         "forgot the scale gamma and the shift beta"),
        (lambda x, g, b, e: g * centred(x) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + e),
         "forgot to add beta"),
        (lambda x, g, b, e: g * (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + e) + b
         if x.dim() > 1 else layer_norm_by_hand(x, g, b, e), "normalised over the first axis"),
        (lambda x, g, b, e: layer_norm_by_hand(x, g, b, e)[..., :-1], "has shape"),
        (lambda x, g, b, e: layer_norm_by_hand(x, g, b, e) * 1.01, "differs from gamma"),
        (lambda x, g, b, e: layer_norm_by_hand(x, g, b, e) * float("nan"), "contains NaN"),
    ],
)
def test_layer_norm_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_layer_norm(answer)


def test_layer_norm_case_worked_by_hand():
    # x = (1, 2, 3): mean 2, biased variance 2/3; with eps = 0.5 the scale is 1 / sqrt(7/6).
    x, gamma, beta = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), torch.ones(3, dtype=torch.float64), \
        torch.zeros(3, dtype=torch.float64)
    scale = 1 / math.sqrt(2 / 3 + 0.5)
    check_layer_norm.judge([(x, gamma, beta, 0.5)], [torch.tensor([-scale, 0.0, scale], dtype=torch.float64)])
    with pytest.raises(CheckFailed, match="unbiased"):
        unbiased = 1 / math.sqrt(1 + 0.5)
        check_layer_norm.judge([(x, gamma, beta, 0.5)], [torch.tensor([-unbiased, 0.0, unbiased])])


# ---------------------------------------------------------------------------
# One decoding step over a KV cache.
# ---------------------------------------------------------------------------


def test_cached_step_checker_accepts_right_answers_written_differently(capsys):
    def book(q, k_new, v_new, keys, values):
        keys, values = torch.cat([keys, k_new[None]]), torch.cat([values, v_new[None]])
        return torch.softmax(keys @ q / q.shape[0] ** 0.5, dim=0) @ values

    def with_torch(q, k_new, v_new, keys, values):  # torch's attention over the appended rows
        keys, values = torch.vstack([keys, k_new]), torch.vstack([values, v_new])
        return F.scaled_dot_product_attention(q[None, None], keys[None], values[None])[0, 0]

    for answer in (book, with_torch):
        check_cached_attention_step(answer)
        assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(("answer", "message"), [
    (lambda q, k, v, K, V: torch.softmax(K @ q / q.shape[0] ** 0.5, 0) @ V, "cached positions only"),
    (lambda q, k, v, K, V: v, "you returned the new value"),
    (lambda q, k, v, K, V: torch.softmax(torch.cat([K, k[None]]) @ q, 0) @ torch.cat([V, v[None]]),
     r"divide the scores by sqrt\(d\), d the key size"),
    (lambda q, k, v, K, V: torch.softmax(torch.cat([K, k[None]]) @ q / q.shape[0], 0) @ torch.cat([V, v[None]]),
     r"not by d"),
    (lambda q, k, v, K, V: scaled_by_value_size(q, k, v, K, V), "square root of the value size"),
    (lambda q, k, v, K, V: scaled_by_positions(q, k, v, K, V), "square root of the number of positions"),
    (lambda q, k, v, K, V: new_value_dropped(q, k, v, K, V), "but not the new value"),
    (lambda q, k, v, K, V: key_prepended_value_appended(q, k, v, K, V), "at the same end"),
])
def test_cached_step_checker_names_the_slip(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_cached_attention_step(answer)


# ---- fairness: independent right answers and the most plausible wrong ones, over 20 seeds ----------
# (tests/test_exercise_fairness.py runs each on 20 draws of the cases). The right answers are written
# from the exercise statements alone, by other methods than the book's solutions.
def pe_numpy_float64(max_len, d_model):
    """Statement read literally, in numpy and float64: P[t, 2i] = sin(t / 10000^(2i/d))."""
    import numpy as np

    t = np.arange(max_len, dtype=np.float64)[:, None]  # (T, 1)
    two_i = 2 * np.arange(d_model // 2, dtype=np.float64)[None, :]  # (1, D/2)
    angles = t / np.power(10000.0, two_i / d_model)
    encoding = np.empty((max_len, d_model))
    encoding[:, 0::2], encoding[:, 1::2] = np.sin(angles), np.cos(angles)
    return torch.from_numpy(encoding)


def layer_norm_loops_float64(x, gamma, beta, eps):
    """One vector at a time, with Python sums in float64."""
    rows = x.reshape(-1, x.shape[-1]).tolist()
    out = []
    for row in rows:
        mean = sum(row) / len(row)
        variance = sum((v - mean) ** 2 for v in row) / len(row)
        out.append([(v - mean) / math.sqrt(variance + eps) * g + b
                    for v, g, b in zip(row, gamma.tolist(), beta.tolist())])
    return torch.tensor(out, dtype=torch.float64).reshape(x.shape)


def layer_norm_without_eps(x, gamma, beta, eps):
    return gamma * centred(x) / x.std(-1, unbiased=False, keepdim=True) + beta


def cached_step_loops(q, k_new, v_new, keys, values):
    """The new position attends to the cached ones and to itself: scores, a stable softmax, a sum."""
    rows_k, rows_v = keys.tolist() + [k_new.tolist()], values.tolist() + [v_new.tolist()]
    d = len(q)
    scores = [sum(a * b for a, b in zip(q.tolist(), key)) / math.sqrt(d) for key in rows_k]
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    out = [sum(e / total * value[j] for e, value in zip(exps, rows_v)) for j in range(len(rows_v[0]))]
    return torch.tensor(out, dtype=torch.float64)


def cached_step_with_torch(q, k_new, v_new, keys, values):
    keys, values = torch.vstack([keys, k_new]), torch.vstack([values, v_new])
    return F.scaled_dot_product_attention(q[None, None], keys[None], values[None])[0, 0]


def cached_only(q, k, v, K, V):
    return torch.softmax(K @ q / q.shape[0] ** 0.5, 0) @ V


def new_value_only(q, k, v, K, V):
    return v.clone()


def unscaled(q, k, v, K, V):
    return torch.softmax(torch.cat([K, k[None]]) @ q, 0) @ torch.cat([V, v[None]])


def scaled_by_d(q, k, v, K, V):
    return torch.softmax(torch.cat([K, k[None]]) @ q / q.shape[0], 0) @ torch.cat([V, v[None]])


def scaled_by_value_size(q, k, v, K, V):
    keys, values = torch.cat([K, k[None]]), torch.cat([V, v[None]])
    return torch.softmax(keys @ q / math.sqrt(values.shape[1]), 0) @ values


def scaled_by_positions(q, k, v, K, V):
    keys, values = torch.cat([K, k[None]]), torch.cat([V, v[None]])
    return torch.softmax(keys @ q / math.sqrt(keys.shape[0]), 0) @ values


def new_value_dropped(q, k, v, K, V):  # weights over t + 1 keys, values of the t cached ones
    weights = torch.softmax(torch.cat([K, k[None]]) @ q / math.sqrt(q.shape[0]), 0)
    return weights[:-1] @ V


def key_prepended_value_appended(q, k, v, K, V):
    weights = torch.softmax(torch.cat([k[None], K]) @ q / math.sqrt(q.shape[0]), 0)
    return weights @ torch.cat([V, v[None]])


def layer_norm_unbiased(x, g, b, e):
    return g * centred(x) / torch.sqrt(x.var(-1, keepdim=True) + e) + b


def layer_norm_eps_outside(x, g, b, e):
    return g * centred(x) / (x.std(-1, unbiased=False, keepdim=True) + e) + b


def layer_norm_no_affine(x, g, b, e):
    return centred(x) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + e)


def layer_norm_no_beta(x, g, b, e):
    return g * centred(x) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + e)


def layer_norm_first_axis(x, g, b, e):
    if x.dim() == 1:
        return layer_norm_by_hand(x, g, b, e)
    return g * (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + e) + b


FAIRNESS = {
    "check_positional_encoding": {
        "right": [pe_with_loops, pe_numpy_float64],
        "wrong": [
            (concatenated, "all the sines first"),
            (swapped, "sine and cosine are swapped"),
            (column_exponent, "pair index, not the column index"),
            (i_over_d, r"the exponent is 2i / d_model, not i / d_model"),
            (from_one, "positions start at t = 0"),
        ],
    },
    "check_layer_norm": {
        "right": [layer_norm_loops_float64, layer_norm_with_torch_var],
        "wrong": [
            (layer_norm_unbiased, "unbiased variance"),
            (layer_norm_eps_outside, "eps goes inside the square root"),
            (layer_norm_without_eps, "you left out eps"),
            (layer_norm_no_affine, "forgot the scale gamma and the shift beta"),
            (layer_norm_no_beta, "forgot to add beta"),
            (layer_norm_first_axis, "normalised over the first axis"),
        ],
    },
    "check_cached_attention_step": {
        "right": [cached_step_loops, cached_step_with_torch],
        "wrong": [
            (cached_only, "cached positions only"),
            (new_value_only, "you returned the new value"),
            (unscaled, r"divide the scores by sqrt\(d\), d the key size"),
            (scaled_by_d, "not by d"),
            (scaled_by_value_size, "square root of the value size"),
            (scaled_by_positions, "square root of the number of positions"),
            (new_value_dropped, "appended the new key but not the new value"),
            (key_prepended_value_appended, "new key at the start and the new value at the end"),
        ],
    },
}
