"""The visual of chapter 2 (lib.widgets.optim): ``compute`` against lib.optim, the
settings behind each drop-down entry, and rendering through :func:`lib.widgets.explore`."""
import numpy as np
import pytest
import torch

from lib.optim import SGD, SURFACES, Adam, RMSprop, trajectory
from lib.widgets import explore
from lib.widgets.optim import BASE_LR, OPTIMIZER_NAMES, STEPS, TrajectoryExplorer, optimizer_settings

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def visual():
    return TrajectoryExplorer(grid_size=40)


def test_optimizer_settings_put_beta_in_its_role():
    assert optimizer_settings("momentum", 0.1, 0.9) == (SGD, dict(lr=0.1, momentum=0.9))
    assert optimizer_settings("Nesterov", 0.1, 0.9) == (SGD, dict(lr=0.1, momentum=0.9, nesterov=True))
    assert optimizer_settings("Nesterov", 0.1, 0.0) == (SGD, dict(lr=0.1, momentum=0.0, nesterov=False))
    assert optimizer_settings("RMSProp", 0.1, 0.5) == (RMSprop, dict(lr=0.1, alpha=0.5))
    assert optimizer_settings("Adam", 0.1, 0.5) == (Adam, dict(lr=0.1, betas=(0.5, 0.999)))
    with pytest.raises(ValueError, match="name must be one of"):
        optimizer_settings("Adagrad", 0.1, 0.5)


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("name", OPTIMIZER_NAMES)
def test_path_is_the_lib_trajectory(visual, surface, name):
    data = visual.compute(surface=surface, optimizer=name, lr_scale=2, beta=0.8)
    lr = 2 * BASE_LR[surface, name]
    cls, hyper = optimizer_settings(name, lr, 0.8)
    expected = trajectory(cls, SURFACES[surface], STEPS[surface], **hyper).numpy()
    np.testing.assert_array_equal(data["path"], expected)
    assert data["lr"] == lr and data["diverged"] == (len(expected) < STEPS[surface] + 1)
    last = torch.tensor(expected[-1])
    assert data["final_loss"] == pytest.approx(float(SURFACES[surface].f(last)))
    assert data["distance"] == pytest.approx(float(np.linalg.norm(expected[-1] - np.array(SURFACES[surface].minimum))))


@pytest.mark.parametrize("surface", list(SURFACES))
def test_default_settings_converge_and_the_largest_plain_step_diverges(visual, surface):
    # β = 0.9 at the base learning rate gets close to the minimum on both surfaces ...
    assert visual.compute(surface=surface, optimizer="momentum", lr_scale=1, beta=0.9)["distance"] < 0.1
    assert visual.compute(surface=surface, optimizer="Adam", lr_scale=1, beta=0.9)["distance"] < 0.4
    # ... and four times that rate with β = 0.99 is unstable on the Rosenbrock valley.
    if surface == "rosenbrock":
        assert visual.compute(surface=surface, optimizer="momentum", lr_scale=4, beta=0.99)["diverged"]


def test_momentum_beats_plain_gradient_descent_on_rosenbrock(visual):
    plain = visual.compute(surface="rosenbrock", optimizer="momentum", lr_scale=1, beta=0.0)
    heavy = visual.compute(surface="rosenbrock", optimizer="momentum", lr_scale=1, beta=0.9)
    assert heavy["distance"] < 0.1 * plain["distance"]


def test_renders_png_and_stays_under_300_frames():
    explorer = explore(TrajectoryExplorer(grid_size=40))
    settings = [{}, {"surface": "quadratic", "optimizer": "Adam", "beta": 0.5}, {"lr_scale": 4, "beta": 0.99}]
    pictures = [explorer.render(**values) for values in settings]
    assert all(png[8:12] == WEBP_TAG for png in pictures)
    assert len(set(pictures)) == len(pictures)
    assert int(np.prod([len(c.values) for c in TrajectoryExplorer.controls])) <= 300
