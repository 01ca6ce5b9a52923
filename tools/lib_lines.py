"""What the lines of lib's modules are: computing code, docstrings, argument checks, comments, blank.

``python tools/lib_lines.py [MODULE.py ...]`` prints one row per file (default: the five modules
issue 29 names) and their total. A line is counted once, in the first class that claims it:

* **docstring**: inside a module, class or function docstring;
* **check**: inside a statement that only calls argument checks (``require_*``, ``check_*``,
  ``_require*``, ``_check*``), or an ``if`` whose body only raises (a hand-written check);
* **comment** or **blank**: a line with only a comment, or nothing;
* **code**: every other line, the code that computes.

It also counts the *chained* check statements (several check calls joined into one tuple, to
keep a function at one check line) and the check helpers a file defines.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIVE = (
    "part4_attention/attention.py",
    "part4_attention/transformer_blocks.py",
    "part4_attention/transformer.py",
    "part2_recurrent/rnn.py",
    "part4_attention/seq2seq.py",
)
CHECK_NAME = re.compile(r"_?(require|check)(_|$)")


def _called(call: ast.expr) -> str:
    function = call.func if isinstance(call, ast.Call) else None
    return getattr(function, "id", None) or getattr(function, "attr", None) or ""


def _only_checks(statement: ast.stmt) -> bool:
    if isinstance(statement, ast.Expr):
        calls = statement.value.elts if isinstance(statement.value, ast.Tuple) else [statement.value]
        return all(CHECK_NAME.match(_called(call)) for call in calls)
    if isinstance(statement, ast.If) and not statement.orelse:
        return all(isinstance(inner, ast.Raise) for inner in statement.body)
    return False


def count(path: Path) -> dict[str, int]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    kind: dict[int, str] = {}

    def claim(node: ast.AST, name: str) -> None:
        for row in range(node.lineno, node.end_lineno + 1):
            kind.setdefault(row, name)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if ast.get_docstring(node) is not None:
                claim(node.body[0], "docstring")
    chained = helpers = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and _only_checks(node):
            claim(node, "check")
            chained += isinstance(node, ast.Expr) and isinstance(node.value, ast.Tuple)
        if isinstance(node, ast.FunctionDef) and CHECK_NAME.match(node.name):
            helpers += 1
    counts = {"code": 0, "docstring": 0, "check": 0, "comment": 0, "blank": 0}
    for row, text in enumerate(lines, start=1):
        if row in kind:
            counts[kind[row]] += 1
        elif not text.strip():
            counts["blank"] += 1
        elif text.strip().startswith("#"):
            counts["comment"] += 1
        else:
            counts["code"] += 1
    return {**counts, "lines": len(lines), "chained": chained, "helpers": helpers}


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv] or [ROOT / "lib" / name for name in FIVE]
    columns = ("lines", "code", "docstring", "check", "comment", "blank", "chained", "helpers")
    print(f"{'file':28}" + "".join(f"{c:>10}" for c in columns) + f"{'code %':>8}")
    total = dict.fromkeys(columns, 0)
    for path in paths:
        row = count(path)
        total = {c: total[c] + row[c] for c in columns}
        print(f"{path.name:28}" + "".join(f"{row[c]:>10}" for c in columns) + f"{row['code'] / row['lines']:>8.0%}")
    print(f"{'total':28}" + "".join(f"{total[c]:>10}" for c in columns) + f"{total['code'] / total['lines']:>8.0%}")


if __name__ == "__main__":
    main(sys.argv[1:])
