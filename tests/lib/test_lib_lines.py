"""tools/lib_lines.py, the line counter issue 29's targets are measured with, on a module
whose every line's class is known."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = '''"""A module docstring
on two lines."""
import torch


def _check_size(n):
    if n < 1:
        raise ValueError("n must be at least 1")


def scale(x, n):
    """Multiply by n."""
    _check_size(n), _check_size(n + 1)  # a chained check
    require_tensor(x)

    # why: a comment line
    if n > 2:
        x = x * 2
    return x * n
'''


def _lib_lines():
    spec = importlib.util.spec_from_file_location("lib_lines", ROOT / "tools" / "lib_lines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_line_is_counted_once_in_its_class(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    counts = _lib_lines().count(path)
    assert counts == {
        "code": 6,  # the import, two def lines, the if that computes, its body, the return
        "docstring": 3,  # the module's two lines and scale's one
        "check": 4,  # the if that only raises (2 lines), the chained line, require_tensor
        "comment": 1,
        "blank": 5,
        "lines": 19,
        "chained": 1,
        "helpers": 1,
    }


def test_the_five_modules_it_counts_by_default_are_lib_files():
    """The default files are the five modules issue 29 names, wherever lib's parts put them."""
    missing = [name for name in _lib_lines().FIVE if not (ROOT / "lib" / name).is_file()]
    assert not missing, f"tools/lib_lines.py counts files lib does not have: {missing}"
