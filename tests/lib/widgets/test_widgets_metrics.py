"""The visual of chapter 8 (lib.widgets.metrics): pure ``compute`` against lib.part3_words.metrics,
plus a smoke test that it renders through :func:`lib.widgets.explore`."""
import numpy as np
import pytest

from lib.part3_words.metrics import rouge_n, sentence_bleu
from lib.widgets import explore
from lib.widgets.metrics import BleuBreakdown

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def breakdown():
    return BleuBreakdown()


@pytest.mark.parametrize("smooth", ["none", "floor", "add-k", "exp"])
@pytest.mark.parametrize("candidate", BleuBreakdown.controls[0].values)
def test_breakdown_is_sentence_bleu_of_the_split_text(breakdown, candidate, smooth):
    data = breakdown.compute(candidate=candidate, reference_1="the cat is on the mat",
                             reference_2="a cat sat on the mat", smooth=smooth)
    references = ["the cat is on the mat".split(), "a cat sat on the mat".split()]
    stats = sentence_bleu(candidate.split(), references, smooth=smooth)
    assert data["score"] == stats.score and data["brevity_penalty"] == stats.brevity_penalty
    np.testing.assert_array_equal(data["matches"], stats.matches)
    np.testing.assert_array_equal(data["totals"], stats.totals)
    np.testing.assert_allclose(data["precisions"], stats.precisions)
    assert (data["hyp_len"], data["ref_len"]) == (stats.hyp_len, stats.ref_len)
    assert data["rouge"] == (rouge_n(candidate.split(), references, 1), rouge_n(candidate.split(), references, 2))


def test_the_papers_clipping_example(breakdown):
    data = breakdown.compute(candidate="the the the the the the the")
    assert data["matches"][0] == 2 and data["totals"][0] == 7 and data["score"] == 0.0


def test_free_text_edge_cases_have_defined_results(breakdown):
    empty = breakdown.compute(candidate="   ")
    assert empty["score"] == 0.0 and empty["brevity_penalty"] == 0.0 and empty["hyp_len"] == 0
    one_reference = breakdown.compute(candidate="the cat", reference_2="")
    assert one_reference["n_references"] == 1 and one_reference["ref_len"] == 6
    nothing = breakdown.compute(candidate="a b", reference_1="", reference_2="")
    assert nothing["score"] == 0.0 and nothing["n_references"] == 1


def test_breakdown_renders_any_text_through_explore(breakdown):
    explorer = explore(breakdown)
    assert explorer.render()[8:12] == WEBP_TAG
    assert explorer.render(candidate="", reference_1="", reference_2="")[8:12] == WEBP_TAG
    assert explorer.render(candidate="typed by hand, not a preset")[8:12] == WEBP_TAG
    assert np.prod([len(c.values) for c in breakdown.controls]) <= 300
