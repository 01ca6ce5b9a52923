"""The visuals of chapter 1 (lib.widgets.activations): pure ``compute`` against lib and by
hand, plus smoke tests that each one renders through :func:`lib.widgets.explore`."""
import math

import numpy as np
import pytest
import torch

from lib.part1_blocks.activations import ACTIVATIONS, elu, elu_grad, sigmoid_grad
from lib.part1_blocks.losses import MARGIN_LOSSES
from lib.widgets import explore
from lib.widgets.activations import ActivationExplorer, MarginLossExplorer

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def activations():
    return ActivationExplorer()


@pytest.fixture(scope="module")
def margins():
    return MarginLossExplorer()


# ---------------------------------------------------------------------------
# ActivationExplorer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_curves_are_the_lib_functions(activations, name):
    data = activations.compute(activation=name, parameter=0.3, x_range=6)
    x = torch.tensor(data["x"], dtype=torch.float64)
    assert x.shape == (401,) and x[0] == -6 and x[-1] == 6
    np.testing.assert_allclose(data["y"], ACTIVATIONS[name](x, 0.3).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(data["dy"], ACTIVATIONS[name].derivative(x, 0.3).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(data["relu"], np.maximum(data["x"], 0))
    assert data["max_grad"] == pytest.approx(data["dy"].max())
    assert (data["grad_left"], data["grad_right"]) == (data["dy"][0], data["dy"][-1])


def test_activation_parameter_reaches_elu_and_leaky_relu_only(activations):
    data = activations.compute(activation="elu", parameter=0.5, x_range=4)
    x = torch.tensor(data["x"], dtype=torch.float64)
    np.testing.assert_allclose(data["y"], elu(x, 0.5).numpy())
    np.testing.assert_allclose(data["dy"], elu_grad(x, 0.5).numpy())
    assert data["label"] == "elu (alpha = 0.5)"
    slope = activations.compute(activation="leaky_relu", parameter=0.2, x_range=4)
    assert slope["grad_left"] == 0.2 and slope["label"] == "leaky_relu (negative_slope = 0.2)"
    a = activations.compute(activation="sigmoid", parameter=0.01, x_range=4)
    b = activations.compute(activation="sigmoid", parameter=1.5, x_range=4)
    assert a["label"] == b["label"] == "sigmoid" and np.array_equal(a["y"], b["y"])


def test_activation_sigmoid_numbers_in_the_title(activations):
    data = activations.compute(activation="sigmoid", parameter=1.0, x_range=8)
    assert data["max_grad"] == pytest.approx(0.25, abs=1e-4)  # the grid's middle point is x = 0
    assert data["grad_left"] == pytest.approx(sigmoid_grad(torch.tensor(-8.0, dtype=torch.float64)).item())
    assert data["grad_left"] < 4e-4


# ---------------------------------------------------------------------------
# MarginLossExplorer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("margin", MarginLossExplorer.margins)
def test_margin_values_are_the_lib_losses(margins, margin):
    data = margins.compute(highlight="log", margin=margin)
    m = torch.tensor([margin], dtype=torch.float64)
    for name, loss in MARGIN_LOSSES.items():
        scale = 1 / math.log(2) if name == "log" else 1.0
        assert data["at_margin"][name] == pytest.approx(scale * loss(m).item(), rel=1e-12)
    assert set(data["curves"]) == set(MARGIN_LOSSES)


def test_margin_curves_pass_through_0_1_and_bound_the_zero_one_loss(margins):
    data = margins.compute()
    m = data["m"]
    zero = np.argmin(np.abs(m))
    assert m[zero] == pytest.approx(0.0, abs=1e-12)
    for name in ("hinge", "log", "exponential", "squared", "absolute"):
        assert data["curves"][name][zero] == pytest.approx(1.0)
    for name in ("hinge", "log", "exponential", "squared"):
        assert (data["curves"][name] >= data["curves"]["0-1"] - 1e-12).all()


# ---------------------------------------------------------------------------
# Rendering through the explorer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "visual, settings",
    [
        (ActivationExplorer, [{}, {"activation": "gelu_sigmoid", "x_range": 8}, {"activation": "leaky_relu",
                                                                                  "parameter": 0.3}]),
        (MarginLossExplorer, [{}, {"highlight": "exponential", "margin": -2.0}]),
    ],
)
def test_each_visual_renders_png_for_several_settings(visual, settings):
    explorer = explore(visual())
    pictures = [explorer.render(**values) for values in settings]
    assert all(png[8:12] == WEBP_TAG for png in pictures)
    assert len(set(pictures)) == len(pictures), "different settings must give different pictures"


def test_parameterless_functions_share_frames_across_the_parameter_slider():
    explorer = explore(ActivationExplorer())
    assert explorer.render(activation="relu", parameter=0.01) == explorer.render(activation="relu", parameter=1.5)


@pytest.mark.parametrize("visual", [ActivationExplorer, MarginLossExplorer])
def test_static_players_stay_under_300_frames(visual):
    assert int(np.prod([len(c.values) for c in visual.controls])) <= 300
