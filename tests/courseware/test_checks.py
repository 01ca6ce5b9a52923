"""The exercise checkers: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from courseware.checks import CHECKS, Check, CheckFailed, check_attention_backward, check_masked_softmax_backward
from courseware.checks.core import Slip, compare_tensors


def test_the_table_of_checkers_is_what_each_module_defines():
    """courseware.checks imports a checker's module only when the checker is asked for, from a written-out
    table: it must name every Check each module defines, in the module that defines it."""
    import importlib

    import courseware.checks

    for module, names in courseware.checks.CHECKERS_BY_MODULE.items():
        defined = {name for name, value in vars(importlib.import_module(f"courseware.checks.{module}")).items()
                   if name.startswith("check_") and isinstance(value, Check)}
        assert set(names) == defined, module
    assert set(CHECKS) == {name for names in courseware.checks.CHECKERS_BY_MODULE.values() for name in names}


def test_one_checker_imports_only_its_own_module():
    import subprocess
    import sys

    code = ("import sys\nfrom courseware.checks import check_nucleus_distribution\n"
            "print(sorted(m for m in sys.modules if m.startswith('courseware.checks.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['courseware.checks.core', 'courseware.checks.decoding']"


def test_every_check_is_registered_under_its_name():
    assert CHECKS["check_masked_softmax_backward"] is check_masked_softmax_backward
    assert CHECKS["check_attention_backward"] is check_attention_backward
    assert all(name.startswith("check_") and isinstance(check, Check) for name, check in CHECKS.items())
    import courseware.checks

    assert all(getattr(courseware.checks, name) is check for name, check in CHECKS.items())


# ---- the backward pass of the masked softmax ----------------------------------------------
def softmax_backward_vectorised(scores, valid_lens, grad_weights):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]  # (B, 1, S) against (B, T, S)
    weights = torch.nan_to_num(torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1), nan=0.0)
    jacobian = torch.diag_embed(weights) - weights[..., :, None] * weights[..., None, :]  # (B, T, S, S)
    return (jacobian @ grad_weights[..., None])[..., 0]


def softmax_backward_loops(scores, valid_lens, grad_weights):
    out = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        n = int(valid_lens[b])
        for t in range(scores.shape[1]):
            if n:
                exps = [math.exp(float(s)) for s in scores[b, t, :n]]
                alpha = [e / sum(exps) for e in exps]
                mean = sum(float(g) * a for g, a in zip(grad_weights[b, t, :n], alpha))
                for i, a in enumerate(alpha):
                    out[b, t, i] = a * (float(grad_weights[b, t, i]) - mean)
    return out


@pytest.mark.parametrize("answer", [softmax_backward_vectorised, softmax_backward_loops])
def test_softmax_backward_accepts_right_answers_written_differently(answer, capsys):
    check_masked_softmax_backward(answer)
    assert capsys.readouterr().out == (
        "✓ your ∂ℓ/∂scores agrees with autograd through\n"
        "  lib.part4_attention.attention.masked_softmax on 20 fresh random cases\n"
    )


def alpha_times_g(scores, valid_lens, grad_weights):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
    return torch.softmax(scores.masked_fill(~keep, -1e30), -1) * keep * grad_weights


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (alpha_times_g, "you returned α ⊙ g"),
        (lambda s, v, g: softmax_backward_vectorised(s, v, g) + 0.01 * (torch.arange(s.shape[-1]) >= v[:, None, None]),
         "gradient at key positions >= "),
        (lambda s, v, g: softmax_backward_vectorised(s, v, g).masked_fill(v[:, None, None] == 0, math.nan),
         "contains NaN"),
        (lambda s, v, g: softmax_backward_vectorised(s, v, g) * 0.9, "differs from autograd's by up to"),
        (lambda s, v, g: softmax_backward_vectorised(s, v, g)[0], "your gradient has shape"),
        (lambda s, v, g: softmax_backward_vectorised(s, v, g).numpy(),
         "must return a torch.Tensor; it returned ndarray"),
        (lambda s, v, g: 1 / 0, "raised ZeroDivisionError: division by zero"),
    ],
)
def test_softmax_backward_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_masked_softmax_backward(answer)


def test_a_stub_is_told_to_write_its_body():
    def stub(scores, valid_lens, grad_weights):
        raise NotImplementedError("hint")

    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_masked_softmax_backward(stub)
    with pytest.raises(CheckFailed, match="expected a function; found int"):
        check_masked_softmax_backward(3)


# ---- the backward pass of scaled dot-product attention -----------------------------------------
def attention_backward_matmul(q, k, v, grad_out):
    scale = 1 / math.sqrt(q.shape[-1])
    weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    grad_weights = grad_out @ v.transpose(-2, -1)
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True)) * scale
    return torch.cat([grad_scores @ k, grad_scores.transpose(-2, -1) @ q, weights.transpose(-2, -1) @ grad_out], -2)


def attention_backward_einsum(q, k, v, grad_out):
    weights = torch.einsum("...td,...sd->...ts", q, k).div(q.shape[-1] ** 0.5).softmax(-1)
    grad_weights = torch.einsum("...td,...sd->...ts", grad_out, v)
    row_sums = torch.einsum("...ts,...ts->...t", grad_weights, weights)[..., None]
    grad_scores = weights * (grad_weights - row_sums) / q.shape[-1] ** 0.5
    return torch.cat([torch.einsum("...ts,...sd->...td", grad_scores, k),
                      torch.einsum("...ts,...td->...sd", grad_scores, q),
                      torch.einsum("...ts,...td->...sd", weights, grad_out)], dim=-2)


@pytest.mark.parametrize("answer", [attention_backward_matmul, attention_backward_einsum])
def test_attention_backward_accepts_right_answers_written_differently(answer, capsys):
    check_attention_backward(answer)
    assert capsys.readouterr().out.startswith("✓ your dq, dk and dv agree with autograd")


def unscaled_backward(q, k, v, grad_out):
    weights = torch.softmax(q @ k.transpose(-2, -1), -1)
    grad_weights = grad_out @ v.transpose(-2, -1)
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))
    return torch.cat([grad_scores @ k, grad_scores.transpose(-2, -1) @ q, weights.transpose(-2, -1) @ grad_out], -2)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (unscaled_backward, "you left out the 1/√d"),
        (lambda q, k, v, g: attention_backward_matmul(q, k, v, g).flip(-2),
         "your dq, dk and dv differ from autograd's"),
        (lambda q, k, v, g: torch.softmax(q @ k / q.shape[-1] ** 0.5, -1) @ v, "Check each product's shapes"),
        (lambda q, k, v, g: attention_backward_matmul(q, k, v, g) + 0.01, "differ from autograd's: by up to"),
    ],
)
def test_attention_backward_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_attention_backward(answer)


def test_judging_is_separate_from_running_the_student_code():
    # What the grader does: cases drawn and judged here, outputs produced elsewhere.
    check = CHECKS["check_masked_softmax_backward"]
    cases = check.make_cases(torch.Generator().manual_seed(0))
    check.judge(cases, [softmax_backward_loops(*args) for args in cases])
    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check.judge(cases, ["NotImplementedError: write it"] * len(cases))
    with pytest.raises(ValueError):  # one result per case, no fewer
        check.judge(cases, [])


# ---- the data-driven core -----------------------------------------------------------------

def test_compare_tensors_gives_the_distance_of_a_match_and_none_otherwise():
    expected = torch.tensor([1.0, 2.0], dtype=torch.float64)
    assert compare_tensors(expected + 1e-9, expected, dict(atol=1e-6, rtol=0.0)) == pytest.approx(1e-9)
    assert compare_tensors(expected + 1e-3, expected, dict(atol=1e-6, rtol=0.0)) is None
    assert compare_tensors(expected[:1], expected, dict(atol=1e-6, rtol=0.0)) is None


def cube_check(slips):
    """An exercise in a few lines: cube x; x = 2 makes x² and 2x coincide, x = 3 tells them apart."""
    return Check("cubes agree", lambda generator: [(torch.tensor([2.0], dtype=torch.float64),),
                                                   (torch.tensor([3.0], dtype=torch.float64),)],
                 lambda x: x**3, describe=lambda x: f"x = {x.item():g}", compared_with="x³", slips=slips,
                 tolerance=dict(atol=0.1, rtol=0.0))


def test_of_the_slips_that_fit_the_failing_case_the_one_that_fits_most_cases_is_named():
    check = cube_check((Slip(lambda x: 2 * x, "you doubled x"), Slip(lambda x: x**2, "you squared x")))
    cases = check.make_cases(None)
    with pytest.raises(CheckFailed, match="for x = 2: you squared x"):
        check.judge(cases, [x**2 for (x,) in cases])
    with pytest.raises(CheckFailed, match="for x = 2: you doubled x"):
        check.judge(cases, [2 * x for (x,) in cases])
    with pytest.raises(CheckFailed, match=r"for x = 2 your result differs from x³ by up to 5 "):
        check.judge(cases, [x + 1 for (x,) in cases])


def test_of_slips_that_fit_every_case_the_closest_is_named():
    check = cube_check((Slip(lambda x: x - 0.05, "a little less"), Slip(lambda x: x + 0.05, "a little more")))
    cases = check.make_cases(None)
    with pytest.raises(CheckFailed, match="a little more"):
        check.judge(cases, [x + 0.04 for (x,) in cases])
    with pytest.raises(CheckFailed, match="a little less"):
        check.judge(cases, [x - 0.04 for (x,) in cases])
    check(lambda x: x**3)


def test_a_function_that_changes_its_input_in_place_fails_every_checker():
    """The check cell passes copies, so without this test a write into an argument went unseen."""
    from courseware.checks import check_masked_softmax_backward

    def backward_into_the_scores(scores, valid_lens, grad_weights):
        keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
        weights = torch.softmax(scores.masked_fill_(~keep, -1e30), -1) * keep
        return weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))

    def backward_into_the_gradient(scores, valid_lens, grad_weights):
        keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
        weights = torch.softmax(scores.masked_fill(~keep, -1e30), -1) * keep
        return weights * grad_weights.sub_((grad_weights * weights).sum(-1, keepdim=True))

    def backward(scores, valid_lens, grad_weights):
        keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
        weights = torch.softmax(scores.masked_fill(~keep, -1e30), -1) * keep
        return weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))

    check_masked_softmax_backward(backward)
    with pytest.raises(CheckFailed, match="changed its argument 1 in place for .*leave the inputs"):
        check_masked_softmax_backward(backward_into_the_scores)
    with pytest.raises(CheckFailed, match="changed its argument 3 in place for .*leave the inputs"):
        check_masked_softmax_backward(backward_into_the_gradient)


def test_an_answer_that_changes_its_list_arguments_is_judged_on_the_case_drawn():
    """The check cell cloned only tensor arguments: an answer that wrote into a list was judged, and
    described, on the changed case (the grader computes its references apart, on the drawn cases)."""
    from courseware.checks import check_rouge_multi
    from courseware.checks.core import _outcome
    from courseware.checks.metrics import rouge_multi

    def copies_the_hypothesis_into_the_references(hypothesis, references, n):
        references.append(list(hypothesis))  # a perfect match: every score 1
        return rouge_multi(hypothesis, references, n)

    def clears_the_references_after_scoring(hypothesis, references, n):
        scores = rouge_multi(hypothesis, references, n)
        references.clear()
        return scores

    cases = check_rouge_multi.make_cases(torch.Generator().manual_seed(0))
    drawn = [check_rouge_multi.describe(*case) for case in cases]
    with pytest.raises(CheckFailed) as failure:
        check_rouge_multi.judge(cases, [_outcome(copies_the_hypothesis_into_the_references, args) for args in cases])
    assert any(f"for {text} " in str(failure.value) for text in drawn), str(failure.value)
    assert [check_rouge_multi.describe(*case) for case in cases] == drawn  # the drawn cases are untouched
    check_rouge_multi.judge(cases, [_outcome(clears_the_references_after_scoring, args) for args in cases])
    check_rouge_multi(clears_the_references_after_scoring)  # a check cell's own fresh draw


def test_a_result_remembered_by_value_is_computed_once_per_distinct_argument_and_handed_out_as_a_copy():
    """courseware.checks.core.by_value: the book's answer to a case is computed once, however often the
    checker and its slips ask for it, and only for arguments holding exactly the same values."""
    from courseware.checks.core import by_value

    calls = []

    @by_value(maxsize=4)
    def doubled(x, scale=2.0):
        calls.append(x)
        return x * scale if isinstance(x, torch.Tensor) else [x, scale]

    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    first = doubled(x)
    first += 100  # the caller's copy: the remembered result is untouched
    assert torch.equal(doubled(x.clone()), 2 * x) and len(calls) == 1  # a copy of the same values
    for other in (x.view(torch.int64), x.T.contiguous().reshape(2, 3), x.T, x + 1e-12, torch.tensor(-0.0), torch.tensor(0.0)):
        doubled(other)  # the same bytes as another dtype, other values, other strides, 0.0 and -0.0 differ
    assert len(calls) == 7
    assert doubled(0.0) == [0.0, 2.0] and doubled(-0.0) == [-0.0, 2.0] and doubled(0) == [0, 2.0]
    assert len(calls) == 10  # floats by their bits, ints apart from floats
    doubled(x, 3.0)
    doubled(x, scale=2.0)  # a keyword argument is not remembered
    doubled(x.clone().requires_grad_())  # nor a tensor that records its graph
    assert len(calls) == 13
    remembered = len(calls)
    assert doubled(0) == [0, 2.0] and doubled(x, 3.0).equal(3 * x)  # among the 4 most recent: remembered
    assert len(calls) == remembered
    doubled(torch.tensor(0.0))  # evicted by the 4 since
    assert len(calls) == remembered + 1


def test_solve_increasing_stops_once_a_halving_leaves_the_bracket_and_answers_as_all_its_halvings_would():
    from courseware.checks.core import solve_increasing

    def every_halving(function, target, iterations=100):  # the search before it stopped early
        low, high = 1.0, 1.0
        while function(low) > target:
            low /= 2
        while function(high) < target:
            high *= 2
        for _ in range(iterations):
            middle = (low + high) / 2
            low, high = (middle, high) if function(middle) < target else (low, middle)
        return (low + high) / 2

    for function, target in ((lambda x: x * x, 2.0), (lambda x: x**3, 1e-6), (math.exp, 1e5),
                             (lambda x: math.floor(4 * x) / 4, 2.6), (lambda x: 1 - 1 / (1 + x), 0.999)):
        calls = []

        def counted(x):
            calls.append(x)
            return function(x)

        assert solve_increasing(counted, target) == every_halving(function, target)
        assert len(calls) < 80
        assert solve_increasing(function, target, iterations=10) == every_halving(function, target, 10)


def test_a_measured_checker_measures_a_failing_result_once():
    """Measured.judge hands the rule it measured to the explanation, which measured it again before."""
    from courseware.checks.core import Measured

    measured = []

    def too_small(found, expected, x):
        measured.append(float(found))
        return f"{float(found):g} is below {float(expected):g}" if found < expected else None

    check = Measured("at least x", lambda generator: [(torch.tensor(1.0),), (torch.tensor(2.0),)], lambda x: x,
                     describe=lambda x: f"x = {x.item():g}", compared_with="x", rules=too_small)
    with pytest.raises(CheckFailed, match=r"^for x = 2: 1.5 is below 2$"):
        check.judge(check.make_cases(None), [torch.tensor(1.0), torch.tensor(1.5)])
    assert measured == [1.0, 1.5]


def test_drawn_cases_are_fresh_copies_as_deepcopy_makes_them():
    """tests/courseware/case_cache.py clones the tensors of a draw where a clone is what deepcopy makes:
    same dtype, shape, strides and bytes, the same tensor twice still one copy, nothing shared with the
    draw it keeps. Two views of one storage (check_best_output_log_prob's cases) are left to deepcopy."""
    import copy

    import case_cache

    def layout(value, seen):  # seen: which tensor and which storage each is, by order of appearance
        if isinstance(value, torch.Tensor):
            tensor = seen.setdefault(id(value), len(seen))
            storage = seen.setdefault(("storage", value.untyped_storage().data_ptr()), len(seen))
            return (tensor, storage, value.dtype, tuple(value.shape), value.stride(),
                    value.reshape(-1).view(torch.uint8).tolist())
        if isinstance(value, (tuple, list)):
            return type(value), [layout(item, seen) for item in value]
        return type(value), value

    twice = torch.arange(4.0)
    planted = [(twice, twice, [twice, 3]), (torch.ones(2, 3), "x")]
    assert case_cache._clonable(planted)
    views = torch.arange(6.0)
    assert not case_cache._clonable([(views, views[2:])]) and not case_cache._clonable([(views.reshape(2, 3).T,)])
    for name in ("check_gru_jacobian", "check_rouge_multi", "check_best_output_log_prob"):  # rouge: lists only
        cases, clonable = case_cache._drawn(name, 3)
        assert clonable == (name != "check_best_output_log_prob")
        fresh = case_cache.drawn_cases(name, 3)
        assert layout(fresh, {}) == layout(copy.deepcopy(cases), {})
        kept = {id(t) for t in case_cache._tensors(cases, [])}
        assert not any(id(t) in kept for t in case_cache._tensors(fresh, []))
        for tensor in case_cache._tensors(fresh, []):  # changing a copy changes no later copy
            tensor.add_(1)
        fresh[0] = None
        assert layout(case_cache.drawn_cases(name, 3), {}) == layout(cases, {})
