"""The Chinese catalogues keep in step with the English pages.

* Every catalogue holds exactly the messages of a fresh extraction of its page (``tools/i18n.py
  extract``, about 20 s once the first extraction's doctrees exist): a changed English paragraph
  is a new message, untranslated until ``make pot`` merges it (fuzzy) and it is translated.
* Pages listed in ``locale/complete.txt`` are 100 % translated with no fuzzy entry.
* ``msgfmt --check`` accepts every catalogue; ``tools/po_check.py`` finds no problem in any
  translated message.
"""
import difflib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import i18n  # noqa: E402  (tools/ is not a package)
import po_check  # noqa: E402

CATALOGUES = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
PAGES = sorted(p.relative_to(CATALOGUES).with_suffix("").as_posix() for p in CATALOGUES.rglob("*.po"))


def complete_pages(path: Path = ROOT / "locale" / "complete.txt") -> list[str]:
    lines = [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def read(path: Path):
    with path.open("rb") as handle:
        return read_po(handle)


def messages(catalogue) -> dict[str, object]:
    return {m.id: m for m in catalogue if m.id}


def _where(text: str, other: str | None) -> str:
    """A message's start, or, for a changed one, its words around the first change."""
    if other is None:
        return repr(text[:90])
    first = next((i for i, (a, b) in enumerate(zip(text, other)) if a != b), min(len(text), len(other)))
    return repr(("…" if first > 40 else "") + text[max(0, first - 40):first + 50])


def drift(po, pot) -> list[str]:
    """What differs between a catalogue and its page's fresh extraction, a line per message: a
    changed English paragraph (paired with its old text by similarity) shows where it changed."""
    new = sorted(messages(pot).keys() - messages(po).keys())
    gone = sorted(messages(po).keys() - messages(pot).keys())
    found = []
    for msgid in new:
        match = difflib.get_close_matches(msgid, gone, n=1, cutoff=0.8)
        if match:
            gone.remove(match[0])
            found.append(f"changed English message (run `make pot`, then translate it): now {_where(msgid, match[0])}, "
                         f"was {_where(match[0], msgid)}")
        else:
            found.append(f"new English message, not in the catalogue (run `make pot`): {_where(msgid, None)}")
    found += [f"message no longer on the page (run `make pot`): {_where(msgid, None)}" for msgid in gone]
    return found


def unfinished(po) -> list[str]:
    return [f"{'fuzzy' if m.fuzzy else 'untranslated'}: {m.id[:90]!r}" for m in po
            if m.id and (m.fuzzy or not m.string)]


@pytest.fixture(scope="session")
def fresh_pot(tmp_path_factory):
    return i18n.extract(tmp_path_factory.mktemp("pot"))


def test_complete_pages_name_catalogues():
    assert set(complete_pages()) <= set(PAGES), set(complete_pages()) - set(PAGES)


def test_every_page_has_a_catalogue(fresh_pot):
    pots = sorted(p.relative_to(fresh_pot).with_suffix("").as_posix() for p in fresh_pot.rglob("*.pot"))
    assert pots == PAGES


@pytest.mark.parametrize("page", PAGES)
def test_catalogue_matches_a_fresh_extraction(page, fresh_pot):
    found = drift(read(CATALOGUES / f"{page}.po"), read(fresh_pot / f"{page}.pot"))
    assert not found, f"{page}: " + "\n".join(found)


@pytest.mark.parametrize("page", complete_pages())
def test_complete_page_is_fully_translated(page):
    found = unfinished(read(CATALOGUES / f"{page}.po"))
    assert not found, f"{page}: " + "\n".join(found)


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs GNU gettext's msgfmt (apt-get install gettext)")
@pytest.mark.parametrize("page", PAGES)
def test_msgfmt_accepts_the_catalogue(page):
    result = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(CATALOGUES / f"{page}.po")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("page", PAGES)
def test_translated_messages_keep_their_markup(page):
    found = po_check.check_file(CATALOGUES / f"{page}.po", False, po_check.glossary_chinese())
    assert not found, "\n".join(found)


# The checks above, shown to fail on catalogues with planted defects.


def _catalogue(tmp_path, body: str) -> Path:
    path = tmp_path / "page.po"
    path.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n' + body,
                    encoding="utf-8")
    return path


def test_a_changed_english_paragraph_is_named(tmp_path):
    po = read(_catalogue(tmp_path, 'msgid "The old paragraph about attention."\nmsgstr "旧段落。"\n\n'
                                   'msgid "Gone."\nmsgstr "没了。"\n'))
    pot = read(_catalogue(tmp_path, 'msgid "The new paragraph about attention."\nmsgstr ""\n\n'
                                    'msgid "Quite another sentence."\nmsgstr ""\n'))
    found = drift(po, pot)
    assert len(found) == 3, found
    assert any("changed English message" in line and "new paragraph" in line and "old paragraph" in line
               for line in found), found
    assert any("new English message" in line and "Quite another sentence." in line for line in found), found
    assert any("no longer on the page" in line and "Gone." in line for line in found), found


def test_fuzzy_and_untranslated_messages_are_named(tmp_path):
    po = read(_catalogue(tmp_path, '#, fuzzy\nmsgid "A changed one."\nmsgstr "旧的。"\n\n'
                                   'msgid "A new one."\nmsgstr ""\n\nmsgid "Done."\nmsgstr "完成。"\n'))
    assert unfinished(po) == ["fuzzy: 'A changed one.'", "untranslated: 'A new one.'"]


def test_complete_list_skips_comments(tmp_path):
    listing = tmp_path / "complete.txt"
    listing.write_text("# a comment\nchapters/09_attention  # done\n\nintro\n", encoding="utf-8")
    assert complete_pages(listing) == ["chapters/09_attention", "intro"]


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs GNU gettext's msgfmt")
def test_msgfmt_rejects_a_broken_format_string(tmp_path):
    path = _catalogue(tmp_path, '#, python-format\nmsgid "%(n)d steps"\nmsgstr "%(m)d 步"\n')
    assert subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)],
                          capture_output=True).returncode != 0
