"""Tests for lib/part3_words/word2vec.py.

References: gensim (its subsampling probabilities, negative-sampling table,
vocabulary), torch.optim.SGD on sparse ``nn.Embedding`` rows, autograd in float64, brute-force
loops for the training examples, and cases worked out by hand.
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.corpus import Vocabulary, read_sentences
from lib.part3_words.tree_softmax import all_log_probs, huffman_tree
from lib.part3_words.word2vec import (
    EncodedCorpus,
    Word2Vec,
    Word2VecConfig,
    cbow_contexts,
    dot_products_per_step,
    draw_negatives,
    draw_windows,
    encode,
    hierarchical_softmax_loss,
    keep_probabilities,
    logistic_sgd_step,
    negative_sampling_loss,
    noise_distribution,
    skipgram_pairs,
    softmax_loss,
    subsample,
    train_gensim,
    train_word2vec,
    unigram_table,
)

FAST = settings(max_examples=30, deadline=None, database=None)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The steps are many small tensor operations: a second thread only adds contention."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def lee():
    sentences = read_sentences()  # gensim's Lee corpus, about 60,000 words
    return sentences, Vocabulary.from_sentences(sentences, min_count=5)


def toy_corpus(seed=0, sentences=160):
    """Two topics that never share a sentence: a model must put each topic's words together."""
    rng = np.random.default_rng(seed)
    topics = (["cat", "dog", "mouse", "horse", "cow"], ["red", "blue", "green", "yellow", "pink"])
    return [list(rng.choice(topics[i % 2], size=8)) for i in range(sentences)]


# ---------------------------------------------------------------------------
# The embedding matrix.
# ---------------------------------------------------------------------------


def test_embedding_matrix_of_10000_words_with_300_features_is_300_by_10000_and_a_lookup():
    # Note 004's example: 10,000 words, 300 features. In its column convention E is 300 x 10,000
    # (not 3000 features), and E o_w is column w; the book stores E transposed, one row per word.
    E = randn(300, 10_000)  # (d, |V|) as in the note
    w = 1234
    one_hot = F.one_hot(torch.tensor(w), 10_000).double()  # o_w
    torch.testing.assert_close(E @ one_hot, E[:, w])
    embedding = torch.nn.Embedding.from_pretrained(E.T)  # (|V|, d): the book's and PyTorch's layout
    torch.testing.assert_close(embedding(torch.tensor(w)), E[:, w])
    assert embedding.weight.shape == (10_000, 300)


# ---------------------------------------------------------------------------
# Subsampling and the noise distribution.
# ---------------------------------------------------------------------------


def test_keep_probabilities_by_hand():
    # total 1000, s = 0.01, so s * total = 10. Word of count 90: f/s = 9, keep = (3 + 1) / 9.
    counts = [900, 90, 10]
    keep = keep_probabilities(counts, 0.01)
    torch.testing.assert_close(keep, torch.tensor([(math.sqrt(90) + 1) / 90, 4 / 9, 1.0], dtype=torch.float64))
    paper = keep_probabilities(counts, 0.01, formula="paper")
    torch.testing.assert_close(paper, torch.tensor([1 / math.sqrt(90), 1 / 3, 1.0], dtype=torch.float64))
    assert keep_probabilities(counts, 0.0).tolist() == [1.0, 1.0, 1.0]


def test_keep_probabilities_equal_gensims_sample_int(lee):
    from gensim.models import Word2Vec as GensimWord2Vec

    sentences, vocab = lee
    for sample in (1e-3, 1e-4):
        model = GensimWord2Vec(min_count=5, sample=sample, workers=1)
        model.build_vocab(sentences)
        theirs = torch.tensor([model.wv.get_vecattr(w, "sample_int") / (2**32 - 1) for w in vocab.words],
                              dtype=torch.float64)
        torch.testing.assert_close(keep_probabilities(vocab.counts, sample), theirs, atol=1e-7, rtol=0)


@FAST
@given(st.lists(st.integers(1, 10_000), min_size=1, max_size=50), st.floats(1e-5, 0.5))
def test_keep_probabilities_word2vec_keeps_more_than_the_paper_and_falls_with_count(counts, sample):
    code, paper = keep_probabilities(counts, sample), keep_probabilities(counts, sample, formula="paper")
    assert bool(((0 < paper) & (paper <= code) & (code <= 1)).all())
    order = torch.argsort(torch.tensor(counts), stable=True)
    assert bool((code[order].diff() <= 1e-12).all())  # more frequent, kept less often


def test_noise_distribution_by_hand_and_equals_gensims_cum_table(lee):
    torch.testing.assert_close(noise_distribution([1, 16]), torch.tensor([1 / 9, 8 / 9], dtype=torch.float64))
    torch.testing.assert_close(noise_distribution([1, 3], exponent=1.0), torch.tensor([0.25, 0.75], dtype=torch.float64))
    torch.testing.assert_close(noise_distribution([1, 3], exponent=0.0), torch.tensor([0.5, 0.5], dtype=torch.float64))

    from gensim.models import Word2Vec as GensimWord2Vec

    sentences, vocab = lee
    model = GensimWord2Vec(min_count=5, workers=1)
    model.build_vocab(sentences)
    order = [model.wv.key_to_index[w] for w in vocab.words]
    theirs = np.diff(model.cum_table, prepend=0).astype(np.float64)[order] / model.cum_table[-1]
    torch.testing.assert_close(noise_distribution(vocab.counts), torch.from_numpy(theirs), atol=1e-8, rtol=0)


def test_unigram_table_holds_each_word_in_proportion():
    probabilities = noise_distribution([50, 20, 5, 1, 1])
    table = unigram_table(probabilities, size=10_000)
    share = torch.bincount(table, minlength=5).double() / 10_000
    torch.testing.assert_close(share, probabilities, atol=1e-4, rtol=0)
    draws = draw_negatives(table, (200_000,), torch.Generator().manual_seed(0))
    torch.testing.assert_close(torch.bincount(draws, minlength=5).double() / 200_000, probabilities,
                               atol=5e-3, rtol=0)


# ---------------------------------------------------------------------------
# Training examples against brute-force loops.
# ---------------------------------------------------------------------------


def test_encode_drops_unknown_words_and_numbers_sentences():
    vocab = Vocabulary.from_sentences([["a", "b", "a"], ["c", "a", "b"]], min_count=2)  # "c" is left out
    corpus = encode([["a", "b", "a"], ["c"], ["b", "z"]], vocab)
    assert corpus.ids.tolist() == [0, 1, 0, 1]
    assert corpus.sentence.tolist() == [0, 0, 0, 2]


def test_subsample_keeps_with_the_given_probability():
    corpus = EncodedCorpus(ids=torch.tensor([0, 1] * 50_000), sentence=torch.zeros(100_000, dtype=torch.long))
    kept = subsample(corpus, torch.tensor([1.0, 0.25], dtype=torch.float64), torch.Generator().manual_seed(0))
    counts = torch.bincount(kept.ids, minlength=2)
    assert counts[0] == 50_000
    assert abs(counts[1] / 50_000 - 0.25) < 0.01


def test_draw_windows_is_uniform_on_1_to_window():
    windows = draw_windows(60_000, 3, generator=torch.Generator().manual_seed(0))
    share = torch.bincount(windows, minlength=4).double() / 60_000
    torch.testing.assert_close(share, torch.tensor([0, 1 / 3, 1 / 3, 1 / 3], dtype=torch.float64), atol=0.01, rtol=0)
    assert draw_windows(5, 3, shrink=False).tolist() == [3] * 5


corpora = st.lists(st.tuples(st.integers(0, 6), st.integers(1, 4)), min_size=1, max_size=40)


def corpus_and_windows(rows, sentence_breaks):
    ids = torch.tensor([word for word, _ in rows])
    windows = torch.tensor([window for _, window in rows])
    sentence = torch.tensor([sum(1 for b in sentence_breaks if b <= i) for i in range(len(rows))])
    return EncodedCorpus(ids=ids, sentence=sentence), windows


@FAST
@given(corpora, st.sets(st.integers(1, 39), max_size=5))
def test_skipgram_pairs_equal_a_loop_over_positions(rows, breaks):
    corpus, windows = corpus_and_windows(rows, breaks)
    expected = []
    for i in range(len(corpus)):
        for j in range(len(corpus)):
            if 0 < abs(i - j) <= windows[i] and corpus.sentence[i] == corpus.sentence[j]:
                expected.append((int(corpus.ids[i]), int(corpus.ids[j])))
    centres, contexts = skipgram_pairs(corpus, windows)
    assert sorted(zip(centres.tolist(), contexts.tolist())) == sorted(expected)


@FAST
@given(corpora, st.sets(st.integers(1, 39), max_size=5))
def test_cbow_contexts_equal_a_loop_over_positions(rows, breaks):
    corpus, windows = corpus_and_windows(rows, breaks)
    expected = []
    for i in range(len(corpus)):
        context = [int(corpus.ids[j]) for j in range(len(corpus))
                   if 0 < abs(i - j) <= windows[i] and corpus.sentence[i] == corpus.sentence[j]]
        if context:
            expected.append((int(corpus.ids[i]), context))
    centres, contexts, mask = cbow_contexts(corpus, windows, 4)
    assert contexts.shape == mask.shape == (len(expected), 8)
    found = [(c, row[m].tolist()) for c, row, m in zip(centres.tolist(), contexts, mask)]
    assert found == expected


def test_pairs_by_hand():
    corpus = EncodedCorpus(ids=torch.tensor([10, 11, 12, 13]), sentence=torch.tensor([0, 0, 0, 1]))
    centres, contexts = skipgram_pairs(corpus, torch.tensor([1, 2, 1, 2]))
    assert sorted(zip(centres.tolist(), contexts.tolist())) == [(10, 11), (11, 10), (11, 12), (12, 11)]


# ---------------------------------------------------------------------------
# Objectives: the plain losses, and the batched step against autograd and torch.optim.
# ---------------------------------------------------------------------------


def test_negative_sampling_loss_by_hand():
    h, u = torch.tensor([1.0, 0.0]), torch.tensor([2.0, 5.0])  # u . h = 2
    noise = torch.tensor([[-1.0, 3.0], [0.0, 1.0]])  # u_k . h = -1, 0
    expected = -math.log(1 / (1 + math.exp(-2))) - math.log(1 / (1 + math.exp(-1))) - math.log(0.5)
    assert negative_sampling_loss(h, u, noise).item() == pytest.approx(expected)


def test_softmax_loss_is_cross_entropy():
    h, outputs = randn(4, seed=1), randn(7, 4, seed=2)
    assert softmax_loss(h, outputs, 3).item() == pytest.approx(F.cross_entropy((outputs @ h)[None], torch.tensor([3])).item())


@FAST
@given(st.lists(st.integers(1, 100), min_size=2, max_size=30), st.integers(0, 1000))
def test_hierarchical_softmax_probabilities_sum_to_one(counts, seed):
    tree = huffman_tree(counts)
    h, nodes = randn(5, seed=seed), randn(len(counts) - 1, 5, seed=seed + 1)
    losses = torch.stack([hierarchical_softmax_loss(h, nodes, tree, w) for w in range(len(counts))])
    assert torch.exp(-losses).sum().item() == pytest.approx(1.0)
    torch.testing.assert_close(-losses, all_log_probs(h[None], nodes, tree)[0])


def reference_loss(hidden, outputs, targets, labels, mask):
    """Σ over unmasked slots of -[y log σ(u.h) + (1 - y) log σ(-u.h)], one slot at a time."""
    total = hidden.new_zeros(())
    for b in range(targets.shape[0]):
        for m in range(targets.shape[1]):
            if mask[b, m]:
                logit = outputs[targets[b, m]] @ hidden[b]
                total = total - (F.logsigmoid(logit) if labels[b, m] == 1 else F.logsigmoid(-logit))
    return total


@FAST
@given(st.integers(0, 10_000), st.booleans())
def test_logistic_sgd_step_is_one_sgd_step_of_the_summed_loss(seed, repeat_rows):
    generator = torch.Generator().manual_seed(seed)
    batch, slots, rows, dim, lr = 5, 4, 3 if repeat_rows else 40, 3, 0.1
    hidden, outputs = randn(batch, dim, seed=seed), randn(rows, dim, seed=seed + 1)
    targets = torch.randint(rows, (batch, slots), generator=generator)  # rows repeat when rows = 3
    labels = torch.randint(2, (batch, slots), generator=generator).double()
    mask = torch.randint(2, (batch, slots), generator=generator).double()

    h, u = hidden.clone().requires_grad_(), outputs.clone().requires_grad_()
    expected_loss = reference_loss(h, u, targets, labels, mask)
    expected_loss.backward()

    updated = outputs.clone()
    loss, grad_hidden = logistic_sgd_step(hidden, updated, targets, labels, mask, lr)
    assert loss.item() == pytest.approx(expected_loss.item())
    torch.testing.assert_close(grad_hidden, h.grad)
    torch.testing.assert_close(updated, outputs - lr * u.grad)


def test_skipgram_step_equals_torch_sgd_on_sparse_embeddings():
    vocab = Vocabulary(words=list("abcdefgh"), counts=[8, 7, 6, 5, 4, 3, 2, 1])
    model = Word2Vec(vocab, Word2VecConfig(vector_size=4, negative=2, seed=3))
    model.output_vectors = torch.randn(8, 4, generator=torch.Generator().manual_seed(4))
    centres, contexts = torch.tensor([0, 1, 1, 5]), torch.tensor([2, 3, 3, 0])
    negatives = torch.tensor([[4, 6], [0, 7], [5, 4], [1, 3]])  # none equals its true word

    inputs = torch.nn.Embedding.from_pretrained(model.input_vectors.clone(), freeze=False, sparse=True)
    outputs = torch.nn.Embedding.from_pretrained(model.output_vectors.clone(), freeze=False, sparse=True)
    optimizer = torch.optim.SGD([inputs.weight, outputs.weight], lr=0.05)
    loss = sum(negative_sampling_loss(inputs(c), outputs(o), outputs(n)) for c, o, n in zip(centres, contexts, negatives))
    loss.backward()
    optimizer.step()

    ours = model.sgd_step(centres[:, None], contexts, 0.05, negatives=negatives)
    assert ours == pytest.approx(loss.item(), rel=1e-5)
    torch.testing.assert_close(model.input_vectors, inputs.weight.detach())
    torch.testing.assert_close(model.output_vectors, outputs.weight.detach())


def test_a_noise_word_equal_to_the_true_word_is_skipped():
    vocab = Vocabulary(words=list("abc"), counts=[3, 2, 1])
    model = Word2Vec(vocab, Word2VecConfig(vector_size=2, negative=2))
    targets, labels, mask = model.output_side(torch.tensor([1]), torch.tensor([[1, 2]]))
    assert targets.tolist() == [[1, 1, 2]]
    assert labels.tolist() == [[1.0, 0.0, 0.0]]
    assert mask.tolist() == [[1.0, 0.0, 1.0]]


def test_cbow_step_gives_every_context_word_the_whole_gradient_of_the_mean():
    vocab = Vocabulary(words=list("abcdefgh"), counts=[8, 7, 6, 5, 4, 3, 2, 1])
    model = Word2Vec(vocab, Word2VecConfig(architecture="cbow", vector_size=3, negative=2, seed=1))
    model.output_vectors = torch.randn(8, 3, generator=torch.Generator().manual_seed(2))
    contexts = torch.tensor([[0, 1, 2, 0], [3, 4, 0, 0]])  # (B, C); the zeros after the words are padding
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    centres, negatives = torch.tensor([5, 6]), torch.tensor([[7, 1], [2, 0]])

    vectors = model.input_vectors.clone().requires_grad_()
    outputs = model.output_vectors.clone().requires_grad_()
    loss = 0
    for row, keep, centre, noise in zip(contexts, mask, centres, negatives):
        hidden = vectors[row[keep]].mean(0)
        loss = loss + negative_sampling_loss(hidden, outputs[centre], outputs[noise])
    loss.backward()

    before = model.input_vectors.clone()
    model.sgd_step(contexts, centres, 0.1, input_mask=mask, negatives=negatives)
    # The true gradient reaches each of the C context words divided by C; word2vec adds C times that.
    count = torch.tensor([3, 3, 3, 2, 2, 1, 1, 1]).double()[:, None]
    torch.testing.assert_close(model.input_vectors.double(), (before - 0.1 * count * vectors.grad).double(),
                               atol=1e-6, rtol=1e-5)


def test_hierarchical_step_follows_the_huffman_path():
    vocab = Vocabulary(words=list("abcde"), counts=[10, 6, 3, 2, 1])
    model = Word2Vec(vocab, Word2VecConfig(objective="hierarchical", vector_size=3, seed=5))
    model.output_vectors = torch.randn(4, 3, generator=torch.Generator().manual_seed(6))
    centres, contexts = torch.tensor([0, 3, 4]), torch.tensor([4, 0, 1])

    vectors = model.input_vectors.clone().requires_grad_()
    nodes = model.output_vectors.clone().requires_grad_()
    loss = sum(hierarchical_softmax_loss(vectors[c], nodes, model.tree, int(o)) for c, o in zip(centres, contexts))
    loss.backward()
    ours = model.sgd_step(centres[:, None], contexts, 0.2)
    assert ours == pytest.approx(loss.item(), rel=1e-5)
    torch.testing.assert_close(model.input_vectors, (vectors - 0.2 * vectors.grad).detach())
    torch.testing.assert_close(model.output_vectors, (nodes - 0.2 * nodes.grad).detach())


def test_reference_losses_pass_gradcheck():
    h, u, noise = randn(3, seed=1).requires_grad_(), randn(3, seed=2).requires_grad_(), randn(4, 3, seed=3).requires_grad_()
    assert torch.autograd.gradcheck(negative_sampling_loss, (h, u, noise))
    outputs = randn(6, 3, seed=4).requires_grad_()
    assert torch.autograd.gradcheck(lambda h, o: softmax_loss(h, o, 2), (h, outputs))


# ---------------------------------------------------------------------------
# Training end to end.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("architecture", ["skip-gram", "cbow"])
@pytest.mark.parametrize("objective", ["negative", "hierarchical"])
def test_training_separates_two_topics_and_is_reproducible(architecture, objective):
    sentences = toy_corpus()
    vocab = Vocabulary.from_sentences(sentences)
    config = Word2VecConfig(architecture=architecture, objective=objective, vector_size=10, window=3,
                            epochs=6, sample=0.0, alpha=0.05, batch_size=64, seed=2)
    model, log = train_word2vec(sentences, vocab, config)
    assert log.losses[-1] < log.losses[0]
    vectors = model.word_vectors()
    assert vectors.similarity("cat", "dog") > vectors.similarity("cat", "blue") + 0.3
    assert vectors.similarity("red", "green") > vectors.similarity("red", "horse") + 0.3
    again, _ = train_word2vec(sentences, vocab, config)
    assert torch.equal(again.input_vectors, model.input_vectors)


def test_progress_bar_reports_the_epochs(capsys):
    sentences = toy_corpus(sentences=20)
    config = Word2VecConfig(vector_size=4, epochs=2, sample=0.0)
    train_word2vec(sentences, Vocabulary.from_sentences(sentences), config, progress=True)
    assert "2/2" in capsys.readouterr().err


def test_divergence_is_reported_not_returned_as_nan():
    sentences = toy_corpus()
    config = Word2VecConfig(vector_size=10, epochs=3, sample=0.0, alpha=0.5, batch_size=512)
    with pytest.raises(FloatingPointError, match=r"training diverged in epoch .*lower alpha \(found 0.5\)"):
        train_word2vec(sentences, Vocabulary.from_sentences(sentences), config)


def test_initial_vectors_are_uniform_in_plus_minus_one_over_d_like_gensims():
    vocab = Vocabulary.from_sentences(toy_corpus())
    vectors = Word2Vec(vocab, Word2VecConfig(vector_size=20)).input_vectors
    assert vectors.abs().max() < 1 / 20 and vectors.abs().max() > 0.9 / 20


def test_train_gensim_returns_vectors_in_our_order_and_rejects_another_vocabulary():
    sentences = toy_corpus()
    vocab = Vocabulary.from_sentences(sentences, min_count=1)
    config = Word2VecConfig(vector_size=8, window=3, epochs=3, sample=0.0)
    vectors, seconds = train_gensim(sentences, vocab, config, min_count=1)
    assert vectors.vectors.shape == (10, 8) and seconds > 0
    assert vectors.similarity("cat", "dog") > vectors.similarity("cat", "blue")
    with pytest.raises(ValueError, match="gensim's vocabulary differs"):
        train_gensim(sentences, Vocabulary.from_sentences(sentences[:2]), config, min_count=1)


# ---------------------------------------------------------------------------
# The cost of a step.
# ---------------------------------------------------------------------------


def test_dot_products_per_step():
    counts = [5, 1, 1, 2]  # Huffman depths 1, 3, 3, 2 (see tests/lib/part3_words/test_tree_softmax.py)
    assert dot_products_per_step("softmax", counts) == 4
    assert dot_products_per_step("negative", counts, negative=5) == 6
    assert dot_products_per_step("hierarchical", counts) == pytest.approx((5 * 1 + 1 * 3 + 1 * 3 + 2 * 2) / 9)


# ---------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------


def two_words():
    return Vocabulary(words=list("ab"), counts=[1, 1])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: Word2VecConfig(architecture="sg"), TypeError,
         r"(?s)parameter 'architecture'.*Actual value: 'sg'.*Literal\['skip-gram', 'cbow'\]"),
        (lambda: Word2VecConfig(window=0), TypeError, r"(?s)parameter 'window'.*Actual value: 0.*is_at_least_1"),
        (lambda: Word2VecConfig(sample=2.0), TypeError, r"(?s)parameter 'sample'.*Actual value: 2.0.*is_a_fraction"),
        (lambda: Word2VecConfig(ns_exponent=800.0), TypeError,
         r"(?s)parameter 'ns_exponent'.*Actual value: 800.0.*is_at_most_10_in_size"),
        (lambda: Word2VecConfig(alpha=0.01, min_alpha=0.1), ValueError,
         r"min_alpha must be at most alpha \(0.01\); found 0.1"),
        (lambda: keep_probabilities([3, 0], 1e-3), TypeError, r"(?s)parameter 'counts'.*Actual value: \[3, 0\].*is_at_least_1"),
        (lambda: keep_probabilities(torch.tensor([3, 0]), 1e-3), TypeError,
         r"(?s)parameter 'counts'.*Actual value: i64\[2\].*are_positive_counts"),
        (lambda: keep_probabilities(torch.tensor([3.0, math.inf]), 1e-3), TypeError,
         r"(?s)parameter 'counts'.*Actual value: f32\[2\].*are_positive_counts"),
        (lambda: noise_distribution(torch.tensor([3.0, math.inf])), TypeError,
         r"(?s)parameter 'counts'.*Actual value: f32\[2\].*are_positive_counts"),
        (lambda: dot_products_per_step("negative", torch.tensor([3.0, math.nan])), TypeError,
         r"(?s)parameter 'counts'.*Actual value: f32\[2\].*are_positive_counts"),
        (lambda: dot_products_per_step("hierarchical", torch.tensor([1.5, 2.5])), ValueError,
         "counts must be whole numbers for the Huffman tree; found 1.5"),
        (lambda: encode("a b", two_words()), TypeError, "sentences must be a list of lists of words; found str"),
        (lambda: train_word2vec("a b", two_words()), TypeError,
         "sentences must be a list of lists of words; found str"),
        (lambda: noise_distribution([]), TypeError, r"(?s)parameter 'counts'.*Actual value: \[\].*are_positive_counts"),
        (lambda: keep_probabilities([3], 1e-3, formula="gensim"), TypeError,
         r"(?s)parameter 'formula'.*Actual value: 'gensim'.*Literal\['word2vec', 'paper'\]"),
        (lambda: keep_probabilities("abc", 1e-3), TypeError, r"(?s)parameter 'counts'.*Actual value: 'abc'"),
        (lambda: skipgram_pairs(EncodedCorpus(torch.tensor([1, 2]), torch.tensor([0, 0])), torch.tensor([1])),
         ValueError, r"windows must have shape \(2,\), one per position of corpus; found \(1,\)"),
        (lambda: cbow_contexts(EncodedCorpus(torch.tensor([1, 2]), torch.tensor([0, 0])), torch.tensor([1, 0]), 2),
         ValueError, "windows must be 1 to window=2; found 0 to 1"),
        (lambda: cbow_contexts(EncodedCorpus(torch.tensor([1, 2]), torch.tensor([0, 0])), torch.tensor([3, 1]), 1),
         ValueError, "windows must be 1 to window=1; found 1 to 3"),
        (lambda: cbow_contexts(EncodedCorpus(torch.tensor([1, 2]), torch.tensor([0, 0])), torch.tensor([1, 1]), 10**13),
         ValueError, r"len\(corpus\) \* 2 \* window must be at most 2147483648; found 2 \* 2 \* 10000000000000"),
        (lambda: EncodedCorpus(torch.tensor([1, -1]), torch.tensor([0, 0])),  # was accepted: ids index tables
         ValueError, "^ids must be >= 0; found -1"),
        (lambda: EncodedCorpus(torch.tensor([1, 0]), torch.tensor([0, -1])), ValueError, "^sentence must be >= 0; found -1"),
        (lambda: subsample(EncodedCorpus(torch.tensor([1, 0]), torch.tensor([0, 0])), torch.full((3,), math.nan)),
         ValueError, r"keep must be probabilities in \[0, 1\]; found nan to nan"),
        (lambda: subsample(EncodedCorpus(torch.tensor([1, 5]), torch.tensor([0, 0])), torch.ones(3)),
         ValueError, r"keep must hold a probability for every word id of corpus \(up to 5\); found 3"),
        (lambda: softmax_loss(torch.ones(2), torch.ones(3, 2), 3), ValueError,
         "target must be a row of output_vectors, below 3; found 3"),
        (lambda: softmax_loss(torch.ones(2), torch.ones(3, 2).double(), 0), TypeError,
         r"output_vectors must have the dtype of hidden \(torch.float32\); found torch.float64"),
        (lambda: negative_sampling_loss(torch.ones(2), torch.ones(3), torch.ones(4, 2)), TypeError,
         r"(?s)parameter 'target_vector'.*Actual value: f32\[3\]"),
        (lambda: hierarchical_softmax_loss(None, torch.ones(1, 2), huffman_tree([1, 1]), 0), TypeError,
         r"(?s)parameter 'hidden'.*Actual value: None"),
        (lambda: unigram_table(torch.zeros(0)), ValueError, "probabilities must hold one probability per word"),
        (lambda: unigram_table(torch.tensor([0.5, -0.5])), ValueError,
         "probabilities must be finite, non-negative, with a positive sum; found -0.5 to 0.5, sum 0.0"),
        (lambda: unigram_table(torch.tensor([math.nan, 1.0])), ValueError,
         "probabilities must be finite, non-negative, with a positive sum; found nan to nan, sum nan"),
        (lambda: unigram_table(torch.tensor([0.0, 0.0])), ValueError,
         "probabilities must be finite, non-negative, with a positive sum; found 0.0 to 0.0, sum 0.0"),
        (lambda: draw_negatives(torch.tensor([-1, -1]), (2,)), ValueError, "table must hold word ids >= 0; found -1"),
        (lambda: draw_negatives(None, (2,)), TypeError, r"(?s)parameter 'table'.*Actual value: None"),
        (lambda: draw_negatives(torch.zeros(0, dtype=torch.long), (2,)), ValueError, "table must hold at least one slot"),
        (lambda: draw_negatives(torch.zeros(3, dtype=torch.long), (2, -1)), TypeError,
         r"(?s)parameter 'shape'.*Actual value: \(2, -1\)"),
        (lambda: logistic_sgd_step(torch.ones(1, 2), torch.zeros(3, 2), torch.tensor([[0, 3]]), torch.ones(1, 2),
                                   torch.ones(1, 2), 0.1), ValueError,
         "targets must be rows of output_vectors, 0 to 2; found 0 to 3"),
        (lambda: logistic_sgd_step(torch.ones(1, 2), torch.zeros(3, 2), torch.tensor([[0, 1]]), torch.ones(1, 2),
                                   torch.ones(1, 2), -0.1), TypeError, r"(?s)parameter 'lr'.*Actual value: -0.1.*is_at_least_0"),
        (lambda: logistic_sgd_step(torch.ones(1, 2), torch.zeros(3, 2), torch.tensor([[0, 1]]), torch.ones(1, 2).double(),
                                   torch.ones(1, 2), 0.1), TypeError, "labels must have the dtype of hidden"),
        (lambda: train_word2vec([["a"]], Vocabulary(words=["a"], counts=[1])), ValueError,
         "vocab must hold at least 2 words; found 1"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(vector_size=10**12)), ValueError,
         r"vocab size times vector_size must be at most 2147483648; found 2 \* 1000000000000"),
        (lambda: Word2Vec(two_words(), Word2VecConfig()).sgd_step(torch.tensor([[0]]), torch.tensor([1]), 0.1),
         ValueError, r"negatives of shape \(B, K\) = \(1, 5\)"),
        (lambda: Word2Vec(two_words(), Word2VecConfig()).sgd_step(
            torch.tensor([[0, 1]]), torch.tensor([1]), 0.1, negatives=torch.zeros(1, 5, dtype=torch.long)),
         ValueError, r"inputs must be \(B, 1\) centre words without an input_mask \(skip-gram\); found \(1, 2\)"),
        (lambda: Word2Vec(two_words(), Word2VecConfig()).sgd_step(
            torch.tensor([[0]]), torch.tensor([1, 0]), 0.1, negatives=torch.zeros(1, 5, dtype=torch.long)),
         TypeError, r"(?s)parameter 'predict'.*Actual value: i64\[2\]"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=1)).sgd_step(
            torch.tensor([[2]]), torch.tensor([1]), 0.1, negatives=torch.zeros(1, 1, dtype=torch.long)),
         ValueError, "inputs must be word ids, 0 to 1; found 2 to 2"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=1)).sgd_step(
            torch.tensor([[-1]]), torch.tensor([1]), 0.1, negatives=torch.zeros(1, 1, dtype=torch.long)),
         ValueError, "inputs must be word ids, 0 to 1; found -1 to -1"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=1)).sgd_step(
            torch.tensor([[0]]), torch.tensor([9]), 0.1, negatives=torch.zeros(1, 1, dtype=torch.long)),
         ValueError, "predict must be word ids, 0 to 1; found 9 to 9"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=1)).sgd_step(
            torch.tensor([[0]]), torch.tensor([1]), 0.1, negatives=torch.tensor([[-1]])),
         ValueError, "negatives must be word ids, 0 to 1; found -1 to -1"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(objective="hierarchical")).sgd_step(
            torch.tensor([[0]]), torch.tensor([-1]), 0.1),
         ValueError, "predict must be word ids, 0 to 1; found -1 to -1"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(objective="hierarchical")).sgd_step(
            torch.tensor([[0]]), torch.tensor([9]), 0.1),
         ValueError, "predict must be word ids, 0 to 1; found 9 to 9"),
        # output_side on its own returned rows for them (-1 the last word's, 9 past the table)
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=1)).output_side(torch.tensor([-1]), torch.tensor([[0]])),
         ValueError, "predict must be word ids, 0 to 1; found -1 to -1"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=1)).output_side(torch.tensor([0]), torch.tensor([[10**6]])),
         ValueError, "negatives must be word ids, 0 to 1; found 1000000 to 1000000"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(negative=2)).output_side(torch.tensor([1]), torch.tensor([[0, -1]])),
         ValueError, "negatives must be word ids, 0 to 1; found -1 to 0"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(objective="hierarchical")).output_side(torch.tensor([2])),
         ValueError, "predict must be word ids, 0 to 1; found 2 to 2"),
        (lambda: train_gensim([], two_words(), Word2VecConfig(), min_count=1),  # gensim: "build vocabulary"
         ValueError, "sentences must hold at least one word; found none"),
        (lambda: train_gensim([[], []], two_words(), Word2VecConfig(), min_count=1),
         ValueError, "sentences must hold at least one word; found none"),
        (lambda: Word2Vec(two_words(), Word2VecConfig(architecture="cbow", negative=1)).sgd_step(
            torch.tensor([[0, 1], [0, 1]]), torch.tensor([0, 1]), 0.1, torch.tensor([[True, False], [False, False]]),
            torch.zeros(2, 1, dtype=torch.long)),
         ValueError, "input_mask must hold a True in every row; row 1 has none"),
    ],
)
def test_bad_input_is_rejected_with_the_reason(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_huge_windows_do_not_loop_past_the_corpus():
    corpus = EncodedCorpus(ids=torch.tensor([0, 1, 2]), sentence=torch.zeros(3, dtype=torch.long))
    centres, contexts = skipgram_pairs(corpus, torch.full((3,), 10**12))
    assert len(centres) == 6 and len(contexts) == 6
