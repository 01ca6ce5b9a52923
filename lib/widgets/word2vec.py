"""Interactive figures of chapter 5 (word embeddings and word2vec).

Both visuals take trained word vectors (:class:`lib.part3_words.embeddings.WordVectors`) at
construction, keyed by a model name, so the chapter can set its own models
against gensim's. Each has a pure ``compute`` (tested in
``tests/lib/widgets/test_widgets_word2vec.py``) and ``draw``/``update`` that only move
matplotlib artists.
"""
from __future__ import annotations

import re
from typing import Callable, Mapping, Optional, Sequence

import numpy as np
import torch
from matplotlib.collections import LineCollection

from lib.part3_words.embeddings import WordVectors
from lib.widgets.core import Choice, Text, Visual

Normalise = Callable[[str], str]

#: Queries offered by :class:`NeighbourExplorer` (the static book's drop-down): words, and
#: analogies written as sums, some that the chapter's small corpus gets right and one it does not.
QUERIES = (
    "war", "film", "church", "physics", "computer", "sea", "french - france + germany",
    "daughter - son + brother", "larger - large + small", "king - man + woman",
)

#: Groups of word pairs for :class:`ProjectionExplorer`: name -> ((role of the first word,
#: role of the second), pairs).
PAIR_GROUPS = {
    "countries and nationalities": (("country", "nationality"), [
        ("france", "french"), ("germany", "german"), ("italy", "italian"), ("japan", "japanese"),
        ("china", "chinese"), ("russia", "russian"), ("spain", "spanish"), ("greece", "greek"),
    ]),
    "male and female": (("male", "female"), [
        ("father", "mother"), ("son", "daughter"), ("brother", "sister"), ("king", "queen"),
        ("man", "woman"), ("husband", "wife"), ("boy", "girl"), ("prince", "princess"),
    ]),
    "countries and capitals": (("country", "capital"), [
        ("france", "paris"), ("germany", "berlin"), ("italy", "rome"), ("japan", "tokyo"),
        ("china", "beijing"), ("russia", "moscow"), ("greece", "athens"), ("egypt", "cairo"),
    ]),
    "adjectives and comparatives": (("adjective", "comparative"), [
        ("large", "larger"), ("small", "smaller"), ("high", "higher"), ("long", "longer"),
        ("strong", "stronger"), ("short", "shorter"),
    ]),
}

_TOKEN = re.compile(r"[+-]|[^\s+-]+")


def parse_query(text: str) -> tuple[list[str], list[str]]:
    """Split ``"paris - france + germany"`` into positive and negative words.

    A word counts as negative when a ``-`` stands right before it; anything else
    is positive. Words are lower-cased.

    Examples
    --------
    >>> parse_query("Paris - France + Germany")
    (['paris', 'germany'], ['france'])
    """
    if not isinstance(text, str):
        raise TypeError(f"the query must be a str; found {type(text).__name__}")
    positive, negative, sign = [], [], 1
    for token in _TOKEN.findall(text.lower()):
        if token in "+-":
            sign = -1 if token == "-" else 1
        else:
            (positive if sign > 0 else negative).append(token)
            sign = 1
    return positive, negative


def _check_models(models: object) -> dict[str, WordVectors]:
    if not isinstance(models, Mapping) or not models:
        raise TypeError(f"models must be a non-empty dict of name -> WordVectors; found {type(models).__name__}")
    for name, vectors in models.items():
        if not isinstance(vectors, WordVectors):
            raise TypeError(f"models[{name!r}] must be a lib.part3_words.embeddings.WordVectors; found {type(vectors).__name__}")
    return dict(models)


class NeighbourExplorer(Visual):
    """The nearest neighbours of a word, or the answer to an analogy, as a bar chart of cosines.

    The query is one word (``"war"``) or a sum of words with signs
    (``"paris - france + germany"``): its unit vectors are added and subtracted
    and the ``k`` closest words, query words excluded, are shown (3CosAdd).
    """

    title = "Nearest neighbours and analogies"
    caption = (
        "The nearest neighbours of a word, or the answer to an analogy such as paris - france + "
        "germany, with their cosine similarities. Ask each model the same query to see which one "
        "captures the relation."
    )
    figsize = (4.8, 4.0)

    def __init__(
        self, models: Mapping[str, WordVectors], queries: Sequence[str] = QUERIES,
        normalise: Optional[Normalise] = None, k: int = 8,
    ):
        self.models = _check_models(models)
        self.normalise = normalise or (lambda word: word)
        self.k = k
        self.controls = (
            Text("query", tuple(queries), label="word or analogy"),
            Choice("model", tuple(self.models), label="model"),
        )

    def compute(self, query: str = "", model: Optional[str] = None) -> dict:
        """The neighbours of one query.

        Returns
        -------
        dict
            ``words`` (``k`` strings, empty when there is no answer), ``scores``
            (float array ``(k,)``, cosine similarities, 0 when there is no
            answer), ``expression`` (the query as looked up: normalised words
            joined by + and −) and ``message`` (why there is no answer, or "").
        """
        vectors = self.models[model if model is not None else next(iter(self.models))]
        positive, negative = parse_query(query)
        positive = [self.normalise(w) for w in positive]
        negative = [self.normalise(w) for w in negative]
        expression = " ".join([positive[0]] + [f"+ {w}" for w in positive[1:]] + [f"− {w}" for w in negative]) \
            if positive else ""
        empty = {"words": [""] * self.k, "scores": np.zeros(self.k), "expression": expression}
        if not positive:
            return {**empty, "message": "type a word, or an analogy such as  paris - france + germany"}
        missing = [w for w in positive + negative if w not in vectors.vocab]
        if missing:
            return {**empty, "message": f"not in the vocabulary: {', '.join(missing)}"}
        try:
            neighbours = vectors.most_similar(positive, negative, k=self.k)
        except ValueError as refusal:  # words that cancel, or a query naming every word
            return {**empty, "message": str(refusal)}
        words = [w for w, _ in neighbours] + [""] * (self.k - len(neighbours))
        scores = np.array([s for _, s in neighbours] + [0.0] * (self.k - len(neighbours)))
        return {"words": words, "scores": scores, "expression": expression, "message": ""}

    def draw(self, fig, data):
        ax = fig.add_subplot()
        positions = np.arange(self.k)
        bars = ax.barh(positions, data["scores"], color="tab:blue")
        ax.set_yticks(positions)
        ax.invert_yaxis()  # the closest word on top
        ax.set_xlim(0, 1.08)
        ax.set_xlabel("cosine similarity to the query")
        values = [ax.text(0, y, "", va="center") for y in positions]
        message = ax.text(0.5, 0.5, "", transform=ax.transAxes, ha="center", va="center", color="tab:red", wrap=True)
        handles = {"ax": ax, "bars": bars, "values": values, "message": message}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        for bar, text, score in zip(handles["bars"], handles["values"], data["scores"]):
            bar.set_width(score)
            text.set_x(max(score, 0.0) + 0.01)
            text.set_text(f"{score:.2f}" if score else "")
        handles["ax"].set_yticklabels(data["words"])
        handles["ax"].set_title(f"closest to: {data['expression']}" if data["expression"] else "")
        handles["message"].set_text(data["message"])


class ProjectionExplorer(Visual):
    """Pairs of related words projected onto their first two principal components.

    Each group is a list of word pairs (country → capital, male → female, ...)
    with the roles of its two words, as in :data:`PAIR_GROUPS`.
    The unit vectors of the group's words are centred and projected onto the two
    directions of largest variance (PCA of those words only); an arrow joins the
    two words of each pair. Parallel arrows of equal length are what makes
    analogies work: the same offset leads from each first word to its partner.
    """

    title = "2-D projection of word pairs"
    caption = (
        "Pairs of related words, such as countries and their capitals, projected onto their first two "
        "principal components, with an arrow from each word to its partner. Compare the models: "
        "parallel arrows of equal length are what makes analogies work."
    )
    figsize = (4.8, 4.6)

    def __init__(
        self, models: Mapping[str, WordVectors],
        groups: Mapping[str, tuple[tuple[str, str], Sequence[tuple[str, str]]]] = PAIR_GROUPS,
        normalise: Optional[Normalise] = None,
    ):
        self.models = _check_models(models)
        self.roles = {name: tuple(roles) for name, (roles, _) in groups.items()}
        self.groups = {name: list(pairs) for name, (_, pairs) in groups.items()}
        self.normalise = normalise or (lambda word: word)
        self.max_pairs = max(len(pairs) for pairs in self.groups.values())
        self.controls = (
            Choice("group", tuple(self.groups), label="word pairs"),
            Choice("model", tuple(self.models), label="model"),
        )

    def compute(self, group: Optional[str] = None, model: Optional[str] = None) -> dict:
        """Projected coordinates of one group under one model.

        Returns
        -------
        dict
            ``points`` float array ``(2 P, 2)``: rows ``2i`` and ``2i + 1`` are the
            two words of pair ``i`` (pairs with a word outside the vocabulary are
            left out); ``labels`` the words as given; ``explained`` the share of
            the group's variance that each of the two axes shows; ``roles``.
        """
        group = group if group is not None else next(iter(self.groups))
        vectors = self.models[model if model is not None else next(iter(self.models))]
        pairs = [(a, b) for a, b in self.groups[group]
                 if self.normalise(a) in vectors.vocab and self.normalise(b) in vectors.vocab]
        if len(pairs) < 2:
            raise ValueError(f"group {group!r} needs at least 2 pairs whose words are in the vocabulary; "
                             f"found {len(pairs)}")
        labels = [word for pair in pairs for word in pair]
        rows = vectors.unit[[vectors.vocab.index(self.normalise(w)) for w in labels]].double()  # (2P, D)
        centred = rows - rows.mean(dim=0)
        _, singular, directions = torch.linalg.svd(centred, full_matrices=False)  # directions: (r, D)
        points = (centred @ directions[:2].T).numpy()  # (2P, 2)
        # An SVD direction's sign is arbitrary: fix it so that the first word lies left of and below the mean.
        points *= np.where(points[0] > 0, -1.0, 1.0)
        variance = singular.numpy() ** 2
        return {
            "points": points,
            "labels": labels,
            "explained": variance[:2] / variance.sum(),
            "roles": self.roles[group],
        }

    def draw(self, fig, data):
        ax = fig.add_subplot()
        first = ax.scatter([], [], color="tab:blue", s=18, zorder=3)
        second = ax.scatter([], [], color="tab:orange", s=18, zorder=3)
        arrows = LineCollection([], colors="tab:gray", linewidths=1, zorder=2)
        ax.add_collection(arrows)
        texts = [ax.text(0, 0, "", zorder=4) for _ in range(2 * self.max_pairs)]
        # Above the axes: inside, the legend covered points of some groups.
        legend = ax.legend([first, second], list(data["roles"]), loc="lower center", bbox_to_anchor=(0.5, 1.0),
                           ncols=2, frameon=False)
        ax.set_xticks([])
        ax.set_yticks([])
        handles = {"ax": ax, "first": first, "second": second, "arrows": arrows, "texts": texts, "legend": legend}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        points = data["points"]
        handles["first"].set_offsets(points[0::2])
        handles["second"].set_offsets(points[1::2])
        handles["arrows"].set_segments([points[i:i + 2] for i in range(0, len(points), 2)])
        for i, text in enumerate(handles["texts"]):
            if i < len(points):
                text.set_position(points[i] + np.array([0.01, 0.01]))
                text.set_text(data["labels"][i])
            else:
                text.set_text("")
        for text, role in zip(handles["legend"].get_texts(), data["roles"]):
            text.set_text(role)
        low, high = points.min(axis=0), points.max(axis=0)
        margin = 0.12 * (high - low)
        ax = handles["ax"]
        ax.set_xlim(low[0] - margin[0], high[0] + 2 * margin[0])  # room for the labels on the right
        ax.set_ylim(low[1] - margin[1], high[1] + margin[1])
        shares = data["explained"]
        ax.set_xlabel(f"first principal component ({shares[0]:.0%} of the variance)")
        ax.set_ylabel(f"second ({shares[1]:.0%})")
