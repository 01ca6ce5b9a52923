"""Fair, reproducible verdicts: the classic mistakes fail on every seed, right answers computed in
float32 pass on every seed (the dtype policy of lib.checks.core.tolerance_for)."""
import math

import pytest
import torch

from lib.checks import CHECKS, CheckFailed
from lib.checks.core import _outcome, tolerance_for

SEEDS = range(100)


def verdicts(check_name, answer, seeds=SEEDS):
    """For each seed, the CheckFailed message (or "" for a pass) of ``answer``."""
    check = CHECKS[check_name]
    found = []
    for seed in seeds:
        cases = check.make_cases(torch.Generator().manual_seed(seed))
        try:
            check.judge(cases, [_outcome(answer, args) for args in cases])
            found.append("")
        except CheckFailed as failure:
            found.append(str(failure))
    return found


def ce_without_max_shift(logits, targets):
    probs = logits.exp() / logits.exp().sum(dim=1, keepdim=True)
    return -probs[torch.arange(len(targets)), targets].log().mean()


def ce_float32(logits, targets):
    logits = logits.float()
    return -torch.log_softmax(logits, -1)[torch.arange(len(targets)), targets].mean()


def softmax_without_mask(scores, valid_lens):
    return torch.softmax(scores, -1)


def softmax_nan_on_empty_rows(scores, valid_lens):
    return torch.softmax(scores.masked_fill(torch.arange(scores.shape[-1]) >= valid_lens[:, None, None], -math.inf), -1)


def softmax_float32(scores, valid_lens):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    weights = torch.softmax(scores.float().masked_fill(~keep, -math.inf), -1)
    return torch.nan_to_num(weights, nan=0.0)


def rnn_float32(x, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    x, h, weight_ih, weight_hh, bias_ih, bias_hh = (t.float() for t in (x, h0, weight_ih, weight_hh, bias_ih, bias_hh))
    outputs = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh)
        outputs.append(h)
    return torch.stack(outputs, dim=1)


@pytest.mark.parametrize(("check_name", "mistake", "message"), [
    ("check_cross_entropy", ce_without_max_shift, "subtract each row's maximum"),
    ("check_masked_softmax", softmax_without_mask, "weights at key positions"),
    ("check_masked_softmax", softmax_nan_on_empty_rows, "contain NaN"),
])
def test_a_classic_mistake_fails_on_every_seed(check_name, mistake, message):
    found = verdicts(check_name, mistake)
    passed = [seed for seed, text in zip(SEEDS, found) if not text]
    assert passed == [], f"{mistake.__name__} passed with seeds {passed}"
    assert all(message in text for text in found)


@pytest.mark.parametrize(("check_name", "answer", "seeds"), [
    ("check_rnn_forward", rnn_float32, SEEDS),  # failed 27 seeds of 300 before the dtype policy
    ("check_cross_entropy", ce_float32, range(20)),
    ("check_masked_softmax", softmax_float32, range(20)),
])
def test_a_right_answer_in_float32_passes_on_every_seed(check_name, answer, seeds):
    failed = {seed: text for seed, text in zip(seeds, verdicts(check_name, answer, seeds)) if text}
    assert failed == {}, f"{answer.__name__} failed: {failed}"


def test_the_tolerance_follows_the_results_dtype():
    strict = dict(atol=1e-8, rtol=1e-10)
    assert tolerance_for(torch.zeros(1, dtype=torch.float64), strict) == strict
    assert tolerance_for(torch.zeros(1), strict) == dict(atol=1e-4, rtol=1e-4)
    assert tolerance_for(torch.zeros(1, dtype=torch.int64), strict) == strict
    with pytest.raises(TypeError, match="found must be a torch.Tensor"):
        tolerance_for([0.0], strict)


def test_the_same_seed_draws_the_same_cases():
    for check in CHECKS.values():
        first, again = (check.make_cases(torch.Generator().manual_seed(7)) for _ in range(2))
        assert repr(first) == repr(again)
