"""The gradebook: CSV and JSON files, per-student feedback, written as each submission finishes.

CSV has one row per exercise of each submission (one row with verdict ``ERROR`` for a
submission that could not be graded), so it loads into any spreadsheet and pivots to
one row per student. JSON holds the same, one object per submission. Names come from the
class folder, so a cell that a spreadsheet would read as a formula (``=``, ``+``, ``-``,
``@``) starts with an apostrophe, and feedback file names are made of safe characters,
bounded in length and distinct for distinct submissions. A file that cannot be written for
one submission is reported and costs only that submission. Call :meth:`Gradebook.close` at the
end: the JSON file is rewritten at most every :data:`JSON_SECONDS` seconds while grading.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import time
from pathlib import Path

from courseware.grading.grader import Report

CSV_COLUMNS = ("student", "submission", "chapter", "exercise", "verdict", "review", "message", "score", "seed",
               "seconds")


def report_record(report: Report) -> dict:
    """One submission as a JSON-able dict."""
    return {
        "student": report.student, "submission": report.submission, "chapter": report.master,
        "score": report.score, "points": report.points, "exercises": len(report.verdicts),
        "seed": report.seed, "seconds": round(report.seconds, 2), "error": report.error,
        "verdicts": [{"exercise": v.exercise, "verdict": "PASS" if v.passed else "FAIL", "message": v.message,
                      "review": v.review} for v in report.verdicts],
    }


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula
FEEDBACK_STEM = 100  # characters of a feedback file's name before its hash
JSON_SECONDS = 2.0  # at most one rewrite of the JSON gradebook per this many seconds, and one at the end


def spreadsheet_safe(value):
    """``value``, with an apostrophe in front when it is text a spreadsheet would run as a formula."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def csv_rows(report: Report) -> list[dict]:
    """The CSV rows of one submission."""
    common = {"student": report.student, "submission": report.submission, "chapter": report.master,
              "score": report.score, "seed": report.seed, "seconds": f"{report.seconds:.2f}"}
    if report.error:
        rows = [{**common, "exercise": "", "verdict": "ERROR", "review": "", "message": report.error}]
    else:
        rows = [{**common, "exercise": v.exercise, "verdict": "PASS" if v.passed else "FAIL",
                 "review": "; ".join(v.review), "message": v.message} for v in report.verdicts]
    return [{key: spreadsheet_safe(value) for key, value in row.items()} for row in rows]


def feedback_name(report: Report) -> str:
    """The feedback file of one submission: ``<student>-<notebook>-<hash>.md`` in letters, digits,
    ``.``, ``_`` and ``-``, at most about 120 characters. The hash of the submission's path keeps
    every submission's file its own (``bob-smith/x`` and ``bob/smith-x``, three submissions of
    one student, names that print alike)."""
    readable = report.submission.removesuffix(".ipynb").replace("/", "-")  # the student's folder, if any, first
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", readable).lstrip(".-")[:FEEDBACK_STEM] or "submission"
    return f"{safe}-{report.key or hashlib.sha256(report.submission.encode()).hexdigest()[:10]}.md"


def feedback_markdown(report: Report) -> str:
    """The feedback file a student receives."""
    lines = [f"# Feedback: {report.master or report.submission}", "",
             f"Submission `{report.submission}` — score **{report.score}** (inputs seed {report.seed}).", ""]
    if report.error:
        return "\n".join(lines + [f"This submission could not be graded: {report.error}.", ""])
    for verdict in report.verdicts:
        lines.append(f"- **{'PASS' if verdict.passed else 'FAIL'}** `{verdict.exercise}`: {verdict.message}")
        if verdict.review:
            lines.append(f"  - flagged for your instructor to review: {'; '.join(verdict.review)}")
    return "\n".join(lines + [""])


class Gradebook:
    """Files updated after every finished submission.

    Parameters
    ----------
    csv_path, json_path : Path, optional
        The CSV and JSON gradebooks (each written only when given).
    feedback_dir : Path, optional
        Where each submission's feedback file (:func:`feedback_name`) goes.
    """

    def __init__(self, csv_path: Path | None = None, json_path: Path | None = None,
                 feedback_dir: Path | None = None):
        self.csv_path, self.json_path, self.feedback_dir = csv_path, json_path, feedback_dir
        self.records: list[dict] = []
        self.json_written = -JSON_SECONDS  # monotonic time of the last JSON write
        self.failures: list[str] = []  # what could not be written, one line per file and submission
        if csv_path is not None:
            with open(csv_path, "w", newline="", encoding="utf-8") as handle:
                csv.DictWriter(handle, CSV_COLUMNS).writeheader()
        if feedback_dir is not None:
            Path(feedback_dir).mkdir(parents=True, exist_ok=True)

    def _csv(self, report: Report) -> None:
        rows = csv_rows(report)
        with open(self.csv_path, "a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, CSV_COLUMNS).writerows(rows)

    def _json(self, report: Report) -> None:
        record = report_record(report)
        json.dumps(record, ensure_ascii=False).encode("utf-8")  # a record that cannot be written fails alone
        self.records.append(record)
        # The whole list is rewritten, so not after every report: thousands of junk entries in a
        # class folder would make that quadratic. An interrupted run keeps all but the last seconds.
        if time.monotonic() - self.json_written >= JSON_SECONDS:
            self._write_json()

    def _write_json(self) -> None:
        partial = Path(f"{self.json_path}.partial")
        partial.write_text(json.dumps(self.records, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(partial, self.json_path)
        self.json_written = time.monotonic()

    def close(self) -> None:
        """Write what is still unwritten (the JSON gradebook's last records)."""
        if self.json_path is not None:
            try:
                self._write_json()
            except (OSError, ValueError) as error:
                self.failures.append(f"the JSON gradebook could not be written ({type(error).__name__}: {error})")

    def _feedback(self, report: Report) -> None:
        (Path(self.feedback_dir) / feedback_name(report)).write_text(feedback_markdown(report), encoding="utf-8")

    def add(self, report: Report) -> None:
        """Append one finished submission to every file; a file that fails is noted in ``failures``."""
        for kind, target, write in (("CSV row", self.csv_path, self._csv), ("JSON record", self.json_path, self._json),
                                    ("feedback file", self.feedback_dir, self._feedback)):
            if target is None:
                continue
            try:
                write(report)
            except (OSError, ValueError) as error:
                self.failures.append(f"{report.submission}: the {kind} could not be written "
                                     f"({type(error).__name__}: {error})")
