"""REINFORCE: training a sequence generator on a sequence-level reward.

A language model is trained by maximum likelihood, token by token, but its
output is judged by a score of the whole sequence (BLEU, ROUGE, an accuracy)
that is neither a likelihood nor differentiable. Chapter 6 (syllabus LM7) views
generation as a Markov decision process: the state is the prefix, the action
the next token, the policy the model :math:`p_\\theta`, and a finished sequence
:math:`\\mathbf{x}` earns a reward :math:`G(\\mathbf{x})`. The gradient of the
expected reward is, with any baseline :math:`b` that does not depend on
:math:`\\mathbf{x}`,

.. math::
    \\nabla_\\theta\\, \\mathbb{E}_{\\mathbf{x} \\sim p_\\theta}[G(\\mathbf{x})]
    = \\mathbb{E}_{\\mathbf{x} \\sim p_\\theta}\\Big[\\big(G(\\mathbf{x}) - b\\big)
      \\sum_t \\nabla_\\theta \\log p_\\theta(x_t \\mid \\mathbf{x}_{<t})\\Big]

(Williams, 1992). :func:`reinforce_loss` is a loss whose gradient is minus the
sample average of this estimate; :func:`reinforce_fine_tune` fine-tunes a
language model with it. The reward is an argument; chapter 6's experiment
(``experiments.ch06_language_models``) uses :func:`bigram_precision`, a stand-in
for BLEU (chapter 8).

A baseline leaves the expected gradient unchanged but can shrink its variance greatly.
Three kinds are common: a constant (a running mean of the rewards), the reward of the
model's own greedy output (self-critical training, Rennie et al., 2017) and, for a batch
of samples, the mean reward of the *other* samples (leave-one-out, Kool et al., 2019).
The batch mean *including* the sample itself is not a valid baseline: it depends on the
sample and shrinks the expected gradient by the factor ``(B - 1) / B``
(``tests/lib/part3_words/test_reinforce.py`` shows it).

``B`` is the number of sampled sequences and ``T`` their (padded) length.
Log-probabilities are natural logarithms.

References
----------
.. [1] R. J. Williams. "Simple Statistical Gradient-Following Algorithms for
   Connectionist Reinforcement Learning". Machine Learning 8(3-4), 1992.
.. [2] M. Ranzato, S. Chopra, M. Auli, W. Zaremba. "Sequence Level Training
   with Recurrent Neural Networks". ICLR 2016. arXiv:1511.06732.
.. [3] S. J. Rennie, E. Marcheret, Y. Mroueh, J. Ross, V. Goel. "Self-Critical
   Sequence Training for Image Captioning". CVPR 2017. arXiv:1612.00563.
.. [4] W. Kool, H. van Hoof, M. Welling. "Buy 4 REINFORCE Samples, Get a
   Baseline for Free!". ICLR 2019 Workshop DeepRLStructPred.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Optional, Union

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Float64, Int64
from torch import Tensor, nn

from lib.checked import Finite, NonNegative, NonNegativeInt, PositiveInt
from lib.part3_words.lm import rollout

__all__ = [
    "BASELINES",
    "reinforce_loss",
    "reinforce_fine_tune",
    "bigram_precision",
]

# The baseline reinforce_loss computes; a number or a (B,) tensor may be given too.
BASELINES = ("leave-one-out",)
Baseline = Union[None, Finite, Literal[BASELINES]]


def reinforce_loss(
    log_probs: Union[Float[Tensor, "B T"], Float[Tensor, "B"]],
    rewards: Float[Tensor, "B"],
    baseline: Union[Baseline, Float[Tensor, "B"]] = None,
    mask: Optional[Bool[Tensor, "B T"]] = None,
) -> Float[Tensor, ""]:
    r"""The REINFORCE loss of ``B`` sampled sequences, whose gradient estimates
    :math:`-\nabla_\theta J` (only the gradient means something):

    .. math::
        L = -\frac{1}{B} \sum_{i=1}^{B} \big(G_i - b_i\big)
            \sum_{t} \log p_\theta\big(x^{(i)}_t \mid \mathbf{x}^{(i)}_{<t}\big)

    ``log_probs`` holds every sampled token's log-probability, with gradient (``mask``
    False at padding), or one per sequence; ``rewards`` the :math:`G_i`. The
    ``baseline`` :math:`b_i` is none, a constant, ``"leave-one-out"`` (the mean reward
    of the other ``B - 1``) or one per sequence that does not depend on it (e.g. the
    greedy output's reward). No gradient flows through rewards or baseline.
    """
    batch = len(log_probs)
    if batch == 0:
        raise ValueError("log_probs must hold B >= 1 sequences; found none")
    if mask is not None and mask.shape != log_probs.shape:
        raise ValueError(
            f"mask must have the shape (B, T) of log_probs {tuple(log_probs.shape)}; "
            f"found {tuple(mask.shape)}"
        )
    if log_probs.dim() == 2 and log_probs.shape[1] == 0:
        raise ValueError("log_probs must hold T >= 1 tokens per sequence; found none")
    used = log_probs.detach() if mask is None else log_probs.detach()[mask]
    if bool(used.isnan().any()) or (used.numel() and float(used.max()) > 0):
        found = "NaN" if bool(used.isnan().any()) else f"{float(used.max()):.4g}"
        raise ValueError(
            "log_probs must be log-probabilities (<= 0), e.g. from torch.log_softmax; "
            f"found {found} (probabilities or logits instead of their logarithms?)"
        )
    if bool(used.isneginf().any()):
        raise ValueError(
            "log_probs must be finite (where mask is True): -inf makes the loss "
            "infinite; found -inf (a token of probability 0, or unmasked padding?)"
        )
    if not bool(rewards.isfinite().all()):
        raise ValueError(
            f"rewards must be B = {batch} finite numbers; found NaN or inf"
        )
    if isinstance(baseline, Tensor) and not bool(baseline.isfinite().all()):
        raise ValueError(
            f"baseline must be B = {batch} finite numbers; found NaN or inf"
        )
    if isinstance(baseline, str) and batch < 2:  # "leave-one-out"
        raise ValueError(
            f"baseline 'leave-one-out' needs B >= 2 sequences; found B = {batch}"
        )
    if log_probs.dim() == 2:
        if mask is not None:
            log_probs = log_probs.masked_fill(~mask, 0.0)  # (B, T): padding adds 0
        log_probs = log_probs.sum(dim=1)  # (B,): log p of each whole sequence
    rewards = rewards.detach().to(log_probs.dtype)
    if isinstance(baseline, str):  # "leave-one-out": the others' mean
        baseline = (rewards.sum() - rewards) / (batch - 1)  # (B,)
    elif baseline is None:
        baseline = 0.0
    baseline = torch.as_tensor(baseline, dtype=log_probs.dtype).detach()  # () or (B,)
    advantage = rewards - baseline  # (B,)
    return -(advantage * log_probs).mean()


def reinforce_fine_tune(
    model: nn.Module,
    references: Int64[Tensor, "N L"],
    reward: Callable[[Tensor, Tensor], Tensor],
    prompt: NonNegativeInt,
    bos: NonNegativeInt,
    steps: PositiveInt = 100,
    batch_size: PositiveInt = 64,
    lr: NonNegative = 1e-3,
    baseline: Baseline = "leave-one-out",
    seed: NonNegativeInt = 0,
) -> list[float]:
    """Fine-tune a language model by REINFORCE; return each step's mean reward, before
    that step's update.

    Each of the ``steps`` draws ``batch_size`` references, continues the first
    ``prompt`` tokens of each with the model's own samples to their length
    (:func:`lib.part3_words.lm.rollout`, temperature 1, seeded with ``seed``), scores
    every sample with ``reward(samples (B, L), references (B, L)) -> (B,)``, and takes
    one Adam step on :func:`reinforce_loss` of the sampled tokens' log-probabilities
    (the prompt is given, not sampled: no gradient). ``model(tokens (N, t))`` returns
    logits ``(N, t, V)`` and reads ``bos`` first (:class:`lib.part3_words.lm.NeuralLM`).
    """
    length = references.shape[1]
    if len(references) == 0:
        raise ValueError("references must hold N >= 1 sequences; found none")
    if prompt >= length:
        raise ValueError(
            f"prompt must be less than the references' length L = {length}; "
            f"found {prompt}"
        )
    if batch_size < 2:
        raise ValueError(f"batch_size must be at least 2; found {batch_size}")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    mean_rewards = []
    for _ in range(steps):
        picks = torch.randint(len(references), (batch_size,), generator=generator)
        chosen = references[picks]  # (B, L)
        samples = rollout(model, chosen[:, :prompt], length, bos, generator)  # (B, L)
        rewards = reward(samples, chosen)  # (B,)
        inputs = F.pad(samples[:, :-1], (1, 0), value=bos)  # (B, L): bos, all but last
        log_p = torch.log_softmax(model(inputs), dim=-1)  # (B, L, V)
        taken = log_p.gather(2, samples[:, :, None])  # (B, L, 1): the sampled tokens
        loss = reinforce_loss(taken[:, prompt:, 0], rewards, baseline)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean_rewards.append(float(rewards.mean()))
    return mean_rewards


def bigram_precision(
    samples: Int64[Tensor, "B L"], references: Int64[Tensor, "B R"], prompt: PositiveInt
) -> Float64[Tensor, "B"]:
    """BLEU's bigram precision without clipping: the share of a sample's bigrams that
    end on a sampled token (positions ``prompt`` onwards) and occur, however often,
    anywhere in its reference (of length ``R``, which may differ from ``L``). Each
    sample begins with its reference's prompt."""
    if prompt >= samples.shape[1]:
        raise ValueError(
            f"prompt must be less than the samples' length L = {samples.shape[1]}; "
            f"found {prompt}"
        )
    if references.shape[1] < 2:
        raise ValueError(
            "references must hold R >= 2 tokens (a bigram); "
            f"found shape {tuple(references.shape)}"
        )
    if bool((samples < 0).any()) or bool((references < 0).any()):
        low = min(int(samples.min()), int(references.min()))
        raise ValueError(f"samples and references must be token ids >= 0; found {low}")
    pairs = (samples[:, prompt - 1 : -1], samples[:, prompt:])
    generated = torch.stack(pairs, dim=-1)  # (B, L - prompt, 2)
    pairs = (references[:, :-1], references[:, 1:])
    reference = torch.stack(pairs, dim=-1)  # (B, R - 1, 2)
    # (B, L - prompt): is each generated bigram anywhere in the reference?
    found = (generated[:, :, None] == reference[:, None]).all(-1).any(-1)
    return found.double().mean(1)  # (B,)
