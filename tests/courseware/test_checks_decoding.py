"""The checkers of chapter 7: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import heapq
import itertools
import math

import pytest
import torch

from courseware.checks import CHECKS, CheckFailed, check_most_probable_sequence, check_perplexity_temperature
from courseware.checks.decoding import (
    MARKOV_LONG, MARKOV_MARGIN, MARKOV_SHORT, NUCLEUS_MARGIN, beam_sequence, check_nucleus_distribution,
    markov_cases, markov_margin, most_probable_sequence, nucleus_cases, nucleus_distribution, perplexity_temperature,
    sequence_log_prob,
)


def test_the_checks_are_registered():
    assert CHECKS["check_most_probable_sequence"] is check_most_probable_sequence
    assert CHECKS["check_nucleus_distribution"] is check_nucleus_distribution


# ---- exact search for a bigram model (ex-dec-exact) ---------------------------------------------
def every_sequence(first, transitions, length):
    """Brute force: all V^T sequences (itertools.product), ``(V^T, T)``, and their log-probabilities."""
    tokens = torch.tensor(list(itertools.product(range(len(first)), repeat=length)))
    return tokens, first[tokens[:, 0]] + transitions[tokens[:, :-1], tokens[:, 1:]].sum(dim=1)


def search_every_sequence(first, transitions, length):
    tokens, scores = every_sequence(first, transitions, length)
    return tokens[scores.argmax()]


def second_best_by_brute_force(first, transitions, length):
    top_two = every_sequence(first, transitions, length)[1].topk(2).values
    return float(top_two[0] - top_two[1])


def viterbi_in_float32(first, transitions, length):
    """The forward recursion in float32 tensors, with back-pointers."""
    best, came = first.float(), []
    for _ in range(length - 1):
        best, previous = (best[:, None] + transitions.float()).max(dim=0)
        came.append(previous)
    tokens = [int(best.argmax())]
    for previous in reversed(came):
        tokens.append(int(previous[tokens[-1]]))
    return torch.tensor(tokens[::-1])


def backward_recursion_then_forward(first, transitions, length):
    """Another order: β_t(u), the best log-probability of the rest after token u at step t, from the end;
    then the sequence from the front, each token the best by its own score plus what can follow it."""
    vocab, table = len(first), transitions.tolist()
    rest = [[0.0] * vocab]
    for _ in range(length - 1):
        rest.insert(0, [max(table[u][v] + rest[0][v] for v in range(vocab)) for u in range(vocab)])
    tokens = [max(range(vocab), key=lambda v: float(first[v]) + rest[0][v])]
    for t in range(1, length):
        tokens.append(max(range(vocab), key=lambda v: table[tokens[-1]][v] + rest[t][v]))
    return torch.tensor(tokens)


def shortest_path_in_the_trellis(first, transitions, length):
    """Dijkstra on the graph of (step, token) nodes, an edge's cost its -log p ≥ 0 (heapq)."""
    vocab, start, table = len(first), first.tolist(), transitions.tolist()
    heap = [(-start[v], 0, (v,)) for v in range(vocab) if start[v] > -math.inf]
    heapq.heapify(heap)
    settled = set()
    while heap:
        cost, step, tokens = heapq.heappop(heap)
        if (step, tokens[-1]) in settled:
            continue
        settled.add((step, tokens[-1]))
        if step == length - 1:
            return torch.tensor(tokens)
        for v in range(vocab):
            if table[tokens[-1]][v] > -math.inf and (step + 1, v) not in settled:
                heapq.heappush(heap, (cost - table[tokens[-1]][v], step + 1, (*tokens, v)))
    raise AssertionError("no sequence of probability above 0")


def greedy_decoding(first, transitions, length):
    tokens = [int(first.argmax())]
    for _ in range(length - 1):
        tokens.append(int(transitions[tokens[-1]].argmax()))
    return torch.tensor(tokens)


def beam_of_the_vocabulary_size(first, transitions, length):
    """Beam search keeping K = V prefixes, written with topk over the flattened (K, V) table."""
    vocab = len(first)
    prefixes, scores = [[]], torch.zeros(1, dtype=torch.float64)
    for step in range(length):
        rows = first[None, :] if step == 0 else transitions[[p[-1] for p in prefixes]]
        kept = (scores[:, None] + rows).flatten().topk(min(vocab, len(prefixes) * vocab))
        prefixes = [prefixes[i // vocab] + [i % vocab] for i in kept.indices.tolist()]
        scores = kept.values
    return torch.tensor(prefixes[0])


def viterbi_with_the_table_transposed(first, transitions, length):
    return viterbi_in_float32(first, transitions.T, length).long()


def viterbi_without_first(first, transitions, length):
    return viterbi_in_float32(torch.zeros_like(first), transitions, length)


def best_ending_without_back_pointers(first, transitions, length):
    best, tokens = first, [int(first.argmax())]
    for _ in range(length - 1):
        best = (best[:, None] + transitions).max(dim=0).values
        tokens.append(int(best.argmax()))
    return torch.tensor(tokens)


def viterbi_not_reversed(first, transitions, length):
    return viterbi_in_float32(first, transitions, length).flip(0)


def viterbi_maxing_over_the_next_token(first, transitions, length):
    """The recursion with the max over the wrong axis (dim 1: for each previous u, over the next v)."""
    best, came = first, []
    for _ in range(length - 1):
        best, previous = (best[:, None] + transitions).max(dim=1)
        came.append(previous)
    tokens = [int(best.argmax())]
    for previous in reversed(came):
        tokens.append(int(previous[tokens[-1]]))
    return torch.tensor(tokens[::-1])


def viterbi_following_back_pointers_forward(first, transitions, length):
    """The right back-pointers, followed in the order they were recorded (no reversed)."""
    best, came = first.float(), []
    for _ in range(length - 1):
        best, previous = (best[:, None] + transitions.float()).max(dim=0)
        came.append(previous)
    tokens = [int(best.argmax())]
    for previous in came:
        tokens.append(int(previous[tokens[-1]]))
    return torch.tensor(tokens[::-1])


def viterbi_one_transition_too_many(first, transitions, length):
    best, came = first, []
    for _ in range(length):
        best, previous = (best[:, None] + transitions).max(dim=0)
        came.append(previous)
    tokens = [int(best.argmax())]
    for previous in reversed(came):
        tokens.append(int(previous[tokens[-1]]))
    return torch.tensor(tokens[::-1])


def test_the_reference_is_the_brute_force_optimum_ahead_by_its_margin():
    """On the short cases of 20 draws: the Viterbi recursion finds what trying all V^T sequences finds,
    and the margin is the gap to the second best sequence."""
    for seed in range(20):
        for case in markov_cases(torch.Generator().manual_seed(seed)):
            if case[2] <= MARKOV_SHORT[1]:
                assert torch.equal(most_probable_sequence(*case), search_every_sequence(*case))
                assert markov_margin(*case) == pytest.approx(second_best_by_brute_force(*case), abs=1e-9)
                assert markov_margin(*case) >= MARKOV_MARGIN


def test_the_cases_have_a_long_one_impossible_zeros_and_every_told_mistake():
    lengths, with_zeros = [], 0
    for seed in range(5):
        cases = markov_cases(torch.Generator().manual_seed(seed))
        assert cases[0][2] == 1 and MARKOV_LONG[0] <= cases[1][2] <= MARKOV_LONG[1]
        assert len(cases[1][0]) ** cases[1][2] >= 2**30  # far too many sequences to try
        lengths += [case[2] for case in cases]
        with_zeros += sum(bool(torch.isneginf(case[1]).any()) for case in cases)
        for case in cases:  # each row is a distribution
            assert torch.allclose(case[1].exp().sum(dim=1), torch.ones(len(case[0]), dtype=torch.float64))
        # the long case's answer, by an independent search
        assert torch.equal(most_probable_sequence(*cases[1]), shortest_path_in_the_trellis(*cases[1]))
    assert with_zeros > 0 and set(range(2, MARKOV_SHORT[1] + 1)) <= set(lengths)


def test_a_beam_as_wide_as_the_vocabulary_can_miss_the_most_probable_sequence():
    """The solution's example: tokens a, b, c; p(a) = p(b) = 0.5; after a: a or b, 0.5 each; after b: a
    0.6, c 0.4; after c: a. At step 2 the prefixes are ba 0.3, aa and ab 0.25, bc 0.2: K = 3 drops
    bc, and finishes at 0.15; b c a has 0.2. (Greedy search, taking the first of tied tokens, says a a a.)"""
    first = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64).log()
    transitions = torch.tensor([[0.5, 0.5, 0.0], [0.6, 0.0, 0.4], [1.0, 0.0, 0.0]], dtype=torch.float64).log()
    assert most_probable_sequence(first, transitions, 3).tolist() == [1, 2, 0]
    assert math.exp(sequence_log_prob([1, 2, 0], first, transitions)) == pytest.approx(0.2)
    for width in (3, 2):
        found = beam_sequence(first, transitions, 3, width).tolist()
        assert math.exp(sequence_log_prob(found, first, transitions)) == pytest.approx(0.15)
    assert beam_sequence(first, transitions, 3, 4).tolist() == [1, 2, 0]  # K = 4 keeps bc
    assert check_most_probable_sequence.judge([(first, transitions, 3)], [torch.tensor([1, 2, 0])]) is None
    with pytest.raises(CheckFailed, match="a beam as wide as the vocabulary"):
        check_most_probable_sequence.judge([(first, transitions, 3)], [beam_sequence(first, transitions, 3, 3)])


def test_a_beam_of_v_to_the_t_minus_1_prefixes_is_exhaustive():
    for case in markov_cases(torch.Generator().manual_seed(0)):
        first, _, length = case
        if length <= MARKOV_SHORT[1]:
            assert torch.equal(beam_sequence(*case, len(first) ** max(length - 1, 1)), most_probable_sequence(*case))


@pytest.mark.parametrize("answer", [viterbi_in_float32, backward_recursion_then_forward,
                                    shortest_path_in_the_trellis])
def test_most_probable_sequence_accepts_right_answers_written_differently(answer, capsys):
    check_most_probable_sequence(answer)
    assert capsys.readouterr().out.startswith("✓ your sequences are the most probable ones")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda f, a, t: beam_sequence(f, a, t, 3), "beam search with K = 3|as wide as the vocabulary"),
        (viterbi_one_transition_too_many, r"shape \(\d+,\); expected \(T,\) = .*takes T - 1 transitions"),
        (lambda f, a, t: viterbi_in_float32(f, a, t)[1:], "return all T tokens, y_1 included"),
        (lambda f, a, t: torch.tensor(0.0), "not its log-probability"),
        (lambda f, a, t: viterbi_in_float32(f, a, t).double(), "return integers"),
        (lambda f, a, t: viterbi_in_float32(f, a, t) + len(f), "token ids outside 0 .. "),
    ],
)
def test_most_probable_sequence_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_most_probable_sequence(answer)


def test_a_less_probable_or_impossible_sequence_is_called_so():
    first = torch.tensor([0.7, 0.3, 0.0], dtype=torch.float64).log()
    transitions = torch.tensor([[0.0, 0.9, 0.1], [0.2, 0.8, 0.0], [0.5, 0.0, 0.5]], dtype=torch.float64).log()
    case = [(first, transitions, 3)]
    assert most_probable_sequence(*case[0]).tolist() == [0, 1, 1]
    with pytest.raises(CheckFailed, match="log-probability -inf .*probability 0"):
        check_most_probable_sequence.judge(case, [torch.tensor([0, 0, 1])])
    # log 0.126 against log 0.504
    with pytest.raises(CheckFailed, match=r"has log-probability -2.07147; the most probable has -0.685179 \(the two "
                                          r"first differ at position 2, counting from 0\)"):
        check_most_probable_sequence.judge(case, [torch.tensor([0, 1, 0])])


# ---- the nucleus (top-p) distribution -----------------------------------------------------
def nucleus_by_sort_and_cumsum(log_probs, temperature, top_p):
    """Vectorised: a stable descending sort, the probability before each token, scattered back."""
    probs = torch.softmax(log_probs / temperature, dim=-1)
    ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, ordered.cumsum(-1) - ordered < top_p)
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def nucleus_by_searchsorted_in_float32(log_probs, temperature, top_p):
    """float32 throughout; the nucleus's size is one more than the first rank whose cumulative
    probability reaches top_p (torch.searchsorted finds it)."""
    probs = torch.softmax(log_probs.float() / temperature, dim=-1)
    ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    cumulative = ordered.cumsum(-1)
    target = torch.full((*cumulative.shape[:-1], 1), top_p, dtype=torch.float32)
    size = torch.searchsorted(cumulative, target) + 1  # (..., 1)
    ranks = torch.arange(probs.shape[-1]).expand_as(probs)
    kept_sorted = torch.where(ranks < size, ordered, torch.zeros_like(ordered))
    kept = torch.zeros_like(probs).scatter(-1, order, kept_sorted)
    return kept / kept.sum(-1, keepdim=True)


def nucleus_with_python_floats(log_probs, temperature, top_p):
    """The statement read literally, one row at a time in plain Python: the softmax by hand (with
    its maximum subtracted), tokens by (-q, id), added while the total so far is below top_p."""
    rows = log_probs.reshape(-1, log_probs.shape[-1]).tolist()
    out = []
    for row in rows:
        scaled = [value / temperature for value in row]
        top = max(scaled)
        weights = [math.exp(value - top) for value in scaled]
        q = [w / sum(weights) for w in weights]
        nucleus, total = [], 0.0
        for v in sorted(range(len(q)), key=lambda v: (-q[v], v)):
            if total >= top_p:
                break
            nucleus.append(v)
            total += q[v]
        out.append([q[v] / total if v in nucleus else 0.0 for v in range(len(q))])
    return torch.tensor(out, dtype=torch.float64).reshape(log_probs.shape)


def nucleus_without_the_crossing_token(log_probs, temperature, top_p):
    """Keeps the tokens whose cumulative probability, their own included, is at most top_p."""
    probs = torch.softmax(log_probs / temperature, dim=-1)
    ordered, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, ordered.cumsum(-1) <= top_p)
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def nucleus_without_renormalising(log_probs, temperature, top_p):
    return torch.softmax(log_probs / temperature, dim=-1) * (nucleus_by_sort_and_cumsum(log_probs, temperature,
                                                                                        top_p) > 0)


def nucleus_chosen_before_the_temperature(log_probs, temperature, top_p):
    """The nucleus of the untempered distribution, then the tempered probabilities on it."""
    kept = torch.softmax(log_probs / temperature, dim=-1) * (nucleus_by_sort_and_cumsum(log_probs, 1.0, top_p) > 0)
    return kept / kept.sum(-1, keepdim=True)


def nucleus_ignoring_the_temperature(log_probs, temperature, top_p):
    return nucleus_by_sort_and_cumsum(log_probs, 1.0, top_p)


def nucleus_with_the_temperature_multiplied(log_probs, temperature, top_p):
    return nucleus_by_sort_and_cumsum(log_probs * temperature, 1.0, top_p)


def nucleus_with_untempered_values(log_probs, temperature, top_p):
    """The tempered nucleus, but the final softmax forgets the temperature."""
    keep = nucleus_by_sort_and_cumsum(log_probs, temperature, top_p) > 0
    return torch.softmax(log_probs.masked_fill(~keep, -math.inf), dim=-1)


def nucleus_with_ties_to_the_higher_id(log_probs, temperature, top_p):
    """An ascending stable sort flipped: most probable first, but ties with the higher id first."""
    probs = torch.softmax(log_probs / temperature, dim=-1)
    order = torch.sort(probs, dim=-1, stable=True).indices.flip(-1)
    ordered = probs.gather(-1, order)
    keep = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, ordered.cumsum(-1) - ordered < top_p)
    kept = probs * keep
    return kept / kept.sum(-1, keepdim=True)


def nucleus_by_a_threshold_on_q(log_probs, temperature, top_p):
    """Every token at least as probable as the one that crosses top_p: all the tokens tied with it."""
    probs = torch.softmax(log_probs / temperature, dim=-1)
    ordered = torch.sort(probs, dim=-1, descending=True).values
    crossing = (ordered.cumsum(-1) - ordered < top_p).sum(-1, keepdim=True) - 1  # rank of the last kept token
    kept = probs * (probs >= ordered.gather(-1, crossing))
    return kept / kept.sum(-1, keepdim=True)


def nucleus_in_token_order(log_probs, temperature, top_p):
    """The cumulative sum taken in token-id order, without sorting."""
    probs = torch.softmax(log_probs / temperature, dim=-1)
    kept = probs * (probs.cumsum(-1) - probs < top_p)
    return kept / kept.sum(-1, keepdim=True)


@pytest.mark.parametrize("answer", [nucleus_by_sort_and_cumsum, nucleus_by_searchsorted_in_float32,
                                    nucleus_with_python_floats])
def test_nucleus_distribution_accepts_right_answers_written_differently(answer, capsys):
    check_nucleus_distribution(answer)
    assert capsys.readouterr().out.startswith("✓ nucleus (top-p) probabilities agree")


def test_the_reference_is_the_nucleus_worked_by_hand():
    log_probs = torch.log(torch.tensor([0.1, 0.3, 0.4, 0.2], dtype=torch.float64))
    # most probable first: 2 (0.4), 1 (0.3), 3 (0.2), 0 (0.1); before each: 0, 0.4, 0.7, 0.9
    torch.testing.assert_close(nucleus_distribution(log_probs, 1.0, 0.6),
                               torch.tensor([0, 3 / 7, 4 / 7, 0], dtype=torch.float64))
    torch.testing.assert_close(nucleus_distribution(log_probs, 1.0, 0.3), torch.tensor([0.0, 0, 1, 0],
                                                                                        dtype=torch.float64))
    torch.testing.assert_close(nucleus_distribution(log_probs, 1.0, 0.95), torch.exp(log_probs))
    # ties: 1 and 3 (0.3 each) before 0 and 2 (0.2 each); among equals the lower token id first
    tied = torch.log(torch.tensor([0.2, 0.3, 0.2, 0.3], dtype=torch.float64))
    torch.testing.assert_close(nucleus_distribution(tied, 1.0, 0.25), torch.tensor([0.0, 1, 0, 0],
                                                                                    dtype=torch.float64))
    torch.testing.assert_close(nucleus_distribution(tied, 1.0, 0.7),
                               torch.tensor([0.25, 0.375, 0, 0.375], dtype=torch.float64))


def test_the_reference_agrees_with_the_vectorised_nucleus_on_many_draws():
    for seed in range(50):
        for case in nucleus_cases(torch.Generator().manual_seed(seed)):
            torch.testing.assert_close(nucleus_distribution(*case), nucleus_by_sort_and_cumsum(*case),
                                       atol=1e-12, rtol=0)


def test_the_cases_are_clear_of_the_boundary_and_exercise_ties_and_the_temperature():
    """top_p is never within NUCLEUS_MARGIN of a cumulative probability; every draw has cases whose
    nucleus ends inside a group of tied tokens, and a case whose nucleus the temperature changes."""
    for seed in range(20):
        cases = nucleus_cases(torch.Generator().manual_seed(seed))
        for log_probs, temperature, top_p in cases:
            probs = torch.softmax(log_probs / temperature, dim=-1)
            cumulative = probs.sort(dim=-1, descending=True).values.cumsum(-1)
            assert ((cumulative - top_p).abs() >= NUCLEUS_MARGIN).all()
        decided_by_ties = [case for case in cases if not torch.equal(nucleus_distribution(*case),
                                                                     nucleus_with_ties_to_the_higher_id(*case))]
        assert len(decided_by_ties) >= 5
        assert any(not torch.equal(nucleus_distribution(*case) > 0, nucleus_distribution(case[0], 1.0, case[2]) > 0)
                   for case in cases)


def test_nucleus_diagnoses_on_a_case_worked_by_hand():
    log_probs = torch.log(torch.tensor([0.1, 0.3, 0.4, 0.2], dtype=torch.float64))
    cases, judge = [(log_probs, 1.0, 0.6)], check_nucleus_distribution.judge
    judge(cases, [torch.tensor([0, 3 / 7, 4 / 7, 0], dtype=torch.float64)])
    with pytest.raises(CheckFailed, match=r"to token 3, outside the nucleus \(tokens 1, 2\)"):
        judge(cases, [torch.tensor([0, 0.3, 0.4, 0.2], dtype=torch.float64) / 0.9])
    with pytest.raises(CheckFailed, match="you left out the token that crosses top_p"):
        judge(cases, [torch.tensor([0.0, 0, 1, 0], dtype=torch.float64)])
    with pytest.raises(CheckFailed, match="did not renormalise"):
        judge(cases, [torch.tensor([0, 0.3, 0.4, 0], dtype=torch.float64)])
    with pytest.raises(CheckFailed, match="sum to 0.7000, not 1: renormalise"):
        judge(cases, [torch.tensor([0, 0.35, 0.35, 0], dtype=torch.float64)])
    with pytest.raises(CheckFailed, match="an empty nucleus gives 0/0"):
        judge(cases, [torch.tensor([math.nan] * 4, dtype=torch.float64)])
    with pytest.raises(CheckFailed, match=r"contain -inf .*: return probabilities \(0 off the nucleus\), not "
                                          "log-probabilities"):
        judge(cases, [torch.log(torch.tensor([0, 3 / 7, 4 / 7, 0], dtype=torch.float64))])


def test_nucleus_blames_low_precision_not_renormalising():
    """A right answer rounded to float16 or bfloat16 sums to 1 only to its dtype's precision."""
    probs = torch.tensor([0.1, 0.2, 0.7], dtype=torch.float64)  # 0.7 is 1.2e-4 from its nearest float16
    cases, judge = [(torch.log(probs), 1.0, 0.95)], check_nucleus_distribution.judge
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(CheckFailed, match=f"are {str(dtype)[6:]}, whose precision .* is too low") as failure:
            judge(cases, [probs.to(dtype)])
        assert "renormalise" not in str(failure.value)
    with pytest.raises(CheckFailed, match="sum to 0.9000, not 1: renormalise"):
        judge(cases, [torch.tensor([0.1, 0.2, 0.6], dtype=torch.float16)])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (nucleus_without_the_crossing_token, "crosses top_p"),
        (nucleus_without_renormalising, "did not renormalise"),
        (nucleus_chosen_before_the_temperature, "from the untempered probabilities"),
        (nucleus_ignoring_the_temperature, "the temperature has no effect"),
        (nucleus_with_the_temperature_multiplied, "you multiplied log_probs by the temperature; divide by it"),
        (nucleus_with_untempered_values, r"right tokens, but their values must come from softmax\(log_probs / T\)"),
        (nucleus_with_ties_to_the_higher_id, "the lower token id comes first"),
        (nucleus_by_a_threshold_on_q, "you kept every token tied with the last one"),
        (nucleus_in_token_order, "in token-id order"),
        (lambda lp, t, p: torch.log(nucleus_by_sort_and_cumsum(lp, t, p)), "not log-probabilities"),
        (lambda lp, t, p: nucleus_by_sort_and_cumsum(lp, t, p)[..., :-1], "have shape"),
        (lambda lp, t, p: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_nucleus_distribution_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_nucleus_distribution(answer)


# ---- experiment: the temperature for a given perplexity ------------------------------------
def perplexity_at(log_probs, temperature):
    probs = torch.softmax(log_probs / temperature, dim=0)
    return math.exp(float(torch.special.entr(probs).sum()))  # entr(p) = -p ln p, 0 at p = 0


def temperature_by_bisection_on_log_t(log_probs, perplexity):
    low, high = -10.0, 10.0  # log T
    for _ in range(80):
        middle = (low + high) / 2
        if perplexity_at(log_probs, math.exp(middle)) < perplexity:
            low = middle
        else:
            high = middle
    return torch.tensor(math.exp(high))


def temperature_by_grid_then_secant(log_probs, perplexity):
    """A coarse grid (the experiment), then the secant method on log T, in float32."""
    grid = [0.05 * 1.2**n for n in range(60)]
    above = next(t for t in grid if perplexity_at(log_probs, t) >= perplexity)
    a, b = math.log(above / 1.2), math.log(above)
    for _ in range(50):
        fa = perplexity_at(log_probs, math.exp(a)) - perplexity
        fb = perplexity_at(log_probs, math.exp(b)) - perplexity
        if fb == fa:
            break
        a, b = b, b - fb * (b - a) / (fb - fa)
    return torch.tensor(math.exp(b), dtype=torch.float32)


def temperature_stopping_on_the_perplexity(log_probs, perplexity):
    """The statement read literally: bisect on log T and stop as soon as the perplexity is within
    a relative error of 1e-6 of the target, the loosest answer the statement allows."""
    low, high = -10.0, 10.0  # log T
    while True:
        middle = (low + high) / 2
        error = perplexity_at(log_probs, math.exp(middle)) / perplexity - 1
        if abs(error) <= 1e-6:
            return torch.tensor(math.exp(middle), dtype=torch.float64)
        low, high = (middle, high) if error < 0 else (low, middle)


def temperature_stopping_on_the_perplexity_in_float32(log_probs, perplexity):
    """The same literal search, returned as torch.tensor(T): float32, PyTorch's default. Rounding T to
    float32 can move the perplexity past the tolerance (seed 7: from 9.53e-7 to 1.01e-6), yet the
    float32 number T stands for holds an answer; the book accepts float32 answers."""
    return torch.tensor(float(temperature_stopping_on_the_perplexity(log_probs, perplexity)))


def temperature_by_bisection_stopping_on_t(log_probs, perplexity, steps=8):
    """A bisection that stops on T after too few halvings: its perplexity misses the target."""
    low, high = 0.01, 100.0
    for _ in range(steps):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if perplexity_at(log_probs, middle) < perplexity else (low, middle)
    return torch.tensor(math.sqrt(low * high), dtype=torch.float64)


def temperature_with_entropy_in_bits(log_probs, perplexity):
    """exp(H) with H in bits (log2 instead of ln): the search meets exp(H_bits) = perplexity."""
    def exp_of_bits(temperature):
        probs = torch.softmax(log_probs / temperature, dim=0)
        return math.exp(float(-(probs * torch.log2(probs.clamp_min(1e-300))).sum()))

    low, high = -10.0, 10.0
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if exp_of_bits(math.exp(middle)) < perplexity else (low, middle)
    return torch.tensor(math.exp(high), dtype=torch.float64)


def temperature_with_two_to_the_entropy_in_nats(log_probs, perplexity):
    """2^H with H in nats: the search meets 2^H = perplexity."""
    return temperature_by_bisection_on_log_t(log_probs, math.exp(math.log(perplexity) / math.log(2)))


def reciprocal_temperature(log_probs, perplexity):
    """1/T: the factor that multiplies the log-probabilities (log_probs * T in the search)."""
    return 1 / temperature_by_bisection_on_log_t(log_probs, perplexity)


@pytest.mark.parametrize("answer", [temperature_by_bisection_on_log_t, temperature_by_grid_then_secant,
                                    temperature_stopping_on_the_perplexity,
                                    temperature_stopping_on_the_perplexity_in_float32])
def test_perplexity_temperature_accepts_different_searches(answer, capsys):
    check_perplexity_temperature(answer)
    assert capsys.readouterr().out.startswith("✓ your temperatures give the perplexity asked for")


def test_perplexity_temperature_judges_the_perplexity_not_the_temperature():
    """Every T whose perplexity is within the stated relative error passes, even where T itself is
    further than 1e-6 from the bisection's; a T just outside fails with the relative error."""
    cases = check_perplexity_temperature.make_cases(torch.Generator().manual_seed(14))
    log_probs, perplexity = cases[0]
    exact = float(perplexity_temperature(log_probs, perplexity))  # float64
    slope = (math.log(perplexity_at(log_probs, exact * (1 + 1e-5)))
             - math.log(perplexity_at(log_probs, exact * (1 - 1e-5)))) / 2e-5  # d ln PPL / d ln T
    inside, outside = exact * (1 + 0.9e-6 / slope), exact * (1 + 1.1e-6 / slope)
    check_perplexity_temperature.judge([cases[0]], [torch.tensor(inside, dtype=torch.float64)])
    with pytest.raises(CheckFailed, match=r"too high by a relative error of 1\.1e-06"):
        check_perplexity_temperature.judge([cases[0]], [torch.tensor(outside, dtype=torch.float64)])


def test_a_float32_temperature_is_judged_as_the_float32_number_it_is():
    """The referee's case (seed 7, 24 tokens): the float64 search stops at a relative error of
    9.53e-7; rounded to float32, T gives 1.01e-6. Returned as float32 it passes (a real that rounds
    to it is within the tolerance); the same value returned as float64 claims a T that misses."""
    cases = check_perplexity_temperature.make_cases(torch.Generator().manual_seed(7))
    case = next(case for case in cases if len(case[0]) == 24)
    t64 = temperature_stopping_on_the_perplexity(*case)
    t32 = t64.float()
    errors = [perplexity_at(case[0], float(t)) / case[1] - 1 for t in (t64, t32)]
    assert abs(errors[0]) <= 1e-6 < abs(errors[1])
    check_perplexity_temperature.judge([case], [t32])
    with pytest.raises(CheckFailed, match=r"relative error of 1\.0\d*e-06; it must be within 1e-6"):
        check_perplexity_temperature.judge([case], [t32.double()])


def test_a_float32_temperature_off_by_more_than_its_rounding_fails_saying_so():
    cases = check_perplexity_temperature.make_cases(torch.Generator().manual_seed(7))
    t = float(perplexity_temperature(*cases[0])) * (1 + 1e-4)
    with pytest.raises(CheckFailed, match="nor does any T that rounds to your float32 value"):
        check_perplexity_temperature.judge([cases[0]], [torch.tensor(t, dtype=torch.float32)])


def test_the_literal_float32_search_passes_on_200_draws():
    """The referee counted 18 failures in 200 draws before float32 results were judged in float32."""
    for seed in range(200):
        cases = check_perplexity_temperature.make_cases(torch.Generator().manual_seed(seed))
        check_perplexity_temperature.judge(cases, [temperature_stopping_on_the_perplexity_in_float32(*case)
                                                   for case in cases])


def test_a_tolerance_on_t_is_not_a_tolerance_on_the_perplexity():
    """The solution's reason to stop on the perplexity: on the checker's cases, d ln PPL / d ln T is
    above 1 for some distributions and below 1 for others."""
    slopes = []
    for log_probs, perplexity in check_perplexity_temperature.make_cases(torch.Generator().manual_seed(0)):
        t = float(temperature_by_bisection_on_log_t(log_probs, perplexity))
        slopes.append((math.log(perplexity_at(log_probs, t * (1 + 1e-5)))
                       - math.log(perplexity_at(log_probs, t * (1 - 1e-5)))) / 2e-5)
    assert min(slopes) < 0.9 and max(slopes) > 1.1


def test_perplexity_temperature_names_two_to_the_entropy_in_nats():
    """2^H = perplexity with H in nats asks for exp(H) = perplexity^(1/ln 2), which only some targets
    below V allow: judged on the cases where the search can meet it."""
    cases = [(log_probs, perplexity) for seed in range(3)
             for log_probs, perplexity in check_perplexity_temperature.make_cases(torch.Generator().manual_seed(seed))
             if perplexity ** (1 / math.log(2)) < 0.9 * len(log_probs)]
    assert len(cases) >= 5
    for case in cases:
        with pytest.raises(CheckFailed, match="2\\^H = perplexity with H in nats"):
            check_perplexity_temperature.judge([case], [temperature_with_two_to_the_entropy_in_nats(*case)])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (reciprocal_temperature, "that is 1/T"),
        (temperature_with_entropy_in_bits, "exp\\(H\\) = perplexity with H in bits"),
        (lambda lp, k: temperature_by_bisection_on_log_t(lp, k) * 1.01, "the perplexity is too high by a relative error"),
        (temperature_by_bisection_stopping_on_t, "relative error of .*; it must be within 1e-6"),
        (lambda lp, k: -temperature_by_bisection_on_log_t(lp, k), "a temperature must be > 0"),
        (lambda lp, k: temperature_by_bisection_on_log_t(lp, k).repeat(2), "expected a scalar"),
        (lambda lp, k: float(temperature_by_bisection_on_log_t(lp, k)), "must return a torch.Tensor"),
    ],
)
def test_perplexity_temperature_rejects_wrong_temperatures_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_perplexity_temperature(answer)


# ---- fairness: an independent right answer and the most plausible wrong ones (tests/courseware/test_exercise_fairness.py)
FAIRNESS = {
    "check_most_probable_sequence": {
        "right": [backward_recursion_then_forward, shortest_path_in_the_trellis, viterbi_in_float32],
        "wrong": [
            (greedy_decoding, r"you took the most probable token at each step \(greedy search\)"),
            (beam_of_the_vocabulary_size, r"a beam as wide as the vocabulary \(K = V\) is not exact"),
            (viterbi_with_the_table_transposed, r"you read transitions\[v, u\] as the log-probability of v after u"),
            (viterbi_without_first, "you left out first"),
            (best_ending_without_back_pointers, "the best sequence need not pass through those tokens"),
            (viterbi_not_reversed, "your sequence is backwards"),
            (viterbi_one_transition_too_many, "takes T - 1 transitions"),
            (viterbi_maxing_over_the_next_token,
             r"for each previous token u, the max over the next token v \(dim 1\); δ_t\(v\) takes the max over "
             r"the previous token u, for each v \(dim 0\)"),
            (viterbi_following_back_pointers_forward, "you followed the back-pointers in the order you recorded them"),
        ],
    },
    "check_nucleus_distribution": {
        "right": [nucleus_with_python_floats, nucleus_by_searchsorted_in_float32],
        "wrong": [
            (nucleus_without_the_crossing_token, "crosses top_p"),
            (nucleus_without_renormalising, "did not renormalise"),
            (nucleus_chosen_before_the_temperature, "from the untempered probabilities"),
            (nucleus_ignoring_the_temperature, "the temperature has no effect"),
            (nucleus_with_the_temperature_multiplied, "you multiplied log_probs by the temperature; divide by it"),
            (nucleus_with_untempered_values,
             r"right tokens, but their values must come from softmax\(log_probs / T\)"),
            (nucleus_with_ties_to_the_higher_id, "the lower token id comes first"),
            (nucleus_by_a_threshold_on_q, "you kept every token tied with the last one"),
            (nucleus_in_token_order, "in token-id order"),
        ],
    },
    "check_perplexity_temperature": {
        "right": [temperature_stopping_on_the_perplexity, temperature_stopping_on_the_perplexity_in_float32,
                  temperature_by_grid_then_secant],
        "wrong": [
            (reciprocal_temperature, "that is 1/T"),
            (temperature_with_entropy_in_bits, "with H in bits"),
            (temperature_by_bisection_stopping_on_t, "relative error of .*; it must be within 1e-6"),
        ],
    },
}


# ---- exact search with <eos> by branch and bound (ex-dec-bound) ----------------------------------
from courseware.checks import check_best_output_log_prob  # noqa: E402
from courseware.checks.decoding import BOUND_LONG, BOUND_MARGIN, best_output_log_prob, bound_cases  # noqa: E402


def every_output(first, transitions, max_len, eos=0):
    """Brute force: every output (eos only at its end, or max_len tokens without eos) and its log-probability."""
    vocab = len(first)
    for length in range(1, max_len + 1):
        for body in itertools.product([v for v in range(vocab) if v != eos], repeat=length - 1):
            for last in (range(vocab) if length == max_len else [eos]):
                tokens = [*body, last]
                yield tokens, float(first[tokens[0]]) + sum(
                    float(transitions[u, v]) for u, v in zip(tokens, tokens[1:]))


def branch_and_bound_in_loops(first, transitions, max_len, eos=0, visits=None):
    """A right answer: the chapter's rule, recursively, on Python floats (``visits`` counts the prefixes
    extended)."""
    start, table = first.tolist(), transitions.tolist()
    best = [-math.inf]

    def visit(last, length, score):
        if visits is not None:
            visits.append(length)
        row = start if last is None else table[last]
        for token in sorted(range(len(row)), key=lambda v: -row[v]):  # most probable first
            extended = score + row[token]
            if extended <= best[0]:
                continue  # pruned: adding tokens only lowers it
            if token == eos or length + 1 == max_len:
                best[0] = extended
            else:
                visit(token, length + 1, extended)

    visit(None, 0, 0.0)
    return torch.tensor(best[0], dtype=torch.float64)


def best_by_length_in_float32(first, transitions, max_len, eos=0):
    """A right answer by another method: for each length, the best prefix ending in each word (a vectorised
    max-plus recursion in float32); outputs end with eos or at max_len."""
    first, transitions = first.float(), transitions.float()
    words = torch.ones(len(first), dtype=torch.bool)
    words[eos] = False
    best_prefix = first  # (V,): best prefix of the current length ending in each token
    candidates = [first[eos]]
    for length in range(2, max_len + 1):
        open_prefix = best_prefix.masked_fill(~words, -math.inf)  # nothing follows eos
        best_prefix = (open_prefix[:, None] + transitions).max(dim=0).values
        candidates.append(best_prefix[eos])
    candidates.append(best_prefix[words].max())  # cut at max_len tokens
    if max_len == 1:
        candidates.append(first[words].max())
    return torch.stack(candidates).max()


def greedy_until_eos(first, transitions, max_len, eos=0):
    """Wrong: the most probable token at each step."""
    row, score = first, 0.0
    for _ in range(max_len):
        token = int(row.argmax())
        score += float(row[token])
        if token == eos:
            break
        row = transitions[token]
    return torch.tensor(score, dtype=torch.float64)


def outputs_that_end_with_eos(first, transitions, max_len, eos=0):
    """Wrong: only outputs that end with eos, brute force (short cases) or a max-plus recursion."""
    best_prefix, best = first.clone(), float(first[eos])
    for _ in range(2, max_len + 1):
        open_prefix = best_prefix.clone()
        open_prefix[eos] = -math.inf
        best_prefix = (open_prefix[:, None] + transitions).max(dim=0).values
        best = max(best, float(best_prefix[eos]))
    return torch.tensor(best, dtype=torch.float64)


def one_token_too_many(first, transitions, max_len, eos=0):
    """Wrong: max_len words, then eos."""
    return branch_and_bound_in_loops(first, transitions, max_len + 1, eos)


def one_token_too_few(first, transitions, max_len, eos=0):
    """Wrong: the branch and bound with outputs cut at max_len - 1 tokens."""
    return branch_and_bound_in_loops(first, transitions, max(1, max_len - 1), eos)


def eos_as_an_ordinary_word(first, transitions, max_len, eos=0):
    """Wrong: the best sequence of exactly max_len tokens (the earlier exercise's Viterbi)."""
    best_prefix = first.clone()
    for _ in range(max_len - 1):
        best_prefix = (best_prefix[:, None] + transitions).max(dim=0).values
    return best_prefix.max()


def break_in_index_order(first, transitions, max_len, eos=0):
    """Wrong: the children in index order, the loop left at the first pruned one (the referee's)."""
    best = -math.inf

    def extend(last, length, log_prob):
        nonlocal best
        row = first if last is None else transitions[last]
        for token in range(len(row)):
            score = log_prob + row[token].item()
            if score <= best:
                break
            if token == eos or length + 1 == max_len:
                best = score
            else:
                extend(token, length + 1, score)

    extend(None, 0, 0.0)
    return torch.tensor(best, dtype=torch.float64)


def test_the_bound_checker_is_registered_and_its_reference_is_brute_force():
    assert CHECKS["check_best_output_log_prob"] is check_best_output_log_prob
    for seed in range(3):
        cases = bound_cases(torch.Generator().manual_seed(seed))
        assert BOUND_LONG[0] <= cases[1][2] <= BOUND_LONG[1]
        for case in cases:
            if case[2] > 6:
                continue
            scores = sorted((score for _, score in every_output(*case)), reverse=True)
            assert float(best_output_log_prob(*case)) == pytest.approx(scores[0], abs=1e-12)
            assert len(scores) == 1 or scores[0] - scores[1] >= BOUND_MARGIN


def test_the_long_case_is_cheap_for_a_branch_and_bound():
    for seed in range(20):
        case = bound_cases(torch.Generator().manual_seed(seed))[1]
        visits = []
        found = branch_and_bound_in_loops(*case, visits=visits)
        assert float(found) == pytest.approx(float(best_output_log_prob(*case)), abs=1e-12)
        # against the sum of (V - 1)^L over L = 0 .. max_len outputs (eos comes only
        # last), at least 2^26 - 1 for V = 3 and max_len = 25: the bound prunes nearly all
        assert len(visits) < 1_000


FAIRNESS["check_best_output_log_prob"] = {
    "right": [branch_and_bound_in_loops, best_by_length_in_float32],
    "wrong": [
        (greedy_until_eos, r"greedy search"),
        (outputs_that_end_with_eos, "you dropped the outputs that reach max_len tokens without eos"),
        (one_token_too_many, "max_len \\+ 1 tokens"),
        (one_token_too_few, "at most max_len - 1 tokens"),
        (eos_as_an_ordinary_word, "sequences of exactly max_len tokens"),
        (break_in_index_order, "the children were not sorted most probable first"),
    ],
}
