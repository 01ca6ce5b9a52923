"""The book's editions: extract the English messages, update the catalogues, build the Chinese edition.

    python tools/i18n.py extract [--pot DIR]   the English pages' messages as .pot files (DIR,
                                               default _build/gettext), one per page
    python tools/i18n.py update                extract, then merge into locale/zh_CN/LC_MESSAGES
                                               (sphinx-intl: a changed message turns fuzzy, a new
                                               one untranslated, a removed one obsolete); `make pot`
    python tools/i18n.py build                 the Chinese edition, into _build/html/zh_CN (`make book`
                                               runs it after the English build)

Extraction reads the notebooks as stored (no execution): the messages are their markdown cells,
exercise titles and explorer captions (``_ext/editions.py``); maths and outputs are not extracted.
No source locations and a fixed line width, so that a moved cell or a re-run changes no catalogue.

The Chinese edition is Sphinx's build of the same sources with ``language: zh_CN``: it reads the
notebooks' runs from the same myst-nb cache as the English build (nothing is executed twice) and
keeps its own doctrees and outputs under ``_build/zh_CN/`` (myst-nb writes a build's outputs next to
its HTML folder, which must therefore not sit inside the English one); its HTML is then mirrored
into ``_build/html/zh_CN/`` so that one folder holds the whole site, English at the root.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "locale"
LANGUAGES = ["zh_CN"]
LINE_WIDTH = 76  # sphinx-intl's default, fixed here so that the catalogues' wrapping never changes
POT = ROOT / "_build" / "gettext"
ENGLISH_HTML = ROOT / "_build" / "html"


def _build(outdir: Path, builder: str, overrides: dict, warningiserror: bool) -> int:
    """Jupyter Book's build (its _config.yml and _toc.yml) with Sphinx settings overridden."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    from jupyter_book.sphinx import build_sphinx

    overrides = {"external_toc_path": (ROOT / "_toc.yml").as_posix(), "latex_individualpages": False,
                 **overrides}
    result = build_sphinx(ROOT, outdir, noconfig=True, path_config=str(ROOT / "_config.yml"),
                          confoverrides=overrides, builder=builder, warningiserror=warningiserror,
                          keep_going=warningiserror,
                          doctreedir=ROOT / "_build" / ".doctrees-gettext" if builder == "gettext" else None)
    if isinstance(result, Exception):
        raise result
    return result


def extract(pot: Path = POT) -> Path:
    """Write one .pot per page into ``pot`` (the English messages, no locations). Its doctrees
    stay in _build/.doctrees-gettext, so that a second extraction re-reads only changed pages."""
    pot.mkdir(parents=True, exist_ok=True)
    for stale in pot.rglob("*.pot"):
        stale.unlink()
    status = _build(pot, "gettext", {"nb_execution_mode": "off", "gettext_compact": False,
                                     "gettext_location": False, "gettext_uuid": False}, False)
    if status:
        raise SystemExit(f"extraction failed ({status})")
    return pot


def update(pot: Path = POT) -> None:
    """Extract, then merge every .pot into the catalogues of each language."""
    extract(pot)
    for language in LANGUAGES:
        subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "-p", str(pot), "-l", language,
                        "-d", str(LOCALE), "-w", str(LINE_WIDTH)], check=True, cwd=ROOT)
        for catalogue in (LOCALE / language).rglob("*.po"):
            keep_no_python_format(catalogue)


def keep_no_python_format(catalogue: Path) -> None:
    """Drop the ``python-format`` flag babel adds beside a message's ``no-python-format``.

    babel flags a message python-format when it sees a % in it ("15% of the tokens"), even if
    the catalogue already says no-python-format; msgfmt --check then reads the % as a directive
    and refuses the catalogue.
    """
    lines = catalogue.read_text(encoding="utf-8").splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith("#,"):
            flags = [flag.strip() for flag in line[2:].split(",")]
            if "no-python-format" in flags and "python-format" in flags:
                flags.remove("python-format")
                lines[index] = "#, " + ", ".join(flags) + "\n"
    catalogue.write_text("".join(lines), encoding="utf-8")


def mirror(source: Path, target: Path) -> None:
    """Make ``target`` a copy of ``source``: copy new and changed files, delete the others."""
    target.mkdir(parents=True, exist_ok=True)
    for path in source.rglob("*"):
        copy = target / path.relative_to(source)
        if path.is_dir():
            copy.mkdir(parents=True, exist_ok=True)
        elif not copy.exists() or not filecmp.cmp(path, copy, shallow=True):
            shutil.copy2(path, copy)
    for path in sorted(target.rglob("*"), reverse=True):
        if not (source / path.relative_to(target)).exists():
            path.rmdir() if path.is_dir() else path.unlink()


def build(language: str = "zh_CN") -> int:
    """Build the ``language`` edition into _build/<language>/html, then mirror it into
    _build/html/<language>/ (the English edition's root, where the language switch points)."""
    started = time.perf_counter()
    outdir = ROOT / "_build" / language / "html"
    status = _build(outdir, "html", {"language": language, "nitpicky": True}, True)
    if status == 0:
        mirror(outdir, ENGLISH_HTML / language)
    print(f"{language} edition: {time.perf_counter() - started:.1f} s, status {status}")
    return status


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["extract", "update", "build"])
    parser.add_argument("--pot", type=Path, default=POT, help="where extract writes the .pot files")
    parser.add_argument("--language", default="zh_CN", choices=LANGUAGES)
    args = parser.parse_args(argv)
    if args.command == "extract":
        extract(args.pot)
    elif args.command == "update":
        update(args.pot)
    else:
        return build(args.language)
    return 0


if __name__ == "__main__":
    sys.exit(main())
