"""Neural language models: a feed-forward LM, its training, sampling and exposure bias.

A language model gives the probability of a sequence through the chain rule,
:math:`p(x_{1:T}) = \\prod_t p(x_t \\mid x_{<t})`, so it only ever predicts the next
token. This module is the neural half of chapter 6 (syllabus LM1-LM6); n-gram models and
:func:`lib.part3_words.ngram.perplexity` are in :mod:`lib.part3_words.ngram`.

1. :class:`NeuralLM` is the "embedding -> feature layer -> softmax" model of Bengio et
   al. (2003): the feature layer reads a window of the last ``n - 1`` embeddings (a
   feed-forward n-gram model) or their running average. Its recurrent sibling is
   :class:`lib.part2_recurrent.char_lm.CharLM`; both are sampled with
   :func:`lib.part3_words.decoding.sample` at any temperature.
2. :func:`train_lm` trains any such model by teacher forcing or by scheduled
   sampling (Bengio et al., 2015): with probability ``1 - epsilon`` an input
   token is replaced by the model's own sample (:func:`scheduled_sampling_inputs`),
   ``epsilon`` decaying by an :class:`EpsilonSchedule`.
3. :class:`CountingLanguage`, a toy language whose true next-token distribution
   is known exactly, and :func:`drift`, which measures exposure bias: how far
   a model's predictions are from the truth after its *own* samples compared
   with after real data.

Conventions. Neural models work on ids ``0 .. V - 1`` and read an extra input-only id
``bos = V``, as in :mod:`lib.part2_recurrent.rnn` and :mod:`lib.part3_words.decoding`.
Log-probabilities are natural logarithms.

References
----------
.. [1] Y. Bengio, R. Ducharme, P. Vincent, C. Jauvin. "A Neural Probabilistic
   Language Model". JMLR 3, 2003.
.. [2] S. Bengio, O. Vinyals, N. Jaitly, N. Shazeer. "Scheduled Sampling for
   Sequence Prediction with Recurrent Neural Networks". NeurIPS 2015.
   arXiv:1506.03099.
.. [3] F. Huszár. "How (not) to Train your Generative Model: Scheduled
   Sampling, Likelihood, Adversary?". arXiv:1511.05101, 2015.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Literal, Optional, get_args, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Float, Float64, Int64
from torch import Tensor, nn

from lib.part2_recurrent.char_lm import NextTokenLM
from lib.checked import (
    AnyInt,
    AtLeast2Int,
    Finite,
    Fraction,
    NonNegative,
    NonNegativeInt,
    NonNegativeOrInf,
    PositiveInt,
    TypoRate,
    each,
)
from lib.part2_recurrent.rnn import clip_grad_norm
from lib.training import train_step

__all__ = [
    "NeuralLM",
    "FEATURES",
    "EpsilonSchedule",
    "scheduled_sampling_inputs",
    "train_lm",
    "token_log_probs",
    "CountingLanguage",
    "rollout",
    "drift",
]

Feature = Literal["window", "average"]
FEATURES = get_args(Feature)


# ---------------------------------------------------------------------------
# A neural language model: embedding -> feature layer -> softmax.
# ---------------------------------------------------------------------------


class NeuralLM(NextTokenLM, nn.Module):
    r"""A feed-forward neural language model (Bengio et al., 2003).

    .. math::
        \mathbf{h}_t = \tanh(\mathbf{W}_h \mathbf{f}_t + \mathbf{b}_h), \qquad
        p(\cdot \mid x_{<t}) = \operatorname{softmax}(\mathbf{W}_o \mathbf{h}_t
        + \mathbf{b}_o)

    The feature vector :math:`\mathbf{f}_t` concatenates the embeddings of the last
    ``context = n - 1`` tokens (``"window"``; missing ones are ``bos``) or averages
    those of ``bos`` and every earlier token (``"average"``). The embedding has
    ``vocab_size + 1`` rows, the last for ``bos = vocab_size``. ``tokens`` are
    ``(N, t)`` ids, each row starting with ``bos``; logits row ``i`` predicts the
    token after ``tokens[:, i]``.
    """

    def __init__(
        self,
        vocab_size: PositiveInt,
        context: PositiveInt = 2,
        embedding_dim: PositiveInt = 32,
        hidden_size: PositiveInt = 64,
        feature: Feature = "window",
    ):
        super().__init__()
        self.vocab_size, self.context, self.feature = vocab_size, context, feature
        self.embedding = nn.Embedding(vocab_size + 1, embedding_dim)
        width = context * embedding_dim if feature == "window" else embedding_dim
        self.hidden = nn.Linear(width, hidden_size)
        self.output = nn.Linear(hidden_size, vocab_size)

    @property
    def bos(self) -> int:
        return self.vocab_size

    def features(self, tokens: Int64[Tensor, "N t"]) -> Float[Tensor, "N t H"]:
        r"""The feature layer's output :math:`\mathbf{h}_t` at every position."""
        if tokens.shape[1] == 0:
            raise ValueError(
                "tokens must hold at least one position (bos); "
                f"found shape {tuple(tokens.shape)}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() > self.bos):
            raise ValueError(
                f"tokens must be ids in [0, {self.bos}] (bos = {self.bos}); "
                f"found {tokens.min()}..{tokens.max()}"
            )
        if self.feature == "window":
            # Left-pad with bos: every position gets a full window (context = n - 1).
            padded = F.pad(tokens, (self.context - 1, 0), value=self.bos)  # (N, t+n-2)
            windows = padded.unfold(1, self.context, 1)  # (N, t, n - 1)
            f = self.embedding(windows).flatten(2)  # (N, t, (n - 1) * E)
        else:
            embedded = self.embedding(tokens)  # (N, t, E)
            counts = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)  # (t,)
            # The running means of the embeddings of bos and the tokens so far.
            f = embedded.cumsum(dim=1) / counts[None, :, None]  # (N, t, E)
        return torch.tanh(self.hidden(f))  # (N, t, H)

    @no_type_check  # features checks tokens; a sampler calls this once per token
    def forward(self, tokens: Int64[Tensor, "N t"]) -> Float[Tensor, "N t V"]:
        return self.output(self.features(tokens))  # (N, t, V)


# ---------------------------------------------------------------------------
# Training: teacher forcing and scheduled sampling.
# ---------------------------------------------------------------------------

Schedule = Literal["constant", "linear", "exponential", "inverse_sigmoid"]


@dataclass(frozen=True)
class EpsilonSchedule:
    r"""The probability :math:`\epsilon_i` of feeding the *true* token at step ``i``.

    The decays of Bengio et al. (2015), each floored at ``minimum``:
    ``"linear"`` :math:`\max(\epsilon_{\min}, k - c\,i)`; ``"exponential"``
    :math:`k^i`, :math:`k \le 1`; ``"inverse_sigmoid"`` :math:`k / (k + \exp(i / k))`,
    :math:`k \ge 1`; ``"constant"`` :math:`k` (``k = 1`` is teacher forcing).
    """

    kind: Schedule = "inverse_sigmoid"
    k: Finite = 10.0
    c: NonNegative = 0.0
    minimum: Fraction = 0.0

    def __post_init__(self):
        # k's range depends on kind: at least 1 for the inverse sigmoid, else [0, 1].
        low, high = (1.0, math.inf) if self.kind == "inverse_sigmoid" else (0.0, 1.0)
        if not low <= self.k <= high:
            raise ValueError(
                f"k must be a finite number in [{low}, {high}] for kind "
                f"{self.kind!r}; found {self.k}"
            )

    def __call__(self, step: NonNegativeInt) -> float:
        if self.kind == "constant":
            value = self.k
        elif self.kind == "linear":
            value = self.k - self.c * step
        elif self.kind == "exponential":
            value = self.k**step
        else:  # exp overflows past 709
            value = self.k / (self.k + math.exp(min(step / self.k, 700.0)))
        return max(self.minimum, value)


def scheduled_sampling_inputs(
    model: nn.Module,
    inputs: Int64[Tensor, "N L"],
    targets: Int64[Tensor, "N L"],
    epsilon: Fraction,
    generator: Optional[torch.Generator] = None,
    prompt: NonNegativeInt = 0,
) -> Int64[Tensor, "N L"]:
    """Replace each true input token by the model's own sample with probability
    ``1 - epsilon``.

    Left to right, input ``t`` (the true token ``t - 1``) is swapped for a token drawn
    from the model's prediction given the inputs *as already mixed*, what the model
    would have read had it generated the prefix itself (Bengio et al., 2015). Padding
    (target -100) and the first ``prompt`` tokens are never swapped; ``model(tokens)``
    returns ``(N, t, V)`` logits.
    """
    if prompt > inputs.shape[1]:
        raise ValueError(
            f"prompt must be at most the rows' length {inputs.shape[1]}; found {prompt}"
        )
    real = targets[targets != -100]  # (M,) the targets that count
    if real.numel() and real.min() < 0:
        raise ValueError(
            f"targets must be ids in [0, V) or -100 (padding); found {real.min()}"
        )
    highest = int(real.max()) if real.numel() else -1
    mixed = inputs.clone()
    if epsilon == 1.0:
        return mixed
    with torch.no_grad():
        for t in range(prompt + 1, inputs.shape[1]):
            logits = model(mixed[:, :t])[:, -1]  # (N, V): the model's guess for input t
            if highest >= logits.shape[-1]:
                raise ValueError(
                    f"targets must be ids in [0, {logits.shape[-1]}) or -100; "
                    f"found {highest}"
                )
            probs = torch.softmax(logits.double(), dim=-1)  # (N, V)
            drawn = torch.multinomial(probs, 1, generator=generator)[:, 0]  # (N,)
            keep = torch.rand(len(mixed), generator=generator) < epsilon  # (N,)
            swap = ~keep & (targets[:, t] != -100)  # (N,)
            mixed[swap, t] = drawn[swap]
    return mixed


def train_lm(
    model: nn.Module,
    inputs: Int64[Tensor, "N L"],
    targets: Int64[Tensor, "N L"],
    steps: PositiveInt,
    batch_size: PositiveInt = 64,
    lr: NonNegative = 1e-2,
    schedule: Optional[EpsilonSchedule] = None,
    prompt: NonNegativeInt = 0,
    seed: AnyInt = 0,
    max_norm: NonNegativeOrInf = 1.0,
) -> list[float]:
    """Fit a language model by minibatch Adam on the next-token cross-entropy; return
    each step's training loss (nats per token).

    Rows are sorted by length and cut into batches of similar length, so that little
    is spent on padding; every pass visits the batches in a new order, drawn from
    ``seed``. Each step optionally mixes in the model's own samples
    (:func:`scheduled_sampling_inputs` with ``epsilon = schedule(step)``; without a
    schedule this is teacher forcing), and clips the gradients to norm ``max_norm``.
    """
    if len(targets) == 0 or prompt > targets.shape[1]:
        raise ValueError(
            f"inputs must hold at least one row, and prompt at most its length; "
            f"found shape {tuple(targets.shape)}, prompt {prompt}"
        )
    real = targets[targets != -100]  # (M,) the targets that count
    if real.numel() and real.min() < 0:
        raise ValueError(
            f"targets must be ids in [0, V) or -100 (padding); found {real.min()}"
        )
    highest = int(real.max()) if real.numel() else -1
    lengths = (targets != -100).sum(dim=1)  # (N,)
    by_length = torch.sort(lengths, stable=True).indices
    batches = list(torch.split(by_length, batch_size))
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    clip = partial(clip_grad_norm, max_norm=max_norm)
    losses: list[float] = []
    while len(losses) < steps:
        for b in torch.randperm(len(batches), generator=generator).tolist():
            if len(losses) == steps:
                break
            rows = batches[b]
            length = max(1, int(lengths[rows].max()))  # later columns are padding
            x, y = inputs[rows, :length], targets[rows, :length]  # (B, L')
            if schedule is not None:
                epsilon = schedule(len(losses))
                # A batch shorter than the prompt has nothing to swap.
                cut = min(prompt, length)
                x = scheduled_sampling_inputs(model, x, y, epsilon, generator, cut)
            logits = model(x)  # (B, L', V)
            if highest >= logits.shape[-1]:
                raise ValueError(
                    f"targets must be ids in [0, {logits.shape[-1]}) or -100; "
                    f"found {highest}"
                )
            losses.append(train_step(optimizer, logits, y, clip=clip))
    return losses


@torch.no_grad()
def token_log_probs(
    model: nn.Module, inputs: Int64[Tensor, "N L"], targets: Int64[Tensor, "N L"]
) -> Float64[Tensor, "M"]:
    """The model's log-probability of each of the M real targets (not -100), row by row,
    for :func:`lib.part3_words.ngram.perplexity`.

    Rows are scored one at a time, cut to their real length, so that memory stays at
    one row's ``(L, V)`` scores.
    """
    if len(targets) == 0:
        raise ValueError("inputs must hold at least one row; found none")
    real = targets[targets != -100]  # (M,) the targets that count
    if real.numel() and real.min() < 0:
        raise ValueError(
            f"targets must be ids in [0, V) or -100 (padding); found {real.min()}"
        )
    highest = int(real.max()) if real.numel() else -1
    scored = []
    for tokens, target in zip(inputs, targets):
        length = int((target != -100).sum())  # real targets come first in each row
        logits = model(tokens[None, :length])[0]  # (length, V)
        if highest >= logits.shape[-1]:
            raise ValueError(
                f"targets must be ids in [0, {logits.shape[-1]}) or -100; "
                f"found {highest}"
            )
        log_probs = F.log_softmax(logits.double(), dim=-1)  # (length, V)
        scored.append(log_probs.gather(1, target[:length, None])[:, 0])  # (length,)
    return torch.cat(scored)


# ---------------------------------------------------------------------------
# Exposure bias: a language with a known distribution, and the drift measurement.
# ---------------------------------------------------------------------------


@dataclass
class CountingLanguage:
    """Count around a clock: a toy language whose next-token distribution is known.

    A sentence has ``length`` tokens from ``0 .. hours - 1``. Its hidden clean version
    starts at a uniformly random hour and moves by a fixed step, drawn uniformly from
    ``steps``, modulo ``hours`` (``3, 5, 7, 9, 11, 1, ...``). Each token is then,
    independently with probability ``typo``, replaced by a uniformly random hour: every
    sequence has a non-zero probability, so :meth:`next_probs` is defined after *any*
    prefix, a model's own mistakes included.
    """

    hours: AtLeast2Int = 12
    steps: each(AnyInt) = (1, 2, 3)
    length: AtLeast2Int = 16
    typo: TypoRate = 0.002

    def __post_init__(self):
        if not self.steps:
            raise ValueError("steps must hold at least one step; found none")
        starts = torch.arange(self.hours)
        positions = torch.arange(self.length)
        # Every hidden clean sentence: one row per (step, start), all equally likely.
        self.clean = torch.cat(
            [
                (starts[:, None] + step * positions[None]) % self.hours
                for step in self.steps
            ]
        )  # (M, length)

    def sample(
        self, n: PositiveInt, generator: Optional[torch.Generator] = None
    ) -> Int64[Tensor, "n T"]:
        """``n`` sentences drawn from the language, ``(n, length)``."""
        pick = torch.randint(len(self.clean), (n,), generator=generator)  # (n,)
        clean = self.clean[pick]  # (n, T)
        typos = torch.rand(n, self.length, generator=generator) < self.typo  # (n, T)
        noise = torch.randint(self.hours, (n, self.length), generator=generator)
        return torch.where(typos, noise, clean)

    def next_probs(self, prefixes: Int64[Tensor, "N t"]) -> Float64[Tensor, "N V"]:
        r"""The true :math:`p(x_{t+1} \mid x_{1:t})` after each prefix, by Bayes' rule.

        The posterior over the hidden clean sentences weighs each by how many prefix
        tokens it explains: a match has probability ``1 - typo + typo / hours``, a
        mismatch ``typo / hours``.
        """
        t = prefixes.shape[1]
        if t >= self.length:
            raise ValueError(
                f"prefixes must be shorter than the sentences ({self.length}); "
                f"found length {t}"
            )
        if prefixes.numel() and (prefixes.min() < 0 or prefixes.max() >= self.hours):
            raise ValueError(
                f"prefixes must hold hours in [0, {self.hours}); "
                f"found {prefixes.min()}..{prefixes.max()}"
            )
        hit = math.log(1 - self.typo + self.typo / self.hours)
        match = torch.tensor(hit, dtype=torch.float64)
        mismatch = torch.tensor(math.log(self.typo / self.hours), dtype=torch.float64)
        agree = prefixes[:, None, :] == self.clean[None, :, :t]  # (N, M, t)
        log_likelihood = torch.where(agree, match, mismatch).sum(-1)  # (N, M)
        posterior = torch.softmax(log_likelihood, dim=-1)  # (N, M)
        after = F.one_hot(self.clean[:, t], self.hours).double()  # (M, V)
        nxt = after * (1 - self.typo) + self.typo / self.hours  # (M, V)
        return posterior @ nxt  # (N, V)


@torch.no_grad()
def rollout(
    model: nn.Module,
    prompts: Int64[Tensor, "N P"],
    length: NonNegativeInt,
    bos: NonNegativeInt,
    generator: Optional[torch.Generator] = None,
) -> Int64[Tensor, "N L"]:
    """Continue each prompt to ``length`` tokens, the prompt included, with the model's
    own samples (temperature 1)."""
    if length < prompts.shape[1]:
        raise ValueError(
            f"length must be an int >= {prompts.shape[1]} (the prompts' length); "
            f"found {length}"
        )
    if getattr(model, "bos", bos) != bos:  # a model that names its bos must agree
        raise ValueError(f"bos must be the model's bos {model.bos}; found {bos}")
    tokens = torch.cat([torch.full((len(prompts), 1), bos), prompts], dim=1)  # (N, 1+P)
    while tokens.shape[1] < length + 1:
        probs = torch.softmax(model(tokens)[:, -1].double(), dim=-1)  # (N, V)
        drawn = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
        tokens = torch.cat([tokens, drawn], dim=1)
    return tokens[:, 1:]


@torch.no_grad()
def drift(
    model: nn.Module,
    language: CountingLanguage,
    sentences: Int64[Tensor, "N T"],
    bos: NonNegativeInt,
    prompt: NonNegativeInt = 2,
    generator: Optional[torch.Generator] = None,
) -> tuple[Float64[Tensor, "K"], Float64[Tensor, "K"]]:
    r"""Exposure bias made visible: the model's error after real prefixes and after its
    own, at positions ``prompt + 1 .. length``.

    At every position ``t`` the error is the mean KL divergence
    :math:`\mathrm{KL}(p(\cdot \mid x_{<t}) \,\|\, p_\theta(\cdot \mid x_{<t}))` (nats)
    between the true next-token distribution and the model's, over prefixes that are
    either real ``sentences`` (what teacher forcing trains on) or the model's own
    continuations of their first ``prompt`` tokens (what it reads when it generates).
    """
    if sentences.shape[1] != language.length or prompt >= language.length:
        raise ValueError(
            f"sentences must have the language's length {language.length}, and prompt "
            f"be shorter; found width {sentences.shape[1]}, prompt {prompt}"
        )
    own = rollout(model, sentences[:, :prompt], language.length, bos, generator)
    curves = []
    for prefixes in (sentences, own):  # (N, T) each
        first = torch.full((len(prefixes), 1), bos)  # (N, 1)
        inputs = torch.cat([first, prefixes[:, :-1]], dim=1)  # (N, T)
        log_q = torch.log_softmax(model(inputs).double(), dim=-1)  # (N, T, V)
        if log_q.shape[-1] != language.hours:
            raise ValueError(
                f"language must have as many hours as the model has outputs "
                f"({log_q.shape[-1]}); found {language.hours}"
            )
        kl = []
        for t in range(prompt, language.length):
            p = language.next_probs(prefixes[:, :t])  # (N, V)
            kl.append(float((p * (p.log() - log_q[:, t])).sum(-1).mean()))
        curves.append(torch.tensor(kl, dtype=torch.float64))
    return curves[0], curves[1]
