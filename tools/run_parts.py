"""Run the parts of ``make test`` (Makefile: TEST_PARTS) a few at a time, each as ``make <part>``.

Usage::

    python tools/run_parts.py --jobs 2 test-book test-built-pages:test-book test-other-cpu ...

A part written ``name:other`` starts only once the part ``other`` has passed, and is not run if it
failed. Whenever a part ends, the first part of the list that can start does: so the parts that
wait for the book start as soon as it is built, ahead of the others. (GNU make's own ``-j``
starts whichever part its walk through the goals has reached when a job ends; with this stop's
measured durations, a simulation of it started those two parts about a minute late.)
Every part runs and reports even if another failed; each one's output is printed whole when it
ends, then a line with its outcome, its time and its CPU time (user + system, of the part's ``make``
and every process it waited for, as ``wait4`` counts it: not a browser's renderers, which Chromium's
zygote hands to init). The last line sums them and adds what the whole machine's cores spent
(``/proc/stat``), which on an otherwise idle machine is the suite's CPU time, browsers included.
The exit status is 1 if any part failed or did not run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Part:
    name: str
    needs: str | None = None
    process: subprocess.Popen | None = None
    output: object = None  # the temporary file the part writes to
    started: float = 0.0
    cpu: float | None = None  # seconds of CPU, once the part has ended
    outcome: str | None = None  # "passed", "FAILED", or why it did not run


def parse(specs: list[str]) -> list[Part]:
    parts = []
    for spec in specs:
        name, _, needs = spec.partition(":")
        parts.append(Part(name, needs or None))
    names = [part.name for part in parts]
    for part in parts:
        if part.needs is not None and part.needs not in names[: names.index(part.name)]:
            raise ValueError(f"{part.name} needs {part.needs!r}, which is not a part listed before it: {names}")
    return parts


def _start(part: Part, make: list[str]) -> None:
    part.output = tempfile.TemporaryFile(mode="w+")
    part.started = time.perf_counter()
    part.process = subprocess.Popen([*make, part.name], stdout=part.output, stderr=subprocess.STDOUT)


def _report(part: Part, seconds: float | None) -> None:
    if part.output is not None:
        part.output.seek(0)
        sys.stdout.write(part.output.read())
        part.output.close()
    took = f" in {seconds:.0f} s ({part.cpu:.0f} s of CPU)" if seconds is not None else ""
    print(f"== {part.name}: {part.outcome}{took}", flush=True)


def run(parts: list[Part], jobs: int, make: list[str], poll: float = 0.2) -> int:
    """Run every part, ``jobs`` at a time; 0 if all passed, else 1."""
    outcome = {}
    pending, running = list(parts), []
    while pending or running:
        for part in list(pending):
            if part.needs is not None and outcome.get(part.needs, "passed") != "passed":
                part.outcome = f"not run, since {part.needs} did not pass"
                pending.remove(part)
                outcome[part.name] = part.outcome
                _report(part, None)
        for part in list(pending):
            if len(running) == jobs:
                break
            if part.needs is None or outcome.get(part.needs) == "passed":
                _start(part, make)
                pending.remove(part)
                running.append(part)
        time.sleep(poll)
        for part in list(running):
            pid, status, usage = os.wait4(part.process.pid, os.WNOHANG)
            if pid != 0:
                code = part.process.returncode = os.waitstatus_to_exitcode(status)
                part.cpu = usage.ru_utime + usage.ru_stime
                running.remove(part)
                part.outcome = "passed" if code == 0 else f"FAILED (exit status {code})"
                outcome[part.name] = part.outcome
                _report(part, time.perf_counter() - part.started)
    return 0 if all(value == "passed" for value in outcome.values()) else 1


def machine_cpu() -> tuple[float, float]:
    """Seconds the machine's cores have spent busy, and in all, since boot (``/proc/stat``)."""
    ticks = [int(field) for field in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = ticks
    per_second = os.sysconf("SC_CLK_TCK")
    busy = user + nice + system + irq + softirq + steal
    return busy / per_second, (busy + idle + iowait) / per_second


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("parts", nargs="+", help="make targets, each as name or name:the part it needs")
    parser.add_argument("--jobs", type=int, default=2, help="parts at a time")
    parser.add_argument("--make", default="make", help="the make program")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; found {args.jobs}")
    started, (busy, total) = time.perf_counter(), machine_cpu()
    parts = parse(args.parts)
    status = run(parts, args.jobs, [args.make, "--no-print-directory"])
    cpu = sum(part.cpu for part in parts if part.cpu is not None)
    busy_now, total_now = machine_cpu()
    print(f"== {len(args.parts)} parts in {time.perf_counter() - started:.0f} s ({cpu:.0f} s of CPU; "
          f"the machine's cores were busy {busy_now - busy:.0f} s of {total_now - total:.0f} s): "
          f"{'all passed' if status == 0 else 'some FAILED'}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
