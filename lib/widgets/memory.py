"""Interactive figures of chapter 12 (memory-augmented networks).

Each visual is a pure ``compute`` (tested in ``tests/lib/widgets/test_widgets_memory.py``)
plus ``draw``/``update`` that only move matplotlib artists.
"""
from __future__ import annotations

import textwrap

import numpy as np
import torch

from lib.part5_memory.hopfield import energy, flip_bits, hebbian_weights, update_async
from lib.part5_memory.modern_hopfield import modern_update, retrieval_weights
from lib.part5_memory.ntm import circular_shift, content_weights, read, write
from lib.widgets.core import Choice, Slider, Visual

# ---------------------------------------------------------------------------
# NTM memory stepper
# ---------------------------------------------------------------------------


class NTMMemoryStepper(Visual):
    """A scripted sequence of NTM writes and reads on a memory of 8 slots of size 6.

    Steps 1-4 write the items ``a1 .. a4`` by *location*: the write weighting of the
    previous step, shifted one slot on (it starts on the last slot, so the first
    write wraps around to slot 0). Step 5 reads by *content* with a noisy copy of
    ``a2`` as key; step 6 overwrites, by content, the slot that holds ``a3`` with a
    new item ``b``; step 7 reads ``b`` back by content. Erase and add strengths
    scale the erase vector ``e = strength * 1`` and the add vector ``a = strength * item``;
    the key strength ``beta`` sharpens the content lookups of steps 5-7.
    """

    title = "NTM memory: writing and reading step by step"
    caption = (
        "A scripted run of Neural Turing Machine writes and reads on 8 memory slots: four writes by "
        "location, then reads and an overwrite by content. Step through it, then weaken the erase, add "
        "or key strength β to see what the memory keeps and how sharp the lookups are."
    )
    figsize = (4.8, 6.4)
    slots, size = 8, 6
    controls = (
        Slider("step", tuple(range(8)), default=6, label="step"),
        Slider("erase", (0.0, 0.5, 1.0), default=1.0, label="erase strength", fmt=".1f"),
        Slider("add", (0.0, 0.5, 1.0), default=1.0, label="add strength", fmt=".1f"),
        Slider("beta", (1.0, 3.0, 10.0, 30.0), default=10.0, label="key strength β"),
    )

    def __init__(self, seed: int = 0):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.old = (0.6 * torch.randn(1, self.slots, self.size)).clamp(-1, 1).double()  # (1, N, D) old content
            items = torch.randint(0, 2, (5, self.size)).double() * 2 - 1  # (5, D): a1..a4 and b, entries +-1
        self.items = {name: items[i] for i, name in enumerate(("a1", "a2", "a3", "a4", "b"))}
        noisy = self.items["a2"].clone()
        noisy[0] = -noisy[0]  # one wrong entry: the key is a cue, not an exact copy
        self.keys = {5: noisy, 6: self.items["a3"], 7: self.items["b"]}

    def compute(self, step=6, erase=1.0, add=1.0, beta=10.0):
        """Memory and weightings after ``step`` steps of the script.

        Returns
        -------
        dict
            ``memory`` ``(N, D)``; ``write`` and ``read`` weightings ``(N,)`` of the
            last step (zeros for a head that did not act); ``vectors`` ``(3, D)``: the
            key, the add vector and the read vector of the last step (NaN where
            unused); ``caption``.
        """
        memory = self.old.clone()  # (1, N, D)
        location = torch.nn.functional.one_hot(torch.tensor([self.slots - 1]), self.slots).double()  # (1, N)
        forward = torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64)  # shift +1 for sure
        strength = torch.tensor([beta], dtype=torch.float64)
        nothing = torch.zeros(self.slots, dtype=torch.float64)
        written, was_read = nothing, nothing
        vectors = np.full((3, self.size), np.nan)
        caption = "start: old contents, nothing written yet"
        for t in range(1, step + 1):
            written, was_read, vectors = nothing, nothing, np.full((3, self.size), np.nan)
            if t <= 4:
                item = self.items[f"a{t}"]
                location = circular_shift(location, forward)  # (1, N)
                memory = write(memory, location, erase * torch.ones(1, self.size, dtype=torch.float64),
                               add * item[None])
                written, vectors[1] = location[0], add * item.numpy()
                caption = f"write a{t} by location: previous slot + 1 (slot {t - 1})"
            elif t in (5, 7):
                key = self.keys[t]
                weights = content_weights(memory, key[None], strength)  # (1, N)
                was_read = weights[0]
                vectors[0], vectors[2] = key.numpy(), read(memory, weights)[0].numpy()
                caption = "read by content, key = a2 with one entry flipped" if t == 5 else "read by content, key = b"
            else:
                key, item = self.keys[6], self.items["b"]
                weights = content_weights(memory, key[None], strength)  # (1, N)
                memory = write(memory, weights, erase * torch.ones(1, self.size, dtype=torch.float64), add * item[None])
                written = weights[0]
                vectors[0], vectors[1] = key.numpy(), add * item.numpy()
                caption = "overwrite by content: key = a3, add b"
        return {
            "memory": memory[0].numpy(), "write": written.numpy(), "read": was_read.numpy(),
            "vectors": vectors, "caption": f"step {step}: {caption}",
        }

    def inactive(self, step=6, erase=1.0, add=1.0, beta=10.0):
        """Step 0 writes nothing; steps 1 to 4 address by location, where the key strength plays no part."""
        reasons = {}
        if step == 0:
            reasons["erase"] = reasons["add"] = "step 0 shows the memory before any write"
        if step <= 4:
            reasons["beta"] = "steps 0 to 4 address by location; β sharpens content addressing (steps 5 to 7)"
        return reasons

    def _picture(self, data) -> np.ndarray:
        """Memory rows, a blank row, then the key, add and read vectors: one image, one axes (fast to draw)."""
        return np.ma.masked_invalid(np.vstack([data["memory"], np.full((1, self.size), np.nan), data["vectors"]]))

    def draw(self, fig, data):
        # Stacked, so that each keeps the full width on a phone.
        memory_ax, weight_ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": (1.3, 1)})
        slots = np.arange(self.slots)
        picture = memory_ax.imshow(self._picture(data), cmap="RdBu_r", vmin=-2, vmax=2, aspect="auto")
        labels = [f"slot {i}" for i in slots] + ["", "key $\\mathbf{k}$", "add $\\mathbf{a}$", "read $\\mathbf{r}$"]
        memory_ax.set_yticks(range(len(labels)), labels)
        memory_ax.set_xticks([])
        memory_ax.set_title("memory $\\mathbf{M}$, then the step's vectors\n(red > 0 > blue, range ±2)")
        write_bars = weight_ax.barh(slots - 0.2, data["write"], height=0.4, color="tab:orange", label="write")
        read_bars = weight_ax.barh(slots + 0.2, data["read"], height=0.4, color="tab:blue", label="read")
        weight_ax.set_xlim(0, 1)
        weight_ax.set_xticks([0, 0.5, 1])
        weight_ax.set_ylim(self.slots - 0.5, -0.5)
        weight_ax.set_yticks(slots, [f"slot {i}" for i in slots])
        weight_ax.set_title("weightings $\\mathbf{w}_t$ over the slots")
        weight_ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # beside the bars, not on them
        caption = fig.suptitle("\n")
        handles = {"picture": picture, "write": write_bars, "read": read_bars, "caption": caption}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        handles["picture"].set_data(self._picture(data))
        for name in ("write", "read"):
            for bar, value in zip(handles[name], data[name]):
                bar.set_width(value)
        lines = textwrap.wrap(data["caption"], 40)
        handles["caption"].set_text("\n".join(lines + [" "] * (2 - len(lines))))  # always two lines: a fixed layout


# ---------------------------------------------------------------------------
# Hopfield recall
# ---------------------------------------------------------------------------

LETTERS = {
    "A": ("...####...", "..##..##..", ".##....##.", ".##....##.", ".########.",
          ".########.", ".##....##.", ".##....##.", ".##....##.", ".##....##."),
    "T": ("##########", "##########", "....##....", "....##....", "....##....",
          "....##....", "....##....", "....##....", "....##....", "....##...."),
    "X": ("##......##", ".##....##.", "..##..##..", "...####...", "....##....",
          "....##....", "...####...", "..##..##..", ".##....##.", "##......##"),
    "L": ("##........", "##........", "##........", "##........", "##........",
          "##........", "##........", "##........", "##########", "##########"),
}


def letter_patterns() -> torch.Tensor:
    """The four 10 x 10 letters A, T, X, L as ``+-1`` patterns, ``(4, 100)`` float64 (``#`` = +1)."""
    return torch.tensor(
        [[1.0 if c == "#" else -1.0 for row in rows for c in row] for rows in LETTERS.values()], dtype=torch.float64
    )


class HopfieldRecall(Visual):
    """Recall of a stored letter from a noisy cue by asynchronous updates.

    A Hopfield network of 100 units stores the letters A, T, X and L. The cue is
    the chosen letter with a share of its pixels flipped; the network then updates
    one unit at a time in a fixed random order (three sweeps of 100 updates).
    """

    title = "Hopfield recall"
    caption = (
        "A 100-unit Hopfield network that stores A, T, X and L recalls a letter from a noisy cue, one "
        "unit update at a time. Raise the noise and step through the updates to find how much noise "
        "recall survives."
    )
    figsize = (4.8, 4.4)
    updates = (0, 10, 25, 50, 75, 100, 150, 200, 300)
    noises = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
    controls = (
        Choice("letter", tuple(LETTERS), default="A", label="letter"),
        Slider("noise", noises, default=0.3, label="noise (share flipped)", fmt=".1f"),
        Slider("updates", updates, default=0, label="single-unit updates"),
    )

    def __init__(self, seed: int = 0):
        self.patterns = letter_patterns()  # (4, 100)
        self.weights = hebbian_weights(self.patterns)  # (100, 100)
        generator = torch.Generator().manual_seed(seed)
        sweeps = max(self.updates) // 100
        self.order = torch.cat([torch.randperm(100, generator=generator) for _ in range(sweeps)])  # (300,)
        # Every (letter, noise) trajectory, computed once as one batch: compute() only looks things up.
        combos = [(letter, noise) for letter in LETTERS for noise in self.noises]
        targets = self.patterns.repeat_interleave(len(self.noises), dim=0)  # (C, 100), in the order of combos
        cues = torch.cat([flip_bits(targets[i:i + 1], noise, generator) for i, (_, noise) in enumerate(combos)])
        states = [cues]
        for unit in self.order:
            states.append(update_async(self.weights, states[-1], unit[None]))
        paths = torch.stack(states, dim=1)  # (C, 301, 100)
        energies = energy(self.weights, paths)  # (C, 301)
        self.cues = {combo: cues[i] for i, combo in enumerate(combos)}
        self.trajectories = {combo: paths[i] for i, combo in enumerate(combos)}
        self.energies = {combo: energies[i] for i, combo in enumerate(combos)}

    def compute(self, letter="A", noise=0.3, updates=0):
        """Cue, current state and target images and the energy along the run.

        Returns
        -------
        dict
            ``cue``, ``state``, ``target``: ``(10, 10)`` arrays of ``+-1``;
            ``energy``: ``(301,)`` energies after each update; ``updates``;
            ``overlap`` of the state with the target; ``flipped``: how many pixels
            still differ.
        """
        target = self.patterns[list(LETTERS).index(letter)]
        state = self.trajectories[letter, noise][updates]
        return {
            "cue": self.cues[letter, noise].reshape(10, 10).numpy(),
            "state": state.reshape(10, 10).numpy(),
            "target": target.reshape(10, 10).numpy(),
            "energy": self.energies[letter, noise].numpy(),
            "updates": updates,
            "overlap": float((state * target).mean()),
            "flipped": int((state != target).sum()),
        }

    def draw(self, fig, data):
        grid = fig.add_gridspec(2, 3, height_ratios=(1.4, 1))
        images = {}
        for column, (name, title) in enumerate((("cue", "noisy cue"), ("state", "state"), ("target", "stored"))):
            ax = fig.add_subplot(grid[0, column])
            images[name] = ax.imshow(data[name], cmap="gray_r", vmin=-1, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            images[name + "_title"] = ax.set_title(title)
        energy_ax = fig.add_subplot(grid[1, :])
        steps = np.arange(len(data["energy"]))
        curve, = energy_ax.plot(steps, data["energy"], color="tab:purple")
        marker, = energy_ax.plot([0], [data["energy"][0]], "o", color="black")
        # One energy range for every letter and noise: the tick labels, and so the layout, never change.
        every = torch.cat(list(self.energies.values()))
        low, high = float(every.min()), float(every.max())
        energy_ax.set_ylim(low - 0.05 * (high - low + 1), high + 0.05 * (high - low + 1))
        energy_ax.set_xlabel("single-unit updates")
        energy_ax.set_ylabel("energy $E$")
        state_note = fig.suptitle("")
        handles = {**images, "ax": energy_ax, "curve": curve, "marker": marker, "state_note": state_note}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        for name in ("cue", "state", "target"):
            handles[name].set_data(data[name])
        handles["state_note"].set_text(
            f"after {data['updates']} updates: {data['flipped']} units wrong, overlap $m$ = {data['overlap']:.2f}"
        )
        energies = data["energy"]
        handles["curve"].set_ydata(energies)
        handles["marker"].set_data([data["updates"]], [energies[data["updates"]]])


# ---------------------------------------------------------------------------
# Modern Hopfield retrieval against beta
# ---------------------------------------------------------------------------


class ModernHopfieldBeta(Visual):
    """One update of a modern Hopfield network (Ramsauer et al., 2021) that stores the
    letters A, T, X and L as continuous patterns, from a noisy cue, against ``beta``.

    The update is ``xi_new = X softmax(beta X^T xi)``: the bars show the softmax
    weights over the four letters, the middle image the weighted average it returns.
    """

    title = "Modern Hopfield retrieval against β"
    caption = (
        "One update of a modern Hopfield network that stores A, T, X and L: the softmax weights over the "
        "letters and the state they average to. Raise β from a blur of all four letters to a single one, "
        "and raise the noise until the nearest letter is no longer the cue's."
    )
    figsize = (4.8, 4.4)
    betas = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
    noises = (0.1, 0.3, 0.45)
    controls = (
        Choice("letter", tuple(LETTERS), default="A", label="letter"),
        Slider("noise", noises, default=0.3, label="noise (share flipped)", fmt=".2f"),
        Slider("beta", betas, default=0.03, label="inverse temperature β", fmt="g"),
    )

    def __init__(self, seed: int = 0):
        self.patterns = letter_patterns()  # (4, 100)
        generator = torch.Generator().manual_seed(seed)
        self.cues = {
            (letter, noise): flip_bits(self.patterns[i : i + 1], noise, generator)[0]
            for i, letter in enumerate(LETTERS)
            for noise in self.noises
        }  # (letter, noise) -> (100,)

    def compute(self, letter="A", noise=0.3, beta=0.03):
        """Cue, updated state and stored letter as images, and the weights.

        Returns
        -------
        dict
            ``cue``, ``state``, ``target``: ``(10, 10)`` arrays (the cue and the
            target ``+-1``, the state continuous); ``weights``: ``(4,)`` softmax
            weights over A, T, X, L; ``error``: ``|xi_new - x| / |x|`` with the
            cue's letter ``x``; ``nearest``: the letter closest to the new state.
        """
        cue = self.cues[letter, noise]
        target = self.patterns[list(LETTERS).index(letter)]
        state = modern_update(self.patterns, cue, beta)  # (100,)
        distances = (self.patterns - state).norm(dim=-1)  # (4,)
        return {
            "cue": cue.reshape(10, 10).numpy(),
            "state": state.reshape(10, 10).numpy(),
            "target": target.reshape(10, 10).numpy(),
            "weights": retrieval_weights(self.patterns, cue, beta).numpy(),
            "error": float((state - target).norm() / target.norm()),
            "nearest": list(LETTERS)[int(distances.argmin())],
            "beta": beta,
        }

    def draw(self, fig, data):
        grid = fig.add_gridspec(2, 3, height_ratios=(1.4, 1))
        images = {}
        titles = (("cue", "noisy cue ξ"), ("state", "one update"), ("target", "stored"))
        for column, (name, title) in enumerate(titles):
            ax = fig.add_subplot(grid[0, column])
            images[name] = ax.imshow(data[name], cmap="gray_r", vmin=-1, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(title)
        bars_ax = fig.add_subplot(grid[1, :])
        bars = bars_ax.bar(list(LETTERS), data["weights"], color="tab:purple")
        bars_ax.set_ylim(0, 1.05)
        bars_ax.set_title("softmax weights", fontsize="medium")
        note = fig.suptitle("")
        handles = {**images, "bars": bars, "note": note}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        for name in ("cue", "state", "target"):
            handles[name].set_data(data[name])
        for bar, weight in zip(handles["bars"], data["weights"]):
            bar.set_height(weight)
        handles["note"].set_text(
            f"β = {data['beta']:g}: error {data['error']:.2f}, nearest {data['nearest']}"
        )
