"""Interactive figures of chapter 9 (attention mechanisms).

Each visual is a pure ``compute`` (tested in ``tests/lib/widgets/test_widgets_attention.py``)
plus ``draw``/``update`` that only move matplotlib artists.
"""
from __future__ import annotations

import numpy as np
import torch

from lib.part4_attention.attention import DotScore, MultiHeadAttention, ScaledDotScore, make_score, masked_softmax
from lib.widgets.core import Choice, Slider, Visual

SCORE_NAMES = ("dot", "scaled_dot", "additive", "bilinear")


class AttentionHeatmap(Visual):
    """Attention weights of 4 queries over up to 8 keys.

    The scores come from one of the four scoring functions, are divided by a
    temperature and pass through the masked softmax; keys at positions
    ``>= valid_len`` are padding and get weight 0.
    """

    title = "Attention heatmap"
    caption = (
        "Attention weights of 4 queries over up to 8 keys under the chosen scoring function; keys past "
        "the valid length are padding and get weight 0. Raise the temperature to flatten the rows, or "
        "shorten the valid length to watch the mask move the weight onto the remaining keys."
    )
    figsize = (4.8, 3.6)
    controls = (
        Choice("score", SCORE_NAMES, default="scaled_dot", label="scoring function"),
        Slider("temperature", (0.25, 0.5, 1.0, 2.0, 4.0), default=1.0, label="temperature"),
        Slider("n_keys", (4, 6, 8), default=8, label="number of keys"),
        Slider("valid_len", (1, 2, 4, 6, 8), default=6, label="valid length"),
    )

    n_queries, max_keys, dim = 4, 8, 8

    def __init__(self, seed: int = 0):
        # Fixed random queries, keys and score parameters: the picture changes only
        # when a control does. fork_rng leaves the caller's random state untouched.
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.queries = torch.randn(1, self.n_queries, self.dim)  # (1, T, D)
            self.keys = torch.randn(1, self.max_keys, self.dim)  # (1, S, D)
            self.scores = {
                name: make_score(name, self.dim, self.dim, hidden_dim=self.dim, rank=self.dim // 2)
                for name in SCORE_NAMES
            }

    def compute(self, score="scaled_dot", temperature=1.0, n_keys=8, valid_len=6):
        """Weights for one setting of the controls.

        Returns
        -------
        dict
            ``weights``: float array ``(n_queries, max_keys)``, NaN in columns
            ``>= n_keys`` (keys that do not exist); ``n_keys``; ``valid_len``
            (clipped to ``n_keys``).
        """
        valid_len = min(valid_len, n_keys)
        with torch.no_grad():
            scores = self.scores[score](self.queries, self.keys[:, :n_keys])  # (1, T, n_keys)
            weights = masked_softmax(scores / temperature, torch.tensor([valid_len]))
        grid = np.full((self.n_queries, self.max_keys), np.nan)
        grid[:, :n_keys] = weights[0].numpy()
        return {"weights": grid, "n_keys": n_keys, "valid_len": valid_len}

    def inactive(self, score="scaled_dot", temperature=1.0, n_keys=8, valid_len=6):
        """A valid length above the number of keys acts as that number."""
        if valid_len > n_keys:
            return {"valid_len": f"{valid_len} > {n_keys} keys, so every key is valid (add keys to use it)"}
        return {}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        image = ax.imshow(data["weights"], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, label="weight $\\alpha_i$")
        ax.set_xticks(range(self.max_keys), [f"$k_{j + 1}$" for j in range(self.max_keys)])
        ax.set_yticks(range(self.n_queries), [f"$q_{i + 1}$" for i in range(self.n_queries)])
        ax.set_xlabel("keys (dashes: end of the valid length)")
        texts = [
            [ax.text(j, i, "", ha="center", va="center") for j in range(self.max_keys)]
            for i in range(self.n_queries)
        ]
        boundary = ax.axvline(0, color="white", linestyle="--", linewidth=2)
        handles = {"ax": ax, "image": image, "texts": texts, "boundary": boundary}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        weights = data["weights"]
        handles["image"].set_data(np.ma.masked_invalid(weights))
        handles["ax"].set_xlim(-0.5, data["n_keys"] - 0.5)
        handles["boundary"].set_xdata([data["valid_len"] - 0.5] * 2)
        for i, row in enumerate(handles["texts"]):
            for j, text in enumerate(row):
                value = weights[i, j]
                # ".59" rather than "0.59": eight numbers a row fit a phone-wide frame.
                text.set_text("" if np.isnan(value) else f"{value:.2f}".removeprefix("0"))
                text.set_color("black" if value > 0.6 else "white")


class ScalingSaturation(Visual):
    """Why the dot product is divided by √d: scores and weights of one query over 10 keys.

    Query and key entries are independent standard normal numbers, so the dot
    product ``q·k`` has variance ``d``. Unscaled, its spread grows like ``√d`` and
    the softmax saturates to (almost) one-hot; scaled by ``1/√d``, the scores
    keep unit variance for every ``d`` and the weights stay spread out.
    """

    title = "Why scale by √d"
    caption = (
        "Scores and softmax weights of one query over 10 keys whose entries are random, in dimension d. "
        "Raise d with unscaled scores to watch the softmax saturate onto one key, then switch to scaled "
        "scores to keep the weights spread out."
    )
    figsize = (4.6, 4.8)
    dims = (4, 16, 64, 256, 1024)
    controls = (
        Slider("dim", dims, default=256, label="dimension d"),
        Choice("scaling", ("unscaled", "scaled"), default="unscaled", label="scores"),
    )

    n_keys = 10

    def __init__(self, seed: int = 1):
        # One fixed query and set of keys per dimension (the picture changes only
        # when a control does); fork_rng leaves the caller's random state untouched.
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.queries = {d: torch.randn(1, 1, d) for d in self.dims}  # (1, 1, d)
            self.keys = {d: torch.randn(1, self.n_keys, d) for d in self.dims}  # (1, S, d)
        self.score_modules = {"unscaled": DotScore(), "scaled": ScaledDotScore()}

    def compute(self, dim=256, scaling="unscaled"):
        """Scores, weights and the size of the softmax's Jacobian for one setting.

        Returns
        -------
        dict
            ``scores`` and ``weights``: float arrays ``(n_keys,)``; ``spread``: the
            standard deviation the scores have in theory (``√d`` unscaled, 1 scaled);
            ``max_weight``; ``jacobian_norm``: Frobenius norm of
            ``∂α/∂s = diag(α) − α αᵀ``, which tends to 0 as the softmax saturates.
        """
        with torch.no_grad():
            scores = self.score_modules[scaling](self.queries[dim], self.keys[dim])[0, 0]  # (S,)
            weights = masked_softmax(scores[None, None])[0, 0]  # (S,)
            jacobian = torch.diag(weights) - torch.outer(weights, weights)  # (S, S)
        return {
            "scores": scores.numpy().astype(float),
            "weights": weights.numpy().astype(float),
            "spread": float(np.sqrt(dim)) if scaling == "unscaled" else 1.0,
            "max_weight": float(weights.max()),
            "jacobian_norm": float(torch.linalg.matrix_norm(jacobian)),
            "dim": dim,
            "scaling": scaling,
        }

    def draw(self, fig, data):
        score_ax, weight_ax = fig.subplots(2, 1, sharex=True)  # stacked: full width each on a phone
        keys = np.arange(1, self.n_keys + 1)
        score_bars = score_ax.bar(keys, data["scores"], color="tab:blue")
        score_ax.axhline(0, color="black", linewidth=0.8)
        bands = [score_ax.axhline(0, color="tab:gray", linestyle="--", linewidth=1) for _ in range(2)]
        weight_bars = weight_ax.bar(keys, data["weights"], color="tab:orange")
        weight_ax.set_ylim(0, 1)
        weight_ax.set_xlabel("key $i$")
        for ax in (score_ax, weight_ax):
            ax.set_xticks(keys[::3])
        handles = {
            "score_ax": score_ax, "weight_ax": weight_ax, "bands": bands,
            "score_bars": score_bars, "weight_bars": weight_bars,
        }
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        for bar, value in zip(handles["score_bars"], data["scores"]):
            bar.set_height(value)
        for bar, value in zip(handles["weight_bars"], data["weights"]):
            bar.set_height(value)
        spread = data["spread"]
        for band, sign in zip(handles["bands"], (1, -1)):
            band.set_ydata([2 * sign * spread] * 2)
        limit = 1.15 * max(2.5 * spread, float(np.abs(data["scores"]).max()))
        handles["score_ax"].set_ylim(-limit, limit)
        score = "$q \\cdot k_i$" if data["scaling"] == "unscaled" else "$q \\cdot k_i / \\sqrt{d}$"
        handles["score_ax"].set_title(f"scores {score} (dashes: ±2 std)")
        handles["weight_ax"].set_title(
            f"weights $\\alpha_i$: max {data['max_weight']:.2f}; "
            f"$\\|\\partial\\alpha / \\partial s\\|$ = {data['jacobian_norm']:.2f}"
        )


class MultiHeadWeights(Visual):
    """The attention weights of every head of one multi-head self-attention layer.

    Six tokens attend to each other. The projection weights are fixed; the number
    of heads only changes how the 16 projected features are split (8 per head
    with 2 heads, 2 per head with 8 heads). The rows show, for the chosen query
    position, each head's distribution over the keys, with their average (what
    ``average_weights=True`` returns) on top.
    """

    title = "Multi-head attention: heads side by side"
    caption = (
        "Each head's attention over six tokens for one query position, with the average of the heads on "
        "top. Change the number of heads to split the same 16 features another way, and shorten the "
        "valid length to mask keys."
    )
    figsize = (4.8, 3.8)
    head_counts = (1, 2, 4, 8)
    controls = (
        Slider("num_heads", head_counts, default=4, label="number of heads"),
        Slider("query", (1, 2, 3, 4, 5, 6), default=1, label="query position"),
        Slider("valid_len", (3, 4, 5, 6), default=6, label="valid length"),
    )

    embed_dim, n_tokens = 16, 6

    def __init__(self, seed: int = 0):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            reference = MultiHeadAttention(self.embed_dim, max(self.head_counts))
            with torch.no_grad():
                # Freshly initialised heads are nearly uniform; a 6x larger query
                # projection sharpens them so that the heads visibly differ.
                reference.query_proj.weight.mul_(6.0)
            self.tokens = torch.randn(1, self.n_tokens, self.embed_dim)  # (1, T, E)
        state = reference.state_dict()
        self.layers = {}
        for heads in self.head_counts:
            layer = MultiHeadAttention(self.embed_dim, heads)
            layer.load_state_dict(state)  # the same parameters, split into `heads` heads
            self.layers[heads] = layer

    def compute(self, num_heads=4, query=1, valid_len=6):
        """Per-head weights of query position ``query`` (1-based).

        Returns
        -------
        dict
            ``weights``: float array ``(1 + max_heads, n_tokens)``; row 0 is the
            average over heads, row ``h`` is head ``h``; rows of absent heads are
            NaN; key positions ``>= valid_len`` have weight 0. Also ``num_heads``
            and ``valid_len``.
        """
        x = self.tokens
        with torch.no_grad():
            _, weights = self.layers[num_heads](
                x, x, x, valid_lens=torch.tensor([valid_len]), average_weights=False
            )  # (1, H, T, S)
        per_head = weights[0, :, query - 1].numpy().astype(float)  # (H, S)
        grid = np.full((1 + max(self.head_counts), self.n_tokens), np.nan)
        grid[0] = per_head.mean(axis=0)
        grid[1 : 1 + num_heads] = per_head
        return {"weights": grid, "num_heads": num_heads, "valid_len": valid_len, "query": query}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        n_rows = 1 + max(self.head_counts)
        image = ax.imshow(data["weights"], vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        fig.colorbar(image, ax=ax, label="weight $\\alpha_i$")
        ax.set_xticks(range(self.n_tokens), [f"$k_{j + 1}$" for j in range(self.n_tokens)])
        ax.set_yticks(range(n_rows), ["mean"] + [f"head {h}" for h in range(1, n_rows)])
        ax.set_xlabel("keys (dashes: end of the valid length)")
        separator = ax.axhline(0.5, color="white", linewidth=2)
        boundary = ax.axvline(0, color="white", linestyle="--", linewidth=2)
        # Numbers on the average row only: text is what makes a frame slow to draw.
        texts = [ax.text(j, 0, "", ha="center", va="center") for j in range(self.n_tokens)]
        handles = {"ax": ax, "image": image, "boundary": boundary, "texts": texts, "separator": separator}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        weights = data["weights"]
        handles["image"].set_data(np.ma.masked_invalid(weights))
        handles["ax"].set_ylim(data["num_heads"] + 0.5, -0.5)
        handles["ax"].set_title(f"query position $t$ = {data['query']}")
        handles["boundary"].set_xdata([data["valid_len"] - 0.5] * 2)
        for text, value in zip(handles["texts"], weights[0]):
            text.set_text(f"{value:.2f}")
            text.set_color("black" if value > 0.6 else "white")
