"""The checkers of chapter 8: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math
import random
from collections import Counter

import pytest
import torch
from rouge_score import rouge_scorer
from sacrebleu.metrics import CHRF

from courseware.checks import CHECKS, CheckFailed, check_chrf, check_negation_bleu
from courseware.checks.metrics import (
    _CHRF_WORDS, _ROUGE_SLIPS, check_rouge_multi, chrf_cases, corpus_chrf, rouge_multi, rouge_multi_cases,
)
from lib.part3_words.metrics import sentence_bleu


def test_the_checks_are_registered():
    assert CHECKS["check_rouge_multi"] is check_rouge_multi
    assert CHECKS["check_chrf"] is check_chrf


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
    from courseware.checks.metrics import _rouge_mismatch
    from tests.courseware.test_exercise_fairness import look_equal
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


# ---- chrF (ex-eval-chrf) -----------------------------------------------------------------------
def chrf_by_sacrebleu(hypotheses, references, **settings):
    """sacreBLEU's own number (``settings`` go to CHRF: its variants are wrong answers below)."""
    return torch.tensor(CHRF(**settings).corpus_score(hypotheses, [references]).score, dtype=torch.float64)


def chrf_with_lists_in_float32(hypotheses, references, swapped=False, weight=4, orders_matched=False):
    """From the statement, with lists of n-grams and list.count instead of Counters, the last step in
    float32 tensors. Wrong answers: ``swapped=True``, precision and recall swapped; ``weight=2``, β in the
    F where β² belongs; ``orders_matched=True``, the orders without a match left out."""
    hyp_total, ref_total, matched = [0] * 6, [0] * 6, [0] * 6
    for hypothesis, reference in zip(hypotheses, references):
        hyp, ref = "".join(hypothesis.split(" ")), "".join(reference.split(" "))
        for n in range(1, 7):
            hyp_grams = [hyp[i:i + n] for i in range(len(hyp) - n + 1)]
            ref_grams = [ref[i:i + n] for i in range(len(ref) - n + 1)]
            hyp_total[n - 1] += len(hyp_grams)
            ref_total[n - 1] += len(ref_grams)
            matched[n - 1] += sum(min(hyp_grams.count(g), ref_grams.count(g)) for g in set(hyp_grams))
    orders = [n for n in range(6) if hyp_total[n] > 0 and ref_total[n] > 0 and (matched[n] or not orders_matched)]
    if not orders:
        return torch.tensor(0.0)
    precision = torch.tensor([matched[n] / hyp_total[n] for n in orders]).mean()
    recall = torch.tensor([matched[n] / ref_total[n] for n in orders]).mean()
    if swapped:
        precision, recall = recall, precision
    if precision + recall == 0:
        return torch.tensor(0.0)
    return 100 * (1 + weight) * precision * recall / (weight * precision + recall)


def chrf_mean_of_sentences(hypotheses, references):
    metric = CHRF()
    return torch.tensor(sum(metric.sentence_score(h, [r]).score for h, r in zip(hypotheses, references))
                        / len(hypotheses), dtype=torch.float64)


def chrf_with_precision_weighed_more(hypotheses, references):
    return chrf_with_lists_in_float32(hypotheses, references, swapped=True)


def chrf_with_beta_not_squared(hypotheses, references):
    return chrf_with_lists_in_float32(hypotheses, references, weight=2)


def chrf_over_the_orders_with_a_match(hypotheses, references):
    return chrf_with_lists_in_float32(hypotheses, references, orders_matched=True)


def random_corpora(seed, count):
    """Corpora of up to 5 sentences over the checker's words, references of at least 6 letters."""
    rng = random.Random(seed)

    def sentence(low, high):
        return " ".join(rng.choice(_CHRF_WORDS) for _ in range(rng.randint(low, high)))

    corpora = []
    while len(corpora) < count:
        size = rng.randint(1, 5)
        references = [sentence(1, 7) for _ in range(size)]
        if all(len(r.replace(" ", "")) >= 6 for r in references):
            corpora.append(([sentence(0, 7) for _ in range(size)], references))
    return corpora


def test_the_reference_is_sacrebleus_chrf():
    corpora = random_corpora(0, 300) + [case for seed in range(5) for case in chrf_cases(
        torch.Generator().manual_seed(seed))]
    for hypotheses, references in corpora:
        assert float(corpus_chrf(hypotheses, references)) == pytest.approx(
            float(chrf_by_sacrebleu(hypotheses, references)), abs=1e-10)


def test_the_cases_exercise_short_and_empty_hypotheses():
    for seed in range(5):
        cases = chrf_cases(torch.Generator().manual_seed(seed))
        assert len(cases[0][0]) == 1 and all(len(h) == len(r) >= 1 for h, r in cases)
        assert all(len(h.replace(" ", "")) < 6 for h in cases[1][0])  # fewer than 6 orders have n-grams
        assert "" in cases[2][0]
        assert all(len(r.replace(" ", "")) >= 6 for _, references in cases for r in references)


def test_cat_against_cats_by_hand():
    """The solution's example: P_1..3 = 1, R = 3/4, 2/3, 1/2, no 4-gram: chrF2 = 100 · 115/167."""
    assert float(corpus_chrf(["cat"], ["cats"])) == pytest.approx(100 * 115 / 167, abs=1e-12)
    assert float(chrf_by_sacrebleu(["cat"], ["cats"])) == pytest.approx(100 * 115 / 167, abs=1e-12)
    assert sentence_bleu(["cat"], [["cats"]], smooth="exp").score == 0.0


def test_chrf_does_not_see_where_a_tokeniser_puts_spaces():
    """The solution's claim on the chapter's example: chrF of the 13a tokens equals chrF of the strings."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    hypothesis, reference = "The cat which was black sat on the mat.", "The cat, which was black, sat on the mat."
    split = Tokenizer13a()
    assert split(reference) != reference
    assert chrf_by_sacrebleu([split(hypothesis)], [split(reference)]) == chrf_by_sacrebleu([hypothesis], [reference])


@pytest.mark.parametrize("answer", [chrf_by_sacrebleu, chrf_with_lists_in_float32])
def test_chrf_accepts_right_answers_written_differently(answer, capsys):
    check_chrf(answer)
    assert capsys.readouterr().out == "✓ chrF2 agrees with sacreBLEU's CHRF() on 20 fresh random corpora\n"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda h, r: chrf_by_sacrebleu(h, r, word_order=2), "your chrF is .*; expected"),  # chrF++
        (lambda h, r: chrf_by_sacrebleu(h, r).float() + 1, "your chrF is .*; expected"),
        (lambda h, r: torch.zeros(2, dtype=torch.float64), "return one number"),
        (lambda h, r: float(chrf_by_sacrebleu(h, r)), "must return a torch.Tensor; it returned float"),
        (lambda h, r: chrf_by_sacrebleu(h, r).long(), "return floats"),
    ],
)
def test_chrf_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_chrf(answer)


def test_chrf_diagnoses_on_a_case_worked_by_hand():
    case = [(["cat"], ["cats"])]
    check_chrf.judge(case, [torch.tensor(100 * 115 / 167, dtype=torch.float64)])
    with pytest.raises(CheckFailed, match=r"that is chrF1 \(β = 1\)"):  # F1 of P = 1, R = 23/36
        check_chrf.judge(case, [torch.tensor(100 * 2 * 23 / 36 / (1 + 23 / 36), dtype=torch.float64)])
    # over all six orders, the three without n-grams as 0: means 1/2 and 23/72
    with pytest.raises(CheckFailed, match="leave out an order in which the hypotheses have no n-gram"):
        check_chrf.judge(case, [torch.tensor(100 * 5 * 0.5 * 23 / 72 / (4 * 0.5 + 23 / 72), dtype=torch.float64)])
    with pytest.raises(CheckFailed, match="you used β, not β²"):  # 3 P R / (2 P + R)
        check_chrf.judge(case, [torch.tensor(100 * 3 * 23 / 36 / (2 + 23 / 36), dtype=torch.float64)])


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
    from lib.part3_words.metrics import sentence_bleu
    reference = [f"w{i}" for i in range(8)]
    scores = [round(sentence_bleu(reference[:p] + ["not"] + reference[p:], [reference]).score, 2) for p in range(9)]
    assert scores == [0.86, 0.75, 0.66, 0.60, 0.60, 0.60, 0.66, 0.75, 0.86]
    for p in range(9):
        broken = [min(n - 1, p, 8 - p) for n in range(1, 5)]  # reference n-grams that span the gap
        formula = math.prod((8 - n + 1 - b) / (8 - n + 2) for n, b in zip(range(1, 5), broken)) ** 0.25
        assert formula == pytest.approx(sentence_bleu(reference[:p] + ["not"] + reference[p:], [reference]).score)


# ---- fairness: an independent right answer and the most plausible wrong ones (tests/courseware/test_exercise_fairness.py)
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
    "check_chrf": {
        "right": [chrf_by_sacrebleu, chrf_with_lists_in_float32],
        "wrong": [
            (chrf_mean_of_sentences, "you averaged the sentences' chrF; add up each order's counts"),
            (lambda h, r: chrf_by_sacrebleu(h, r, beta=1), r"that is chrF1 \(β = 1\)"),
            (chrf_with_precision_weighed_more, "your F weighs precision more than recall"),
            (lambda h, r: chrf_by_sacrebleu(h, r, whitespace=True), "you counted the spaces as characters"),
            (lambda h, r: chrf_by_sacrebleu(h, r, eps_smoothing=True), "you averaged the F of each order"),
            (lambda h, r: chrf_by_sacrebleu(h, r, char_order=4), "you stopped at 4-grams"),
            (chrf_with_beta_not_squared, "you used β, not β², in the F-score"),
            (chrf_over_the_orders_with_a_match, "you left out the orders without a match"),
            (lambda h, r: chrf_by_sacrebleu(h, r) / 100, r"that is chrF in \[0, 1\]"),
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
