"""tools/run_parts.py, which runs `make test`'s parts: order, waiting, failures and output."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import run_parts  # noqa: E402  (tools/ is not a package)

# Each part prints when it starts and ends (seconds since the epoch) and a line of its own between.
MAKEFILE = """\
define part
\t@echo "$@ start $$(date +%s.%N)"; sleep $(1); echo "$@ says $(2)"; echo "$@ end $$(date +%s.%N)"; exit $(3)
endef
book:
\t$(call part,0.6,hello,0)
broken-book:
\t$(call part,0.1,oops,1)
pages:
\t$(call part,0.2,pages,0)
long:
\t$(call part,1.0,long,0)
busy:
\t@python3 -c "import time; t = time.process_time(); exec('while time.process_time() - t < 2: pass')"
short:
\t$(call part,0.1,short,0)
failing:
\t$(call part,0.1,no,2)
"""


def run_in(tmp_path, *parts, jobs=2):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "run_parts.py"), "--jobs", str(jobs), *parts],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    times = {}
    for line in result.stdout.splitlines():
        words = line.split()
        if len(words) == 3 and words[1] in ("start", "end"):
            times[words[0], words[1]] = float(words[2])
    return result, times


def test_a_part_that_needs_the_book_starts_when_it_ends_ahead_of_the_parts_listed_after_it(tmp_path):
    result, times = run_in(tmp_path, "book", "pages:book", "long", "short")
    assert result.returncode == 0, result.stdout
    assert times["pages", "start"] >= times["book", "end"]
    # book and long start at once; pages takes book's place, short waits for a free place.
    assert times["long", "start"] < times["book", "end"] < times["short", "start"]
    assert times["pages", "start"] < times["short", "start"]
    assert "== 4 parts" in result.stdout and "all passed" in result.stdout


def test_every_part_runs_and_reports_when_one_fails_and_a_part_that_needs_it_does_not_run(tmp_path):
    result, times = run_in(tmp_path, "broken-book", "pages:broken-book", "failing", "short")
    assert result.returncode == 1
    assert ("short", "end") in times and ("failing", "end") in times and ("pages", "start") not in times
    assert "== failing: FAILED (exit status 2)" in result.stdout
    assert "== pages: not run, since broken-book did not pass" in result.stdout


def test_each_parts_output_is_printed_whole_when_it_ends(tmp_path):
    result, _ = run_in(tmp_path, "long", "short", "book")
    lines = result.stdout.splitlines()
    for name in ("long", "short", "book"):
        first = next(i for i, line in enumerate(lines) if line.startswith(f"{name} start"))
        assert lines[first + 1].startswith(f"{name} says") and lines[first + 2].startswith(f"{name} end")
        assert lines[first + 3].startswith(f"== {name}: passed in")


def test_a_part_may_need_only_a_part_listed_before_it():
    with pytest.raises(ValueError, match="pages needs 'book', which is not a part listed before it"):
        run_parts.parse(["pages:book", "book"])


def test_each_part_reports_the_cpu_time_of_the_processes_it_ran_and_the_last_line_sums_them(tmp_path):
    result, _ = run_in(tmp_path, "busy", "long")
    assert result.returncode == 0, result.stdout
    cpu = {line.split()[1].rstrip(":"): float(line.split("(")[1].split()[0])
           for line in result.stdout.splitlines() if line.startswith("== ") and "passed in" in line}
    # busy's make waits for a python that spins for two seconds of CPU; long only sleeps.
    assert 2 <= cpu["busy"] <= 3 and cpu["long"] == 0
    last = result.stdout.splitlines()[-1]
    assert float(last.split("(")[1].split()[0]) == cpu["busy"]
    # The machine's cores spent at least what busy spun, and had at least the run's time on each.
    busy, available = map(float, re.search(r"busy (\d+) s of (\d+) s", last).groups())
    assert busy >= 2 and available >= 1.0 * os.cpu_count()
