"""The chapters' printing helpers."""
import ast
import importlib
import inspect
import textwrap
from pathlib import Path

import pytest
import torch

from lib.display import code_of, fmt
from lib.validation import require_int, require_words


def _check_something(n):
    return n


def sample(x, y):
    """A docstring that must not be shown.

    Over two lines.
    """
    if x < 0:
        raise ValueError("x must be >= 0")
    total = x + y  # the line the chapter wants to show
    return total


def test_fmt_rounds_and_flattens():
    assert fmt(torch.tensor([[0.123456, 2.0], [-1.0, 1e-9]])) == "[0.1235, 2.0000, -1.0000, 0.0000]"
    assert fmt(torch.tensor([1.26]), 1) == "[1.3]"


def test_code_of_drops_docstrings():
    code = code_of(sample)
    assert "docstring" not in code and "Over two lines" not in code
    assert code.splitlines()[0] == "def sample(x, y):"
    assert "raise ValueError" in code and "return total" in code


def test_code_of_can_skip_to_the_interesting_part():
    assert code_of(sample, start="total =").splitlines() == [
        "def sample(x, y):",
        "    ...",
        "    total = x + y  # the line the chapter wants to show",
        "    return total",
    ]
    with pytest.raises(ValueError, match="no line of sample contains 'nowhere'"):
        code_of(sample, start="nowhere")


def test_spread_reports_median_and_range():
    from lib.display import spread
    assert spread([0.97, 0.99, 0.98], ".0%") == "98% (97%–99%)"
    assert spread([1, 2, 3, 4], ".1f") == "2.5 (1.0–4.0)"
    with pytest.raises(ValueError, match="empty"):
        spread([])


def test_spread_counts_diverged_runs_apart():
    from lib.display import spread
    assert spread([1.0, float("nan"), 3.0], ".1f") == "2.0 (1.0–3.0; 1 of 3 not finite)"
    assert spread([float("inf"), float("nan")]) == "not finite in all 2 runs"


def test_claim_fails_with_the_statement_and_the_cell_it_backs():
    from lib.display import claim
    claim("one is less than two", 1 < 2, backs="intro-text")
    with pytest.raises(AssertionError, match="in cell lstm-text, gru-text that the LSTM reaches 95%"):
        claim("the LSTM reaches 95%", torch.tensor(0.5) >= 0.95, backs=("lstm-text", "gru-text"))


@pytest.mark.parametrize("backs", ["", (), ("ok", 3), ["a-list"]])
def test_claim_names_the_cell_it_backs(backs):
    from lib.display import claim
    with pytest.raises(TypeError, match="backs must be a markdown cell id"):
        claim("one is less than two", True, backs=backs)


def test_glue_writes_what_myst_nb_glue_writes(monkeypatch):
    import IPython.display
    import myst_nb
    from lib.display import glue
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *args, **kw: shown.append((args, kw)))
    monkeypatch.setattr("myst_nb.ext.glue.ipy_display", lambda *args, **kw: shown.append((args, kw)))
    glue("accuracy", torch.tensor(0.75))
    myst_nb.glue("accuracy", 0.75, display=False)  # the reference: the book build reads this
    assert shown[0] == shown[1]
    glue("name", "LSTM")
    assert shown[2][0][0] == {"application/papermill.record/text/plain": "'LSTM'"}
    with pytest.raises(TypeError, match="got list"):
        glue("bad", [1, 2])
    with pytest.raises(TypeError, match="name must be a string"):
        glue(3, 1.0)


def checked(tokens, n):
    """Opens with argument checks, which a chapter does not show."""
    require_words("tokens", tokens), require_int("n", n, 1)
    _check_something(n)
    counts = len(tokens) - n + 1  # the code the chapter explains
    return max(counts, 0)


def only_checks(n):
    require_int("n", n, 1)


def test_code_of_drops_the_argument_checks_that_open_a_function():
    assert code_of(checked).splitlines() == [
        "def checked(tokens, n):",
        "    counts = len(tokens) - n + 1  # the code the chapter explains",
        "    return max(counts, 0)",
    ]
    assert code_of(only_checks).splitlines()[-1] == '    require_int("n", n, 1)'
    assert "if x < 0:" in code_of(sample)  # an if-raise block is code, not a call of a check


def wide(queries: torch.Tensor, keys: torch.Tensor, scale: float = 1.0, mask: torch.Tensor | None = None) -> tuple:
    """A function whose lines are too long to show at 88 characters."""
    scores = torch.matmul(queries, keys.transpose(-2, -1)) / scale  # (B, T, S): every query against every key
    if mask is not None and mask.shape != scores.shape and mask.shape != scores.shape[-2:]:
        raise ValueError(f"mask must have the shape of the scores, {tuple(scores.shape)}; found {tuple(mask.shape)}")
    return scores, torch.softmax(scores.masked_fill(mask, float("-inf")) if mask is not None else scores, -1)


def test_code_of_breaks_long_lines_inside_brackets():
    assert code_of(wide).splitlines() == [
        "def wide(",
        "    queries: torch.Tensor, keys: torch.Tensor, scale: float = 1.0,",
        "    mask: torch.Tensor | None = None",
        ") -> tuple:",
        "    # (B, T, S): every query against every key",
        "    scores = torch.matmul(queries, keys.transpose(-2, -1)) / scale",
        "    if (",
        "        mask is not None",
        "        and mask.shape != scores.shape",
        "        and mask.shape != scores.shape[-2:]",
        "    ):",
        "        raise ValueError(",
        '            f"mask must have the shape of the scores, {tuple(scores.shape)}; found "',
        '            f"{tuple(mask.shape)}"',
        "        )",
        "    return scores, torch.softmax(",
        '        scores.masked_fill(mask, float("-inf")) if mask is not None else scores, -1',
        "    )",
    ]


def chapter_objects():
    """Every function, class and method defined in the chapters' lib modules."""
    import importlib
    import inspect
    import pkgutil

    import lib.memory
    from test_layering import chapter_modules

    names = [name for name in chapter_modules() if name != "lib.memory"]
    names += [module.name for module in pkgutil.iter_modules(lib.memory.__path__, "lib.memory.")]
    for name in names:
        for obj in list(vars(importlib.import_module(name)).values()):
            members = list(vars(obj).values()) if inspect.isclass(obj) else []
            for item in [obj, *members]:
                if (inspect.isfunction(item) or inspect.isclass(item)) and item.__module__ == name:
                    try:
                        inspect.getsource(item)
                    except OSError:  # a dataclass's generated __init__, __repr__, ...
                        continue
                    yield f"{name}.{item.__qualname__}", item


def test_code_of_shows_the_chapters_code_within_88_characters_a_line_and_unchanged(monkeypatch):
    """No shown line is longer than 88 characters (a code block at 1024 px holds 88), and the
    rewrapped code parses to the same syntax tree as the code before rewrapping."""
    from lib import display

    shown = {name: code_of(item) for name, item in chapter_objects()}
    assert len(shown) > 400
    assert [name for name, code in shown.items() if max(map(len, code.splitlines())) > 88] == []
    monkeypatch.setattr(display, "_fit", lambda source: source)
    changed = [name for name, item in chapter_objects() if ast.dump(ast.parse(shown[name]))
               != ast.dump(ast.parse(code_of(item)))]
    assert changed == []


def test_modules_checked_at_the_signature_are_listed_as_their_files_hold_them():
    """The book prints their functions exactly as the files hold them, so the files are in
    black's format with lines of at most 88 characters (a code block at 1024 px), and
    ``code_of`` neither shortens nor rewraps them."""
    import black

    from lib.checked import CHECKED_MODULES

    for name in CHECKED_MODULES:
        module = importlib.import_module(name)
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert black.format_str(source, mode=black.Mode(line_length=88)) == source, (
            f"{name}: run black -l 88 on it")
        assert max(len(line) for line in source.splitlines()) <= 88, name
        for obj in vars(module).values():
            if inspect.isfunction(obj) and obj.__module__ == name:
                assert code_of(obj) == textwrap.dedent(inspect.getsource(obj)).rstrip("\n")
