"""Interactive figure of chapter 7 (decoding): the beam-search tree.

The visual's pure ``compute`` is tested in ``tests/lib/widgets/test_widgets_decoding.py``;
``draw``/``update`` only move matplotlib artists.
"""
from __future__ import annotations

import numpy as np

from lib.part3_words.decoding import ClockTask, beam_search, sequence_score
from lib.widgets.core import Choice, Slider, Visual

FLOOR = -7.0  # candidates less probable than e**-7 are drawn on the floor line
MAX_LEN = 6


class BeamSearchTree(Visual):
    """Every candidate beam search scores while reading a time aloud, and which survive.

    Left: the search tree of the chapter's clock model. Step ``t`` (x axis) holds
    every one-token extension of the hypotheses kept at step ``t - 1``, drawn at
    its log-probability (y axis): the beam keeps the ``K`` highest (blue, with
    their last word), and prunes the rest (grey). Finished hypotheses are green
    squares, and the winner's path is orange. Right: the finished hypotheses
    ranked by the length-normalised score ``log p / len**alpha``.
    """

    title = "Beam search tree"
    caption = (
        "Beam search reading a time aloud: every candidate of each step at its log-probability, the K "
        "kept in blue, finished hypotheses as green squares and the winner's path in orange. Widen the "
        "beam or raise the length exponent α to see whether the winner changes."
    )
    figsize = (4.8, 6.0)
    times = ("8:45", "6:15", "8:00", "4:45")
    beam_sizes = (1, 2, 3, 4)
    controls = (
        Choice("time", times, default="8:45", label="time to read"),
        Slider("beam_size", beam_sizes, default=2, label="beam size K"),
        Slider("alpha", (0.0, 0.5, 0.7, 1.0), default=0.0, label="length exponent α", fmt=".1f"),
    )

    def __init__(self, task: ClockTask | None = None):
        self.task = task if task is not None else ClockTask(seed=38)
        self.model = self.task.fit_model(per_time=200, delta=1.0, seed=38)

    def _word(self, token: int) -> str:
        return "⟨eos⟩" if token == self.task.eos else self.task.vocab[token]

    def compute(self, time="8:45", beam_size=2, alpha=0.0):
        """The tree and the ranking for one setting of the controls.

        Returns
        -------
        dict
            ``points``: float array ``(n, 2)`` of (step, log-probability clipped at
            ``FLOOR``) per candidate; ``status``: array of "kept" / "finished" /
            "pruned"; ``segments``: ``(n, 2, 2)`` edges from each candidate's
            parent; ``labels``: list of (x, y, word) for the kept and finished
            candidates, spread apart vertically so that they do not overlap;
            ``winner_path``: ``(t + 1, 2)`` points from the root to the winner;
            ``finished``: list of (text, log-probability, length, score) best first;
            ``best``: the task's most probable phrasing and ``best_score``, its score
            under the model.
        """
        source = self.task.times.index(time)
        step_fn = self.model.for_source(source)
        trace = []
        finished = beam_search(step_fn, self.model.bos, self.task.eos, beam_size, MAX_LEN, alpha, trace=trace)
        points, status, segments, labels = [], [], [], []
        position = {(): (0.0, 0.0)}  # prefix -> where it is drawn
        for step in trace:
            kept_here = []
            for candidate in step.candidates:
                xy = (float(step.step), max(candidate.log_prob, FLOOR))
                points.append(xy)
                status.append(candidate.status)
                segments.append((position[candidate.tokens[:-1]], xy))
                if candidate.status != "pruned":
                    position[candidate.tokens] = xy
                    kept_here.append([xy[0], xy[1], self._word(candidate.tokens[-1])])
            labels += _spread(kept_here, gap=0.55)
        winner = tuple(finished[0][0])
        winner_path = [position[winner[:t]] for t in range(len(winner) + 1)]
        best = self.task.best(source)
        return {
            "points": np.array(points).reshape(-1, 2),
            "status": np.array(status),
            "segments": np.array(segments).reshape(-1, 2, 2),
            "labels": labels,
            "winner_path": np.array(winner_path),
            "finished": [
                (self.task.decode(tokens) or "(empty)", score * len(tokens) ** alpha, len(tokens), score)
                for tokens, score in finished
            ],
            "best": self.task.decode(best),
            "best_score": sequence_score(step_fn, self.model.bos, best, alpha),
            "time": time,
            "alpha": alpha,
        }

    def draw(self, fig, data):
        from matplotlib.collections import LineCollection

        # Stacked, so that the tree keeps the full width on a phone.
        tree, ranking = fig.subplots(2, 1, gridspec_kw={"height_ratios": (3, 1.3)})
        tree.axhline(FLOOR, color="0.85", linewidth=0.8)
        pruned_edges = LineCollection([], colors="0.8", linewidths=0.6)
        kept_edges = LineCollection([], colors="tab:blue", linewidths=1.2)
        winner_line = tree.plot([], [], color="tab:orange", linewidth=3, alpha=0.8, zorder=1)[0]
        tree.add_collection(pruned_edges)
        tree.add_collection(kept_edges)
        pruned = tree.scatter([], [], s=6, color="0.6", zorder=2)
        kept = tree.scatter([], [], s=22, color="tab:blue", zorder=3)
        done = tree.scatter([], [], s=34, marker="s", color="tab:green", zorder=3)
        tree.scatter([0], [0], s=22, color="black", zorder=3)
        most_labels = MAX_LEN * max(self.beam_sizes)
        labels = [tree.text(0, 0, "", va="center", ha="left") for _ in range(most_labels)]
        tree.set_xlim(-0.2, MAX_LEN + 0.9)
        tree.set_ylim(FLOOR - 0.5, 0.6)
        tree.set_xticks(range(MAX_LEN + 1))
        tree.set_xlabel("step $t$")
        tree.set_ylabel("$\\log p(\\mathbf{y}_{1:t})$")
        most = max(self.beam_sizes)
        bars = ranking.barh(range(most), [0.0] * most, color="tab:green", height=0.6, alpha=0.45)
        bar_texts = [ranking.text(0, i, "", va="center", ha="left") for i in range(most)]
        ranking.set_ylim(most - 0.5, -0.5)
        ranking.set_yticks([])
        ranking.set_xlabel("score $\\log p / |\\mathbf{y}|^{\\alpha}$")
        title = fig.suptitle("\n")
        handles = {
            "title": title, "tree": tree, "ranking": ranking, "pruned_edges": pruned_edges, "kept_edges": kept_edges,
            "winner_line": winner_line, "pruned": pruned, "kept": kept, "done": done, "labels": labels,
            "bars": bars, "bar_texts": bar_texts,
        }
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        points, status, segments = data["points"], data["status"], data["segments"]
        is_pruned = status == "pruned"
        handles["pruned_edges"].set_segments(segments[is_pruned])
        handles["kept_edges"].set_segments(segments[~is_pruned])
        handles["pruned"].set_offsets(points[is_pruned])
        handles["kept"].set_offsets(points[status == "kept"])
        handles["done"].set_offsets(points[status == "finished"])
        handles["winner_line"].set_data(data["winner_path"][:, 0], data["winner_path"][:, 1])
        for text, label in zip(handles["labels"], data["labels"] + [None] * len(handles["labels"])):
            if label is None:
                text.set_text("")
                continue
            text.set_position((label[0] + 0.1, label[1]))
            text.set_text(label[2])
        handles["title"].set_text(
            f"{data['time']}: the beam answers “{data['finished'][0][0]}”;\nmost probable: "
            f"“{data['best']}” (score {data['best_score']:.2f})"
        )
        scores = [score for *_, score in data["finished"]]
        low = min(min(scores), data["best_score"])
        left = low * 1.05 - 0.05
        for i, (bar, text) in enumerate(zip(handles["bars"], handles["bar_texts"])):
            if i < len(data["finished"]):
                sentence, _, _, score = data["finished"][i]
                bar.set_width(score)
                bar.set_color("tab:orange" if i == 0 else "tab:green")
                text.set_position((0.97 * left, i))
                text.set_text(f"{sentence}  {score:.2f}")
            else:
                bar.set_width(0.0)
                text.set_text("")
        handles["ranking"].set_xlim(left, 0.0)
        handles["ranking"].set_title(f"finished hypotheses, $\\alpha$ = {data['alpha']:.1f}")


def _spread(labels: list[list], gap: float) -> list[tuple]:
    """Move labels of one column apart vertically (at least ``gap``), keeping their order."""
    labels = sorted(labels, key=lambda label: -label[1])
    for above, below in zip(labels, labels[1:]):
        below[1] = min(below[1], above[1] - gap)
    return [tuple(label) for label in labels]
