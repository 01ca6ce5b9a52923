"""Neural language models: a feed-forward LM, its training, sampling and exposure bias.

A language model gives the probability of a sequence through the chain rule,
:math:`p(x_{1:T}) = \\prod_t p(x_t \\mid x_{<t})`, so it only ever predicts the
next token. This module is the neural half of chapter 6 (syllabus LM1-LM6);
n-gram models and :func:`lib.ngram.perplexity` are in :mod:`lib.ngram`.

1. :class:`NeuralLM` is the "embedding -> feature layer -> softmax" model of
   Bengio et al. (2003): the feature layer reads a window of the last ``n - 1``
   embeddings (a feed-forward n-gram model) or their running average. Its
   recurrent sibling is :class:`lib.char_lm.CharLM`; both are sampled with
   :func:`lib.decoding.sample` at any temperature.
2. :func:`train_lm` trains any such model by teacher forcing or by scheduled
   sampling (Bengio et al., 2015): with probability ``1 - epsilon`` an input
   token is replaced by the model's own sample (:func:`scheduled_sampling_inputs`),
   ``epsilon`` decaying by an :class:`EpsilonSchedule`.
3. :class:`CountingLanguage`, a toy language whose true next-token distribution
   is known exactly, and :func:`drift`, which measures exposure bias: how far
   a model's predictions are from the truth after its *own* samples compared
   with after real data.

Conventions. Neural models work on ids ``0 .. V - 1`` and read an extra
input-only id ``bos = V``, as in :mod:`lib.rnn` and :mod:`lib.decoding`.
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
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.char_lm import NextTokenLM
from lib.ngram import _require_token_tensor
from lib.rnn import clip_grad_norm
from lib.training import train_step
from lib.validation import require_int, require_number

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

FEATURES = ("window", "average")


# ---------------------------------------------------------------------------
# A neural language model: embedding -> feature layer -> softmax.
# ---------------------------------------------------------------------------


class NeuralLM(NextTokenLM, nn.Module):
    r"""A feed-forward neural language model (Bengio et al., 2003).

    .. math::
        \mathbf{e}_i = \mathbf{M}[x_i], \qquad
        \mathbf{h}_t = \tanh(\mathbf{W}_h \mathbf{f}_t + \mathbf{b}_h), \qquad
        p(\cdot \mid x_{<t}) = \operatorname{softmax}(\mathbf{W}_o \mathbf{h}_t + \mathbf{b}_o)

    where the feature vector :math:`\mathbf{f}_t` is, for ``feature="window"``,
    the concatenation :math:`[\mathbf{e}_{t-n+1}; \dots; \mathbf{e}_{t-1}]` of
    the last ``context = n - 1`` embeddings (missing ones are ``bos``), and for
    ``feature="average"`` the mean of the embeddings of ``bos`` and all earlier
    tokens. The recurrent feature layer is :class:`lib.char_lm.CharLM`.

    Parameters
    ----------
    vocab_size : int
        ``V`` output tokens; the embedding has ``V + 1`` rows, the last for ``bos``.
    context : int
        ``n - 1``, the window length (ignored by ``"average"``).
    embedding_dim, hidden_size : int
    feature : {"window", "average"}

    Shapes
    ------
    tokens : (N, t) LongTensor, each row starting with ``bos``
    forward output : (N, t, V) logits; row ``i`` predicts the token after ``tokens[:, i]``
    """

    def __init__(self, vocab_size: int, context: int = 2, embedding_dim: int = 32, hidden_size: int = 64,
                 feature: str = "window"):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("context", context),
                            ("embedding_dim", embedding_dim), ("hidden_size", hidden_size)):
            require_int(name, value, 1)
        if feature not in FEATURES:
            raise ValueError(f"feature must be one of {FEATURES}; found {feature!r}")
        self.vocab_size, self.context, self.feature = vocab_size, context, feature
        self.embedding = nn.Embedding(vocab_size + 1, embedding_dim)
        width = context * embedding_dim if feature == "window" else embedding_dim
        self.hidden = nn.Linear(width, hidden_size)
        self.output = nn.Linear(hidden_size, vocab_size)

    @property
    def bos(self) -> int:
        return self.vocab_size

    def _check_tokens(self, tokens: object) -> None:
        _require_token_tensor("tokens", tokens, 2)
        if tokens.numel() and (tokens.min() < 0 or tokens.max() > self.bos):
            raise ValueError(f"tokens must be ids in [0, {self.bos}] (bos = {self.bos}); "
                             f"found {tokens.min()}..{tokens.max()}")

    def features(self, tokens: Tensor) -> Tensor:
        """The feature layer's output :math:`\\mathbf{h}_t` at every position.

        Shapes
        ------
        tokens : (N, t)
        output : (N, t, hidden_size)
        """
        self._check_tokens(tokens)
        if self.feature == "window":
            # Left-pad with bos so that every position has a full window, then cut the windows.
            padded = F.pad(tokens, (self.context - 1, 0), value=self.bos)  # (N, t + n - 2)
            windows = padded.unfold(1, self.context, 1)  # (N, t, n - 1)
            f = self.embedding(windows).flatten(2)  # (N, t, (n - 1) * E)
        else:
            embedded = self.embedding(tokens)  # (N, t, E)
            counts = torch.arange(1, tokens.shape[1] + 1, device=tokens.device)  # (t,)
            f = embedded.cumsum(dim=1) / counts[None, :, None]  # (N, t, E): running means
        return torch.tanh(self.hidden(f))  # (N, t, H)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.output(self.features(tokens))  # (N, t, V)


# ---------------------------------------------------------------------------
# Training: teacher forcing and scheduled sampling.
# ---------------------------------------------------------------------------

_SCHEDULES = ("constant", "linear", "exponential", "inverse_sigmoid")


@dataclass(frozen=True)
class EpsilonSchedule:
    r"""The probability :math:`\epsilon_i` of feeding the *true* token at training step ``i``.

    The three decays of Bengio et al. (2015), each floored at ``minimum``:

    - ``"linear"``: :math:`\epsilon_i = \max(\epsilon_{\min}, k - c\,i)`;
    - ``"exponential"``: :math:`\epsilon_i = k^i` with :math:`k < 1`;
    - ``"inverse_sigmoid"``: :math:`\epsilon_i = k / (k + \exp(i / k))` with :math:`k \ge 1`;
    - ``"constant"``: :math:`\epsilon_i = k` (``k = 1`` is teacher forcing).

    Shapes
    ------
    Scalars in and out.
    """

    kind: str = "inverse_sigmoid"
    k: float = 10.0
    c: float = 0.0
    minimum: float = 0.0

    def __post_init__(self):
        if self.kind not in _SCHEDULES:
            raise ValueError(f"kind must be one of {_SCHEDULES}; found {self.kind!r}")
        require_number("minimum", self.minimum, 0.0, 1.0)
        if self.kind == "exponential":
            require_number("k", self.k, 0.0, 1.0)
        elif self.kind == "inverse_sigmoid":
            require_number("k", self.k, 1.0)
        else:
            require_number("k", self.k, 0.0, 1.0)
        require_number("c", self.c, 0.0)

    def __call__(self, step: int) -> float:
        require_int("step", step, 0)
        if self.kind == "constant":
            value = self.k
        elif self.kind == "linear":
            value = self.k - self.c * step
        elif self.kind == "exponential":
            value = self.k**step
        else:
            value = self.k / (self.k + math.exp(min(step / self.k, 700.0)))  # exp overflows past 709
        return max(self.minimum, value)


def _check_batch(inputs: object, targets: object) -> None:
    _require_token_tensor("inputs", inputs, 2)
    _require_token_tensor("targets", targets, 2)
    if inputs.shape != targets.shape:
        raise ValueError(f"inputs and targets must have the same shape (N, L); found "
                         f"{tuple(inputs.shape)} and {tuple(targets.shape)}")


def scheduled_sampling_inputs(model: nn.Module, inputs: Tensor, targets: Tensor, epsilon: float,
                              generator: Optional[torch.Generator] = None, prompt: int = 0) -> Tensor:
    """Replace each true input token by the model's own sample with probability ``1 - epsilon``.

    Left to right, input ``t`` (the true token ``t - 1``) is swapped for a
    token drawn from the model's prediction given the inputs *as already
    mixed*, exactly what the model would have read had it generated the prefix
    itself (Bengio et al., 2015). The draws are not differentiated through.

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)``.
    inputs, targets : LongTensor
        A teacher-forcing batch (:func:`lib.char_lm.teacher_forcing_batch`);
        positions whose target is -100 are padding and never swapped.
    epsilon : float
        Probability of keeping each true token.
    generator : torch.Generator, optional
    prompt : int
        The first ``prompt`` tokens are always kept (a given beginning that
        the model continues).

    Returns
    -------
    LongTensor
        The mixed inputs.

    Shapes
    ------
    inputs, targets, output : (N, L)
    """
    _check_batch(inputs, targets)
    require_number("epsilon", epsilon, 0.0, 1.0)
    require_int("prompt", prompt, 0)
    mixed = inputs.clone()
    if epsilon == 1.0:
        return mixed
    with torch.no_grad():
        for t in range(prompt + 1, inputs.shape[1]):
            logits = model(mixed[:, :t])[:, -1]  # (N, V): the model's guess for input t
            drawn = torch.multinomial(torch.softmax(logits.double(), dim=-1), 1, generator=generator)[:, 0]
            swap = (torch.rand(len(mixed), generator=generator) >= epsilon) & (targets[:, t] != -100)  # (N,)
            mixed[swap, t] = drawn[swap]
    return mixed


def train_lm(model: nn.Module, inputs: Tensor, targets: Tensor, steps: int, batch_size: int = 64,
             lr: float = 1e-2, schedule: Optional[EpsilonSchedule] = None, prompt: int = 0, seed: int = 0,
             max_norm: float = 1.0) -> list[float]:
    """Fit a language model by minibatch Adam on the next-token cross-entropy.

    Rows are sorted by length and cut into batches of ``batch_size`` rows of
    similar length, so that little is spent on padding; every pass over the
    data visits the batches in a new seeded order. Each step optionally mixes
    in the model's own samples (:func:`scheduled_sampling_inputs` with
    ``epsilon = schedule(step)``) and takes one Adam step with gradients clipped
    to global norm ``max_norm``. Without a schedule this is teacher forcing.

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)``
        (:class:`NeuralLM`, :class:`lib.char_lm.CharLM`).
    inputs, targets : LongTensor
        From :func:`lib.char_lm.teacher_forcing_batch`.
    steps, batch_size : int
    lr : float
    schedule : EpsilonSchedule, optional
    prompt : int
        Tokens at the start of every row that scheduled sampling never replaces.
    seed : int
        Seeds the order of the batches and the samples.
    max_norm : float

    Returns
    -------
    list of float
        The training loss (nats per token) of each step's batch.

    Shapes
    ------
    inputs, targets : (N, L)
    """
    _check_batch(inputs, targets)
    require_int("steps", steps, 1)
    require_int("batch_size", batch_size, 1)
    if schedule is not None and not isinstance(schedule, EpsilonSchedule):
        raise TypeError(f"schedule must be an EpsilonSchedule or None; found {type(schedule).__name__}")
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
            length = max(1, int(lengths[rows].max()))  # later columns are padding in every row
            x, y = inputs[rows, :length], targets[rows, :length]  # (B, L')
            if schedule is not None:
                x = scheduled_sampling_inputs(model, x, y, schedule(len(losses)), generator, prompt)
            losses.append(train_step(optimizer, model(x), y, clip=clip))
    return losses


@torch.no_grad()
def token_log_probs(model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
    """The model's log-probability of every real target token (teacher forcing), for :func:`lib.ngram.perplexity`.

    Rows are scored one at a time, cut to their real length, so that memory
    stays at one row's ``(L, V)`` scores.

    Shapes
    ------
    inputs, targets : (N, L)
    output : (M,) for the M targets that are not -100, row by row
    """
    _check_batch(inputs, targets)
    scored = []
    for tokens, target in zip(inputs, targets):
        length = int((target != -100).sum())  # real targets come first in each row
        log_probs = F.log_softmax(model(tokens[None, :length])[0].double(), dim=-1)  # (length, V)
        scored.append(log_probs.gather(1, target[:length, None])[:, 0])
    return torch.cat(scored)


# ---------------------------------------------------------------------------
# Exposure bias: a language with a known distribution, and the drift measurement.
# ---------------------------------------------------------------------------


@dataclass
class CountingLanguage:
    """Count around a clock: a toy language whose next-token distribution is known exactly.

    A sentence has ``length`` tokens from ``0 .. hours - 1``. Its hidden clean
    version starts at a uniformly random hour and moves by a fixed step, drawn
    uniformly from ``steps``, modulo ``hours`` (``3, 5, 7, 9, 11, 1, ...``). Each
    token is then, independently with probability ``typo``, replaced by a
    uniformly random hour. The typos give every sequence a non-zero
    probability, so :meth:`next_probs` is defined after *any* prefix, including
    a model's own mistakes.

    Parameters
    ----------
    hours : int
    steps : tuple of int
    length : int
    typo : float

    Shapes
    ------
    sentences : (N, length) LongTensor
    """

    hours: int = 12
    steps: tuple[int, ...] = (1, 2, 3)
    length: int = 16
    typo: float = 0.002

    def __post_init__(self):
        require_int("hours", self.hours, 2)
        require_int("length", self.length, 2)
        require_number("typo", self.typo, 1e-12, 1.0)
        if not self.steps or not all(isinstance(s, int) and not isinstance(s, bool) for s in self.steps):
            raise TypeError(f"steps must be a non-empty tuple of ints; found {self.steps!r}")
        starts = torch.arange(self.hours)
        positions = torch.arange(self.length)
        # Every hidden clean sentence: one row per (step, start) pair, all equally likely.
        self.clean = torch.cat([(starts[:, None] + step * positions[None]) % self.hours for step in self.steps])

    def sample(self, n: int, generator: Optional[torch.Generator] = None) -> Tensor:
        """``n`` sentences drawn from the language.

        Shapes
        ------
        output : (n, length)
        """
        require_int("n", n, 1)
        clean = self.clean[torch.randint(len(self.clean), (n,), generator=generator)]  # (n, T)
        typos = torch.rand(n, self.length, generator=generator) < self.typo
        return torch.where(typos, torch.randint(self.hours, (n, self.length), generator=generator), clean)

    def next_probs(self, prefixes: Tensor) -> Tensor:
        """The true :math:`p(x_{t+1} \\mid x_{1:t})` after each prefix, by Bayes' rule.

        The posterior over the hidden clean sentences weighs each by how many
        prefix tokens it explains: each match has probability
        ``1 - typo + typo / hours``, each mismatch ``typo / hours``.

        Shapes
        ------
        prefixes : (N, t) with 0 <= t < length
        output : (N, hours), float64
        """
        _require_token_tensor("prefixes", prefixes, 2)
        t = prefixes.shape[1]
        if t >= self.length:
            raise ValueError(f"prefixes must be shorter than the sentences ({self.length}); found length {t}")
        match = torch.tensor(math.log(1 - self.typo + self.typo / self.hours), dtype=torch.float64)
        mismatch = torch.tensor(math.log(self.typo / self.hours), dtype=torch.float64)
        agree = prefixes[:, None, :] == self.clean[None, :, :t]  # (N, M, t)
        log_likelihood = torch.where(agree, match, mismatch).sum(-1)  # (N, M)
        posterior = torch.softmax(log_likelihood, dim=-1)  # (N, M)
        nxt = F.one_hot(self.clean[:, t], self.hours).double() * (1 - self.typo) + self.typo / self.hours  # (M, V)
        return posterior @ nxt  # (N, V)


@torch.no_grad()
def rollout(model: nn.Module, prompts: Tensor, length: int, bos: int,
            generator: Optional[torch.Generator] = None) -> Tensor:
    """Continue each prompt to ``length`` tokens with the model's own samples (temperature 1).

    Shapes
    ------
    prompts : (N, P)
    output : (N, length), the prompts included
    """
    _require_token_tensor("prompts", prompts, 2)
    require_int("length", length, prompts.shape[1])
    tokens = torch.cat([torch.full((len(prompts), 1), bos), prompts], dim=1)  # (N, 1 + P)
    while tokens.shape[1] < length + 1:
        probs = torch.softmax(model(tokens)[:, -1].double(), dim=-1)  # (N, V)
        drawn = torch.multinomial(probs, 1, generator=generator)  # (N, 1)
        tokens = torch.cat([tokens, drawn], dim=1)
    return tokens[:, 1:]


@torch.no_grad()
def drift(model: nn.Module, language: CountingLanguage, sentences: Tensor, bos: int, prompt: int = 2,
          generator: Optional[torch.Generator] = None) -> tuple[Tensor, Tensor]:
    r"""Exposure bias made visible: the model's error after real prefixes and after its own.

    At every position ``t`` the error is the mean Kullback-Leibler divergence
    :math:`\mathrm{KL}(p(\cdot \mid x_{<t}) \,\|\, p_\theta(\cdot \mid x_{<t}))`
    between the true next-token distribution and the model's, over prefixes
    :math:`x_{<t}` that are either real sentences (what teacher forcing trains
    on) or the model's own continuations of their first ``prompt`` tokens (what
    it reads when it generates).

    Parameters
    ----------
    model : nn.Module
        ``model(tokens (N, t))`` returns logits ``(N, t, V)``.
    language : CountingLanguage
    sentences : LongTensor
        Real sentences; their first ``prompt`` tokens start the rollouts.
    bos : int
    prompt : int
    generator : torch.Generator, optional
        Seeds the model's samples.

    Returns
    -------
    on_data, on_own : Tensor
        float64 KL divergences (nats) for positions ``prompt + 1 .. length``.

    Shapes
    ------
    sentences : (N, length)
    on_data, on_own : (length - prompt,)
    """
    _require_token_tensor("sentences", sentences, 2)
    require_int("prompt", prompt, 0)
    own = rollout(model, sentences[:, :prompt], language.length, bos, generator)  # (N, T)
    curves = []
    for prefixes in (sentences, own):
        inputs = torch.cat([torch.full((len(prefixes), 1), bos), prefixes[:, :-1]], dim=1)  # (N, T)
        log_q = torch.log_softmax(model(inputs).double(), dim=-1)  # (N, T, V)
        kl = []
        for t in range(prompt, language.length):
            p = language.next_probs(prefixes[:, :t])  # (N, V)
            kl.append(float((p * (p.log() - log_q[:, t])).sum(-1).mean()))
        curves.append(torch.tensor(kl, dtype=torch.float64))
    return curves[0], curves[1]
