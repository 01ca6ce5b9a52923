"""Checkers for the exercises of chapter 10 (sequence-to-sequence models with attention)."""
from __future__ import annotations

import torch

from lib.attention import AdditiveScore, attention, masked_softmax
from lib.checks.core import Check, Slip
from lib.seq2seq import local_weights




def local_p_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, lens, centre, window)`` for :data:`check_local_p_weights`.

    Scores ``(B, S)`` in float64, lengths from 1 to ``S``, real centres from 0 to
    ``S`` (some windows reach past either end of the source) and windows ``D``
    from 1 to 4.
    """
    cases = []
    for _ in range(trials):
        batch = int(torch.randint(1, 5, (), generator=generator))
        width = int(torch.randint(3, 13, (), generator=generator))
        scores = 2 * torch.randn(batch, width, generator=generator, dtype=torch.float64)
        lens = torch.randint(1, width + 1, (batch,), generator=generator)
        centre = lens * torch.rand(batch, generator=generator, dtype=torch.float64)  # p_t in [0, S]
        window = int(torch.randint(1, 5, (), generator=generator))
        cases.append((scores, lens, centre, window))
    return cases


def _distance(scores: torch.Tensor, centre: torch.Tensor, first: int = 1) -> torch.Tensor:
    """s - p_t for source positions s counted from ``first``: (B, S)."""
    return torch.arange(first, scores.shape[1] + first, dtype=scores.dtype) - centre[:, None]


def _gaussian(distance: torch.Tensor, sigma: float, two: float = 2.0) -> torch.Tensor:
    return torch.exp(-(distance**2) / (two * sigma**2))


def _local_m(scores, lens, centre, window) -> torch.Tensor:
    """The softmax over the window alone (local-m's weights, no Gaussian factor)."""
    return local_weights(scores, lens, centre, window, gaussian=False)


def _counted_from_zero(scores, lens, centre, window) -> torch.Tensor:
    distance = _distance(scores, centre, first=0)
    inside = masked_softmax(scores.masked_fill(distance.abs() > window, float("-inf")), lens)
    return inside * _gaussian(distance, window / 2)


def _renormalised(scores, lens, centre, window) -> torch.Tensor:
    weights = _local_m(scores, lens, centre, window) * _gaussian(_distance(scores, centre), window / 2)
    totals = weights.sum(-1, keepdim=True)
    return weights / torch.where(totals > 0, totals, torch.ones_like(totals))


def _padding_weighted(found: torch.Tensor, expected: torch.Tensor, scores, lens, centre, window) -> str | None:
    beyond = torch.arange(scores.shape[1]) >= lens[:, None]
    return "your weights are not 0 beyond each source's length (padding)" if (found[beyond].abs() > 1e-9).any() \
        else None


check_local_p_weights = Check(
    "local-p weights agree with lib.seq2seq.local_weights on 20 fresh random cases",
    local_p_cases, lambda scores, lens, centre, window: local_weights(scores, lens, centre, window, gaussian=True),
    describe=lambda scores, lens, centre, window: (f"scores of shape {tuple(scores.shape)}, lens {lens.tolist()}, "
                                                   f"centre {[round(c, 2) for c in centre.tolist()]}, window {window}"),
    compared_with="the local-p weights", noun="weights", layout="(B, S)",
    slips=(
        Slip(_local_m,
             "you left out the Gaussian factor exp(-(s - p_t)² / 2σ²): that is local-m's window, not local-p"),
        Slip(lambda s, lens, c, d: masked_softmax(s, lens) * _gaussian(_distance(s, c), d / 2),
             "positions outside the window [p_t - D, p_t + D] must get weight 0: take the softmax over the window "
             "only"),
        Slip(lambda s, lens, c, d: masked_softmax(s, lens) * _gaussian(_distance(s, c), d / 2)
             * (_distance(s, c).abs() <= d),
             "the softmax must run over the positions inside the window only, not over the whole source"),
        Slip(lambda s, lens, c, d: _local_m(s, lens, c, d) * _gaussian(_distance(s, c), d), "σ is D/2, not D"),
        Slip(lambda s, lens, c, d: _local_m(s, lens, c, d) * _gaussian(_distance(s, c), d / 2, two=1.0),
             "the exponent is -(s - p_t)² / (2σ²): you left out the 2"),
        Slip(_counted_from_zero, "source positions s are counted from 1 (p_t = S sigmoid(...) lies in [0, S]): use "
                                 "s = 1, ..., S"),
        Slip(_renormalised, "Luong et al. do not renormalise after multiplying by the Gaussian: the weights sum to "
                            "less than 1"),
    ),
    nan_hint=": a window with no source position in it must give zeros",
    rules=_padding_weighted, tolerance=dict(atol=1e-6, rtol=0.0),
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
