"""The end-to-end memory network (MemN2N): several rounds of attention over a read-only memory.

Syllabus MEM3. Sukhbaatar et al. (2015) store each sentence of a story twice: as
an *addressing* memory ``m_i`` (embedding ``A``) and an *output* memory ``c_i``
(embedding ``C``). The question becomes a query ``u``; one *hop* reads

.. math:: p_i = \\mathrm{softmax}_i(\\mathbf{u}^\\top \\mathbf{m}_i), \\qquad
          \\mathbf{o} = \\sum_i p_i \\mathbf{c}_i,

which is chapter 9's key-value attention with dot-product scores
(:func:`lib.attention.attention`). Hops are chained, ``u^{k+1} = u^k + o^k``, so
that what one hop found can steer the next one, and after ``K`` hops the answer is
``softmax(W (u^K + o^K))``, a distribution over the vocabulary.

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

:func:`train_memn2n` trains on :class:`lib.tasks.babi.Stories` and
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
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.attention import DotScore, attention
from lib.rnn import clip_grad_norm
from lib.tasks.babi import Stories
from lib.training import TrainingLog
from lib.validation import require_instance

__all__ = [
    "MemN2N", "MemN2NConfig", "TYING", "accuracy", "position_encoding", "support_weights", "train_memn2n",
    "train_over_seeds",
]

TYING = ("adjacent", "layerwise")


def position_encoding(sentence_length: int, embed_dim: int) -> Tensor:
    r"""The position encoding of Sukhbaatar et al. (2015, section 4.1).

    .. math:: l_{kj} = (1 - j/J) - (k/d)(1 - 2j/J), \qquad j = 1..J,\ k = 1..d

    A sentence is embedded as :math:`\sum_j \mathbf{l}_j \odot \mathbf{A} x_j`:
    each word's vector is scaled, dimension by dimension, by a weight that depends
    on where the word stands. With all :math:`l_{kj} = 1` it would be a bag of
    words, blind to word order. (The paper's ``J`` is each sentence's length; here
    it is the padded width, the same for every sentence.)

    Returns
    -------
    Tensor
        ``l``, with row ``j - 1`` the weights of word ``j``.

    Shapes
    ------
    output : (J, d)
    """
    for name, value in (("sentence_length", sentence_length), ("embed_dim", embed_dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int; found {value!r}")
    j = torch.arange(1, sentence_length + 1, dtype=torch.float32)[:, None] / sentence_length  # (J, 1): j/J
    k = torch.arange(1, embed_dim + 1, dtype=torch.float32)[None, :] / embed_dim  # (1, d): k/d
    return (1 - j) - k * (1 - 2 * j)  # (J, d)


@dataclass
class MemN2NConfig:
    """Sizes and options of a :class:`MemN2N`."""

    vocab_size: int
    embed_dim: int = 32
    hops: int = 3
    max_sentences: int = 10  # memory slots (and temporal-encoding rows)
    sentence_length: int = Stories.WIDTH
    tying: str = "adjacent"

    def __post_init__(self):
        for name, value in asdict(self).items():
            if name != "tying" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"MemN2NConfig.{name} must be a positive int; found {value!r}")
        if self.tying not in TYING:
            raise ValueError(f"MemN2NConfig.tying must be one of {TYING}; found {self.tying!r}")


class MemN2N(nn.Module):
    """End-to-end memory network with ``K`` hops over a story of up to ``N`` sentences.

    Parameters
    ----------
    config : MemN2NConfig

    Shapes
    ------
    story : (B, N, J) word ids, 0 = padding
    question : (B, J)
    lengths : (B,) number of real sentences (the rest of the memory is masked)
    logits : (B, V) answer scores over the vocabulary
    weights : (B, K, N) each hop's attention over the sentences
    """

    def __init__(self, config: MemN2NConfig):
        super().__init__()
        require_instance("config", config, MemN2NConfig)
        self.config = config
        hops, dim = config.hops, config.embed_dim

        def words() -> nn.Embedding:  # padding embeds to the zero vector and gets no gradient
            table = nn.Embedding(config.vocab_size, dim, padding_idx=0)
            nn.init.normal_(table.weight[1:], std=0.1)
            return table

        def times() -> nn.Parameter:  # temporal encoding: one vector per "sentences ago"
            return nn.Parameter(0.1 * torch.randn(config.max_sentences, dim))

        if config.tying == "adjacent":
            # Tables 0..K and time tables 0..K: hop k addresses with table k-1 and outputs with table k.
            self.word_tables = nn.ModuleList(words() for _ in range(hops + 1))
            self.time_tables = nn.ParameterList(times() for _ in range(hops + 1))
            self.A = [self.word_tables[k] for k in range(hops)]
            self.C = [self.word_tables[k + 1] for k in range(hops)]
            self.T_A = [self.time_tables[k] for k in range(hops)]
            self.T_C = [self.time_tables[k + 1] for k in range(hops)]
            self.B = self.word_tables[0]  # B = A^1
        else:
            self.word_tables = nn.ModuleList(words() for _ in range(3))  # A, C, B
            self.time_tables = nn.ParameterList(times() for _ in range(2))  # T_A, T_C
            self.A, self.C = [self.word_tables[0]] * hops, [self.word_tables[1]] * hops
            self.T_A, self.T_C = [self.time_tables[0]] * hops, [self.time_tables[1]] * hops
            self.B = self.word_tables[2]
            self.H = nn.Linear(dim, dim, bias=False)
            self.W = nn.Linear(dim, config.vocab_size, bias=False)
        self.register_buffer("encoding", position_encoding(config.sentence_length, dim), persistent=False)

    def embed(self, table: nn.Embedding, words: Tensor) -> Tensor:
        """Position-encoded sum of word vectors: ``(..., J)`` ids -> ``(..., d)``."""
        return (table(words) * self.encoding).sum(dim=-2)  # (..., J, d) -> (..., d)

    def answer_logits(self, u: Tensor) -> Tensor:
        """``W u`` with ``W^T = C^K`` (adjacent) or its own matrix (layer-wise): ``(B, d)`` -> ``(B, V)``."""
        if self.config.tying == "adjacent":
            return u @ self.C[-1].weight.T  # (B, d) @ (d, V)
        return self.W(u)

    def forward(self, story: Tensor, question: Tensor, lengths: Tensor, linear: bool = False) -> tuple[Tensor, Tensor]:
        """Answer scores and each hop's attention.

        Parameters
        ----------
        story, question, lengths : Tensor
            Word ids and story lengths (see the class docstring).
        linear : bool
            Skip the softmax: a hop's weights are the raw scores ``u^T m_i`` (zero on
            padding). This is the paper's *linear start*, used early in training.

        Returns
        -------
        logits : Tensor
            ``(B, V)``.
        weights : Tensor
            ``(B, K, N)``; with ``linear=False`` each row sums to 1.
        """
        self._check(story, question, lengths)
        slots = story.shape[1]
        # Sentence i of a story of n sentences was said n - 1 - i sentences ago; padding rows are masked anyway.
        ago = (lengths[:, None] - 1 - torch.arange(slots)).clamp(min=0)  # (B, N)
        embedded = {id(table): self.embed(table, story) for table in self.word_tables}  # each table once: (B, N, d)
        u = self.embed(self.B, question)  # (B, d): the query u^1
        score, weights = DotScore(), []
        for k in range(self.config.hops):
            m = embedded[id(self.A[k])] + self.T_A[k][ago]  # (B, N, d): addressing memory
            c = embedded[id(self.C[k])] + self.T_C[k][ago]  # (B, N, d): output memory
            if linear:
                real = torch.arange(slots) < lengths[:, None, None]  # (B, 1, N)
                p = score(u.unsqueeze(1), m) * real  # (B, 1, N): raw scores, no softmax
                o = p @ c  # (B, 1, d)
            else:
                o, p = attention(u.unsqueeze(1), m, c, score, valid_lens=lengths)  # (B, 1, d), (B, 1, N)
            u = (self.H(u) if self.config.tying == "layerwise" else u) + o.squeeze(1)  # u^{k+1}
            weights.append(p.squeeze(1))
        return self.answer_logits(u), torch.stack(weights, dim=1)  # (B, V), (B, K, N)

    def _check(self, story: object, question: object, lengths: object) -> None:
        config = self.config
        for name, value, layout, dim in (("story", story, "(B, N, J)", 3), ("question", question, "(B, J)", 2),
                                         ("lengths", lengths, "(B,)", 1)):
            if not isinstance(value, Tensor) or value.dtype != torch.long:
                found = value.dtype if isinstance(value, Tensor) else type(value).__name__
                raise TypeError(f"{name} must be a torch.long tensor; found {found}")
            if value.dim() != dim or value.shape[0] != story.shape[0]:
                raise ValueError(
                    f"{name} must have shape {layout} with B = {story.shape[0]}; found {tuple(value.shape)}"
                )
        if story.shape[1] > config.max_sentences or story.shape[2] != config.sentence_length:
            raise ValueError(
                f"story must have shape (B, N, J) with N <= {config.max_sentences} and J = {config.sentence_length}; "
                f"found {tuple(story.shape)}"
            )
        if question.shape[1] != config.sentence_length:
            raise ValueError(
                f"question must have shape (B, J) with J = {config.sentence_length}; found {tuple(question.shape)}"
            )
        if bool(((lengths < 1) | (lengths > story.shape[1])).any()):
            raise ValueError(f"lengths must be in [1, N = {story.shape[1]}]; found {lengths.tolist()}")
        for name, ids in (("story", story), ("question", question)):
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= config.vocab_size):
                raise ValueError(f"{name} must hold word ids in [0, vocab_size = {config.vocab_size}); "
                                 f"found ids from {int(ids.min())} to {int(ids.max())}")


def train_memn2n(model: MemN2N, data: Stories, epochs: int, linear_epochs: int = 0, batch_size: int = 50,
                 lr: float = 0.02, seed: int = 0) -> TrainingLog:
    """Train with Adam on the cross-entropy of the answers.

    The first ``linear_epochs`` epochs run without the softmax in the hops (the
    paper's *linear start*, which keeps multi-hop models from getting stuck early);
    the remaining ones run the model as it is used. The gradient norm is clipped
    at 40, as in the paper. The batches are shuffled with ``seed``, so a seeded
    model and the same data give the same run.

    Returns
    -------
    TrainingLog
        The mean loss and the wall time of each epoch.
    """
    require_instance("model", model, MemN2N), require_instance("data", data, Stories)
    if not 0 <= linear_epochs <= epochs:
        raise ValueError(f"linear_epochs must be in [0, epochs = {epochs}]; found {linear_epochs}")
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    log = TrainingLog()
    model.train()
    for epoch in range(epochs):
        start, total = time.perf_counter(), 0.0
        for index in torch.randperm(len(data), generator=generator).split(batch_size):
            batch = data[index]
            logits, _ = model(batch.story, batch.question, batch.lengths, linear=epoch < linear_epochs)
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
def accuracy(model: MemN2N, data: Stories) -> float:
    """Share of stories whose most likely answer word is right."""
    require_instance("model", model, MemN2N), require_instance("data", data, Stories)
    model.eval()
    logits, _ = model(data.story, data.question, data.lengths)
    return float((logits.argmax(dim=-1) == data.answer).float().mean())


def train_over_seeds(config: MemN2NConfig, train: Stories, test: Stories, seeds, **training) -> tuple[list[MemN2N], list[float]]:
    """Train one model per seed and score each on held-out stories: how much a result owes to luck.

    Seed ``s`` draws the initial weights (``torch.manual_seed(s)``) and the order of the
    batches (``train_memn2n(..., seed=s)``); the stories are the same for every seed.

    Parameters
    ----------
    config : MemN2NConfig
    train, test : Stories
    seeds : iterable of int
    **training
        Passed to :func:`train_memn2n` (``epochs``, ``linear_epochs``, ``batch_size``, ``lr``).

    Returns
    -------
    models : list of MemN2N
        The trained models, in the order of ``seeds``.
    accuracies : list of float
        Their :func:`accuracy` on ``test``.
    """
    require_instance("config", config, MemN2NConfig), require_instance("train", train, Stories)
    require_instance("test", test, Stories)
    seeds = list(seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds):
        raise ValueError(f"seeds must be a non-empty sequence of ints; found {seeds!r}")
    if "seed" in training:
        raise TypeError("train_over_seeds sets train_memn2n's seed itself; pass seeds instead")
    models, accuracies = [], []
    for seed in seeds:
        torch.manual_seed(seed)
        model = MemN2N(config)
        train_memn2n(model, train, seed=seed, **training)
        models.append(model)
        accuracies.append(accuracy(model, test))
    return models, accuracies


@torch.no_grad()
def support_weights(model: MemN2N, data: Stories) -> Tensor:
    """Each hop's mean attention weight on each supporting sentence, over the stories in ``data``.

    Column ``f`` is supporting fact ``f`` (for the "two" task: 0 = the pick-up,
    1 = the person's last move); stories without such a fact are left out of that column.

    Returns
    -------
    Tensor
        ``(K, F)`` mean weights, ``F = data.supporting.shape[1]``; NaN in a column no story has.

    Shapes
    ------
    output : (K, F)
    """
    require_instance("model", model, MemN2N), require_instance("data", data, Stories)
    model.eval()
    _, weights = model(data.story, data.question, data.lengths)  # (B, K, N)
    columns = []
    for fact in data.supporting.T:  # (B,) sentence indices, -1 where the story has no such fact
        has = fact >= 0
        picked = weights[has.nonzero().squeeze(1), :, fact[has]]  # (B', K)
        columns.append(picked.mean(dim=0))
    return torch.stack(columns, dim=1)  # (K, F)
