"""Checkers for the exercises of chapter 9 (attention mechanisms): the backward pass of the masked
softmax, the backward pass of scaled dot-product attention, and the scale that makes attention
nearly hard."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from lib.part4_attention.attention import masked_softmax
from courseware.checks.core import Check, Measured, Slip, one_thread, solve_increasing


# ---------------------------------------------------------------------------
# The backward pass of the masked softmax (exercise ex-att-softmax-backward).
# ---------------------------------------------------------------------------


def masked_softmax_backward_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, valid_lens, grad_weights)`` for :data:`check_masked_softmax_backward`.

    ``scores`` (``1.5 × N(0, 1)``, weights far from one-hot) and ``grad_weights`` (``N(0, 1)``, nonzero
    at masked positions too) have shape ``(B, T, S)`` in float64; valid lengths are integers of shape
    ``(B,)``, some of them 0. The first case, ``(2, 3, 4)`` with valid lengths ``[0, 2]``, has an empty
    row and a partly masked one, so that a gradient that is not 0 at masked keys, is NaN on an empty
    row or misses a term fails on every draw.
    """
    def draw(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)

    cases = [(draw(2, 3, 4, scale=1.5), torch.tensor([0, 2]), draw(2, 3, 4))]
    for _ in range(trials - 1):
        batch, queries, keys = (int(n) for n in torch.randint(1, 6, (3,), generator=generator))
        valid_lens = torch.randint(0, keys + 1, (batch,), generator=generator)
        cases.append((draw(batch, queries, keys, scale=1.5), valid_lens, draw(batch, queries, keys)))
    return cases


def masked_softmax_backward_by_autograd(scores, valid_lens, grad_weights) -> torch.Tensor:
    """The reference: ``∂ℓ/∂scores`` from autograd through :func:`lib.part4_attention.attention.masked_softmax`, for a
    loss ``ℓ`` whose gradient with respect to the weights is ``grad_weights``.

    Shapes
    ------
    scores, grad_weights : (B, T, S); valid_lens : (B,)
    output : (B, T, S)
    """
    leaf = scores.detach().clone().requires_grad_()
    with one_thread(), torch.enable_grad():
        (grad,) = torch.autograd.grad(masked_softmax(leaf, valid_lens), leaf, grad_weights)
    return grad.detach()


def masked_softmax_backward_with(scores, valid_lens, grad_weights, mistake=None) -> torch.Tensor:
    """The softmax's vector-Jacobian product written out, ``α ⊙ (g - Σ_j g_j α_j)`` with ``α`` the
    masked softmax, or with one slip: ``"α ⊙ g"`` (no coupling term), ``"diagonal"`` (``α(1 - α) ⊙ g``,
    the Jacobian's diagonal alone), ``"plain sum"`` (``Σ_j g_j`` over the whole row for ``Σ_j g_j α_j``),
    ``"no α"`` (``g - Σ_j g_j α_j``, not scaled by ``α``), ``"over queries"`` (the sum over the
    queries), ``"sign"`` (``α ⊙ (Σ_j g_j α_j - g)``) or ``"unmasked"`` (the softmax of the whole row).
    """
    if mistake == "unmasked":
        weights = torch.softmax(scores, dim=-1)
    else:
        keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]  # (B, 1, S)
        weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1).nan_to_num(0.0)
    grad = grad_weights.to(weights.dtype)
    mean = (grad * weights).sum(dim=-2 if mistake == "over queries" else -1, keepdim=True)
    return {
        "α ⊙ g": lambda: weights * grad,
        "diagonal": lambda: weights * (1 - weights) * grad,
        "plain sum": lambda: weights * (grad - grad.sum(dim=-1, keepdim=True)),
        "no α": lambda: grad - mean,
        "sign": lambda: weights * (mean - grad),
    }.get(mistake, lambda: weights * (grad - mean))()


def _softmax_slip(mistake: str):
    return lambda *case: masked_softmax_backward_with(*case, mistake=mistake)


def _masked_softmax_backward_rules(found, expected, scores, valid_lens, grad_weights) -> str | None:
    """Two properties every right answer has: 0 at masked keys (of partly masked rows first, then of
    empty ones), and rows that sum to 0."""
    lengths = list(enumerate(valid_lens.tolist()))
    for b, n in sorted(lengths, key=lambda pair: pair[1] == 0):
        beyond = found[b, :, n:]
        if not beyond.numel() or beyond.abs().max() <= 1e-6:
            continue
        if n == 0:
            return (f"batch {b} has valid length 0, but your gradient there is not 0 (largest: "
                    f"{beyond.abs().max():.3g}): a row with nothing to attend to has weights 0 whatever its "
                    "scores are, so the loss does not depend on them")
        return (f"batch {b} has valid length {n}, but your gradient at key positions >= {n} is not 0 "
                f"(largest: {beyond.abs().max():.3g}): the weights there are 0 whatever those scores are, so "
                "the loss does not depend on them")
    sums = found.sum(dim=-1)  # (B, T)
    if sums.abs().max() > 1e-5:
        b, t = (int(i) for i in torch.unravel_index(sums.abs().argmax(), sums.shape))
        return (f"your gradient for batch {b}, query {t} sums to {sums[b, t]:.3g} over the keys; each row must "
                "sum to 0, since adding one number to every score of a row leaves its weights as they were")
    return None


check_masked_softmax_backward = Check(
    "your ∂ℓ/∂scores agrees with autograd through lib.part4_attention.attention.masked_softmax on 20 fresh random cases",
    masked_softmax_backward_cases, masked_softmax_backward_by_autograd,
    describe=lambda scores, valid_lens, grad_weights: (f"scores of shape {tuple(scores.shape)}, "
                                                       f"valid_lens {valid_lens.tolist()}"),
    compared_with="autograd's", noun="gradient", layout="(B, T, S)",
    slips=(
        Slip(_softmax_slip("α ⊙ g"),
             "you returned α ⊙ g, as if each weight depended on its own score alone: every weight of a row "
             "depends on every score of the row (∂α_j/∂s_i = -α_j α_i for j ≠ i), and those terms are missing"),
        Slip(_softmax_slip("diagonal"),
             "you used only the diagonal of the Jacobian, α_i (1 - α_i), as for a sigmoid: every weight of a "
             "row depends on every score of the row (∂α_j/∂s_i = -α_j α_i for j ≠ i)"),
        Slip(_softmax_slip("plain sum"),
             "you subtracted the plain sum Σ_j g_j; the Jacobian weights each g_j by its α_j"),
        Slip(_softmax_slip("no α"),
             "each entry is scaled by its own weight α_i: you left out that factor (it is also what makes "
             "the masked keys' gradient 0)"),
        Slip(_softmax_slip("over queries"),
             "your sum of g ⊙ α runs over the queries (axis -2); each query's softmax runs over the keys, so "
             "sum over the last axis"),
        Slip(_softmax_slip("sign"),
             "the sign is flipped: ∂α_i/∂s_i = α_i (1 - α_i) is positive, so g_i enters with a plus sign"),
        Slip(_softmax_slip("unmasked"),
             "you differentiated the softmax of the whole row: the masked keys' scores are set to -inf first, "
             "so their weights are 0 and the other weights share the row without them"),
    ),
    nan_hint=": a row whose valid length is 0 has weights 0 and gets a gradient of zeros, not NaN",
    rules=_masked_softmax_backward_rules, tolerance=dict(atol=1e-6, rtol=1e-6),
    # autograd, and the usual ways to build the S × S Jacobian that the statement asks not to build
    # (a value cannot show it: these flag the code for a human to read, as the grader's scan does)
    forbidden=("torch.autograd", "torch.func", ".backward", "torch.diag_embed", "torch.diag", "torch.outer",
               "torch.eye"),
)


# ---------------------------------------------------------------------------
# The backward pass of scaled dot-product attention (exercise ex-att-sdpa-backward).
# ---------------------------------------------------------------------------


def attention_backward_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(q, k, v, grad_out)`` for :data:`check_attention_backward`.

    ``q`` and ``grad_out`` are ``(..., T, d)``, ``k`` and ``v`` ``(..., S, d)``, all ``N(0, 1)`` in
    float64, with leading axes ``(B,)`` in even cases and ``(B, H)`` in odd ones (``B, H`` in 1..3).
    The first case has ``T = S ≠ d``, as in self-attention: there a product with a transpose left out
    or put in the wrong place (``P dO`` for ``Pᵀ dO``) has the right shape, so its slip is named on
    every draw. In the others ``T``, ``S`` and ``d`` are three different sizes in 2..7, so such a
    product fails or has the wrong shape.
    """
    cases = []
    for trial in range(trials):
        sizes = [int(n) for n in torch.randperm(6, generator=generator)[:3] + 2]
        queries, keys, dim = (sizes[0], sizes[0], sizes[1]) if trial == 0 else sizes
        leading = tuple(int(n) for n in torch.randint(1, 4, (1 + trial % 2,), generator=generator))
        q, k, v, grad_out = (torch.randn(*leading, rows, dim, generator=generator, dtype=torch.float64)
                             for rows in (queries, keys, keys, queries))
        cases.append((q, k, v, grad_out))
    return cases


def attention_backward_by_autograd(q, k, v, grad_out) -> torch.Tensor:
    """The reference: ``torch.cat([dq, dk, dv], dim=-2)`` from autograd through
    ``torch.nn.functional.scaled_dot_product_attention`` (no mask), for a loss whose gradient with
    respect to the output is ``grad_out``.

    Shapes
    ------
    q, grad_out : (..., T, d); k, v : (..., S, d)
    output : (..., T + 2S, d)
    """
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    with one_thread(), torch.enable_grad():
        grads = torch.autograd.grad(F.scaled_dot_product_attention(*leaves), leaves, grad_out)
    return torch.cat(grads, dim=-2).detach()


def attention_backward_with(q, k, v, grad_out, mistake=None) -> tuple:
    """``(dq, dk, dv)`` written out, or with one slip: ``"unscaled"`` (no ``1/√d`` anywhere),
    ``"no 1/√d in dq, dk"`` (the scores scaled, their gradient not), ``"1/d"`` (``1/d`` in ``dq`` and
    ``dk``), ``"P dO"`` (``dv = P dO``), ``"no row sum"`` (``dA = P ⊙ dP``), ``"plain row sum"``
    (``Σ_j dP_j`` for ``Σ_j dP_j P_j``), ``"dk = dA q"`` or ``"dq = dAᵀ k"`` (a transpose misplaced)."""
    root = math.sqrt(q.shape[-1])
    weights = torch.softmax(q @ k.transpose(-2, -1) / (1.0 if mistake == "unscaled" else root), dim=-1)  # (..., T, S)
    grad_v = (weights if mistake == "P dO" else weights.transpose(-2, -1)) @ grad_out  # (..., S, d)
    grad_weights = grad_out @ v.transpose(-2, -1)  # (..., T, S)
    if mistake == "no row sum":
        grad_scores = weights * grad_weights
    elif mistake == "plain row sum":
        grad_scores = weights * (grad_weights - grad_weights.sum(dim=-1, keepdim=True))
    else:
        grad_scores = weights * (grad_weights - (grad_weights * weights).sum(dim=-1, keepdim=True))
    grad_scores = grad_scores / {"unscaled": 1.0, "no 1/√d in dq, dk": 1.0, "1/d": root**2}.get(mistake, root)
    grad_q = (grad_scores.transpose(-2, -1) if mistake == "dq = dAᵀ k" else grad_scores) @ k  # (..., T, d)
    grad_k = (grad_scores if mistake == "dk = dA q" else grad_scores.transpose(-2, -1)) @ q  # (..., S, d)
    return grad_q, grad_k, grad_v


def _attention_slip(mistake=None, order=(0, 1, 2)):
    """A slip's answer, ``torch.cat`` of the three gradients in ``order``; NaN (which matches nothing)
    where the slip's products do not fit the case's shapes (``T ≠ S``)."""
    def answer(*case):
        try:
            grads = attention_backward_with(*case, mistake=mistake)
            return torch.cat([grads[i] for i in order], dim=-2)
        except RuntimeError:
            return torch.tensor(math.nan, dtype=torch.float64)
    return answer


def _which_gradients(found, expected, q, k, v, grad_out) -> str:
    """Which of dq, dk and dv differ from autograd's (by more than 1e-4), and where the most."""
    queries, keys = q.shape[-2], k.shape[-2]
    parts = {"dq": slice(0, queries), "dk": slice(queries, queries + keys), "dv": slice(queries + keys, None)}
    gaps = {name: (found[..., rows, :] - expected[..., rows, :]).abs() for name, rows in parts.items()}
    largest = {name: float(gap.max()) for name, gap in gaps.items()}
    wrong = [name for name in parts if largest[name] > 1e-4] or [max(largest, key=largest.get)]
    worst = max(wrong, key=largest.get)
    where = tuple(int(i) for i in torch.unravel_index(gaps[worst].argmax(), gaps[worst].shape))
    right = [name for name in parts if name not in wrong]

    def listed(names):  # "dq", "dq and dk", "dq, dk and dv"
        return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)

    verb = "differs" if len(wrong) == 1 else "differ"
    agree = f"; your {listed(right)} {'agrees' if len(right) == 1 else 'agree'} with it" if right else ""
    return (f"your {listed(wrong)} {verb} from autograd's: by up to {largest[worst]:.3g}, in {worst} at index "
            f"{where}{agree}")


ONE_TENSOR = "torch.cat([dq, dk, dv], dim=-2)"


def _attention_backward_shape_hint(shape, q, k, v, grad_out) -> str:
    """What a wrong shape says: one gradient alone, the three stacked, or concatenated along another
    axis (the first axis, torch.cat's default, or the last); with ``T = S`` all of these run."""
    lead, queries, dim = tuple(q.shape[:-2]), q.shape[-2], q.shape[-1]
    along = f": concatenate along dim=-2, the rows, {ONE_TENSOR}"
    return {
        (*lead, queries, dim): f": return all three gradients in one tensor, {ONE_TENSOR}",
        (3, *lead, queries, dim): f": concatenate the three along the rows, {ONE_TENSOR}; "
                                  "stacking them works only when T = S",
        (3 * lead[0], *lead[1:], queries, dim): f"{along}; torch.cat without dim joins them along the first "
                                                "axis, which works only when T = S",
        (*lead, queries, 3 * dim): f"{along}, not the last axis, which works only when T = S",
    }.get(tuple(shape), "")


check_attention_backward = Check(
    "your dq, dk and dv agree with autograd through torch.nn.functional.scaled_dot_product_attention on 20 "
    "fresh random cases",
    attention_backward_cases, attention_backward_by_autograd,
    describe=lambda q, k, v, grad_out: f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}",
    compared_with="autograd's", noun="gradients", layout="(..., T + 2S, d)",
    slips=(
        Slip(_attention_slip("unscaled"),
             "you left out the 1/√d: the scores are q kᵀ / √d, in the forward pass and so in dq and dk"),
        Slip(_attention_slip("no 1/√d in dq, dk"),
             "dq and dk lack the factor 1/√d: the scores are q kᵀ / √d, so the chain rule multiplies "
             "their gradient by 1/√d on the way to q and k"),
        Slip(_attention_slip("1/d"),
             "dq and dk are divided by d: the scores carry 1/√d once, so their gradient does too"),
        Slip(_attention_slip("P dO"),
             "dv is P dO; the output is P v, so dv = Pᵀ dO (one row per key)"),
        Slip(_attention_slip("no row sum"),
             "your gradient of the scores, dA, is P ⊙ dP: the softmax couples the weights of a row, so subtract "
             "from dP each row's Σ_j dP_j P_j before multiplying by P"),
        Slip(_attention_slip("plain row sum"),
             "you subtracted the plain row sum Σ_j dP_j; the softmax's Jacobian weights it: Σ_j dP_j P_j"),
        Slip(_attention_slip("dk = dA q"),
             "dk is dA q / √d; the scores are A = q kᵀ / √d, so dk = dAᵀ q / √d (one row per key)"),
        Slip(_attention_slip("dq = dAᵀ k"),
             "dq is dAᵀ k / √d; the scores are A = q kᵀ / √d, so dq = dA k / √d (one row per query)"),
        Slip(_attention_slip(order=(2, 1, 0)), "concatenate in the order dq, dk, dv: torch.cat([dq, dk, dv], dim=-2)"),
    ),
    shape_hint=_attention_backward_shape_hint,
    error_hint=". Check each product's shapes: the weights P and their gradient are (..., T, S), q and dO "
               "(..., T, d), k and v (..., S, d). If torch.cat raised it, concatenate along dim=-2, the rows, "
               f"{ONE_TENSOR}: a positive axis such as dim=1 is another axis once q has two leading axes "
               "(B, H)",
    not_tensor_hint=f": return one tensor, {ONE_TENSOR}",
    mismatch=_which_gradients, tolerance=dict(atol=1e-6, rtol=1e-6),
    forbidden=("torch.autograd", "torch.func", ".backward", "torch.nn.functional.scaled_dot_product_attention",
               "torch.nn.MultiheadAttention"),
)


# ---- experiment: the scale that makes attention nearly hard ------------------------------
def sharpening_scale_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh ``(scores, top)`` for :data:`check_sharpening_scale`: 3 to 12 float64 scores with a
    unique largest one (the others at least 0.05 below it) and a target weight ``top`` in
    ``[0.5, 0.99]``, above the uniform ``1/N`` so that a scale ``c > 0`` reaches it."""
    cases = []
    for _ in range(trials):
        scores = torch.randn(int(torch.randint(3, 13, (), generator=generator)), generator=generator,
                             dtype=torch.float64)
        best = scores.argmax()
        scores[best] = scores.max() + 0.05
        top = float(torch.empty((), dtype=torch.float64).uniform_(0.5, 0.99, generator=generator))
        cases.append((scores, top))
    return cases


def sharpening_scale(scores: torch.Tensor, top: float) -> torch.Tensor:
    """The scale ``c > 0`` at which the largest weight of ``softmax(c * scores)`` equals ``top``.

    That weight grows monotonically with ``c`` (its log has derivative ``max(s) - E_α[s] >= 0``),
    from ``1/N`` at ``c = 0`` to 1, so halving or doubling ``c`` brackets the answer and bisection finds it.

    Shapes
    ------
    scores ``(N,)`` -> a 0-dimensional tensor
    """
    scale = solve_increasing(lambda c: float(torch.softmax(c * scores, dim=0).max()), top)
    return torch.tensor(scale, dtype=torch.float64)


def _two_score_scale(scores: torch.Tensor, top: float) -> torch.Tensor:
    """The scale two scores alone would need: σ(c Δ) = top for the gap Δ between the two largest."""
    first, second = scores.topk(2).values
    return torch.log(torch.tensor(top / (1 - top), dtype=torch.float64)) / (first - second)


SHARPENING_RTOL = 1e-6  # the statement's relative error, on the largest weight
# How close a wrong c must come to a known slip for the message to name it: within _SLIP_RTOL of it,
# and _SLIP_CLOSER times closer to it than to the right scale; and the slip itself must miss the
# bound by a clear margin (its weight at least _SLIP_CLEAR times the allowed error away). Some slips
# land near the right c (the two-score scale is within 0.1% of it on about one draw in fifteen, and
# sometimes within 1e-6, inside the bound): a search that only just misses the bound must be told by
# how much, not that it made a slip.
_SLIP_RTOL, _SLIP_CLOSER, _SLIP_CLEAR = 1e-3, 10, 2
_SHARPENING_SLIPS = (
    (lambda scores, top: 1 / sharpening_scale(scores, top),
     "that is the temperature τ = 1/c; return the factor c that multiplies the scores"),
    (_two_score_scale,
     "that scale is right for the two largest scores alone; the other scores share the weight too, so "
     "softmax(c * scores).max() is still below top there: search for c numerically"),
    (lambda scores, top: torch.tensor(top, dtype=torch.float64),
     "you returned top, the weight asked for; return the scale c at which the largest weight reaches it"),
)


def _weight_error(scale: float, scores: torch.Tensor, top: float) -> float:
    """The relative error of the largest weight of ``softmax(scale * scores)`` against ``top``."""
    return (float(torch.softmax(scale * scores.to(torch.float64), dim=0).max()) - top) / top


def _named_slip(scale: float, right: float, scores: torch.Tensor, top: float) -> str | None:
    """The message of the known slip nearest to ``scale`` that explains it (see ``_SLIP_RTOL``), or None."""
    named = []
    for answer, message in _SHARPENING_SLIPS:
        slip = float(answer(scores, top))
        distance = abs(scale - slip)
        if (distance <= _SLIP_RTOL * abs(slip) and _SLIP_CLOSER * distance < abs(scale - right)
                and slip > 0 and abs(_weight_error(slip, scores, top)) > _SLIP_CLEAR * SHARPENING_RTOL):
            named.append((distance, message))
    return min(named)[1] if named else None


def _sharpening_rules(found: torch.Tensor, expected: torch.Tensor, scores: torch.Tensor, top: float) -> str | None:
    """What the statement names, measured at the student's scale: the largest weight of
    ``softmax(c * scores)`` must equal ``top`` to a relative error of ``SHARPENING_RTOL``. Every
    such ``c`` passes, however the search stopped. A ``c`` that fails is explained by the slip it
    reproduces, else by the relative error of its weight, printed with as many digits as it takes
    to differ from the bound."""
    scale = float(found)
    if not scale > 0:
        return f"your c = {scale:.6g} is not positive; the scale c > 0 multiplies the scores"
    error = _weight_error(scale, scores, top)
    if abs(error) <= SHARPENING_RTOL + 1e-15:  # (+ float64 rounding of the weight)
        return None
    slip = _named_slip(scale, float(expected), scores, top)
    if slip:
        return slip
    digits = 2  # "1.04e-06", never "1e-06" beside the bound 1e-6
    while float(f"{abs(error):.{digits}g}") == SHARPENING_RTOL and digits < 17:
        digits += 1
    side, fix = ("below", "larger") if error < 0 else ("above", "smaller")
    return (f"at your c = {scale:.6g} the largest weight of softmax(c * scores) is {side} top by a relative "
            f"error of {abs(error):.{digits}g} (allowed: 1e-6): c must be {fix}")


check_sharpening_scale = Measured(
    "your scales give the largest weight asked for on 12 fresh score vectors",
    sharpening_scale_cases, sharpening_scale,
    describe=lambda scores, top: f"{len(scores)} scores and top = {top:.3f}",
    compared_with="the scale found by bisection", noun="scale", layout=" (a 0-dimensional tensor)",
    # No Slip here: the rules name a slip only where it, and not a near miss, explains c (_SLIP_RTOL).
    rules=_sharpening_rules,
)
