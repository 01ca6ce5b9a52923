"""Interactive figure of chapter 8 (BLEU and ROUGE): the BLEU breakdown.

The visual's pure ``compute`` is tested in ``tests/lib/widgets/test_widgets_metrics.py``;
``draw``/``update`` only move matplotlib artists.
"""
from __future__ import annotations

import numpy as np

from lib.part3_words.metrics import SMOOTHING, rouge_n, sentence_bleu
from lib.widgets.core import Choice, Text, Visual

MAX_N = 4


class BleuBreakdown(Visual):
    """Sentence BLEU of an editable candidate against two editable references, piece by piece.

    Bars: for each n-gram order, the candidate's n-grams (grey) and how many of
    them match after clipping (blue), with the precision ``p_n`` above. Right:
    the lengths, the brevity penalty, BLEU, and ROUGE-1/2 recall for contrast.
    Text is split on spaces; a reference left empty is ignored. In the HTML
    book the text boxes are drop-downs over preset sentences.
    """

    title = "BLEU breakdown"
    caption = (
        "Sentence BLEU of a candidate against two references, piece by piece: matched and total n-grams "
        "of each order, the brevity penalty, and ROUGE-1/2 recall for contrast. Try the repeated 'the' "
        "and the two-word candidate to see clipping and the brevity penalty at work, and a smoothing to "
        "rescue a zero precision."
    )
    figsize = (4.8, 5.8)
    controls = (
        Text("candidate", (
            "the cat sat on the mat",
            "the the the the the the the",
            "the cat",
            "on the mat the cat sat",
            "a cat is sitting on the mat",
        ), label="candidate"),
        Text("reference_1", ("the cat is on the mat", "there is a cat on the mat"), label="reference 1"),
        Text("reference_2", ("a cat sat on the mat", "the cat sat on a mat"), label="reference 2"),
        Choice("smooth", tuple(SMOOTHING), default="none", label="smoothing"),
    )

    def compute(self, candidate="the cat sat on the mat", reference_1="the cat is on the mat",
                reference_2="a cat sat on the mat", smooth="none"):
        """BLEU's pieces for one setting.

        Returns
        -------
        dict
            ``matches``, ``totals``: int arrays ``(4,)``; ``precisions``: float array
            ``(4,)`` (after smoothing); ``hyp_len``, ``ref_len``, ``brevity_penalty``,
            ``score``; ``rouge``: ROUGE-1 and ROUGE-2 recall; ``n_references``.
        """
        hypothesis = candidate.split()
        references = [text.split() for text in (reference_1, reference_2) if text.split()]
        if not references:
            references = [[]]  # no reference at all: an empty one, which matches nothing
        stats = sentence_bleu(hypothesis, references, max_n=MAX_N, smooth=smooth)
        return {
            "matches": np.array(stats.matches),
            "totals": np.array(stats.totals),
            "precisions": np.array(stats.precisions),
            "hyp_len": stats.hyp_len,
            "ref_len": stats.ref_len,
            "brevity_penalty": stats.brevity_penalty,
            "score": stats.score,
            "orders": sum(w > 0 for w in stats.weights),
            "rouge": (rouge_n(hypothesis, references, 1), rouge_n(hypothesis, references, 2)),
            "n_references": len(references),
            "smooth": smooth,
        }

    def draw(self, fig, data):
        # Stacked, so that the bars keep the full width on a phone.
        bars_ax, text_ax = fig.subplots(2, 1, gridspec_kw={"height_ratios": (3, 2)})
        orders = np.arange(1, MAX_N + 1)
        totals = bars_ax.bar(orders - 0.18, data["totals"], width=0.36, color="0.75", label="n-grams in candidate")
        matches = bars_ax.bar(orders + 0.18, data["matches"], width=0.36, color="tab:blue",
                              label="clipped matches")
        notes = [bars_ax.text(n, 0, "", ha="center", va="bottom") for n in orders]
        bars_ax.set_xticks(orders, [f"{n}-grams" for n in orders])
        bars_ax.set_yticks([])  # the notes give the counts; tick labels of changing width would need a new layout
        # Above the axes: inside, the legend covered the tallest bars' notes.
        bars_ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)
        text_ax.set_axis_off()
        lines = [text_ax.text(0.0, 0.92 - 0.17 * i, "", transform=text_ax.transAxes, va="top") for i in range(6)]
        handles = {"bars_ax": bars_ax, "totals": totals, "matches": matches, "notes": notes, "lines": lines}
        self.update(handles, data)
        return handles

    def update(self, handles, data):
        top = max(int(data["totals"].max()), 1)
        for bar, value in zip(handles["totals"], data["totals"]):
            bar.set_height(value)
        for bar, value in zip(handles["matches"], data["matches"]):
            bar.set_height(value)
        for n, (text, match, total, p) in enumerate(
                zip(handles["notes"], data["matches"], data["totals"], data["precisions"]), start=1):
            text.set_y(total + 0.03 * top * 1.4)
            text.set_text(f"{match}/{total}\n$p_{n}$ = {p:.2f}" if total else "no\nn-grams")
        handles["bars_ax"].set_ylim(0, 1.45 * top + 0.5)
        bp = data["brevity_penalty"]
        c, r = data["hyp_len"], data["ref_len"]
        texts = (
            f"c = {c} words, r = {r} (closest of {data['n_references']})",
            "BP = 1 (c ≥ r)" if c >= r else (f"BP = exp(1 − r/c) = {bp:.3f}" if c else "BP = 0 (empty candidate)"),
            f"BLEU-{data['orders']} = BP · exp(Σ wₙ log pₙ)",
            f"        = {data['score']:.3f}   (smoothing: {data['smooth']})",
            f"ROUGE-1 recall = {data['rouge'][0]:.3f}",
            f"ROUGE-2 recall = {data['rouge'][1]:.3f}",
        )
        for line, text in zip(handles["lines"], texts):
            line.set_text(text)
