"""The site-weight measurement (benchmarks/site_weight.py) and its table on the Benchmarks page."""

import base64
import io
import json
from pathlib import Path

import pytest
from PIL import Image

from benchmarks.report import DEFAULT_SITE_WEIGHT, load_site_weight, site_weight_tables
from benchmarks.site_weight import GOALS, first_explorer_ms, launch_chromium, measure, page_transfer, serve, site_size

CHAPTERS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "chapters").glob("*.ipynb"))


def _tiny_site(folder: Path) -> dict:
    """A two-file site: a page and the script it loads, with known sizes."""
    (folder / "_static" / "mathjax").mkdir(parents=True)
    (folder / "chapters").mkdir()
    (folder / "_static" / "mathjax" / "tex.js").write_text("x" * 5000)
    (folder / "_static" / "big.js").write_text("/*" + "y" * 20_000 + "*/")
    page = '<!doctype html><html><body><p>hi</p><script src="../_static/big.js"></script></body></html>'
    (folder / "chapters" / "01_a.html").write_text(page)
    (folder / "index.html").write_text("<p>index</p>")
    return {"page": len(page), "script": 20_004}


def test_site_size_adds_up_its_parts(tmp_path):
    _tiny_site(tmp_path)
    sizes = site_size(tmp_path)
    assert sizes["mathjax"] == 5000 and sizes["other _static"] == 20_004
    assert sizes["site"] == 5000 + 20_004 + sizes["pages (HTML)"]


def test_site_weight_tables_mark_the_goals():
    weight = {"date": "2026-01-01", "goals": GOALS,
              "sizes": {"site": 30e6, "mathjax": 3e6},
              "pages": {"chapters/01_a.html": {"bytes": 2.5e6, "gzip_bytes": 1e6, "requests": 9, "dom_content_loaded_ms": 100.0,
                                               "load_ms": 250.0, "typeset_ms": 400.0, "first_explorer_ms": 300.0},
                        "chapters/02_b.html": {"bytes": 3.5e6, "gzip_bytes": 1e6, "requests": 9, "dom_content_loaded_ms": 100.0,
                                               "load_ms": 250.0, "typeset_ms": 400.0, "first_explorer_ms": 1500.0},
                        "chapters/03_c.html": {"bytes": 1e6, "gzip_bytes": 1e6, "requests": 9, "dom_content_loaded_ms": 100.0,
                                               "load_ms": 250.0, "typeset_ms": 400.0, "first_explorer_ms": None}}}
    text = site_weight_tables(weight)
    assert "| whole site | 30.00 MB | ≤ 25 MB | ✗ missed |" in text
    assert "| chapters/01_a.html | 2.50 MB | 1.00 MB | 9 | 0.10 s | 0.25 s | 0.40 s | 0.30 s | ✓ |" in text
    assert "| chapters/02_b.html | 3.50 MB |" in text
    assert "| 1.50 s | ✗ over 3 MB, explorer after 1 s |" in text
    assert "| no explorer | ✓ |" in text


def test_the_committed_weight_covers_every_chapter_page():
    weight = load_site_weight()
    assert sorted(Path(page).stem for page in weight["pages"]) == CHAPTERS
    assert json.loads(DEFAULT_SITE_WEIGHT.read_text())["goals"] == GOALS


def test_measure_refuses_a_folder_that_is_no_build(tmp_path):
    with pytest.raises(ValueError, match="build must be a built book"):
        measure(tmp_path)


@pytest.mark.browser
def test_page_transfer_counts_every_response(tmp_path):
    from playwright.sync_api import sync_playwright

    known = _tiny_site(tmp_path)
    with serve(tmp_path) as url, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            transfer = page_transfer(browser, f"{url}/chapters/01_a.html")
        finally:
            browser.close()
    assert transfer["requests"] == 2
    bodies = known["page"] + known["script"]
    assert bodies < transfer["bytes"] < bodies + 2000  # plus the two responses' headers
    assert transfer["gzip_bytes"] < bodies / 10  # runs of one letter compress well
    assert 0 < transfer["dom_content_loaded_ms"] <= transfer["load_ms"] <= transfer["typeset_ms"]


@pytest.mark.browser
def test_first_explorer_ms_waits_for_a_new_frame_and_skips_pages_without_one(tmp_path):
    """A player whose script runs only after 400 ms cannot be reported as ready sooner."""
    from playwright.sync_api import sync_playwright

    def frame(colour):
        buffer = io.BytesIO()
        Image.new("RGB", (4, 4), colour).save(buffer, format="png")
        return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()

    (tmp_path / "late.html").write_text(
        '<!doctype html><div class="book-explorer"><input type="range" class="book-explorer-control" '
        f'min="0" max="1" value="0"><img class="book-explorer-frame" src="{frame("red")}"></div>'
        "<script>setTimeout(() => { const img = document.querySelector('img');"
        "document.querySelector('input').addEventListener('input', () => "
        f"{{ img.src = '{frame('blue')}'; }}); }}, 400);</script>")
    (tmp_path / "plain.html").write_text("<!doctype html><p>no explorer here</p>")
    with serve(tmp_path) as url, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            late = first_explorer_ms(browser, f"{url}/late.html")
            plain = first_explorer_ms(browser, f"{url}/plain.html")
        finally:
            browser.close()
    assert late >= 400
    assert plain is None
