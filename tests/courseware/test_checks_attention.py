"""The checkers of chapter 9: right answers pass however they are written (and, for the experiment,
however the search stopped), wrong ones fail saying why. ``FAIRNESS`` holds each checker to
independent right answers and the most plausible wrong ones (tests/courseware/test_exercise_fairness.py);
the two backward-pass checkers are also the examples of tests/courseware/test_checks.py."""
import math
import re

import pytest
import torch
import torch.nn.functional as F

from lib.part4_attention.attention import masked_softmax, scaled_dot_product_attention
from courseware.checks import (
    CHECKS, CheckFailed, check_attention_backward, check_masked_softmax_backward, check_sharpening_scale,
)
from courseware.checks.attention import (
    SHARPENING_RTOL, attention_backward_by_autograd, attention_backward_cases, attention_backward_with,
    masked_softmax_backward_by_autograd, masked_softmax_backward_cases, masked_softmax_backward_with,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def test_the_checkers_are_registered_under_their_names():
    assert CHECKS["check_sharpening_scale"] is check_sharpening_scale
    assert CHECKS["check_masked_softmax_backward"] is check_masked_softmax_backward
    assert CHECKS["check_attention_backward"] is check_attention_backward


# ---- the backward pass of the masked softmax: written from the statement -----------------------
def weights_by_rows(scores, valid_lens):
    """α row by row in Python floats: exp of the shifted valid scores over their sum, 0 elsewhere."""
    weights = [[[0.0] * scores.shape[2] for _ in range(scores.shape[1])] for _ in range(scores.shape[0])]
    for b in range(scores.shape[0]):
        n = int(valid_lens[b])
        for t in range(scores.shape[1]):
            if n == 0:
                continue
            row = [float(s) for s in scores[b, t, :n]]
            exps = [math.exp(s - max(row)) for s in row]
            for i, e in enumerate(exps):
                weights[b][t][i] = e / sum(exps)
    return weights


def softmax_backward_by_jacobian_loops(scores, valid_lens, grad_weights):
    """The chain rule in loops over the Jacobian's entries: ∂ℓ/∂s_i = Σ_j g_j ∂α_j/∂s_i with
    ∂α_j/∂s_i = α_j (δ_ji - α_i). Right values, at S² operations per row: the statement asks for a
    form in proportion to S, which only a reader of the code can hold it to, so this is no FAIRNESS
    answer."""
    weights = weights_by_rows(scores, valid_lens)
    out = torch.zeros_like(scores)
    batch, queries, keys = scores.shape
    for b in range(batch):
        for t in range(queries):
            a, g = weights[b][t], [float(x) for x in grad_weights[b, t]]
            for i in range(keys):
                out[b, t, i] = sum(g[j] * a[j] * ((i == j) - a[i]) for j in range(keys))
    return out


def softmax_backward_by_row_loops(scores, valid_lens, grad_weights):
    """The O(S) form in loops over Python floats: per row the weighted mean ḡ = Σ_j g_j α_j, then
    α_i (g_i - ḡ); masked keys and empty rows keep their zeros."""
    weights = weights_by_rows(scores, valid_lens)
    out = torch.zeros_like(scores)
    batch, queries, keys = scores.shape
    for b in range(batch):
        for t in range(queries):
            a, g = weights[b][t], [float(x) for x in grad_weights[b, t]]
            mean = sum(gj * aj for gj, aj in zip(g, a))
            for i in range(keys):
                out[b, t, i] = a[i] * (g[i] - mean)
    return out


def softmax_backward_in_log_space(scores, valid_lens, grad_weights):
    """Vectorised another way: the weights as exp(log_softmax) of scores masked with finfo.min (no -inf,
    so no NaN to clean up), zeroed with torch.where, ḡ by einsum."""
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    masked = torch.where(keep, scores, torch.full_like(scores, torch.finfo(scores.dtype).min))
    weights = torch.where(keep, torch.log_softmax(masked, -1).exp(), torch.zeros_like(scores))
    mean = torch.einsum("bts,bts->bt", weights, grad_weights)
    return weights * grad_weights - weights * mean[..., None]


def masked_softmax_float64(scores, valid_lens):
    """A forward pass of our own: masked scores to -1e300, exp of the shifted row, zeros for an empty row."""
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    shifted = scores.masked_fill(~keep, -1e300)
    exps = torch.exp(shifted - shifted.amax(-1, keepdim=True)) * keep
    totals = exps.sum(-1, keepdim=True)
    return exps / torch.where(totals > 0, totals, torch.ones_like(totals))


def softmax_backward_by_finite_differences(scores, valid_lens, grad_weights, step=1e-6):
    """Central differences of ℓ(s) = Σ g ⊙ α(s), one score at a time (all of them as one batch), in float64."""
    nudges = step * torch.eye(scores.numel(), dtype=scores.dtype).view(-1, *scores.shape)  # one per score

    def losses(shifted):  # ℓ for each nudged copy: (N,)
        return (grad_weights * masked_softmax_float64(shifted, valid_lens)).flatten(1).sum(1)

    return ((losses(scores + nudges) - losses(scores - nudges)) / (2 * step)).view(scores.shape)


def softmax_backward_float32(scores, valid_lens, grad_weights):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    weights = torch.softmax(scores.float().masked_fill(~keep, -math.inf), -1).nan_to_num(0.0)
    grad = grad_weights.float()
    return weights * (grad - (grad * weights).sum(-1, keepdim=True))


def masked_weights(scores, valid_lens):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(~keep, -1e30), -1) * keep


def softmax_backward_weights_times_g(scores, valid_lens, grad_weights):
    """Forgets that every weight of a row depends on every score: α ⊙ g."""
    return masked_weights(scores, valid_lens) * grad_weights


def softmax_backward_like_a_sigmoid(scores, valid_lens, grad_weights):
    """The Jacobian's diagonal alone, α_i (1 - α_i), as for an elementwise sigmoid."""
    weights = masked_weights(scores, valid_lens)
    return grad_weights * weights - grad_weights * weights**2


def softmax_backward_without_alpha(scores, valid_lens, grad_weights):
    """g minus its weighted mean, not scaled by α: not 0 at masked keys."""
    weights = masked_weights(scores, valid_lens)
    return grad_weights - torch.einsum("bts,bts->bt", grad_weights, weights)[..., None]


def softmax_backward_of_the_whole_row(scores, valid_lens, grad_weights):
    """The mask forgotten: the softmax of all S scores, differentiated correctly."""
    weights = scores.softmax(-1)
    return weights * grad_weights - weights * (weights * grad_weights).sum(-1, keepdim=True)


def softmax_backward_nan_on_empty_rows(scores, valid_lens, grad_weights):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), -1)  # NaN rows where valid_lens is 0
    return weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))


def softmax_backward_summed_over_queries(scores, valid_lens, grad_weights):
    weights = masked_weights(scores, valid_lens)
    return weights * (grad_weights - (grad_weights * weights).sum(1, keepdim=True))


def softmax_backward_with_empty_rows_uniform(scores, valid_lens, grad_weights):
    """Masks with -1e9 instead of -inf: right wherever a row has a valid key, but an empty row's weights
    become uniform instead of 0, so its gradient is not 0."""
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    weights = torch.softmax(scores.masked_fill(~keep, -1e9), -1)
    return weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True))


def softmax_backward_with_the_valid_sum_of_g(scores, valid_lens, grad_weights):
    """Subtracts Σ_j g_j over the valid keys, unweighted: no slip of the checker's, caught by the row sums."""
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    weights = masked_weights(scores, valid_lens)
    return weights * (grad_weights - (grad_weights * keep).sum(-1, keepdim=True))


def test_the_reference_is_the_closed_form_and_zero_where_masked():
    for case in masked_softmax_backward_cases(torch.Generator().manual_seed(3)):
        scores, valid_lens, grad_weights = case
        expected = masked_softmax_backward_by_autograd(*case)
        assert torch.allclose(masked_softmax_backward_with(*case), expected, atol=1e-14, rtol=0)
        for b, n in enumerate(valid_lens.tolist()):
            assert torch.equal(expected[b, :, n:], torch.zeros_like(expected[b, :, n:]))
        assert torch.isfinite(expected).all()


def test_the_first_case_has_an_empty_row_and_a_masked_key_the_gradient_reaches():
    scores, valid_lens, grad_weights = masked_softmax_backward_cases(torch.Generator().manual_seed(0))[0]
    assert valid_lens.tolist() == [0, 2] and scores.shape == (2, 3, 4)
    assert (grad_weights[1, :, 2:] != 0).all()  # a gradient that reaches masked keys shows there


def test_every_slip_of_the_softmax_checker_differs_from_the_reference_on_the_first_case():
    for seed in range(20):
        case = masked_softmax_backward_cases(torch.Generator().manual_seed(seed))[0]
        expected = masked_softmax_backward_by_autograd(*case)
        for slip in CHECKS["check_masked_softmax_backward"].slips:
            assert (slip.answer(*case) - expected).abs().max() > 1e-3, (seed, slip.message)


@pytest.mark.parametrize("answer", [softmax_backward_by_jacobian_loops, softmax_backward_by_row_loops,
                                    softmax_backward_in_log_space, softmax_backward_by_finite_differences,
                                    softmax_backward_float32])
def test_softmax_backward_accepts_right_answers(answer, capsys):
    check_masked_softmax_backward(answer)
    assert capsys.readouterr().out.startswith("✓ your ∂ℓ/∂scores agrees with autograd")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (softmax_backward_weights_times_g, "you returned α ⊙ g"),
        (softmax_backward_without_alpha, "you left out that factor"),
        (softmax_backward_with_the_valid_sum_of_g,
         r"your gradient for batch \d, query \d sums to \S+ over the keys; each row must sum to 0"),
        (lambda s, v, g: softmax_backward_float32(s, v, g).double()
         + 0.1 * (torch.arange(s.shape[-1]) >= v[:, None, None]),
         r"batch \d has valid length \d, but your gradient at key positions >= \d is not 0 \(largest: 0\.1\)"),
        (softmax_backward_nan_on_empty_rows, "contains NaN or inf .*has weights 0 and gets a gradient of zeros"),
        (lambda s, v, g: softmax_backward_float32(s, v, g).double() * 1.01, "differs from autograd's by up to"),
    ],
)
def test_softmax_backward_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_masked_softmax_backward(answer)


# ---- the backward pass of scaled dot-product attention: written from the statement ------------
def attention_backward_by_einsum_and_jacobians(q, k, v, grad_out):
    """Every step with einsum and the softmax's full Jacobian diag(P) - P Pᵀ, row by row."""
    d = q.shape[-1]
    weights = torch.einsum("...td,...sd->...ts", q, k).div(d**0.5).softmax(-1)  # (..., T, S)
    jacobian = torch.diag_embed(weights) - torch.einsum("...ti,...tj->...tij", weights, weights)  # (..., T, S, S)
    grad_v = torch.einsum("...ts,...td->...sd", weights, grad_out)
    grad_weights = torch.einsum("...td,...sd->...ts", grad_out, v)
    grad_scores = torch.einsum("...tj,...tji->...ti", grad_weights, jacobian) / d**0.5  # ∂ℓ/∂(q kᵀ)
    grad_q = torch.einsum("...ts,...sd->...td", grad_scores, k)
    grad_k = torch.einsum("...ts,...td->...sd", grad_scores, q)
    return torch.cat([grad_q, grad_k, grad_v], dim=-2)


def attention_float64(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    exps = torch.exp(scores - scores.amax(-1, keepdim=True))
    return exps / exps.sum(-1, keepdim=True) @ v


def attention_backward_by_finite_differences(q, k, v, grad_out, step=1e-6):
    """Central differences of ℓ = Σ dO ⊙ O(q, k, v), one entry of q, k or v at a time (each tensor's
    entries as one batch, on a new first axis), in float64."""
    inputs, grads = (q, k, v), []
    for which, tensor in enumerate(inputs):
        nudges = step * torch.eye(tensor.numel(), dtype=tensor.dtype).view(-1, *tensor.shape)

        def losses(sign):  # ℓ for each nudged copy: (N,)
            nudged = [t + sign * nudges if i == which else t for i, t in enumerate(inputs)]
            return (grad_out * attention_float64(*nudged)).flatten(1).sum(1)

        grads.append(((losses(1) - losses(-1)) / (2 * step)).view(tensor.shape))
    return torch.cat(grads, dim=-2)


def attention_backward_float32(q, k, v, grad_out):
    q, k, v, grad_out = (t.float() for t in (q, k, v, grad_out))
    scale = q.shape[-1] ** -0.5
    weights = torch.softmax(q @ k.mT * scale, -1)
    grad_weights = grad_out @ v.mT
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True)) * scale
    return torch.cat([grad_scores @ k, grad_scores.mT @ q, weights.mT @ grad_out], dim=-2)


def backward_parts(q, k, v, grad_out, scale_scores=True, scale_grads=True, weights_transposed=True,
                   row_sum=True, dk_transposed=True):
    """(dq, dk, dv), right by default; each flag set to False is one mistake."""
    root = math.sqrt(q.shape[-1])
    weights = torch.softmax(q @ k.mT / (root if scale_scores else 1.0), -1)
    grad_v = (weights.mT if weights_transposed else weights) @ grad_out
    grad_weights = grad_out @ v.mT
    grad_scores = weights * grad_weights
    if row_sum:
        grad_scores = grad_scores - weights * (weights * grad_weights).sum(-1, keepdim=True)
    if scale_grads:
        grad_scores = grad_scores / root
    return grad_scores @ k, (grad_scores.mT if dk_transposed else grad_scores) @ q, grad_v


def attention_backward_unscaled(q, k, v, grad_out):
    """The 1/√d forgotten everywhere: the backward pass of softmax(q kᵀ) v."""
    return torch.cat(backward_parts(q, k, v, grad_out, scale_scores=False, scale_grads=False), -2)


def attention_backward_without_scale_in_grads(q, k, v, grad_out):
    return torch.cat(backward_parts(q, k, v, grad_out, scale_grads=False), -2)


def attention_backward_dv_is_p_do(q, k, v, grad_out):
    return torch.cat(backward_parts(q, k, v, grad_out, weights_transposed=False), -2)


def attention_backward_without_row_sum(q, k, v, grad_out):
    return torch.cat(backward_parts(q, k, v, grad_out, row_sum=False), -2)


def attention_backward_dk_untransposed(q, k, v, grad_out):
    return torch.cat(backward_parts(q, k, v, grad_out, dk_transposed=False), -2)


def attention_backward_in_reverse_order(q, k, v, grad_out):
    return torch.cat(backward_parts(q, k, v, grad_out)[::-1], -2)


def test_the_reference_agrees_with_lib_and_with_the_written_out_gradients():
    for case in attention_backward_cases(torch.Generator().manual_seed(5)):
        q, k, v, grad_out = case
        expected = attention_backward_by_autograd(*case)
        assert torch.allclose(torch.cat(attention_backward_with(*case), -2), expected, atol=1e-12, rtol=0)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        torch.autograd.backward(scaled_dot_product_attention(*leaves)[0], grad_out)
        assert torch.allclose(torch.cat([t.grad for t in leaves], -2), expected, atol=1e-12, rtol=0)


def test_the_attention_cases_start_with_t_equal_to_s_then_three_different_sizes():
    cases = attention_backward_cases(torch.Generator().manual_seed(0))
    shapes = [(q.shape[-2], k.shape[-2], q.shape[-1]) for q, k, v, grad_out in cases]
    assert shapes[0][0] == shapes[0][1] != shapes[0][2]
    assert all(len({*sizes}) == 3 for sizes in shapes[1:])
    assert {q.dim() for q, *_ in cases} == {3, 4}
    assert all(v.shape == k.shape and grad_out.shape == q.shape for q, k, v, grad_out in cases)


def test_every_slip_of_the_attention_checker_differs_from_the_reference_on_the_first_case():
    for seed in range(20):
        case = attention_backward_cases(torch.Generator().manual_seed(seed))[0]
        expected = attention_backward_by_autograd(*case)
        for slip in CHECKS["check_attention_backward"].slips:
            assert (slip.answer(*case) - expected).abs().max() > 1e-3, (seed, slip.message)


def test_a_slip_whose_products_do_not_fit_matches_nothing():
    case = attention_backward_cases(torch.Generator().manual_seed(0))[1]  # T, S and d all differ
    [slip] = [s for s in CHECKS["check_attention_backward"].slips if s.message.startswith("dv is P dO")]
    assert slip.answer(*case).isnan().all()


@pytest.mark.parametrize("answer", [attention_backward_by_einsum_and_jacobians,
                                    attention_backward_by_finite_differences, attention_backward_float32])
def test_attention_backward_accepts_right_answers(answer, capsys):
    check_attention_backward(answer)
    assert capsys.readouterr().out.startswith("✓ your dq, dk and dv agree with autograd")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (attention_backward_unscaled, "you left out the 1/√d"),
        (attention_backward_without_scale_in_grads, "dq and dk lack the factor 1/√d"),
        (attention_backward_dv_is_p_do, r"dv is P dO; the output is P v, so dv = Pᵀ dO"),
        (attention_backward_without_row_sum, r"your gradient of the scores, dA, is P ⊙ dP"),
        (attention_backward_dk_untransposed, r"dk is dA q / √d"),
        (attention_backward_in_reverse_order, r"concatenate in the order dq, dk, dv"),
        (lambda q, k, v, g: backward_parts(q, k, v, g)[0],
         r"your gradients have shape .*; expected \(\.\.\., T \+ 2S, d\) = .*: return all three gradients in one "
         r"tensor"),
        (lambda q, k, v, g: torch.stack(backward_parts(q, k, v, g)),
         r"concatenate the three along the rows, torch.cat\(\[dq, dk, dv\], dim=-2\)"),
        (lambda q, k, v, g: backward_parts(q, k, v, g),
         r"must return a torch.Tensor; it returned tuple: return one tensor, torch.cat\(\[dq, dk, dv\], dim=-2\)$"),
        (lambda q, k, v, g: list(backward_parts(q, k, v, g)), "it returned list: return one tensor, torch.cat"),
        (lambda q, k, v, g: torch.cat(backward_parts(q, k, v, g)),  # dim 0, torch.cat's default (T = S first)
         r"shape \(\d+, \d+, \d+\); .*: concatenate along dim=-2, .*; torch.cat without dim joins them along the "
         "first axis"),
        (lambda q, k, v, g: torch.cat(backward_parts(q, k, v, g), -1),
         r"concatenate along dim=-2, the rows, torch.cat\(\[dq, dk, dv\], dim=-2\), not the last axis"),
        (lambda q, k, v, g: torch.cat(backward_parts(q, k, v, g), 1),  # right for (B,), not for (B, H)
         r"raised RuntimeError: Sizes of tensors must match.*If torch.cat raised it, concatenate along dim=-2"),
        (lambda q, k, v, g: torch.cat([*backward_parts(q, k, v, g)[:2], 2 * backward_parts(q, k, v, g)[2]], -2),
         r"your dv differs from autograd's: by up to \S+, in dv at index \(.*\); your dq and dk agree with it"),
        (lambda q, k, v, g: torch.cat([backward_parts(q, k, v, g)[0] * 1.5, *backward_parts(q, k, v, g)[1:]], -2),
         r"your dq differs from autograd's: .*; your dk and dv agree with it"),
        (lambda q, k, v, g: (q @ v.mT).sum(), r"shape \(\); expected \(\.\.\., T \+ 2S, d\)"),
        (lambda q, k, v, g: torch.softmax(q @ k, -1), r"raised RuntimeError.*\. Check each product's shapes"),
    ],
)
def test_attention_backward_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_attention_backward(answer)


def test_a_tuple_reported_by_the_grader_gets_the_same_hint():
    """In the grader the sandbox's probe reports a result that is no tensor as an error text: the hint
    follows it there, and a checker without a hint keeps the probe's words alone."""
    from courseware.probe import _encode
    PROBE_NOT_A_TENSOR = _encode((torch.zeros(1),), torch, bytearray())["error"]
    check = CHECKS["check_attention_backward"]
    cases = check.make_cases(torch.Generator().manual_seed(0))
    with pytest.raises(CheckFailed, match=r"it returned tuple \(not a torch.Tensor\) for q .*: return one tensor, "
                                          r"torch.cat\(\[dq, dk, dv\], dim=-2\)$"):
        check.judge(cases, [PROBE_NOT_A_TENSOR] * len(cases))
    check = CHECKS["check_masked_softmax_backward"]
    cases = check.make_cases(torch.Generator().manual_seed(0))
    with pytest.raises(CheckFailed, match=r"it returned tuple \(not a torch.Tensor\) for scores of shape "
                                          r"\(2, 3, 4\), valid_lens \[0, 2\]$"):
        check.judge(cases, [PROBE_NOT_A_TENSOR] * len(cases))


def test_the_scan_flags_a_softmax_backward_that_builds_the_jacobian():
    """The statement asks for no S × S Jacobian; a value cannot show it, so the grader's scan flags the
    usual ways to build one for a human to read, and not the O(S) form."""
    from courseware.grading.scan import review_flags
    forbidden = CHECKS["check_masked_softmax_backward"].forbidden
    header = "import torch\ndef f(scores, valid_lens, g):\n    a = torch.softmax(scores, -1)\n"
    for jacobian in ("torch.diag_embed(a) - a[..., :, None] * a[..., None, :]",
                     "a[..., :, None] * torch.eye(a.shape[-1]) - a[..., :, None] * a[..., None, :]",
                     "torch.diag(a[0, 0]) - torch.outer(a[0, 0], a[0, 0])"):
        assert review_flags(header + f"    return {jacobian}\n", forbidden), jacobian
    linear = header + "    return a * (g - (g * a).sum(-1, keepdim=True))\n"
    assert review_flags(linear, forbidden) == []


# ---- the scale that makes attention nearly hard -----------------------------------------------
def largest_weight(c, scores):
    return torch.softmax(c * scores, dim=0).max()


def scale_by_doubling_then_bisection(scores, top):
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < top:
        high *= 2
    for _ in range(80):
        middle = (low + high) / 2
        if largest_weight(middle, scores) < top:
            low = middle
        else:
            high = middle
    return torch.tensor(high)


def scale_stopping_on_the_weight(scores, top):
    """The statement read literally: bisect on c until the largest weight is within a relative
    1e-6 of top, and stop there (c itself is then known only as finely as the weight needs)."""
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < top:
        low, high = high, 2 * high
    while True:
        middle = (low + high) / 2
        weight = float(largest_weight(middle, scores))
        if abs(weight - top) < 0.99e-6 * top:
            return torch.tensor(middle, dtype=torch.float64)
        low, high = (middle, high) if weight < top else (low, middle)


def scale_by_newton_on_log_weight(scores, top):
    """Newton's method on log α_max(c) - log top, whose derivative is max(s) - E_α[s] > 0 (float32 result)."""
    c = 1.0
    for _ in range(100):
        weights = torch.softmax(c * scores, dim=0)
        slope = float(scores.max() - (weights * scores).sum())
        c = max(c - (math.log(float(weights.max())) - math.log(top)) / slope, c / 4)
    return torch.tensor(c, dtype=torch.float32)


def scale_for_the_two_largest_only(scores, top):
    first, second = scores.topk(2).values
    return math.log(top / (1 - top)) / (first - second)


def temperature_instead_of_scale(scores, top):
    return 1 / scale_stopping_on_the_weight(scores, top)


def scale_stopping_on_a_loose_weight(scores, top):
    """Stops when the weight is within 1e-3 of top: a thousand times the relative error allowed."""
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < top:
        low, high = high, 2 * high
    while True:
        middle = (low + high) / 2
        weight = float(largest_weight(middle, scores))
        if abs(weight - top) < 1e-3:
            return torch.tensor(middle, dtype=torch.float64)
        low, high = (middle, high) if weight < top else (low, middle)


def the_weight_instead_of_the_scale(scores, top):
    return torch.tensor(top, dtype=torch.float64)


def scale_at_weight(scores, weight):
    """The c at which the largest weight is ``weight``, by doubling and 80 bisection steps, in float64."""
    low, high = 0.0, 1.0
    while largest_weight(high, scores) < weight:
        low, high = high, 2 * high
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if largest_weight(middle, scores) < weight else (low, middle)
    return torch.tensor((low + high) / 2, dtype=torch.float64)


def scale_just_below_the_bound(scores, top):
    """A search that only just misses: its weight is 1.04e-6 (relative) below top, the bound being 1e-6."""
    return scale_at_weight(scores, top * (1 - 1.04e-6))


FAIRNESS = {
    "check_masked_softmax_backward": {
        "right": [softmax_backward_by_row_loops, softmax_backward_in_log_space,
                  softmax_backward_by_finite_differences],
        "wrong": [
            (softmax_backward_weights_times_g, "you returned α ⊙ g, as if each weight depended on its own score"),
            (softmax_backward_like_a_sigmoid, "you used only the diagonal of the Jacobian"),
            (softmax_backward_without_alpha, "each entry is scaled by its own weight α_i: you left out that factor"),
            (softmax_backward_of_the_whole_row, "you differentiated the softmax of the whole row"),
            (softmax_backward_nan_on_empty_rows, "NaN or inf .*a row whose valid length is 0 has weights 0"),
            (softmax_backward_summed_over_queries, "your sum of g ⊙ α runs over the queries"),
            (softmax_backward_with_the_valid_sum_of_g, r"sums to \S+ over the keys; each row must sum to 0"),
            (softmax_backward_with_empty_rows_uniform,
             r"batch \d has valid length 0, but your gradient there is not 0 \(largest: \S+\): a row with nothing "
             "to attend to has weights 0"),
        ],
    },
    "check_attention_backward": {
        "right": [attention_backward_by_einsum_and_jacobians, attention_backward_by_finite_differences],
        "wrong": [
            (attention_backward_unscaled, "you left out the 1/√d"),
            (attention_backward_without_scale_in_grads, "dq and dk lack the factor 1/√d"),
            (attention_backward_dv_is_p_do, "dv is P dO; the output is P v"),
            (attention_backward_without_row_sum, "your gradient of the scores, dA, is P ⊙ dP"),
            (attention_backward_dk_untransposed, "dk is dA q / √d"),
            (attention_backward_in_reverse_order, "concatenate in the order dq, dk, dv"),
        ],
    },
    "check_sharpening_scale": {
        "right": [scale_stopping_on_the_weight, scale_by_newton_on_log_weight, scale_by_doubling_then_bisection],
        "wrong": [
            (temperature_instead_of_scale, "that is the temperature τ = 1/c"),
            (scale_for_the_two_largest_only, "right for the two largest scores alone"),
            (scale_stopping_on_a_loose_weight, r"is (below|above) top by a relative error of .* \(allowed: 1e-6\)"),
            (the_weight_instead_of_the_scale, "you returned top, the weight asked for"),
            (scale_just_below_the_bound, r"is below top by a relative error of 1\.04e-06 \(allowed: 1e-6\)"),
        ],
    },
}


@pytest.mark.parametrize("answer", [scale_by_doubling_then_bisection, scale_by_newton_on_log_weight,
                                    scale_stopping_on_the_weight])
def test_scales_found_by_different_searches_pass(answer, capsys):
    check_sharpening_scale(answer)
    assert capsys.readouterr().out.startswith("✓ your scales give the largest weight asked for")


def test_the_tolerance_is_on_the_weight_not_on_the_scale():
    """A c whose weight is within the relative 1e-6 passes even when c itself is further than 1e-6 from
    the bisection's; a c just outside it fails, and the message gives the relative error of the weight."""
    check = CHECKS["check_sharpening_scale"]
    cases = check.make_cases(torch.Generator().manual_seed(0))
    scores, top = cases[0]
    exact = float(check.reference(scores, top))

    def scale_at(relative_error):  # the c at which the weight is top * (1 + relative_error)
        return scale_by_doubling_then_bisection(scores, top * (1 + relative_error))

    inside = scale_at(0.9 * SHARPENING_RTOL)
    assert abs(float(inside) / exact - 1) > SHARPENING_RTOL  # the old test on c would reject it
    check.judge(cases[:1], [inside])
    with pytest.raises(CheckFailed, match=r"above top by a relative error of 1\.1e-06 \(allowed: 1e-6\): c must be "
                                          "smaller"):
        check.judge(cases[:1], [scale_at(1.1 * SHARPENING_RTOL)])
    with pytest.raises(CheckFailed, match=r"below top by a relative error of 2e-05 .*c must be larger"):
        check.judge(cases[:1], [scale_at(-2e-5)])


def printed_error(message):
    """The relative error a failure message prints, as the number a student reads."""
    return float(re.search(r"relative error of (\S+) \(allowed", message).group(1))


@pytest.mark.parametrize("relative_error", [-1.04e-6, 1.04e-6, -1.0004e-6, 1.0000004e-6])
def test_a_near_miss_prints_an_error_that_differs_from_the_bound(relative_error):
    """Just outside the bound, the printed error must not read as the bound itself ("1e-06 (allowed:
    1e-6)" tells a student nothing): it gets as many digits as it takes to differ."""
    check = CHECKS["check_sharpening_scale"]
    cases = check.make_cases(torch.Generator().manual_seed(16))
    scores, top = cases[0]
    with pytest.raises(CheckFailed) as failure:
        check.judge(cases[:1], [scale_at_weight(scores, top * (1 + relative_error))])
    printed = printed_error(str(failure.value))
    assert printed != SHARPENING_RTOL
    assert printed == pytest.approx(abs(relative_error), rel=1e-3)


def test_a_near_miss_is_not_called_the_two_score_slip():
    """Where the two-score scale lies within 0.1% of the right one (about one draw in fifteen), a search
    that just misses the bound, on either side, is told its relative error, not that it used two scores.
    The two-score scale itself is named wherever it misses the bound clearly (by more than twice the
    allowed error); where it misses only just, it too is told by how much."""
    check = CHECKS["check_sharpening_scale"]
    near, named = 0, 0
    for seed in range(40):
        for scores, top in check.make_cases(torch.Generator().manual_seed(seed)):
            right = float(check.reference(scores, top))
            two = float(scale_for_the_two_largest_only(scores, top))
            if abs(two / right - 1) > 1e-3:
                continue
            near += 1
            for relative_error in (-1.04e-6, 1.04e-6):
                with pytest.raises(CheckFailed, match="by a relative error of 1.04e-06"):
                    check.judge([(scores, top)], [scale_at_weight(scores, top * (1 + relative_error))])
            two_error = abs(float(largest_weight(two, scores)) / top - 1)
            if two_error <= SHARPENING_RTOL:
                check.judge([(scores, top)], [torch.tensor(two, dtype=torch.float64)])
                continue
            expected = ("right for the two largest scores alone" if two_error > 2 * SHARPENING_RTOL
                        else "below top by a relative error of")
            with pytest.raises(CheckFailed, match=expected):
                check.judge([(scores, top)], [torch.tensor(two, dtype=torch.float64)])
            named += expected.startswith("right")
    assert near >= 10 and named >= 1, (near, named)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (temperature_instead_of_scale, "that is the temperature τ = 1/c"),
        (scale_for_the_two_largest_only, "right for the two largest scores alone"),
        (lambda s, top: scale_by_doubling_then_bisection(s, top) * 1.01,
         r"the largest weight of softmax\(c \* scores\) is above top by a relative error of"),
        (lambda s, top: -scale_by_doubling_then_bisection(s, top), "is not positive"),
        (lambda s, top: scale_by_doubling_then_bisection(s, top).reshape(1, 1).repeat(2, 1),
         "expected a scalar"),
        (lambda s, top: float(scale_by_doubling_then_bisection(s, top)),
         "must return a torch.Tensor; it returned float"),
    ],
)
def test_wrong_scales_fail_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_sharpening_scale(answer)


def test_solve_increasing_brackets_from_either_side_of_1():
    from courseware.checks.core import solve_increasing
    assert math.isclose(solve_increasing(lambda x: x * x, 2.0), math.sqrt(2), rel_tol=1e-12)
    assert math.isclose(solve_increasing(lambda x: x**3, 1e-6), 1e-2, rel_tol=1e-12)
