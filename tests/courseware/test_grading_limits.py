"""A submission that asks for more memory than its cgroup allows costs only itself (as root).

Each process in the sandbox may map 3 GiB (RLIMIT_AS), but processes add up: four children of
1.5 GiB each would ask for 6 GiB, beyond the cgroup that caps the probe's processes together at
GROUP_MEMORY_BYTES (4 GiB); the kernel's OOM killer then picks a process of the submission (they
carry oom_score_adj 1000), not the probe, which goes on to grade the chapter's other exercises.

The test grades with the group's limit set to GROUP_BYTES (1 GiB) and children of a third of
that each (four ask for 4/3 GiB, each far within its RLIMIT_AS): the same limit, written the same
way and enforced by the same kernel, reached by writing a quarter of the pages (the kernel's work
of 6 GiB of page faults was most of this test's time). That the grader writes the real
GROUP_MEMORY_BYTES into the group is test_grading_attacks.py's
test_as_root_a_submission_gets_one_cpu_and_bounded_memory_however_many_processes_it_starts.
"""
import contextlib
from pathlib import Path

import nbformat
import pytest

from courseware.exercises import BOOK_CHAPTERS, coding_exercises
from courseware.grading import grader, sandbox
from courseware.grading.grader import grade_all, load_masters

CHAPTER = "09_attention"  # any chapter with two or more coding exercises: the quickest to grade
GROUP_BYTES = 1 << 30  # the probe's group's memory limit in this test (the grader's is GROUP_MEMORY_BYTES)
CHILD_BYTES = GROUP_BYTES // 3
HOG = f"""import os, time
children = []
for _ in range(4):  # 4 x 1/3 GiB: each process is within its 3 GiB and the group's 1 GiB, together they are not
    pid = os.fork()
    if pid == 0:
        block = bytearray({CHILD_BYTES})
        block[::4096] = b"\\1" * len(block[::4096])  # write every page, so each one is charged
        time.sleep(3)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def _usage_files(group: Path) -> dict[str, str]:
    names = ("memory.max_usage_in_bytes", "memory.failcnt", "memory.peak", "memory.events")
    return {name: (group / name).read_text() for name in names if (group / name).is_file()}


def test_a_memory_hog_is_stopped_at_its_groups_limit_and_the_probe_grades_on(tmp_path, monkeypatch):
    if not any("memory" in str(hierarchy) or "memory.max" in limits for hierarchy, limits in sandbox._controllers()):
        pytest.skip("the grader cannot make memory cgroups here (not root, or no memory controller)")
    notebook = nbformat.read(BOOK_CHAPTERS / f"{CHAPTER}.ipynb", as_version=4)
    first, *others = coding_exercises(notebook)
    assert others, f"{CHAPTER} needs a second coding exercise for the probe to go on to"
    cell = next(c for c in notebook.cells if c.get("id") == first.solution_cell)
    cell.source = HOG + cell.source
    nbformat.write(notebook, tmp_path / f"{CHAPTER}.ipynb")

    seen = {}
    remove = sandbox._remove_group

    def remove_after_reading(group: Path) -> None:
        with contextlib.suppress(OSError):
            seen.update(_usage_files(group))
        remove(group)

    monkeypatch.setattr(sandbox, "_remove_group", remove_after_reading)
    # The grader's own limit is the instructor guide's 4 GiB, written to the group as this test's is
    # (test_grading_attacks.py reads it there); this test enforces a quarter of it, to fault in fewer pages.
    assert sandbox.GROUP_MEMORY_BYTES == 4 << 30
    monkeypatch.setattr(sandbox, "GROUP_MEMORY_BYTES", GROUP_BYTES)
    assert 4 * CHILD_BYTES > GROUP_BYTES and CHILD_BYTES < grader.MEMORY_LIMIT - (1 << 30)  # torch maps ~1 GiB
    [report] = grade_all([tmp_path / f"{CHAPTER}.ipynb"], load_masters(BOOK_CHAPTERS), timeout=60)

    assert not report.error, report.lines()
    later = [verdict for verdict in report.verdicts if verdict.exercise != first.id]
    assert len(later) == len(others) and all(verdict.passed for verdict in later), report.lines()
    if "memory.failcnt" in seen:  # cgroup v1
        assert int(seen["memory.failcnt"]) > 0, seen  # the limit was reached ...
        assert int(seen["memory.max_usage_in_bytes"]) <= GROUP_BYTES, seen  # ... and held
    else:  # cgroup v2
        events = dict(line.split() for line in seen["memory.events"].splitlines())
        assert int(events["max"]) > 0 and int(events["oom_kill"]) > 0, seen
        assert int(seen["memory.peak"]) <= GROUP_BYTES, seen
