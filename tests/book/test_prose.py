"""Prose rules the build does not catch.

* No word before a role that prints it: ``{ref}`` to an exercise prints "Exercise 7.1" itself,
  so "exercise {ref}`ex-dec-exact`" reads "exercise Exercise 7.1" (a translation would double it too).
"""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "chapters").glob("*.ipynb")) + sorted((ROOT / "backmatter").glob("*.md")) + [ROOT / "intro.md"]
DOUBLED = re.compile(r"\b[Ee]xercises?\s+\{(?:ref|numref)\}`ex-[^`]*`")


def prose(path: Path) -> str:
    if path.suffix == ".ipynb":
        cells = nbformat.read(path, as_version=4).cells
        return "\n\n".join(cell.source for cell in cells if cell.cell_type == "markdown")
    return path.read_text(encoding="utf-8")


def doubled_words(text: str) -> list[str]:
    return DOUBLED.findall(text)


def test_the_rule_finds_a_word_the_role_prints_again():
    assert doubled_words("Take the model of exercise {ref}`ex-dec-exact`, and Exercise\n{ref}`ex-a`.") == [
        "exercise {ref}`ex-dec-exact`", "Exercise\n{ref}`ex-a`"]
    assert doubled_words("({ref}`ex-dec-exact`) and the exercises below") == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_no_word_before_a_role_that_prints_it(path):
    found = doubled_words(prose(path))
    assert found == [], f"{path.name}: the role prints 'Exercise N' itself; drop the word before it: {found}"
