"""lib/ is layered like the book: a chapter's module imports only foundations and the modules of
chapters at or before it, and nothing in lib imports the layers built on top (widgets, checks,
exercises, grading).

The chapter order comes from ``_toc.yml``; :data:`CHAPTER_OF` states once which chapter teaches each
module. Imports are read with :mod:`ast`, function-level ones included, so a late import cannot hide
a dependency. Each rule is also run on a small synthetic package that breaks it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Used by every chapter; they import only each other (and the standard library, torch, ...).
FOUNDATIONS = ("lib", "lib.validation", "lib.display", "lib.training", "lib.tasks", "lib.corpus")
# Built on top of the chapters' modules: they may import anything, nothing below imports them.
TOP = ("lib.widgets", "lib.checks", "lib.exercises", "lib.grading")
# The chapter (a file of _toc.yml) that teaches each module; a package's entry covers its submodules.
CHAPTER_OF = {
    "lib.activations": "chapters/01_activations_losses",
    "lib.losses": "chapters/01_activations_losses",
    "lib.optim": "chapters/02_optimisers",
    "lib.schedules": "chapters/02_optimisers",
    "lib.rnn": "chapters/03_rnn",
    "lib.char_lm": "chapters/03_rnn",
    "lib.gating": "chapters/04_gating",
    "lib.word2vec": "chapters/05_word2vec",
    "lib.embeddings": "chapters/05_word2vec",
    "lib.tree_softmax": "chapters/05_word2vec",
    "lib.ngram": "chapters/06_language_models",
    "lib.lm": "chapters/06_language_models",
    "lib.softmax_approx": "chapters/06_language_models",
    "lib.reinforce": "chapters/06_language_models",
    "lib.decoding": "chapters/07_decoding",
    "lib.metrics": "chapters/08_bleu_rouge",
    "lib.attention": "chapters/09_attention",
    "lib.seq2seq": "chapters/10_seq2seq",
    "lib.pointer": "chapters/10_seq2seq",
    "lib.weights": "chapters/10_seq2seq",
    "lib.positional": "chapters/11_transformer",
    "lib.transformer_blocks": "chapters/11_transformer",
    "lib.transformer": "chapters/11_transformer",
    "lib.transformer_recipe": "chapters/11_transformer",
    "lib.pretrained": "chapters/11_transformer",
    "lib.pretraining": "chapters/11_transformer",
    "lib.memory": "chapters/12_memory",
}


def chapter_order(toc: Path) -> list[str]:
    """The files of _toc.yml in reading order."""
    files: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(yaml.safe_load(toc.read_text()))
    return files


def _within(module: str, prefixes) -> str | None:
    """The entry of ``prefixes`` that is ``module`` or a package containing it."""
    matches = [p for p in prefixes if module == p or module.startswith(p + ".")]
    return max(matches, key=len) if matches else None


def role(module: str, chapter_of: dict[str, str]) -> str | None:
    """'top', 'foundation', a chapter file, or None for a module the map does not know."""
    if _within(module, TOP):
        return "top"
    chapter = _within(module, chapter_of)
    if chapter:
        return chapter_of[chapter]
    if module == "lib" or _within(module, FOUNDATIONS[1:]):
        return "foundation"
    return None


def module_name(path: Path, package_root: Path) -> str:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def lib_imports(path: Path, name: str) -> list[tuple[int, str]]:
    """Every ``lib`` module imported anywhere in the file (line, module), relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # `from lib import rnn` imports the module lib.rnn.
            found += [(node.lineno, f"{module}.{alias.name}") if module == "lib" else (node.lineno, module)
                      for alias in node.names]
    return [(line, module) for line, module in found if module == "lib" or module.startswith("lib.")]


def layering_violations(package_root: Path, order: list[str], chapter_of: dict[str, str]) -> list[str]:
    """One message per import that breaks the layering, naming file:line and the rule."""
    rank = {chapter: i for i, chapter in enumerate(order)}
    problems = []
    for path in sorted(package_root.rglob("*.py")):
        name = module_name(path, package_root)
        where = path.relative_to(package_root.parent)
        mine = role(name, chapter_of)
        if mine is None:
            problems.append(f"{where}: {name} is in no layer: add it to CHAPTER_OF or FOUNDATIONS")
            continue
        if mine == "top":
            continue
        for line, imported in lib_imports(path, name):
            theirs = role(imported, chapter_of)
            if theirs == "top":
                problems.append(f"{where}:{line}: imports {imported}, which sits on top of lib")
            elif theirs is None or theirs == "foundation":
                continue
            elif mine == "foundation":
                problems.append(f"{where}:{line}: foundation {name} imports {imported} ({theirs})")
            elif rank[theirs] > rank[mine]:
                problems.append(f"{where}:{line}: {name} ({mine}) imports {imported}, "
                                f"taught later in {theirs}")
    return problems


def test_every_mapped_chapter_is_in_the_table_of_contents():
    order = chapter_order(ROOT / "_toc.yml")
    assert set(CHAPTER_OF.values()) <= set(order)
    assert all(Path(ROOT / f"{chapter}.ipynb").exists() for chapter in CHAPTER_OF.values())


def test_lib_is_layered_like_the_book():
    problems = layering_violations(ROOT / "lib", chapter_order(ROOT / "_toc.yml"), CHAPTER_OF)
    assert not problems, "\n".join(problems)


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "lib" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "lib"


ORDER = ["chapters/early", "chapters/late"]
MAP = {"lib.early": "chapters/early", "lib.late": "chapters/late", "lib.deep": "chapters/late"}


@pytest.mark.parametrize("files, expected", [
    # An earlier chapter importing a later one, at module level and inside a function.
    ({"early.py": "import torch\nfrom lib.late import x\n"},
     "lib/early.py:2: lib.early (chapters/early) imports lib.late, taught later in chapters/late"),
    ({"early.py": "def f():\n    import lib.late\n"},
     "lib/early.py:2: lib.early (chapters/early) imports lib.late"),
    ({"early.py": "from lib import late\n"}, "lib/early.py:1: lib.early (chapters/early) imports lib.late"),
    # A package's submodule belongs to the package's chapter; relative imports are resolved.
    ({"early.py": "from lib.deep.inner import y\n"}, "imports lib.deep.inner, taught later in chapters/late"),
    ({"tasks/__init__.py": "", "tasks/thing.py": "from ..late import x\n"},
     "lib/tasks/thing.py:1: foundation lib.tasks.thing imports lib.late (chapters/late)"),
    # Nothing below the top layer imports it.
    ({"late.py": "from lib.widgets.core import Visual\n"},
     "lib/late.py:1: imports lib.widgets.core, which sits on top of lib"),
    ({"validation.py": "from lib.checks import CHECKS\n"}, "lib/validation.py:1: imports lib.checks"),
    # A module nobody placed.
    ({"stray.py": "x = 1\n"}, "lib/stray.py: lib.stray is in no layer"),
])
def test_the_rules_fail_on_a_bad_module(tmp_path, files, expected):
    problems = layering_violations(_package(tmp_path, files), ORDER, MAP)
    assert len(problems) == 1 and expected in problems[0], problems


def test_allowed_imports_pass(tmp_path):
    root = _package(tmp_path, {
        "late.py": "from lib.early import x\nfrom lib.validation import require_int\nfrom lib.tasks import T\n",
        "early.py": "from lib.training import TrainingLog\nimport torch\n",
        "training.py": "from lib.validation import require_int\n",
        "widgets/core.py": "from lib.late import y\nfrom lib.checks import CHECKS\n",
    })
    assert layering_violations(root, ORDER, MAP) == []
