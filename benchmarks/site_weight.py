"""How heavy the built book is: its size on disk and what one page costs a reader to load.

Run after a build (``make book``), from the repository root::

    .venv/bin/python -m benchmarks.site_weight            # reads _build/html
    .venv/bin/python -m benchmarks.site_weight --build other/_build/html

It writes ``benchmarks/site_weight.json``, which the Benchmarks page renders
(:func:`benchmarks.report.site_weight_tables`). Sizes are bytes on disk. A page's
*first load* (:func:`first_load`, the goal of issue 31: at most 1.5 MB) is what a fresh visit
fetches in a 1366×900 window that is not scrolled, until the page has loaded and the network has been
quiet for 0.5 s (lazily loaded images in view and the fonts of the maths in view included), the bodies
served uncompressed from 127.0.0.1 to headless Chromium with an empty cache (also given as a
host that compresses them would send them), with where those bytes go. A page's *transfer*
(:func:`page_transfer`) is every response of a visit that then scrolls to the end of the page,
until nothing more arrives; the times are those of that unthrottled load on this machine.
Three more fresh visits time how soon the page's first explorer answers a reader (their median):
from the start of navigation until a control moved (as soon as it exists) has shown its new frame. The same
server and browser set-up drive the browser tests (``tests/book/test_book_html.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import gzip
import http.server
import json
import shutil
import threading
from pathlib import Path
from typing import Iterator, Optional

from benchmarks.book import ROOT

__all__ = ["BUILD", "DEFAULT_OUTPUT", "GOALS", "CHROMIUM_FLAGS", "FIRST_LOAD_VIEWPORT", "serve", "launch_chromium",
           "site_size", "first_load", "resource_kind", "page_transfer", "first_explorer_ms", "measure", "main"]

BUILD = ROOT / "_build" / "html"
DEFAULT_OUTPUT = ROOT / "benchmarks" / "site_weight.json"
# issue 18: site <= 25 MB, every chapter page <= 3 MB, its first explorer interactive within 1 s;
# issue 31: every chapter's first load <= 1.5 MB uncompressed
GOALS = {"site_mb": 25.0, "chapter_page_mb": 3.0, "first_explorer_s": 1.0, "first_load_mb": 1.5}
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
MB = 1e6


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 (a free port) for the duration; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def launch_chromium(playwright):
    """Debian's headless Chromium through playwright (playwright never downloads a browser here)."""
    executable = shutil.which("chromium")
    if executable is None:
        raise RuntimeError("Debian's chromium is not installed: `apt-get install chromium` (make test does it)")
    return playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)


def site_size(build: Path) -> dict:
    """Bytes on disk of the whole site and of its largest parts."""
    files = [p for p in build.rglob("*") if p.is_file()]

    def total(prefix: str) -> int:
        return sum(p.stat().st_size for p in files if p.relative_to(build).as_posix().startswith(prefix))

    return {
        "site": total(""),
        "mathjax": total("_static/mathjax/"),
        "other _static": total("_static/") - total("_static/mathjax/"),
        "_images": total("_images/"),
        "_sources": total("_sources/"),
        "pages (HTML)": sum(p.stat().st_size for p in files if p.suffix == ".html"),
    }


FIRST_LOAD_VIEWPORT = {"width": 1366, "height": 900}

# Every resource the page fetched (the document itself included): the page's Resource Timing entries, with
# their body sizes as the server sent them (uncompressed here).
_FIRST_LOAD_JS = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const entries = [{url: nav.name, bytes: nav.decodedBodySize, kind: 'document'}];
  for (const r of performance.getEntriesByType('resource')) {
    entries.push({url: r.name, bytes: r.decodedBodySize, kind: r.initiatorType});
  }
  return {entries, load: nav.loadEventStart};
}"""
QUIET_MS = 500  # the network counts as settled after this long without a new request


def resource_kind(path: str) -> str:
    """Which part of the book a served path belongs to (the first-load breakdown's rows)."""
    if path.startswith("/_static/mathjax/"):
        return "MathJax"
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if suffix in ("html", ""):
        return "page (HTML)"
    if path.endswith("searchindex.js"):
        return "search index"
    return {"css": "style sheets", "js": "scripts", "woff": "fonts", "woff2": "fonts", "ttf": "fonts",
            "png": "images", "svg": "images", "webp": "images", "jpg": "images", "gif": "images"}.get(suffix, "other")


def _gzip_size(data: bytes) -> int:
    return len(gzip.compress(data, 6, mtime=0))


def first_load(browser, url: str, build: Optional[Path] = None) -> dict:
    """What a fresh visit to ``url`` fetches to show its first screen: unscrolled, at 1366×900.

    This is the book's definition of a page's *first load*: an empty cache, a 1366×900 window that is
    never scrolled, and every request (the HTML page, styles, scripts, fonts, images) made until the
    page's ``load`` event has fired and then no request has started for 0.5 s. That is more than what
    starts before ``load``: Chromium fetches a lazily loaded image in view, and MathJax the fonts of
    the equations in view, only after ``load``, and a reader needs both. What waits for the reader
    (images further down, which Chromium fetches as they come within about 1250 px of the window, the
    search index when the reader searches, explorer frames when a control moves) is not counted. ``bytes`` is
    the bodies' total as served (uncompressed), ``gzip_bytes`` the same bodies compressed as a static
    host would send them (gzip level 6; a file that does not shrink is sent as it is), ``resources``
    each response's path and sizes, largest first. ``build`` is the folder served at ``url``'s root;
    the bodies are read from it (``None``: fetched again from the server).
    """
    from urllib.parse import urlsplit
    from urllib.request import urlopen

    context = browser.new_context(viewport=FIRST_LOAD_VIEWPORT)
    page = context.new_page()
    started = []
    page.on("request", lambda request: started.append(request.url))
    try:
        page.goto(url, wait_until="load")
        seen = -1
        for _ in range(20_000 // QUIET_MS):  # until no request starts for QUIET_MS (at most 20 s)
            if len(started) == seen:
                break
            seen = len(started)
            page.wait_for_timeout(QUIET_MS)
        else:
            raise RuntimeError(f"{url} kept requesting for 20 s; its first load has no end")
        measured = page.evaluate(_FIRST_LOAD_JS)
    finally:
        context.close()
    root = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    resources = []
    for entry in measured["entries"]:
        if entry["url"].startswith("data:"):
            continue  # inside the page's own bytes
        path = urlsplit(entry["url"]).path
        file = None if build is None else Path(build) / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
        if file is not None and entry["url"].startswith(root) and file.is_file():
            body = file.read_bytes()
        else:
            try:
                with urlopen(entry["url"]) as response:  # noqa: S310 (127.0.0.1 only)
                    body = response.read()
            except OSError:  # a 404: its error page counts as sent
                body = b"x" * entry["bytes"]
        if len(body) != entry["bytes"]:
            raise RuntimeError(f"{path}: the browser received {entry['bytes']} bytes, the file has {len(body)}")
        resources.append({"path": path, "kind": entry["kind"], "bytes": len(body),
                          "gzip_bytes": min(len(body), _gzip_size(body))})
    resources.sort(key=lambda r: (-r["bytes"], r["path"]))
    by_kind: dict = {}
    for r in resources:
        part = by_kind.setdefault(resource_kind(r["path"]), {"bytes": 0, "gzip_bytes": 0})
        part["bytes"] += r["bytes"]
        part["gzip_bytes"] += r["gzip_bytes"]
    return {"bytes": sum(r["bytes"] for r in resources), "gzip_bytes": sum(r["gzip_bytes"] for r in resources),
            "requests": len(resources), "load_ms": measured["load"], "by_kind": by_kind, "resources": resources}


def page_transfer(browser, url: str) -> dict:
    """Bytes and requests a fresh visit to ``url`` costs, and when it was loaded and typeset.

    Times are milliseconds from the start of navigation; ``bytes`` counts every response (headers
    and body) until the reader has scrolled to the end of the page, ``gzip_bytes`` the same bodies
    as a server that compresses them (gzip level 6, as most static hosts) would send them.
    """
    context = browser.new_context()
    page = context.new_page()
    responses = []
    page.on("requestfinished", lambda request: responses.append(request))
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)")
        page.evaluate("() => window.MathJax && MathJax.startup.promise")
        typeset_ms = page.evaluate("() => performance.now()")
        timing = page.evaluate(
            "() => { const n = performance.getEntriesByType('navigation')[0];"
            " return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd}; }"
        )
        # Scroll through the page as a reader would, so lazily loaded images count too.
        page.evaluate("async () => { for (let y = 0; y < document.body.scrollHeight; y += innerHeight) {"
                      " scrollTo(0, y); await new Promise(r => setTimeout(r, 50)); } }")
        seen = -1
        for _ in range(20):  # until no request finishes for 0.5 s (at most 10 s)
            if len(responses) == seen:
                break
            seen = len(responses)
            page.wait_for_timeout(500)
        transferred = sum(request.sizes()["responseBodySize"] + request.sizes()["responseHeadersSize"]
                          for request in responses)
        bodies = [request.response().body() for request in responses if request.response()]
        return {"bytes": transferred, "gzip_bytes": sum(min(len(b), len(gzip.compress(b, 6))) for b in bodies),
                "requests": len(responses), "dom_content_loaded_ms": timing["dom"], "load_ms": timing["load"],
                "typeset_ms": typeset_ms}
    finally:
        context.close()


# Polls from the moment the page exists: once the first player's script has run, a moved control
# swaps the frame's src at once; then the new frame must arrive and decode. A move that lands on
# the same picture (frames are stored once) is followed by another.
_FIRST_EXPLORER_JS = """async () => {
  for (;;) {
    const root = document.querySelector('.book-explorer');
    const control = root && [...root.querySelectorAll('.book-explorer-control')].find(c => !c.disabled);
    const frame = root && root.querySelector('.book-explorer-frame');
    if (!root && document.readyState !== 'loading') return null;  // parsed, and no explorer
    if (control && frame) {
      // A reader moves the slider of an explorer on screen; out of view, its lazy frame is never fetched
      // and decode() would wait for ever.
      root.scrollIntoView({block: 'center'});
      const before = frame.src;
      if (control.tagName === 'SELECT') {
        control.selectedIndex = (control.selectedIndex + 1) % control.options.length;
      } else {
        control.value = +control.value < +control.max ? +control.value + 1 : 0;
      }
      control.dispatchEvent(new Event('input'));
      if (frame.src !== before) { await frame.decode(); return performance.now(); }
    }
    await new Promise(resolve => setTimeout(resolve, 5));
  }
}"""


def first_explorer_ms(browser, url: str) -> Optional[float]:
    """Milliseconds from the start of a fresh visit to ``url`` until its first explorer has answered a
    moved control with a new frame on screen; ``None`` for a page without an explorer."""
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(url, wait_until="commit")
        return page.evaluate(_FIRST_EXPLORER_JS)
    finally:
        context.close()


def measure(build: Path = BUILD) -> dict:
    """Site size and the transfer of every chapter page of the book built in ``build``."""
    from playwright.sync_api import sync_playwright

    build = Path(build)
    if not (build / "index.html").is_file():
        raise ValueError(f"build must be a built book (a folder with index.html); {build} has none")
    pages = sorted(p.relative_to(build).as_posix() for p in (build / "chapters").glob("*.html"))
    with serve(build) as url, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            transfers = {page: page_transfer(browser, f"{url}/{page}") for page in pages}
            for page in pages:
                transfers[page]["first_load"] = first_load(browser, f"{url}/{page}", build)
            for page in pages:  # the median of three visits: one visit's time varies by a factor of 2
                times = [first_explorer_ms(browser, f"{url}/{page}") for _ in range(3)]
                transfers[page]["first_explorer_ms"] = None if None in times else sorted(times)[1]
        finally:
            browser.close()
    return {"date": datetime.date.today().isoformat(), "goals": GOALS, "sizes": site_size(build),
            "pages": transfers}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.site_weight", description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=Path, default=BUILD, help="the built HTML book (default: _build/html)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the JSON file to write")
    args = parser.parse_args(argv)
    weight = measure(args.build)
    args.output.write_text(json.dumps(weight, indent=1) + "\n", encoding="utf-8")
    heaviest = max(weight["pages"].items(), key=lambda item: item[1]["first_load"]["bytes"])
    print(f"site {weight['sizes']['site'] / MB:.1f} MB; heaviest first load {heaviest[0]} "
          f"{heaviest[1]['first_load']['bytes'] / MB:.2f} MB ({heaviest[1]['first_load']['gzip_bytes'] / MB:.2f} MB "
          f"gzip); written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
