"""word2vec: skip-gram and CBOW, trained with negative sampling or a hierarchical
softmax.

Mikolov et al. (2013a) learn a vector for every word from the words around it.
*Skip-gram* predicts each context word from the centre word; *CBOW* (continuous bag of
words) predicts the centre word from the average of its context. Mikolov et al. (2013b)
make a step cheap with *negative sampling* (a logistic regression of the true word
against ``K`` noise words drawn from the unigram distribution raised to 3/4) or with a
*hierarchical softmax* on a Huffman tree (:mod:`lib.part3_words.tree_softmax`), and
speed training up by *subsampling* frequent words.

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
   :class:`lib.part3_words.embeddings.WordVectors`, where the chapter evaluates them;
5. the cost of one step for each objective in dot products
   (:func:`dot_products_per_step`); chapter 5's experiments
   (``experiments.ch05_word2vec``) time it.

Conventions: ``V`` is the vocabulary size, ``D`` the vector size, ``B`` a batch
of training examples, ``K`` the number of noise words, ``C`` the context slots of
a CBOW window (``2 * window``), ``L`` the depth of the deepest word in a tree.
``N`` counts the positions of a corpus, ``P`` its skip-gram pairs and ``E`` the
examples of an epoch; ``R`` the rows of ``output_vectors`` (``V`` words, or
``V - 1`` inner nodes), ``M`` the rows one example touches (``K + 1``, or ``L``);
``S`` the slots of a unigram table.
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

import inspect
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal, Optional, Union, no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Float64, Int, Int64, Real
from beartype.vale import Is
from torch import Tensor

from lib.checked import (
    Fraction,
    NoiseExponent,
    NonNegative,
    NonNegativeInt,
    Positive,
    PositiveInt,
    each,
    same_dtype,
)
from lib.corpus import Vocabulary
from lib.part3_words.embeddings import WordVectors
from lib.training import TrainingLog
from lib.part3_words.tree_softmax import BinaryTree, huffman_tree, path_log_prob

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
]

Architecture = Literal["skip-gram", "cbow"]
Objective = Literal["negative", "hierarchical"]
SubsamplingFormula = Literal["word2vec", "paper"]


def are_positive_counts(counts: Sequence | Tensor) -> bool:
    counts = torch.as_tensor(counts, dtype=torch.float64)
    return counts.numel() > 0 and bool(((counts > 0) & counts.isfinite()).all())


# How often each word occurs: a non-empty list of ints >= 1, or a tensor of positive,
# finite counts.
Counts = Annotated[Union[each(PositiveInt), Real[Tensor, "V"]], Is[are_positive_counts]]
MAX_PARAMETERS = 2**31  # 8 GiB of float32 input vectors: more than a laptop holds


@dataclass(frozen=True)
class Word2VecConfig:
    """Hyper-parameters of a word2vec run, named as gensim's ``Word2Vec`` names them.

    ``negative`` is ``K``; the noise distribution is proportional to
    ``count ** ns_exponent``; ``sample`` is the subsampling threshold (0 keeps every
    word); the learning rate falls linearly from ``alpha`` to ``min_alpha``;
    ``batch_size`` examples make one SGD step; ``shrink_windows`` draws each window
    uniformly from ``1 .. window``, as word2vec.c and gensim do.
    """

    architecture: Architecture = "skip-gram"
    objective: Objective = "negative"
    vector_size: PositiveInt = 100
    window: PositiveInt = 5
    shrink_windows: bool = True
    negative: PositiveInt = 5
    ns_exponent: NoiseExponent = 0.75
    sample: Fraction = 1e-3
    alpha: NonNegative = 0.025
    min_alpha: NonNegative = 1e-4
    epochs: PositiveInt = 5
    batch_size: PositiveInt = 1024
    seed: NonNegativeInt = 0

    def __post_init__(self):
        if self.min_alpha > self.alpha:
            raise ValueError(
                f"min_alpha must be at most alpha ({self.alpha}); "
                f"found {self.min_alpha}"
            )


# ---------------------------------------------------------------------------
# 1. Vocabulary statistics.
# ---------------------------------------------------------------------------


def keep_probabilities(
    counts: Counts, sample: Fraction, formula: SubsamplingFormula = "word2vec"
) -> Float64[Tensor, "V"]:
    """The probability that subsampling keeps each occurrence of a word.

    With ``f = count / total``: ``"word2vec"`` (word2vec.c, gensim) keeps
    ``(sqrt(f / s) + 1) * s / f``, ``"paper"`` (Mikolov et al., 2013b) ``sqrt(s / f)``;
    both at most 1, and ``sample = 0`` keeps every word.
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)  # (V,)
    if sample == 0:
        return torch.ones_like(counts)
    ratio = sample / (counts / counts.sum())  # s / f(w)
    keep = ratio.sqrt() + ratio if formula == "word2vec" else ratio.sqrt()
    return keep.clamp(max=1.0)


def noise_distribution(
    counts: Counts, exponent: NoiseExponent = 0.75
) -> Float64[Tensor, "V"]:
    """Negative sampling's noise distribution: ``count ** exponent``, normalised.

    An exponent of 1 is the unigram distribution and 0 the uniform one; 3/4
    (Mikolov et al., 2013b) draws rare words more often than their frequency would.
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)  # (V,)
    weights = counts**exponent
    return weights / weights.sum()


# ---------------------------------------------------------------------------
# 2. Training examples, built for a whole epoch with tensor operations.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EncodedCorpus:
    """A corpus as word ids, every sentence concatenated.

    ``sentence[i]`` numbers the sentence position ``i`` belongs to: windows never
    cross from one sentence into the next.
    """

    ids: Int[Tensor, "N"]
    sentence: Int[Tensor, "N"]

    def __post_init__(self):
        for name, values in (("ids", self.ids), ("sentence", self.sentence)):
            if values.numel() and values.min() < 0:  # an index would count from the end
                raise ValueError(f"{name} must be >= 0; found {values.min().item()}")

    def __len__(self) -> int:
        return self.ids.numel()


def encode(sentences: Sequence[Sequence[str]], vocab: Vocabulary) -> EncodedCorpus:
    """Word ids of a corpus; words outside ``vocab`` are dropped, as word2vec does.

    Dropping a word before the windows are cut brings its neighbours closer together,
    exactly as in word2vec.c and gensim.
    """
    if isinstance(sentences, str):  # a str is a Sequence of one-letter "sentences"
        raise TypeError("sentences must be a list of lists of words; found str")
    encoded = [vocab.encode(sentence) for sentence in sentences]
    ids = torch.tensor([i for sentence in encoded for i in sentence], dtype=torch.long)
    lengths = torch.tensor([len(sentence) for sentence in encoded], dtype=torch.long)
    sentence = torch.repeat_interleave(torch.arange(len(encoded)), lengths)  # (N,)
    return EncodedCorpus(ids=ids, sentence=sentence)


def subsample(
    corpus: EncodedCorpus,
    keep: Float[Tensor, "V"],
    generator: Optional[torch.Generator] = None,
) -> EncodedCorpus:
    """Keep each position ``i`` with probability ``keep[corpus.ids[i]]``."""
    if len(corpus) and int(corpus.ids.max()) >= keep.numel():
        raise ValueError(
            f"keep must hold a probability for every word id of corpus (up to "
            f"{int(corpus.ids.max())}); found {keep.numel()}"
        )
    if keep.numel() and not 0 <= keep.min() <= keep.max() <= 1:  # NaN fails too
        low, high = keep.min().item(), keep.max().item()
        raise ValueError(f"keep must be probabilities in [0, 1]; found {low} to {high}")
    draws = torch.rand(len(corpus), generator=generator, dtype=torch.float64)  # (N,)
    kept = draws < keep[corpus.ids]
    return EncodedCorpus(ids=corpus.ids[kept], sentence=corpus.sentence[kept])


def draw_windows(
    n: NonNegativeInt,
    window: PositiveInt,
    shrink: bool = True,
    generator: Optional[torch.Generator] = None,
) -> Int64[Tensor, "n"]:
    """The windows of ``n`` centre words: uniform on ``1 .. window`` if ``shrink``.

    A shrunk window weights a context word at distance ``d`` by
    ``(window - d + 1) / window`` on average: near words count more.
    """
    if not shrink:
        return torch.full((n,), window, dtype=torch.long)
    return torch.randint(1, window + 1, (n,), generator=generator)


def skipgram_pairs(
    corpus: EncodedCorpus, windows: Int[Tensor, "N"]
) -> tuple[Int[Tensor, "P"], Int[Tensor, "P"]]:
    """Every (centre, context) pair of an epoch: pairs at distance 1 first, then 2, ...

    Position ``j`` is a context of centre ``i`` when ``0 < |i - j| <= windows[i]``
    and both lie in the same sentence. One pass per distance ``d`` compares the
    corpus with itself shifted by ``d``, in both directions.
    """
    if windows.shape != (len(corpus),):
        raise ValueError(
            f"windows must have shape ({len(corpus)},), one per position of corpus; "
            f"found {tuple(windows.shape)}"
        )
    if windows.numel() and windows.min() < 1:
        raise ValueError(f"windows must be >= 1; found {windows.min().item()}")
    ids, sentence = corpus.ids, corpus.sentence
    centres, contexts = [], []
    # No two positions lie further apart than len(corpus) - 1, whatever the windows.
    longest = min(int(windows.max()), len(corpus) - 1) if len(corpus) else 0
    for d in range(1, longest + 1):
        same_sentence = sentence[:-d] == sentence[d:]  # (N - d,): positions i and i + d
        left_centred = (ids[:-d], ids[d:], windows[:-d])  # centre i, context i + d
        right_centred = (ids[d:], ids[:-d], windows[d:])  # centre i + d, context i
        for centre, context, reach in (left_centred, right_centred):
            use = same_sentence & (reach >= d)
            centres.append(centre[use])
            contexts.append(context[use])
    empty = torch.zeros(0, dtype=torch.long)
    return (torch.cat(centres), torch.cat(contexts)) if centres else (empty, empty)


def cbow_contexts(
    corpus: EncodedCorpus, windows: Int[Tensor, "N"], window: PositiveInt
) -> tuple[Int[Tensor, "M"], Int[Tensor, "M C"], Bool[Tensor, "M C"]]:
    """Every CBOW example of an epoch: a centre word and its ``C = 2 * window`` slots.

    The slots hold the words at offsets ``-window .. -1, 1 .. window``; ``mask`` is
    True where the offset lies within the centre's window and its sentence. Centre
    words without any context word are left out.
    """
    if windows.shape != (len(corpus),):
        raise ValueError(
            f"windows must have shape ({len(corpus)},), one per position of corpus; "
            f"found {tuple(windows.shape)}"
        )
    if windows.numel() and not 1 <= windows.min() <= windows.max() <= window:
        low, high = windows.min().item(), windows.max().item()
        raise ValueError(f"windows must be 1 to window={window}; found {low} to {high}")
    n = len(corpus)
    if n * 2 * window > MAX_PARAMETERS:  # the (N, C) slots torch would allocate
        raise ValueError(
            f"len(corpus) * 2 * window must be at most {MAX_PARAMETERS}; "
            f"found {n} * 2 * {window}"
        )
    offsets = torch.cat([torch.arange(-window, 0), torch.arange(1, window + 1)])  # (C,)
    positions = torch.arange(n)[:, None] + offsets  # (N, C)
    inside = (positions >= 0) & (positions < n)
    positions = positions.clamp(0, max(n - 1, 0))
    same_sentence = corpus.sentence[positions] == corpus.sentence[:, None]  # (N, C)
    mask = inside & same_sentence & (offsets.abs() <= windows[:, None])
    has_context = mask.any(dim=1)  # (N,)
    centres = corpus.ids[has_context]
    return centres, corpus.ids[positions[has_context]], mask[has_context]


# ---------------------------------------------------------------------------
# 3. Objectives: plain per-example losses, and the batched SGD step of training.
# ---------------------------------------------------------------------------


def softmax_loss(
    hidden: Float[Tensor, "D"],
    output_vectors: Float[Tensor, "V D"],
    target: NonNegativeInt,
) -> Float[Tensor, ""]:
    """``-log P(target | h)`` under the full softmax: ``V`` dot products a step."""
    same_dtype(hidden=hidden, output_vectors=output_vectors)
    if target >= len(output_vectors):
        raise ValueError(
            f"target must be a row of output_vectors, below {len(output_vectors)}; "
            f"found {target}"
        )
    logits = output_vectors @ hidden  # (V,)
    return -torch.log_softmax(logits, dim=0)[target]


def negative_sampling_loss(
    hidden: Float[Tensor, "D"],
    target_vector: Float[Tensor, "D"],
    noise_vectors: Float[Tensor, "K D"],
) -> Float[Tensor, ""]:
    """``-log σ(u_o . h) - Σ_k log σ(-u_k . h)``: the true word against K noise words
    (one score each, so a step costs K + 1 dot products)."""
    same_dtype(hidden=hidden, target_vector=target_vector, noise_vectors=noise_vectors)
    true_word = F.logsigmoid(target_vector @ hidden)
    return -true_word - F.logsigmoid(-(noise_vectors @ hidden)).sum()


def hierarchical_softmax_loss(
    hidden: Float[Tensor, "D"],
    node_vectors: Float[Tensor, "R D"],
    tree: BinaryTree,
    target: NonNegativeInt,
) -> Float[Tensor, ""]:
    """``-log P(target | h)`` on a binary tree: one logistic decision per inner node."""
    return -path_log_prob(hidden[None], node_vectors, tree, torch.tensor([target]))[0]


def unigram_table(
    probabilities: Real[Tensor, "V"], size: PositiveInt = 2**20
) -> Int64[Tensor, "size"]:
    """word2vec.c's table for drawing noise words: word w fills ``size * P(w)`` slots.

    A noise word is then one random slot (:func:`draw_negatives`), a single memory
    read instead of a search. Each probability is rounded to a multiple of 1 / size.
    """
    if probabilities.numel() == 0:
        raise ValueError("probabilities must hold one probability per word; found none")
    total = probabilities.double().sum()
    if not (probabilities.isfinite().all() and probabilities.min() >= 0 and total > 0):
        raise ValueError(
            "probabilities must be finite, non-negative, with a positive sum; found "
            f"{probabilities.min().item()} to {probabilities.max().item()}, "
            f"sum {total.item()}"
        )
    cdf = probabilities.double().cumsum(0)  # (V,)
    slots = (torch.arange(size, dtype=torch.float64) + 0.5) / size * cdf[-1]  # (size,)
    words = torch.searchsorted(cdf, slots, right=True)
    return words.clamp_(max=probabilities.numel() - 1)


def draw_negatives(
    table: Int[Tensor, "S"],
    shape: each(NonNegativeInt),
    generator: Optional[torch.Generator] = None,
) -> Int[Tensor, "..."]:
    """Noise words: uniformly random slots of a :func:`unigram_table`."""
    if table.numel() == 0:
        raise ValueError("table must hold at least one slot; found an empty table")
    words = table[torch.randint(table.numel(), tuple(shape), generator=generator)]
    # The drawn words, not the whole table: one cheap min per batch.
    if words.numel() and words.min() < 0:
        raise ValueError(f"table must hold word ids >= 0; found {words.min().item()}")
    return words


def logistic_sgd_step(
    hidden: Float[Tensor, "B D"],
    output_vectors: Float[Tensor, "R D"],
    targets: Int[Tensor, "B M"],
    labels: Float[Tensor, "#B #M"],
    mask: Float[Tensor, "#B #M"],
    lr: NonNegative,
) -> tuple[Float[Tensor, ""], Float[Tensor, "B D"]]:
    """One SGD step of the logistic losses of both objectives; returns the summed loss
    before the step and its gradient with respect to ``hidden``.

    The rows ``targets`` of ``output_vectors`` have labels 1 (the word to predict, a
    left turn) or 0 (noise, a right turn); ``mask`` is 0 on slots that do not count.
    The rows are updated in place; ``hidden`` is left for the caller to update.
    """
    same_dtype(hidden=hidden, output_vectors=output_vectors, labels=labels, mask=mask)
    n_rows = len(output_vectors)  # R
    if targets.numel() and not 0 <= targets.min() <= targets.max() < n_rows:
        raise ValueError(
            f"targets must be rows of output_vectors, 0 to {n_rows - 1}; "
            f"found {targets.min().item()} to {targets.max().item()}"
        )
    batch, slots = targets.shape
    flat = targets.flatten()  # (B M,)
    # index_select on the flattened ids is about twice as fast as fancy indexing.
    rows = output_vectors.index_select(0, flat).view(batch, slots, -1)  # (B, M, D)
    logits = torch.bmm(rows, hidden.unsqueeze(2)).squeeze(2)  # (B, M)
    error = (torch.sigmoid(logits) - labels) * mask  # (B, M): dloss / dlogit
    grad_hidden = (error.unsqueeze(2) * rows).sum(dim=1)  # (B, D); faster than a bmm
    # Scale the small (B, M) error rather than pass alpha= to index_add_ (3x slower).
    steps = (-lr * error).unsqueeze(2) * hidden.unsqueeze(1)  # (B, M, D)
    output_vectors.index_add_(0, flat, steps.flatten(0, 1))  # (B M, D)
    # y log σ(x) + (1 - y) log σ(-x) = log σ(±x): one logsigmoid per slot.
    loss = -(F.logsigmoid(torch.where(labels > 0.5, logits, -logits)) * mask).sum()
    return loss, grad_hidden


# Word2Vec.sgd_step calls it once a batch, with tensors that its own signature checked:
# checking them again cost about 8% of a step (paired per-batch timing, skip-gram and
# CBOW, 8,087 words; lib.checked's import hook wraps every def of this module; unwrap
# takes the function without its check).
_logistic_sgd_step = inspect.unwrap(logistic_sgd_step)


# ---------------------------------------------------------------------------
# 4. The model and its training.
# ---------------------------------------------------------------------------


@dataclass
class Word2Vec:
    """The parameters of a word2vec model.

    ``input_vectors`` are the word vectors one keeps (gensim's ``wv.vectors``),
    uniform in ``[-1/D, 1/D)`` at the start; ``output_vectors`` are zero at the start,
    one per word for negative sampling, one per inner node of the Huffman ``tree``
    for the hierarchical softmax.
    """

    vocab: Vocabulary
    config: Word2VecConfig
    input_vectors: Float[Tensor, "V D"] = field(init=False)
    output_vectors: Float[Tensor, "R D"] = field(init=False)
    tree: Optional[BinaryTree] = field(init=False)

    def __post_init__(self):
        size, dim = len(self.vocab), self.config.vector_size
        if size < 2:
            raise ValueError(f"vocab must hold at least 2 words; found {size}")
        if size * dim > MAX_PARAMETERS:  # torch would try to allocate them
            raise ValueError(
                f"vocab size times vector_size must be at most {MAX_PARAMETERS}; "
                f"found {size} * {dim}"
            )
        generator = torch.Generator().manual_seed(self.config.seed)
        uniform = torch.rand(size, dim, generator=generator)  # (V, D)
        self.input_vectors = (uniform * 2 - 1) / dim
        hierarchical = self.config.objective == "hierarchical"
        self.tree = huffman_tree(self.vocab.counts) if hierarchical else None
        self.output_vectors = torch.zeros(size - hierarchical, dim)  # (R, D)

    def word_vectors(self) -> WordVectors:
        """The input vectors with their vocabulary, for evaluation."""
        return WordVectors(self.input_vectors, self.vocab)

    def output_side(
        self, predict: Int[Tensor, "B"], negatives: Optional[Int[Tensor, "B K"]] = None
    ) -> tuple[Int[Tensor, "B M"], Float[Tensor, "#B M"], Float[Tensor, "B M"]]:
        """Rows, labels and mask of :func:`logistic_sgd_step` for the words to predict.

        Negative sampling: the true word (label 1), then the noise words (label 0), a
        noise word equal to the true word masked out as in word2vec.c. Hierarchical
        softmax: the word's path, label 1 for a left turn, padding masked.
        """
        _check_word_ids(len(self.input_vectors), predict=predict, negatives=negatives)
        if self.tree is not None:
            nodes, codes, path_mask = self.tree.padded()  # (V, L) each
            return nodes[predict], 1.0 - codes[predict], path_mask[predict].float()
        if negatives is None or negatives.shape[1] != self.config.negative:
            found = None if negatives is None else tuple(negatives.shape)
            raise ValueError(
                f"negative sampling needs negatives of shape (B, K) = "
                f"({predict.numel()}, {self.config.negative}); found {found}"
            )
        targets = torch.cat([predict[:, None], negatives], dim=1)  # (B, 1 + K)
        labels = torch.zeros(1, targets.shape[1])
        labels[0, 0] = 1.0
        noise = (negatives != predict[:, None]).float()  # (B, K)
        mask = torch.cat([torch.ones(predict.numel(), 1), noise], dim=1)  # (B, 1 + K)
        return targets, labels.expand_as(targets), mask

    def sgd_step(
        self,
        inputs: Int[Tensor, "B C"],
        predict: Int[Tensor, "B"],
        lr: NonNegative,
        input_mask: Optional[Bool[Tensor, "B C"]] = None,
        negatives: Optional[Int[Tensor, "B K"]] = None,
    ) -> float:
        """One SGD step on a batch; returns the summed loss before the step.

        Skip-gram: ``inputs`` are the centre words (C = 1), ``predict`` a context word
        of each. CBOW: ``inputs`` are the context words (True in ``input_mask``),
        ``predict`` the centre word; like word2vec.c and gensim, CBOW adds the *whole*
        gradient of ``h`` to every context word, not ``1 / C`` of it.
        :meth:`output_side` gives the rows, labels and mask of
        :func:`logistic_sgd_step`.
        """
        if input_mask is None and inputs.shape[1] != 1:
            raise ValueError(
                "inputs must be (B, 1) centre words without an input_mask (skip-gram); "
                f"found {tuple(inputs.shape)}"
            )
        _check_word_ids(len(self.input_vectors), inputs=inputs)
        targets, labels, mask = self.output_side(predict, negatives)  # checks their ids
        vectors = self.input_vectors
        outputs = self.output_vectors
        if input_mask is None:  # skip-gram: h is the centre word's own vector
            centres = inputs[:, 0]  # (B,)
            hidden = vectors.index_select(0, centres)  # (B, D)
            # logistic_sgd_step without its per-call signature check: this method's
            # own signature checked the batch.
            loss, grad_hidden = _logistic_sgd_step(
                hidden, outputs, targets, labels, mask, lr
            )
            vectors.index_add_(0, centres, grad_hidden.mul_(-lr))
        else:  # CBOW: h is the mean of the context vectors
            batch, slots = inputs.shape
            weights = input_mask.to(vectors.dtype)  # (B, C)
            context = vectors.index_select(0, inputs.flatten())
            context = context.view(batch, slots, -1)  # (B, C, D)
            counts = weights.sum(dim=1, keepdim=True)  # (B, 1)
            if counts.numel() and counts.min() == 0:  # h would be 0 / 0
                row = int((counts[:, 0] == 0).nonzero()[0])
                raise ValueError(
                    f"input_mask must hold a True in every row; row {row} has none"
                )
            summed = torch.bmm(weights.unsqueeze(1), context).squeeze(1)  # (B, D)
            hidden = summed / counts
            loss, grad_hidden = _logistic_sgd_step(
                hidden, outputs, targets, labels, mask, lr
            )
            # Padding slots add zero rows: cheaper than selecting the real slots first.
            step = grad_hidden.mul_(-lr)  # (B, D)
            rows = weights.unsqueeze(2) * step.unsqueeze(1)  # (B, C, D)
            vectors.index_add_(0, inputs.flatten(), rows.flatten(0, 1))  # (B C, D)
        return float(loss)


@no_type_check  # once a batch, by sgd_step and output_side: they checked the tensors
def _check_word_ids(words: int, **ids: Optional[Tensor]) -> None:
    """Raise unless every tensor of ``ids`` holds word ids, ``0`` to ``words - 1``."""
    for name, given in ids.items():
        if given is None or given.numel() == 0:
            continue
        low, high = given.min().item(), given.max().item()
        if not 0 <= low <= high < words:
            raise ValueError(
                f"{name} must be word ids, 0 to {words - 1}; found {low} to {high}"
            )


def _epoch_examples(
    config: Word2VecConfig,
    corpus: EncodedCorpus,
    keep: Float[Tensor, "V"],
    generator: torch.Generator,
) -> tuple[Int[Tensor, "E C"], Optional[Bool[Tensor, "E C"]], Int[Tensor, "E"]]:
    """Subsample, cut windows, shuffle: ``(inputs, input_mask, predict)`` of an epoch.

    Skip-gram: ``inputs`` ``(E, 1)`` are the centre words and ``predict`` a context
    of each. CBOW: ``inputs`` ``(E, C)`` are the contexts and ``predict`` the centres.
    """
    kept = subsample(corpus, keep, generator)
    windows = draw_windows(len(kept), config.window, config.shrink_windows, generator)
    if config.architecture == "skip-gram":
        centres, contexts = skipgram_pairs(kept, windows)
        inputs, input_mask, predict = (
            centres[:, None],
            None,
            contexts,
        )  # (E, 1), -, (E,)
    else:
        predict, inputs, input_mask = cbow_contexts(kept, windows, config.window)
    order = torch.randperm(predict.numel(), generator=generator)
    input_mask = None if input_mask is None else input_mask[order]
    return inputs[order], input_mask, predict[order]


def train_word2vec(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    config: Word2VecConfig = Word2VecConfig(),
    progress: bool = False,
) -> tuple[Word2Vec, TrainingLog]:
    """Train word2vec by mini-batch SGD; the log holds each epoch's mean loss and time.

    Each epoch draws a fresh subsample and fresh windows, builds all its examples at
    once, shuffles them and walks through them in batches of
    :meth:`Word2Vec.sgd_step`. The learning rate falls linearly from ``alpha`` to
    ``min_alpha`` over all batches, as gensim's does over all words. A
    ``FloatingPointError`` says when the loss stops being finite: a batch sums the
    updates of every occurrence of a word, and too large a sum diverges.
    """
    model = Word2Vec(vocab, config)
    corpus = encode(sentences, vocab)
    if len(corpus) < 2:
        raise ValueError(
            f"sentences must hold at least 2 in-vocabulary words; found {len(corpus)}"
        )
    generator = torch.Generator().manual_seed(config.seed)
    keep = keep_probabilities(vocab.counts, config.sample)
    noise_table = unigram_table(noise_distribution(vocab.counts, config.ns_exponent))
    log = TrainingLog()
    bar = _progress_bar(config.epochs) if progress else None
    # Each batch is a slice of the epoch's examples, which _epoch_examples's signature
    # checked: checking sgd_step's and draw_negatives's arguments again cost about 12%
    # of a step, about 20% with logistic_sgd_step's check (paired per-batch timing).
    step, draw = inspect.unwrap(Word2Vec.sgd_step), inspect.unwrap(draw_negatives)
    for epoch in range(config.epochs):
        start = time.perf_counter()
        inputs, input_mask, predict = _epoch_examples(config, corpus, keep, generator)
        total_loss, n_examples = 0.0, predict.numel()
        for first in range(0, n_examples, config.batch_size):
            batch = slice(first, first + config.batch_size)
            done = (epoch + first / n_examples) / config.epochs  # share of training
            lr = config.alpha - (config.alpha - config.min_alpha) * done
            negatives = None
            if model.tree is None:
                shape = (predict[batch].numel(), config.negative)
                negatives = draw(noise_table, shape, generator)
            mask = None if input_mask is None else input_mask[batch]
            total_loss += step(
                model, inputs[batch], predict[batch], lr, mask, negatives
            )
        log.losses.append(total_loss / max(n_examples, 1))
        log.seconds.append(time.perf_counter() - start)
        if not math.isfinite(log.losses[-1]):
            raise FloatingPointError(
                f"training diverged in epoch {epoch + 1} (mean loss {log.losses[-1]}): "
                f"lower alpha (found {config.alpha}) or batch_size "
                f"(found {config.batch_size})"
            )
        if bar is not None:
            bar.set_postfix(loss=f"{log.losses[-1]:.3f}")
            bar.update()
    if bar is not None:
        bar.close()
    return model, log


def _progress_bar(epochs: PositiveInt):
    from tqdm.auto import tqdm

    return tqdm(total=epochs, unit="epoch", desc="word2vec")


def train_gensim(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    config: Word2VecConfig,
    min_count: PositiveInt,
) -> tuple[WordVectors, NonNegative]:
    """The same run in gensim, one worker thread: the reference for
    :func:`train_word2vec`; returns gensim's vectors, rows in ``vocab``'s order,
    and the wall time of its vocabulary scan and training.

    Every hyper-parameter of ``config`` is passed on (CBOW averages its context);
    ``batch_size`` has no counterpart, because gensim updates after every example.
    ``vocab`` must be built from ``sentences`` with ``min_count``.
    """
    from gensim.models import Word2Vec as GensimWord2Vec

    if len(vocab) < 2:
        raise ValueError(f"vocab must hold at least 2 words; found {len(vocab)}")
    if not any(len(sentence) for sentence in sentences):  # gensim: "build vocabulary"
        raise ValueError("sentences must hold at least one word; found none")
    hierarchical = config.objective == "hierarchical"
    start = time.perf_counter()
    model = GensimWord2Vec(
        sentences,
        vector_size=config.vector_size,
        window=config.window,
        min_count=min_count,
        sample=config.sample,
        sg=int(config.architecture == "skip-gram"),
        cbow_mean=1,
        hs=int(hierarchical),
        negative=0 if hierarchical else config.negative,
        ns_exponent=config.ns_exponent,
        alpha=config.alpha,
        min_alpha=config.min_alpha,
        epochs=config.epochs,
        seed=config.seed,
        shrink_windows=config.shrink_windows,
        workers=1,
    )
    seconds = time.perf_counter() - start
    theirs, ours = set(model.wv.key_to_index), set(vocab.words)
    if theirs != ours:
        raise ValueError(
            f"gensim's vocabulary differs from vocab: {len(theirs - ours)} words "
            f"only in gensim's (e.g. {sorted(theirs - ours)[:3]}), "
            f"{len(ours - theirs)} only in vocab; build vocab from the same sentences "
            f"with min_count={min_count}"
        )
    order = torch.tensor([model.wv.key_to_index[word] for word in vocab.words])
    vectors = torch.from_numpy(model.wv.vectors.copy())[order]  # (V, D), vocab's order
    return WordVectors(vectors, vocab), seconds


# ---------------------------------------------------------------------------
# 5. The cost of one step.
# ---------------------------------------------------------------------------


def dot_products_per_step(
    objective: Literal["softmax", "negative", "hierarchical"],
    counts: Counts,
    negative: PositiveInt = 5,
) -> Positive:
    """Output-side dot products for one predicted word, on average over the corpus.

    ``"softmax"``: ``V``, one per word. ``"negative"``: ``K + 1``. ``"hierarchical"``:
    the depth of the word in the Huffman tree, weighted by the words' frequencies.
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)  # (V,)
    if objective == "softmax":
        return float(counts.numel())
    if objective == "negative":
        return float(negative + 1)
    fractional = counts[counts != counts.round()]  # int() would truncate them
    if len(fractional):
        raise ValueError(
            "counts must be whole numbers for the Huffman tree; "
            f"found {fractional[0].item()}"
        )
    tree = huffman_tree([int(c) for c in counts])
    depths = torch.tensor(tree.depths, dtype=torch.float64)  # (V,)
    return float((depths * counts).sum() / counts.sum())
