"""The checkers of chapter 8: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math
from collections import Counter

import pytest
import torch
from rouge_score import rouge_scorer

from lib.checks import CHECKS, CheckFailed, check_bleu, check_negation_bleu
from lib.checks.metrics import _ROUGE_SLIPS, check_rouge_multi, rouge_multi, rouge_multi_cases


def test_the_checks_are_registered():
    assert CHECKS["check_rouge_multi"] is check_rouge_multi
    assert CHECKS["check_bleu"] is check_bleu


# ---- ROUGE-N against several references -------------------------------------------------------
def grams(tokens, n):
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def rouge_multi_with_loops(hypothesis, references, n):
    """From the statement, with lists instead of Counters and F as 2·overlap / (hyp + ref n-grams)."""
    hyp = [tuple(hypothesis[i:i + n]) for i in range(len(hypothesis) - n + 1)]
    best = None
    for reference in references:
        ref = [tuple(reference[i:i + n]) for i in range(len(reference) - n + 1)]
        overlap = sum(min(hyp.count(g), ref.count(g)) for g in set(ref))
        precision = overlap / len(hyp) if hyp else 0.0
        recall = overlap / len(ref) if ref else 0.0
        f = 2 * overlap / (len(hyp) + len(ref)) if overlap else 0.0
        if best is None or f > best[2]:
            best = (precision, recall, f)
    return torch.tensor(best, dtype=torch.float64)


def rouge_multi_in_float32(hypothesis, references, n):
    """Every reference's scores in one float32 tensor; torch.argmax keeps the first maximum."""
    counts = grams(hypothesis, n)
    rows = []
    for reference in references:
        ref = grams(reference, n)
        overlap = float(sum(min(c, counts[g]) for g, c in ref.items()))
        rows.append([overlap, float(sum(counts.values())), float(sum(ref.values()))])
    table = torch.tensor(rows, dtype=torch.float32)
    precision = table[:, 0] / table[:, 1].clamp(min=1)
    recall = table[:, 0] / table[:, 2].clamp(min=1)
    f = torch.where(table[:, 0] > 0, 2 * precision * recall / (precision + recall).clamp(min=1e-30),
                    torch.zeros(()))
    best = int(torch.argmax(f))
    return torch.stack([precision[best], recall[best], f[best]])


@pytest.mark.parametrize("answer", [rouge_multi_with_loops, rouge_multi_in_float32])
def test_rouge_multi_accepts_right_answers_written_differently(answer, capsys):
    check_rouge_multi(answer)
    assert capsys.readouterr().out.startswith("✓ ROUGE-N against several references agrees with rouge_score")


class WhitespaceTokenizer:
    """rouge_score's tokenizer interface: our inputs are already tokens."""

    def tokenize(self, text):
        return text.split()


@pytest.mark.parametrize("tokenizer", [WhitespaceTokenizer(), None], ids=["whitespace", "rouge_score's own"])
def test_the_checkers_answer_is_rouge_scores_score_multi(tokenizer):
    """On every case of 30 draws, the checker's answer is what rouge_score's score_multi reports,
    given the tokens themselves or with its own tokeniser (which leaves lowercase words as they are)."""
    for seed in range(30):
        for hypothesis, references, n in rouge_multi_cases(torch.Generator().manual_seed(seed)):
            scorer = rouge_scorer.RougeScorer([f"rouge{n}"], tokenizer=tokenizer)
            theirs = scorer.score_multi([" ".join(r) for r in references], " ".join(hypothesis))[f"rouge{n}"]
            ours = rouge_multi(hypothesis, references, n)
            assert ours.tolist() == pytest.approx([theirs.precision, theirs.recall, theirs.fmeasure], abs=1e-12)


def test_rouge_multi_on_the_chapters_example():
    # "the cat sat": P/R/F 1/0.5/0.667 against the first reference, 1/0.75/0.857 against the second.
    hypothesis = "the cat sat".split()
    references = ["the cat sat on the mat".split(), "the cat sat down".split()]
    assert rouge_multi(hypothesis, references, 1).tolist() == pytest.approx([1.0, 0.75, 6 / 7])


def test_the_cases_have_no_ties_and_tell_every_slip_apart():
    for seed in range(10):
        cases = rouge_multi_cases(torch.Generator().manual_seed(seed))
        assert len(cases[0][1]) == 1 and len(cases[1][0]) < cases[1][2]
        for slip in _ROUGE_SLIPS:
            assert any(not torch.allclose(torch.as_tensor(slip.answer(*c), dtype=torch.float64), rouge_multi(*c))
                       for c in cases), slip.message


def test_the_cases_have_no_exact_ties_on_f():
    """Two references whose Fs, computed as score_multi does (2PR/(P + R) in floating point), are equal
    or nearly so, with different scores, would let rounding pick the reference: no case has them."""
    for seed in range(10):
        for hypothesis, references, n in rouge_multi_cases(torch.Generator().manual_seed(seed)):
            scores = [rouge_scorer._score_ngrams(rouge_scorer._create_ngrams(r, n),
                                                 rouge_scorer._create_ngrams(hypothesis, n)) for r in references]
            best = max(s.fmeasure for s in scores)
            assert len({(s.precision, s.recall) for s in scores if abs(s.fmeasure - best) < 1e-9}) == 1


def test_rouge_mismatch_prints_one_component_when_numbers_would_repeat():
    from lib.checks.metrics import _rouge_mismatch
    from tests.test_exercise_fairness import look_equal
    # recall and F both 0.5 and both wrong: the six numbers cannot all be printed
    message = _rouge_mismatch(torch.tensor([0.5, 0.5, 0.5], dtype=torch.float64),
                              torch.tensor([0.5, 2 / 3, 4 / 7], dtype=torch.float64))
    assert message == "your recall is 0.5; rouge_score's score_multi gives 0.666667"
    message = _rouge_mismatch(torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64),
                              torch.tensor([0.4, 0.5, 0.6], dtype=torch.float64))
    assert message.startswith("your precision, recall and F are 0.1, 0.2, 0.3;") and not look_equal(message)
    message = _rouge_mismatch(torch.tensor([0.6, 2 / 3 + 1e-8, 0.5], dtype=torch.float64),
                              torch.tensor([0.6, 2 / 3, 0.5], dtype=torch.float64))
    assert not look_equal(message) and "recall" in message


def best_recall(hypothesis, references, n):
    scores = [rouge_multi_with_loops(hypothesis, [r], n) for r in references]
    return max(scores, key=lambda s: float(s[1]))


def most_matched(hypothesis, references, n):
    """The reference with the most matched n-grams: the largest precision, the first on a tie."""
    scores = [rouge_multi_with_loops(hypothesis, [r], n) for r in references]
    return max(scores, key=lambda s: float(s[0]))


def max_of_tuples(hypothesis, references, n):
    """Python's max over the (P, R, F) tuples without a key: the largest P, a tie to the larger R."""
    return torch.tensor(max(tuple(rouge_multi_with_loops(hypothesis, [r], n).tolist()) for r in references),
                        dtype=torch.float64)


def pooled_like_equation_1(hypothesis, references, n):
    """The chapter's rouge_n for the recall; the hypothesis's n-grams counted once per reference for
    the precision."""
    counts = grams(hypothesis, n)
    overlap = sum(sum(min(c, counts[g]) for g, c in grams(r, n).items()) for r in references)
    recall = overlap / max(sum(sum(grams(r, n).values()) for r in references), 1)
    precision = overlap / max(len(references) * sum(counts.values()), 1)
    f = 2 * precision * recall / (precision + recall) if overlap else 0.0
    return torch.tensor([precision, recall, f], dtype=torch.float64)


def pooled_as_one_reference(hypothesis, references, n):
    """The references' n-gram counts added up, as if they were one reference."""
    counts, merged = grams(hypothesis, n), sum((grams(r, n) for r in references), Counter())
    overlap = sum((counts & merged).values())
    p, r = overlap / max(sum(counts.values()), 1), overlap / max(sum(merged.values()), 1)
    return torch.tensor([p, r, 2 * p * r / (p + r) if overlap else 0.0], dtype=torch.float64)


def mean_over_references(hypothesis, references, n):
    return torch.stack([rouge_multi_with_loops(hypothesis, [r], n) for r in references]).mean(dim=0)


def largest_of_each(hypothesis, references, n):
    return torch.stack([rouge_multi_with_loops(hypothesis, [r], n) for r in references]).amax(dim=0)


def precision_and_recall_swapped(hypothesis, references, n):
    return rouge_multi_with_loops(hypothesis, references, n)[[1, 0, 2]]


def unclipped(hypothesis, references, n):
    counts, best = grams(hypothesis, n), None
    for reference in references:
        ref = grams(reference, n)
        overlap = sum(c for g, c in counts.items() if g in ref)
        p, r = overlap / max(sum(counts.values()), 1), overlap / max(sum(ref.values()), 1)
        scores = (p, r, 2 * p * r / (p + r) if overlap else 0.0)
        best = scores if best is None or scores[2] > best[2] else best
    return torch.tensor(best, dtype=torch.float64)


def arithmetic_f(hypothesis, references, n):
    scores = [rouge_multi_with_loops(hypothesis, [r], n) for r in references]
    p, r, _ = max(scores, key=lambda s: float(s[0] + s[1])).tolist()
    return torch.tensor([p, r, (p + r) / 2], dtype=torch.float64)


def f_of_the_best_returned_with_the_mean_p_r(hypothesis, references, n):
    best = rouge_multi_with_loops(hypothesis, references, n)
    mean = mean_over_references(hypothesis, references, n)
    return torch.tensor([mean[0], mean[1], best[2]], dtype=torch.float64)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (best_recall, "largest recall \\(Lin's section 2.1\\)"),
        (most_matched, "most matched n-grams \\(largest precision\\)"),
        (max_of_tuples, "most matched n-grams \\(largest precision\\)"),
        (pooled_like_equation_1, "pools the references"),
        (pooled_as_one_reference, "pools the references"),
        (mean_over_references, "you average the scores over the references"),
        (largest_of_each, "separately"),
        (precision_and_recall_swapped, "swapped"),
        (unclipped, "clip each to min"),
        (arithmetic_f, "not the arithmetic mean"),
        (f_of_the_best_returned_with_the_mean_p_r, "not the harmonic mean"),
        (lambda h, r, n: rouge_multi_with_loops(h, r[:1], n), "first reference only"),
        (lambda h, r, n: rouge_multi_with_loops(h, r, n)[:2], "have shape"),
        (lambda h, r, n: rouge_multi_with_loops(h, r, n).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda h, r, n: (rouge_multi_with_loops(h, r, n) * 100).long(), "return floats"),
    ],
)
def test_rouge_multi_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_rouge_multi(answer)


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
    "check_rouge_multi": {
        "right": [rouge_multi_with_loops, rouge_multi_in_float32],
        "wrong": [
            (best_recall, "you keep the reference with the largest recall \\(Lin's section 2.1\\)"),
            (most_matched, "you keep the reference with the most matched n-grams \\(largest precision\\); keep the "
                           "one with the largest F"),
            (max_of_tuples, "you keep the reference with the most matched n-grams \\(largest precision\\); keep the "
                            "one with the largest F"),
            (pooled_like_equation_1, "your recall pools the references \\(Lin's equation 1, the chapter's rouge_n[),]"),
            (pooled_as_one_reference, "your recall pools the references \\(.*as if they were one reference\\)"),
            (mean_over_references, "you average the scores over the references"),
            (largest_of_each, "largest precision, recall and F separately"),
            (precision_and_recall_swapped, "your precision and recall are swapped"),
            (unclipped, "clip each to min\\(c_w\\(hyp\\), c_w\\(ref\\)\\)"),
            (arithmetic_f, "not the arithmetic mean"),
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
