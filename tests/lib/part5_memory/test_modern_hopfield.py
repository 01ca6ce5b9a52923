"""Tests for lib/part5_memory/modern_hopfield.py: the update against chapter 9's attention and
torch's scaled_dot_product_attention with scale=beta, the energy against a written-out loop and
against the paper's bounds, the energy never rising along updates (hypothesis, the paper's
Theorem 1), fixed points of single patterns and of the global average, the separation by a
loop, and the argument errors (one-step retrieval and capacity are chapter 12's experiment,
tested in tests/experiments/test_ch12_memory.py)."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part4_attention.attention import DotScore, attention
from lib.part5_memory.modern_hopfield import modern_energy, modern_update, retrieval_weights, separation

FAST = settings(max_examples=40, deadline=None, database=None)


def draw(p, n, batch=(), seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(p, n, generator=g, dtype=dtype), torch.randn(*batch, n, generator=g, dtype=dtype)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("beta", [0.05, 1.0, 8.0])
def test_update_is_chapter_9_attention_and_torch_sdpa(seed, beta):
    patterns, states = draw(7, 5, (3,), seed)
    new = modern_update(patterns, states, beta)  # (3, 5)
    # chapter 9: query = state, keys = values = stored patterns, temperature 1/beta
    ours, weights = attention(states[None], patterns[None], patterns[None], DotScore(), temperature=1 / beta)
    torch.testing.assert_close(new, ours[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(retrieval_weights(patterns, states, beta), weights[0], rtol=1e-12, atol=1e-12)
    torch_out = F.scaled_dot_product_attention(states[None], patterns[None], patterns[None], scale=beta)
    torch.testing.assert_close(new, torch_out[0], rtol=1e-10, atol=1e-10)


def test_update_by_a_loop_over_patterns():
    patterns, state = draw(4, 3, (), seed=3)
    beta = 0.7
    scores = [beta * float(patterns[mu] @ state) for mu in range(4)]
    total = sum(math.exp(s) for s in scores)
    expected = sum(math.exp(s) / total * patterns[mu] for mu, s in enumerate(scores))
    torch.testing.assert_close(modern_update(patterns, state, beta), expected, rtol=1e-12, atol=1e-12)


def test_energy_by_a_loop():
    patterns, state = draw(4, 3, (), seed=4)
    beta = 2.0
    lse = math.log(sum(math.exp(beta * float(x @ state)) for x in patterns)) / beta
    norm = max(float(x.norm()) for x in patterns)
    expected = -lse + 0.5 * float(state @ state) + math.log(4) / beta + 0.5 * norm**2
    assert modern_energy(patterns, state, beta).item() == pytest.approx(expected, rel=1e-12)


@FAST
@given(seed=st.integers(0, 10_000), p=st.integers(1, 12), n=st.integers(1, 8),
       beta=st.floats(0.01, 20.0), steps=st.integers(1, 6))
def test_energy_never_rises_along_updates_and_stays_non_negative(seed, p, n, beta, steps):
    """Theorem 1 (CCCP): E(f(xi)) <= E(xi); and E >= 0 (lse <= max + log(P)/beta, max <= M |xi|)."""
    patterns, state = draw(p, n, (4,), seed)
    state = 3 * state  # start away from the patterns too
    energies = [modern_energy(patterns, state, beta)]
    for _ in range(steps):
        state = modern_update(patterns, state, beta)
        energies.append(modern_energy(patterns, state, beta))
    energies = torch.stack(energies)  # (steps + 1, 4)
    assert (energies.diff(dim=0) <= 1e-9 * (1 + energies[:-1].abs())).all()
    assert (energies >= -1e-9).all()


def test_energy_can_fail_to_fall_with_a_wrong_update():
    """The descent test can fail: a step that scales the state up raises the energy."""
    patterns, state = draw(5, 4, (), seed=1)
    new = 5 * modern_update(patterns, state, 1.0)
    assert modern_energy(patterns, new, 1.0) > modern_energy(patterns, state, 1.0)


def test_large_beta_retrieves_an_orthogonal_pattern_small_beta_averages():
    patterns = torch.eye(4, dtype=torch.float64) * 3  # separation 9 each
    cue = patterns[2] + 0.3 * torch.tensor([1.0, -1.0, 0.5, 1.0], dtype=torch.float64)
    assert (modern_update(patterns, cue, 10.0) - patterns[2]).norm() < 1e-9
    mean = patterns.mean(0)
    assert (modern_update(patterns, cue, 1e-6) - mean).norm() < 1e-4
    # the mean of orthogonal patterns of one norm is a fixed point at any beta
    torch.testing.assert_close(modern_update(patterns, mean, 0.5), mean)


def test_separation_by_a_loop():
    patterns, _ = draw(6, 4, (), seed=2)
    expected = [float(patterns[i] @ patterns[i]) - max(float(patterns[i] @ patterns[j]) for j in range(6) if j != i)
                for i in range(6)]
    torch.testing.assert_close(separation(patterns), torch.tensor(expected, dtype=torch.float64))
    assert separation(torch.eye(3)).tolist() == [1.0, 1.0, 1.0]


def test_errors_name_the_argument():
    patterns, states = draw(3, 4, (2,))
    with pytest.raises(TypeError, match="states"):
        modern_update(patterns, states[:, :3], 1.0)
    with pytest.raises(TypeError, match="states"):
        modern_energy(patterns, states[:, :3], 1.0)
    with pytest.raises(TypeError, match="beta"):
        modern_update(patterns, states, 0.0)
    with pytest.raises(TypeError, match="beta"):
        retrieval_weights(patterns, states, -1.0)
    with pytest.raises(ValueError, match="patterns must hold at least 2 rows"):
        separation(patterns[:1])
    with pytest.raises((TypeError, ValueError), match="states"):
        modern_update(patterns, states.float(), 1.0)
