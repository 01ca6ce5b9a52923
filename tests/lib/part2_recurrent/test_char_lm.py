"""Tests for lib/part2_recurrent/char_lm.py: the Zen of Python, the vocabulary and batches by hand, the model with a
lib layer swapped in (same outputs) feeding lib.part3_words.decoding, training on a text it can learn with a held-out
curve, and truncated BPTT against full BPTT and a truncated graph built by hand (float64); BPTT(k1, k2) against its
definition cut by hand per loss, and randomised truncation against full BPTT in exact expectation."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lib.part2_recurrent.char_lm import (CharLM, CharVocabulary, language_model_batch, stream_batch, teacher_forcing_batch,
                         train_char_lm, train_truncated_bptt, truncated_bptt_loss, zen_of_python,
                         truncation_factors, randomized_bptt_loss)
from lib.part3_words.decoding import sample
from lib.part2_recurrent.rnn import LSTM


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
    with pytest.raises(ValueError, match=r"tokens must be output ids 0 .. V - 1 = 2; found tokens\[1\] = 3"):
        vocabulary.decode([1, 3, 0])
    with pytest.raises(ValueError, match=r"tokens must be output ids 0 .. V - 1 = 2; found tokens\[1\] = -1"):
        vocabulary.decode([1, -1])
    with pytest.raises(ValueError, match=r"tokens must be output ids 0 .. V - 1 = 2; found tokens\[1\] = True"):
        vocabulary.decode([1, True, 0])  # beartype passes a bool as an Integral
    with pytest.raises(TypeError, match=r"lines must be a list of str, not one str; found 'ab'"):
        language_model_batch("ab", vocabulary)
    with pytest.raises(TypeError, match=r"(?s)parameter 'vocabulary'.*Actual value: 'ab'.*CharVocabulary"):
        language_model_batch(["ab"], "ab")
    with pytest.raises(TypeError, match=r"(?s)parameter 'sequences'.*Actual value: 'ab'.*Sequence"):
        teacher_forcing_batch("ab", 3)
    with pytest.raises(ValueError, match=r"sequences\[1\] must be a non-empty list of token ids; found \[\]"):
        teacher_forcing_batch([[1, 0], []], 3)
    with pytest.raises(ValueError, match=r"sequences\[1\] must hold token ids \(ints >= 0\); found sequences\[1\]\[2\] = -1"):
        teacher_forcing_batch([[1, 0], [1, 1, -1, 1, 1, 1, 1, 1, 0]], 3)
    with pytest.raises(ValueError, match=r"sequences\[0\] must hold token ids \(ints >= 0\); found sequences\[0\]\[1\] = True"):
        teacher_forcing_batch([[1, True, 0]], 3)
    with pytest.raises(ValueError, match=r"sequences must hold at least one sequence; found \[\]"):
        teacher_forcing_batch([], 3)


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
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: f32\[2,3\]"):
        model(torch.zeros(2, 3))
    with pytest.raises(TypeError, match=r"(?s)parameter 'prefixes'.*Actual value: i32\[2,3\].*Int64"):
        model.next_token_log_probs(prefixes.int())
    h = torch.zeros(1, 2, 6)
    with pytest.raises(TypeError, match=r"(?s)parameter 'state'.*Actual value: \(f32\[1,3,6\].*'1 N H'.*N=2"):
        model.run(prefixes, (torch.zeros(1, 3, 6), torch.zeros(1, 3, 6)))
    assert model.run(prefixes, (h, h))[1][0].shape == (1, 2, 6)  # the lib LSTM's pair
    model = CharLM(vocab_size=5, hidden_size=6, embedding_dim=3, kind="lstm")
    with pytest.raises(TypeError, match=r"state must be a pair \(h, c\) of torch.float32 \(1, N, H = 6\) for this LSTM; found \[\(torch.float32, \(1, 2, 6\)\)\]"):
        model.run(prefixes, h)
    with pytest.raises(TypeError, match=r"state must be a pair \(h, c\) of torch.float32 \(1, N, H = 6\) for this LSTM; found \[\(torch.float64"):
        model.run(prefixes, (h.double(), h.double()))
    with pytest.raises(TypeError, match=r"state must be a pair \(h, c\) of torch.float32 \(1, N, H = 6\) for this LSTM; found \[\(torch.float32, \(1, 2, 7\)\)"):
        model.run(prefixes, (torch.zeros(1, 2, 7), torch.zeros(1, 2, 7)))
    gru = CharLM(vocab_size=5, hidden_size=np.int64(6), embedding_dim=3)  # numpy sizes too
    with pytest.raises(TypeError, match=r"state must be one torch.float32 \(1, N, H = 6\) for this GRU; found \[\(torch.float32, \(1, 2, 6\)\), \(torch"):
        gru.run(prefixes, (h, h))
    assert gru.run(prefixes, h)[1].shape == (1, 2, 6)
    with pytest.raises(ValueError, match=r"tokens must hold N, t >= 1 ids from 0 to bos = 5; found shape \(1, 2\), ids \[1, 6\]"):
        model(torch.tensor([[1, 6]]))
    with pytest.raises(ValueError, match=r"tokens must hold N, t >= 1 ids from 0 to bos = 5; found shape \(2, 0\)"):
        model(torch.zeros(2, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"CharLM of vocab_size=5, hidden_size=1000000, embedding_dim=3 would hold 3e\+12 parameters"):
        CharLM(5, hidden_size=10**6, embedding_dim=3)


def test_train_char_lm_learns_a_tiny_text():
    lines = ["abab", "baba"]
    vocabulary = CharVocabulary.from_text("\n".join(lines))
    inputs, targets = language_model_batch(lines, vocabulary)
    torch.manual_seed(0)
    model = CharLM(vocabulary.size, hidden_size=16, embedding_dim=4)
    losses = train_char_lm(model, inputs, targets, steps=60)["train"]
    # After the first character the lines are deterministic: the loss tends to ln(2) / 5 per token.
    assert losses[0] > 1.0 and losses[-1] < 0.25
    greedy = model.next_token_log_probs(torch.tensor([[vocabulary.bos, 1]])).argmax().item()
    assert vocabulary.chars[greedy] == "b"


def test_held_out_curve_is_measured_before_each_step_and_after_the_last_with_the_same_parameters():
    lines = ["abab", "baba", "abba"]
    vocabulary = CharVocabulary.from_text("\n".join(lines))
    train, held_out = language_model_batch(lines[:2], vocabulary), language_model_batch(lines[2:], vocabulary)
    torch.manual_seed(0)
    model = CharLM(vocabulary.size, hidden_size=8, embedding_dim=4, kind="rnn")
    with torch.no_grad():
        first = F.cross_entropy(model(held_out[0]).flatten(0, 1), held_out[1].flatten(), ignore_index=-100)
    torch.manual_seed(0)
    again = CharLM(vocabulary.size, hidden_size=8, embedding_dim=4, kind="rnn")
    curves = train_char_lm(again, *train, steps=5, held_out=held_out)
    assert set(curves) == {"train", "held_out"} and len(curves["held_out"]) == len(curves["train"]) == 6
    assert curves["held_out"][0] == pytest.approx(first.item(), abs=1e-6)
    assert curves["held_out"][1] != curves["held_out"][0]  # measured again after the first step
    with torch.no_grad():  # the last entries are measured after the fifth and last update
        last = [F.cross_entropy(again(x).flatten(0, 1), y.flatten(), ignore_index=-100).item() for x, y in
                (train, held_out)]
    assert [curves["train"][-1], curves["held_out"][-1]] == pytest.approx(last, abs=1e-6)
    torch.manual_seed(0)
    plain = train_char_lm(CharLM(vocabulary.size, hidden_size=8, embedding_dim=4, kind="rnn"), *train, steps=5)
    assert plain == {"train": curves["train"]}  # measuring the held-out loss changes nothing
    with pytest.raises(TypeError, match=r"(?s)parameter 'held_out'.*Actual value: i64\[1,5\]"):
        train_char_lm(again, *train, steps=1, held_out=held_out[0])
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_norm'.*Actual value: 0.0.*is_above_0_or_inf"):
        train_char_lm(again, *train, steps=1, max_norm=0.0)


# ---------------------------------------------------------------------------
# Truncated BPTT.
# ---------------------------------------------------------------------------


def test_stream_batch_by_hand():
    inputs, targets = stream_batch([1, 2, 3, 4, 5, 6, 7, 8], rows=3)
    assert inputs.tolist() == [[1, 2], [3, 4], [5, 6]] and targets.tolist() == [[2, 3], [4, 5], [6, 7]]
    inputs, targets = stream_batch([1, 2, 3], rows=1)
    assert inputs.tolist() == [[1, 2]] and targets.tolist() == [[2, 3]]
    with pytest.raises(ValueError, match=r"rows must be at most len\(tokens\) - 1 = 2; found 3"):
        stream_batch([1, 2, 3], rows=3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: 'abc'"):
        stream_batch("abc", rows=1)
    with pytest.raises(ValueError, match=r"tokens must hold at least 2 ids; found \[1\]"):
        stream_batch([1], rows=1)
    with pytest.raises(ValueError, match=r"tokens must hold at least 2 ids; found \[\]"):
        stream_batch([], rows=1)
    with pytest.raises(ValueError, match=r"tokens must be ids \(ints >= 0\); found tokens\[3\] = -3"):
        stream_batch([1, 2, 3, -3, 1, 1, 1, 1, 1], rows=1)
    inputs, _ = stream_batch([1, 2, np.int64(3)], rows=1)  # numpy ids, as before
    assert inputs.tolist() == [[1, 2]]


def _stream_model(kind, seed=0, vocab=5):
    torch.manual_seed(seed)
    model = CharLM(vocab, hidden_size=6, embedding_dim=3, kind=kind).double()
    with torch.no_grad():  # large recurrent weights: the far terms of the gradient are not negligible
        model.recurrent.weight_hh_l0.mul_(3.0)
    inputs = torch.randint(0, vocab, (2, 11), generator=torch.Generator().manual_seed(seed))
    targets = torch.randint(0, vocab, (2, 11), generator=torch.Generator().manual_seed(seed + 1))
    return model, inputs, targets


def _gradients(model, loss):
    model.zero_grad()
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


def _hand_truncated_loss(model, inputs, targets, k):
    """One step at a time through the PyTorch layer, the state cut from the graph every k steps."""
    state, logits = None, []
    for t in range(inputs.shape[1]):
        if t % k == 0 and state is not None:
            state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
        hidden, state = model.recurrent(model.embedding(inputs[:, t : t + 1]), state)  # (N, 1, H)
        logits.append(model.output(hidden))
    return F.cross_entropy(torch.cat(logits, dim=1).flatten(0, 1), targets.flatten())


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_truncation_at_least_the_length_is_full_bptt(kind):
    model, inputs, targets = _stream_model(kind)
    full = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    expected = _gradients(model, full)
    for k in (11, 50):
        loss = truncated_bptt_loss(model, inputs, targets, k)
        assert abs(loss.item() - full.item()) < 1e-12
        for got, want in zip(_gradients(model, loss), expected):
            torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
@pytest.mark.parametrize("k", [1, 3, 4])
def test_truncated_gradient_equals_a_hand_built_truncated_graph_and_not_the_full_one(kind, k):
    model, inputs, targets = _stream_model(kind)
    full = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    full_gradients = _gradients(model, full)
    loss = truncated_bptt_loss(model, inputs, targets, k)
    assert abs(loss.item() - full.item()) < 1e-12  # the forward pass is not truncated
    got = _gradients(model, loss)
    for g, want in zip(got, _gradients(model, _hand_truncated_loss(model, inputs, targets, k))):
        torch.testing.assert_close(g, want, atol=1e-10, rtol=0)
    names = [name for name, _ in model.named_parameters()]
    recurrent = names.index("recurrent.weight_hh_l0")
    assert (got[recurrent] - full_gradients[recurrent]).abs().max() > 1e-4  # what the truncation cuts
    output = names.index("output.weight")
    torch.testing.assert_close(got[output], full_gradients[output], atol=1e-12, rtol=0)  # one step deep


def _hand_windowed_loss(model, inputs, targets, k1, k2):
    """BPTT(k1, k2) by its definition, one target column at a time: the loss at step t (from 0), whose chunk
    starts at s = k1 * (t // k1), is computed from a run whose state is cut from the graph before step
    max(0, s - (k2 - k1)); the mean of those losses."""
    total = 0.0
    for t in range(inputs.shape[1]):
        cut = max(0, k1 * (t // k1) - (k2 - k1))
        state = None
        for step in range(t + 1):
            if step == cut and state is not None:
                state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
            hidden, state = model.recurrent(model.embedding(inputs[:, step : step + 1]), state)
        total = total + F.cross_entropy(model.output(hidden[:, 0]), targets[:, t], reduction="sum")
    return total / targets.numel()


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
@pytest.mark.parametrize("k1, k2", [(1, 1), (3, 3), (1, 4), (3, 5), (4, 6), (2, 7), (3, 7)])
def test_windowed_gradient_equals_the_definition_and_not_plain_truncation(kind, k1, k2):
    model, inputs, targets = _stream_model(kind)
    full = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    loss = truncated_bptt_loss(model, inputs, targets, k1, k2=k2)
    assert abs(loss.item() - full.item()) < 1e-12  # the forward pass is not truncated
    got = _gradients(model, loss)
    for g, want in zip(got, _gradients(model, _hand_windowed_loss(model, inputs, targets, k1, k2))):
        torch.testing.assert_close(g, want, atol=1e-10, rtol=0)
    plain = _gradients(model, truncated_bptt_loss(model, inputs, targets, k1))
    recurrent = [name for name, _ in model.named_parameters()].index("recurrent.weight_hh_l0")
    differs = (got[recurrent] - plain[recurrent]).abs().max() > 1e-4
    assert differs == (k2 > k1)  # k2 = k1 is plain truncation; any overlap changes the gradient
    full_gradients = _gradients(model, full)
    assert (got[recurrent] - full_gradients[recurrent]).abs().max() > 1e-8  # still truncated: k2 < L (float64 noise: 1e-15)


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
@pytest.mark.parametrize("k1, k2", [(1, 11), (3, 12), (3, 11), (11, 11), (4, 30)])
def test_windows_reaching_step_0_are_full_bptt(kind, k1, k2):
    """Full BPTT when every window starts at step 0: k2 - k1 at least the last chunk's start, 9 for k1 = 3 (so
    k2 = 12), and k2 = 11 = L when k1 divides L; (3, 11) misses one step and must differ."""
    model, inputs, targets = _stream_model(kind)
    full = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    expected = _gradients(model, full)
    loss = truncated_bptt_loss(model, inputs, targets, k1, k2=k2)
    assert abs(loss.item() - full.item()) < 1e-12
    gaps = [(got - want).abs().max().item() for got, want in zip(_gradients(model, loss), expected)]
    assert (max(gaps) < 1e-10) == ((k1, k2) != (3, 11)), gaps


def test_train_with_windows_takes_one_step_per_chunk_on_the_window_gradient():
    model, inputs, targets = _stream_model("rnn")
    reference, _, _ = _stream_model("rnn")
    # k2 >= L: every window starts at step 0, one chunk of k = 11: one Adam step on full BPTT's gradient
    losses = train_truncated_bptt(model, inputs, targets, k=11, epochs=1, lr=0.1, max_norm=0.5, k2=20)
    optimizer = torch.optim.Adam(reference.parameters(), lr=0.1)
    loss = F.cross_entropy(reference(inputs).flatten(0, 1), targets.flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    optimizer.step()
    assert losses == [loss.item()]
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    # chunks of 4: 3 steps; the first chunk is plain truncation's, the second re-reads steps 1-3 (after the
    # first update) from the state the first window left before step 1
    windowed, plain = (_stream_model("rnn")[0] for _ in range(2))
    got = train_truncated_bptt(windowed, inputs, targets, k=4, epochs=1, k2=7)
    want = train_truncated_bptt(plain, inputs, targets, k=4, epochs=1)
    assert len(got) == 3 and got[0] == want[0] and abs(got[1] - want[1]) > 1e-6


def test_windowed_truncation_errors():
    model, inputs, targets = _stream_model("rnn")
    with pytest.raises(ValueError, match=r"k2 must be at least k1 = 4; found k2 = 3"):
        truncated_bptt_loss(model, inputs, targets, 4, k2=3)
    with pytest.raises(ValueError, match=r"k2 must be at least k1 = 4; found k2 = 3"):
        train_truncated_bptt(model, inputs, targets, 4, epochs=1, k2=3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'k2'.*Actual value: 0"):
        truncated_bptt_loss(model, inputs, targets, 4, k2=0)
    with pytest.raises(ValueError, match=r"inputs must hold L >= 1 steps; found shape \(2, 0\)"):
        truncated_bptt_loss(model, inputs[:, :0], targets[:, :0], 3, k2=4)


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_randomized_truncation_is_full_bptt_in_expectation_exactly(kind):
    """All 2**(L-1) patterns of the factors (the first step's has no state to act on), each weighted by its
    probability: the mean gradient is full BPTT's, though no single pattern gives it."""
    model, inputs, targets = _stream_model(kind)
    inputs, targets = inputs[:, :6], targets[:, :6]
    full = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    expected = _gradients(model, full)
    keep = 0.3
    mean = [torch.zeros_like(g) for g in expected]
    recurrent = [name for name, _ in model.named_parameters()].index("recurrent.weight_hh_l0")
    for pattern in range(2 ** 5):
        kept = torch.tensor([1] + [(pattern >> i) & 1 for i in range(5)], dtype=torch.bool)
        probability = keep ** kept[1:].sum().item() * (1 - keep) ** (~kept[1:]).sum().item()
        loss = randomized_bptt_loss(model, inputs, targets, kept.double() / keep)
        assert abs(loss.item() - full.item()) < 1e-12  # the value is never touched
        got = _gradients(model, loss)
        assert (got[recurrent] - expected[recurrent]).abs().max() > 1e-8  # no draw gives the full gradient
        for m, g in zip(mean, got):
            m += probability * g
    for m, want in zip(mean, expected):
        torch.testing.assert_close(m, want, atol=1e-10, rtol=0)


def test_randomized_truncation_with_factors_one_or_zero_is_full_or_one_step_bptt():
    model, inputs, targets = _stream_model("lstm")
    ones, zeros = torch.ones(11, dtype=torch.float64), torch.zeros(11, dtype=torch.float64)
    full = F.cross_entropy(model(inputs).flatten(0, 1), targets.flatten())
    for factors, reference in ((ones, full), (zeros, truncated_bptt_loss(model, inputs, targets, 1))):
        want = _gradients(model, reference)
        for got, w in zip(_gradients(model, randomized_bptt_loss(model, inputs, targets, factors)), want):
            torch.testing.assert_close(got, w, atol=1e-10, rtol=0)


def test_truncation_factors_have_mean_one_and_the_asked_share_kept():
    factors = truncation_factors(20_000, 0.25, torch.Generator().manual_seed(0))
    assert set(factors.unique().tolist()) == {0.0, 4.0}
    assert abs((factors > 0).double().mean().item() - 0.25) < 0.01  # 4.3 standard deviations
    assert abs(factors.mean().item() - 1.0) < 0.04
    assert torch.equal(truncation_factors(5, 1.0), torch.ones(5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"keep must be a probability above 0; found 0"):
        truncation_factors(5, 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'keep'.*Actual value: 1.5"):
        truncation_factors(5, 1.5)
    model, inputs, targets = _stream_model("rnn")
    with pytest.raises(TypeError, match=r"(?s)parameter 'factors'.*Actual value: f64\[5\].*L=11"):
        randomized_bptt_loss(model, inputs, targets, torch.ones(5, dtype=torch.float64))



def test_randomized_truncation_errors_name_the_argument():
    """No steps, a negative factor (it would flip a path's gradient) and a NaN or infinite one (NaN loss) are
    refused with the argument named; 0 and 1 / keep pass."""
    model, inputs, targets = _stream_model("rnn")
    with pytest.raises(ValueError, match=r"inputs must hold L >= 1 steps; found shape \(2, 0\)"):
        randomized_bptt_loss(model, inputs[:, :0], targets[:, :0], torch.ones(0, dtype=torch.float64))
    for t, bad in ((3, -2.0), (0, float("nan")), (10, float("inf"))):
        factors = torch.full((11,), 2.0, dtype=torch.float64)
        factors[t] = bad
        with pytest.raises(ValueError, match=rf"factors must be finite and >= 0; found factors\[{t}\] = {bad}"):
            randomized_bptt_loss(model, inputs, targets, factors)
    factors = torch.tensor([0.0, 2, 0, 2, 2, 0, 0, 2, 2, 2, 0], dtype=torch.float64)
    assert randomized_bptt_loss(model, inputs, targets, factors).isfinite()

def test_train_truncated_bptt_takes_one_step_per_chunk():
    model, inputs, targets = _stream_model("rnn")
    reference, _, _ = _stream_model("rnn")
    losses = train_truncated_bptt(model, inputs, targets, k=11, epochs=1, lr=0.1, max_norm=0.5)
    # k >= L: one chunk, one step of Adam on the full loss with clipped gradients
    optimizer = torch.optim.Adam(reference.parameters(), lr=0.1)
    loss = F.cross_entropy(reference(inputs).flatten(0, 1), targets.flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.5)
    optimizer.step()
    assert losses == [loss.item()]
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    assert len(train_truncated_bptt(model, inputs, targets, k=4, epochs=2)) == 2 * math.ceil(11 / 4)


def test_train_truncated_bptt_learns_a_periodic_stream():
    inputs, targets = stream_batch([1, 2, 3, 4] * 30, rows=2)
    torch.manual_seed(0)
    model = CharLM(5, hidden_size=16, embedding_dim=4, kind="rnn")
    losses = train_truncated_bptt(model, inputs, targets, k=8, epochs=6, lr=3e-2)
    assert losses[0] > 1.2 and losses[-1] < 0.05


def test_truncated_bptt_errors():
    model, inputs, targets = _stream_model("rnn")
    with pytest.raises(TypeError, match=r"(?s)parameter 'k'.*Actual value: 0.*is_at_least_1"):
        truncated_bptt_loss(model, inputs, targets, 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*Actual value: i64\[2,10\].*L=11"):
        truncated_bptt_loss(model, inputs, targets[:, :10], 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'model'.*Actual value: Linear.*CharLM"):
        train_truncated_bptt(torch.nn.Linear(2, 2), inputs, targets, 3, epochs=1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'epochs'.*Actual value: 0.*is_at_least_1"):
        train_truncated_bptt(model, inputs, targets, 3, epochs=0)
    with pytest.raises(ValueError, match=r"inputs must hold L >= 1 steps; found shape \(2, 0\)"):
        truncated_bptt_loss(model, inputs[:, :0], targets[:, :0], 3)
    with pytest.raises(ValueError, match=r"inputs must hold L >= 1 steps; found shape \(2, 0\)"):
        train_truncated_bptt(model, inputs[:, :0], targets[:, :0], 3, epochs=1)
    bad = targets.clone()
    bad[1, 4] = 7
    with pytest.raises(ValueError, match=r"targets must hold ids 0 .. V - 1 = 4 or -100 \(padding\), at least one not padding; found \[.*7\]"):
        truncated_bptt_loss(model, inputs, bad, 3)
    with pytest.raises(ValueError, match=r"targets must hold ids 0 .. V - 1 = 4 or -100 \(padding\); found 0 .. 7"):
        train_truncated_bptt(model, inputs, bad, 3, epochs=1)
    with pytest.raises(ValueError, match=r"targets must hold ids 0 .. V - 1 = 4 or -100 \(padding\), at least one not padding; found \[7\]"):
        train_char_lm(model, inputs, torch.full_like(targets, 7), steps=1)
    with pytest.raises(ValueError, match=r"targets must hold ids 0 .. V - 1 = 4 or -100 \(padding\), at least one not padding; found \[-100\]"):
        train_char_lm(model, inputs, torch.full_like(targets, -100), steps=1)


def test_train_char_lm_sgd_without_clipping_is_plain_gradient_descent():
    lines = ["abab", "baba"]
    vocabulary = CharVocabulary.from_text("\n".join(lines))
    inputs, targets = language_model_batch(lines, vocabulary)
    torch.manual_seed(0)
    model = CharLM(vocabulary.size, hidden_size=8, embedding_dim=4, kind="rnn").double()
    torch.manual_seed(0)
    reference = CharLM(vocabulary.size, hidden_size=8, embedding_dim=4, kind="rnn").double()
    train_char_lm(model, inputs, targets, steps=1, lr=50.0, max_norm=math.inf, optimizer="sgd")
    loss = F.cross_entropy(reference(inputs).flatten(0, 1), targets.flatten(), ignore_index=-100)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), math.inf)
    assert norm > 0.5  # so that clipping at the threshold 0.5 would have changed the step
    with torch.no_grad():
        for p in reference.parameters():
            p -= 50.0 * p.grad
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'optimizer'.*Actual value: 'rmsprop'.*Literal\['adam'"):
        train_char_lm(model, inputs, targets, steps=1, optimizer="rmsprop")


@pytest.mark.parametrize("chars", [[], ["a", "\n"], ["\n", "a", "a"], ["\n", "ab"]])
def test_a_vocabulary_is_distinct_characters_with_the_newline_first(chars):
    """An empty list made eos == bos == 0; a repeated character two ids for one letter."""
    with pytest.raises(ValueError, match=r"chars must be distinct single characters, the newline \(eos\) first"):
        CharVocabulary(chars)
    assert CharVocabulary(["\n", "a"]).bos == 2


def test_every_character_of_a_vocabulary_is_checked_to_be_a_str():
    for position in range(3):
        chars = ["\n", "a", "b"]
        chars[position] = 7
        with pytest.raises(TypeError, match="chars"):
            CharVocabulary(chars)
