"""Tests for lib/pretraining.py.

References: ``F.cross_entropy(ignore_index=...)`` for the masked-LM loss, the
progression rule checked digit by digit, parameter snapshots before and after
an optimiser step for frozen and fine-tuned encoders.
"""

import pytest
import torch
import torch.nn.functional as F

from lib.pretraining import (
    CLS, DIGITS, MASK, VOCAB_SIZE, MaskedLM, SequenceClassifier, TransformerEncoder, masked_lm_loss,
    pretrain_masked_lm, progressions, train_classifier,
)
from lib.transformer import TransformerConfig

CONFIG = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=9)


def test_masked_lm_loss_is_cross_entropy_over_the_selected_positions_only():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, VOCAB_SIZE, dtype=torch.float64)
    labels = torch.full((3, 5), -100)
    labels[0, 1], labels[1, 3], labels[2, 0] = 4, 7, 2
    expected = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    torch.testing.assert_close(masked_lm_loss(logits, labels), expected, rtol=1e-12, atol=1e-12)
    by_hand = -(F.log_softmax(logits[0, 1], -1)[4] + F.log_softmax(logits[1, 3], -1)[7]
                + F.log_softmax(logits[2, 0], -1)[2]) / 3
    torch.testing.assert_close(masked_lm_loss(logits, labels), by_hand, rtol=1e-12, atol=1e-12)
    changed = logits.clone()
    changed[0, 0] += 5.0  # an unselected position's scores do not count
    torch.testing.assert_close(masked_lm_loss(changed, labels), expected, rtol=0, atol=0)


def test_masked_lm_loss_rejects_bad_inputs():
    with pytest.raises(TypeError, match="labels must be a LongTensor of shape \\(2, 3\\)"):
        masked_lm_loss(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="logits must be a float tensor"):
        masked_lm_loss(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long))


def test_progressions_follow_the_rule_and_are_deterministic_per_seed():
    steps = (1, 3, 7)
    tokens, labels = progressions(50, length=6, steps=steps, seed=4)
    assert tokens.shape == (50, 7) and (tokens[:, 0] == CLS).all()
    for row, label in zip(tokens.tolist(), labels.tolist()):
        digits, k = row[1:], steps[label]
        assert all(digits[t] == (digits[0] + k * t) % 10 for t in range(6))  # brute force, digit by digit
    again = progressions(50, length=6, steps=steps, seed=4)
    assert torch.equal(again[0], tokens) and torch.equal(again[1], labels)
    assert not torch.equal(progressions(50, length=6, steps=steps, seed=5)[0], tokens)
    assert set(labels.tolist()) == {0, 1, 2}


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(count=0), ValueError, "count must be an int >= 1"),
    (dict(count=5, length=1), ValueError, "length must be an int >= 2"),
    (dict(count=5, steps=(0, 2)), ValueError, "steps must be a non-empty list of ints in 1 .. 9"),
    (dict(count=5, steps=()), ValueError, "steps must be a non-empty list"),
    (dict(count=2.0), TypeError, "count must be an int"),
])
def test_progressions_reject_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        progressions(**kwargs)


def test_pretraining_loss_falls_on_a_tiny_corpus():
    torch.manual_seed(0)
    corpus, _ = progressions(256, seed=0)
    model = MaskedLM(TransformerEncoder(VOCAB_SIZE, CONFIG), VOCAB_SIZE)
    log = pretrain_masked_lm(model, corpus, epochs=8, batch_size=32, lr=1e-2, seed=0)
    assert len(log.losses) == 8
    assert log.losses[0] > 2.0  # about ln 10 = 2.30 before learning
    assert log.losses[-1] < log.losses[0] - 0.3  # measured: 2.42 -> 1.94


def _snapshot(module):
    return [p.detach().clone() for p in module.parameters()]


@pytest.mark.parametrize("freeze", [True, False])
def test_a_frozen_encoder_does_not_change_and_a_fine_tuned_one_does(freeze):
    torch.manual_seed(1)
    classifier = SequenceClassifier(TransformerEncoder(VOCAB_SIZE, CONFIG), 4, freeze=freeze)
    encoder_before, head_before = _snapshot(classifier.encoder), _snapshot(classifier.head)
    tokens, labels = progressions(16, seed=1)
    log = train_classifier(classifier, tokens, labels, tokens, labels, epochs=1, batch_size=16)
    assert len(log.losses) == len(log.accuracies) == 1
    encoder_changed = [not torch.equal(a, b) for a, b in zip(encoder_before, _snapshot(classifier.encoder))]
    head_changed = [not torch.equal(a, b) for a, b in zip(head_before, _snapshot(classifier.head))]
    assert all(head_changed)
    assert not any(encoder_changed) if freeze else all(encoder_changed)


def test_a_frozen_encoder_stays_in_eval_mode_so_its_dropout_is_off():
    encoder = TransformerEncoder(VOCAB_SIZE, TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1,
                                                               max_len=9, dropout=0.5))
    classifier = SequenceClassifier(encoder, 4, freeze=True).train()
    assert classifier.training and classifier.head.training and not classifier.encoder.training
    tokens, _ = progressions(4, seed=0)
    torch.testing.assert_close(classifier(tokens), classifier(tokens), rtol=0, atol=0)


def test_the_classifier_reads_the_mean_of_the_encoder_outputs():
    torch.manual_seed(2)
    classifier = SequenceClassifier(TransformerEncoder(VOCAB_SIZE, CONFIG), 3, freeze=False).eval()
    tokens, _ = progressions(5, seed=2)
    expected = classifier.head(classifier.encoder(tokens).mean(dim=1))
    torch.testing.assert_close(classifier(tokens), expected)


def test_training_functions_reject_bad_inputs():
    classifier = SequenceClassifier(TransformerEncoder(VOCAB_SIZE, CONFIG), 4, freeze=True)
    tokens, labels = progressions(8, seed=0)
    with pytest.raises(TypeError, match="model must be a MaskedLM; found SequenceClassifier"):
        pretrain_masked_lm(classifier, tokens)
    with pytest.raises(TypeError, match="labels must be a LongTensor of shape \\(8,\\)"):
        train_classifier(classifier, tokens, labels[:5], tokens, labels)
    with pytest.raises(ValueError, match="tokens"):
        pretrain_masked_lm(MaskedLM(TransformerEncoder(VOCAB_SIZE, CONFIG), VOCAB_SIZE), tokens + VOCAB_SIZE)
    with pytest.raises(ValueError, match="num_classes must be an int >= 2"):
        SequenceClassifier(TransformerEncoder(VOCAB_SIZE, CONFIG), 1, freeze=True)
    with pytest.raises(TypeError, match="freeze must be a bool"):
        SequenceClassifier(TransformerEncoder(VOCAB_SIZE, CONFIG), 4, freeze=1)
    assert MASK == DIGITS and MASK not in progressions(100, seed=0)[0]  # <mask> comes from corruption only
