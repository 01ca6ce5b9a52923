"""Screenshots of the built book as a reader sees it: a phone's and a desktop's width.

Run after a build (``make book``), from the repository root::

    .venv/bin/python -m benchmarks.screenshots                 # ch 2, 9 and 11
    .venv/bin/python -m benchmarks.screenshots --pages chapters/03_rnn.html

Each page is opened at 390 px (a phone, 2x pixels) and 1366 px wide, scrolled so that its first
explorer figure sits at the top, and saved as a palette PNG in ``benchmarks/screenshots/``
(``<page>-<width>.png``): the pictures a review of the layout looks at, made the same way every
time. The browser and server are those of the browser tests.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import Optional

from PIL import Image

from benchmarks.site_weight import BUILD, launch_chromium, serve

__all__ = ["DEFAULT_PAGES", "WIDTHS", "OUTPUT", "screenshot", "main"]

DEFAULT_PAGES = ("chapters/02_optimisers.html", "chapters/09_attention.html", "chapters/11_transformer.html")
WIDTHS = {390: (844, 2), 1366: (900, 1)}  # width: (height, device pixels per CSS pixel)
OUTPUT = Path(__file__).resolve().parent / "screenshots"


def screenshot(browser, url: str, width: int) -> bytes:
    """A palette PNG of ``url`` at ``width`` CSS px, scrolled to its first explorer (or its top)."""
    height, scale = WIDTHS[width]
    context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=scale)
    try:
        page = context.new_page()
        page.goto(url, wait_until="load")
        page.evaluate("() => window.MathJax && MathJax.startup.promise")
        page.evaluate("() => { const f = document.querySelector('figure.book-explorer-figure');"
                      " if (f) f.scrollIntoView({block: 'start'}); }")
        page.wait_for_timeout(300)  # the frame and the sticky header settle
        image = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
        buffer = io.BytesIO()
        image.quantize(128).save(buffer, format="png", optimize=True)
        return buffer.getvalue()
    finally:
        context.close()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.screenshots", description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=Path, default=BUILD, help="the built HTML book (default: _build/html)")
    parser.add_argument("--pages", nargs="+", default=list(DEFAULT_PAGES), help="pages, relative to the build")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="folder for the PNG files")
    args = parser.parse_args(argv)
    missing = [page for page in args.pages if not (args.build / page).is_file()]
    if missing:
        raise SystemExit(f"not in the build {args.build}: {', '.join(missing)} (run `make book` first)")
    from playwright.sync_api import sync_playwright

    args.output.mkdir(parents=True, exist_ok=True)
    with serve(args.build) as url, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for page in args.pages:
                for width in WIDTHS:
                    target = args.output / f"{Path(page).stem}-{width}.png"
                    target.write_bytes(screenshot(browser, f"{url}/{page}", width))
                    print(f"{target} ({target.stat().st_size / 1e3:.0f} kB)")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
