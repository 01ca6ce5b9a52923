"""Dates written in human formats, to be normalised to ISO 8601: chapter 10's
translation task.

A source is a date written in one of eleven formats (``"Sat, Apr 3, 2021"``,
``"03.04.2021"``, ``"3rd of April 2021"``, ...), one token per character; the
target is the ISO date ``2021-04-03``. Dates and formats are drawn with the
standard library's :mod:`datetime`, so the task needs no download, and every
target can be checked by parsing it back. Normalising dates is the classic toy
translation task for attention models: the output must copy digits from
positions that depend on the format, and month names must be translated.

References
----------
.. [1] ISO 8601-1:2019, "Date and time — Representations for information
   interchange — Part 1: Basic rules".
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Optional

import torch

from lib.checked import NonNegativeInt, PositiveInt, each
from lib.part4_attention.pairs import SequencePairs

__all__ = ["DATE_FORMATS", "MONTHS", "WEEKDAYS", "DateTask"]


MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)  # fmt: skip
WEEKDAYS = (
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
)


def _ordinal(day: int) -> str:
    """1 -> "1st", 2 -> "2nd", 11 -> "11th", 23 -> "23rd"."""
    suffix = (
        "th"
        if 10 <= day % 100 <= 20
        else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    )
    return f"{day}{suffix}"


def _month(d: datetime.date) -> str:
    return MONTHS[d.month - 1]


def _weekday(d: datetime.date) -> str:
    return WEEKDAYS[d.weekday()]


# Each format writes a date one way. The numeric ones are unambiguous because the
# separator tells the order: dots are day.month.year, slashes month/day/year.
DATE_FORMATS: dict[str, Callable[[datetime.date], str]] = {
    "d.m.yyyy": lambda d: f"{d.day}.{d.month}.{d.year}",
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "mm/dd/yyyy": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
    "d Mon yyyy": lambda d: f"{d.day} {_month(d)[:3]} {d.year}",
    "d Month yyyy": lambda d: f"{d.day} {_month(d)} {d.year}",
    "Month d, yyyy": lambda d: f"{_month(d)} {d.day}, {d.year}",
    "MON d yyyy": lambda d: f"{_month(d)[:3].upper()} {d.day} {d.year}",
    "Day, Mon d, yyyy": lambda d: (
        f"{_weekday(d)[:3]}, {_month(d)[:3]} {d.day}, {d.year}"
    ),
    "dth of Month yyyy": lambda d: f"{_ordinal(d.day)} of {_month(d)} {d.year}",
    "Weekday, d Month yyyy": lambda d: f"{_weekday(d)}, {d.day} {_month(d)} {d.year}",
    "Weekday, Month dth, yyyy": lambda d: (
        f"{_weekday(d)}, {_month(d)} {_ordinal(d.day)}, {d.year}"
    ),
}
DateFormat = Literal[tuple(DATE_FORMATS)]


# Every character of an ISO date: the target vocabulary.
ISO_CHARS = "-0123456789"
# Every character the formats can write: digits, separators, the letters of the names.
SOURCE_CHARS = "".join(
    sorted(
        set(" ,./0123456789" + "".join(MONTHS + WEEKDAYS) + "".join(MONTHS).upper())
        | set("stndrdth of")
    )
)


@dataclass(frozen=True)
class DateTask:
    """Normalise dates written in human formats to ISO ``YYYY-MM-DD``.

    A source is a string of characters (one token each) in one of the
    :data:`DATE_FORMATS`; the target is the ten characters of the ISO date. Both
    vocabularies start with ``pad``, ``bos`` and ``eos`` (0, 1 and 2 in some order).
    Dates are drawn uniformly between 1 January ``first_year`` and 31 December
    ``last_year``, formats uniformly. :meth:`pairs` gives src (N, S), tgt_in and
    tgt_out (N, 11).
    """

    first_year: PositiveInt = 1900
    last_year: PositiveInt = 2099
    pad: NonNegativeInt = 0
    bos: NonNegativeInt = 1
    eos: NonNegativeInt = 2
    source_chars: str = SOURCE_CHARS
    target_chars: str = ISO_CHARS

    def __post_init__(self):
        if not self.first_year <= self.last_year <= 9999:
            raise ValueError(
                f"last_year must be an int >= {self.first_year} and <= 9999 "
                f"(first_year = {self.first_year}); found {self.last_year}"
            )
        if sorted((self.pad, self.bos, self.eos)) != [0, 1, 2]:
            raise ValueError(
                "pad, bos and eos must be 0, 1 and 2 in some order (the characters "
                f"start at 3); found pad = {self.pad}, bos = {self.bos}, "
                f"eos = {self.eos}"
            )
        for name, chars, needed in (
            ("source_chars", self.source_chars, ""),
            ("target_chars", self.target_chars, ISO_CHARS),
        ):
            if (
                not chars
                or len(set(chars)) != len(chars)
                or not set(needed) <= set(chars)
            ):
                including = f" including {needed!r}" if needed else ""
                raise ValueError(
                    f"{name} must be distinct characters{including}; found {chars!r}"
                )

    @property
    def src_vocab_size(self) -> int:
        return 3 + len(self.source_chars)

    @property
    def tgt_vocab_size(self) -> int:
        return 3 + len(self.target_chars)

    def write(self, date: datetime.date, fmt: DateFormat) -> str:
        """The date as a human would write it in format ``fmt``."""
        return DATE_FORMATS[fmt](date)

    def encode_source(self, text: str) -> list[int]:
        """Characters to source ids."""
        unknown = sorted(set(text) - set(self.source_chars))
        if unknown:
            raise ValueError(
                f"text may use only the characters {self.source_chars!r}; "
                f"found {unknown}"
            )
        return [3 + self.source_chars.index(c) for c in text]

    def source_text(self, tokens: each(NonNegativeInt)) -> str:
        """Source ids to characters (special tokens are dropped)."""
        if max(tokens, default=0) >= self.src_vocab_size:
            raise ValueError(
                f"tokens must be ids below src_vocab_size = {self.src_vocab_size}; "
                f"found {max(tokens)}"
            )
        return "".join(self.source_chars[t - 3] for t in tokens if t >= 3)

    def target_text(self, tokens: each(NonNegativeInt)) -> str:
        """Target ids to characters, up to the first ``eos`` (specials dropped)."""
        if max(tokens, default=0) >= self.tgt_vocab_size:
            raise ValueError(
                f"tokens must be ids below tgt_vocab_size = {self.tgt_vocab_size}; "
                f"found {max(tokens)}"
            )
        tokens = list(tokens)
        if self.eos in tokens:
            tokens = tokens[: tokens.index(self.eos)]
        return "".join(self.target_chars[t - 3] for t in tokens if t >= 3)

    def format_of(self, text: str, date: datetime.date) -> str:
        """The name of a format that writes ``date`` as ``text`` (the first, if several
        do)."""
        for name, write in DATE_FORMATS.items():
            if write(date) == text:
                return name
        raise ValueError(f"no format writes {date.isoformat()} as {text!r}")

    def month_span(self, text: str) -> Optional[tuple[int, int]]:
        """Where the month is written as a word, ``(start, end)`` with ``end``
        exclusive; None for numeric dates."""
        for month in MONTHS:
            # the full name first: "March" before "Mar"
            for form in (month, month[:3], month[:3].upper()):
                start = text.find(form)
                if start >= 0:
                    return start, start + len(form)
        return None

    def pairs(self, texts: each(str), dates: each(datetime.date)) -> SequencePairs:
        """Pad the sources and build the ISO targets (``bos`` + target, target +
        ``eos``)."""
        if len(texts) != len(dates):
            raise ValueError(
                "texts and dates must have the same length; "
                f"found {len(texts)} and {len(dates)}"
            )
        sources = [self.encode_source(text) for text in texts]
        targets = [
            [3 + self.target_chars.index(c) for c in d.isoformat()] for d in dates
        ]
        width = max((len(s) for s in sources), default=1)
        src = torch.full((len(texts), width), self.pad)  # (N, S)
        for i, tokens in enumerate(sources):
            src[i, : len(tokens)] = torch.tensor(tokens)
        lens = torch.tensor([len(tokens) for tokens in sources], dtype=torch.long)
        tgt = torch.tensor(targets, dtype=torch.long).reshape(len(texts), 10)  # (N, 10)
        bos = torch.full((len(texts), 1), self.bos)
        eos = torch.full((len(texts), 1), self.eos)
        tgt_in = torch.cat((bos, tgt), dim=1)  # (N, 11)
        tgt_out = torch.cat((tgt, eos), dim=1)  # (N, 11)
        return SequencePairs(src, lens, tgt_in, tgt_out)

    def sample(
        self, n: PositiveInt, seed: NonNegativeInt = 0, exclude: frozenset = frozenset()
    ) -> tuple[list[str], list[datetime.date]]:
        """``n`` random (text, date) pairs with distinct dates, none in ``exclude``.
        Each date is drawn with its format, so the first ``k`` pairs of a larger sample
        are the sample of size ``k`` with the same seed."""
        first = datetime.date(self.first_year, 1, 1).toordinal()
        last = datetime.date(self.last_year, 12, 31).toordinal()
        available = last - first + 1 - len(exclude)
        if n > available:
            raise ValueError(
                f"n must be at most the {available} available dates; found n = {n}"
            )
        rng, formats = random.Random(seed), list(DATE_FORMATS)
        texts: list[str] = []
        dates: list[datetime.date] = []
        seen = set(exclude)
        while len(dates) < n:
            date = datetime.date.fromordinal(rng.randint(first, last))
            fmt = rng.choice(formats)
            if date not in seen:
                seen.add(date)
                texts.append(DATE_FORMATS[fmt](date))
                dates.append(date)
        return texts, dates

    def split(
        self, n_train: PositiveInt, n_test: PositiveInt, seed: NonNegativeInt = 0
    ) -> tuple[SequencePairs, SequencePairs, list[str]]:
        """Training and held-out sets, and the held-out sources as text; no held-out
        *date* occurs in training, in any format. The held-out set depends on
        ``n_test`` and ``seed`` only, and a smaller training set is the beginning of a
        larger one."""
        test_texts, test_dates = self.sample(n_test, seed)
        train_texts, train_dates = self.sample(
            n_train, seed + 1, exclude=frozenset(test_dates)
        )
        return (
            self.pairs(train_texts, train_dates),
            self.pairs(test_texts, test_dates),
            test_texts,
        )
