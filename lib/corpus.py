"""Text corpora and vocabularies for the word-level chapters (5 and 6).

The book never downloads data. Its default corpora are the plain-text files
that gensim's wheel ships for its own tests (the Lee news corpus, the first
500 lines of a Wikipedia dump, *Crime and Punishment*) together with the
evaluation sets of word2vec (``questions-words.txt``) and the word-similarity
sets WordSim-353 (Finkelstein et al., 2002) and SimLex-999 (Hill et al.,
2015). :func:`read_sentences` reads any other plain-text file the same way, so
a reader with, say, text8 can rerun a chapter on it.

Conventions: a corpus is a list of sentences, a sentence a list of lower-case
word strings. A :class:`Vocabulary` numbers the words by falling count, as
word2vec and gensim do, which makes the frequent words the small ids.

References
----------
.. [1] L. Finkelstein, E. Gabrilovich, Y. Matias, E. Rivlin, Z. Solan,
   G. Wolfman, E. Ruppin. "Placing Search in Context: The Concept Revisited".
   ACM TOIS 20(1), 2002.
.. [2] F. Hill, R. Reichart, A. Korhonen. "SimLex-999: Evaluating Semantic
   Models with (Genuine) Similarity Estimation". Computational Linguistics
   41(4), 2015.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

from lib.validation import require_int, require_words

__all__ = ["gensim_data", "tokenize", "read_sentences", "Vocabulary"]

# A word: letters, optionally joined by inner apostrophes ("don't", "o'brien").
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


def gensim_data(name: str) -> Path:
    """The path of a data file shipped inside gensim's wheel (no download).

    Parameters
    ----------
    name : str
        A file name in ``gensim/test/test_data``, e.g. ``"lee_background.cor"``,
        ``"head500.noblanks.cor"``, ``"questions-words.txt"``, ``"wordsim353.tsv"``.

    Returns
    -------
    pathlib.Path
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str; found {type(name).__name__}")
    from gensim.test.utils import datapath

    path = Path(datapath(name))
    if not path.is_file():
        shipped = sorted(p.name for p in path.parent.iterdir() if p.is_file())
        raise ValueError(
            f"gensim ships no data file named {name!r}; some it does ship: "
            f"{', '.join(shipped[:8])}, ..."
        )
    return path


def tokenize(line: str) -> list[str]:
    """Lower-case words of a line: runs of letters with inner apostrophes.

    Digits and punctuation separate words and are dropped.

    Examples
    --------
    >>> tokenize("Don't panic: 42 towels, O'Brien!")
    ["don't", 'panic', 'towels', "o'brien"]
    """
    if not isinstance(line, str):
        raise TypeError(f"line must be a str; found {type(line).__name__}")
    return _WORD.findall(line.lower())


def read_sentences(
    path: Optional[Union[str, Path]] = None,
    max_sentences: Optional[int] = None,
    chunk: int = 10_000,
) -> list[list[str]]:
    """Read a plain-text corpus, one sentence per line.

    Parameters
    ----------
    path : str or Path, optional
        A UTF-8 text file. Default: gensim's Lee background corpus (300 news
        stories, about 60,000 words).
    max_sentences : int, optional
        Stop after this many non-empty sentences.
    chunk : int
        Lines longer than this many words are cut into pieces of ``chunk``
        words (text8, for instance, is a single line of 17 million words; gensim's
        ``Text8Corpus`` cuts it the same way).

    Returns
    -------
    list of list of str
        Lines without any word are skipped.
    """
    if path is None:
        path = gensim_data("lee_background.cor")
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or pathlib.Path; found {type(path).__name__}")
    require_int("chunk", chunk, 1)
    if max_sentences is not None:
        require_int("max_sentences", max_sentences, 1)
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path must name an existing text file; found {str(path)!r}")

    sentences: list[list[str]] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            words = tokenize(line)
            for start in range(0, len(words), chunk):
                sentences.append(words[start:start + chunk])
                if max_sentences is not None and len(sentences) == max_sentences:
                    return sentences
    return sentences


@dataclass
class Vocabulary:
    """Words numbered by falling count; rare words can be left out.

    Build one with :meth:`from_sentences`. Special tokens (``"<unk>"``,
    ``"<s>"``, ...) take the first ids, with count 0; then the words follow by
    falling count, ties in alphabetical order, so the numbering does not depend
    on the order of the corpus.

    Attributes
    ----------
    words : list of str
        ``words[i]`` is the word with id ``i``.
    counts : list of int
        ``counts[i]`` is how often ``words[i]`` occurs in the corpus.
    """

    words: list[str]
    counts: list[int]
    _ids: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        require_words("words", self.words)
        if not isinstance(self.counts, (list, tuple)):
            raise TypeError(f"counts must be a list of ints; found {type(self.counts).__name__}")
        if len(self.words) != len(self.counts):
            raise ValueError(
                f"words and counts must have the same length; found {len(self.words)} and {len(self.counts)}"
            )
        self._ids = {word: i for i, word in enumerate(self.words)}
        if len(self._ids) != len(self.words):
            raise ValueError("words must be distinct; found a repeated word")

    @classmethod
    def from_sentences(
        cls, sentences: Iterable[Sequence[str]], min_count: int = 1, specials: Sequence[str] = ()
    ) -> "Vocabulary":
        """Count the words of a corpus and keep those seen at least ``min_count`` times.

        Parameters
        ----------
        sentences : iterable of sequences of str
        min_count : int
            Words seen fewer times are left out (gensim's ``min_count``).
        specials : sequence of str
            Extra tokens placed first, e.g. ``("<unk>",)``.
        """
        require_int("min_count", min_count, 1)
        if isinstance(specials, str):
            raise TypeError(f"specials must be a sequence of str, not one str; found {specials!r}")
        counter: Counter = Counter()
        for sentence in sentences:
            if isinstance(sentence, str):
                raise TypeError(
                    "sentences must be lists of words; found a str (split it, e.g. with lib.corpus.tokenize)"
                )
            counter.update(sentence)
        clash = [token for token in specials if token in counter]
        if clash:
            raise ValueError(f"special tokens must not occur in the corpus; found {clash}")
        kept = sorted((item for item in counter.items() if item[1] >= min_count), key=lambda item: (-item[1], item[0]))
        return cls(
            words=list(specials) + [word for word, _ in kept],
            counts=[0] * len(specials) + [count for _, count in kept],
        )

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._ids

    def index(self, word: str) -> int:
        """The id of ``word``; a ``KeyError`` that says so if it is not in the vocabulary."""
        try:
            return self._ids[word]
        except KeyError:
            raise KeyError(f"{word!r} is not in the vocabulary ({len(self)} words)") from None

    def encode(self, tokens: Sequence[str], unknown: Optional[str] = None) -> list[int]:
        """Ids of ``tokens``.

        Parameters
        ----------
        tokens : sequence of str
        unknown : str, optional
            ``None`` drops out-of-vocabulary words (what word2vec does with words
            below ``min_count``); otherwise they map to this token's id, which must
            be in the vocabulary (e.g. ``"<unk>"``).
        """
        if isinstance(tokens, str):
            raise TypeError(f"tokens must be a sequence of words, not one str; found {tokens!r}")
        if unknown is None:
            return [self._ids[token] for token in tokens if token in self._ids]
        fallback = self.index(unknown)
        return [self._ids.get(token, fallback) for token in tokens]
