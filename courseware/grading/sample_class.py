"""A made-up class to try the grader on: right, wrong, broken and cheating submissions.

``python -m courseware.grading.sample_class OUT [--students 40]`` writes
``OUT/<student>/<chapter>.ipynb`` for chapters 1, 3, 9 and 11, in a fixed mix: 40% right
(the master's answers), 25% wrong (each function's result shifted by one), 20% broken
(a truncated file, ``os._exit`` in a solution, an endless loop) and 15% cheating (the
book's own ``lib``, or the master notebook read and executed). Then, for example::

    python -m courseware grade OUT -j 2 --timeout 10 --csv grades.csv --feedback feedback

The instructor guide reports how long this takes with and without the sandbox.
"""
from __future__ import annotations

import argparse
import copy
from pathlib import Path

import nbformat

from courseware.exercises import BOOK_CHAPTERS, coding_exercises

CHAPTERS = ("01_activations_losses", "03_rnn", "09_attention", "11_transformer")
KINDS = ("right", "right", "right", "right", "right", "right", "right", "right",
         "wrong", "wrong", "wrong", "wrong", "wrong",
         "truncated", "exit", "loop", "exit",
         "lib", "exec-master", "lib")  # 20 kinds, repeated: 40% right, 25% wrong, 20% broken, 15% cheating


def _edit_solutions(master, edit) -> nbformat.NotebookNode:
    notebook = copy.deepcopy(master)
    for exercise in coding_exercises(notebook):
        cell = next(c for c in notebook.cells if c.get("id") == exercise.solution_cell)
        cell.source = edit(cell.source, exercise)
    return notebook


def submission(kind: str, chapter: str) -> str:
    """The text of one submission of ``kind`` (one of :data:`KINDS`) for ``chapter``.

    Raises
    ------
    ValueError
        When ``kind`` or ``chapter`` is unknown.
    """
    if kind not in KINDS or chapter not in CHAPTERS:
        raise ValueError(f"kind must be one of {sorted(set(KINDS))} and chapter one of {CHAPTERS}; "
                         f"found {kind!r}, {chapter!r}")
    master_path = BOOK_CHAPTERS / f"{chapter}.ipynb"
    master = nbformat.read(master_path, as_version=4)
    master.metadata["exercises"] = {"master": chapter}
    edits = {
        "right": lambda source, exercise: source,
        "wrong": lambda source, exercise: (f"{source}\n_right = {exercise.function}\n"
                                           f"def {exercise.function}(*args):\n    return _right(*args) + 1\n"),
        "exit": lambda source, exercise: f"{source}\nimport os\nos._exit(0)\n",
        "loop": lambda source, exercise: f"{source}\nwhile True:\n    pass\n",
        "lib": lambda source, exercise: f"from courseware.checks import *\n{source}",
        "exec-master": lambda source, exercise: f"exec(open({str(master_path)!r}).read())\n{source}",
    }
    if kind == "truncated":
        return nbformat.writes(master)[:3000]
    return nbformat.writes(_edit_solutions(master, edits[kind]))


def write_class(out: Path, students: int = 40) -> list[Path]:
    """Write ``students`` submissions to ``out``; return their paths."""
    if not isinstance(students, int) or students < 1:
        raise ValueError(f"students must be a positive integer; found {students!r}")
    written = []
    for number in range(students):
        kind, chapter = KINDS[number % len(KINDS)], CHAPTERS[number % len(CHAPTERS)]
        path = Path(out) / f"student{number:02d}-{kind}" / f"{chapter}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(submission(kind, chapter), encoding="utf-8")
        written.append(path)
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m courseware.grading.sample_class", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--students", type=int, default=40)
    args = parser.parse_args(argv)
    print(f"wrote {len(write_class(args.out, args.students))} submissions to {args.out}")


if __name__ == "__main__":
    main()
