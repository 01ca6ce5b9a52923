"""The visuals of chapter 5 (lib.widgets.word2vec): pure ``compute`` against lib.part3_words.embeddings and
numpy's PCA, by hand, plus smoke tests that each one renders through :func:`lib.widgets.explore`."""
import numpy as np
import pytest
import torch

from lib.corpus import Vocabulary
from lib.widgets import explore
from lib.widgets.word2vec import NeighbourExplorer, ProjectionExplorer, parse_query
from lib.part3_words.embeddings import WordVectors
from test_widgets_legibility import assert_legible

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP
WORDS = ["paris", "france", "berlin", "germany", "rome", "italy", "war", "peace", "cat", "dog", "cats"]


@pytest.fixture(scope="module")
def models():
    vocab = Vocabulary(words=WORDS, counts=list(range(len(WORDS), 0, -1)))
    generator = torch.Generator().manual_seed(0)
    return {
        "random": WordVectors(torch.randn(len(WORDS), 6, generator=generator), vocab),
        "other": WordVectors(torch.randn(len(WORDS), 6, generator=generator), vocab),
    }


def test_parse_query():
    assert parse_query("Paris - France + Germany") == (["paris", "germany"], ["france"])
    assert parse_query("war") == (["war"], [])
    assert parse_query("-war+peace  cat") == (["peace", "cat"], ["war"])
    assert parse_query("  ") == ([], [])
    with pytest.raises(TypeError, match="the query must be a str"):
        parse_query(3)


def test_neighbours_are_lib_most_similar(models):
    visual = NeighbourExplorer(models, ["war", "paris - france + germany"], k=4)
    data = visual.compute(query="paris - france + germany", model="other")
    expected = models["other"].most_similar(["paris", "germany"], ["france"], k=4)
    assert data["words"] == [w for w, _ in expected]
    np.testing.assert_allclose(data["scores"], [s for _, s in expected])
    assert data["expression"] == "paris + germany − france" and data["message"] == ""


def test_neighbours_normalise_the_query_and_explain_unknown_words(models):
    visual = NeighbourExplorer(models, ["cats"], normalise=lambda w: w.rstrip("s"), k=3)
    data = visual.compute(query="Cats", model="random")
    assert data["expression"] == "cat" and "cat" not in data["words"]
    unknown = visual.compute(query="war - unicorn", model="random")
    assert unknown["message"] == "not in the vocabulary: unicorn"
    assert unknown["words"] == ["", "", ""] and (unknown["scores"] == 0).all()
    assert visual.compute(query="", model="random")["message"].startswith("type a word")
    cancelled = visual.compute(query="war - war", model="random")  # lib refuses a zero query
    assert "cancel" in cancelled["message"] and cancelled["words"] == ["", "", ""]
    plain = NeighbourExplorer(models, ["war"], k=3)  # no normalising: every word as it is
    everything = plain.compute(query=" + ".join(WORDS), model="random")
    assert "must leave a word to return" in everything["message"]


def test_projection_is_the_pca_of_the_groups_words(models):
    groups = {"capitals": (("country", "capital"),
                           [("france", "paris"), ("germany", "berlin"), ("italy", "rome"), ("spain", "madrid")])}
    visual = ProjectionExplorer(models, groups)
    data = visual.compute(group="capitals", model="random")
    assert data["labels"] == ["france", "paris", "germany", "berlin", "italy", "rome"]  # spain is unknown
    assert data["roles"] == ("country", "capital")
    vectors = models["random"]
    rows = np.stack([vectors.vector(w).numpy() for w in data["labels"]]).astype(np.float64)
    centred = rows - rows.mean(axis=0)
    # numpy's PCA: eigenvectors of the covariance; the projections agree up to the sign of each axis.
    values, vecs = np.linalg.eigh(centred.T @ centred)
    expected = centred @ vecs[:, ::-1][:, :2]
    np.testing.assert_allclose(np.abs(data["points"]), np.abs(expected), atol=1e-6)
    np.testing.assert_allclose(data["explained"], values[::-1][:2] / values.sum(), atol=1e-6)
    assert (data["points"][0] <= 0).all(), "the sign of each axis puts the first word at negative coordinates"


def test_projection_needs_two_known_pairs(models):
    visual = ProjectionExplorer(models, {"bad": (("a", "b"), [("france", "paris"), ("unicorn", "horn")])})
    with pytest.raises(ValueError, match="needs at least 2 pairs"):
        visual.compute(group="bad", model="random")


def test_the_chapters_groups_and_queries_are_well_formed():
    from lib.widgets.word2vec import PAIR_GROUPS, QUERIES

    assert len(QUERIES) * 4 <= 300 and len(PAIR_GROUPS) * 4 <= 300  # frames with four models
    for roles, pairs in PAIR_GROUPS.values():
        assert len(roles) == 2 and len(pairs) >= 2 and all(len(pair) == 2 for pair in pairs)


def test_models_must_be_word_vectors():
    with pytest.raises(TypeError, match=r"models\['x'\] must be a lib.part3_words.embeddings.WordVectors"):
        NeighbourExplorer({"x": torch.zeros(3, 2)}, ["war"])


def test_both_visuals_render_every_control_value(models):
    groups = {"capitals": (("country", "capital"), [("france", "paris"), ("germany", "berlin"), ("italy", "rome")]),
              "animals": (("one", "many"), [("cat", "cats"), ("dog", "cats"), ("war", "peace")])}
    for visual, changes in (
        (NeighbourExplorer(models, ["war", "paris - france + germany", "unicorn"]), {"query": "unicorn"}),
        (ProjectionExplorer(models, groups), {"group": "animals"}),
    ):
        explorer = explore(visual)
        default, changed = explorer.render(), explorer.render(**changes, model="other")
        assert default[8:12] == WEBP_TAG and changed != default
        frames, frame_of = explorer.frames()
        assert len(frame_of) == np.prod([len(c.values) for c in visual.controls]) and len(frames) > 1


def test_both_visuals_are_legible_on_a_phone(models):
    groups = {"capitals": (("country", "capital"), [("france", "paris"), ("germany", "berlin"), ("italy", "rome")])}
    assert_legible(NeighbourExplorer(models, ["war", "paris - france + germany", "unicorn"]))
    assert_legible(ProjectionExplorer(models, groups))
