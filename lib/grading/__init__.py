"""Grading submissions: sandboxed runs, integrity flags, a gradebook.

* :mod:`lib.grading.grader` — grade one submission or a whole class (in parallel);
* :mod:`lib.grading.sandbox` — the bubblewrap sandbox each submission runs in;
* :mod:`lib.grading.probe` — the only grading code that runs inside the sandbox;
* :mod:`lib.grading.results` — reads the probe's output without trusting it;
* :mod:`lib.grading.scan` — static REVIEW flags on solution cells;
* :mod:`lib.grading.gradebook` — CSV, JSON and per-student feedback files;
* :mod:`lib.grading.sample_class` — a made-up class of right, wrong, broken and cheating
  submissions to try the grader on.

The command line is ``python -m lib.exercises grade`` (see :mod:`lib.exercises`).
"""
