"""The probe: runs a submission's solution cells inside the sandbox and reports what they return.

This file is copied into each submission's sandbox and run there with ``python -I -S``.
It imports only the standard library and torch (never ``lib``: the sandbox cannot see it,
and the probe refuses to run if it could) and is the only grading code the submission's
process can read.

``python probe.py JOB_DIR OUT_DIR`` reads ``JOB_DIR/job.json``::

    {"site_packages": [...], "sandboxed": true, "limits": {"memory_bytes": ..., "cpu_seconds": ...,
     "processes": ..., "file_bytes": ...},
     "exercises": [{"id": ..., "function": ..., "source": ..., "inputs": "0.pt"}, ...]}

and, for every exercise, forks a fresh process that runs the solution source in a new
namespace and calls the function on each case of ``inputs`` (saved by the grader with
``torch.save``). The child writes ``OUT_DIR/<id>.json`` and ``OUT_DIR/<id>.bin``:

* ``{"cell_error": "Type: message"}`` when the solution source raised, or
* ``{"results": [...]}``, one entry per case: ``{"error": "Type: message"}`` or
  ``{"dtype": "float64", "shape": [...], "offset": n, "nbytes": m}`` whose raw bytes
  are at ``offset`` in the ``.bin`` file.

The child runs the student's code, so it can write anything into ``OUT_DIR`` (a link, a
FIFO, a forged record). The probe therefore never hands the grader a path: after each
exercise it reads the two files itself (regular files only, links not followed, sizes
capped), sends them on its standard output as one frame, and empties ``OUT_DIR``::

    {"id": ..., "ended": {"ended": "exit", "code": c} | {"ended": "timeout"},
     "json": n, "bin": m, "problem": "..."}\n  followed by n + m bytes

``c < 0`` means killed by signal ``-c``; ``problem`` names a file that was not a regular
file or was too large. A first frame ``{"ready": true}`` says torch is imported. The probe
makes itself non-dumpable, so the submission's processes (same uid) cannot open its
descriptors through ``/proc`` and write to the grader's pipes; in the sandbox it is the pid
namespace's init, which no signal from the submission can stop or kill. The grader trusts none
of the frame's content: it validates every field before building a tensor from the bytes.
"""
import builtins
import ctypes
import importlib.util
import json
import os
import resource
import signal
import stat
import sys
import time

# dtypes a result may have: the grader builds tensors only of these (see courseware.grading.results).
RESULT_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


CPU_MARGIN = 2  # seconds of CPU time beyond the wall-clock timeout (see main)
MAX_RECORD_BYTES = 1 << 20  # a results record: JSON of at most a few thousand entries
EMPTY_SECONDS = 5  # to empty the writable folders after an exercise
PR_SET_DUMPABLE = 4  # prctl option (linux/prctl.h)


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:500]


def changed_argument(args: tuple, given: tuple, torch) -> int | None:
    """The 1-based position of the first tensor of ``given`` (the copies of ``args`` a solution was
    called with) that the solution changed in place, or None. NaN counts as equal to NaN.

    The checkers (courseware.checks.core) use this same test, so a notebook's check cell and the grader
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


def _read_regular(folder: int, name: str, limit: int) -> tuple[bytes, str]:
    """The bytes of ``name`` in the directory ``folder`` (a descriptor), or a reason it is unusable.

    Opened without following a link and without blocking on a FIFO; only a regular file of at
    most ``limit`` bytes is read (a missing file is empty, with no reason)."""
    try:
        handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        return b"", ""
    except OSError as error:  # ELOOP: a symbolic link; others: not readable
        return b"", f"{name} is not a regular file ({os.strerror(error.errno)})"
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            return b"", f"{name} is not a regular file"
        if info.st_size > limit:
            return b"", f"{name} is larger than {limit} bytes"
        chunks, size = [], 0
        while chunk := os.read(handle, 1 << 20):
            size += len(chunk)
            if size > limit:
                return b"", f"{name} is larger than {limit} bytes"
            chunks.append(chunk)
        return b"".join(chunks), ""
    finally:
        os.close(handle)


def _empty(path: str, seconds: float = EMPTY_SECONDS) -> None:
    """Remove everything in the folder ``path``, never following a link, for at most ``seconds``.

    Iterative (a submission may nest folders deeper than any stack), and a folder the submission
    made unreadable is opened up first: it is the submission's own, under its own uid. What cannot
    be removed in time stays, costing only this submission's later exercises their space."""
    deadline = time.monotonic() + seconds
    stack = [(path, False)]  # (folder, its contents already pushed)
    while stack and time.monotonic() < deadline:
        folder, expanded = stack.pop()
        try:
            if expanded:
                if folder != path:
                    os.rmdir(folder)
                continue
            os.chmod(folder, 0o700)
            stack.append((folder, True))
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, False))
                    else:
                        os.unlink(entry.path)
        except OSError:  # gone already, or not ours to remove: leave it
            continue


def _send(frame: dict, payload: bytes = b"") -> None:
    """One frame on standard output: a JSON line, then ``payload``."""
    sys.stdout.buffer.write(json.dumps(frame).encode() + b"\n" + payload)
    sys.stdout.buffer.flush()


def _report(exercise_id: str, ended: dict, out_dir: str, file_bytes: int) -> None:
    """Send the exercise's two files to the grader. Whatever the submission did to the folder,
    this sends one frame: a problem with the files is the frame's ``problem``."""
    record, blob, problem = b"", b"", ""
    try:
        folder = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            record, problem = _read_regular(folder, exercise_id + ".json", MAX_RECORD_BYTES)
            blob, blob_problem = _read_regular(folder, exercise_id + ".bin", file_bytes)
            problem = problem or blob_problem
        finally:
            os.close(folder)
    except OSError as error:
        problem = f"the output folder could not be read ({os.strerror(error.errno)})"
    if problem:
        record, blob = b"", b""
    _send({"id": exercise_id, "ended": ended, "json": len(record), "bin": len(blob), "problem": problem},
          record + blob)


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


def _reap_all() -> None:
    """Wait for every child left (the sandbox's init inherits orphans): zombies count against
    the process limit."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def main(job_dir: str, out_dir: str) -> None:
    # In the sandbox the probe is its pid namespace's init, which receives only the signals it
    # handles: Python handles SIGINT, so a submission could otherwise interrupt the probe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Non-dumpable: the submission runs as this uid, and could otherwise open /proc/<probe>/fd/1
    # and write frames of its own. (Its forked children inherit this; an exec resets it.)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit("the probe could not make itself non-dumpable (prctl failed)")
    with open(os.path.join(job_dir, "job.json")) as handle:
        job = json.load(handle)
    sys.path.extend(job["site_packages"])
    for name in ("lib", "courseware", "experiments"):
        book = importlib.util.find_spec(name)
        # The folder the grader hid it under stays, empty: importable only as an empty namespace.
        if book is not None and (book.origin or any(os.listdir(f) for f in book.submodule_search_locations or ())):
            where = book.origin or list(book.submodule_search_locations)
            sys.exit(f"the book's {name} is importable inside the sandbox (from {where}); refusing to grade")
    limits = job["limits"]
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    _limit(resource.RLIMIT_NPROC, limits["processes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_bytes"])
    _limit(resource.RLIMIT_CORE, 0)
    import torch

    torch.set_num_threads(1)
    _send({"ready": True})
    for exercise in job["exercises"]:
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                # Should memory run out, the kernel kills the submission's processes, not the probe.
                # (Non-dumpable, as forked, the child's /proc files are root's: it could not write it.)
                ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
                with open("/proc/self/oom_score_adj", "w") as handle:
                    handle.write("1000")
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
        ended = _wait(pid, limits["cpu_seconds"])
        try:
            os.killpg(pid, signal.SIGKILL)  # whatever the exercise left running in its group
        except ProcessLookupError:
            pass
        if job["sandboxed"]:
            # Processes that left the group (setsid) would otherwise run on beside the next
            # exercise and the next submission. In the sandbox's pid namespace, whose init the
            # probe is, -1 means every other process.
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap_all()
        _report(exercise["id"], ended, out_dir, limits["file_bytes"])
        # The next exercise starts with empty folders (in the sandbox they are the submission's own).
        for folder in [out_dir] + (["/tmp", os.getcwd()] if job["sandboxed"] else []):
            _empty(folder)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
