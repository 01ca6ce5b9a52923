"""The checkers of chapter 7: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_expand_and_prune, check_perplexity_temperature
from lib.checks.decoding import (
    NUCLEUS_MARGIN, check_nucleus_distribution, nucleus_cases, nucleus_distribution, perplexity_temperature,
)


def test_the_checks_are_registered():
    assert CHECKS["check_expand_and_prune"] is check_expand_and_prune
    assert CHECKS["check_nucleus_distribution"] is check_nucleus_distribution


# ---- one beam step ----------------------------------------------------------------------
def prune_with_topk(beam_scores, log_probs, beam_size):
    return (beam_scores[:, None] + log_probs).flatten().topk(beam_size).indices


def prune_with_loops(beam_scores, log_probs, beam_size):
    vocab_size = log_probs.shape[1]
    scored = [(float(beam_scores[k] + log_probs[k, v]), k * vocab_size + v)
              for k in range(len(beam_scores)) for v in range(vocab_size)]
    return torch.tensor([index for _, index in sorted(scored, reverse=True)[:beam_size]])


@pytest.mark.parametrize("answer", [prune_with_topk, prune_with_loops])
def test_expand_and_prune_accepts_right_answers_written_differently(answer, capsys):
    check_expand_and_prune(answer)
    assert capsys.readouterr().out.startswith("✓ the kept candidates agree with lib.decoding.expand_and_prune")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s, lp, k: lp.flatten().topk(k).indices, "by the new token's log-probability alone"),
        (lambda s, lp, k: prune_with_topk(s, lp, k) % lp.shape[1] if lp.shape[0] > 1 else torch.tensor([-1] * k),
         "returned the token ids|are not the"),
        (lambda s, lp, k: torch.full((k,), -1), "are not the 1 best|are not the 2 best|are not the"),
        (lambda s, lp, k: prune_with_topk(s, lp, k)[:1].expand(k + 1), "has shape"),
        (lambda s, lp, k: prune_with_topk(s, lp, k).double(), "return integers"),
        (lambda s, lp, k: prune_with_topk(s, lp, k).tolist(), "must return a torch.Tensor; it returned list"),
    ],
)
def test_expand_and_prune_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_expand_and_prune(answer)


def test_expand_and_prune_diagnoses_on_a_case_worked_by_hand():
    # Candidates: row 0 scores -3.36, -4.61, -5.30; row 1 scores -2.40, -3.50, -0.72.
    cases = [(torch.tensor([-3.0, -0.5], dtype=torch.float64),
              torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.15, 0.05, 0.8]], dtype=torch.float64)), 3)]
    judge = check_expand_and_prune.judge
    judge(cases, [torch.tensor([5, 3, 0])])  # flat index = parent * 3 + token
    with pytest.raises(CheckFailed, match="you returned the token ids"):
        judge(cases, [torch.tensor([2, 0, 0])])
    with pytest.raises(CheckFailed, match="list them best first"):
        judge(cases, [torch.tensor([0, 3, 5])])
    with pytest.raises(CheckFailed, match="new token's log-probability alone"):
        judge(cases, [torch.tensor([5, 0, 1])])


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


# ---- fairness: an independent right answer and the most plausible wrong ones (tests/test_exercise_fairness.py)
def prune_ranked_by_token_alone(beam_scores, log_probs, beam_size):
    return log_probs.flatten().topk(beam_size).indices


def prune_returning_token_ids(beam_scores, log_probs, beam_size):
    return prune_with_topk(beam_scores, log_probs, beam_size) % log_probs.shape[1]


def prune_in_index_order(beam_scores, log_probs, beam_size):
    return prune_with_topk(beam_scores, log_probs, beam_size).sort().values


def prune_flattened_along_the_wrong_axis(beam_scores, log_probs, beam_size):
    """Flat indices v * K + k: the transposed (V, K) table flattened."""
    return (beam_scores[:, None] + log_probs).T.flatten().topk(beam_size).indices


FAIRNESS = {
    "check_expand_and_prune": {
        "right": [prune_with_loops],
        "wrong": [
            (prune_ranked_by_token_alone, "by the new token's log-probability alone"),
            (prune_returning_token_ids, "you returned the token ids"),
            (prune_in_index_order, "list them best first"),
            (prune_flattened_along_the_wrong_axis, "are not the \\d+ best candidates"),
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
