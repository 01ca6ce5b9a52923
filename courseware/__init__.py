"""Courseware built on the book's lib: the exercises' checkers, the student version, grading.

* :mod:`courseware.checks` — a check cell's ``check_*`` functions, one module per chapter;
* :mod:`courseware.exercises` — where the coding exercises are, and the hand-out version;
* :mod:`courseware.grading` — sandboxed grading of submitted notebooks and the gradebook;
* :mod:`courseware.probe` — what runs a submission's function inside the sandbox (standard
  library and torch only: it is copied there alone); the checkers share its in-place test;
* ``python -m courseware`` (:mod:`courseware.__main__`) — the instructor's command line.

It sits beside ``lib``, not in it: lib (what a reader imports to learn from) never imports
courseware, and a checker imports lib to compare a student's answer with the book's.
"""
