"""Checkers for the exercises of chapter 5 (word embeddings and word2vec)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lib.checks.core import Check, _require_tensor, compare_tensors
from lib.word2vec import keep_probabilities, negative_sampling_loss



# ---------------------------------------------------------------------------
# The negative-sampling loss.
# ---------------------------------------------------------------------------


def negative_sampling_cases(generator: torch.Generator, trials: int = 15) -> list[tuple]:
    """Fresh inputs ``(centre, context, noise)`` for :data:`check_negative_sampling_loss`.

    Shapes ``(B, D)``, ``(B, D)`` and ``(B, K, D)`` with ``B``, ``D`` and ``K``
    different, so that a sum over the wrong axis fails loudly.
    """
    cases = []
    for _ in range(trials):
        batch, dim, noise = (int(n) for n in torch.randperm(6, generator=generator)[:3] + 2)
        centre = torch.randn(batch, dim, generator=generator, dtype=torch.float64)
        context = torch.randn(batch, dim, generator=generator, dtype=torch.float64)
        negatives = torch.randn(batch, noise, dim, generator=generator, dtype=torch.float64)
        cases.append((centre, context, negatives))
    return cases


def judge_negative_sampling_loss(cases: list[tuple], results: list) -> None:
    """Compare the student's losses with :func:`lib.word2vec.negative_sampling_loss`, row by row."""
    for (centre, context, noise), found in zip(cases, results, strict=True):
        context_text = f"centre {tuple(centre.shape)}, context {tuple(context.shape)}, noise {tuple(noise.shape)}"
        found = _require_tensor(found, context_text)
        expected = torch.stack([negative_sampling_loss(h, u, n) for h, u, n in zip(centre, context, noise)])  # (B,)
        positive = (context * centre).sum(-1)  # (B,)
        negative = torch.einsum("bkd,bd->bk", noise, centre)  # (B, K)
        diagnoses = (
            (-F.logsigmoid(positive) - F.logsigmoid(negative).sum(-1),
             "the noise words enter as log σ(-u_k · h): flip the sign of their scores"),
            (-F.logsigmoid(positive) - F.logsigmoid(-negative).mean(-1),
             "sum the K noise terms; you averaged them"),
            (F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1),
             "return the loss, the negative log-likelihood: put a minus sign in front"),
            (-torch.log_softmax(torch.cat([positive[:, None], negative], 1), dim=1)[:, 0],
             "that is a softmax over the true word and the noise words; negative sampling uses one "
             "sigmoid per word instead"),
        )
        shape_hints = {(): ": return one loss per example, not their sum or mean",
                       tuple(noise.shape[:2]): ": add the K noise terms to the true word's term"}
        compare_tensors(found, expected, context_text, "(B,)", diagnoses, shape_hints, "lib.word2vec")


check_negative_sampling_loss = Check(
    "your negative-sampling losses agree with lib.word2vec on 15 fresh random cases",
    negative_sampling_cases, judge_negative_sampling_loss,
)


# ---------------------------------------------------------------------------
# Subsampling: word2vec.c's keep probability.
# ---------------------------------------------------------------------------


def keep_probability_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(counts, sample)`` for :data:`check_keep_probabilities`.

    Zipf-like counts (a few frequent words, many rare ones). The threshold is
    drawn between the rarest and the most frequent word's share, so that every
    case has words kept for sure (the formula exceeds 1 when f < 2.618 s) and
    words that are not: each of the diagnosed slips shows in every case.
    """
    cases = []
    for _ in range(trials):
        size = int(torch.randint(8, 40, (1,), generator=generator))
        ranks = torch.randperm(size, generator=generator) + 1
        counts = (2000 / ranks * (0.5 + torch.rand(size, generator=generator))).long() + 1
        shares = counts.double() / counts.sum()
        lowest, highest = (float(shares.min()) / 2.618, float(shares.max()) / 2.618)
        position = 0.2 + 0.6 * float(torch.rand(1, generator=generator))  # strictly inside the range
        sample = lowest ** (1 - position) * highest ** position  # log-uniform between the two
        cases.append((counts, sample))
    return cases


def judge_keep_probabilities(cases: list[tuple], results: list) -> None:
    """Compare the student's probabilities with :func:`lib.word2vec.keep_probabilities`."""
    for (counts, sample), found in zip(cases, results, strict=True):
        context = f"{counts.numel()} counts and sample = {sample:.3g}"
        found = _require_tensor(found, context)
        expected = keep_probabilities(counts, sample)
        ratio = sample * counts.sum().double() / counts.double()  # s / f
        diagnoses = (
            (keep_probabilities(counts, sample, formula="paper"),
             "that is the paper's sqrt(s/f); the chapter asks for word2vec.c's (sqrt(f/s) + 1) · s/f"),
            (ratio.sqrt() + ratio, "cap the probabilities at 1: a rare word is always kept"),
            (1 - expected, "that is the probability of discarding a word; return the probability of keeping it"),
            ((sample / counts.double()).sqrt() + sample / counts.double(),
             "f(w) is the word's *share* of the corpus, count / total, not its raw count"),
        )
        compare_tensors(found, expected, context, "(V,)", diagnoses, {}, "lib.word2vec")


check_keep_probabilities = Check(
    "your keep probabilities agree with lib.word2vec (and gensim) on 12 fresh random vocabularies",
    keep_probability_cases, judge_keep_probabilities,
)
