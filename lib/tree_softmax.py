"""Hierarchical (binary-tree) softmax: a word's probability as a path of coin flips.

A full softmax over a vocabulary of ``V`` words needs ``V`` scores for every
prediction. Morin and Bengio (2005) put the words at the leaves of a binary
tree instead. Each of the ``V - 1`` inner nodes ``n`` owns a vector ``v_n``;
at a node the context vector ``h`` goes left with probability
``sigmoid(h . v_n)`` and right with the rest, so the probability of a word is
the product of the decisions on its root-to-leaf path:

    P(w | h) = prod_j sigmoid((1 - 2 b_j) h . v_{n_j})

where ``b_j`` is the ``j``-th bit of the word's code (0 = left, 1 = right, the
convention of word2vec.c) and ``n_j`` the ``j``-th inner node on its path. The
two probabilities at every node sum to one, so the leaves' probabilities sum to
one over the whole vocabulary without any normalising sum, and a prediction
costs one dot product per level: about ``log2 V`` for a balanced tree.

Mikolov et al. (2013) build the tree with Huffman's algorithm from the word
counts, so frequent words get short paths and the *average* cost falls below
``log2 V``. :func:`huffman_tree` follows the book's notes (algorithm 15.1):
repeatedly merge the two least frequent subtrees; the least frequent becomes
the left child. :func:`balanced_tree` gives every word a path of length about
``log2 V``.

:func:`path_log_prob` is the fast, batched path used in training (one gather
and one batched dot product); :func:`all_log_probs` is the plain reference,
written word by word from the formula above, which the tests hold it against.

References
----------
.. [1] F. Morin, Y. Bengio. "Hierarchical Probabilistic Neural Network
   Language Model". AISTATS 2005.
.. [2] T. Mikolov, I. Sutskever, K. Chen, G. Corrado, J. Dean. "Distributed
   Representations of Words and Phrases and their Compositionality".
   NeurIPS 2013. arXiv:1310.4546.
.. [3] D. A. Huffman. "A Method for the Construction of Minimum-Redundancy
   Codes". Proceedings of the IRE 40(9), 1952.
"""

from __future__ import annotations

import heapq
import numbers
from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from lib.validation import require_int

__all__ = ["BinaryTree", "huffman_tree", "balanced_tree", "path_log_prob", "all_log_probs", "MAX_VOCAB"]

MAX_VOCAB = 10**7  # largest tree built: the Python loops would take minutes beyond it


@dataclass
class BinaryTree:
    """A binary tree over a vocabulary: every word's code and path.

    Inner nodes are numbered ``0 .. V - 2`` in the order they were created;
    the root is the last one, ``V - 2``.

    Attributes
    ----------
    codes : list of tuple of int
        ``codes[w]``: the bits (0 = left, 1 = right) from the root to word ``w``.
    nodes : list of tuple of int
        ``nodes[w]``: the inner nodes on that path, root first;
        ``len(nodes[w]) == len(codes[w])``.
    """

    codes: list[tuple[int, ...]]
    nodes: list[tuple[int, ...]]

    @property
    def vocab_size(self) -> int:
        return len(self.codes)

    @property
    def depths(self) -> list[int]:
        """Path length of every word: the dot products one prediction costs."""
        return [len(code) for code in self.codes]

    @cached_property
    def _padded(self) -> tuple[Tensor, Tensor, Tensor]:
        depth = max(self.depths)
        # Pad the Python lists first: one tensor per field, not one per word.
        nodes = torch.tensor([path + (0,) * (depth - len(path)) for path in self.nodes])  # (V, L)
        codes = torch.tensor([code + (0,) * (depth - len(code)) for code in self.codes], dtype=torch.float32)
        mask = torch.arange(depth) < torch.tensor(self.depths)[:, None]  # (V, L)
        return nodes, codes, mask

    def padded(self) -> tuple[Tensor, Tensor, Tensor]:
        """Paths as rectangular tensors, padded to the deepest word.

        Returns
        -------
        nodes : LongTensor
            Inner-node ids; padding holds 0.
        codes : Tensor
            Bits as floats; padding holds 0.
        mask : BoolTensor
            True on the real steps of each path.

        Shapes
        ------
        nodes, codes, mask : (V, L) with ``L = max(depths)``
        """
        return self._padded


def _tree_from_merges(vocab_size: int, merges: list[tuple[int, int]]) -> BinaryTree:
    """Codes and paths of a tree given as merges ``(left, right)``.

    Ids below ``vocab_size`` are words; id ``vocab_size + j`` is the inner node
    made by merge ``j``. The last merge is the root.
    """
    codes: list[tuple[int, ...]] = [()] * vocab_size
    nodes: list[tuple[int, ...]] = [()] * vocab_size
    # Walk down from the root, extending each child's path by its parent.
    stack = [(vocab_size + len(merges) - 1, (), ())]
    while stack:
        node, code, path = stack.pop()
        inner = node - vocab_size
        for bit, child in enumerate(merges[inner]):
            child_code, child_path = code + (bit,), path + (inner,)
            if child < vocab_size:
                codes[child], nodes[child] = child_code, child_path
            else:
                stack.append((child, child_code, child_path))
    return BinaryTree(codes=codes, nodes=nodes)


def _check_counts(counts: Sequence[int]) -> None:
    if isinstance(counts, (str, bytes)) or not hasattr(counts, "__len__"):
        raise TypeError(f"counts must be a sequence of ints; found {type(counts).__name__}")
    if not 2 <= len(counts) <= MAX_VOCAB:
        raise ValueError(f"counts must hold at least 2 words (a tree needs two leaves) and at most "
                         f"MAX_VOCAB = {MAX_VOCAB}; found {len(counts)}")
    bad = [c for c in counts if isinstance(c, bool) or not isinstance(c, numbers.Integral) or c <= 0]
    if bad:
        raise ValueError(f"counts must be positive ints; found {bad[0]!r}")


def huffman_tree(counts: Sequence[int]) -> BinaryTree:
    """Huffman's tree from word counts (the notes' algorithm 15.1).

    Start with one leaf per word, weighted by its count; while more than one
    tree is left, take the two of lowest weight, make them the left and right
    children of a new node whose weight is their sum. Ties go to the subtree
    made first (words before inner nodes, lower ids first), so the tree is
    deterministic.

    Parameters
    ----------
    counts : sequence of int
        ``counts[w]`` > 0 for every word ``w``.

    Returns
    -------
    BinaryTree
        Frequent words get short codes; the codes are prefix-free.

    Shapes
    ------
    counts : (V,)
    """
    _check_counts(counts)
    counts = [int(c) for c in counts]
    vocab_size = len(counts)
    heap = [(count, word) for word, count in enumerate(counts)]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while len(heap) > 1:
        left_weight, left = heapq.heappop(heap)
        right_weight, right = heapq.heappop(heap)
        merges.append((left, right))
        heapq.heappush(heap, (left_weight + right_weight, vocab_size + len(merges) - 1))
    return _tree_from_merges(vocab_size, merges)


def balanced_tree(vocab_size: int) -> BinaryTree:
    """A tree in which every word's path has ``floor`` or ``ceil`` of ``log2 V`` steps.

    Split the words ``0 .. V - 1`` into two halves of (almost) equal size, give
    each half its own subtree the same way, and join the two under a new root.
    """
    require_int("vocab_size", vocab_size, 2, MAX_VOCAB)
    merges: list[tuple[int, int]] = []

    def subtree(first: int, stop: int) -> int:
        if stop - first == 1:
            return first
        middle = (first + stop) // 2
        left, right = subtree(first, middle), subtree(middle, stop)
        merges.append((left, right))
        return vocab_size + len(merges) - 1

    subtree(0, vocab_size)
    return _tree_from_merges(vocab_size, merges)


def _check_inputs(hidden: object, node_vectors: object, tree: object) -> None:
    if not isinstance(tree, BinaryTree):
        raise TypeError(f"tree must be a BinaryTree (see huffman_tree); found {type(tree).__name__}")
    for name, value in (("hidden", hidden), ("node_vectors", node_vectors)):
        if not isinstance(value, Tensor) or not value.is_floating_point():
            found = value.dtype if isinstance(value, Tensor) else type(value).__name__
            raise TypeError(f"{name} must be a floating-point torch.Tensor; found {found}")
        if value.dim() != 2:
            raise ValueError(f"{name} must be 2-D; found shape {tuple(value.shape)}")
    if node_vectors.shape != (tree.vocab_size - 1, hidden.shape[1]):
        raise ValueError(
            f"node_vectors must have shape (V - 1, D) = ({tree.vocab_size - 1}, {hidden.shape[1]}) "
            f"for a tree over {tree.vocab_size} words and hidden of width {hidden.shape[1]}; "
            f"found {tuple(node_vectors.shape)}"
        )
    if node_vectors.dtype != hidden.dtype:
        raise TypeError(f"node_vectors must have hidden's dtype {hidden.dtype}; found {node_vectors.dtype}")


def path_log_prob(hidden: Tensor, node_vectors: Tensor, tree: BinaryTree, words: Tensor,
                  sparse: bool = False) -> Tensor:
    """``log P(w | h)`` of one word per context vector, batched (the training path).

    Parameters
    ----------
    hidden : Tensor
        Context vectors ``h``.
    node_vectors : Tensor
        One vector per inner node.
    tree : BinaryTree
    words : LongTensor
        The word whose probability each row asks for.
    sparse : bool
        Give ``node_vectors`` a sparse gradient (as ``nn.Embedding(sparse=True)``):
        only the rows on the batch's paths, so that a backward pass costs the
        same whatever the size of the vocabulary. The default, a dense gradient,
        is a ``(V - 1, D)`` tensor of mostly zeros.

    Returns
    -------
    Tensor
        Log-probabilities; differentiable in ``hidden`` and ``node_vectors``.

    Shapes
    ------
    hidden : (B, D)
    node_vectors : (V - 1, D)
    words : (B,)
    output : (B,)
    """
    _check_inputs(hidden, node_vectors, tree)
    if not isinstance(words, Tensor) or words.dtype != torch.long or words.shape != hidden.shape[:1]:
        found = f"{words.dtype} of shape {tuple(words.shape)}" if isinstance(words, Tensor) else type(words).__name__
        raise TypeError(f"words must be a LongTensor of shape ({hidden.shape[0]},); found {found}")
    if words.numel() and (words.min() < 0 or words.max() >= tree.vocab_size):
        raise ValueError(f"words must be ids in [0, {tree.vocab_size}); found {words.min()}..{words.max()}")
    if not isinstance(sparse, bool):
        raise TypeError(f"sparse must be True or False; found {sparse!r}")
    nodes, codes, mask = (t.to(hidden.device) for t in tree.padded())
    path_nodes, path_codes, path_mask = nodes[words], codes[words].to(hidden.dtype), mask[words]  # (B, L)
    path_vectors = F.embedding(path_nodes, node_vectors, sparse=sparse)  # (B, L, D): the rows on the paths
    logits = torch.einsum("bd,bld->bl", hidden, path_vectors)  # (B, L)
    # Bit 0 goes left with probability sigmoid(logit), bit 1 right with sigmoid(-logit).
    step_log_probs = F.logsigmoid((1 - 2 * path_codes) * logits)  # (B, L)
    return torch.where(path_mask, step_log_probs, torch.zeros_like(step_log_probs)).sum(dim=1)


def all_log_probs(hidden: Tensor, node_vectors: Tensor, tree: BinaryTree) -> Tensor:
    """``log P(w | h)`` for every word, word by word from the formula (the reference).

    Parameters
    ----------
    hidden : Tensor
    node_vectors : Tensor
    tree : BinaryTree

    Returns
    -------
    Tensor
        Each row is a log-distribution over the vocabulary: it logsumexps to 0.

    Shapes
    ------
    hidden : (B, D)
    node_vectors : (V - 1, D)
    output : (B, V)
    """
    _check_inputs(hidden, node_vectors, tree)
    columns = []
    for code, path in zip(tree.codes, tree.nodes):
        log_prob = torch.zeros(hidden.shape[0], dtype=hidden.dtype, device=hidden.device)
        for bit, node in zip(code, path):
            logit = hidden @ node_vectors[node]  # (B,)
            log_prob = log_prob + F.logsigmoid(logit if bit == 0 else -logit)
        columns.append(log_prob)
    return torch.stack(columns, dim=1)  # (B, V)
