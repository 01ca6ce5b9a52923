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
language model with it. The reward is an argument; chapter 6's experiment uses
:func:`bigram_precision`, a stand-in for BLEU (chapter 8), and
:func:`fine_tune_and_judge` runs it: each clock model is judged by
:func:`judge_clock_model`, fine-tuned, and judged again.

A baseline leaves the expected gradient unchanged but can shrink its variance
greatly. Three kinds are common: a constant (a running mean of the rewards),
the reward of the model's own greedy output (self-critical training, Rennie et
al., 2017) and, for a batch of samples, the mean reward of the *other* samples
(leave-one-out, Kool et al., 2019). The batch mean *including* the sample itself
is not a valid baseline: it depends on the sample and shrinks the expected
gradient by the factor ``(B - 1) / B`` (``tests/test_reinforce.py`` shows it).

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

import copy
import math
import numbers
from functools import partial
from typing import Callable, Mapping, Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.char_lm import teacher_forcing_batch
from lib.lm import CountingLanguage, drift, rollout
from lib.ngram import _require_token_tensor, perplexity
from lib.validation import require_callable, require_instance, require_int, require_number

__all__ = ["BASELINES", "reinforce_loss", "reinforce_fine_tune", "bigram_precision", "judge_clock_model",
           "fine_tune_and_judge"]

# The baselines reinforce_loss computes itself; a number or a (B,) tensor may be passed too.
BASELINES = ("leave-one-out",)


def _check_reinforce(log_probs: object, rewards: object, baseline: object, mask: object) -> None:
    if not isinstance(log_probs, Tensor) or not log_probs.is_floating_point():
        found = log_probs.dtype if isinstance(log_probs, Tensor) else type(log_probs).__name__
        raise TypeError(f"log_probs must be a floating-point torch.Tensor of shape (B,) or (B, T); found {found}")
    if log_probs.dim() not in (1, 2) or log_probs.shape[0] == 0:
        raise ValueError(f"log_probs must have shape (B,) or (B, T) with B >= 1; found {tuple(log_probs.shape)}")
    if mask is not None:
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            found = mask.dtype if isinstance(mask, Tensor) else type(mask).__name__
            raise TypeError(f"mask must be a bool torch.Tensor or None; found {found}")
        if mask.shape != log_probs.shape or log_probs.dim() != 2:
            raise ValueError(f"mask must have the shape (B, T) of log_probs {tuple(log_probs.shape)}; "
                             f"found {tuple(mask.shape)}")
    used = log_probs.detach() if mask is None else log_probs.detach()[mask]
    if bool(torch.isnan(used).any()) or (used.numel() and float(used.max()) > 0):
        found = "NaN" if bool(torch.isnan(used).any()) else f"a largest value of {float(used.max()):.4g}"
        raise ValueError(f"log_probs must be log-probabilities (<= 0), e.g. from torch.log_softmax; found {found} "
                         f"(probabilities or logits instead of their logarithms?)")
    batch = log_probs.shape[0]
    if not isinstance(rewards, Tensor) or not rewards.is_floating_point():
        found = rewards.dtype if isinstance(rewards, Tensor) else type(rewards).__name__
        raise TypeError(f"rewards must be a floating-point torch.Tensor of shape (B,); found {found}")
    if tuple(rewards.shape) != (batch,) or not bool(torch.isfinite(rewards).all()):
        raise ValueError(f"rewards must be B = {batch} finite numbers, one per sequence (shape ({batch},)); "
                         f"found shape {tuple(rewards.shape)}"
                         + ("" if tuple(rewards.shape) != (batch,) else " with NaN or inf"))
    _check_baseline(baseline, batch)


def _check_baseline(baseline: object, batch: int) -> None:
    if isinstance(baseline, str):
        if baseline not in BASELINES:
            raise ValueError(f"baseline must be None, a number, a (B,) tensor or one of {BASELINES}; "
                             f"found {baseline!r}")
        if batch < 2:
            raise ValueError(f"baseline 'leave-one-out' needs B >= 2 sequences; found B = {batch}")
    elif isinstance(baseline, Tensor):
        if not baseline.is_floating_point() or tuple(baseline.shape) != (batch,) \
                or not bool(torch.isfinite(baseline).all()):
            raise ValueError(f"baseline must be a float tensor of B = {batch} finite numbers (shape ({batch},)); "
                             f"found {baseline.dtype} of shape {tuple(baseline.shape)}")
    elif baseline is not None:
        if isinstance(baseline, bool) or not isinstance(baseline, numbers.Real):
            raise TypeError(f"baseline must be None, a number, a (B,) tensor or one of {BASELINES}; "
                            f"found {type(baseline).__name__}")
        require_number("baseline", baseline, -math.inf)


def reinforce_loss(log_probs: Tensor, rewards: Tensor, baseline: Union[None, float, str, Tensor] = None,
                   mask: Optional[Tensor] = None) -> Tensor:
    r"""The REINFORCE loss of ``B`` sampled sequences: its gradient estimates :math:`-\nabla_\theta J`.

    .. math::
        L = -\frac{1}{B} \sum_{i=1}^{B} \big(G_i - b_i\big)
            \sum_{t} \log p_\theta\big(x^{(i)}_t \mid \mathbf{x}^{(i)}_{<t}\big)

    where the advantage :math:`G_i - b_i` is a constant (no gradient flows
    through the rewards or the baseline). Minimising :math:`L` by gradient
    descent climbs the expected reward :math:`J(\theta) = \mathbb{E}[G]`. The
    value of :math:`L` itself means nothing; only its gradient does.

    Parameters
    ----------
    log_probs : Tensor
        :math:`\log p_\theta(x_t \mid \mathbf{x}_{<t})` of every sampled token,
        with gradient, or one log-probability per sequence.
    rewards : Tensor
        :math:`G_i`, the reward of each sequence (e.g. its BLEU score).
    baseline : None, float, "leave-one-out" or Tensor
        ``None`` (no baseline), a constant, ``"leave-one-out"`` (each sequence's
        baseline is the mean reward of the other ``B - 1``) or a tensor of one
        baseline per sequence that does not depend on it (e.g. the reward of the
        greedy output for the same input).
    mask : Tensor, optional
        True where ``log_probs`` holds a real token, False at padding.

    Returns
    -------
    Tensor
        0-dimensional; only its gradient means something.

    Shapes
    ------
    log_probs : (B, T) or (B,)
    rewards : (B,)
    baseline : (B,) when a tensor
    mask : (B, T)
    """
    _check_reinforce(log_probs, rewards, baseline, mask)
    if log_probs.dim() == 2:
        kept = log_probs if mask is None else log_probs.masked_fill(~mask, 0.0)  # (B, T)
        log_probs = kept.sum(dim=1)  # (B,): log p of each whole sequence
    rewards = rewards.detach().to(log_probs.dtype)
    if isinstance(baseline, str):  # "leave-one-out"
        baseline = (rewards.sum() - rewards) / (len(rewards) - 1)  # (B,): the others' mean
    elif baseline is None:
        baseline = 0.0
    advantage = rewards - torch.as_tensor(baseline, dtype=log_probs.dtype).detach()  # (B,)
    return -(advantage * log_probs).mean()


def _check_fine_tune(model: object, references: object, reward: object, prompt: object, steps: object,
                     batch_size: object, lr: object, baseline: object, seed: object) -> None:
    require_instance("model", model, nn.Module)
    _require_token_tensor("references", references, 2)
    require_callable("reward", reward)
    require_int("prompt", prompt, 0, references.shape[1] - 1)
    require_int("steps", steps), require_int("batch_size", batch_size, 2), require_int("seed", seed, 0)
    require_number("lr", lr, 0.0)
    if isinstance(baseline, Tensor):
        raise TypeError("baseline must be None, a number or 'leave-one-out' (a tensor would need one value "
                        "per sample of every step); found a Tensor")
    _check_baseline(baseline, batch_size)


def reinforce_fine_tune(model: nn.Module, references: Tensor, reward: Callable[[Tensor, Tensor], Tensor],
                        prompt: int, bos: int, steps: int = 100, batch_size: int = 64, lr: float = 1e-3,
                        baseline: Union[None, float, str] = "leave-one-out", seed: int = 0) -> list[float]:
    """Fine-tune a language model by REINFORCE: sample, score, and follow :func:`reinforce_loss`.

    Each step draws ``batch_size`` reference sequences, continues the first
    ``prompt`` tokens of each with the model's own samples to the references'
    length (:func:`lib.lm.rollout`, temperature 1), scores every sample against
    its reference with ``reward``, and takes one Adam step on
    :func:`reinforce_loss` of the log-probabilities of the sampled tokens (the
    prompt is given, not sampled, so it carries no gradient).

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)`` and reads ``bos``
        first (:class:`lib.lm.NeuralLM`).
    references : LongTensor
        The sequences whose beginnings are continued and with which the samples are compared.
    reward : callable
        ``reward(samples (B, L), references (B, L))`` returns a float tensor
        ``(B,)``, e.g. an n-gram precision.
    prompt : int
        Tokens of each reference given to the model before it samples.
    bos : int
    steps, batch_size : int
    lr : float
    baseline : None, float or "leave-one-out"
        As in :func:`reinforce_loss`.
    seed : int
        Seeds the choice of references and the samples.

    Returns
    -------
    list of float
        The mean reward of each step's samples, before that step's update.

    Shapes
    ------
    references : (N, L) with ``prompt < L``
    """
    _check_fine_tune(model, references, reward, prompt, steps, batch_size, lr, baseline, seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    length = references.shape[1]
    mean_rewards = []
    for _ in range(steps):
        chosen = references[torch.randint(len(references), (batch_size,), generator=generator)]  # (B, L)
        samples = rollout(model, chosen[:, :prompt], length, bos, generator)  # (B, L)
        rewards = reward(samples, chosen)  # (B,)
        inputs = F.pad(samples[:, :-1], (1, 0), value=bos)  # (B, L): bos, then all but the last
        log_p = torch.log_softmax(model(inputs), dim=-1)  # (B, L, V)
        taken = log_p.gather(2, samples[:, :, None])[:, prompt:, 0]  # (B, L - prompt): the sampled tokens
        loss = reinforce_loss(taken, rewards, baseline)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean_rewards.append(float(rewards.mean()))
    return mean_rewards


def bigram_precision(samples: Tensor, references: Tensor, prompt: int) -> Tensor:
    """BLEU's bigram precision without clipping: the share of sampled bigrams found in the reference.

    The bigrams scored are those that end on a sampled token (positions ``prompt``
    onwards); a bigram counts if it occurs anywhere in its reference, however often.

    Parameters
    ----------
    samples, references : LongTensor
        Each sample begins with the first ``prompt`` tokens of its reference.
    prompt : int

    Returns
    -------
    Tensor
        float64, one precision per sample.

    Shapes
    ------
    samples : (B, L) with ``prompt < L``; references : (B, L'); output : (B,)
    """
    _require_token_tensor("samples", samples, 2), _require_token_tensor("references", references, 2)
    require_int("prompt", prompt, 1, samples.shape[1] - 1)
    generated = torch.stack([samples[:, prompt - 1:-1], samples[:, prompt:]], dim=-1)  # (B, L - prompt, 2)
    reference = torch.stack([references[:, :-1], references[:, 1:]], dim=-1)  # (B, L' - 1, 2)
    found = (generated[:, :, None] == reference[:, None]).all(-1).any(-1)  # (B, L - prompt)
    return found.double().mean(1)


def judge_clock_model(model: nn.Module, language: CountingLanguage, test_sentences: Tensor, bos: int, prompt: int,
                      seed: int, curves: Optional[tuple[Tensor, Tensor]] = None) -> dict[str, float]:
    """Chapter 6's four numbers for a model of a :class:`lib.lm.CountingLanguage`.

    The reward (:func:`bigram_precision`) of the model's own continuations of the
    test sentences' first ``prompt`` tokens (:func:`lib.lm.rollout`, a generator
    seeded with ``seed``), the perplexity of the test sentences under teacher
    forcing, and the mean KL errors of :func:`lib.lm.drift` after real and after
    the model's own prefixes (its samples seeded with ``5 + seed``).

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)`` and reads ``bos`` first.
    language : CountingLanguage
    test_sentences : LongTensor
    bos, prompt, seed : int
    curves : (on_data, on_own), optional
        :func:`lib.lm.drift`'s curves, if already measured; they are then not measured again.

    Returns
    -------
    dict
        ``"reward (bigram precision)"``, ``"test perplexity"``, ``"KL after data"``, ``"KL after own"``.

    Shapes
    ------
    test_sentences : (N, L)
    """
    _require_token_tensor("test_sentences", test_sentences, 2), require_int("seed", seed, 0)
    inputs, targets = teacher_forcing_batch(test_sentences.tolist(), bos=bos)  # (N, L) each
    own = rollout(model, test_sentences[:, :prompt], test_sentences.shape[1], bos,
                  torch.Generator().manual_seed(seed))  # (N, L)
    with torch.no_grad():
        log_p = torch.log_softmax(model(inputs).double(), dim=-1)  # (N, L, V)
    on_data, on_own = curves or drift(model, language, test_sentences, bos=bos, prompt=prompt,
                                      generator=torch.Generator().manual_seed(5 + seed))
    return {
        "reward (bigram precision)": float(bigram_precision(own, test_sentences, prompt).mean()),
        "test perplexity": perplexity(log_p.gather(2, targets[..., None]).flatten()),
        "KL after data": float(on_data.mean()),
        "KL after own": float(on_own.mean()),
    }


def fine_tune_and_judge(models: Mapping[int, nn.Module], language: CountingLanguage, sentences: Tensor,
                        test_sentences: Tensor, bos: int, prompt: int,
                        curves: Optional[Mapping[int, tuple[Tensor, Tensor]]] = None, steps: int = 100,
                        batch_size: int = 64, lr: float = 3e-3,
                        baseline: Union[None, float, str] = "leave-one-out"
                        ) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, float]]]:
    """Judge copies of maximum-likelihood models, fine-tune them by REINFORCE, judge them again.

    For each ``seed -> model``: :func:`judge_clock_model` a deep copy (the
    original is left untouched), fine-tune the copy on ``sentences`` with
    :func:`reinforce_fine_tune` and :func:`bigram_precision` as reward (seeded with
    ``seed``), and judge it again.

    Parameters
    ----------
    models : mapping of int to nn.Module
        Seed -> a trained model; the seed also seeds the fine-tuning and the judging.
    language : CountingLanguage
    sentences, test_sentences : LongTensor
        Training sentences (the references of the fine-tuning) and test sentences.
    bos, prompt : int
    curves : mapping of int to (on_data, on_own), optional
        Seed -> :func:`lib.lm.drift`'s curves of the model before fine-tuning, if already measured.
    steps, batch_size : int
    lr : float
    baseline : None, float or "leave-one-out"

    Returns
    -------
    before, after : dict
        Seed -> :func:`judge_clock_model`'s numbers before and after fine-tuning.

    Shapes
    ------
    sentences : (N, L); test_sentences : (N', L)
    """
    if not isinstance(models, Mapping) or not models:
        raise TypeError(f"models must be a non-empty mapping of seed -> model; found {type(models).__name__}")
    before, after = {}, {}
    for seed, trained in models.items():
        require_instance(f"models[{seed!r}]", trained, nn.Module)
        model = copy.deepcopy(trained)
        before[seed] = judge_clock_model(model, language, test_sentences, bos, prompt, seed,
                                         None if curves is None else curves[seed])
        reinforce_fine_tune(model, sentences, partial(bigram_precision, prompt=prompt), prompt=prompt, bos=bos,
                            steps=steps, batch_size=batch_size, lr=lr, baseline=baseline, seed=seed)
        after[seed] = judge_clock_model(model, language, test_sentences, bos, prompt, seed)
    return before, after
