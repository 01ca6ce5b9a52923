"""Sphinx extension for the book: offline assets and kernel-free widgets.

* Sets ``BOOK_WIDGETS=static`` before any notebook executes, so every explorer
  (``lib.widgets``) pre-renders its frames into an HTML player that works without a
  kernel. Notebooks run by Jupyter or nbval keep the default, live ipywidgets.
* Copies MathJax 3 (shipped on PyPI by ``django-static-mathjax`` as the ``mathjax``
  package) into ``_static/mathjax``, so ``mathjax_path`` in ``_config.yml`` points
  at a local file and the built book typesets maths with no network.
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


def setup(app):
    os.environ[WIDGETS_ENV] = "static"
    _mathjax_dir()  # fail at start-up, not after a long build, when MathJax is missing
    app.connect("build-finished", _copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
