"""REINFORCE (lib.part3_words.reinforce): the estimator against the exact gradient of the expected reward.

The reference is a tiny autoregressive policy whose expectation can be enumerated: sequences of
two tokens over three words, p(x1, x2) = softmax(a)[x1] softmax(C[x1])[x2], with a fixed reward
for each of the nine sequences. Its expected reward J is a finite sum, and autograd gives
grad J exactly in float64. Summing the gradient of ``reinforce_loss`` over every sequence (or
every pair of sequences), weighted by its probability, gives the *expected* estimate exactly,
so unbiasedness is an equality to 1e-12, not a statistical statement; a Monte Carlo run checks
the same within standard errors.
"""
import itertools
import math

import pytest
import torch

from lib.part3_words.lm import NeuralLM
from lib.part3_words.reinforce import bigram_precision, reinforce_fine_tune, reinforce_loss

WORDS = 3
SEQUENCES = list(itertools.product(range(WORDS), repeat=2))  # all 9 sequences x1 x2


pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def policy():
    """The parameters (a, C) of the toy policy, float64, requiring gradients."""
    generator = torch.Generator().manual_seed(0)
    first = torch.randn(WORDS, generator=generator, dtype=torch.float64).requires_grad_()
    second = torch.randn(WORDS, WORDS, generator=generator, dtype=torch.float64).requires_grad_()
    return first, second


# Rewards in [0.4, 1]: all positive, as BLEU's are, which is where a baseline matters most.
REWARD = 0.4 + 0.6 * torch.rand(WORDS, WORDS, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def token_log_probs(params, sequences):
    """log p(x1) and log p(x2 | x1) of each sequence (B, 2), with gradient."""
    first, second = params
    x = torch.tensor(sequences)  # (B, 2)
    log_first = torch.log_softmax(first, 0)[x[:, 0]]  # (B,)
    log_second = torch.log_softmax(second, 1)[x[:, 0], x[:, 1]]  # (B,)
    return torch.stack([log_first, log_second], dim=1)  # (B, 2)


def probabilities(params):
    """p(x) of the 9 sequences, as constants."""
    with torch.no_grad():
        return token_log_probs(params, SEQUENCES).sum(1).exp()  # (9,)


def rewards_of(sequences):
    return torch.stack([REWARD[a, b] for a, b in sequences])


def exact_gradient(params):
    """grad J for J = sum_x p(x) G(x), by autograd through the enumeration."""
    expected = (token_log_probs(params, SEQUENCES).sum(1).exp() * rewards_of(SEQUENCES)).sum()
    return torch.cat([g.flatten() for g in torch.autograd.grad(expected, params)])


def gradient(params, loss):
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)])


def expected_estimate(params, batch_size, baseline):
    """E[-grad reinforce_loss] over every batch of ``batch_size`` independent samples, by enumeration.

    Returns the mean and the total variance (trace of the covariance) of the estimate."""
    p = probabilities(params)
    mean, second_moment = 0.0, 0.0
    for batch in itertools.product(range(len(SEQUENCES)), repeat=batch_size):
        sequences = [SEQUENCES[i] for i in batch]
        rewards = rewards_of(sequences)
        chosen = baseline(rewards) if callable(baseline) else baseline
        g = -gradient(params, reinforce_loss(token_log_probs(params, sequences), rewards, chosen))
        weight = math.prod(float(p[i]) for i in batch)
        mean = mean + weight * g
        second_moment = second_moment + weight * (g @ g)
    return mean, float(second_moment - mean @ mean)


# ---------------------------------------------------------------------------
# (a) The estimate's expectation is the gradient of the expected reward.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("baseline", [None, 0.7, -2.0], ids=["none", "constant", "negative"])
def test_expected_estimate_is_the_exact_gradient_by_enumeration(baseline):
    params = policy()
    mean, _ = expected_estimate(params, 1, baseline)
    torch.testing.assert_close(mean, exact_gradient(params), rtol=0, atol=1e-12)


def test_a_per_sequence_baseline_that_ignores_the_sample_keeps_the_expectation():
    # A tensor baseline, e.g. the reward of the greedy output: here a fixed value per position in the batch.
    params = policy()
    mean, _ = expected_estimate(params, 2, torch.tensor([0.3, 0.9], dtype=torch.float64))
    torch.testing.assert_close(mean, exact_gradient(params), rtol=0, atol=1e-12)


def test_leave_one_out_is_unbiased_and_the_batch_mean_including_the_sample_is_not():
    params = policy()
    exact = exact_gradient(params)
    leave_one_out, _ = expected_estimate(params, 2, "leave-one-out")
    torch.testing.assert_close(leave_one_out, exact, rtol=0, atol=1e-12)
    # The batch mean depends on the sample itself: the expectation shrinks by (B - 1) / B = 1/2.
    batch_mean, _ = expected_estimate(params, 2, lambda rewards: rewards.mean().expand(2))
    torch.testing.assert_close(batch_mean, exact / 2, rtol=0, atol=1e-12)
    assert (batch_mean - exact).norm() > 0.1 * exact.norm()


@pytest.mark.parametrize("batch_size", [3, 4])
def test_the_batch_mean_shrinks_the_expected_gradient_by_exactly_b_minus_1_over_b(batch_size):
    """At B = 2 the factor (B - 1)/B equals 1/B; at B = 3 and 4 it is 2/3 and 3/4, not 1/3 and 1/4,
    and leave-one-out stays unbiased. Every batch of B samples is enumerated (9^B of them)."""
    params = policy()
    exact = exact_gradient(params)
    batch_mean, _ = expected_estimate(params, batch_size, lambda rewards: rewards.mean().expand(batch_size))
    torch.testing.assert_close(batch_mean, exact * (batch_size - 1) / batch_size, rtol=0, atol=1e-12)
    assert (batch_mean - exact / batch_size).norm() > 0.1 * exact.norm()
    leave_one_out, _ = expected_estimate(params, batch_size, "leave-one-out")
    torch.testing.assert_close(leave_one_out, exact, rtol=0, atol=1e-12)


def test_monte_carlo_average_matches_the_exact_gradient_within_standard_errors():
    params = policy()
    exact = exact_gradient(params)
    p = probabilities(params)
    n = 100_000
    drawn = torch.multinomial(p, n, replacement=True, generator=torch.Generator().manual_seed(2))
    sequences = [SEQUENCES[i] for i in drawn.tolist()]
    estimate = -gradient(params, reinforce_loss(token_log_probs(params, sequences), rewards_of(sequences)))
    # Standard error of each coordinate, from the per-sequence gradients (one per distinct sequence).
    per_sequence = torch.stack([
        -gradient(params, reinforce_loss(token_log_probs(params, [s]), rewards_of([s]))) for s in SEQUENCES
    ])  # (9, P)
    variance = (p[:, None] * (per_sequence - exact) ** 2).sum(0)  # (P,)
    standard_error = (variance / n).sqrt()
    assert bool(((estimate - exact).abs() <= 5 * standard_error + 1e-12).all())
    # and the check has power: a wrong estimate (no minus sign) lies far outside
    assert not bool(((-estimate - exact).abs() <= 5 * standard_error).all())


# ---------------------------------------------------------------------------
# (b) A baseline leaves the expectation unchanged and lowers the variance.
# ---------------------------------------------------------------------------


def test_baseline_lowers_the_variance_of_the_estimate():
    params = policy()
    expected_reward = float((probabilities(params) * rewards_of(SEQUENCES)).sum())
    mean_none, var_none = expected_estimate(params, 1, None)
    mean_base, var_base = expected_estimate(params, 1, expected_reward)
    torch.testing.assert_close(mean_base, mean_none, rtol=0, atol=1e-12)
    assert var_base < 0.2 * var_none
    # Over batches of two, leave-one-out against no baseline (both averaged over the batch).
    _, var_none_2 = expected_estimate(params, 2, None)
    _, var_loo_2 = expected_estimate(params, 2, "leave-one-out")
    assert var_loo_2 < 0.5 * var_none_2


# ---------------------------------------------------------------------------
# The loss by hand, padding, and fine-tuning.
# ---------------------------------------------------------------------------


def test_loss_value_by_hand():
    log_probs = torch.log(torch.tensor([[0.5, 0.25], [0.5, 0.5]], dtype=torch.float64))
    rewards = torch.tensor([1.0, 0.0], dtype=torch.float64)
    # no baseline: -(1 * log(1/8) + 0 * log(1/4)) / 2
    assert reinforce_loss(log_probs, rewards).item() == pytest.approx(math.log(8) / 2, abs=1e-15)
    # leave-one-out: advantages 1 - 0 = 1 and 0 - 1 = -1
    expected = -(math.log(1 / 8) - math.log(1 / 4)) / 2
    assert reinforce_loss(log_probs, rewards, "leave-one-out").item() == pytest.approx(expected, abs=1e-15)


def test_mask_ignores_padding_even_minus_infinity():
    log_probs = torch.tensor([[-0.5, -1.0, -math.inf], [-0.2, -0.3, -0.4]], dtype=torch.float64,
                             requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    rewards = torch.tensor([0.2, 0.6], dtype=torch.float64)
    loss = reinforce_loss(log_probs, rewards, 0.1, mask)
    by_hand = -((0.2 - 0.1) * -1.5 + (0.6 - 0.1) * -0.9) / 2
    assert loss.item() == pytest.approx(by_hand, abs=1e-15)
    (grad,) = torch.autograd.grad(loss, log_probs)
    assert grad[0, 2] == 0 and bool(torch.isfinite(grad).all())


def test_no_gradient_flows_through_rewards_or_baseline():
    log_probs = torch.log(torch.tensor([0.5, 0.25], dtype=torch.float64)).requires_grad_()
    rewards = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    baseline = torch.tensor([0.5, 0.5], dtype=torch.float64, requires_grad=True)
    reinforce_loss(log_probs, rewards, baseline).backward()
    assert rewards.grad is None and baseline.grad is None
    torch.testing.assert_close(log_probs.grad, torch.tensor([-0.25, -0.75], dtype=torch.float64))


def test_fine_tuning_raises_the_reward():
    # Reward: the share of sampled tokens that are word 0; a fresh model draws it a quarter of the time.
    torch.manual_seed(0)
    model = NeuralLM(4, context=1, embedding_dim=8, hidden_size=8)
    references = torch.tensor([[1, 2, 3, 1, 2, 3], [2, 3, 1, 2, 3, 1], [3, 1, 2, 3, 1, 2]])

    def share_of_zeros(samples, references):
        assert torch.equal(samples[:, :1], references[:, :1])  # the prompt is the reference's
        return (samples[:, 1:] == 0).double().mean(1)

    rewards = reinforce_fine_tune(model, references, share_of_zeros, prompt=1, bos=4, steps=60, batch_size=16,
                                  lr=0.05, seed=0)
    assert rewards[0] < 0.45 and min(rewards[-5:]) > 0.9


# ---------------------------------------------------------------------------
# (c) Bad input names the argument.
# ---------------------------------------------------------------------------

GOOD = torch.tensor([[-0.5, -1.0], [-0.1, -0.2]])
REWARDS = torch.tensor([1.0, 0.0])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(log_probs=[[-0.5]]), TypeError, r"(?s)parameter 'log_probs'.*Actual value: \[\[-0.5\]\].*Float\[Tensor, 'B T'\]"),
    (dict(log_probs=torch.zeros(2, 2, 2)), TypeError, r"(?s)parameter 'log_probs'.*Actual value: f32\[2,2,2\].*Float\[Tensor, 'B'\]"),
    (dict(log_probs=torch.zeros(0, 2), rewards=torch.zeros(0)), ValueError, "log_probs must hold B >= 1 sequences; found none"),
    (dict(log_probs=torch.tensor([[0.5, 0.25], [0.5, 0.5]])), ValueError, r"log_probs must be log-probabilities .* found 0.5"),
    (dict(log_probs=torch.tensor([[math.nan, -1.0], [-1.0, -1.0]])), ValueError, "log_probs must be log-probabilities .* found NaN"),
    (dict(log_probs=torch.tensor([[-math.inf, -1.0], [-1.0, -1.0]])), ValueError, r"log_probs must be finite \(where mask is True\).* found -inf"),
    (dict(log_probs=torch.zeros(2, 0)), ValueError, "log_probs must hold T >= 1 tokens per sequence; found none"),
    (dict(rewards=torch.tensor([1.0, 0.0, 1.0])), TypeError, r"(?s)parameter 'rewards'.*Actual value: f32\[3\].*B=2"),
    (dict(rewards=torch.tensor([1.0, math.nan])), ValueError, "rewards must be B = 2 finite numbers; found NaN or inf"),
    (dict(rewards=torch.tensor([1, 0])), TypeError, r"(?s)parameter 'rewards'.*Actual value: i64\[2\].*Float\[Tensor, 'B'\]"),
    (dict(baseline="mean"), TypeError, r"(?s)parameter 'baseline'.*Actual value: 'mean'.*Literal\['leave-one-out'\]"),
    (dict(baseline=torch.zeros(3)), TypeError, r"(?s)parameter 'baseline'.*Actual value: f32\[3\].*B=2"),
    (dict(baseline=torch.tensor([0.0, math.inf])), ValueError, "baseline must be B = 2 finite numbers; found NaN or inf"),
    (dict(baseline=math.nan), TypeError, r"(?s)parameter 'baseline'.*Actual value: nan.*is_finite"),
    (dict(baseline=True), TypeError, r"(?s)parameter 'baseline'.*Actual value: True.*is_finite"),
    (dict(mask=torch.ones(2, 3, dtype=torch.bool)), TypeError, r"(?s)parameter 'mask'.*Actual value: bool\[2,3\].*T=2"),
    (dict(log_probs=GOOD[:, 0], mask=torch.ones(2, 3, dtype=torch.bool)), ValueError, r"mask must have the shape \(B, T\) of log_probs \(2,\); found \(2, 3\)"),
    (dict(mask=torch.ones(2, 2)), TypeError, r"(?s)parameter 'mask'.*Actual value: f32\[2,2\].*Bool\[Tensor, 'B T'\]"),
])
def test_bad_input_is_named(kwargs, error, match):
    arguments = dict(log_probs=GOOD, rewards=REWARDS) | kwargs
    with pytest.raises(error, match=match):
        reinforce_loss(**arguments)


def test_leave_one_out_needs_two_sequences():
    with pytest.raises(ValueError, match="leave-one-out' needs B >= 2"):
        reinforce_loss(torch.tensor([-1.0]), torch.tensor([1.0]), "leave-one-out")


def test_fine_tune_bad_input_is_named():
    model = NeuralLM(4, context=1, embedding_dim=4, hidden_size=4)
    references = torch.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match=r"(?s)parameter 'model'.*Actual value: 'model'.*Module"):
        reinforce_fine_tune("model", references, max, 1, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'references'.*Actual value: f64\[1,3\].*Int64\[Tensor, 'N L'\]"):
        reinforce_fine_tune(model, references.double(), max, 1, 4)
    with pytest.raises(TypeError, match=r"(?s)parameter 'reward'.*Actual value: None.*Callable"):
        reinforce_fine_tune(model, references, None, 1, 4)
    with pytest.raises(ValueError, match=r"prompt must be less than the references' length L = 3; found 3"):
        reinforce_fine_tune(model, references, max, 3, 4)
    with pytest.raises(ValueError, match="references must hold N >= 1 sequences; found none"):
        reinforce_fine_tune(model, references[:0], max, 1, 4)
    with pytest.raises(ValueError, match="batch_size must be at least 2; found 1"):
        reinforce_fine_tune(model, references, max, 1, 4, batch_size=1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'baseline'.*Actual value: f32\[64\].*Literal\['leave-one-out'\]"):
        reinforce_fine_tune(model, references, max, 1, 4, baseline=torch.zeros(64))
    with pytest.raises(TypeError, match=r"(?s)parameter 'baseline'.*Actual value: 'greedy'.*Literal\['leave-one-out'\]"):
        reinforce_fine_tune(model, references, max, 1, 4, baseline="greedy")


# ---------------------------------------------------------------------------
# (d) Chapter 6's experiment: bigram precision, judging, fine-tuning copies.
# ---------------------------------------------------------------------------


def test_bigram_precision_by_hand_and_as_chapter_6_once_coded_it():
    samples = torch.tensor([[1, 2, 3, 4, 2], [1, 2, 2, 2, 2]])
    references = torch.tensor([[1, 2, 3, 9, 9], [1, 2, 3, 4, 5]])
    # sample 0 scores (2, 3), (3, 4), (4, 2): only (2, 3) is in its reference; sample 1 (2, 2) three times
    assert bigram_precision(samples, references, prompt=2).tolist() == [1 / 3, 0.0]
    generator = torch.Generator().manual_seed(0)
    samples, references = torch.randint(12, (2, 50, 16), generator=generator)  # (50, 16) each
    generated = samples[:, 2:-1] * 12 + samples[:, 3:]  # (50, 13): each bigram coded as one number
    reference = references[:, :-1] * 12 + references[:, 1:]  # (50, 15)
    coded = (generated[:, :, None] == reference[:, None, :]).any(-1).double().mean(1)
    assert torch.equal(bigram_precision(samples, references, prompt=3), coded)
    with pytest.raises(ValueError, match="prompt must be less than the samples' length L = 16; found 16"):
        bigram_precision(samples, references, prompt=16)
    with pytest.raises(ValueError, match=r"references must hold R >= 2 tokens \(a bigram\); found shape \(50, 1\)"):
        bigram_precision(samples, references[:, :1], prompt=3)
    with pytest.raises(ValueError, match="samples and references must be token ids >= 0; found -1"):
        bigram_precision(samples, references - 1, prompt=3)



def test_minus_infinity_is_refused_only_where_it_counts():
    # -inf at padding (mask False) is not summed: the loss stays finite.
    log_probs = torch.tensor([[-1.0, -math.inf], [-1.0, -1.0]])
    mask = torch.tensor([[True, False], [True, True]])
    assert reinforce_loss(log_probs, REWARDS, mask=mask).item() == pytest.approx(0.5)
    with pytest.raises(ValueError, match="log_probs must be finite"):
        reinforce_loss(log_probs, REWARDS)
