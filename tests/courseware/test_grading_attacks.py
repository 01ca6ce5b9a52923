"""Issue 28's attacks on the grader, graded through the command line as root and as an ordinary
user: the grader trusts no byte the sandbox writes, no name and no link in the class folder.

One hostile class folder is graded once per user. It holds submissions whose code attacks the
grader from inside the sandbox (links, a FIFO and a forged record in ``/out``, writes to the
probe's descriptors, a stopped probe, full disks, an escaped process) and entries an unzipped
class folder can hold (a FIFO, links to a master and to a secret, a linked folder, a Latin-1
name, a 240-character name, one student's three submissions, names a spreadsheet or a terminal
would run). Every test reads that run's printed output, CSV, JSON and feedback files.
"""
import contextlib
import csv
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import nbformat
import pytest

from courseware.grading import sandbox
from courseware.grading.grader import grade_all, load_masters
from test_grading import CHAPTERS, EXERCISES, FIRST, MASTER, SANDBOX_VIEW, _submission

ROOT = Path(__file__).resolve().parents[2]
ORDINARY_USER = "book-grader"
SECRET = "TOP-SECRET-7f3a9c1e-do-not-print"
TIMEOUT = 5
MASTER_LINE = "mean = (g * weights).sum(dim=-1, keepdim=True)"  # the master's answer

LOAD_CASES = "import json, os, torch\nn = len(torch.load('/job/0.pt', weights_only=True))\n"
RECORD = "json.dump(dict(results=[dict(dtype='uint8', shape=[48], offset=0, nbytes=48)] * n), "
ATTACKS = {  # student → (solution of the first exercise, its verdict, text its message must hold)
    "out-link": (LOAD_CASES + "os.symlink({secret!r}, '/out/%s.bin')\n" % FIRST
                 + RECORD + "open('/out/%s.json', 'w'))\nos._exit(0)\n" % FIRST,
                 "FAIL", "is not a regular file"),
    "out-fifo": ("import os\nos.mkfifo('/out/%s.json')\nos._exit(0)\n" % FIRST, "FAIL", "is not a regular file"),
    "out-deep": ("import os\nopen('/out/%s.json', 'w').write('[' * 200000)\nos._exit(0)\n" % FIRST,
                 "FAIL", "did your code tamper"),
    "forge": ("import os\nfor pid in (os.getppid(), 1):\n    for fd in (1, 2):\n        try:\n"
              "            open(f'/proc/{{pid}}/fd/{{fd}}', 'w').write('PASS forged score 3/3\\n')\n"
              "        except OSError:\n            pass\n{master}", "PASS", "correct"),
    "fill": ("import os\nwritten = {{}}\nfor folder in ('/out', '/tmp', '/scratch'):\n    written[folder] = 0\n"
             "    try:\n        for i in range(20):\n            with open(f'{{folder}}/fill{{i}}', 'wb') as f:\n"
             "                for _ in range(60):\n                    f.write(bytes(1 << 20))\n"
             "                    written[folder] += 1\n    except OSError:\n        pass\n"
             "for i in range(20):  # room for the probe's record of this failure\n"
             "    if os.path.exists(f'/out/fill{{i}}'):\n        os.remove(f'/out/fill{{i}}')\n"
             "raise RuntimeError(f'MB written: {{written}}')\n", "FAIL", "MB written"),
    "escape": ("import subprocess, sys\nsubprocess.Popen(['setsid', sys.executable, '-c', "
               "'while True: pass', 'escapee'])\n{master}", "PASS", "correct"),
    # What the submission sees: no book, masters or network, an unprivileged uid of its own, as either user.
    "sandbox-view": (SANDBOX_VIEW.replace("{", "{{").replace("}", "}}") + "{master}", "PASS", "correct"),
    # A folder it cannot read, named like a note from the grader: the probe still reports this exercise.
    "out-locked": ("import os\nname = '/out/GRADER NOTE - probe bug, record score 3 of 3'\nos.mkdir(name)\n"
                   "os.chmod(name, 0)\nraise RuntimeError('wrong')\n", "FAIL", "RuntimeError: wrong"),
    # The probe is the sandbox's init (pid 1): it ignores what its namespace sends, SIGINT included.
    "signals": ("import os, signal\nfor number in (signal.SIGINT, signal.SIGTERM, signal.SIGSTOP, signal.SIGKILL):\n"
                "    os.kill(os.getppid(), number)\n{master}", "PASS", "correct"),
}
# The escapee's neighbour: the second exercise of the "escape" student fails if it is still running.
NO_ESCAPEE = ("import os\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n    try:\n"
              "        command = open(f'/proc/{pid}/cmdline', 'rb').read()\n    except OSError:  # it ended\n"
              "        continue\n    if b'escapee' in command:\n"
              "        raise RuntimeError('an escaped process of the first exercise is still running')\n")
RIGHT = {"jos\xe9": b"jos\xe9", "a" * 240: b"a" * 240, "=2+3": b"=2+3", "evil\x1b[31m\u202e": None}


def _notebook(first_source: str, secret: Path = Path("/nowhere"), second_prefix: str = "") -> nbformat.NotebookNode:
    notebook = _submission()
    solutions = [c for c in notebook.cells if "solution" in c.metadata.get("tags", []) and c.cell_type == "code"]
    master = solutions[0].source
    solutions[0].source = first_source.format(secret=str(secret), master=master)
    solutions[1].source = second_prefix + solutions[1].source
    return notebook


def _write(path: Path, notebook) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)


def _hostile_class(folder: Path, secret: Path) -> None:
    for student, (source, _, _) in ATTACKS.items():
        _write(folder / student / "09_attention.ipynb",
               _notebook(source, secret, NO_ESCAPEE if student == "escape" else ""))
    for student, raw in RIGHT.items():
        _write(folder / (os.fsdecode(raw) if raw else student) / "09_attention.ipynb", _submission())
    for relative in ("trio/09_attention.ipynb", "trio/09_attention (1).ipynb", "trio/v2/09_attention.ipynb"):
        _write(folder / relative, _submission())
    odd = {"fifo": lambda p: os.mkfifo(p), "link-master": lambda p: p.symlink_to(MASTER),
           "link-secret": lambda p: p.symlink_to(secret)}
    for student, make in odd.items():
        (folder / student).mkdir()
        make(folder / student / "09_attention.ipynb")
    (folder / "linked-folder").symlink_to(folder / "trio", target_is_directory=True)
    # Two names a careless feedback scheme gives one file; a name that differs by an invisible character.
    _write(folder / "bob-smith" / "09_attention.ipynb", _submission())
    _write(folder / "bob" / "smith-09_attention.ipynb", _submission(lambda source: source + "\nraise ValueError\n"))
    _write(folder / "bob\u200b" / "09_attention.ipynb", _submission())
    (folder / "deep").mkdir()  # 1100 folders deep, as a zip can hold: os.walk would recurse that deep
    handle = os.open(folder / "deep", os.O_RDONLY)
    for _ in range(1100):
        os.mkdir("d", dir_fd=handle)
        handle, parent = os.open("d", os.O_RDONLY, dir_fd=handle), handle
        os.close(parent)
    os.close(handle)
    _write(folder / "locked" / "09_attention.ipynb", _submission())  # the fixture gives "locked" mode 000
    _write(folder / "hardlink-a" / "09_attention.ipynb", _submission())
    (folder / "hardlink-b").mkdir()
    os.link(folder / "hardlink-a" / "09_attention.ipynb", folder / "hardlink-b" / "09_attention.ipynb")


def _ordinary_user(work: Path) -> tuple[list[str], int, int]:
    """A command prefix that runs as an ordinary user, and that user's uid and gid.

    As root: the user ORDINARY_USER, created if missing. As an ordinary user: no prefix."""
    if os.geteuid() != 0:
        return [], os.getuid(), os.getgid()
    try:
        pwd.getpwnam(ORDINARY_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", ORDINARY_USER],
                       check=True)
    user = pwd.getpwnam(ORDINARY_USER)
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups"], user.pw_uid, user.pw_gid


def _packages_for(prefix: list[str], python: str, work: Path) -> Path:
    """This environment's packages, or a copy of them the ordinary user can read (a checkout
    under a folder only root may enter, such as /root, would keep them from that user)."""
    packages = Path(sysconfig.get_paths()["purelib"])
    probe = [*prefix, python, "-c", f"import sys; sys.path.insert(0, {str(packages)!r}); import torch"]
    if subprocess.run(probe, capture_output=True, cwd=work).returncode == 0:
        return packages
    copy = work / "packages"
    subprocess.run(["cp", "-r", "--no-preserve=mode,ownership", str(packages), str(copy)], check=True)
    return copy


def _fresh_copy(work: Path, prefix: list[str]) -> tuple[Path, Path]:
    """A fresh copy of the book (the files git knows, as they are in the work tree: what a clone
    of them would hold) and a virtual environment the ordinary user can run.

    The environment is made from the system's Python (the project's own ``.venv`` may have an
    interpreter only root can run, e.g. under ``/root``); a ``.pth`` file adds this
    environment's packages, as ``make setup`` would have installed them."""
    clone, venv = work / "book", work / "venv"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system_python = shutil.which(version, path="/usr/bin:/bin")
    assert system_python, f"the ordinary-user test needs the system's {version} (/usr/bin/{version})"
    subprocess.run([system_python, "-m", "venv", "--without-pip", str(venv)], check=True)
    packages = _packages_for(prefix, system_python, work)
    (next(venv.glob("lib/python*/site-packages")) / "book.pth").write_text(f"{packages}\n")
    (venv / ".installed").touch()  # make's stamp: the environment is set up
    return clone, venv


def _grade(command: list[str], out: Path, cwd: Path, home: Path) -> dict:
    run = subprocess.run(command, capture_output=True, cwd=cwd, timeout=900,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(home), "OMP_NUM_THREADS": "1"})
    return {"code": run.returncode, "printed": run.stdout.decode(), "errors": run.stderr.decode(),
            "rows": list(csv.DictReader((out / "grades.csv").open(encoding="utf-8"))),
            "records": json.loads((out / "grades.json").read_text(encoding="utf-8")),
            "feedback": {p.name: p.read_text(encoding="utf-8") for p in (out / "feedback").iterdir()},
            "csv_text": (out / "grades.csv").read_text(encoding="utf-8")}


@pytest.fixture(scope="module", params=["root", "ordinary user"])
def graded(request):
    """The hostile class graded as root (``python -m courseware grade``), or as an ordinary
    user by ``make grade`` in a fresh copy of the book."""
    if request.param == "root" and os.geteuid() != 0:
        pytest.skip("the grader runs as root only when the tests do")
    work = Path(tempfile.mkdtemp(prefix="attacks-"))
    try:
        work.chmod(0o755)
        folder, out = work / "class", work / "out"
        options = f"-j 2 --timeout {TIMEOUT} --csv {out}/grades.csv --json {out}/grades.json --feedback {out}/feedback"
        if request.param == "root":
            uid, gid, cwd = 0, 0, ROOT
            command = [sys.executable, "-m", "courseware", "grade", str(folder), *options.split()]
        else:
            prefix, uid, gid = _ordinary_user(work)
            cwd, venv = _fresh_copy(work, prefix)
            command = prefix + ["make", "--silent", "--no-print-directory", "grade", f"VENV={venv}",
                                f"SUBMISSIONS={folder}", f"GRADE_OPTIONS={options}"]
        secret = work / "secret" / SECRET
        secret.parent.mkdir()
        secret.write_text(f"{SECRET}\n")
        secret.chmod(0o600)
        _hostile_class(folder, secret)
        out.mkdir()
        subprocess.run(["chown", "-R", "-h", f"{uid}:{gid}", str(work / "secret"), str(folder), str(out)], check=True)
        (folder / "locked").chmod(0)  # as unzip leaves a folder whose mode was 000
        if request.param != "root":
            subprocess.run(["chown", "-R", f"{uid}:{gid}", str(cwd), str(work / "venv")], check=True)
        result = _grade(command, out, cwd, work)
        result["make"] = request.param != "root"
        yield result
    finally:
        subprocess.run(["rm", "-rf", str(work)])  # shutil.rmtree would recurse 1100 folders deep


def test_every_entry_is_graded_or_reported_and_the_run_ends(graded):
    assert graded["code"] == (2 if graded["make"] else 1), graded["errors"]  # make reports the grader's 1 as 2
    assert "Traceback" not in graded["errors"] and "could not record" not in graded["errors"], graded["errors"]
    students = {record["student"] for record in graded["records"]}
    shown = {"jos\\xe9", "a" * 119 + "…", "=2+3", "evil\\u202e", "bob\\u200b"}  # as printed: escaped, cut, cleaned
    others = {"trio", "fifo", "link-master", "link-secret", "linked-folder", "bob", "bob-smith", "deep", "locked",
              "hardlink-a", "hardlink-b"}
    assert students == {*ATTACKS, *others, *shown}
    assert sum(record["student"] == "trio" for record in graded["records"]) == 3
    assert len(graded["feedback"]) == len(graded["records"]) == len(ATTACKS) + len(shown) + len(others) + 2
    assert all(len(name.encode()) < 255 for name in graded["feedback"])


@pytest.mark.parametrize("student", [*ATTACKS, "right"])
def test_attacks_from_inside_the_sandbox_cost_only_their_exercise(student, graded):
    records = {record["student"]: record for record in graded["records"]}
    if student == "right":  # an honest neighbour of every attack, graded in the same run
        for name in ("jos\\xe9", "=2+3", "evil\\u202e"):
            assert records[name]["score"] == f"{len(EXERCISES)}/{len(EXERCISES)}", records[name]
        return
    _, verdict, text = ATTACKS[student]
    record = records[student]
    assert record["error"] == "", record
    first = record["verdicts"][0]
    assert first["verdict"] == verdict and text in first["message"], first
    if student in ("out-link", "out-fifo", "out-deep"):
        assert "tampered with its results" in first["review"], first
    if student == "fill":  # each memory file system stopped the writes at its size
        written = json.loads(first["message"].split("MB written: ")[1].replace("'", '"').rstrip("."))
        assert {folder: written[folder] <= size >> 20 for folder, size in sandbox.TMPFS_BYTES.items()} == {
            folder: True for folder in sandbox.TMPFS_BYTES}, written
    if student in ("forge", "escape", "signals", "sandbox-view"):
        assert [v["verdict"] for v in record["verdicts"]] == ["PASS"] * len(EXERCISES), record


def test_nothing_leaks_and_no_name_runs_as_a_formula_or_an_escape(graded):
    everything = graded["printed"] + graded["errors"] + graded["csv_text"] + json.dumps(graded["records"]) + "".join(
        graded["feedback"].values())
    for leak in (SECRET, "forged", MASTER_LINE, str(ROOT), "/tmp/attacks-", "\x1b", "\u202e"):
        assert leak not in everything, leak
    cells = [value for row in graded["rows"] for value in row.values()]
    numbers = re.compile(r"-?[0-9.]+")  # a seed of -1 (a file that was not graded) is a number, not a formula
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@")) and not numbers.fullmatch(cell)]
    assert "'=2+3" in cells


def test_links_fifos_and_folders_it_cannot_enter_are_reported_not_followed(graded):
    errors = {record["student"]: record["error"] for record in graded["records"] if record["error"]}
    unreadable = {"locked"} if graded["make"] or os.geteuid() != 0 else set()  # root reads a folder of mode 000
    assert set(errors) == {"fifo", "link-master", "link-secret", "linked-folder", "deep"} | unreadable, errors
    assert "FIFO" in errors["fifo"] and "more than 8 folders deep" in errors["deep"]
    assert all("symbolic link" in errors[name] for name in ("link-master", "link-secret", "linked-folder"))
    if unreadable:
        assert "cannot be read" in errors["locked"]


def test_names_that_print_alike_stay_apart_and_hard_links_are_flagged(graded):
    records = {record["student"]: record for record in graded["records"]}
    assert records["bob"]["score"] != records["bob-smith"]["score"]  # one feedback file each, not one for both
    assert records["bob\\u200b"]["score"] == records["bob-smith"]["score"]
    for name in ("hardlink-a", "hardlink-b"):
        assert all("hard links" in " ".join(v["review"]) for v in records[name]["verdicts"]), records[name]


def test_no_process_of_a_submission_outlives_grading(graded):
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"escapee" in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            continue
    assert found == []


def test_the_book_installed_into_site_packages_is_hidden_from_the_sandbox(monkeypatch, tmp_path):
    # A non-editable `pip install .` copies lib/ and courseware/ into site-packages, which the
    # sandbox mounts.
    packages = tmp_path / "site-packages"
    for name in ("lib", "courseware"):
        shutil.copytree(ROOT / name, packages / name, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (tmp_path, *tmp_path.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    executable, real = sandbox.python_paths()
    monkeypatch.setattr(sandbox, "python_paths", lambda: (executable, [*real, packages]))
    submission = tmp_path / "pkgutil" / "09_attention.ipynb"
    _write(submission, _notebook("import pkgutil\nmy_masked_softmax_backward = pkgutil.resolve_name("
                                 "'courseware.checks.attention:masked_softmax_backward_by_autograd')\n"))
    masters = load_masters(CHAPTERS)
    [report] = grade_all([submission], masters, timeout=TIMEOUT)
    assert report.verdicts and not report.verdicts[0].passed, report.lines()
    assert "No module named 'courseware" in report.verdicts[0].message, report.lines()
    # Had the empty folders not been mounted over them, the probe itself refuses: it never grades
    # with the book in view.
    monkeypatch.setattr(sandbox, "hidden_book_packages", lambda packages: [])
    [report] = grade_all([submission], masters, timeout=TIMEOUT)
    assert "lib is importable inside the sandbox" in report.error, report.lines()


def test_the_experiments_installed_alone_are_hidden_too(monkeypatch, tmp_path):
    # The chapters' runs ship in the same wheel; the probe checks each of the book's packages.
    packages = tmp_path / "site-packages"
    shutil.copytree(ROOT / "experiments", packages / "experiments",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in (tmp_path, *tmp_path.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    executable, real = sandbox.python_paths()
    monkeypatch.setattr(sandbox, "python_paths", lambda: (executable, [*real, packages]))
    submission = tmp_path / "runs" / "09_attention.ipynb"
    _write(submission, _notebook("import experiments.findings\nmy_masked_softmax_backward = None\n"))
    masters = load_masters(CHAPTERS)
    [report] = grade_all([submission], masters, timeout=TIMEOUT)
    assert "No module named 'experiments" in report.verdicts[0].message, report.lines()
    monkeypatch.setattr(sandbox, "hidden_book_packages", lambda packages: [])
    [report] = grade_all([submission], masters, timeout=TIMEOUT)
    assert "experiments is importable inside the sandbox" in report.error, report.lines()


def test_a_probe_that_stops_sending_is_killed_after_its_exercise_time(monkeypatch, tmp_path):
    # The submission cannot stop the probe (see "signals"), but a hung probe must not hold the
    # grader for every exercise's time: it is killed when it sends nothing for longer than one
    # exercise may take.
    from courseware.grading import grader

    monkeypatch.setattr(grader, "STALL_SECONDS", 1)
    monkeypatch.setattr(sandbox, "probe_command", lambda *args, **kwargs: [
        sys.executable, "-c", "import sys, time\nprint('{\"ready\": true}', flush=True)\ntime.sleep(600)"])
    _write(tmp_path / "alice.ipynb", _submission())
    [report] = grade_all([tmp_path / "alice.ipynb"], load_masters(CHAPTERS), timeout=1)
    assert report.seconds < 10 and all("probe stopped" in v.message for v in report.verdicts), report.lines()


def test_a_gradebook_file_that_cannot_be_written_costs_only_its_submission(tmp_path):
    from courseware.grading.gradebook import Gradebook, feedback_name
    from courseware.grading.grader import Report, Verdict

    reports = [Report(f"{name}/09_attention.ipynb", name, 1, "09_attention", [Verdict(FIRST, True, "correct")])
               for name in ("alice", "bob", "carol")]
    book = Gradebook(tmp_path / "grades.csv", tmp_path / "grades.json", tmp_path / "feedback")
    (tmp_path / "feedback" / feedback_name(reports[1])).mkdir()  # bob's feedback file cannot be written
    for report in reports:
        book.add(report)
    book.close()
    assert len(book.failures) == 1 and book.failures[0].startswith("bob/09_attention.ipynb: the feedback file")
    assert [row["student"] for row in csv.DictReader((tmp_path / "grades.csv").open())] == ["alice", "bob", "carol"]
    assert len(json.loads((tmp_path / "grades.json").read_text())) == 3
    written = sorted(p.name for p in (tmp_path / "feedback").iterdir() if p.is_file())
    assert [name.rsplit("-", 1)[0] for name in written] == ["alice-09_attention", "carol-09_attention"]


def test_as_root_a_submission_gets_one_cpu_and_bounded_memory_however_many_processes_it_starts(tmp_path):
    # The probe runs in cgroups whose limits are one CPU and GROUP_MEMORY_BYTES: seen from the
    # host while it grades. (A timing of busy processes could not tell on a machine that other
    # tests keep busy.)
    controllers = sandbox._controllers()
    if not controllers:
        pytest.skip("the grader cannot make cgroups here (not root, or no cpu and memory controllers)")
    _write(tmp_path / "sleepy.ipynb", _notebook("import time\ntime.sleep(4)\n{master}"))
    seen = {}

    def watch():
        deadline = time.monotonic() + 30
        while len(seen) < sum(len(limits) for _, limits in controllers) and time.monotonic() < deadline:
            for hierarchy, limits in controllers:
                for group in hierarchy.glob("book-grader-grade-*"):
                    with contextlib.suppress(OSError):
                        procs = (group / "cgroup.procs").read_text().split()
                        if any(b"/job/probe.py" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in procs):
                            seen.update({file: (group / file).read_text().strip() for file in limits})
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    [report] = grade_all([tmp_path / "sleepy.ipynb"], load_masters(CHAPTERS), timeout=20)
    watcher.join()
    assert report.points == len(EXERCISES), report.lines()
    assert seen == {file: value for _, limits in controllers for file, value in limits.items()}, seen
    # The groups go with their last process, even one that outlived the probe.
    with sandbox.limited_group(f"book-grader-test-{os.getpid()}") as prefix:
        groups = [Path(argument).parent for argument in prefix if argument.endswith("cgroup.procs")]
        sleeper = subprocess.Popen(prefix + ["sleep", "60"])
        deadline = time.monotonic() + 5
        while not all(str(sleeper.pid) in (group / "cgroup.procs").read_text().split() for group in groups):
            assert time.monotonic() < deadline, "the command never entered its cgroups"
            time.sleep(0.05)
    assert sleeper.wait(timeout=5) == -signal.SIGKILL and not any(group.exists() for group in groups)


def test_the_json_gradebook_is_rewritten_at_most_every_few_seconds(tmp_path, monkeypatch):
    # Thousands of junk entries in a class folder must not make the gradebook quadratic.
    from courseware.grading import gradebook
    from courseware.grading.grader import Report

    writes = []
    original = gradebook.Gradebook._write_json
    monkeypatch.setattr(gradebook.Gradebook, "_write_json", lambda self: (writes.append(1), original(self)))
    book = gradebook.Gradebook(json_path=tmp_path / "grades.json")
    started = time.monotonic()
    for index in range(3000):
        book.add(Report(f"junk/{index}.ipynb", "junk", 1, error="it is not a readable notebook"))
    book.close()
    assert len(writes) <= 2 + (time.monotonic() - started) / gradebook.JSON_SECONDS
    assert len(json.loads((tmp_path / "grades.json").read_text())) == 3000


def test_a_gradebook_that_cannot_be_created_is_a_clear_error(tmp_path, capsys):
    from courseware.__main__ import main

    _write(tmp_path / "alice.ipynb", _submission())
    assert main(["grade", str(tmp_path / "alice.ipynb"), "--csv", str(tmp_path / "missing" / "grades.csv")]) == 2
    assert "cannot write the gradebook" in capsys.readouterr().err
