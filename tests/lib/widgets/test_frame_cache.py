"""Explorer frames rendered once: the frame cache of lib.widgets.core (``BOOK_FRAME_CACHE``).

A cached player must be byte for byte the player rendered without the cache, a warm cache must
render nothing, and anything a frame depends on must change its key (no stale frame).
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lib.widgets.core as core
from lib.widgets import Slider, Visual, explore
from lib.widgets.activations import MarginLossExplorer
from lib.widgets.attention import ScalingSaturation
from lib.widgets.core import FRAME_CACHE_ENV, TIMINGS_ENV

ROOT = Path(__file__).resolve().parents[3]


class Scaled(Visual):
    """A bar chart of a vector held by the visual, times a slider's factor."""

    title = "Scaled bars"
    figsize = (2.0, 1.5)
    controls = (Slider("factor", (0.5, 1.0, 2.0), default=1.0),)

    def __init__(self, heights):
        self.heights = heights  # a tensor: its values are part of every frame's key

    def compute(self, factor=1.0):
        return {"heights": (self.heights * factor).numpy()}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        ax.set_ylim(0, 8)
        return ax.bar(range(len(data["heights"])), data["heights"])

    def update(self, bars, data):
        for bar, height in zip(bars, data["heights"]):
            bar.set_height(height)


@pytest.fixture
def count_renders(monkeypatch):
    """How many frames were rasterised and encoded (not taken from the cache)."""
    calls = []
    encode = core._palette_webp
    monkeypatch.setattr(core, "_palette_webp", lambda image, *a: calls.append(1) or encode(image, *a))
    return calls


def player(visual, monkeypatch, cache=None) -> str:
    monkeypatch.delenv(TIMINGS_ENV, raising=False)
    if cache is None:
        monkeypatch.delenv(FRAME_CACHE_ENV, raising=False)
    else:
        monkeypatch.setenv(FRAME_CACHE_ENV, str(cache))
    return explore(visual).to_html()


def test_a_cached_player_is_the_uncached_one_byte_for_byte(tmp_path, monkeypatch, count_renders):
    heights = torch.tensor([1.0, 3.0, 2.0])
    uncached = player(Scaled(heights), monkeypatch)
    rendered_without = len(count_renders)
    cold = player(Scaled(heights), monkeypatch, tmp_path)
    rendered_cold = len(count_renders) - rendered_without
    warm = player(Scaled(heights.clone()), monkeypatch, tmp_path)
    assert uncached == cold == warm
    assert rendered_without == rendered_cold == 3
    assert len(count_renders) == rendered_without + rendered_cold, "a warm cache rendered a frame"
    assert len(list(tmp_path.glob("*.webp"))) == 3 and not list(tmp_path.glob("*.part"))


def test_a_book_explorer_cached_equals_uncached(tmp_path, monkeypatch, count_renders):
    from test_widgets import player_data

    # The book's explorer with the fewest frames (10, all distinct), whose state holds tensors.
    uncached = player(ScalingSaturation(), monkeypatch)
    assert len(count_renders) == 10 and len(set(player_data(uncached)["frames"])) == 10
    assert player(ScalingSaturation(), monkeypatch, tmp_path) == uncached
    before_warm = len(count_renders)
    assert player(ScalingSaturation(), monkeypatch, tmp_path) == uncached
    assert len(count_renders) == before_warm


def test_what_a_frame_depends_on_changes_its_key():
    base = explore(Scaled(torch.tensor([1.0, 3.0, 2.0])))
    key = base.frame_key(base.visual.compute(factor=2.0))
    assert key == explore(Scaled(torch.tensor([1.0, 3.0, 2.0]))).frame_key(
        {"heights": np.array([2.0, 6.0, 4.0], dtype=np.float32)})
    # the frame's own data, the visual's state (here also its defaults' data), the resolution
    assert base.frame_key(base.visual.compute(factor=0.5)) != key
    other_state = explore(Scaled(torch.tensor([1.0, 3.0, 2.5])))
    assert other_state.frame_key(base.visual.compute(factor=2.0)) != key
    assert core.Explorer(base.visual, dpi=90).frame_key(base.visual.compute(factor=2.0)) != key


def test_the_code_that_draws_a_visual_is_part_of_its_key():
    from lib.widgets.attention import AttentionHeatmap

    digest = core._code_digest(AttentionHeatmap)
    assert digest == core._code_digest(AttentionHeatmap)
    assert digest != core._code_digest(MarginLossExplorer)
    assert digest != core._code_digest(Scaled)  # a module outside lib: its source is hashed too
    notebook_visual = type("InANotebook", (Scaled,), {"__module__": "not_a_file"})
    with pytest.raises(TypeError, match="no source file"):
        core._code_digest(notebook_visual)


def test_unpicklable_data_is_rendered_not_cached(tmp_path, monkeypatch, count_renders):
    class Unhashable(Scaled):
        def compute(self, factor=1.0):
            return {"heights": (self.heights * factor).numpy(), "format": lambda v: f"{v:.1f}"}

    assert explore(Unhashable(torch.ones(3))).frame_key({"format": lambda v: v}) is None
    player(Unhashable(torch.ones(3)), monkeypatch, tmp_path)
    assert len(count_renders) == 3 and not list(tmp_path.iterdir())


KEY_DATA = {"heights": torch.ones(2), "words": {"the", "cat", "sat", "on", "mat"}}
KEY_IN_A_NEW_PROCESS = """
import sys
import torch
sys.path.insert(0, "tests/lib/widgets")  # the name pytest imports this file by
from lib.widgets import explore
from test_frame_cache import KEY_DATA, Scaled
explorer = explore(Scaled(torch.tensor([1.0, 3.0, 2.0])))
print(list(KEY_DATA["words"]), explorer.frame_key(KEY_DATA))
"""


def test_a_key_is_the_same_in_every_process():
    """Tensors and sets pickle differently from process to process; the key does not.

    This process's key against one of a new process whose string hashing orders the set differently
    (the first such seed of 1, 2, 3; this process's own seed is random unless PYTHONHASHSEED is set).
    """
    key = explore(Scaled(torch.tensor([1.0, 3.0, 2.0]))).frame_key(KEY_DATA)
    assert Scaled.__module__ == "test_frame_cache" and len(key) == 64
    for seed in (1, 2, 3):
        order, other_key = subprocess.run(
            [sys.executable, "-c", KEY_IN_A_NEW_PROCESS], capture_output=True, text=True, check=True, cwd=ROOT,
            env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout.strip().rsplit(" ", 1)
        if order != str(list(KEY_DATA["words"])):
            break
    assert order != str(list(KEY_DATA["words"])), "no seed ordered the set differently"
    assert other_key == key
