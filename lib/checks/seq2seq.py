"""Checkers for the exercises of chapter 10 (sequence-to-sequence models with attention)."""
from __future__ import annotations

import torch

from lib.attention import AdditiveScore, attention, masked_softmax
from lib.checks.core import Check, Slip
from lib.seq2seq import local_weights




def centre_gradient_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, lens, centre, window, grad)`` for :data:`check_centre_gradient`.

    Scores ``(B, S)`` in float64, lengths from 1 to ``S``, real centres from 0 to ``S`` (some
    windows reach past either end of the source; a centre is never exactly ``D`` from a
    position, where the derivative does not exist), windows ``D`` from 1 to 4, and ``grad``,
    the gradient of the loss with respect to the weights, ``(B, S)``, padding included.
    """
    cases = []
    for _ in range(trials):
        batch = int(torch.randint(1, 5, (), generator=generator))
        width = int(torch.randint(3, 13, (), generator=generator))
        scores = 2 * torch.randn(batch, width, generator=generator, dtype=torch.float64)
        lens = torch.randint(1, width + 1, (batch,), generator=generator)
        centre = lens * torch.rand(batch, generator=generator, dtype=torch.float64)  # p_t in [0, S]
        window = int(torch.randint(1, 5, (), generator=generator))
        grad = torch.randn(batch, width, generator=generator, dtype=torch.float64)
        cases.append((scores, lens, centre, window, grad))
    return cases


def _distance(scores: torch.Tensor, centre: torch.Tensor, first: int = 1) -> torch.Tensor:
    """s - p_t for source positions s counted from ``first``: (B, S)."""
    return torch.arange(first, scores.shape[1] + first, dtype=scores.dtype) - centre[:, None]


def _gaussian(distance: torch.Tensor, sigma: float) -> torch.Tensor:
    return torch.exp(-(distance**2) / (2 * sigma**2))


def _centre_gradient(scores, lens, centre, window, grad) -> torch.Tensor:
    """∂L/∂p_t by autograd through :func:`lib.seq2seq.local_weights` (local-p), for ∂L/∂a_t = ``grad``."""
    centre = centre.detach().clone().requires_grad_()
    weights = local_weights(scores, lens, centre, window, gaussian=True)  # (B, S)
    return torch.autograd.grad(weights, centre, grad_outputs=grad)[0]  # (B,)


def _pull(scores, lens, centre, window, grad, sigma=None, first=1, factor="weights", slope=1.0, windowed=True,
          padded=False, cut_after=False):
    """Σ_s grad · factor(s) · (s - p_t) / σ², the right answer with the usual slips switched on:
    ``sigma`` (D/2 unless given), positions counted from ``first``, ``factor`` "weights" (a_t(s)) or
    "softmax" (the window's softmax alone), ``slope`` multiplying the derivative of the exponent,
    ``windowed=False`` for a softmax over the whole source, ``padded=True`` for ``lens`` ignored
    (padding inside the window takes part) and ``cut_after=True`` for the softmax over the whole
    source cut to the window afterwards (not renormalised)."""
    sigma = window / 2 if sigma is None else sigma
    distance = _distance(scores, centre, first)
    outside = (distance.abs() > window) if windowed else torch.zeros_like(distance, dtype=torch.bool)
    lens = torch.full_like(lens, scores.shape[1]) if padded else lens
    if cut_after:
        align = masked_softmax(scores, lens).masked_fill(outside, 0.0)  # (B, S)
    else:
        align = masked_softmax(scores.masked_fill(outside, float("-inf")), lens)  # (B, S)
    weights = align * _gaussian(distance, sigma) if factor == "weights" else align
    return (grad * weights * slope * distance / sigma**2).sum(dim=-1)


def _renormalised(scores, lens, centre, window, grad) -> torch.Tensor:
    """∂L/∂p_t had the weights been divided by their sum after the Gaussian."""
    centre = centre.detach().clone().requires_grad_()
    weights = local_weights(scores, lens, centre, window, gaussian=True)
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.autograd.grad(weights, centre, grad_outputs=grad)[0]


def _rounded(centre: torch.Tensor) -> str:
    """The centres to 2 decimals, or to as many more as it takes to tell them apart."""
    values = centre.tolist()
    for places in range(2, 17):
        shown = [f"{value:.{places}f}" for value in values]
        if len(set(shown)) == len(shown):
            break
    return "[" + ", ".join(shown) + "]"


check_centre_gradient = Check(
    "your ∂L/∂p_t agree with autograd through lib.seq2seq.local_weights on 20 fresh random cases",
    centre_gradient_cases, _centre_gradient,
    describe=lambda scores, lens, centre, window, grad: (f"scores of shape {tuple(scores.shape)}, "
                                                         f"lens {lens.tolist()}, centre {_rounded(centre)}, "
                                                         f"window {window}"),
    compared_with="autograd's", noun="derivatives", layout="(B,)",
    slips=(
        Slip(lambda *case: -_pull(*case),
             "the sign is reversed: ∂/∂p_t exp(-(s - p_t)²/2σ²) = exp(-(s - p_t)²/2σ²) (s - p_t)/σ², "
             "positive for a position s to the right of p_t"),
        Slip(lambda *case: _pull(*case, sigma=case[3]), "σ is D/2, not D"),
        Slip(lambda *case: _pull(*case, slope=0.5),
             "the derivative of -(s - p_t)²/(2σ²) with respect to p_t is (s - p_t)/σ²: the 2 of the square "
             "cancels the 2 of 2σ²"),
        Slip(lambda *case: _pull(*case) * (case[3] / 2),
             "divide by σ², not σ: ∂/∂p_t of -(s - p_t)²/(2σ²) is (s - p_t)/σ²"),
        Slip(lambda *case: _pull(*case) * (case[3] / 2) ** 2,
             "you left out the 1/σ² of the Gaussian's derivative, (s - p_t)/σ²"),
        Slip(lambda *case: _pull(*case, factor="softmax"),
             "∂a_t(s)/∂p_t = a_t(s) (s - p_t)/σ²: multiply by the whole weight a_t(s), Gaussian included, not "
             "by the softmax over the window alone"),
        Slip(lambda *case: _pull(*case, windowed=False),
             "positions outside the window [p_t - D, p_t + D] have weight 0 and do not move the centre: take "
             "the softmax over the window only"),
        Slip(lambda *case: _pull(*case, padded=True),
             "padding positions s > len have weight 0 and do not pull the centre: leave them out of the "
             "window's softmax (use lens)"),
        Slip(lambda *case: _pull(*case, cut_after=True),
             "take the softmax over the window only: a softmax over the whole source cut to the window "
             "afterwards gives weights that sum to less than 1 before the Gaussian"),
        Slip(lambda *case: _pull(*case, first=0), "source positions s are counted from 1: use s = 1, ..., S"),
        Slip(_renormalised, "Luong et al. do not renormalise the weights after the Gaussian: differentiate "
                            "a_t(s) = align(s) exp(-(s - p_t)²/2σ²) itself"),
        Slip(lambda scores, lens, centre, window, grad: torch.zeros_like(centre),
             "the window's edge gives no gradient, but the Gaussian does: ∂a_t(s)/∂p_t = a_t(s) (s - p_t)/σ²"),
    ),
    shape_hint=lambda shape, scores, *rest: (
        ": sum over the positions s, one derivative per batch row" if shape == tuple(scores.shape) else ""),
    tolerance=dict(atol=1e-8, rtol=1e-6),
    forbidden=("torch.autograd", "torch.func", ".backward"),
)


def bahdanau_context_cases(generator: torch.Generator, trials: int = 15) -> list[tuple]:
    """Fresh inputs ``(query, states, lens, W, U, v)`` for :data:`check_bahdanau_context`.

    ``query`` is the previous decoder state ``(B, Dq)``, ``states`` the encoder
    states ``(B, S, De)``; ``W (A, Dq)``, ``U (A, De)`` and ``v (A,)`` are the
    additive score's parameters. The sizes ``Dq``, ``De``, ``A`` and ``S``
    differ, so a product over the wrong axis fails loudly.
    """
    cases = []
    for _ in range(trials):
        query_dim, state_dim, hidden, width = (int(n) for n in torch.randperm(6, generator=generator)[:4] + 2)
        batch = int(torch.randint(1, 4, (), generator=generator))
        query = torch.randn(batch, query_dim, generator=generator, dtype=torch.float64)
        states = torch.randn(batch, width, state_dim, generator=generator, dtype=torch.float64)
        lens = torch.randint(1, width + 1, (batch,), generator=generator)
        W = torch.randn(hidden, query_dim, generator=generator, dtype=torch.float64)
        U = torch.randn(hidden, state_dim, generator=generator, dtype=torch.float64)
        v = torch.randn(hidden, generator=generator, dtype=torch.float64)
        cases.append((query, states, lens, W, U, v))
    return cases


def _bahdanau_reference(query, states, lens, W, U, v) -> tuple[torch.Tensor, torch.Tensor]:
    """Context and weights from :class:`lib.attention.AdditiveScore` loaded with ``W``, ``U``, ``v``."""
    score = AdditiveScore(W.shape[1], U.shape[1], W.shape[0]).to(W.dtype)
    with torch.no_grad():
        score.query_proj.weight.copy_(W)
        score.key_proj.weight.copy_(U)
        score.score_proj.weight.copy_(v[None])
        context, weights = attention(query[:, None], states, states, score, lens)  # (B, 1, De), (B, 1, S)
    return context[:, 0], weights[:, 0]


def _unmasked_context(query, states, lens, W, U, v) -> torch.Tensor:
    scores = torch.tanh((query @ W.T)[:, None] + states @ U.T) @ v  # (B, S)
    return torch.einsum("bs,bsd->bd", torch.softmax(scores, -1), states)


def _weights_reversed(query, states, lens, W, U, v) -> torch.Tensor:
    _, weights = _bahdanau_reference(query, states, lens, W, U, v)  # (B, S)
    return torch.einsum("bs,bsd->bd", weights, states.flip(1))


check_bahdanau_context = Check(
    "Bahdanau context vectors agree with lib.attention on 15 fresh random cases",
    bahdanau_context_cases, lambda *case: _bahdanau_reference(*case)[0],
    describe=lambda query, states, lens, W, U, v: (f"query {tuple(query.shape)}, states {tuple(states.shape)}, "
                                                   f"lens {lens.tolist()}, W {tuple(W.shape)}, U {tuple(U.shape)}"),
    compared_with="Σ_s α_s h̄_s with α = softmax(v^T tanh(W h_(t-1) + U h̄_s))", noun="context", layout="(B, De)",
    slips=(
        Slip(_unmasked_context, "padded positions s > len must get weight 0: mask them before the softmax"),
        Slip(_weights_reversed, "weight h̄_s with α_s of the same position"),
        Slip(lambda query, states, lens, *weights: states.sum(1) / lens[:, None],
             "that is the plain average of the states; the weights come from the scores v^T tanh(W h_(t-1) + U h̄_s)"),
    ),
    shape_hint=lambda shape, query, states, *rest: (
        ": you returned the weights (B, S); return the context c_t = Σ_s α_s h̄_s"
        if shape == tuple(states.shape[:2]) else ""),
    error_hint=". Check the shapes: W h_(t-1) is (B, A), U h̄_s is (B, S, A); add them with a new axis for S",
    tolerance=dict(atol=1e-6, rtol=0.0),
)


# ---------------------------------------------------------------------------
# Which steps of a reversal local-m's window can reach.
# ---------------------------------------------------------------------------


def reversal_reach_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh ``(n, window)`` for :data:`check_reversal_reach`: strings of 3 to 16 digits and
    half-widths ``D`` from 1 to 5 (the window covers every step only when ``D >= n - 1``)."""
    cases = []
    for _ in range(trials):
        n = int(torch.randint(3, 17, (), generator=generator))
        cases.append((n, int(torch.randint(1, 6, (), generator=generator))))
    return cases


def _reversal_reach(n: int, window: int, needed_shift: int = 1, width: float = 1.0,
                    strict: bool = False) -> torch.Tensor:
    """1 where local-m's window at step ``t`` (centre ``p_t = t``, half-width ``width * D``) holds the
    source position ``n + needed_shift - t`` that reversal's output ``t`` copies, for ``t = 1 .. n``;
    the keyword arguments give the known wrong answers."""
    t = torch.arange(1, n + 1)  # (n,): the output steps
    distance = (n + needed_shift - t - t).abs()  # (n,): |needed position - p_t|
    return (distance < width * window if strict else distance <= width * window).long()


check_reversal_reach = Check(
    "your reach agrees with local-m's window on 12 fresh (n, D)",
    reversal_reach_cases, _reversal_reach,
    describe=lambda n, window: f"n = {n}, D = {window}",
    compared_with="the book's", noun="reach", layout="(n,)",
    slips=(
        Slip(lambda n, window: torch.ones(n, dtype=torch.long),
             "that is copying, where step t writes source digit t; reversing, step t writes source digit "
             "n + 1 - t"),
        Slip(lambda n, window: _reversal_reach(n, window, needed_shift=0),
             "positions count from 1: step 1 writes the last digit, source position n, so step t needs "
             "position n + 1 - t"),
        Slip(lambda n, window: _reversal_reach(n, window, strict=True),
             "the window includes its edges: position s is in it when |s - p_t| <= D"),
        Slip(lambda n, window: _reversal_reach(n, window, width=2.0),
             "D is the half-width: the window [p_t - D, p_t + D] holds 2D + 1 positions, D on each side"),
        Slip(lambda n, window: _reversal_reach(n, window, width=0.5),
             "the window reaches D positions on each side of p_t, not D/2"),
    ),
    shape_hint=lambda shape, n, window: (
        ": one entry per digit step t = 1 .. n (leave out the <eos> step)" if shape == (n + 1,) else ""),
)
