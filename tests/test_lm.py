"""Tests for lib/lm.py.

References: nltk.lm.Lidstone (same padded n-grams, same vocabulary) for the
n-gram probabilities and perplexity; the add-delta formula computed by hand and
by brute force; explicit per-position loops for the neural model; Bayes' rule
by brute-force enumeration for the toy language; hand-computed perplexities,
schedules and KL divergences.
"""

import math
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.lm import Laplace, Lidstone
from nltk.lm.preprocessing import pad_both_ends, padded_everygram_pipeline
from nltk.util import ngrams as nltk_ngrams

from lib.corpus import read_sentences
from lib.decoding import sample
from lib.lm import (
    BOS,
    EOS,
    UNK,
    CountingLanguage,
    EpsilonSchedule,
    NeuralLM,
    NGramModel,
    add_delta_log_prob,
    drift,
    ngrams,
    pad,
    perplexity,
    rollout,
    scheduled_sampling_inputs,
    token_log_probs,
    train_lm,
    unseen_fraction,
)
from lib.char_lm import teacher_forcing_batch

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
    with pytest.raises(TypeError, match="sentence must be a list of token strings; found a str"):
        pad("the cat", 2)
    with pytest.raises(ValueError, match="order must be an int >= 1"):
        pad(["a"], 0)
    with pytest.raises(TypeError, match="order must be an int"):
        ngrams(["a"], 2.0)


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
    assert model.decode([model.vocabulary.index("the"), model.eos_id, 3]) == ["the"]


def test_ngram_model_errors():
    with pytest.raises(ValueError, match="unk must be one of the vocabulary"):
        NGramModel(2, ("a", EOS), unk="<unk>")
    with pytest.raises(ValueError, match="not in the vocabulary and the model has no unknown-word token"):
        NGramModel.fit(TOY, 2, unk=None).prob("zebra", ["the"])
    with pytest.raises(ValueError, match="delta must be a finite number"):
        NGramModel.fit(TOY, 2, delta=-1.0)
    with pytest.raises(ValueError, match="context must hold 2 words"):
        NGramModel.fit(TOY, 3).prob("cat", ["the"])
    with pytest.raises(ValueError, match="n-grams of one length"):
        NGramModel.from_ngrams([("a", "b"), ("a",)], ["a", "b"])
    with pytest.raises(ValueError, match="every n-gram must have 2 words"):
        NGramModel.fit(TOY, 2).ngram_log_probs([("a", "b", "c")])
    with pytest.raises(TypeError, match="list of sentences, each a list of token strings"):
        NGramModel.fit("the cat", 2)
    with pytest.raises(ValueError, match="counts must satisfy"):
        add_delta_log_prob(torch.tensor([3.0]), torch.tensor([2.0]), 1.0, 4)


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
    with pytest.raises(TypeError, match="floating-point torch.Tensor"):
        perplexity([0.5])
    with pytest.raises(ValueError, match="at least one token"):
        perplexity(torch.tensor([]))
    with pytest.raises(ValueError, match="found NaN or \\+inf"):
        perplexity(torch.tensor([math.nan]))
    with pytest.raises(ValueError, match="base must be a finite number"):
        perplexity(torch.tensor([-1.0]), base=1)


# ---- the neural model ------------------------------------------------------------------------------
def reference_features(model, tokens):
    """Position by position, from the formula."""
    rows = []
    for n in range(tokens.shape[0]):
        row = []
        for t in range(tokens.shape[1]):
            if model.feature == "window":
                history = [model.bos] * model.context + tokens[n, : t + 1].tolist()
                window = history[-model.context:]
                f = torch.cat([model.embedding.weight[i] for i in window])
            else:
                f = model.embedding.weight[tokens[n, : t + 1]].mean(0)
            row.append(torch.tanh(model.hidden.weight @ f + model.hidden.bias))
        rows.append(torch.stack(row))
    return torch.stack(rows)


@pytest.mark.parametrize("feature", ["window", "average"])
@pytest.mark.parametrize("context", [1, 3])
def test_neural_lm_features_equal_the_formula(feature, context):
    torch.manual_seed(0)
    model = NeuralLM(9, context=context, embedding_dim=4, hidden_size=5, feature=feature).double()
    tokens = torch.cat([torch.full((3, 1), 9), torch.randint(0, 9, (3, 6))], dim=1)
    torch.testing.assert_close(model.features(tokens), reference_features(model, tokens))
    logits = model(tokens)
    assert logits.shape == (3, 7, 9)
    torch.testing.assert_close(model.next_token_log_probs(tokens), F.log_softmax(logits[:, -1], -1))


@pytest.mark.parametrize("feature", ["window", "average"])
def test_neural_lm_is_causal(feature):
    torch.manual_seed(1)
    model = NeuralLM(6, context=2, feature=feature)
    tokens = torch.tensor([[6, 1, 2, 3, 4]])
    changed = tokens.clone()
    changed[0, 3] = 5
    before, after = model(tokens), model(changed)
    torch.testing.assert_close(before[:, :3], after[:, :3])  # positions before the change are untouched
    assert not torch.allclose(before[:, 3], after[:, 3])


def test_neural_lm_errors():
    with pytest.raises(ValueError, match="feature must be one of"):
        NeuralLM(5, feature="rnn")
    with pytest.raises(TypeError, match="LongTensor of shape \\(N, t\\)"):
        NeuralLM(5)(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="ids in \\[0, 5\\]"):
        NeuralLM(5)(torch.tensor([[5, 6]]))


def test_token_log_probs_gathers_the_real_targets_of_a_padded_batch():
    torch.manual_seed(3)
    model = NeuralLM(5, context=2, embedding_dim=4, hidden_size=6).double()
    sequences = [[1, 2, 0], [3, 0], [4, 4, 2, 1, 0]]
    inputs, targets = teacher_forcing_batch(sequences, bos=5)
    expected = []
    for tokens in sequences:  # each sequence alone, every target scored by hand
        log_probs = F.log_softmax(model(torch.tensor([[5, *tokens[:-1]]]))[0], -1)
        expected += [log_probs[t, w] for t, w in enumerate(tokens)]
    torch.testing.assert_close(token_log_probs(model, inputs, targets), torch.stack(expected))


# ---- schedules and scheduled sampling ------------------------------------------------------------
def test_epsilon_schedules_by_hand():
    assert EpsilonSchedule("linear", k=1.0, c=0.1, minimum=0.2)(3) == pytest.approx(0.7)
    assert EpsilonSchedule("linear", k=1.0, c=0.1, minimum=0.2)(30) == 0.2
    assert EpsilonSchedule("exponential", k=0.9)(2) == pytest.approx(0.81)
    assert EpsilonSchedule("inverse_sigmoid", k=10.0)(0) == pytest.approx(10 / 11)
    assert EpsilonSchedule("inverse_sigmoid", k=10.0)(10) == pytest.approx(10 / (10 + math.e))
    assert 0.0 <= EpsilonSchedule("inverse_sigmoid", k=10.0)(10**6) < 1e-300  # no overflow
    assert EpsilonSchedule("constant", k=1.0)(123) == 1.0
    values = [EpsilonSchedule("inverse_sigmoid", k=5.0)(i) for i in range(50)]
    assert values == sorted(values, reverse=True)


def test_epsilon_schedule_errors():
    with pytest.raises(ValueError, match="kind must be one of"):
        EpsilonSchedule("cosine")
    with pytest.raises(ValueError, match="k must be a finite number in \\[1.0"):
        EpsilonSchedule("inverse_sigmoid", k=0.5)
    with pytest.raises(ValueError, match="k must be a finite number in \\[0.0, 1.0\\]"):
        EpsilonSchedule("exponential", k=1.5)


class ConstantModel(torch.nn.Module):
    """Always predicts token ``favourite`` with probability ~1."""

    def __init__(self, vocab_size, favourite):
        super().__init__()
        self.logits = torch.full((vocab_size,), -50.0)
        self.logits[favourite] = 50.0

    def forward(self, tokens):
        return self.logits.expand(*tokens.shape, -1)


def test_teacher_forcing_batch_by_hand():
    # lib.char_lm.teacher_forcing_batch, generalised from language_model_batch for word ids.
    inputs, targets = teacher_forcing_batch([[4, 5, 0], [6, 0]], bos=9)
    assert inputs.tolist() == [[9, 4, 5], [9, 6, 9]]
    assert targets.tolist() == [[4, 5, 0], [6, 0, -100]]
    with pytest.raises(ValueError, match="non-empty token lists"):
        teacher_forcing_batch([[1], []], bos=9)


def test_scheduled_sampling_swaps_tokens_for_the_models_own():
    sequences = [[1, 2, 3, 4, 0], [2, 3, 0]]
    inputs, targets = teacher_forcing_batch(sequences, bos=6)
    model = ConstantModel(6, favourite=5)
    assert torch.equal(scheduled_sampling_inputs(model, inputs, targets, 1.0), inputs)
    mixed = scheduled_sampling_inputs(model, inputs, targets, 0.0, torch.Generator().manual_seed(0))
    # Every real input after bos becomes the model's token; padding (target -100) is left alone.
    assert mixed.tolist() == [[6, 5, 5, 5, 5], [6, 5, 5, 6, 6]]
    prompted = scheduled_sampling_inputs(model, inputs, targets, 0.0, torch.Generator().manual_seed(0), prompt=2)
    assert prompted.tolist() == [[6, 1, 2, 5, 5], [6, 2, 3, 6, 6]]


def test_scheduled_sampling_swaps_with_probability_one_minus_epsilon():
    inputs, targets = teacher_forcing_batch([[1, 1, 1, 1, 1, 0]] * 2000, bos=6)
    mixed = scheduled_sampling_inputs(ConstantModel(6, 5), inputs, targets, 0.7, torch.Generator().manual_seed(0))
    swapped = (mixed[:, 1:] == 5).double().mean().item()
    assert swapped == pytest.approx(0.3, abs=4 * math.sqrt(0.21 / 10_000))


def test_scheduled_sampling_feeds_what_the_model_would_have_generated():
    # A model that predicts "previous token + 1": with epsilon = 0 the inputs become its own chain.
    class Successor(torch.nn.Module):
        def forward(self, tokens):
            return 50.0 * F.one_hot((tokens + 1) % 7, 7).double()

    inputs, targets = teacher_forcing_batch([[3, 3, 3, 3, 0]], bos=6)
    mixed = scheduled_sampling_inputs(Successor(), inputs, targets, 0.0, torch.Generator().manual_seed(0))
    assert mixed.tolist() == [[6, 0, 1, 2, 3]]  # bos = 6 -> 0 -> 1 -> ... read from the mixed prefix


def test_train_lm_teacher_forcing_fits_and_is_reproducible():
    sequences = [[1, 2, 3, 0], [2, 3, 1, 0], [3, 1, 2, 0]] * 4
    inputs, targets = teacher_forcing_batch(sequences, bos=4)

    def run(steps, schedule=None):
        torch.manual_seed(0)
        model = NeuralLM(4, context=3, embedding_dim=8, hidden_size=16)
        return train_lm(model, inputs, targets, steps=steps, batch_size=6, lr=3e-2, schedule=schedule)

    # Only the first word is uncertain (1 of 3), the rest follow from a three-token window:
    # the best possible loss is log(3) / 4 = 0.27 nats per token.
    losses = run(80)
    assert losses[-1] < 0.4 < math.log(4) - 0.3 < losses[0]
    assert run(10) == losses[:10]  # seeded batches: the same run twice
    assert run(10, EpsilonSchedule("constant", k=1.0)) == losses[:10]  # epsilon = 1 is teacher forcing
    assert run(10, EpsilonSchedule("constant", k=0.5))[1:] != losses[1:10]


def test_train_lm_errors():
    inputs, targets = teacher_forcing_batch([[1, 0]], bos=2)
    with pytest.raises(ValueError, match="same shape"):
        train_lm(NeuralLM(2), inputs, targets[:, :1], steps=1)
    with pytest.raises(TypeError, match="EpsilonSchedule or None"):
        train_lm(NeuralLM(2), inputs, targets, steps=1, schedule=0.5)


# ---- the counting language and the drift measurement -------------------------------------------------
def brute_force_next(language, prefix):
    """p(v | prefix) = p(prefix + v) / p(prefix), each a mean over the hidden clean sentences."""
    hit, miss = 1 - language.typo + language.typo / language.hours, language.typo / language.hours

    def joint(tokens):
        total = 0.0
        for clean in language.clean.tolist():
            total += math.prod(hit if a == b else miss for a, b in zip(tokens, clean))
        return total / len(language.clean)

    return torch.tensor([joint(prefix + [v]) for v in range(language.hours)], dtype=torch.float64) / joint(prefix)


@pytest.mark.parametrize("prefix", [[], [3], [3, 5], [3, 5, 7, 9], [3, 5, 0, 9], [1, 1, 1]])
def test_counting_language_next_probs_is_bayes_rule(prefix):
    language = CountingLanguage(hours=6, steps=(1, 2), length=6, typo=0.05)
    found = language.next_probs(torch.tensor([prefix], dtype=torch.long).reshape(1, len(prefix)))[0]
    torch.testing.assert_close(found, brute_force_next(language, prefix), rtol=1e-10, atol=1e-12)


def test_counting_language_samples():
    language = CountingLanguage()
    clean = CountingLanguage(typo=1e-12).sample(500, torch.Generator().manual_seed(0))
    steps = (clean[:, 1:] - clean[:, :-1]) % 12
    assert (steps == steps[:, :1]).all() and set(steps[:, 0].tolist()) == {1, 2, 3}
    noisy = CountingLanguage(typo=0.3).sample(2000, torch.Generator().manual_seed(0))
    assert noisy.shape == (2000, language.length) and 0 <= noisy.min() and noisy.max() < 12


class TrueModel(torch.nn.Module):
    """The language's own next-token distribution as logits (bos-prefixed inputs)."""

    def __init__(self, language):
        super().__init__()
        self.language = language

    def forward(self, tokens):
        rows = [self.language.next_probs(tokens[:, 1: t + 1]).log() for t in range(tokens.shape[1])]
        return torch.stack(rows, dim=1)  # (N, t, V)


def test_drift_is_zero_for_the_true_model_and_known_for_a_uniform_one():
    language = CountingLanguage(hours=6, steps=(1, 2), length=6, typo=0.05)
    sentences = language.sample(200, torch.Generator().manual_seed(0))
    on_data, on_own = drift(TrueModel(language), language, sentences, bos=6, prompt=2,
                            generator=torch.Generator().manual_seed(1))
    assert on_data.shape == on_own.shape == (4,)
    torch.testing.assert_close(on_data, torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(on_own, torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)
    # A uniform model: KL(p || uniform) = log V - H(p), averaged over the real prefixes.
    uniform = ConstantModel(6, 0)
    uniform.logits = torch.zeros(6)
    on_data, _ = drift(uniform, language, sentences, bos=6, prompt=2, generator=torch.Generator().manual_seed(1))
    p = language.next_probs(sentences[:, :3])
    expected = math.log(6) + float((p * p.log()).sum(-1).mean())
    assert on_data[1].item() == pytest.approx(expected, rel=1e-9)


def test_rollout_keeps_the_prompt_and_continues_with_samples():
    prompts = torch.tensor([[1, 2], [3, 4]])
    out = rollout(ConstantModel(6, 5), prompts, 5, bos=6, generator=torch.Generator().manual_seed(0))
    assert out.tolist() == [[1, 2, 5, 5, 5], [3, 4, 5, 5, 5]]
    with pytest.raises(ValueError, match="length must be an int >= 2"):
        rollout(ConstantModel(6, 5), prompts, 1, bos=6)


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
    with pytest.raises(TypeError, match="context must be a list of token strings; found a str"):
        model.prob("cat", "the")  # would be read as the characters t, h, e
    with pytest.raises(TypeError, match=r"sentences\[0\] must be a list of token strings; found a str"):
        NGramModel.fit(["the cat", "a dog"], 2)  # would train a character model
    with pytest.raises(TypeError, match="sentences must be a list of sentences"):
        NGramModel.fit("the cat", 2)
    with pytest.raises(TypeError, match=r"test\[1\] must be a list of token strings; found a list of int"):
        unseen_fraction(TOY, [["the"], [1, 2]], 2)
    assert model.prob("cat", ("the",)) == model.prob("cat", ["the"])
