"""The checkers of chapter 10: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_bahdanau_context, check_local_p_weights, check_reversal_reach


def test_the_checks_are_registered():
    assert CHECKS["check_local_p_weights"] is check_local_p_weights
    assert CHECKS["check_bahdanau_context"] is check_bahdanau_context
    assert CHECKS["check_reversal_reach"] is check_reversal_reach


# ---- local-p weights ----------------------------------------------------------------------
def local_p_vectorised(scores, lens, centre, window):
    positions = torch.arange(1, scores.shape[1] + 1)
    distance = positions - centre[:, None]
    keep = (distance.abs() <= window) & (positions <= lens[:, None])
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1).nan_to_num(0.0)
    return weights * torch.exp(-distance**2 / (2 * (window / 2) ** 2))


def local_p_loops(scores, lens, centre, window):
    out = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        inside = [s for s in range(1, int(lens[b]) + 1) if abs(s - float(centre[b])) <= window]
        total = sum(math.exp(float(scores[b, s - 1])) for s in inside)
        for s in inside:
            sigma = window / 2
            gauss = math.exp(-((s - float(centre[b])) ** 2) / (2 * sigma**2))
            out[b, s - 1] = math.exp(float(scores[b, s - 1])) / total * gauss
    return out


@pytest.mark.parametrize("answer", [local_p_vectorised, local_p_loops])
def test_local_p_accepts_right_answers_written_differently(answer, capsys):
    check_local_p_weights(answer)
    assert capsys.readouterr().out.startswith("✓ local-p weights agree with lib.seq2seq.local_weights")


def without_gaussian(scores, lens, centre, window):
    positions = torch.arange(1, scores.shape[1] + 1)
    keep = ((positions - centre[:, None]).abs() <= window) & (positions <= lens[:, None])
    return torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)


def gaussian(scores, centre, window):
    return torch.exp(-(torch.arange(1, scores.shape[1] + 1) - centre[:, None]) ** 2 / (2 * (window / 2) ** 2))


def no_window(scores, lens, centre, window):
    return without_gaussian(scores, lens, centre, 10**6) * gaussian(scores, centre, window)


def whole_source_softmax(scores, lens, centre, window):
    inside = (torch.arange(1, scores.shape[1] + 1) - centre[:, None]).abs() <= window
    return no_window(scores, lens, centre, window) * inside


def sigma_is_d(scores, lens, centre, window):
    return without_gaussian(scores, lens, centre, window) * gaussian(scores, centre, 2 * window)


def zero_based(scores, lens, centre, window):
    return local_p_vectorised(scores, lens, centre + 1, window)  # positions 0 .. S-1 against p_t


def renormalised(scores, lens, centre, window):
    weights = local_p_vectorised(scores, lens, centre, window)
    return weights / weights.sum(-1, keepdim=True).clamp(min=1e-300)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (without_gaussian, "you left out the Gaussian factor"),
        (no_window, "positions outside the window"),
        (whole_source_softmax, "the softmax must run over the positions inside the window only"),
        (sigma_is_d, "σ is D/2, not D"),
        (zero_based, "source positions s are counted from 1"),
        (renormalised, "do not renormalise|left out the Gaussian"),  # alike when one position is inside
        (lambda s, l, c, w: local_p_vectorised(s, l, c, w) * 1.01, "differ from the local-p weights"),
        (lambda s, l, c, w: local_p_vectorised(s, l, c, w)[:, :-1], r"have shape \(\d+, \d+\); expected \(B, S\)"),
        (lambda s, l, c, w: local_p_vectorised(s, l, c, w).tolist(), "must return a torch.Tensor; it returned list"),
        (lambda s, l, c, w: (local_p_vectorised(s, l, c, w) > 0).long(), "return floats"),
        (lambda s, l, c, w: 1 / 0, "raised ZeroDivisionError"),
    ],
)
def test_local_p_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_local_p_weights(answer)


def test_local_p_flags_weights_on_padding():
    def ignores_lens(scores, lens, centre, window):
        return local_p_vectorised(scores, torch.full_like(lens, scores.shape[1]), centre, window)

    with pytest.raises(CheckFailed, match="not 0 beyond each source's length"):
        check_local_p_weights(ignores_lens)


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
def local_p_zero_based(scores, lens, centre, window):
    """Positions counted 0 .. S-1 against p_t (the statement counts them from 1)."""
    return local_p_vectorised(scores, lens, centre + 1, window)


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
    "check_local_p_weights": {
        "right": [local_p_loops],
        "wrong": [
            (without_gaussian, "you left out the Gaussian factor"),
            (no_window, r"positions outside the window \[p_t - D, p_t \+ D\] must get weight 0"),
            (whole_source_softmax, "the softmax must run over the positions inside the window only"),
            (sigma_is_d, "σ is D/2, not D"),
            (local_p_zero_based, "source positions s are counted from 1"),
        ],
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
