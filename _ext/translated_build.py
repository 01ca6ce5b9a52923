"""Sphinx extension for the book: the translated edition without two needless costs (issue 32).

Two costs of Sphinx 7.4.7 made the Chinese edition's build take 242 s of CPU, with nothing to show
for them; without them it takes 64 s (one build each, on a loaded machine), and its pages and
search index are byte for byte the same:

* **Doctrees that carry the environment.** Each translated message is parsed as a small document
  of its own (``sphinx.transforms.i18n.publish_msgstr``). Its nodes, moved into the page, keep a
  reference to that document, whose settings hold the whole build environment, so every page's
  pickled doctree held a copy of it (chapter 9: 55.8 MB instead of 10.3 MB), and every
  ``{numref}`` unpickles the page it points to. ``forget_message_documents`` points those nodes at
  the page once it is read.
* **A quadratic search index.** Sphinx's Chinese search (``sphinx.search.zh.SearchChinese``) keeps
  every Latin word of the book in a list, and looks up each word it stems in that list.
  ``SearchChineseWithASet`` keeps them in a set; the index holds the same words. (Sphinx's list
  lives as long as the process, the set as long as its indexer: one each per build here.)

The English build parses no message and uses the English search: this changes nothing there.
"""
from __future__ import annotations

from docutils import nodes
from sphinx.search.zh import SearchChinese


def forget_message_documents(app, doctree: nodes.document) -> None:
    """Point each node that refers to another document (a parsed translation) at the page."""
    for node in doctree.findall(include_self=False):
        if getattr(node, "__dict__", {}).get("_document") not in (None, doctree):
            node.document = doctree


class _WordSet(set):
    """A set that ``SearchChinese.split`` can ``extend`` as it extends its list."""

    extend = set.update


class SearchChineseWithASet(SearchChinese):
    """Sphinx's Chinese search, with its Latin words in a set instead of a list."""

    def init(self, options) -> None:
        super().init(options)
        self.latin_terms = _WordSet()


def setup(app):
    # The translations are in the page by doctree-read; 900 puts this after the other listeners.
    app.connect("doctree-read", forget_message_documents, priority=900)
    app.add_search_language(SearchChineseWithASet)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
