"""The end-to-end memory network (MemN2N): rounds of attention over a read-only memory.

Syllabus MEM3. Sukhbaatar et al. (2015) store each sentence of a story twice: as
an *addressing* memory ``m_i`` (embedding ``A``) and an *output* memory ``c_i``
(embedding ``C``). The question becomes a query ``u``; one *hop* reads

.. math:: p_i = \\mathrm{softmax}_i(\\mathbf{u}^\\top \\mathbf{m}_i), \\qquad
          \\mathbf{o} = \\sum_i p_i \\mathbf{c}_i,

which is chapter 9's key-value attention with dot-product scores
(:func:`lib.part4_attention.attention.attention`). Hops are chained,
``u^{k+1} = u^k + o^k``, so that what one hop found can steer the next one, and after
``K`` hops the answer is ``softmax(W (u^K + o^K))``, a distribution over the vocabulary.

Sentences are embedded as weighted sums of word vectors with the paper's
*position encoding* (:func:`position_encoding`), so that "mary went to the
kitchen" and "the kitchen went to mary" differ, plus a learned *temporal
encoding* of how many sentences ago each one was said, which is what tells the
latest move from the earlier ones.

Two ways to share weights between hops (section 2.2 of the paper):

* ``"adjacent"``: ``A^{k+1} = C^k``, the question embedding ``B = A^1`` and the
  answer matrix ``W^T = C^K``;
* ``"layerwise"``: ``A^1 = ... = A^K``, ``C^1 = ... = C^K``, with a linear map
  ``H`` between hops: ``u^{k+1} = H u^k + o^k``.

:func:`train_memn2n` trains on :class:`lib.part5_memory.babi.Stories` and
:func:`accuracy` scores held-out ones.

References
----------
.. [1] S. Sukhbaatar, A. Szlam, J. Weston, R. Fergus. "End-To-End Memory
   Networks". NeurIPS 2015. arXiv:1503.08895.
.. [2] J. Weston, S. Chopra, A. Bordes. "Memory Networks". ICLR 2015.
   arXiv:1410.3916.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int64
from torch import Tensor, nn

from lib.part4_attention.attention import DotScore, attention
from lib.checked import Fraction, NonNegativeInt, Positive, PositiveInt
from lib.part2_recurrent.rnn import clip_grad_norm
from lib.part5_memory.babi import Stories
from lib.training import TrainingLog

__all__ = [
    "MemN2N",
    "MemN2NConfig",
    "TYING",
    "accuracy",
    "position_encoding",
    "support_weights",
    "train_memn2n",
]

Tying = Literal["adjacent", "layerwise"]
TYING = get_args(Tying)


def position_encoding(
    sentence_length: PositiveInt, embed_dim: PositiveInt
) -> Float[Tensor, "J d"]:
    r"""The position encoding of Sukhbaatar et al. (2015, section 4.1),
    :math:`l_{kj} = (1 - j/J) - (k/d)(1 - 2j/J)`; row ``j - 1`` weighs word ``j``.

    A sentence is embedded as :math:`\sum_j \mathbf{l}_j \odot \mathbf{A} x_j`; with
    every :math:`l_{kj} = 1` it would be a bag of words, blind to word order. (The
    paper's ``J`` is each sentence's length; here it is the padded width.)
    """
    j = torch.arange(1, sentence_length + 1, dtype=torch.float32)[:, None]  # (J, 1)
    k = torch.arange(1, embed_dim + 1, dtype=torch.float32)[None, :]  # (1, d)
    j, k = j / sentence_length, k / embed_dim  # j/J and k/d
    return (1 - j) - k * (1 - 2 * j)  # (J, d)


@dataclass
class MemN2NConfig:
    """Sizes and options of a :class:`MemN2N`; its annotations are its rules."""

    vocab_size: PositiveInt
    embed_dim: PositiveInt = 32
    hops: PositiveInt = 3
    max_sentences: PositiveInt = 10  # memory slots (and temporal-encoding rows)
    sentence_length: PositiveInt = Stories.WIDTH
    tying: Tying = "adjacent"


class MemN2N(nn.Module):
    """End-to-end memory network: ``K`` hops over a story of up to ``N`` sentences
    of ``J`` word ids (0 = padding), the first ``lengths`` of them real."""

    def __init__(self, config: MemN2NConfig):
        super().__init__()
        self.config, hops, dim = config, config.hops, config.embed_dim

        def words() -> nn.Embedding:  # padding embeds to 0 and gets no gradient
            table = nn.Embedding(config.vocab_size, dim, padding_idx=0)
            nn.init.normal_(table.weight[1:], std=0.1)
            return table

        def times() -> nn.Parameter:  # temporal encoding: a vector per "sentences ago"
            return nn.Parameter(0.1 * torch.randn(config.max_sentences, dim))

        if config.tying == "adjacent":
            # Tables 0..K: hop k addresses with table k-1 and outputs with table k.
            self.word_tables = nn.ModuleList(words() for _ in range(hops + 1))
            self.time_tables = nn.ParameterList(times() for _ in range(hops + 1))
            self.A, self.C = list(self.word_tables)[:-1], list(self.word_tables)[1:]
            self.T_A, self.T_C = list(self.time_tables)[:-1], list(self.time_tables)[1:]
            self.B = self.word_tables[0]  # B = A^1
        else:
            self.word_tables = nn.ModuleList(words() for _ in range(3))  # A, C, B
            self.time_tables = nn.ParameterList(times() for _ in range(2))  # T_A, T_C
            # One A, C, T_A and T_C, shared by every hop.
            self.A, self.C = [self.word_tables[0]] * hops, [self.word_tables[1]] * hops
            self.T_A, self.T_C = ([table] * hops for table in self.time_tables)
            self.B = self.word_tables[2]
            self.H = nn.Linear(dim, dim, bias=False)
            self.W = nn.Linear(dim, config.vocab_size, bias=False)
        encoding = position_encoding(config.sentence_length, dim)  # (J, d)
        self.register_buffer("encoding", encoding, persistent=False)

    def embed(
        self, table: nn.Embedding, words: Int64[Tensor, "*batch J"]
    ) -> Float[Tensor, "*batch d"]:
        """The position-encoded sum of the word vectors of each sentence."""
        width, vocab_size = self.config.sentence_length, table.num_embeddings
        if words.shape[-1] != width:
            raise ValueError(
                f"words must have shape (*batch, J) with J = {width}; "
                f"found {tuple(words.shape)}"
            )
        if words.numel() and (words.min() < 0 or words.max() >= vocab_size):
            raise ValueError(
                f"words must hold word ids in [0, {vocab_size}); "
                f"found ids from {int(words.min())} to {int(words.max())}"
            )
        # (*batch, J, d) -> (*batch, d)
        return (table(words) * self.encoding).sum(dim=-2)

    def answer_logits(self, u: Float[Tensor, "B d"]) -> Float[Tensor, "B V"]:
        """``W u``, with ``W^T = C^K`` (adjacent) or a matrix of its own (layerwise)."""
        weight = self.C[-1].weight
        if u.shape[1] != weight.shape[1] or u.dtype != weight.dtype:
            raise TypeError(
                f"u must be (B, d) with d = {weight.shape[1]} and the model's dtype "
                f"{weight.dtype}; found {u.dtype} of shape {tuple(u.shape)}"
            )
        if self.config.tying == "adjacent":
            return u @ self.C[-1].weight.T  # (B, d) @ (d, V)
        return self.W(u)

    def forward(
        self,
        story: Int64[Tensor, "B N J"],
        question: Int64[Tensor, "B J"],
        lengths: Int64[Tensor, "B"],
        linear: bool = False,
    ) -> tuple[Float[Tensor, "B V"], Float[Tensor, "B K N"]]:
        """The answer scores and each hop's attention over the sentences (rows sum to 1;
        ``linear=True``, the paper's *linear start*, skips the softmax)."""
        config, (_, slots, width) = self.config, story.shape
        if slots > config.max_sentences or width != config.sentence_length:
            raise ValueError(
                f"story must have shape (B, N, J) with N <= {config.max_sentences} and "
                f"J = {config.sentence_length}; found {tuple(story.shape)}"
            )
        if bool(((lengths < 1) | (lengths > slots)).any()):
            raise ValueError(
                f"lengths must be in [1, N = {slots}]; found {lengths.tolist()}"
            )
        for name, ids in (("story", story), ("question", question)):
            low, high = (int(ids.min()), int(ids.max())) if ids.numel() else (0, 0)
            if low < 0 or high >= config.vocab_size:
                raise ValueError(
                    f"{name} must hold word ids in [0, vocab_size = "
                    f"{config.vocab_size}); found ids from {low} to {high}"
                )
        # Sentence i of n was said n - 1 - i sentences ago; padding rows are masked.
        ago = (lengths[:, None] - 1 - torch.arange(slots)).clamp(min=0)  # (B, N)
        # Each table embeds the story once: (B, N, d).
        embedded = {id(table): self.embed(table, story) for table in self.word_tables}
        u = self.embed(self.B, question)  # (B, d): the query u^1
        score, weights = DotScore(), []
        for k in range(config.hops):
            m = embedded[id(self.A[k])] + self.T_A[k][ago]  # (B, N, d): addressing
            c = embedded[id(self.C[k])] + self.T_C[k][ago]  # (B, N, d): output
            if linear:
                real = torch.arange(slots) < lengths[:, None, None]  # (B, 1, N)
                p = score(u.unsqueeze(1), m) * real  # (B, 1, N): raw scores
                o = p @ c  # (B, 1, d)
            else:  # (B, 1, d), (B, 1, N)
                o, p = attention(u.unsqueeze(1), m, c, score, valid_lens=lengths)
            u = (self.H(u) if config.tying == "layerwise" else u) + o.squeeze(1)
            weights.append(p.squeeze(1))
        return self.answer_logits(u), torch.stack(weights, dim=1)  # (B, V), (B, K, N)


def train_memn2n(
    model: MemN2N,
    data: Stories,
    epochs: NonNegativeInt,
    linear_epochs: NonNegativeInt = 0,
    batch_size: PositiveInt = 50,
    lr: Positive = 0.02,
    seed: NonNegativeInt = 0,
) -> TrainingLog:
    """Train with Adam on the cross-entropy of the answers, the gradient norm clipped
    at 40 as in the paper; the first ``linear_epochs`` epochs run without the softmax
    in the hops (the paper's *linear start*, which keeps multi-hop models from getting
    stuck early). ``seed`` shuffles the batches. Returns each epoch's mean loss and
    wall time."""
    if linear_epochs > epochs:
        raise ValueError(
            f"linear_epochs must be in [0, epochs = {epochs}]; found {linear_epochs}"
        )
    if len(data) == 0:
        raise ValueError("data must hold at least one story; found 0")
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    log = TrainingLog()
    model.train()
    for epoch in range(epochs):
        start, total = time.perf_counter(), 0.0
        for index in torch.randperm(len(data), generator=generator).split(batch_size):
            batch = data[index]
            linear = epoch < linear_epochs
            logits, _ = model(batch.story, batch.question, batch.lengths, linear=linear)
            loss = F.cross_entropy(logits, batch.answer)
            optimiser.zero_grad()
            loss.backward()
            clip_grad_norm(model.parameters(), 40.0)
            optimiser.step()
            total += loss.item() * len(index)
        log.losses.append(total / len(data))
        log.seconds.append(time.perf_counter() - start)
    return log


@torch.no_grad()
def accuracy(model: MemN2N, data: Stories) -> Fraction:
    """The share of stories whose most likely answer word is right."""
    if len(data) == 0:
        raise ValueError("data must hold at least one story; found 0")
    model.eval()
    logits, _ = model(data.story, data.question, data.lengths)
    return float((logits.argmax(dim=-1) == data.answer).float().mean())


@torch.no_grad()
def support_weights(model: MemN2N, data: Stories) -> Float[Tensor, "K F"]:
    """Each hop's mean attention on each supporting sentence (column ``f`` is fact
    ``f``; for the "two" task, 0 = the pick-up, 1 = the person's last move). Stories
    without such a fact are left out of its column, NaN if no story has it."""
    model.eval()
    _, weights = model(data.story, data.question, data.lengths)  # (B, K, N)
    columns = []
    for fact in data.supporting.T:  # (B,) sentence indices, -1 where there is none
        has = fact >= 0
        picked = weights[has.nonzero().squeeze(1), :, fact[has]]  # (B', K)
        columns.append(picked.mean(dim=0))
    return torch.stack(columns, dim=1)  # (K, F)
