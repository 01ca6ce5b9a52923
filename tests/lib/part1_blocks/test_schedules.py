"""lib.part1_blocks.schedules against torch.optim.lr_scheduler, step by step, and their argument checks."""
import math
from functools import partial

import pytest
import torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, LinearLR, SequentialLR, StepLR

from lib.part1_blocks.schedules import cosine, step_decay, warmup_then_decay

BASE_LR = 0.4


def torch_factors(make_scheduler, steps: int) -> list[float]:
    """The learning rate a torch scheduler sets before each of ``steps`` updates, over the base rate."""
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=BASE_LR)
    scheduler = make_scheduler(optimizer)
    factors = []
    for _ in range(steps):
        factors.append(optimizer.param_groups[0]["lr"] / BASE_LR)
        optimizer.step()
        scheduler.step()
    return factors


@pytest.mark.parametrize("step_size, gamma", [(1, 0.5), (7, 0.1), (30, 0.9), (5, 0.0)])
def test_step_decay_is_steplr(step_size, gamma):
    expected = torch_factors(lambda opt: StepLR(opt, step_size, gamma), 100)
    assert [step_decay(t, step_size, gamma) for t in range(100)] == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("total, min_factor", [(1, 0.0), (10, 0.0), (97, 0.05), (200, 0.5)])
def test_cosine_is_cosine_annealing_up_to_total(total, min_factor):
    expected = torch_factors(lambda opt: CosineAnnealingLR(opt, T_max=total, eta_min=min_factor * BASE_LR),
                             total + 1)
    ours = [cosine(t, total, min_factor) for t in range(total + 1)]
    assert ours == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert ours[0] == 1.0 and ours[-1] == pytest.approx(min_factor, abs=1e-15)


def test_cosine_stays_at_its_minimum_after_total_where_torch_rises_again():
    expected = torch_factors(lambda opt: CosineAnnealingLR(opt, T_max=10, eta_min=0.0), 15)
    assert [cosine(t, 10) for t in range(11, 15)] == [0.0] * 4
    assert all(value > 0 for value in expected[11:])


@pytest.mark.parametrize("warmup, total, start_factor, min_factor",
                         [(1, 2, 0.5, 0.0), (5, 50, 0.1, 0.0), (20, 60, 0.01, 0.2), (10, 11, 1.0, 1.0)])
def test_warmup_then_linear_decay_is_sequential_linearlr(warmup, total, start_factor, min_factor):
    def make(opt):
        return SequentialLR(opt, [LinearLR(opt, start_factor, 1.0, total_iters=warmup),
                                  LinearLR(opt, 1.0, min_factor, total_iters=total - warmup)],
                            milestones=[warmup])

    expected = torch_factors(make, total + 5)  # LinearLR stays at its end factor afterwards, as ours
    ours = [warmup_then_decay(t, warmup, total, start_factor, "linear", min_factor) for t in range(total + 5)]
    assert ours == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("warmup, total, start_factor, min_factor",
                         [(1, 2, 0.5, 0.0), (5, 50, 0.1, 0.0), (20, 60, 0.01, 0.2)])
def test_warmup_then_cosine_decay_is_sequential_cosine_annealing(warmup, total, start_factor, min_factor):
    def make(opt):
        return SequentialLR(opt, [LinearLR(opt, start_factor, 1.0, total_iters=warmup),
                                  CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_factor * BASE_LR)],
                            milestones=[warmup])

    expected = torch_factors(make, total + 1)
    ours = [warmup_then_decay(t, warmup, total, start_factor, "cosine", min_factor) for t in range(total + 1)]
    assert ours == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_a_schedule_is_a_lambdalr_lr_lambda():
    schedule = partial(warmup_then_decay, warmup=4, total=40)
    expected = torch_factors(lambda opt: LambdaLR(opt, schedule), 40)
    assert expected == pytest.approx([schedule(t) for t in range(40)], rel=1e-15)


def test_shapes_by_hand():
    assert step_decay(29, 30) == 1.0 and step_decay(30, 30) == pytest.approx(0.1)
    assert cosine(50, 100) == pytest.approx(0.5) and cosine(25, 100) == pytest.approx((1 + math.sqrt(0.5)) / 2)
    assert [warmup_then_decay(t, 4, 8, 0.2, "linear") for t in range(10)] == pytest.approx(
        [0.2, 0.4, 0.6, 0.8, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0])


@pytest.mark.parametrize("call, error, message", [
    (lambda: step_decay(-1, 5), TypeError, r"(?s)parameter 't'.*Actual value: -1.*is_at_least_0"),
    (lambda: step_decay(1.0, 5), TypeError, r"(?s)parameter 't'.*Actual value: 1\.0.*Integral"),
    (lambda: step_decay(1, 0), TypeError, r"(?s)parameter 'step_size'.*Actual value: 0.*is_at_least_1"),
    (lambda: step_decay(1, 5, 1.5), TypeError, r"(?s)parameter 'gamma'.*Actual value: 1\.5.*is_a_fraction"),
    (lambda: cosine(3, 0), TypeError, r"(?s)parameter 'total'.*Actual value: 0.*is_at_least_1"),
    (lambda: cosine(3, 10, math.nan), TypeError, r"(?s)parameter 'min_factor'.*Actual value: nan.*is_a_fraction"),
    (lambda: warmup_then_decay(3, 10, 10), ValueError, r"total must be an int >= 11 \(warmup \+ 1\); found 10"),
    (lambda: warmup_then_decay(3, 2, 10, start_factor=0.0), ValueError, "start_factor must be > 0"),
    (lambda: warmup_then_decay(3, 2, 10, decay="step"), TypeError,
     r"(?s)parameter 'decay'.*Actual value: 'step'.*Literal\['linear'"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()

