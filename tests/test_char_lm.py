"""Tests for lib/char_lm.py: the Zen of Python, the vocabulary and batches by hand, the model with a
lib layer swapped in (same outputs) feeding lib.decoding, and training on a text it can learn."""

import pytest
import torch

from lib.char_lm import (CharLM, CharVocabulary, language_model_batch, teacher_forcing_batch, train_char_lm,
                         zen_of_python)
from lib.decoding import sample
from lib.rnn import LSTM


def test_zen_of_python_is_decoded_and_silent(capsys):
    text = zen_of_python()
    lines = text.splitlines()
    assert lines[0] == "The Zen of Python, by Tim Peters" and lines[1] == "" and len(lines) == 21
    assert "Beautiful is better than ugly." in lines
    assert capsys.readouterr().out == ""


def test_vocabulary_round_trip_and_batch_by_hand():
    vocabulary = CharVocabulary.from_text("ab\nba")
    assert vocabulary.chars == ["\n", "a", "b"] and (vocabulary.eos, vocabulary.bos, vocabulary.size) == (0, 3, 3)
    assert vocabulary.encode("ab") == [1, 2, 0] and vocabulary.decode([1, 2, 0, 1]) == "ab"
    inputs, targets = language_model_batch(["ab", "b"], vocabulary)
    assert inputs.tolist() == [[3, 1, 2], [3, 2, 3]]
    assert targets.tolist() == [[1, 2, 0], [2, 0, -100]]
    with pytest.raises(ValueError, match=r"unknown characters \['c'\]"):
        vocabulary.encode("abc")
    with pytest.raises(ValueError, match="without a newline"):
        vocabulary.encode("a\nb")
    with pytest.raises(TypeError, match="vocabulary must be a CharVocabulary; found str"):
        language_model_batch(["ab"], "ab")
    with pytest.raises(TypeError, match="sequences must be a non-empty list of non-empty token lists; found 'ab'"):
        teacher_forcing_batch("ab", 3)
    with pytest.raises(ValueError, match=r"sequences\[1\] must be a non-empty list of token ids"):
        teacher_forcing_batch([[1, 0], []], 3)


def test_char_lm_runs_the_same_with_a_lib_layer_and_feeds_lib_decoding():
    torch.manual_seed(0)
    model = CharLM(vocab_size=5, hidden_size=6, embedding_dim=3, kind="lstm")
    prefixes = torch.tensor([[5, 1, 2], [5, 4, 0]])
    log_probs = model.next_token_log_probs(prefixes)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2))
    model.recurrent = LSTM.from_torch(model.recurrent)
    torch.testing.assert_close(model.next_token_log_probs(prefixes), log_probs, atol=1e-6, rtol=0)
    samples = sample(model.next_token_log_probs, bos=5, eos=0, max_len=8, num_samples=3,
                     generator=torch.Generator().manual_seed(0))
    assert len(samples) == 3 and all(1 <= len(tokens) <= 8 for tokens, _ in samples)
    with pytest.raises(TypeError, match=r"tokens must be a LongTensor of shape \(N, t\)"):
        model(torch.zeros(2, 3))


def test_train_char_lm_learns_a_tiny_text():
    lines = ["abab", "baba"]
    vocabulary = CharVocabulary.from_text("\n".join(lines))
    inputs, targets = language_model_batch(lines, vocabulary)
    torch.manual_seed(0)
    model = CharLM(vocabulary.size, hidden_size=16, embedding_dim=4)
    losses = train_char_lm(model, inputs, targets, steps=60)
    # After the first character the lines are deterministic: the loss tends to ln(2) / 5 per token.
    assert losses[0] > 1.0 and losses[-1] < 0.25
    greedy = model.next_token_log_probs(torch.tensor([[vocabulary.bos, 1]])).argmax().item()
    assert vocabulary.chars[greedy] == "b"
