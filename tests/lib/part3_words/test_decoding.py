"""Tests for lib/part3_words/decoding.py.

References: brute-force enumeration of every output sequence of small random
models, greedy search (the plain path beam search with K = 1 must reproduce),
the model's own log-probabilities recomputed token by token, hand-built models
whose answers are known, and sampling frequencies against the softmax.
"""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part3_words.decoding import (
    Candidate,
    ClockTask,
    TableModel,
    beam_search,
    beam_search_batch,
    blame,
    expand_and_prune,
    greedy_search,
    normalised_score,
    sample,
    sampling_distribution,
    sequence_score,
)

FAST = settings(max_examples=25, deadline=None, database=None)
EOS, BOS = 0, 99  # in the random models: eos is token 0 and bos is any id outside the output vocabulary


def prefix_model(vocab_size, seed, sharpness=2.0, eos_bias=0.0):
    """A random model whose next-token distribution depends on the *whole* prefix.

    Each distinct prefix gets its own seeded logits, so the model is a fixed
    function (same prefix, same answer) but no simple structure helps the search.
    """
    cache = {}

    def step_fn(prefixes):
        rows = []
        for prefix in prefixes.tolist():
            key = tuple(prefix)
            if key not in cache:
                code = seed
                for token in key:
                    code = (code * 1_000_003 + token + 1) % (2**61 - 1)
                logits = sharpness * torch.randn(vocab_size, generator=torch.Generator().manual_seed(code),
                                                 dtype=torch.float64)
                logits[EOS] += eos_bias
                cache[key] = torch.log_softmax(logits, dim=0)
            rows.append(cache[key])
        return torch.stack(rows)  # (N, V)

    return step_fn


def log_prob_by_hand(step_fn, tokens):
    """log p(tokens), one teacher-forced call per position."""
    return sum(float(step_fn(torch.tensor([[BOS, *tokens[:t]]]))[0, token]) for t, token in enumerate(tokens))


def every_output(vocab_size, max_len):
    """All outputs: eos only at the end, or max_len tokens without eos."""
    words = range(1, vocab_size)
    for length in range(1, max_len + 1):
        for body in itertools.product(words, repeat=length - 1):
            yield [*body, EOS]
            if length == max_len:
                for last in words:
                    yield [*body, last]


def brute_force(step_fn, vocab_size, max_len, alpha=0.0):
    scored = [(tokens, log_prob_by_hand(step_fn, tokens) / len(tokens) ** alpha)
              for tokens in every_output(vocab_size, max_len)]
    return sorted(scored, key=lambda item: -item[1])


def notes_counter_example():
    """Note 004's greedy counter-example, completed into a full model over 12 tokens.

    P(A) = 0.2 (the most probable first word), P(B) = 0.1; P(C | A) = 0.1 is the
    most probable word after A, P(D | B) = 0.8; every output has two words.
    """
    V, A, B, C, D = 12, 1, 2, 3, 4
    first = torch.full((V,), 0.7 / 9)
    first[[EOS, A, B]] = torch.tensor([0.0, 0.2, 0.1])
    after_a = torch.full((V,), 0.9 / 10)
    after_a[[EOS, C]] = torch.tensor([0.0, 0.1])
    after_b = torch.full((V,), 0.2 / 10)
    after_b[[EOS, D]] = torch.tensor([0.0, 0.8])
    after_other = torch.full((V,), 1.0 / 11)
    after_other[EOS] = 0.0
    end = torch.zeros(V)
    end[EOS] = 1.0

    def step_fn(prefixes):
        rows = []
        for prefix in prefixes.tolist():
            if len(prefix) == 1:
                rows.append(first)
            elif len(prefix) == 2:
                rows.append({A: after_a, B: after_b}.get(prefix[1], after_other))
            else:
                rows.append(end)
        return torch.log(torch.stack(rows).double())  # (N, V); log 0 = -inf

    return step_fn, (A, B, C, D)


# ---------------------------------------------------------------------------
# Greedy search and the notes' counter-example.
# ---------------------------------------------------------------------------


def test_notes_greedy_counter_example():
    step_fn, (A, B, C, D) = notes_counter_example()
    tokens, log_prob = greedy_search(step_fn, BOS, EOS, max_len=5)
    assert tokens == [A, C, EOS]
    assert math.exp(log_prob) == pytest.approx(0.2 * 0.1)
    best = beam_search(step_fn, BOS, EOS, beam_size=2, max_len=5)
    assert [tokens for tokens, _ in best] == [[B, D, EOS], [A, C, EOS]]
    assert math.exp(best[0][1]) == pytest.approx(0.1 * 0.8)


def test_greedy_stops_at_eos_or_max_len():
    step_fn = prefix_model(4, seed=3)
    tokens, log_prob = greedy_search(step_fn, BOS, EOS, max_len=3)
    assert len(tokens) == 3 or tokens[-1] == EOS
    assert EOS not in tokens[:-1]
    assert log_prob == pytest.approx(log_prob_by_hand(step_fn, tokens), abs=1e-12)
    for t in range(len(tokens)):  # every choice is the most probable next token
        assert tokens[t] == int(step_fn(torch.tensor([[BOS, *tokens[:t]]]))[0].argmax())


# ---------------------------------------------------------------------------
# Beam search against greedy, brute force and the model's own probabilities.
# ---------------------------------------------------------------------------


@FAST
@given(seed=st.integers(0, 10_000), vocab_size=st.integers(2, 6), max_len=st.integers(1, 6),
       alpha=st.sampled_from([0.0, 0.7, 1.0]))
def test_beam_size_one_is_greedy(seed, vocab_size, max_len, alpha):
    step_fn = prefix_model(vocab_size, seed)
    (tokens, score), = beam_search(step_fn, BOS, EOS, beam_size=1, max_len=max_len, alpha=alpha)
    greedy_tokens, greedy_log_prob = greedy_search(step_fn, BOS, EOS, max_len)
    assert tokens == greedy_tokens
    assert score == pytest.approx(greedy_log_prob / len(tokens) ** alpha, abs=1e-12)


@FAST
@given(seed=st.integers(0, 10_000), vocab_size=st.integers(2, 4), max_len=st.integers(1, 4),
       alpha=st.sampled_from([0.0, 0.5, 1.0]), eos_bias=st.sampled_from([-2.0, 0.0, 2.0]))
def test_a_beam_of_v_to_the_max_len_is_exhaustive(seed, vocab_size, max_len, alpha, eos_bias):
    step_fn = prefix_model(vocab_size, seed, eos_bias=eos_bias)
    found = beam_search(step_fn, BOS, EOS, beam_size=vocab_size**max_len, max_len=max_len, alpha=alpha)
    expected = brute_force(step_fn, vocab_size, max_len, alpha)
    # Nothing is pruned, so every output is finished and ranked exactly as by brute force.
    assert sorted(tuple(t) for t, _ in found) == sorted(tuple(t) for t, _ in expected)
    assert found[0][0] == expected[0][0]
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-9)


@FAST
@given(seed=st.integers(0, 10_000), vocab_size=st.integers(2, 7), beam_size=st.integers(1, 6),
       max_len=st.integers(1, 6), alpha=st.sampled_from([0.0, 0.6, 1.0]))
def test_scores_are_the_models_normalised_log_probabilities(seed, vocab_size, beam_size, max_len, alpha):
    step_fn = prefix_model(vocab_size, seed)
    found = beam_search(step_fn, BOS, EOS, beam_size, max_len, alpha)
    assert 1 <= len(found) <= beam_size
    scores = [score for _, score in found]
    assert scores == sorted(scores, reverse=True)
    for tokens, score in found:
        assert tokens[-1] == EOS or len(tokens) == max_len
        assert EOS not in tokens[:-1]
        assert score == pytest.approx(log_prob_by_hand(step_fn, tokens) / len(tokens) ** alpha, abs=1e-9)
        assert score == pytest.approx(sequence_score(step_fn, BOS, tokens, alpha), abs=1e-12)


def test_no_search_beats_the_exhaustive_optimum():
    for seed in range(30):
        step_fn = prefix_model(5, seed)
        _, greedy_log_prob = greedy_search(step_fn, BOS, EOS, 5)
        (_, beam_log_prob), *_ = beam_search(step_fn, BOS, EOS, 3, 5)
        exact = brute_force(step_fn, 5, 5)[0][1]
        assert greedy_log_prob <= exact + 1e-12 and beam_log_prob <= exact + 1e-12


def two_lengths_model():
    """Outputs [eos] (p = 0.4), [a, eos] and [a, a] (p = 0.3 each) with max_len = 2."""
    def step_fn(prefixes):
        first = torch.tensor([0.4, 0.6], dtype=torch.float64)
        second = torch.tensor([0.5, 0.5], dtype=torch.float64)
        return torch.log(torch.stack([first if p.numel() == 1 else second for p in prefixes]))

    return step_fn


def test_alpha_changes_the_winner_exactly_at_the_threshold():
    step_fn = two_lengths_model()
    # [eos] wins while log 0.4 > log 0.3 / 2**alpha, i.e. alpha < log2(log 0.3 / log 0.4).
    threshold = math.log2(math.log(0.3) / math.log(0.4))
    below = beam_search(step_fn, BOS, EOS, 3, 2, alpha=threshold - 1e-6)
    above = beam_search(step_fn, BOS, EOS, 3, 2, alpha=threshold + 1e-6)
    assert below[0][0] == [EOS]
    assert above[0][0] == [1, EOS]  # tied with [1, 1]: ties keep the candidate order
    assert round(threshold, 4) == 0.3939


@FAST
@given(seed=st.integers(0, 10_000), beam_size=st.integers(1, 4))
def test_alpha_only_reranks_the_finished_hypotheses(seed, beam_size):
    # All candidates of a step have the same length, so alpha cannot change what is pruned.
    step_fn = prefix_model(4, seed, eos_bias=1.0)
    raw = beam_search(step_fn, BOS, EOS, beam_size, 5, alpha=0.0)
    for alpha in (0.5, 1.0, 2.0):
        normalised = beam_search(step_fn, BOS, EOS, beam_size, 5, alpha=alpha)
        assert sorted(map(tuple, (t for t, _ in normalised))) == sorted(map(tuple, (t for t, _ in raw)))
        best = max(raw, key=lambda item: item[1] / len(item[0]) ** alpha)
        assert normalised[0][1] == pytest.approx(best[1] / len(best[0]) ** alpha)


# ---------------------------------------------------------------------------
# Batched decoding, the trace and the step that prunes.
# ---------------------------------------------------------------------------


def batched_model(num_sources, vocab_size, seed):
    models = [prefix_model(vocab_size, seed + 7919 * s) for s in range(num_sources)]
    calls = []

    def step_fn(prefixes, sources):
        calls.append(tuple(prefixes.shape))
        rows = [models[s](prefix[None]) for s, prefix in zip(sources.tolist(), prefixes)]
        return torch.cat(rows)  # (N, V)

    return step_fn, models, calls


@FAST
@given(seed=st.integers(0, 10_000), num_sources=st.integers(1, 5), beam_size=st.integers(1, 4),
       alpha=st.sampled_from([0.0, 0.7]))
def test_batched_search_equals_one_source_at_a_time(seed, num_sources, beam_size, alpha):
    step_fn, models, calls = batched_model(num_sources, 5, seed)
    batched = beam_search_batch(step_fn, num_sources, BOS, EOS, beam_size, 5, alpha)
    assert len(batched) == num_sources
    for s in range(num_sources):
        assert batched[s] == beam_search(models[s], BOS, EOS, beam_size, 5, alpha)
    # One model call per step for the whole batch, with every open hypothesis of every source.
    assert len(calls) <= 5
    assert all(rows <= num_sources * beam_size and t == step for step, (rows, t) in enumerate(calls, 1))


def test_table_model_decodes_a_batch_with_one_table_lookup_per_step():
    task = ClockTask()
    model = task.fit_model()
    batched = beam_search_batch(model.step, len(task.times), model.bos, task.eos, 3, 6, alpha=0.7)
    for s in (0, 17, 47):
        assert batched[s] == beam_search(model.for_source(s), model.bos, task.eos, 3, 6, alpha=0.7)


def test_trace_records_every_candidate_and_agrees_with_the_result():
    vocab_size, beam_size, max_len = 4, 3, 4
    step_fn = prefix_model(vocab_size, seed=11, eos_bias=0.5)
    trace = []
    found = beam_search(step_fn, BOS, EOS, beam_size, max_len, trace=trace)
    assert trace == [] or [step.step for step in trace] == list(range(1, len(trace) + 1))
    open_before = [()]
    finished = []
    for step in trace:
        assert len(step.candidates) == len(open_before) * vocab_size  # every (hypothesis, token) pair
        log_probs = [c.log_prob for c in step.candidates]
        assert log_probs == sorted(log_probs, reverse=True)
        for c in step.candidates:
            assert c.tokens[:-1] == open_before[c.parent]
            assert c.log_prob == pytest.approx(log_prob_by_hand(step_fn, list(c.tokens)), abs=1e-9)
        chosen = [c for c in step.candidates if c.status != "pruned"]
        assert len(chosen) == beam_size - len(finished)
        assert all(c.status == "pruned" for c in step.candidates[len(chosen):])  # the best are kept
        finished += [list(c.tokens) for c in chosen if c.status == "finished"]
        assert all(c.tokens[-1] == EOS or len(c.tokens) == max_len for c in chosen if c.status == "finished")
        open_before = [c.tokens for c in chosen if c.status == "kept"]
    assert open_before == []
    assert sorted(finished) == sorted(tokens for tokens, _ in found)
    # Recording does not change the search.
    assert found == beam_search(step_fn, BOS, EOS, beam_size, max_len)


def test_expand_and_prune_by_hand():
    beam_scores = torch.tensor([-1.0, -2.0], dtype=torch.float64)
    log_probs = torch.log(torch.tensor([[0.1, 0.9, 0.0], [0.5, 0.3, 0.2]], dtype=torch.float64))
    parents, tokens, scores = expand_and_prune(beam_scores, log_probs, beam_size=3)
    # Candidates: (0,1) -1.105, (0,0) -3.303, (1,0) -2.693, (1,1) -3.204, (1,2) -3.609, (0,2) -inf.
    assert parents.tolist() == [0, 1, 1] and tokens.tolist() == [1, 0, 1]
    torch.testing.assert_close(scores, beam_scores[parents] + log_probs[parents, tokens])
    parents, tokens, _ = expand_and_prune(beam_scores, log_probs, beam_size=10)
    assert len(parents) == 5  # the impossible candidate (probability 0) is never kept


# ---------------------------------------------------------------------------
# Error analysis.
# ---------------------------------------------------------------------------


def test_blame_says_search_when_the_model_prefers_the_reference():
    step_fn, (A, B, C, D) = notes_counter_example()
    greedy_tokens, _ = greedy_search(step_fn, BOS, EOS, 5)
    assert blame(step_fn, BOS, reference=[B, D, EOS], output=greedy_tokens) == "search"
    assert blame(step_fn, BOS, reference=[A, B, EOS], output=greedy_tokens) == "model"


def test_blame_compares_the_objective_the_search_maximises():
    # Note 004 compares P(y*|x) with P(ŷ|x); with length normalisation the search maximises
    # log P / len**alpha, and the two comparisons disagree here.
    step_fn = two_lengths_model()
    short, long = [EOS], [1, EOS]
    assert blame(step_fn, BOS, reference=long, output=short, alpha=0.0) == "model"  # 0.3 < 0.4
    assert blame(step_fn, BOS, reference=long, output=short, alpha=1.0) == "search"  # -0.60 > -0.92
    assert sequence_score(step_fn, BOS, long, alpha=1.0) == pytest.approx(math.log(0.3) / 2)


# ---------------------------------------------------------------------------
# Sampling.
# ---------------------------------------------------------------------------


def test_sampling_distribution_is_the_tempered_softmax_of_the_k_best():
    log_probs = torch.log_softmax(torch.tensor([[2.0, 0.5, -1.0, 1.0]], dtype=torch.float64), dim=-1)
    for temperature in (0.5, 1.0, 3.0):
        expected = torch.softmax(log_probs / temperature, dim=-1)
        torch.testing.assert_close(sampling_distribution(log_probs, temperature), expected)
        top2 = sampling_distribution(log_probs, temperature, top_k=2)
        by_hand = torch.tensor([[math.exp(2.0 / temperature), 0, 0, math.exp(1.0 / temperature)]],
                               dtype=torch.float64)
        torch.testing.assert_close(top2, by_hand / by_hand.sum())
    torch.testing.assert_close(sampling_distribution(log_probs, top_k=4), torch.exp(log_probs))
    # Ties at the k-th place (common in smoothed tables) go to the lower token id: exactly k survive.
    tied = torch.log(torch.tensor([0.4, 0.2, 0.2, 0.2], dtype=torch.float64))
    expected = torch.tensor([2 / 3, 1 / 3, 0, 0], dtype=torch.float64)
    torch.testing.assert_close(sampling_distribution(tied, top_k=2), expected)


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, None), (0.5, None), (2.0, None), (1.0, 2)])
def test_sampled_first_tokens_follow_the_sampling_distribution(temperature, top_k):
    step_fn = prefix_model(5, seed=4, sharpness=1.0)
    n = 20_000
    samples = sample(step_fn, BOS, EOS, max_len=1, num_samples=n, temperature=temperature, top_k=top_k,
                     generator=torch.Generator().manual_seed(0))
    counts = torch.bincount(torch.tensor([tokens[0] for tokens, _ in samples]), minlength=5).double()
    expected = sampling_distribution(step_fn(torch.tensor([[BOS]]))[0], temperature, top_k)
    # Each frequency is within 5 binomial standard deviations of its probability.
    tolerance = 5 * torch.sqrt(expected * (1 - expected) / n) + 1e-12
    assert ((counts / n - expected).abs() <= tolerance).all(), (counts / n, expected)


def test_top_k_sampling_never_leaves_the_k_best():
    step_fn = prefix_model(6, seed=9, sharpness=0.5)  # flat distributions: many tokens are likely
    samples = sample(step_fn, BOS, EOS, max_len=5, num_samples=300, temperature=2.0, top_k=2,
                     generator=torch.Generator().manual_seed(1))
    for tokens, log_prob in samples:
        for t, token in enumerate(tokens):
            best_two = step_fn(torch.tensor([[BOS, *tokens[:t]]]))[0].topk(2).indices.tolist()
            assert token in best_two
        assert log_prob == pytest.approx(log_prob_by_hand(step_fn, tokens), abs=1e-9)


def test_sampling_is_reproducible_with_a_seeded_generator():
    step_fn = prefix_model(5, seed=2)
    first = sample(step_fn, BOS, EOS, 6, num_samples=8, generator=torch.Generator().manual_seed(5))
    second = sample(step_fn, BOS, EOS, 6, num_samples=8, generator=torch.Generator().manual_seed(5))
    assert first == second
    assert all(tokens[-1] == EOS or len(tokens) == 6 for tokens, _ in first)


# ---------------------------------------------------------------------------
# The table model and the clock task.
# ---------------------------------------------------------------------------


def test_table_model_fit_counts_with_add_delta():
    pairs = [(0, [1, 0]), (0, [1, 1, 0]), (1, [0])]
    model = TableModel.fit(pairs, num_sources=2, vocab_size=2, delta=0.5)
    probs = model.log_probs.exp()
    # Source 0, after bos (row 2): token 1 twice, token 0 never -> (0.5, 2.5) / 3.
    torch.testing.assert_close(probs[0, 2], torch.tensor([0.5 / 3, 2.5 / 3], dtype=torch.float64))
    # Source 0, after token 1: 0 twice, 1 once -> (2.5, 1.5) / 4.
    torch.testing.assert_close(probs[0, 1], torch.tensor([2.5 / 4, 1.5 / 4], dtype=torch.float64))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, 3, dtype=torch.float64))
    prefixes, sources = torch.tensor([[2, 1], [2, 2]]), torch.tensor([0, 1])
    torch.testing.assert_close(model.step(prefixes, sources), model.log_probs[[0, 1], [1, 2]])
    torch.testing.assert_close(model.for_source(1)(prefixes), model.log_probs[1, [1, 2]])


def test_table_model_fit_equals_counting_token_by_token():
    # The scatter-add in fit against the plainest count: one increment per token, in a loop.
    generator = torch.Generator().manual_seed(0)
    pairs = []
    for _ in range(300):
        length = int(torch.randint(1, 6, (1,), generator=generator))
        tokens = torch.randint(1, 7, (length - 1,), generator=generator).tolist() + [0]
        pairs.append((int(torch.randint(0, 4, (1,), generator=generator)), tokens))
    counts = torch.full((4, 8, 7), 0.25, dtype=torch.float64)
    for source, tokens in pairs:
        for previous, token in zip([7, *tokens[:-1]], tokens):
            counts[source, previous, token] += 1
    model = TableModel.fit(pairs, num_sources=4, vocab_size=7, delta=0.25)
    assert torch.equal(model.log_probs, torch.log(counts / counts.sum(dim=2, keepdim=True)))
    uniform = torch.full((4, 8, 7), math.log(1 / 7), dtype=torch.float64)  # no pairs: only pseudo-counts
    torch.testing.assert_close(TableModel.fit([], 4, 7, 0.25).log_probs, uniform)


def test_clock_task_is_a_proper_distribution_over_phrasings():
    task = ClockTask()
    assert len(task.times) == 48 and task.vocab[task.eos] == "<eos>"
    for time, (phrasings, probabilities) in enumerate(zip(task.phrasings, task.probabilities)):
        assert sum(probabilities) == pytest.approx(1.0)
        assert all(p[-1] == task.eos and task.eos not in p[:-1] for p in phrasings)
        assert task.best(time) == phrasings[probabilities.index(max(probabilities))]
    eight_forty_five = task.times.index("8:45")
    assert task.decode(task.phrasings[eight_forty_five][0]) == "quarter to nine"
    assert task.encode("eight forty five") == task.phrasings[eight_forty_five][3]
    assert task.decode(task.encode("half past six"), keep_eos=True) == "half past six <eos>"
    pairs = task.sample(3, torch.Generator().manual_seed(0))
    assert len(pairs) == 3 * 48 and all(tokens in task.phrasings[t] for t, tokens in pairs)


def test_the_chapters_clock_model_shows_greedys_garden_path():
    task = ClockTask(seed=38)
    model = task.fit_model(per_time=200, delta=1.0, seed=38)
    time = task.times.index("8:45")
    greedy, _ = greedy_search(model.for_source(time), model.bos, task.eos, 6)
    assert task.decode(greedy) == "quarter to nine"
    assert task.decode(task.best(time)) == "eight forty five"
    assert blame(model.for_source(time), model.bos, task.best(time), greedy) == "search"
    beam = beam_search(model.for_source(time), model.bos, task.eos, 2, 6)
    assert task.decode(beam[0][0]) == "eight forty five"


# ---------------------------------------------------------------------------
# Bad arguments.
# ---------------------------------------------------------------------------


def test_bad_arguments_name_what_was_expected_and_found():
    step_fn = prefix_model(3, seed=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'beam_size'.*Actual value: 0.*is_at_least_1"):
        beam_search(step_fn, BOS, EOS, 0, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_len'.*Actual value: 0.*is_at_least_1"):
        beam_search(step_fn, BOS, EOS, 2, 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'beam_size'.*Actual value: 2.0.*Integral"):
        beam_search(step_fn, BOS, EOS, 2.0, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'alpha'.*Actual value: -0.5.*is_at_least_0"):
        beam_search(step_fn, BOS, EOS, 2, 3, alpha=-0.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'bos'.*Actual value: '<s>'.*Integral"):
        greedy_search(step_fn, "<s>", EOS, 3)
    with pytest.raises(ValueError, match="eos must be a token of the vocabulary, < V = 3; found 5"):
        greedy_search(step_fn, BOS, 5, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'step_fn'.*Actual value: 3.*Callable"):
        beam_search(3, BOS, EOS, 2, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'num_sources'.*Actual value: 0.*is_at_least_1"):
        beam_search_batch(lambda p, s: step_fn(p), 0, BOS, EOS, 2, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'length'.*Actual value: 0.*is_at_least_1"):
        normalised_score(-1.0, 0, 0.5)


def test_a_step_function_that_misbehaves_is_caught():
    logits = lambda prefixes: torch.zeros(len(prefixes), 3) + 1.0  # noqa: E731
    with pytest.raises(ValueError, match=r"log-probabilities \(each row's logsumexp is 0.*found logsumexp 2.099"):
        greedy_search(logits, BOS, EOS, 3)
    with pytest.raises(ValueError, match=r"shape \(N, V\) = \(1, V\) for 1 prefixes; found \(3,\)"):
        greedy_search(lambda prefixes: torch.zeros(3), BOS, EOS, 3)
    with pytest.raises(ValueError, match="found NaN or \\+inf"):
        beam_search(lambda prefixes: torch.full((len(prefixes), 3), math.nan), BOS, EOS, 2, 3)
    with pytest.raises(TypeError, match="floating-point torch.Tensor of log-probabilities; found list"):
        beam_search(lambda prefixes: [[0.0]], BOS, EOS, 2, 3)


def test_bad_sampling_and_model_arguments():
    log_probs = torch.log_softmax(torch.randn(4), 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'temperature'.*Actual value: 0.*is_above_0"):
        sampling_distribution(log_probs, temperature=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'top_k'.*Actual value: 0.*is_at_least_1"):
        sampling_distribution(log_probs, top_k=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_probs'.*Actual value: i64\[2\].*Float"):
        sampling_distribution(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"shape \(S, V \+ 1, V\); found \(2, 3, 3\)"):
        TableModel(torch.zeros(2, 3, 3))
    with pytest.raises(TypeError, match=r"(?s)parameter 'delta'.*Actual value: 0.*is_above_0"):
        TableModel.fit([], 1, 2, delta=0)
    with pytest.raises(ValueError, match=r"each pair must be \(source < 1, non-empty tokens < 2\); found pairs\[0\] = \(0, \[5\]\)"):
        TableModel.fit([(0, [5])], 1, 2)
    with pytest.raises(ValueError, match="source must be < S = 48; found 48"):
        ClockTask().fit_model().for_source(48)
    with pytest.raises(ValueError, match=r"text must use the task's words .*found \['noon'\]"):
        ClockTask().encode("noon")
    with pytest.raises(ValueError, match=r"tokens must hold at least one token id; found \[\]"):
        sequence_score(prefix_model(3, 0), BOS, [])


def test_a_wider_beam_can_return_a_less_probable_output():
    # The model of chapter 7's exercise "Is a wider beam always better?": greedy search keeps
    # "a x" (0.175); a beam of 2 prunes it for "b y" and "b z" (0.18 each), whose continuations are poor.
    a, b, x, y, z, w = 1, 2, 3, 4, 5, 6
    table = {
        (): {a: 0.5, b: 0.4, x: 0.025, y: 0.025, z: 0.025, w: 0.025},
        (a,): {x: 0.35, EOS: 0.13, **{t: 0.104 for t in (a, b, y, z, w)}},
        (a, x): {EOS: 1.0},
        (b,): {y: 0.45, z: 0.45, **{t: 0.02 for t in (a, b, x, w, EOS)}},
        (b, y): {EOS: 0.5, **{t: 0.1 for t in (a, b, x, z, w)}},
        (b, z): {EOS: 0.5, **{t: 0.1 for t in (a, b, x, y, w)}},
    }

    def step_fn(prefixes):
        rows = []
        for prefix in prefixes.tolist():
            probs = torch.full((7,), 1 / 7, dtype=torch.float64)
            if tuple(prefix[1:]) in table:
                probs = torch.zeros(7, dtype=torch.float64)
                for token, p in table[tuple(prefix[1:])].items():
                    probs[token] = p
            rows.append(torch.log(probs))
        return torch.stack(rows)

    greedy_tokens, greedy_log_prob = greedy_search(step_fn, BOS, EOS, 3)
    assert greedy_tokens == [a, x, EOS] and math.exp(greedy_log_prob) == pytest.approx(0.175)
    (best_tokens, best_log_prob), *_ = beam_search(step_fn, BOS, EOS, 2, 3)
    assert best_tokens in ([b, y, EOS], [b, z, EOS]) and math.exp(best_log_prob) == pytest.approx(0.09)


# ---------------------------------------------------------------------------
# Bad input never passes silently (issue 22).
# ---------------------------------------------------------------------------


def test_pruning_does_not_drop_nan_candidates_silently():
    scores = torch.tensor([0.0, -1.0])
    log_probs = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    log_probs[1, 0] = float("nan")
    with pytest.raises(ValueError, match="beam_scores and log_probs must not contain NaN"):
        expand_and_prune(scores, log_probs, 2)
    with pytest.raises(ValueError, match="beam_scores and log_probs must not contain NaN"):
        expand_and_prune(torch.tensor([float("nan"), 0.0]), torch.zeros(2, 2), 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_probs'.*Actual value: \[\[0.0\]\].*Float"):
        expand_and_prune(scores, [[0.0]], 2)
    # -inf (probability 0) is still pruned, as documented
    parents, tokens, kept = expand_and_prune(torch.tensor([0.0]), torch.tensor([[0.0, -math.inf]]), 2)
    assert tokens.tolist() == [0] and kept.tolist() == [0.0]


def test_search_sizes_are_bounded_with_a_clear_error():
    model = TableModel(torch.log_softmax(torch.zeros(1, 4, 3), dim=-1))
    with pytest.raises(ValueError, match=r"num_sources \* beam_size \* max_len must be at most 1,000,000; found 1 \* 10000 \* 1000"):
        beam_search(model.for_source(0), model.bos, 0, beam_size=10_000, max_len=1000)
    with pytest.raises(ValueError, match=r"num_samples \* max_len must be at most"):
        sample(model.for_source(0), model.bos, 0, max_len=10**3, num_samples=10**4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_len'.*Actual value: 1000000000.*is_at_most_1000000"):
        greedy_search(model.for_source(0), model.bos, 0, max_len=10**9)


@pytest.mark.parametrize("temperature", [math.inf, math.nan, -1.0, True])
def test_temperature_must_be_finite_and_positive(temperature):
    with pytest.raises(TypeError, match=r"(?s)parameter 'temperature'.*is_above_0"):
        sampling_distribution(torch.log_softmax(torch.zeros(3), dim=-1), temperature=temperature)


def test_every_item_and_size_is_checked_by_name():
    task, model = ClockTask(), TableModel(torch.log_softmax(torch.zeros(1, 4, 3), dim=-1))
    step_fn = model.for_source(0)
    with pytest.raises(ValueError, match=r"tokens must be ids < V = 3; found 7 at 1"):
        sequence_score(step_fn, model.bos, [0, 7])
    with pytest.raises(ValueError, match=r"reference must hold at least one token id; found \[\]"):
        blame(step_fn, model.bos, [], [0])
    with pytest.raises(ValueError, match=r"output must hold at least one token id; found \[\]"):
        blame(step_fn, model.bos, [0], [])
    with pytest.raises(TypeError, match=r"(?s)parameter 'output'.*Actual value: \[0, 1, -2\]"):
        blame(step_fn, model.bos, [0], [0, 1, -2])  # the last item too, not one drawn
    with pytest.raises(TypeError, match=r"pairs must hold \(source, tokens\) of int ids; found pairs\[50\] = \(0, \[1, 2.5\]\)$"):
        TableModel.fit([(0, [1, 0])] * 50 + [(0, [1, 2.5])], 1, 3)
    with pytest.raises(TypeError, match=r"found pairs\[1\] = \(True, \[1\]\)$"):
        TableModel.fit([(0, [1, 0]), (True, [1])], 1, 3)
    # one bad pair among a chapter's 9,600 is quoted alone, not with all the others
    pairs = ClockTask().sample(200) + [(0, [1, -2])]
    with pytest.raises(ValueError, match=r"non-empty tokens < 24\); found pairs\[9600\] = \(0, \[1, -2\]\)$"):
        TableModel.fit(pairs, 48, 24)
    with pytest.raises(ValueError, match=r"found pairs\[1\] = \(-1, \[1\]\)$"):
        TableModel.fit([(0, [1, 0]), (-1, [1])], 1, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_probs'.*Actual value: f32\[2,3\]"):
        TableModel(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"tokens must be ids < 2\d, the vocabulary's size"):
        task.decode([1, 99])
    with pytest.raises(ValueError, match="time must be < 48; found 48"):
        task.best(48)
    with pytest.raises(ValueError, match=r"num_sources \* beam_size \* max_len must be at most"):
        beam_search_batch(model.step, 10**12, model.bos, 0, 1, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'prefixes'.*Actual value: f32\[1,1\]"):
        model.step(torch.zeros(1, 1), torch.zeros(1, dtype=torch.long))


def test_inputs_that_gave_a_silent_answer_are_refused_by_name():
    scores, inf = torch.tensor([0.0, -1.0]), math.inf
    with pytest.raises(ValueError, match=r"must not contain NaN or \+inf: .*found NaN or \+inf"):
        expand_and_prune(scores, torch.full((2, 3), inf), 2)  # ranked first before
    with pytest.raises(ValueError, match=r"must not contain NaN or \+inf"):
        expand_and_prune(torch.tensor([inf, 0.0]), torch.zeros(2, 3), 2)
    with pytest.raises(ValueError, match=r"log_probs must hold at least one hypothesis .*found shape \(2, 0\)"):
        expand_and_prune(scores, torch.zeros(2, 0), 2)
    with pytest.raises(ValueError, match=r"log_probs must hold at least one hypothesis .*found shape \(0, 3\)"):
        expand_and_prune(torch.zeros(0), torch.zeros(0, 3), 2)
    with pytest.raises(ValueError, match=r"log_probs must be finite or -inf; found NaN or \+inf"):
        sampling_distribution(torch.tensor([math.nan, 0.0]))
    with pytest.raises(ValueError, match=r"log_probs must be finite or -inf; found NaN or \+inf"):
        sampling_distribution(torch.tensor([inf, 0.0]))
    with pytest.raises(ValueError, match=r"each row a token of probability > 0; found a row of -inf"):
        sampling_distribution(torch.tensor([[0.0, -1.0], [-inf, -inf]]))
    with pytest.raises(ValueError, match=r"log_probs must hold at least one token \(V >= 1\); found shape \(0,\)"):
        sampling_distribution(torch.zeros(0))
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_prob'.*Actual value: 1.0.*is_a_log_prob"):
        normalised_score(1.0, 2)
    assert normalised_score(-math.inf, 2) == -math.inf  # probability 0 is a log-probability
    with pytest.raises(ValueError, match=r"log_probs must be finite or -inf; found NaN or \+inf"):
        TableModel(torch.full((1, 3, 2), math.nan))
    with pytest.raises(ValueError, match=r"log_probs must hold at least one source \(S >= 1\); found shape \(0, 3, 2\)"):
        TableModel(torch.zeros(0, 3, 2))


def test_table_model_step_names_ids_out_of_range():
    model = TableModel(torch.log_softmax(torch.zeros(2, 4, 3), dim=-1))
    bos, one = torch.tensor([[model.bos]]), torch.tensor([1])
    with pytest.raises(ValueError, match=r"sources must be ids < S = 2; found ids from 0 to 5"):
        model.step(torch.tensor([[3], [3]]), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match=r"sources must be ids < S = 2; found ids from -1 to -1"):
        model.step(bos, torch.tensor([-1]))
    with pytest.raises(ValueError, match=r"prefixes must hold ids <= bos = 3; found last ids from 9 to 9"):
        model.step(torch.tensor([[9]]), one)
    with pytest.raises(ValueError, match=r"prefixes must start with bos; found shape \(N, 0\)"):
        model.step(torch.zeros(1, 0, dtype=torch.long), one)
    with pytest.raises(ValueError, match=r"sources must be ids < S = 2; found ids from 0 to 2"):
        beam_search_batch(model.step, 3, model.bos, 0, 2, 4)  # more sources than the model
    assert torch.equal(model.step(bos, one), model.log_probs[1, 3][None])


def test_a_trace_step_record_takes_counts_not_bools_or_negatives():
    from lib.part3_words.decoding import Candidate, TraceStep

    one = (Candidate((1,), -0.5, 0, "kept"),)
    assert TraceStep(0, 0, one).candidates == one
    for name in ("source", "step"):
        for bad in (-1, True):
            with pytest.raises(TypeError, match=rf"(?s)parameter '{name}'.*Actual value: {bad}"):
                TraceStep(**{"source": 0, "step": 1, name: bad, "candidates": one})


@pytest.mark.parametrize("field, value", [
    ("tokens", [1, 2]), ("tokens", (1, -1)), ("tokens", (1, True)), ("tokens", ("x",)),
    ("log_prob", math.nan), ("log_prob", "0.5"), ("log_prob", True),
    ("parent", -1), ("parent", 2.5), ("parent", True),
    ("status", 5), ("status", "dropped"),
])
def test_a_candidate_refuses_a_field_a_trace_never_holds(field, value):
    """Candidate is checked in its own cheap way (a trace makes tens of thousands)."""
    fields = dict(tokens=(1, 2), log_prob=-0.5, parent=0, status="kept")
    Candidate(**fields)
    with pytest.raises(ValueError, match=rf"Candidate: tokens must be .*found .*{field}="):
        Candidate(**{**fields, field: value})


# ---------------------------------------------------------------------------
# Exact search (branch and bound) and GNMT's length penalty.
# ---------------------------------------------------------------------------

from lib.part3_words.decoding import exact_search, gnmt_length_penalty  # noqa: E402


@FAST
@given(seed=st.integers(0, 10_000), vocab_size=st.integers(2, 5), max_len=st.integers(1, 5),
       eos_bias=st.sampled_from([-3.0, 0.0, 3.0]), sharpness=st.sampled_from([0.5, 2.0, 5.0]))
def test_exact_search_finds_the_brute_force_optimum(seed, vocab_size, max_len, eos_bias, sharpness):
    step_fn = prefix_model(vocab_size, seed, sharpness=sharpness, eos_bias=eos_bias)
    tokens, log_prob = exact_search(step_fn, BOS, EOS, max_len)
    expected_tokens, expected = brute_force(step_fn, vocab_size, max_len)[0]
    assert log_prob == pytest.approx(expected, abs=1e-9)
    assert log_prob == pytest.approx(log_prob_by_hand(step_fn, tokens), abs=1e-9)
    assert tokens == expected_tokens  # continuous random scores: no ties


@FAST
@given(seed=st.integers(0, 10_000), vocab_size=st.integers(2, 4), max_len=st.integers(1, 4),
       eos_bias=st.sampled_from([-2.0, 0.0, 2.0]))
def test_a_beam_as_large_as_the_search_space_equals_exact_search(seed, vocab_size, max_len, eos_bias):
    step_fn = prefix_model(vocab_size, seed, eos_bias=eos_bias)
    (beam_tokens, beam_log_prob), *_ = beam_search(step_fn, BOS, EOS, vocab_size**max_len, max_len)
    assert exact_search(step_fn, BOS, EOS, max_len) == (beam_tokens, pytest.approx(beam_log_prob, abs=1e-12))


def test_exact_search_prunes_what_cannot_win_and_skips_impossible_tokens():
    # Notes' counter-example: the optimum B D <eos> (p = 0.08), where greedy finds A C <eos>.
    step_fn, (A, B, C, D) = notes_counter_example()
    calls = []

    def counting(prefixes):
        calls.append(prefixes[0].tolist())
        return step_fn(prefixes)

    tokens, log_prob = exact_search(counting, BOS, EOS, 3)
    assert tokens == [B, D, EOS] and log_prob == pytest.approx(math.log(0.08), abs=1e-6)
    # An exhaustive search extends 1 + 11 + 121 prefixes. Branch and bound goes down A (0.2)
    # to A C <eos> (0.02), which prunes A's other words (0.09 x 0.2 = 0.018); then B (0.1)
    # to B D <eos> (0.08), which prunes every other first word (0.7 / 9 = 0.078).
    assert calls == [[BOS], [BOS, A], [BOS, A, C], [BOS, B], [BOS, B, D]]


def test_exact_search_that_needs_too_many_calls_says_so():
    # nearly uniform over the words, eos nearly impossible: little can be pruned early
    flat = prefix_model(6, 0, sharpness=0.1, eos_bias=-20.0)
    with pytest.raises(ValueError, match="max_calls"):
        exact_search(flat, BOS, EOS, 6, max_calls=50)


def test_gnmt_length_penalty_by_hand():
    # lp(Y) = ((5 + |Y|) / 6) ** alpha, Wu et al. (2016), eq. 14
    assert gnmt_length_penalty(1, 0.7) == 1.0
    assert gnmt_length_penalty(7, 1.0) == 2.0
    assert gnmt_length_penalty(19, 0.5) == pytest.approx(2.0, abs=1e-15)
    assert gnmt_length_penalty(13, 0.0) == 1.0
    assert gnmt_length_penalty(10, 0.6) == pytest.approx(2.5**0.6, abs=1e-15)


@FAST
@given(seed=st.integers(0, 10_000), vocab_size=st.integers(2, 5), max_len=st.integers(1, 5),
       eos_bias=st.sampled_from([-3.0, 0.0, 3.0]), beam_size=st.integers(1, 4))
def test_exact_search_started_from_a_beam_s_score_finds_the_same_output_with_fewer_calls(
        seed, vocab_size, max_len, eos_bias, beam_size):
    step_fn = prefix_model(vocab_size, seed, eos_bias=eos_bias)
    (_, beam_log_prob), *_ = beam_search(step_fn, BOS, EOS, beam_size, max_len)
    counts = {}

    def counted(name):
        counts[name] = 0

        def step(prefixes):
            counts[name] += 1
            return step_fn(prefixes)
        return step

    plain = exact_search(counted("plain"), BOS, EOS, max_len)
    started = exact_search(counted("started"), BOS, EOS, max_len, lower_bound=beam_log_prob)
    assert started == plain and plain[1] >= beam_log_prob
    assert counts["started"] <= counts["plain"]


def test_a_lower_bound_prunes_from_the_first_step_and_one_above_every_output_is_refused():
    # The notes' model: started from B D <eos> (0.08), A's children (0.02 at most) are never
    # visited: one call fewer than from -inf (see the pruning test above).
    step_fn, (A, B, C, D) = notes_counter_example()
    calls = []

    def counting(prefixes):
        calls.append(prefixes[0].tolist())
        return step_fn(prefixes)

    bound = sequence_score(step_fn, BOS, [B, D, EOS])
    assert exact_search(counting, BOS, EOS, 3, lower_bound=bound) == ([B, D, EOS], bound)
    assert calls == [[BOS], [BOS, A], [BOS, B], [BOS, B, D]]
    with pytest.raises(ValueError, match=r"lower_bound: no output reaches log-probability"):
        exact_search(step_fn, BOS, EOS, 3, lower_bound=math.log(0.081))
