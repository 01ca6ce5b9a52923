"""word2vec: skip-gram and CBOW trained with negative sampling or a hierarchical softmax.

Mikolov et al. (2013a) learn a vector for every word from the words around it.
*Skip-gram* predicts each context word from the centre word; *CBOW* (continuous
bag of words) predicts the centre word from the average of its context. Mikolov
et al. (2013b) make a step cheap with *negative sampling* (a logistic regression
of the true word against ``K`` noise words drawn from the unigram distribution
raised to 3/4) or with a *hierarchical softmax* on a Huffman tree
(:mod:`lib.tree_softmax`), and speed training up by *subsampling* frequent words.

The module follows the order of chapter 5:

1. vocabulary statistics: the keep probabilities of subsampling and the noise
   distribution (:func:`keep_probabilities`, :func:`noise_distribution`);
2. training examples, built for a whole epoch at once with tensor operations:
   subsampling, randomly shrunk windows, skip-gram pairs and CBOW contexts;
3. the objectives, once as plain per-example losses written from the formulas
   (:func:`softmax_loss`, :func:`negative_sampling_loss`,
   :func:`hierarchical_softmax_loss`) and once as the batched SGD step that
   training uses (:func:`logistic_sgd_step`); the tests hold one against the other;
4. training (:func:`train_word2vec`) and the same run in gensim
   (:func:`train_gensim`), the reference the chapter compares with; both return
   :class:`lib.embeddings.WordVectors`, where the chapter evaluates them;
5. the cost of one step for each objective (:func:`dot_products_per_step`,
   :func:`time_objective_step`).

Conventions: ``V`` is the vocabulary size, ``D`` the vector size, ``B`` a batch
of training examples, ``K`` the number of noise words, ``C`` the context slots of
a CBOW window (``2 * window``), ``L`` the depth of the deepest word in a tree.
Word ids come from :class:`lib.corpus.Vocabulary` (frequent words first).

References
----------
.. [1] T. Mikolov, K. Chen, G. Corrado, J. Dean. "Efficient Estimation of Word
   Representations in Vector Space". ICLR Workshop 2013. arXiv:1301.3781.
.. [2] T. Mikolov, I. Sutskever, K. Chen, G. Corrado, J. Dean. "Distributed
   Representations of Words and Phrases and their Compositionality".
   NeurIPS 2013. arXiv:1310.4546.
.. [3] F. Morin, Y. Bengio. "Hierarchical Probabilistic Neural Network Language
   Model". AISTATS 2005.
.. [4] R. Řehůřek, P. Sojka. "Software Framework for Topic Modelling with Large
   Corpora". LREC 2010 Workshop. (gensim.)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from lib.corpus import Vocabulary
from lib.embeddings import WordVectors, require_vocabulary
from lib.training import TrainingLog
from lib.tree_softmax import BinaryTree, huffman_tree, path_log_prob
from lib.validation import (
    require_broadcastable, require_choice, require_float_tensor, require_float_tensors, require_instance, require_int,
    require_number, require_same_dtype, require_same_shape,
)

__all__ = [
    "Word2VecConfig",
    "keep_probabilities",
    "noise_distribution",
    "EncodedCorpus",
    "encode",
    "subsample",
    "draw_windows",
    "skipgram_pairs",
    "cbow_contexts",
    "softmax_loss",
    "negative_sampling_loss",
    "hierarchical_softmax_loss",
    "unigram_table",
    "draw_negatives",
    "logistic_sgd_step",
    "Word2Vec",
    "train_word2vec",
    "train_gensim",
    "dot_products_per_step",
    "time_objective_step",
]

ARCHITECTURES = ("skip-gram", "cbow")
OBJECTIVES = ("negative", "hierarchical")
SUBSAMPLING_FORMULAS = ("word2vec", "paper")


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _counts_tensor(counts: object) -> Tensor:
    """Word counts as a float64 tensor ``(V,)``; every count must be positive."""
    if isinstance(counts, (str, bytes)) or not isinstance(counts, (Sequence, Tensor)):
        raise TypeError(f"counts must be a sequence of ints; found {type(counts).__name__}")
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.dim() != 1 or counts.numel() == 0:
        raise ValueError(f"counts must be a non-empty 1-D sequence; found shape {tuple(counts.shape)}")
    if bool((counts <= 0).any()):
        raise ValueError(f"counts must be positive; found {counts.min().item():g}")
    return counts


def _check_vectors(hidden: object, name: str, vectors: object, batched: bool = False) -> None:
    """``hidden`` one float vector ``(D,)`` (a batch ``(B, D)`` if ``batched``) and ``vectors``
    rows ``(N, D)`` of the same size and dtype."""
    require_float_tensors(hidden=hidden, **{name: vectors})
    if hidden.dim() != 1 + batched or vectors.dim() != 2 or vectors.shape[1] != hidden.shape[-1]:
        raise ValueError(f"hidden must have shape {'(B, D)' if batched else '(D,)'} and {name} (N, D); found "
                         f"hidden {tuple(hidden.shape)} and {name} {tuple(vectors.shape)}")
    require_same_dtype("hidden", hidden, **{name: vectors})


def _check_sgd_step(hidden: object, output_vectors: object, targets: object, labels: object, mask: object,
                    lr: object) -> None:
    _check_vectors(hidden, "output_vectors", output_vectors, batched=True), require_number("lr", lr, 0.0)
    if not isinstance(targets, Tensor) or targets.dtype != torch.long \
            or targets.dim() != 2 or targets.shape[0] != hidden.shape[0]:
        found = f"{targets.dtype} {tuple(targets.shape)}" if isinstance(targets, Tensor) else type(targets).__name__
        raise ValueError(f"hidden must be (B, D) and targets a LongTensor (B, M) with the same B; found hidden "
                         f"{tuple(hidden.shape)} and targets {found}")
    require_float_tensors(labels=labels, mask=mask)
    require_broadcastable("labels", labels, "targets", targets), require_broadcastable("mask", mask, "targets", targets)


@dataclass(frozen=True)
class Word2VecConfig:
    """Hyper-parameters of a word2vec run; the names follow gensim's ``Word2Vec``.

    Attributes
    ----------
    architecture : {"skip-gram", "cbow"}
    objective : {"negative", "hierarchical"}
        Negative sampling or the hierarchical softmax on a Huffman tree.
    vector_size : int
        ``D``, the size of every word vector.
    window : int
        Largest distance between the centre word and a context word.
    shrink_windows : bool
        Draw each centre word's window uniformly from ``1 .. window``
        (word2vec.c and gensim); False uses ``window`` everywhere.
    negative : int
        ``K``, noise words per example (negative sampling only).
    ns_exponent : float
        The noise distribution is proportional to ``count ** ns_exponent``.
    sample : float
        Subsampling threshold ``s``; 0 keeps every word.
    alpha, min_alpha : float
        The learning rate falls linearly from ``alpha`` to ``min_alpha`` over training.
    epochs : int
    batch_size : int
        Examples (skip-gram pairs or CBOW windows) per SGD step.
    seed : int
    """

    architecture: str = "skip-gram"
    objective: str = "negative"
    vector_size: int = 100
    window: int = 5
    shrink_windows: bool = True
    negative: int = 5
    ns_exponent: float = 0.75
    sample: float = 1e-3
    alpha: float = 0.025
    min_alpha: float = 1e-4
    epochs: int = 5
    batch_size: int = 1024
    seed: int = 0

    def __post_init__(self):
        require_choice("architecture", self.architecture, ARCHITECTURES)
        require_choice("objective", self.objective, OBJECTIVES)
        for name in ("vector_size", "window", "negative", "epochs", "batch_size"):
            require_int(name, getattr(self, name), 1)
        require_int("seed", self.seed, 0)
        if not isinstance(self.shrink_windows, bool):
            raise TypeError(f"shrink_windows must be a bool; found {type(self.shrink_windows).__name__}")
        require_number("ns_exponent", self.ns_exponent, -10.0, 10.0)
        require_number("sample", self.sample, 0.0, 1.0)
        require_number("alpha", self.alpha, 0.0)
        require_number("min_alpha", self.min_alpha, 0.0, self.alpha)


# ---------------------------------------------------------------------------
# 1. Vocabulary statistics.
# ---------------------------------------------------------------------------


def _check_keep(counts: object, sample: object, formula: object) -> None:
    _counts_tensor(counts)
    require_number("sample", sample, 0.0, 1.0)
    require_choice("formula", formula, SUBSAMPLING_FORMULAS)


def keep_probabilities(
    counts: Union[Sequence[int], Tensor], sample: float, formula: str = "word2vec"
) -> Tensor:
    """The probability that subsampling keeps each occurrence of a word.

    With ``f(w) = count(w) / total`` and threshold ``s``:

    * ``"word2vec"`` — word2vec.c and gensim: ``(sqrt(f / s) + 1) * s / f``;
    * ``"paper"`` — Mikolov et al. (2013b), who *discard* with probability
      ``1 - sqrt(s / f)``, so keep ``sqrt(s / f)``.

    Both are capped at 1, and ``sample = 0`` keeps everything. The released code
    keeps more than the paper says (the extra ``s / f``), and keeps a word for sure
    up to ``f = 2.618 s`` rather than ``f = s``.

    Parameters
    ----------
    counts : sequence of int or Tensor
        ``counts[w]`` > 0: how often word ``w`` occurs (after ``min_count``).
    sample : float
        The threshold ``s`` in [0, 1].
    formula : {"word2vec", "paper"}

    Returns
    -------
    Tensor
        float64 probabilities in (0, 1].

    Shapes
    ------
    counts : (V,)
    output : (V,)
    """
    _check_keep(counts, sample, formula)
    counts = torch.as_tensor(counts, dtype=torch.float64)  # (V,)
    if sample == 0:
        return torch.ones_like(counts)
    ratio = sample / (counts / counts.sum())  # s / f(w)
    keep = ratio.sqrt() + ratio if formula == "word2vec" else ratio.sqrt()
    return keep.clamp(max=1.0)


def noise_distribution(counts: Union[Sequence[int], Tensor], exponent: float = 0.75) -> Tensor:
    """The distribution negative sampling draws noise words from: ``count ** exponent``, normalised.

    An exponent of 1 is the unigram distribution and 0 the uniform one; 3/4
    (Mikolov et al., 2013b) lies between: rare words are drawn more often than
    their frequency alone would give.

    Shapes
    ------
    counts : (V,)
    output : (V,) float64, sums to 1
    """
    counts = _counts_tensor(counts)
    require_number("exponent", exponent, -10.0, 10.0)
    weights = counts**exponent
    return weights / weights.sum()


# ---------------------------------------------------------------------------
# 2. Training examples, built for a whole epoch with tensor operations.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodedCorpus:
    """A corpus as word ids, every sentence concatenated.

    Attributes
    ----------
    ids : LongTensor ``(N,)``
        The in-vocabulary words, in corpus order.
    sentence : LongTensor ``(N,)``
        ``sentence[i]`` numbers the sentence position ``i`` belongs to: windows
        never cross from one sentence into the next.
    """

    ids: Tensor
    sentence: Tensor

    def __len__(self) -> int:
        return self.ids.numel()


def encode(sentences: Sequence[Sequence[str]], vocab: Vocabulary) -> EncodedCorpus:
    """Word ids of a corpus; words outside ``vocab`` are dropped (as word2vec does).

    Dropping a word before the windows are cut brings the words on either side
    closer together, exactly as in word2vec.c and gensim.

    Shapes
    ------
    output.ids, output.sentence : (N,), N = the number of in-vocabulary words
    """
    require_vocabulary(vocab)
    if isinstance(sentences, str) or not isinstance(sentences, Sequence):
        raise TypeError(f"sentences must be a list of lists of words; found {type(sentences).__name__}")
    encoded = [vocab.encode(sentence) for sentence in sentences]
    ids = torch.tensor([i for sentence in encoded for i in sentence], dtype=torch.long)
    lengths = torch.tensor([len(sentence) for sentence in encoded], dtype=torch.long)
    sentence = torch.repeat_interleave(torch.arange(len(encoded)), lengths)
    return EncodedCorpus(ids=ids, sentence=sentence)


def subsample(corpus: EncodedCorpus, keep: Tensor, generator: Optional[torch.Generator] = None) -> EncodedCorpus:
    """Keep each position ``i`` with probability ``keep[corpus.ids[i]]`` (a fresh draw every epoch).

    Shapes
    ------
    keep : (V,)
    """
    require_instance("corpus", corpus, EncodedCorpus), require_float_tensor("keep", keep)
    kept = torch.rand(len(corpus), generator=generator, dtype=torch.float64) < keep[corpus.ids]  # (N,)
    return EncodedCorpus(ids=corpus.ids[kept], sentence=corpus.sentence[kept])


def draw_windows(n: int, window: int, shrink: bool = True, generator: Optional[torch.Generator] = None) -> Tensor:
    """The window of each of ``n`` centre words: uniform on ``1 .. window`` if ``shrink``, else ``window``.

    Shrinking the window weights a context word at distance ``d`` by
    ``(window - d + 1) / window`` on average, so near words count more
    (Mikolov et al., 2013a).

    Shapes
    ------
    output : (n,) long
    """
    require_int("n", n, 0)
    require_int("window", window, 1)
    if not shrink:
        return torch.full((n,), window, dtype=torch.long)
    return torch.randint(1, window + 1, (n,), generator=generator)


def skipgram_pairs(corpus: EncodedCorpus, windows: Tensor) -> tuple[Tensor, Tensor]:
    """Every (centre, context) pair of an epoch, without a loop over positions.

    Position ``j`` is a context of centre ``i`` when ``0 < |i - j| <= windows[i]``
    and both lie in the same sentence. One pass per distance ``d`` compares the
    corpus with itself shifted by ``d``, in both directions.

    Returns
    -------
    centres, contexts : LongTensor
        Word ids; pairs at distance 1 come first, then distance 2, and so on.

    Shapes
    ------
    windows : (N,)
    centres, contexts : (P,)
    """
    _check_windows(corpus, windows)
    ids, sentence = corpus.ids, corpus.sentence
    centres, contexts = [], []
    for d in range(1, int(windows.max()) + 1 if len(corpus) else 1):
        same_sentence = sentence[:-d] == sentence[d:]  # (N - d,): positions i and i + d
        left_centred = (ids[:-d], ids[d:], windows[:-d])  # centre i, context i + d
        right_centred = (ids[d:], ids[:-d], windows[d:])  # centre i + d, context i
        for centre, context, reach in (left_centred, right_centred):
            use = same_sentence & (reach >= d)
            centres.append(centre[use])
            contexts.append(context[use])
    empty = torch.zeros(0, dtype=torch.long)
    return (torch.cat(centres), torch.cat(contexts)) if centres else (empty, empty)


def cbow_contexts(corpus: EncodedCorpus, windows: Tensor, window: int) -> tuple[Tensor, Tensor, Tensor]:
    """Every CBOW example of an epoch: a centre word and its context words, padded.

    Returns
    -------
    centres : LongTensor
        Centre words that have at least one context word.
    contexts : LongTensor
        The words at offsets ``-window .. -1, 1 .. window`` (padding where ``mask`` is False).
    mask : BoolTensor
        True where the offset lies within the centre's window and its sentence.

    Shapes
    ------
    windows : (N,)
    centres : (M,)
    contexts, mask : (M, 2 * window)
    """
    _check_windows(corpus, windows)
    require_int("window", window, 1)
    n = len(corpus)
    offsets = torch.cat([torch.arange(-window, 0), torch.arange(1, window + 1)])  # (C,)
    positions = torch.arange(n)[:, None] + offsets  # (N, C)
    inside = (positions >= 0) & (positions < n)
    positions = positions.clamp(0, max(n - 1, 0))
    mask = inside & (corpus.sentence[positions] == corpus.sentence[:, None]) & (offsets.abs() <= windows[:, None])
    has_context = mask.any(dim=1)  # (N,)
    return corpus.ids[has_context], corpus.ids[positions[has_context]], mask[has_context]


def _check_windows(corpus: object, windows: object) -> None:
    if not isinstance(corpus, EncodedCorpus):
        raise TypeError(f"corpus must be an EncodedCorpus (see encode); found {type(corpus).__name__}")
    if not isinstance(windows, Tensor) or windows.dtype != torch.long or windows.shape != (len(corpus),):
        found = f"{windows.dtype} of shape {tuple(windows.shape)}" if isinstance(windows, Tensor) else type(windows).__name__
        raise TypeError(f"windows must be a LongTensor of shape ({len(corpus)},), one per position; found {found}")
    if windows.numel() and windows.min() < 1:
        raise ValueError(f"windows must be >= 1; found {windows.min().item()}")


# ---------------------------------------------------------------------------
# 3. Objectives: plain per-example losses, and the batched SGD step of training.
# ---------------------------------------------------------------------------


def softmax_loss(hidden: Tensor, output_vectors: Tensor, target: int) -> Tensor:
    """``-log P(target | h)`` under the full softmax ``exp(u_o . h) / sum_w exp(u_w . h)``.

    Every word's output vector takes part: a step costs ``V`` dot products.

    Shapes
    ------
    hidden : (D,)
    output_vectors : (V, D)
    output : () scalar
    """
    _check_vectors(hidden, "output_vectors", output_vectors), require_int("target", target, 0, len(output_vectors) - 1)
    logits = output_vectors @ hidden  # (V,)
    return -torch.log_softmax(logits, dim=0)[target]


def negative_sampling_loss(hidden: Tensor, target_vector: Tensor, noise_vectors: Tensor) -> Tensor:
    """``-log σ(u_o . h) - Σ_k log σ(-u_k . h)``: the true word against ``K`` noise words.

    Shapes
    ------
    hidden, target_vector : (D,)
    noise_vectors : (K, D)
    output : () scalar
    """
    _check_vectors(hidden, "noise_vectors", noise_vectors), require_float_tensor("target_vector", target_vector)
    require_same_shape("hidden", hidden, target_vector=target_vector), require_same_dtype("hidden", hidden, target_vector=target_vector)
    return -F.logsigmoid(target_vector @ hidden) - F.logsigmoid(-(noise_vectors @ hidden)).sum()


def hierarchical_softmax_loss(hidden: Tensor, node_vectors: Tensor, tree: BinaryTree, target: int) -> Tensor:
    """``-log P(target | h)`` on a binary tree: one logistic decision per inner node of the path.

    Shapes
    ------
    hidden : (D,)
    node_vectors : (V - 1, D)
    output : () scalar
    """
    return -path_log_prob(hidden[None], node_vectors, tree, torch.tensor([target]))[0]


def unigram_table(probabilities: Tensor, size: int = 2**20) -> Tensor:
    """word2vec.c's table for drawing noise words fast: word ``w`` fills about ``size * P(w)`` slots.

    A noise word is then one random slot (:func:`draw_negatives`): a single
    memory read instead of a search. Each probability is rounded to a multiple
    of ``1 / size``.

    Shapes
    ------
    probabilities : (V,), e.g. from :func:`noise_distribution`
    output : (size,) long, word ids in increasing order
    """
    if not isinstance(probabilities, Tensor) or probabilities.dim() != 1 or probabilities.numel() == 0:
        found = f"shape {tuple(probabilities.shape)}" if isinstance(probabilities, Tensor) else type(probabilities).__name__
        raise TypeError(f"probabilities must be a non-empty 1-D torch.Tensor; found {found}")
    require_int("size", size, 1)
    cdf = probabilities.double().cumsum(0)  # (V,)
    slots = (torch.arange(size, dtype=torch.float64) + 0.5) / size * cdf[-1]  # slot centres, (size,)
    return torch.searchsorted(cdf, slots, right=True).clamp_(max=probabilities.numel() - 1)


def draw_negatives(table: Tensor, shape: tuple[int, ...], generator: Optional[torch.Generator] = None) -> Tensor:
    """Noise words: uniformly random slots of a :func:`unigram_table`.

    Shapes
    ------
    table : (size,)
    output : shape, long
    """
    return table[torch.randint(table.numel(), shape, generator=generator)]


def logistic_sgd_step(
    hidden: Tensor, output_vectors: Tensor, targets: Tensor, labels: Tensor, mask: Tensor, lr: float
) -> tuple[Tensor, Tensor]:
    """One SGD step of the binary logistic losses shared by both objectives, batched.

    Each example ``b`` has a hidden vector ``h_b`` and ``M`` output rows
    ``u_{b,m}`` with labels ``y_{b,m}`` in {0, 1}: for negative sampling the true
    word (label 1) and ``K`` noise words (label 0); for the hierarchical softmax
    the inner nodes of the true word's path (label 1 - bit: 1 = go left). The loss
    is ``-Σ_m [y log σ(u.h) + (1 - y) log σ(-u.h)]`` over the unmasked ``m``, whose
    gradient with respect to the logit is simply ``σ(u.h) - y``.

    The output rows are updated in place (``index_add_`` sums the updates of a
    row used several times in the batch); the gradient with respect to ``h``,
    computed with the rows *before* the update as word2vec.c does, is returned
    for the caller to apply to the input vectors.

    Parameters
    ----------
    hidden : Tensor
    output_vectors : Tensor
        Updated in place.
    targets : LongTensor
        Rows of ``output_vectors``.
    labels : Tensor
        1 for a word to predict (or a left turn), 0 for noise (or a right turn).
    mask : Tensor
        1 where the slot counts, 0 for padding and for noise words equal to the true word.
    lr : float

    Returns
    -------
    loss : Tensor
        Scalar: the summed loss before the step.
    grad_hidden : Tensor

    Shapes
    ------
    hidden : (B, D)
    output_vectors : (R, D)
    targets : (B, M)
    labels, mask : (B, M) or broadcastable to it
    grad_hidden : (B, D)
    """
    _check_sgd_step(hidden, output_vectors, targets, labels, mask, lr)
    batch, slots = targets.shape
    # index_select on the flattened ids is about twice as fast as fancy indexing.
    rows = output_vectors.index_select(0, targets.flatten()).view(batch, slots, -1)  # (B, M, D)
    logits = torch.bmm(rows, hidden.unsqueeze(2)).squeeze(2)  # (B, M)
    error = (torch.sigmoid(logits) - labels) * mask  # (B, M): dloss / dlogit
    grad_hidden = (error.unsqueeze(2) * rows).sum(dim=1)  # (B, D); faster than a bmm here
    # Scale the small (B, M) error rather than pass alpha= to index_add_, which is 3x slower.
    steps = (-lr * error).unsqueeze(2) * hidden.unsqueeze(1)  # (B, M, D)
    output_vectors.index_add_(0, targets.flatten(), steps.flatten(0, 1))
    # y log σ(x) + (1 - y) log σ(-x) = log σ(±x): one logsigmoid per slot.
    loss = -(F.logsigmoid(torch.where(labels > 0.5, logits, -logits)) * mask).sum()
    return loss, grad_hidden


# ---------------------------------------------------------------------------
# 4. The model and its training.
# ---------------------------------------------------------------------------


@dataclass
class Word2Vec:
    """The parameters of a word2vec model.

    Attributes
    ----------
    vocab : Vocabulary
    config : Word2VecConfig
    input_vectors : Tensor ``(V, D)``
        The word vectors one keeps (gensim's ``wv.vectors``, word2vec.c's ``syn0``):
        uniform in ``[-1/D, 1/D)`` at the start, like gensim's.
    output_vectors : Tensor ``(V, D)`` or ``(V - 1, D)``
        One per word for negative sampling (``syn1neg``), one per inner tree
        node for the hierarchical softmax (``syn1``); zero at the start.
    tree : BinaryTree or None
        The Huffman tree of the hierarchical softmax.
    """

    vocab: Vocabulary
    config: Word2VecConfig
    input_vectors: Tensor = field(init=False)
    output_vectors: Tensor = field(init=False)
    tree: Optional[BinaryTree] = field(init=False)

    def __post_init__(self):
        require_vocabulary(self.vocab)
        if not isinstance(self.config, Word2VecConfig):
            raise TypeError(f"config must be a Word2VecConfig; found {type(self.config).__name__}")
        size, dim = len(self.vocab), self.config.vector_size
        generator = torch.Generator().manual_seed(self.config.seed)
        self.input_vectors = (torch.rand(size, dim, generator=generator) * 2 - 1) / dim  # (V, D)
        hierarchical = self.config.objective == "hierarchical"
        self.tree = huffman_tree(self.vocab.counts) if hierarchical else None
        self.output_vectors = torch.zeros(size - 1 if hierarchical else size, dim)  # (R, D)

    def word_vectors(self) -> "WordVectors":
        """The input vectors with their vocabulary, for evaluation."""
        return WordVectors(self.input_vectors, self.vocab)

    def output_side(self, predict: Tensor, negatives: Optional[Tensor] = None) -> tuple[Tensor, Tensor, Tensor]:
        """Output rows, labels and mask of :func:`logistic_sgd_step` for the words to predict.

        Negative sampling: the true word (label 1) then the noise words (label 0);
        like word2vec.c, a noise word equal to the true word is masked out.
        Hierarchical softmax: the inner nodes of the word's Huffman path, with
        label 1 for a left turn (bit 0); slots past the end of the path are masked.

        Shapes
        ------
        predict : (B,)
        negatives : (B, K), required for negative sampling
        targets, labels, mask : (B, M) with M = 1 + K or the tree depth L
        """
        if self.tree is not None:
            nodes, codes, path_mask = self.tree.padded()  # (V, L) each
            return nodes[predict], 1.0 - codes[predict], path_mask[predict].float()
        if negatives is None or negatives.shape != (predict.numel(), self.config.negative):
            found = None if negatives is None else tuple(negatives.shape)
            raise ValueError(f"negative sampling needs negatives of shape (B, K) = "
                             f"({predict.numel()}, {self.config.negative}); found {found}")
        targets = torch.cat([predict[:, None], negatives], dim=1)  # (B, 1 + K)
        labels = torch.zeros(1, targets.shape[1])
        labels[0, 0] = 1.0
        mask = torch.cat([torch.ones(predict.numel(), 1), (negatives != predict[:, None]).float()], dim=1)
        return targets, labels.expand_as(targets), mask

    def sgd_step(
        self, inputs: Tensor, predict: Tensor, lr: float,
        input_mask: Optional[Tensor] = None, negatives: Optional[Tensor] = None,
    ) -> float:
        """One SGD step on a batch of examples; returns the summed loss before the step.

        The hidden vector is the input vector of the centre word (skip-gram) or
        the mean of the context words' input vectors (CBOW).
        :func:`logistic_sgd_step` updates the output side and returns the
        gradient with respect to the hidden vector, which then updates the input
        vectors. As in word2vec.c and gensim, CBOW adds the *whole* gradient of
        ``h`` to every context word, not the ``1 / (number of context words)`` of it
        that the derivative of the mean would give.

        Shapes
        ------
        inputs : (B, 1) centre words (skip-gram) or (B, C) context words (CBOW)
        predict : (B,) the context word (skip-gram) or the centre word (CBOW)
        input_mask : (B, C) bool, CBOW only: True on real context words
        negatives : (B, K), negative sampling only
        """
        targets, labels, mask = self.output_side(predict, negatives)
        vectors = self.input_vectors
        outputs = self.output_vectors
        if input_mask is None:  # skip-gram: h is the centre word's own vector
            centres = inputs[:, 0]  # (B,)
            hidden = vectors.index_select(0, centres)  # (B, D)
            loss, grad_hidden = logistic_sgd_step(hidden, outputs, targets, labels, mask, lr)
            vectors.index_add_(0, centres, grad_hidden.mul_(-lr))
        else:  # CBOW: h is the mean of the context vectors
            batch, slots = inputs.shape
            weights = input_mask.to(vectors.dtype)  # (B, C)
            context = vectors.index_select(0, inputs.flatten()).view(batch, slots, -1)  # (B, C, D)
            counts = weights.sum(dim=1, keepdim=True)  # (B, 1)
            hidden = torch.bmm(weights.unsqueeze(1), context).squeeze(1) / counts  # (B, D)
            loss, grad_hidden = logistic_sgd_step(hidden, outputs, targets, labels, mask, lr)
            # Padding slots add zero rows: cheaper than selecting the real slots first.
            rows = weights.unsqueeze(2) * grad_hidden.mul_(-lr).unsqueeze(1)  # (B, C, D)
            vectors.index_add_(0, inputs.flatten(), rows.flatten(0, 1))
        return float(loss)


def _epoch_examples(config: Word2VecConfig, corpus: EncodedCorpus, keep: Tensor, generator: torch.Generator):
    """Subsample, cut windows and shuffle: ``(inputs, input_mask, predict)`` of one epoch.

    Skip-gram: ``inputs`` ``(P, 1)`` are the centre words and ``predict`` their
    contexts. CBOW: ``inputs`` ``(M, C)`` are the contexts, with a mask, and
    ``predict`` the centre words.
    """
    kept = subsample(corpus, keep, generator)
    windows = draw_windows(len(kept), config.window, config.shrink_windows, generator)
    if config.architecture == "skip-gram":
        centres, contexts = skipgram_pairs(kept, windows)
        inputs, input_mask, predict = centres[:, None], None, contexts  # (P, 1), -, (P,)
    else:
        predict, inputs, input_mask = cbow_contexts(kept, windows, config.window)  # (M,), (M, C), (M, C)
    order = torch.randperm(predict.numel(), generator=generator)
    return inputs[order], None if input_mask is None else input_mask[order], predict[order]


def train_word2vec(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    config: Word2VecConfig = Word2VecConfig(),
    progress: bool = False,
) -> tuple[Word2Vec, TrainingLog]:
    """Train word2vec by mini-batch SGD with a linearly decaying learning rate.

    Each epoch draws a fresh subsample and fresh windows, builds all its
    examples at once (:func:`skipgram_pairs` or :func:`cbow_contexts`), shuffles
    them and walks through them in batches of :meth:`Word2Vec.sgd_step`. The
    learning rate falls linearly from ``alpha`` to ``min_alpha`` over all
    batches of all epochs, as gensim's does over all words.

    Parameters
    ----------
    sentences : list of list of str
        The corpus, e.g. from :func:`lib.corpus.read_sentences`.
    vocab : Vocabulary
        Usually ``Vocabulary.from_sentences(sentences, min_count=...)``.
    config : Word2VecConfig
    progress : bool
        Show a progress bar (tqdm) with the loss of the last epoch.

    Returns
    -------
    model : Word2Vec
    log : TrainingLog
        Mean loss per example and wall time of every epoch.

    Raises
    ------
    FloatingPointError
        If the loss stops being finite. A batch sums the updates of every
        occurrence of a word, so a small vocabulary with a large batch and
        learning rate can diverge where one-example-at-a-time SGD would not.
    """
    model = Word2Vec(vocab, config)
    corpus = encode(sentences, vocab)
    if len(corpus) < 2:
        raise ValueError(f"the corpus must hold at least 2 in-vocabulary words; found {len(corpus)}")
    generator = torch.Generator().manual_seed(config.seed)
    keep = keep_probabilities(vocab.counts, config.sample)
    noise_table = unigram_table(noise_distribution(vocab.counts, config.ns_exponent))
    log = TrainingLog()
    bar = _progress_bar(config.epochs) if progress else None
    for epoch in range(config.epochs):
        start = time.perf_counter()
        inputs, input_mask, predict = _epoch_examples(config, corpus, keep, generator)
        total_loss, n_examples = 0.0, predict.numel()
        for first in range(0, n_examples, config.batch_size):
            batch = slice(first, first + config.batch_size)
            lr = config.alpha - (config.alpha - config.min_alpha) * (epoch + first / n_examples) / config.epochs
            negatives = None
            if model.tree is None:
                negatives = draw_negatives(noise_table, (predict[batch].numel(), config.negative), generator)
            total_loss += model.sgd_step(inputs[batch], predict[batch], lr,
                                         None if input_mask is None else input_mask[batch], negatives)
        log.losses.append(total_loss / max(n_examples, 1))
        log.seconds.append(time.perf_counter() - start)
        if not math.isfinite(log.losses[-1]):
            # Updates of a word used many times in one batch add up: too large a sum diverges.
            raise FloatingPointError(
                f"training diverged in epoch {epoch + 1} (mean loss {log.losses[-1]}): lower alpha "
                f"(found {config.alpha}) or batch_size (found {config.batch_size})"
            )
        if bar is not None:
            bar.set_postfix(loss=f"{log.losses[-1]:.3f}")
            bar.update()
    if bar is not None:
        bar.close()
    return model, log


def _progress_bar(epochs: int):
    from tqdm.auto import tqdm

    return tqdm(total=epochs, unit="epoch", desc="word2vec")


def train_gensim(
    sentences: Sequence[Sequence[str]], vocab: Vocabulary, config: Word2VecConfig, min_count: int
) -> tuple["WordVectors", float]:
    """The same run in gensim (one worker thread): the reference for :func:`train_word2vec`.

    Every hyper-parameter of ``config`` is passed on (CBOW averages its context,
    ``cbow_mean=1``); ``batch_size`` has no counterpart, because gensim updates
    after every example.

    Parameters
    ----------
    sentences : list of list of str
        The same token lists :func:`train_word2vec` receives.
    vocab : Vocabulary
        Built from ``sentences`` with ``min_count``; gensim must arrive at the
        same words, otherwise a ValueError says which differ.
    config : Word2VecConfig
    min_count : int

    Returns
    -------
    vectors : WordVectors
        gensim's vectors, rows in ``vocab``'s order.
    seconds : float
        Wall time of gensim's vocabulary scan and training.
    """
    from gensim.models import Word2Vec as GensimWord2Vec

    require_vocabulary(vocab)
    if not isinstance(config, Word2VecConfig):
        raise TypeError(f"config must be a Word2VecConfig; found {type(config).__name__}")
    require_int("min_count", min_count, 1)
    hierarchical = config.objective == "hierarchical"
    start = time.perf_counter()
    model = GensimWord2Vec(
        sentences, vector_size=config.vector_size, window=config.window, min_count=min_count,
        sample=config.sample, sg=int(config.architecture == "skip-gram"), cbow_mean=1,
        hs=int(hierarchical), negative=0 if hierarchical else config.negative, ns_exponent=config.ns_exponent,
        alpha=config.alpha, min_alpha=config.min_alpha, epochs=config.epochs, seed=config.seed,
        shrink_windows=config.shrink_windows, workers=1,
    )
    seconds = time.perf_counter() - start
    theirs, ours = set(model.wv.key_to_index), set(vocab.words)
    if theirs != ours:
        raise ValueError(
            f"gensim's vocabulary differs from vocab: {len(theirs - ours)} words only in gensim's "
            f"(e.g. {sorted(theirs - ours)[:3]}), {len(ours - theirs)} only in vocab; build vocab from the "
            f"same sentences with min_count={min_count}"
        )
    order = torch.tensor([model.wv.key_to_index[word] for word in vocab.words])
    vectors = torch.from_numpy(model.wv.vectors.copy())[order]  # (V, D) in vocab's order
    return WordVectors(vectors, vocab), seconds


# ---------------------------------------------------------------------------
# 5. The cost of one step.
# ---------------------------------------------------------------------------


def dot_products_per_step(objective: str, counts: Union[Sequence[int], Tensor], negative: int = 5) -> float:
    """Output-side dot products for one predicted word, on average over the corpus.

    ``"softmax"``: ``V``, one per word. ``"negative"``: ``K + 1``.
    ``"hierarchical"``: the depth of the predicted word in the Huffman tree,
    averaged with the words' frequencies (frequent words have short paths).
    """
    require_choice("objective", objective, ("softmax", *OBJECTIVES))
    counts = _counts_tensor(counts)
    if objective == "softmax":
        return float(counts.numel())
    if objective == "negative":
        require_int("negative", negative, 1)
        return float(negative + 1)
    depths = torch.tensor(huffman_tree([int(c) for c in counts]).depths, dtype=torch.float64)
    return float((depths * counts).sum() / counts.sum())


def time_objective_step(
    objective: str, vocab_size: int, dim: int = 100, batch_size: int = 256, negative: int = 5, repeats: int = 5
) -> float:
    """CPU time (seconds) of one SGD step on the output side, for a Zipfian vocabulary.

    The full softmax computes all ``V`` logits, their softmax and a dense
    gradient; the other two call :func:`logistic_sgd_step` with ``K + 1`` rows or
    the Huffman path of each word. Words are drawn from counts proportional to
    ``1 / rank`` (Zipf's law), so the Huffman paths are as short as on real text.

    Returns
    -------
    float
        CPU seconds per step (``time.process_time``, which other programs on a busy
        machine do not inflate as they do wall time), the fastest of ``repeats`` runs
        after one warm-up run.
    """
    require_choice("objective", objective, ("softmax", *OBJECTIVES))
    for name, value in (("vocab_size", vocab_size), ("dim", dim), ("batch_size", batch_size), ("repeats", repeats)):
        require_int(name, value, 2 if name == "vocab_size" else 1)
    generator = torch.Generator().manual_seed(0)
    counts = (1e7 / torch.arange(1, vocab_size + 1, dtype=torch.float64)).round().clamp(min=1)  # (V,)
    table = unigram_table(counts / counts.sum())
    words = draw_negatives(table, (batch_size,), generator)  # (B,) drawn by frequency
    hidden = torch.randn(batch_size, dim, generator=generator) / dim  # (B, D)
    tree = huffman_tree([int(c) for c in counts]) if objective == "hierarchical" else None
    outputs = torch.randn(vocab_size - (tree is not None), dim, generator=generator) / dim  # (R, D)

    def step() -> None:
        if objective == "softmax":
            probs = torch.softmax(hidden @ outputs.T, dim=1)  # (B, V)
            probs[torch.arange(batch_size), words] -= 1.0  # dloss / dlogits
            _ = probs @ outputs  # gradient with respect to h, (B, D)
            outputs.sub_(0.01 * probs.T @ hidden)  # every row changes, (V, D)
        elif objective == "negative":
            targets = torch.cat([words[:, None], draw_negatives(table, (batch_size, negative), generator)], 1)
            labels = torch.zeros(1, negative + 1)
            labels[0, 0] = 1.0
            logistic_sgd_step(hidden, outputs, targets, labels, torch.ones(()), 0.01)
        else:
            nodes, codes, mask = tree.padded()
            logistic_sgd_step(hidden, outputs, nodes[words], 1.0 - codes[words], mask[words].float(), 0.01)

    times = []
    for _ in range(repeats + 1):  # the first run warms up
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return min(times[1:])
