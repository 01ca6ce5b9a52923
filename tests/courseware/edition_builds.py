"""Build several editions of the book side by side, importing Jupyter Book's stack once.

``python edition_builds.py LOGS EDITION=ARGS_JSON ...`` imports what every build imports (Sphinx,
Jupyter Book, myst-nb, the themes and extensions, and ``lib.widgets``, which the book's explorers
extension reads: torch), then forks one process per edition. Each child sets ``BOOK_EDITION`` to its
edition, sends its output to ``LOGS/<edition>.log`` and runs ``jupyter-book`` with the arguments
``ARGS_JSON`` (a JSON list) as the command line would: everything a build does happens in the child,
from reading the configuration on, so the children build exactly what two ``jupyter-book build``
commands build. Only the imports are shared (about 6 s of CPU per build, a sixth of it).

Exits 0 when every build did, else 1 after printing the end of each failed build's log.
(tests/courseware/test_grading_student_edition.py builds the student and instructor editions so.)
"""
import importlib
import json
import os
import sys
from pathlib import Path

# What every build imports first (the slow part of starting one); a module missing here is
# imported by the build itself.
SHARED_IMPORTS = ("jupyter_book.cli.main", "jupyter_book.sphinx", "sphinx.application", "sphinx.builders.html",
                  "sphinx.search.en", "myst_nb.sphinx_ext", "sphinx_book_theme", "sphinx_exercise",
                  "sphinx_design", "sphinxcontrib.bibtex", "lib.widgets.core")


def _build(edition: str, args: list[str], log: Path) -> int:
    """In the child: one ``jupyter-book`` command, its output in ``log``; its exit status."""
    os.environ["BOOK_EDITION"] = edition
    handle = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(handle, 1)
    os.dup2(handle, 2)
    from jupyter_book.cli.main import main

    try:
        main(args=args, prog_name="jupyter-book")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # noqa: BLE001 (reported in the log, as the command line would)
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main(argv: list[str]) -> int:
    logs, builds = Path(argv[0]), dict(item.split("=", 1) for item in argv[1:])
    for name in SHARED_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    children = {}
    for edition, args in builds.items():
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _build(edition, json.loads(args), logs / f"{edition}.log")
            finally:
                os._exit(code)
        children[pid] = edition
    failed = []
    for pid, edition in children.items():
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed.append(edition)
    for edition in failed:
        log = (logs / f"{edition}.log").read_text(errors="replace")
        print(f"the {edition} edition did not build:\n{log[-3000:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
