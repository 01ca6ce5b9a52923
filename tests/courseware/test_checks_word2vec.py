"""The checkers of chapter 5: the scores negative sampling converges to (ex-w2v-pmi) and the expected
number of skip-gram pairs of a sentence (ex-w2v-pairs). Each reference is held to an independent
computation: numerical minimisation of the expected loss, and enumeration of every draw of the
windows. Right answers pass however they are written; wrong ones fail with a message that says
what is wrong."""
import contextlib
import ctypes
import functools
import itertools
import math
from fractions import Fraction
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from courseware.checks import CHECKS, CheckFailed, check_cosmul_scores, check_expected_pairs, check_sgns_optimum
from courseware.checks.word2vec import (
    cosmul_cases, expected_pairs_by_lib, expected_pairs_cases, sgns_optimum, sgns_optimum_cases,
)
from lib.corpus import Vocabulary
from lib.part3_words.embeddings import WordVectors
from lib.part3_words.word2vec import EncodedCorpus, skipgram_pairs


@pytest.mark.parametrize(("name", "checker"), [("check_sgns_optimum", check_sgns_optimum),
                                               ("check_expected_pairs", check_expected_pairs),
                                               ("check_cosmul_scores", check_cosmul_scores)])
def test_the_checker_is_registered_under_its_name(name, checker):
    assert CHECKS[name] is checker


# ---- the scores negative sampling converges to (ex-w2v-pmi) ----------------------------------------
def expected_sgns_loss(scores, counts, k, exponent):
    """The loss of eq-negative-sampling summed over every pair of ``counts``, noise terms in expectation:
    Σ_wo -#(w, o) log σ(x_wo) - Σ_w #(w) K Σ_o P_n(o) log σ(-x_wo), written from the statement."""
    noise = counts.sum(0) ** exponent
    noise = noise / noise.sum()
    true_pairs = -(counts * F.logsigmoid(scores)).sum()
    noise_pairs = -(counts.sum(1, keepdim=True) * k * noise * F.logsigmoid(-scores)).sum()
    return true_pairs + noise_pairs


def minimise(loss, parameters, steps=3):
    """L-BFGS with a line search, then a few plain quasi-Newton steps: the line search compares values of
    a loss of thousands, whose rounding stops it about 1e-7 short of the minimum; the plain steps use
    only gradients."""
    for line_search, iterations, repeats in (("strong_wolfe", 200, steps), (None, 20, 1)):
        optimiser = torch.optim.LBFGS(parameters, lr=1, max_iter=iterations, tolerance_grad=1e-12,
                                      tolerance_change=0, history_size=20, line_search_fn=line_search)

        def closure():
            optimiser.zero_grad()
            value = loss()
            value.backward()
            return value

        for _ in range(repeats):
            optimiser.step(closure)


def optimum_by_lbfgs(counts, k, exponent):
    """Every score a free parameter, from 0; L-BFGS on the expected loss."""
    scores = torch.zeros_like(counts, requires_grad=True)
    minimise(lambda: expected_sgns_loss(scores, counts, k, exponent), [scores])
    return scores.detach()


def optimum_of_factorised_vectors(counts, k, exponent, seed=0):
    """Input and output vectors with min(V, C) dimensions, the scores their products v_w · u_o."""
    generator = torch.Generator().manual_seed(seed)
    dim = min(counts.shape)
    inputs = (0.1 * torch.randn(counts.shape[0], dim, generator=generator, dtype=torch.float64)).requires_grad_()
    outputs = (0.1 * torch.randn(counts.shape[1], dim, generator=generator, dtype=torch.float64)).requires_grad_()
    minimise(lambda: expected_sgns_loss(inputs @ outputs.T, counts, k, exponent), [inputs, outputs], steps=10)
    return (inputs @ outputs.T).detach()


def test_at_the_closed_form_the_expected_loss_is_flat_and_curves_up_in_every_score():
    """Autograd's gradient vanishes there, and the Hessian is diagonal (each score has its own term) and
    positive: the expected loss is strictly convex in the scores, so that is its one minimum."""
    for seed in range(5):
        for counts, k, exponent in sgns_optimum_cases(torch.Generator().manual_seed(seed)):
            scores = sgns_optimum(counts, k, exponent).requires_grad_()
            (gradient,) = torch.autograd.grad(expected_sgns_loss(scores, counts, k, exponent), scores)
            assert gradient.abs().max() < 1e-11 * counts.sum()
            cells = counts.numel()
            hessian = torch.autograd.functional.hessian(
                lambda x: expected_sgns_loss(x.view_as(counts), counts, k, exponent), scores.detach().flatten())
            diagonal = torch.diagonal(hessian)
            assert torch.equal(hessian, torch.diag(diagonal)) and diagonal.min() > 0 and len(diagonal) == cells


def test_lbfgs_from_zero_finds_the_closed_form():
    for case in sgns_optimum_cases(torch.Generator().manual_seed(0), trials=4):
        torch.testing.assert_close(optimum_by_lbfgs(*case), sgns_optimum(*case), atol=1e-6, rtol=0)


def test_vectors_with_enough_dimensions_reach_the_closed_form():
    """Levy and Goldberg's condition: with min(V, C) dimensions every score matrix is a product v_w · u_o."""
    for case in sgns_optimum_cases(torch.Generator().manual_seed(1), trials=2):
        torch.testing.assert_close(optimum_of_factorised_vectors(*case), sgns_optimum(*case), atol=1e-6, rtol=0)


def test_with_the_unigram_noise_the_optimum_is_the_shifted_pmi():
    counts, k, _ = sgns_optimum_cases(torch.Generator().manual_seed(0))[0]
    joint = counts / counts.sum()
    pmi = (joint / (joint.sum(1, keepdim=True) * joint.sum(0, keepdim=True))).log()
    torch.testing.assert_close(sgns_optimum(counts, k, 1.0), pmi - math.log(k), atol=1e-12, rtol=0)


def test_every_case_has_the_exponent_one_first_then_three_quarters():
    for seed in range(20):
        cases = sgns_optimum_cases(torch.Generator().manual_seed(seed))
        assert [case[2] for case in cases[:2]] == [1.0, 0.75]
        assert all(case[0].shape[0] != case[0].shape[1] and case[1] >= 2 and case[0].min() >= 1 for case in cases)


def sgns_optimum_by_loops(counts, k, exponent):
    """Cell by cell in Python floats, from e^x = P(o | w) / (K P_n(o))."""
    rows = counts.tolist()
    contexts = [sum(row[o] for row in rows) for o in range(len(rows[0]))]
    norm = sum(n**exponent for n in contexts)
    return torch.tensor([[math.log(row[o] / sum(row)) - math.log(k * contexts[o]**exponent / norm)
                          for o in range(len(row))] for row in rows], dtype=torch.float64)


def sgns_optimum_by_newton(counts, k, exponent):
    """Newton's method on each score's derivative, -a σ(-x) + b σ(x), from 0 until the step is below 1e-13."""
    a = counts
    noise = counts.sum(0) ** exponent
    b = k * counts.sum(1, keepdim=True) * noise / noise.sum()
    x = torch.zeros_like(counts)
    for _ in range(200):
        slope = -a * torch.sigmoid(-x) + b * torch.sigmoid(x)
        curvature = (a + b) * torch.sigmoid(x) * torch.sigmoid(-x)
        step = (slope / curvature).clamp(-1, 1)
        x = x - step
        if step.abs().max() < 1e-13:
            break
    return x


def sgns_optimum_float32(counts, k, exponent):
    counts = counts.float()
    noise = counts.sum(0) ** exponent
    return torch.log(counts) - torch.log(counts.sum(1, keepdim=True)) - torch.log(k * noise / noise.sum())


def sgns_pmi_without_shift(counts, k, exponent):
    noise = counts.sum(0) ** exponent
    return (counts / counts.sum(1, keepdim=True) / (noise / noise.sum())).log()


def sgns_shift_added(counts, k, exponent):
    return sgns_pmi_without_shift(counts, k, exponent) + math.log(k)


def sgns_log_counts(counts, k, exponent):
    return counts.log()


def sgns_noise_not_normalised(counts, k, exponent):
    return (counts / (k * counts.sum(1, keepdim=True) * counts.sum(0) ** exponent)).log()


def sgns_plain_pmi_minus_log_k(counts, k, exponent):
    """Levy and Goldberg's formula whatever the exponent."""
    total = counts.sum()
    return (counts * total / (counts.sum(1, keepdim=True) * counts.sum(0))).log() - math.log(k)


def sgns_noise_from_the_word_counts(counts, k, exponent):
    """P_n from the row sums, as a student who sums the wrong axis writes it: shapes clash when V != C."""
    per_word = counts.sum(1)
    noise = per_word**exponent / (per_word**exponent).sum()
    return (counts / (k * counts.sum(1, keepdim=True) * noise)).log()


def sgns_noise_from_the_word_counts_keepdim(counts, k, exponent):
    per_word = counts.sum(1, keepdim=True)
    noise = per_word**exponent / (per_word**exponent).sum()
    return (counts / (k * per_word * noise)).log()


def sgns_noise_not_weighted_by_the_word(counts, k, exponent):
    noise = counts.sum(0) ** exponent
    return (counts / (k * noise / noise.sum())).log()


def sgns_minus_the_optimum(counts, k, exponent):
    return -sgns_optimum_by_loops(counts, k, exponent)


def sgns_sigmoid_of_the_optimum(counts, k, exponent):
    return torch.sigmoid(sgns_optimum_by_loops(counts, k, exponent))


def sgns_log_sigmoid_of_the_optimum(counts, k, exponent):
    return F.logsigmoid(sgns_optimum_by_loops(counts, k, exponent))


@functools.cache
def scipy_blas():
    """scipy's own OpenBLAS (scipy.libs/libscipy_openblas*.so, already loaded by scipy.optimize), or None."""
    import scipy

    for path in sorted(Path(scipy.__file__).parent.parent.glob("scipy.libs/libscipy_openblas*.so")):
        library = ctypes.CDLL(str(path))
        if hasattr(library, "scipy_openblas_set_num_threads") and hasattr(library, "scipy_openblas_get_num_threads"):
            return library
    return None


@contextlib.contextmanager
def one_scipy_blas_thread():
    """Run the block with one thread in scipy's OpenBLAS (:func:`scipy_blas`), then restore its count.
    L-BFGS-B calls it on matrices of a few dozen entries: with a thread per core it spent about 7x the
    CPU time, waking threads that only wait, and far more wall time while another lane keeps the cores
    busy (torch's one thread per lane, tests/conftest.py, does not reach it). The minimiser's steps are
    the same bit for bit. Without that library the block runs as it is."""
    blas = scipy_blas()
    threads = blas.scipy_openblas_get_num_threads() if blas else None
    if blas:
        blas.scipy_openblas_set_num_threads(1)
    try:
        yield
    finally:
        if blas:
            blas.scipy_openblas_set_num_threads(threads)


def test_scipy_minimises_on_one_blas_thread_and_gets_its_threads_back():
    import scipy.optimize  # noqa: F401  (loads the library)

    blas = scipy_blas()
    assert blas is not None, "scipy's OpenBLAS not found: sgns_scipy_default_tolerance would run on every core"
    before = blas.scipy_openblas_get_num_threads()
    with one_scipy_blas_thread():
        assert blas.scipy_openblas_get_num_threads() == 1
    assert blas.scipy_openblas_get_num_threads() == before


def sgns_scipy_default_tolerance(counts, k, exponent):
    """The expected loss minimised by scipy's L-BFGS-B at its default settings: about 1e-4 off."""
    import numpy as np
    from scipy.optimize import minimize

    def loss_and_gradient(flat):
        scores = torch.tensor(flat, dtype=torch.float64).view_as(counts).requires_grad_()
        loss = expected_sgns_loss(scores, counts, k, exponent)
        loss.backward()
        return loss.item(), scores.grad.flatten().numpy().copy()

    with one_scipy_blas_thread():
        found = minimize(loss_and_gradient, np.zeros(counts.numel()), jac=True, method="L-BFGS-B").x
    return torch.tensor(found).view_as(counts)


@pytest.mark.parametrize("answer", [sgns_optimum_by_loops, sgns_optimum_by_newton, sgns_optimum_float32])
def test_sgns_optimum_accepts_right_answers(answer, capsys):
    check_sgns_optimum(answer)
    assert capsys.readouterr().out.startswith("✓ your scores minimise the expected negative-sampling loss")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (sgns_pmi_without_shift, "you left the shift out"),
        (sgns_shift_added, "push the scores down, not up"),
        (sgns_log_counts, r"that is log #\(w, o\): the noise terms move the optimum too"),
        (lambda c, k, a: c.log() - math.log(k), r"not by K alone"),
        (sgns_noise_not_normalised, "you left out its normalisation"),
        (sgns_plain_pmi_minus_log_k, "you used the counts themselves, α = 1"),
        (sgns_noise_from_the_word_counts, r"raised RuntimeError.*#\(w\) sums a row \(V values\)"),
        (sgns_noise_from_the_word_counts_keepdim, "n_o sums column o"),
        (sgns_noise_not_weighted_by_the_word, r"K #\(w\) P_n\(o\) times, not K P_n\(o\)"),
        (lambda c, k, a: sgns_optimum_by_loops(c, k, a).T, r"shape \(\d, \d\); expected \(V, C\)"),
        (sgns_minus_the_optimum, "the wrong sign"),
        (sgns_sigmoid_of_the_optimum, r"that is σ\(x\*\), the probability of 'real'"),
        (sgns_log_sigmoid_of_the_optimum, r"that is log σ\(x\*\)"),
        (sgns_scipy_default_tolerance, r"within .* of the optimum but not on it: did a minimiser stop early"),
        (lambda *case: sgns_optimum_by_loops(*case) + 1, "off by the same amount, 1:"),
        (lambda c, k, a: sgns_optimum_by_loops(c, k, a) + torch.arange(c.shape[1]), "depends on the context o alone"),
        (lambda c, k, a: sgns_optimum_by_loops(c, k, a) + torch.arange(c.shape[0])[:, None],
         "depends on the centre word w alone"),
        (lambda c, k, a: sgns_optimum_by_loops(c, k, a) + 1e-3 * torch.rand_like(c),
         "within .* of the optimum but not on it"),
        (lambda c, k, a: sgns_optimum_by_loops(c, k, a) + torch.rand_like(c), "differ from the optimum by up to"),
        (lambda c, k, a: sgns_optimum_by_loops(c, k, a) * float("nan"), "NaN or inf .* every count is positive"),
    ],
)
def test_sgns_optimum_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_sgns_optimum(answer)


# ---- the expected number of skip-gram pairs (ex-w2v-pairs) -----------------------------------------
def pairs_of_every_draw(length, window):
    """The exact mean, over all window ** length draws of the windows, of the pairs skipgram_pairs yields."""
    corpus = EncodedCorpus(ids=torch.zeros(length, dtype=torch.long), sentence=torch.zeros(length, dtype=torch.long))
    total = sum(len(skipgram_pairs(corpus, torch.tensor(draw))[0])
                for draw in itertools.product(range(1, window + 1), repeat=length))
    return Fraction(total, window**length)


def test_the_reference_is_the_mean_over_every_draw_of_the_windows():
    lengths = torch.tensor([1, 2, 3, 4, 5, 6])
    for window in (2, 3):
        expected = [float(pairs_of_every_draw(length, window)) for length in lengths.tolist()]
        assert expected_pairs_by_lib(lengths, window).tolist() == pytest.approx(expected, abs=1e-12)


def test_a_sentence_longer_than_the_window_loses_a_fixed_number_of_pairs_to_its_ends():
    """(m + 1)(L - (m + 2)/3) for L >= m, the solution's closed form: the ends cost (m + 1)(m + 2)/3."""
    for window in range(2, 9):
        lengths = torch.arange(window, 5 * window)
        closed = (window + 1) * (lengths.double() - (window + 2) / 3)
        torch.testing.assert_close(expected_pairs_by_lib(lengths, window), closed, atol=1e-12, rtol=0)
    assert expected_pairs_by_lib(torch.tensor([6]), 5).item() == pytest.approx(22)


def test_every_case_has_a_one_word_sentence_one_within_the_window_and_one_beyond():
    for seed in range(20):
        for lengths, window in expected_pairs_cases(torch.Generator().manual_seed(seed)):
            assert 2 <= window <= 8 and 4 <= len(lengths) <= 8 and lengths.dtype == torch.long
            assert 1 in lengths.tolist() and lengths.min() >= 1
            assert any(2 <= n <= window for n in lengths.tolist()) and lengths.max() > window


def pairs_by_position(lengths, window):
    """Position by position in exact fractions: a side with r words gives E[min(b, r)] contexts."""
    found = []
    for length in lengths.tolist():
        total = Fraction(0)
        for t in range(length):
            for room in (t, length - 1 - t):
                total += Fraction(sum(min(b, room) for b in range(1, window + 1)), window)
        found.append(float(total))
    return torch.tensor(found, dtype=torch.float64)


def pairs_closed_form_float32(lengths, window):
    """(m + 1)(L - (m + 2)/3) where L >= m, the sum by distance below, in float32."""
    out = []
    for length in lengths.tolist():
        if length >= window:
            out.append((window + 1) * (length - (window + 2) / 3))
        else:
            out.append(sum(2 * (length - d) * (window - d + 1) / window for d in range(1, length)))
    return torch.tensor(out, dtype=torch.float32)


def pairs_without_ends(lengths, window):
    return (window + 1) * lengths.double()


def pairs_window_from_zero(lengths, window):
    return torch.tensor([sum(2 * (n - d) * (window - d + 1) / (window + 1) for d in range(1, min(window, n - 1) + 1))
                         for n in lengths.tolist()], dtype=torch.float64)


def pairs_counted_once(lengths, window):
    return pairs_by_position(lengths, window) / 2


def pairs_fixed_window(lengths, window):
    return torch.tensor([sum(2 * (n - d) for d in range(1, min(window, n - 1) + 1)) for n in lengths.tolist()],
                        dtype=torch.float64)


def pairs_off_by_one_probability(lengths, window):
    return torch.tensor([sum(2 * (n - d) * (window - d) / window for d in range(1, min(window, n - 1) + 1))
                         for n in lengths.tolist()], dtype=torch.float64)


def pairs_summed_to_the_window(lengths, window):
    d = torch.arange(1, window + 1, dtype=torch.float64)
    return 2 * ((lengths.double()[:, None] - d) * (window - d + 1) / window).sum(1)


def pairs_one_too_many_positions(lengths, window):
    return torch.tensor([sum(2 * (n - d + 1) * (window - d + 1) / window for d in range(1, min(window, n - 1) + 1))
                         for n in lengths.tolist()], dtype=torch.float64)


def pairs_mean_window_capped(lengths, window):
    mean = (window + 1) / 2
    return torch.tensor([sum(min(mean, t) + min(mean, n - 1 - t) for t in range(n)) for n in lengths.tolist()],
                        dtype=torch.float64)


def pairs_probability_d_over_m(lengths, window):
    return torch.tensor([sum(2 * (n - d) * d / window for d in range(1, min(window, n - 1) + 1))
                         for n in lengths.tolist()], dtype=torch.float64)


def pairs_rounded_mean_window(lengths, window):
    """A fixed window of round((m + 1)/2), Python's round (half to even)."""
    fixed = round((window + 1) / 2)
    return torch.tensor([sum(2 * (n - d) for d in range(1, min(fixed, n - 1) + 1)) for n in lengths.tolist()],
                        dtype=torch.float64)


@pytest.mark.parametrize("answer", [pairs_by_position, pairs_closed_form_float32])
def test_expected_pairs_accepts_right_answers(answer, capsys):
    check_expected_pairs(answer)
    assert capsys.readouterr().out.startswith("✓ your expected numbers of pairs agree with the exact expectation")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (pairs_without_ends, "a window never crosses the ends of its sentence"),
        (pairs_window_from_zero, r"drawn from 1, \.\.\., m \(m values\), not from 0"),
        (pairs_counted_once, "counted twice, once with each word as the centre"),
        (pairs_fixed_window, "shrinks each window at random"),
        (pairs_off_by_one_probability, "m - d \\+ 1 of the m windows, not m - d"),
        (pairs_summed_to_the_window, "negative terms L - d"),
        (pairs_one_too_many_positions, "not L - d \\+ 1"),
        (pairs_mean_window_capped, r"min\(E\[b\], r\) is not the same"),
        (pairs_probability_d_over_m, r"d/m is P\(b <= d\)"),
        (pairs_rounded_mean_window, r"a fixed window of \(m \+ 1\)/2"),
        (lambda lengths, window: pairs_by_position(lengths, window).sum(), "one expected number per sentence"),
        (lambda lengths, window: pairs_by_position(lengths, window) + 1,
         "differ from the exact expectation by up to 1"),
    ],
)
def test_expected_pairs_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_expected_pairs(answer)


def test_not_implemented_is_reported_as_such():
    def stub(*args):
        raise NotImplementedError("write the body")

    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_expected_pairs(stub)


# ---- 3CosMul's scores (ex-w2v-3cosmul) ---------------------------------------------------------------
def cosmul_by_loops(vectors, a, b, c):
    """A Python loop over the words in float64, from the statement: shifted cosines, ε = 0.001."""
    rows = [vectors[i] / math.sqrt(float(vectors[i] @ vectors[i])) for i in range(vectors.shape[0])]
    shifted = lambda x, y: (float(rows[x] @ rows[y]) + 1) / 2
    return torch.tensor([0.0 if x in (a, b, c) else shifted(x, b) * shifted(x, c) / (shifted(x, a) + 0.001)
                         for x in range(len(rows))], dtype=torch.float64)


def cosmul_by_lib(vectors, a, b, c):
    """lib's WordVectors.analogy_scores in float32 (its unit vectors are float32)."""
    vocab = Vocabulary(words=[f"w{i}" for i in range(vectors.shape[0])], counts=[1] * vectors.shape[0])
    scores = WordVectors(vectors, vocab).analogy_scores(torch.tensor([[a, b, c]]), "3CosMul")[0]
    return scores.clamp(min=0)  # lib's -inf for the question words becomes the statement's 0


def cosmul_by_cosine_similarity(vectors, a, b, c):
    """torch's cosine_similarity, one question word at a time, the exclusion by a mask."""
    shifted = [(F.cosine_similarity(vectors, vectors[i][None], dim=1) + 1) / 2 for i in (a, b, c)]
    scores = shifted[1] * shifted[2] / (shifted[0] + 1e-3)
    mask = torch.zeros_like(scores, dtype=torch.bool)
    mask[[a, b, c]] = True
    return scores.masked_fill(mask, 0.0)


def cosmul_unshifted(vectors, a, b, c):
    unit = F.normalize(vectors, dim=1)
    scores = (unit @ unit[b]) * (unit @ unit[c]) / (unit @ unit[a] + 0.001)
    scores[[a, b, c]] = 0.0
    return scores


def cosmul_without_epsilon(vectors, a, b, c):
    unit = F.normalize(vectors, dim=1)
    shifted = [(unit @ unit[i] + 1) / 2 for i in (a, b, c)]
    scores = shifted[1] * shifted[2] / shifted[0]
    scores[[a, b, c]] = 0.0
    return scores


def cosmul_dot_products(vectors, a, b, c):
    shifted = [(vectors @ vectors[i] + 1) / 2 for i in (a, b, c)]
    scores = shifted[1] * shifted[2] / (shifted[0] + 0.001)
    scores[[a, b, c]] = 0.0
    return scores


def cosmul_question_words_kept(vectors, a, b, c):
    unit = F.normalize(vectors, dim=1)
    shifted = [(unit @ unit[i] + 1) / 2 for i in (a, b, c)]
    return shifted[1] * shifted[2] / (shifted[0] + 0.001)


def cosmul_3cosadd(vectors, a, b, c):
    unit = F.normalize(vectors, dim=1)
    scores = unit @ F.normalize(unit[b] - unit[a] + unit[c], dim=0)
    scores[[a, b, c]] = 0.0
    return scores


def cosmul_clamped(vectors, a, b, c):
    unit = F.normalize(vectors, dim=1)
    clamped = [(unit @ unit[i]).clamp(min=0) for i in (a, b, c)]
    scores = clamped[1] * clamped[2] / (clamped[0] + 0.001)
    scores[[a, b, c]] = 0.0
    return scores


def cosmul_epsilon_001(vectors, a, b, c):
    unit = F.normalize(vectors, dim=1)
    shifted = [(unit @ unit[i] + 1) / 2 for i in (a, b, c)]
    scores = shifted[1] * shifted[2] / (shifted[0] + 0.01)
    scores[[a, b, c]] = 0.0
    return scores


def _cosmul_normalised(unit):
    shifted = [(unit @ unit[i] + 1) / 2 for i in range(unit.shape[0])]
    def scores(a, b, c):
        out = shifted[b] * shifted[c] / (shifted[a] + 0.001)
        out[[a, b, c]] = 0.0
        return out
    return scores


def cosmul_columns_normalised(vectors, a, b, c):
    return _cosmul_normalised(F.normalize(vectors, dim=0))(a, b, c)


def cosmul_matrix_normalised(vectors, a, b, c):
    return _cosmul_normalised(vectors / torch.linalg.matrix_norm(vectors))(a, b, c)


def cosmul_question_words_minus_inf(vectors, a, b, c):
    """lib's analogy_scores: right everywhere but -inf at the question words."""
    vocab = Vocabulary(words=[f"w{i}" for i in range(vectors.shape[0])], counts=[1] * vectors.shape[0])
    return WordVectors(vectors, vocab).analogy_scores(torch.tensor([[a, b, c]]), "3CosMul")[0].double()


def test_cosmul_reference_agrees_with_a_loop_and_with_lib():
    for seed in range(5):
        for case in cosmul_cases(torch.Generator().manual_seed(seed)):
            expected = cosmul_by_loops(*case)
            assert torch.allclose(check_cosmul_scores.reference(*case), expected, rtol=1e-12, atol=0)
            # float32 cosines, divided by a shifted cosine that can be small
            assert torch.allclose(cosmul_by_lib(*case).double(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("answer", [cosmul_by_loops, cosmul_by_lib, cosmul_by_cosine_similarity])
def test_cosmul_accepts_right_answers(answer, capsys):
    check_cosmul_scores(answer)
    assert capsys.readouterr().out.startswith("✓ your scores are 3CosMul's")


@pytest.mark.parametrize(("answer", "message"), [
    (cosmul_unshifted, r"shifted to \[0, 1\]"),
    (cosmul_without_epsilon, "you left ε = 0.001 out"),
    (cosmul_dot_products, "those are dot products"),
    (cosmul_question_words_kept, "give a, b and c the score 0"),
    (cosmul_3cosadd, "those are 3CosAdd's scores"),
    (cosmul_clamped, "clamped at 0"),
    (cosmul_epsilon_001, "your ε is 0.01"),
    (cosmul_columns_normalised, "each column"),
    (cosmul_matrix_normalised, "whole matrix by one norm"),
    (cosmul_question_words_minus_inf, "give the question words 0, not -inf as analogy_scores does"),
])
def test_cosmul_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_cosmul_scores(answer)


# ---- fairness: right answers written from the statements, the likeliest wrong ones -----------------
FAIRNESS = {
    "check_cosmul_scores": {
        "right": [cosmul_by_loops, cosmul_by_lib, cosmul_by_cosine_similarity],
        "wrong": [
            (cosmul_unshifted, r"shifted to \[0, 1\]"),
            (cosmul_without_epsilon, "you left ε = 0.001 out"),
            (cosmul_dot_products, "those are dot products"),
            (cosmul_question_words_kept, "give a, b and c the score 0"),
            (cosmul_3cosadd, "those are 3CosAdd's scores"),
            (cosmul_clamped, "clamped at 0"),
            (cosmul_epsilon_001, "your ε is 0.01"),
            (cosmul_columns_normalised, "each column"),
            (cosmul_matrix_normalised, "whole matrix by one norm"),
            (cosmul_question_words_minus_inf, "give the question words 0, not -inf as analogy_scores does"),
        ],
    },
    "check_sgns_optimum": {
        "right": [sgns_optimum_by_loops, sgns_optimum_by_newton, sgns_optimum_float32],
        "wrong": [
            (sgns_pmi_without_shift, "you left the shift out"),
            (sgns_shift_added, "push the scores down, not up"),
            (sgns_log_counts, r"that is log #\(w, o\): the noise terms move the optimum too"),
            (sgns_sigmoid_of_the_optimum, r"that is σ\(x\*\), the probability of 'real'"),
            (sgns_log_sigmoid_of_the_optimum, r"that is log σ\(x\*\)"),
            (sgns_scipy_default_tolerance, r"within .* of the optimum but not on it: did a minimiser stop early"),
            (sgns_noise_not_normalised, "you left out its normalisation"),
            (sgns_plain_pmi_minus_log_k, "you used the counts themselves, α = 1"),
            (sgns_noise_from_the_word_counts, r"raised RuntimeError.*#\(w\) sums a row \(V values\)"),
            (sgns_noise_from_the_word_counts_keepdim, "n_o sums column o"),
            (sgns_noise_not_weighted_by_the_word, r"K #\(w\) P_n\(o\) times, not K P_n\(o\)"),
            (sgns_minus_the_optimum, "the wrong sign"),
        ],
    },
    "check_expected_pairs": {
        "right": [pairs_by_position, pairs_closed_form_float32],
        "wrong": [
            (pairs_without_ends, "a window never crosses the ends of its sentence"),
            (pairs_window_from_zero, r"drawn from 1, \.\.\., m \(m values\), not from 0"),
            (pairs_counted_once, "counted twice, once with each word as the centre"),
            (pairs_fixed_window, "shrinks each window at random"),
            (pairs_off_by_one_probability, "m - d \\+ 1 of the m windows, not m - d"),
            (pairs_summed_to_the_window, "negative terms L - d"),
            (pairs_one_too_many_positions, "not L - d \\+ 1"),
            (pairs_mean_window_capped, r"min\(E\[b\], r\) is not the same"),
            (pairs_probability_d_over_m, r"d/m is P\(b <= d\)"),
            (pairs_rounded_mean_window, r"a fixed window of \(m \+ 1\)/2"),
        ],
    },
}
