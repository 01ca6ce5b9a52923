"""Read what the probe sent, trusting nothing (the submission's code could have written it).

The probe sends, per exercise, one frame: a JSON header and the bytes of the two files the
solution's process wrote (see :mod:`courseware.probe`). :class:`FrameReader` reads the
probe's standard output with every size capped; :func:`read_outcome` checks every field of
a frame — JSON nesting, types, dtype from a fixed list, shapes, byte counts and offsets, each
byte used once — before it builds plain CPU tensors from the bytes. Nothing is unpickled and
no path the submission could have made is ever opened. Anything else becomes a
:class:`ProbeOutcome` with ``problem`` set: that exercise's FAIL, never an exception in the
grader; a sign of tampering also sets ``review``.
"""
from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import BinaryIO

import torch

from courseware.probe import MAX_RECORD_BYTES, RESULT_DTYPES

MAX_ELEMENTS = 1 << 24  # per result: far more than any exercise returns
MAX_NESTING = 6  # a results record is a dict of a list of dicts of a list of ints
MAX_HEADER_BYTES = 4096
_DTYPES = {name: getattr(torch, name) for name in RESULT_DTYPES}
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
# bidirectional overrides and isolates, zero-width characters, the soft hyphen and the BOM:
# invisible in a terminal or a spreadsheet, they can make a name read as another
_INVISIBLE = re.compile("[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
TAMPERED = "the results were not what the grader's probe writes (did your code tamper with them?)"


def plain_text(text: str, limit: int = 300) -> str:
    """``text`` as it may be printed, written to a file and shown to a person.

    Bytes that were not UTF-8 (a file name from a Windows zip, decoded with surrogate escapes)
    become ``\\xNN``; bidirectional and zero-width characters become ``\\uNNNN`` (shown, so
    that two names differing only by one stay apart); ANSI escapes and control characters go;
    the result is on one line, at most ``limit`` characters."""
    text = str(text)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that no byte became (e.g. from JSON "\\ud800")
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    visible = _INVISIBLE.sub(lambda match: f"\\u{ord(match.group()):04x}", _ESCAPES.sub("", text))
    cleaned = " ".join(visible.split())
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


class FrameReader(threading.Thread):
    """Reads the probe's frames from ``stream`` in the background, at most ``total_bytes`` in all.

    ``frames`` maps an exercise id to its header and payload; ``progress`` is the monotonic
    time of the last frame (the grader kills a probe that stops sending); ``failure`` says
    why reading stopped early (a frame too large or malformed: the probe's output, not the
    student's, since the probe's pipes are closed to the submission)."""

    def __init__(self, stream: BinaryIO, file_bytes: int, total_bytes: int):
        super().__init__(daemon=True)
        self.stream, self.file_bytes, self.total_bytes = stream, file_bytes, total_bytes
        self.left = total_bytes
        self.frames: dict[str, tuple[dict, bytes, bytes]] = {}
        self.ready, self.progress, self.failure = False, time.monotonic(), ""

    def _frame(self) -> bool:
        line = self.stream.readline(MAX_HEADER_BYTES)
        if not line:
            return False
        try:
            header = json.loads(line)
        except ValueError:
            header = None
        if header == {"ready": True}:
            self.ready, self.progress = True, time.monotonic()
            return True
        if not (isinstance(header, dict) and set(header) == {"id", "ended", "json", "bin", "problem"}
                and isinstance(header["id"], str) and type(header["json"]) is int and type(header["bin"]) is int
                and 0 <= header["json"] <= MAX_RECORD_BYTES and 0 <= header["bin"] <= self.file_bytes):
            self.failure = f"the probe sent a malformed frame header ({plain_text(line, 120)})"
            return False
        size = header["json"] + header["bin"]
        if size > self.left:
            self.failure = (f"the results exceed the {self.total_bytes:,} bytes the grader reads "
                            "for one submission")
            return False
        self.left -= size
        payload = self.stream.read(size)
        if len(payload) != size:
            return False
        self.frames[header["id"]] = (header, payload[:header["json"]], payload[header["json"]:])
        self.progress = time.monotonic()
        return True

    def run(self) -> None:
        try:
            while self._frame():
                pass
        except (OSError, ValueError) as error:  # the pipe broke: the probe was killed
            self.failure = self.failure or f"reading the probe failed ({type(error).__name__})"


@dataclass
class ProbeOutcome:
    """What one exercise's run produced.

    Exactly one of ``problem`` (the run failed: a plain-text reason), ``cell_error``
    (the solution cell raised) or ``results`` (one tensor or error text per case) is set.
    """

    problem: str = ""
    cell_error: str = ""
    results: list = field(default_factory=list)
    review: str = ""  # set with ``problem`` when the results show signs of tampering


def _tensor(record: dict, blob: bytes, offset: int) -> torch.Tensor | None:
    """The tensor a record describes, whose bytes must start at ``offset`` (each byte is used once)."""
    if set(record) != {"dtype", "shape", "offset", "nbytes"} or record["dtype"] not in _DTYPES:
        return None
    shape, nbytes = record["shape"], record["nbytes"]
    if not (isinstance(shape, list) and len(shape) <= 8
            and all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape) and math.prod(shape) <= MAX_ELEMENTS
            and type(record["offset"]) is int and record["offset"] == offset and type(nbytes) is int):
        return None
    dtype = _DTYPES[record["dtype"]]
    itemsize = torch.empty((), dtype=dtype).element_size()
    if nbytes != math.prod(shape) * itemsize or offset + nbytes > len(blob):
        return None
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.frombuffer(bytearray(blob[offset:offset + nbytes]), dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def _results(records, blob: bytes, cases: int) -> list | None:
    if not isinstance(records, list) or len(records) != cases:
        return None
    results, offset = [], 0
    for record in records:
        if isinstance(record, dict) and set(record) == {"error"} and isinstance(record["error"], str):
            results.append(plain_text(record["error"]))
            continue
        tensor = _tensor(record, blob, offset) if isinstance(record, dict) else None
        if tensor is None:
            return None
        offset += record["nbytes"]
        results.append(tensor)
    return results if offset == len(blob) else None


def _nested_too_deep(text: str) -> bool:
    """Whether JSON ``text`` nests deeper than :data:`MAX_NESTING` (checked before parsing, whose
    recursion a deep enough document would exhaust)."""
    depth = 0
    for bracket in re.findall(r"[\[\]{}]", _JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_NESTING:
            return True
    return False


def _ended(ended, function: str, seconds: int) -> str:
    """Why no results were written, from how the exercise's process ended."""
    if ended == {"ended": "timeout"}:
        return f"timed out after {seconds} s"
    code = ended.get("code") if isinstance(ended, dict) and ended.get("ended") == "exit" else None
    if code == -signal.SIGXCPU:
        return f"used more than {seconds} s of CPU time"
    if code == -signal.SIGKILL:
        return "your code stopped the kernel: it was killed (memory or CPU-time limit)"
    detail = f" (exit code {code})" if type(code) is int and code >= 0 else (
        f" (signal {-code})" if type(code) is int else "")
    return f"your code stopped the kernel{detail} before {function} returned its results"


def read_outcome(frame: tuple[dict, bytes, bytes] | None, function: str, cases: int, seconds: int) -> ProbeOutcome:
    """Validate one exercise's frame from the probe.

    Parameters
    ----------
    frame : tuple or None
        The header, record bytes and blob bytes :class:`FrameReader` read for the exercise;
        ``None`` when the probe sent none (it stopped, or was stopped, before the exercise ended).
    function : str
        The name of the student's function.
    cases : int
        How many input cases the grader drew (one result is expected per case).
    seconds : int
        The time limit, for the message of a run that timed out.
    """
    if frame is None:
        return ProbeOutcome(problem="the grader's probe stopped before this exercise finished (your code may "
                                    "have stopped or killed it)", review="the probe stopped early")
    header, raw_record, blob = frame
    if header["problem"]:
        return ProbeOutcome(problem=f"{TAMPERED}: {plain_text(header['problem'], 120)}",
                            review="tampered with its results")
    if not raw_record:
        return ProbeOutcome(problem=_ended(header["ended"], function, seconds))
    try:
        text = raw_record.decode("utf-8")
        record = None if _nested_too_deep(text) else json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        record = None
    if isinstance(record, dict) and set(record) == {"cell_error"} and isinstance(record["cell_error"], str):
        return ProbeOutcome(cell_error=plain_text(record["cell_error"]))
    results = _results(record.get("results") if isinstance(record, dict) and set(record) == {"results"} else None,
                       blob, cases)
    if results is None:
        return ProbeOutcome(problem=TAMPERED, review="tampered with its results")
    return ProbeOutcome(results=results)
