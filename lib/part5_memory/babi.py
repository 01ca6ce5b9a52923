"""Generated bAbI-style stories: "where is Mary?" and "where is the football?".

Chapter 12 (syllabus MEM3). The bAbI tasks (Weston et al., 2015) test whether a model
can answer a question from facts stated in a short story. This module generates
stories in a small world of people, places and objects, in the style of two of
the tasks, so that the book needs no download:

* ``"single"`` (task 1, one supporting fact): people move around; the question is
  "where is X ?", and the answer is the place of X's latest move.
* ``"two"`` (task 2, two supporting facts): people also pick up objects; the
  question is "where is the Z ?". The answer needs two sentences: who picked up
  ``Z``, and where that person went last. (Unlike bAbI, objects are never
  dropped, so the holder's latest move always answers.)

:func:`generate` returns the stories as text and :class:`Stories` as padded
tensors of word ids for :class:`lib.part5_memory.memn2n.MemN2N`.

References
----------
.. [1] J. Weston, A. Bordes, S. Chopra, A. M. Rush, B. van Merrienboer,
   A. Joulin, T. Mikolov. "Towards AI-Complete Question Answering: A Set of
   Prerequisite Toy Tasks". arXiv:1502.05698, 2015.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from jaxtyping import Int64
from torch import Tensor

from lib.checked import NonNegativeInt, PositiveInt, each

__all__ = [
    "PEOPLE",
    "PLACES",
    "OBJECTS",
    "TASKS",
    "VOCABULARY",
    "Story",
    "Stories",
    "generate",
]

PEOPLE = ("mary", "john", "sandra", "daniel")
PLACES = ("bathroom", "hallway", "garden", "office", "bedroom", "kitchen")
OBJECTS = ("football", "apple", "milk")
MOVES = ("went to", "moved to", "journeyed to", "travelled to")
TAKES = ("picked up", "got", "grabbed")
Task = Literal["single", "two"]
TASKS = get_args(Task)
PAD = "<pad>"
# Every word the stories use; id 0 is padding, so a padded word embeds to zero.
WORDS = {
    *PEOPLE,
    *PLACES,
    *OBJECTS,
    "the",
    "where",
    "is",
    *" ".join(MOVES + TAKES).split(),
}
VOCABULARY = (PAD, *sorted(WORDS))
WORD_ID = {word: i for i, word in enumerate(VOCABULARY)}


@dataclass(frozen=True)
class Story:
    """One story in words: its sentences, the question, the answer and the supporting
    sentences."""

    sentences: tuple[str, ...]
    question: str
    answer: str
    supporting: tuple[int, ...]  # indices into sentences

    def __post_init__(self) -> None:
        # The signature looks at one sentence and one index drawn at random.
        for name, text in (*enumerate(self.sentences), ("question", self.question)):
            where = "question" if name == "question" else f"sentences[{name}]"
            if not isinstance(text, str):
                raise TypeError(f"{where} must be a str; found {text!r}")
            unknown = [word for word in text.split() if word not in WORD_ID]
            if unknown:
                raise ValueError(
                    f"{where} must use words of VOCABULARY; found {unknown[0]!r}"
                )
        if self.answer not in WORD_ID:
            raise ValueError(
                f"answer must be a word of VOCABULARY; found {self.answer!r}"
            )
        n = len(self.sentences)
        if not (
            1 <= len(self.supporting) <= 2
            and all(type(i) is int and 0 <= i < n for i in self.supporting)
        ):
            raise ValueError(
                f"supporting must be one or two indices in [0, {n}) (the sentences); "
                f"found {self.supporting!r}"
            )


def _single(rng: random.Random, length: int) -> Story:
    where: dict[str, tuple[str, int]] = {}  # person -> (place, index of the sentence)
    sentences = []
    for i in range(length):
        person = rng.choice(PEOPLE)
        here = where.get(person, (None, -1))[0]
        place = rng.choice([p for p in PLACES if p != here])
        sentences.append(f"{person} {rng.choice(MOVES)} the {place}")
        where[person] = (place, i)
    person = rng.choice(sorted(where))
    place, index = where[person]
    return Story(tuple(sentences), f"where is {person}", place, (index,))


def _two(rng: random.Random, length: int) -> Story:
    while True:
        where: dict[str, tuple[str, int]] = {}
        # object -> (person, index of the sentence)
        holder: dict[str, tuple[str, int]] = {}
        sentences = []
        for i in range(length):
            person = rng.choice(PEOPLE)
            free = [o for o in OBJECTS if o not in holder]
            if free and rng.random() < 0.35:
                thing = rng.choice(free)
                sentences.append(f"{person} {rng.choice(TAKES)} the {thing}")
                holder[thing] = (person, i)
            else:
                here = where.get(person, (None, -1))[0]
                place = rng.choice([p for p in PLACES if p != here])
                sentences.append(f"{person} {rng.choice(MOVES)} the {place}")
                where[person] = (place, i)
        answerable = sorted(o for o, (person, _) in holder.items() if person in where)
        if answerable:
            break
    thing = rng.choice(answerable)
    person, taken = holder[thing]
    place, moved = where[person]
    return Story(tuple(sentences), f"where is the {thing}", place, (taken, moved))


def generate(
    task: Task,
    n: NonNegativeInt,
    seed: NonNegativeInt = 0,
    min_sentences: PositiveInt = 2,
    max_sentences: PositiveInt = 10,
    exclude: Iterable[Story] = (),
) -> list[Story]:
    """``n`` stories of a task (one or two supporting facts), each of ``min_sentences``
    to ``max_sentences`` sentences (uniform); none is in ``exclude``, such as a training
    set, so held-out stories are new ones (short stories would otherwise repeat now and
    then). The same seed gives the same stories."""
    if max_sentences < min_sentences:
        raise ValueError(
            f"max_sentences must be an int >= min_sentences = {min_sentences}; "
            f"found {max_sentences}"
        )
    rng = random.Random(seed)
    make = _single if task == "single" else _two
    excluded, stories = set(exclude), []
    while len(stories) < n:
        story = make(rng, rng.randint(min_sentences, max_sentences))
        if story not in excluded:
            stories.append(story)
    return stories


def _encode(sentence: str, width: int) -> list[int]:
    ids = [WORD_ID[word] for word in sentence.split()]
    return ids + [0] * (width - len(ids))


@dataclass
class Stories:
    """A batch of stories as padded word ids (0 = padding): sentence ``i`` of story
    ``b`` is ``story[b, i]``; ``answer`` is the answer's word id, ``lengths`` the number
    of sentences, ``supporting`` the supporting sentences (-1 where there is none)."""

    story: Int64[Tensor, "B N J"]
    question: Int64[Tensor, "B J"]
    answer: Int64[Tensor, "B"]
    lengths: Int64[Tensor, "B"]
    supporting: Int64[Tensor, "B 2"]

    WIDTH = 5  # words in the longest sentence ("mary picked up the apple")

    def __post_init__(self) -> None:
        words, width = len(VOCABULARY), self.story.shape[1]
        for name in ("story", "question", "answer"):
            ids = getattr(self, name)
            if ids.numel() and (ids.min() < 0 or ids.max() >= words):
                raise ValueError(
                    f"{name} must hold word ids in [0, {words}); "
                    f"found ids from {int(ids.min())} to {int(ids.max())}"
                )
        if len(self) and (self.lengths.min() < 1 or self.lengths.max() > width):
            raise ValueError(
                f"lengths must lie in [1, N] = [1, {width}]; found values from "
                f"{int(self.lengths.min())} to {int(self.lengths.max())}"
            )
        first, second = self.supporting.unbind(1)  # (B,) each; second may be -1
        if (
            (first < 0)
            | (first >= self.lengths)
            | (second < -1)
            | (second >= self.lengths)
        ).any():
            raise ValueError(
                "supporting must hold sentence indices below each story's length "
                "(the second may be -1, none); found "
                f"{self.supporting.tolist()} with lengths {self.lengths.tolist()}"
            )

    @classmethod
    def from_stories(
        cls, stories: each(Story), max_sentences: PositiveInt = 10
    ) -> Stories:
        """Encode and pad ``stories`` (each of at most ``max_sentences`` sentences)."""
        if not stories:
            raise ValueError("stories must hold at least one story; found 0")
        longest = max(len(s.sentences) for s in stories)
        if longest > max_sentences:
            raise ValueError(
                f"stories must have at most max_sentences = {max_sentences} sentences; "
                f"found {longest}"
            )
        story = torch.zeros(len(stories), max_sentences, cls.WIDTH, dtype=torch.long)
        for b, s in enumerate(stories):
            for i, sentence in enumerate(s.sentences):
                story[b, i] = torch.tensor(_encode(sentence, cls.WIDTH))
        supporting = [
            list(s.supporting) + [-1] * (2 - len(s.supporting)) for s in stories
        ]
        return cls(
            story=story,
            question=torch.tensor([_encode(s.question, cls.WIDTH) for s in stories]),
            answer=torch.tensor([WORD_ID[s.answer] for s in stories]),
            lengths=torch.tensor([len(s.sentences) for s in stories]),
            supporting=torch.tensor(supporting),
        )

    def __len__(self) -> int:
        return self.story.shape[0]

    def __getitem__(self, index: slice | Int64[Tensor, "M"]) -> Stories:
        batch = len(self)
        if isinstance(index, Tensor) and len(index):
            if index.min() < -batch or index.max() >= batch:
                raise ValueError(
                    f"index must hold stories in [-B, B) = [-{batch}, {batch}); "
                    f"found values from {int(index.min())} to {int(index.max())}"
                )
        return Stories(
            self.story[index],
            self.question[index],
            self.answer[index],
            self.lengths[index],
            self.supporting[index],
        )
