"""The PDF edition: the whole book as one PDF, printed by Debian's Chromium from the built HTML.

Run after ``make book`` (``make pdf`` does both)::

    .venv/bin/python tools/pdf.py                                   # _build/html -> _build/pdf/book.pdf
    .venv/bin/python tools/pdf.py --pages chapters/09_attention --out ch09.pdf

Every page of ``_toc.yml``, in its order, is served from 127.0.0.1 and opened in headless
Chromium, which prints it with the book's print stylesheet (``_static/print.css``) after
``bookPrintReady()`` (``_static/print.js``) has typeset every formula (MathJax typesets lazily on
screen) and the fonts and pictures have loaded. Each explorer prints as its default frame with
the line "Interactive in the HTML edition:" and a link to it in the HTML edition (``--html-url``;
by default the build's own folder). pypdf then joins the pages behind a printed contents page,
numbers them, writes the outline (part, chapter, section) and turns every link from one place
of the book to another (a numref such as "Fig. 9.1", an equation, a citation, a chapter) into a
jump inside the PDF; a link to a file the PDF does not hold goes to the HTML edition.

Nothing leaves the machine: the page's requests to any host but 127.0.0.1 are refused.
"""

from __future__ import annotations

import argparse
import html
import io
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.site_weight import launch_chromium, serve  # noqa: E402

BUILD = ROOT / "_build" / "html"
OUTPUT = ROOT / "_build" / "pdf" / "book.pdf"
PAGE_NUMBER_PT = 9  # the size of the page numbers at the foot of each page

# In the page, before printing: a same-document link to each place another page (or the outline)
# points at, so that Chromium writes a named destination there (it writes one for the target
# of every same-document link), and the headings the outline lists.
_PREPARE_JS = """([targets, htmlUrl]) => {
  document.documentElement.classList.add('book-pdf');
  const text = node => node.textContent.replace(/#$/, '').replace(/\\s+/g, ' ').trim();
  const h1 = document.querySelector('article h1, .bd-article h1');
  // A section's destination is its heading (the section's box may start at the foot of the page before).
  const sections = [...document.querySelectorAll('.bd-article section[id] > h2')].map(h => {
    if (!h.id) h.id = 'book-pdf-heading-' + h.parentElement.id;
    return {id: h.parentElement.id, anchor: h.id, title: text(h)};
  });
  const box = document.createElement('div');
  box.setAttribute('aria-hidden', 'true');
  box.style.cssText = 'position:absolute;left:0;top:0;width:1px;height:1px;overflow:hidden;opacity:0';
  // Each display equation is a destination too (tests/book/test_pdf.py finds it on its page).
  const maths = [...document.querySelectorAll('div.math')].map((div, n) => {
    if (!div.id) div.id = 'book-pdf-math-' + n;
    return {id: div.id, height: div.getBoundingClientRect().height};
  });
  for (const id of new Set([...targets, ...sections.map(s => s.anchor), ...maths.map(m => m.id)])) {
    if (!document.getElementById(id)) continue;
    const a = document.createElement('a');
    a.href = '#' + id;
    box.appendChild(a);
  }
  document.body.appendChild(box);
  for (const a of document.querySelectorAll('.book-explorer-print-line a')) {
    const url = new URL(a.getAttribute('href'), location.href);
    const path = url.pathname.replace(/^\\//, '');
    a.href = a.textContent = htmlUrl + path + url.hash;
  }
  return {
    title: h1 ? text(h1) : document.title,
    sections,
    glyphs: document.querySelectorAll('mjx-container mjx-c').length,
    maths,
    formulas: document.querySelectorAll('.math').length,
  };
}"""


@dataclass
class Entry:
    """One page of the book as the PDF holds it."""

    docname: str  # "chapters/09_attention"
    part: str | None  # the part's caption in _toc.yml, None for the root page
    title: str = ""
    sections: list[dict] = field(default_factory=list)
    pdf: bytes = b""
    glyphs: int = 0  # MathJax glyphs typeset on the page when it was printed
    formulas: int = 0  # formulas on the page, inline and displayed
    maths: list[dict] = field(default_factory=list)  # its display equations: id, height in CSS px
    first: int = 0  # index of its first page in the book's PDF
    dests: dict[str, tuple[int, float, float]] = field(default_factory=dict)  # id -> (page, left, top)
    unresolved: list[str] = field(default_factory=list)  # its links to a place the PDF has no destination for

    @property
    def path(self) -> str:
        return self.docname + ".html"


def toc_entries(root: Path = ROOT) -> list[Entry]:
    """The pages of ``_toc.yml`` in reading order, each with the caption of its part."""
    import yaml  # PyYAML, installed with Jupyter Book

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    entries = [Entry(toc["root"], None)]

    def walk(items, part):
        for item in items or []:
            if "file" in item:
                entries.append(Entry(item["file"], part))
            walk(item.get("sections"), part)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), part.get("caption"))
    return entries


def link_targets(build: Path, paths: list[str]) -> dict[str, set[str]]:
    """For each page of ``paths``, the ids that links from any page of the build point at."""
    targets: dict[str, set[str]] = {path: set() for path in paths}
    pages = [p.relative_to(build).as_posix() for p in build.rglob("*.html") if "_static" not in p.parts]
    for page in pages:
        for href in re.findall(r'href="([^"#]*#[^"]+)"', (build / page).read_text(encoding="utf-8")):
            target, fragment = urldefrag(urljoin(page, html.unescape(href)))
            if target in targets and fragment:
                targets[target].add(unquote(fragment))
    return targets


def _print_pdf(page, ranges: str = "") -> bytes:
    return page.pdf(prefer_css_page_size=True, print_background=True, page_ranges=ranges)


def print_entries(
    browser, server: str, build: Path, entries: list[Entry], html_url: str, ready: bool = True, ranges: str = ""
) -> None:
    """Print each entry's page into ``entry.pdf``.

    ``ready=False`` prints a page as it stands, without waiting for the maths; ``ranges`` ("1-8")
    prints only those pages of each (both for tests).
    """
    targets = link_targets(build, [entry.path for entry in entries])
    context = browser.new_context(viewport={"width": 1366, "height": 900}, color_scheme="light")
    try:
        page = context.new_page()
        page.route(
            "**/*",
            lambda route: route.continue_() if urlparse(route.request.url).hostname == "127.0.0.1" else route.abort(),
        )
        for entry in entries:
            page.goto(f"{server}/{entry.path}", wait_until="load")
            if ready:
                page.wait_for_function("() => typeof window.bookPrintReady === 'function'")
                # a page that never gets ready fails the print instead of hanging it
                page.evaluate("() => Promise.race([window.bookPrintReady(), new Promise((_, fail) => "
                              "setTimeout(() => fail(new Error('not ready to print after 120 s')), 120000))])")
            info = page.evaluate(_PREPARE_JS, [sorted(targets[entry.path]), html_url])
            entry.title, entry.sections = info["title"], info["sections"]
            entry.glyphs, entry.formulas, entry.maths = info["glyphs"], info["formulas"], info["maths"]
            entry.pdf = _print_pdf(page, ranges)
    finally:
        context.close()


def _contents_html(title: str, entries: list[Entry], server: str) -> str:
    """The printed contents page: parts, chapters and their sections with their page numbers."""
    rows, part = [], object()
    for entry in entries:
        if entry.part != part and entry.part:
            rows.append(f'<li class="part">{html.escape(entry.part)}</li>')
        part = entry.part
        rows.append(
            f'<li class="chapter"><a href="{server}/{entry.path}"><span>{html.escape(entry.title)}</span><i></i>'
            f"<b>{entry.first + 1}</b></a></li>"
        )
        for section in entry.sections:
            where = entry.dests.get(section["id"])
            number = where[0] + 1 if where else entry.first + 1
            rows.append(
                f'<li class="section"><a href="{server}/{entry.path}#{html.escape(section["id"])}">'
                f'<span>{html.escape(section["title"])}</span><i></i><b>{number}</b></a></li>'
            )
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
@page {{ size: A4; margin: 18mm 20mm; }}
body {{ font: 10.5pt/1.35 "DejaVu Sans", sans-serif; color: #000; }}
h1 {{ font-size: 22pt; margin: 0 0 4pt; }} h2 {{ font-size: 14pt; margin: 18pt 0 8pt; }}
ul {{ list-style: none; padding: 0; margin: 0; }}
li a {{ display: flex; gap: 6pt; color: inherit; text-decoration: none; }}
li a span {{ max-width: 85%; }}
li a i {{ flex: 1; border-bottom: 1pt dotted #999; margin-bottom: 3.5pt; min-width: 12pt; }}
li.part {{ font-weight: bold; margin: 10pt 0 3pt; break-after: avoid; }}
li.chapter {{ font-weight: bold; margin-top: 4pt; }} li.section {{ margin-left: 16pt; font-size: 9.5pt; }}
</style></head><body><h1>{html.escape(title)}</h1><h2>Contents</h2><ul>{"".join(rows)}</ul></body></html>"""


def _page_numbers_pdf(page, count: int) -> bytes:
    """``count`` A4 pages, each with its number (1, 2, ...) at the foot, to lay over the book's pages."""
    pages = "".join(f'<div class="p"><span>{n}</span></div>' for n in range(1, count + 1))
    page.set_content(f"""<!doctype html><html><head><meta charset="utf-8"><style>
@page {{ size: A4; margin: 0; }} body {{ margin: 0; }}
.p {{ position: relative; width: 210mm; height: 297mm; break-after: page; }}
.p span {{ position: absolute; bottom: 8mm; left: 0; right: 0; text-align: center;
           font: {PAGE_NUMBER_PT}pt "DejaVu Sans", sans-serif; color: #444; }}
</style></head><body>{pages}</body></html>""")
    return _print_pdf(page)


def _dest_name(name) -> str:
    """An element's id from the name of its destination (Chromium names it ``/id``, URL-quoted)."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    name = str(name)
    return unquote(name[1:] if name.startswith("/") else name)


def top_margin_pt(build: Path = BUILD) -> float:
    """The top margin of a printed page in points: the first length of print.css's ``@page`` margin."""
    css = (Path(build) / "_static" / "print.css").read_text(encoding="utf-8")
    match = re.search(r"@page\s*{[^}]*?margin:\s*([\d.]+)(mm|pt|in|cm)", css)
    if match is None:
        raise ValueError(f"{build}/_static/print.css sets no @page margin")
    return float(match.group(1)) * {"mm": 72 / 25.4, "cm": 72 / 2.54, "in": 72.0, "pt": 1.0}[match.group(2)]


def _destinations(reader, offset: int, margin: float = 0.0) -> dict[str, tuple[int, float, float]]:
    """The named destinations of one printed page: id -> (page in the book, left, top).

    Chromium measures a destination's height from the edge of the paper as if the page had no top
    margin: ``margin`` (:func:`top_margin_pt`) puts it back where the element's box starts.
    """
    dests = {}
    for name, dest in reader.named_destinations.items():
        number = reader.get_destination_page_number(dest)
        left = float(dest.left) if dest.left is not None else 0.0
        top = float(dest.top) if dest.top is not None else float(reader.pages[number].mediabox.top)
        dests[_dest_name(name)] = (offset + number, left, top - margin)
    return dests


def _section_dests(entry: Entry) -> None:
    """A section's id leads to its heading (the section's own box can start on the page before)."""
    for section in entry.sections:
        if section["anchor"] in entry.dests:
            entry.dests[section["id"]] = entry.dests[section["anchor"]]


def join(
    entries: list[Entry], contents: bytes, numbers: bytes | None, server: str, html_url: str, title: str, margin: float
):
    """One PDF: the contents pages, then every entry's pages; outline, page numbers, internal links."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, FloatObject, NameObject, NullObject, TextStringObject
    from pypdf.generic import DictionaryObject

    writer = PdfWriter()
    contents_reader = PdfReader(io.BytesIO(contents))
    offset = len(contents_reader.pages)
    readers = []
    for entry in entries:
        reader = PdfReader(io.BytesIO(entry.pdf))
        entry.first = offset
        entry.dests = _destinations(reader, offset, margin)
        _section_dests(entry)
        readers.append(reader)
        offset += len(reader.pages)
    by_path = {entry.path: entry for entry in entries}
    root = server.rstrip("/") + "/"

    def resolve(entry: Entry, fragment: str, source: Entry | None):
        where = entry.dests.get(fragment)
        if where is None and fragment and source is not None:
            source.unresolved.append(f"{entry.path}#{fragment}")
        if where is None:
            page = readers[entries.index(entry)].pages[0]
            where = (entry.first, 0.0, float(page.mediabox.top))
        return where

    # Each link: where it goes inside the book (page, left, top), or the address it keeps.
    plans = []  # (book page, annotation index, (page, left, top) or uri)
    sources = [(contents_reader, None, 0)] + [(reader, entry, entry.first) for reader, entry in zip(readers, entries)]
    for reader, entry, first in sources:
        for number, page in enumerate(reader.pages):
            for index, ref in enumerate(page.get("/Annots") or []):
                annot = ref.get_object()
                if annot.get("/Subtype") != "/Link":
                    continue
                action = annot.get("/A")
                action = action.get_object() if action is not None else None
                target = None
                if "/Dest" in annot or (action is not None and action.get("/S") == "/GoTo"):
                    name = annot["/Dest"] if "/Dest" in annot else action["/D"]
                    if entry is not None and isinstance(name, (str, bytes)):
                        target = resolve(entry, _dest_name(name), entry)
                elif action is not None and action.get("/S") == "/URI":
                    uri = str(action["/URI"])
                    if uri.startswith(root):
                        path, fragment = urldefrag(uri[len(root) :])
                        path = path.split("?")[0]
                        if path in by_path:
                            target = resolve(by_path[path], unquote(fragment), entry)
                        else:
                            target = html_url + uri[len(root) :]
                if target is not None:
                    plans.append((first + number, index, target))
                for key in ("/Dest", "/A"):
                    if key in annot and target is not None:
                        del annot[NameObject(key)]

    for reader, _, _ in sources:
        for page in reader.pages:
            writer.add_page(page)

    if numbers is not None:
        overlay = PdfReader(io.BytesIO(numbers))
        for n in range(len(contents_reader.pages), len(writer.pages)):
            writer.pages[n].merge_page(overlay.pages[n - len(contents_reader.pages)])

    for number, index, target in plans:
        annot = writer.pages[number]["/Annots"][index].get_object()
        if isinstance(target, str):
            annot[NameObject("/A")] = DictionaryObject(
                {NameObject("/S"): NameObject("/URI"), NameObject("/URI"): TextStringObject(target)}
            )
        else:
            page, left, top = target
            annot[NameObject("/Dest")] = ArrayObject(
                [
                    writer.pages[page].indirect_reference,
                    NameObject("/XYZ"),
                    FloatObject(left),
                    FloatObject(top),
                    NullObject(),
                ]
            )

    from pypdf.generic import Fit

    def fit(where):
        return Fit.xyz(left=where[1], top=where[2])

    writer.add_outline_item("Contents", 0)
    parts = {}
    for entry in entries:
        parent = None
        if entry.part:
            if entry.part not in parts:
                parts[entry.part] = writer.add_outline_item(entry.part, entry.first)
            parent = parts[entry.part]
        item = writer.add_outline_item(entry.title, entry.first, parent=parent)
        for section in entry.sections:
            where = entry.dests.get(section["id"])
            if where is not None:
                writer.add_outline_item(section["title"], where[0], parent=item, fit=fit(where))
    # The viewer's page numbers are the printed ones: the contents i, ii, ..., the book 1, 2, ...
    writer.set_page_label(0, len(contents_reader.pages) - 1, style="/r")
    writer.set_page_label(len(contents_reader.pages), len(writer.pages) - 1, style="/D", start=1)
    writer.page_mode = "/UseOutlines"
    writer.add_metadata({"/Title": title, "/Creator": "tools/pdf.py (Chromium, pypdf)"})
    return writer


def build_pdf(
    build: Path = BUILD,
    out: Path = OUTPUT,
    pages: list[str] | None = None,
    html_url: str | None = None,
    ready: bool = True,
    browser=None,
) -> list[Entry]:
    """Print the book (or the pages named by their docnames) into ``out``; returns what was printed."""
    import yaml

    build = Path(build)
    if not (build / "index.html").is_file():
        raise FileNotFoundError(f"the book is not built ({build} has no index.html): run `make book` first")
    entries = toc_entries()
    if pages:
        unknown = sorted(set(pages) - {entry.docname for entry in entries})
        if unknown:
            raise ValueError(f"pages must be docnames of _toc.yml (such as 'chapters/09_attention'); found {unknown}")
        entries = [entry for entry in entries if entry.docname in pages]
    html_url = html_url or build.resolve().as_uri() + "/"
    if not html_url.endswith("/"):
        raise ValueError(f"html_url must end with '/'; found {html_url!r}")
    title = yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
    with serve(build) as server:
        if browser is None:
            from playwright.sync_api import sync_playwright

            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                try:
                    writer = _print_book(browser, server, build, entries, html_url, ready, title)
                finally:
                    browser.close()
        else:
            writer = _print_book(browser, server, build, entries, html_url, ready, title)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as handle:
        writer.write(handle)
    return entries


def _print_book(browser, server, build, entries, html_url, ready, title):
    margin = top_margin_pt(build)
    print_entries(browser, server, build, entries, html_url, ready=ready)
    from pypdf import PdfReader

    # Page numbers are known once every page is printed: then the contents and the numbers.
    first = 0
    for entry in entries:
        entry.first = first
        reader = PdfReader(io.BytesIO(entry.pdf))
        entry.dests = _destinations(reader, first, margin)
        _section_dests(entry)
        first += len(reader.pages)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content(_contents_html(title, entries, server))
        contents = _print_pdf(page)
        numbers = _page_numbers_pdf(page, first)
    finally:
        context.close()
    return join(entries, contents, numbers, server, html_url, title, margin)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=BUILD, help="the built HTML book (default _build/html)")
    parser.add_argument("--out", type=Path, default=OUTPUT, help="the PDF to write (default _build/pdf/book.pdf)")
    parser.add_argument("--pages", nargs="+", help="print only these pages (docnames of _toc.yml)")
    parser.add_argument("--html-url", help="where the HTML edition is read (explorers link there; default: --build)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    entries = build_pdf(args.build, args.out, args.pages, args.html_url)
    from pypdf import PdfReader

    count = len(PdfReader(args.out).pages)
    print(f"{args.out}: {count} pages from {len(entries)} pages of the book in {time.perf_counter() - start:.0f} s")
    for entry in entries:
        if entry.unresolved:
            print(
                f"{entry.path}: {len(entry.unresolved)} links go to the top of a page, their place not found:",
                ", ".join(sorted(set(entry.unresolved))[:5]),
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
