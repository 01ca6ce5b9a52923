"""Sphinx extension for the book: the build reuses the notebook runs of ``tools/chapter_runs.py``.

* Makes a notebook's page depend on its run (``tools/chapter_runs.py`` stores the runs and
  their records in ``_build/runs/book/``): when a run is redone, because a ``lib`` module it
  imported changed, an incremental build re-reads that page and no other.
* Resolves ``execute.cache`` (myst-nb's ``nb_execution_cache_path``) against the book, not
  against the directory the build was started from, so the build finds those runs
  wherever it is started.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import chapter_runs  # noqa: E402  (tools/ is not a package)


def _depend_on_run(app, docname, source):
    """Re-read a notebook's page whenever its run's record is rewritten (the run was redone)."""
    path = Path(app.env.doc2path(docname))
    if path.suffix == ".ipynb":
        record = chapter_runs.record_path(path.resolve(), chapter_runs.CONFIGURATIONS["book"])
        if record.is_file():
            app.env.note_dependency(str(record))


def _absolute_execution_cache(app, config):
    """``execute.cache`` relative to the book, not to the directory the build was started from
    (jupyter-cache resolves a relative path against the latter)."""
    if config.nb_execution_cache_path and not os.path.isabs(config.nb_execution_cache_path):
        config.nb_execution_cache_path = str(Path(app.srcdir) / config.nb_execution_cache_path)


def setup(app):
    app.connect("source-read", _depend_on_run)
    app.connect("config-inited", _absolute_execution_cache)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
