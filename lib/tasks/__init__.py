"""Synthetic tasks the chapters train on, generated in code so that the book needs no
download.

* :mod:`lib.tasks.recall`: remember the first symbol across distractors (chapter 4);
* :mod:`lib.tasks.dates`: dates in human formats to ISO 8601 (chapter 10);
* :mod:`lib.tasks.sorting`: sort numbers by pointing at their positions (chapter 10);
* :mod:`lib.tasks.reversal`: reverse or copy a string of digits (chapters 10 and 11);
* :mod:`lib.tasks.babi`: bAbI-style stories with questions (chapter 12).

They are foundations: any chapter's module may import them, and they import
only :mod:`lib.training` and :mod:`lib.checked`. The classes are re-exported
here, so ``from lib.tasks import ReversalTask`` works.
"""

from lib.tasks.babi import TASKS, VOCABULARY, Stories, Story, generate
from lib.tasks.dates import DATE_FORMATS, DateTask
from lib.tasks.recall import MemoryTask
from lib.tasks.reversal import CopyTask, ReversalTask
from lib.tasks.sorting import SortingTask

__all__ = [
    "CopyTask",
    "DATE_FORMATS",
    "DateTask",
    "MemoryTask",
    "ReversalTask",
    "SortingTask",
    "TASKS",
    "VOCABULARY",
    "Stories",
    "Story",
    "generate",
]
