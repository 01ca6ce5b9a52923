"""The instructor's command line: hand out the student version, grade what comes back.

Commands (``python -m courseware --help``)::

    python -m courseware student [--chapters chapters] [--out student]
    python -m courseware student-repo OUT
    python -m courseware nbgrader [CHAPTER ...] [--out _build/nbgrader-course]
    python -m courseware grade SUBMISSION_OR_FOLDER [...] [-j N] [--seed S]
        [--csv F] [--json F] [--feedback DIR] [--timeout S] [--unsafe]

The exercises and the student version are :mod:`courseware.exercises`; grading is
:mod:`courseware.grading`. Both import only downwards (checks, then lib), so this module,
which uses both, is the only place that sees them together.
"""
from __future__ import annotations

import argparse
import atexit
import os
import sys
import tempfile
from pathlib import Path

# lib imports matplotlib, which wants a writable config folder and otherwise warns on stderr,
# naming the account's home; an instructor's grading account may have none, and a grader's
# output must not carry paths. It draws nothing, so a private folder for this run will do.
if "MPLCONFIGDIR" not in os.environ:
    _matplotlib_config = tempfile.TemporaryDirectory(prefix="book-matplotlib-")
    atexit.register(_matplotlib_config.cleanup)
    os.environ["MPLCONFIGDIR"] = _matplotlib_config.name

from courseware.exercises import BOOK_CHAPTERS, write_student_repo, write_student_versions
from courseware.grading.gradebook import Gradebook
from courseware.grading.grader import CELL_TIMEOUT, grade_all, load_masters
from courseware.grading.nbgrader_export import write_course
from courseware.grading.sandbox import SandboxUnavailable


def table(reports) -> str:
    """One row per submission, one column per exercise (PASS or FAIL, +REVIEW when flagged)."""
    exercises = sorted({v.exercise for r in reports for v in r.verdicts})
    header = ["submission", "student", *exercises, "score"]
    rows = []
    for report in reports:
        verdicts = {v.exercise: ("PASS" if v.passed else "FAIL") + ("+REVIEW" if v.review else "")
                    for v in report.verdicts}
        rows.append([report.submission, report.student, *[verdicts.get(e, "—") for e in exercises], report.score])
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows])


def main(argv=None) -> int:
    """``python -m courseware student|grade ...``; the exit code of ``grade`` is 0 only when
    every exercise of every submission passed without a REVIEW flag."""
    parser = argparse.ArgumentParser(prog="python -m courseware", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    student = commands.add_parser("student", help="write the student version of every chapter")
    student.add_argument("--chapters", type=Path, default=Path("chapters"))
    student.add_argument("--out", type=Path, default=Path("student"))
    repo = commands.add_parser("student-repo", help="write a student repository (no master notebooks) to a new folder")
    repo.add_argument("out", type=Path)
    course = commands.add_parser("nbgrader", help="write an nbgrader course (source notebooks, nbgrader_config.py)")
    course.add_argument("names", nargs="*", metavar="CHAPTER", help="e.g. 09_attention (default: every chapter)")
    course.add_argument("--out", type=Path, default=Path("_build/nbgrader-course"))
    grader = commands.add_parser("grade", help="grade submitted notebooks (files or folders) against the book's chapters")
    grader.add_argument("submissions", type=Path, nargs="+")
    grader.add_argument("-j", "--jobs", type=int, default=1, help="submissions graded at the same time")
    grader.add_argument("--seed", type=int, help="replay the inputs of a recorded seed")
    grader.add_argument("--csv", type=Path, help="write the gradebook as CSV (one row per exercise)")
    grader.add_argument("--json", type=Path, help="write the gradebook as JSON (one object per submission)")
    grader.add_argument("--feedback", type=Path, help="folder for one markdown feedback file per submission")
    grader.add_argument("--timeout", type=int, default=CELL_TIMEOUT, help="seconds each exercise may run")
    grader.add_argument("--unsafe", action="store_true",
                        help="run submissions without the bubblewrap sandbox (only for code you trust)")
    args = parser.parse_args(argv)
    if args.command == "student":
        for path in write_student_versions(args.chapters, args.out):
            print(f"wrote {path}")
        return 0
    if args.command == "nbgrader":
        try:
            written = write_course(BOOK_CHAPTERS, args.out, args.names)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}")
        print(f"then, in {args.out}: nbgrader generate_assignment <chapter> and nbgrader autograde <chapter>")
        return 0
    if args.command == "student-repo":
        print(f"wrote the student repository to {write_student_repo(args.out)}")
        return 0
    if args.unsafe:
        print("WARNING: --unsafe: submissions run WITHOUT a sandbox, with your rights, files and network.",
              file=sys.stderr)
    try:
        gradebook = Gradebook(args.csv, args.json, args.feedback)
    except OSError as error:
        print(f"error: cannot write the gradebook: {error}", file=sys.stderr)
        return 2

    def finished(report) -> None:
        print("\n".join(report.lines()), flush=True)
        gradebook.add(report)

    try:
        reports = grade_all(args.submissions, load_masters(BOOK_CHAPTERS), jobs=args.jobs, seed=args.seed,
                            unsafe=args.unsafe, timeout=args.timeout, on_report=finished)
    except (SandboxUnavailable, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        gradebook.close()
    for failure in gradebook.failures:
        print(f"error: {failure}", file=sys.stderr)
    if not reports:
        print("error: no notebook to grade", file=sys.stderr)
        return 2
    if len(reports) > 1:
        print("\n" + table(reports))
    return 0 if all(report.all_passed for report in reports) and not gradebook.failures else 1


if __name__ == "__main__":
    sys.exit(main())
