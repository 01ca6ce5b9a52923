"""Tests for lib/part5_memory/hopfield.py: the Hebbian rule and the energy by hand and by loops,
the energy never rising under asynchronous updates (hypothesis), stored patterns as fixed
points below capacity and oscillation under synchronous updates (the capacity curve is
chapter 12's experiment, tested in tests/experiments/test_ch12_memory.py)."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part5_memory.hopfield import (
    CAPACITY, HopfieldNetwork, energy, flip_bits, hebbian_weights, overlap, update_async, update_sync,
)

FAST = settings(max_examples=40, deadline=None, database=None)


def spins(*shape, seed=0):
    return torch.randint(0, 2, shape, generator=torch.Generator().manual_seed(seed)).double() * 2 - 1


def hadamard(n):
    """Rows of the n x n Sylvester-Hadamard matrix: n mutually orthogonal +-1 patterns."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


# ---------------------------------------------------------------------------
# Storage and energy against hand computations and loops.
# ---------------------------------------------------------------------------


def test_hebbian_weights_and_energy_by_hand():
    patterns = torch.tensor([[1.0, 1, -1, -1], [1, -1, 1, -1]], dtype=torch.float64)
    # (1/4)(xi1 xi1^T + xi2 xi2^T) = (1/4)[[2,0,0,-2],[0,2,-2,0],[0,-2,2,0],[-2,0,0,2]], diagonal set to 0.
    expected = torch.tensor([[0, 0, 0, -0.5], [0, 0, -0.5, 0], [0, -0.5, 0, 0], [-0.5, 0, 0, 0]], dtype=torch.float64)
    weights = hebbian_weights(patterns)
    torch.testing.assert_close(weights, expected)
    # W xi1 = (0.5, 0.5, -0.5, -0.5), so xi1^T W xi1 = 2 and E = -1.
    torch.testing.assert_close(energy(weights, patterns), torch.tensor([-1.0, -1.0], dtype=torch.float64))


def test_hebbian_weights_and_energy_match_loops():
    patterns = spins(3, 7, seed=1)
    weights = hebbian_weights(patterns)
    states = spins(5, 7, seed=2)
    for i in range(7):
        for j in range(7):
            by_loop = 0.0 if i == j else sum(float(p[i] * p[j]) for p in patterns) / 7
            assert weights[i, j].item() == pytest.approx(by_loop)
    for s, e in zip(states, energy(weights, states)):
        by_loop = -0.5 * sum(float(weights[i, j] * s[i] * s[j]) for i in range(7) for j in range(7))
        assert e.item() == pytest.approx(by_loop)
    assert torch.equal(weights, weights.T)


def test_storing_no_pattern_is_refused():
    one = spins(1, 4)
    assert hebbian_weights(one).shape == (4, 4)  # one pattern is enough
    for store in (hebbian_weights, HopfieldNetwork):
        with pytest.raises(ValueError, match=r"patterns must hold at least one pattern \(P >= 1\); found shape \(0, 4\)"):
            store(one[:0])


@FAST
@given(st.integers(1, 6), st.integers(2, 24), st.integers(0, 10_000))
def test_energy_never_increases_under_asynchronous_updates(n_patterns, n_units, seed):
    weights = hebbian_weights(spins(n_patterns, n_units, seed=seed))
    state = spins(3, n_units, seed=seed + 1)  # three independent runs
    order = torch.randint(0, n_units, (3 * n_units,), generator=torch.Generator().manual_seed(seed + 2))
    energies = [energy(weights, state)]
    for unit in order:
        state = update_async(weights, state, unit[None])
        energies.append(energy(weights, state))
    steps = torch.stack(energies)  # (K + 1, 3)
    assert bool((steps[1:] <= steps[:-1] + 1e-12).all())


def test_every_flip_lowers_the_energy_strictly_and_a_zero_field_never_flips():
    """The chapter's proof that the updates stop: a unit flips only when its field is not 0, so every
    flip changes the energy by -2|h_i| < 0; a unit whose field is 0 keeps its state. With N = 16 every
    number is exact (multiples of 1/16), and four patterns make zero fields common."""
    ties = 0
    for seed in range(5):
        weights = hebbian_weights(spins(4, 16, seed=seed))
        state = spins(8, 16, seed=seed + 10)  # eight independent runs
        for unit in torch.randint(0, 16, (64,), generator=torch.Generator().manual_seed(seed)).tolist():
            field = state @ weights[:, unit]  # (8,)
            new = update_async(weights, state, torch.tensor([unit]))
            flipped = new[:, unit] != state[:, unit]
            change = energy(weights, new) - energy(weights, state)
            assert torch.equal(change[flipped], -2 * field[flipped].abs())
            assert bool((field[flipped] != 0).all()) and bool((change[flipped] < 0).all())
            assert bool((change[~flipped] == 0).all())
            ties += int((field == 0).sum())
            state = new
    assert ties > 0  # the tie rule was exercised


def test_flipping_one_unit_changes_the_energy_by_minus_delta_s_times_h():
    weights = hebbian_weights(spins(4, 10, seed=3))
    state = spins(10, seed=4)
    fields = weights @ state  # (N,)
    for i in range(10):
        flipped = state.clone()
        flipped[i] = -flipped[i]
        change = energy(weights, flipped) - energy(weights, state)
        assert change.item() == pytest.approx(-(flipped[i] - state[i]).item() * fields[i].item())


def test_asynchronous_updates_match_unit_by_unit_loops():
    weights = hebbian_weights(spins(3, 9, seed=5))
    state = spins(9, seed=6)
    order = torch.tensor([4, 0, 8, 4, 2, 7])
    by_hand = state.clone()
    for i in order.tolist():
        field = sum(float(weights[i, j] * by_hand[j]) for j in range(9))
        by_hand[i] = 1.0 if field > 0 else (-1.0 if field < 0 else by_hand[i])
    torch.testing.assert_close(update_async(weights, state, order), by_hand)


def test_a_unit_with_zero_field_keeps_its_state():
    weights = torch.zeros(3, 3, dtype=torch.float64)
    state = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    assert torch.equal(update_sync(weights, state), state)
    assert torch.equal(update_async(weights, state, torch.arange(3)), state)


def test_a_field_that_is_zero_up_to_rounding_is_a_tie_in_every_summation_order():
    # Unit 0's field is 0.1 + 0.2 - 0.3 = 0 exactly, but 5.6e-17 in float64 when summed in this order:
    # a CPU that sums in another order can get 0 or a negative number. Every order must keep the state.
    weights = torch.zeros(4, 4, dtype=torch.float64)
    weights[0, 1:] = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    weights[1:, 0] = weights[0, 1:]
    state = torch.tensor([-1.0, 1.0, 1.0, -1.0], dtype=torch.float64)
    assert (state @ weights[:, 0]).item() != 0.0  # the rounding residue this test is about
    for permutation in ([0, 1, 2, 3], [0, 3, 2, 1], [0, 2, 3, 1]):
        p = torch.tensor(permutation)
        permuted_weights, permuted_state = weights[p][:, p], state[p]  # the same network, units relabelled
        assert update_async(permuted_weights, permuted_state, torch.tensor([0]))[0] == -1.0
        assert update_sync(permuted_weights, permuted_state)[0] == -1.0


# ---------------------------------------------------------------------------
# Recall: fixed points, convergence, oscillation, capacity.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n_patterns", [1, 4, 8, 15])
def test_orthogonal_patterns_are_fixed_points_for_any_p_below_n(n_patterns):
    # For orthogonal patterns W xi = (1 - P/N) xi exactly, so the sign of the field is xi while P < N.
    patterns = hadamard(16)[:n_patterns]
    weights = hebbian_weights(patterns)
    torch.testing.assert_close(patterns @ weights, (1 - n_patterns / 16) * patterns)
    assert torch.equal(update_sync(weights, patterns), patterns)
    assert torch.equal(update_async(weights, patterns, torch.arange(16)), patterns)


@pytest.mark.parametrize("seed", range(5))
def test_random_patterns_are_fixed_points_below_capacity(seed):
    patterns = spins(10, 200, seed=seed)  # load 0.05, well below 0.138
    network = HopfieldNetwork(patterns)
    recall = network.recall(patterns, generator=torch.Generator().manual_seed(seed))
    assert recall.converged and recall.steps == 1 and torch.equal(recall.states, patterns)


def test_recall_from_a_noisy_cue_returns_the_pattern_at_low_load():
    generator = torch.Generator().manual_seed(0)
    patterns = spins(5, 100, seed=7)
    network = HopfieldNetwork(patterns)
    cues = flip_bits(patterns, 0.2, generator)
    assert torch.equal(overlap(cues, patterns), torch.full((5,), 0.6, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"states and patterns must broadcast; found \(2, 8\) and \(3, 8\)"):
        overlap(torch.ones(2, 8), torch.ones(3, 8))  # torch's "size of tensor a" before
    recall = network.recall(cues, generator=generator)
    assert recall.converged and torch.equal(recall.states, patterns)
    assert bool((network.energy(recall.states) < network.energy(cues)).all())


def test_keeping_the_diagonal_changes_little_at_low_load_and_freezes_states_at_high_load():
    """hebbian_weights' docstring: W_ii = P/N adds (P/N) s_i to every field. At N = 100, P = 5 noisy
    cues are still recalled exactly; at P = 400 (load 4) one synchronous step leaves almost every
    unit of a random state where it was, against about half with the zero diagonal."""
    generator = torch.Generator().manual_seed(0)
    patterns = spins(5, 100, seed=7)
    kept = patterns.T @ patterns / 100  # W_ii = 0.05
    cues = flip_bits(patterns, 0.2, generator)
    states = cues
    for _ in range(10):
        states = update_async(kept, states, torch.randperm(100, generator=generator))
    assert torch.equal(states, patterns)
    patterns, random = spins(400, 100, seed=8), spins(50, 100, seed=9)
    zero, kept = hebbian_weights(patterns), patterns.T @ patterns / 100  # W_ii = 4 kept
    unchanged = {name: float((update_sync(weights, random) == random).double().mean())
                 for name, weights in (("zero", zero), ("kept", kept))}
    assert unchanged["kept"] >= 0.9 and unchanged["zero"] <= 0.7, unchanged


def test_synchronous_updates_can_oscillate_where_asynchronous_ones_settle():
    network = HopfieldNetwork(torch.tensor([[1.0, 1.0]], dtype=torch.float64))  # two units that want to agree
    weights = network.weights  # [[0, 0.5], [0.5, 0]]
    start = torch.tensor([1.0, -1.0], dtype=torch.float64)
    assert torch.equal(update_sync(weights, start), -start)  # a 2-cycle: (1, -1) <-> (-1, 1)
    assert torch.equal(update_sync(weights, -start), start)
    assert not network.recall(start, mode="sync", max_steps=10).converged
    settled = network.recall(start, mode="async", generator=torch.Generator().manual_seed(0))
    assert settled.converged and settled.states[0] == settled.states[1]


def test_flip_bits_flips_exactly_the_requested_share_in_different_places():
    patterns = spins(50, 40, seed=8)
    noisy = flip_bits(patterns, 0.25, torch.Generator().manual_seed(1))
    assert bool(((noisy != patterns).sum(-1) == 10).all())
    assert len({tuple(row.tolist()) for row in (noisy != patterns)}) > 1
    again = flip_bits(patterns, 0.25, torch.Generator().manual_seed(1))
    assert torch.equal(noisy, again)


# ---------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------


def test_bad_input_is_rejected_with_a_message():
    with pytest.raises(TypeError, match=r"(?s)parameter 'patterns'.*Actual value: f32\[1,2\].*holds_only_plus_or_minus_1"):
        hebbian_weights(torch.tensor([[1.0, 0.5]]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'patterns'.*Actual value: i64\[1,2\].*Float\[Tensor, 'P N'\]"):
        hebbian_weights(torch.tensor([[1, -1]]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'patterns'.*Actual value: f64\[3\].*Float\[Tensor, 'P N'\]"):
        hebbian_weights(torch.ones(3, dtype=torch.float64))
    weights = hebbian_weights(spins(2, 4))
    with pytest.raises(TypeError, match=r"(?s)parameter 'states'.*Actual value: f64\[5\].*Float\[Tensor, '\*batch N'\].*N=4"):
        energy(weights, spins(5))
    with pytest.raises(TypeError, match=r"states must have the dtype of weights \(torch.float64\); found torch.float32"):
        energy(weights, torch.ones(4))
    with pytest.raises(ValueError, match=r"unit indices in \[0, 4\)"):
        update_async(weights, spins(4), torch.tensor([4]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'order'.*Actual value: f32\[1\].*IntegerDtype\[Tensor, 'K'\]"):
        update_async(weights, spins(4), torch.tensor([0.0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'fraction'.*Actual value: 1.5.*is_a_fraction"):
        flip_bits(spins(2, 4), 1.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'mode'.*Actual value: 'parallel'.*Literal\['async', 'sync'\]"):
        HopfieldNetwork(spins(2, 4)).recall(spins(4), mode="parallel")


def test_a_recall_record_holds_spins_and_a_count_of_steps():
    from lib.part5_memory.hopfield import Recall

    states = spins(2, 4)
    assert Recall(states, 0, True).steps == 0
    for bad_states, steps, name in ((states, -1, "steps"), (states, True, "steps"), (states.long(), 1, "states"),
                                    (states * 0, 1, "states")):
        with pytest.raises(TypeError, match=rf"(?s)parameter '{name}'"):
            Recall(bad_states, steps, True)
