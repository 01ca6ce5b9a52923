"""The checkers of chapter 10: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_bahdanau_context, check_centre_gradient, check_reversal_reach


def test_the_checks_are_registered():
    assert CHECKS["check_centre_gradient"] is check_centre_gradient
    assert CHECKS["check_bahdanau_context"] is check_bahdanau_context
    assert CHECKS["check_reversal_reach"] is check_reversal_reach


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
        "✓ your ∂L/∂p_t agree with autograd through lib.seq2seq.local_weights")


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


# ---- Bahdanau context -----------------------------------------------------------------------
def context_einsum(query, states, lens, W, U, v):
    scores = torch.einsum("a,bsa->bs", v, torch.tanh((query @ W.T)[:, None, :] + states @ U.T))
    scores = scores.masked_fill(torch.arange(states.shape[1]) >= lens[:, None], -math.inf)
    return torch.einsum("bs,bsd->bd", torch.softmax(scores, -1), states)


def context_loops(query, states, lens, W, U, v):
    out = torch.zeros(states.shape[0], states.shape[2], dtype=states.dtype)
    for b in range(states.shape[0]):
        n = int(lens[b])
        e = torch.stack([v @ torch.tanh(W @ query[b] + U @ states[b, s]) for s in range(n)])
        alpha = torch.exp(e - e.max()) / torch.exp(e - e.max()).sum()
        out[b] = (alpha[:, None] * states[b, :n]).sum(0)
    return out


@pytest.mark.parametrize("answer", [context_einsum, context_loops])
def test_bahdanau_context_accepts_right_answers_written_differently(answer, capsys):
    check_bahdanau_context(answer)
    assert capsys.readouterr().out.startswith("✓ Bahdanau context vectors agree with lib.attention")


def unmasked(query, states, lens, W, U, v):
    return context_einsum(query, states, torch.full_like(lens, states.shape[1]), W, U, v)


def weights_only(query, states, lens, W, U, v):
    scores = torch.tanh((query @ W.T)[:, None] + states @ U.T) @ v
    return torch.softmax(scores.masked_fill(torch.arange(states.shape[1]) >= lens[:, None], -math.inf), -1)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (unmasked, "padded positions s > len must get weight 0|differs from"),
        (weights_only, "you returned the weights"),
        (lambda q, h, l, W, U, v: h.sum(1) / l[:, None], "the plain average of the states"),
        (lambda q, h, l, W, U, v: q @ W.T @ U, "RuntimeError|has shape|differs from"),
        (lambda q, h, l, W, U, v: context_einsum(q, h, l, W, U, v) + 0.1, "differs from Σ_s α_s h̄_s"),
        (lambda q, h, l, W, U, v: torch.tanh(q @ W.T) @ U, r"has shape|differs from"),
    ],
)
def test_bahdanau_context_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_bahdanau_context(answer)


# ---- which reversal steps local-m's window reaches -----------------------------------------
def reach_vectorised(n, window):
    t = torch.arange(1, n + 1)
    return ((n + 1 - t) - t).abs() <= window  # bool: the checker accepts it as 0/1


def reach_loops(n, window):
    return torch.tensor([int(t - window <= n + 1 - t <= t + window) for t in range(1, n + 1)])


def reach_from_local_weights(n, window):
    # local-m's weights with a score that is huge at the needed position: is any weight left there?
    from lib.seq2seq import local_weights

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


# ---- FAIRNESS (tests/test_exercise_fairness.py): an independent right answer per checker, written
# from the exercise's statement by another method than the book's, and the most plausible wrong ones.
def context_weights_reversed(query, states, lens, W, U, v):
    """α_s paired with the state at the mirrored position."""
    scores = torch.einsum("a,bsa->bs", v, torch.tanh((query @ W.T)[:, None, :] + states @ U.T))
    alpha = torch.softmax(scores.masked_fill(torch.arange(states.shape[1]) >= lens[:, None], -math.inf), -1)
    return torch.einsum("bs,bsd->bd", alpha, states.flip(1))


def plain_average(query, states, lens, W, U, v):
    return states.sum(1) / lens[:, None]


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
    "check_bahdanau_context": {
        "right": [context_loops],
        "wrong": [
            (unmasked, "padded positions s > len must get weight 0"),
            (weights_only, r"you returned the weights \(B, S\)"),
            (plain_average, "that is the plain average of the states"),
            (context_weights_reversed, "weight h̄_s with α_s of the same position"),
        ],
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
