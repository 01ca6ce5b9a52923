"""Tests for lib/part3_words/embeddings.py.

References: gensim's word-pair and analogy evaluations (``KeyedVectors``), scipy's
Spearman correlation, and vectors built by hand so that an analogy holds exactly.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.corpus import Vocabulary, gensim_data
from lib.part3_words.embeddings import AnalogyScore, WordPair, WordVectors, read_analogies, read_word_pairs, spearman

FAST = settings(max_examples=30, deadline=None, database=None)




def plane_vectors():
    """king - man + woman = queen exactly, in 2-D."""
    vocab = Vocabulary(words=["man", "woman", "king", "queen", "apple"], counts=[5, 4, 3, 2, 1])
    vectors = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 0.5], [2.5, 3.0], [-1.0, -1.0]])
    return WordVectors(vectors, vocab)


def test_most_similar_excludes_the_query_and_analogy_is_3cosadd():
    vectors = plane_vectors()
    neighbours = vectors.most_similar(["man"], k=4)
    assert [w for w, _ in neighbours][0] == "king" and "man" not in [w for w, _ in neighbours]
    unit = F.normalize(vectors.vectors, dim=1)
    assert neighbours[0][1] == pytest.approx(float(unit[0] @ unit[2]))
    assert [w for w, _ in neighbours] == sorted([w for w, _ in neighbours], key=lambda w: -vectors.similarity("man", w))
    assert vectors.analogy("man", "king", "woman")[0][0] == "queen"


def test_word_classes_count_same_class_neighbours_by_brute_force():
    vectors = plane_vectors()
    label = {"man": "person", "woman": "person", "king": "person", "apple": "fruit", "pear": "fruit"}
    unit = F.normalize(vectors.vectors, dim=1)
    used = [w for w in label if w in vectors.vocab]  # pear is not in the vocabulary
    hits = 0
    for word in used:
        i = vectors.vocab.index(word)
        cosines = [(float(unit[i] @ unit[j]), vectors.vocab.words[j]) for j in range(5) if j != i]
        hits += label.get(max(cosines)[1]) == label[word]
    score = vectors.evaluate_word_classes(label)
    assert score.used == 4 and score.same_class == pytest.approx(hits / 4)
    assert score.chance == pytest.approx((2 / 4 * 3 + 0 / 4) / 4)  # three persons, one fruit in the vocabulary
    with pytest.raises(ValueError, match="no labelled word is in the vocabulary"):
        vectors.evaluate_word_classes({"pear": "fruit"})


def test_analogies_exclude_the_question_words():
    # a and c almost coincide, so b - a + c is almost b itself: the answer must be the next word, d.
    vocab = Vocabulary(words=["a", "b", "c", "d"], counts=[4, 3, 2, 1])
    vectors = WordVectors(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.01], [0.1, 1.0]]), vocab)
    assert vectors.analogy("a", "b", "c")[0][0] == "d"
    assert vectors.evaluate_analogies([("a", "b", "c", "d")]).correct == 1


def test_word_pairs_and_analogies_agree_with_gensims_evaluation(tmp_path):
    from gensim.models import KeyedVectors

    pairs = read_word_pairs(gensim_data("wordsim353.tsv"))
    assert len(pairs) == 353 and pairs[0] == WordPair("love", "sex", 6.77)
    words = sorted({w for p in pairs for w in (p.first, p.second)})[:300]  # leave some pairs out of vocabulary
    vocab = Vocabulary(words=words, counts=[1] * len(words))
    vectors = WordVectors(torch.randn(len(words), 6, generator=torch.Generator().manual_seed(0)), vocab)
    keyed = KeyedVectors(6)
    keyed.add_vectors(words, vectors.vectors.numpy())

    ours = vectors.evaluate_word_pairs(pairs)
    (_, _), (rho, _), oov = keyed.evaluate_word_pairs(gensim_data("wordsim353.tsv"))
    assert ours.spearman == pytest.approx(rho, abs=1e-6)
    assert ours.skipped == pytest.approx(oov / 100 * 353)

    questions = [(a, b, c, d) for a, b, c, d in zip(words, words[7:], words[13:], words[29:])][:120]
    vectors.vectors[vocab.index(questions[0][3])] = (vectors.unit[vocab.index(questions[0][1])]
                                                     - vectors.unit[vocab.index(questions[0][0])]
                                                     + vectors.unit[vocab.index(questions[0][2])])
    del vectors.unit  # the cached unit vectors are stale
    keyed.vectors[keyed.key_to_index[questions[0][3]]] = vectors.vectors[vocab.index(questions[0][3])].numpy()
    keyed.fill_norms(force=True)
    path = tmp_path / "questions.txt"
    path.write_text(": toy\n" + "".join(" ".join(q) + "\n" for q in questions) + ": other\nmissing words in vocab\n")
    sections = read_analogies(path)
    assert list(sections) == ["toy", "other"]
    ours = vectors.evaluate_analogies(sections["toy"] + sections["other"])
    theirs, _ = keyed.evaluate_word_analogies(path)
    assert ours.correct >= 1 and ours.accuracy == pytest.approx(theirs)
    assert (ours.used, ours.skipped) == (120, 1)


@FAST
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=3, max_size=30))
def test_spearman_equals_scipy_with_ties(values):
    from scipy.stats import spearmanr

    x = torch.tensor([a for a, _ in values], dtype=torch.float64)
    y = torch.tensor([b for _, b in values], dtype=torch.float64)
    if len(set(x.tolist())) < 2 or len(set(y.tolist())) < 2:
        with pytest.raises(ValueError, match="constant"):
            spearman(x, y)
        return
    assert spearman(x, y) == pytest.approx(spearmanr(x.numpy(), y.numpy()).statistic)


def test_read_word_pairs_normalises_words_and_rejects_bad_lines(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("# comment\nCats\tDogs\t7.5\n")
    assert read_word_pairs(path, normalise=lambda w: w.rstrip("s")) == [WordPair("cat", "dog", 7.5)]
    path.write_text("cat dog 7.5\n")
    with pytest.raises(ValueError, match="word <tab> word <tab> score"):
        read_word_pairs(path)
    for line, score in (("a\tb\tx", "x"), ("a\tb\tnan", "nan"), ("a\tb\t-inf", "-inf")):
        path.write_text(f"# comment\nCats\tDogs\t7.5\n{line}\n")
        with pytest.raises(ValueError, match=rf"path: line 3 of pairs.tsv must be .* with a finite score; found 'a\\tb\\t{score}'"):
            read_word_pairs(path)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: WordVectors(torch.zeros(3, 2), Vocabulary(words=["a", "b"], counts=[1, 1])), ValueError,
         r"vectors must have shape \(V, D\) with V = 2; found \(3, 2\)"),
        (lambda: WordVectors(torch.zeros(2, 2, dtype=torch.long), Vocabulary(words=["a", "b"], counts=[1, 1])),
         TypeError, r"(?s)parameter 'vectors'.*Actual value: i64\[2,2\].*Float\[Tensor, 'V D'\]"),
        (lambda: plane_vectors().most_similar("man"), TypeError,
         r"(?s)parameter 'positive'.*Actual value: 'man'.*is_a_list_of_words"),
        (lambda: plane_vectors().most_similar(["man", 3]), TypeError,
         r"(?s)parameter 'positive'.*Actual value: \['man', 3\].*is_a_list_of_words"),
        (lambda: plane_vectors().most_similar([]), ValueError, "positive must name at least one word; found none"),
        (lambda: plane_vectors().most_similar(["man"], k=0), TypeError,
         r"(?s)parameter 'k'.*Actual value: 0.*is_at_least_1"),
        (lambda: plane_vectors().most_similar(["pear"]), KeyError, "'pear' is not in the vocabulary"),
        (lambda: plane_vectors().evaluate_analogies([("man", "king", "woman", "queen"), ("a", "b", "c")]),
         TypeError, r"(?s)parameter 'questions'.*Actual value: \[\('man'.*tuple\[str, str, str, str\]"),
        (lambda: plane_vectors().evaluate_word_pairs([WordPair("man", "king", 1.0)]), ValueError,
         "pairs must hold at least 3 pairs in the vocabulary to correlate; found 1"),
        (lambda: WordPair("man", "king", float("nan")), TypeError,
         r"(?s)parameter 'score'.*Actual value: nan.*is_finite"),
        (lambda: spearman(torch.zeros(3), torch.zeros(4)), TypeError,
         r"(?s)parameter 'y'.*Actual value: f32\[4\].*Real\[Tensor, 'n'\].*n=3"),
        (lambda: spearman(torch.zeros(1), torch.zeros(1)), ValueError, "x and y must hold at least 2 values; found 1"),
        (lambda: spearman(torch.zeros(2, 2), torch.zeros(2, 2)), TypeError,
         r"(?s)parameter 'x'.*Actual value: f32\[2,2\].*Real\[Tensor, 'n'\]"),
        (lambda: WordVectors(torch.zeros(2, 2), ["a", "b"]), TypeError,
         r"(?s)parameter 'vocab'.*Actual value: \['a', 'b'\].*Vocabulary"),
        (lambda: WordVectors(torch.zeros(1, 2), Vocabulary(words=["a"], counts=[1])), ValueError,
         "vocab must hold at least 2 words; found 1"),
        (lambda: WordVectors(torch.zeros(2, 0), Vocabulary(words=["a", "b"], counts=[1, 1])), ValueError,
         "vectors must have D >= 1 columns; found D = 0"),
        (lambda: WordVectors(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]), Vocabulary(words=["a", "b"], counts=[1, 1])),
         ValueError, "vectors must be finite; found NaN or inf"),
        (lambda: plane_vectors().most_similar(["man"], negative=["man"]), ValueError,
         r"positive and negative must not cancel; found \|Σ positive - Σ negative\| = 0"),
        (lambda: plane_vectors().most_similar(["man", "king"], negative=["king", "man"]), ValueError,
         "positive and negative must not cancel"),
        (lambda: plane_vectors().most_similar(["man", "woman", "king", "queen", "apple"]), ValueError,
         "positive and negative must leave a word to return; found all 5 words named"),
        (lambda: spearman(torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1.0, 2.0, 3.0])), ValueError,
         "x must be finite; found 1 NaN or inf values"),
        (lambda: spearman(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([float("inf"), 2.0, 3.0])), ValueError,
         "y must be finite; found 1 NaN or inf values"),
        (lambda: AnalogyScore(correct=5, used=1, skipped=0), ValueError, "correct must be at most used = 1; found 5"),
    ],
)
def test_bad_input_is_rejected_with_the_reason(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _brute_force_analogy(unit, a, b, c, method):
    """The answer to a : b :: c : ? by a Python loop over the vocabulary, in float64,
    written from Levy & Goldberg (2014), section 6 (cosines shifted to [0, 1]
    for 3CosMul, ε = 0.001)."""
    unit = unit.double()
    best, best_score = None, -float("inf")
    for x in range(unit.shape[0]):
        if x in (a, b, c):
            continue
        cos = {w: float(unit[x] @ unit[w]) for w in (a, b, c)}
        if method == "3CosAdd":
            score = (cos[b] - cos[a] + cos[c]) / float((unit[b] - unit[a] + unit[c]).norm())
        else:
            shift = {w: (v + 1) / 2 for w, v in cos.items()}
            score = shift[b] * shift[c] / (shift[a] + 0.001)
        if score > best_score:
            best, best_score = x, score
    return best, best_score


@pytest.mark.parametrize("method", ["3CosAdd", "3CosMul"])
@pytest.mark.parametrize("seed", range(5))
def test_analogy_scores_match_a_brute_force_loop(method, seed):
    generator = torch.Generator().manual_seed(seed)
    words = [f"w{i}" for i in range(40)]
    vocab = Vocabulary(words=words, counts=list(range(40, 0, -1)))
    vectors = WordVectors(torch.randn(40, 6, generator=generator), vocab)
    questions = torch.randint(0, 40, (20, 3), generator=generator)
    questions = questions[[len(set(q.tolist())) == 3 for q in questions]]
    scores = vectors.analogy_scores(questions, method)  # (Q, V)
    for q, row in zip(questions.tolist(), scores):
        best, best_score = _brute_force_analogy(vectors.unit, *q, method)
        assert int(row.argmax()) == best and float(row.max()) == pytest.approx(best_score, rel=1e-5)
        assert torch.isinf(row[q]).all()
        answer = vectors.analogy(*(words[i] for i in q), method=method)[0][0]
        assert answer == words[best]
    # evaluate_analogies counts the questions whose brute-force answer is d
    asked = [tuple(words[i] for i in q) + (words[_brute_force_analogy(vectors.unit, *q, method)[0]],) for q in questions.tolist()]
    wrong = [q[:3] + (words[(words.index(q[3]) + 1) % 40],) for q in asked]
    assert vectors.evaluate_analogies(asked, method).correct == len(asked)
    assert vectors.evaluate_analogies(wrong, method).correct <= sum(
        _brute_force_analogy(vectors.unit, *(words.index(w) for w in q[:3]), method)[0] == words.index(q[3]) for q in wrong
    )


@pytest.mark.parametrize("method", ["3CosAdd", "3CosMul"])
def test_answered_matches_a_brute_force_loop_over_several_chunks(method):
    # 300 questions: three chunks of answered's 128, the last one short
    generator = torch.Generator().manual_seed(7)
    words = [f"w{i}" for i in range(30)]
    vocab = Vocabulary(words=words, counts=list(range(30, 0, -1)))
    vectors = WordVectors(torch.randn(30, 4, generator=generator), vocab)
    questions = []
    while len(questions) < 300:
        q = torch.randint(0, 30, (4,), generator=generator).tolist()
        if len(set(q[:3])) == 3:
            questions.append(tuple(words[i] for i in q))
    expected = [
        _brute_force_analogy(vectors.unit, *(words.index(w) for w in q[:3]), method)[0]
        == words.index(q[3])
        for q in questions
    ]
    assert 0 < sum(expected) < 300  # some right, some wrong
    assert vectors.answered(questions, method).tolist() == expected
    assert vectors.evaluate_analogies(questions, method).correct == sum(expected)
    assert vectors.answered([], method).shape == (0,)
    with pytest.raises(ValueError, match="questions must hold words of the vocabulary; found 'zz'"):
        vectors.answered([("w0", "w1", "w2", "zz")], method)


def test_3cosmul_differs_from_3cosadd_when_a_candidate_points_away_from_a():
    # x1 is nearest to b and c (3CosAdd picks it); x2 points almost opposite a, so its
    # shifted cosine with a is near 0 and the division of 3CosMul (Levy & Goldberg
    # 2014, section 6) ranks it first although it is further from b and c.
    vocab = Vocabulary(words=["a", "b", "c", "x1", "x2"], counts=[5, 4, 3, 2, 1])
    vectors = torch.tensor([[1.0, 1.0], [-2.0, 3.0], [-3.0, 2.0], [-2.0, 2.0], [-3.0, -2.0]])
    vectors = WordVectors(vectors, vocab)
    add = vectors.analogy("a", "b", "c", method="3CosAdd")[0][0]
    mul = vectors.analogy("a", "b", "c", method="3CosMul")[0][0]
    for method, answer in (("3CosAdd", add), ("3CosMul", mul)):
        best, _ = _brute_force_analogy(vectors.unit, 0, 1, 2, method)
        assert answer == vocab.words[best]
    assert (add, mul) == ("x1", "x2")


def test_analogy_scores_reject_ids_outside_the_vocabulary():
    vectors = plane_vectors()
    for ids in ([0, 1, 5], [-1, 1, 2]):
        with pytest.raises(ValueError, match=r"ids must be word ids in \[0, 5\)"):
            vectors.analogy_scores(torch.tensor([ids]))
