"""tools/po_check.py, rule by rule: each rule passes a good translation and reports a bad one."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import po_check  # noqa: E402  (tools/ is not a package)

GLOSSARY = {"attention": ["注意力"], "attention weight": ["注意力权重"], "scoring function": ["打分函数", "评分函数"]}


def problems(source, translation):
    return po_check.check_message(source, translation, GLOSSARY)


def test_the_glossary_gives_each_term_its_chinese_forms():
    glossary = po_check.glossary_chinese()
    assert glossary["attention"] == ["注意力"]
    assert len(glossary) >= 150
    assert all(isinstance(forms, list) for forms in glossary.values())


def test_a_faithful_translation_has_no_problem():
    source = ("The {term}`attention` weights {eq}`eq-a` sum to $1$ (see {numref}`fig-x`, "
              "{cite:t}`vaswani2017`, `masked_softmax` and [the code](../lib/a.py)); "
              "it gives {glue:text}`ch09-x:.4f`, **bold** and *italic*.")
    translation = ("{term}`注意力 <attention>` 权重 {eq}`eq-a` 之和为 $1$（见 {numref}`fig-x`、"
                   "{cite:t}`vaswani2017`、`masked_softmax` 和[代码](../lib/a.py)）；"
                   "结果为 {glue:text}`ch09-x:.4f`，**粗体** 与 *斜体*。")
    assert problems(source, translation) == []


@pytest.mark.parametrize("source, translation, expected", [
    ("see {eq}`eq-a`", "见 {eq}`eq-b`", "roles differ"),
    ("see {numref}`fig-x`", "见图", "roles differ"),
    ("is {glue:text}`k:.4f`", "为 {glue:text}`k:.2f`", "roles differ"),
    ("by {cite:t}`a2015`", "由 {cite:p}`a2015`", "roles differ"),
    ("{ref}`below <key-value>`", "{ref}`下文 <key>`", "roles differ"),
    ("the {term}`attention`", "{term}`关注 <attention>`", "shows none of the glossary's forms"),
    ("the {term}`attention`", "{term}`注意力 <attentions>`", "roles differ"),
    ("sum $a+b$", "之和 $a + b$", "inline maths differs"),
    ("call `f(x)`", "调用 `f(y)`", "inline code differs"),
    ("call `f(x)`", "调用 `f(x)` 与 `", "odd number of backticks"),
    ("[code](a.py)", "[代码](b.py)", "link addresses differ"),
    ("**bold** here", "**粗体 这里", "odd number of '**'"),
    ("the **attention** mechanism", "**“注意力”**机制", "emphasis next to punctuation"),
    ("a *query* here", "一个*“查询”*在此", "emphasis next to punctuation"),
    ("one paragraph", "一个段\n落", "line break between two Chinese characters"),
    ("one paragraph.", "一个段落。\n下一句", "line break between two Chinese characters"),
])
def test_each_rule_reports_its_defect(source, translation, expected):
    found = problems(source, translation)
    assert any(expected in problem for problem in found), found


def test_a_term_outside_the_glossary_is_reported():
    found = problems("a {term}`gizmo`", "一个 {term}`小玩意 <gizmo>`")
    assert any("not in the glossary" in problem for problem in found), found


def test_either_chinese_form_of_a_term_is_accepted():
    assert problems("the {term}`scoring function`", "{term}`评分函数 <scoring function>`") == []
    assert problems("the {term}`scoring function`", "{term}`打分函数 <scoring function>`") == []


def test_emphasis_outside_the_punctuation_is_accepted():
    assert problems("the **attention** mechanism", "“**注意力**”机制") == []


def test_bold_around_a_role_needs_a_space_next_to_chinese():
    """A role begins and ends with punctuation to CommonMark: `一种**{term}`…`**，` prints its
    asterisks (the zh build found 25 such in chapters 6 and 12); a space before the bold mends it."""
    source = "a **{term}`attention`**, that is"
    found = problems(source, "一种**{term}`注意力 <attention>`**，即")
    assert any("opening '**'" in problem for problem in found), found
    assert problems(source, "一种 **{term}`注意力 <attention>`**，即") == []


def test_display_maths_is_exempt_from_the_emphasis_rule():
    source = "$$\\begin{aligned} a^{**} \\end{aligned}$$"
    assert problems(source, source) == []


def test_check_file_lists_untranslated_and_fuzzy_messages_only_when_complete(tmp_path):
    po = tmp_path / "page.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
                  'msgid "One"\nmsgstr ""\n\n#, fuzzy\nmsgid "Two"\nmsgstr "二"\n\n'
                  'msgid "Three `x`"\nmsgstr "三 `y`"\n', encoding="utf-8")
    partial = po_check.check_file(po, False, GLOSSARY)
    assert len(partial) == 1 and "inline code differs" in partial[0]
    complete = po_check.check_file(po, True, GLOSSARY)
    assert sum("untranslated" in line for line in complete) == 1
    assert sum("fuzzy" in line for line in complete) == 1
    assert po_check.main([str(po)]) == 1


def test_a_plots_alt_text_is_exempt_from_the_emphasis_rules(tmp_path, monkeypatch):
    """A plot's alt text (cell metadata mystnb.image.alt) is plain text: "y* 的长度" is no broken
    emphasis there, while the same Chinese in a Markdown message of the page is."""
    catalogues = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES"
    (catalogues / "chapters").mkdir(parents=True)
    monkeypatch.setattr(po_check, "ROOT", tmp_path)
    monkeypatch.setattr(po_check, "CATALOGUES", catalogues)
    alt = "Bars below the dashed length of y*."
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["The length of y* is dashed."]},
             {"cell_type": "code", "metadata": {"mystnb": {"image": {"alt": alt}, "figure": {"caption": "C"}}},
              "source": [], "outputs": [], "execution_count": None}]
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "07_decoding.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    po = catalogues / "chapters" / "07_decoding.po"
    po.write_text('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
                  f'msgid "{alt}"\nmsgstr "条形低于表示 y* 的长度的虚线。"\n\n'
                  'msgid "The length of y* is dashed."\nmsgstr "y* 的长度用虚线表示。"\n', encoding="utf-8")
    assert po_check.plot_alt_texts(po) == {alt}
    (problem,) = po_check.check_file(po, True, GLOSSARY)
    assert "emphasis" in problem and "The length of y*" in problem
    assert problems(alt, "条形低于表示 y* 的长度的虚线。") != []  # as Markdown it would be reported
    assert po_check.check_message(alt, "条形低于表示 y* 的长度的虚线。", GLOSSARY, markdown=False) == []


def test_the_books_plot_alt_texts_are_found():
    alts = po_check.plot_alt_texts(po_check.CATALOGUES / "chapters" / "07_decoding.po")
    assert any(alt.startswith("Four panels against the beam size K") for alt in alts), alts
    assert po_check.plot_alt_texts(po_check.CATALOGUES / "intro.po") == set()
