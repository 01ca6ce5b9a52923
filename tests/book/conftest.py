"""The browser tests' shared fixtures: one server of the built book, one headless Chromium and the
visits to the book's pages (``book_visits.py``) for the whole session, not one of each per module."""
import pytest

from book_visits import BUILD, FrameVisits, ReaderVisits, ZhVisits


@pytest.fixture(scope="session")
def server():
    from benchmarks.site_weight import serve

    if not (BUILD / "index.html").is_file():
        pytest.fail(f"the book is not built ({BUILD} has no index.html): run `make book` first")
    with serve(BUILD) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    from benchmarks.site_weight import launch_chromium

    with sync_playwright() as playwright:
        try:
            browser = launch_chromium(playwright)
        except RuntimeError as error:
            pytest.fail(str(error))
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def reader_visits(browser, server) -> ReaderVisits:
    """Each content page's shared visit (:class:`book_visits.ReaderVisits`), made when first asked for."""
    return ReaderVisits(browser, server)


@pytest.fixture(scope="session")
def frame_visits(browser, server) -> FrameVisits:
    """The explorers' frames of a page at a width and pixel ratio (:class:`book_visits.FrameVisits`)."""
    return FrameVisits(browser, server)


@pytest.fixture(scope="session")
def zh_visits(browser, server) -> ZhVisits:
    """Each Chinese content page's shared visit (:class:`book_visits.ZhVisits`), made when first asked for."""
    return ZhVisits(browser, server)
