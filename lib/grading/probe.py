"""The probe: runs a submission's solution cells inside the sandbox and records what they return.

This file is copied into each submission's sandbox and run there with ``python -I -S``.
It imports only the standard library and torch (never ``lib``: the sandbox cannot see it)
and is the only grading code the submission's process can read.

``python probe.py JOB_DIR OUT_DIR`` reads ``JOB_DIR/job.json``::

    {"site_packages": [...], "limits": {"memory_bytes": ..., "cpu_seconds": ...,
     "processes": ..., "file_bytes": ...},
     "exercises": [{"id": ..., "function": ..., "source": ..., "inputs": "0.pt"}, ...]}

and, for every exercise, forks a fresh process that runs the solution source in a new
namespace and calls the function on each case of ``inputs`` (saved by the grader with
``torch.save``). The child writes ``OUT_DIR/<id>.json`` and ``OUT_DIR/<id>.bin``:

* ``{"cell_error": "Type: message"}`` when the solution source raised, or
* ``{"results": [...]}``, one entry per case: ``{"error": "Type: message"}`` or
  ``{"dtype": "float64", "shape": [...], "offset": n, "nbytes": m}`` whose raw bytes
  are at ``offset`` in the ``.bin`` file.

The probe then writes ``OUT_DIR/<id>.status.json``: ``{"ended": "timeout"}`` or
``{"ended": "exit", "code": c}`` (``c < 0``: killed by signal ``-c``). The grader
trusts none of this: it validates every field before building a tensor from the bytes.
"""
import builtins
import json
import os
import resource
import signal
import sys
import time

# dtypes a result may have: the grader builds tensors only of these (see lib.grading.results).
RESULT_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


CPU_MARGIN = 2  # seconds of CPU time beyond the wall-clock timeout (see main)


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:500]


def changed_argument(args: tuple, given: tuple, torch) -> int | None:
    """The 1-based position of the first tensor of ``given`` (the copies of ``args`` a solution was
    called with) that the solution changed in place, or None. NaN counts as equal to NaN.

    The checkers (lib.checks.core) use this same test, so a notebook's check cell and the grader
    give one verdict: every exercise asks for a result that leaves its inputs as they were."""
    for position, (original, copy) in enumerate(zip(args, given), start=1):
        if not isinstance(original, torch.Tensor):
            continue
        if copy.shape != original.shape or copy.dtype != original.dtype:
            return position
        if original.is_floating_point() or original.is_complex():
            same = torch.equal(copy.isnan(), original.isnan()) and torch.equal(copy.nan_to_num(), original.nan_to_num())
        else:
            same = torch.equal(copy, original)
        if not same:
            return position
    return None


def _encode(found, torch, blob: bytearray) -> dict:
    """One result as a JSON-able record; its raw bytes are appended to ``blob``."""
    if type(found) is not torch.Tensor:
        kind = "a subclass of torch.Tensor" if isinstance(found, torch.Tensor) else "not a torch.Tensor"
        return {"error": f"TypeError: your function must return a plain torch.Tensor; it returned "
                         f"{type(found).__name__} ({kind})"}
    if found.device.type != "cpu" or found.layout != torch.strided:
        return {"error": f"TypeError: your function must return an ordinary CPU tensor; it returned one on "
                         f"the {found.device.type} device with layout {found.layout}"}
    dtype = str(found.dtype).removeprefix("torch.")
    if dtype not in RESULT_DTYPES:
        return {"error": f"TypeError: your function returned a tensor of dtype {dtype}; expected a real dtype"}
    flat = found.detach().resolve_conj().resolve_neg().contiguous().reshape(-1)
    data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
    record = {"dtype": dtype, "shape": list(found.shape), "offset": len(blob), "nbytes": len(data)}
    blob.extend(data)
    return record


def _write(out_dir: str, name: str, record: dict, blob: bytes = b"") -> None:
    with open(os.path.join(out_dir, name + ".bin"), "wb") as handle:
        handle.write(blob)
    with open(os.path.join(out_dir, name + ".json"), "w") as handle:
        json.dump(record, handle)


def _run_exercise(exercise: dict, job_dir: str, out_dir: str, torch) -> None:
    """In the forked child: run the solution source, call the function on every case."""
    cases = torch.load(os.path.join(job_dir, exercise["inputs"]), weights_only=True)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compile(exercise["source"], "<your solution cell>", "exec"), namespace)
    except BaseException as error:  # the student's cell: any exception is their FAIL, reported
        _write(out_dir, exercise["id"], {"cell_error": _error_text(error)})
        return
    function = namespace.get(exercise["function"])
    if not callable(function):
        _write(out_dir, exercise["id"], {"cell_error": f"NameError: your solution cell does not define the "
                                                       f"function {exercise['function']}"})
        return
    results, blob = [], bytearray()
    for args in cases:
        given = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        try:
            found = function(*given)
            changed = changed_argument(args, given, torch)
            results.append({"error": f"InputChanged: your function changed its argument {changed} in place"}
                           if changed else _encode(found, torch, blob))
        except BaseException as error:  # reported per case, as the checkers do
            results.append({"error": _error_text(error)})
    _write(out_dir, exercise["id"], {"results": results}, bytes(blob))


def _wait(pid: int, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"ended": "exit", "code": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"ended": "timeout"}
        time.sleep(0.02)


def main(job_dir: str, out_dir: str) -> None:
    with open(os.path.join(job_dir, "job.json")) as handle:
        job = json.load(handle)
    sys.path.extend(job["site_packages"])
    limits = job["limits"]
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    _limit(resource.RLIMIT_NPROC, limits["processes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_bytes"])
    _limit(resource.RLIMIT_CORE, 0)
    import torch

    torch.set_num_threads(1)
    for exercise in job["exercises"]:
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                quiet = os.open(os.devnull, os.O_RDWR)
                for stream in (0, 1, 2):
                    os.dup2(quiet, stream)
                # CPU time never exceeds wall time in one thread, so with this margin a busy loop
                # meets the wall-clock deadline of _wait first ("timed out") even when a loaded
                # machine wakes the parent late; the CPU limit still stops work left behind.
                cpu = limits["cpu_seconds"] + CPU_MARGIN
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
                _run_exercise(exercise, job_dir, out_dir, torch)
            finally:
                os._exit(0)
        status = _wait(pid, limits["cpu_seconds"])
        try:
            os.killpg(pid, signal.SIGKILL)  # whatever the exercise left running
        except ProcessLookupError:
            pass
        with open(os.path.join(out_dir, exercise["id"] + ".status.json"), "w") as handle:
            json.dump(status, handle)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
