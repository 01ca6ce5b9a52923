"""A static scan of a solution cell: what a human should look at before trusting a PASS.

:func:`review_flags` reads the cell's syntax tree (nothing runs) and names, in plain
words, every use of something an honest answer does not need: the book's own ``lib``,
the calls the exercise forbids (declared with its checker, ``Check.forbidden``),
``exec``/``eval``, files, programs, ``/proc``, ``sys.modules``, ``builtins``. A flag
is not a verdict: the grader prints REVIEW beside PASS or FAIL and a human decides.
Import aliases are followed (``import torch.nn.functional as F`` makes
``F.layer_norm`` read ``torch.nn.functional.layer_norm``); code built from strings at
run time is not, which is why ``exec``, ``eval``, ``getattr`` on modules and
``__import__`` are flagged themselves.
"""
from __future__ import annotations

import ast

# name used in the cell → why it needs a human's eye
SUSPICIOUS_NAMES = {
    "exec": "runs code from a string (exec)",
    "eval": "runs code from a string (eval)",
    "compile": "compiles code from a string (compile)",
    "__import__": "imports by name at run time (__import__)",
    "open": "opens files (open)",
    "globals": "reaches module globals (globals)",
    "__builtins__": "touches builtins",
}
SUSPICIOUS_MODULES = {
    "lib": "uses the book's own code (lib), which the exercises ask you to write yourself",
    "builtins": "touches builtins",
    "subprocess": "runs programs (subprocess)",
    "importlib": "imports by name at run time (importlib)",
    "ctypes": "calls C directly (ctypes)",
    "socket": "opens network connections (socket)",
    "os.system": "runs programs (os.system)",
    "os.popen": "runs programs (os.popen)",
    "os.fork": "starts processes (os.fork)",
    "sys.modules": "touches sys.modules",
    "pathlib": "reads files (pathlib)",
    "io.open": "opens files (io.open)",
}
SUSPICIOUS_ATTRIBUTES = {"read_text": "reads files (read_text)", "read_bytes": "reads files (read_bytes)"}
SUSPICIOUS_TEXT = {"/proc": "mentions /proc", ".ipynb": "mentions a notebook file (.ipynb)"}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → the dotted module path it was imported as."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str:
    """``F.layer_norm`` → ``torch.nn.functional.layer_norm`` (empty for other expressions)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def review_flags(source: str, forbidden: tuple[str, ...] = ()) -> list[str]:
    """Plain-text reasons for a human to review a solution cell (empty when none).

    Parameters
    ----------
    source : str
        The solution cell's code.
    forbidden : tuple of str
        Dotted names the exercise forbids (``"torch.nn.functional.layer_norm"``; a
        name matches itself and everything under it), or ``".name"`` for a method of
        any object (``".backward"``).

    Raises
    ------
    TypeError
        When ``source`` is not a string.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str; found {type(source).__name__}")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []  # it cannot run either: the run reports the error
    aliases = _aliases(tree)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, (ast.Name, ast.Attribute)):
            names.add(_dotted(node, aliases))
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    texts = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    flags = []
    for banned in forbidden:
        if banned.startswith("."):
            hit = banned[1:] in attributes
        else:
            hit = any(_matches(name, banned) for name in names) or banned.rsplit(".", 1)[-1] in texts
        if hit:
            flags.append(f"uses {banned.lstrip('.')}, which the exercise forbids")
    for name, reason in SUSPICIOUS_NAMES.items():
        if name in names:
            flags.append(reason)
    for module, reason in SUSPICIOUS_MODULES.items():
        if any(_matches(name, module) for name in names):
            flags.append(reason)
    flags += [reason for attribute, reason in SUSPICIOUS_ATTRIBUTES.items() if attribute in attributes]
    flags += [reason for text, reason in SUSPICIOUS_TEXT.items() if any(text in value for value in texts)]
    return list(dict.fromkeys(flags))
