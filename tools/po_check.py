"""Check the Chinese catalogues (locale/zh_CN/LC_MESSAGES/**/*.po) against their English messages.

Each translated message must keep what the build resolves or shows verbatim: its roles and
their targets ({term}, {eq}, {numref}, {ref}, {doc}, {cite:*}, and {glue:*} whole), its inline
maths, inline code and link addresses; every {term} shows the glossary's Chinese form; bold and
italic delimiters stay where CommonMark can read them next to Chinese punctuation; and no line
break falls between two Chinese characters (a browser shows it as a space). A plot's alt text
(its cell's ``mystnb.image.alt`` in the page's notebook) is plain text, never Markdown: the
emphasis rules do not apply to it (``y* 的长度`` is a starred y, not an opening ``*``).

    python tools/po_check.py [PO ...]          problems of translated messages
    python tools/po_check.py --complete PO ...  also every untranslated or fuzzy message
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections import Counter
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = ROOT / "locale" / "zh_CN" / "LC_MESSAGES"
GLOSSARY = ROOT / "backmatter" / "glossary.md"

ROLE = re.compile(r"\{([a-z][a-z:-]*)\}`([^`]*)`")
MATHS = re.compile(r"(?<![\\$])\$(?!\$)([^$]+?)(?<!\\)\$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
CJK = "\u3400-\u9fff\uf900-\ufaff"
CJK_PUNCT = "\u3000-\u303f\uff00-\uffef\u2018-\u201f\u2026\u2014"
BREAK_BETWEEN_CJK = re.compile(rf"[{CJK}{CJK_PUNCT}]\s*\n\s*[{CJK}{CJK_PUNCT}]")


def glossary_chinese() -> dict[str, list[str]]:
    """English term (lower case) -> the Chinese forms the glossary gives it."""
    text = GLOSSARY.read_text(encoding="utf-8")
    body = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    forms: dict[str, list[str]] = {}
    pending: list[str] = []
    for line in body.splitlines():
        if not line.strip() or line.startswith(":"):
            continue
        if not line.startswith(" "):
            pending.append(line.strip().lower())
            continue
        if pending:
            span = re.search(r'<span lang="zh-Hans">(.*?)</span>', line)
            chinese = [form.strip() for form in span.group(1).split("/")] if span else []
            for term in pending:
                forms[term] = chinese
            pending = []
    return forms


def role_target(name: str, content: str) -> str:
    """What a role points at: glue keeps its whole content; the others their <target> or text."""
    if name.startswith("glue"):
        return content
    explicit = re.search(r"<([^<>]+)>\s*$", content)
    return (explicit.group(1) if explicit else content).strip()


def without_roles(text: str) -> str:
    return ROLE.sub(" ", text)


def inline_code(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", without_roles(text))


def prose(text: str, stand_in: str = "x") -> str:
    """The text less roles, inline code and maths (display and inline), each left as ``stand_in``."""
    text = re.sub(r"\$\$.*?\$\$", stand_in, text, flags=re.S)
    return MATHS.sub(stand_in, re.sub(r"`[^`]*`", stand_in, ROLE.sub(stand_in, text)))


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


def emphasis_problems(text: str) -> list[str]:
    """Bold or italic delimiters CommonMark will print literally.

    A run of `*` opens only if it is left-flanking and closes only if it is right-flanking
    (CommonMark 6.2); next to Chinese punctuation that fails, e.g. `**“注意力”**机制`.
    Runs are paired in order, first an opener, then a closer.
    """
    # To CommonMark a role, code span or formula begins and ends with punctuation ({ ` $), so
    # `一种**{term}`联想记忆 <x>`**` opens nothing: each stands in as "(x)", not as a letter.
    plain = prose(text, "(x)")
    problems = []
    for stars in ("**", "*"):
        runs = [m for m in re.finditer(r"\*+", plain) if m.group() == stars]
        for index, run in enumerate(runs):
            before = plain[run.start() - 1] if run.start() else " "
            after = plain[run.end()] if run.end() < len(plain) else " "
            left = not after.isspace() and (
                not _is_punctuation(after) or before.isspace() or _is_punctuation(before)
            )
            right = not before.isspace() and (
                not _is_punctuation(before) or after.isspace() or _is_punctuation(after)
            )
            if not (right if index % 2 else left):
                context = plain[max(0, run.start() - 6) : run.end() + 6].replace("\n", " ")
                problems.append(f"{'closing' if index % 2 else 'opening'} {stars!r} in {context!r}")
    return problems


def plot_alt_texts(po: Path) -> set[str]:
    """The alt texts of the plots of the page whose catalogue is ``po`` (its notebook's cells'
    ``mystnb.image.alt``; ``_ext/editions.py`` extracts them as messages): none for a page that
    is no notebook, or a catalogue outside locale/zh_CN/LC_MESSAGES."""
    try:
        page = po.resolve().relative_to(CATALOGUES).with_suffix("")
    except ValueError:
        return set()
    notebook = (ROOT / page).with_suffix(".ipynb")
    if not notebook.is_file():
        return set()
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    alts = (cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt") for cell in cells)
    return {alt for alt in alts if alt}


def check_message(source: str, translation: str, glossary: dict[str, list[str]],
                  markdown: bool = True) -> list[str]:
    """The problems of ``translation`` of ``source``; ``markdown=False`` for a message that is
    plain text (an alt text), which has no emphasis to break."""
    problems = []
    source_roles = Counter((n, role_target(n, c)) for n, c in ROLE.findall(source))
    target_roles = Counter((n, role_target(n, c)) for n, c in ROLE.findall(translation))
    if source_roles != target_roles:
        missing = source_roles - target_roles
        extra = target_roles - source_roles
        problems.append(f"roles differ: missing {dict(missing)}, extra {dict(extra)}")
    for name, content in ROLE.findall(translation):
        if name == "term":
            target = role_target(name, content).lower()
            shown = re.sub(r"\s*<[^<>]+>\s*$", "", content)
            forms = glossary.get(target)
            if forms is None:
                problems.append(f"{{term}} target {target!r} is not in the glossary")
            elif forms and not any(form in shown for form in forms):
                problems.append(f"{{term}}`{content}` shows none of the glossary's forms {forms}")
    if Counter(MATHS.findall(source)) != Counter(MATHS.findall(translation)):
        problems.append("inline maths differs (it must be copied unchanged)")
    if Counter(inline_code(source)) != Counter(inline_code(translation)):
        problems.append("inline code differs (it must be copied unchanged)")
    if without_roles(translation).count("`") % 2:
        problems.append("an odd number of backticks")
    if Counter(LINK.findall(source)) != Counter(LINK.findall(translation)):
        problems.append("link addresses differ")
    if markdown and prose(translation).count("**") % 2:
        problems.append("an odd number of '**'")
    exempt = not markdown or "$$" in source or "\\begin{" in source
    for problem in [] if exempt else emphasis_problems(translation):
        problems.append(f"emphasis next to punctuation prints literally: {problem}")
    if BREAK_BETWEEN_CJK.search(translation):
        problems.append("a line break between two Chinese characters (shown as a space)")
    return problems


def check_file(path: Path, complete: bool, glossary) -> list[str]:
    with path.open("rb") as handle:
        catalogue = read_po(handle)
    found, alts = [], plot_alt_texts(path)
    for message in catalogue:
        if not message.id:
            continue
        source = message.id if isinstance(message.id, str) else message.id[0]
        translation = message.string if isinstance(message.string, str) else message.string[0]
        label = source[:70].replace("\n", " ")
        if not translation or message.fuzzy:
            if complete:
                found.append(f"{path}: {'fuzzy' if message.fuzzy else 'untranslated'}: {label!r}")
            continue
        for problem in check_message(source, translation, glossary, markdown=source not in alts):
            found.append(f"{path}: {problem}: {label!r}")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("po", nargs="*", type=Path)
    parser.add_argument("--complete", action="store_true")
    args = parser.parse_args(argv)
    glossary = glossary_chinese()
    paths = args.po or sorted(CATALOGUES.rglob("*.po"))
    found = [line for path in paths for line in check_file(path, args.complete, glossary)]
    print("\n".join(found) if found else f"{len(paths)} catalogue(s): no problem found")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
