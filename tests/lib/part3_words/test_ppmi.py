"""Tests for lib/part3_words/ppmi.py.

References: a brute-force count of every pair of positions of a toy corpus, PMI from
its textbook definition in float64 loops, torch.linalg.svd for the factorisation, and
the expected count of skip-gram pairs from lib.part3_words.word2vec's shrunk windows.
"""

import math

import pytest
import torch

from lib.corpus import Vocabulary
from lib.part3_words.ppmi import cooccurrence_counts, pmi, shifted_ppmi, svd_vectors
from lib.part3_words.word2vec import EncodedCorpus, draw_windows, encode, skipgram_pairs


def toy_corpus():
    sentences = [["a", "b", "c", "a", "b"], ["c", "c", "a"], ["b", "d", "a", "c", "d", "b"]]
    vocab = Vocabulary.from_sentences(sentences)
    return encode(sentences, vocab), len(vocab)


def brute_force_counts(corpus, vocab_size, window):
    counts = torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    ids, sentence = corpus.ids.tolist(), corpus.sentence.tolist()
    for t in range(len(ids)):
        for u in range(len(ids)):
            d = abs(t - u)
            if 1 <= d <= window and sentence[t] == sentence[u]:
                counts[ids[t], ids[u]] += (window - d + 1) / window
    return counts


@pytest.mark.parametrize("window", [1, 2, 3, 5])
def test_counts_match_a_brute_force_loop_over_positions(window):
    corpus, vocab_size = toy_corpus()
    counts = cooccurrence_counts(corpus, vocab_size, window).to_dense()
    assert torch.allclose(counts, brute_force_counts(corpus, vocab_size, window), rtol=0, atol=1e-12)
    assert torch.allclose(counts, counts.T, rtol=0, atol=1e-12)  # the window is symmetric


def test_counts_are_the_expected_skipgram_pairs_under_shrunk_windows():
    # Average skip-gram's pairs over many draws of the windows: the mean count of each
    # (centre, context) converges to the weighted count.
    corpus, vocab_size = toy_corpus()
    generator = torch.Generator().manual_seed(0)
    draws, total = 4000, torch.zeros(vocab_size, vocab_size, dtype=torch.float64)
    for _ in range(draws):
        centres, contexts = skipgram_pairs(corpus, draw_windows(len(corpus), 3, generator=generator))
        total.index_put_((centres, contexts), torch.ones(centres.numel(), dtype=torch.float64), accumulate=True)
    expected = cooccurrence_counts(corpus, vocab_size, 3).to_dense()
    assert torch.allclose(total / draws, expected, atol=0.06)


def brute_force_pmi(counts, alpha):
    total = counts.sum()
    smoothed = counts.sum(0) ** alpha
    out = torch.full_like(counts, -math.inf)
    for w in range(counts.shape[0]):
        for o in range(counts.shape[1]):
            if counts[w, o] > 0:
                p_wo = counts[w, o] / total
                p_w = counts[w].sum() / total
                p_o = smoothed[o] / smoothed.sum()
                out[w, o] = math.log(p_wo / (p_w * p_o))
    return out


@pytest.mark.parametrize("alpha", [1.0, 0.75])
def test_pmi_matches_its_definition(alpha):
    corpus, vocab_size = toy_corpus()
    counts = cooccurrence_counts(corpus, vocab_size, 2)
    scores = pmi(counts, alpha)
    reference = brute_force_pmi(counts.to_dense(), alpha)
    seen = reference > -math.inf
    dense = scores.to_dense()
    assert torch.allclose(dense[seen], reference[seen], rtol=0, atol=1e-12)
    assert scores.values().numel() == int(seen.sum())  # no entry for unseen pairs
    if alpha == 1.0:  # log(#(w, o) |D| / (#(w) #(o)))
        c = counts.to_dense()
        plain = torch.log(c * c.sum() / (c.sum(1, keepdim=True) * c.sum(0)))
        assert torch.allclose(dense[seen], plain[seen], rtol=0, atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 5, 15])
def test_shifted_ppmi_is_max_of_pmi_minus_log_k_and_0(k):
    counts = torch.tensor([[4.0, 1.0, 0.0], [1.0, 0.0, 6.0], [2.0, 3.0, 1.0]])
    reference = (brute_force_pmi(counts.double(), 0.75) - math.log(k)).clamp(min=0)
    result = shifted_ppmi(counts, k, alpha=0.75)
    assert torch.allclose(result.to_dense(), reference, rtol=0, atol=1e-12)
    assert (result.values() > 0).all()  # zeros are not stored


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0])
def test_svd_vectors_match_torch_linalg_svd(p):
    generator = torch.Generator().manual_seed(1)
    matrix = torch.rand(30, 25, generator=generator, dtype=torch.float64)
    matrix[matrix < 0.5] = 0  # sparse-ish, like a PPMI matrix
    u, s, _ = torch.linalg.svd(matrix)
    reference = u[:, :6] * s[:6] ** p
    result = svd_vectors(matrix.to_sparse(), 6, p)
    signs = torch.sign((result * reference).sum(0))  # each column up to its sign
    assert torch.allclose(result * signs, reference, atol=1e-8)
    assert torch.equal(svd_vectors(matrix, 6, p), svd_vectors(matrix.to_sparse(), 6, p))  # deterministic


def test_bad_input_is_named():
    counts = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match="counts must be finite and >= 0"):
        pmi(-counts)
    with pytest.raises(ValueError, match="counts must hold at least one positive"):
        pmi(torch.zeros(2, 2))
    with pytest.raises(TypeError, match="counts"):  # the signature asks for (V, C)
        pmi(torch.ones(3))
    with pytest.raises(ValueError, match="dim must be below"):
        svd_vectors(counts, 2)
    with pytest.raises(TypeError, match="parameter 'p'"):  # Fraction: in [0, 1]
        svd_vectors(torch.ones(4, 4), 1, p=2.0)
    for zeros in (torch.zeros(4, 4), torch.zeros(4, 4).to_sparse()):  # ARPACK would fail
        with pytest.raises(ValueError, match="matrix must have a non-zero entry"):
            svd_vectors(zeros, 1)
    corpus, _ = toy_corpus()
    with pytest.raises(ValueError, match="vocab_size must exceed"):
        cooccurrence_counts(corpus, 2, 2)
