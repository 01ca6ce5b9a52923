"""The gradebook: CSV and JSON files, per-student feedback, written as each submission finishes.

CSV has one row per exercise of each submission (one row with verdict ``ERROR`` for a
submission that could not be graded), so it loads into any spreadsheet and pivots to
one row per student. JSON holds the same, one object per submission.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from lib.grading.grader import Report

CSV_COLUMNS = ("student", "submission", "chapter", "exercise", "verdict", "review", "message", "score", "seed",
               "seconds")


def report_record(report: Report) -> dict:
    """One submission as a JSON-able dict."""
    return {
        "student": report.student, "submission": str(report.submission), "chapter": report.master,
        "score": report.score, "points": report.points, "exercises": len(report.verdicts),
        "seed": report.seed, "seconds": round(report.seconds, 2), "error": report.error,
        "verdicts": [{"exercise": v.exercise, "verdict": "PASS" if v.passed else "FAIL", "message": v.message,
                      "review": v.review} for v in report.verdicts],
    }


def csv_rows(report: Report) -> list[dict]:
    """The CSV rows of one submission."""
    common = {"student": report.student, "submission": str(report.submission), "chapter": report.master,
              "score": report.score, "seed": report.seed, "seconds": f"{report.seconds:.2f}"}
    if report.error:
        return [{**common, "exercise": "", "verdict": "ERROR", "review": "", "message": report.error}]
    return [{**common, "exercise": v.exercise, "verdict": "PASS" if v.passed else "FAIL",
             "review": "; ".join(v.review), "message": v.message} for v in report.verdicts]


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
        Where ``<student>-<chapter>.md`` feedback files go.
    """

    def __init__(self, csv_path: Path | None = None, json_path: Path | None = None,
                 feedback_dir: Path | None = None):
        self.csv_path, self.json_path, self.feedback_dir = csv_path, json_path, feedback_dir
        self.records: list[dict] = []
        if csv_path is not None:
            with open(csv_path, "w", newline="", encoding="utf-8") as handle:
                csv.DictWriter(handle, CSV_COLUMNS).writeheader()
        if feedback_dir is not None:
            Path(feedback_dir).mkdir(parents=True, exist_ok=True)

    def add(self, report: Report) -> None:
        """Append one finished submission to every file."""
        if self.csv_path is not None:
            with open(self.csv_path, "a", newline="", encoding="utf-8") as handle:
                csv.DictWriter(handle, CSV_COLUMNS).writerows(csv_rows(report))
        if self.json_path is not None:
            self.records.append(report_record(report))
            partial = Path(f"{self.json_path}.partial")
            partial.write_text(json.dumps(self.records, indent=1, ensure_ascii=False), encoding="utf-8")
            os.replace(partial, self.json_path)
        if self.feedback_dir is not None:
            name = f"{report.student}-{report.master or Path(report.submission).stem}.md"
            (Path(self.feedback_dir) / name).write_text(feedback_markdown(report), encoding="utf-8")
