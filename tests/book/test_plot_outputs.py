"""Every plot of every committed chapter: sharp on a 2x screen, legible on a phone, its colours explained.

Cheap: it reads the committed notebooks, never runs them. Each plot's output carries the metadata that
``lib.display.plot_png`` wrote when the chapter ran (its CSS ``width``, the smallest ``font_pt`` the
renderer drew, a formula's exponents and subscripts and Unicode ones included, any colour scale (a scatter's
``c=values`` too) without a colour bar or axis titles, any colour bar without a label, any legend over data
(bars and filled areas too), texts colliding with each other, with the data or with a colour bar or inset
axes, a colour bar between an axes and its axis title or on it, and ``checked``: which of these it was drawn
with; the checks named there grew stricter at stop 42 under the same names, so chapters drawn before are not
refused); ``tests/lib/test_display_plots.py``
shows that the metadata tells the truth. A plot drawn before a check existed fails: its metadata cannot show
that defect. An explorer's preview (a PNG beside its widget) is held to the
2x rule here and to the text rule by ``tests/lib/widgets/test_widgets_legibility.py``.
"""
import base64
import io
from pathlib import Path

import nbformat
import pytest
from PIL import Image

from lib.display import MIN_TEXT_PX, PIXEL_DENSITY, PLOT_CHECKS, phone_text_px

ROOT = Path(__file__).resolve().parents[2]
WIDGET = "application/vnd.jupyter.widget-view+json"


def images(notebook: Path) -> list[tuple[str, dict, dict]]:
    """``[(where, data, image/png metadata)]`` of every PNG output of ``notebook``."""
    found = []
    for index, cell in enumerate(nbformat.read(notebook, as_version=4).cells):
        if cell.cell_type != "code":
            continue
        for n, output in enumerate(cell.get("outputs", [])):
            if "image/png" in output.get("data", {}):
                found.append((f"{notebook.stem} cell {index} ({cell.get('id')}) output {n}", output["data"],
                              output.get("metadata", {}).get("image/png", {})))
    return found


DEFECTS = ("unscaled_colours", "legend_overlaps", "text_overlaps", "split_titles")  # plot_png's lists


def problems(where: str, data: dict, metadata: dict) -> list[str]:
    """What keeps one PNG output from being sharp on a 2x screen and legible on a phone."""
    found = []
    width = metadata.get("width")
    if width is None:
        return [f"{where}: no CSS width in its metadata (shown at its pixel size, blurred on a 2x screen)"]
    size = Image.open(io.BytesIO(base64.b64decode(data["image/png"]))).size
    if size[0] != PIXEL_DENSITY * width:
        found.append(f"{where}: {size[0]} px wide shown at {width} CSS px, not {PIXEL_DENSITY}x")
    if WIDGET in data:  # an explorer's preview: its text is the explorers' legibility test's
        return found
    if metadata.get("font_pt") is None:
        return found + [f"{where}: no smallest font size in its metadata"]
    unchecked = [check for check in PLOT_CHECKS if check not in metadata.get("checked", [])]
    if unchecked:
        found.append(f"{where}: drawn before lib.display checked {', '.join(unchecked)} (re-execute the chapter)")
    shown = phone_text_px(metadata["font_pt"], width)
    if shown < MIN_TEXT_PX:
        found.append(f"{where}: {metadata['font_pt']:g} pt text in a plot {width} px wide is {shown:.1f} px on a "
                     f"phone, under {MIN_TEXT_PX} px")
    found += [f"{where}: {problem}" for key in DEFECTS for problem in metadata.get(key, [])]
    return found


CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", CHAPTERS, ids=lambda path: path.stem)
def test_every_plot_is_sharp_and_legible_on_a_phone(notebook):
    found = images(notebook)
    assert found, f"{notebook.name} shows no plot"
    report = [problem for where, data, metadata in found for problem in problems(where, data, metadata)]
    assert not report, "\n".join(report)


def test_the_check_finds_each_defect():
    def png(width_px, height_px=40):
        buffer = io.BytesIO()
        Image.new("RGB", (width_px, height_px), "white").save(buffer, format="png")
        return {"image/png": base64.b64encode(buffer.getvalue()).decode()}

    checked = {"checked": list(PLOT_CHECKS)}
    assert problems("p", png(960), {"width": 480, "font_pt": 12, **checked}) == []
    # Drawn before a check existed (the committed outputs of stop 41 had no "checked"): refused.
    assert problems("p", png(960), {"width": 480, "font_pt": 12}) == [
        "p: drawn before lib.display checked " + ", ".join(PLOT_CHECKS) + " (re-execute the chapter)"]
    assert problems("p", png(960), {"width": 480, "font_pt": 12, "checked": list(PLOT_CHECKS[1:])}) == [
        f"p: drawn before lib.display checked {PLOT_CHECKS[0]} (re-execute the chapter)"]
    assert problems("p", png(960), {}) == [
        "p: no CSS width in its metadata (shown at its pixel size, blurred on a 2x screen)"]
    assert problems("p", png(480), {"width": 480, "font_pt": 12, **checked}) == [
        "p: 480 px wide shown at 480 CSS px, not 2x"]
    assert problems("p", png(960), {"width": 480}) == ["p: no smallest font size in its metadata"]
    assert problems("p", png(960), {"width": 480, "font_pt": 11, **checked}) == [
        "p: 11 pt text in a plot 480 px wide is 11.3 px on a phone, under 12 px"]
    # 12 pt holds up to 494 px (4.94 inches); 500 px is too wide.
    assert problems("p", png(1000), {"width": 500, "font_pt": 12, **checked}) == [
        "p: 12 pt text in a plot 500 px wide is 11.9 px on a phone, under 12 px"]
    # A formula's subscript at 0.7 of 12 pt is what font_pt records (tests/lib/test_display_plots.py).
    assert problems("p", png(960), {"width": 480, "font_pt": 8.4, **checked}) == [
        "p: 8.4 pt text in a plot 480 px wide is 8.7 px on a phone, under 12 px"]
    for key in DEFECTS:
        assert problems("p", png(960), {"width": 480, "font_pt": 12, key: ["one defect", "two"], **checked}
                        ) == ["p: one defect", "p: two"]
    preview = {**png(864), WIDGET: {}}
    assert problems("p", preview, {"width": 432}) == []
    assert problems("p", preview, {}) == [
        "p: no CSS width in its metadata (shown at its pixel size, blurred on a 2x screen)"]
