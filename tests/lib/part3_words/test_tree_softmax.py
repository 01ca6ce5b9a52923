"""Tests for lib/part3_words/tree_softmax.py: Huffman and balanced trees, path probabilities.

References: a tree worked out by hand from the notes' algorithm 15.1, gensim's
own Huffman tree (same optimal weighted code length), the word-by-word formula
(``all_log_probs``) for the batched path, and autograd's gradcheck.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part3_words.tree_softmax import BinaryTree, all_log_probs, balanced_tree, huffman_tree, path_log_prob

FAST = settings(max_examples=30, deadline=None, database=None)
counts_lists = st.lists(st.integers(min_value=1, max_value=1000), min_size=2, max_size=40)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_huffman_tree_by_hand():
    # Counts 5, 1, 1, 2: merge words 1+2 (node 0, weight 2), then word 3 + node 0
    # (tie at weight 2: the word was made first; node 1, weight 4), then node 1 + word 0 (root, node 2).
    tree = huffman_tree([5, 1, 1, 2])
    assert tree.codes == [(1,), (0, 1, 0), (0, 1, 1), (0, 0)]
    assert tree.nodes == [(2,), (2, 1, 0), (2, 1, 0), (2, 1)]
    assert tree.depths == [1, 3, 3, 2]


@FAST
@given(counts_lists)
def test_huffman_codes_are_prefix_free_and_frequent_words_are_shallower(counts):
    tree = huffman_tree(counts)
    codes = ["".join(map(str, code)) for code in tree.codes]
    for i, a in enumerate(codes):
        for j, b in enumerate(codes):
            if i != j:
                assert not b.startswith(a), (a, b)
    for i in range(len(counts)):
        for j in range(len(counts)):
            if counts[i] > counts[j]:
                assert tree.depths[i] <= tree.depths[j]


@FAST
@given(counts_lists)
def test_huffman_weighted_length_is_minimal_and_satisfies_kraft(counts):
    tree = huffman_tree(counts)
    # Kraft's equality holds for every full binary tree.
    assert sum(2.0 ** -d for d in tree.depths) == pytest.approx(1.0)
    # Never worse than the balanced tree, and within 1 bit of the entropy bound.
    total = sum(counts)
    weighted = sum(c * d for c, d in zip(counts, tree.depths)) / total
    entropy = -sum(c / total * math.log2(c / total) for c in counts)
    balanced = sum(c * d for c, d in zip(counts, balanced_tree(len(counts)).depths)) / total
    assert entropy - 1e-9 <= weighted < entropy + 1
    assert weighted <= balanced + 1e-12


def test_huffman_tree_is_as_short_as_gensims():
    # gensim breaks ties between equal counts differently, so the codes may differ,
    # but both trees are optimal: the same total weighted code length.
    from gensim.models import Word2Vec

    from lib.corpus import read_sentences

    model = Word2Vec(vector_size=4, min_count=3, hs=1, negative=0, workers=1)
    model.build_vocab(read_sentences())
    wv = model.wv
    counts = [int(wv.get_vecattr(i, "count")) for i in range(len(wv))]
    theirs = sum(c * len(wv.get_vecattr(i, "code")) for i, c in enumerate(counts))
    ours = sum(c * d for c, d in zip(counts, huffman_tree(counts).depths))
    assert ours == theirs


@pytest.mark.parametrize("vocab_size", [2, 3, 5, 8, 13, 64, 100])
def test_balanced_tree_depths(vocab_size):
    depths = balanced_tree(vocab_size).depths
    assert max(depths) == math.ceil(math.log2(vocab_size))
    assert min(depths) >= math.floor(math.log2(vocab_size))


def test_balanced_tree_takes_numpys_ints():
    # The signature takes any Integral; the nested helper once re-checked it as an int.
    tree = balanced_tree(np.int64(5))
    assert tree == balanced_tree(5) and all(type(n) is int for path in tree.nodes for n in path)


@FAST
@given(counts_lists, st.integers(0, 10_000), st.booleans())
def test_probabilities_sum_to_one_over_the_vocabulary(counts, seed, balanced):
    tree = balanced_tree(len(counts)) if balanced else huffman_tree(counts)
    hidden, nodes = randn(3, 5, seed=seed), randn(len(counts) - 1, 5, seed=seed + 1) * 3
    log_probs = all_log_probs(hidden, nodes, tree)
    assert log_probs.shape == (3, len(counts))
    torch.testing.assert_close(log_probs.logsumexp(dim=1), torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0)


def test_all_log_probs_by_hand():
    tree = huffman_tree([5, 1, 1, 2])
    hidden = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    nodes = torch.tensor([[0.5, 0.0], [-1.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    def s(x):
        return 1 / (1 + math.exp(-x))

    probs = all_log_probs(hidden, nodes, tree).exp()[0].tolist()
    # Word 0 is one right turn at the root (node 2); word 3 is left, left through
    # nodes 2 and 1; word 1 is left, right, left through nodes 2, 1, 0.
    assert probs[0] == pytest.approx(s(-2.0), abs=1e-12)
    assert probs[3] == pytest.approx(s(2.0) * s(-1.0), abs=1e-12)
    assert probs[1] == pytest.approx(s(2.0) * s(1.0) * s(0.5), abs=1e-12)


@FAST
@given(counts_lists, st.integers(0, 10_000))
def test_batched_path_equals_the_word_by_word_reference(counts, seed):
    tree = huffman_tree(counts)
    hidden, nodes = randn(6, 4, seed=seed), randn(len(counts) - 1, 4, seed=seed + 1)
    words = torch.randint(0, len(counts), (6,), generator=torch.Generator().manual_seed(seed))
    expected = all_log_probs(hidden, nodes, tree).gather(1, words[:, None])[:, 0]
    torch.testing.assert_close(path_log_prob(hidden, nodes, tree, words), expected, atol=1e-12, rtol=0)


def test_path_log_prob_gradients():
    tree = huffman_tree([9, 4, 4, 2, 1, 1])
    hidden = randn(4, 3).requires_grad_()
    nodes = randn(5, 3, seed=1).requires_grad_()
    words = torch.tensor([0, 3, 5, 5])
    assert torch.autograd.gradcheck(lambda h, n: path_log_prob(h, n, tree, words), (hidden, nodes))



def test_sparse_gradient_equals_the_dense_one_and_holds_only_the_path_rows():
    tree = balanced_tree(64)
    hidden = randn(5, 3, seed=2).requires_grad_()
    nodes = randn(63, 3, seed=3).requires_grad_()
    words = torch.tensor([0, 7, 7, 40, 63])
    dense = torch.autograd.grad(path_log_prob(hidden, nodes, tree, words).sum(), [hidden, nodes])
    sparse = torch.autograd.grad(path_log_prob(hidden, nodes, tree, words, sparse=True).sum(), [hidden, nodes])
    assert sparse[1].layout == torch.sparse_coo
    torch.testing.assert_close(sparse[0], dense[0])
    torch.testing.assert_close(sparse[1].to_dense(), dense[1])
    touched = set(sparse[1].coalesce().indices()[0].tolist())
    assert touched == set(tree.padded()[0][words][tree.padded()[2][words]].tolist())
    with pytest.raises(TypeError, match=r"(?s)parameter 'sparse'.*Actual value: 1.*bool"):
        path_log_prob(hidden, nodes, tree, words, sparse=1)


def test_padded_tensors():
    nodes, codes, mask = huffman_tree([5, 1, 1, 2]).padded()
    assert nodes.tolist() == [[2, 0, 0], [2, 1, 0], [2, 1, 0], [2, 1, 0]]
    assert codes.tolist() == [[1, 0, 0], [0, 1, 0], [0, 1, 1], [0, 0, 0]]
    assert mask.sum(dim=1).tolist() == [1, 3, 3, 2]


def test_bad_input_is_rejected_with_the_reason():
    with pytest.raises(ValueError, match="counts must hold at least 2 words .*; found 1"):
        huffman_tree([3])
    with pytest.raises(TypeError, match=r"(?s)parameter 'counts'.*Actual value: \[3, 0, 1\].*is_at_least_1"):
        huffman_tree([3, 0, 1])
    with pytest.raises(TypeError, match=r"(?s)parameter 'counts'.*Actual value: 5.*Sequence"):
        huffman_tree(5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'vocab_size'.*Actual value: 4.0.*Integral"):
        balanced_tree(4.0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'vocab_size'.*Actual value: 0.*is_at_least_1"):
        balanced_tree(0)
    with pytest.raises(ValueError, match="vocab_size must be at least 2 .*; found 1"):
        balanced_tree(1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'vocab_size'.*Actual value: 10000001.*is_at_most_10000000"):
        balanced_tree(10**7 + 1)
    tree = huffman_tree([3, 2, 1])
    with pytest.raises(ValueError, match=r"node_vectors must have V - 1 = 2 rows for a tree over 3 words; found 3"):
        path_log_prob(randn(2, 4), randn(3, 4), tree, torch.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'node_vectors'.*Actual value: f64\[2,3\].*D=4"):
        path_log_prob(randn(2, 4), randn(2, 3), tree, torch.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"node_vectors must have the dtype of hidden \(torch.float64\); found torch.float32"):
        path_log_prob(randn(2, 4), randn(2, 4).float(), tree, torch.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'words'.*Actual value: f32\[2\].*Int64\[Tensor, 'B'\]"):
        path_log_prob(randn(2, 4), randn(2, 4), tree, torch.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'words'.*Actual value: i64\[3\].*B=2"):
        path_log_prob(randn(2, 4), randn(2, 4), tree, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"words must be ids in \[0, 3\); found 0..3"):
        path_log_prob(randn(2, 4), randn(2, 4), tree, torch.tensor([0, 3]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'tree'.*Actual value: \[\(0,\), \(1,\)\].*BinaryTree"):
        all_log_probs(randn(2, 4), randn(2, 4), [(0,), (1,)])
    with pytest.raises(TypeError, match=r"(?s)parameter 'hidden'.*Actual value: i64\[2,4\].*Float\[Tensor, 'B D'\]"):
        all_log_probs(torch.ones(2, 4, dtype=torch.long), randn(2, 4), tree)
    with pytest.raises(ValueError, match=r"node_vectors must have V - 1 = 2 rows"):
        all_log_probs(randn(2, 4), randn(5, 4), tree)
    with pytest.raises(ValueError, match=r"codes and nodes must hold one path for each of 2 words or more; found 0 codes and 0"):
        BinaryTree(codes=[], nodes=[])
    with pytest.raises(ValueError, match=r"codes and nodes must .*; found 2 codes and 3 paths"):
        BinaryTree(codes=[(0,), (1,)], nodes=[(0,), (0,), (0,)])
    with pytest.raises(ValueError, match=r"nodes\[1\] must hold one node for each bit of codes\[1\] \(1\); found 2"):
        BinaryTree(codes=[(0,), (1,)], nodes=[(0,), (0, 1)])
    assert path_log_prob(randn(0, 4), randn(2, 4), tree, torch.zeros(0, dtype=torch.long)).shape == (0,)
    assert isinstance(tree, BinaryTree)
