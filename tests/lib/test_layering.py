"""The import contracts of ``pyproject.toml`` (``[tool.importlinter]``) hold, and they can fail.

import-linter checks them: lib is layered like the book (a chapter's module imports only the
foundations and earlier chapters; every module of lib is placed, so the list is the map of
which chapter teaches what), lib never imports courseware or the experiments, courseware imports
downwards, and a chapter's experiments import only lib and earlier chapters' experiments.
grimp reads every import statement, function-level ones included, so a late import cannot
hide a dependency. Each rule is also broken on a copy of the packages, to see it fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as c; c()"]


def chapter_modules() -> list[str]:
    """The modules the chapters teach: every module placed in a part's contract
    (``part1-order`` ... ``part5-order``), in its part's package."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return [f"{container}.{name.strip()}" for c in contracts if c["id"].startswith("part")
            for container in c["containers"] for layer in c["layers"] for name in layer.split(":")]


def lint(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with ``root``'s pyproject.toml, importing the packages found in ``root``."""
    return subprocess.run([*LINT, "--no-cache", str(root / "pyproject.toml")], cwd=root,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def test_the_chapter_layers_name_modules_that_exist():
    assert len(chapter_modules()) > 25
    for name in chapter_modules():
        path = ROOT / Path(*name.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), name


def test_the_book_keeps_its_import_contracts():
    result = lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10 kept, 0 broken" in result.stdout, result.stdout


@pytest.fixture(scope="module")
def copy_of_the_book(tmp_path_factory) -> Path:
    """lib, courseware and experiments (their Python files) and pyproject.toml, in a folder of their own."""
    root = tmp_path_factory.mktemp("book")
    for package in ("lib", "courseware", "experiments"):
        shutil.copytree(ROOT / package, root / package,
                        ignore=lambda folder, names: [n for n in names if not (n.endswith(".py") or
                                                                                (Path(folder) / n).is_dir())]
                        + ["__pycache__"])
    shutil.copy(ROOT / "pyproject.toml", root)
    assert lint(root).returncode == 0  # the copy keeps the contracts, so each break below is the edit's
    return root


@pytest.mark.parametrize("file, line, broken, expected", [
    # An earlier part importing a later one: at module level, inside a function, as `from ... import`.
    ("lib/part1_blocks/activations.py", "from lib.part4_attention.attention import masked_softmax\n",
     "lib is layered", "lib.part1_blocks.activations -> lib.part4_attention.attention"),
    ("lib/part2_recurrent/rnn.py", "def later():\n    import lib.part5_memory\n", "lib is layered",
     "lib.part2_recurrent.rnn -> lib.part5_memory"),
    ("lib/part2_recurrent/gating.py", "from lib.part3_words import decoding\n", "lib is layered",
     "lib.part2_recurrent.gating -> lib.part3_words.decoding"),
    # An earlier chapter importing a later one of the same part.
    ("lib/part3_words/decoding.py", "from lib.part3_words import metrics\n", "Part III is layered",
     "lib.part3_words.decoding -> lib.part3_words.metrics"),
    ("lib/part4_attention/attention.py", "from lib.part4_attention.pairs import SequencePairs\n",
     "Part IV is layered", "lib.part4_attention.attention -> lib.part4_attention.pairs"),
    # A foundation importing a chapter's module; a chapter's module importing the explorers.
    ("lib/training.py", "import lib.part2_recurrent.rnn\n", "lib is layered",
     "lib.training -> lib.part2_recurrent.rnn"),
    ("lib/part4_attention/attention.py", "from lib.widgets.core import Visual\n", "lib is layered",
     "lib.part4_attention.attention -> lib.widgets.core"),
    # lib importing courseware; courseware importing upwards.
    ("lib/display.py", "from courseware.checks import CHECKS\n", "lib never imports courseware",
     "lib.display -> courseware.checks"),
    ("courseware/checks/core.py", "from courseware.grading.grader import grade_all\n", "courseware imports",
     "courseware.checks is not allowed to import courseware.grading"),
    # lib importing the experiments; an experiment importing a later chapter's, or courseware.
    ("lib/part2_recurrent/rnn.py", "import experiments.ch03_rnn\n", "lib never imports",
     "lib.part2_recurrent.rnn -> experiments.ch03_rnn"),
    ("experiments/ch03_rnn.py", "import experiments.ch10_seq2seq\n", "a chapter's experiments",
     "experiments.ch03_rnn is not allowed to import experiments.ch10_seq2seq"),
    ("experiments/ch10_seq2seq.py", "import courseware.checks\n", "the experiments never import courseware",
     "experiments.ch10_seq2seq -> courseware.checks"),
    # A module nobody placed.
    ("lib/stray.py", "x = 1\n", "lib is layered", "stray"),
])
def test_each_contract_fails_when_broken(copy_of_the_book, file, line, broken, expected):
    path = copy_of_the_book / file
    before = path.read_text() if path.exists() else None
    path.write_text((before or "") + "\n" + line)
    try:
        result = lint(copy_of_the_book)
    finally:
        path.write_text(before) if before is not None else path.unlink()
    report = " ".join(result.stdout.split())  # import-linter wraps its lines at 80 characters
    assert result.returncode == 1, report
    assert "0 broken" not in report and f"{broken}" in report.split("Broken contracts")[1], report
    assert expected in report, report
