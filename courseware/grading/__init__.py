"""Grading submissions: sandboxed runs, integrity flags, a gradebook.

* :mod:`courseware.grading.grader` — grade one submission or a whole class (in parallel);
* :mod:`courseware.grading.sandbox` — the bubblewrap sandbox each submission runs in;
* :mod:`courseware.grading.results` — reads the output of the probe (:mod:`courseware.probe`,
  the only grading code that runs inside the sandbox) without trusting it;
* :mod:`courseware.grading.scan` — static REVIEW flags on solution cells;
* :mod:`courseware.grading.gradebook` — CSV, JSON and per-student feedback files;
* :mod:`courseware.grading.sample_class` — a made-up class of right, wrong, broken and cheating
  submissions to try the grader on.

The command line is ``python -m courseware grade`` (see :mod:`courseware.__main__`).
"""
