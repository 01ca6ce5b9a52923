"""Prose rules the build does not catch.

* No word before a role that prints it: ``{ref}`` to an exercise prints "Exercise 7.1" itself,
  so "exercise {ref}`ex-dec-exact`" reads "exercise Exercise 7.1" (a translation would double it too).
* No glued value is a phrase: both editions show the same glued value, so "2 of 3" would be English
  inside a Chinese sentence. Glue the numbers; the words go in the prose, which each edition translates.
"""
import ast
import math
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


# ---- glued values are numbers or symbols, not English words ------------------------------------
# A glued value is shared by the English and the Chinese edition, so an English phrase glued into a
# sentence ("2 of 3", "the month is wrong") shows up as English inside a Chinese sentence. Glue the
# numbers and write the words in the prose, where each edition has its own. The keys below hold a
# name or quoted data that is Latin script in both editions, by the translators' rules:
LATIN_GLUES = {
    "ch05-runs-processor": "the model name of the CPU that made the stored runs (e.g. AMD EPYC)",
    "ch07-curse-example-text": "the clock task's phrasing y*, the English words the model writes, "
    "quoted as data",
}
LATIN_RUN = re.compile(r"[A-Za-z]{2}")
GLUE_PLAIN = "application/papermill.record/text/plain"


NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}  # float's repr of them


def glued_value(text: str) -> object:
    """A glue's text/plain repr as the value: a Python literal, NaN or an infinity as a float;
    any other repr stays its text (so a stray object's repr counts as words)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return NON_FINITE.get(text.strip(), text)


def glued_values(path: Path) -> dict[str, object]:
    """Every value a notebook's executed outputs glue, by name."""
    values = {}
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is not None and GLUE_PLAIN in output.get("data", {}):
                values[name] = glued_value(output["data"][GLUE_PLAIN])
    return values


def worded_glues(values: dict[str, object]) -> dict[str, str]:
    """The string values with two Latin letters in a row, other than LATIN_GLUES'."""
    return {name: value for name, value in values.items() if isinstance(value, str)
            and LATIN_RUN.search(value) and name not in LATIN_GLUES}


def test_the_rule_finds_glued_words_and_passes_numbers_and_symbols():
    values = {"a": "2 of 3", "b": "0.59, 0.25, 0.32, 0.49", "c": "'!', 'C', 'D'", "d": 3,
              "e": "98% (97%–99%)", "f": "✗", "g": "2.4e-02 (2.4e-02–4.2e-02)",
              "h": "1.0 (1.0–3.0; 1 of 3 not finite)", "ch05-runs-processor": "AMD EPYC"}
    assert worded_glues(values) == {"a": "2 of 3", "h": "1.0 (1.0–3.0; 1 of 3 not finite)"}


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.name)
def test_no_glued_value_is_a_phrase(path):
    worded = worded_glues(glued_values(path))
    assert worded == {}, (f"{path.name} glues words, which the Chinese edition would show in English; "
                          f"glue the numbers and write the words in the prose: {worded}")


def not_finite_glues(values: dict[str, object]) -> dict[str, float]:
    """The glued numbers that are NaN or infinite."""
    return {name: value for name, value in values.items()
            if isinstance(value, float) and not math.isfinite(value)}


def test_a_glued_nan_or_infinity_is_read_and_found():
    values = {name: glued_value(text) for name, text in
              {"a": "nan", "b": "-inf", "c": "inf", "d": "0.25", "e": "'nan'", "f": "3"}.items()}
    assert values["e"] == "nan" and values["f"] == 3
    assert list(not_finite_glues(values)) == ["a", "b", "c"]
    assert glued_value("np.float64(0.5)") == "np.float64(0.5)"  # not a literal: its text


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.name)
def test_no_glued_number_is_nan_or_infinite(path):
    found = not_finite_glues(glued_values(path))
    assert found == {}, (f"{path.name} glues a NaN or infinite number, which the prose would print "
                         f"as 'nan'/'inf': a run diverged; leave it out and say so: {found}")
