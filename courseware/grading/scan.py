"""A static scan of a solution cell: what a human should look at before trusting a PASS.

:func:`review_flags` reads the cell's syntax tree (nothing in it runs) and names, in
plain words, every use of something an honest answer does not need. A flag is not a
verdict: the grader prints REVIEW beside PASS or FAIL and a human decides.

**What is followed** to the dotted name it reaches:

* import aliases: ``import torch.nn.functional as F`` makes ``F.layer_norm`` read
  ``torch.nn.functional.layer_norm``, and so does ``from torch.nn import functional as F2``;
* simple assignments of an imported name, at the top or in any function: ``G = F``, chains
  ``H = G`` (in any order), ``a, b = F, torch``, ``(G := F)`` (the binding nearest an import
  wins); not in a class's own scope, where a binding makes a class attribute (see below);
* ``getattr(x, name)`` whose name is built only from string constants (``"layer_" +
  "norm"``, f-strings of constants, ``"".join([...])``); the same strings count as text;
* names after ``from M import *`` that the cell never binds, read as ``M.name``;
* the objects names stand for in the grader's already loaded modules, read without
  running code: ``torch.nn.modules.loss.F`` *is* ``torch.nn.functional``, ``torch.os.system``
  is ``os.system``, ``torch._C._nn.scaled_dot_product_attention`` is
  ``torch.nn.functional.scaled_dot_product_attention``.

**What is flagged:**

* a forbidden name (``Check.forbidden``) reached by its own name or a string spelling
  its last part, under another name of the same object, or as a variant whose name
  contains it (``torch.rnn_tanh_cell``, ``torch._VF.rnn_tanh`` for ``torch.rnn_tanh``;
  ``torch.native_layer_norm`` for ``torch.layer_norm``; not for forbidden *modules*,
  whose short names sit inside too many others); ``functorch`` counts as ``torch.func``,
  and ``grad_fn``/``requires_grad`` as ``torch.autograd``;
* an attribute named like a forbidden name's last part (in any case, underscores ignored)
  on anything at all: ``K.m.scaled_dot_product_attention``, ``d["x"].LayerNorm``, since
  the scan cannot know every way a module reaches an object;
* what cannot be followed: ``getattr``/``setattr``/``delattr`` on an imported module or
  anything under one; ``getattr`` with a name computed at run time on any object;
  ``getattr`` passed around as a value; ``import *``; an imported module used as a value
  (in a list, as an argument or default, returned, matched on, bound in a class's scope
  however deep in ``if``/``try``/``for`` or a walrus), imported in a class's scope, or one
  name bound to two modules; a cell too large (over 200 KB or 50,000 syntax nodes) or
  nested too deeply to scan;
* ways to run code or reach it by a name in a string: ``exec``, ``eval``, ``compile``,
  ``__import__``, ``globals``, ``locals``, ``vars``, ``builtins``, ``importlib``,
  ``pkgutil``, ``runpy``, ``pydoc``, ``inspect``, ``gc``, pickles (``pickle``,
  ``torch.load``, ``numpy.load`` ...), ``operator.attrgetter``/``methodcaller``,
  ``typing.get_type_hints``, ``string.Formatter``, ``timeit``, ``code``, ``types.FunctionType``,
  ``sys.modules`` and the import machinery, ``torch.ops``, ``torch.library``, ``torch.jit``;
* private entry points: a part of a name under an imported module that starts with
  ``_`` (``torch._C``, ``torch._VF``, ``sys._getframe``, ``import _imp``) and
  ``torch.native_*``; Python's internals: dunders other than ``__init__``, ``__name__``
  and a few other harmless ones, as names, attributes or inside strings
  (``"{0.__globals__}"``), and frame attributes (``f_globals``, ``tb_frame``);
* assignments to an imported module's attributes; files, programs, sockets, ``/proc``,
  notebook files; the book's own ``lib`` and ``courseware``;
* an import outside :data:`USUAL_IMPORTS` (``torch``, ``numpy``, ``math``,
  ``collections`` ...) and the modules the rules above look into (``os``, ``sys``,
  ``io`` ...): many installed packages run code from strings (``sympy``, ``mako``).

Every string that parses as Python is scanned as code too (up to three strings deep, and
200 KB or 20,000 syntax nodes of them in all), since ``exec`` or an annotation that
``functools.singledispatch`` evaluates may run it; its flags end with "in code written as
a string". The scan takes time in proportion to the cell and never raises on what the cell
holds: what it cannot afford to read is flagged instead. Code that builds names in other ways
(slicing, ``str.replace``, decoding) is not followed; what it must pass through to use
them (``getattr`` with a computed name, ``exec``, a module as a value ...) is flagged.
"""
from __future__ import annotations

import ast
import builtins
import importlib.util
import inspect
import re
import sys
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from types import ModuleType

# name used in the cell → why it needs a human's eye
SUSPICIOUS_NAMES = {
    "exec": "runs code from a string (exec)",
    "eval": "runs code from a string (eval)",
    "compile": "compiles code from a string (compile)",
    "__import__": "imports by name at run time (__import__)",
    "open": "opens files (open)",
    "globals": "reaches module globals (globals)",
    "locals": "reaches variables by name (locals)",
    "vars": "reads an object's attributes as a dictionary (vars)",
    "__builtins__": "touches builtins",
}
SUSPICIOUS_MODULES = {
    "lib": "uses the book's own code (lib), which the exercises ask you to write yourself",
    "courseware": "uses the book's checkers (courseware), which hold the answers",
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
# Ways to reach code by a name held in a string, or to run code, that an answer never
# needs. Matched only against names whose first part was imported, so that a local
# variable called ``code`` or ``profile`` is not mistaken for the module.
_PICKLES = "loads pickled objects, which can call any function by name"
BACK_DOORS = {
    # a module, function or attribute named by a string
    "pkgutil": "imports by name at run time",
    "runpy": "runs modules by name",
    "imp": "imports by name at run time",
    "zipimport": "imports by name at run time",
    "pydoc": "imports by name at run time",
    "sys.path": "changes where imports come from",
    "sys.meta_path": "changes how imports are found",
    "sys.path_hooks": "changes how imports are found",
    "sys.path_importer_cache": "changes how imports are found",
    "operator.attrgetter": "looks up attributes by name",
    "operator.methodcaller": "calls methods by name",
    "string.Formatter": "looks up attributes named in a format string",
    "torch.ops": "calls torch's operators by name",
    "torch.library": "defines or looks up torch's operators by name",
    "torch.classes": "looks up torch's classes by name",
    "torch.overrides": "lists torch's functions",
    # code written in a string, run
    "code": "runs code from a string",
    "codeop": "compiles code from a string",
    "timeit": "runs code from a string",
    "pdb": "runs code from a string",
    "bdb": "runs code from a string",
    "cProfile": "runs code from a string",
    "profile": "runs code from a string",
    "doctest": "runs code from strings",
    "typing.get_type_hints": "evaluates annotations written as strings",
    "typing.ForwardRef": "evaluates a string as code",
    "functools.singledispatch": "evaluates annotations written as strings",
    "functools.singledispatchmethod": "evaluates annotations written as strings",
    "torch.jit": "compiles code with TorchScript, which also takes code as a string",
    "torch.fx": "builds and runs code, with methods named by strings",
    "torch.utils.benchmark": "runs code from a string",
    # code built, compiled or loaded from bytes or files
    "types.FunctionType": "builds a function from a code object",
    "types.LambdaType": "builds a function from a code object",
    "types.CodeType": "builds a code object",
    "marshal": "loads compiled code",
    "pickle": _PICKLES,
    "cloudpickle": _PICKLES,
    "dill": _PICKLES,
    "shelve": _PICKLES,
    "joblib": _PICKLES,
    "copyreg": "registers pickle hooks",
    "torch.load": _PICKLES,
    "torch.serialization": _PICKLES,
    "torch.export": "loads saved programs, which can call any operator by name",
    "torch.package": "loads packaged code",
    "torch.hub": "downloads and runs code",
    "torch.utils.model_zoo": "downloads and loads code",
    "torch.utils.cpp_extension": "compiles C++ code",
    "numpy.load": "loads files, pickled objects among them",
    "numpy.lib.format": "loads files, pickled objects among them",
    "numpy.f2py": "compiles and imports Fortran code",
    "numpy.ctypeslib": "calls C directly",
    # live objects and running code
    "inspect": "reaches into live objects and modules",
    "gc": "reaches every live object",
    "sys.settrace": "watches other code as it runs",
    "sys.setprofile": "watches other code as it runs",
}
# What an answer may import without a second look: numerical and standard-library modules
# for computing (torch's own back doors are caught above). Any other module is flagged, because
# many installed packages can run code from a string (sympy, mako, jinja2, IPython, ...).
USUAL_IMPORTS = {
    "torch", "numpy", "scipy", "math", "cmath", "random", "statistics", "fractions", "decimal", "numbers",
    "collections", "itertools", "functools", "operator", "heapq", "bisect", "array", "copy",
    "typing", "dataclasses", "enum", "abc", "contextlib", "warnings",
    "string", "re", "textwrap", "time", "datetime", "__future__",
}
PROGRAM_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn")  # os.execv, os.spawnlp, ...
SUSPICIOUS_ATTRIBUTES = {
    "read_text": "reads files (read_text)",
    "read_bytes": "reads files (read_bytes)",
    # a frame's or generator's variables: how code reaches names it never wrote out
    **{name: f"reaches a running function's variables ({name})" for name in (
        "f_globals", "f_locals", "f_builtins", "f_back", "tb_frame", "gi_frame", "cr_frame", "ag_frame")},
}
SUSPICIOUS_TEXT = {"/proc": "mentions /proc", ".ipynb": "mentions a notebook file (.ipynb)"}
# Dunder names honest code uses (``super().__init__()``, ``type(x).__name__``); every
# other one (``__dict__``, ``__globals__``, ``__subclasses__``, ``__loader__``, ...) is
# a way into Python's internals, and through them to any module.
HARMLESS_DUNDERS = {"__init__", "__name__", "__qualname__", "__doc__", "__class__", "__version__", "__main__"}
# The builtins that read or change an attribute named by their second argument.
ATTRIBUTE_BUILTINS = ("getattr", "setattr", "delattr")
# Another name for a module the exercises may forbid (functorch.grad is torch.func.grad).
SAME_AS = {"functorch": "torch.func"}
# When an exercise forbids torch.autograd, these reach autograd's graph without naming it.
AUTOGRAD_MARKERS = ("grad_fn", "next_functions", "requires_grad", "requires_grad_", "retain_grad", "register_hook")
# How deep strings inside strings are scanned as code ("exec('exec(...)')").
MAX_STRING_DEPTH = 3
IN_A_STRING = ", in code written as a string"
TOO_DEEP = "is nested too deeply for the scan to read: read it yourself"
# The scan runs in the grader's own process, with no time limit of its own, so what it reads
# is capped: every answer in the book is a few KB and a few thousand syntax nodes.
MAX_SOURCE_CHARACTERS = 200_000
MAX_NODES = 50_000
TOO_LARGE = "is too large to scan ({size} KB): review it by hand"
# Each string is read as code too; all of them together, up to this many characters and (of those
# that parse) nodes. An answer's strings hold little code, if any: docstrings are prose, einsum
# specs one name. (Every part of "a" + "b" + ... is a string: their lengths add up to the square.)
MAX_STRING_CHARACTERS = 200_000
MAX_STRING_NODES = 20_000
STRINGS_TOO_LARGE = "holds more code in strings than the scan reads: review it by hand"
# Following a dotted name costs the square of its length (each of its parts is a name too), so
# a longer one (``torch.nn.functional.torch.nn.functional...``) stops the scan as nested too deeply.
MAX_NAME_PARTS = 32
_MISSING = object()


def _matches(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _normal(name: str) -> str:
    """``layer_norm``, ``LayerNorm`` → ``layernorm``: how variants of one call are compared."""
    return name.replace("_", "").lower()


# ---- reading the cell ----------------------------------------------------------------
def _imports(tree: ast.AST) -> tuple[dict[str, str], set[str], list[str]]:
    """Local name → dotted path it was imported as; the paths bound as modules; star-imported modules."""
    aliases, modules, stars = {}, set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                # ``import a.b`` binds ``a``; ``import a.b as c`` binds ``c`` to ``a.b``
                path = alias.name if alias.asname else alias.name.split(".")[0]
                aliases[alias.asname or path] = path
                modules.add(path)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name == "*":
                    stars.append(node.module)
                else:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases, modules, stars


class _TooDeep(Exception):
    """A dotted name longer than :data:`MAX_NAME_PARTS`."""


def _root(node: ast.AST) -> ast.AST:
    """Where a dotted expression starts: ``F`` in ``(G := F).layer_norm``."""
    for _ in range(MAX_NAME_PARTS):
        if not isinstance(node, (ast.Attribute, ast.NamedExpr)):
            return node
        node = node.value
    raise _TooDeep


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str:
    """``F.layer_norm`` → ``torch.nn.functional.layer_norm`` (empty for other expressions)."""
    root = _root(node)
    if not isinstance(root, ast.Name):
        return ""
    parts = []
    while node is not root:
        if isinstance(node, ast.Attribute):  # (G := F).layer_norm reads F.layer_norm
            parts.append(node.attr)
        node = node.value
    return ".".join([aliases.get(root.id, root.id), *reversed(parts)])


def _imported(node: ast.AST, aliases: dict[str, str]) -> str:
    """Like :func:`_dotted`, but only for a name whose first part was imported (else empty)."""
    root = _root(node)
    return _dotted(node, aliases) if isinstance(root, ast.Name) and root.id in aliases else ""


def _text(node: ast.AST, known: dict[int, str | None] | None = None) -> str | None:
    """The string an expression always evaluates to, when it is built only from string constants.

    ``known`` keeps what was worked out for each part: :func:`_collect` asks about every part
    of ``"a" + "b" + ...``, which would cost the square of its length without it.
    """
    known = {} if known is None else known
    if id(node) in known:
        return known[id(node)]
    text = None
    if isinstance(node, ast.Constant):
        text = node.value if isinstance(node.value, str) else None
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, known), _text(node.right, known)
        text = None if left is None or right is None else left + right
    elif isinstance(node, ast.FormattedValue):
        text = _text(node.value, known) if node.conversion == -1 and node.format_spec is None else None
    elif isinstance(node, ast.JoinedStr):
        parts = [_text(value, known) for value in node.values]
        text = None if None in parts else "".join(parts)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], (ast.List, ast.Tuple))):
        separator = _text(node.func.value, known)
        parts = [_text(element, known) for element in node.args[0].elts]
        text = None if separator is None or None in parts else separator.join(parts)
    known[id(node)] = text
    return text


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[str, ast.AST]]:
    """The (name, expression) bindings of one assignment: ``G = F``, ``a, b = F, torch``."""
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
            and not any(isinstance(e, ast.Starred) for e in [*target.elts, *value.elts])):
        return [pair for t, v in zip(target.elts, value.elts) for pair in _pairs(t, v)]
    return []


def _class_scopes(tree: ast.AST) -> dict[int, str]:
    """ids of the nodes that run in a class's own scope → the class's name.

    A name bound there is a class attribute, reached as ``K.m`` and not by its name, so it
    cannot be followed as an alias: not in the class body itself, nor in an ``if``, ``try``,
    ``for``, ``with`` or ``match`` inside it, nor in a walrus in a method's default, decorator
    or annotation (those run in the class's scope too). A method's body is a scope of its own.
    """
    scopes = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        todo = list(cls.body)
        while todo:
            node = todo.pop()
            scopes[id(node)] = cls.name
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                todo += [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]
            elif isinstance(node, ast.Lambda):
                todo.append(node.args)
            elif isinstance(node, ast.ClassDef):  # its body is its own class scope, read in its own turn
                todo += [*node.decorator_list, *node.bases, *node.keywords]
            else:
                todo += ast.iter_child_nodes(node)
    return scopes


def _assignments(tree: ast.AST, class_scopes: dict[int, str]) -> list[tuple[str, ast.AST]]:
    """Every simple binding outside a class's own scope (a class attribute is reached through its class)."""
    pairs = []
    for node in ast.walk(tree):
        if id(node) in class_scopes:
            continue
        if isinstance(node, ast.Assign):
            pairs += [pair for target in node.targets for pair in _pairs(target, node.value)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            pairs += _pairs(node.target, node.value)
        elif isinstance(node, ast.NamedExpr):
            pairs += _pairs(node.target, node.value)
    return pairs


def _follow_assignments(pairs: list[tuple[str, ast.AST]], aliases: dict[str, str]) -> None:
    """Add ``G = F`` (and chains ``H = G``) to ``aliases``; the binding nearest an import wins.

    One pass over a worklist: a binding is read when the name its value starts from gets a
    path. (Binding one more name per pass over all of them took minutes for a chain of
    thousands of assignments written backwards, ``a3 = a2`` before ``a2 = a1``.)
    """
    waiting = {}  # the name a value starts from → the bindings that wait for it, in order
    for name, value in pairs:
        if isinstance(root := _root(value), ast.Name):
            waiting.setdefault(root.id, []).append((name, value))
    todo = deque(aliases)
    while todo:
        for name, value in waiting.pop(todo.popleft(), ()):
            if name not in aliases:
                aliases[name] = _imported(value, aliases)
                todo.append(name)


def _rebound(pairs: list[tuple[str, ast.AST]], aliases: dict[str, str]) -> dict[str, set[str]]:
    """Names bound to more than one imported name (``G = math`` then ``G = torch.nn``): only the
    first is followed, so :func:`_collect` flags them when one of the bindings is a module."""
    bound = {}
    for name, value in pairs:
        if path := _imported(value, aliases):
            bound.setdefault(name, {aliases[name]}).add(path)
    return {name: paths for name, paths in bound.items() if len(paths) > 1}


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the cell binds itself: variables, parameters, functions, classes, imports."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound


# ---- what the names are in the grader's process ---------------------------------------
def _resolve(path: str) -> tuple[object, str]:
    """The object ``path`` names among modules already loaded, and its name from its module.

    ``torch.nn.modules.loss.F.cross_entropy`` → (that function, ``torch.nn.functional.cross_entropy``);
    ``torch.os.system`` → (``os.system``, ``os.system``). The object is ``_MISSING`` when the
    path leaves what is loaded. Only ``sys.modules`` and ``inspect.getattr_static`` are read,
    so a name in a student's cell can neither import a module nor run a module's ``__getattr__``.
    """
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        found = sys.modules.get(".".join(parts[:split]))
        if found is not None:
            break
    else:
        return _MISSING, path
    module, module_end = found, split
    for index in range(split, len(parts)):
        try:
            found = inspect.getattr_static(found, parts[index])
        except AttributeError:
            found = _MISSING
            break
        if isinstance(found, ModuleType):
            module, module_end = found, index + 1
    name = module.__dict__.get("__name__") if isinstance(module, ModuleType) else None
    return found, ".".join([name, *parts[module_end:]]) if isinstance(name, str) else path


@lru_cache(maxsize=None)
def _names_a_module(dotted: str) -> bool:
    """Whether a forbidden name (the book's own, not a student's) is a module: ``torch.func`` is."""
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError, AttributeError):  # its parent is not a package: a function or class
        return False


# ---- the scan --------------------------------------------------------------------------
@dataclass
class _Scan:
    """What one call of :func:`review_flags` shares between the cell and the code in its strings."""

    resolved: dict[str, tuple[object, str]] = field(default_factory=dict)  # path → _resolve(path)
    string_characters: int = MAX_STRING_CHARACTERS  # characters left to read as code in strings
    string_nodes: int = MAX_STRING_NODES  # syntax nodes left for the code in strings


@dataclass
class _Uses:
    """What a cell uses, as the scan sees it."""

    names: set[str] = field(default_factory=set)  # dotted names, aliases followed (as written if not imported)
    imported: set[str] = field(default_factory=set)  # those whose first part was imported
    attributes: set[str] = field(default_factory=set)  # attribute names read, getattr constants included
    keywords: set[str] = field(default_factory=set)  # keyword-argument names (requires_grad=True)
    texts: set[str] = field(default_factory=set)  # strings, with those built from constants
    written: dict[str, str] = field(default_factory=dict)  # a name by its module's name → as the cell wrote it
    unfollowed: list[str] = field(default_factory=list)  # reasons: what the scan could not follow
    resolved: dict[str, tuple[object, str]] = field(default_factory=dict)  # path → _resolve(path), shared

    def resolve(self, path: str) -> tuple[object, str]:
        """:func:`_resolve`, once a scan for each name: the checks ask about every name, many times."""
        if path not in self.resolved:
            self.resolved[path] = _resolve(path)
        return self.resolved[path]

    def live_object(self, path: str):
        return self.resolve(path)[0]

    def is_module(self, path: str, imported_modules: set[str]) -> bool:
        return path in imported_modules or isinstance(self.live_object(path), ModuleType)


def _collect(tree: ast.AST, scan: _Scan) -> _Uses:
    """Walk the cell once: the names it uses (aliases followed) and what could not be followed."""
    aliases, imported_modules, stars = _imports(tree)
    class_scopes = _class_scopes(tree)
    pairs = _assignments(tree, class_scopes)
    _follow_assignments(pairs, aliases)
    alias_values = {id(value) for _, value in pairs}  # followed as aliases, not loose module values
    parents = {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    bound = _bound_names(tree) | set(dir(builtins))
    uses, known_texts = _Uses(resolved=scan.resolved), {}
    for name, paths in sorted(_rebound(pairs, aliases).items()):
        if any(uses.is_module(path, imported_modules) for path in paths):
            uses.unfollowed.append(f"binds {name} to more than one module ({', '.join(sorted(paths))}), "
                                   "so the scan cannot tell which one it uses")

    def add(path: str, imported: bool) -> None:
        uses.names.add(path)
        if imported:
            uses.imported.add(path)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) in class_scopes:
            # class K: (if True:) import torch.nn.functional as F, then K.F: a module as a class attribute
            uses.unfollowed.append(f"imports inside the class {class_scopes[id(node)]}, so the scan cannot "
                                   "follow what is taken from it")
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, True)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name == "*":
                    uses.unfollowed.append(f"imports every name of {node.module} (import *), so the scan "
                                           "cannot tell which of them the cell uses")
                else:
                    add(f"{node.module}.{alias.name}", not node.level)
        elif isinstance(node, (ast.Name, ast.Attribute)):
            path = _imported(node, aliases)
            add(path or _dotted(node, aliases), bool(path))
            if isinstance(node, ast.Attribute):
                uses.attributes.add(node.attr)
                if path and not isinstance(node.ctx, ast.Load):
                    uses.unfollowed.append(f"changes {path}, part of an imported module")
            elif isinstance(node.ctx, ast.Load) and node.id not in bound:
                # a name no statement binds may come from a star import
                for module in stars:
                    add(f"{module}.{node.id}", True)
            _check_module_value(node, path, imported_modules, parents, alias_values, uses)
            _check_attribute_builtin_value(node, parents, uses)
        elif isinstance(node, ast.Call):
            _check_attribute_builtin_call(node, aliases, uses, add)
            uses.keywords.update(keyword.arg for keyword in node.keywords if keyword.arg)
        elif isinstance(node, ast.MatchClass):  # case object(layer_norm=f) reads attribute layer_norm
            uses.attributes.update(node.kwd_attrs)
        if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call)):
            if (text := _text(node, known_texts)) is not None:
                uses.texts.add(text)
    for path in list(uses.imported):
        canonical = uses.resolve(path)[1]  # torch.os.system is os.system
        for other, same in SAME_AS.items():  # functorch.grad reads as torch.func.grad too
            if _matches(canonical, other):
                canonical = same + canonical[len(other):]
        if canonical != path:
            uses.names.add(canonical)
            uses.written.setdefault(canonical, path)
    return uses


def _check_module_value(node, path, imported_modules, parents, alias_values, uses: _Uses) -> None:
    """Flag an imported module used as a value: in a list, as an argument, returned, matched on,
    or bound in a class's scope (not followed as an alias, so not in ``alias_values``)."""
    if not path or not isinstance(node.ctx, ast.Load):
        return
    # A walrus followed as an alias is worth its value: judge where the walrus itself goes.
    # ``(G := F).layer_norm`` is followed; ``{"x": (G := F)}`` stores the module.
    while (isinstance(parent := parents.get(id(node)), ast.NamedExpr) and parent.value is node
           and id(node) in alias_values):
        node = parent
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return  # only the whole name (``torch.nn.functional``, not its ``torch.nn``) is judged
    if id(node) in alias_values:
        return  # ``G = F``, ``a, b = F, torch``, ``m = (G := F)``: followed as an alias
    if isinstance(parent, ast.Call) and (parent.func is node or (
            isinstance(parent.func, ast.Name) and parent.func.id in (*ATTRIBUTE_BUILTINS, "hasattr", "dir", "vars")
            and parent.args and parent.args[0] is node)):
        return  # a call of it, or getattr(F, ...) / vars(F), which have their own reasons
    if uses.is_module(path, imported_modules):
        uses.unfollowed.append(f"uses the module {path} as a value (stores it, passes it or returns it), "
                               "so the scan cannot follow what is taken from it")


def _check_attribute_builtin_value(node, parents, uses: _Uses) -> None:
    """Flag ``getattr`` used other than called directly: ``reduce(getattr, ...)``, ``g = getattr``."""
    if isinstance(node, ast.Name) and node.id in ATTRIBUTE_BUILTINS and isinstance(node.ctx, ast.Load):
        parent = parents.get(id(node))
        if not (isinstance(parent, ast.Call) and parent.func is node):
            uses.unfollowed.append(f"passes {node.id} around as a value, so the scan cannot see what it looks up")


def _check_attribute_builtin_call(node: ast.Call, aliases, uses: _Uses, add) -> None:
    """``getattr(obj, name)``: follow a constant name, flag what cannot be followed."""
    if not (isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_BUILTINS):
        return
    builtin = node.func.id
    if len(node.args) < 2 or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        uses.unfollowed.append(f"calls {builtin} with arguments the scan cannot read")
        return
    owner, name = _imported(node.args[0], aliases), _text(node.args[1])
    if name is not None:
        uses.attributes.add(name)  # getattr(loss, "backward") is loss.backward
    if owner and name is not None:
        add(f"{owner}.{name}", True)
        verb = {"getattr": "looks up", "setattr": "changes", "delattr": "deletes"}[builtin]
        uses.unfollowed.append(f"{verb} {owner}.{name} by name ({builtin}) instead of writing it out")
    elif owner:
        uses.unfollowed.append(f"uses {builtin} on {owner} with a name computed at run time, "
                               "so the scan cannot tell which attribute")
    elif name is None and builtin == "getattr":
        uses.unfollowed.append("looks up an attribute whose name is computed at run time (getattr), "
                               "so the scan cannot tell which")


def _last(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def _forbidden_flags(uses: _Uses, forbidden: tuple[str, ...]) -> list[str]:
    """One flag per forbidden name the cell reaches, by the most direct route found.

    The routes are tried in order, and a use explained by one route is not reported again
    by a later one: (1) the name itself, or a string that spells its last part; (2) the
    same object under another name; (3) a variant whose name contains the forbidden one;
    (4) for ``torch.autograd``, autograd's graph reached without naming it; (5) an attribute
    of the same name, in any case and with or without underscores, on anything.
    """
    dotted = [banned for banned in forbidden if not banned.startswith(".")]
    flags, said, explained = [], set(), set()  # forbidden names reported; used names accounted for

    def report(banned: str, reason: str, names=()) -> None:
        flags.append(reason)
        said.add(banned)
        explained.update(names)

    for banned in forbidden:  # 1. by its own name
        if banned.startswith("."):
            if banned[1:] in uses.attributes:  # x.log_softmax, and torch.special.log_softmax with it
                report(banned, f"uses {banned[1:]}, which the exercise forbids",
                       [name for name in uses.imported if _last(name) == banned[1:]])
        elif names := sorted(name for name in uses.names if _matches(name, banned)):
            written = [uses.written[name] for name in names if name in uses.written]
            report(banned, f"uses {banned} under another name ({written[0]}), which the exercise forbids"
                   if len(written) == len(names) else f"uses {banned}, which the exercise forbids", names + written)
    spelled = {_last(name) for name in explained} | {banned[1:] for banned in said if banned.startswith(".")}
    for banned in dotted:  # ... or a string that spells it (once: "layer_norm" names several)
        if banned not in said and _last(banned) in uses.texts and _last(banned) not in spelled:
            report(banned, f"uses {banned}, which the exercise forbids")
            spelled.add(_last(banned))
    for banned in dotted:  # 2. the same object under another name
        if banned in said or not uses.imported - explained:
            continue
        target = uses.live_object(banned)
        if not (callable(target) or isinstance(target, ModuleType)):  # never None or a number
            continue
        if same := [name for name in sorted(uses.imported - explained) if uses.live_object(name) is target]:
            report(banned, f"uses {banned} under another name ({same[0]}), which the exercise forbids", same)
    # 3. a variant (torch.rnn_tanh_cell of torch.rnn_tanh), explained by the longest forbidden name it
    # contains; not for forbidden modules, whose short names ("func") are inside too many others.
    variants = {}
    for name in sorted(uses.imported - explained):
        inside = [banned for banned in dotted if "." in banned and not _names_a_module(banned)
                  and _normal(_last(banned)) in _normal(_last(name))]
        if inside:
            closest = max(inside, key=lambda banned: len(_normal(_last(banned))))
            variants.setdefault(closest, []).append(name)
    for banned in dotted:
        if banned in variants and banned not in said:
            report(banned, f"uses {variants[banned][0]}, a variant of {banned}, which the exercise forbids")
    if "torch.autograd" in forbidden and "torch.autograd" not in said:  # 4. autograd's graph, unnamed
        if markers := [m for m in AUTOGRAD_MARKERS if m in uses.attributes or m in uses.keywords]:
            report("torch.autograd", f"uses torch.autograd through {markers[0]}, which the exercise forbids")
    # 5. an attribute named like a forbidden name, whatever it is taken from (K.m.scaled_dot_product_attention,
    # d["x"].LayerNorm): the scan cannot know every way a module reaches an object. Once per attribute,
    # and not for one that a name reported above already accounts for.
    accounted = {_normal(name) for name in spelled | {_last(name) for name in explained}}
    for banned in dotted:
        named = sorted(attribute for attribute in uses.attributes if _normal(attribute) == _normal(_last(banned)))
        if banned not in said and named and _normal(named[0]) not in accounted:
            report(banned, f"uses an attribute named {named[0]}, like {banned}, which the exercise forbids: "
                           "check what it is taken from")
            accounted.add(_normal(named[0]))
    return flags


def _private_flags(uses: _Uses) -> list[str]:
    """``torch._C``, ``sys._getframe``, ``torch.native_layer_norm``: entry points behind the public ones."""
    flags = []
    for path in sorted(uses.imported):
        parts = path.split(".")
        for index, part in enumerate(parts):
            if part.startswith("_") and not _is_dunder(part):
                prefix = ".".join(parts[: index + 1])
                flags.append(f"uses {prefix}, a private part of {parts[0]} (its name starts with _)"
                             if index else f"imports {prefix}, a private module (its name starts with _)")
                break
            if parts[0] == "torch" and part.startswith("native_"):
                flags.append(f"uses {'.'.join(parts[: index + 1])}, one of torch's native kernels, "
                             "which bypass its public functions")
                break
    return flags


def _reaches(uses: _Uses, key: str, imported_only: bool = False) -> bool:
    """Whether the cell uses ``key`` by name (``pickle.loads``), by its module's name
    (``torch.serialization.pickle``) or as the same object under another name.

    ``imported_only`` ignores names the cell did not import, so that a variable called
    ``code`` is not the module ``code``.
    """
    names = [*uses.imported, *uses.written] if imported_only else uses.names
    if any(_matches(name, key) for name in names):
        return True
    if not uses.imported:
        return False  # nothing imported can be it (and no look-up for each of many strings read as code)
    target = uses.live_object(key)
    return (callable(target) or isinstance(target, ModuleType)) and any(
        uses.live_object(name) is target for name in uses.imported)


def _back_door_flags(uses: _Uses, forbidden: tuple[str, ...]) -> list[str]:
    flags = [f"{reason} ({module})" for module, reason in BACK_DOORS.items()
             if _reaches(uses, module, imported_only=True)]
    flags += [f"runs programs ({name})" for name in sorted(uses.imported) if name.startswith(PROGRAM_PREFIXES)]
    # Any other module, once, unless a rule already looks into it: os (os.system ...), sys, pickle, scipy.
    named = {key.split(".")[0] for key in [*SUSPICIOUS_MODULES, *BACK_DOORS]}
    named |= {banned.split(".")[0] for banned in forbidden if "." not in banned}
    roots = sorted({name.split(".")[0] for name in uses.imported})
    # A private module (_imp) has its own reason; __main__, the notebook's own namespace, has not.
    private = {root for root in roots if root.startswith("_") and not _is_dunder(root)}
    flags += [f"imports {root}, which no exercise needs: look at what the cell uses it for" for root in roots
              if root not in USUAL_IMPORTS and root not in named and root not in private]
    return flags


def _dunder_flags(tree: ast.AST, uses: _Uses) -> list[str]:
    """Dunder names, attributes, and strings that spell one (``"{0.__globals__}".format(f)``)."""
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)} - set(SUSPICIOUS_NAMES)
    spelled = {match for text in uses.texts for match in re.findall(r"__\w+?__", text)}
    dunders = sorted(name for name in names | uses.attributes | spelled
                     if _is_dunder(name) and name not in HARMLESS_DUNDERS)
    return [f"reaches Python's internals ({', '.join(dunders)})"] if dunders else []


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
        When ``source`` is not a string, or ``forbidden`` is not a tuple (or list) of strings.
        Nothing a cell holds raises: a cell too large or too deeply nested to read is a flag.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str; found {type(source).__name__}")
    if not isinstance(forbidden, (tuple, list)) or not all(isinstance(name, str) for name in forbidden):
        raise TypeError(f"forbidden must be a tuple of str; found {forbidden!r}")
    return _flags(source, tuple(forbidden), depth=0, scan=_Scan())


def _flags(source: str, forbidden: tuple[str, ...], depth: int, scan: _Scan) -> list[str]:
    """The flags of one piece of code: the cell, or a string in it that parses as code."""
    too_large = [TOO_LARGE.format(size=max(1, round(len(source) / 1000)))]
    if len(source) > MAX_SOURCE_CHARACTERS:
        return too_large
    if depth:  # code in a string: it is read out of what all the cell's strings may use
        scan.string_characters -= len(source)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []  # it cannot run either: the run reports the error
    except (RecursionError, MemoryError):  # "x = " and 300,000 minus signs: the parser gives up
        return [TOO_DEEP]
    nodes = sum(1 for _ in islice(ast.walk(tree), MAX_NODES + 1))
    if nodes > MAX_NODES:
        return too_large
    if depth:
        scan.string_nodes -= nodes
    try:
        return list(dict.fromkeys(_tree_flags(tree, forbidden, depth, scan)))
    except (RecursionError, MemoryError, _TooDeep):  # "a" + "a" + ... thousands deep, a.b.c... too long
        return [TOO_DEEP]


def _tree_flags(tree: ast.AST, forbidden: tuple[str, ...], depth: int, scan: _Scan) -> list[str]:
    uses = _collect(tree, scan)
    flags = _forbidden_flags(uses, forbidden)
    flags += [reason for name, reason in SUSPICIOUS_NAMES.items() if name in uses.names]
    flags += [reason for module, reason in SUSPICIOUS_MODULES.items() if _reaches(uses, module)]
    flags += [reason for attribute, reason in SUSPICIOUS_ATTRIBUTES.items() if attribute in uses.attributes]
    flags += [reason for text, reason in SUSPICIOUS_TEXT.items() if any(text in value for value in uses.texts)]
    # The checks below came later; they follow the ones above so that earlier reasons keep their order.
    flags += uses.unfollowed
    flags += _private_flags(uses)
    flags += _back_door_flags(uses, forbidden)
    flags += _dunder_flags(tree, uses)
    if depth < MAX_STRING_DEPTH:
        # Code in a string runs when something evaluates it: exec, but also a string annotation
        # that functools.singledispatch or typing evaluates. Scan every string that parses as code.
        for text in sorted(uses.texts):
            if scan.string_characters <= 0 or scan.string_nodes <= 0:
                flags.append(STRINGS_TOO_LARGE)
                break
            flags += [flag if flag.endswith(IN_A_STRING) or flag == STRINGS_TOO_LARGE else flag + IN_A_STRING
                      for flag in _flags(text, forbidden, depth + 1, scan)]
    return flags
