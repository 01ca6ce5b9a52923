"""Sphinx extension for the book: offline assets and kernel-free widgets.

* Makes a notebook's page depend on its run (``tools/chapter_runs.py`` stores the runs and
  their records in ``_build/runs/book/``): when a run is redone, because a ``lib`` module it
  imported changed, an incremental build re-reads that page and no other.
* Sets ``BOOK_WIDGETS=static`` before any notebook the build executes itself (one missing
  from the execution cache; ``tools/chapter_runs.py`` sets it for the runs it makes), so every explorer
  (``lib.widgets``) pre-renders its frames into an HTML player that works without a
  kernel. Notebooks run by Jupyter or nbval keep the default, live ipywidgets.
  After the build, the players' frames move out of the pages into
  ``_static/explorer-frames/`` (``lib.widgets.core.externalise_frames``): a page
  carries each player's first frame, the browser fetches the others on demand.
* Numbers the explorers like the other figures: a transform wraps each explorer's
  output in a figure whose caption and label (``fig-explorer-lstm-gate``, for ``{numref}``)
  are the ``caption`` and :func:`~lib.widgets.core.figure_label` of its visual, found by
  the title its output names (the static player's and a live output's ``text/plain``
  alike). An output that names no visual of ``lib.widgets`` is a warning (the build
  fails); a visual without a caption shows its title, and ``tests/test_widgets.py`` fails.
* Copies the part of MathJax 3 the book uses (shipped on PyPI by ``django-static-mathjax``
  as the ``mathjax`` package) into ``_static/mathjax``, so ``mathjax_path`` in
  ``_config.yml`` points at a local file and the built book typesets maths with no
  network: the ``tex-chtml`` bundle, the TeX extensions it may autoload, its CHTML fonts
  and what its menu loads on demand (accessibility, English speech rules). The other
  bundles, SVG output and speech rules of other languages (about 20 MB) stay out.
* Loads ``_static/book-nav.js`` deferred: Jupyter Book adds every file of ``_static/``
  (``book.css`` too) as a plain script, and that one must run after the page is parsed
  but before the theme's own deferred scripts (sidebar toggles at every width).
* Replaces pydata-sphinx-theme's ``fontawesome.js`` (1.5 MB on every page, there "so
  that users can add custom icons") by an empty script: the book adds none, and the
  theme's CSS already draws every icon with Font Awesome's web fonts. Source maps
  (``*.map``, for debugging the themes' scripts) and the theme's message catalogues
  (``_static/locales``, read only while building) are left out of the build too.
* Stores the notebooks' plots in ``_images`` as 256-colour palette PNGs (about 40 % of
  matplotlib's full-colour bytes), so that a chapter page stays under 3 MB.
* Drops sphinx-thebe's scripts, which Jupyter Book always adds: the book launches
  Binder instead, and those scripts name a CDN and are registered twice per page
  (a console error in every browser).
"""
import functools
import io
import os
import re
import shutil
import sys
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from lib.widgets.core import WIDGETS_ENV, book_visuals, externalise_frames, figure_label

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import chapter_runs  # noqa: E402  (tools/ is not a package)

logger = logging.getLogger(__name__)


def _depend_on_run(app, docname, source):
    """Re-read a notebook's page whenever its run's record is rewritten (the run was redone)."""
    path = Path(app.env.doc2path(docname))
    if path.suffix == ".ipynb":
        record = chapter_runs.record_path(path.resolve(), chapter_runs.CONFIGURATIONS["book"])
        if record.is_file():
            app.env.note_dependency(str(record))


def _mathjax_dir() -> Path:
    import mathjax  # the django-static-mathjax distribution

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax's es5 build was not found at {source}; reinstall django-static-mathjax")
    return source


NAV_SCRIPT = "book-nav.js"

# Paths inside MathJax's es5 folder that the book requests, or that the MathJax menu may request.
MATHJAX_FILES = (
    "tex-chtml.js",  # mathjax_path: TeX input, CHTML output, menu
    "input/tex/extensions",  # autoloaded by TeX macros that are not in the bundle
    "output/chtml/fonts/woff-v2",  # the CHTML fonts
    "ui",  # the menu's lazy parts
    "a11y",  # the menu's accessibility options
    "sre/mathmaps/base.json",  # speech rules that the explorer loads: common part,
    "sre/mathmaps/en.json",  # English
    "sre/mathmaps/nemeth.json",  # and Nemeth braille
)


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        source, target = _mathjax_dir(), Path(app.outdir) / "_static" / "mathjax"
        for name in MATHJAX_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            if (source / name).is_dir():
                shutil.copytree(source / name, target / name, dirs_exist_ok=True)
            else:
                shutil.copy2(source / name, target / name)


def _lighten_theme(app, exception):
    if exception is None and app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        (static / "scripts" / "fontawesome.js").write_text(
            "/* Empty: the book's icons come from the theme's CSS web fonts (_ext/book_assets.py). */\n"
        )
        for source_map in static.rglob("*.map"):
            source_map.unlink()
        # sphinx-book-theme's message catalogues: Sphinx reads them while building, a browser never does.
        shutil.rmtree(static / "locales", ignore_errors=True)


def _palette_images(app, exception):
    """Store the notebooks' plots (matplotlib's full-colour PNGs) with a 256-colour palette: about
    40 % of the bytes (measured: 1.00 to 0.39 MB for the book's 24 plots; 99.9 % of pixels within
    26 of 255 levels, the rest on antialiased edges). A plot whose palette version is not smaller
    stays as it is."""
    if exception is None and app.builder.format == "html":
        from PIL import Image

        for path in (Path(app.outdir) / "_images").glob("*.png"):
            with Image.open(path) as image:
                if image.mode == "P":
                    continue
                rgba = image.convert("RGBA")
            opaque = rgba.getextrema()[3][0] == 255
            # Plots are opaque (a white figure); a transparent one keeps its alpha in the palette.
            if opaque:
                palette = rgba.convert("RGB").quantize(256)
            else:
                palette = rgba.quantize(256, method=Image.Quantize.FASTOCTREE)
            buffer = io.BytesIO()
            palette.save(buffer, format="png", optimize=True)
            if buffer.tell() < path.stat().st_size:
                path.write_bytes(buffer.getvalue())


def _externalise_explorer_frames(app, exception):
    if exception is None and app.builder.format == "html":
        out = Path(app.outdir)
        frames_dir = out / "_static" / "explorer-frames"
        used = set()
        for page in out.rglob("*.html"):
            text = page.read_text(encoding="utf-8")
            if "book-explorer-data" in text:
                prefix = Path(os.path.relpath(frames_dir, page.parent)).as_posix() + "/"
                text = externalise_frames(text, frames_dir, prefix)
                page.write_text(text, encoding="utf-8")
                used.update(re.findall(r"explorer-frames/([0-9a-f]{16}\.webp)", text))
        # An incremental build keeps the frames of explorers that have since changed: drop them.
        for frame in frames_dir.glob("*.webp"):
            if frame.name not in used:
                frame.unlink()


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
            figure["names"].append(figure_label(visual))
            bundle.replace_self(figure)
            figure += bundle
            figure += nodes.caption(caption, caption)
            self.document.note_explicit_target(figure, figure)


@functools.cache
def _visuals():
    return book_visuals()


def _absolute_execution_cache(app, config):
    """``execute.cache`` relative to the book, not to the directory the build was started from
    (jupyter-cache resolves a relative path against the latter)."""
    if config.nb_execution_cache_path and not os.path.isabs(config.nb_execution_cache_path):
        config.nb_execution_cache_path = str(Path(app.srcdir) / config.nb_execution_cache_path)


def _defer_nav_script(app, config):
    config.html_js_files = [
        (NAV_SCRIPT, {"defer": "defer"}) if entry == NAV_SCRIPT else entry for entry in config.html_js_files
    ]


def _is_thebe(script) -> bool:
    return "thebe" in (script.filename or "") or "THEBE_JS_URL" in script.attributes.get("body", "")


def _drop_thebe(app, pagename, templatename, context, doctree):
    context["script_files"] = [js for js in context.get("script_files", []) if not _is_thebe(js)]


def setup(app):
    os.environ[WIDGETS_ENV] = "static"
    source = _mathjax_dir()  # fail at start-up, not after a long build, when MathJax is missing
    missing = [name for name in MATHJAX_FILES if not (source / name).exists()]
    if missing:
        raise RuntimeError(f"MathJax at {source} lacks {missing}; reinstall django-static-mathjax")
    app.add_transform(ExplorerFigures)
    app.connect("source-read", _depend_on_run)
    app.connect("config-inited", _defer_nav_script)
    app.connect("config-inited", _absolute_execution_cache)
    app.connect("build-finished", _copy_mathjax)
    app.connect("build-finished", _lighten_theme)
    app.connect("build-finished", _externalise_explorer_frames)
    app.connect("build-finished", _palette_images)
    app.connect("html-page-context", _drop_thebe)
    # The version of what the transform above writes into the doctrees: raising it makes the
    # next build re-read every page instead of reusing doctrees read by an older transform.
    return {"parallel_read_safe": True, "parallel_write_safe": True, "env_version": 2}
