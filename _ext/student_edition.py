"""Sphinx extension: the student edition of the book, with every solution removed.

Active only when the environment variable ``BOOK_EDITION`` is ``student``
(``make student-book``); the ordinary build is unchanged. It then

* deletes, from every page as it is read, the solutions of sphinx-exercise
  (``{solution}`` and the ``{solution-start}`` … ``{solution-end}`` blocks, which by
  then hold the code cells between them) and every notebook cell tagged
  ``solution`` — removed, not collapsed, so neither the HTML nor the search index
  holds them;
* stops Sphinx from copying the page sources (``_sources/``), which are the
  master notebooks;
* removes the header buttons that download the page's source (``.ipynb``), which would
  point at the missing ``_sources/``; printing a page to PDF stays. The launch buttons
  (Binder, Colab) and the repository button stay: they open ``repository.url`` of
  ``_config.yml``, which must name the student repository for this build (the instructor
  guide says so), or they open the masters.

The exercises, check cells and everything else stay as in the instructor's book.
"""
import os

from docutils import nodes
from sphinx_exercise.nodes import solution_end_node, solution_node, solution_start_node

EDITION_ENV = "BOOK_EDITION"
SOLUTION_NODES = (solution_node, solution_start_node, solution_end_node)


def is_solution(node) -> bool:
    """A sphinx-exercise solution, or a notebook cell tagged ``solution``."""
    return isinstance(node, SOLUTION_NODES) or (
        isinstance(node, nodes.container) and "tag_solution" in node.get("classes", []))


def drop_solutions(app, doctree) -> None:
    for node in list(doctree.findall(is_solution)):
        node.parent.remove(node)


def keep_sources_private(app, config) -> None:
    config.html_copy_source = False


# sphinx-book-theme's header buttons (``context["header_buttons"]``, by their ``label``) that download
# the page's source, a master notebook.
SOURCE_DOWNLOADS = {"download-notebook-button", "download-source-button"}


def _without_source_downloads(buttons: list) -> list:
    kept = []
    for button in buttons:
        if button.get("label") in SOURCE_DOWNLOADS:
            continue
        if "buttons" in button:  # a drop-down: keep it if anything is left in it
            button = {**button, "buttons": _without_source_downloads(button["buttons"])}
            if not button["buttons"]:
                continue
        kept.append(button)
    return kept


def drop_source_downloads(app, pagename, templatename, context, doctree) -> None:
    if "header_buttons" in context:
        context["header_buttons"] = _without_source_downloads(context["header_buttons"])


def setup(app):
    if os.environ.get(EDITION_ENV) == "student":
        app.connect("config-inited", keep_sources_private)
        # after sphinx-book-theme has added its buttons (priority 501)
        app.connect("html-page-context", drop_source_downloads, priority=900)
        app.connect("doctree-read", drop_solutions, priority=900)  # after sphinx-exercise has registered them
    return {"parallel_read_safe": True, "parallel_write_safe": True}
