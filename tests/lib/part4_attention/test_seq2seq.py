"""Tests for lib/part4_attention/seq2seq.py.

References: ``lib.part2_recurrent.rnn``'s cells written from their equations
(the encoder recurrence), the attention formulas written out with the modules'
own parameters (Bahdanau, Luong dot / general / concat, local-m, local-p, the
pointer network's scores), brute-force loops over positions (local windows),
hypothesis properties, and :mod:`lib.part3_words.decoding` (step-by-step decoding equals
teacher forcing).
"""

import itertools
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part4_attention.attention import masked_softmax
from lib.part3_words.decoding import beam_search_batch, greedy_search
from lib.part4_attention.pointer import PointerNetwork
from lib.part2_recurrent.rnn import GRU as ReferenceGRU
from lib.part4_attention.seq2seq import (
    BahdanauDecoder, Encoder, LuongDecoder, Memory, PlainDecoder, Seq2Seq, Seq2SeqConfig,
    accuracy_by_length, alignment_error_rate, alignments, beam_translate, build_seq2seq, exact_matches,
    gold_mass, hard_alignment, load_seq2seq, local_weights, save_seq2seq,
)
from lib.part4_attention.date_task import DateTask
from lib.part4_attention.sorting_task import SortingTask
from lib.part4_attention.pairs import SequencePairs

FAST = settings(max_examples=25, deadline=None, database=None)
SMALL = Seq2SeqConfig(embed_dim=5, hidden_dim=4, attention_dim=6)

# Every decoder of the chapter, by the name the tests print.
DECODERS = {
    "plain": ("plain", {}),
    "bahdanau": ("bahdanau", {}),
    "luong-dot-global": ("luong", {"score": "dot", "mode": "global"}),
    "luong-general-local-m": ("luong", {"score": "general", "mode": "local-m", "window": 1}),
    "luong-concat-local-p": ("luong", {"score": "concat", "mode": "local-p", "window": 2}),
    "luong-general-global-no-feeding": ("luong", {"score": "general", "mode": "global", "input_feeding": False}),
}


def small_model(name, seed=0, config=SMALL, src_vocab=9, tgt_vocab=7):
    decoder, options = DECODERS[name]
    torch.manual_seed(seed)
    return build_seq2seq(decoder, src_vocab, tgt_vocab, config, **options).eval()


SRC = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 0, 0, 0], [3, 3, 8, 4, 6]])
LENS = torch.tensor([4, 2, 5])
TGT = torch.tensor([[1, 4, 5, 3], [1, 6, 6, 3], [1, 3, 4, 5]])


# ---------------------------------------------------------------------------
# The encoder.
# ---------------------------------------------------------------------------


def test_encoder_recurrence_is_h_s_of_h_s_minus_1_and_x_s_not_x_s_minus_1():
    """Erratum (notes 001, 003): h̄_s = f(h̄_{s-1}, x_s), not f(h̄_{s-1}, x_{s-1})."""
    torch.manual_seed(0)
    encoder = Encoder(9, 5, 4, bidirectional=False)
    src = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        memory = encoder(src)
        x = encoder.embed(src)  # (1, S, E)
        cell = ReferenceGRU.from_torch(encoder.rnn).cells[0]  # lib.part2_recurrent.rnn's GRU cell, written from its equations
        h, right, notes = torch.zeros(1, 4), [], []
        for s in range(4):
            h = cell(x[:, s], h)  # h̄_s = f(h̄_{s-1}, x_s)
            right.append(h)
        h = torch.zeros(1, 4)
        for s in range(4):
            h = cell(x[:, s - 1] if s else torch.zeros(1, 5), h)  # the notes: x_{s-1} (x_0 = 0)
            notes.append(h)
    torch.testing.assert_close(memory.states[0], torch.cat(right))
    torch.testing.assert_close(memory.summary, right[-1])  # u = h̄_S
    assert (memory.states[0] - torch.cat(notes)).abs().max() > 1e-2


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_bidirectional_encoder_ignores_padding_and_summarises_both_ends(cell):
    torch.manual_seed(1)
    encoder = Encoder(9, 5, 4, cell=cell, bidirectional=True)
    with torch.no_grad():
        padded = encoder(torch.tensor([[3, 4, 5, 0, 0], [6, 7, 8, 3, 4]]), torch.tensor([3, 5]))
        alone = encoder(torch.tensor([[3, 4, 5]]))
        reference = ReferenceGRU.from_torch(encoder.rnn) if cell == "gru" else None
    assert padded.states.shape == (2, 5, 8) and padded.summary.shape == (2, 8)
    torch.testing.assert_close(padded.states[0, :3], alone.states[0])  # the backward pass starts at the last real token
    assert (padded.states[0, 3:] == 0).all()
    forward_last, backward_first = alone.states[0, -1, :4], alone.states[0, 0, 4:]
    torch.testing.assert_close(padded.summary[0], torch.cat((forward_last, backward_first)))
    if reference is not None:
        with torch.no_grad():
            torch.testing.assert_close(reference(encoder.embed(torch.tensor([[3, 4, 5]])))[0], alone.states)


def test_encoder_errors_name_expected_and_found():
    encoder = Encoder(9, 5, 4)
    with pytest.raises(ValueError, match=r"src must hold ids in \[0, 9\); found ids from 0 to 9"):
        encoder(torch.tensor([[9, 0]]))
    with pytest.raises(ValueError, match=r"src_lens must lie in \[1, S\] = \[1, 2\]; found values from 0 to 2"):
        encoder(torch.tensor([[3, 4], [3, 4]]), torch.tensor([0, 2]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'src_lens'.*Actual value: f32\[1\].*Int\[Tensor, 'B'\]"):
        encoder(torch.tensor([[3, 4]]), torch.tensor([2.0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'cell'.*Actual value: 'rnn'.*Literal\['gru', 'lstm'\]"):
        Encoder(9, 5, 4, cell="rnn")


# ---------------------------------------------------------------------------
# Decoders: shapes, distributions, the formulas.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_shapes_and_weights_are_distributions_over_the_real_source(name):
    model = small_model(name)
    with torch.no_grad():
        logits, weights = model.attend(SRC, TGT, LENS)
    assert logits.shape == (3, 4, 7)
    if name == "plain":
        assert weights is None
        return
    assert weights.shape == (3, 4, 5)
    padding = torch.arange(5) >= LENS[:, None, None]  # (B, 1, S)
    assert (weights[padding.expand_as(weights)] == 0).all(), "padded positions must get weight exactly 0"
    assert (weights >= 0).all()
    sums = weights.sum(-1)
    if "local-p" in name:
        assert (sums <= 1 + 1e-6).all(), "local-p weights are a window's softmax times a Gaussian <= 1"
    elif "local-m" in name:
        in_source = torch.arange(1, 5)[None, :] <= LENS[:, None] + 1  # the window [t - 1, t + 1] meets the source
        torch.testing.assert_close(sums[in_source], torch.ones_like(sums[in_source]))
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums))


def test_bahdanau_step_is_the_papers_formula_with_the_previous_state_as_query():
    model = small_model("bahdanau")
    decoder = model.decoder
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        state = torch.randn(3, 8)
        token = torch.tensor([4, 5, 6])
        logits, new_state, weights = decoder.step(token, state, memory, t=2)
        W, U, v = decoder.score.query_proj.weight, decoder.score.key_proj.weight, decoder.score.score_proj.weight[0]
        e = torch.tanh((state @ W.T)[:, None] + memory.states @ U.T) @ v  # (B, S): v^T tanh(W s_{t-1} + U h̄_s)
        alpha = masked_softmax(e[:, None], LENS)[:, 0]
        c = torch.einsum("bs,bsd->bd", alpha, memory.states)
        y = decoder.embed(token)
        s = torch.nn.GRUCell(13, 8)
        s.load_state_dict(decoder.cell.state_dict())
        expected_state = s(torch.cat((y, c), -1), state)  # s_t = f(s_{t-1}, [y_{t-1}; c_t])
        expected_logits = decoder.output(torch.cat((expected_state, c, y), -1))
    torch.testing.assert_close(weights, alpha)
    torch.testing.assert_close(new_state, expected_state)
    torch.testing.assert_close(logits, expected_logits)


def test_bahdanau_weights_at_step_t_ignore_y_t_minus_1_and_luong_weights_do_not():
    """Bahdanau's query is h_{t-1}; Luong's is h_t, which has read y_{t-1}."""
    changed = TGT.clone()
    changed[:, 2] = torch.tensor([6, 3, 5])  # a different y at step 3's input
    for name, depends in (("bahdanau", False), ("luong-dot-global", True)):
        model = small_model(name)
        with torch.no_grad():
            before, after = model.attend(SRC, TGT, LENS)[1], model.attend(SRC, changed, LENS)[1]
        torch.testing.assert_close(before[:, :3], after[:, :3]) if not depends else None
        assert bool((before[:, 2] - after[:, 2]).abs().max() > 1e-4) is depends, name
        torch.testing.assert_close(before[:, :2], after[:, :2])


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_luong_scores_are_dot_general_and_concat(score):
    torch.manual_seed(2)
    decoder = LuongDecoder(7, 5, 8, score=score, attention_dim=6)
    h, states = torch.randn(2, 8), torch.randn(2, 3, 8)
    with torch.no_grad():
        found = decoder.score(h[:, None], states)[:, 0]  # (B, S)
        if score == "dot":
            expected = torch.einsum("bd,bsd->bs", h, states)
        elif score == "general":
            expected = torch.einsum("bd,de,bse->bs", h, decoder.score.weight, states)
        else:  # v_a^T tanh(W_a [h_t; h̄_s]) with W_a = [W_query, W_key] side by side
            W_a = torch.cat((decoder.score.query_proj.weight, decoder.score.key_proj.weight), dim=1)  # (A, 2D)
            pairs = torch.cat((h[:, None].expand(-1, 3, -1), states), dim=-1)  # (B, S, 2D): [h_t; h̄_s]
            expected = torch.tanh(pairs @ W_a.T) @ decoder.score.score_proj.weight[0]
    torch.testing.assert_close(found, expected)


def test_luong_step_computes_the_attentional_vector_from_context_and_current_state():
    model = small_model("luong-dot-global")
    decoder = model.decoder
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        state = (torch.randn(3, 8), torch.randn(3, 8))
        token = torch.tensor([4, 5, 6])
        logits, (h, attentional), weights = decoder.step(token, state, memory, t=1)
        expected_h = decoder.cell(torch.cat((decoder.embed(token), state[1]), -1), state[0])  # input feeding
        a = masked_softmax(torch.einsum("bd,bsd->bs", expected_h, memory.states)[:, None], LENS)[:, 0]
        c = torch.einsum("bs,bsd->bd", a, memory.states)
        expected_attentional = torch.tanh(torch.cat((c, expected_h), -1) @ decoder.combine.weight.T)
    torch.testing.assert_close(h, expected_h)
    torch.testing.assert_close(weights, a)
    torch.testing.assert_close(attentional, expected_attentional)
    torch.testing.assert_close(logits, decoder.output(expected_attentional))


def test_without_input_feeding_the_decoder_states_are_one_gru_pass_over_the_targets():
    """The recurrence no longer reads the attention, so all h_t can be computed at once."""
    model = small_model("luong-general-global-no-feeding")
    decoder = model.decoder
    assert decoder.cell.input_size == 5 and small_model("luong-dot-global").decoder.cell.input_size == 5 + 8
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        state, states = decoder.start(memory), []
        for t in range(TGT.shape[1]):
            _, state, _ = decoder.step(TGT[:, t], state, memory, t + 1)
            states.append(state[0])
        gru = torch.nn.GRU(5, 8, batch_first=True)
        gru.load_state_dict({name + "_l0": value for name, value in decoder.cell.state_dict().items()})
        at_once, _ = gru(decoder.embed(TGT), memory.summary[None])  # (B, T, De)
    torch.testing.assert_close(torch.stack(states, 1), at_once)


def test_plain_decoder_predicts_from_h_t_with_the_summary_fed_at_every_step():
    """Erratum (note 003): o_t = g(h_t), not g(h_0, o_0); the context is u at every step."""
    model = small_model("plain")
    decoder = model.decoder
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        logits, _ = decoder(TGT, memory)
        h, expected = memory.summary, []
        for t in range(TGT.shape[1]):
            h = decoder.cell(torch.cat((decoder.embed(TGT[:, t]), memory.summary), -1), h)
            expected.append(decoder.output(h))
    torch.testing.assert_close(logits, torch.stack(expected, 1))
    assert (logits[:, 0] - logits[:, 1]).abs().max() > 1e-3


# ---------------------------------------------------------------------------
# Local attention.
# ---------------------------------------------------------------------------


def test_local_weights_hand_computed():
    scores = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]])
    lens, centre = torch.tensor([5]), torch.tensor([2.5])  # p_t between positions 2 and 3
    local_m = local_weights(scores, lens, centre, window=1, gaussian=False)
    e2, e3 = torch.exp(torch.tensor(2.0)), torch.exp(torch.tensor(3.0))
    expected = torch.tensor([[0.0, e2 / (e2 + e3), e3 / (e2 + e3), 0.0, 0.0]])  # only |s - 2.5| <= 1
    torch.testing.assert_close(local_m, expected)
    local_p = local_weights(scores, lens, centre, window=1, gaussian=True)  # sigma = 1/2
    torch.testing.assert_close(local_p, expected * torch.exp(torch.tensor(-0.25 / (2 * 0.25))))
    # The window is cut at the source length, and a window past the end is empty.
    torch.testing.assert_close(local_weights(scores, torch.tensor([2]), torch.tensor([3.0]), 1, False),
                               torch.tensor([[0.0, 1.0, 0.0, 0.0, 0.0]]))
    assert (local_weights(scores, torch.tensor([2]), torch.tensor([5.0]), 1, True) == 0).all()


@FAST
@given(st.integers(1, 8), st.integers(1, 4), st.floats(0.0, 9.0), st.booleans(), st.integers(0, 10**6))
def test_property_local_weights_vanish_outside_the_window_and_match_a_loop(length, window, centre, gaussian, seed):
    scores = torch.randn(1, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    weights = local_weights(scores, torch.tensor([length]), torch.tensor([centre], dtype=torch.float64), window,
                            gaussian)[0]
    inside = [s for s in range(1, length + 1) if abs(s - centre) <= window]
    total = sum(torch.exp(scores[0, s - 1]) for s in inside)
    for s in range(1, 9):
        if s not in inside:
            assert weights[s - 1] == 0, f"position {s} lies outside [p_t - D, p_t + D] = [{centre - window}, " \
                                        f"{centre + window}] or the source"
        else:
            factor = torch.exp(torch.tensor(-((s - centre) ** 2) / (2 * (window / 2) ** 2))) if gaussian else 1.0
            torch.testing.assert_close(weights[s - 1], torch.exp(scores[0, s - 1]) / total * factor)


def test_local_m_centres_on_t_and_local_p_predicts_s_times_a_sigmoid():
    model = small_model("luong-concat-local-p")
    decoder = model.decoder
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        h = torch.randn(3, 8)
        centre = decoder.centre(h, memory, t=2)
        W_p, v_p = decoder.position[0].weight, decoder.position[2].weight[0]
        expected = LENS * torch.sigmoid(torch.tanh(h @ W_p.T) @ v_p)  # p_t = S sigmoid(v_p^T tanh(W_p h_t))
    torch.testing.assert_close(centre, expected)
    assert ((0 <= centre) & (centre <= LENS)).all()
    local_m = small_model("luong-general-local-m").decoder
    with torch.no_grad():
        assert local_m.centre(h, memory, t=3).tolist() == [3.0, 3.0, 3.0]


@pytest.mark.parametrize("name", ["luong-general-local-m", "luong-concat-local-p"])
def test_local_decoder_weights_vanish_outside_their_window_at_every_step(name):
    model = small_model(name)
    decoder = model.decoder
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        state = decoder.start(memory)
        for t in range(1, TGT.shape[1] + 1):
            _, new_state, weights = decoder.step(TGT[:, t - 1], state, memory, t)
            centre = decoder.centre(new_state[0], memory, t)  # p_t from h_t
            distance = (torch.arange(1, 6) - centre[:, None]).abs()
            assert (weights[distance > decoder.window] == 0).all()
            state = new_state


# ---------------------------------------------------------------------------
# Decoding: step by step (lib.part3_words.decoding) equals teacher forcing.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_step_fn_gives_the_teacher_forced_log_probabilities(name):
    model = small_model(name)
    step = model.step_fn(SRC, LENS)
    with torch.no_grad():
        full = F.log_softmax(model(SRC, TGT, LENS), dim=-1)  # (B, T, V)
    for t in range(1, 5):
        torch.testing.assert_close(step(TGT[:, :t], torch.tensor([0, 1, 2])), full[:, t - 1])
    torch.testing.assert_close(step(TGT[[2, 0, 2], :2], torch.tensor([2, 0, 2])), full[[2, 0, 2], 1])


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_fast_greedy_equals_lib_decoding_and_teacher_forcing_its_output(name):
    model = small_model(name, seed=3)
    outputs, weights = model.greedy(SRC, LENS, bos=1, eos=2, max_len=5)  # the fast, stateful path
    # lib.part3_words.decoding re-runs the decoder on every prefix (the reference path) and finds the same tokens ...
    beams = beam_search_batch(model.step_fn(SRC, LENS), 3, bos=1, eos=2, beam_size=1, max_len=5)
    assert [b[0][0] for b in beams] == outputs
    single = greedy_search(lambda prefixes: model.step_fn(SRC[:1], LENS[:1])(prefixes, torch.zeros(1).long()),
                           bos=1, eos=2, max_len=5)[0]
    assert single == outputs[0]
    if name == "plain":
        assert weights is None
        return
    # ... and teacher-forcing the outputs reproduces the weights of every step.
    width = max(len(output) for output in outputs)
    tgt_in = torch.ones(3, width, dtype=torch.long)
    for b, output in enumerate(outputs):
        tgt_in[b, 1 : len(output)] = torch.tensor(output[:-1])
    with torch.no_grad():
        _, forced = model.attend(SRC, tgt_in, LENS)
    assert weights.shape == (3, width, 5)
    for b, output in enumerate(outputs):
        torch.testing.assert_close(weights[b, : len(output)], forced[b, : len(output)])
        assert (weights[b, len(output):] == 0).all()
    aligned_outputs, aligned = alignments(
        model, SequencePairs(SRC, LENS, torch.ones(3, 5, dtype=torch.long), torch.full((3, 5), 2)), 1, 2)
    assert aligned_outputs == outputs and torch.equal(aligned, weights)


def test_outputs_that_never_emit_eos_stop_at_max_len():
    model = small_model("bahdanau", seed=3)
    outputs, weights = model.greedy(SRC, LENS, bos=1, eos=6, max_len=2)  # eos = 6: (almost) never chosen
    reference = [b[0][0] for b in beam_search_batch(model.step_fn(SRC, LENS), 3, 1, 6, 1, max_len=2)]
    assert outputs == reference and all(len(o) <= 2 for o in outputs)
    with pytest.raises(ValueError, match="a plain decoder has no attention weights"):
        alignments(small_model("plain"), SequencePairs(SRC, LENS, TGT, TGT), 1, 2)


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_padded_source_tokens_change_nothing(name):
    model = small_model(name)
    with torch.no_grad():
        a = model(torch.tensor([[3, 4, 0, 0]]), TGT[:1], torch.tensor([2]))
        b = model(torch.tensor([[3, 4, 8, 6]]), TGT[:1], torch.tensor([2]))
        c = model(torch.tensor([[3, 4]]), TGT[:1])
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)


class OracleModel(torch.nn.Module):
    """Puts all probability on the reference's next token, except for example 1."""

    def __init__(self, data, vocab_size):
        super().__init__()
        self.data, self.vocab_size = data, vocab_size

    def step_fn(self, src, src_lens):
        def step(prefixes, sources):
            log_probs = torch.full((len(sources), self.vocab_size), -30.0)
            for row, (prefix, s) in enumerate(zip(prefixes.tolist(), sources.tolist())):
                target = self.data.tgt_out[s].tolist()
                token = target[len(prefix) - 1] if s != 1 else 3
                log_probs[row, token] = 0.0
            return F.log_softmax(log_probs, -1)

        return step


def test_exact_matches_counts_whole_outputs_only():
    task = DateTask()
    _, test, _ = task.split(10, 4, seed=0)
    found = exact_matches(OracleModel(test, task.tgt_vocab_size), test, task.bos, task.eos)
    assert found.tolist() == [True, False, True, True]
    model = small_model("luong-concat-local-p", src_vocab=task.src_vocab_size, tgt_vocab=task.tgt_vocab_size)
    outputs, _ = model.greedy(test.src, test.src_lens, task.bos, task.eos, 11)
    references = [row.tolist() for row in test.tgt_out]
    assert exact_matches(model, test, task.bos, task.eos).tolist() == [o == r for o, r in zip(outputs, references)]


# ---------------------------------------------------------------------------
# Building, saving, training.
# ---------------------------------------------------------------------------


def test_accuracy_by_length_hand_computed():
    correct = torch.tensor([True, False, True, True, False, True])
    lens = torch.tensor([3, 3, 4, 6, 7, 9])
    labels, accuracy, counts = accuracy_by_length(correct, lens, [3, 5, 8, 9, 10])
    assert labels == ["3-4", "5-7", "8", "9"]
    assert counts.tolist() == [3, 2, 0, 1]
    torch.testing.assert_close(accuracy[[0, 1, 3]], torch.tensor([2 / 3, 0.5, 1.0]))
    assert torch.isnan(accuracy[2])
    # A length outside every bin would silently leave the counts short of N.
    for edges, found in (([3, 5, 8, 9], "from 3 to 9"), ([4, 10], "from 3 to 9")):
        message = rf"lens must lie in the bins, \[edges\[0\], edges\[-1\]\) = \[{edges[0]}, {edges[-1]}\); found lengths {found}"
        with pytest.raises(ValueError, match=message):
            accuracy_by_length(correct, lens, edges)
    with pytest.raises(ValueError, match=r"edges must be at least two increasing ints; found \[3, 3\]"):
        accuracy_by_length(correct, lens, [3, 3])
    for _ in range(20):  # every edge is checked, not one drawn at random
        with pytest.raises(TypeError, match=r"(?s)parameter 'edges'.*Actual value: \[1, 2.5, 4\]"):
            accuracy_by_length(correct, lens, [1, 2.5, 4])


def test_centres_of_a_local_decoder_follow_the_teacher_forced_states():
    model = small_model("luong-concat-local-p")
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        centres = model.decoder.centres(TGT, memory)  # (B, T)
        state, expected = model.decoder.start(memory), []
        for t in range(4):
            _, state, _ = model.decoder.step(TGT[:, t], state, memory, t + 1)
            expected.append(model.decoder.centre(state[0], memory, t + 1))
    torch.testing.assert_close(centres, torch.stack(expected, 1))
    with pytest.raises(ValueError, match="global attention has no window centre"):
        small_model("luong-dot-global").decoder.centres(TGT, memory)


def test_save_and_load_rebuild_the_same_model(tmp_path):
    model = small_model("luong-concat-local-p")
    save_seq2seq(model, tmp_path / "model.pt")
    saved = torch.load(tmp_path / "model.pt", weights_only=True)
    assert saved["decoder"] == "luong" and saved["options"]["mode"] == "local-p"
    loaded = load_seq2seq(tmp_path / "model.pt")
    assert not loaded.training and loaded.decoder.window == 2
    with torch.no_grad():
        torch.testing.assert_close(loaded(SRC, TGT, LENS), model(SRC, TGT, LENS))
    with pytest.raises(TypeError, match=r"(?s)parameter 'model'.*Actual value: Linear.*model: lib\.part4_attention\.seq2seq\.Seq2Seq"):
        save_seq2seq(torch.nn.Linear(2, 2), tmp_path / "x.pt")
    with pytest.raises(TypeError, match="model must be a Seq2Seq made by build_seq2seq; found one built by hand"):
        save_seq2seq(Seq2Seq(Encoder(9, 5, 4), PlainDecoder(7, 5, 8)), tmp_path / "x.pt")
    for call in (lambda: save_seq2seq(model, ""), lambda: load_seq2seq("")):
        with pytest.raises(ValueError, match="path must name a file; found ''"):
            call()


def test_memory_refuses_lengths_and_indices_out_of_range():
    states, summary = torch.zeros(2, 3, 4), torch.zeros(2, 4)
    memory = Memory(states, torch.tensor([1, 3]), summary)  # the edges 1 and S are lengths
    for lens, found in (([0, 3], "from 0 to 3"), ([1, 4], "from 1 to 4"), ([-1, 2], "from -1 to 2")):
        with pytest.raises(ValueError, match=rf"lens must lie in \[1, S\] = \[1, 3\]; found values {found}"):
            Memory(states, torch.tensor(lens), summary)
    assert memory.select(torch.tensor([-2, 1, 1])).lens.tolist() == [1, 3, 3]  # -B counts from the end
    assert len(memory.select(torch.tensor([], dtype=torch.long)).lens) == 0
    for index, found in (([0, 2], "from 0 to 2"), ([-3, 0], "from -3 to 0")):
        with pytest.raises(ValueError, match=rf"index must hold sources in \[-B, B\) = \[-2, 2\); found values {found}"):
            memory.select(torch.tensor(index))


@pytest.mark.parametrize("name", ["plain", "bahdanau", "luong-general-local-m"])
def test_a_decoder_step_called_by_hand_names_what_is_wrong(name):
    model = small_model(name)
    decoder = model.decoder
    with torch.no_grad():
        memory = model.encoder(SRC, LENS)
        state, token = decoder.start(memory), TGT[:, 0]
        decoder.step(token, state, memory, 1)  # right
        decoder.step(token.int(), state, memory, torch.tensor(1).item())  # int32 ids, an int t
        for t in (True, 2.5, "3", None):
            with pytest.raises(TypeError, match=rf"t must be an int \(steps count from 1\); found {re.escape(repr(t))}"):
                decoder.step(token, state, memory, t)
        for t in (0, -1):
            with pytest.raises(ValueError, match=rf"t must be >= 1 \(steps count from 1\); found {t}"):
                decoder.step(token, state, memory, t)
        for bad, found in ((token.float(), "torch.float32 of shape \\(3,\\)"), (token[:2], "torch.int64 of shape \\(2,\\)"),
                           (token[None], "torch.int64 of shape \\(1, 3\\)"), (token.bool(), "torch.bool"), ([1, 2, 3], "list")):
            with pytest.raises(TypeError, match=rf"token must be an int64 or int32 tensor of shape \(B,\) = \(3,\); found {found}"):
                decoder.step(bad, state, memory, 1)
        for ids, found in (([0, 7, 1], "from 0 to 7"), ([-1, 6, 0], "from -1 to 6")):
            with pytest.raises(ValueError, match=rf"token must hold ids in \[0, 7\); found ids {found}"):
                decoder.step(torch.tensor(ids), state, memory, 1)
        decoder.step(torch.tensor([0, 6, 0]), state, memory, 1)  # 0 and V - 1 are ids
        for bad in (None, "x", 3):
            with pytest.raises(TypeError, match=rf"memory must be a Memory; found {type(bad).__name__}"):
                decoder.step(token, state, bad, 1)
        h = state[0] if name.startswith("luong") else state
        wrong = (h.long(), h[0], h[None], h.double(), h[:, :-1])
        found = ("torch.int64 of shape \\(3, 8\\)", "torch.float32 of shape \\(8,\\)", "torch.float32 of shape \\(1, 3, 8\\)",
                 "torch.float64", "torch.float32 of shape \\(3, 7\\)")
        for bad, what in zip(wrong, found):
            bad_state = (bad, state[1]) if name.startswith("luong") else bad
            with pytest.raises(TypeError, match=rf"state must be .* of shape \(B, De\) = \(3, 8\) and memory's dtype torch.float32; found {what}"):
                decoder.step(token, bad_state, memory, 1)
        if name.startswith("luong"):
            for bad, found in ((None, "NoneType"), ((), "tuple"), ("ab", "str"), ((h, h, h), "tuple")):
                with pytest.raises(TypeError, match=rf"state must be a pair \(h, h~\); found {found}"):
                    decoder.step(token, bad, memory, 1)
            with pytest.raises(TypeError, match=r"h must have the decoder's dtype \(torch.float32\); found torch.float16"):
                decoder.centre(h.half(), memory, 1)


def test_build_errors_name_expected_and_found():
    with pytest.raises(TypeError, match=r"(?s)parameter 'decoder'.*Actual value: 'pointer'.*'plain', 'bahdanau', 'luong'"):
        build_seq2seq("pointer", 9, 7)
    with pytest.raises(ValueError, match="only the 'luong' decoder takes options; found \\['mode'\\] for 'bahdanau'"):
        build_seq2seq("bahdanau", 9, 7, mode="global")
    with pytest.raises(TypeError, match=r"(?s)parameter 'score'.*Actual value: 'additive'.*'dot', 'general', 'concat'"):
        LuongDecoder(7, 5, 8, score="additive")
    with pytest.raises(TypeError, match=r"(?s)parameter 'mode'.*Actual value: 'local'.*'global', 'local-m', 'local-p'"):
        LuongDecoder(7, 5, 8, mode="local")
    with pytest.raises(TypeError, match=r"(?s)parameter 'window'.*Actual value: 0.*window: .*is_at_least_1"):
        LuongDecoder(7, 5, 8, mode="local-p", window=0)
    with pytest.raises(ValueError, match="memory_dim must equal the encoder's output size 8; found 6"):
        Seq2Seq(Encoder(9, 5, 4), PlainDecoder(7, 5, 6))
    with pytest.raises(ValueError, match=r"memory must hold states \(B, S, De\) = \(1, S, 8\); found \(1, 2, 3\)"):
        BahdanauDecoder(7, 5, 8)(TGT[:1], Memory(torch.zeros(1, 2, 3), torch.tensor([2]), torch.zeros(1, 3)))
    with pytest.raises(TypeError, match=r"(?s)parameter 'lens'.*Actual value: i64\[1\].*B=2"):
        local_weights(torch.zeros(2, 3), torch.tensor([3]), torch.tensor([1.0]), 1, True)
    with pytest.raises(ValueError, match=r"lens must lie in \[1, S\] = \[1, 3\]; found values from 3 to 4"):
        local_weights(torch.zeros(2, 3), torch.tensor([3, 4]), torch.tensor([1.0, 2.0]), 1, True)
    with pytest.raises(TypeError, match=r"(?s)parameter 'gaussian'.*Actual value: 'yes'"):
        local_weights(torch.zeros(2, 3), torch.tensor([3, 3]), torch.tensor([1.0, 2.0]), 1, "yes")
    with pytest.raises(ValueError, match=r"centre must be finite; found \[1.0, nan\]"):
        local_weights(torch.zeros(2, 3), torch.tensor([3, 3]), torch.tensor([1.0, float("nan")]), 1, True)
    with pytest.raises(TypeError, match=r"centre must have the dtype of scores \(torch.float32\); found torch.float64"):
        local_weights(torch.zeros(2, 3), torch.tensor([3, 3]), torch.tensor([1.0, 2.0], dtype=torch.float64), 1, True)
    with pytest.raises(ValueError, match=r"src must hold at least one token; found shape \(0, 4\)"):
        Encoder(9, 5, 4)(torch.zeros(0, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tgt_in must hold at least one token; found shape \(2, 0\)"):
        BahdanauDecoder(7, 5, 8)(TGT[:2, :0], Encoder(9, 5, 4)(SRC[:2], LENS[:2]))


# ---------------------------------------------------------------------------
# Pointer networks.
# ---------------------------------------------------------------------------


def test_sorting_task_points_at_the_smallest_first():
    pairs = SortingTask(3).sample(50, seed=0)
    assert pairs.src.shape == (50, 3) and pairs.src.dtype == torch.float32
    sorted_values = torch.gather(pairs.src, 1, pairs.tgt_out)
    assert (sorted_values[:, 1:] >= sorted_values[:, :-1]).all()
    assert (pairs.tgt_in[:, 0] == -1).all() and torch.equal(pairs.tgt_in[:, 1:], pairs.tgt_out[:, :-1])
    example = torch.tensor([[0.6, 0.1, 0.4]]).argsort(dim=1)
    assert example.tolist() == [[1, 2, 0]]  # positions 2, 3, 1 counted from 1


def test_pointer_output_is_the_attention_distribution_over_input_positions():
    torch.manual_seed(0)
    net = PointerNetwork(hidden_dim=6, attention_dim=5)
    values = torch.rand(2, 4)
    pointers_in = torch.tensor([[-1, 2, 0], [-1, 1, 3]])
    with torch.no_grad():
        scores = net(values, pointers_in)  # (B, m, n)
        memory = net.encode(values)
        embedded = net.embed(values[..., None])
        W1, W2 = net.pointer.key_proj.weight, net.pointer.query_proj.weight
        v = net.pointer.score_proj.weight[0]
        d = memory.summary
        for i in range(3):
            previous = pointers_in[:, i]
            inputs = torch.stack([net.start_input if p < 0 else embedded[b, p]
                                  for b, p in enumerate(previous.tolist())])
            d = net.cell(inputs, d)
            u = torch.tanh(memory.states @ W1.T + (d @ W2.T)[:, None]) @ v  # u_j = v^T tanh(W_1 e_j + W_2 d_i)
            torch.testing.assert_close(scores[:, i], u)
    assert scores.shape == (2, 3, 4)


def test_pointer_greedy_equals_teacher_forcing_its_own_choices_and_ignores_padding():
    torch.manual_seed(1)
    net = PointerNetwork(hidden_dim=6, attention_dim=5)
    values, lens = torch.rand(3, 5), torch.tensor([5, 3, 4])
    pointers, weights = net.greedy(values, lens)
    assert pointers.shape == (3, 5) and weights.shape == (3, 5, 5)
    with torch.no_grad():
        previous = torch.cat((torch.full((3, 1), -1), pointers[:, :-1]), 1)
        forced = masked_softmax(net(values, previous, lens), lens)
    torch.testing.assert_close(weights, forced)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    assert (weights[1, :, 3:] == 0).all() and (pointers[1] < 3).all()
    with torch.no_grad():
        changed = values.clone()
        changed[1, 3:] = 7.0
        torch.testing.assert_close(net.greedy(changed, lens)[1][1], weights[1])


def test_pointer_network_errors_name_expected_and_found():
    net = PointerNetwork(input_dim=2, hidden_dim=4, attention_dim=4)
    with pytest.raises(ValueError, match=r"values must have shape \(B, n, 2\) .*; found \(3, 5\)"):
        net.greedy(torch.rand(3, 5))
    with pytest.raises(TypeError, match=r"(?s)parameter 'values'.*Actual value: i64\[3,5,2\].*Float\[Tensor, 'B n \*D'\]"):
        net.greedy(torch.ones(3, 5, 2, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'lens'.*Actual value: i64\[2\].*B=3"):
        net.greedy(torch.rand(3, 5, 2), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"lens must lie in \[1, n\] = \[1, 5\]; found values from 0 to 5"):
        net.greedy(torch.rand(2, 5, 2), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"values must hold at least one row of at least one position; found shape \(3, 0, 2\)"):
        net.greedy(torch.rand(3, 0, 2))
    with pytest.raises(TypeError, match=r"(?s)parameter 'steps'.*Actual value: 0.*is_at_least_1"):
        net.greedy(torch.rand(3, 5, 2), steps=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'pointers_in'.*Actual value: f32\[1,2\]"):
        net(torch.rand(1, 5, 2), torch.tensor([[-1.0, 2.0]]))
    with pytest.raises(ValueError, match=r"pointers_in must hold at least one step; found m = 0"):
        net(torch.rand(1, 5, 2), torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'hidden_dim'.*Actual value: 0.*is_at_least_1"):
        PointerNetwork(hidden_dim=0)
    with pytest.raises(TypeError, match="values must have the dtype of the module's parameters"):
        net.greedy(torch.rand(3, 5, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"pointers_in must be -1 \(start\) or below their row's length in lens; found -1 to 5 with lens \[5\]"):
        net(torch.rand(1, 5, 2), torch.tensor([[-1, 5]]))
    for later in ([[-1, -1, 2]], [[-1, 1, -1]]):  # the start fed again, e.g. a row of -1
        step = later[0].index(-1, 1)
        with pytest.raises(ValueError, match=rf"pointers_in may be -1 \(start\) at the first step only; found -1 at step {step} \(from 0\)"):
            net(torch.rand(1, 5, 2), torch.tensor(later))
    assert net(torch.rand(1, 5, 2), torch.tensor([[-1, 1, 4]])).shape == (1, 3, 5)
    # a pointer into a row's padding (row 0 has 2 positions) used to feed the decoder a padded value
    with pytest.raises(ValueError, match=r"below their row's length in lens; found 0 to 4 with lens \[2, 5, 5\]"):
        net(torch.rand(3, 5, 2), torch.tensor([[4], [0], [0]]), lens=torch.tensor([2, 5, 5]))
    for bad in (float("nan"), float("inf")):  # used to come out as NaN scores
        with pytest.raises(ValueError, match="values must be finite; found NaN or inf"):
            net(torch.full((3, 5, 2), bad), torch.zeros(3, 1, dtype=torch.long))
    # Memory holds int lengths: a uint8 lens is refused at PointerNetwork's own signature
    with pytest.raises(TypeError, match=r"(?s)PointerNetwork.greedy.*parameter 'lens'.*Actual value: u8\[3\].*Int\[Tensor, 'B'\]"):
        net.greedy(torch.rand(3, 5, 2), torch.tensor([5, 3, 1], dtype=torch.uint8))
    with pytest.raises(ValueError, match="length must be an int >= 2; found 1"):
        SortingTask(1)


# --- gold mass, hard alignments and the alignment error rate, against sets of links by hand


def aer_by_sets(a, s, p):
    """Och and Ney's (2003) AER written over Python sets of (sentence, t, s) links."""
    return 1 - (len(a & s) + len(a & p)) / (len(a) + len(s))


def links(mask):
    return {tuple(link) for link in mask.nonzero().tolist()}


def test_alignment_error_rate_by_hand():
    """A = {(0,0), (1,1), (2,0)}, S = P = {(0,0), (1,1), (2,2)}: 1 - (2 + 2) / (3 + 3) = 1/3. With P adding
    (2,0): 1 - (2 + 3) / 6 = 1/6. A perfect alignment scores 0, a disjoint one 1."""
    def mask(*pairs):
        m = torch.zeros(1, 3, 3, dtype=torch.bool)
        for t, s in pairs:
            m[0, t, s] = True
        return m
    a, s = mask((0, 0), (1, 1), (2, 0)), mask((0, 0), (1, 1), (2, 2))
    assert alignment_error_rate(a, s) == pytest.approx(1 / 3, abs=1e-15)
    assert alignment_error_rate(a, s, mask((0, 0), (1, 1), (2, 2), (2, 0))) == pytest.approx(1 / 6, abs=1e-15)
    assert alignment_error_rate(s, s) == 0 and alignment_error_rate(mask((0, 1)), s) == 1
    with pytest.raises(ValueError, match="possible must contain every sure link"):
        alignment_error_rate(a, s, mask((0, 0)))
    empty = torch.zeros(1, 3, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="at least one link; found none"):
        alignment_error_rate(empty, empty)


@pytest.mark.parametrize("seed", range(20))
def test_alignment_scores_equal_loops_over_sets_of_links(seed):
    """On random weights and random sure/possible links, gold_mass, hard_alignment and
    alignment_error_rate equal their definitions written as loops over the steps and Python sets."""
    g = torch.Generator().manual_seed(seed)
    n, t_len, s_len = 4, 5, 6
    weights = torch.rand(n, t_len, s_len, generator=g, dtype=torch.float64)
    sure = torch.rand(n, t_len, s_len, generator=g) < 0.15
    possible = sure | (torch.rand(n, t_len, s_len, generator=g) < 0.1)
    steps = torch.rand(n, t_len, generator=g) < 0.7
    hard = hard_alignment(weights, steps)
    by_loop = set()
    for i in range(n):
        for t in range(t_len):
            if steps[i, t]:
                row = weights[i, t].tolist()
                by_loop.add((i, t, row.index(max(row))))
    assert links(hard) == by_loop
    assert alignment_error_rate(hard, sure, possible) == pytest.approx(
        aer_by_sets(by_loop, links(sure), links(possible)), abs=1e-12)
    if sure.any():
        on_gold = [sum(weights[i, t, s].item() for s in range(s_len) if sure[i, t, s])
                   for i in range(n) for t in range(t_len) if sure[i, t].any()]
        assert gold_mass(weights, sure).item() == pytest.approx(sum(on_gold) / len(on_gold), abs=1e-12)


def test_gold_mass_by_hand_and_it_needs_a_gold_step():
    """Two steps with gold positions 0 and 2 (weights 0.7 and 0.1) and an <eos> step with none: mass 0.4."""
    weights = torch.tensor([[[0.7, 0.2, 0.1], [0.5, 0.4, 0.1], [0.3, 0.3, 0.4]]], dtype=torch.float64)
    gold = torch.tensor([[[True, False, False], [False, False, True], [False, False, False]]])
    assert gold_mass(weights, gold).item() == pytest.approx(0.4, abs=1e-15)
    with pytest.raises(ValueError, match="gold must link at least one output step; found none"):
        gold_mass(weights, torch.zeros_like(gold))


@pytest.mark.parametrize("seed", range(10))
def test_alignment_error_rate_equals_nltk(seed):
    """nltk.translate.metrics.alignment_error_rate, on the same links as (sentence * T + t, s) pairs."""
    from nltk.translate import Alignment
    from nltk.translate.metrics import alignment_error_rate as nltk_aer

    g = torch.Generator().manual_seed(seed)
    shape = (3, 6, 7)
    hypothesis = torch.rand(shape, generator=g) < 0.2
    sure = torch.rand(shape, generator=g) < 0.2
    possible = sure | (torch.rand(shape, generator=g) < 0.1)

    def pairs(mask):
        return Alignment((i * shape[1] + t, s) for i, t, s in mask.nonzero().tolist())

    expected = nltk_aer(pairs(sure), pairs(hypothesis), pairs(possible))
    assert alignment_error_rate(hypothesis, sure, possible) == pytest.approx(expected, abs=1e-12)
    assert alignment_error_rate(hypothesis, sure) == pytest.approx(nltk_aer(pairs(sure), pairs(hypothesis)), abs=1e-12)


# ---------------------------------------------------------------------------
# Beam search with several length normalisations at once.
# ---------------------------------------------------------------------------


def _brute_force_best(model, b, bos, eos, max_len, alpha, vocab):
    """The output of source b that maximises log p / len ** alpha, over every output of
    at most max_len tokens that ends with eos (or reaches max_len), by enumeration."""
    step = model.step_fn(SRC[b : b + 1], LENS[b : b + 1])
    one = lambda prefixes: step(prefixes, torch.zeros(len(prefixes), dtype=torch.long))
    best, best_score = None, -float("inf")
    for length in range(1, max_len + 1):
        for tokens in itertools.product(range(vocab), repeat=length):
            if eos in tokens[:-1] or (length < max_len and tokens[-1] != eos):
                continue
            log_prob = sum(float(one(torch.tensor([[bos, *tokens[:t]]]))[0, token]) for t, token in enumerate(tokens))
            score = log_prob / length**alpha
            if score > best_score:
                best, best_score = list(tokens), score
    return best


# (model, seed, eos) whose exact best outputs differ between alpha = 0 and 1
@pytest.mark.parametrize("name, seed, eos", [("bahdanau", 0, 3), ("luong-general-global-no-feeding", 11, 2)])
def test_beam_translate_ranks_one_search_as_each_alpha_would_and_a_full_beam_is_exact(name, seed, eos):
    model = small_model(name, seed=seed, tgt_vocab=5).double()
    data = SequencePairs(SRC, LENS, TGT, TGT)
    alphas = (0.0, 0.5, 1.0)
    for beam_size in (1, 2, 3):
        found = beam_translate(model, data, 1, eos, beam_size, 3, alphas)
        for alpha, outputs in zip(alphas, found):  # the search's own ranking by alpha
            reference = beam_search_batch(model.step_fn(SRC, LENS), 3, 1, eos, beam_size, 3, alpha)
            assert outputs == [r[0][0] for r in reference]
        if beam_size == 1:
            assert found[0] == model.greedy(SRC, LENS, 1, eos, 3)[0]
    # 5 ** 3 = 125 outputs: a beam of 125 keeps them all, so it finds each alpha's best
    full = beam_translate(model, data, 1, eos, 125, 3, alphas)
    for alpha, outputs in zip(alphas, full):
        assert outputs == [_brute_force_best(model, b, 1, eos, 3, alpha, 5) for b in range(3)]
    assert full[0] != full[2]  # the exponents disagree somewhere, so the test can fail


def test_beam_translate_breaks_ties_in_the_search_s_order(monkeypatch):
    import lib.part4_attention.seq2seq as seq2seq

    # two finished hypotheses of one length and score (tied for every alpha), then a worse one
    found = [[([3, 2], -1.0), ([4, 2], -1.0), ([4, 4, 2], -5.0)] for _ in range(3)]
    monkeypatch.setattr(seq2seq, "beam_search_batch", lambda *args: found)
    data = SequencePairs(SRC, LENS, TGT, TGT)
    outputs = beam_translate(small_model("bahdanau"), data, 1, 2, 2, 3, (0.0, 1.0))
    assert outputs == [[[3, 2]] * 3, [[3, 2]] * 3]


def test_beam_translate_errors_name_the_argument():
    data = SequencePairs(SRC, LENS, TGT, TGT)
    with pytest.raises(TypeError, match="model must have a step_fn"):
        beam_translate(torch.nn.Linear(2, 2), data, 1, 2, 2, 3)
    with pytest.raises(ValueError, match="alphas must hold at least one exponent"):
        beam_translate(small_model("bahdanau"), data, 1, 2, 2, 3, ())
