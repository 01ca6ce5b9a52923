"""Tests for lib/part5_memory/ntm.py: each addressing stage against Graves et al.'s equations on
hand-computed cases and element-by-element loops, gradcheck in float64, chapter 9's attention
as content addressing, the erase-then-add write and the copy task (the chapter's trained model is
tested in tests/experiments/test_ch12_memory.py)."""
import math

import pytest
import torch
import torch.nn.functional as F

from lib.part4_attention.attention import attention
from lib.part5_memory.ntm import (
    NTM, CosineScore, HeadParameters, NTMConfig, address, circular_shift, content_weights, copy_batch,
    interpolate, read, sharpen, train_copy, write,
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Small models train faster on one thread on a busy machine; the training script sets one
    thread too, and the fixture restores the setting for the tests that follow."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def distribution(*shape, seed=0):
    return torch.softmax(2 * randn(*shape, seed=seed), dim=-1)


def f64(*values):
    """f64(1.0, 2.0) and f64([1.0, 2.0]) are both the vector (1, 2); f64([1, 0], [0, 1]) is a matrix."""
    return torch.tensor(values[0] if len(values) == 1 and isinstance(values[0], list) else values, dtype=torch.float64)


# ---------------------------------------------------------------------------
# Content addressing (eq. 5-6).
# ---------------------------------------------------------------------------


def test_cosine_score_matches_torch_and_ignores_length():
    queries, keys = randn(2, 3, 5, seed=1), randn(2, 4, 5, seed=2)
    expected = F.cosine_similarity(queries[:, :, None], keys[:, None], dim=-1)  # (B, T, S)
    torch.testing.assert_close(CosineScore()(queries, keys), expected)
    torch.testing.assert_close(CosineScore()(3 * queries, keys / 7), expected)
    zero = torch.zeros(2, 1, 5, dtype=torch.float64)
    assert torch.equal(CosineScore()(zero, keys), torch.zeros(2, 1, 4, dtype=torch.float64))


def test_content_weights_by_hand():
    # Slots (1, 0), (0, 1), (1, 1), key (1, 0): similarities 1, 0, 1/sqrt(2); beta = 2 gives
    # softmax(2, 0, 1.4142) = (7.3891, 1, 4.1133) / 12.5024 = (0.5910, 0.0800, 0.3290).
    memory = f64([1, 0], [0, 1], [1, 1])[None]
    weights = content_weights(memory, f64([1, 0])[None], f64(2.0))
    torch.testing.assert_close(weights, f64([0.5910, 0.0800, 0.3290])[None], atol=1e-4, rtol=0)


def test_content_addressing_is_attention_with_cosine_scores_at_temperature_one_over_beta():
    memory, key = randn(1, 6, 4, seed=3), randn(1, 4, seed=4)
    beta = 3.5
    output, weights = attention(key[:, None], memory, memory, CosineScore(), temperature=1 / beta)
    ours = content_weights(memory, key, f64(beta))
    torch.testing.assert_close(ours, weights[:, 0])
    torch.testing.assert_close(read(memory, ours), output[:, 0])


def test_key_strength_moves_weights_from_uniform_to_the_best_match():
    memory, key = randn(2, 5, 3, seed=5), randn(2, 3, seed=6)
    uniform = content_weights(memory, key, f64(0.0, 0.0))
    torch.testing.assert_close(uniform, torch.full((2, 5), 0.2, dtype=torch.float64))
    sharp = content_weights(memory, key, f64(1e4, 1e4))
    best = CosineScore()(key[:, None], memory)[:, 0].argmax(-1)
    torch.testing.assert_close(sharp, F.one_hot(best, 5).double())


# ---------------------------------------------------------------------------
# Location addressing (eqs. 7-9).
# ---------------------------------------------------------------------------


def test_interpolation_by_hand():
    content, previous = f64([1.0, 0.0, 0.0]), f64([0.0, 0.5, 0.5])
    out = interpolate(content.expand(3, 3), previous.expand(3, 3), f64(1.0, 0.0, 0.25))
    torch.testing.assert_close(out, f64([1, 0, 0], [0, 0.5, 0.5], [0.25, 0.375, 0.375]))


def test_shift_plus_one_moves_the_focus_forward_and_wraps_around():
    one_hot = F.one_hot(torch.tensor([0, 4]), 5).double()  # focus on slots 0 and 4
    forward = f64([0, 0, 1], [0, 0, 1])
    backward = f64([1, 0, 0], [1, 0, 0])
    assert circular_shift(one_hot, forward).argmax(-1).tolist() == [1, 0]  # slot 4 + 1 wraps to 0
    assert circular_shift(one_hot, backward).argmax(-1).tolist() == [4, 3]  # slot 0 - 1 wraps to 4
    # A soft shift blurs: 0.1 back, 0.2 stay, 0.7 forward.
    soft = circular_shift(one_hot[:1], f64([0.1, 0.2, 0.7])[None])
    torch.testing.assert_close(soft, f64([0.2, 0.7, 0.0, 0.0, 0.1])[None])


@pytest.mark.parametrize("reach", [1, 2])
def test_circular_shift_is_the_papers_circular_convolution(reach):
    weights, shift = distribution(3, 7, seed=7), distribution(3, 2 * reach + 1, seed=8)
    expected = torch.zeros(3, 7, dtype=torch.float64)
    for b in range(3):
        for i in range(7):
            for j in range(7):
                offset = (i - j) % 7  # s is indexed by offsets -reach..reach, stored at reach + offset
                offset = offset - 7 if offset > reach else offset
                if -reach <= offset <= reach:
                    expected[b, i] += weights[b, j] * shift[b, reach + offset]
    torch.testing.assert_close(circular_shift(weights, shift), expected)


def test_sharpen_by_hand_and_its_limits():
    w = f64([0.5, 0.3, 0.2])[None]
    # (0.25, 0.09, 0.04) / 0.38
    torch.testing.assert_close(sharpen(w, f64(2.0)), f64([0.25, 0.09, 0.04])[None] / 0.38)
    torch.testing.assert_close(sharpen(w, f64(1.0)), w)
    torch.testing.assert_close(sharpen(w, f64(200.0)), f64([1.0, 0.0, 0.0])[None])
    with_zero = sharpen(f64([0.0, 1.0])[None], f64(3.0))
    assert torch.equal(with_zero, f64([0.0, 1.0])[None])


def test_address_composes_the_four_stages():
    memory, previous = randn(2, 6, 4, seed=9), distribution(2, 6, seed=10)
    head = HeadParameters(key=randn(2, 4, seed=11), strength=f64(2.0, 8.0), gate=f64(0.3, 0.9),
                          shift=distribution(2, 3, seed=12), gamma=f64(1.5, 3.0))
    steps = content_weights(memory, head.key, head.strength)
    steps = interpolate(steps, previous, head.gate)
    steps = sharpen(circular_shift(steps, head.shift), head.gamma)
    torch.testing.assert_close(address(memory, previous, head), steps)
    torch.testing.assert_close(steps.sum(-1), torch.ones(2, dtype=torch.float64))


# ---------------------------------------------------------------------------
# Reading and writing (eqs. 2-4).
# ---------------------------------------------------------------------------


def test_read_is_the_weighted_average_of_the_slots():
    memory = f64([1, 2], [3, 4], [5, 6])[None]
    torch.testing.assert_close(read(memory, f64([0.5, 0.25, 0.25])[None]), f64([2.5, 3.5])[None])


def test_write_by_hand():
    memory = f64([1, 2], [3, 4])[None]
    weights, erase, add = f64([0.5, 0.0])[None], f64([1.0, 0.5])[None], f64([10.0, 20.0])[None]
    # slot 0: (1, 2) * (1 - 0.5 (1, 0.5)) + 0.5 (10, 20) = (0.5, 1.5) + (5, 10); slot 1 untouched.
    torch.testing.assert_close(write(memory, weights, erase, add), f64([5.5, 11.5], [3, 4])[None])


def test_weight_one_and_erase_one_clear_a_slot_exactly():
    memory = randn(1, 4, 3, seed=13)
    weights = F.one_hot(torch.tensor([2]), 4).double()
    cleared = write(memory, weights, torch.ones(1, 3, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64))
    assert torch.equal(cleared[0, 2], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(cleared[0, [0, 1, 3]], memory[0, [0, 1, 3]])
    replaced = write(memory, weights, torch.ones(1, 3, dtype=torch.float64), f64([7, 8, 9])[None])
    assert torch.equal(replaced[0, 2], f64([7, 8, 9]))


def test_write_matches_element_loops():
    memory, weights = randn(2, 5, 3, seed=14), distribution(2, 5, seed=15)
    erase, add = torch.rand(2, 3, dtype=torch.float64), randn(2, 3, seed=16)
    expected = memory.clone()
    for b in range(2):
        for i in range(5):
            for d in range(3):
                expected[b, i, d] = memory[b, i, d] * (1 - weights[b, i] * erase[b, d]) + weights[b, i] * add[b, d]
    torch.testing.assert_close(write(memory, weights, erase, add), expected)
    assert not torch.equal(expected, memory)


def test_the_differentiable_parts_pass_gradcheck():
    memory = randn(2, 5, 3, seed=17).requires_grad_()
    previous = distribution(2, 5, seed=18).requires_grad_()
    key = randn(2, 3, seed=19).requires_grad_()
    strength, gate = f64(1.5, 4.0).requires_grad_(), f64(0.3, 0.8).requires_grad_()
    gamma = f64(1.5, 2.5).requires_grad_()
    shift = distribution(2, 3, seed=20).requires_grad_()
    erase, add = torch.rand(2, 3, dtype=torch.float64).requires_grad_(), randn(2, 3, seed=21).requires_grad_()
    checks = [
        (content_weights, (memory, key, strength)),
        (interpolate, (previous, distribution(2, 5, seed=22), gate)),
        (circular_shift, (previous, shift)),
        (sharpen, (previous, gamma)),
        (read, (memory, previous)),
        (write, (memory, previous, erase, add)),
        (lambda m, p, k, b, g, s, y: address(m, p, HeadParameters(k, b, g, s, y)),
         (memory, previous, key, strength, gate, shift, gamma)),
    ]
    for function, inputs in checks:
        assert torch.autograd.gradcheck(function, inputs)


# ---------------------------------------------------------------------------
# The machine and the copy task.
# ---------------------------------------------------------------------------


def test_copy_batch_reads_then_asks_for_the_same_vectors():
    inputs, targets, answer = copy_batch(4, 3, 5, torch.Generator().manual_seed(0))
    assert inputs.shape == (4, 7, 6) and targets.shape == (4, 7, 5)
    assert answer.tolist() == [False] * 4 + [True] * 3
    assert torch.equal(targets[:, 4:], inputs[:, :3, :5])
    assert torch.equal(inputs[:, 3, 5], torch.ones(4)) and inputs[:, 4:].abs().sum() == 0


def test_ntm_weightings_are_distributions_and_the_trace_replays_the_memory():
    torch.manual_seed(0)
    model = NTM(NTMConfig(input_size=3, output_size=2, controller_size=8, slots=5, slot_size=4))
    inputs = torch.rand(2, 6, 3)
    logits, record = model(inputs, trace=True)
    assert logits.shape == (2, 6, 2)
    assert record["read"].shape == record["write"].shape == (2, 6, 5)
    assert record["memory"].shape == (2, 6, 5, 4)
    torch.testing.assert_close(record["read"].sum(-1), torch.ones(2, 6))
    # The memory after step 0 is the initial memory written with the step's weighting, erase and add.
    first = write(model.initial_memory(2, inputs), record["write"][:, 0], record["erase"][:, 0], record["add"][:, 0])
    torch.testing.assert_close(record["memory"][:, 0], first)
    torch.testing.assert_close(model(inputs), logits)


def test_a_short_training_run_lowers_the_loss():
    torch.manual_seed(0)
    model = NTM(NTMConfig(input_size=3, output_size=2, controller_size=16, slots=6, slot_size=4))
    run = train_copy(model, steps=30, max_length=2, batch=16, lr=1e-2, report=15)
    assert run.steps == [15, 30] and run.losses[-1] < run.losses[0]


def test_bad_input_is_rejected_with_a_message():
    memory = randn(2, 4, 3)
    with pytest.raises(TypeError, match=r"(?s)parameter 'weights'.*Actual value: f64\[2,5\].*Float\[Tensor, 'B N'\].*N=4"):
        read(memory, distribution(2, 5))
    with pytest.raises(TypeError, match=r"(?s)parameter 'erase'.*Actual value: f64\[2,4\].*Float\[Tensor, 'B D'\].*D=3"):
        write(memory, distribution(2, 4), torch.rand(2, 4, dtype=torch.float64), randn(2, 3))
    for bad, shown in ((-1.0, "-1"), (float("nan"), "nan"), (float("inf"), "inf")):  # NaN passed before
        with pytest.raises(ValueError, match=rf"strength must be >= 0 and finite; found {shown}$"):
            content_weights(memory, randn(2, 3), f64(1.0, bad))
    for bad, shown in ((0.5, "0.5"), (float("nan"), "nan"), (float("inf"), "inf")):
        with pytest.raises(ValueError, match=rf"gamma must be >= 1 and finite; found {shown}$"):
            sharpen(distribution(2, 4), f64(2.0, bad))
    with pytest.raises(ValueError, match="an odd number of offsets"):
        circular_shift(distribution(2, 4), distribution(2, 2))
    with pytest.raises(TypeError, match=r"(?s)parameter 'weights'.*Actual value: i64\[2,4\].*Float\[Tensor, 'B N'\]"):
        read(memory, torch.ones(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="input_size = 7"):
        NTM()(torch.zeros(1, 3, 5))
    with pytest.raises(TypeError, match=r"(?s)parameter 'slots'.*Actual value: 0.*is_at_least_1"):
        NTMConfig(slots=0)
    assert math.isfinite(float(content_weights(torch.zeros(1, 3, 2, dtype=torch.float64), f64([1.0, 0.0])[None],
                                               f64(5.0)).sum()))


def test_mixed_dtypes_are_named_instead_of_failing_inside_torch():
    memory = torch.randn(2, 4, 3).half()
    with pytest.raises(TypeError, match=r"key must have the dtype of memory \(torch.float16\); found torch.float32"):
        content_weights(memory, torch.randn(2, 3), torch.ones(2).half())
    with pytest.raises(TypeError, match=r"weights must have the dtype of memory \(torch.float16\); found torch.float32"):
        read(memory, torch.full((2, 4), 0.25))
    with pytest.raises(TypeError, match=r"gamma must have the dtype of weights \(torch.float32\); found torch.float64"):
        sharpen(torch.full((2, 4), 0.25), torch.ones(2, dtype=torch.float64))
    same = content_weights(memory, torch.randn(2, 3).half(), torch.ones(2).half())
    assert same.dtype == torch.float16 and torch.allclose(same.float().sum(-1), torch.ones(2), atol=1e-3)


def test_an_empty_sequence_and_crossed_lengths_are_named():
    with pytest.raises(ValueError, match=r"inputs must have shape \(B, T, input_size\) with T >= 1.*found \(2, 0, 7\)"):
        NTM()(torch.zeros(2, 0, 7))  # was torch.stack's "expects a non-empty TensorList"
    with pytest.raises(ValueError, match="max_length must be >= min_length = 5; found 3"):
        train_copy(NTM(), 1, min_length=5, max_length=3)  # was torch.randint's "from < to"


def test_a_copy_run_record_counts_steps_item_by_item():
    from lib.part5_memory.ntm import CopyRun

    assert CopyRun([0, 10], [1.0, 0.5]).steps == [0, 10]
    for steps in ([10, -1], [True, 10]):
        for _ in range(5):  # every item, not one drawn at random
            with pytest.raises(TypeError, match=r"(?s)parameter 'steps'"):
                CopyRun(steps)
