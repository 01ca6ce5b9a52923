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
from dataclasses import dataclass
from functools import cached_property
from typing import no_type_check

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Float32, Int64
from torch import Tensor

from lib.checked import PositiveInt, each, positive_int_at_most, same_dtype

__all__ = [
    "BinaryTree",
    "huffman_tree",
    "balanced_tree",
    "path_log_prob",
    "all_log_probs",
    "MAX_VOCAB",
]

MAX_VOCAB = 10**7  # largest tree built: the Python loops would take minutes beyond it

# Every word's path padded to the longest, L steps: node ids, bits, real steps.
Paths = tuple[Int64[Tensor, "V L"], Float32[Tensor, "V L"], Bool[Tensor, "V L"]]


@dataclass
class BinaryTree:
    """A binary tree over a vocabulary: ``codes[w]`` holds the bits (0 = left,
    1 = right) from the root to word ``w``, ``nodes[w]`` the inner nodes on that path,
    root first. Inner nodes are numbered ``0 .. V - 2`` as they were made; the root is
    the last."""

    codes: list[tuple[int, ...]]
    nodes: list[tuple[int, ...]]

    def __post_init__(self):
        if len(self.codes) < 2 or len(self.nodes) != len(self.codes):
            raise ValueError(
                f"codes and nodes must hold one path for each of 2 words or more; "
                f"found {len(self.codes)} codes and {len(self.nodes)} paths"
            )
        for word, (code, path) in enumerate(zip(self.codes, self.nodes)):
            if len(code) != len(path):
                raise ValueError(
                    f"nodes[{word}] must hold one node for each bit of codes[{word}] "
                    f"({len(code)}); found {len(path)}"
                )

    @property
    def vocab_size(self) -> int:
        return len(self.codes)

    @property
    def depths(self) -> list[int]:
        """Path length of every word: the dot products one prediction costs."""
        return [len(code) for code in self.codes]

    @cached_property
    def _padded(self) -> Paths:
        depth = max(self.depths)
        # Pad the Python lists first: one tensor per field, not one per word.
        nodes = [path + (0,) * (depth - len(path)) for path in self.nodes]
        bits = [code + (0,) * (depth - len(code)) for code in self.codes]
        mask = torch.arange(depth) < torch.tensor(self.depths)[:, None]  # (V, L)
        return torch.tensor(nodes), torch.tensor(bits, dtype=torch.float32), mask

    # Unchecked: word2vec's training calls it once per batch, and timed steps too, for
    # the tensors that _padded built above, once.
    @no_type_check
    def padded(self) -> Paths:
        """Node ids, bits (as floats) and a mask of the real steps of every path, padded
        with 0 (False) to the deepest word, ``L = max(depths)``."""
        return self._padded


def _tree_from_merges(
    vocab_size: PositiveInt, merges: list[tuple[int, int]]
) -> BinaryTree:
    """Codes and paths of the tree made by ``merges`` ``(left, right)``: ids below
    ``vocab_size`` are words, ``vocab_size + j`` the inner node of merge ``j``."""
    codes: list[tuple[int, ...]] = [()] * vocab_size
    nodes: list[tuple[int, ...]] = [()] * vocab_size
    # Walk down from the root (the last merge), extending each child's path by its
    # parent.
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


def huffman_tree(counts: each(PositiveInt)) -> BinaryTree:
    """Huffman's tree from word counts (the notes' algorithm 15.1): frequent words get
    short codes. Ties go to the subtree made first (words before inner nodes, lower
    ids first), so the tree is deterministic."""
    if not 2 <= len(counts) <= MAX_VOCAB:
        raise ValueError(
            f"counts must hold at least 2 words (a tree needs two leaves) and at most "
            f"MAX_VOCAB = {MAX_VOCAB}; found {len(counts)}"
        )
    vocab_size = len(counts)
    # One leaf per word, weighted by its count; then join the two lightest trees,
    # the lighter on the left, under a new node weighing their sum, until one is left.
    heap = [(int(count), word) for word, count in enumerate(counts)]
    heapq.heapify(heap)
    # Ids below vocab_size are words, vocab_size + j the node merge j made;
    # _tree_from_merges turns the merges into codes and paths.
    merges: list[tuple[int, int]] = []
    while len(heap) > 1:
        left_weight, left = heapq.heappop(heap)
        right_weight, right = heapq.heappop(heap)
        merges.append((left, right))
        heapq.heappush(heap, (left_weight + right_weight, vocab_size + len(merges) - 1))
    return _tree_from_merges(vocab_size, merges)


def balanced_tree(vocab_size: positive_int_at_most(MAX_VOCAB)) -> BinaryTree:
    """A tree in which every word's path has ``floor`` or ``ceil`` of ``log2 V`` steps:
    two halves of the words, each with its own subtree made so, joined at the root."""
    if vocab_size < 2:
        raise ValueError(
            f"vocab_size must be at least 2 (a tree needs two leaves); "
            f"found {vocab_size}"
        )
    vocab_size = int(vocab_size)  # node ids are ints, numpy's int64 too
    merges: list[tuple[int, int]] = []

    # Unchecked: the import hook would check each of its 2V - 1 calls, whose
    # arguments balanced_tree built from the vocab_size it has checked.
    @no_type_check
    def subtree(first: int, stop: int) -> int:
        if stop - first == 1:
            return first
        middle = (first + stop) // 2
        left, right = subtree(first, middle), subtree(middle, stop)
        merges.append((left, right))
        return vocab_size + len(merges) - 1

    subtree(0, vocab_size)
    return _tree_from_merges(vocab_size, merges)


def path_log_prob(
    hidden: Float[Tensor, "B D"],
    node_vectors: Float[Tensor, "N D"],
    tree: BinaryTree,
    words: Int64[Tensor, "B"],
    sparse: bool = False,
) -> Float[Tensor, "B"]:
    """``log P(w | h)`` of one word per context vector, batched (the training path);
    ``node_vectors`` holds one vector per inner node, ``N = V - 1``. ``sparse=True``
    gives ``node_vectors`` a sparse gradient, the rows on the batch's paths only, so
    that a backward pass costs the same whatever the size of the vocabulary."""
    same_dtype(hidden=hidden, node_vectors=node_vectors)
    if node_vectors.shape[0] != tree.vocab_size - 1:
        raise ValueError(
            f"node_vectors must have V - 1 = {tree.vocab_size - 1} rows for a tree "
            f"over {tree.vocab_size} words; found {node_vectors.shape[0]}"
        )
    if words.numel() and (words.min() < 0 or words.max() >= tree.vocab_size):
        raise ValueError(
            f"words must be ids in [0, {tree.vocab_size}); "
            f"found {words.min()}..{words.max()}"
        )
    nodes, codes, mask = (t.to(hidden.device) for t in tree.padded())  # (V, L) each
    path_nodes = nodes[words]  # (B, L)
    path_codes = codes[words]  # (B, L)
    path_mask = mask[words]  # (B, L)
    # (B, L, D): the rows on the paths, looked up as nn.Embedding does.
    path_vectors = F.embedding(path_nodes, node_vectors, sparse=sparse)
    logits = torch.einsum("bd,bld->bl", hidden, path_vectors)  # (B, L)
    # Bit 0 goes left with probability sigmoid(logit), bit 1 right with sigmoid(-logit).
    signs = 1 - 2 * path_codes.to(hidden.dtype)  # (B, L)
    step_log_probs = F.logsigmoid(signs * logits)  # (B, L)
    padding = torch.zeros_like(step_log_probs)
    return torch.where(path_mask, step_log_probs, padding).sum(dim=1)


def all_log_probs(
    hidden: Float[Tensor, "B D"], node_vectors: Float[Tensor, "N D"], tree: BinaryTree
) -> Float[Tensor, "B V"]:
    """``log P(w | h)`` of every word, word by word from the formula (the reference):
    each row logsumexps to 0."""
    same_dtype(hidden=hidden, node_vectors=node_vectors)
    if node_vectors.shape[0] != tree.vocab_size - 1:
        raise ValueError(
            f"node_vectors must have V - 1 = {tree.vocab_size - 1} rows for a tree "
            f"over {tree.vocab_size} words; found {node_vectors.shape[0]}"
        )
    columns = []
    for code, path in zip(tree.codes, tree.nodes):
        log_prob = torch.zeros(
            hidden.shape[0], dtype=hidden.dtype, device=hidden.device
        )
        for bit, node in zip(code, path):
            logit = hidden @ node_vectors[node]  # (B,)
            log_prob = log_prob + F.logsigmoid(logit if bit == 0 else -logit)
        columns.append(log_prob)
    return torch.stack(columns, dim=1)  # (B, V)
