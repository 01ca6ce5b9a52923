"""Tests for lib/part3_words/metrics.py.

References: sacreBLEU (corpus and sentence BLEU, every smoothing, to 1e-9),
rouge_score (ROUGE-N precision, recall and F), NLTK (where it agrees, and a
pinned difference where it does not), and hand-computed cases from the BLEU paper.
"""

import logging
import math
import random
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.translate.bleu_score import SmoothingFunction
from nltk.translate.bleu_score import corpus_bleu as nltk_corpus_bleu
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

from lib.part3_words.metrics import (
    SMOOTHING,
    bleu_from_counts,
    brevity_penalty,
    clipped_counts,
    closest_reference_length,
    corpus_bleu,
    ngram_counts,
    rouge_n,
    rouge_n_scores,
    sentence_bleu,
)
from lib.part3_words.metrics import _sentence_counts

FAST = settings(max_examples=40, deadline=None, database=None)
WORDS = ["a", "b", "c", "d", "e", "the", "cat"]


def random_sentence(rng, low=0, high=9, words=WORDS):
    return [rng.choice(words) for _ in range(rng.randint(low, high))]


def random_corpus(seed, max_sentences=5, max_refs=3):
    """Hypotheses and references that share words, with empty sentences now and then."""
    rng = random.Random(seed)
    size = rng.randint(1, max_sentences)
    hypotheses = [random_sentence(rng) for _ in range(size)]
    references = [[random_sentence(rng) for _ in range(rng.randint(1, max_refs))] for _ in range(size)]
    return hypotheses, references


def sacrebleu_corpus(hypotheses, references, smooth, **kwargs):
    """sacreBLEU on the same tokens: streams of references, None where a sentence has fewer."""
    width = max(len(refs) for refs in references)
    streams = [[" ".join(refs[k]) if k < len(refs) else None for refs in references] for k in range(width)]
    bleu = BLEU(tokenize="none", smooth_method=smooth, **kwargs)
    return bleu.corpus_score([" ".join(h) for h in hypotheses], streams)


def sacrebleu_sentence(hypothesis, references, smooth, effective_order=True, **kwargs):
    bleu = BLEU(tokenize="none", smooth_method=smooth, effective_order=effective_order, **kwargs)
    logger = logging.getLogger("sacrebleu")  # without effective_order, sentence_score logs advice
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return bleu.sentence_score(" ".join(hypothesis), [" ".join(r) for r in references])
    finally:
        logger.setLevel(level)


# ---------------------------------------------------------------------------
# BLEU against sacreBLEU.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("effective_order", [False, True])
@pytest.mark.parametrize("smooth", list(SMOOTHING))
def test_corpus_bleu_equals_sacrebleu(smooth, effective_order):
    for seed in range(150):
        hypotheses, references = random_corpus(seed, max_sentences=5 if seed % 3 else 1)
        ours = corpus_bleu(hypotheses, references, smooth=smooth, effective_order=effective_order)
        theirs = sacrebleu_corpus(hypotheses, references, smooth, effective_order=effective_order)
        assert ours.score == pytest.approx(theirs.score / 100, abs=1e-9), (hypotheses, references)
        assert 0.0 <= ours.score <= 1.0
        assert (ours.hyp_len, ours.ref_len) == (theirs.sys_len, theirs.ref_len)
        assert ours.brevity_penalty == pytest.approx(theirs.bp, abs=1e-12)


@pytest.mark.parametrize("effective_order", [True, False])
@pytest.mark.parametrize("smooth", list(SMOOTHING))
def test_sentence_bleu_equals_sacrebleu_sentence_score(smooth, effective_order):
    for seed in range(150):
        rng = random.Random(seed)
        hypothesis = random_sentence(rng)
        references = [random_sentence(rng) for _ in range(rng.randint(1, 3))]
        ours = sentence_bleu(hypothesis, references, smooth=smooth, effective_order=effective_order)
        theirs = sacrebleu_sentence(hypothesis, references, smooth, effective_order=effective_order)
        assert ours.score == pytest.approx(theirs.score / 100, abs=1e-9), (hypothesis, references)
        if smooth != "add-k":  # sacreBLEU reports add-k's counts with k already added
            assert list(ours.matches) == theirs.counts and list(ours.totals) == theirs.totals


@pytest.mark.parametrize(("smooth", "value"), [("floor", 0.3), ("add-k", 0.5), ("add-k", 2.0)])
def test_smoothing_values_other_than_the_defaults_match_sacrebleu(smooth, value):
    for seed in range(60):
        hypotheses, references = random_corpus(seed)
        ours = corpus_bleu(hypotheses, references, smooth=smooth, smooth_value=value).score
        theirs = sacrebleu_corpus(hypotheses, references, smooth, smooth_value=value).score / 100
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_default_smoothing_values_are_sacrebleus():
    assert SMOOTHING == {"none": None, **{k: v for k, v in BLEU.SMOOTH_DEFAULTS.items() if k != "none"}}


@pytest.mark.parametrize("max_n", [1, 2, 3, 5])
def test_other_maximum_orders_match_sacrebleu(max_n):
    for seed in range(40):
        hypotheses, references = random_corpus(seed)
        ours = corpus_bleu(hypotheses, references, max_n=max_n, smooth="exp").score
        theirs = sacrebleu_corpus(hypotheses, references, "exp", max_ngram_order=max_n).score / 100
        assert ours == pytest.approx(theirs, abs=1e-9)


# ---------------------------------------------------------------------------
# The pieces, by hand and against the plain path.
# ---------------------------------------------------------------------------


def test_clipped_precision_of_the_papers_the_the_the_example():
    # Papineni et al. (2002), section 2.1: 7 × "the" against two references.
    candidate = "the the the the the the the".split()
    references = ["the cat is on the mat".split(), "there is a cat on the mat".split()]
    assert clipped_counts(candidate, references, 1) == (2, 7)  # "the" occurs at most twice in one reference
    assert clipped_counts(candidate, references, 2) == (0, 6)
    stats = sentence_bleu(candidate, references, smooth="exp")
    assert stats.matches[:2] == (2, 0) and stats.totals[:2] == (7, 6)


def test_a_worked_example_by_hand():
    hypothesis = "the cat sat on the mat".split()
    references = ["the cat is on the mat".split(), "a cat sat on the mat".split()]
    stats = sentence_bleu(hypothesis, references)
    # 1-grams: the ×2 (clip 2), cat, sat, on, mat -> 6/6; 2-grams: the cat, cat sat, sat on,
    # on the, the mat -> 5/5; 3-grams: 3 of 4 (not "the cat sat"); 4-grams: 2 of 3.
    assert stats.matches == (6, 5, 3, 2) and stats.totals == (6, 5, 4, 3)
    assert stats.brevity_penalty == 1.0
    assert stats.score == pytest.approx((1 * 1 * 3 / 4 * 2 / 3) ** 0.25)


@FAST
@given(seed=st.integers(0, 100_000), max_n=st.integers(1, 5))
def test_the_fast_counts_equal_the_plain_clipped_counts(seed, max_n):
    rng = random.Random(seed)
    hypothesis = random_sentence(rng)
    references = [random_sentence(rng) for _ in range(rng.randint(1, 4))]
    matches, totals, hyp_len, ref_len = _sentence_counts(hypothesis, references, max_n)
    for n in range(1, max_n + 1):
        assert (matches[n - 1], totals[n - 1]) == clipped_counts(hypothesis, references, n)
    assert hyp_len == len(hypothesis)
    assert ref_len == closest_reference_length(len(hypothesis), [len(r) for r in references])


def test_ngram_counts():
    assert ngram_counts("a b a b".split(), 2) == {("a", "b"): 2, ("b", "a"): 1}
    assert ngram_counts(["a"], 2) == {}


def test_closest_reference_length_prefers_the_shorter_on_ties():
    assert closest_reference_length(10, [12, 8]) == 8
    assert closest_reference_length(10, [12, 9, 30]) == 9
    assert closest_reference_length(0, [3, 1]) == 1


def test_brevity_penalty_uses_the_closest_reference_not_the_shortest():
    # Note 000 writes l_s = the shortest reference length. BLEU (and sacreBLEU) use the closest.
    hypothesis = "w " * 10
    references = ["w " * 4, "w " * 11]
    stats = sentence_bleu(hypothesis.split(), [r.split() for r in references])
    assert stats.ref_len == 11
    assert stats.brevity_penalty == pytest.approx(math.exp(1 - 11 / 10))
    theirs = sacrebleu_sentence(hypothesis.split(), [r.split() for r in references], "none")
    assert stats.brevity_penalty == pytest.approx(theirs.bp)
    shortest_version = brevity_penalty(10, 4)  # what the note's rule gives
    assert shortest_version == 1.0 != stats.brevity_penalty


def test_the_notes_bleu_formula_exp_of_mean_precision_is_not_bleu():
    # Note 004: BLEU = exp((1/N) Σ P_n). That is >= 1 for every candidate: exp(0) = 1 for a
    # candidate with no matching word, e for a perfect one. BLEU is BP · exp(Σ w_n log P_n) in [0, 1].
    def note_formula(stats):
        return math.exp(sum(m / t for m, t in zip(stats.matches, stats.totals)) / len(stats.totals))

    reference = "the cat sat on the mat".split()
    garbage = sentence_bleu("dogs run far away now".split(), [reference])
    perfect = sentence_bleu(reference, [reference])
    assert note_formula(garbage) == 1.0 and garbage.score == 0.0
    assert note_formula(perfect) == pytest.approx(math.e) and perfect.score == 1.0
    partial_hypothesis = "the cat sat on a mat".split()
    partial = sentence_bleu(partial_hypothesis, [reference])
    expected = partial.brevity_penalty * math.exp(sum(0.25 * math.log(p) for p in partial.precisions))
    assert partial.score == pytest.approx(expected)
    assert partial.score == pytest.approx(sacrebleu_sentence(partial_hypothesis, [reference], "none").score / 100)
    assert note_formula(partial) > 1 > partial.score


def test_corpus_bleu_is_not_the_mean_of_sentence_bleu():
    hypotheses = ["the cat sat on the mat".split(), "a dog".split()]
    references = [["the cat sat on the mat".split()], ["the dog barked".split()]]
    corpus = corpus_bleu(hypotheses, references, smooth="exp")
    sentences = [sentence_bleu(h, r, smooth="exp").score for h, r in zip(hypotheses, references)]
    # Pooled counts: 1-grams 7/8, 2-grams 5/6, 3-grams 4/4, 4-grams 3/3; c = 8, r = 9.
    assert corpus.matches == (7, 5, 4, 3) and corpus.totals == (8, 6, 4, 3)
    assert corpus.score == pytest.approx(math.exp(1 - 9 / 8) * (7 / 8 * 5 / 6) ** 0.25)
    assert corpus.score != pytest.approx(sum(sentences) / 2, abs=0.05)


def test_effective_order_scores_a_short_sentence_on_the_orders_it_has():
    hypothesis = reference = ["hello", "world"]
    sentence = sentence_bleu(hypothesis, [reference])
    assert sentence.score == 1.0 and sentence.weights == (0.5, 0.5, 0.0, 0.0)  # BLEU-2
    corpus = corpus_bleu([hypothesis], [[reference]])
    assert corpus.score == 0.0 and corpus.precisions == (1.0, 1.0, 0.0, 0.0)  # no 3-grams to match
    assert sentence_bleu(hypothesis, [reference], effective_order=False).score == 0.0
    assert corpus_bleu([hypothesis], [[reference]], effective_order=True).score == 1.0


def test_sacrebleus_defaults_need_effective_order_off_for_a_sentence():
    """The chapter's example: a three-word candidate, no 4-gram. BLEU() (effective_order=False)
    gives 0; our sentence_bleu and sacrebleu.sentence_bleu use the effective order and give 71.65."""
    import sacrebleu
    hypothesis, reference = "the dog barked", "the dog barked loudly"
    theirs = sacrebleu_sentence(hypothesis.split(), [reference.split()], "exp", effective_order=False)
    assert theirs.score == 0.0
    assert sentence_bleu(hypothesis.split(), [reference.split()], smooth="exp", effective_order=False).score == 0.0
    ours = sentence_bleu(hypothesis.split(), [reference.split()], smooth="exp").score
    assert ours == pytest.approx(sacrebleu.sentence_bleu(hypothesis, [reference]).score / 100, abs=1e-12)
    assert round(100 * ours, 2) == 71.65
    for smooth in SMOOTHING:  # without the effective order, only add-k fills the empty 4-gram order
        score = sentence_bleu(hypothesis.split(), [reference.split()], smooth=smooth, effective_order=False).score
        assert score == (pytest.approx(ours, abs=1e-12) if smooth == "add-k" else 0.0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'effective_order'.*Actual value: 'yes'.*bool"):
        sentence_bleu(hypothesis.split(), [reference.split()], effective_order="yes")


def test_custom_weights():
    for seed in range(30):
        hypotheses, references = random_corpus(seed)
        two = corpus_bleu(hypotheses, references, max_n=2, smooth="floor").score
        padded = corpus_bleu(hypotheses, references, weights=(0.5, 0.5, 0, 0), smooth="floor").score
        assert padded == pytest.approx(two, abs=1e-12)
    stats = bleu_from_counts([6, 5, 3, 2], [6, 5, 4, 3], 6, 6, weights=(0.1, 0.2, 0.3, 0.4))
    assert stats.score == pytest.approx(math.exp(0.3 * math.log(3 / 4) + 0.4 * math.log(2 / 3)))


@pytest.mark.parametrize("smooth", list(SMOOTHING))
def test_empty_hypotheses_and_references_have_defined_scores(smooth):
    empty = sentence_bleu([], [["a", "b"]], smooth=smooth)
    assert empty.score == 0.0 and empty.brevity_penalty == 0.0 and empty.totals == (0, 0, 0, 0)
    assert sentence_bleu(["a"], [[]], smooth=smooth).score == 0.0  # nothing to match
    assert sentence_bleu([], [[]], smooth=smooth).score == 0.0
    corpus = corpus_bleu([[], "a b c d".split()], [[["x"]], ["a b c d".split()]], smooth=smooth)
    theirs = sacrebleu_corpus([[], "a b c d".split()], [[["x"]], ["a b c d".split()]], smooth)
    assert corpus.score == pytest.approx(theirs.score / 100, abs=1e-12)


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match=r"one list of references per hypothesis \(2\); found 1"):
        corpus_bleu([["a"], ["b"]], [[["a"]]])
    with pytest.raises(ValueError, match="hypotheses must be a non-empty list of token lists"):
        corpus_bleu([], [])
    with pytest.raises(ValueError, match="references must be a non-empty list of references.*found an empty list"):
        sentence_bleu(["a"], [])
    wrap = r"\(wrap a single reference in a list: \[reference\]\)"
    with pytest.raises(TypeError, match=r"references\[0\] must be a list of token strings; found 'a' " + wrap):
        sentence_bleu(["a"], ["a", "b"])
    with pytest.raises(TypeError, match=r"references\[1\] must be a list of token strings; found 'b' " + wrap):
        rouge_n(["a"], [["a"], "b"])
    with pytest.raises(TypeError, match=r"references\[0\] must be a list of token strings; found 'a' " + wrap):
        clipped_counts(["a"], ["a"], 1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'references'.*Actual value: 'a b'"):
        sentence_bleu(["a"], "a b")  # one str: not a list of references, whose items are strs
    with pytest.raises(TypeError, match=r"(?s)parameter 'hypothesis'.*Actual value: 'the cat'.*is_a_list_of_words"):
        sentence_bleu("the cat", [["the", "cat"]])
    with pytest.raises(TypeError, match=r"references\[1\]\[0\] must be a list of token strings; found 'b' \(wrap a single "):
        corpus_bleu([["a"], ["b"]], [[["a"]], ["b"]])
    with pytest.raises(TypeError, match=r"(?s)parameter 'smooth'.*Actual value: 'add1'.*Literal\['none', 'floor', 'add-k', 'exp'\]"):
        sentence_bleu(["a"], [["a"]], smooth="add1")
    with pytest.raises(ValueError, match="smooth_value is used by 'floor' and 'add-k' only; found 0.1 with 'exp'"):
        sentence_bleu(["a"], [["a"]], smooth="exp", smooth_value=0.1)
    with pytest.raises(ValueError, match=r"weights must be 4 numbers >= 0 .* sum to 1; found \(0.5, 0.5\)"):
        sentence_bleu(["a"], [["a"]], weights=(0.5, 0.5))
    with pytest.raises(TypeError, match=r"(?s)parameter 'weights'.*Actual value: \(0.5, 0.5, 0.0, nan\).*is_at_least_0"):
        sentence_bleu(["a"], [["a"]], weights=(0.5, 0.5, 0.0, float("nan")))
    with pytest.raises(TypeError, match=r"(?s)parameter 'weights'.*Actual value: 'abcd'.*numbers.Real"):
        sentence_bleu(["a"], [["a"]], weights="abcd")
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_n'.*Actual value: 0.*is_at_least_1"):
        sentence_bleu(["a"], [["a"]], max_n=0)
    with pytest.raises(ValueError, match=r"0 <= match <= total; found \[3\] and \[2\]"):
        bleu_from_counts([3], [2], 2, 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'references'.*Actual value: \[3\]"):
        rouge_n(["a"], [3])
    with pytest.raises(ValueError, match=r"totals\[0\], the unigrams, must be at most hyp_len = 2; found 5"):
        bleu_from_counts([1], [5], 2, 2)  # used to give 0.2


def test_weights_may_be_a_numpy_vector():
    hypothesis, references = "the cat sat on the mat".split(), ["the cat sat on a mat".split()]
    for weights in ([0.25] * 4, (0.4, 0.3, 0.2, 0.1)):
        ours = sentence_bleu(hypothesis, references, weights=np.array(weights))
        assert ours == sentence_bleu(hypothesis, references, weights=weights)
    for bad in (np.array([0.5, 0.5, 0.0, np.nan]), np.array([0.5, 0.5, 0.5, -0.5]), np.array([[0.25] * 4])):
        with pytest.raises(TypeError, match=r"(?s)parameter 'weights'.*Actual value: f64\[.*\]\(numpy\)"):
            sentence_bleu(hypothesis, references, weights=bad)


# ---------------------------------------------------------------------------
# NLTK: where it agrees, and the pinned difference.
# ---------------------------------------------------------------------------

NLTK_SMOOTHING = {"none": None, "floor": SmoothingFunction().method1, "add-k": SmoothingFunction().method2,
                  "exp": SmoothingFunction().method3}


@pytest.mark.parametrize("smooth", list(SMOOTHING))
def test_nltk_agrees_when_every_hypothesis_has_max_n_tokens(smooth):
    for seed in range(60):
        rng = random.Random(seed)
        hypotheses = [random_sentence(rng, 4, 10) for _ in range(rng.randint(1, 4))]
        references = [[random_sentence(rng, 1, 10) for _ in range(rng.randint(1, 3))] for _ in hypotheses]
        ours = corpus_bleu(hypotheses, references, smooth=smooth).score
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NLTK warns about zero counts
            theirs = nltk_corpus_bleu(references, hypotheses, smoothing_function=NLTK_SMOOTHING[smooth])
        if smooth == "none" and ours == 0.0:
            assert theirs < 1e-50  # NLTK replaces a zero precision by the smallest float, not 0
        else:
            assert ours == pytest.approx(theirs, abs=1e-9)


def test_nltk_counts_at_least_one_ngram_per_sentence_and_order():
    # NLTK divides by max(1, number of n-grams) in each sentence, so a sentence shorter than n
    # adds 1 to the n-gram total: a perfect corpus no longer scores 1.
    hypotheses = ["a b c d e".split(), "a b".split()]
    references = [[hypotheses[0]], [hypotheses[1]]]
    ours = corpus_bleu(hypotheses, references)
    assert ours.totals == (7, 5, 3, 2) and ours.score == 1.0
    theirs = nltk_corpus_bleu(references, hypotheses)
    assert theirs == pytest.approx((3 / 4 * 2 / 3) ** 0.25)  # p_3 = 3/(3+1), p_4 = 2/(2+1)


# ---------------------------------------------------------------------------
# ROUGE-N.
# ---------------------------------------------------------------------------


def lowercase_words(rng, low=0, high=10):
    # rouge_score tokenises itself (lowercase, [a-z0-9]+ words): on such text its tokens are ours.
    return random_sentence(rng, low, high, words=["the", "cat", "sat", "on", "mat", "a", "dog", "x1"])


def test_rouge_n_by_hand():
    hypothesis = "the cat sat".split()
    references = ["the cat sat on the mat".split(), "a cat sat".split()]
    # 1-grams: ref 1 has 6 (the ×2, cat, sat, on, mat), overlap 3; ref 2 has 3, overlap 2.
    assert rouge_n(hypothesis, references, 1) == pytest.approx((3 + 2) / (6 + 3))
    # 2-grams: ref 1 has 5, overlap 2 (the cat, cat sat); ref 2 has 2, overlap 1 (cat sat).
    assert rouge_n(hypothesis, references, 2) == pytest.approx((2 + 1) / (5 + 2))
    assert rouge_n(hypothesis, [["the"]], 2) == 0.0  # no reference bigrams: 0 by convention


@pytest.mark.parametrize("n", [1, 2, 3])
def test_rouge_n_scores_match_rouge_score(n):
    scorer = rouge_scorer.RougeScorer([f"rouge{n}"])
    for seed in range(150):
        rng = random.Random(seed)
        hypothesis, reference = lowercase_words(rng), lowercase_words(rng)
        theirs = scorer.score(" ".join(reference), " ".join(hypothesis))[f"rouge{n}"]
        ours = rouge_n_scores(hypothesis, reference, n)
        assert (ours.precision, ours.recall, ours.fmeasure) == pytest.approx(
            (theirs.precision, theirs.recall, theirs.fmeasure), abs=1e-12)
        assert rouge_n(hypothesis, [reference], n) == pytest.approx(theirs.recall, abs=1e-12)


def test_rouge_n_pools_references_where_rouge_score_picks_the_best_one():
    hypothesis = "the cat sat".split()
    references = ["the cat sat on the mat".split(), "the cat sat down".split()]
    best = rouge_scorer.RougeScorer(["rouge1"]).score_multi([" ".join(r) for r in references], " ".join(hypothesis))
    assert best["rouge1"].recall == pytest.approx(3 / 4)  # the reference with the best F (6/7 > 2/3)
    assert rouge_n(hypothesis, references, 1) == pytest.approx((3 + 3) / (6 + 4))  # Lin's pooled recall


def test_rouge_n_sums_over_the_reference_ngrams_not_the_candidates():
    # Note 000 defines W as the candidate's n-grams and reuses it for ROUGE-N. Summing the
    # denominator over the candidate's n-grams only makes a one-word candidate perfect when its
    # word occurs once in the reference ("cat"); "the", which occurs twice, gets 1/2.
    reference = "the cat sat on the mat".split()
    reference_counts = ngram_counts(reference, 1)

    def note_version(hypothesis):
        candidate_w = ngram_counts(hypothesis, 1)
        return sum(min(c, reference_counts[w]) for w, c in candidate_w.items()) / sum(
            reference_counts[w] for w in candidate_w)

    assert note_version(["cat"]) == 1.0
    assert note_version(["the"]) == 0.5
    for word in ("cat", "the"):
        assert rouge_n([word], [reference], 1) == pytest.approx(1 / 6)


def test_bleu_is_precision_and_rouge_is_recall():
    reference = "the cat sat on the mat".split()
    short = "the cat".split()
    assert clipped_counts(short, [reference], 1) == (2, 2)  # precision 1: every word is right
    assert rouge_n(short, [reference], 1) == pytest.approx(2 / 6)  # recall 1/3: most words missing
    assert sentence_bleu(short, [reference]).brevity_penalty == pytest.approx(math.exp(1 - 6 / 2))


def test_the_numbers_of_chapter_8s_exercises():
    # Corpus against sentence BLEU: a perfect 20-word sentence and a 4-word one with P4 = 0.
    perfect = ([20, 19, 18, 17], [20, 19, 18, 17])
    short = ([4, 2, 1, 0], [4, 3, 2, 1])
    assert bleu_from_counts(*short, 4, 4).score == 0.0
    pooled = bleu_from_counts([a + b for a, b in zip(perfect[0], short[0])],
                              [a + b for a, b in zip(perfect[1], short[1])], 24, 24)
    assert pooled.score == pytest.approx((21 / 22 * 19 / 20 * 17 / 18) ** 0.25) and round(pooled.score, 3) == 0.962
    # Gaming: padding keeps ROUGE perfect and sinks BLEU; silence keeps precision perfect and sinks BLEU.
    reference = "the cat sat on the mat".split()
    padded = "the cat sat on the mat and the dog ran off to the garden".split()
    assert rouge_n(padded, [reference], 1) == rouge_n(padded, [reference], 2) == 1.0
    assert round(sentence_bleu(padded, [reference]).score, 2) == 0.35
    two = sentence_bleu("the cat".split(), [reference], max_n=2)
    assert two.precisions == (1.0, 1.0) and two.score == pytest.approx(math.exp(-2))


# ---------------------------------------------------------------------------
# Bad input never passes silently (issue 22).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("smooth", ["floor", "add-k"])
@pytest.mark.parametrize("seed", range(5))
def test_smooth_value_zero_matches_sacrebleu(smooth, seed):
    hypotheses, references = random_corpus(seed)
    theirs = sacrebleu_corpus(hypotheses, references, smooth, smooth_value=0.0).score / 100
    ours = corpus_bleu(hypotheses, references, smooth=smooth, smooth_value=0.0).score
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_the_default_smoothing_is_none_not_sacrebleus_exp():
    hypothesis, references = "the cat sat on".split(), ["the cat sat down".split()]
    assert sentence_bleu(hypothesis, references).score == 0.0  # no 4-gram matches: plain BLEU is 0
    exp = sacrebleu_sentence(hypothesis, references, "exp").score / 100
    assert exp > 0 and sentence_bleu(hypothesis, references, smooth="exp").score == pytest.approx(exp, abs=1e-9)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ngram_counts("the cat", 2), TypeError, r"(?s)parameter 'tokens'.*Actual value: 'the cat'.*is_a_list_of_words"),
        (lambda: ngram_counts(["a", "b"], 0), TypeError, r"(?s)parameter 'n'.*Actual value: 0.*is_at_least_1"),
        (lambda: ngram_counts(["a", "b"], -1), TypeError, r"(?s)parameter 'n'.*Actual value: -1.*is_at_least_1"),
        (lambda: ngram_counts(["a", None], 1), TypeError, r"(?s)parameter 'tokens'.*Actual value: \['a', None\]"),
        (lambda: corpus_bleu([["a"]], [[["a"]]], max_n=10**6), TypeError, r"(?s)parameter 'max_n'.*Actual value: 1000000.*is_at_most_100"),
        (lambda: brevity_penalty(True, 3), TypeError, r"(?s)parameter 'hyp_len'.*Actual value: True.*is_at_least_0"),
        (lambda: brevity_penalty(2, -1), TypeError, r"(?s)parameter 'ref_len'.*Actual value: -1.*is_at_least_0"),
        (lambda: closest_reference_length(2.5, [3]), TypeError, r"(?s)parameter 'hyp_len'.*Actual value: 2.5.*Integral"),
        (lambda: closest_reference_length(2, [3, -1]), TypeError, r"(?s)parameter 'ref_lens'.*Actual value: \[3, -1\]"),
        (lambda: closest_reference_length(2, []), ValueError, r"ref_lens must be a non-empty list of reference lengths; found \[\]"),
        (lambda: bleu_from_counts([1, 1.5], [2, 2], 2, 2), TypeError, r"(?s)parameter 'matches'.*Actual value: \[1, 1.5\]"),
        (lambda: bleu_from_counts([], [], 2, 2), ValueError, r"matches must hold 1 to 100 counts .*; found 0"),
        (lambda: corpus_bleu([["a"], ["b"]], [[["a"]], []]), ValueError, r"references\[1\] must be a non-empty list of references"),
        (lambda: corpus_bleu([["a"], "b c"], [[["a"]], [["b"]]]), TypeError, r"(?s)parameter 'hypotheses'.*Actual value: \[\['a'\], 'b c'\]"),
        (lambda: clipped_counts(["a"], [], 1), ValueError, "references must be a non-empty list of references"),
        (lambda: rouge_n_scores(["a"], "a b", 1), TypeError, r"(?s)parameter 'reference'.*Actual value: 'a b'.*is_a_list_of_words"),
        (lambda: sentence_bleu(["a"], [["a"]], smooth="floor", smooth_value=float("nan")), TypeError,
         r"(?s)parameter 'smooth_value'.*Actual value: nan.*is_at_least_0"),
        (lambda: sentence_bleu(["a"], [["a"]], smooth="floor", smooth_value=-0.1), TypeError,
         r"(?s)parameter 'smooth_value'.*Actual value: -0.1.*is_at_least_0"),
    ],
)
def test_wrong_types_and_sizes_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_bleu_record_takes_lengths_not_bools_or_negatives():
    from lib.part3_words.metrics import BleuStats

    fields = dict(matches=(1,), totals=(1,), precisions=(1.0,), weights=(1.0,), brevity_penalty=1.0, score=1.0)
    assert BleuStats(hyp_len=0, ref_len=3, **fields).ref_len == 3
    for name in ("hyp_len", "ref_len"):
        for bad in (-1, True):
            with pytest.raises(TypeError, match=rf"(?s)parameter '{name}'.*Actual value: {bad}"):
                BleuStats(**{"hyp_len": 1, "ref_len": 1, name: bad}, **fields)
