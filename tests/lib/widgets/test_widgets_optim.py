"""The visual of chapter 2 (lib.widgets.optim): each overlaid path against the same run of
``torch.optim``, the settings behind each optimiser, the disabled controls, and rendering
through :func:`lib.widgets.explore`."""
import itertools

import numpy as np
import pytest
import torch

from lib.part1_blocks.optim import SGD, SURFACES, Adam, RMSprop, trajectory
from lib.widgets import explore
from lib.widgets.optim import BASE_LR, OPTIMIZER_NAMES, STEPS, TrajectoryExplorer, optimizer_settings

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP
TORCH = {"momentum": torch.optim.SGD, "RMSProp": torch.optim.RMSprop, "Adam": torch.optim.Adam}


@pytest.fixture(scope="module")
def visual():
    return TrajectoryExplorer(grid_size=40)


def test_optimizer_settings_put_the_betas_in_their_roles():
    assert optimizer_settings("momentum", 0.1, 0.9, 0.99) == (SGD, dict(lr=0.1, momentum=0.9))
    assert optimizer_settings("RMSProp", 0.1, 0.9, 0.5) == (RMSprop, dict(lr=0.1, alpha=0.5))
    assert optimizer_settings("Adam", 0.1, 0.5, 0.9) == (Adam, dict(lr=0.1, betas=(0.5, 0.9)))
    with pytest.raises(ValueError, match="name must be one of"):
        optimizer_settings("Adagrad", 0.1, 0.5, 0.9)


@pytest.mark.parametrize("surface", list(SURFACES))
@pytest.mark.parametrize("lr_scale, beta1, beta2", [(2, 0.0, 0.9), (0.5, 0.99, 0.999), (1, 0.9, 0.999)])
def test_every_path_is_the_torch_optim_run_with_the_same_hyper_parameters(visual, surface, lr_scale, beta1, beta2):
    data = visual.compute(surface=surface, lr_scale=lr_scale, beta1=beta1, beta2=beta2)
    assert list(data["runs"]) == list(OPTIMIZER_NAMES)
    for name, run in data["runs"].items():
        lr = lr_scale * BASE_LR[surface, name]
        _, hyper = optimizer_settings(name, lr, beta1, beta2)
        expected = trajectory(TORCH[name], SURFACES[surface], STEPS[surface], **hyper).numpy()
        assert run["path"].shape == expected.shape, name
        # Adam without momentum hops chaotically along the Rosenbrock valley: a rounding difference
        # of 1e-16 grows to 0.1 after about 200 steps. Its first 200 steps must still agree.
        agree = len(expected) if beta1 > 0 else 201
        np.testing.assert_allclose(run["path"][:agree], expected[:agree], rtol=0, atol=1e-9, err_msg=name)
        assert run["lr"] == lr and run["diverged"] == (len(expected) < STEPS[surface] + 1)
        last = run["path"][-1]
        assert run["final_loss"] == pytest.approx(float(SURFACES[surface].f(torch.tensor(last))))
        assert run["distance"] == pytest.approx(np.linalg.norm(last - np.array(SURFACES[surface].minimum)))


def test_the_toggles_choose_the_paths_and_leave_the_others_unchanged(visual):
    everything = visual.compute(surface="quadratic")["runs"]
    for shown in itertools.product(("on", "off"), repeat=3):
        runs = visual.compute(surface="quadratic", show_momentum=shown[0], show_rmsprop=shown[1],
                              show_adam=shown[2])["runs"]
        assert list(runs) == [name for name, on in zip(OPTIMIZER_NAMES, shown) if on == "on"]
        for name, run in runs.items():
            np.testing.assert_array_equal(run["path"], everything[name]["path"])


def test_a_cached_path_cannot_be_changed_by_a_caller(visual):
    path = visual.compute()["runs"]["Adam"]["path"]
    with pytest.raises(ValueError, match="read-only"):
        path[0, 0] = 0.0


@pytest.mark.parametrize("surface", list(SURFACES))
def test_defaults_converge_and_momentum_beats_plain_descent(visual, surface):
    runs = visual.compute(surface=surface)["runs"]
    assert runs["momentum"]["distance"] < 0.1 and runs["Adam"]["distance"] < 0.3
    plain = visual.compute(surface=surface, beta1=0.0)["runs"]["momentum"]
    assert runs["momentum"]["distance"] < 0.2 * plain["distance"]


def test_heavy_momentum_at_twice_the_rate_diverges_on_rosenbrock(visual):
    runs = visual.compute(surface="rosenbrock", lr_scale=2, beta1=0.99)["runs"]
    assert runs["momentum"]["diverged"] and not runs["Adam"]["diverged"]


def test_controls_without_effect_are_named_and_really_change_nothing(visual):
    assert visual.inactive() == {}
    assert set(visual.inactive(show_momentum="off", show_adam="off")) == {"beta1"}
    assert set(visual.inactive(show_rmsprop="off", show_adam="off")) == {"beta2"}
    assert set(visual.inactive(show_momentum="off", show_rmsprop="off", show_adam="off")) == {
        "lr_scale", "beta1", "beta2"}
    explorer = explore(visual)
    for toggles in itertools.product(("on", "off"), repeat=3):
        state = dict(zip(("show_momentum", "show_rmsprop", "show_adam"), toggles))
        reasons = visual.inactive(**state)
        frame = explorer.render(**state)  # once per state, not once per control compared with it
        for control, other in (("lr_scale", 2), ("beta1", 0.0), ("beta2", 0.9)):
            changed = frame != explorer.render(**state, **{control: other})
            assert changed == (control not in reasons), (state, control)


def test_renders_webp_and_stays_under_300_frames():
    explorer = explore(TrajectoryExplorer(grid_size=40))
    settings = [{}, {"surface": "quadratic", "show_rmsprop": "off", "beta1": 0.0}, {"lr_scale": 2, "beta1": 0.99}]
    pictures = [explorer.render(**values) for values in settings]
    assert all(png[8:12] == WEBP_TAG for png in pictures)
    assert len(set(pictures)) == len(pictures)
    assert int(np.prod([len(c.values) for c in TrajectoryExplorer.controls])) <= 300


# ---- MomentumRateExplorer ------------------------------------------------------------------------
from lib.part1_blocks.heavy_ball import iteration_matrix  # noqa: E402
from lib.widgets.optim import RATE_CURVATURES, RATE_GRID, MomentumRateExplorer  # noqa: E402


@pytest.mark.parametrize("lr, beta", [(0.02, 0.0), (0.095, 0.41), (0.132, 0.41), (0.2, 0.9), (0.05, 0.6)])
def test_rate_explorer_shows_the_spectral_radius_of_each_direction(lr, beta):
    data = MomentumRateExplorer().compute(lr=lr, beta=beta)
    grid = torch.from_numpy(RATE_GRID)
    radius = torch.linalg.eigvals(iteration_matrix(grid, lr, beta)).abs().max(-1).values.numpy()
    np.testing.assert_allclose(data["rates"], radius, atol=1e-7)
    np.testing.assert_allclose(data["gd_rates"], np.abs(1 - lr * RATE_GRID), atol=1e-12)
    dots = torch.linalg.eigvals(iteration_matrix(torch.tensor(RATE_CURVATURES, dtype=torch.float64), lr, beta))
    np.testing.assert_allclose(data["dots"], dots.abs().max(-1).values.numpy(), atol=1e-7)
    if beta > 0:  # inside the band the rate is √β, outside it is larger
        low, high = data["band"]
        inside = (RATE_GRID > low) & (RATE_GRID < high)
        np.testing.assert_allclose(data["rates"][inside], beta**0.5, atol=1e-12)
        assert (data["rates"][~inside] >= beta**0.5 - 1e-12).all()
        # and the band is exactly where the roots are complex: the discriminant of
        # z² - (1 + β - αλ) z + β is negative inside it and not outside (so a band
        # drawn too narrow or too wide on either side fails here).
        discriminant = (1 + beta - lr * RATE_GRID) ** 2 - 4 * beta
        assert (discriminant[inside] < 0).all() and (discriminant[~inside] >= -1e-12).all()
        assert (data["rates"][~inside & (np.abs(discriminant) > 1e-6)] > beta**0.5 + 1e-9).all()
    else:
        assert data["band"] is None


def test_rate_explorer_near_polyaks_optimum_beats_gradient_descent():
    explorer = MomentumRateExplorer()
    assert explorer.compute(lr=0.132, beta=0.41)["worst"] < 0.65 < 0.9 <= explorer.compute()["worst"]


def test_rate_explorer_renders_each_setting_differently():
    explorer = explore(MomentumRateExplorer())
    pictures = [explorer.render(lr=lr, beta=beta) for lr, beta in ((0.095, 0.0), (0.132, 0.41), (0.2, 0.9))]
    assert all(png[8:12] == WEBP_TAG for png in pictures) and len(set(pictures)) == 3
