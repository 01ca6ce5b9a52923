"""Checkers for the exercises of chapter 5 (word embeddings and word2vec)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from lib.checks.core import Check, Slip
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


def _scores(centre, context, noise) -> tuple[torch.Tensor, torch.Tensor]:
    """The true word's scores u · h ``(B,)`` and the noise words' u_k · h ``(B, K)``."""
    return (context * centre).sum(-1), torch.einsum("bkd,bd->bk", noise, centre)


def _sgns_slip(centre, context, noise, sign: float = -1.0, noise_sign: float = -1.0, reduce=torch.sum):
    positive, negative = _scores(centre, context, noise)
    return sign * (F.logsigmoid(positive) + reduce(F.logsigmoid(noise_sign * negative), -1))


def _softmax_over_noise(centre, context, noise) -> torch.Tensor:
    positive, negative = _scores(centre, context, noise)
    return -torch.log_softmax(torch.cat([positive[:, None], negative], 1), dim=1)[:, 0]


check_negative_sampling_loss = Check(
    "your negative-sampling losses agree with lib.word2vec on 15 fresh random cases",
    negative_sampling_cases,
    lambda centre, context, noise: torch.stack([negative_sampling_loss(h, u, n)
                                                for h, u, n in zip(centre, context, noise)]),  # (B,)
    describe=lambda centre, context, noise: (f"centre {tuple(centre.shape)}, context {tuple(context.shape)}, "
                                             f"noise {tuple(noise.shape)}"),
    compared_with="lib.word2vec's", layout="(B,)",
    slips=(
        Slip(lambda *case: _sgns_slip(*case, noise_sign=1.0),
             "the noise words enter as log σ(-u_k · h): flip the sign of their scores"),
        Slip(lambda *case: _sgns_slip(*case, reduce=torch.mean), "sum the K noise terms; you averaged them"),
        Slip(lambda *case: _sgns_slip(*case, sign=1.0),
             "return the loss, the negative log-likelihood: put a minus sign in front"),
        Slip(_softmax_over_noise, "that is a softmax over the true word and the noise words; negative sampling uses "
                                  "one sigmoid per word instead"),
    ),
    shape_hint=lambda shape, centre, context, noise: {
        (): ": return one loss per example, not their sum or mean",
        tuple(noise.shape[:2]): ": add the K noise terms to the true word's term",
    }.get(shape, ""),
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


def _sqrt_plus_ratio(ratio: torch.Tensor) -> torch.Tensor:
    """word2vec.c's formula sqrt(s/f) + s/f without the cap at 1."""
    return ratio.sqrt() + ratio


check_keep_probabilities = Check(
    "your keep probabilities agree with lib.word2vec (and gensim) on 12 fresh random vocabularies",
    keep_probability_cases, keep_probabilities,
    describe=lambda counts, sample: f"{counts.numel()} counts and sample = {sample:.3g}",
    compared_with="lib.word2vec's", layout="(V,)",
    slips=(
        Slip(lambda counts, sample: keep_probabilities(counts, sample, formula="paper"),
             "that is the paper's sqrt(s/f); the chapter asks for word2vec.c's (sqrt(f/s) + 1) · s/f"),
        Slip(lambda counts, sample: _sqrt_plus_ratio(sample * counts.sum().double() / counts.double()),
             "cap the probabilities at 1: a rare word is always kept"),
        Slip(lambda counts, sample: 1 - keep_probabilities(counts, sample),
             "that is the probability of discarding a word; return the probability of keeping it"),
        Slip(lambda counts, sample: _sqrt_plus_ratio(sample / counts.double()),
             "f(w) is the word's *share* of the corpus, count / total, not its raw count"),
    ),
)
