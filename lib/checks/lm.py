"""Checkers for the exercises of chapter 6 (language models and sequence generation)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lib.checks.core import Check, Slip
from lib.ngram import add_delta_log_prob
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


def _add_delta(counts: torch.Tensor, delta: float) -> torch.Tensor:
    """The smoothed table (m(h, w) + delta) / (m(h) + delta |V|) from :func:`lib.ngram.add_delta_log_prob`."""
    return add_delta_log_prob(counts, counts.sum(-1, keepdim=True), delta, counts.shape[1]).exp()


def _rows_not_normalised(found: torch.Tensor, expected: torch.Tensor, counts, delta) -> str | None:
    sums = found.sum(-1)
    row = int((sums - 1).abs().argmax())
    if abs(float(sums[row]) - 1) <= 1e-6:
        return None
    return (f"your row {row} sums to {float(sums[row]):.4f}, not 1: the denominator is the context's count plus "
            "delta once for every word of the vocabulary, m(h) + delta * |V|")


check_add_delta = Check(
    "add-delta probabilities agree with lib.ngram.add_delta_log_prob on 20 fresh random count tables",
    add_delta_cases, _add_delta,
    describe=lambda counts, delta: f"counts of shape {tuple(counts.shape)}, delta = {delta}",
    compared_with="(m(h, w) + delta) / (m(h) + delta |V|)", noun="table", layout="(C, V)",
    # The unsmoothed answer is named before the row sums, which it also breaks.
    slips=(Slip(lambda counts, delta: counts / counts.sum(-1, keepdim=True).clamp(min=1),
                "you returned the unsmoothed relative frequencies; add delta"),),
    shape_hint=lambda shape, counts, delta: ": one probability per (context, word) pair",
    nan_hint=": with delta > 0 even a context seen 0 times has a defined (uniform) distribution",
    rules=_rows_not_normalised, tolerance=dict(atol=1e-6, rtol=1e-5),
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


def _nce_slip(data, noise, data_q, noise_q, log_k: bool = True, per_data_word: bool = False) -> torch.Tensor:
    """The NCE loss with the usual slips: no log K in the logits, or an average over the B data words only."""
    k = noise.shape[1] if log_k else 1
    total = F.logsigmoid(nce_logits(data, data_q, k)).sum() + F.logsigmoid(-nce_logits(noise, noise_q, k)).sum()
    return -total / (data.numel() if per_data_word else data.numel() + noise.numel())


check_nce_loss = Check(
    "the NCE loss agrees with lib.softmax_approx.nce_loss on 20 fresh random batches",
    nce_loss_cases, nce_loss,
    describe=lambda data, noise, data_q, noise_q: f"B = {noise.shape[0]} data words with K = {noise.shape[1]} "
                                                  "noise words each",
    compared_with="lib.softmax_approx.nce_loss", noun="loss",
    layout=" (the mean over all B (K + 1) classified words)",
    slips=(
        Slip(lambda *case: _nce_slip(*case, log_k=False),
             "your logits miss the log K: the classifier's logit is s - log(K q), not s - log q"),
        Slip(lambda *case: _nce_slip(*case, per_data_word=True),
             "you divided by B only; average over all B (K + 1) words, data and noise"),
        Slip(lambda *case: -nce_loss(*case),
             "your loss has the wrong sign: minimise the negative log-likelihood of the labels"),
    ),
    tolerance=dict(atol=1e-6, rtol=1e-6),
)


def baseline_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh one-token policies ``(scores, reward)`` for :data:`check_best_baseline`.

    ``scores`` are the logits of 3 to 8 words, ``reward`` a number in [0, 1]
    for each word.
    """
    cases = []
    for _ in range(trials):
        words = int(torch.randint(3, 9, (), generator=generator))
        scores = 1.5 * torch.randn(words, generator=generator, dtype=torch.float64)
        cases.append((scores, torch.rand(words, generator=generator, dtype=torch.float64)))
    return cases


def _best_baseline(scores: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """The constant ``b`` of least variance for the estimate ``(G(x) - b) grad log p(x)``, ``x ~ p``.

    The variance is a quadratic in ``b``, smallest at
    ``b = E[G |grad log p|^2] / E[|grad log p|^2]``: the mean reward, weighted by
    the squared length of each word's score function. With respect to the
    logits, ``grad log p(x) = e_x - p``, of squared length ``1 - 2 p_x + |p|^2``.
    """
    p = torch.softmax(scores, 0)  # (V,)
    lengths = 1 - 2 * p + (p * p).sum()  # (V,): |e_x - p|^2
    return (p * lengths * reward).sum() / (p * lengths).sum()


check_best_baseline = Check(
    "the baseline agrees with the variance-minimising constant on 20 fresh random policies, within 0.001",
    baseline_cases, _best_baseline,
    describe=lambda scores, reward: f"a policy over {len(scores)} words",
    compared_with="E[G |grad log p|^2] / E[|grad log p|^2]", noun="baseline", layout="() (one number)",
    slips=(
        Slip(lambda scores, reward: (torch.softmax(scores, 0) * reward).sum(),
             "you returned the mean reward E[G]: a good baseline, but not the one of least variance; words whose "
             "score function is longer count more"),
        Slip(lambda scores, reward: torch.zeros((), dtype=scores.dtype),
             "you returned 0, no baseline at all: the variance at b = 0 is not its minimum"),
    ),
    shape_hint=lambda shape, scores, reward: ": one number, the same baseline for every word",
    tolerance=dict(atol=1e-3, rtol=0.0),
)
