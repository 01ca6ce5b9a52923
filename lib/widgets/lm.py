"""Interactive figures of chapter 6 (language models and sequence generation).

Each visual is a pure ``compute`` (tested in ``tests/lib/widgets/test_widgets_lm.py``) plus
``draw``/``update`` that only move matplotlib artists. Both take their data
from the chapter (a trained model's distributions, a corpus's counts), so
they show what the chapter computed.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import torch
from matplotlib.ticker import NullLocator

from lib.part3_words.decoding import sampling_distribution
from lib.part3_words.ngram import NGramModel, add_delta_log_prob, perplexity
from lib.widgets.core import Choice, Slider, Visual

TEMPERATURES = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0, 5.0)
DELTAS = tuple(float(f"{10 ** e:.2g}") for e in np.linspace(-4, 1, 21))  # 1e-4 .. 10, log-spaced


class NextTokenTemperature(Visual):
    """The next-word distribution of a language model after a few contexts, at a temperature.

    Bars: the ``top`` most probable words at temperature 1 (in that fixed
    order) and one bar for all other words together, under
    ``softmax(log p / T)`` (:func:`lib.part3_words.decoding.sampling_distribution`). The
    title gives the largest probability and the perplexity ``exp(H)`` of the
    tempered distribution: the number of equally likely words it is worth.

    Parameters
    ----------
    words : sequence of str
        The model's vocabulary, ``words[i]`` for id ``i``.
    distributions : mapping of str to Tensor
        For each context (its text is the drop-down's label), the model's
        next-word log-probabilities ``(V,)``.
    top : int
        How many words get their own bar.
    """

    title = "Next-word distribution at a temperature"
    caption = (
        "The language model's most probable next words after a context, all other words in one bar, "
        "under softmax(log p / T). Lower the temperature to pile the probability onto the top word and "
        "raise it to spread it out, watching the perplexity in the title."
    )
    figsize = (4.8, 4.4)

    def __init__(self, words: Sequence[str], distributions: Mapping[str, torch.Tensor], top: int = 10):
        if not distributions:
            raise ValueError("distributions must hold at least one context")
        for context, log_probs in distributions.items():
            if not isinstance(log_probs, torch.Tensor) or log_probs.shape != (len(words),):
                raise ValueError(f"the distribution after {context!r} must be a tensor of shape ({len(words)},)")
        self.words = list(words)
        self.log_probs = {context: log_probs.double() for context, log_probs in distributions.items()}
        self.top = min(top, len(words) - 1)
        self.controls = (
            Choice("context", tuple(distributions), label="context"),
            Slider("temperature", TEMPERATURES, default=1.0, label="temperature T"),
        )

    def compute(self, context=None, temperature=1.0):
        """Bar heights for one context and temperature.

        Returns
        -------
        dict
            ``labels``: the ``top`` words, then ``"(other)"``; ``probs``: float array
            ``(top + 1,)`` summing to 1; ``max_prob``; ``perplexity``: ``exp`` of the
            entropy of the whole tempered distribution; ``context``; ``temperature``.
        """
        context = context if context is not None else self.controls[0].values[0]
        log_probs = self.log_probs[context]
        order = torch.sort(log_probs, descending=True, stable=True).indices[: self.top]  # ranked at T = 1
        probs = sampling_distribution(log_probs, temperature)  # (V,)
        shown = probs[order]
        entropy = -float((probs * torch.log(probs.clamp_min(1e-300))).sum())
        return {
            "labels": [self.words[i] for i in order.tolist()] + ["(other)"],
            "probs": np.append(shown.numpy(), max(0.0, 1.0 - float(shown.sum()))),
            "max_prob": float(probs.max()),
            "perplexity": math.exp(entropy),
            "context": context,
            "temperature": temperature,
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        positions = np.arange(self.top + 1)
        bars = ax.bar(positions, data["probs"], color=["tab:blue"] * self.top + ["tab:gray"])
        ax.set_ylim(0, 1)
        ax.set_ylabel("probability")
        ax.set_xticks(positions)
        handles = {"ax": ax, "bars": bars}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        for bar, value in zip(handles["bars"], data["probs"]):
            bar.set_height(value)
        ax = handles["ax"]
        ax.set_xticklabels(data["labels"], rotation=90)  # upright words would overlap on a phone
        ax.set_title(f"after “{data['context']}”, $T$ = {data['temperature']:g}:\n"
                     f"largest $p$ = {data['max_prob']:.2f}, perplexity {data['perplexity']:.1f}")


class AddDeltaPerplexity(Visual):
    """Training and test perplexity of add-delta n-gram models as delta varies.

    Curves: perplexity on the training and the test sentences against
    ``delta`` (log scale) for the chosen order; the markers sit at the slider's
    ``delta``. Small ``delta`` trusts the counts (the training perplexity is
    lowest, unseen test n-grams are nearly impossible); large ``delta`` pulls
    every distribution toward uniform. The test curve has its minimum between.

    Parameters
    ----------
    train, test : list of list of str
        Sentences, already mapped to the vocabulary (or not: unknown words
        become ``<unk>``).
    vocabulary : sequence of str
        The words the models predict (``</s>`` and ``<unk>`` included).
    orders : sequence of int
    """

    title = "Add-delta smoothing against test perplexity"
    caption = (
        "Training and test perplexity of add-δ n-gram models against δ on a log scale, with markers at "
        "the chosen δ. Move δ to find where the test perplexity is lowest, and compare orders n."
    )
    figsize = (4.8, 4.6)

    def __init__(self, train, test, vocabulary: Sequence[str], orders: Sequence[int] = (1, 2, 3)):
        self.orders = tuple(orders)
        self.vocab_size = len(vocabulary)
        # m(h, w) and m(h) of every training and test token, per order: all the curves need.
        self.counts = {}
        for order in self.orders:
            model = NGramModel.fit(train, order, vocabulary=vocabulary)
            self.counts[order] = {name: model.pair_counts(model.test_ngrams(sentences))
                                  for name, sentences in (("train", train), ("test", test))}
        self.curves = {order: {name: np.array([self._perplexity(order, name, d) for d in DELTAS])
                               for name in ("train", "test")} for order in self.orders}
        self.controls = (
            Choice("order", tuple(str(n) for n in self.orders), default=str(self.orders[min(1, len(self.orders) - 1)]),
                   label="order n"),
            Slider("delta", DELTAS, default=DELTAS[10], label="δ", fmt=".2g"),
        )

    def _perplexity(self, order: int, name: str, delta: float) -> float:
        pairs, contexts = self.counts[order][name]
        return perplexity(add_delta_log_prob(pairs, contexts, delta, self.vocab_size))

    def compute(self, order="2", delta=DELTAS[10]):
        """The curves of one order and the values at one delta.

        Returns
        -------
        dict
            ``deltas``: array of the grid; ``train``, ``test``: perplexities on it;
            ``delta``; ``train_value``, ``test_value``: perplexities at ``delta``;
            ``best_delta``, ``best_test``: the grid's lowest test perplexity.
        """
        order = int(order)
        curves = self.curves[order]
        best = int(np.argmin(curves["test"]))
        return {
            "order": order,
            "deltas": np.array(DELTAS),
            "train": curves["train"],
            "test": curves["test"],
            "delta": delta,
            "train_value": self._perplexity(order, "train", delta),
            "test_value": self._perplexity(order, "test", delta),
            "best_delta": DELTAS[best],
            "best_test": float(curves["test"][best]),
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        (train_line,) = ax.plot(data["deltas"], data["train"], color="tab:blue", label="training sentences")
        (test_line,) = ax.plot(data["deltas"], data["test"], color="tab:orange", label="test sentences")
        (train_dot,) = ax.plot([], [], "o", color="tab:blue")
        (test_dot,) = ax.plot([], [], "o", color="tab:orange")
        ax.set_xscale("log")
        ax.set_yscale("log")
        all_values = np.concatenate([np.concatenate([c["train"], c["test"]]) for c in self.curves.values()])
        ax.set_ylim(0.8 * all_values.min(), 1.25 * all_values.max())
        # Few plain tick labels: laying out many log-scale labels would dominate every frame's drawing time.
        x_ticks = [10.0**e for e in range(-4, 2)]
        ax.set_xticks(x_ticks, [f"{t:g}" for t in x_ticks])
        y_ticks = [t for t in (1, 3, 10, 30, 100, 300, 1000, 3000, 10000) if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        ax.set_yticks(y_ticks, [f"{t:,}" for t in y_ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("$\\delta$ (pseudo-count added to every $n$-gram)")
        ax.set_ylabel("perplexity")
        # Above the axes: inside, the legend covered the curves of some orders.
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
        handles = {"ax": ax, "train_line": train_line, "test_line": test_line, "train_dot": train_dot,
                   "test_dot": test_dot}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        handles["train_line"].set_ydata(data["train"])
        handles["test_line"].set_ydata(data["test"])
        handles["train_dot"].set_data([data["delta"]], [data["train_value"]])
        handles["test_dot"].set_data([data["delta"]], [data["test_value"]])
        handles["ax"].figure.suptitle(
            f"$n$ = {data['order']}, $\\delta$ = {data['delta']:.2g}: training {data['train_value']:.0f}, "
            f"test {data['test_value']:.0f}\n(best test {data['best_test']:.0f} at $\\delta$ = {data['best_delta']:.2g})")
