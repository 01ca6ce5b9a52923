"""The exercise checkers: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from lib.checks import CHECKS, Check, CheckFailed, check_masked_softmax, check_scaled_dot_product_attention
from lib.checks.core import Slip, compare_tensors


def test_the_table_of_checkers_is_what_each_module_defines():
    """lib.checks imports a checker's module only when the checker is asked for, from a written-out
    table: it must name every Check each module defines, in the module that defines it."""
    import importlib

    import lib.checks

    for module, names in lib.checks.CHECKERS_BY_MODULE.items():
        defined = {name for name, value in vars(importlib.import_module(f"lib.checks.{module}")).items()
                   if name.startswith("check_") and isinstance(value, Check)}
        assert set(names) == defined, module
    assert set(CHECKS) == {name for names in lib.checks.CHECKERS_BY_MODULE.values() for name in names}


def test_one_checker_imports_only_its_own_module():
    import subprocess
    import sys

    code = ("import sys\nfrom lib.checks import check_expand_and_prune\n"
            "print(sorted(m for m in sys.modules if m.startswith('lib.checks.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['lib.checks.core', 'lib.checks.decoding']"


def test_every_check_is_registered_under_its_name():
    assert CHECKS["check_masked_softmax"] is check_masked_softmax
    assert CHECKS["check_scaled_dot_product_attention"] is check_scaled_dot_product_attention
    assert all(name.startswith("check_") and isinstance(check, Check) for name, check in CHECKS.items())
    import lib.checks

    assert all(getattr(lib.checks, name) is check for name, check in CHECKS.items())


# ---- masked softmax -----------------------------------------------------------------------
def masked_softmax_vectorised(scores, valid_lens):
    keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]  # (B, 1, K) against (B, Q, K)
    weights = torch.softmax(scores.masked_fill(~keep, -math.inf), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def masked_softmax_loops(scores, valid_lens):
    out = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        n = int(valid_lens[b])
        for q in range(scores.shape[1]):
            if n:
                row = [math.exp(float(s)) for s in scores[b, q, :n]]
                for k, e in enumerate(row):
                    out[b, q, k] = e / sum(row)
    return out


@pytest.mark.parametrize("answer", [masked_softmax_vectorised, masked_softmax_loops])
def test_masked_softmax_accepts_right_answers_written_differently(answer, capsys):
    check_masked_softmax(answer)
    assert capsys.readouterr().out == (
        "✓ masked softmax agrees with lib.attention.masked_softmax on 20 fresh random cases\n"
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda s, v: torch.softmax(s, -1), "weights at key positions >= "),
        (lambda s, v: torch.softmax(s.masked_fill(torch.arange(s.shape[-1]) >= v[:, None, None], -math.inf), -1),
         "contain NaN"),
        (lambda s, v: masked_softmax_vectorised(s, v) * 0.9, "sum to 0.9000; expected 1"),
        (lambda s, v: masked_softmax_vectorised(s / 2, v), "not the softmax of the scores"),
        (lambda s, v: masked_softmax_vectorised(s, v)[0], "your weights have shape"),
        (lambda s, v: masked_softmax_vectorised(s, v).numpy(), "must return a torch.Tensor; it returned ndarray"),
        (lambda s, v: 1 / 0, "raised ZeroDivisionError: division by zero"),
    ],
)
def test_masked_softmax_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_masked_softmax(answer)


def test_a_stub_is_told_to_write_its_body():
    def stub(scores, valid_lens):
        raise NotImplementedError("hint")

    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_masked_softmax(stub)
    with pytest.raises(CheckFailed, match="expected a function; found int"):
        check_masked_softmax(3)


# ---- scaled dot-product attention ---------------------------------------------------------
def sdpa_matmul(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def sdpa_einsum(q, k, v):
    scores = torch.einsum("...td,...sd->...ts", q, k) / q.shape[-1] ** 0.5
    return torch.einsum("...ts,...sv->...tv", scores.softmax(-1), v)


@pytest.mark.parametrize("answer", [sdpa_matmul, sdpa_einsum])
def test_sdpa_accepts_right_answers_written_differently(answer, capsys):
    check_scaled_dot_product_attention(answer)
    assert capsys.readouterr().out.startswith("✓ softmax(q kᵀ / √d) v agrees")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), -1) @ v, "did not divide the scores by √d"),
        (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1], -1) @ v, "divided the scores by d"),
        (lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, -2) @ v,
         "softmax runs over the queries"),
        (lambda q, k, v: torch.softmax(q @ k / q.shape[-1] ** 0.5, -1) @ v, "q @ k does not fit"),
        (lambda q, k, v: sdpa_matmul(q, k, v) + 0.01, "differs from softmax"),
    ],
)
def test_sdpa_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_scaled_dot_product_attention(answer)


def test_judging_is_separate_from_running_the_student_code():
    # What the grader does: cases drawn and judged here, outputs produced elsewhere.
    check = CHECKS["check_masked_softmax"]
    cases = check.make_cases(torch.Generator().manual_seed(0))
    check.judge(cases, [masked_softmax_loops(*args) for args in cases])
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
    from lib.checks import check_masked_softmax

    def masked_softmax_in_place(scores, valid_lens):
        keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
        return torch.softmax(scores.masked_fill_(~keep, -1e30), -1) * keep

    def masked_softmax(scores, valid_lens):
        keep = torch.arange(scores.shape[-1]) < valid_lens[:, None, None]
        return torch.softmax(scores.masked_fill(~keep, -1e30), -1) * keep

    check_masked_softmax(masked_softmax)
    with pytest.raises(CheckFailed, match="changed its argument 1 in place for .*leave the inputs"):
        check_masked_softmax(masked_softmax_in_place)
