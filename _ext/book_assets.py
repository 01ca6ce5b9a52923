"""Sphinx extension for the book: offline assets and kernel-free widgets.

* Sets ``BOOK_WIDGETS=static`` before any notebook executes, so every explorer
  (``lib.widgets``) pre-renders its frames into an HTML player that works without a
  kernel. Notebooks run by Jupyter or nbval keep the default, live ipywidgets.
* Copies MathJax 3 (shipped on PyPI by ``django-static-mathjax`` as the ``mathjax``
  package) into ``_static/mathjax``, so ``mathjax_path`` in ``_config.yml`` points
  at a local file and the built book typesets maths with no network.
* Drops sphinx-thebe's scripts, which Jupyter Book always adds: the book launches
  Binder instead, and those scripts name a CDN and are registered twice per page
  (a console error in every browser).
"""
import os
import shutil
from pathlib import Path

from lib.widgets.core import WIDGETS_ENV


def _mathjax_dir() -> Path:
    import mathjax  # the django-static-mathjax distribution

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (source / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax's es5 build was not found at {source}; reinstall django-static-mathjax")
    return source


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        shutil.copytree(_mathjax_dir(), Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def _is_thebe(script) -> bool:
    return "thebe" in (script.filename or "") or "THEBE_JS_URL" in script.attributes.get("body", "")


def _drop_thebe(app, pagename, templatename, context, doctree):
    context["script_files"] = [js for js in context.get("script_files", []) if not _is_thebe(js)]


def setup(app):
    os.environ[WIDGETS_ENV] = "static"
    _mathjax_dir()  # fail at start-up, not after a long build, when MathJax is missing
    app.connect("build-finished", _copy_mathjax)
    app.connect("html-page-context", _drop_thebe)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
