"""Fair, reproducible verdicts: the classic mistakes fail on every seed, right answers computed in
float32 pass on every seed (the dtype policy of courseware.checks.core.tolerance_for)."""
import math

import pytest
import torch

from courseware.checks import CHECKS, CheckFailed
from courseware.checks.core import _outcome, tolerance_for
from case_cache import drawn_cases
from test_checks_attention import (
    attention_backward_float32, attention_backward_unscaled, softmax_backward_float32,
    softmax_backward_nan_on_empty_rows, softmax_backward_of_the_whole_row,
)
from test_checks_decoding import greedy_decoding, viterbi_in_float32
from test_checks_gating import lstmp_by_slices_float32
from test_checks_metrics import chrf_mean_of_sentences
from test_checks_transformer import decode_float32, padded_step_float32
from test_checks_word2vec import (
    pairs_closed_form_float32, pairs_without_ends, sgns_optimum_float32, sgns_pmi_without_shift,
)

SEEDS = range(100)


def verdicts(check_name, answer, seeds=SEEDS):
    """For each seed, the CheckFailed message (or "" for a pass) of ``answer``."""
    check = CHECKS[check_name]
    found = []
    for seed in seeds:
        cases = drawn_cases(check_name, seed)  # a fresh copy: no answer sees another's leftovers
        try:
            check.judge(cases, [_outcome(answer, args) for args in cases])
            found.append("")
        except CheckFailed as failure:
            found.append(str(failure))
    return found


def ce_grad_without_max_shift(logits, targets):
    probs = logits.exp() / logits.exp().sum(dim=1, keepdim=True)
    return (probs - torch.eye(logits.shape[1], dtype=logits.dtype)[targets]) / len(targets)


def ce_grad_float32(logits, targets):
    logits = logits.float()
    return (torch.softmax(logits, -1) - torch.eye(logits.shape[1])[targets]) / len(targets)


def rnn_last_state_float32(x, lengths, h0, weight_ih, weight_hh, bias_ih, bias_hh):
    x, h, weight_ih, weight_hh, bias_ih, bias_hh = (t.float() for t in (x, h0, weight_ih, weight_hh, bias_ih, bias_hh))
    for t in range(x.shape[1]):
        h_next = torch.tanh(x[:, t] @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh)
        h = torch.where((t < lengths)[:, None], h_next, h)
    return h


@pytest.mark.parametrize(("check_name", "mistake", "message"), [
    ("check_cross_entropy_grad", ce_grad_without_max_shift, "subtract each row's maximum"),
    ("check_masked_softmax_backward", softmax_backward_of_the_whole_row, "the softmax of the whole row"),
    ("check_masked_softmax_backward", softmax_backward_nan_on_empty_rows, "contains NaN"),
    ("check_attention_backward", attention_backward_unscaled, "you left out the 1/√d"),
    ("check_sgns_optimum", sgns_pmi_without_shift, "you left the shift out"),
    ("check_expected_pairs", pairs_without_ends, "a window never crosses the ends of its sentence"),
    ("check_most_probable_sequence", greedy_decoding, "(greedy search)"),
    ("check_chrf", chrf_mean_of_sentences, "you averaged the sentences' chrF"),
])
def test_a_classic_mistake_fails_on_every_seed(check_name, mistake, message):
    found = verdicts(check_name, mistake)
    passed = [seed for seed, text in zip(SEEDS, found) if not text]
    assert passed == [], f"{mistake.__name__} passed with seeds {passed}"
    assert all(message in text for text in found)


@pytest.mark.parametrize(("check_name", "answer", "seeds"), [
    ("check_rnn_last_state", rnn_last_state_float32, SEEDS),
    ("check_lstmp_layer", lstmp_by_slices_float32, SEEDS),
    ("check_cross_entropy_grad", ce_grad_float32, range(20)),
    ("check_masked_softmax_backward", softmax_backward_float32, range(20)),
    ("check_attention_backward", attention_backward_float32, range(20)),
    ("check_position_decoding", decode_float32, SEEDS),
    ("check_padded_cached_step", padded_step_float32, SEEDS),
    ("check_sgns_optimum", sgns_optimum_float32, SEEDS),
    ("check_expected_pairs", pairs_closed_form_float32, SEEDS),
    ("check_most_probable_sequence", viterbi_in_float32, SEEDS),
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
