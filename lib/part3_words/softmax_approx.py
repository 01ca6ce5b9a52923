"""The cost of the softmax over a large vocabulary, and four ways around it.

A language model's output layer scores every word, :math:`s(v, h) = \\mathbf{h}
\\cdot \\mathbf{u}_v + b_v`, and normalises with
:math:`Z(h) = \\sum_{v \\in V} \\exp s(v, h)`: ``|V|`` dot products per
prediction, in training and in use. The module implements, as chapter 6
teaches them (syllabus LM8):

1. the *two-level class softmax* (Goodman, 2001; Mikolov et al., 2011):
   :math:`p(w \\mid h) = p(c(w) \\mid h)\\, p(w \\mid c(w), h)` with ``k``
   classes of about ``|V| / k`` words (:func:`equal_classes`,
   :func:`frequency_classes`, :class:`ClassSoftmax`), ``k + |V| / k`` dot
   products, fewest at ``k = sqrt(|V|)``. The binary tree that pushes the idea
   to ``log2 |V|`` levels lives in :mod:`lib.part3_words.tree_softmax`;
2. *importance sampling* of the gradient (Bengio & Senécal, 2003, 2008): the
   expensive expectation :math:`\\mathbb{E}_{p}[\\nabla s(v, h)]` in the gradient
   of the log-likelihood is estimated from ``K`` words drawn from a cheap
   proposal ``q`` (:func:`importance_weights`, :func:`importance_sampled_loss`);
3. *noise-contrastive estimation* (Gutmann & Hyvärinen, 2010; Mnih & Teh,
   2012): tell data words from ``K`` noise words per example with the logistic
   classifier :math:`\\sigma(s(w, h) - \\log(K q(w)))` (:func:`nce_loss`);
4. :func:`dot_products` counts what each costs (chapter 6's experiments time them).

Conventions: ``B`` examples with context vectors ``hidden (B, D)``; the output
layer is ``weight (V, D)`` and ``bias (V,)`` as in ``torch.nn.Linear(D, V)``;
``K`` sampled words per example. Log-probabilities are natural logarithms.

References
----------
.. [1] J. Goodman. "Classes for Fast Maximum Entropy Training". ICASSP 2001.
   arXiv:cs/0108006.
.. [2] T. Mikolov, S. Kombrink, L. Burget, J. Černocký, S. Khudanpur.
   "Extensions of Recurrent Neural Network Language Model". ICASSP 2011.
.. [3] F. Morin, Y. Bengio. "Hierarchical Probabilistic Neural Network
   Language Model". AISTATS 2005.
.. [4] Y. Bengio, J.-S. Senécal. "Adaptive Importance Sampling to Accelerate
   Training of a Neural Probabilistic Language Model". IEEE Transactions on
   Neural Networks 19(4), 2008.
.. [5] M. Gutmann, A. Hyvärinen. "Noise-Contrastive Estimation: A New
   Estimation Principle for Unnormalized Statistical Models". AISTATS 2010.
.. [6] A. Mnih, Y. W. Teh. "A Fast and Simple Algorithm for Training Neural
   Probabilistic Language Models". ICML 2012. arXiv:1206.6426.
"""

from __future__ import annotations

import math
from typing import Literal, Optional, Union

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int, Int64
from torch import Tensor, nn

from lib.checked import (
    Positive,
    PositiveInt,
    each,
    same_dtype,
)
from lib.part3_words.tree_softmax import BinaryTree, balanced_tree

__all__ = [
    "equal_classes",
    "frequency_classes",
    "ClassSoftmax",
    "rows",
    "output_scores",
    "importance_weights",
    "importance_sampled_loss",
    "nce_logits",
    "nce_loss",
    "dot_products",
]

Method = Literal["full", "classes", "tree"]


# ---------------------------------------------------------------------------
# Two-level (class-based) softmax.
# ---------------------------------------------------------------------------


def equal_classes(
    vocab_size: PositiveInt, num_classes: PositiveInt
) -> Int64[Tensor, "V"]:
    """The class of every word ``0 .. V - 1``: ``k`` consecutive classes whose sizes
    differ by at most one (the first ``|V| mod k`` get one word more)."""
    if vocab_size < num_classes:
        raise ValueError(
            f"vocab_size must be at least num_classes = {num_classes}; "
            f"found {vocab_size}"
        )
    base, extra = divmod(vocab_size, num_classes)
    sizes = torch.tensor([base + (c < extra) for c in range(num_classes)])  # (k,)
    return torch.repeat_interleave(torch.arange(num_classes), sizes)  # (V,)


def frequency_classes(
    counts: Union[each(Positive), Float[Tensor, "V"], Int[Tensor, "V"]],
    num_classes: PositiveInt,
) -> Int64[Tensor, "V"]:
    """Frequency binning (Mikolov et al., 2011): the class of every word (in the order
    of ``counts``), each class holding about ``1/k`` of the tokens.

    From the most frequent word down, a word goes to class ``floor(k * mass before
    it)``; so frequent words sit in small classes, rare ones in large. None is empty.
    """
    counts = torch.as_tensor(counts, dtype=torch.float64)  # (V,)
    if len(counts) < num_classes:
        raise ValueError(
            f"counts must hold V >= num_classes = {num_classes} numbers; "
            f"found {len(counts)}"
        )
    if not bool(((counts > 0) & counts.isfinite()).all()):
        found = f"values from {float(counts.min()):g} to {float(counts.max()):g}"
        raise ValueError(
            "counts must be positive finite numbers; "
            f"found {'NaN' if bool(counts.isnan().any()) else found}"
        )
    order = torch.sort(counts, descending=True, stable=True).indices  # (V,)
    sorted_counts = counts[order]  # (V,)
    # The share of all tokens taken by the more frequent words.
    before = ((torch.cumsum(sorted_counts, 0) - sorted_counts) / counts.sum()).tolist()
    word_class = torch.empty(len(counts), dtype=torch.long)
    current, remaining = 0, len(counts)
    for position, word in enumerate(order.tolist()):
        # Move on (one class at a time, so none is skipped) once this class has its
        # share of the mass...
        if position > 0 and before[position] * num_classes >= current + 1:
            current += 1
        # ...and early enough that the rarest words still fill the last classes.
        last_start = num_classes - (remaining - position)
        current = min(num_classes - 1, max(current, last_start))
        word_class[word] = current
    return word_class


class _RowsWithSparseGradient(torch.autograd.Function):
    """``table[index]``, whose gradient for ``table`` is a sparse tensor of the rows
    used."""

    @staticmethod
    def forward(ctx, table: Tensor, index: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.table_shape = table.shape
        return table[index]

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (index,) = ctx.saved_tensors
        # One gradient row per look-up; torch adds up the rows looked up twice.
        values = grad.reshape(-1, *ctx.table_shape[1:])  # (N, *D)
        indices = index.reshape(1, -1)  # (1, N)
        sparse = torch.sparse_coo_tensor(
            indices, values, ctx.table_shape, check_invariants=False
        )
        return sparse, None


def rows(
    table: Union[Float[Tensor, "V"], Float[Tensor, "V D"]],
    index: Int64[Tensor, "*S"],
    sparse: bool = False,
) -> Float[Tensor, "..."]:
    """``table[index]``; if ``sparse``, with a sparse gradient for ``table`` holding
    only the rows looked up (a dense one costs as much as ``table``, ``|V|`` rows).
    Unlike ``F.embedding``, it also serves 1-D tables such as a bias."""
    if index.numel() and (index.min() < 0 or index.max() >= len(table)):
        raise ValueError(
            f"index must hold row ids in [0, {len(table)}) of table; "
            f"found {int(index.min())}..{int(index.max())}"
        )
    return _RowsWithSparseGradient.apply(table, index) if sparse else table[index]


class ClassSoftmax(nn.Module):
    r"""A two-level softmax: first the class, then the word within its class,

    .. math:: \log p(w \mid \mathbf{h}) = \log \operatorname{softmax}_c(\mathbf{A}
              \mathbf{h} + \mathbf{a})_{c(w)} + \log \operatorname{softmax}_{v \in c(w)}
              (\mathbf{u}_v \cdot \mathbf{h} + b_v)_{w}

    ``k`` class scores and the ``|c(w)|`` of one class instead of ``|V|`` scores.
    ``word_class`` gives the class of every word (every class of ``0 .. k - 1`` used);
    ``sparse`` gives the word layer a sparse gradient in :meth:`log_prob`.
    """

    def __init__(
        self,
        hidden_size: PositiveInt,
        word_class: Int64[Tensor, "V"],
        sparse: bool = False,
    ):
        super().__init__()
        classes = torch.unique(word_class)  # sorted
        if len(classes) == 0 or not torch.equal(classes, torch.arange(len(classes))):
            raise ValueError(
                "word_class must use every class 0 .. k - 1 at least once; "
                f"found the classes {classes.tolist()}"
            )
        self.sparse = sparse
        self.register_buffer("word_class", word_class.clone())
        self.class_layer = nn.Linear(hidden_size, len(classes))
        self.word_layer = nn.Linear(hidden_size, len(word_class))
        # members[c]: the words of class c, padded to the largest class;
        # slot[w]: w's place in its class.
        sizes = torch.bincount(word_class)  # (k,)
        order = torch.sort(word_class, stable=True).indices  # (V,) words by class
        starts = torch.cumsum(sizes, 0) - sizes  # (k,)
        slot = torch.empty_like(word_class)  # (V,)
        slot[order] = torch.arange(len(word_class)) - starts[word_class[order]]
        largest = int(sizes.max())
        members = torch.zeros(len(classes), largest, dtype=torch.long)  # (k, M)
        members[word_class, slot] = torch.arange(len(word_class))
        mask = torch.arange(members.shape[1])[None, :] < sizes[:, None]  # (k, M)
        self.register_buffer("members", members)
        self.register_buffer("member_mask", mask)
        self.register_buffer("slot", slot)

    @property
    def num_classes(self) -> int:
        return self.class_layer.out_features

    def class_sizes(self) -> list[int]:
        """``|c|`` for every class."""
        return self.member_mask.sum(1).tolist()

    def log_prob(
        self, hidden: Float[Tensor, "B D"], words: Int64[Tensor, "B"]
    ) -> Float[Tensor, "B"]:
        """``log p(w | h)`` of one word per row, touching one class per row (fast)."""
        if hidden.shape[1] != self.class_layer.in_features:
            raise ValueError(
                f"hidden must have D = {self.class_layer.in_features} features; "
                f"found {hidden.shape[1]}"
            )
        same_dtype(layer=self.class_layer.weight, hidden=hidden)
        if len(words) and (words.min() < 0 or words.max() >= len(self.word_class)):
            raise ValueError(
                f"words must be word ids in [0, {len(self.word_class)}); "
                f"found {int(words.min())}..{int(words.max())}"
            )
        classes = self.word_class[words]  # (B,)
        class_log_probs = F.log_softmax(self.class_layer(hidden), dim=-1)  # (B, k)
        members = self.members[classes]  # (B, M)
        weight = rows(self.word_layer.weight, members, self.sparse)  # (B, M, D)
        bias = rows(self.word_layer.bias, members, self.sparse)  # (B, M)
        scores = torch.einsum("bd,bmd->bm", hidden, weight) + bias  # (B, M)
        scores = scores.masked_fill(~self.member_mask[classes], -math.inf)  # padding
        within = F.log_softmax(scores, dim=-1)  # (B, M)
        class_part = class_log_probs.gather(1, classes[:, None])[:, 0]  # (B,)
        return class_part + within.gather(1, self.slot[words][:, None])[:, 0]

    def all_log_probs(self, hidden: Float[Tensor, "B D"]) -> Float[Tensor, "B V"]:
        """``log p(w | h)`` for every word, class by class from the formula (the
        reference); every row logsumexps to 0."""
        if hidden.shape[1] != self.class_layer.in_features:
            raise ValueError(
                f"hidden must have D = {self.class_layer.in_features} features; "
                f"found {hidden.shape[1]}"
            )
        same_dtype(layer=self.class_layer.weight, hidden=hidden)
        class_log_probs = F.log_softmax(self.class_layer(hidden), dim=-1)  # (B, k)
        word_scores = self.word_layer(hidden)  # (B, V)
        out = torch.empty_like(word_scores)
        for c in range(self.num_classes):
            words = (self.word_class == c).nonzero()[:, 0]
            within = F.log_softmax(word_scores[:, words], dim=-1)
            out[:, words] = class_log_probs[:, c : c + 1] + within
        return out


# ---------------------------------------------------------------------------
# Sampling-based estimates: importance sampling and NCE.
# ---------------------------------------------------------------------------


def output_scores(
    hidden: Float[Tensor, "B D"],
    weight: Float[Tensor, "V D"],
    bias: Float[Tensor, "V"],
    words: Union[Int64[Tensor, "B"], Int64[Tensor, "B K"]],
) -> Float[Tensor, "B *K"]:
    """Scores s(v, h) = h · u_v + b_v of the chosen ``words`` only."""
    same_dtype(hidden=hidden, weight=weight, bias=bias)
    if words.numel() and (words.min() < 0 or words.max() >= len(weight)):
        raise ValueError(
            f"words must be word ids in [0, {len(weight)}); "
            f"found {int(words.min())}..{int(words.max())}"
        )
    if words.dim() == 1:
        return (hidden * weight[words]).sum(-1) + bias[words]  # (B,)
    return torch.einsum("bd,bkd->bk", hidden, weight[words]) + bias[words]  # (B, K)


def importance_weights(
    sample_scores: Float[Tensor, "B K"],
    sample_log_q: Float[Tensor, "B K"],
    log_partition: Optional[Float[Tensor, "B"]] = None,
) -> Float[Tensor, "B K"]:
    r"""The weights :math:`\omega_k` (no gradient) that turn ``K`` proposal samples
    into an estimate :math:`\sum_k \omega_k f(v_k)` of :math:`\mathbb{E}_p[f]`.

    With the exact :math:`\log Z(h)`, ``log_partition``, they are
    :math:`p(v_k \mid h) / (K q(v_k))`: unbiased, at the cost of all ``|V|`` scores.
    Without, :math:`Z` is estimated from the same samples, and
    :math:`\omega_k = r_k / \sum_j r_j` with :math:`r_k = \exp s(v_k, h) / q(v_k)`:
    cheap, biased for small ``K``, consistent as ``K`` grows.
    """
    same_dtype(sample_scores=sample_scores, sample_log_q=sample_log_q)
    if log_partition is not None:
        same_dtype(sample_scores=sample_scores, log_partition=log_partition)
    if sample_scores.shape[1] == 0:
        raise ValueError(
            "sample_scores must hold K >= 1 samples per row; "
            f"found shape {tuple(sample_scores.shape)}"
        )
    # No gradient flows through the weights: they are held fixed.
    log_ratio = (sample_scores - sample_log_q).detach()  # (B, K): log r_k = s - log q
    if log_partition is None:
        return torch.softmax(log_ratio, dim=1)  # r_k / sum_j r_j
    log_p = log_ratio - log_partition.detach()[:, None]  # (B, K): log p - log q
    return torch.exp(log_p) / sample_scores.shape[1]  # p / (K q)


def importance_sampled_loss(
    hidden: Float[Tensor, "B D"],
    weight: Float[Tensor, "V D"],
    bias: Float[Tensor, "V"],
    targets: Int64[Tensor, "B"],
    proposal: Float[Tensor, "V"],
    num_samples: PositiveInt,
    generator: Optional[torch.Generator] = None,
    self_normalised: bool = True,
) -> Float[Tensor, ""]:
    r"""A surrogate loss whose gradient is the importance-sampling estimate of the
    cross-entropy's, :math:`-\nabla s(x, h) + \sum_k \omega_k \nabla s(v_k, h)`.

    ``num_samples`` words :math:`v_k \sim q` (``proposal``) are drawn with replacement
    for every row, and :math:`\omega` (:func:`importance_weights`) is held fixed. Only
    the gradient matters: the value is not the cross-entropy. ``self_normalised=False``
    computes the exact :math:`Z` (unbiased, full cost; for checking).
    """
    vocab_size = len(weight)
    if len(targets) == 0:
        raise ValueError("targets must hold B >= 1 words; found none")
    if targets.min() < 0 or targets.max() >= vocab_size:
        raise ValueError(
            f"targets must be word ids in [0, {vocab_size}); "
            f"found {int(targets.min())}..{int(targets.max())}"
        )
    # Asked as ">= 0 and finite", which NaN (false in every comparison) fails.
    valid = bool(((proposal >= 0) & proposal.isfinite()).all())
    total = float(proposal.sum())
    if not valid or abs(total - 1) > 1e-6:
        low, high = float(proposal.min()), float(proposal.max())
        found = f"values from {low:.6g} to {high:.6g} summing to {total:.6g}"
        raise ValueError(
            f"proposal must be a probability distribution over the {vocab_size} words; "
            f"found {'NaN' if bool(proposal.isnan().any()) else found}"
        )
    # (B * K,): every row's K words, drawn at once
    draws = torch.multinomial(
        proposal, len(targets) * num_samples, replacement=True, generator=generator
    )
    samples = draws.view(len(targets), num_samples)  # (B, K)
    target_scores = output_scores(hidden, weight, bias, targets)  # (B,)
    sample_scores = output_scores(hidden, weight, bias, samples)  # (B, K)
    log_partition = None
    if not self_normalised:
        all_scores = hidden @ weight.T + bias  # (B, V): the full cost
        log_partition = torch.logsumexp(all_scores, dim=1)  # (B,)
    sample_log_q = proposal.log()[samples].to(hidden.dtype)  # (B, K)
    omega = importance_weights(sample_scores, sample_log_q, log_partition)  # (B, K)
    return (-target_scores + (omega * sample_scores).sum(1)).mean()


def nce_logits(
    scores: Float[Tensor, "*#shape"],
    log_noise: Float[Tensor, "*#shape"],
    num_noise: PositiveInt,
) -> Float[Tensor, "..."]:
    r"""The logit of "this word came from the data", :math:`s(w, h) - \log(K q(w))`:
    with ``K`` noise words per data word and the unnormalised probability
    :math:`\exp s`, :math:`p(y = 1 \mid w, h) = \exp s / (\exp s + K q(w))`."""
    return scores - math.log(num_noise) - log_noise


def nce_loss(
    data_scores: Float[Tensor, "B"],
    noise_scores: Float[Tensor, "B K"],
    data_log_noise: Float[Tensor, "B"],
    noise_log_noise: Float[Tensor, "B K"],
) -> Float[Tensor, ""]:
    r"""Noise-contrastive estimation: the loss of the data-vs-noise classifier,

    .. math:: L = -\frac{1}{B(K+1)} \Big( \sum_{b} \log \sigma(\Delta s(x_b))
              + \sum_{b} \sum_{k=1}^{K} \log \big(1 - \sigma(\Delta s(x'_{bk}))\big)
              \Big)

    for data words :math:`x_b` and noise words :math:`x'_{bk} \sim q` (the
    ``log_noise`` arguments are :math:`\log q` of the same words). The model's
    probability is :math:`\exp s(w, h)` itself: at the optimum it is normalised and
    equals the data distribution, though no sum over the vocabulary is computed.
    """
    same_dtype(
        data_scores=data_scores,
        noise_scores=noise_scores,
        data_log_noise=data_log_noise,
        noise_log_noise=noise_log_noise,
    )
    if noise_scores.numel() == 0:
        raise ValueError(
            "noise_scores must hold B >= 1 rows of K >= 1 noise words; "
            f"found shape {tuple(noise_scores.shape)}"
        )
    num_noise = noise_scores.shape[1]
    data_logits = nce_logits(data_scores, data_log_noise, num_noise)  # (B,)
    noise_logits = nce_logits(noise_scores, noise_log_noise, num_noise)  # (B, K)
    data_term = F.logsigmoid(data_logits)  # (B,): log p(y=1 | x)
    noise_term = F.logsigmoid(-noise_logits)  # (B, K): log p(y=0 | x')
    return -(data_term.sum() + noise_term.sum()) / (len(data_scores) * (num_noise + 1))


# ---------------------------------------------------------------------------
# What each costs.
# ---------------------------------------------------------------------------


def dot_products(
    method: Method,
    vocab_size: PositiveInt,
    num_classes: Optional[PositiveInt] = None,
    tree: Optional[BinaryTree] = None,
) -> Positive:
    """Dot products with the context vector per prediction, on average over the words.

    ``"full"``: ``|V|``. ``"classes"``: ``k`` class scores plus the words of the
    target's class, ``k + |V| / k`` for equal classes (by default
    ``k = round(sqrt(|V|))``).
    ``"tree"``: the path length, ``log2 |V|`` for a balanced tree (default) or the
    given tree's mean depth.
    """
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be at least 2; found {vocab_size}")
    if method == "full":
        return float(vocab_size)
    if method == "classes":
        k = num_classes if num_classes is not None else round(math.sqrt(vocab_size))
        sizes = torch.bincount(equal_classes(vocab_size, k)).double()  # (k,)
        # A word's class has |c| words, and weight |c| / |V|.
        return k + float((sizes * sizes).sum() / vocab_size)
    tree = tree if tree is not None else balanced_tree(vocab_size)
    if tree.vocab_size != vocab_size:
        raise ValueError(
            f"tree must cover the {vocab_size} words; "
            f"found a tree over {tree.vocab_size}"
        )
    return sum(tree.depths) / vocab_size
