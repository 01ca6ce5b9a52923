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
   to ``log2 |V|`` levels lives in :mod:`lib.tree_softmax`;
2. *importance sampling* of the gradient (Bengio & Senécal, 2003, 2008): the
   expensive expectation :math:`\\mathbb{E}_{p}[\\nabla s(v, h)]` in the gradient
   of the log-likelihood is estimated from ``K`` words drawn from a cheap
   proposal ``q`` (:func:`importance_weights`, :func:`importance_sampled_loss`);
3. *noise-contrastive estimation* (Gutmann & Hyvärinen, 2010; Mnih & Teh,
   2012): tell data words from ``K`` noise words per example with the logistic
   classifier :math:`\\sigma(s(w, h) - \\log(K q(w)))` (:func:`nce_loss`);
4. :func:`dot_products` and :func:`time_per_step` measure what each costs.

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
import time
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lib.tree_softmax import BinaryTree, balanced_tree, path_log_prob
from lib.validation import require_broadcastable, require_float_tensors, require_int

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
    "time_per_step",
]


# ---------------------------------------------------------------------------
# Input checks. Each error message names what was expected and what was found.
# ---------------------------------------------------------------------------


def _require_float(name: str, value: object, dims: int, layout: str) -> None:
    if not isinstance(value, Tensor) or not value.is_floating_point():
        found = value.dtype if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be a floating-point torch.Tensor of shape {layout}; found {found}")
    if value.dim() != dims:
        raise ValueError(f"{name} must have shape {layout}; found {tuple(value.shape)}")


def _require_ids(name: str, value: object, vocab_size: int, shape: tuple, layout: str) -> None:
    if not isinstance(value, Tensor) or value.dtype != torch.long or tuple(value.shape) != tuple(shape):
        found = f"{value.dtype} of shape {tuple(value.shape)}" if isinstance(value, Tensor) else type(value).__name__
        raise TypeError(f"{name} must be a LongTensor of shape {layout} = {tuple(shape)}; found {found}")
    if value.numel() and (value.min() < 0 or value.max() >= vocab_size):
        raise ValueError(f"{name} must be word ids in [0, {vocab_size}); found {value.min()}..{value.max()}")


def _check_output_layer(hidden: object, weight: object, bias: object) -> None:
    _require_float("hidden", hidden, 2, "(B, D)")
    _require_float("weight", weight, 2, "(V, D)")
    _require_float("bias", bias, 1, "(V,)")
    if weight.shape[1] != hidden.shape[1] or bias.shape[0] != weight.shape[0]:
        raise ValueError(f"weight must be (V, D) and bias (V,) with D = {hidden.shape[1]}; found "
                         f"{tuple(weight.shape)} and {tuple(bias.shape)}")


# ---------------------------------------------------------------------------
# Two-level (class-based) softmax.
# ---------------------------------------------------------------------------


def equal_classes(vocab_size: int, num_classes: int) -> Tensor:
    """Cut words ``0 .. V - 1`` into ``k`` consecutive classes of ``|V| / k`` words each.

    When ``k`` does not divide ``|V|`` the first ``|V| mod k`` classes get one
    word more, so sizes differ by at most one.

    Returns
    -------
    LongTensor
        The class of every word.

    Shapes
    ------
    output : (V,)
    """
    require_int("num_classes", num_classes, 1)
    require_int("vocab_size", vocab_size, num_classes)
    base, extra = divmod(vocab_size, num_classes)
    sizes = torch.tensor([base + (c < extra) for c in range(num_classes)])  # (k,)
    return torch.repeat_interleave(torch.arange(num_classes), sizes)  # (V,)


def frequency_classes(counts: Sequence[int], num_classes: int) -> Tensor:
    """Frequency binning (Mikolov et al., 2011): each class holds about ``1/k`` of the tokens.

    Words are taken from most to least frequent; a word goes to class
    ``floor(k * mass before it)``, where the mass is the share of all tokens
    taken by the more frequent words. Frequent words thus sit in small classes
    and rare words in large ones. Every class is kept non-empty.

    Returns
    -------
    LongTensor
        The class of every word (in the order of ``counts``).

    Shapes
    ------
    counts : (V,)
    output : (V,)
    """
    require_int("num_classes", num_classes, 1)
    if isinstance(counts, (str, bytes)) or not isinstance(counts, (Sequence, Tensor)):
        raise TypeError(f"counts must be a sequence of word counts; found {type(counts).__name__}")
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if counts.dim() != 1 or len(counts) < num_classes or bool((counts <= 0).any()):
        raise ValueError(f"counts must be V >= num_classes = {num_classes} positive numbers; found "
                         f"shape {tuple(counts.shape)}")
    order = torch.sort(counts, descending=True, stable=True).indices  # (V,)
    before = ((torch.cumsum(counts[order], 0) - counts[order]) / counts.sum()).tolist()  # mass of the more frequent
    word_class = torch.empty(len(counts), dtype=torch.long)
    current, remaining = 0, len(counts)
    for position, word in enumerate(order.tolist()):
        # Move on (one class at a time, so none is skipped) once this class has its share of the mass...
        if position > 0 and before[position] * num_classes >= current + 1:
            current += 1
        # ...and early enough that the rarest words still fill the last classes.
        current = min(num_classes - 1, max(current, num_classes - (remaining - position)))
        word_class[word] = current
    return word_class


class _RowsWithSparseGradient(torch.autograd.Function):
    """``table[index]``, whose gradient with respect to ``table`` is a sparse tensor of the used rows."""

    @staticmethod
    def forward(ctx, table: Tensor, index: Tensor) -> Tensor:
        ctx.save_for_backward(index)
        ctx.table_shape = table.shape
        return table[index]

    @staticmethod
    def backward(ctx, grad: Tensor):
        (index,) = ctx.saved_tensors
        values = grad.reshape(-1, *ctx.table_shape[1:])  # one gradient row per look-up; repeats add up
        return torch.sparse_coo_tensor(index.reshape(1, -1), values, ctx.table_shape, check_invariants=False), None


def rows(table: Tensor, index: Tensor, sparse: bool = False) -> Tensor:
    """``table[index]``, with a sparse gradient for ``table`` if ``sparse`` (like ``nn.Embedding(sparse=True)``).

    A dense gradient of a look-up is a tensor as large as ``table``, mostly zeros,
    so its cost grows with ``|V|``; the sparse one holds only the rows looked up.
    Unlike ``F.embedding``, it also serves 1-D tables such as a bias.

    Shapes
    ------
    table : (V,) or (V, D)
    index : any shape S, ids in [0, V)
    output : S or (*S, D)
    """
    if not isinstance(table, Tensor) or not table.is_floating_point() or table.dim() not in (1, 2):
        raise TypeError("table must be a float tensor of shape (V,) or (V, D)")
    if not isinstance(index, Tensor) or index.dtype != torch.long:
        raise TypeError("index must be a LongTensor")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= table.shape[0]):
        raise ValueError(f"index must hold row ids in [0, {table.shape[0]}) of table; "
                         f"found {int(index.min())}..{int(index.max())}")
    if not isinstance(sparse, bool):
        raise TypeError(f"sparse must be True or False; found {sparse!r}")
    return _RowsWithSparseGradient.apply(table, index) if sparse else table[index]


class ClassSoftmax(nn.Module):
    r"""A two-level softmax: first the class, then the word within its class.

    .. math:: \log p(w \mid \mathbf{h}) = \log \operatorname{softmax}_c(\mathbf{A}\mathbf{h} + \mathbf{a})_{c(w)}
              + \log \operatorname{softmax}_{v \in c(w)}(\mathbf{u}_v \cdot \mathbf{h} + b_v)_{w}

    A prediction needs ``k`` class scores and the scores of the ``|c(w)|`` words
    of one class, instead of ``|V|`` scores.

    Parameters
    ----------
    hidden_size : int
        ``D``.
    word_class : LongTensor
        The class of every word, ``0 .. k - 1``, every class non-empty.
    sparse : bool
        In :meth:`log_prob`, give the word layer a sparse gradient: only the rows
        (and biases) of the classes a batch touches.

    Shapes
    ------
    word_class : (V,)
    hidden : (B, D)
    words : (B,)
    log_prob output : (B,); all_log_probs output : (B, V)
    """

    def __init__(self, hidden_size: int, word_class: Tensor, sparse: bool = False):
        super().__init__()
        require_int("hidden_size", hidden_size, 1)
        if not isinstance(sparse, bool):
            raise TypeError(f"sparse must be True or False; found {sparse!r}")
        self.sparse = sparse
        if not isinstance(word_class, Tensor) or word_class.dtype != torch.long or word_class.dim() != 1:
            raise TypeError("word_class must be a LongTensor of shape (V,) (see equal_classes)")
        num_classes = int(word_class.max()) + 1
        sizes = torch.bincount(word_class, minlength=num_classes)  # (k,)
        if bool((word_class < 0).any()) or bool((sizes == 0).any()):
            raise ValueError(f"word_class must use every class 0 .. k - 1 at least once; class sizes {sizes.tolist()}")
        self.register_buffer("word_class", word_class.clone())
        self.class_layer = nn.Linear(hidden_size, num_classes)
        self.word_layer = nn.Linear(hidden_size, len(word_class))
        # members[c]: the words of class c, padded to the largest class; slot[w]: w's place in its class.
        order = torch.sort(word_class, stable=True).indices  # (V,) words grouped by class
        starts = torch.cumsum(sizes, 0) - sizes  # (k,)
        slot = torch.empty_like(word_class)
        slot[order] = torch.arange(len(word_class)) - starts[word_class[order]]
        members = torch.zeros(num_classes, int(sizes.max()), dtype=torch.long)  # (k, M)
        members[word_class, slot] = torch.arange(len(word_class))
        self.register_buffer("members", members)
        self.register_buffer("member_mask", torch.arange(members.shape[1])[None, :] < sizes[:, None])  # (k, M)
        self.register_buffer("slot", slot)

    @property
    def num_classes(self) -> int:
        return self.class_layer.out_features

    def class_sizes(self) -> list[int]:
        """``|c|`` for every class."""
        return self.member_mask.sum(1).tolist()

    def log_prob(self, hidden: Tensor, words: Tensor) -> Tensor:
        """``log p(w | h)`` of one word per row, touching one class per row (the fast path).

        Shapes
        ------
        hidden : (B, D)
        words : (B,)
        output : (B,)
        """
        _require_float("hidden", hidden, 2, "(B, D)")
        _require_ids("words", words, len(self.word_class), hidden.shape[:1], "(B,)")
        classes = self.word_class[words]  # (B,)
        class_log_probs = F.log_softmax(self.class_layer(hidden), dim=-1)  # (B, k)
        members = self.members[classes]  # (B, M)
        scores = torch.einsum("bd,bmd->bm", hidden, rows(self.word_layer.weight, members, self.sparse)) \
            + rows(self.word_layer.bias, members, self.sparse)  # (B, M)
        scores = scores.masked_fill(~self.member_mask[classes], -math.inf)  # padding slots score -inf
        within = F.log_softmax(scores, dim=-1)  # (B, M)
        return class_log_probs.gather(1, classes[:, None])[:, 0] + within.gather(1, self.slot[words][:, None])[:, 0]

    def all_log_probs(self, hidden: Tensor) -> Tensor:
        """``log p(w | h)`` for every word, class by class from the formula (the reference).

        Shapes
        ------
        hidden : (B, D)
        output : (B, V); every row logsumexps to 0
        """
        _require_float("hidden", hidden, 2, "(B, D)")
        class_log_probs = F.log_softmax(self.class_layer(hidden), dim=-1)  # (B, k)
        word_scores = self.word_layer(hidden)  # (B, V)
        out = torch.empty_like(word_scores)
        for c in range(self.num_classes):
            words = (self.word_class == c).nonzero()[:, 0]
            out[:, words] = class_log_probs[:, c:c + 1] + F.log_softmax(word_scores[:, words], dim=-1)
        return out


# ---------------------------------------------------------------------------
# Sampling-based estimates: importance sampling and NCE.
# ---------------------------------------------------------------------------


def output_scores(hidden: Tensor, weight: Tensor, bias: Tensor, words: Tensor) -> Tensor:
    """Scores :math:`s(v, h) = \\mathbf{h} \\cdot \\mathbf{u}_v + b_v` of chosen words only.

    Shapes
    ------
    hidden : (B, D)
    weight : (V, D); bias : (V,)
    words : (B,) or (B, K)
    output : the shape of ``words``
    """
    _check_output_layer(hidden, weight, bias)
    if not isinstance(words, Tensor) or words.dtype != torch.long or words.shape[:1] != hidden.shape[:1] \
            or words.dim() not in (1, 2):
        raise TypeError(f"words must be a LongTensor of shape (B,) or (B, K) with B = {hidden.shape[0]}")
    if words.dim() == 1:
        return (hidden * weight[words]).sum(-1) + bias[words]  # (B,)
    return torch.einsum("bd,bkd->bk", hidden, weight[words]) + bias[words]  # (B, K)


def _check_importance(sample_scores: object, sample_log_q: object, log_partition: object) -> None:
    _require_float("sample_scores", sample_scores, 2, "(B, K)")
    _require_float("sample_log_q", sample_log_q, 2, "(B, K)")
    if sample_log_q.shape != sample_scores.shape:
        raise ValueError(f"sample_log_q must have the shape of sample_scores {tuple(sample_scores.shape)}; "
                         f"found {tuple(sample_log_q.shape)}")
    if log_partition is None:
        return
    _require_float("log_partition", log_partition, 1, "(B,)")
    if log_partition.shape[0] != sample_scores.shape[0]:
        raise ValueError(f"log_partition must have shape (B,) = ({sample_scores.shape[0]},); "
                         f"found {tuple(log_partition.shape)}")


def importance_weights(sample_scores: Tensor, sample_log_q: Tensor, log_partition: Optional[Tensor] = None) -> Tensor:
    r"""The weights :math:`\omega_k` that turn ``K`` proposal samples into an estimate of :math:`\mathbb{E}_p`.

    With the exact partition function :math:`Z(h)`,
    :math:`\omega_k = \frac{1}{K}\frac{p(v_k \mid h)}{q(v_k)}` and
    :math:`p(v_k \mid h) = \exp(s(v_k, h)) / Z(h)`: the estimate
    :math:`\sum_k \omega_k f(v_k)` of :math:`\mathbb{E}_p[f]` is unbiased, but
    :math:`Z` costs the full ``|V|`` scores. Without it
    (``log_partition=None``), :math:`Z` is estimated from the same samples,
    :math:`\hat Z = \frac{1}{K}\sum_k \exp(s(v_k, h)) / q(v_k)`, which gives
    the self-normalised weights :math:`\omega_k = r_k / \sum_j r_j` with
    :math:`r_k = \exp(s(v_k, h)) / q(v_k)`: cheap, biased for small ``K``,
    consistent as ``K`` grows.

    Parameters
    ----------
    sample_scores : Tensor
        :math:`s(v_k, h)` of the sampled words.
    sample_log_q : Tensor
        :math:`\log q(v_k)`.
    log_partition : Tensor, optional
        :math:`\log Z(h)` per row.

    Returns
    -------
    Tensor
        :math:`\omega`, no gradient.

    Shapes
    ------
    sample_scores, sample_log_q : (B, K)
    log_partition : (B,)
    output : (B, K)
    """
    _check_importance(sample_scores, sample_log_q, log_partition)
    log_ratio = sample_scores.detach() - sample_log_q  # (B, K): log r_k = s - log q
    if log_partition is None:
        return torch.softmax(log_ratio, dim=1)  # r_k / sum_j r_j
    return torch.exp(log_ratio - log_partition.detach()[:, None]) / sample_scores.shape[1]  # p / (K q)


def importance_sampled_loss(hidden: Tensor, weight: Tensor, bias: Tensor, targets: Tensor, proposal: Tensor,
                            num_samples: int, generator: Optional[torch.Generator] = None,
                            self_normalised: bool = True) -> Tensor:
    r"""A surrogate loss whose gradient is the importance-sampling estimate of the cross-entropy's.

    The gradient of :math:`-\log p(x \mid h)` is
    :math:`-\nabla s(x, h) + \mathbb{E}_{v \sim p(\cdot \mid h)}[\nabla s(v, h)]`;
    the expectation is replaced by :math:`\sum_k \omega_k \nabla s(v_k, h)` over
    ``K`` words :math:`v_k \sim q` (:func:`importance_weights`). The returned
    value, averaged over the batch, is
    :math:`-s(x, h) + \sum_k \omega_k s(v_k, h)` with :math:`\omega` held fixed,
    so ``backward()`` produces exactly that estimate. Its *value* is not the
    cross-entropy; only its gradient matters.

    Parameters
    ----------
    hidden : Tensor
    weight, bias : Tensor
        The output layer.
    targets : LongTensor
        The observed next words.
    proposal : Tensor
        :math:`q`, a distribution over the vocabulary (e.g. the unigram one).
    num_samples : int
        ``K``, drawn with replacement, independently for every row.
    generator : torch.Generator, optional
    self_normalised : bool
        True: estimate :math:`Z` from the samples (the practical method). False:
        compute the exact :math:`Z` (unbiased, full cost; for checking).

    Returns
    -------
    Tensor
        A scalar.

    Shapes
    ------
    hidden : (B, D); weight : (V, D); bias : (V,)
    targets : (B,)
    proposal : (V,)
    """
    _check_output_layer(hidden, weight, bias)
    vocab_size = weight.shape[0]
    _require_ids("targets", targets, vocab_size, hidden.shape[:1], "(B,)")
    _require_float("proposal", proposal, 1, "(V,)")
    if proposal.shape[0] != vocab_size or bool((proposal < 0).any()) or abs(float(proposal.sum()) - 1) > 1e-6:
        raise ValueError(f"proposal must be a probability distribution over the {vocab_size} words")
    require_int("num_samples", num_samples, 1)
    samples = torch.multinomial(proposal, len(targets) * num_samples, replacement=True,
                                generator=generator).view(len(targets), num_samples)  # (B, K)
    target_scores = output_scores(hidden, weight, bias, targets)  # (B,)
    sample_scores = output_scores(hidden, weight, bias, samples)  # (B, K)
    log_partition = None
    if not self_normalised:
        log_partition = torch.logsumexp(hidden @ weight.T + bias, dim=1)  # (B,): the full cost
    omega = importance_weights(sample_scores, proposal.log()[samples].to(hidden.dtype), log_partition)  # (B, K)
    return (-target_scores + (omega * sample_scores).sum(1)).mean()


def nce_logits(scores: Tensor, log_noise: Tensor, num_noise: int) -> Tensor:
    r"""The logit of "this word came from the data": :math:`\Delta s = s(w, h) - \log(K q(w))`.

    With the model's unnormalised probability :math:`\exp s(w, h)` and ``K``
    noise words per data word,
    :math:`p(y = 1 \mid w, h) = \frac{\exp s}{\exp s + K q(w)} = \sigma(\Delta s)`.

    Shapes
    ------
    scores, log_noise : (...)
    output : (...)
    """
    require_int("num_noise", num_noise, 1)
    require_float_tensors(scores=scores, log_noise=log_noise)
    require_broadcastable("log_noise", log_noise, "scores", scores)
    return scores - math.log(num_noise) - log_noise


def _check_nce(data_scores: object, noise_scores: object, data_log_noise: object, noise_log_noise: object) -> None:
    _require_float("data_scores", data_scores, 1, "(B,)")
    _require_float("noise_scores", noise_scores, 2, "(B, K)")
    if noise_scores.shape[0] != data_scores.shape[0] or data_log_noise.shape != data_scores.shape \
            or noise_log_noise.shape != noise_scores.shape:
        raise ValueError(
            f"expected data_scores and data_log_noise (B,), noise_scores and noise_log_noise (B, K); found "
            f"{tuple(data_scores.shape)}, {tuple(data_log_noise.shape)}, {tuple(noise_scores.shape)}, "
            f"{tuple(noise_log_noise.shape)}"
        )


def nce_loss(data_scores: Tensor, noise_scores: Tensor, data_log_noise: Tensor, noise_log_noise: Tensor) -> Tensor:
    r"""Noise-contrastive estimation: the loss of the data-vs-noise logistic classifier.

    .. math:: L = -\frac{1}{B(K+1)} \Big( \sum_{b} \log \sigma(\Delta s(x_b))
              + \sum_{b} \sum_{k=1}^{K} \log \big(1 - \sigma(\Delta s(x'_{bk}))\big) \Big)

    for data words :math:`x_b` and noise words :math:`x'_{bk} \sim q`. The model's
    probability is :math:`\exp s(w, h)` itself (the log-partition term
    :math:`z_h` fixed at 0): at the optimum it is normalised and equals the
    data distribution, although no sum over the vocabulary is ever computed.

    Parameters
    ----------
    data_scores : Tensor
        :math:`s(x_b, h_b)`.
    noise_scores : Tensor
        :math:`s(x'_{bk}, h_b)`.
    data_log_noise, noise_log_noise : Tensor
        :math:`\log q` of the same words.

    Returns
    -------
    Tensor
        A scalar.

    Shapes
    ------
    data_scores, data_log_noise : (B,)
    noise_scores, noise_log_noise : (B, K)
    """
    _check_nce(data_scores, noise_scores, data_log_noise, noise_log_noise)
    num_noise = noise_scores.shape[1]
    data_term = F.logsigmoid(nce_logits(data_scores, data_log_noise, num_noise))  # (B,): log p(y=1 | x)
    noise_term = F.logsigmoid(-nce_logits(noise_scores, noise_log_noise, num_noise))  # (B, K): log p(y=0 | x')
    return -(data_term.sum() + noise_term.sum()) / (data_scores.shape[0] * (num_noise + 1))


# ---------------------------------------------------------------------------
# What each costs.
# ---------------------------------------------------------------------------

_METHODS = ("full", "classes", "tree")


def dot_products(method: str, vocab_size: int, num_classes: Optional[int] = None,
                 tree: Optional[BinaryTree] = None) -> float:
    """Dot products with the context vector per prediction, on average over the words.

    ``"full"``: ``|V|``. ``"classes"``: ``k`` class scores plus the words of the
    target's class, ``k + |V| / k`` for equal classes (default ``k = round(sqrt(|V|))``).
    ``"tree"``: the path length, ``log2 |V|`` for a balanced tree (default) or the
    given tree's mean depth.

    Shapes
    ------
    Scalars in and out.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; found {method!r}")
    require_int("vocab_size", vocab_size, 2)
    if method == "full":
        return float(vocab_size)
    if method == "classes":
        k = num_classes if num_classes is not None else max(1, round(math.sqrt(vocab_size)))
        sizes = torch.bincount(equal_classes(vocab_size, k)).double()  # (k,)
        return k + float((sizes * sizes).sum() / vocab_size)  # a word's class has |c| words, weight |c| / |V|
    tree = tree if tree is not None else balanced_tree(vocab_size)
    if tree.vocab_size != vocab_size:
        raise ValueError(f"tree must cover the {vocab_size} words; found a tree over {tree.vocab_size}")
    return sum(tree.depths) / vocab_size


def time_per_step(method: str, vocab_size: int, hidden_size: int = 64, batch_size: int = 32, repeats: int = 5,
                  seed: int = 0) -> float:
    """CPU seconds of one forward pass of the output layer's loss and its gradients: the fastest of ``repeats``.

    ``"full"`` computes ``F.cross_entropy`` over all ``|V|`` scores; ``"tree"``
    the binary-tree softmax on a balanced tree (:func:`lib.tree_softmax.path_log_prob`);
    ``"classes"`` the :class:`ClassSoftmax` with ``sqrt(|V|)`` equal classes. The
    gradients are those of the context vectors and of the output layer's
    parameters. The structured softmaxes get sparse ones, holding only the rows the
    batch touched, as a trainer with sparse updates computes them (a dense
    gradient would be a ``|V|``-row tensor of zeros, and cost in proportion to
    ``|V|``); the full softmax's gradient is dense, since every score has one.
    Times are the process's CPU time (``time.process_time``), which other programs
    on a busy machine do not inflate as they do wall time; they still depend on the
    machine. The fastest run is the one least disturbed.

    Shapes
    ------
    Scalars in and out (inside: hidden (B, D), targets (B,)).
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; found {method!r}")
    require_int("repeats", repeats, 1)
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(batch_size, hidden_size, generator=generator, requires_grad=True)  # (B, D)
    targets = torch.randint(vocab_size, (batch_size,), generator=generator)  # (B,)
    if method == "full":
        layer = nn.Linear(hidden_size, vocab_size)
        parameters = [hidden, *layer.parameters()]

        def loss_fn():
            return F.cross_entropy(layer(hidden), targets)
    elif method == "tree":
        tree = balanced_tree(vocab_size)
        tree.padded()  # built once, outside the timing
        node_vectors = (0.1 * torch.randn(vocab_size - 1, hidden_size, generator=generator)).requires_grad_()
        parameters = [hidden, node_vectors]

        def loss_fn():
            return -path_log_prob(hidden, node_vectors, tree, targets, sparse=True).mean()
    else:
        classes = equal_classes(vocab_size, max(1, round(math.sqrt(vocab_size))))
        layer = ClassSoftmax(hidden_size, classes, sparse=True)
        parameters = [hidden, *layer.parameters()]

        def loss_fn():
            return -layer.log_prob(hidden, targets).mean()
    seconds = []
    for _ in range(repeats + 1):  # the first run warms up
        start = time.process_time()
        torch.autograd.grad(loss_fn(), parameters)  # returned, not accumulated into .grad
        seconds.append(time.process_time() - start)
    return min(seconds[1:])
