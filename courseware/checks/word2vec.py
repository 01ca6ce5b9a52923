"""Checkers for the exercises of chapter 5 (word embeddings and word2vec)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from courseware.checks.core import Check, CheckFailed, Slip
from lib.part3_words.word2vec import EncodedCorpus, skipgram_pairs


# ---------------------------------------------------------------------------
# The scores negative sampling converges to (exercise ex-w2v-pmi).
# ---------------------------------------------------------------------------


def sgns_optimum_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(counts, k, exponent)`` for :data:`check_sgns_optimum`.

    ``counts`` is a float64 ``(V, C)`` matrix of whole numbers from 1 to 60 with ``V != C``, both
    in 2..7, so that a marginal taken over the wrong axis fails loudly; ``k`` is an int from 2 to
    20 (``log k > 0``: leaving the shift out shows). The first case has the exponent 1, Levy and
    Goldberg's noise, the second the chapter's 3/4, the others 1, 3/4 or a value drawn from
    [0.3, 1]: an answer that ignores the exponent passes the first case and fails the second.
    """
    cases = []
    for trial in range(trials):
        words, contexts = (int(n) for n in torch.randperm(6, generator=generator)[:2] + 2)
        counts = torch.randint(1, 61, (words, contexts), generator=generator).double()
        k = int(torch.randint(2, 21, (1,), generator=generator))
        drawn = 0.3 + 0.7 * float(torch.rand(1, generator=generator, dtype=torch.float64))
        choice = int(torch.randint(3, (1,), generator=generator))
        exponent = 1.0 if trial == 0 else 0.75 if trial == 1 else (1.0, 0.75, drawn)[choice]
        cases.append((counts, k, exponent))
    return cases


def sgns_optimum(counts: torch.Tensor, k: int, exponent: float, noise_of: str = "contexts", normalise: bool = True,
                 per_word: str = "rows", shift: float = -1.0) -> torch.Tensor:
    """The scores ``x[w, o]`` that minimise the expected negative-sampling loss (Levy and Goldberg, 2014).

    The pairs ``(w, o)`` seen ``#(w, o)`` times each bring ``k`` noise contexts from
    ``P_n(o) ∝ n_o ** exponent``, ``n_o = Σ_w #(w, o)``; word ``w`` meets ``o`` as noise
    ``k #(w) P_n(o)`` times on average, ``#(w) = Σ_o #(w, o)``. Each score's part of the loss,
    ``-#(w, o) log σ(x) - k #(w) P_n(o) log σ(-x)``, is least at
    ``x = log #(w, o) - log #(w) - log P_n(o) - log k``; with ``exponent = 1`` that is
    ``PMI(w, o) - log k``. The keywords make the slips: ``noise_of="words"`` builds the noise from the
    row sums, ``normalise=False`` leaves ``n_o ** exponent`` unnormalised, ``per_word="columns"`` or
    ``"none"`` weighs the noise by ``n_o`` or by 1 instead of ``#(w)``, and ``shift`` multiplies ``log k``.

    Shapes
    ------
    counts : (V, C); output : (V, C) float64
    """
    rows, columns = counts.sum(dim=1, keepdim=True), counts.sum(dim=0, keepdim=True)  # (V, 1), (1, C)
    base = rows if noise_of == "words" else columns
    noise = base**exponent
    if normalise:
        noise = noise / noise.sum()
    weight = {"rows": rows, "columns": columns, "none": torch.ones_like(rows)}[per_word]
    return counts.log() - weight.log() - noise.log() + shift * math.log(k)


def _sgns_rules(found: torch.Tensor, expected: torch.Tensor, counts, k, exponent) -> str | None:
    """Names an error that moves every score by the same amount, or by one that depends on one axis only."""
    error = found - expected
    if torch.allclose(error, error.mean().expand_as(error), atol=1e-6, rtol=0):
        return (f"every one of your scores is off by the same amount, {float(error.mean()):.4g}: a constant such as "
                "log K, log |D| or the normalisation of P_n is wrong or missing")
    if torch.allclose(error, error.mean(dim=0, keepdim=True).expand_as(error), atol=1e-6, rtol=0):
        return ("your scores are off by an amount that depends on the context o alone: check P_n(o), the noise "
                "distribution of the contexts, n_o^α / Σ n^α with n_o the sum of column o")
    if torch.allclose(error, error.mean(dim=1, keepdim=True).expand_as(error), atol=1e-6, rtol=0):
        return ("your scores are off by an amount that depends on the centre word w alone: check #(w) = Σ_o #(w, o), "
                "the number of pairs centred on w, each of which brings K noise words")
    return None


def _sgns_mismatch(found: torch.Tensor, expected: torch.Tensor, counts, k, exponent) -> str:
    """The last-resort message; a small error without structure is the mark of a numerical minimiser
    stopped at its default tolerance."""
    scaled = ((found.double() - expected) / (1 + expected.abs())).abs().max()
    if scaled < 1e-2:
        return (f"your scores are within {float(scaled):.2g} × (1 + |x*|) of the optimum but not on it: did a "
                "minimiser stop early? Each score's term has a closed-form minimum; compute it directly")
    return (f"your scores differ from the optimum by up to {float(scaled):.3g} × (1 + |x*|): set the derivative "
            "of each score's term of the expected loss to zero")


check_sgns_optimum = Check(
    "your scores minimise the expected negative-sampling loss (Levy and Goldberg's closed form) on 12 fresh random "
    "count matrices",
    sgns_optimum_cases, sgns_optimum,
    describe=lambda counts, k, exponent: (f"counts of shape (V, C) = {tuple(counts.shape)}, k = {k} and "
                                          f"exponent = {exponent:.4g}"),
    compared_with="the optimum", noun="scores", layout="(V, C)",
    slips=(
        Slip(lambda *case: sgns_optimum(*case, shift=0.0),
             "each pair brings K noise words, which shift the optimum by -log K: you left the shift out"),
        Slip(lambda *case: sgns_optimum(*case, shift=1.0),
             "the shift is -log K: more noise words push the scores down, not up"),
        Slip(lambda counts, k, exponent: counts.log(),
             "that is log #(w, o): the noise terms move the optimum too; how often does the noise bring o to w?"),
        Slip(lambda counts, k, exponent: counts.log() - math.log(k),
             "that is log #(w, o) - log K: divide the count by K #(w) P_n(o), the expected number of times the "
             "noise brings o to w, not by K alone"),
        Slip(lambda *case: sgns_optimum(*case, normalise=False),
             "P_n(o) = n_o^α / Σ n^α is a distribution: you left out its normalisation"),
        Slip(lambda counts, k, exponent: sgns_optimum(counts, k, 1.0),
             "the noise raises each context's count to the power α = exponent before normalising; you used the "
             "counts themselves, α = 1"),
        Slip(lambda *case: sgns_optimum(*case, noise_of="words"),
             "P_n is the distribution of the context words: n_o sums column o (over the centre words), not row w"),
        Slip(lambda *case: sgns_optimum(*case, per_word="none"),
             "each of the #(w) = Σ_o #(w, o) pairs centred on w brings K noise words: the noise meets w and o "
             "K #(w) P_n(o) times, not K P_n(o)"),
        Slip(lambda *case: sgns_optimum(*case, per_word="columns"),
             "the noise term of x_wo is weighted by #(w) = Σ_o #(w, o), the number of pairs centred on w (a row "
             "sum), not by n_o"),
        Slip(lambda *case: torch.sigmoid(sgns_optimum(*case)),
             "that is σ(x*), the probability of 'real' that the optimal score gives the pair: return the score "
             "x* itself"),
        Slip(lambda *case: torch.nn.functional.logsigmoid(sgns_optimum(*case)),
             "that is log σ(x*), the log-probability of 'real' that the optimal score gives the pair: return the "
             "score x* itself"),
        Slip(lambda *case: -sgns_optimum(*case),
             "your scores have the wrong sign: the true pairs pull x up, the noise pulls it down, and the optimum "
             "is e^x = #(w, o) / (K #(w) P_n(o))"),
    ),
    error_hint=(": the (V, C) counts have rows for the centre words and columns for the contexts; #(w) sums a row "
                "(V values) and n_o a column (C values)"),
    nan_hint=": every count is positive, so every optimum is finite",
    rules=_sgns_rules, mismatch=_sgns_mismatch,
)


# ---------------------------------------------------------------------------
# The expected number of skip-gram pairs of a sentence (exercise ex-w2v-pairs).
# ---------------------------------------------------------------------------


def expected_pairs_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(lengths, window)`` for :data:`check_expected_pairs`.

    ``window`` is an int from 2 to 8 (with 1, a fixed window and a drawn one are the same). Each
    case holds 4 to 8 sentence lengths in random order: a sentence of one word (no pairs at all), one
    no longer than the window (its ends cut every window that reaches them), one longer, from
    ``window + 1`` to ``4 window``, and the others drawn from 1 to ``4 window``.
    """
    cases = []
    for _ in range(trials):
        window = int(torch.randint(2, 9, (1,), generator=generator))
        count = int(torch.randint(4, 9, (1,), generator=generator))
        short = int(torch.randint(2, window + 1, (1,), generator=generator))
        long = int(torch.randint(window + 1, 4 * window + 1, (1,), generator=generator))
        others = torch.randint(1, 4 * window + 1, (count - 3,), generator=generator)
        lengths = torch.cat([torch.tensor([1, short, long]), others])
        cases.append((lengths[torch.randperm(count, generator=generator)], window))
    return cases


def expected_pairs_by_lib(lengths: torch.Tensor, window: int) -> torch.Tensor:
    """The reference: the expected number of pairs ``lib.part3_words.word2vec.skipgram_pairs`` yields per sentence.

    The pairs centred on a position depend on its own window only, so by linearity the expectation
    over independent windows is the mean, over ``b = 1 .. window``, of the count with every window
    equal to ``b``. Each position's word id is its sentence's number, so that the centres say which
    sentence each pair belongs to.

    Shapes
    ------
    lengths : (S,); output : (S,) float64
    """
    sentence = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    corpus = EncodedCorpus(ids=sentence, sentence=sentence)
    total = torch.zeros(len(lengths), dtype=torch.float64)
    for b in range(1, window + 1):
        centres, _ = skipgram_pairs(corpus, torch.full((len(corpus),), b, dtype=torch.long))
        total += torch.bincount(centres, minlength=len(lengths)).double()
    return total / window


def expected_pairs_by_distance(lengths: torch.Tensor, window: int, chance: str = "(m - d + 1)/m",
                               positions: str = "L - d", directions: int = 2, cap: bool = True) -> torch.Tensor:
    """``Σ_d directions × positions × chance`` over the distances ``d = 1 .. window``: the sum by distance,
    ``(S,)``. The options make the slips: ``chance``, the probability that a word at distance d is a
    context, is ``"(m - d + 1)/m"`` (right), ``"(m - d + 1)/(m + 1)"`` (b from 0 .. m), ``"1"`` (no
    shrinking), ``"(m - d)/m"``, ``"d/m"`` (P(b <= d)) or ``"floor"`` / ``"ceil"`` (a fixed window of
    (m + 1)/2 rounded down or up); ``positions``, the pairs of positions at distance d in each direction,
    ``"L - d"`` (right) or ``"L - d + 1"``; ``cap=False`` keeps the negative terms of d > L."""
    m = window
    d = torch.arange(1, m + 1, dtype=torch.float64)
    used = {"(m - d + 1)/m": (m - d + 1) / m, "(m - d + 1)/(m + 1)": (m - d + 1) / (m + 1),
            "1": torch.ones_like(d), "(m - d)/m": (m - d) / m, "d/m": d / m,
            "floor": (d <= (m + 1) // 2).double(), "ceil": (d <= (m + 2) // 2).double()}[chance]
    length = lengths.double()[:, None]  # (S, 1)
    pairs = {"L - d": length - d, "L - d + 1": (length - d + 1) * (d < length)}[positions]  # (S, m)
    if cap:
        pairs = pairs.clamp(min=0)
    return directions * (pairs * used).sum(dim=1)


def _mean_window_capped(lengths: torch.Tensor, window: int) -> torch.Tensor:
    """The slip min(E[b], room) for E[min(b, room)] on each side of each position."""
    mean = (window + 1) / 2
    found = []
    for length in lengths.tolist():
        found.append(sum(min(mean, t) + min(mean, length - 1 - t) for t in range(length)))
    return torch.tensor(found, dtype=torch.float64)


check_expected_pairs = Check(
    "your expected numbers of pairs agree with the exact expectation of lib.part3_words.word2vec's skipgram_pairs on 12 fresh "
    "random cases",
    expected_pairs_cases, expected_pairs_by_lib,
    describe=lambda lengths, window: f"lengths {lengths.tolist()} and window m = {window}",
    compared_with="the exact expectation", noun="expected numbers of pairs", layout="(S,)",
    slips=(
        Slip(lambda lengths, window: (window + 1) * lengths.double(),
             "a window never crosses the ends of its sentence: a position near an end has fewer than b words on "
             "that side, so a sentence of L words yields fewer than (m + 1) L pairs"),
        Slip(functools.partial(expected_pairs_by_distance, chance="(m - d + 1)/(m + 1)"),
             "the window b is drawn from 1, ..., m (m values), not from 0, ..., m"),
        Slip(functools.partial(expected_pairs_by_distance, directions=1),
             "each pair of positions at distance d is counted twice, once with each word as the centre: there "
             "are 2 (L - d) ordered pairs"),
        Slip(functools.partial(expected_pairs_by_distance, chance="1"),
             "word2vec shrinks each window at random: a word at distance d is used only when b >= d, with "
             "probability (m - d + 1)/m"),
        Slip(functools.partial(expected_pairs_by_distance, chance="(m - d)/m"),
             "a word at distance d is used when b >= d, which happens for m - d + 1 of the m windows, not m - d"),
        Slip(functools.partial(expected_pairs_by_distance, cap=False),
             "a sentence of L words has no pairs at a distance d >= L: your sum over d = 1 .. m (or a closed "
             "form valid only for L >= m) gives negative terms L - d for the sentences shorter than the window"),
        Slip(functools.partial(expected_pairs_by_distance, positions="L - d + 1"),
             "a sentence of L words has L - d pairs of positions at distance d in each direction, not L - d + 1"),
        Slip(_mean_window_capped,
             "a position with r words on one side gets min(b, r) of them: average min(b, r) over the windows b; "
             "min(E[b], r) is not the same"),
        Slip(functools.partial(expected_pairs_by_distance, chance="d/m"),
             "a word at distance d is used when b >= d: P(b >= d) = (m - d + 1)/m; d/m is P(b <= d)"),
        *(Slip(functools.partial(expected_pairs_by_distance, chance=rounding),
               "a fixed window of (m + 1)/2, the mean of b, rounded, is not the same as drawing b: a word at "
               "distance d is used with probability (m - d + 1)/m") for rounding in ("floor", "ceil")),
    ),
    shape_hint=lambda shape, lengths, window: (": return one expected number per sentence, not their sum"
                                               if shape == () else ""),
)


# ---------------------------------------------------------------------------
# 3CosMul's scores (exercise ex-w2v-3cosmul).
# ---------------------------------------------------------------------------


def cosmul_cases(generator: torch.Generator, trials: int = 12) -> list[tuple]:
    """Fresh inputs ``(vectors, a, b, c)`` for :data:`check_cosmul_scores`.

    ``vectors`` is a float64 ``(V, D)`` matrix, V from 6 to 12 and D from 2 to 5, whose rows have
    lengths from 0.2 to 5 (an answer that uses dot products instead of cosines shows); ``a, b, c``
    are three different word ids. Normal entries give cosines of both signs, so leaving out the
    shift to [0, 1] shows.
    """
    cases = []
    for _ in range(trials):
        words = int(torch.randint(6, 13, (1,), generator=generator))
        dim = int(torch.randint(2, 6, (1,), generator=generator))
        vectors = torch.randn(words, dim, generator=generator, dtype=torch.float64)
        lengths = 0.2 + 4.8 * torch.rand(words, 1, generator=generator, dtype=torch.float64)
        vectors = vectors / vectors.norm(dim=1, keepdim=True) * lengths
        a, b, c = (int(i) for i in torch.randperm(words, generator=generator)[:3])
        cases.append((vectors, a, b, c))
    return cases


def cosmul_scores(vectors: torch.Tensor, a: int, b: int, c: int, shift: str = "half", epsilon: float = 0.001,
                  unit: str = "rows", exclude: bool = True, away: str = "a") -> torch.Tensor:
    """The 3CosMul score of every word as the answer to ``a : b :: c : ?`` (Levy and Goldberg 2014, section 6).

    ``cos'(x, b) cos'(x, c) / (cos'(x, a) + ε)``, with ``cos' = (cos + 1) / 2`` and ``ε = 0.001``; the
    three question words get 0, below every other word (3CosMul's scores are never negative; the exercise
    asks for 0 because the checker refuses infinities). The keywords make the slips: ``shift="none"`` uses the
    cosines in [-1, 1] and ``shift="clamp"`` clamps them at 0 instead of shifting, ``epsilon`` changes ε,
    ``unit="none"`` uses dot products, ``unit="columns"`` and ``unit="matrix"`` scale the columns or the whole
    matrix to length 1 instead of each row, ``exclude=False`` keeps the question words, and ``away="b"`` divides
    by the wrong word.

    Shapes
    ------
    vectors : (V, D); output : (V,) float64
    """
    norms = {"rows": vectors.norm(dim=1, keepdim=True), "columns": vectors.norm(dim=0, keepdim=True),
             "matrix": vectors.norm(), "none": 1.0}
    rows = vectors / norms[unit]
    cos = {name: rows @ rows[i] for name, i in (("a", a), ("b", b), ("c", c))}  # (V,) each
    if shift == "half":
        cos = {name: (value + 1) / 2 for name, value in cos.items()}
    elif shift == "clamp":
        cos = {name: value.clamp(min=0) for name, value in cos.items()}
    toward = "a" if away == "b" else "b"
    scores = cos[toward] * cos["c"] / (cos[away] + epsilon)
    if exclude:
        scores[[a, b, c]] = 0.0
    return scores


def cosadd_scores(vectors: torch.Tensor, a: int, b: int, c: int) -> torch.Tensor:
    """3CosAdd's scores, ``cos(x, b̂ - â + ĉ)``, the question words at 0: a slip of the exercise."""
    rows = vectors / vectors.norm(dim=1, keepdim=True)
    query = rows[b] - rows[a] + rows[c]
    scores = rows @ (query / query.norm())
    scores[[a, b, c]] = 0.0
    return scores


@dataclass(frozen=True)
class _CosMulCheck(Check):
    """:class:`Check` that first says so when the only infinities are at the three question words, as
    ``WordVectors.analogy_scores`` puts them."""

    def _comparable(self, found: torch.Tensor, expected: torch.Tensor, case: tuple) -> tuple[torch.Tensor, dict]:
        _, a, b, c = case
        if (found.is_floating_point() and found.shape == expected.shape and found.dim() == 1
                and torch.isinf(found).any()):
            question = torch.zeros(found.shape, dtype=torch.bool)
            question[[a, b, c]] = True
            if torch.isinf(found[question]).all() and torch.isfinite(found[~question]).all():
                raise CheckFailed(f"your scores are inf at a, b and c for {self.describe(*case)}: give the question "
                                  "words 0, not -inf as analogy_scores does (every other score is at least 0, and "
                                  "the checker refuses infinities)")
        return super()._comparable(found, expected, case)


check_cosmul_scores = _CosMulCheck(
    "your scores are 3CosMul's (Levy and Goldberg 2014, section 6, with ε = 0.001) on 12 fresh random sets "
    "of word vectors",
    cosmul_cases, cosmul_scores,
    describe=lambda vectors, a, b, c: f"{vectors.shape[0]} vectors of {vectors.shape[1]} dimensions, a = {a}, "
                                      f"b = {b}, c = {c}",
    compared_with="3CosMul's scores", noun="scores", layout="(V,)",
    slips=(
        Slip(functools.partial(cosmul_scores, shift="none"),
             "3CosMul multiplies and divides cosines shifted to [0, 1], (cos + 1) / 2: with raw cosines in "
             "[-1, 1], two negative cosines multiply to a positive score and the denominator can vanish"),
        Slip(functools.partial(cosmul_scores, shift="clamp"),
             "those are cosines clamped at 0: 3CosMul shifts them to [0, 1] with (cos + 1) / 2, which keeps "
             "the order of the negative cosines instead of setting them all to 0"),
        Slip(functools.partial(cosmul_scores, epsilon=0.0),
             "you left ε = 0.001 out of the denominator, cos'(x, a) + ε"),
        Slip(functools.partial(cosmul_scores, epsilon=0.01),
             "your ε is 0.01: this exercise (like Levy and Goldberg) uses ε = 0.001"),
        Slip(functools.partial(cosmul_scores, unit="none"),
             "those are dot products of the vectors as given: cosines compare directions, so scale every row "
             "to length 1 first"),
        Slip(functools.partial(cosmul_scores, unit="columns"),
             "you scaled each column (dimension) to length 1: a cosine needs each row (word) scaled to length "
             "1, vectors.norm(dim=1, keepdim=True)"),
        Slip(functools.partial(cosmul_scores, unit="matrix"),
             "you divided the whole matrix by one norm: a cosine needs each row (word) scaled to length 1, "
             "vectors.norm(dim=1, keepdim=True)"),
        Slip(functools.partial(cosmul_scores, exclude=False),
             "the three question words are never the answer: give a, b and c the score 0"),
        Slip(functools.partial(cosmul_scores, away="b"),
             "the answer should be like b and c and unlike a: a's shifted cosine is the one in the denominator"),
        Slip(cosadd_scores,
             "those are 3CosAdd's scores, the cosine with b̂ - â + ĉ: 3CosMul multiplies the shifted cosines with "
             "b and c and divides by the one with a"),
    ),
    error_hint=": vectors holds one row per word; a, b and c are row numbers",
    nan_hint=": every row is non-zero, and a shifted cosine plus ε is never 0",
)
