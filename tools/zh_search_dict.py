"""The Chinese edition's search dictionary, generated from the glossary (issue 32).

    python tools/zh_search_dict.py           write _ext/zh_search_dict.txt
    python tools/zh_search_dict.py --check   exit 1 if the committed file differs from the glossary

Sphinx's Chinese search segments a page's text with jieba; without help jieba splits many of
the book's terms (信息超载 -> 信息 / 超载, 梯度裁剪 -> 梯度 / 裁剪), and a reader who types the
term finds nothing, since the search page looks each query word up whole. The dictionary
lists every Chinese word of the glossary's Chinese forms (``<span lang="zh-Hans">…</span>`` in
``backmatter/glossary.md``): each form is split on " / " into its alternatives, and each
alternative into the words the search box makes of a query (runs of letters and digits, as
``searchtools.js`` splits it); the words with a Chinese character and at least two characters
(the index drops one-character words) are the entries, one a line, sorted. No frequencies:
jieba then gives each entry the least frequency that keeps it whole.
``_ext/edition_ui.py`` passes the file to the zh_CN build as ``html_search_options["dict"]``.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "backmatter" / "glossary.md"
DICTIONARY = ROOT / "_ext" / "zh_search_dict.txt"

CHINESE_FORM = re.compile(r'<span lang="zh-Hans">([^<]+)</span>')
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# searchtools.js: query.split(/[^\p{Letter}\p{Number}_\p{Emoji_Presentation}]+/gu)
QUERY_WORD = re.compile(r"[^\W]+")


def glossary_forms(text: str) -> list[str]:
    """Every Chinese form of the glossary: each ``<span lang="zh-Hans">`` split on " / "."""
    return [alternative.strip() for form in CHINESE_FORM.findall(text)
            for alternative in form.split(" / ") if alternative.strip()]


def query_words(form: str) -> list[str]:
    """The words the search box makes of ``form``, in order."""
    return QUERY_WORD.findall(form)


def chinese_words(form: str) -> list[str]:
    """The words of ``form`` a Chinese search must find whole: a Chinese character, >= 2 long."""
    return [word for word in query_words(form) if HAN.search(word) and len(word) >= 2]


def dictionary_text(glossary: str) -> str:
    words = sorted({word for form in glossary_forms(glossary) for word in chinese_words(form)})
    if not words:
        raise ValueError("glossary: expected <span lang=\"zh-Hans\"> forms, found none")
    return "\n".join(words) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    text = dictionary_text(GLOSSARY.read_text(encoding="utf-8"))
    if args.check:
        if not DICTIONARY.is_file() or DICTIONARY.read_text(encoding="utf-8") != text:
            print(f"{DICTIONARY.relative_to(ROOT)} is stale: run python tools/zh_search_dict.py")
            return 1
        return 0
    DICTIONARY.write_text(text, encoding="utf-8")
    print(f"{DICTIONARY.relative_to(ROOT)}: {text.count(chr(10))} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
