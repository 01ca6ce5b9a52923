"""Where a submission's code runs: a bubblewrap sandbox (or, with ``--unsafe``, a plain process).

:func:`probe_command` builds the command that runs :mod:`courseware.probe` on one
job. In the sandbox (Debian's ``bwrap``, the sandbox Flatpak uses) the probe sees:

* ``/usr`` and the Python installation, read-only; the installed packages
  (site-packages) read-only, *without* running their ``.pth`` files, so the
  editable install of the book is not on the path and ``lib/`` is not mounted;
* the job folder (the probe, the solution sources, the inputs), read-only;
* three empty writable folders, each a memory file system of a fixed size
  (:data:`TMPFS_BYTES`): ``/tmp``, the working directory ``/scratch`` (not ``/tmp``: when
  the book lives under ``/tmp``, the mount points of its virtual environment's folders
  would show there) and ``/out``, where the solution's process writes its results and
  the probe reads them. No folder of the host is writable, so nothing the submission
  makes (a link, a FIFO, a file of gigabytes) lands where the grader might follow it.

Wherever ``lib``, ``courseware`` or ``experiments`` is installed among the mounted packages
(an ordinary ``pip install .`` puts them in site-packages), an empty folder is mounted over
it, and the probe refuses to run if any of them could still be imported.

Nothing else: not the book's ``lib/``, ``courseware/``, ``experiments/`` or ``chapters/``,
not the other submissions, not the grader's files or ``/root``. It has no network, its own process, IPC and
UTS namespaces, runs as an unprivileged uid and dies with the grader; when the
probe ends, the kernel kills every process left in its pid namespace. The probe
itself sets memory, CPU-time, process and file-size limits.

The process limit (RLIMIT_NPROC) counts every process of a uid, so two probes that
shared one would share one budget: a fork bomb in one submission would stop the
submission graded beside it from starting its exercises. Each probe therefore gets a
uid of its own: as root, a host uid that no process uses (:func:`sandbox_uid`); as an
ordinary user, the uid 65534 inside a user namespace of its own, whose processes the
kernel counts apart from every other namespace's.
"""
from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sys
import sysconfig
import time
from pathlib import Path
from typing import Iterator

NOBODY = 65534  # the unprivileged uid (and gid) the sandboxed code sees inside its user namespace
PROBE_UIDS = range(1_900_000_000, 2_000_000_000)  # host uids no account has: one per probe when grading as root
JOB, OUT = "/job", "/out"  # where the job and output folders appear inside the sandbox
SCRATCH = "/scratch"  # the submission's empty working directory and home
# Sizes of the memory file systems: results are at most two files of the file-size limit each.
TMPFS_BYTES = {"/tmp": 256 << 20, SCRATCH: 256 << 20, OUT: 160 << 20}


CGROUPS = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000  # the probe's processes together get this many µs of CPU per period: one CPU
GROUP_MEMORY_BYTES = 4 << 30  # all of one probe's processes and files (its memory file systems included)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is not installed: grading would run students' code unconfined."""


def bwrap_path() -> str:
    """The ``bwrap`` executable.

    Raises
    ------
    SandboxUnavailable
        When bubblewrap is not installed; the message says how to install it.
    """
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed, so submissions cannot be sandboxed: their code would run "
            "with your user's rights, files and network. Install it (`make sandbox`, or `apt-get install "
            "bubblewrap`), or pass --unsafe to grade without a sandbox (only for code you trust)."
        )
    return path


def python_paths() -> tuple[Path, list[Path]]:
    """The interpreter to run the probe with and the package folders it needs: the
    environment's site-packages and any other site- or dist-packages folder on ``sys.path``
    (a ``.pth`` file may add one)."""
    executable = Path(os.path.realpath(sys.executable))
    paths = sysconfig.get_paths()
    found = [Path(paths["purelib"]), Path(paths["platlib"])] + [
        Path(entry) for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    packages = sorted({path.resolve() for path in found if path.is_dir()})
    return executable, packages


BOOK_PACKAGES = ("lib", "courseware", "experiments")  # the book's code, its checkers' answers, its runs


def hidden_book_packages(packages: list[Path]) -> list[Path]:
    """Where the book's ``lib``, ``courseware`` or ``experiments`` could be imported from inside the sandbox: a
    folder of that name in any of ``packages`` (an ordinary, non-editable install puts them there)."""
    return [path / name for path in packages for name in BOOK_PACKAGES if (path / name).is_dir()]


def processes_of(uid: int) -> int:
    """How many processes the user ``uid`` runs now (RLIMIT_NPROC counts them all)."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            lines = status.read_text().splitlines()
        except OSError:  # the process ended while we looked
            continue
        uid_line = next((line for line in lines if line.startswith("Uid:")), "")
        count += uid_line.split()[1:2] == [str(uid)]
    return count


def sandbox_uid() -> int:
    """The host uid one probe's processes count against.

    As root: a uid drawn from :data:`PROBE_UIDS` that runs no process now, so this probe's
    process limit is its own. Otherwise the grader's own uid (each probe's user namespace
    keeps its count apart).
    """
    if os.geteuid() != 0:
        return os.getuid()
    draw = random.SystemRandom()
    while True:  # 1e8 uids against a handful of live probes: the first draw is almost always free
        uid = draw.choice(PROBE_UIDS)
        if processes_of(uid) == 0:
            return uid


def _ancestors(path: Path) -> list[str]:
    return [str(parent) for parent in reversed(path.parents) if str(parent) != "/"]


def probe_command(job_dir: Path, out_dir: Path, uid: int, unsafe: bool = False) -> list[str]:
    """The command that runs the probe on ``job_dir``, writing to ``out_dir``.

    Parameters
    ----------
    job_dir : Path
        The job folder (``job.json``, ``probe.py``, inputs).
    out_dir : Path
        Where an unsafe probe writes its results (in the sandbox they go to a memory
        file system, :data:`OUT`).
    uid : int
        The host uid from :func:`sandbox_uid`; used when the grader runs as root.
    unsafe : bool
        Run the probe as a plain process of the grader's user (no sandbox).

    Raises
    ------
    SandboxUnavailable
        When ``unsafe`` is false and bubblewrap is missing.
    """
    executable, packages = python_paths()
    if unsafe:
        return [str(executable), "-I", "-S", str(job_dir / "probe.py"), str(job_dir), str(out_dir)]
    bwrap = bwrap_path()
    prefix = Path(sys.base_prefix).resolve()
    mounts = [path for path in {prefix, *packages, executable.parent} if not str(path).startswith("/usr/")]
    # --as-pid-1: the probe is the pid namespace's init, with no bwrap reaper beside it holding the
    # grader's pipes (the submission, same uid, could write to the reaper's through /proc), and a
    # namespace's init ignores the SIGSTOP and SIGKILL its own namespace sends it.
    command = [bwrap, "--unshare-ipc", "--unshare-pid", "--as-pid-1", "--unshare-net", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv",
               "--setenv", "HOME", SCRATCH, "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "OMP_NUM_THREADS", "1",
               "--setenv", "MKL_NUM_THREADS", "1", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
               "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if Path("/" + name).is_symlink():
            command += ["--symlink", os.readlink("/" + name), "/" + name]
        elif Path("/" + name).is_dir():
            command += ["--ro-bind", "/" + name, "/" + name]
    # Both are writable by the unprivileged uid (bwrap's default 0755 belongs to root).
    command += ["--proc", "/proc", "--dev", "/dev"]
    for folder, size in TMPFS_BYTES.items():
        command += ["--perms", "1777" if folder == "/tmp" else "0777", "--size", str(size), "--tmpfs", folder]
    # bwrap creates a mount point's missing parents as 0700; the unprivileged uid must cross them.
    for folder in sorted({parent for path in mounts for parent in _ancestors(path)}):
        command += ["--perms", "0755", "--dir", folder]
    for path in sorted(mounts):
        command += ["--ro-bind", str(path), str(path)]
    for path in hidden_book_packages(packages):  # an empty, read-only folder where each was
        command += ["--perms", "0555", "--size", "4096", "--tmpfs", str(path)]
    command += ["--ro-bind", str(job_dir), JOB, "--chdir", SCRATCH]
    if os.geteuid() == 0:
        # As root, bwrap keeps a real uid of 0, which RLIMIT_NPROC ignores: become ``uid`` for real.
        command += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--",
                    "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        command += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--"]
    return command + [str(executable), "-I", "-S", f"{JOB}/probe.py", JOB, OUT]


def _controllers() -> list[tuple[Path, dict[str, str]]]:
    """Where a probe's group is made and what limits it: one (hierarchy, {file: value}) per
    cgroup v1 controller (cpu, memory), or one for cgroup v2; empty when the grader cannot make
    cgroups (not root, none mounted)."""
    if os.geteuid() != 0:
        return []
    one_cpu = str(CPU_PERIOD_US)
    if (CGROUPS / "cpu" / "cpu.cfs_quota_us").is_file():
        found = [(CGROUPS / "cpu", {"cpu.cfs_quota_us": one_cpu})]
        if (CGROUPS / "memory" / "memory.limit_in_bytes").is_file():
            found.append((CGROUPS / "memory", {"memory.limit_in_bytes": str(GROUP_MEMORY_BYTES)}))
        return found
    controllers = CGROUPS / "cgroup.controllers"
    if controllers.is_file() and {"cpu", "memory"} <= set(controllers.read_text().split()):
        return [(CGROUPS, {"cpu.max": f"{one_cpu} {one_cpu}", "memory.max": str(GROUP_MEMORY_BYTES)})]
    return []


def _make_groups(name: str) -> list[Path]:
    """New cgroups ``name`` with the limits of :func:`_controllers`, or none where they cannot be made."""
    made = []
    try:
        for hierarchy, limits in _controllers():
            if "cpu.max" in limits:  # cgroup v2: the children of the root may use the controllers
                with contextlib.suppress(OSError):  # already enabled, or not allowed: then the writes fail
                    (hierarchy / "cgroup.subtree_control").write_text("+cpu +memory")
            (hierarchy / name).mkdir()
            made.append(hierarchy / name)
            for file, value in limits.items():
                (hierarchy / name / file).write_text(value)
    except OSError:  # read-only (a container) or refused: no limits, rather than half of them
        for group in made:
            group.rmdir()
        return []
    return made


def _remove_group(group: Path) -> None:
    """Kill what is left in ``group`` and remove it (it stays busy a moment while processes exit)."""
    deadline = time.monotonic() + 5
    while True:
        with contextlib.suppress(OSError, ValueError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            group.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


@contextlib.contextmanager
def limited_group(name: str) -> Iterator[list[str]]:
    """Cgroups in which a probe's processes together get at most one CPU and
    :data:`GROUP_MEMORY_BYTES` of memory (kernel memory, such as a tmpfs's inodes, included),
    however many processes they start.

    Yields a command prefix that moves the command into the groups before it runs, or ``[]``
    where the grader cannot make them (not root, or no writable controllers: then only the
    per-process limits and the scheduler's fairness between sessions apply; see the instructor
    guide). The groups are removed afterwards, their processes killed.
    """
    groups = _make_groups(name)
    if not groups:
        yield []
        return
    try:
        moves = " && ".join(f'echo $$ > "${index}"' for index in range(1, len(groups) + 1))
        yield ["sh", "-c", f'{moves} && shift {len(groups)} && exec "$@"', "sh",
               *[str(group / "cgroup.procs") for group in groups]]
    finally:
        for group in groups:
            _remove_group(group)
