"""The visual of chapter 7 (lib.widgets.decoding): pure ``compute`` against lib.part3_words.decoding,
plus a smoke test that it renders through :func:`lib.widgets.explore`."""
import numpy as np
import pytest

from lib.part3_words.decoding import beam_search, sequence_score
from lib.widgets import explore
from lib.widgets.decoding import FLOOR, MAX_LEN, BeamSearchTree

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def tree():
    return BeamSearchTree()


@pytest.mark.parametrize("time", BeamSearchTree.times)
@pytest.mark.parametrize("beam_size", [1, 3])
def test_tree_shows_every_candidate_and_the_beams_result(tree, time, beam_size):
    data = tree.compute(time=time, beam_size=beam_size, alpha=0.7)
    source = tree.task.times.index(time)
    step_fn = tree.model.for_source(source)
    expected = beam_search(step_fn, tree.model.bos, tree.task.eos, beam_size, MAX_LEN, 0.7)
    assert [sentence for sentence, *_ in data["finished"]] == [tree.task.decode(t) or "(empty)" for t, _ in expected]
    assert [score for *_, score in data["finished"]] == pytest.approx([s for _, s in expected])
    status, points = data["status"], data["points"]
    assert len(status) == len(points) == len(data["segments"])
    assert (status == "finished").sum() == len(expected)
    for step in range(1, int(points[:, 0].max()) + 1):  # at most K survivors per step
        assert (status[points[:, 0] == step] != "pruned").sum() <= beam_size
    assert (points[:, 1] >= FLOOR).all() and (points[:, 1] <= 0).all()
    # Every edge starts where its parent was drawn: one step to the left.
    np.testing.assert_allclose(data["segments"][:, 1], points)
    np.testing.assert_allclose(data["segments"][:, 0, 0], points[:, 0] - 1)
    # The winner's path runs from the root to a finished square.
    path = data["winner_path"]
    assert tuple(path[0]) == (0.0, 0.0)
    assert any(np.allclose(path[-1], p) for p in points[status == "finished"])
    assert data["best"] == tree.task.decode(tree.task.best(source))
    assert data["best_score"] == pytest.approx(sequence_score(step_fn, tree.model.bos, tree.task.best(source), 0.7))


def test_alpha_reranks_the_finished_hypotheses_but_never_changes_the_tree(tree):
    raw = tree.compute(time="6:15", beam_size=4, alpha=0.0)
    normalised = tree.compute(time="6:15", beam_size=4, alpha=1.0)
    np.testing.assert_array_equal(raw["points"], normalised["points"])
    np.testing.assert_array_equal(raw["status"], normalised["status"])
    assert raw["finished"][0][0] != normalised["finished"][0][0]  # here alpha changes the answer
    assert sorted(s for s, *_ in raw["finished"]) == sorted(s for s, *_ in normalised["finished"])


def test_greedy_garden_path_on_the_default_setting(tree):
    greedy = tree.compute(time="8:45", beam_size=1)
    beam = tree.compute(time="8:45", beam_size=2)
    assert greedy["finished"][0][0] == "quarter to nine"
    assert beam["finished"][0][0] == beam["best"] == "eight forty five"


def test_labels_of_one_step_do_not_overlap(tree):
    labels = tree.compute(time="6:15", beam_size=4, alpha=0.0)["labels"]
    for step in {x for x, _, _ in labels}:
        ys = sorted((y for x, y, _ in labels if x == step), reverse=True)
        assert all(a - b >= 0.55 - 1e-9 for a, b in zip(ys, ys[1:]))


def test_tree_renders_through_explore(tree):
    explorer = explore(tree)
    assert explorer.render()[8:12] == WEBP_TAG
    assert explorer.render(time="4:45", beam_size=4, alpha=1.0)[8:12] == WEBP_TAG
    assert np.prod([len(c.values) for c in tree.controls]) <= 300
