"""Chapter 3's experiments: a character-level recurrent language model of the Zen of
Python, what clipping does for a diverging run, and what truncating the gradient costs.

* :func:`train_on_zen`: a tanh RNN language model (Elman, 1990) trained on 16 lines and
  measured on 4 held-out ones, a small version of Sutskever et al. (2011) and Karpathy
  (2015); it learns the training lines and over-fits.
* :func:`sample_lines`: what the trained models write when sampled.
* :func:`clipping_rescue`: plain gradient descent with a learning rate far too large
  diverges; clipping the gradient's norm (Pascanu et al., 2013) keeps it on course.
* :func:`echo_sweep`: truncated backpropagation through time (Williams and Peng, 1990)
  cannot teach a dependency longer than its chunks; overlapping windows, BPTT(k1, k2)
  (Williams and Peng, 1990; Sutskever, 2013), read the same chunks and can.
* :func:`gradient_reach`: which inputs each loss's gradient reaches, found by autograd,
  for plain, overlapping and randomised truncation (Tallec and Ollivier, 2017; Zhang et
  al., 2023, §9.7.1.3).

References
----------
.. [1] J. L. Elman. "Finding Structure in Time". Cognitive Science 14(2), 1990.
.. [2] I. Sutskever, J. Martens, G. E. Hinton. "Generating Text with Recurrent
   Neural Networks". ICML 2011.
.. [3] A. Karpathy. "The Unreasonable Effectiveness of Recurrent Neural
   Networks". Blog post, 2015.
.. [4] R. Pascanu, T. Mikolov, Y. Bengio. "On the difficulty of training Recurrent
   Neural Networks". ICML 2013.
.. [5] R. J. Williams, J. Peng. "An Efficient Gradient-Based Algorithm for
   On-Line Training of Recurrent Network Trajectories". Neural Computation
   2(4), 1990.
.. [6] I. Sutskever. "Training Recurrent Neural Networks". PhD thesis,
   University of Toronto, 2013.
.. [7] C. Tallec, Y. Ollivier. "Unbiasing Truncated Backpropagation Through Time".
   arXiv:1705.08209, 2017.
.. [8] A. Zhang, Z. C. Lipton, M. Li, A. J. Smola. "Dive into Deep Learning".
   Cambridge University Press, 2023.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from experiments.findings import Finding, Result
from lib.part2_recurrent.char_lm import (
    CharLM,
    CharVocabulary,
    randomized_bptt_loss,
    train_char_lm,
    train_truncated_bptt,
    truncated_bptt_loss,
)
from lib.part3_words.decoding import sample


@dataclass
class ZenTraining(Result):
    """Loss curves of one model per seed, before each step and after the last."""

    # (seeds, steps + 1), nats per character
    train: list[list[float]]
    # (seeds, steps + 1), on lines never trained on
    held_out: list[list[float]]
    # (seeds,) the cheapest held-out character no line has
    unseen_cost: list[float]
    # (seeds,) those characters' share of the held-out loss
    unseen_share: list[float]
    # ln V, the loss of a uniform guess
    uniform: float
    models: list[CharLM] = field(repr=False)

    @property
    def first(self) -> list[float]:
        return [curve[0] for curve in self.train]

    @property
    def last(self) -> list[float]:
        return [curve[-1] for curve in self.train]

    @property
    def best(self) -> list[float]:
        """The held-out loss at its lowest."""
        return [min(curve) for curve in self.held_out]

    @property
    def best_step(self) -> list[int]:
        return [curve.index(min(curve)) for curve in self.held_out]

    @property
    def held_last(self) -> list[float]:
        return [curve[-1] for curve in self.held_out]

    FINDINGS = (
        Finding(
            "The first loss is within 0.2 nats of a uniform guess, ln V, for every "
            "seed.",
            backs=("afb88896",),
            holds=lambda r: max(abs(loss - r.uniform) for loss in r.first) < 0.2,
        ),
        Finding(
            "The loss falls below 0.25 nats per character (perplexity below 1.3) by "
            "step 150 for every seed.",
            backs=("afb88896",),
            holds=lambda r: max(r.last) < 0.25,
        ),
        Finding(
            "The held-out loss falls at least 0.8 nats below ln V for every seed.",
            backs=("held-out-read",),
            holds=lambda r: max(r.best) < r.uniform - 0.8,
        ),
        Finding(
            "The held-out loss is lowest within the first 60 steps for every seed.",
            backs=("held-out-read",),
            holds=lambda r: max(r.best_step) < 60,
        ),
        Finding(
            "By step 150 the held-out loss has climbed more than 1 nat above its "
            "lowest point, and above ln V, for every seed.",
            backs=("held-out-read", "summary"),
            holds=lambda r: all(
                end > low + 1 and end > r.uniform
                for end, low in zip(r.held_last, r.best)
            ),
        ),
        Finding(
            "At the end the held-out loss exceeds the training loss by more than 3.8 "
            "nats for every seed.",
            backs=("held-out-read",),
            holds=lambda r: min(h - t for h, t in zip(r.held_last, r.last)) > 3.8,
        ),
        Finding(
            "After training, every held-out character that no training line contains "
            "costs more than ln V, for every seed.",
            backs=("held-out-read",),
            holds=lambda r: min(r.unseen_cost) > r.uniform,
        ),
        Finding(
            "Those characters make up less than a tenth of the final held-out loss, so "
            "most of the climb is over-fitting, for every seed.",
            backs=("held-out-read",),
            holds=lambda r: max(r.unseen_share) < 0.1,
        ),
    )


def train_on_zen(
    vocabulary: CharVocabulary,
    train: tuple[torch.Tensor, torch.Tensor],
    held_out: tuple[torch.Tensor, torch.Tensor],
    unseen: list[str],
    seeds: tuple[int, ...],
    steps: int = 150,
) -> ZenTraining:
    """One tanh RNN language model per seed (64 units, embeddings of 16), trained by
    clipped Adam on the training lines, measured on the held-out lines as it goes; then
    what the held-out characters ``unseen`` (in no training line) cost the trained
    model.
    """
    models, curves = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        model = CharLM(vocabulary.size, hidden_size=64, embedding_dim=16, kind="rnn")
        curves.append(
            train_char_lm(
                model, *train, steps=steps, lr=1e-2, max_norm=1.0, held_out=held_out
            )
        )
        models.append(model)
    unseen_ids = torch.tensor([vocabulary.encode(ch)[0] for ch in unseen])
    is_unseen = torch.isin(held_out[1], unseen_ids)  # (lines, L)
    scored = held_out[1] != -100  # padding is not scored
    unseen_cost, unseen_share = [], []
    for model in models:
        with torch.no_grad():
            costs = F.cross_entropy(  # (lines, L), 0 where padded
                model(held_out[0]).transpose(1, 2), held_out[1], reduction="none"
            )
        unseen_cost.append(costs[is_unseen].min().item())
        unseen_share.append((costs[is_unseen].sum() / costs[scored].sum()).item())
    return ZenTraining(
        [curve["train"] for curve in curves],
        [curve["held_out"] for curve in curves],
        unseen_cost,
        unseen_share,
        math.log(vocabulary.size),
        models,
    )


@dataclass
class Samples(Result):
    """Lines sampled from each model: a few to show, then 100 per model to count."""

    # drawn from the first model
    shown: list[str]
    # (models,) the share of samples that are lines of the text
    verbatim: list[float]
    # (models,) how many samples are not
    new: list[int]
    # (models,) the share of new lines with a word not in the text
    misspelt: list[float]

    FINDINGS = (
        Finding(
            "Every model reproduces some lines of the text verbatim.",
            backs=("lm-discussion",),
            holds=lambda r: min(r.verbatim) > 0,
        ),
        Finding(
            "Every model also writes new lines (at least a quarter of its samples).",
            backs=("lm-discussion",),
            holds=lambda r: min(r.new) >= 25,
        ),
        Finding(
            "For every model, most new lines contain a word that is not in the text.",
            backs=("lm-discussion",),
            holds=lambda r: min(r.misspelt) > 0.5,
        ),
    )


def sample_lines(
    models: list[CharLM],
    vocabulary: CharVocabulary,
    text: str,
    shown: int = 8,
    per_model: int = 100,
    seed: int = 0,
) -> Samples:
    """``shown`` lines from the first model, then ``per_model`` from each model (at
    temperature 1, at most 100 characters), all from one generator seeded ``seed``;
    a word is what splitting at whitespace gives."""
    generator = torch.Generator().manual_seed(seed)

    def draw(model: CharLM, count: int) -> list[str]:
        drawn = sample(
            model.next_token_log_probs,
            vocabulary.bos,
            vocabulary.eos,
            max_len=100,
            num_samples=count,
            temperature=1.0,
            generator=generator,
        )
        return [vocabulary.decode(tokens) for tokens, _ in drawn]

    first = draw(models[0], shown)
    lines = {line for line in text.splitlines() if line}  # the blank line is no line
    words = set(text.split())
    verbatim, new, misspelt = [], [], []
    for model in models:
        drawn = draw(model, per_model)
        fresh = [line for line in drawn if line not in lines]
        verbatim.append(1 - len(fresh) / len(drawn))
        new.append(len(fresh))
        misspelt.append(
            sum(any(word not in words for word in line.split()) for line in fresh)
            / len(fresh)
        )
    return Samples(first, verbatim, new, misspelt)


@dataclass
class ClippingRescue(Result):
    """Training-loss curves of each seed, without clipping and with it."""

    # (seeds, steps + 1); nan or inf once diverged
    unclipped: list[list[float]]
    # (seeds, steps + 1)
    clipped: list[list[float]]
    # the clipping threshold
    max_norm: float
    # ln V, the loss of a uniform guess
    uniform: float

    @property
    def leap(self) -> list[float]:
        """The first step after which each unclipped loss is above 3 ln V (nan is);
        inf for a run that never gets there."""
        high = 3 * self.uniform
        return [
            next((i for i, loss in enumerate(run) if not loss <= high), math.inf)
            for run in self.unclipped
        ]

    @property
    def peak_step(self) -> list[int]:
        """The step of each unclipped run's highest finite loss."""
        return [
            max(range(len(run)), key=lambda i: run[i] if math.isfinite(run[i]) else -1)
            for run in self.unclipped
        ]

    @property
    def late(self) -> list[float]:
        """The finite unclipped losses of the last 10 steps, every seed's."""
        return [x for run in self.unclipped for x in run[-10:] if math.isfinite(x)]

    FINDINGS = (
        Finding(
            "Without clipping every seed's loss rises above 3 ln V within the first 8 "
            "steps.",
            backs=("clip-rescue-read",),
            holds=lambda r: max(r.leap) <= 8,
        ),
        Finding(
            "Without clipping every seed's loss stays above ln V in each of the last "
            "10 steps (or the run diverged).",
            backs=("clip-rescue-read",),
            holds=lambda r: all(
                not (loss < r.uniform) for run in r.unclipped for loss in run[-10:]
            ),
        ),
        Finding(
            "With clipping no seed's loss ever rises more than 0.5 nats above where it "
            "started, and every seed ends below 1 nat per character.",
            backs=("clip-rescue-read",),
            holds=lambda r: all(max(run) <= run[0] + 0.5 for run in r.clipped)
            and max(run[-1] for run in r.clipped) < 1.0,
        ),
    )


def clipping_rescue(
    vocab_size: int,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    seeds: tuple[int, ...],
    max_norm: float = 0.25,
    steps: int = 60,
    lr: float = 8.0,
) -> ClippingRescue:
    """A fresh tanh RNN language model per seed trained by plain full-batch gradient
    descent (no momentum), without clipping and then clipped to ``max_norm``;
    ``torch.manual_seed(seed)`` initialises both runs of a seed, so they start from the
    same weights and differ only in clipping."""
    if not seeds or not 0 < max_norm < math.inf:
        raise ValueError(
            "clipping_rescue needs at least one seed and a finite positive max_norm; "
            f"found {seeds!r} and {max_norm!r}"
        )
    runs = {}
    for threshold in (math.inf, max_norm):
        runs[threshold] = []
        for seed in seeds:
            torch.manual_seed(seed)
            model = CharLM(vocab_size, hidden_size=64, embedding_dim=16, kind="rnn")
            curves = train_char_lm(
                model, inputs, targets, steps, lr, threshold, optimizer="sgd"
            )
            runs[threshold].append(curves["train"])
    return ClippingRescue(
        runs[math.inf], runs[max_norm], max_norm, math.log(vocab_size)
    )


@dataclass
class EchoSweep(Result):
    """How often a network trained by truncated BPTT echoes the bit ``delay`` steps
    back (d in the findings), for chunks of ``delay``, ``delay + 1`` and ``2 delay``
    steps, and for overlapping windows BPTT(delay, 2 delay), which read the chunks of
    ``delay`` steps and back-propagate as deep as chunks of ``2 delay``."""

    delay: int
    # k -> (seeds,), on unseen streams, steps >= delay; k = delay, delay + 1, 2 delay
    accuracy: dict[int, list[float]]
    # (seeds,) BPTT(delay, 2 delay), on the same unseen streams
    windowed: list[float]

    FINDINGS = (
        Finding(
            "With k = d, the delay, no seed echoes more than 90% of the bits.",
            backs=("tbptt-echo-read", "summary"),
            holds=lambda r: max(r.accuracy[r.delay]) < 0.9,
        ),
        Finding(
            "With k = d + 1 every seed echoes more than 98% of the bits.",
            backs=("tbptt-echo-read", "summary"),
            holds=lambda r: min(r.accuracy[r.delay + 1]) > 0.98,
        ),
        Finding(
            "BPTT(d, 2d), with the chunks and updates of k = d, echoes more than 98% "
            "of the bits for every seed.",
            backs=("tbptt-echo-read", "summary"),
            holds=lambda r: min(r.windowed) > 0.98,
        ),
        Finding(
            "Plain chunks of k = 2d, as deep a backward pass as BPTT(d, 2d) with half "
            "its updates, echo more than 98% of the bits for every seed too.",
            backs=("tbptt-echo-read", "summary"),
            holds=lambda r: min(r.accuracy[2 * r.delay]) > 0.98,
        ),
    )


def echo_sweep(
    seeds: tuple[int, ...], delay: int = 4, streams: int = 8, length: int = 400
) -> EchoSweep:
    """Train a tanh RNN (16 units) per seed and chunk length ``k`` to output, at every
    step, the bit it read ``delay`` steps before: three passes over ``streams`` random
    bit streams (seed 0), scored on as many others (seed 1), for ``k = delay``,
    ``delay + 1`` and ``2 delay``; then the same with chunks of ``delay`` steps and
    windows of ``2 delay``."""

    def bit_streams(seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return torch.randint(0, 2, (streams, length), generator=generator)

    bits, test_bits = bit_streams(0), bit_streams(1)  # (streams, length) each
    echo = bits.roll(delay, dims=1)  # target at step t: the bit of step t - delay
    test_echo = test_bits.roll(delay, dims=1)
    assert not any(torch.equal(a, b) for a in bits for b in test_bits)

    def trained(seed: int, k: int, k2: int | None = None) -> float:
        torch.manual_seed(seed)
        model = CharLM(2, hidden_size=16, embedding_dim=4, kind="rnn")
        train_truncated_bptt(model, bits, echo, k=k, epochs=3, lr=1e-2, k2=k2)
        with torch.no_grad():
            guesses = model(test_bits).argmax(dim=-1)  # (streams, length)
        return (guesses == test_echo)[:, delay:].double().mean().item()

    chunk_lengths = (delay, delay + 1, 2 * delay)
    accuracy = {k: [trained(seed, k) for seed in seeds] for k in chunk_lengths}
    windowed = [trained(seed, delay, 2 * delay) for seed in seeds]
    return EchoSweep(delay, accuracy, windowed)


def gradient_reach(
    length: int,
    k1: int,
    k2: int | None = None,
    factors: torch.Tensor | None = None,
    seed: int = 0,
) -> torch.Tensor:
    """``R[t, s] = 1`` when autograd finds a gradient from the loss at step ``t`` to
    the input at step ``s``, under truncation in chunks of ``k1`` (windows of ``k2``
    with ``k2``; with ``factors``, randomised truncation, ``k1`` unused).

    The inputs are the positions themselves, ``0 .. L - 1``, so row ``s`` of the
    embedding is read at step ``s`` alone; each loss is scored alone (the other
    targets are padding, -100)."""
    torch.manual_seed(seed)
    model = CharLM(vocab_size=length, hidden_size=4, embedding_dim=3, kind="rnn")
    model = model.double()
    positions = torch.arange(length)[None]  # (1, L)
    reach = torch.zeros(length, length, dtype=torch.long)
    for t in range(length):
        targets = torch.full((1, length), -100)
        targets[0, t] = 0  # the loss at step t alone
        model.zero_grad()
        if factors is None:
            loss = truncated_bptt_loss(model, positions, targets, k1, k2=k2)
        else:
            loss = randomized_bptt_loss(model, positions, targets, factors)
        loss.backward()
        reach[t] = (model.embedding.weight.grad[:length].abs().sum(dim=1) > 0).long()
    return reach
