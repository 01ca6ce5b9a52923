"""Tests for lib/part4_attention/transformer_recipe.py: label smoothing and the warm-up schedule.

References: ``F.cross_entropy(label_smoothing=...)``, the smoothed target
distribution written out, the paper's formula for the learning rate and
``torch.optim.lr_scheduler.LambdaLR`` driving Adam.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lib.part4_attention.transformer_blocks import EncoderBlock
from lib.part4_attention.transformer_recipe import (
    ffn_gradient_norms, label_smoothed_cross_entropy, warmup_lambda, warmup_rate,
)

TOLERANCE = dict(atol=1e-10, rtol=1e-10)


def randn(*shape, seed=0):
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("ignore_index", [None, 0])
def test_label_smoothed_cross_entropy_equals_torch(epsilon, ignore_index):
    logits, targets = randn(9, 6, seed=11), torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 2])
    expected = F.cross_entropy(logits, targets, label_smoothing=epsilon,
                               ignore_index=-100 if ignore_index is None else ignore_index)
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, targets, epsilon, ignore_index), expected,
                               **TOLERANCE)


def test_label_smoothing_is_the_cross_entropy_against_the_smoothed_distribution():
    logits, targets, epsilon = randn(4, 5, seed=12), torch.tensor([1, 0, 4, 4]), 0.2
    q = torch.full((4, 5), epsilon / 5, dtype=torch.float64)
    q[torch.arange(4), targets] += 1 - epsilon  # (1 - eps) on the label + eps / V everywhere
    expected = -(q * F.log_softmax(logits, -1)).sum(-1).mean()
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, targets, epsilon), expected)
    # The smoothed loss is smallest at a finite logit gap, not at an infinite one.
    gaps = torch.linspace(0, 20, 201, dtype=torch.float64)
    losses = [label_smoothed_cross_entropy(torch.stack([g, torch.zeros((), dtype=torch.float64)])[None],
                                           torch.tensor([0]), 0.1) for g in gaps]
    assert 0 < int(torch.stack(losses).argmin()) < len(gaps) - 1


def test_label_smoothing_takes_int32_targets_as_main_did():
    logits, targets = randn(9, 6, seed=11), torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 2])
    for ignore_index in (None, 2):
        expected = label_smoothed_cross_entropy(logits, targets, 0.1, ignore_index)
        assert torch.equal(label_smoothed_cross_entropy(logits, targets.int(), 0.1, ignore_index), expected)


def test_label_smoothing_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'epsilon'.*Actual value: 1.5.*is_a_fraction"):
        label_smoothed_cross_entropy(randn(2, 3), torch.tensor([0, 1]), 1.5)
    with pytest.raises(TypeError, match=r"(?s)parameter 'logits'.*Actual value: f\d\d\[3\].*Float\[Tensor, 'N V'\]"):
        label_smoothed_cross_entropy(randn(3), torch.tensor([0, 1]), 0.1)
    with pytest.raises(ValueError, match="logits and targets must hold at least one position; found 0"):
        label_smoothed_cross_entropy(randn(2, 3)[:0], torch.tensor([0, 1])[:0], 0.1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*Actual value: i64\[3\].*IdDtype\[Tensor, 'N'\].*N=2"):
        label_smoothed_cross_entropy(randn(2, 3), torch.tensor([0, 1, 2]), 0.1)
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*Actual value: i16\[2\].*IdDtype\[Tensor, 'N'\]"):
        label_smoothed_cross_entropy(randn(2, 3), torch.tensor([0, 1], dtype=torch.int16), 0.1)  # gather's error
    with pytest.raises(ValueError, match=r"targets must hold ids in \[0, 3\)"):
        label_smoothed_cross_entropy(randn(2, 3), torch.tensor([0, 3]), 0.1)


def test_warmup_rate_is_the_papers_formula():
    d, warmup = 512, 4000
    for t in (1, 100, 3999, 4000, 4001, 10_000, 100_000):
        assert warmup_rate(t, d, warmup) == pytest.approx(d ** -0.5 * min(t ** -0.5, t * warmup ** -1.5), rel=1e-15)
    assert warmup_rate(4000, d, warmup) == pytest.approx(1 / math.sqrt(d * warmup))  # the peak
    assert warmup_rate(2000, d, warmup) == pytest.approx(warmup_rate(4000, d, warmup) / 2)  # linear rise
    assert warmup_rate(16_000, d, warmup) == pytest.approx(warmup_rate(4000, d, warmup) / 2)  # t^-1/2 decay
    with pytest.raises(TypeError, match="(?s)parameter 'step'.*Actual value: 0.*is_at_least_1"):
        warmup_rate(0, d, warmup)


def test_warmup_lambda_makes_lambda_lr_follow_the_schedule():
    parameter = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([parameter], lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_lambda(64, warmup=10))
    for step in range(1, 31):  # the rate used by the step-th update
        assert optimizer.param_groups[0]["lr"] == pytest.approx(warmup_rate(step, 64, 10), rel=1e-12)
        parameter.grad = torch.ones(1)
        optimizer.step()
        scheduler.step()


@pytest.mark.parametrize("norm_first", [False, True])
def test_ffn_gradient_norms_equal_torch_layers_backward(norm_first):
    """Per block, the norm of the gradient of W_2 equals what .backward() leaves on torch's own
    encoder layers, copied into ours (post-norm and pre-norm)."""
    torch.manual_seed(3)
    layers = [nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=norm_first,
                                         dtype=torch.float64) for _ in range(3)]
    blocks = nn.ModuleList(EncoderBlock.from_torch(layer) for layer in layers)
    x, target = randn(2, 5, 8, seed=4), randn(2, 5, 8, seed=5)
    h = x
    for block in blocks:
        h, _ = block(h)
    norms = ffn_gradient_norms(((h - target) ** 2).mean(), blocks)
    h = x
    for layer in layers:
        h = layer(h)
    ((h - target) ** 2).mean().backward()
    expected = torch.stack([layer.linear2.weight.grad.norm() for layer in layers])
    torch.testing.assert_close(norms, expected, **TOLERANCE)
    assert all(block.ffn.linear2.weight.grad is None for block in blocks)  # no .grad written


def test_ffn_gradient_norms_match_finite_differences():
    """Brute force: central differences of the loss in every entry of the last block's W_2."""
    torch.manual_seed(6)
    blocks = nn.ModuleList(EncoderBlock(4, 2, 6) for _ in range(2)).double()
    x = randn(1, 3, 4, seed=7)

    def loss():
        h = x
        for block in blocks:
            h, _ = block(h)
        return (h[..., 0] ** 3).sum()

    weight, step = blocks[1].ffn.linear2.weight, 1e-6
    grad = torch.zeros_like(weight)
    with torch.no_grad():
        for index in torch.cartesian_prod(*(torch.arange(n) for n in weight.shape)):
            i, j = index.tolist()
            weight[i, j] += step
            up = loss()
            weight[i, j] -= 2 * step
            down = loss()
            weight[i, j] += step
            grad[i, j] = (up - down) / (2 * step)
    assert torch.isclose(ffn_gradient_norms(loss(), blocks)[1], grad.norm(), rtol=1e-7)


def test_ffn_gradient_norms_refuse_a_constant_loss():
    blocks = nn.ModuleList([EncoderBlock(4, 2, 6)])
    with pytest.raises(ValueError, match="loss must depend on the blocks' weights"):
        ffn_gradient_norms(torch.tensor(1.0), blocks)


def test_ffn_gradient_norms_name_blocks_without_an_ffn_and_unused_blocks():
    blocks = nn.ModuleList([EncoderBlock(4, 2, 6), EncoderBlock(4, 2, 6)])
    with pytest.raises(TypeError, match="blocks must hold at least one block with an ffn"):
        ffn_gradient_norms(torch.ones(1, requires_grad=True).sum(), nn.ModuleList())
    with pytest.raises(TypeError, match="blocks must hold at least one block with an ffn"):
        ffn_gradient_norms(torch.ones(1, requires_grad=True).sum(), nn.ModuleList([nn.Linear(2, 2)]))
    h, _ = blocks[0](torch.randn(1, 3, 4))
    with pytest.raises(ValueError, match="loss must depend on every block's W_2"):
        ffn_gradient_norms(h.sum(), blocks)
