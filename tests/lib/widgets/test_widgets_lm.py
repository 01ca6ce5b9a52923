"""The visuals of chapter 6 (lib.widgets.lm): pure ``compute`` against lib.part3_words.ngram and
lib.part3_words.decoding, plus a smoke test that each renders through :func:`lib.widgets.explore`."""
import math

import numpy as np
import pytest
import torch

from lib.part3_words.decoding import sampling_distribution
from lib.part3_words.ngram import NGramModel
from lib.widgets import explore
from lib.widgets.lm import DELTAS, TEMPERATURES, AddDeltaPerplexity, NextTokenTemperature
from test_widgets_legibility import assert_legible

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP
WORDS = ["</s>", "the", "cat", "sat", "on", "mat", "dog", "ran"]
TRAIN = [["the", "cat", "sat", "on", "the", "mat"], ["the", "dog", "sat"], ["a", "cat", "ran"],
         ["the", "dog", "ran", "on", "the", "mat"]]
TEST = [["the", "cat", "ran"], ["a", "dog", "sat", "on", "a", "mat"]]


@pytest.fixture(scope="module")
def temperature():
    generator = torch.Generator().manual_seed(0)
    distributions = {context: torch.log_softmax(2 * torch.randn(len(WORDS), generator=generator), 0)
                     for context in ("the", "on the", "sat")}
    return NextTokenTemperature(WORDS, distributions, top=5)


def test_temperature_bars_are_the_tempered_distribution(temperature):
    for context, log_probs in temperature.log_probs.items():
        ranked = torch.argsort(log_probs, descending=True)[:5]
        for t in TEMPERATURES:
            data = temperature.compute(context=context, temperature=t)
            expected = sampling_distribution(log_probs, t)
            assert data["labels"] == [WORDS[i] for i in ranked.tolist()] + ["(other)"]
            np.testing.assert_allclose(data["probs"][:5], expected[ranked].numpy(), rtol=1e-12)
            assert data["probs"].sum() == pytest.approx(1.0)
            entropy = -float((expected * expected.log()).sum())
            assert data["perplexity"] == pytest.approx(math.exp(entropy))
            assert data["max_prob"] == pytest.approx(float(expected.max()))


def test_temperature_extremes(temperature):
    cold = temperature.compute(context="the", temperature=0.1)
    hot = temperature.compute(context="the", temperature=5.0)
    assert cold["max_prob"] > 0.9 and cold["perplexity"] < 1.5
    assert hot["perplexity"] > 0.8 * len(WORDS)  # nearly uniform: about |V| equally likely words
    assert cold["probs"][0] == max(cold["probs"])


def test_temperature_input_errors():
    with pytest.raises(ValueError, match="at least one context"):
        NextTokenTemperature(WORDS, {})
    with pytest.raises(ValueError, match="shape \\(8,\\)"):
        NextTokenTemperature(WORDS, {"the": torch.zeros(3)})


@pytest.fixture(scope="module")
def smoothing():
    return AddDeltaPerplexity(TRAIN, TEST, ["</s>", "<unk>", *WORDS[1:]], orders=(1, 2, 3))


@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("delta", [DELTAS[0], DELTAS[10], DELTAS[-1]])
def test_smoothing_values_equal_the_ngram_model(smoothing, order, delta):
    data = smoothing.compute(order=str(order), delta=delta)
    model = NGramModel.fit(TRAIN, order, delta=delta, vocabulary=["</s>", "<unk>", *WORDS[1:]])
    assert data["test_value"] == pytest.approx(model.perplexity(TEST), rel=1e-12)
    assert data["train_value"] == pytest.approx(model.perplexity(TRAIN), rel=1e-12)
    index = DELTAS.index(delta)
    assert data["test"][index] == pytest.approx(data["test_value"])
    assert data["best_test"] == min(data["test"]) and data["best_delta"] in DELTAS


def test_training_perplexity_rises_with_delta_and_test_has_an_interior_minimum(smoothing):
    data = smoothing.compute(order="2", delta=DELTAS[5])
    assert (np.diff(data["train"]) > 0).all()  # more smoothing, worse fit to the training counts
    assert 0 < int(np.argmin(data["test"])) < len(DELTAS) - 1


@pytest.mark.parametrize("visual", ["temperature", "smoothing"])
def test_visuals_render_every_control_value(visual, request):
    explorer = explore(request.getfixturevalue(visual))
    controls = explorer.visual.controls
    assert np.prod([len(c.values) for c in controls]) <= 300
    for control in controls:
        for value in (control.values[0], control.values[-1]):
            assert explorer.render(**{control.name: value})[8:12] == WEBP_TAG


@pytest.mark.parametrize("visual", ["temperature", "smoothing"])
def test_visuals_are_legible_on_a_phone(visual, request):
    assert_legible(request.getfixturevalue(visual))
