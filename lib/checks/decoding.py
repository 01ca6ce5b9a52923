"""Checkers for the exercises of chapter 7 (decoding: greedy search and beam search)."""
from __future__ import annotations

import torch

from lib.checks.core import Check, CheckFailed, _require_tensor
from lib.decoding import expand_and_prune, sampling_distribution


def expand_and_prune_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(beam_scores, log_probs, beam_size)`` for :data:`check_expand_and_prune`.

    ``K`` hypotheses with random (negative) scores, next-token log-probabilities
    ``(K, V)`` from a softmax of random logits, and a beam size up to ``K * V``.
    Random floats make ties impossible, so the answer is unique.
    """
    cases = []
    for _ in range(trials):
        hypotheses = int(torch.randint(1, 5, (), generator=generator))
        vocab_size = int(torch.randint(2, 9, (), generator=generator))
        beam_scores = -3 * torch.rand(hypotheses, generator=generator, dtype=torch.float64)
        logits = 2 * torch.randn(hypotheses, vocab_size, generator=generator, dtype=torch.float64)
        beam_size = int(torch.randint(1, min(hypotheses * vocab_size, 6) + 1, (), generator=generator))
        cases.append((beam_scores, torch.log_softmax(logits, dim=-1), beam_size))
    return cases


def judge_expand_and_prune(cases: list[tuple], results: list) -> None:
    """Compare the student's flat indices with :func:`lib.decoding.expand_and_prune`."""
    for (beam_scores, log_probs, beam_size), found in zip(cases, results, strict=True):
        shapes = f"beam_scores of shape {tuple(beam_scores.shape)}, log_probs {tuple(log_probs.shape)}, " \
                 f"beam_size {beam_size}"
        found = _require_tensor(found, shapes)
        vocab_size = log_probs.shape[1]
        parents, tokens, _ = expand_and_prune(beam_scores, log_probs, beam_size)
        expected = parents * vocab_size + tokens
        if found.shape != expected.shape:
            raise CheckFailed(
                f"for {shapes} your result has shape {tuple(found.shape)}; expected ({beam_size},): "
                "one flat index per kept candidate"
            )
        if found.is_floating_point() or found.is_complex():
            raise CheckFailed(f"your indices have dtype {found.dtype}; return integers (torch.long)")
        found = found.long()
        if torch.equal(found, expected):
            continue
        candidates = (beam_scores[:, None] + log_probs).flatten()  # (K * V,)
        last_token_only = log_probs.flatten().topk(beam_size).indices
        if torch.equal(found, last_token_only):
            raise CheckFailed(
                f"for {shapes}: you ranked the candidates by the new token's log-probability alone; "
                "a candidate's score is its hypothesis's score plus that log-probability"
            )
        if torch.equal(found, tokens):
            raise CheckFailed(
                f"for {shapes}: you returned the token ids; return flat indices parent * V + token "
                "(the position in the flattened (K, V) table of candidates)"
            )
        if torch.equal(found.sort().values, expected.sort().values):
            raise CheckFailed(f"for {shapes}: you kept the right candidates, but list them best first")
        raise CheckFailed(
            f"for {shapes}: your indices {found.tolist()} are not the {beam_size} best candidates "
            f"{expected.tolist()} (scores {[round(v, 3) for v in candidates[expected].tolist()]})"
        )


check_expand_and_prune = Check(
    "the kept candidates agree with lib.decoding.expand_and_prune on 20 fresh random beams",
    expand_and_prune_cases, judge_expand_and_prune,
)


def sampling_distribution_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(log_probs, temperature, top_k)`` for :data:`check_sampling_distribution`.

    ``log_probs`` has shape ``(V,)`` or ``(B, V)``; ``top_k`` is None in some cases.
    """
    cases = []
    temperatures = (0.25, 0.5, 0.8, 1.0, 1.5, 3.0)
    for trial in range(trials):
        vocab_size = int(torch.randint(3, 10, (), generator=generator))
        shape = (vocab_size,) if trial % 2 else (int(torch.randint(2, 4, (), generator=generator)), vocab_size)
        log_probs = torch.log_softmax(2 * torch.randn(*shape, generator=generator, dtype=torch.float64), dim=-1)
        temperature = temperatures[int(torch.randint(len(temperatures), (), generator=generator))]
        top_k = None if trial % 5 == 0 else int(torch.randint(1, vocab_size + 1, (), generator=generator))
        cases.append((log_probs, temperature, top_k))
    return cases


def judge_sampling_distribution(cases: list[tuple], results: list) -> None:
    """Compare the student's probabilities with :func:`lib.decoding.sampling_distribution`."""
    for (log_probs, temperature, top_k), found in zip(cases, results, strict=True):
        setting = f"log_probs of shape {tuple(log_probs.shape)}, temperature {temperature}, top_k {top_k}"
        found = _require_tensor(found, setting)
        expected = sampling_distribution(log_probs, temperature, top_k)
        if found.shape != expected.shape:
            raise CheckFailed(
                f"for {setting} your probabilities have shape {tuple(found.shape)}; expected {tuple(expected.shape)}"
            )
        found = found.to(expected.dtype)
        if torch.isnan(found).any():
            raise CheckFailed(f"your probabilities contain NaN for {setting}")
        if torch.allclose(found, expected, atol=1e-8):
            continue
        sums = found.sum(-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-6):
            raise CheckFailed(
                f"for {setting} your probabilities sum to {sums.flatten()[0]:.4f}, not 1: renormalise "
                "after dropping the tokens outside the top k"
            )
        if top_k is not None and ((expected == 0) & (found.abs() > 1e-12)).any():
            raise CheckFailed(f"for {setting} you give probability to tokens outside the {top_k} most probable")
        if torch.allclose(found, sampling_distribution(log_probs * temperature, 1.0, top_k), atol=1e-8):
            raise CheckFailed(f"for {setting}: you multiplied by the temperature; divide log_probs by it")
        if torch.allclose(found, sampling_distribution(log_probs, 1.0, top_k), atol=1e-8):
            raise CheckFailed(f"for {setting}: the temperature has no effect in your answer; use log_probs / T")
        raise CheckFailed(
            f"for {setting} your probabilities differ from softmax(log_probs / T) over the top k by up to "
            f"{(found - expected).abs().max():.3g}"
        )


check_sampling_distribution = Check(
    "tempered top-k probabilities agree with lib.decoding.sampling_distribution on 20 fresh random cases",
    sampling_distribution_cases, judge_sampling_distribution,
)
