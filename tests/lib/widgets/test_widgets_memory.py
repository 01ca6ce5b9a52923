"""The visuals of chapter 12 (lib.widgets.memory): pure ``compute`` against lib and by hand,
plus smoke tests that each one renders through :func:`lib.widgets.explore`."""
import numpy as np
import pytest
import torch

from lib.part5_memory.hopfield import HopfieldNetwork, energy, hebbian_weights, update_async, update_sync
from lib.part5_memory.ntm import content_weights, read
from lib.widgets import explore
from lib.part5_memory.modern_hopfield import modern_update
from lib.widgets.memory import LETTERS, HopfieldRecall, ModernHopfieldBeta, NTMMemoryStepper, letter_patterns

WEBP_TAG = b"WEBP"  # bytes 8-11 of a WebP file: frames are lossless WebP


@pytest.fixture(scope="module")
def stepper():
    return NTMMemoryStepper()


@pytest.fixture(scope="module")
def hopfield():
    return HopfieldRecall()


# ---------------------------------------------------------------------------
# NTMMemoryStepper
# ---------------------------------------------------------------------------


def test_step_zero_shows_the_old_memory_and_no_head_activity(stepper):
    data = stepper.compute(step=0)
    np.testing.assert_array_equal(data["memory"], stepper.old[0].numpy())
    assert not data["write"].any() and not data["read"].any() and np.isnan(data["vectors"]).all()


def test_full_erase_and_add_store_the_items_in_slots_0_to_3_by_location(stepper):
    data = stepper.compute(step=4, erase=1.0, add=1.0)
    for t in range(4):
        np.testing.assert_array_equal(data["memory"][t], stepper.items[f"a{t + 1}"].numpy())
    np.testing.assert_array_equal(data["memory"][4:], stepper.old[0, 4:].numpy())  # untouched
    np.testing.assert_array_equal(data["write"], np.eye(8)[3])  # the last write went to slot 3


def test_erase_and_add_strengths_follow_the_write_formula(stepper):
    old, item = stepper.old[0, 0].numpy(), stepper.items["a1"].numpy()
    for erase in (0.0, 0.5, 1.0):
        for add in (0.0, 0.5, 1.0):
            slot = stepper.compute(step=1, erase=erase, add=add)["memory"][0]
            np.testing.assert_allclose(slot, old * (1 - erase) + add * item)


def test_content_read_uses_the_noisy_key_and_the_key_strength(stepper):
    for beta in (1.0, 30.0):
        data = stepper.compute(step=5, beta=beta)
        memory = torch.tensor(data["memory"])[None]
        expected = content_weights(memory, stepper.keys[5][None], torch.tensor([beta], dtype=torch.float64))
        np.testing.assert_allclose(data["read"], expected[0].numpy())
        np.testing.assert_allclose(data["vectors"][2], read(memory, expected)[0].numpy())
    assert stepper.compute(step=5, beta=30.0)["read"].argmax() == 1  # a2 sits in slot 1
    assert stepper.compute(step=5, beta=1.0)["read"].max() < 0.3  # a weak key blurs the read


def test_overwrite_then_read_back_b_with_a_sharp_key(stepper):
    data = stepper.compute(step=7, erase=1.0, add=1.0, beta=30.0)
    b = stepper.items["b"].numpy()
    np.testing.assert_allclose(data["memory"][2], b, atol=1e-3)  # a3's slot now holds b
    np.testing.assert_allclose(data["vectors"][2], b, atol=1e-2)
    assert "read by content, key = b" in data["caption"]


# ---------------------------------------------------------------------------
# HopfieldRecall
# ---------------------------------------------------------------------------


def test_the_four_letters_are_stored_as_fixed_points():
    patterns = letter_patterns()
    assert patterns.shape == (4, 100) and list(LETTERS) == ["A", "T", "X", "L"]
    weights = hebbian_weights(patterns)
    assert torch.equal(update_sync(weights, patterns), patterns)


def test_hopfield_trajectory_is_the_asynchronous_run_in_the_fixed_order(hopfield):
    network = HopfieldNetwork(hopfield.patterns)
    data = hopfield.compute(letter="T", noise=0.3, updates=50)
    cue = torch.tensor(data["cue"]).flatten()
    assert int((cue != hopfield.patterns[1]).sum()) == 30
    state = torch.tensor(data["state"]).flatten()
    torch.testing.assert_close(state, update_async(network.weights, cue, hopfield.order[:50]))
    assert data["energy"][50] == pytest.approx(energy(network.weights, state).item())
    assert data["flipped"] == int((state != hopfield.patterns[1]).sum())


@pytest.mark.parametrize("letter", list(LETTERS))
def test_energy_never_rises_and_moderate_noise_is_cleaned_up(hopfield, letter):
    data = hopfield.compute(letter=letter, noise=0.2, updates=300)
    assert np.all(np.diff(data["energy"]) <= 1e-12)
    assert data["flipped"] == 0 and data["overlap"] == 1.0
    np.testing.assert_array_equal(data["state"], data["target"])


# ---------------------------------------------------------------------------
# Rendering through the explorer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "visual, settings",
    [
        (NTMMemoryStepper, [{}, {"step": 6, "erase": 0.5, "add": 1.0, "beta": 3.0}]),
        (HopfieldRecall, [{}, {"letter": "X", "noise": 0.4, "updates": 100}]),
    ],
)
def test_each_visual_renders_png_for_several_settings(visual, settings):
    explorer = explore(visual())
    pictures = [explorer.render(**values) for values in settings]
    assert all(png[8:12] == WEBP_TAG for png in pictures)
    assert len(set(pictures)) == len(pictures), "different settings must give different pictures"


@pytest.mark.parametrize("visual", [NTMMemoryStepper, HopfieldRecall])
def test_static_players_stay_below_300_frames(visual):
    assert int(np.prod([len(c.values) for c in visual.controls])) <= 300


@pytest.mark.parametrize("visual", [NTMMemoryStepper, HopfieldRecall])
def test_every_control_changes_the_data_from_the_defaults(visual):
    # The static player starts at the defaults; a control that changes nothing there looks broken.
    instance = visual()
    defaults = {c.name: c.default if c.default is not None else c.values[0] for c in visual.controls}
    reference = instance.compute(**defaults)
    for control in visual.controls:
        changed = False
        for value in control.values:
            data = instance.compute(**{**defaults, control.name: value})
            changed |= any(not np.array_equal(np.asarray(data[k]), np.asarray(reference[k]), equal_nan=True)
                           if isinstance(reference[k], np.ndarray) else data[k] != reference[k] for k in reference)
        assert changed, f"control {control.name!r} changes nothing from the defaults"


# ---------------------------------------------------------------------------
# ModernHopfieldBeta
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def modern():
    return ModernHopfieldBeta()


def test_modern_state_is_one_update_written_out(modern):
    data = modern.compute(letter="T", noise=0.3, beta=0.1)
    cue = torch.tensor(data["cue"]).flatten()
    scores = torch.tensor([0.1 * float(x @ cue) for x in modern.patterns], dtype=torch.float64)
    weights = scores.exp() / scores.exp().sum()
    np.testing.assert_allclose(data["weights"], weights.numpy(), rtol=1e-12)
    np.testing.assert_allclose(data["state"].flatten(), (weights @ modern.patterns).numpy(), rtol=1e-12, atol=1e-15)
    assert (cue != modern.patterns[1]).sum() == 30  # 30% of the T flipped
    np.testing.assert_array_equal(data["state"].flatten(), modern_update(modern.patterns, cue, 0.1).numpy())


def test_modern_small_beta_averages_large_beta_retrieves(modern):
    for letter in LETTERS:
        blur = modern.compute(letter=letter, noise=0.1, beta=0.003)
        assert blur["weights"].max() - blur["weights"].min() < 0.25 and blur["error"] > 0.7
        sharp = modern.compute(letter=letter, noise=0.1, beta=1.0)
        assert sharp["error"] < 1e-6 and sharp["nearest"] == letter and sharp["weights"].max() > 1 - 1e-6


def test_modern_too_much_noise_retrieves_another_letter(modern):
    data = modern.compute(letter="A", noise=0.45, beta=1.0)
    assert data["nearest"] == "L" and data["error"] > 1


def test_modern_tied_cue_ends_in_a_mix_of_two_letters(modern):
    # the X cue at noise 0.45 has dot product 14 with both A and T: even at β = 1 the weight
    # splits evenly between them, and the update returns a blend of the two (the chapter's text)
    data = modern.compute(letter="X", noise=0.45, beta=1.0)
    weights = data["weights"]
    assert weights[0] == pytest.approx(weights[1], rel=1e-12) and 0.49 < weights.max() < 0.5
    assert weights[2] < 0.01 and data["error"] > 1
    assert f"{weights.max():.3f}" == "0.495"
    assert modern.compute(letter="A", noise=0.45, beta=1.0)["weights"][3] > 0.98  # A cue: L takes it


def test_modern_explorer_renders_a_frame_per_beta(modern):
    explorer = explore(modern)
    frames = {explorer._draw({"beta": beta}).tobytes() for beta in modern.betas}
    assert len(frames) == len(modern.betas)
