"""Sphinx extension for the book: kernel-free explorers (``lib.widgets``), each a numbered figure.

* Sets ``BOOK_WIDGETS=static`` before any notebook the build executes itself (one missing
  from the execution cache; ``tools/chapter_runs.py`` sets it for the runs it makes), so every explorer
  (``lib.widgets``) pre-renders its frames into an HTML player that works without a
  kernel. Notebooks run by Jupyter or nbval keep the default, live ipywidgets.
* After the build, moves the players' frames out of the pages into
  ``_static/explorer-frames/`` (``lib.widgets.core.externalise_frames``), the default
  frame too (:func:`lazy_default_frames`): the ``<img>`` that shows it names its file
  (``loading="lazy"``), and Chromium fetches it as the explorer comes within about a screen
  of the window, with no script involved. No explorer is on a chapter's first screen, so a
  first visit no longer carries 15-60 KB of inline WebP per chapter; the player fetches the
  other frames when a control moves. A picture not yet fetched has no size, and the
  ``<img>``'s box would be empty until it arrives (the page below it jumping by its height),
  so each ``<img>`` is given its picture's size in pixels as ``contain-intrinsic-size``
  with ``contain: size``: it is laid out as if the picture were there, before and after it
  arrives, exactly as the inline picture was (every frame of an explorer has one size).
* Numbers the explorers like the other figures: a transform wraps each explorer's
  output in a figure (its ``explorer_title`` attribute the visual's title) whose caption and label (``fig-explorer-lstm-gate``, for ``{numref}``)
  are the ``caption`` and :func:`~lib.widgets.core.figure_label` of its visual, found by
  the title its output names (the static player's and a live output's ``text/plain``
  alike). An output that names no visual of ``lib.widgets`` is a warning (the build
  fails); a visual without a caption shows its title, and ``tests/lib/widgets/test_widgets.py`` fails.
* On paper (``_static/print.css``, ``make pdf``) an explorer is its default frame: under it a
  print-only line, "Interactive in the HTML edition:" and a link to the figure on its page
  (relative, so a printed page names wherever it was read; ``tools/pdf.py`` points it at the
  HTML edition the PDF goes with).
"""
import base64
import functools
import hashlib
import io
import os
import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from lib.widgets.core import WIDGETS_ENV, book_visuals, externalise_frames, figure_label

logger = logging.getLogger(__name__)


def _externalise_explorer_frames(app, exception):
    if exception is None and app.builder.format == "html":
        out = Path(app.outdir)
        frames_dir = out / "_static" / "explorer-frames"
        used = set()
        for page in out.rglob("*.html"):
            text = page.read_text(encoding="utf-8")
            if "book-explorer-frame" in text:  # every page, as an incremental build leaves some as they were
                marked = _mark_frame_widths(text)
                if marked != text:
                    text = marked
                    page.write_text(text, encoding="utf-8")
            if "book-explorer-data" in text:
                prefix = Path(os.path.relpath(frames_dir, page.parent)).as_posix() + "/"
                text = lazy_default_frames(externalise_frames(text, frames_dir, prefix), frames_dir, prefix,
                                           page=page.relative_to(out).as_posix())
                page.write_text(text, encoding="utf-8")
                used.update(re.findall(r"explorer-frames/([0-9a-f]{16}\.webp)", text))
        # An incremental build keeps the frames of explorers that have since changed: drop them.
        for frame in frames_dir.glob("*.webp"):
            if frame.name not in used:
                frame.unlink()


_INLINE_FRAME = re.compile(r'(<img class="book-explorer-frame"[^>]*?) src="data:image/webp;base64,([A-Za-z0-9+/=]+)"')


def lazy_default_frames(text: str, frames_dir: Path, url_prefix: str, page: str = "the page") -> str:
    """Every explorer's default frame (inline WebP in its ``<img>``) as a file of ``frames_dir``, named
    as :func:`lib.widgets.core.externalise_frames` names the others (so it is usually there already),
    the ``<img>`` pointing at it (``url_prefix`` + name), loading lazily, and sized as its picture
    (``contain: size`` with the picture's pixels as ``contain-intrinsic-size``) while it loads.
    ``page`` names the page in errors: a frame's ``<img>`` that already has a ``style`` is refused
    (ValueError), as its size could not be set and the lazy frame would be laid out at 0x0.

    The ``loading="lazy"`` is set here although ``page_assets`` makes every image lazy after this
    (``_lighten_build`` runs later): it skips a tag that has one, so the attribute is never doubled, and
    this keeps ``<img class="book-explorer-frame"`` first in the tag (``page_assets`` puts its attribute
    right after ``<img``), which :data:`_FRAME_WIDTH` (on every later incremental build) and the tests match."""
    from PIL import Image

    def move(match: re.Match) -> str:
        frame = base64.b64decode(match.group(2))
        with Image.open(io.BytesIO(frame)) as picture:
            width, height = picture.size
        name = hashlib.sha1(frame).hexdigest()[:16] + ".webp"
        target = frames_dir / name
        if not target.exists():
            frames_dir.mkdir(parents=True, exist_ok=True)
            target.write_bytes(frame)
        return _lazy_sized(match.group(1), width, height, f"{page}: explorer frame {name}") + f' src="{url_prefix}{name}"'

    return _INLINE_FRAME.sub(move, text)


def _lazy_sized(tag_start: str, width: int, height: int, where: str) -> str:
    if re.search(r"\sstyle=", tag_start):
        raise ValueError(f"{where}: its <img> already has a style ({tag_start!r}); expected none, so that it can be "
                         f"sized {width}x{height} px while it loads (without that size a lazy frame is laid out at 0x0)")
    lazy = "" if "loading=" in tag_start else ' loading="lazy"'
    return f'{tag_start}{lazy} style="contain:size;contain-intrinsic-size:{width}px {height}px"'


_EXPLORER_TAG = re.compile(r'<div class="book-explorer"(?! style=)')
_FRAME_WIDTH = re.compile(r'<img class="book-explorer-frame"[^>]*? width="(\d+)"')


def _mark_frame_widths(text: str) -> str:
    """Give every explorer (``div.book-explorer``) its frame's width attribute as ``--w`` (a number
    of CSS px), so that ``_static/book.css`` can cap the explorer, and so its frame and controls, at
    1.3 times it (CSS cannot read an attribute as a length; a cap on the frame alone would leave
    the explorer, whose width its frame sets, as wide as the frame's image)."""
    out, last = [], 0
    for tag in _EXPLORER_TAG.finditer(text):
        frame = _FRAME_WIDTH.search(text, tag.end())
        if frame:
            out += [text[last : tag.end()], f' style="--w: {frame.group(1)}"']
            last = tag.end()
    return "".join(out) + text[last:]


def _is_mime_bundle(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle"


class ExplorerFigures(SphinxTransform):
    """Wrap every explorer output (a myst-nb mime bundle) in a numbered, captioned figure.

    Runs while a page is read, before Sphinx numbers the figures; the output is found
    by its ``text/plain``, :meth:`lib.widgets.core.Explorer.describe`.
    """

    default_priority = 500

    def apply(self, **kwargs):
        for bundle in list(self.document.findall(_is_mime_bundle)):
            plain = [child.astext() for child in bundle.children if child.get("mime_type") == "text/plain"]
            if not plain or not plain[0].startswith("Explorer: ") or isinstance(bundle.parent, nodes.figure):
                continue
            visual = next((v for title, v in _visuals().items() if plain[0].startswith(f"Explorer: {title} — ")),
                          None)
            if visual is None:
                logger.warning("explorer output %r names no visual of lib.widgets by its title",
                               plain[0][:80], location=bundle)
                continue
            caption = visual.caption.strip() or visual.title
            figure = nodes.figure(classes=["book-explorer-figure"])
            # The title names the explorer after its output has been replaced (the gettext build
            # keeps text/plain only; the Chinese edition rewrites the frame's alt, the title):
            # ``_ext/editions.py`` reads it here rather than parse the output a second time.
            figure["explorer_title"] = visual.title
            figure["names"].append(figure_label(visual))
            bundle.replace_self(figure)
            figure += bundle
            figure += _print_line(self.env.docname, figure_label(visual))
            figure += nodes.caption(caption, caption)
            self.document.note_explicit_target(figure, figure)


def _print_line(docname: str, label: str) -> nodes.paragraph:
    """The print-only line under an explorer: where to find it interactive (its page, its anchor)."""
    target = f"{docname.rsplit('/', 1)[-1]}.html#{label}"
    line = nodes.paragraph(classes=["book-print-only", "book-explorer-print-line"])
    line += nodes.Text("Interactive in the HTML edition: ")
    line += nodes.reference(target, f"{docname}.html#{label}", refuri=target, internal=False)
    return line


@functools.cache
def _visuals():
    return book_visuals()


def setup(app):
    os.environ[WIDGETS_ENV] = "static"
    app.add_transform(ExplorerFigures)
    app.connect("build-finished", _externalise_explorer_frames)
    # The version of what the transform above writes into the doctrees: raising it makes the
    # next build re-read every page instead of reusing doctrees read by an older transform.
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 4}
