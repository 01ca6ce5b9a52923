"""_ext/translated_build.py: the Chinese search is Sphinx's, with its Latin words in a set, and
Sphinx uses it; a node parsed in a translation's document of its own is pointed at the page.

The built edition's doctrees are checked in ``tests/i18n/test_chinese_edition.py``.
"""
import pickle
import sys
from pathlib import Path
from types import SimpleNamespace

from babel.messages.pofile import read_po
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document
from sphinx import search
from sphinx.application import Sphinx
from sphinx.search.zh import SearchChinese

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "_ext"))
from translated_build import SearchChineseWithASet, forget_message_documents, setup  # noqa: E402

OPTIONS = {"dict": str(ROOT / "_ext" / "zh_search_dict.txt")}


def test_the_chinese_search_stems_every_word_as_sphinxs_own():
    theirs, ours = SearchChinese(OPTIONS), SearchChineseWithASet(OPTIONS)
    with open(ROOT / "locale" / "zh_CN" / "LC_MESSAGES" / "chapters" / "09_attention.po", "rb") as handle:
        catalogue = read_po(handle)
    texts = [message.string for message in catalogue if message.id and message.string]
    # Words that the stemmer would cut under three letters, which are kept whole if seen before.
    texts.append("GRU 的 ABC 与 softmax、RNN、LSTMs 对比：its abs 与 its、abs")
    assert len(texts) > 100
    for text in texts:
        words = theirs.split(text)
        assert ours.split(text) == words
        assert [ours.stem(word) for word in words] == [theirs.stem(word) for word in words]
    assert isinstance(ours.latin_terms, set) and ours.latin_terms == set(theirs.latin_terms)


def test_a_node_parsed_in_a_document_of_its_own_is_pointed_at_the_page():
    settings = get_default_settings(Parser)
    page, message = new_document("page", settings), new_document("message", settings.copy())
    message.settings.env = "an environment, " * 10_000  # what a parsed translation's document holds
    Parser().parse("A *translated* paragraph with ``code``.", message)
    # As MyST builds a doctree: every node added with the document it belongs to.
    for node in message.findall(include_self=False):
        node.document = message
    # As sphinx.transforms.i18n puts a translation into the page: the children move over.
    paragraph, patch = nodes.paragraph(), message.children[0]
    page += paragraph
    for child in patch.children:
        child.parent = paragraph
    paragraph.children = patch.children
    assert len(pickle.dumps(page)) > 100_000
    forget_message_documents(None, page)
    assert all(node.document is page for node in page.findall(include_self=False))
    assert len(pickle.dumps(page)) < 10_000


def test_sphinx_builds_the_chinese_index_with_the_set(monkeypatch):
    monkeypatch.setitem(search.languages, "zh", SearchChinese)
    connected = []
    app = SimpleNamespace(connect=lambda *args, **options: connected.append(args),
                          add_search_language=lambda cls: Sphinx.add_search_language(None, cls))
    setup(app)
    assert search.languages["zh"] is SearchChineseWithASet
    assert connected == [("doctree-read", forget_message_documents)]
