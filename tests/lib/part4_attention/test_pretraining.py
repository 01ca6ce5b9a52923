"""Tests for lib/part4_attention/pretraining.py.

References: ``F.cross_entropy(ignore_index=...)`` for the masked-LM loss, the
walk rule checked move by move, the number of strings and the best possible
accuracy counted by brute force over every start, step and wobble, parameter
snapshots before and after an optimiser step for frozen and fine-tuned encoders.
"""

import itertools

import pytest
import torch
import torch.nn.functional as F

from lib.part4_attention.pretraining import (
    CLS, DIGITS, MASK, STEPS, VOCAB_SIZE, WOBBLE, MaskedLM, SequenceClassifier,
    best_possible_accuracy, distinct_walks, masked_lm_loss, pretrain_masked_lm, shared_strings,
    train_classifier, walk_space_size, walks,
)
from lib.part4_attention.transformer import TransformerConfig, TransformerStack, embedding

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
    with pytest.raises(TypeError, match=r"(?s)parameter 'labels'.*Actual value: i64\[2,4\].*Int64\[Tensor, '\*batch'\]"):
        masked_lm_loss(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'logits'.*Actual value: i64\[2,3\].*Float\[Tensor, '\*batch V'\]"):
        masked_lm_loss(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"labels must be ids in \[0, 5\) or ignore_index; found ids from 0 to 5"):
        masked_lm_loss(torch.randn(2, 5), torch.tensor([0, 5]))


def test_walks_follow_the_rule_and_are_deterministic_per_seed():
    steps = (1, 3, 7)
    tokens, labels = walks(200, length=6, steps=steps, seed=4)
    assert tokens.shape == (200, 7) and (tokens[:, 0] == CLS).all()
    wobbles = set()
    for row, label in zip(tokens.tolist(), labels.tolist()):
        digits, k = row[1:], steps[label]
        for t in range(1, 6):  # move by move: x_t = x_{t-1} + k + e_t (mod 10), e_t in {-1, 0, 1}
            wobble = next(e for e in WOBBLE if digits[t] == (digits[t - 1] + k + e) % 10)
            wobbles.add(wobble)
    assert wobbles == set(WOBBLE)
    again = walks(200, length=6, steps=steps, seed=4)
    assert torch.equal(again[0], tokens) and torch.equal(again[1], labels)
    assert not torch.equal(walks(200, length=6, steps=steps, seed=5)[0], tokens)
    assert set(labels.tolist()) == {0, 1, 2}


def every_walk(length, steps):
    """Every string the rule can produce, by brute force: (digits, step) for each start, step and wobble."""
    for start, k, wobble in itertools.product(range(DIGITS), steps, itertools.product(WOBBLE, repeat=length - 1)):
        digits = [start]
        for e in wobble:
            digits.append((digits[-1] + k + e) % DIGITS)
        yield tuple(digits), k


@pytest.mark.parametrize(("length", "steps"), [(2, (1,)), (4, (1, 2, 3, 4)), (5, (1, 5)), (3, (1, 9)),
                                               (8, STEPS)])
def test_walk_space_size_counts_every_string_by_brute_force(length, steps):
    assert walk_space_size(length, steps) == len({digits for digits, _ in every_walk(length, steps)})


def test_the_chapter_s_string_space_is_far_larger_than_its_sets():
    used = 1000 + 250 + 256  # corpus, held-out, the most labels the exercise asks for
    assert walk_space_size() == 83640 and walk_space_size() > 50 * used


def test_distinct_walks_are_distinct_and_longer_streams_extend_shorter_ones():
    tokens, labels = distinct_walks(3000, seed=2)
    assert len({tuple(row) for row in tokens.tolist()}) == 3000
    shorter = distinct_walks(1200, seed=2)
    assert torch.equal(shorter[0], tokens[:1200]) and torch.equal(shorter[1], labels[:1200])
    with pytest.raises(ValueError, match="count must be at most half of the 30 possible strings"):
        distinct_walks(16, length=2, steps=(1,))


def test_shared_strings_counts_distinct_common_rows():
    a = torch.tensor([[CLS, 1, 2], [CLS, 1, 2], [CLS, 3, 4]])
    b = torch.tensor([[CLS, 1, 2], [CLS, 5, 6]])
    assert shared_strings(a, b) == 1 and shared_strings(b, b) == 2 and shared_strings(a, b[1:]) == 0
    assert shared_strings(a, a[:, :2]) == 0  # strings of another length share none, as on main
    with pytest.raises(ValueError, match=r"first must hold ids in \[0, 12\); found ids from -49 to -39"):
        shared_strings(a - 50, b)
    with pytest.raises(ValueError, match=r"second must hold ids in \[0, 12\); found ids from 13 to 23"):
        shared_strings(a, b + 12)


def test_best_possible_accuracy_is_the_bayes_rule_counted_by_brute_force():
    # Every (string, step) pair is equally likely, so the best rule guesses among the steps
    # that can produce the string; it is right with probability 1 / (how many there are).
    producers = {}
    for digits, k in every_walk(4, STEPS):
        producers.setdefault(digits, set()).add(k)
    tokens, labels = walks(500, length=4, seed=3)
    expected = sum(1 / len(producers[tuple(row[1:])]) for row in tokens.tolist()) / 500
    assert best_possible_accuracy(tokens, labels) == pytest.approx(expected, abs=1e-12)
    both = torch.tensor([[CLS, 0, 2, 4, 6]])  # moves of 2 only: steps 1, 2 and 3 all fit
    assert best_possible_accuracy(both, torch.tensor([1])) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="some string does not fit its step"):
        best_possible_accuracy(both, torch.tensor([3]))  # step 4 moves by 3 to 5


def test_the_new_functions_name_what_is_wrong_with_their_input():
    tokens, labels = walks(4, seed=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'labels'.*Actual value: i64\[3\].*Int64\[Tensor, 'B'\].*B=4"):
        best_possible_accuracy(tokens, labels[:3])
    with pytest.raises(ValueError, match="labels must be indices into steps, 0 .. 3"):
        best_possible_accuracy(tokens, labels + 4)
    with pytest.raises(ValueError, match=r"tokens\[:, 1:\] must be digits in \[0, 10\); found ids from 11 to 11"):
        best_possible_accuracy(torch.full((2, 3), CLS), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens must be <cls> followed by at least one digit.*found shape \(2, 1\)"):
        best_possible_accuracy(torch.full((2, 1), CLS), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"in at least one row; found shape \(0, 9\)"):
        best_possible_accuracy(tokens[:0], labels[:0])  # the mean of nothing would be NaN
    digits_out = tokens.clone()
    digits_out[:, 1:] += 20
    with pytest.raises(ValueError, match=r"tokens\[:, 1:\] must be digits in \[0, 10\); found ids from 20 to 29"):
        best_possible_accuracy(digits_out, labels)
    no_cls = tokens.clone()
    no_cls[:, 0] = -7
    with pytest.raises(ValueError, match=r"tokens\[:, 0\] must be CLS = 11; found \[-7, -7, -7, -7\]"):
        best_possible_accuracy(no_cls, labels)  # was a silent 0.975
    with pytest.raises(TypeError, match=r"(?s)parameter 'length'.*Actual value: 1000000000000.*is_at_most_1000"):
        walk_space_size(10**12)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(count=0), TypeError, "(?s)parameter 'count'.*Actual value: 0.*is_at_least_1"),
    (dict(count=5, length=1), TypeError, "(?s)parameter 'length'.*Actual value: 1.*is_at_least_2"),
    (dict(count=5, steps=(0, 2)), TypeError, r"(?s)parameter 'steps'.*Actual value: \(0, 2\).*is_at_least_1"),
    (dict(count=5, steps=(2, 12)), TypeError, r"(?s)parameter 'steps'.*Actual value: \(2, 12\).*is_at_most_9"),
    (dict(count=5, steps=(2, 2)), TypeError, r"(?s)parameter 'steps'.*Actual value: \(2, 2\).*are_distinct"),
    (dict(count=5, steps=()), TypeError, r"(?s)parameter 'steps'.*Actual value: \(\).*are_distinct"),
    (dict(count=2.0), TypeError, "(?s)parameter 'count'.*Actual value: 2.0.*Integral"),
])
def test_walks_reject_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        walks(**kwargs)


def test_pretraining_loss_falls_on_a_tiny_corpus():
    # Strings of one repeated digit: a masked digit is any visible neighbour, learnt in a few steps.
    torch.manual_seed(0)
    digits = torch.randint(DIGITS, (256, 1), generator=torch.Generator().manual_seed(0)).expand(256, 8)
    corpus = torch.cat([torch.full((256, 1), CLS), digits], dim=1)
    model = MaskedLM(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), VOCAB_SIZE)
    log = pretrain_masked_lm(model, corpus, epochs=4, batch_size=32, lr=1e-2, seed=0)
    assert len(log.losses) == 4
    assert log.losses[0] > 2.0  # about ln 10 = 2.30 before learning
    assert log.losses[-1] < log.losses[0] - 1.0  # measured: 2.38 -> 0.51


def _snapshot(module):
    return [p.detach().clone() for p in module.parameters()]


@pytest.mark.parametrize("freeze", [True, False])
def test_a_frozen_encoder_does_not_change_and_a_fine_tuned_one_does(freeze):
    torch.manual_seed(1)
    classifier = SequenceClassifier(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), 4, freeze=freeze)
    encoder_before, head_before = _snapshot(classifier.encoder), _snapshot(classifier.head)
    tokens, labels = walks(16, seed=1)
    log = train_classifier(classifier, tokens, labels, tokens, labels, epochs=1, batch_size=16)
    assert len(log.losses) == len(log.accuracies) == 1
    encoder_changed = [not torch.equal(a, b) for a, b in zip(encoder_before, _snapshot(classifier.encoder))]
    head_changed = [not torch.equal(a, b) for a, b in zip(head_before, _snapshot(classifier.head))]
    assert all(head_changed)
    assert not any(encoder_changed) if freeze else all(encoder_changed)


def test_a_frozen_encoder_stays_in_eval_mode_so_its_dropout_is_off():
    config = TransformerConfig(d_model=16, num_heads=2, d_ff=32, num_layers=1, max_len=9, dropout=0.5)
    encoder = TransformerStack(embedding(VOCAB_SIZE, config), config)
    classifier = SequenceClassifier(encoder, 4, freeze=True).train()
    assert classifier.training and classifier.head.training and not classifier.encoder.training
    tokens, _ = walks(4, seed=0)
    torch.testing.assert_close(classifier(tokens), classifier(tokens), rtol=0, atol=0)


def test_the_held_out_strings_may_have_another_length_as_on_main():
    torch.manual_seed(3)
    classifier = SequenceClassifier(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), 4, freeze=False)
    tokens, labels = walks(8, seed=0)
    test_tokens, test_labels = walks(6, length=5, seed=1)  # (6, 6) against (8, 9): mean-pooled
    log = train_classifier(classifier, tokens, labels, test_tokens, test_labels, epochs=1)
    assert len(log.accuracies) == 1 and 0 <= log.accuracies[0] <= 1


def test_the_classifier_reads_the_mean_of_the_encoder_outputs():
    torch.manual_seed(2)
    classifier = SequenceClassifier(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), 3, freeze=False).eval()
    tokens, _ = walks(5, seed=2)
    expected = classifier.head(classifier.encoder(tokens)[0].mean(dim=1))
    torch.testing.assert_close(classifier(tokens), expected)


def test_training_functions_reject_bad_inputs():
    classifier = SequenceClassifier(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), 4, freeze=True)
    tokens, labels = walks(8, seed=0)
    with pytest.raises(TypeError, match="(?s)parameter 'model'.*Actual value: SequenceClassifier.*MaskedLM"):
        pretrain_masked_lm(classifier, tokens)
    with pytest.raises(TypeError, match=r"(?s)parameter 'labels'.*Actual value: i64\[5\].*Int64\[Tensor, 'N'\].*N=8"):
        train_classifier(classifier, tokens, labels[:5], tokens, labels)
    with pytest.raises(ValueError, match=r"test_labels must be at least one class in \[0, 4\); found \[4, "):
        train_classifier(classifier, tokens, labels, tokens, labels + 4)
    with pytest.raises(ValueError, match=r"^test_tokens must hold ids in \[0, 12\); found ids from 12 to 23"):
        train_classifier(classifier, tokens, labels, tokens + 12, labels)  # at the call, not after an epoch
    with pytest.raises(ValueError, match=r"^tokens must hold ids in \[0, 12\); found ids from -1 to 10"):
        train_classifier(classifier, tokens - 1, labels, tokens, labels)
    with pytest.raises(ValueError, match=r"labels must be at least one class in \[0, 4\); found \[\]"):
        train_classifier(classifier, tokens[:0], labels[:0], tokens, labels)  # 0 batches
    with pytest.raises(ValueError, match="tokens must hold at least one string; found 0"):
        pretrain_masked_lm(MaskedLM(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), VOCAB_SIZE), tokens[:0])
    with pytest.raises(ValueError, match=r"tokens other than special_ids must be ids in \[0, vocab_size\)"):
        pretrain_masked_lm(MaskedLM(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), VOCAB_SIZE), tokens + VOCAB_SIZE)
    with pytest.raises(TypeError, match="(?s)parameter 'num_classes'.*Actual value: 1.*is_at_least_2"):
        SequenceClassifier(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), 1, freeze=True)
    with pytest.raises(TypeError, match="(?s)parameter 'freeze'.*Actual value: 1.*bool"):
        SequenceClassifier(TransformerStack(embedding(VOCAB_SIZE, CONFIG), CONFIG), 4, freeze=1)
    assert MASK == DIGITS and MASK not in walks(100, seed=0)[0]  # <mask> comes from corruption only
