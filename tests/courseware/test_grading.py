"""Grading a class: every attack of issue 17 is caught, bad files hurt no one else, the
sandbox limits the code, the gradebook records everything. (That the sandbox hides the book,
SANDBOX_VIEW, is graded in test_grading_attacks.py's hostile class, as root and as an ordinary user.)

One class of chapter-9 submissions is graded once (``-j 2``, through the command line);
the tests read its printed output, CSV, JSON and feedback files.
"""
import contextlib
import copy
import csv
import io
import json
import os
from pathlib import Path

import nbformat
import pytest
import torch

from courseware.__main__ import main
from courseware.exercises import coding_exercises
from courseware.grading import sandbox
from courseware.grading.grader import find_master, grade_all, load_masters, student_id
from courseware.grading.results import plain_text, read_outcome
from courseware.grading.scan import review_flags

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
MASTER = CHAPTERS / "09_attention.ipynb"
EXERCISES = [e.id for e in coding_exercises(nbformat.read(MASTER, as_version=4))]
FIRST = EXERCISES[0]  # the exercise every CLASS submission edits
assert FIRST == "ex-att-softmax-backward"
FUNCTION = "my_masked_softmax_backward"
SEED = 1234

# What the sandboxed code checks about its own world; any breach raises, so the exercise FAILs.
# test_grading_attacks.py grades it (student "sandbox-view") as root, through the same command line
# with the same -j 2 and --timeout 5 as this module's class, and again as an ordinary user.
SANDBOX_VIEW = f"""
import os, socket, tempfile
seen = [p for p in ({str(CHAPTERS)!r}, {str(CHAPTERS.parent / 'lib')!r}, {str(Path(__file__))!r}, '/etc/passwd')
        if os.path.exists(p)] + [p for p in (os.listdir('/root') if os.path.isdir('/root') else []) if p != '.pyenv']
assert not seen, f"the sandbox shows {{seen}}"
assert os.getuid() not in (0, {os.getuid()}) and os.getgid() == os.getuid(), os.getuid()  # a uid of its own
assert os.listdir('.') == [], os.listdir('.')
open('scratch.txt', 'w').write('the working directory is writable')  # and so is /tmp:
tempfile.NamedTemporaryFile().close()
for folder in ('/usr', os.path.dirname(os.__file__), '/job'):
    try:
        tempfile.NamedTemporaryFile(dir=folder)
    except OSError:
        pass
    else:
        raise AssertionError(folder + ' is writable')
try:
    socket.create_connection(('1.1.1.1', 53), timeout=2)
except OSError:
    pass
else:
    raise AssertionError('the network is reachable')
try:
    import lib
except ImportError:
    pass
else:
    raise AssertionError('lib is importable')
"""


def _submission(edit=None, metadata=True):
    notebook = nbformat.read(MASTER, as_version=4)
    if metadata:
        notebook.metadata["exercises"] = {"master": MASTER.stem}
    if edit is not None:
        exercise = coding_exercises(notebook)[0]
        cell = next(c for c in notebook.cells if c.get("id") == exercise.solution_cell)
        cell.source = edit(cell.source)
    return notebook


WRONG = ("import torch\ndef my_masked_softmax_backward(scores, valid_lens, grad_weights):\n"  # the mask forgotten
         "    w = torch.softmax(scores, -1)\n"
         "    return w * (grad_weights - (grad_weights * w).sum(-1, keepdim=True))\n")
CLASS = {  # student → (notebook or raw text, the first exercise's expected verdict, text its line must hold)
    "right": (_submission(), "PASS", "correct"),
    "right-loops": (_submission(lambda s: (
        "import math, torch\n"
        "def my_masked_softmax_backward(scores, valid_lens, grad_weights):\n"
        "    out = torch.zeros_like(scores)\n"
        "    for b, n in enumerate(valid_lens.tolist()):\n"
        "        if n:\n"
        "            exps = (scores[b, :, :n] - scores[b, :, :n].max(-1, keepdim=True).values).exp()\n"
        "            w, g = exps / exps.sum(-1, keepdim=True), grad_weights[b, :, :n]\n"
        "            out[b, :, :n] = w * (g - (g * w).sum(-1, keepdim=True))\n"
        "    return out\n")), "PASS", "correct"),
    "wrong": (_submission(lambda s: WRONG), "FAIL", "the softmax of the whole row"),
    "in-place": (_submission(lambda s: (  # the right gradient, but the caller's scores are overwritten
        "import torch\n"
        "def my_masked_softmax_backward(scores, valid_lens, grad_weights):\n"
        "    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]\n"
        "    w = torch.softmax(scores.masked_fill_(~keep, -1e30), -1) * keep\n"
        "    return w * (grad_weights - (grad_weights * w).sum(-1, keepdim=True))\n")),
        "FAIL", "changed its argument 1 in place"),
    "wrong-again": (_submission(lambda s: WRONG), "FAIL", "the softmax of the whole row"),
    "lib-import": (_submission(lambda s: "from courseware.checks.attention import masked_softmax_backward_by_autograd as "
                                         "my_masked_softmax_backward\n"),  # the checker's own answer
                   "FAIL", "REVIEW: uses the book's checkers (courseware)"),
    "read-master": (_submission(lambda s: f"exec(open({str(MASTER)!r}).read())\n" + s), "FAIL",
                    "REVIEW: runs code from a string (exec); opens files (open); mentions a notebook file"),
    "proc": (_submission(lambda s: "import os\nos.listdir('/proc/1')\n" + s), "PASS", "REVIEW: mentions /proc"),
    "os-exit": (_submission(lambda s: s + "\nimport os\nos._exit(0)\n"), "FAIL", "your code stopped the kernel"),
    "loop": (_submission(lambda s: s + "\nwhile True:\n    pass\n"), "FAIL", "timed out after 5 s"),
    "orphan": (_submission(lambda s: s + "\nimport subprocess\nsubprocess.Popen(['setsid', 'sleep', '900'])\n"),
               "PASS", "REVIEW: runs programs (subprocess)"),
    "fork-bomb": (_submission(lambda s: s + "\nimport os, time\nfor _ in range(500):\n"
                                            "    if os.fork() == 0:\n        time.sleep(60)\n"),
                  "FAIL", "BlockingIOError"),
    "memory": (_submission(lambda s: s + "\nimport torch\nhog = torch.ones(1 << 30, dtype=torch.float64)\n"),
               "FAIL", "allocate"),
    "fake-torch": (_submission(lambda s: s + "\nimport sys, types\nsys.modules['torch'] = types.ModuleType('t')\n"),
                   "PASS", "REVIEW: touches sys.modules"),
    "subclass": (_submission(lambda s: s + "\nimport torch\nclass Sneaky(torch.Tensor):\n    pass\n"
                                           "_right = my_masked_softmax_backward\n"
                                           "def my_masked_softmax_backward(*a):\n"
                                           "    return _right(*a).as_subclass(Sneaky)\n"),
                 "FAIL", "plain torch.Tensor; it returned Sneaky"),
    "meta": (_submission(lambda s: "import torch\ndef my_masked_softmax_backward(s, v, g):\n"
                                   "    return torch.empty(s.shape, device='meta')\n"), "FAIL", "meta device"),
    "ansi": (_submission(lambda s: "raise ValueError('\\x1b[31mred\\x1b[0m')\n"), "FAIL", "ValueError: red"),
    "no-ids": (None, "PASS", "correct"),
    "dotdot": (_submission(), "ERROR", "'../09_attention', which is not a chapter"),
    "absolute": (_submission(), "ERROR", "'<book>/chapters/09_attention', which is not a chapter"),  # no host path
    "truncated": (MASTER.read_text()[:4000], "ERROR", "not a readable notebook"),
    "nbformat99": (json.dumps({"nbformat": 99, "nbformat_minor": 0, "metadata": {}, "cells": []}), "ERROR",
                   "not an nbformat 4 notebook (nbformat 99)"),
    "nbformat3": (json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": []}), "ERROR",
                  "not an nbformat 4 notebook (nbformat 3); open it in Jupyter"),
}


def _write_class(folder: Path) -> None:
    for student, (content, _, _) in CLASS.items():
        path = folder / student / "09_attention.ipynb"
        path.parent.mkdir(parents=True)
        if student == "no-ids":  # nbformat 4.4, as older Jupyter writes it: no cell ids
            raw = json.loads(MASTER.read_text())
            raw["nbformat_minor"] = 4
            for cell in raw["cells"]:
                cell.pop("id", None)
            path.write_text(json.dumps(raw))
        elif isinstance(content, str):
            path.write_text(content)
        else:
            notebook = copy.deepcopy(content)
            if student in ("dotdot", "absolute"):
                notebook.metadata["exercises"] = {
                    "master": "../09_attention" if student == "dotdot" else str(MASTER.with_suffix(""))}
            nbformat.write(notebook, path)


def _sleepers() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().split(b"\0")[:2] == [b"sleep", b"900"]:
                found.append(cmdline.parent.name)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    _write_class(folder / "submissions")
    out = folder / "out"
    out.mkdir()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["grade", str(folder / "submissions"), "-j", "2", "--timeout", "5", "--seed", str(SEED),
                     "--csv", str(out / "grades.csv"), "--json", str(out / "grades.json"),
                     "--feedback", str(out / "feedback")])
    rows = list(csv.DictReader((out / "grades.csv").open()))
    return {"code": code, "printed": printed.getvalue(), "rows": rows,
            "json": json.loads((out / "grades.json").read_text()), "feedback": out / "feedback"}


@pytest.mark.parametrize("student", list(CLASS))
def test_every_submission_gets_its_own_verdict_with_a_reason(student, graded):
    _, verdict, text = CLASS[student]
    rows = [row for row in graded["rows"] if row["student"] == student]
    first = rows[0]
    assert first["verdict"] == verdict and first["seed"] == str(SEED), first
    assert text in first["message"] + " REVIEW: " + first["review"], first
    assert "\x1b" not in first["message"]
    if verdict != "ERROR":  # one exercise's crash never costs the other
        assert [row["exercise"] for row in rows] == EXERCISES and all(r["verdict"] == "PASS" for r in rows[1:]), rows


def test_the_class_run_exits_non_zero_streams_and_leaves_no_process(graded):
    assert graded["code"] == 1
    assert graded["printed"].count("score ") == len(CLASS)
    assert _sleepers() == [], "a process started by a submission outlived grading"


def test_the_same_seed_replays_the_same_inputs(graded):
    messages = {row["student"]: row["message"] for row in graded["rows"] if row["exercise"] == FIRST}
    assert messages["wrong"] == messages["wrong-again"]


def test_the_gradebook_has_paths_relative_to_the_folder_and_feedback_per_student(graded):
    by_student = {record["student"]: record for record in graded["json"]}
    assert set(by_student) == set(CLASS)
    assert by_student["right"]["submission"] == "right/09_attention.ipynb" and by_student["right"]["score"] == f"{len(EXERCISES)}/{len(EXERCISES)}"
    assert by_student["truncated"]["score"] == "error" and by_student["truncated"]["error"]
    [path] = graded["feedback"].glob("lib-import-09_attention-*.md")
    feedback = path.read_text()
    assert "**FAIL** `ex-att-softmax-backward`" in feedback and "flagged for your instructor" in feedback


def test_without_bubblewrap_the_grader_refuses_unless_unsafe(monkeypatch, tmp_path, capsys):
    path = tmp_path / "alice" / "09_attention.ipynb"
    path.parent.mkdir()
    nbformat.write(_submission(), path)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert main(["grade", str(path)]) == 2
    assert "bubblewrap (bwrap) is not installed" in capsys.readouterr().err
    [report] = grade_all([path], load_masters(CHAPTERS), unsafe=True)
    assert report.all_passed, report.lines()


def test_review_flags_follow_aliases_and_forbidden_calls():
    forbidden = ("torch.nn.functional.layer_norm", ".backward")
    assert review_flags("import torch.nn.functional as F\ny = F.layer_norm", forbidden) == [
        "uses torch.nn.functional.layer_norm, which the exercise forbids"]
    assert review_flags("from torch.nn import functional\nfunctional.layer_norm(x)", forbidden)
    assert review_flags("import torch\ngetattr(torch.nn.functional, 'layer_norm')", forbidden)
    assert review_flags("loss.backward()", forbidden) == ["uses backward, which the exercise forbids"]
    assert review_flags("import torch\ndef f(x):\n    return torch.tanh(x)\n", forbidden) == []
    assert review_flags("import sys\nsys.modules['torch'] = None") == ["touches sys.modules"]
    assert review_flags("import builtins") == ["touches builtins"]
    assert review_flags("import lib.part4_attention.attention") == [
        "uses the book's own code (lib), which the exercises ask you to write yourself"]
    assert review_flags("def broken(:") == []
    with pytest.raises(TypeError, match="source must be a str"):
        review_flags(None)


def _frame(record, blob=b"", problem="", ended=None):
    raw = (record if isinstance(record, str) else json.dumps(record)).encode()
    return {"id": "e", "ended": ended or {"ended": "exit", "code": 0}, "json": len(raw), "bin": len(blob),
            "problem": problem}, raw, blob


def test_malformed_probe_output_is_a_fail_never_a_crash():
    good = {"results": [{"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8}]}
    [tensor] = read_outcome(_frame(good, torch.tensor([1.0, 2.0]).numpy().tobytes()), "f", 1, 5).results
    assert tensor.dtype == torch.float32 and tensor.tolist() == [1.0, 2.0]
    twice = {"results": [{"dtype": "float32", "shape": [2], "offset": 0, "nbytes": 8}] * 2}  # one blob, read twice
    for bad, blob in (("not json", b""), ({"results": []}, b""), ("[" * 100_000 + "]" * 100_000, b""),
                      ({"results": [{"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}]}, b"\0" * 8),
                      ({"results": [{"dtype": "float64", "shape": [4], "offset": 0, "nbytes": 32}]}, b"\0" * 8),
                      ({"results": [{"dtype": "float64", "shape": [-1], "offset": 0, "nbytes": -8}]}, b"\0" * 8),
                      ({"results": [{"dtype": "float64", "shape": [1], "offset": True, "nbytes": 8}]}, b"\0" * 16),
                      ({"results": [{"error": 3}]}, b""), ([1, 2], b""), (twice, b"\0" * 8)):
        outcome = read_outcome(_frame(bad, blob), "f", 1 + (bad is twice), 5)
        assert "did your code tamper" in outcome.problem and outcome.review, bad
    outcome = read_outcome(_frame("", problem="e.bin is not a regular file"), "f", 1, 5)
    assert "e.bin is not a regular file" in outcome.problem and outcome.review
    assert read_outcome(_frame("", ended={"ended": "timeout"}), "f", 1, 5).problem == "timed out after 5 s"
    assert "probe stopped" in read_outcome(None, "f", 1, 5).problem
    assert plain_text("caf\udce9 \u202eevil\u200b") == "caf\\xe9 \\u202eevil\\u200b"
    assert plain_text("\ud800") == "\\ud800"


def test_masters_come_only_from_the_books_chapters():
    masters = load_masters(CHAPTERS)
    notebook = nbformat.v4.new_notebook()
    for name in ("../09_attention", "/etc/passwd", "09_attention/../x", 9, "99_nothing"):
        notebook.metadata["exercises"] = {"master": name}
        with pytest.raises(ValueError, match="not a chapter of the book"):
            find_master(notebook, "x.ipynb", masters)
    notebook.metadata = {}
    assert find_master(notebook, "09_attention-bob.ipynb", masters).name == "09_attention"
    assert student_id(Path("/c/alice/hw.ipynb"), Path("/c")) == "alice"
    assert student_id(Path("/c/bob.ipynb"), Path("/c")) == "bob"
    assert plain_text("\x1b[31mred\x1b[0m\nnext") == "red next"
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        grade_all([], masters, jobs=0)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        grade_all([], masters, timeout=0)


def test_a_sandbox_that_cannot_start_is_the_graders_error_not_the_students(monkeypatch, tmp_path):
    path = tmp_path / "alice.ipynb"
    nbformat.write(_submission(), path)
    monkeypatch.setattr(sandbox, "probe_command", lambda *args, **kwargs: [
        "sh", "-c", "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1"])
    [report] = grade_all([path], load_masters(CHAPTERS))
    assert report.score == "error" and "bwrap: setting up uid map: Permission denied" in report.error


def test_an_unreadable_file_or_a_grader_failure_costs_only_that_submission(monkeypatch, tmp_path):
    from courseware.grading import grader

    (tmp_path / "broken-link.ipynb").symlink_to(tmp_path / "nowhere.ipynb")
    nbformat.write(_submission(), tmp_path / "carol.ipynb")
    monkeypatch.setattr(grader, "solution_sources", lambda *args: 1 / 0)
    reports = {report.student: report for report in grade_all([tmp_path], load_masters(CHAPTERS))}
    assert [report.score for report in reports.values()] == ["error", "error"]
    assert "symbolic link" in reports["broken-link"].error and "ZeroDivisionError" in reports["carol"].error


HOG = ("\nimport os, time\ntry:\n    while True:  # fork until the process limit says no, then hold them all\n"
       "        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n"
       "except BlockingIOError:\n    time.sleep(60)\n")


def test_a_fork_bomb_holding_its_process_limit_never_stops_the_submission_graded_beside_it(tmp_path):
    # Graded two at a time, in name order. The patient student's first exercise sleeps 7 s; the
    # hog starts when the quick student is done (~3 s), so it counts the patient's processes when
    # its limit is set, fills that limit and holds it until its 10 s timeout. The patient's second
    # exercise is forked inside that window: had both run as one uid, that fork would fail.
    nbformat.write(_submission(lambda s: "import time\ntime.sleep(7)\n" + s), tmp_path / "a-patient.ipynb")
    nbformat.write(_submission(), tmp_path / "b-quick.ipynb")
    nbformat.write(_submission(lambda s: s + HOG), tmp_path / "c-hog.ipynb")
    reports = {r.student: r for r in grade_all([tmp_path], load_masters(CHAPTERS), jobs=2, timeout=10)}
    n = len(EXERCISES)
    assert reports["a-patient"].score == f"{n}/{n}", reports["a-patient"].lines()
    assert reports["c-hog"].score == f"{n - 1}/{n}" and "timed out" in reports["c-hog"].lines()[1], reports["c-hog"].lines()


def test_the_sample_class_mixes_right_wrong_broken_and_cheating(tmp_path):
    from courseware.grading.sample_class import KINDS, write_class

    paths = write_class(tmp_path, students=len(KINDS))
    assert len(paths) == len(KINDS) and {p.parent.name.split("-", 1)[1] for p in paths} == set(KINDS)
    with pytest.raises(ValueError, match="students must be a positive integer"):
        write_class(tmp_path / "none", students=0)
