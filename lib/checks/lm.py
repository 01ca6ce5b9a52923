"""Checkers for the exercises of chapter 6 (language models and sequence generation)."""
from __future__ import annotations

import math

import torch

from lib.checks.core import Check, CheckFailed, _require_tensor
from lib.lm import add_delta_log_prob
from lib.softmax_approx import nce_logits, nce_loss


def add_delta_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(counts, delta)`` for :data:`check_add_delta`.

    ``counts`` is a ``(C, V)`` table of bigram counts (row = context, column =
    next word), with many zeros and, in every other case, a context never seen
    (a row of zeros). ``delta`` is one of a few positive values.
    """
    cases = []
    deltas = (0.01, 0.1, 0.5, 1.0, 2.0)
    for trial in range(trials):
        contexts = int(torch.randint(2, 6, (), generator=generator))
        vocab_size = int(torch.randint(3, 9, (), generator=generator))
        counts = torch.randint(0, 6, (contexts, vocab_size), generator=generator).double()
        counts *= torch.rand(contexts, vocab_size, generator=generator) < 0.6  # sparse, as real counts are
        if trial % 2:
            counts[int(torch.randint(contexts, (), generator=generator))] = 0.0
        delta = deltas[int(torch.randint(len(deltas), (), generator=generator))]
        cases.append((counts, delta))
    return cases


def judge_add_delta(cases: list[tuple], results: list) -> None:
    """Compare the student's table with :func:`lib.lm.add_delta_log_prob`."""
    for (counts, delta), found in zip(cases, results, strict=True):
        setting = f"counts of shape {tuple(counts.shape)}, delta = {delta}"
        found = _require_tensor(found, setting)
        expected = add_delta_log_prob(counts, counts.sum(-1, keepdim=True), delta, counts.shape[1]).exp()
        if found.shape != expected.shape:
            raise CheckFailed(f"for {setting} your table has shape {tuple(found.shape)}; expected "
                              f"{tuple(expected.shape)}: one probability per (context, word) pair")
        found = found.to(expected.dtype)
        if torch.isnan(found).any():
            raise CheckFailed(f"your probabilities contain NaN for {setting}: with delta > 0 even a context "
                              "seen 0 times has a defined (uniform) distribution")
        if torch.allclose(found, expected, atol=1e-6, rtol=1e-5):  # float32 answers pass
            continue
        mle = counts / counts.sum(-1, keepdim=True).clamp(min=1)
        if torch.allclose(found, mle, atol=1e-6):  # named before the row sums, which it also breaks
            raise CheckFailed(f"for {setting} you returned the unsmoothed relative frequencies; add delta")
        sums = found.sum(-1)
        row = int((sums - 1).abs().argmax())
        if abs(float(sums[row]) - 1) > 1e-6:
            raise CheckFailed(
                f"for {setting} your row {row} sums to {float(sums[row]):.4f}, not 1: the denominator is the "
                "context's count plus delta once for every word of the vocabulary, m(h) + delta * |V|"
            )
        raise CheckFailed(
            f"for {setting} your probabilities differ from (m(h, w) + delta) / (m(h) + delta |V|) by up to "
            f"{(found - expected).abs().max():.3g}"
        )


check_add_delta = Check(
    "add-delta probabilities agree with lib.lm.add_delta_log_prob on 20 fresh random count tables",
    add_delta_cases, judge_add_delta,
)


def nce_loss_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(data_scores, noise_scores, data_log_q, noise_log_q)`` for :data:`check_nce_loss`.

    Batches of ``B`` data words with ``K`` noise words each; ``B`` and ``K``
    differ, and ``K`` is never 1 (a forgotten ``log K`` must show).
    """
    cases = []
    for _ in range(trials):
        batch, noise = (int(n) for n in torch.randperm(5, generator=generator)[:2] + 2)
        data_scores = 2 * torch.randn(batch, generator=generator, dtype=torch.float64)
        noise_scores = 2 * torch.randn(batch, noise, generator=generator, dtype=torch.float64)
        data_log_q = torch.log(torch.rand(batch, generator=generator, dtype=torch.float64) * 0.3 + 0.01)
        noise_log_q = torch.log(torch.rand(batch, noise, generator=generator, dtype=torch.float64) * 0.3 + 0.01)
        cases.append((data_scores, noise_scores, data_log_q, noise_log_q))
    return cases


def judge_nce_loss(cases: list[tuple], results: list) -> None:
    """Compare the student's loss with :func:`lib.softmax_approx.nce_loss`."""
    for (data, noise, data_q, noise_q), found in zip(cases, results, strict=True):
        batch, k = noise.shape
        setting = f"B = {batch} data words with K = {k} noise words each"
        found = _require_tensor(found, setting)
        if found.numel() != 1:
            raise CheckFailed(f"for {setting} your loss has shape {tuple(found.shape)}; return one number "
                              "(the mean over all B (K + 1) classified words)")
        value = float(found.reshape(()))
        expected = float(nce_loss(data, noise, data_q, noise_q))
        if math.isnan(value):
            raise CheckFailed(f"your loss is NaN for {setting}")
        if abs(value - expected) <= 1e-6 * max(1.0, abs(expected)):  # float32 answers pass
            continue

        def variant(logit_data, logit_noise, scale):
            return float(-(torch.nn.functional.logsigmoid(logit_data).sum()
                           + torch.nn.functional.logsigmoid(-logit_noise).sum()) / scale)

        without_k = variant(data - data_q, noise - noise_q, batch * (k + 1))
        diagnoses = (
            (without_k, "your logits miss the log K: the classifier's logit is s - log(K q), not s - log q"),
            (variant(nce_logits(data, data_q, k), nce_logits(noise, noise_q, k), batch),
             "you divided by B only; average over all B (K + 1) words, data and noise"),
            (-expected, "your loss has the wrong sign: minimise the negative log-likelihood of the labels"),
        )
        for wrong, message in diagnoses:
            if abs(value - wrong) <= 1e-6 * max(1.0, abs(wrong)):
                raise CheckFailed(f"for {setting}: {message}")
        raise CheckFailed(f"for {setting} your loss is {value:.6f}; expected {expected:.6f}")


check_nce_loss = Check(
    "the NCE loss agrees with lib.softmax_approx.nce_loss on 20 fresh random batches",
    nce_loss_cases, judge_nce_loss,
)
