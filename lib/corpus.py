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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, no_type_check

from lib.checked import NonNegativeInt, PositiveInt, Words, each

__all__ = ["gensim_data", "tokenize", "read_sentences", "Vocabulary"]

# A word: letters, optionally joined by inner apostrophes ("don't", "o'brien").
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")


def gensim_data(name: str) -> Path:
    """The path of a data file shipped inside gensim's wheel (no download), e.g.
    ``"lee_background.cor"``, ``"questions-words.txt"``, ``"wordsim353.tsv"``."""
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
    """Lower-case words of a line: runs of letters with inner apostrophes; digits and
    punctuation separate words and are dropped.

    >>> tokenize("Don't panic: 42 towels, O'Brien!")
    ["don't", 'panic', 'towels', "o'brien"]
    """
    return _WORD.findall(line.lower())


def read_sentences(
    path: Optional[str | Path] = None,
    max_sentences: Optional[PositiveInt] = None,
    chunk: PositiveInt = 10_000,
) -> list[list[str]]:
    """The sentences (one a line, lines without a word skipped) of a UTF-8 text file,
    by default gensim's Lee corpus (300 news stories, about 60,000 words). Lines longer
    than ``chunk`` words are cut into pieces, as gensim's ``Text8Corpus`` cuts text8's
    single line of 17 million words."""
    path = gensim_data("lee_background.cor") if path is None else Path(path)
    if not path.is_file():
        raise ValueError(f"path must name an existing text file; found {str(path)!r}")
    sentences: list[list[str]] = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            words = tokenize(line)
            for start in range(0, len(words), chunk):
                sentences.append(words[start : start + chunk])
                if len(sentences) == max_sentences:
                    return sentences
    return sentences


@dataclass
class Vocabulary:
    """Words numbered by falling count (ties alphabetically, so the numbering does not
    depend on the corpus's order), after special tokens such as ``"<unk>"`` with count
    0: ``words[i]`` has id ``i`` and occurs ``counts[i]`` times. Build one with
    :meth:`from_sentences`."""

    words: Words
    counts: each(NonNegativeInt)
    _ids: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.words) != len(self.counts):
            raise ValueError(
                "words and counts must have the same length; "
                f"found {len(self.words)} and {len(self.counts)}"
            )
        self._ids = {word: i for i, word in enumerate(self.words)}
        if len(self._ids) != len(self.words):
            raise ValueError("words must be distinct; found a repeated word")

    @classmethod
    def from_sentences(
        cls,
        sentences: Iterable[Sequence[str]],
        min_count: PositiveInt = 1,
        specials: Words = (),
    ) -> Vocabulary:
        """Count the words of a corpus and keep those seen at least ``min_count`` times
        (gensim's ``min_count``), after the ``specials``."""
        counter: Counter = Counter()
        for sentence in sentences:
            if isinstance(sentence, str):
                raise TypeError(
                    "sentences must be lists of words; found a str "
                    "(split it, e.g. with lib.corpus.tokenize)"
                )
            counter.update(sentence)
        word = next((word for word in counter if not isinstance(word, str)), None)
        if word is not None:
            raise TypeError(f"sentences must be lists of str words; found {word!r}")
        clash = [token for token in specials if token in counter]
        if clash:
            raise ValueError(
                f"special tokens must not occur in the corpus; found {clash}"
            )
        kept = sorted(
            (item for item in counter.items() if item[1] >= min_count),
            key=lambda item: (-item[1], item[0]),
        )
        return cls(
            words=list(specials) + [word for word, _ in kept],
            counts=[0] * len(specials) + [count for _, count in kept],
        )

    # Called once a word in the chapters' loops, with nothing to check: unchecked, as
    # the checks would cost 50 times the lookup.
    @no_type_check
    def __len__(self) -> int:
        return len(self.words)

    @no_type_check
    def __contains__(self, word: object) -> bool:
        return word in self._ids

    def index(self, word: str) -> int:
        """The id of ``word`` (a :class:`NotInVocabulary` error if it has none)."""
        return self._id(word, "word")

    def encode(self, tokens: Words, unknown: Optional[str] = None) -> list[int]:
        """Ids of ``tokens``. Words outside the vocabulary are dropped
        (``unknown=None``, as word2vec drops words below ``min_count``) or map to the id
        of ``unknown``, e.g. ``"<unk>"``."""
        if unknown is None:
            return [self._ids[token] for token in tokens if token in self._ids]
        fallback = self._id(unknown, "unknown")
        return [self._ids.get(token, fallback) for token in tokens]

    @no_type_check  # index and encode checked word and unknown: str
    def _id(self, word: str, name: str) -> int:
        if word not in self._ids:
            raise NotInVocabulary(
                f"{name} must be a word of the vocabulary ({len(self)} words); "
                f"{word!r} is not in the vocabulary"
            )
        return self._ids[word]


class NotInVocabulary(KeyError, ValueError):
    """A word outside the vocabulary: a ``ValueError`` as every refused argument in lib,
    and a ``KeyError`` as a failed lookup in a dict."""

    __str__ = ValueError.__str__  # the message as written (KeyError's would quote it)
