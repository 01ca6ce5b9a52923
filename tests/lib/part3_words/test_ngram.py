"""Tests for lib/part3_words/ngram.py.

References: nltk.lm.Lidstone (same padded n-grams, same vocabulary) for the
n-gram probabilities and perplexity; the add-delta formula computed by hand and
by brute force; hand-computed perplexities. Kneser-Ney and absolute discounting:
nltk.lm.KneserNeyInterpolated and AbsoluteDiscountingInterpolated fed the same
n-grams, a hand-computed value, and every distribution summed over the vocabulary;
interpolation weights: the held-out likelihood maximised by gradient ascent.
"""

import math
import re
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.lm import AbsoluteDiscountingInterpolated, KneserNeyInterpolated, Laplace, Lidstone
from nltk.lm.preprocessing import pad_both_ends, padded_everygram_pipeline
from nltk.util import ngrams as nltk_ngrams

from lib.corpus import read_sentences
from lib.part3_words.decoding import sample
from lib.part3_words.ngram import (BOS, EOS, UNK, KneserNeyModel, LinearInterpolation, NGramModel, _level_counts,
                                  add_delta_log_prob, interpolation_weights, ngrams, pad, perplexity, unseen_fraction)

FAST = settings(max_examples=25, deadline=None, database=None)
TOY = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"], ["the", "cat", "ran"]]


@pytest.fixture(scope="module")
def lee():
    sentences = read_sentences(max_sentences=60)
    return sentences[:45], sentences[45:]


# ---- padding and n-grams -------------------------------------------------------------------
def test_pad_and_ngrams_by_hand():
    assert pad(["a", "b"], 3) == [BOS, BOS, "a", "b", EOS]
    assert pad(["a", "b"], 1) == ["a", "b", EOS]
    assert pad([], 2) == [BOS, EOS]
    assert ngrams(pad(["a", "b"], 3), 3) == [(BOS, BOS, "a"), (BOS, "a", "b"), ("a", "b", EOS)]
    assert ngrams(["a"], 2) == []


def test_our_padding_predicts_one_end_symbol_where_nltk_predicts_n_minus_1():
    # Same left padding; nltk pads n - 1 end symbols, we pad one (one prediction per token).
    ours = pad(["a", "b"], 3)
    theirs = list(pad_both_ends(["a", "b"], 3))
    assert theirs[: len(ours)] == ours and theirs[len(ours):] == [EOS]


def test_padding_and_ngram_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'sentence'.*Actual value: 'the cat'.*is_a_list_of_words"):
        pad("the cat", 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'order'.*Actual value: 0.*is_at_least_1"):
        pad(["a"], 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'order'.*Actual value: 101.*is_at_most_100"):
        pad(["a"], 101)
    with pytest.raises(TypeError, match=r"(?s)parameter 'order'.*Actual value: 2.0.*Integral"):
        ngrams(["a"], 2.0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: \['a', 3\].*is_a_list_of_words"):
        ngrams(["a", 3], 1)


# ---- agreement with nltk ---------------------------------------------------------------------
@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("delta", [1.0, 0.1, 0.003])
def test_ngram_model_equals_nltk_lidstone(lee, order, delta):
    train, test = lee
    padded, flat = padded_everygram_pipeline(order, train)
    reference = Lidstone(delta, order)
    reference.fit(padded, flat)
    # Ours counts the same highest-order n-grams of nltk's padding, with nltk's vocabulary (<UNK> included).
    grams = [g for s in train for g in nltk_ngrams(pad_both_ends(s, order), order)]
    model = NGramModel.from_ngrams(grams, list(reference.vocab), delta, unk="<UNK>")
    asked = [g for s in test for g in nltk_ngrams(pad_both_ends(s, order), order)]
    assert any(w not in reference.vocab for g in asked for w in g)  # unknown words are exercised
    expected = torch.tensor([reference.score(g[-1], g[:-1]) for g in asked], dtype=torch.float64)
    torch.testing.assert_close(model.ngram_log_probs(asked).exp(), expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(torch.tensor([model.prob(g[-1], g[:-1]) for g in asked], dtype=torch.float64),
                               expected, rtol=1e-12, atol=0)
    # nltk's perplexity is 2 ** (mean of -log2 p); ours in bits and in nats gives the same number.
    log2 = model.ngram_log_probs(asked) / math.log(2)
    assert perplexity(log2, base=2) == pytest.approx(reference.perplexity(asked), rel=1e-12)
    assert perplexity(model.ngram_log_probs(asked)) == pytest.approx(reference.perplexity(asked), rel=1e-12)


def test_add_one_is_nltk_laplace(lee):
    train, test = lee
    padded, flat = padded_everygram_pipeline(2, train)
    reference = Laplace(2)
    reference.fit(padded, flat)
    grams = [g for s in train for g in nltk_ngrams(pad_both_ends(s, 2), 2)]
    model = NGramModel.from_ngrams(grams, list(reference.vocab), 1.0, unk="<UNK>")
    asked = [g for s in test for g in nltk_ngrams(pad_both_ends(s, 2), 2)][:200]
    for gram in asked:
        assert model.prob(gram[-1], gram[:-1]) == pytest.approx(reference.score(gram[-1], gram[:-1]), rel=1e-12)


# ---- the add-delta formula ----------------------------------------------------------------------
def test_add_delta_by_hand():
    # m(h, w) = 2, m(h) = 5, |V| = 4: (2 + 0.5) / (5 + 0.5 * 4) = 2.5 / 7.
    value = add_delta_log_prob(torch.tensor([2.0]), torch.tensor([5.0]), 0.5, 4)
    assert math.exp(value.item()) == pytest.approx(2.5 / 7, rel=1e-15)
    # Maximum likelihood (delta = 0): unseen pairs and unseen contexts get probability 0.
    mle = add_delta_log_prob(torch.tensor([0.0, 3.0, 0.0]), torch.tensor([5.0, 6.0, 0.0]), 0.0, 4)
    assert mle[0] == -math.inf and mle[1].exp().item() == pytest.approx(0.5) and mle[2] == -math.inf


def test_model_on_toy_corpus_by_hand():
    model = NGramModel.fit(TOY, order=2, delta=0.5)
    # Vocabulary: </s>, <unk> and 6 words -> |V| = 8. "the" followed <s> 3 times out of 4 sentences.
    assert model.vocab_size == 8 and model.vocabulary[:2] == (EOS, UNK)
    assert model.prob("the", [BOS]) == pytest.approx((3 + 0.5) / (4 + 0.5 * 8))
    assert model.prob("sat", ["cat"]) == pytest.approx((1 + 0.5) / (3 + 0.5 * 8))  # cat: sat, ran, ran
    assert model.prob("zebra", ["cat"]) == pytest.approx(0.5 / (3 + 0.5 * 8))  # read as <unk>
    assert model.prob("cat", ["zebra"]) == pytest.approx(1 / 8)  # unseen context: uniform
    # The chain rule: a sentence's log-probability is the sum over its tokens, </s> included.
    tokens = model.token_log_probs([["the", "cat", "sat"]])
    by_hand = sum(math.log(model.prob(w, [h])) for h, w in [(BOS, "the"), ("the", "cat"), ("cat", "sat"),
                                                             ("sat", EOS)])
    assert len(tokens) == 4 and tokens.sum().item() == pytest.approx(by_hand, rel=1e-12)


@FAST
@given(st.integers(1, 3), st.floats(0.001, 3.0), st.lists(st.lists(st.sampled_from("abcde"), max_size=6),
                                                         min_size=1, max_size=8))
def test_every_next_word_distribution_sums_to_one(order, delta, sentences):
    model = NGramModel.fit(sentences, order, delta)
    contexts = {g[:-1] for s in sentences for g in ngrams(pad(s, order), order)} | {("z",) * (order - 1)}
    for context in contexts:
        total = sum(model.prob(w, context) for w in model.vocabulary)
        assert total == pytest.approx(1.0, abs=1e-12)
        torch.testing.assert_close(model.next_log_probs(context).exp().sum(), torch.tensor(1.0, dtype=torch.float64))


@FAST
@given(st.lists(st.lists(st.sampled_from("abc"), max_size=5), min_size=1, max_size=6),
       st.lists(st.floats(0.5, 1.5), min_size=5, max_size=5))
def test_unigram_mle_is_relative_frequency_and_beats_any_other_distribution(sentences, weights):
    model = NGramModel.fit(sentences, order=1, delta=0.0)
    counts = Counter(w for s in sentences for w in s + [EOS])
    total = sum(counts.values())
    for word in model.vocabulary:
        assert model.prob(word) == pytest.approx(counts[word] / total)  # theta_k = m_k / sum m
    # Any other distribution theta' has a lower log-likelihood sum_k m_k log theta'_k.
    words = sorted(counts)
    other = torch.tensor(weights[: len(words)], dtype=torch.float64)
    other = other / other.sum()
    m = torch.tensor([counts[w] for w in words], dtype=torch.float64)
    mle = m / m.sum()
    assert float((m * mle.log()).sum()) >= float((m * other.log()).sum()) - 1e-12


def test_fast_and_plain_paths_agree(lee):
    train, test = lee
    model = NGramModel.fit(train, order=3, delta=0.01)
    grams = model.test_ngrams(test)
    plain = torch.tensor([model.log_prob(g[-1], g[:-1]) for g in grams], dtype=torch.float64)
    torch.testing.assert_close(model.ngram_log_probs(grams), plain, rtol=1e-12, atol=1e-12)
    assert model.perplexity(test) == pytest.approx(math.exp(-plain.mean().item()), rel=1e-12)


def test_mle_gives_unseen_ngrams_probability_zero_and_infinite_perplexity():
    model = NGramModel.fit(TOY, order=2, delta=0.0)
    assert model.log_prob("ran", ["dog"]) == -math.inf
    assert model.perplexity([["the", "dog", "ran"]]) == math.inf
    assert math.isfinite(model.with_delta(0.1).perplexity([["the", "dog", "ran"]]))


def test_step_function_samples_from_the_model():
    model = NGramModel.fit(TOY, order=2, delta=0.1)
    cat, sat = model.vocabulary.index("cat"), model.vocabulary.index("sat")
    step = model.step(torch.tensor([[model.bos_id, sat, cat], [model.bos_id, cat, sat]]))
    torch.testing.assert_close(step[0], model.next_log_probs(["cat"]))
    torch.testing.assert_close(step[1], model.next_log_probs(["sat"]))
    torch.testing.assert_close(model.step(torch.tensor([[model.bos_id]]))[0], model.next_log_probs([BOS]))
    # First words of 4000 samples follow p(. | <s>) within 4 standard errors.
    drawn = sample(model.step, model.bos_id, model.eos_id, max_len=1, num_samples=4000,
                   generator=torch.Generator().manual_seed(0))
    frequencies = torch.bincount(torch.tensor([t[0] for t, _ in drawn]), minlength=model.vocab_size) / 4000
    expected = model.next_log_probs([BOS]).exp().float()
    assert ((frequencies - expected).abs() <= 4 * (expected * (1 - expected) / 4000).sqrt() + 1e-3).all()


@pytest.mark.parametrize("bad", [-1, "beyond"])
def test_step_refuses_ids_outside_the_vocabulary_and_bos(bad):
    model = NGramModel.fit(TOY, order=2, delta=0.1)
    wrong = model.bos_id + 1 if bad == "beyond" else bad  # -1 once read as <s>, silently
    with pytest.raises(ValueError, match=rf"prefixes must hold ids in \[0, {model.bos_id}\]; found"):
        model.step(torch.tensor([[model.bos_id, wrong]]))
    assert model.decode([model.vocabulary.index("the"), model.eos_id, 3]) == ["the"]


def test_ngram_model_errors():
    with pytest.raises(ValueError, match="unk must be one of the vocabulary"):
        NGramModel(2, ("a", EOS), unk="<unk>")
    with pytest.raises(ValueError, match="words must be in the vocabulary, as the model has no unknown-word token; found 'zebra'"):
        NGramModel.fit(TOY, 2, unk=None).prob("zebra", ["the"])
    with pytest.raises(TypeError, match=r"(?s)parameter 'delta'.*Actual value: -1.0.*is_at_least_0"):
        NGramModel.fit(TOY, 2, delta=-1.0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'delta'.*Actual value: nan.*is_at_least_0"):
        NGramModel(2, ("a", EOS), delta=math.nan, unk=None)
    with pytest.raises(ValueError, match=r"vocabulary must be a non-empty sequence of distinct words; found 2 words, 1 distinct"):
        NGramModel(2, ("a", "a"), unk=None)
    with pytest.raises(ValueError, match=r"ids must be below the vocabulary's size 2; found 2"):
        NGramModel(2, ("a", EOS), unk=None).decode([0, 2])
    with pytest.raises(ValueError, match="context must hold 2 words"):
        NGramModel.fit(TOY, 3).prob("cat", ["the"])
    with pytest.raises(ValueError, match="n-grams of one length"):
        NGramModel.from_ngrams([("a", "b"), ("a",)], ["a", "b"])
    with pytest.raises(ValueError, match="grams must each have 2 words; found \\('a', 'b', 'c'\\)"):
        NGramModel.fit(TOY, 2).ngram_log_probs([("a", "b", "c")])
    with pytest.raises(TypeError, match=r"(?s)parameter 'sentences'.*Actual value: 'the cat'.*is_sentences"):
        NGramModel.fit("the cat", 2)
    with pytest.raises(ValueError, match="counts must satisfy 0 <= pair_counts <= context_counts"):
        add_delta_log_prob(torch.tensor([3.0]), torch.tensor([2.0]), 1.0, 4)
    with pytest.raises(ValueError, match=r"context_counts must broadcast against pair_counts \(3,\); found \(2,\)"):
        add_delta_log_prob(torch.ones(3), torch.ones(2), 1.0, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'pair_counts'.*Actual value: bool\[3\]"):
        add_delta_log_prob(torch.ones(3, dtype=torch.bool), torch.ones(3), 1.0, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'vocab_size'.*Actual value: 0.*is_at_least_1"):
        add_delta_log_prob(torch.ones(3), torch.ones(3), 1.0, 0)


def test_unseen_fraction_by_hand_and_growing_with_order(lee):
    # Test n-grams of ["the", "cat"] at order 2: (<s>, the) seen, (the, cat) seen, (cat, </s>) unseen.
    assert unseen_fraction(TOY, [["the", "cat"]], 2) == pytest.approx(1 / 3)
    assert unseen_fraction(TOY, [["the", "cat", "sat"]], 1) == 0.0
    train, test = lee
    fractions = [unseen_fraction(train, test, n) for n in (1, 2, 3, 4)]
    assert fractions == sorted(fractions) and fractions[-1] > 0.8


# ---- perplexity --------------------------------------------------------------------------------
def test_perplexity_by_hand():
    # Probabilities 1/2 and 1/4: (1/8) ** (-1/2) = 2 * sqrt(2), in any base.
    probs = torch.tensor([0.5, 0.25], dtype=torch.float64)
    assert perplexity(probs.log()) == pytest.approx(2 * math.sqrt(2), rel=1e-14)
    assert perplexity(probs.log2(), base=2) == pytest.approx(2 * math.sqrt(2), rel=1e-14)
    assert perplexity(probs.log10(), base=10) == pytest.approx(2 * math.sqrt(2), rel=1e-14)
    assert perplexity(torch.tensor([0.0])) == 1.0  # certain and right
    assert perplexity(torch.tensor([-math.inf, 0.0])) == math.inf


@pytest.mark.parametrize("vocab_size", [2, 7, 1000])
def test_uniform_model_has_perplexity_vocab_size(vocab_size):
    log_probs = torch.full((37,), -math.log(vocab_size), dtype=torch.float64)
    assert perplexity(log_probs) == pytest.approx(vocab_size, rel=1e-12)
    assert perplexity(log_probs / math.log(2), base=2) == pytest.approx(vocab_size, rel=1e-12)


@FAST
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=20))
def test_perplexity_is_inverse_geometric_mean(probs):
    p = torch.tensor(probs, dtype=torch.float64)
    assert perplexity(p.log()) == pytest.approx(float(p.prod() ** (-1 / len(p))), rel=1e-9)
    assert perplexity(p.log2(), base=2) == pytest.approx(perplexity(p.log()), rel=1e-12)


def test_perplexity_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_probs'.*Actual value: \[0.5\].*Float\[Tensor"):
        perplexity([0.5])
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_probs'.*Actual value: i64\[1\].*Float\[Tensor"):
        perplexity(torch.tensor([-1]))
    with pytest.raises(ValueError, match="at least one token"):
        perplexity(torch.tensor([]))
    with pytest.raises(ValueError, match="found NaN or \\+inf"):
        perplexity(torch.tensor([math.nan]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'base'.*Actual value: 1.*is_above_1"):
        perplexity(torch.tensor([-1.0]), base=1)


# ---------------------------------------------------------------------------
# Bad input never passes silently (issue 22).
# ---------------------------------------------------------------------------


def test_perplexity_beyond_the_largest_float_is_inf_not_an_overflow_error():
    assert perplexity(torch.tensor([-800.0, -900.0])) == math.inf
    assert perplexity(torch.tensor([-709.0])) == pytest.approx(math.exp(709.0), rel=1e-12)  # still finite
    assert perplexity(torch.tensor([-1100.0]), base=2) == math.inf  # 2^1100 > 1.8e308
    assert perplexity(torch.tensor([-1000.0]), base=2) == pytest.approx(2.0**1000, rel=1e-12)


def test_a_string_where_words_are_expected_is_a_type_error():
    model = NGramModel.fit(TOY, 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'context'.*Actual value: 'the'.*is_a_list_of_words"):
        model.prob("cat", "the")  # would be read as the characters t, h, e
    with pytest.raises(TypeError, match=r"(?s)parameter 'sentences'.*Actual value: \['the cat', 'a dog'\].*is_sentences"):
        NGramModel.fit(["the cat", "a dog"], 2)  # would train a character model
    with pytest.raises(TypeError, match=r"(?s)parameter 'sentences'.*Actual value: 'the cat'.*is_sentences"):
        NGramModel.fit("the cat", 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'test'.*Actual value: \[\['the'\], \[1, 2\]\].*is_sentences"):
        unseen_fraction(TOY, [["the"], [1, 2]], 2)
    # beartype alone would look at one sentence, drawn at random: every one is read.
    many = [["the", "cat"]] * 50 + [["a", 7]]
    with pytest.raises(TypeError, match=r"(?s)parameter 'sentences'.*is_sentences"):
        NGramModel.fit(many, 2)
    assert model.prob("cat", ("the",)) == model.prob("cat", ["the"])


def test_referee_round_refusals():
    model = NGramModel.fit(TOY, order=2, delta=0.1)
    # One bad n-gram among many: beartype alone samples one item, each(Words) reads all.
    for _ in range(20):
        with pytest.raises(TypeError, match=r"(?s)parameter 'grams'.*is_a_list_of_words"):
            model.ngram_log_probs([("the", "cat")] * 20 + [(1, 2)])
        with pytest.raises(TypeError, match=r"(?s)parameter 'grams'.*is_a_list_of_words"):
            model.pair_counts([("the", "cat")] * 20 + [(1, 2)])
    with pytest.raises(TypeError, match=r"grams must each be a sequence of str words; found \(1, 2\)"):
        NGramModel.from_ngrams(iter([("a", "b"), (1, 2)]), ["a", "b", EOS, UNK])
    with pytest.raises(ValueError, match=r"log_probs must be log-probabilities \(<= 0\); found values up to 0.5"):
        perplexity(torch.tensor([-1.0, 0.5]))
    assert perplexity(torch.tensor([1e-7])) == pytest.approx(1.0)  # float noise passes
    with pytest.raises(ValueError, match=r"pair_counts nan..nan, context_counts 3.0..3.0"):
        add_delta_log_prob(torch.tensor([math.nan]), torch.tensor([3.0]), 1.0, 4)
    with pytest.raises(ValueError, match=r"pair_counts 1.0..1.0, context_counts nan..nan"):
        add_delta_log_prob(torch.tensor([1.0]), torch.tensor([math.nan]), 1.0, 4)
    with pytest.raises(ValueError, match=r"pair_counts 3.0..3.0, context_counts 2.0..2.0"):
        add_delta_log_prob(torch.tensor([3.0]), torch.tensor([2.0]), 1.0, 4)
    bos = model.bos_id
    with pytest.raises(ValueError, match=rf"prefixes must each start with bos_id {bos}; found first ids \[0\]"):
        model.step(torch.tensor([[0, 1]]))
    for empty in ((2, 0), (0, 3)):  # no bos to read; no row (torch.stack's error, unnamed)
        with pytest.raises(ValueError, match=rf"prefixes must be at least one row, each starting with "
                                             rf"bos_id {bos}; found shape {re.escape(str(empty))}"):
            model.step(torch.zeros(empty, dtype=torch.long))
    with pytest.raises(ValueError, match=rf"prefixes must hold bos_id {bos} first only; found it later in 1 of 2 rows"):
        model.step(torch.tensor([[bos, 0, 1], [bos, bos, bos]]))
    with pytest.raises(ValueError, match=r"word must be in the vocabulary \(or be read as unk\); found '<s>'"):
        model.prob(BOS, ["the"])


# ---- interpolation, absolute discounting and Kneser-Ney -------------------------------------
def _nltk_fed_our_ngrams(reference_class, model, sentences, discount):
    """An nltk model counting our padded n-grams and every suffix of each (the lower orders'
    grams): nltk's lower orders then count what ours count."""
    n = model.order
    grams = [model.counted.lookup(g) for s in sentences for g in ngrams(pad(s, n), n)]
    reference = reference_class(n, discount=discount)
    reference.fit([[g[i:] for g in grams for i in range(n)]], list(model.vocabulary) + [BOS])
    return reference


@pytest.mark.parametrize("order", [2, 3, 4])
@pytest.mark.parametrize("discount", [0.1, 0.75])
@pytest.mark.parametrize("continuation, reference_class",
                         [(True, KneserNeyInterpolated), (False, AbsoluteDiscountingInterpolated)])
def test_discounting_equals_nltk_where_they_define_the_same_model(lee, order, discount, continuation,
                                                                  reference_class):
    # nltk discounts every order but the unigram, by one discount: ours with D_1 = 0, D_k = D.
    train, test = lee
    model = KneserNeyModel.fit(train[:25], order, (0.0,) + (discount,) * (order - 1), continuation)
    reference = _nltk_fed_our_ngrams(reference_class, model, train[:25], discount)
    asked = [model.counted.lookup(g) for g in model.counted.test_ngrams(test[:4])]
    assert any(model.levels[-1].get(g[:-1]) is None for g in asked)  # unseen histories are exercised
    ours = model.token_log_probs(test[:4]).exp()
    expected = torch.tensor([reference.score(g[-1], g[:-1]) for g in asked], dtype=torch.float64)
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=0)
    torch.testing.assert_close(model.next_probs(asked[7][:-1]),
                               torch.tensor([reference.score(w, asked[7][:-1]) for w in model.vocabulary],
                                            dtype=torch.float64), rtol=1e-12, atol=1e-300)


def test_nltk_own_padding_is_where_its_kneser_ney_differs():
    # nltk's pipeline pads n - 1 end symbols and counts the bigram (<s>, <s>): <s> gets a continuation
    # count, so nltk predicts <s>, and its gamma after <s> <s> counts a follower that no continuation has.
    padded, flat = padded_everygram_pipeline(3, TOY)
    reference = KneserNeyInterpolated(3, discount=0.75)
    reference.fit(padded, flat)
    assert reference.score(BOS, ("the", "cat")) > 0
    assert sum(reference.score(w, (BOS, BOS)) for w in reference.vocab) > 1.1
    model = KneserNeyModel.fit(TOY, 3, (0.0, 0.75, 0.75))
    assert model.next_probs([BOS, BOS]).sum().item() == pytest.approx(1, abs=1e-12)


def test_level_counts_by_hand():
    # Trigrams a b c (twice), d b c, a b e: raw bigram counts add up, continuation counts count the
    # distinct words before.
    counts = {("a", "b"): Counter({"c": 2, "e": 1}), ("d", "b"): Counter({"c": 1})}
    raw, continuation = _level_counts(counts, False), _level_counts(counts, True)
    assert raw[1] == {("b",): Counter({"c": 3, "e": 1})} and raw[0] == {(): Counter({"c": 3, "e": 1})}
    assert continuation[1] == {("b",): Counter({"c": 2, "e": 1})}
    assert continuation[0] == {(): Counter({"c": 1, "e": 1})}  # one distinct word before (b c), (b e)
    assert raw[2] is counts and continuation[2] is counts


def test_kneser_ney_bigram_by_hand():
    # TOY bigrams after "cat": sat 1, ran 2, so c(cat) = 3 and N1+(cat .) = 2. The unigram level counts
    # the distinct words before each word; |V| = 8 (</s>, <unk> and six words).
    model = KneserNeyModel.fit(TOY, 2, (0.5, 0.75))
    distinct_before = {"the": 1, "a": 1, "cat": 2, "dog": 1, "sat": 2, "ran": 1, EOS: 2}  # N1+(. w)
    assert dict(model.levels[0][()]) == distinct_before
    types = sum(distinct_before.values())  # 10 bigram types
    p1 = max(1 - 0.5, 0) / types + 0.5 * 7 / types / 8  # p_1(ran), the uniform 1/8 below
    p2 = (2 - 0.75) / 3 + 0.75 * 2 / 3 * p1
    assert model.prob("ran", ["cat"]) == pytest.approx(p2, rel=1e-12)
    unseen = 0.5 * 7 / types / 8  # p_1(<unk>): no count, only the uniform share
    assert model.prob(UNK, ["zebra"]) == pytest.approx(unseen, rel=1e-12)
    # Ney et al.'s default discount of the top order, n1 / (n1 + 2 n2).
    top = Counter(c for f in model.levels[1].values() for c in f.values())
    assert KneserNeyModel.fit(TOY, 2).discounts[1] == pytest.approx(top[1] / (top[1] + 2 * top[2]))


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("kind", ["kneser-ney", "absolute", "interpolation"])
def test_every_distribution_sums_to_one_over_the_vocabulary(lee, order, kind):
    train, test = lee
    if kind == "interpolation":
        model = LinearInterpolation.fit(train[:30], order, train[30:])
    else:
        model = KneserNeyModel.fit(train[:30], order, continuation=kind == "kneser-ney")
    contexts = {g[:-1] for g in model.counted.test_ngrams(test[:3])} | {("zebra",) * (order - 1)}
    for context in contexts:
        probs = model.next_probs(context)  # brute force: every word of the vocabulary, </s> included
        assert EOS in model.vocabulary and len(probs) == len(model.vocabulary)
        assert bool((probs > 0).all()) and probs.sum().item() == pytest.approx(1, abs=1e-12)


def test_interpolation_weights_maximise_the_held_out_likelihood():
    generator = torch.Generator().manual_seed(0)
    components = torch.rand(400, 4, generator=generator, dtype=torch.float64) ** 3
    weights = interpolation_weights(components)
    assert weights.sum().item() == pytest.approx(1, abs=1e-12) and bool((weights >= 0).all())
    # The reference: gradient ascent on softmax scores.
    scores = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([scores], max_iter=500, tolerance_grad=1e-14, tolerance_change=1e-16)

    def closure():
        optimizer.zero_grad()
        loss = -(components @ torch.softmax(scores, 0)).log().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    best = torch.softmax(scores.detach(), 0)
    likelihood = lambda w: (components @ w).log().sum().item()
    assert likelihood(weights) >= likelihood(best) - 1e-8
    torch.testing.assert_close(weights, best, atol=1e-4, rtol=0)
    # EM never lowers the likelihood.
    steps = [likelihood(interpolation_weights(components, k)) for k in (1, 2, 5, 20, 100)]
    assert all(a <= b + 1e-12 for a, b in zip(steps, steps[1:]))


def test_interpolation_by_hand_and_its_held_out_is_disjoint():
    model = LinearInterpolation(NGramModel.fit(TOY, 2, 0.0), (0.2, 0.3, 0.5))
    # p(ran | cat) = 0.2 / 8 + 0.3 * 2/16 + 0.5 * 2/3: 16 tokens, ran twice; cat followed by sat, ran, ran.
    by_hand = 0.2 / 8 + 0.3 * 2 / 16 + 0.5 * 2 / 3
    assert model.token_log_probs([["a", "cat", "ran"]])[2].exp().item() == pytest.approx(by_hand, rel=1e-12)
    with pytest.raises(ValueError, match=r"held_out must be disjoint from sentences; found 1 sentences in both"):
        LinearInterpolation.fit(TOY, 2, [TOY[1], ["a", "dog", "ran"]])
    fitted = LinearInterpolation.fit(TOY, 2, [["a", "dog", "ran"]])
    assert sum(fitted.weights) == pytest.approx(1, abs=1e-12)


def test_discounting_and_interpolation_errors():
    counted = NGramModel.fit(TOY, 2)
    with pytest.raises(ValueError, match=r"discounts must hold 2 values in \[0, 1\], one per order; found \(0.5,\)"):
        KneserNeyModel(counted, (0.5,))
    with pytest.raises(TypeError, match=r"(?s)parameter 'discounts'.*is_a_fraction"):
        KneserNeyModel.fit(TOY, 2, (0.5, 1.5))
    with pytest.raises(ValueError, match=r"weights must hold 3 values >= 0 that sum to 1; found \(0.5, 0.5, 0.5\)"):
        LinearInterpolation(counted, (0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match=r"components must be probabilities in \[0, 1\]"):
        interpolation_weights(torch.tensor([[0.5, -0.1]], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"components must be probabilities in \[0, 1\]"):
        interpolation_weights(torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"components must be probabilities in \[0, 1\].*above-1"):
        interpolation_weights(torch.tensor([[5.0, 0.2]], dtype=torch.float64))
    interpolation_weights(torch.tensor([[1.0, 0.2]], dtype=torch.float64))  # 1 is a probability
    with pytest.raises(ValueError, match=r"components must hold at least one held-out token \(row\); found shape \(0, 3\)"):
        interpolation_weights(torch.zeros(0, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"held_out must hold at least one sentence to fit the weights on; found none"):
        LinearInterpolation.fit(TOY, 2, [])
    with pytest.raises(ValueError, match=r"word must be in the vocabulary"):
        KneserNeyModel.from_counts(counted).prob(BOS, ["the"])
