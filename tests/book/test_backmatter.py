"""The errata page and the glossary: structure that the book build does not check.

Sphinx already fails on a broken ``{doc}`` or ``{term}`` link; these tests check what it
cannot see: that every test the errata cite exists, that every erratum has its three
parts, and that every Chinese term carries a ``lang`` attribute (screen readers and
fonts pick the language from it).
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ERRATA = (ROOT / "backmatter" / "errata.md").read_text(encoding="utf-8")
GLOSSARY = (ROOT / "backmatter" / "glossary.md").read_text(encoding="utf-8")
CJK = re.compile(r"[\u3400-\u9fff]")


def errata_entries():
    body = ERRATA.split("\n## ", 1)[1]
    return [block.strip() for block in re.split(r"\n---\n|\n## ", body) if "**Correct:**" in block]


def test_every_erratum_says_what_the_note_writes_what_is_correct_and_what_shows_it():
    entries = errata_entries()
    assert len(entries) >= 30
    for entry in entries:
        assert re.search(r"\*\*Notes? [0-9, ]+ writes?:\*\*", entry), entry[:120]
        assert entry.count("**Correct:**") == 1 and entry.count("**Shown by:**") == 1, entry[:120]
        assert "{doc}`../chapters/" in entry.split("**Correct:**")[1], entry[:120]


def test_every_test_the_errata_cite_exists_in_the_file_they_name():
    cited = re.findall(r"((?:`test_\w+`(?:,?\s+(?:and\s+)?)?)+)\s*in\s+`(tests/[\w/]*test_\w+\.py)`", ERRATA)
    checked = set()
    for names, path in cited:
        source = (ROOT / path).read_text(encoding="utf-8")
        for name in re.findall(r"`(test_\w+)`", names):
            assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{path} has no {name}"
            checked.add(name)
    assert checked == set(re.findall(r"`(test_\w+)`", ERRATA)), "a test is cited without its file"
    assert len(checked) >= 30


def test_every_chinese_term_in_the_glossary_is_marked_as_chinese():
    body = GLOSSARY.split("```{glossary}", 1)[1]
    unmarked = re.sub(r'<span lang="zh-Hans">[^<]*</span>', "", body)
    assert not CJK.search(unmarked), unmarked[max(0, CJK.search(unmarked).start() - 80):][:160]
    assert body.count('<span lang="zh-Hans">') >= 170


def test_the_glossary_speaks_to_readers_not_authors():
    intro = GLOSSARY.split("```{glossary}", 1)[0]
    assert "{term}" not in intro and "link here" not in intro
