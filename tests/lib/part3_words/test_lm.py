"""Tests for lib/part3_words/lm.py.

References: explicit per-position loops for the neural model; Bayes' rule by
brute-force enumeration for the toy language; hand-computed schedules and KL
divergences.
"""

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

from lib.part3_words.lm import (
    CountingLanguage,
    EpsilonSchedule,
    NeuralLM,
    drift,
    rollout,
    scheduled_sampling_inputs,
    token_log_probs,
    train_lm,
)
from lib.part2_recurrent.char_lm import teacher_forcing_batch


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
    with pytest.raises(TypeError, match=r"(?s)parameter 'feature'.*Actual value: 'rnn'.*Literal\['window'"):
        NeuralLM(5, feature="rnn")
    with pytest.raises(TypeError, match=r"(?s)parameter 'vocab_size'.*Actual value: 0.*is_at_least_1"):
        NeuralLM(0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: f32\[2,3\].*Int64\[Tensor, 'N t'\]"):
        NeuralLM(5)(torch.zeros(2, 3))
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: i64\[3\].*Int64\[Tensor, 'N t'\]"):
        NeuralLM(5)(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens must hold at least one position \(bos\); found shape \(2, 0\)"):
        NeuralLM(5)(torch.zeros(2, 0, dtype=torch.long))
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
    with pytest.raises(TypeError, match=r"(?s)parameter 'kind'.*Actual value: 'cosine'.*Literal\['constant'"):
        EpsilonSchedule("cosine")
    with pytest.raises(ValueError, match=r"k must be a finite number in \[1.0, inf\] for kind 'inverse_sigmoid'; found 0.5"):
        EpsilonSchedule("inverse_sigmoid", k=0.5)
    with pytest.raises(ValueError, match=r"k must be a finite number in \[0.0, 1.0\] for kind 'exponential'; found 1.5"):
        EpsilonSchedule("exponential", k=1.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'k'.*Actual value: nan.*is_finite"):
        EpsilonSchedule("linear", k=math.nan)
    with pytest.raises(TypeError, match=r"(?s)parameter 'minimum'.*Actual value: 1.5.*is_a_fraction"):
        EpsilonSchedule("linear", k=1.0, minimum=1.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'step'.*Actual value: -1.*is_at_least_0"):
        EpsilonSchedule()(-1)


class ConstantModel(torch.nn.Module):
    """Always predicts token ``favourite`` with probability ~1."""

    def __init__(self, vocab_size, favourite):
        super().__init__()
        self.logits = torch.full((vocab_size,), -50.0)
        self.logits[favourite] = 50.0

    def forward(self, tokens):
        return self.logits.expand(*tokens.shape, -1)


def test_teacher_forcing_batch_by_hand():
    # lib.part2_recurrent.char_lm.teacher_forcing_batch, generalised from language_model_batch for word ids.
    inputs, targets = teacher_forcing_batch([[4, 5, 0], [6, 0]], bos=9)
    assert inputs.tolist() == [[9, 4, 5], [9, 6, 9]]
    assert targets.tolist() == [[4, 5, 0], [6, 0, -100]]
    with pytest.raises(ValueError, match=r"sequences\[1\] must be a non-empty list of token ids"):
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
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*Actual value: i64\[1,1\].*Int64\[Tensor, 'N L'\].*L=2"):
        train_lm(NeuralLM(2), inputs, targets[:, :1], steps=1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'schedule'.*Actual value: 0.5.*EpsilonSchedule"):
        train_lm(NeuralLM(2), inputs, targets, steps=1, schedule=0.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'lr'.*Actual value: nan.*is_at_least_0"):
        train_lm(NeuralLM(2), inputs, targets, steps=1, lr=math.nan)
    with pytest.raises(TypeError, match=r"(?s)parameter 'epsilon'.*Actual value: 1.5.*is_a_fraction"):
        scheduled_sampling_inputs(NeuralLM(2), inputs, targets, 1.5)


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


@pytest.mark.parametrize("prefix", [[], [3], [3, 5], [3, 5, 1, 3], [3, 5, 0, 3], [1, 1, 1]])
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
    with pytest.raises(ValueError, match=r"length must be an int >= 2 \(the prompts' length\); found 1"):
        rollout(ConstantModel(6, 5), prompts, 1, bos=6)


def test_counting_language_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'hours'.*Actual value: 1.*is_at_least_2"):
        CountingLanguage(hours=1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'typo'.*Actual value: 0.*is_a_typo_rate"):
        CountingLanguage(typo=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'steps'.*Actual value: \(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1.5\)"):
        CountingLanguage(steps=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1.5))  # every step is read
    with pytest.raises(ValueError, match="steps must hold at least one step; found none"):
        CountingLanguage(steps=())
    with pytest.raises(ValueError, match=r"prefixes must be shorter than the sentences \(16\); found length 16"):
        CountingLanguage().next_probs(torch.zeros(1, 16, dtype=torch.long))


def test_referee_round_refusals():
    language = CountingLanguage(hours=5, length=6)
    model = NeuralLM(5, context=2)
    sentences = language.sample(4, torch.Generator().manual_seed(0))  # (4, 6)
    inputs = torch.cat([torch.full((4, 1), 5), sentences[:, :-1]], dim=1)
    too_high, negative = sentences.clone(), sentences.clone()
    too_high[0, 0], negative[0, 0] = 9, -5
    for hour in (9, -1):
        with pytest.raises(ValueError, match=rf"prefixes must hold hours in \[0, 5\); found .*{hour}"):
            language.next_probs(torch.tensor([[0, hour]]))
    with pytest.raises(ValueError, match=r"sentences must have the language's length 6, .*found width 4, prompt 2"):
        drift(model, language, sentences[:, :4], bos=5)
    with pytest.raises(ValueError, match=r"and prompt be shorter; found width 6, prompt 10"):
        drift(model, language, sentences, bos=5, prompt=10)
    with pytest.raises(ValueError, match=r"language must have as many hours as the model has outputs \(5\); found 7"):
        drift(model, CountingLanguage(hours=7, length=6), sentences, bos=5)
    with pytest.raises(ValueError, match=r"bos must be the model's bos 5; found 3"):
        drift(model, language, sentences, bos=3)
    with pytest.raises(ValueError, match=r"bos must be the model's bos 5; found 3"):
        rollout(model, sentences[:, :2], 6, bos=3)
    for call in (token_log_probs, partial(train_lm, steps=1)):
        with pytest.raises(ValueError, match=r"targets must be ids in \[0, 5\) or -100; found 9"):
            call(model, inputs, too_high)
        with pytest.raises(ValueError, match=r"targets must be ids in \[0, V\) or -100 \(padding\); found -5"):
            call(model, inputs, negative)
        with pytest.raises(ValueError, match=r"inputs must hold at least one row"):
            call(model, inputs[:0], sentences[:0])
    with pytest.raises(ValueError, match=r"targets must be ids in \[0, 5\) or -100; found 9"):
        scheduled_sampling_inputs(model, inputs, too_high, 0.5)
    with pytest.raises(ValueError, match=r"targets must be ids in \[0, V\) or -100 \(padding\); found -5"):
        scheduled_sampling_inputs(model, inputs, negative, 0.5)
    with pytest.raises(ValueError, match=r"prompt must be at most the rows' length 6; found 99"):
        scheduled_sampling_inputs(model, inputs, sentences, 0.5, prompt=99)
    with pytest.raises(ValueError, match=r"prompt at most its length; found shape \(4, 6\), prompt 7"):
        train_lm(model, inputs, sentences, steps=1, prompt=7)
