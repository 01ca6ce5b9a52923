"""The checkers of chapter 8: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math
from collections import Counter

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_bleu, check_clipped_matches, check_negation_bleu


def test_the_checks_are_registered():
    assert CHECKS["check_clipped_matches"] is check_clipped_matches
    assert CHECKS["check_bleu"] is check_bleu


# ---- clipped matches ------------------------------------------------------------------------
def grams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def clipped_with_counters(hypothesis, references, max_n):
    out = []
    for n in range(1, max_n + 1):
        best = Counter()
        for reference in references:
            best |= grams(reference, n)
        out.append(sum((grams(hypothesis, n) & best).values()))
    return torch.tensor(out)


def clipped_with_loops(hypothesis, references, max_n):
    out = torch.zeros(max_n, dtype=torch.long)
    for n in range(1, max_n + 1):
        hyp = [tuple(hypothesis[i:i + n]) for i in range(len(hypothesis) - n + 1)]
        for gram in set(hyp):
            most = max(sum(tuple(r[i:i + n]) == gram for i in range(len(r) - n + 1)) for r in references)
            out[n - 1] += min(hyp.count(gram), most)
    return out


@pytest.mark.parametrize("answer", [clipped_with_counters, clipped_with_loops])
def test_clipped_matches_accepts_right_answers_written_differently(answer, capsys):
    check_clipped_matches(answer)
    assert capsys.readouterr().out.startswith("✓ clipped n-gram matches agree with lib.metrics.clipped_counts")


def unclipped(hypothesis, references, max_n):
    return torch.tensor([sum(c for g, c in grams(hypothesis, n).items() if any(grams(r, n)[g] for r in references))
                         for n in range(1, max_n + 1)])


def clipped_by_sum(hypothesis, references, max_n):
    return torch.tensor([sum((grams(hypothesis, n) & sum((grams(r, n) for r in references), Counter())).values())
                         for n in range(1, max_n + 1)])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (unclipped, "clip each one to its largest count in a single reference"),
        (clipped_by_sum, "summed over the references"),
        (lambda h, r, n: clipped_with_counters(h, r[:1], n), "first reference only|summed|your counts are"),
        (lambda h, r, n: torch.tensor([max(len(h) - k + 1, 0) for k in range(1, n + 1)]),
         "return how many of them match"),
        (lambda h, r, n: clipped_with_counters(h, r, n)[:1].repeat(n + 1), "have shape"),
        (lambda h, r, n: clipped_with_counters(h, r, n) + 0.5, "not whole numbers"),
        (lambda h, r, n: clipped_with_counters(h, r, n).tolist(), "must return a torch.Tensor; it returned list"),
    ],
)
def test_clipped_matches_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_clipped_matches(answer)


# ---- BLEU from counts -----------------------------------------------------------------------
def bleu_in_torch(matches, totals, hyp_len, ref_len):
    log_precision = torch.log(matches.double() / totals.double()).mean()
    penalty = torch.where(hyp_len >= ref_len, torch.tensor(1.0, dtype=torch.float64),
                          torch.exp(1 - ref_len.double() / hyp_len.double()))
    return penalty * torch.exp(log_precision)


def bleu_in_python(matches, totals, hyp_len, ref_len):
    c, r = int(hyp_len), int(ref_len)
    product = math.prod(int(m) / int(t) for m, t in zip(matches, totals))
    return torch.tensor((1.0 if c >= r else math.exp(1 - r / c)) * product ** 0.25)


@pytest.mark.parametrize("answer", [bleu_in_torch, bleu_in_python])
def test_bleu_accepts_right_answers_written_differently(answer, capsys):
    check_bleu(answer)
    assert capsys.readouterr().out == (
        "✓ BLEU from counts agrees with lib.metrics.bleu_from_counts on 20 fresh random cases\n"
    )


def penalty(c, r):
    return 1.0 if c >= r else math.exp(1 - r / c)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda m, t, c, r: torch.exp((m / t).mean()), "note 004's exp"),
        (lambda m, t, c, r: penalty(int(c), int(r)) * torch.exp((m / t).mean()), "not their logarithms"),
        (lambda m, t, c, r: torch.exp(torch.log(m / t).mean()), "left out the brevity penalty|BP is 1 when"),
        (lambda m, t, c, r: math.exp(1 - int(r) / int(c)) * torch.exp(torch.log(m / t).mean()),
         "BP is 1 when c >= r|left out"),
        (lambda m, t, c, r: (1.0 if c >= r else math.exp(1 - int(c) / int(r))) * torch.exp(torch.log(m / t).mean()),
         "not exp\\(1 - c/r\\)|left out"),
        (lambda m, t, c, r: penalty(int(c), int(r)) * (m / t).mean(), "geometric mean"),
        (lambda m, t, c, r: torch.zeros(2), "return one number"),
    ],
)
def test_bleu_rejects_wrong_answers_saying_why(answer, message):
    def as_tensor(*args):
        out = answer(*args)
        return out if isinstance(out, torch.Tensor) else torch.tensor(out)

    with pytest.raises(CheckFailed, match=message):
        check_bleu(as_tensor)


def test_bleu_diagnoses_on_a_case_worked_by_hand():
    # c = 8 < r = 10: BP = exp(1 - 10/8) = 0.7788; precisions 6/8, 3/7, 2/6, 1/5.
    case = [(torch.tensor([6, 3, 2, 1]), torch.tensor([8, 7, 6, 5]), torch.tensor(8), torch.tensor(10))]
    geometric = (6 / 8 * 3 / 7 * 2 / 6 * 1 / 5) ** 0.25
    check_bleu.judge(case, [torch.tensor(math.exp(-0.25) * geometric)])
    with pytest.raises(CheckFailed, match="left out the brevity penalty"):
        check_bleu.judge(case, [torch.tensor(geometric)])
    with pytest.raises(CheckFailed, match=r"not exp\(1 - c/r\)"):
        check_bleu.judge(case, [torch.tensor(math.exp(1 - 8 / 10) * geometric)])


# ---- experiment: a negated candidate with the highest BLEU -----------------------------------
def sacrebleu_of_ids(candidate, reference):
    import sacrebleu
    words = lambda ids: " ".join(f"w{t}" for t in ids.tolist())  # noqa: E731
    return sacrebleu.sentence_bleu(words(candidate), [words(reference)]).score / 100


def best_position_by_trying_all(reference, not_token):
    """The experiment: insert not at every position and keep the one sacreBLEU scores highest."""
    candidates = [torch.cat([reference[:p], torch.tensor([not_token]), reference[p:]])
                  for p in range(len(reference) + 1)]
    return max(candidates, key=lambda c: sacrebleu_of_ids(c, reference))


@pytest.mark.parametrize("answer", [
    best_position_by_trying_all,
    lambda reference, not_token: torch.cat([reference, torch.tensor([not_token])]),  # at the end: as good
    lambda reference, not_token: torch.cat([torch.tensor([float(not_token)]), reference.double()]),  # floats
])
def test_negation_accepts_an_insertion_at_a_best_position(answer, capsys):
    check_negation_bleu(answer)
    assert capsys.readouterr().out.startswith("✓ on 10 fresh references, your negated candidates")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda r, n: torch.cat([r[:3], torch.tensor([n]), r[3:]]),
         "with not before index 3, has BLEU .* before index"),
        (lambda r, n: torch.cat([torch.tensor([n]), r.flip(0)]), "the reference with the not_token inserted once"),
        (lambda r, n: torch.cat([torch.tensor([n]), r[:-1], torch.tensor([n])]), "inserted once"),
        (lambda r, n: r, "expected \\(L \\+ 1,\\)"),
        (lambda r, n: [n, *r.tolist()], "must return a torch.Tensor"),
    ],
)
def test_negation_rejects_other_candidates_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_negation_bleu(answer)


def test_the_negation_solution_s_numbers_for_an_eight_word_sentence():
    """The solution's BLEU-4 of a negated 8-word reference (distinct words): 0.86 with not at either
    end, 0.75 next to an end, 0.66 two words in and 0.60 in the middle; and the formula it gives."""
    from lib.metrics import sentence_bleu
    reference = [f"w{i}" for i in range(8)]
    scores = [round(sentence_bleu(reference[:p] + ["not"] + reference[p:], [reference]).score, 2) for p in range(9)]
    assert scores == [0.86, 0.75, 0.66, 0.60, 0.60, 0.60, 0.66, 0.75, 0.86]
    for p in range(9):
        broken = [min(n - 1, p, 8 - p) for n in range(1, 5)]  # reference n-grams that span the gap
        formula = math.prod((8 - n + 1 - b) / (8 - n + 2) for n, b in zip(range(1, 5), broken)) ** 0.25
        assert formula == pytest.approx(sentence_bleu(reference[:p] + ["not"] + reference[p:], [reference]).score)


# ---- fairness: an independent right answer and the most plausible wrong ones (tests/test_exercise_fairness.py)
def clipped_against_the_first_reference(hypothesis, references, max_n):
    return clipped_with_counters(hypothesis, references[:1], max_n)


def hypothesis_ngram_totals(hypothesis, references, max_n):
    return torch.tensor([max(len(hypothesis) - n + 1, 0) for n in range(1, max_n + 1)])


def bleu_of_notes_004(matches, totals, hyp_len, ref_len):
    return torch.exp((matches / totals).mean())


def bleu_without_brevity_penalty(matches, totals, hyp_len, ref_len):
    return torch.exp(torch.log(matches / totals).mean())


def bleu_arithmetic_mean(matches, totals, hyp_len, ref_len):
    return torch.tensor(penalty(int(hyp_len), int(ref_len))) * (matches / totals).mean()


def bleu_penalty_upside_down(matches, totals, hyp_len, ref_len):
    c, r = int(hyp_len), int(ref_len)
    return torch.tensor(1.0 if c >= r else math.exp(1 - c / r)) * torch.exp(torch.log(matches / totals).mean())


def negated_after_the_first_word(reference, not_token):
    """Where English puts it ("the cat is not ..." after the subject): inside the sentence."""
    return torch.cat([reference[:1], torch.tensor([not_token]), reference[1:]])


def negated_in_the_middle(reference, not_token):
    middle = len(reference) // 2
    return torch.cat([reference[:middle], torch.tensor([not_token]), reference[middle:]])


def negated_by_replacing_a_word(reference, not_token):
    return torch.cat([torch.tensor([not_token]), reference[1:]])


def negated_twice(reference, not_token):
    return torch.cat([torch.tensor([not_token]), reference, torch.tensor([not_token])])


FAIRNESS = {
    "check_clipped_matches": {
        "right": [clipped_with_loops],
        "wrong": [
            (unclipped, "clip each one to its largest count in a single reference"),
            (clipped_by_sum, "you clip to the count summed over the references"),
            (clipped_against_the_first_reference, "you clip against the first reference only"),
            (hypothesis_ngram_totals, "return how many of them match"),
        ],
    },
    "check_bleu": {
        "right": [bleu_in_python],
        "wrong": [
            (bleu_of_notes_004, "note 004's exp"),
            (bleu_without_brevity_penalty, "you left out the brevity penalty"),
            (bleu_arithmetic_mean, "geometric mean of the precisions, not an arithmetic one"),
            (bleu_penalty_upside_down, "not exp\\(1 - c/r\\)"),
        ],
    },
    "check_negation_bleu": {
        "right": [best_position_by_trying_all],
        "wrong": [
            (negated_after_the_first_word, "with not before index 1, has BLEU .* before index 0"),
            (negated_in_the_middle, "with not before index \\d+, has BLEU .* An insertion breaks"),
            (negated_by_replacing_a_word, "do not replace one"),
            (negated_twice, "inserted once"),
        ],
    },
}
