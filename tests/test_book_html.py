"""The built HTML book, opened as a reader would: headless Chromium, no kernel, no network.

Needs ``_build/html`` (``make book``; ``make test`` builds it first) and Debian's
``chromium``. For every page of the book it proves that maths is typeset, that
every control of every kernel-free explorer changes the figure it shows, that no
request leaves 127.0.0.1, and that the console stays free of errors.
"""
import functools
import http.server
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

pytestmark = pytest.mark.browser

BUILD = Path(__file__).resolve().parents[1] / "_build" / "html"
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def book_pages() -> list[str]:
    skip = {"genindex.html", "search.html"}
    return sorted(
        p.relative_to(BUILD).as_posix()
        for p in BUILD.rglob("*.html")
        if not p.relative_to(BUILD).parts[0].startswith("_") and p.name not in skip
    )


def explorer_pages() -> list[str]:
    return [page for page in book_pages() if 'class="book-explorer"' in (BUILD / page).read_text()]


@pytest.fixture(scope="module")
def server():
    if not (BUILD / "index.html").is_file():
        pytest.fail(f"the book is not built ({BUILD} has no index.html): run `make book` first")
    handler = functools.partial(_QuietHandler, directory=str(BUILD))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("Debian's chromium is not installed: `apt-get install chromium` (make test does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


class Visit:
    """A page opened in a fresh context that records requests and console errors."""

    def __init__(self, browser, url):
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.requests, self.errors = [], []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda msg: msg.type == "error" and self.errors.append(msg.text))
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        # Anything bound elsewhere is recorded above, then refused at once (no waiting on a dead network).
        self.page.route(
            "**/*",
            lambda route: route.continue_()
            if urlparse(route.request.url).hostname == "127.0.0.1" else route.abort(),
        )
        self.page.goto(url, wait_until="load")

    def foreign_requests(self):
        return [u for u in self.requests if urlparse(u).scheme in ("http", "https", "ws", "wss")
                and urlparse(u).hostname != "127.0.0.1"]

    def close(self):
        self.context.close()


def test_the_book_has_pages_and_explorers():
    assert "chapters/09_attention.html" in book_pages()
    assert "chapters/09_attention.html" in explorer_pages()


@pytest.mark.parametrize("page", book_pages() if BUILD.is_dir() else ["index.html"])
def test_page_is_offline_and_error_free(server, browser, page):
    visit = Visit(browser, f"{server}/{page}")
    try:
        visit.page.wait_for_timeout(300)
        assert visit.foreign_requests() == [], f"{page} asked another host"
        assert visit.errors == [], f"{page} logged console errors"
    finally:
        visit.close()


def maths_pages() -> list[str]:
    return [page for page in book_pages() if 'class="math' in (BUILD / page).read_text()]


def test_chapters_and_intro_have_maths():
    pages = maths_pages()
    assert "intro.html" in pages and all(p in pages for p in book_pages() if p.startswith("chapters/"))


@pytest.mark.parametrize("page", maths_pages() if BUILD.is_dir() else [])
def test_maths_is_typeset(server, browser, page):
    visit = Visit(browser, f"{server}/{page}")
    try:
        visit.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        visit.page.evaluate("() => MathJax.startup.promise")
        math = visit.page.locator(".math")
        assert math.count() > 0, f"{page} has no maths"
        assert visit.page.locator("mjx-container").count() >= math.count()
        untypeset = visit.page.evaluate(
            "() => [...document.querySelectorAll('.math')].filter(e => !e.querySelector('mjx-container')).length"
        )
        assert untypeset == 0
        assert visit.page.locator("mjx-merror").count() == 0, "MathJax reported a TeX error"
    finally:
        visit.close()


@pytest.mark.parametrize("page", explorer_pages() if BUILD.is_dir() else [])
def test_every_control_changes_the_figure(server, browser, page):
    visit = Visit(browser, f"{server}/{page}")
    try:
        players = visit.page.locator("div.book-explorer")
        assert players.count() > 0
        for p in range(players.count()):
            player = players.nth(p)
            image = player.locator("img.book-explorer-frame")
            controls = player.locator(".book-explorer-control")
            assert controls.count() > 0
            for c in range(controls.count()):
                control = controls.nth(c)
                start = control.input_value()
                seen = set()
                if control.evaluate("e => e.tagName") == "SELECT":
                    for value in control.locator("option").evaluate_all("os => os.map(o => o.value)"):
                        control.select_option(value)
                        seen.add(image.get_attribute("src"))
                    control.select_option(start)
                else:
                    # Drive the slider with the keyboard, as a reader would.
                    control.focus()
                    control.press("Home")
                    seen.add(image.get_attribute("src"))
                    for _ in range(int(control.get_attribute("max"))):
                        control.press("ArrowRight")
                        seen.add(image.get_attribute("src"))
                    assert control.input_value() == control.get_attribute("max")
                    control.press("Home")
                    for _ in range(int(start)):
                        control.press("ArrowRight")
                assert len(seen) > 1, f"player {p} control {c} of {page} never changed the figure"
        assert visit.errors == []
        assert visit.foreign_requests() == []
    finally:
        visit.close()
