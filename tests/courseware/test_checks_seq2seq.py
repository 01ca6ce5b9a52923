"""The checkers of chapter 10: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from courseware.checks import CHECKS, CheckFailed, check_centre_gradient, check_coverage_loss, check_reversal_reach
from courseware.checks.seq2seq import coverage_loss_by_loops, coverage_loss_cases, coverage_loss_with


def test_the_checks_are_registered():
    assert CHECKS["check_centre_gradient"] is check_centre_gradient
    assert CHECKS["check_coverage_loss"] is check_coverage_loss
    assert CHECKS["check_reversal_reach"] is check_reversal_reach
    assert CHECKS["check_reversal_aer"] is check_reversal_aer


# ---- how local-p's centre learns ------------------------------------------------------------
def local_p_weights(scores, lens, centre, window, sigma=None, first=1, windowed=True, padded=False,
                    cut_after=False):
    """a_t(s) for positions counted from ``first``; the keywords give slips (``padded``: lens ignored;
    ``cut_after``: the softmax over the source, then zero outside the window)."""
    sigma = window / 2 if sigma is None else sigma
    positions = torch.arange(first, scores.shape[1] + first, dtype=scores.dtype)
    distance = positions - centre[:, None]
    in_source = (positions < lens[:, None] + first) | padded
    in_window = (distance.abs() <= window) if windowed else torch.ones_like(distance, dtype=torch.bool)
    if cut_after:
        align = torch.softmax(scores.masked_fill(~in_source, -math.inf), dim=-1) * in_window
    else:
        align = torch.softmax(scores.masked_fill(~(in_source & in_window), -math.inf), dim=-1).nan_to_num(0.0)
    return align * torch.exp(-distance**2 / (2 * sigma**2)), align, distance


def centre_gradient(scores, lens, centre, window, grad, divide_by=None, **slips):
    weights, _, distance = local_p_weights(scores, lens, centre, window, **slips)
    sigma = slips.get("sigma") or window / 2
    return (grad * weights * distance / (sigma**2 if divide_by is None else divide_by(sigma))).sum(-1)


def centre_gradient_loops(scores, lens, centre, window, grad):
    """Position by position in Python floats: only the Gaussian factor of a_t(s) depends on p_t."""
    out = torch.zeros(len(centre), dtype=torch.float64)
    sigma = window / 2
    for b in range(len(centre)):
        p = float(centre[b])
        inside = [s for s in range(1, int(lens[b]) + 1) if abs(s - p) <= window]
        top = max(float(scores[b, s - 1]) for s in inside)
        total = sum(math.exp(float(scores[b, s - 1]) - top) for s in inside)
        for s in inside:
            weight = math.exp(float(scores[b, s - 1]) - top) / total * math.exp(-((s - p) ** 2) / (2 * sigma**2))
            out[b] += float(grad[b, s - 1]) * weight * (s - p) / sigma**2
    return out


def centre_gradient_by_differences(scores, lens, centre, window, grad, step=1e-6):
    """The literal reading, ∂L/∂p_t: central differences of Σ_s grad · a_t(s) as p_t moves by ±step."""
    def loss(p):
        return (grad * local_p_weights(scores, lens, p, window)[0]).sum(-1)
    return (loss(centre + step) - loss(centre - step)) / (2 * step)


def centre_gradient_float32(scores, lens, centre, window, grad):
    return centre_gradient(scores.float(), lens, centre.float(), window, grad.float())


@pytest.mark.parametrize("answer", [centre_gradient, centre_gradient_loops, centre_gradient_by_differences,
                                    centre_gradient_float32])
def test_centre_gradient_accepts_right_answers_written_differently(answer, capsys):
    check_centre_gradient(answer)
    assert capsys.readouterr().out.startswith(
        "✓ your ∂L/∂p_t agree with autograd through lib.part4_attention.seq2seq.local_weights")


def centre_gradient_of_the_softmax(scores, lens, centre, window, grad):
    _, align, distance = local_p_weights(scores, lens, centre, window)
    return (grad * align * distance / (window / 2) ** 2).sum(-1)


def centre_gradient_renormalised(scores, lens, centre, window, grad):
    """The derivative of the weights divided by their sum, by differences."""
    def loss(p):
        weights = local_p_weights(scores, lens, p, window)[0]
        return (grad * weights / weights.sum(-1, keepdim=True)).sum(-1)
    return (loss(centre + 1e-6) - loss(centre - 1e-6)) / 2e-6


def centre_gradient_half(scores, lens, centre, window, grad):
    """The slip (s - p_t)/(2σ²): the 2 of the square forgotten."""
    return centre_gradient(scores, lens, centre, window, grad) / 2


WRONG_CENTRE_GRADIENTS = [
    (lambda *a: -centre_gradient(*a), "the sign is reversed"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g, sigma=w), "σ is D/2, not D"),
    (centre_gradient_half, "the 2 of the square cancels the 2 of 2σ²"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g) * (w / 2) ** 2, "you left out the 1/σ²"),
    (centre_gradient_of_the_softmax, "multiply by the whole weight a_t\\(s\\), Gaussian included"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g, windowed=False), "positions outside the window"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g, first=0), "counted from 1"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g, divide_by=lambda sigma: sigma), "divide by σ², not σ"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g, padded=True),
     "padding positions s > len have weight 0 and do not pull the centre"),
    (lambda s, l, c, w, g: centre_gradient(s, l, c, w, g, cut_after=True),
     "take the softmax over the window only: a softmax over the whole source cut to the window"),
    (centre_gradient_renormalised, "do not renormalise"),
    (lambda s, l, c, w, g: torch.zeros(len(c), dtype=torch.float64), "the window's edge gives no gradient"),
]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        *WRONG_CENTRE_GRADIENTS,
        (lambda s, l, c, w, g: g * local_p_weights(s, l, c, w)[0] * local_p_weights(s, l, c, w)[2] / (w / 2) ** 2,
         "sum over the positions s"),
        (lambda *a: centre_gradient(*a) + 1e-4, "differ from autograd's by up to 0.0001"),
        (lambda *a: centre_gradient(*a).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda *a: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_centre_gradient_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_centre_gradient(answer)


def test_the_reference_is_the_formula_and_ignores_padding():
    """Autograd through local_weights equals Σ grad · a_t(s) (s - p_t)/σ², and what ``grad`` holds at
    padded positions changes nothing."""
    cases = CHECKS["check_centre_gradient"].make_cases(torch.Generator().manual_seed(0))
    for scores, lens, centre, window, grad in cases:
        expected = check_centre_gradient.reference(scores, lens, centre, window, grad)
        torch.testing.assert_close(expected, centre_gradient(scores, lens, centre, window, grad), atol=1e-12,
                                   rtol=1e-12)
        padding = torch.arange(scores.shape[1]) >= lens[:, None]
        noisy = grad.masked_fill(padding, 100.0)
        torch.testing.assert_close(check_centre_gradient.reference(scores, lens, centre, window, noisy), expected)


# ---- See et al.'s coverage loss ---------------------------------------------------------------
def coverage_loss_vectorised(weights, target_lens):
    """c^t = Σ_{t' < t} a^{t'} as a cumulative sum shifted by one step, min, mask, mean of means."""
    coverage = torch.cat((torch.zeros_like(weights[:, :1]), weights[:, :-1].cumsum(dim=1)), dim=1)
    per_step = torch.minimum(weights, coverage).sum(-1)  # (B, T)
    real = torch.arange(weights.shape[1]) < target_lens[:, None]
    return ((per_step * real).sum(1) / target_lens).mean()


def coverage_loss_triangular(weights, target_lens):
    """Another formulation: the coverage as a strictly lower-triangular matrix of ones times the weights,
    min(a, c) = (a + c - |a - c|) / 2, and each sequence's real steps taken by slicing."""
    steps = weights.shape[1]
    before = torch.tril(torch.ones(steps, steps, dtype=weights.dtype), diagonal=-1)  # [t, t'] = 1 for t' < t
    coverage = before @ weights  # (B, T, S)
    overlap = ((weights + coverage - (weights - coverage).abs()) / 2).sum(-1)  # (B, T)
    return torch.stack([overlap[b, : int(n)].mean() for b, n in enumerate(target_lens)]).mean()


def coverage_loss_running_float32(weights, target_lens):
    """A running coverage vector updated after each step, in float32, the padded steps masked out."""
    weights = weights.float()
    batch, steps, width = weights.shape
    coverage, totals = torch.zeros(batch, width), torch.zeros(batch)
    for t in range(steps):
        real = (t < target_lens).float()  # (B,)
        totals += real * torch.minimum(weights[:, t], coverage).sum(-1)
        coverage = coverage + weights[:, t]
    return (totals / target_lens.float()).mean()


def coverage_loss_numpy(weights, target_lens):
    """numpy, sequence by sequence: np.minimum against the running sum of the rows before."""
    import numpy as np

    losses = []
    for rows, n in zip(weights.numpy(), target_lens.tolist()):
        rows = rows[:n]
        coverage = np.vstack([np.zeros_like(rows[:1]), np.cumsum(rows, axis=0)[:-1]])
        losses.append(np.minimum(rows, coverage).sum() / n)
    return torch.tensor(np.mean(losses))


def test_the_loop_is_a_second_formulation_and_a_hand_computed_batch():
    for seed in range(10):
        for case in coverage_loss_cases(torch.Generator().manual_seed(seed)):
            expected = coverage_loss_by_loops(*case)
            torch.testing.assert_close(coverage_loss_triangular(*case), expected, atol=1e-12, rtol=0)
            torch.testing.assert_close(coverage_loss_with(*case), expected, atol=1e-12, rtol=0)
    # sequence 0: a = (1, 0), (0.5, 0.5), (0.5, 0.5): covloss = 0, min(0.5, 1) = 0.5, 0.5 + 0.5 = 1 -> mean 0.5;
    # sequence 1: one real step (cost 0), then two padded rows that must not count
    weights = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [0.5, 0.5]],
                            [[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]], dtype=torch.float64)
    assert float(coverage_loss_by_loops(weights, torch.tensor([3, 1]))) == 0.25


def test_a_repeated_distribution_costs_1_a_step_and_the_first_step_nothing():
    """The solution's answer: covloss_t <= Σ_i a_i^t = 1, reached when a step repeats an earlier one;
    the first case's sequence 0 does so at every step, and its sequence 1 has one step (cost 0)."""
    for seed in range(20):
        weights, target_lens = coverage_loss_cases(torch.Generator().manual_seed(seed))[0]
        steps = weights.shape[1]
        assert int(target_lens[0]) == steps and int(target_lens[1]) == 1
        torch.testing.assert_close(coverage_loss_by_loops(weights[:1], target_lens[:1]),
                                   torch.tensor((steps - 1) / steps, dtype=torch.float64), atol=1e-12, rtol=0)
        assert float(coverage_loss_by_loops(weights[1:2], target_lens[1:2])) == 0.0
    for weights, target_lens in coverage_loss_cases(torch.Generator().manual_seed(3)):
        per_step = coverage_loss_with(weights, torch.full_like(target_lens, weights.shape[1]), divide="none",
                                      combine="sum")
        assert per_step <= weights.shape[0] * weights.shape[1]  # at most 1 per step
        assert (target_lens < weights.shape[1]).any() and (target_lens == weights.shape[1]).any()


@pytest.mark.parametrize("answer", [coverage_loss_vectorised, coverage_loss_triangular,
                                    coverage_loss_running_float32, coverage_loss_numpy])
def test_coverage_loss_accepts_right_answers_written_differently(answer, capsys):
    check_coverage_loss(answer)
    assert capsys.readouterr().out.startswith("✓ your coverage loss agrees with a step-by-step loop")


def coverage_through_this_step(weights, target_lens):
    """c^t = Σ_{t' <= t} a^{t'}: the cumulative sum without the shift."""
    per_step = torch.minimum(weights, weights.cumsum(dim=1)).sum(-1)
    real = torch.arange(weights.shape[1]) < target_lens[:, None]
    return ((per_step * real).sum(1) / target_lens).mean()


def coverage_with_max(weights, target_lens):
    coverage = torch.cat((torch.zeros_like(weights[:, :1]), weights[:, :-1].cumsum(dim=1)), dim=1)
    per_step = torch.maximum(weights, coverage).sum(-1)
    real = torch.arange(weights.shape[1]) < target_lens[:, None]
    return ((per_step * real).sum(1) / target_lens).mean()


def coverage_with_product(weights, target_lens):
    """Σ_i a_i^t c_i^t instead of the minimum, sequence by sequence."""
    return torch.stack([sum(weights[b, t] @ weights[b, :t].sum(0) for t in range(int(n))) / int(n)
                        for b, n in enumerate(target_lens)]).mean()


def coverage_ignoring_target_lens(weights, target_lens):
    """Every step of the padded batch, averaged over T: the padded steps counted."""
    coverage = torch.cat((torch.zeros_like(weights[:, :1]), weights[:, :-1].cumsum(dim=1)), dim=1)
    return torch.minimum(weights, coverage).sum(-1).mean()


def coverage_divided_by_padded_length(weights, target_lens):
    """The padded steps left out of the sum, but each sequence divided by T."""
    coverage = torch.cat((torch.zeros_like(weights[:, :1]), weights[:, :-1].cumsum(dim=1)), dim=1)
    per_step = torch.minimum(weights, coverage).sum(-1)
    real = torch.arange(weights.shape[1]) < target_lens[:, None]
    return (per_step * real).sum(1).mean() / weights.shape[1]


def coverage_summed(weights, target_lens):
    """Σ over the sequences of Σ over their real steps: no averaging at all."""
    return sum(coverage_loss_by_loops(weights[b : b + 1], target_lens[b : b + 1]) * int(n)
               for b, n in enumerate(target_lens))


def coverage_one_padded_step_counted(weights, target_lens):
    """The off-by-one mask t <= T_b, in a loop over the sequences: step T_b + 1, the first padded one, counted too."""
    losses = []
    for b, n in enumerate(target_lens.tolist()):
        rows = weights[b, : n + 1]  # one row too many (n + 1 > T only when the sequence is full)
        coverage = torch.cat((torch.zeros_like(rows[:1]), rows[:-1].cumsum(dim=0)))
        losses.append(torch.minimum(rows, coverage).sum() / n)
    return torch.stack(losses).mean()


def coverage_pooled_over_tokens(weights, target_lens):
    """One mean over every real step of the batch (a token-level mean)."""
    coverage = torch.cat((torch.zeros_like(weights[:, :1]), weights[:, :-1].cumsum(dim=1)), dim=1)
    per_step = torch.minimum(weights, coverage).sum(-1)
    real = torch.arange(weights.shape[1]) < target_lens[:, None]
    return per_step[real].mean()


WRONG_COVERAGE_LOSSES = [
    (coverage_through_this_step, r"c\^t sums the steps before t only"),
    (coverage_with_max, "not the maximum"),
    (coverage_ignoring_target_lens, r"only the first target_lens\[b\] steps of sequence b are real"),
    (coverage_divided_by_padded_length, r"by its own number of steps, target_lens\[b\], not by the padded length T"),
    (coverage_summed, "that is the sum of covloss_t over every real step of the batch"),
    (coverage_pooled_over_tokens, "one mean over all the real steps of the batch gives long sequences more weight"),
    (coverage_one_padded_step_counted, r"you counted one padded step: .*arange\(T\) < target_lens\[b\], not <="),
]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        *WRONG_COVERAGE_LOSSES,
        (lambda w, n: coverage_loss_with(w, n, coverage="previous"), "not only those of step t - 1"),
        (coverage_with_product, "not the product"),
        (lambda w, n: coverage_loss_with(w, n, steps="all"), "you counted the padded steps"),
        (lambda w, n: coverage_loss_with(w, n, divide="none"), "divide each sequence's sum of covloss_t by its"),
        (lambda w, n: coverage_loss_with(w, n, combine="sum"), "do not sum them"),
        (lambda w, n: torch.stack([coverage_loss_by_loops(w[b : b + 1], n[b : b + 1]) for b in range(len(n))]),
         "that is one loss per sequence"),
        (lambda w, n: coverage_loss_vectorised(w, n) + 1, "your loss is .*; expected"),
        (lambda w, n: float(coverage_loss_vectorised(w, n)), "must return a torch.Tensor; it returned float"),
    ],
)
def test_coverage_loss_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_coverage_loss(answer)


# ---- which reversal steps local-m's window reaches -----------------------------------------
def reach_vectorised(n, window):
    t = torch.arange(1, n + 1)
    return ((n + 1 - t) - t).abs() <= window  # bool: the checker accepts it as 0/1


def reach_loops(n, window):
    return torch.tensor([int(t - window <= n + 1 - t <= t + window) for t in range(1, n + 1)])


def reach_from_local_weights(n, window):
    # local-m's weights with a score that is huge at the needed position: is any weight left there?
    from lib.part4_attention.seq2seq import local_weights

    reached = []
    for t in range(1, n + 1):
        scores = torch.zeros(1, n, dtype=torch.float64)
        scores[0, n - t] = 50.0  # source position n + 1 - t
        weights = local_weights(scores, torch.tensor([n]), torch.tensor([float(t)], dtype=torch.float64),
                                window, gaussian=False)
        reached.append(int(weights[0, n - t] > 0.5))
    return torch.tensor(reached)


@pytest.mark.parametrize("answer", [reach_vectorised, reach_loops, reach_from_local_weights])
def test_reversal_reach_accepts_right_answers_written_differently(answer, capsys):
    check_reversal_reach(answer)
    assert capsys.readouterr().out.startswith("✓ your reach agrees with local-m's window")


def test_reversal_reach_by_hand():
    # 8 digits, D = 2: step t needs position 9 - t, inside [t - 2, t + 2] only for t = 4, 5
    assert reach_loops(8, 2).tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    assert reach_loops(8, 7).tolist() == [1] * 8  # D = n - 1: every step


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda n, window: torch.ones(n, dtype=torch.long), "that is copying"),
        (lambda n, window: ((n - 2 * torch.arange(1, n + 1)).abs() <= window), "positions count from 1"),
        (lambda n, window: ((n + 1 - 2 * torch.arange(1, n + 1)).abs() < window), "the window includes its edges"),
        (lambda n, window: ((n + 1 - 2 * torch.arange(1, n + 1)).abs() <= 2 * window), "D is the half-width"),
        (lambda n, window: ((n + 1 - 2 * torch.arange(1, n + 1)).abs() <= window / 2), "not D/2"),
        (lambda n, window: torch.cat((reach_vectorised(n, window), torch.tensor([True]))), "leave out the <eos> step"),
        (lambda n, window: reach_vectorised(n, window).tolist(), "must return a torch.Tensor; it returned list"),
    ],
)
def test_reversal_reach_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_reversal_reach(answer)


# ---- FAIRNESS (tests/courseware/test_exercise_fairness.py): an independent right answer per checker, written
# from the exercise's statement by another method than the book's, and the most plausible wrong ones.
def reach_of_copying(n, window):
    return torch.ones(n, dtype=torch.long)


def reach_positions_from_zero(n, window):
    return (n - 2 * torch.arange(1, n + 1)).abs() <= window


def reach_open_window(n, window):
    return (n + 1 - 2 * torch.arange(1, n + 1)).abs() < window


def reach_full_width_each_side(n, window):
    return (n + 1 - 2 * torch.arange(1, n + 1)).abs() <= 2 * window


FAIRNESS = {
    "check_centre_gradient": {
        "right": [centre_gradient_loops, centre_gradient_by_differences],
        "wrong": WRONG_CENTRE_GRADIENTS,
    },
    "check_coverage_loss": {
        "right": [coverage_loss_triangular, coverage_loss_running_float32, coverage_loss_numpy],
        "wrong": WRONG_COVERAGE_LOSSES,
    },
    "check_reversal_reach": {
        "right": [reach_loops, reach_from_local_weights],
        "wrong": [
            (reach_of_copying, "that is copying"),
            (reach_positions_from_zero, "positions count from 1"),
            (reach_open_window, "the window includes its edges"),
            (reach_full_width_each_side, "D is the half-width"),
        ],
    },
}


# ---- the alignment error rate of reversal attention maps --------------------------------------
from courseware.checks import check_reversal_aer  # noqa: E402
from courseware.checks.seq2seq import reversal_aer_by_sets, reversal_aer_cases  # noqa: E402


def reversal_aer_vectorised(weights, src_lens):
    """The master solution's method: one comparison of argmax positions with n - 1 - t, counted."""
    t = torch.arange(weights.shape[1])
    gold = src_lens[:, None] - 1 - t  # (B, T)
    digits = t < src_lens[:, None]
    hits = ((weights.argmax(-1) == gold) & digits).sum()
    return 1 - 2 * hits / (2 * src_lens.sum())


def reversal_aer_f_score(weights, src_lens):
    """Via precision and recall of the hard links (1 - F1 when P = S), built as boolean masks,
    the gold one from a flipped identity matrix, in float32."""
    batch, steps, width = weights.shape
    hard = torch.zeros(batch, steps, width, dtype=torch.bool)
    sure = torch.zeros_like(hard)
    for b in range(batch):
        n = int(src_lens[b])
        sure[b, :n, :n] = torch.eye(n, dtype=torch.bool).flip(1)
        hard[b, torch.arange(n), weights[b, :n, :n].argmax(-1)] = True
    both = (hard & sure).sum().float()
    precision, recall = both / hard.sum(), both / sure.sum()
    return 1 - 2 * precision * recall / (precision + recall)


def reversal_aer_numpy(weights, src_lens):
    """String by string with numpy: count the hits and the links, divide once at the end."""
    import numpy as np
    hits = links = 0
    for rows, n in zip(weights.numpy(), src_lens.tolist()):
        hits += int(np.sum(np.argmax(rows[:n, :n], axis=1) == np.arange(n)[::-1]))
        links += 2 * n
    return torch.tensor(1 - 2 * hits / links, dtype=torch.float64)


def reversal_aer_copying(weights, src_lens):
    """The diagonal as gold: copying's alignment."""
    t = torch.arange(weights.shape[1])
    hits = ((weights.argmax(-1) == t) & (t < src_lens[:, None])).sum()
    return 1 - hits / src_lens.sum()


def reversal_aer_off_by_one(weights, src_lens):
    """Gold position n - t (from 0): the 1-based formula n + 1 - t shifted once, not twice."""
    t = torch.arange(weights.shape[1])
    hits = ((weights.argmax(-1) == src_lens[:, None] - t) & (t < src_lens[:, None])).sum()
    return 1 - hits / src_lens.sum()


def reversal_aer_with_eos(weights, src_lens):
    """Every target step up to and including the <eos> step linked: |A| = n + 1 per string."""
    t = torch.arange(weights.shape[1])
    hits = ((weights.argmax(-1) == src_lens[:, None] - 1 - t) & (t < src_lens[:, None])).sum()
    return 1 - 2 * hits / ((src_lens + 1).sum() + src_lens.sum())


def reversal_aer_per_string(weights, src_lens):
    """The mean of each string's AER."""
    rates = [reversal_aer_by_sets(weights[b:b + 1], src_lens[b:b + 1]) for b in range(len(src_lens))]
    return torch.stack(rates).mean()


def reversal_aer_precision(weights, src_lens):
    return 1 - reversal_aer_by_sets(weights, src_lens)


def reversal_aer_gold_mass(weights, src_lens):
    """1 - the mean weight on the gold position, string by string."""
    on_gold = [weights[b, t, n - 1 - t] for b, n in enumerate(src_lens.tolist()) for t in range(n)]
    return 1 - torch.stack(on_gold).mean()


def reversal_aer_counted_once(weights, src_lens):
    """|A ∩ S| alone over |A| + |S|."""
    hits = sum(int(weights[b, t, :n].argmax()) == n - 1 - t for b, n in enumerate(src_lens.tolist())
               for t in range(n))
    return torch.tensor(1 - hits / (2 * int(src_lens.sum())), dtype=torch.float64)


def reversal_aer_every_row(weights, src_lens):
    """Every row of weights linked, the <eos> and padded steps too, as numpy would with no mask."""
    hard = weights.argmax(-1)  # (B, T)
    hits = sum(int(hard[b, t]) == n - 1 - t for b, n in enumerate(src_lens.tolist()) for t in range(n))
    return torch.tensor(1 - 2 * hits / (hard.numel() + int(src_lens.sum())), dtype=torch.float64)


def reversal_aer_wrong_axis(weights, src_lens):
    """argmax(1): for each source position, the output step that looks at it most."""
    best = weights.argmax(1)  # (B, S)
    hits = sum(int(best[b, s]) == n - 1 - s for b, n in enumerate(src_lens.tolist()) for s in range(n))
    return torch.tensor(1 - hits / int(src_lens.sum()), dtype=torch.float64)


WRONG_REVERSAL_AERS = [
    (reversal_aer_copying, "copying's alignment"),
    (reversal_aer_off_by_one, "off by one"),
    (reversal_aer_with_eos, "you linked the end-of-sequence step"),
    (reversal_aer_per_string, "the mean of each string's AER"),
    (reversal_aer_precision, "the share of right links"),
    (reversal_aer_gold_mass, "that is 1 - the gold mass"),
    (reversal_aer_counted_once, "you counted the right links once"),
    (reversal_aer_every_row, "you linked every row, the end-of-sequence and padded steps too"),
    (reversal_aer_wrong_axis, "that argmax runs over the output steps"),
]


def test_the_reversal_aer_reference_by_hand():
    """Two strings: "abc" reversed, steps 1-3 look at positions 3, 2, 1 (all gold); "ab", steps 1-2 at
    positions 1 and 1 (gold 2, 1: one hit). A: 5 links, S: 5, A ∩ S: 4, so AER = 1 - 8/10 = 0.2."""
    weights = torch.zeros(2, 4, 3, dtype=torch.float64)
    weights[0, 0, 2] = weights[0, 1, 1] = weights[0, 2, 0] = 1.0
    weights[1, 0, 0] = weights[1, 1, 0] = 1.0
    weights[:, 3, 0] = 1.0  # the <eos> step of string 0 and a padded step of string 1: not counted
    weights[1, 2, 1] = 1.0  # the <eos> step of string 1
    assert float(reversal_aer_by_sets(weights, torch.tensor([3, 2]))) == pytest.approx(0.2, abs=1e-15)
    for seed in range(5):
        for case in reversal_aer_cases(torch.Generator().manual_seed(seed)):
            assert 0 < float(reversal_aer_by_sets(*case)) < 1  # some links right, some wrong


@pytest.mark.parametrize("answer", [reversal_aer_vectorised, reversal_aer_f_score, reversal_aer_numpy])
def test_reversal_aer_accepts_right_answers_written_differently(answer, capsys):
    check_reversal_aer(answer)
    assert capsys.readouterr().out.startswith("✓ your alignment error rate agrees")


@pytest.mark.parametrize("answer, message", WRONG_REVERSAL_AERS)
def test_reversal_aer_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_reversal_aer(answer)


FAIRNESS["check_reversal_aer"] = {
    "right": [reversal_aer_f_score, reversal_aer_numpy],
    "wrong": WRONG_REVERSAL_AERS,
}
