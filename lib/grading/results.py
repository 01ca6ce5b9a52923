"""Read what the probe wrote, trusting nothing (the submission's code could have written it).

The probe's files are JSON plus raw bytes (see :mod:`lib.grading.probe`); nothing is
unpickled. :func:`read_outcome` checks every field — types, dtype from a fixed list,
shapes, byte counts and offsets — before it builds plain CPU tensors from the bytes.
Anything else becomes a :class:`ProbeOutcome` with ``problem`` set: that exercise's
FAIL, never an exception in the grader.
"""
from __future__ import annotations

import json
import math
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

import torch

from lib.grading.probe import RESULT_DTYPES

MAX_JSON_BYTES = 1 << 20
MAX_ELEMENTS = 1 << 24  # per result: far more than any exercise returns
_DTYPES = {name: getattr(torch, name) for name in RESULT_DTYPES}
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def plain_text(text: str, limit: int = 300) -> str:
    """``text`` without ANSI escapes or control characters, on one line, at most ``limit`` characters."""
    cleaned = " ".join(_ESCAPES.sub("", str(text)).split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


@dataclass
class ProbeOutcome:
    """What one exercise's run produced.

    Exactly one of ``problem`` (the run failed: a plain-text reason), ``cell_error``
    (the solution cell raised) or ``results`` (one tensor or error text per case) is set.
    """

    problem: str = ""
    cell_error: str = ""
    results: list = field(default_factory=list)


def _tensor(record: dict, blob: bytes) -> torch.Tensor | str:
    if set(record) != {"dtype", "shape", "offset", "nbytes"} or record["dtype"] not in _DTYPES:
        return ""
    shape, offset, nbytes = record["shape"], record["offset"], record["nbytes"]
    if not (isinstance(shape, list) and len(shape) <= 8
            and all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape)
            and type(offset) is int and type(nbytes) is int and math.prod(shape) <= MAX_ELEMENTS):
        return ""
    dtype = _DTYPES[record["dtype"]]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if nbytes != math.prod(shape) * itemsize or not 0 <= offset <= len(blob) - nbytes:
        return ""
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(blob[offset:offset + nbytes]), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def _results(records, blob: bytes, cases: int) -> list | None:
    if not isinstance(records, list) or len(records) != cases:
        return None
    results = []
    for record in records:
        if isinstance(record, dict) and set(record) == {"error"} and isinstance(record["error"], str):
            results.append(plain_text(record["error"]))
            continue
        tensor = _tensor(record, blob) if isinstance(record, dict) else ""
        if isinstance(tensor, str):
            return None
        results.append(tensor)
    return results


def _ended(status_path: Path, function: str, seconds: int) -> str:
    """Why no results were written, from the probe's status file."""
    try:
        status = json.loads(status_path.read_text()) if status_path.is_file() else {}
    except (OSError, ValueError):
        status = {}
    if status == {"ended": "timeout"}:
        return f"timed out after {seconds} s"
    code = status.get("code") if isinstance(status, dict) and status.get("ended") == "exit" else None
    if code == -signal.SIGXCPU:
        return f"used more than {seconds} s of CPU time"
    if code == -signal.SIGKILL:
        return "your code stopped the kernel: it was killed (memory or CPU-time limit)"
    detail = f" (exit code {code})" if type(code) is int and code >= 0 else (
        f" (signal {-code})" if type(code) is int else "")
    return f"your code stopped the kernel{detail} before {function} returned its results"


def read_outcome(out_dir: Path, exercise_id: str, function: str, cases: int, seconds: int) -> ProbeOutcome:
    """Validate the probe's files for one exercise.

    Parameters
    ----------
    out_dir : Path
        The probe's output folder.
    exercise_id, function : str
        The exercise and the name of the student's function.
    cases : int
        How many input cases the grader drew (one result is expected per case).
    seconds : int
        The time limit, for the message of a run that timed out.
    """
    record_path, blob_path = out_dir / f"{exercise_id}.json", out_dir / f"{exercise_id}.bin"
    if not record_path.is_file():
        return ProbeOutcome(problem=_ended(out_dir / f"{exercise_id}.status.json", function, seconds))
    malformed = ProbeOutcome(problem="the grader's probe wrote malformed results (did your code tamper with it?)")
    try:
        if record_path.stat().st_size > MAX_JSON_BYTES:
            return malformed
        record = json.loads(record_path.read_text())
        blob = blob_path.read_bytes() if blob_path.is_file() else b""
    except (OSError, ValueError):
        return malformed
    if isinstance(record, dict) and set(record) == {"cell_error"} and isinstance(record["cell_error"], str):
        return ProbeOutcome(cell_error=plain_text(record["cell_error"]))
    results = _results(record.get("results") if isinstance(record, dict) and set(record) == {"results"} else None,
                       blob, cases)
    return malformed if results is None else ProbeOutcome(results=results)
