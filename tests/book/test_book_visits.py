"""The shared visits of the browser tests (``book_visits.py``) keep a failed visit as they keep a good one: a page
that fails is visited once, and every test that reads it is told why. Checked with a browser that counts the
contexts asked of it and fails each, so neither Chromium nor the built book is needed."""
import pytest

import book_visits


class CrashingBrowser:
    def __init__(self):
        self.contexts = 0

    def new_context(self, **options):
        self.contexts += 1
        raise RuntimeError("planted crash")


@pytest.mark.parametrize("kind, asks", [
    (book_visits.ReaderVisits, [("intro.html",), ("intro.html",)]),
    (book_visits.ZhVisits, [("zh_CN/intro.html",), ("zh_CN/intro.html",)]),
    # one frame visit measures every width of its pixel ratio: asking for another is no second visit
    (book_visits.FrameVisits, [("chapters/09_attention.html", 390, 2), ("chapters/09_attention.html", 1366, 2),
                               ("chapters/09_attention.html", 390, 2)]),
])
def test_a_failed_visit_is_kept_and_reported_to_every_test_that_reads_it(monkeypatch, kind, asks):
    monkeypatch.setattr(book_visits, "purge_probe", lambda: [])  # the purged selectors need a build
    browser = CrashingBrowser()
    visits = kind(browser, "http://127.0.0.1:1")
    for ask in asks:
        with pytest.raises(RuntimeError, match="the shared visit to .* failed: planted crash"):
            visits.of(*ask)
    assert browser.contexts == 1
