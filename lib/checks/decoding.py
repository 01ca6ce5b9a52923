"""Checkers for the exercises of chapter 7 (decoding: greedy search and beam search)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lib.checks.core import Check, Measured, Slip, solve_increasing
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


def _flat_indices(beam_scores, log_probs, beam_size) -> torch.Tensor:
    """The kept candidates of :func:`lib.decoding.expand_and_prune` as flat indices parent * V + token."""
    parents, tokens, _ = expand_and_prune(beam_scores, log_probs, beam_size)
    return parents * log_probs.shape[1] + tokens  # (beam_size,)


def _wrong_order(found: torch.Tensor, expected: torch.Tensor, *case) -> str | None:
    if torch.equal(found.sort().values, expected.sort().values):
        return "you kept the right candidates, but list them best first"
    return None


def _not_the_best(found: torch.Tensor, expected: torch.Tensor, beam_scores, log_probs, beam_size) -> str:
    candidates = (beam_scores[:, None] + log_probs).flatten()  # (K * V,)
    return (f"your indices {found.tolist()} are not the {beam_size} best candidates {expected.tolist()} "
            f"(scores {[round(v, 4) for v in candidates[expected].tolist()]})")


check_expand_and_prune = Check(
    "the kept candidates agree with lib.decoding.expand_and_prune on 20 fresh random beams",
    expand_and_prune_cases, _flat_indices,
    describe=lambda beam_scores, log_probs, beam_size: (f"beam_scores of shape {tuple(beam_scores.shape)}, "
                                                        f"log_probs {tuple(log_probs.shape)}, beam_size {beam_size}"),
    compared_with="lib.decoding.expand_and_prune", layout="(beam_size,)",
    slips=(
        Slip(lambda beam_scores, log_probs, beam_size: log_probs.flatten().topk(beam_size).indices,
             "you ranked the candidates by the new token's log-probability alone; a candidate's score is its "
             "hypothesis's score plus that log-probability"),
        Slip(lambda *case: expand_and_prune(*case)[1], "you returned the token ids; return flat indices parent * V "
                                                      "+ token (the position in the flattened (K, V) table of "
                                                      "candidates)"),
    ),
    shape_hint=lambda shape, *case: ": one flat index per kept candidate",
    rules=_wrong_order, mismatch=_not_the_best, tolerance=dict(atol=0.0, rtol=0.0), integers=True,
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


def _not_a_distribution(found: torch.Tensor, expected: torch.Tensor, log_probs, temperature, top_k) -> str | None:
    sums = found.sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-6, rtol=0.0):
        return (f"your probabilities sum to {sums.flatten()[0]:.4f}, not 1: renormalise after dropping the tokens "
                "outside the top k")
    if top_k is not None and ((expected == 0) & (found.abs() > 1e-12)).any():
        return f"you give probability to tokens outside the {top_k} most probable"
    return None


check_sampling_distribution = Check(
    "tempered top-k probabilities agree with lib.decoding.sampling_distribution on 20 fresh random cases",
    sampling_distribution_cases, sampling_distribution,
    describe=lambda log_probs, temperature, top_k: (f"log_probs of shape {tuple(log_probs.shape)}, temperature "
                                                    f"{temperature}, top_k {top_k}"),
    compared_with="softmax(log_probs / T) over the top k", noun="probabilities", layout="log_probs.shape",
    slips=(
        Slip(lambda log_probs, temperature, top_k: sampling_distribution(log_probs * temperature, 1.0, top_k),
             "you multiplied by the temperature; divide log_probs by it"),
        Slip(lambda log_probs, temperature, top_k: sampling_distribution(log_probs, 1.0, top_k),
             "the temperature has no effect in your answer; use log_probs / T"),
        Slip(lambda log_probs, temperature, top_k: torch.softmax(log_probs / temperature, -1)
             * (sampling_distribution(log_probs, temperature, top_k) > 0),
             "you dropped the tokens outside the top k but did not renormalise: divide what is left by its sum"),
    ),
    rules=_not_a_distribution, tolerance=dict(atol=1e-8, rtol=0.0),
)


# ---- experiment: the temperature that leaves k tokens' worth of choice --------------------
def perplexity_temperature_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh ``(log_probs, perplexity)`` for :data:`check_perplexity_temperature`: a next-token
    distribution over 5 to 30 tokens (float64 log-probabilities with a unique most likely token)
    and a target perplexity between 1.5 and half the vocabulary."""
    cases = []
    for _ in range(trials):
        logits = 2 * torch.randn(int(torch.randint(5, 31, (), generator=generator)), generator=generator,
                                 dtype=torch.float64)
        logits[logits.argmax()] += 0.1
        perplexity = float(torch.empty((), dtype=torch.float64).uniform_(1.5, len(logits) / 2, generator=generator))
        cases.append((torch.log_softmax(logits, dim=0), perplexity))
    return cases


def _perplexity(log_probs: torch.Tensor, temperature: float) -> float:
    """``exp(H)`` of the distribution sampled at ``temperature``, H in nats."""
    probs = sampling_distribution(log_probs, temperature)
    return float(torch.exp(torch.special.entr(probs).sum()))  # entr(p) = -p ln p, 0 at p = 0


def perplexity_temperature(log_probs: torch.Tensor, perplexity: float) -> torch.Tensor:
    """The temperature at which sampling from ``log_probs`` has perplexity ``exp(H) = perplexity``.

    The entropy grows monotonically with the temperature, from 0 (greedy, one most likely token)
    to ``ln V`` (uniform), so halving or doubling brackets the answer and bisection finds it.

    Shapes
    ------
    log_probs ``(V,)`` -> a 0-dimensional tensor
    """
    temperature = solve_increasing(lambda t: _perplexity(log_probs, t), perplexity)
    return torch.tensor(temperature, dtype=torch.float64)


# The statement's tolerance, on the perplexity: |exp(H(T)) - target| <= 1e-6 * target. The slack
# of 1e-12 absorbs the rounding of the checker's own entropy, so that a search that stops exactly
# at the tolerance is not failed by the last bit of a sum.
PERPLEXITY_RTOL = 1e-6
# A temperature returned in float32 (or a lower precision, held to float32's, as every checker
# holds it) stands for every real number that rounds to it: T (1 ± 2^-24) at most, half a float32
# step. A search that stops on the perplexity in float64 and returns torch.tensor(T), float32 by
# default, is right if one of those numbers is; a float64 T is judged as the number it is.
FLOAT32_HALF_STEP = 2.0**-24
# How close a wrong answer must come to a known slip for the message to name it.
_SLIP_RTOL = 1e-3


def _perplexity_rules(found: torch.Tensor, expected: torch.Tensor, log_probs: torch.Tensor,
                      perplexity: float) -> str | None:
    """None if the perplexity at the student's temperature is within ``PERPLEXITY_RTOL`` (relative)
    of the target; else what is wrong, naming the slip that explains it when one does.

    ``found`` is in the dtype the student returned (:class:`_MeasuredAsReturned`): a T in a precision
    below float64 passes if some T' with |T'/T - 1| <= ``FLOAT32_HALF_STEP`` does. The perplexity
    grows with T, so the two ends of that interval decide."""
    temperature = float(found)
    if not temperature > 0:
        return f"a temperature must be > 0; yours is {temperature:.6g}"
    step = 0.0 if found.dtype == torch.float64 else FLOAT32_HALF_STEP
    lowest, error, highest = (_perplexity(log_probs, temperature * (1 + s)) / perplexity - 1
                              for s in (-step, 0.0, step))
    if lowest <= PERPLEXITY_RTOL + 1e-12 and highest >= -PERPLEXITY_RTOL - 1e-12:
        return None
    if abs(_perplexity(log_probs, 1 / temperature) / perplexity - 1) <= _SLIP_RTOL:
        return "that is 1/T, the factor that multiplies the log-probabilities; return T, which divides them"
    entropy = math.log(_perplexity(log_probs, temperature))  # H in nats at the student's T
    if abs(math.exp(entropy / math.log(2)) / perplexity - 1) <= _SLIP_RTOL:
        return ("your T gives exp(H) = perplexity with H in bits; perplexity is exp(H) for H in nats "
                "(or 2^H for H in bits)")
    if abs(2**entropy / perplexity - 1) <= _SLIP_RTOL:
        return ("your T gives 2^H = perplexity with H in nats; perplexity is exp(H) for H in nats "
                "(or 2^H for H in bits)")
    digits = 2  # enough digits that the error never prints as the tolerance itself
    while f"{abs(error):.{digits}g}" == f"{PERPLEXITY_RTOL:.{digits}g}" and digits < 17:
        digits += 1
    rounding = (f", nor does any T that rounds to your {str(found.dtype).removeprefix('torch.')} value"
                if step else "")
    return (f"at your T = {temperature:.6g} the perplexity is too {'high' if error > 0 else 'low'} by a "
            f"relative error of {abs(error):.{digits}g}; it must be within 1e-6 of the target{rounding} "
            "(narrow the interval until the perplexity, not T, is close enough)")


@dataclass(frozen=True)
class _MeasuredAsReturned(Measured):
    """A :class:`Measured` checker whose ``rules`` see the result in the dtype it was returned in, so that
    a float32 temperature is judged as the float32 number it is (see ``FLOAT32_HALF_STEP``)."""

    def _comparable(self, found: torch.Tensor, expected: torch.Tensor, case: tuple) -> tuple[torch.Tensor, dict]:
        converted, tolerance = super()._comparable(found, expected, case)  # shape, dtype kind, NaN
        return found.detach().reshape(converted.shape), tolerance


check_perplexity_temperature = _MeasuredAsReturned(
    "your temperatures give the perplexity asked for, to a relative error of 1e-6, on 12 fresh next-token "
    "distributions",
    perplexity_temperature_cases, perplexity_temperature,
    describe=lambda log_probs, perplexity: f"{len(log_probs)} tokens and perplexity {perplexity:.3f}",
    compared_with="the temperature found by bisection", noun="temperature", layout=" (a 0-dimensional tensor)",
    rules=_perplexity_rules,
    forbidden=("scipy",),
)
