"""The chapters' printing helpers."""
import importlib
import inspect
import textwrap
from pathlib import Path

import pytest
import torch

from lib.display import code_of, fmt

ROOT = Path(__file__).resolve().parents[2]


def sample(x, y):
    """A docstring, shown with the code.

    Over two lines.
    """
    if x < 0:
        raise ValueError("x must be >= 0")
    total = x + y  # the line the chapter explains
    return total


class Sample:
    def method(self, n):
        return n + 1


def test_fmt_rounds_and_flattens():
    assert fmt(torch.tensor([[0.123456, 2.0], [-1.0, 1e-9]])) == "[0.1235, 2.0000, -1.0000, 0.0000]"
    assert fmt(torch.tensor([1.26]), 1) == "[1.3]"


def test_code_of_prints_the_file_exactly():
    assert code_of(sample) == textwrap.dedent(inspect.getsource(sample)).rstrip("\n")
    assert code_of(sample).splitlines()[:2] == [
        "def sample(x, y):",
        '    """A docstring, shown with the code.',
    ]
    assert code_of(Sample.method).splitlines() == [
        "def method(self, n):",
        "    return n + 1",
    ]


def test_spread_reports_median_and_range():
    from lib.display import spread
    assert spread([0.97, 0.99, 0.98], ".0%") == "98% (97%–99%)"
    assert spread([1, 2, 3, 4], ".1f") == "2.5 (1.0–4.0)"
    with pytest.raises(ValueError, match="empty"):
        spread([])


def test_spread_leaves_diverged_runs_out_in_numbers_only_when_told():
    # both editions glue the summary into their prose: no words in it, whatever diverged
    from lib.display import spread
    assert spread([1.0, float("nan"), 3.0], ".1f", leave_out_diverged=True) == "2.0 (1.0–3.0)"
    assert spread([float("-inf"), 5.0, 1.0, float("inf")], ".1f",
                  leave_out_diverged=True) == "3.0 (1.0–5.0)"
    assert spread([float("inf"), float("nan")], leave_out_diverged=True) == "—"
    # otherwise a diverged run is an error, not a value the summary drops unsaid
    for values in ([1.0, float("nan"), 3.0], [float("inf")]):
        with pytest.raises(ValueError, match=r"of \d values are NaN or infinite"):
            spread(values)


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


def chapter_objects():
    """Every function, class and method defined in the chapters' lib modules."""
    import importlib
    import inspect
    import pkgutil

    import lib.part5_memory
    from test_layering import chapter_modules

    names = [name for name in chapter_modules() if name != "lib.part5_memory"]
    names += [module.name for module in pkgutil.iter_modules(lib.part5_memory.__path__, "lib.part5_memory.")]
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


def test_every_module_a_chapter_teaches_is_checked_at_the_signature():
    """The book lists a module's code as its file holds it, so each module it teaches
    states its checks in its signatures (lib.checked) instead of opening its functions
    with them."""
    from lib.checked import CHECKED_MODULES

    taught = {item.__module__ for _, item in chapter_objects()}
    assert len(taught) > 25
    assert sorted(taught - set(CHECKED_MODULES)) == []


def test_modules_the_book_lists_are_listed_as_their_files_hold_them():
    """The book prints functions of lib's checked modules and of the chapters' experiments
    exactly as the files hold them, so the files are in black's format with lines of at
    most 88 characters (a code block at 1024 px)."""
    import black

    from lib.checked import CHECKED_MODULES

    experiments = [f"experiments.{path.stem}" for path in sorted(ROOT.glob("experiments/*.py"))]
    for name in [*CHECKED_MODULES, *experiments]:
        module = importlib.import_module(name)
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert black.format_str(source, mode=black.Mode(line_length=88)) == source, (
            f"{name}: run black -l 88 on it")
        assert max(len(line) for line in source.splitlines()) <= 88, name
