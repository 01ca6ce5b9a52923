"""Checkers for the exercises of chapter 10 (sequence-to-sequence models with attention)."""
from __future__ import annotations

import torch

from lib.attention import AdditiveScore, attention, masked_softmax
from lib.checks.core import Check, CheckFailed, _require_tensor
from lib.seq2seq import local_weights


def _largest_difference(found: torch.Tensor, expected: torch.Tensor) -> str:
    difference = (found - expected).abs()
    where = tuple(int(i) for i in torch.unravel_index(difference.argmax(), expected.shape))
    return f"largest difference {difference.max():.3g} at index {where}"


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


def _local_p_variants(scores, lens, centre, window) -> list[tuple[torch.Tensor, str]]:
    """Common slips, each with what to say when a student's answer equals it."""
    positions = torch.arange(1, scores.shape[1] + 1, dtype=scores.dtype)
    distance = positions - centre[:, None]  # (B, S)
    inside = distance.abs() <= window
    gaussian = torch.exp(-(distance**2) / (2 * (window / 2) ** 2))
    window_softmax = local_weights(scores, lens, centre, window, gaussian=False)
    zero_based = torch.arange(scores.shape[1], dtype=scores.dtype) - centre[:, None]
    zero_softmax = masked_softmax(scores.masked_fill(zero_based.abs() > window, float("-inf")), lens)
    variants = [
        (window_softmax, "you left out the Gaussian factor exp(-(s - p_t)² / 2σ²): that is local-m's window, "
                         "not local-p"),
        (masked_softmax(scores, lens) * gaussian,
         "positions outside the window [p_t - D, p_t + D] must get weight 0: take the softmax over the window only"),
        (masked_softmax(scores, lens) * gaussian * inside,
         "the softmax must run over the positions inside the window only, not over the whole source"),
        (window_softmax * torch.exp(-(distance**2) / (2 * window**2)), "σ is D/2, not D"),
        (window_softmax * torch.exp(-(distance**2) / (window / 2) ** 2), "the exponent is -(s - p_t)² / (2σ²): "
                                                                        "you left out the 2"),
        (zero_softmax * torch.exp(-(zero_based**2) / (2 * (window / 2) ** 2)),
         "source positions s are counted from 1 (p_t = S sigmoid(...) lies in [0, S]): use s = 1, ..., S"),
    ]
    renormalised = window_softmax * gaussian
    totals = renormalised.sum(-1, keepdim=True)
    variants.append((renormalised / torch.where(totals > 0, totals, torch.ones_like(totals)),
                     "Luong et al. do not renormalise after multiplying by the Gaussian: the weights sum to less "
                     "than 1"))
    return variants


def judge_local_p_weights(cases: list[tuple], results: list) -> None:
    """Compare the student's weights with :func:`lib.seq2seq.local_weights` (``gaussian=True``)."""
    for (scores, lens, centre, window), found in zip(cases, results, strict=True):
        context = (f"scores of shape {tuple(scores.shape)}, lens {lens.tolist()}, "
                   f"centre {[round(c, 2) for c in centre.tolist()]}, window {window}")
        found = _require_tensor(found, context)
        expected = local_weights(scores, lens, centre, window, gaussian=True)
        if found.shape != expected.shape:
            raise CheckFailed(f"for {context} your weights have shape {tuple(found.shape)}; expected (B, S) = "
                              f"{tuple(expected.shape)}")
        if not found.is_floating_point():
            raise CheckFailed(f"your weights have dtype {found.dtype}; return floats")
        found = found.to(expected.dtype)
        if torch.isnan(found).any():
            raise CheckFailed(f"your weights contain NaN for {context}: a window with no source position in it "
                              "must give zeros")
        beyond = torch.arange(scores.shape[1]) >= lens[:, None]
        if bool((found[beyond].abs() > 1e-9).any()):
            raise CheckFailed(f"for {context} your weights are not 0 beyond each source's length (padding)")
        if torch.allclose(found, expected, atol=1e-6):
            continue
        for wrong, message in _local_p_variants(scores, lens, centre, window):
            if torch.allclose(found, wrong, atol=1e-6):
                raise CheckFailed(f"for {context}: {message}")
        raise CheckFailed(f"for {context} your weights differ from the local-p weights "
                          f"({_largest_difference(found, expected)})")


check_local_p_weights = Check(
    "local-p weights agree with lib.seq2seq.local_weights on 20 fresh random cases",
    local_p_cases, judge_local_p_weights,
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


def judge_bahdanau_context(cases: list[tuple], results: list) -> None:
    """Compare the student's context vectors with :func:`lib.attention.attention` and an additive score."""
    for (query, states, lens, W, U, v), found in zip(cases, results, strict=True):
        context = (f"query {tuple(query.shape)}, states {tuple(states.shape)}, lens {lens.tolist()}, "
                   f"W {tuple(W.shape)}, U {tuple(U.shape)}")
        hint = (". Check the shapes: W h_(t-1) is (B, A), U h̄_s is (B, S, A); add them with a new axis for S"
                if isinstance(found, str) and found.startswith("RuntimeError") else "")
        found = _require_tensor(found, context, hint)
        expected, weights = _bahdanau_reference(query, states, lens, W, U, v)
        if found.shape == weights.shape and found.shape != expected.shape:
            raise CheckFailed(f"for {context} you returned the weights (B, S); return the context "
                              f"c_t = Σ_s α_s h̄_s of shape (B, De) = {tuple(expected.shape)}")
        if found.shape != expected.shape:
            raise CheckFailed(f"for {context} your context has shape {tuple(found.shape)}; expected (B, De) = "
                              f"{tuple(expected.shape)}")
        found = found.to(expected.dtype)
        if torch.isnan(found).any():
            raise CheckFailed(f"your context contains NaN for {context}")
        if torch.allclose(found, expected, atol=1e-6):
            continue
        scores = torch.tanh((query @ W.T)[:, None] + states @ U.T) @ v  # (B, S)
        diagnoses = [
            (torch.einsum("bs,bsd->bd", torch.softmax(scores, -1), states),
             "padded positions s > len must get weight 0: mask them before the softmax"),
            (torch.einsum("bs,bsd->bd", masked_softmax(scores[:, None], lens)[:, 0], states.flip(1)),
             "weight h̄_s with α_s of the same position"),
            (states.sum(1) / lens[:, None], "that is the plain average of the states; the weights come from the "
                                            "scores v^T tanh(W h_(t-1) + U h̄_s)"),
        ]
        for wrong, message in diagnoses:
            if wrong.shape == found.shape and torch.allclose(found, wrong, atol=1e-6):
                raise CheckFailed(f"for {context}: {message}")
        raise CheckFailed(f"for {context} your context differs from Σ_s α_s h̄_s with "
                          f"α = softmax(v^T tanh(W h_(t-1) + U h̄_s)) ({_largest_difference(found, expected)})")


check_bahdanau_context = Check(
    "Bahdanau context vectors agree with lib.attention on 15 fresh random cases",
    bahdanau_context_cases, judge_bahdanau_context,
)
