"""Tests for lib/corpus.py: tokenising, reading files, vocabularies.

The vocabulary's counts are held against gensim's own vocabulary scan of the
same sentences.
"""

import pytest

from lib.corpus import Vocabulary, gensim_data, read_sentences, tokenize


def test_tokenize_keeps_lower_case_words_and_inner_apostrophes():
    assert tokenize("Don't panic: 42 towels, O'Brien!  'quoted'") == ["don't", "panic", "towels", "o'brien", "quoted"]
    assert tokenize("") == []


def test_read_sentences_skips_empty_lines_and_cuts_long_ones(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("The cat sat.\n\n123 !!\n" + "a b c d e f g\n", encoding="utf-8")
    assert read_sentences(path) == [["the", "cat", "sat"], list("abcdefg")]
    assert read_sentences(str(path), chunk=3) == [["the", "cat", "sat"], ["a", "b", "c"], ["d", "e", "f"], ["g"]]
    assert read_sentences(path, max_sentences=1) == [["the", "cat", "sat"]]


def test_default_corpus_is_gensims_lee_background():
    sentences = read_sentences()
    assert len(sentences) == 300
    assert sentences[0][:3] == ["hundreds", "of", "people"]


def test_vocabulary_orders_by_count_then_alphabet_and_applies_min_count():
    sentences = [["b", "a", "c", "a"], ["c", "d", "a"]]
    vocab = Vocabulary.from_sentences(sentences, min_count=2, specials=("<unk>",))
    assert vocab.words == ["<unk>", "a", "c"]
    assert vocab.counts == [0, 3, 2]
    assert len(vocab) == 3 and "c" in vocab and "b" not in vocab
    assert vocab.index("c") == 2
    assert vocab.encode(["c", "b", "a"]) == [2, 1]
    assert vocab.encode(["c", "b", "a"], unknown="<unk>") == [2, 0, 1]


def test_vocabulary_counts_equal_gensims():
    from gensim.models import Word2Vec

    sentences = read_sentences()
    model = Word2Vec(vector_size=4, min_count=5, workers=1)
    model.build_vocab(sentences)
    theirs = {word: int(model.wv.get_vecattr(word, "count")) for word in model.wv.index_to_key}
    vocab = Vocabulary.from_sentences(sentences, min_count=5)
    assert dict(zip(vocab.words, vocab.counts)) == theirs
    assert vocab.counts == sorted(vocab.counts, reverse=True)


def test_bad_input_is_rejected_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="no data file named 'nope.txt'"):
        gensim_data("nope.txt")
    with pytest.raises(TypeError, match=r"(?s)parameter 'line'.*Actual value: \['a'\].*<class 'str'>"):
        tokenize(["a"])
    with pytest.raises(ValueError, match="existing text file"):
        read_sentences(tmp_path / "missing.txt")
    with pytest.raises(TypeError, match=r"(?s)parameter 'chunk'.*Actual value: 0.*is_at_least_1"):
        read_sentences(chunk=0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'max_sentences'.*Actual value: 2.5.*Integral"):
        read_sentences(max_sentences=2.5)
    with pytest.raises(TypeError, match="found a str"):
        Vocabulary.from_sentences(["a sentence"])
    with pytest.raises(ValueError, match="must not occur in the corpus"):
        Vocabulary.from_sentences([["<unk>"]], specials=("<unk>",))
    vocab = Vocabulary.from_sentences([["a"]])
    with pytest.raises(ValueError, match=r"word must be a word of the vocabulary \(1 words\); 'z' is not in the vocabulary"):
        vocab.index("z")
    with pytest.raises(ValueError, match=r"unknown must be a word of the vocabulary \(1 words\); '<unk>' is not in the vocabulary"):
        vocab.encode(["a", "b"], unknown="<unk>")
    assert vocab.encode(["a", "b"]) == [0] and vocab.index("a") == 0
    with pytest.raises(TypeError, match=r"(?s)parameter 'tokens'.*Actual value: 'a'.*is_a_list_of_words"):
        vocab.encode("a")
    with pytest.raises(TypeError, match=r"(?s)parameter 'specials'.*Actual value: '<unk>'.*is_a_list_of_words"):
        Vocabulary.from_sentences([["a"]], specials="<unk>")
    with pytest.raises(TypeError, match=r"(?s)parameter 'words'.*Actual value: \['a', 3\].*Sequence\[str\]"):
        Vocabulary(words=["a", 3], counts=[1, 2])
    with pytest.raises(TypeError, match=r"(?s)parameter 'counts'.*Actual value: \[1, -2\].*is_at_least_0"):
        Vocabulary(words=["a", "b"], counts=[1, -2])
    with pytest.raises(TypeError, match=r"(?s)parameter 'path'.*Actual value: 3.*pathlib.Path"):
        read_sentences(3)
    with pytest.raises(ValueError, match="same length"):
        Vocabulary(words=["a"], counts=[1, 2])


def test_a_word_that_is_not_a_str_is_named():
    with pytest.raises(TypeError, match="sentences must be lists of str words; found 3"):
        Vocabulary.from_sentences([["a"] * 300 + [3]])
