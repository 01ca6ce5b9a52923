"""Checkers for the exercises of chapter 10 (sequence-to-sequence models with attention)."""
from __future__ import annotations

import torch

from lib.part4_attention.attention import masked_softmax
from courseware.checks.core import Check, Slip
from lib.part4_attention.seq2seq import local_weights




def centre_gradient_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(scores, lens, centre, window, grad)`` for :data:`check_centre_gradient`.

    Scores ``(B, S)`` in float64, lengths from 1 to ``S``, real centres from 0 to ``S`` (some
    windows reach past either end of the source; a centre is never exactly ``D`` from a
    position, where the derivative does not exist), windows ``D`` from 1 to 4, and ``grad``,
    the gradient of the loss with respect to the weights, ``(B, S)``, padding included.
    """
    cases = []
    for _ in range(trials):
        batch = int(torch.randint(1, 5, (), generator=generator))
        width = int(torch.randint(3, 13, (), generator=generator))
        scores = 2 * torch.randn(batch, width, generator=generator, dtype=torch.float64)
        lens = torch.randint(1, width + 1, (batch,), generator=generator)
        centre = lens * torch.rand(batch, generator=generator, dtype=torch.float64)  # p_t in [0, S]
        window = int(torch.randint(1, 5, (), generator=generator))
        grad = torch.randn(batch, width, generator=generator, dtype=torch.float64)
        cases.append((scores, lens, centre, window, grad))
    return cases


def _distance(scores: torch.Tensor, centre: torch.Tensor, first: int = 1) -> torch.Tensor:
    """s - p_t for source positions s counted from ``first``: (B, S)."""
    return torch.arange(first, scores.shape[1] + first, dtype=scores.dtype) - centre[:, None]


def _gaussian(distance: torch.Tensor, sigma: float) -> torch.Tensor:
    return torch.exp(-(distance**2) / (2 * sigma**2))


def _centre_gradient(scores, lens, centre, window, grad) -> torch.Tensor:
    """∂L/∂p_t by autograd through :func:`lib.part4_attention.seq2seq.local_weights` (local-p), for ∂L/∂a_t = ``grad``."""
    centre = centre.detach().clone().requires_grad_()
    weights = local_weights(scores, lens, centre, window, gaussian=True)  # (B, S)
    return torch.autograd.grad(weights, centre, grad_outputs=grad)[0]  # (B,)


def _pull(scores, lens, centre, window, grad, sigma=None, first=1, factor="weights", slope=1.0, windowed=True,
          padded=False, cut_after=False):
    """Σ_s grad · factor(s) · (s - p_t) / σ², the right answer with the usual slips switched on:
    ``sigma`` (D/2 unless given), positions counted from ``first``, ``factor`` "weights" (a_t(s)) or
    "softmax" (the window's softmax alone), ``slope`` multiplying the derivative of the exponent,
    ``windowed=False`` for a softmax over the whole source, ``padded=True`` for ``lens`` ignored
    (padding inside the window takes part) and ``cut_after=True`` for the softmax over the whole
    source cut to the window afterwards (not renormalised)."""
    sigma = window / 2 if sigma is None else sigma
    distance = _distance(scores, centre, first)
    outside = (distance.abs() > window) if windowed else torch.zeros_like(distance, dtype=torch.bool)
    lens = torch.full_like(lens, scores.shape[1]) if padded else lens
    if cut_after:
        align = masked_softmax(scores, lens).masked_fill(outside, 0.0)  # (B, S)
    else:
        align = masked_softmax(scores.masked_fill(outside, float("-inf")), lens)  # (B, S)
    weights = align * _gaussian(distance, sigma) if factor == "weights" else align
    return (grad * weights * slope * distance / sigma**2).sum(dim=-1)


def _renormalised(scores, lens, centre, window, grad) -> torch.Tensor:
    """∂L/∂p_t had the weights been divided by their sum after the Gaussian."""
    centre = centre.detach().clone().requires_grad_()
    weights = local_weights(scores, lens, centre, window, gaussian=True)
    weights = weights / weights.sum(-1, keepdim=True)
    return torch.autograd.grad(weights, centre, grad_outputs=grad)[0]


def _rounded(centre: torch.Tensor) -> str:
    """The centres to 2 decimals, or to as many more as it takes to tell them apart."""
    values = centre.tolist()
    for places in range(2, 17):
        shown = [f"{value:.{places}f}" for value in values]
        if len(set(shown)) == len(shown):
            break
    return "[" + ", ".join(shown) + "]"


check_centre_gradient = Check(
    "your ∂L/∂p_t agree with autograd through lib.part4_attention.seq2seq.local_weights on 20 fresh random cases",
    centre_gradient_cases, _centre_gradient,
    describe=lambda scores, lens, centre, window, grad: (f"scores of shape {tuple(scores.shape)}, "
                                                         f"lens {lens.tolist()}, centre {_rounded(centre)}, "
                                                         f"window {window}"),
    compared_with="autograd's", noun="derivatives", layout="(B,)",
    slips=(
        Slip(lambda *case: -_pull(*case),
             "the sign is reversed: ∂/∂p_t exp(-(s - p_t)²/2σ²) = exp(-(s - p_t)²/2σ²) (s - p_t)/σ², "
             "positive for a position s to the right of p_t"),
        Slip(lambda *case: _pull(*case, sigma=case[3]), "σ is D/2, not D"),
        Slip(lambda *case: _pull(*case, slope=0.5),
             "the derivative of -(s - p_t)²/(2σ²) with respect to p_t is (s - p_t)/σ²: the 2 of the square "
             "cancels the 2 of 2σ²"),
        Slip(lambda *case: _pull(*case) * (case[3] / 2),
             "divide by σ², not σ: ∂/∂p_t of -(s - p_t)²/(2σ²) is (s - p_t)/σ²"),
        Slip(lambda *case: _pull(*case) * (case[3] / 2) ** 2,
             "you left out the 1/σ² of the Gaussian's derivative, (s - p_t)/σ²"),
        Slip(lambda *case: _pull(*case, factor="softmax"),
             "∂a_t(s)/∂p_t = a_t(s) (s - p_t)/σ²: multiply by the whole weight a_t(s), Gaussian included, not "
             "by the softmax over the window alone"),
        Slip(lambda *case: _pull(*case, windowed=False),
             "positions outside the window [p_t - D, p_t + D] have weight 0 and do not move the centre: take "
             "the softmax over the window only"),
        Slip(lambda *case: _pull(*case, padded=True),
             "padding positions s > len have weight 0 and do not pull the centre: leave them out of the "
             "window's softmax (use lens)"),
        Slip(lambda *case: _pull(*case, cut_after=True),
             "take the softmax over the window only: a softmax over the whole source cut to the window "
             "afterwards gives weights that sum to less than 1 before the Gaussian"),
        Slip(lambda *case: _pull(*case, first=0), "source positions s are counted from 1: use s = 1, ..., S"),
        Slip(_renormalised, "Luong et al. do not renormalise the weights after the Gaussian: differentiate "
                            "a_t(s) = align(s) exp(-(s - p_t)²/2σ²) itself"),
        Slip(lambda scores, lens, centre, window, grad: torch.zeros_like(centre),
             "the window's edge gives no gradient, but the Gaussian does: ∂a_t(s)/∂p_t = a_t(s) (s - p_t)/σ²"),
    ),
    shape_hint=lambda shape, scores, *rest: (
        ": sum over the positions s, one derivative per batch row" if shape == tuple(scores.shape) else ""),
    tolerance=dict(atol=1e-8, rtol=1e-6),
    forbidden=("torch.autograd", "torch.func", ".backward"),
)


# ---------------------------------------------------------------------------
# See et al.'s coverage loss over a padded batch of attention weights.
# ---------------------------------------------------------------------------


def coverage_loss_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(weights, target_lens)`` for :data:`check_coverage_loss`.

    ``weights`` is ``(B, T, S)`` in float64: every row ``weights[b, t]`` is a softmax over the first
    ``source_len[b]`` positions (drawn from 1 to ``S``) with weight exactly 0 on the padded ones, the
    rows of padded target steps included (a batched decoder runs every step). ``target_lens`` is
    ``(B,)`` with ``1 <= target_lens[b] <= T``; every case has one sequence of the full length ``T``
    and one shorter, so that counting the padded steps, or dividing by ``T``, always shows. In the
    first case sequence 0 attends the same way at every step (each step after the first costs 1)
    and sequence 1 has one step only (it costs 0).
    """
    cases = []
    for trial in range(trials):
        batch = int(torch.randint(2, 5, (), generator=generator))
        steps = int(torch.randint(3, 8, (), generator=generator))
        width = int(torch.randint(2, 8, (), generator=generator))
        source_lens = torch.randint(1, width + 1, (batch,), generator=generator)
        scores = 2 * torch.randn(batch, steps, width, generator=generator, dtype=torch.float64)
        padding = torch.arange(width) >= source_lens[:, None, None]  # (B, 1, S)
        weights = torch.softmax(scores.masked_fill(padding, float("-inf")), dim=-1)  # (B, T, S)
        target_lens = torch.randint(1, steps, (batch,), generator=generator)  # shorter than T
        target_lens[torch.randint(0, batch, (), generator=generator)] = steps  # one of the full length
        if trial == 0:
            weights[0] = weights[0, :1].clone()  # the same distribution at every step
            target_lens[0], target_lens[1] = steps, 1
        cases.append((weights, target_lens))
    return cases


def coverage_loss_by_loops(weights: torch.Tensor, target_lens: torch.Tensor) -> torch.Tensor:
    """See et al.'s coverage loss, step by step in Python floats: ``c^t = Σ_{t' < t} a^{t'}`` (``0`` at
    the first step), ``covloss_t = Σ_i min(a_i^t, c_i^t)``, averaged over each sequence's own steps and
    then over the batch.

    Shapes
    ------
    weights ``(B, T, S)``, target_lens ``(B,)`` -> ``()``
    """
    batch, _, width = weights.shape
    per_sequence = []
    for b in range(batch):
        coverage, total = [0.0] * width, 0.0
        for t in range(int(target_lens[b])):
            row = [float(x) for x in weights[b, t]]
            total += sum(min(a, c) for a, c in zip(row, coverage))
            coverage = [c + a for a, c in zip(row, coverage)]
        per_sequence.append(total / int(target_lens[b]))
    return torch.tensor(sum(per_sequence) / batch, dtype=torch.float64)


def coverage_loss_with(weights, target_lens, coverage="before", overlap="min", steps="real", divide="own",
                       combine="mean of means") -> torch.Tensor:
    """The coverage loss, vectorised, with the known wrong answers switched on by the keywords:
    ``coverage`` "before" (the right ``Σ_{t' < t}``), "through" (``Σ_{t' <= t}``: step ``t`` itself
    included) or "previous" (``a^{t-1}`` alone); ``overlap`` "min", "max" or "product"; ``steps`` "real",
    "one more" (the first padded step counted too: the mask ``arange(T) <= target_lens``) or "all" (every
    padded step counted too); ``divide`` each sequence's sum by its "own" length, by
    "T", or not at all ("none"); ``combine`` the sequences by "mean of means" or "sum", or pool every
    real step of the batch ("pooled": one mean over all of them)."""
    batch, length, _ = weights.shape
    before = torch.cat((torch.zeros_like(weights[:, :1]), weights[:, :-1]), dim=1)  # a^{t-1}, 0 at t = 1
    cover = {"before": before.cumsum(dim=1), "through": weights.cumsum(dim=1), "previous": before}[coverage]
    per_step = {"min": torch.minimum(weights, cover), "max": torch.maximum(weights, cover),
                "product": weights * cover}[overlap].sum(dim=-1)  # (B, T): covloss_t
    counted = torch.arange(length) < target_lens[:, None]  # (B, T): the real steps
    if steps == "one more":  # the off-by-one mask arange(T) <= target_lens: one padded step counted
        counted = torch.arange(length) <= target_lens[:, None]
    if steps == "all":
        counted = torch.ones_like(counted)
    totals = (per_step * counted).sum(dim=1)  # (B,)
    if combine == "pooled":
        return totals.sum() / counted.sum()
    lengths = {"own": target_lens, "T": torch.full((batch,), length),
               "none": torch.ones(batch)}[divide].to(weights.dtype)
    per_sequence = totals / lengths
    return per_sequence.mean() if combine == "mean of means" else per_sequence.sum()


def _coverage(**options):
    return lambda *case: coverage_loss_with(*case, **options)


def _coverage_shape_hint(shape, weights, target_lens) -> str:
    batch, length, width = weights.shape
    return {
        (batch,): ": that is one loss per sequence; average them over the batch",
        (batch, length): ": that is covloss_t for every step; average each sequence's real steps, then the batch",
        (length,): ": average each sequence over its own steps first, then over the batch",
        (batch, length, width): ": sum min(a_i^t, c_i^t) over the source positions i",
    }.get(tuple(shape), "")


check_coverage_loss = Check(
    "your coverage loss agrees with a step-by-step loop over See et al.'s formula on 20 fresh padded "
    "batches",
    coverage_loss_cases, coverage_loss_by_loops,
    describe=lambda weights, target_lens: (f"weights of shape {tuple(weights.shape)} and target_lens "
                                           f"{target_lens.tolist()}"),
    compared_with="the loop's", noun="loss", layout="",
    slips=(
        Slip(_coverage(coverage="through"),
             "c^t sums the steps before t only: with step t's own weights in it, min(a_i^t, c_i^t) = a_i^t "
             "and every step costs 1"),
        Slip(_coverage(coverage="previous"),
             "c^t sums the weights of every step before t, not only those of step t - 1"),
        Slip(_coverage(overlap="max"), "take the minimum of a_i^t and c_i^t, not the maximum"),
        Slip(_coverage(overlap="product"),
             "See et al. charge min(a_i^t, c_i^t), not the product a_i^t c_i^t"),
        Slip(_coverage(steps="all", divide="T"),
             "only the first target_lens[b] steps of sequence b are real: leave the padded steps out of the "
             "sum and divide by target_lens[b], not by T"),
        Slip(_coverage(steps="one more"),
             "you counted one padded step: sequence b's real steps are rows 0 to target_lens[b] - 1, so the "
             "mask is arange(T) < target_lens[b], not <="),
        Slip(_coverage(steps="all"),
             "you counted the padded steps: sum covloss_t over the first target_lens[b] steps of sequence b "
             "only, then divide by target_lens[b]"),
        Slip(_coverage(divide="T"),
             "divide each sequence's sum by its own number of steps, target_lens[b], not by the padded "
             "length T"),
        Slip(_coverage(combine="pooled"),
             "average each sequence over its own steps first, then the B sequences: one mean over all the "
             "real steps of the batch gives long sequences more weight"),
        Slip(_coverage(divide="none"),
             "divide each sequence's sum of covloss_t by its number of steps, target_lens[b], before "
             "averaging over the batch"),
        Slip(_coverage(combine="sum"), "average the sequences' losses over the batch: do not sum them"),
        Slip(_coverage(divide="none", combine="sum"),
             "that is the sum of covloss_t over every real step of the batch: average each sequence over its "
             "own steps, then over the batch"),
    ),
    shape_hint=_coverage_shape_hint,
    tolerance=dict(atol=1e-8, rtol=1e-8),
)


# ---------------------------------------------------------------------------
# Which steps of a reversal local-m's window can reach.
# ---------------------------------------------------------------------------


def reversal_reach_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh ``(n, window)`` for :data:`check_reversal_reach`: strings of 3 to 16 digits and
    half-widths ``D`` from 1 to 5 (the window covers every step only when ``D >= n - 1``)."""
    cases = []
    for _ in range(trials):
        n = int(torch.randint(3, 17, (), generator=generator))
        cases.append((n, int(torch.randint(1, 6, (), generator=generator))))
    return cases


def _reversal_reach(n: int, window: int, needed_shift: int = 1, width: float = 1.0,
                    strict: bool = False) -> torch.Tensor:
    """1 where local-m's window at step ``t`` (centre ``p_t = t``, half-width ``width * D``) holds the
    source position ``n + needed_shift - t`` that reversal's output ``t`` copies, for ``t = 1 .. n``;
    the keyword arguments give the known wrong answers."""
    t = torch.arange(1, n + 1)  # (n,): the output steps
    distance = (n + needed_shift - t - t).abs()  # (n,): |needed position - p_t|
    return (distance < width * window if strict else distance <= width * window).long()


check_reversal_reach = Check(
    "your reach agrees with local-m's window on 12 fresh (n, D)",
    reversal_reach_cases, _reversal_reach,
    describe=lambda n, window: f"n = {n}, D = {window}",
    compared_with="the book's", noun="reach", layout="(n,)",
    slips=(
        Slip(lambda n, window: torch.ones(n, dtype=torch.long),
             "that is copying, where step t writes source digit t; reversing, step t writes source digit "
             "n + 1 - t"),
        Slip(lambda n, window: _reversal_reach(n, window, needed_shift=0),
             "positions count from 1: step 1 writes the last digit, source position n, so step t needs "
             "position n + 1 - t"),
        Slip(lambda n, window: _reversal_reach(n, window, strict=True),
             "the window includes its edges: position s is in it when |s - p_t| <= D"),
        Slip(lambda n, window: _reversal_reach(n, window, width=2.0),
             "D is the half-width: the window [p_t - D, p_t + D] holds 2D + 1 positions, D on each side"),
        Slip(lambda n, window: _reversal_reach(n, window, width=0.5),
             "the window reaches D positions on each side of p_t, not D/2"),
    ),
    shape_hint=lambda shape, n, window: (
        ": one entry per digit step t = 1 .. n (leave out the <eos> step)" if shape == (n + 1,) else ""),
)


# ---------------------------------------------------------------------------
# The alignment error rate of attention maps on reversal, against its gold alignment.
# ---------------------------------------------------------------------------


def reversal_aer_cases(generator: torch.Generator, trials: int = 20) -> list[tuple]:
    """Fresh inputs ``(weights, src_lens)`` for :data:`check_reversal_aer`.

    ``weights`` is ``(B, S + 1, S)`` in float64, teacher-forced attention of a reversal model:
    every row (the ``n`` digit steps, the end-of-sequence step ``n + 1`` and the padded steps) a
    softmax over the first ``n = src_lens[b]`` source positions, weight exactly 0 on the others.
    About half of the digit steps have their largest weight on the gold position ``n + 1 - t``
    (counted from 1). Every case has a string of 3 digits and one of ``S``, so that an average of
    per-string rates differs from the corpus rate.
    """
    cases = []
    for _ in range(trials):
        batch = int(torch.randint(2, 6, (), generator=generator))
        width = int(torch.randint(4, 9, (), generator=generator))
        src_lens = torch.randint(3, width + 1, (batch,), generator=generator)
        src_lens[0], src_lens[1] = 3, width
        steps = width + 1
        scores = torch.randn(batch, steps, width, generator=generator, dtype=torch.float64)
        t = torch.arange(steps)[None]  # (1, T), from 0
        gold = src_lens[:, None] - 1 - t  # (B, T): the gold position, from 0
        boost = torch.rand(batch, steps, generator=generator) < 0.5  # (B, T)
        boost &= t < src_lens[:, None]
        rows = torch.arange(batch)[:, None].expand(batch, steps)[boost]
        scores[rows, t.expand(batch, steps)[boost], gold[boost]] += 4.0
        padding = torch.arange(width) >= src_lens[:, None, None]  # (B, 1, S)
        weights = torch.softmax(scores.masked_fill(padding, float("-inf")), dim=-1)
        cases.append((weights, src_lens))
    return cases


def reversal_aer_by_sets(weights: torch.Tensor, src_lens: torch.Tensor) -> torch.Tensor:
    """Och and Ney's AER, ``1 - (|A ∩ S| + |A ∩ P|) / (|A| + |S|)`` with ``P = S``, over Python sets
    of links ``(b, t, s)`` of the whole batch: ``A`` each digit step's largest weight, ``S`` reversal's
    gold links ``s = n + 1 - t`` (from 1), the end-of-sequence and padded steps left out."""
    alignment, sure = set(), set()
    for b, n in enumerate(src_lens.tolist()):
        for t in range(1, n + 1):
            row = weights[b, t - 1, :n].tolist()
            alignment.add((b, t, row.index(max(row)) + 1))
            sure.add((b, t, n + 1 - t))
    return torch.tensor(1 - 2 * len(alignment & sure) / (len(alignment) + len(sure)), dtype=torch.float64)


def _reversal_aer_with(weights, src_lens, gold="reversal", eos=False, average="corpus", score="aer"):
    """The AER, vectorised, with the known wrong answers switched on by the keywords: ``gold``
    "reversal" (the right ``n - 1 - t`` from 0), "copy" (``t``) or "shifted" (``n - t`` from 0);
    ``eos`` counts the end-of-sequence step's link in A; ``average`` "corpus" (the counts of the
    whole batch) or "strings" (the mean of each string's rate); ``score`` "aer" or "precision" (the
    share of right links, 1 - AER)."""
    batch, steps, width = weights.shape
    t = torch.arange(steps)[None]  # (1, T)
    position = {"reversal": src_lens[:, None] - 1 - t, "copy": t.expand(batch, steps),
                "shifted": src_lens[:, None] - t}[gold]  # (B, T)
    digit = t < src_lens[:, None]  # (B, T)
    hits = ((weights.argmax(-1) == position) & digit).sum(1).to(torch.float64)  # (B,)
    links = src_lens.to(torch.float64)  # |S| per string; |A| the same, plus one with the eos link
    found = links + 1 if eos else links
    if average == "strings":
        rate = (1 - 2 * hits / (found + links)).mean()
    else:
        rate = 1 - 2 * hits.sum() / (found.sum() + links.sum())
    return 1 - rate if score == "precision" else rate


def _aer(**options):
    return lambda *case: _reversal_aer_with(*case, **options)


def _reversal_slip(weights, src_lens, slip):
    """The wrong answers that are not a switch of :func:`_reversal_aer_with`: ``slip``
    "mass" (1 - the mean weight on the gold position, the soft score, no argmax),
    "once" (|A ∩ S| counted once: 1 - hits / (|A| + |S|)), "padded" (every row of
    ``weights``, end-of-sequence and padding included, linked in A) or "axis" (the argmax
    over the output steps, one link per source position)."""
    batch, steps, width = weights.shape
    t = torch.arange(steps)[None]  # (1, T)
    gold = src_lens[:, None] - 1 - t  # (B, T)
    digit = t < src_lens[:, None]  # (B, T)
    links = src_lens.sum().to(torch.float64)  # |S|
    if slip == "mass":
        on_gold = weights.gather(-1, gold.clamp(min=0)[..., None])[..., 0]  # (B, T)
        return 1 - on_gold[digit].mean()
    if slip == "axis":
        s = torch.arange(width)[None]  # (1, S)
        best = weights.argmax(1)  # (B, S): for each source position, the step of largest weight
        hits = ((best == src_lens[:, None] - 1 - s) & (s < src_lens[:, None])).sum()
        return 1 - 2 * hits / (2 * links)
    hits = ((weights.argmax(-1) == gold) & digit).sum().to(torch.float64)
    if slip == "once":
        return 1 - hits / (2 * links)
    return 1 - 2 * hits / (batch * steps + links)  # "padded"


check_reversal_aer = Check(
    "your alignment error rate agrees with Och and Ney's definition, counted over sets of links, on "
    "20 fresh batches",
    reversal_aer_cases, reversal_aer_by_sets,
    describe=lambda weights, src_lens: (f"weights of shape {tuple(weights.shape)} and src_lens "
                                        f"{src_lens.tolist()}"),
    compared_with="the sets'", noun="AER", layout="",
    slips=(
        Slip(_aer(gold="copy"),
             "that scores the diagonal, copying's alignment: reversing, output t writes source digit n + 1 - t"),
        Slip(_aer(gold="shifted"),
             "off by one: in tensors positions count from 0, so step t (from 0) reads source position "
             "n - 1 - t, not n - t"),
        Slip(_aer(eos=True),
             "you linked the end-of-sequence step: it writes no digit and has no gold link, so leave it out "
             "of A as the statement says"),
        Slip(_aer(average="strings"),
             "that is the mean of each string's AER: Och and Ney count the links of the whole corpus, "
             "|A ∩ S| and |A| + |S| summed over the strings, then divide"),
        Slip(_aer(score="precision"),
             "that is the share of right links, 1 - AER: return the error rate"),
        Slip(lambda *case: _reversal_slip(*case, "mass"),
             "that is 1 - the gold mass, the mean weight on the gold position: the AER scores hard links, "
             "each digit step linked to the argmax of its weights"),
        Slip(lambda *case: _reversal_slip(*case, "once"),
             "you counted the right links once: the numerator is |A ∩ S| + |A ∩ P|, and with P = S each "
             "right link counts twice, over |A| + |S|"),
        Slip(lambda *case: _reversal_slip(*case, "padded"),
             "you linked every row, the end-of-sequence and padded steps too: only the digit steps "
             "1, ..., n of each string belong in A"),
        Slip(lambda *case: _reversal_slip(*case, "axis"),
             "that argmax runs over the output steps (dim 1): each output step's link is the source "
             "position of its largest weight, the argmax over the last dimension"),
    ),
    shape_hint=lambda shape, weights, src_lens: (
        ": that is one rate per string; count the links of the whole batch and return one number"
        if shape == (len(src_lens),) else ""),
    tolerance=dict(atol=1e-9, rtol=1e-9),
)
