"""The checkers of chapter 12: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import math

import pytest
import torch

from courseware.checks import (
    CHECKS, CheckFailed, check_hopfield_capacity, check_modern_update, check_multi_head_write, check_projection_weights,
)
from courseware.checks.memory import modern_update_cases, multi_write_cases, multi_write_closed_form, multi_write_head_by_head


def test_the_checks_are_registered():
    assert CHECKS["check_multi_head_write"] is check_multi_head_write
    assert CHECKS["check_projection_weights"] is check_projection_weights


# ---- the NTM write with several heads ----------------------------------------------------
def multi_write_loops(memory, weights, erase, add):
    """Slot by slot and entry by entry in Python floats: the product of the heads' erase factors, then
    the sum of their adds."""
    batch, heads, slots = weights.shape
    memory_, weights_, erase_, add_ = (t.tolist() for t in (memory, weights, erase, add))  # Python floats
    out = [[[0.0] * memory.shape[2] for _ in range(slots)] for _ in range(batch)]
    for b in range(batch):
        for i in range(slots):
            for d in range(memory.shape[2]):
                keep = 1.0
                for r in range(heads):
                    keep *= 1 - weights_[b][r][i] * erase_[b][r][d]
                gain = sum(weights_[b][r][i] * add_[b][r][d] for r in range(heads))
                out[b][i][d] = memory_[b][i][d] * keep + gain
    return torch.tensor(out, dtype=memory.dtype).reshape(memory.shape)


def multi_write_two_passes_float32(memory, weights, erase, add):
    """The paper's words, in float32: erase with every head (last head first: the order is free), then
    add with every head."""
    memory, weights, erase, add = (t.float() for t in (memory, weights, erase, add))
    for r in reversed(range(weights.shape[1])):
        memory = memory * (1 - weights[:, r, :, None] * erase[:, r, None, :])
    for r in range(weights.shape[1]):
        memory = memory + weights[:, r, :, None] * add[:, r, None, :]
    return memory


def multi_write_einsum(memory, weights, erase, add):
    keep = torch.exp(torch.log1p(-torch.einsum("brn,brd->brnd", weights, erase)).sum(1))  # Π_r (1 - w_r e_r)
    return memory * keep + torch.einsum("brn,brd->bnd", weights, add)


def test_the_closed_form_is_the_heads_erasing_then_adding_in_any_order():
    for memory, weights, erase, add in multi_write_cases(torch.Generator().manual_seed(4)):
        expected = multi_write_closed_form(memory, weights, erase, add)
        torch.testing.assert_close(multi_write_head_by_head(memory, weights, erase, add), expected,
                                   atol=1e-12, rtol=0)
        order = torch.randperm(weights.shape[1], generator=torch.Generator().manual_seed(5))
        torch.testing.assert_close(multi_write_head_by_head(memory, weights[:, order], erase[:, order],
                                                            add[:, order]), expected, atol=1e-12, rtol=0)


def test_in_the_first_case_two_heads_replace_one_slot_by_the_sum_of_their_adds():
    """Both heads put all their weight on one slot with e = 1: the slot is cleared, then holds a_0 + a_1;
    written head by head it would hold a_1 alone."""
    memory, weights, erase, add = multi_write_cases(torch.Generator().manual_seed(6))[0]
    two = (memory, weights[:, :2], erase[:, :2], add[:, :2])
    slot = weights[:, 0].argmax(-1)
    written = multi_write_head_by_head(*two)[torch.arange(len(slot)), slot]
    torch.testing.assert_close(written, add[:, 0] + add[:, 1], atol=1e-12, rtol=0)
    assert torch.equal(weights[:, 0], weights[:, 1]) and (erase[:, :2] == 1).all()


@pytest.mark.parametrize("answer", [multi_write_loops, multi_write_two_passes_float32, multi_write_einsum])
def test_multi_head_write_accepts_right_answers_written_differently(answer, capsys):
    check_multi_head_write(answer)
    assert capsys.readouterr().out.startswith("✓ your multi-head write agrees with Graves et al.'s on 20")


def interleaved_heads(memory, weights, erase, add):
    """One whole NTM write per head, in turn: erase 1, add 1, erase 2, add 2, ..."""
    for r in range(weights.shape[1]):
        w = weights[:, r, :, None]
        memory = memory * (1 - w * erase[:, r, None, :]) + w * add[:, r, None, :]
    return memory


def summed_erase(memory, weights, erase, add):
    w = weights[..., None]
    return memory * (1 - (w * erase[:, :, None]).sum(1)) + (w * add[:, :, None]).sum(1)


def averaged_adds(memory, weights, erase, add):
    keep = torch.ones_like(memory)
    for r in range(weights.shape[1]):
        keep = keep * (1 - weights[:, r, :, None] * erase[:, r, None, :])
    return memory * keep + torch.einsum("brn,brd->bnd", weights, add) / weights.shape[1]


def first_head_only(memory, weights, erase, add):
    w = weights[:, 0, :, None]
    return memory * (1 - w * erase[:, 0, None, :]) + w * add[:, 0, None, :]


def adds_before_erasures(memory, weights, erase, add):
    return multi_write_einsum(memory + torch.einsum("brn,brd->bnd", weights, add), weights, erase,
                              torch.zeros_like(add))


def multi_write_in_place(memory, weights, erase, add):
    """The right values, but written into ``memory``: the statement says the inputs must not change."""
    for r in range(weights.shape[1]):
        memory.mul_(1 - weights[:, r, :, None] * erase[:, r, None, :])
    memory.add_(torch.einsum("brn,brd->bnd", weights, add))
    return memory


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (interleaved_heads, r"you wrote head by head, each erasing and then adding: .*the memory depends on the "
                            r"order of the heads, against Graves et al.'s claims$"),
        (lambda m, w, e, a: interleaved_heads(m, w.flip(1), e.flip(1), a.flip(1)),
         r"you wrote head by head.*against Graves et al.'s claims$"),
        (summed_erase, r"multiply the heads' erase factors"),
        (lambda m, w, e, a: multi_write_closed_form(m, w, e, a, combine_erase="mean"), "do not average them"),
        (averaged_adds, "sum the adds, do not average them"),
        (first_head_only, "the first head only"),
        (lambda m, w, e, a: first_head_only(m, w.flip(1), e.flip(1), a.flip(1)), "the last head only"),
        (adds_before_erasures, r'you added before erasing, against Graves et al., who add each add vector '
                               r'"after the erase step has been performed"$'),
        (lambda m, w, e, a: torch.stack([first_head_only(m, w[:, r:], e[:, r:], a[:, r:])
                                         for r in range(w.shape[1])]).mean(0), "you averaged one whole write"),
        (lambda m, w, e, a: multi_write_einsum(m, w, e, a) + 1, "differs from the paper's write by up to"),
        (lambda m, w, e, a: m[:, None] * (1 - w[..., None] * e[:, :, None]) + w[..., None] * a[:, :, None],
         r"has shape \(\d, \d, \d, \d\); expected \(B, N, D\) = .*combine the heads"),
        (lambda m, w, e, a: m * (1 - w * e) + w * a, "your function raised RuntimeError"),
        (lambda m, w, e, a: multi_write_einsum(m, w, e, a).tolist(), "must return a torch.Tensor; it returned list"),
        (multi_write_in_place, "changed its argument 1 in place"),
    ],
)
def test_multi_head_write_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_multi_head_write(answer)


# ---- the projection rule ----------------------------------------------------------------
def projection_solve(patterns):
    """W = Ξᵀ (ΞΞᵀ)⁻¹ Ξ through a linear solve, the diagonal zeroed by a mask."""
    weights = patterns.T @ torch.linalg.solve(patterns @ patterns.T, patterns)
    return weights * (1 - torch.eye(patterns.shape[1], dtype=patterns.dtype))


def projection_gram_schmidt(patterns):
    """Another formulation, in loops: an orthonormal basis u_1..u_P of the patterns' span by Gram–Schmidt,
    then W_ij = Σ_k u_ki u_kj for i != j (the projection onto the span), in float64."""
    basis = []
    for pattern in patterns.tolist():
        vector = list(pattern)
        for u in basis:
            dot = sum(a * b for a, b in zip(vector, u))
            vector = [a - dot * b for a, b in zip(vector, u)]
        norm = sum(a * a for a in vector) ** 0.5
        basis.append([a / norm for a in vector])
    n_units = patterns.shape[1]
    weights = torch.zeros(n_units, n_units, dtype=torch.float64)
    for i in range(n_units):
        for j in range(n_units):
            if i != j:
                weights[i, j] = sum(u[i] * u[j] for u in basis)
    return weights


def projection_qr(patterns):
    """C = Q Qᵀ with Q an orthonormal basis of the span from a QR factorisation of Ξᵀ."""
    q, _ = torch.linalg.qr(patterns.T)  # (N, P)
    weights = q @ q.T
    return weights - torch.diag(torch.diag(weights))


def projection_float32_pinv(patterns):
    """Ξ⁺Ξ with torch's pseudo-inverse, in float32."""
    patterns = patterns.float()
    weights = torch.linalg.pinv(patterns) @ patterns
    return weights.fill_diagonal_(0.0)


def projection_last_diagonal_kept(patterns):
    """An off-by-one: W_ii zeroed only for i < N - 1, so the last unit keeps its self-coupling C_ii."""
    weights = torch.linalg.pinv(patterns) @ patterns
    for i in range(patterns.shape[1] - 1):
        weights[i, i] = 0.0
    return weights


def projection_hebbian(patterns):
    weights = patterns.T @ patterns / patterns.shape[1]
    return weights.fill_diagonal_(0.0)


def projection_kept_diagonal(patterns):
    return torch.linalg.pinv(patterns) @ patterns


def projection_minus_identity(patterns):
    return torch.linalg.pinv(patterns) @ patterns - torch.eye(patterns.shape[1], dtype=patterns.dtype)


def projection_hebbian_without_the_1_over_n(patterns):
    """ΞᵀΞ with a zero diagonal: the inverse of the overlaps left out, and no 1/N either."""
    weights = patterns.T @ patterns
    return weights.fill_diagonal_(0.0)


def projection_without_inverse(patterns):
    weights = patterns.T @ (patterns @ patterns.T) @ patterns
    return weights.fill_diagonal_(0.0)


def projection_entrywise_reciprocal(patterns):
    weights = patterns.T @ (1 / (patterns @ patterns.T)) @ patterns
    return weights.fill_diagonal_(0.0)


def projection_divided_by_n(patterns):
    return projection_solve(patterns) / patterns.shape[1]


def projection_overlaps_without_the_1_over_n(patterns):
    """With the overlaps Q = ΞΞᵀ/N, but the outer 1/N forgotten: Ξᵀ Q⁻¹ Ξ = N C."""
    overlaps = patterns @ patterns.T / patterns.shape[1]
    weights = patterns.T @ torch.linalg.inv(overlaps) @ patterns
    return weights.fill_diagonal_(0.0)


def projection_pattern_space(patterns):
    """Ξ Ξ⁺: the projection written in the patterns' space, (P, P)."""
    return patterns @ torch.linalg.pinv(patterns)


PROJECTION_WRONG = [
    (projection_hebbian, "those are the Hebbian weights"),
    (projection_hebbian_without_the_1_over_n, r"ΞᵀΞ with a zero diagonal.*you left out \(ΞΞᵀ\)⁻¹"),
    (projection_kept_diagonal, "you kept the projection's diagonal"),
    (projection_minus_identity, "you subtracted the identity"),
    (projection_last_diagonal_kept, "your diagonal is not 0: W_ii = .* at i = "),
    (projection_without_inverse, r"you multiplied by ΞΞᵀ.*matrix inverse"),
    (projection_entrywise_reciprocal, "you took 1/x entry by entry"),
    (projection_divided_by_n, "you divided by N as the Hebbian rule does"),
    (projection_overlaps_without_the_1_over_n, "your weights are N times too large"),
    (projection_pattern_space, r"that is \(P, P\), one entry per pair of patterns"),
]


@pytest.mark.parametrize("answer", [projection_solve, projection_gram_schmidt, projection_qr, projection_float32_pinv])
def test_projection_accepts_right_answers_written_differently(answer, capsys):
    check_projection_weights(answer)
    assert capsys.readouterr().out.startswith("✓ the projection-rule weights agree with Ξᵀ(ΞΞᵀ)⁻¹Ξ")


@pytest.mark.parametrize(("answer", "message"), PROJECTION_WRONG + [
    (lambda p: projection_solve(p) * 0.5, r"differ from Ξᵀ\(ΞΞᵀ\)⁻¹Ξ with a zero diagonal by up to"),
    (lambda p: projection_solve(p).tolist(), "must return a torch.Tensor; it returned list"),
])
def test_projection_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_projection_weights(answer)


def test_a_nonzero_diagonal_is_shown_where_it_is_largest():
    """The message names the largest |W_ii| and its index, not W_00 (which an off-by-one leaves at 0)."""
    from courseware.checks.memory import _nonzero_diagonal
    patterns = torch.tensor([[1.0, -1, 1, 1], [1, 1, -1, 1]], dtype=torch.float64)  # orthogonal: C_ii = P/N = 0.5
    message = _nonzero_diagonal(projection_last_diagonal_kept(patterns), None, patterns)
    assert message.startswith("your diagonal is not 0: W_ii = 0.5 at i = 3, its largest |W_ii|"), message
    assert _nonzero_diagonal(projection_solve(patterns), None, patterns) is None


def test_a_stub_is_told_to_write_its_body():
    def stub(patterns):
        raise NotImplementedError("hint")

    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_projection_weights(stub)


def test_projection_cases_are_independent_well_conditioned_and_never_orthogonal():
    from courseware.checks.memory import MAX_CONDITION, projection_cases
    for seed in range(5):
        for (patterns,) in projection_cases(torch.Generator().manual_seed(seed)):
            n_patterns, n_units = patterns.shape
            assert 2 <= n_patterns <= 5 and n_patterns + 2 <= n_units and n_units % 2 == 1
            gram = patterns @ patterns.T
            assert torch.linalg.matrix_rank(patterns) == n_patterns and torch.linalg.cond(gram) <= MAX_CONDITION
            assert (gram != 0).all()  # odd N: every overlap is odd


def test_projection_weights_is_the_projection_onto_the_patterns_without_its_diagonal():
    """The checker's reference (torch's pseudo-inverse) against the statement's formula, and the
    projection's defining properties: C symmetric, C² = C, C ξ_μ = ξ_μ, trace C = P."""
    from courseware.checks.memory import projection_cases, projection_weights, projector
    for (patterns,) in projection_cases(torch.Generator().manual_seed(0)):
        gram = patterns @ patterns.T
        formula = patterns.T @ torch.linalg.inv(gram) @ patterns
        torch.testing.assert_close(projector(patterns), formula, atol=1e-12, rtol=0)
        torch.testing.assert_close(projection_weights(patterns), formula - torch.diag(formula.diagonal()),
                                   atol=1e-12, rtol=0)
        c = projector(patterns)
        torch.testing.assert_close(c, c.T, atol=1e-12, rtol=0)
        torch.testing.assert_close(c @ c, c, atol=1e-12, rtol=0)
        torch.testing.assert_close(patterns @ c, patterns, atol=1e-12, rtol=0)
        assert abs(float(c.trace()) - len(patterns)) < 1e-10


def test_the_solutions_text_every_independent_set_is_stored_up_to_n_minus_1():
    """ex-mem-projection's solution: at a stored pattern ξ_i h_i = 1 - C_ii, between 0 and 1 and on average
    1 - P/N; random ±1 patterns with P = N - 1 are linearly independent here, and every one of them is a
    fixed point of a synchronous update."""
    from courseware.checks.memory import projection_weights, projector
    from lib.part5_memory.hopfield import update_sync
    generator = torch.Generator().manual_seed(3)
    for n_units in (64, 200):
        for _ in range(5):
            patterns = torch.randint(0, 2, (n_units - 1, n_units), generator=generator).double() * 2 - 1
            assert torch.linalg.matrix_rank(patterns) == n_units - 1
            weights, diagonal = projection_weights(patterns), projector(patterns).diagonal()
            margin = patterns * (patterns @ weights)  # (P, N): ξ_i h_i
            torch.testing.assert_close(margin, (1 - diagonal).expand_as(margin), atol=1e-9, rtol=0)
            assert (diagonal > -1e-12).all() and (diagonal < 1 + 1e-12).all()
            assert abs(float(margin.mean()) - 1 / n_units) < 1e-9  # 1 - P/N
            assert torch.equal(update_sync(weights, patterns), patterns)


def test_the_solutions_text_a_unit_in_the_span_is_disconnected_and_needs_a_tie_tolerance():
    """ex-mem-projection's solution: two patterns that differ only at the first unit put e_1 in the span,
    so C_11 = 1 and the first row of W is 0. In floating point that unit's field at a stored pattern is a
    rounding error (of either sign), not 0: with the solution's weights (a linear solve), update_sync,
    whose tolerance scales with the unit's own weights, moves a stored pattern in float64 and in float32;
    a tolerance on the scale of all the weights keeps every pattern, and leaves a flipped first unit
    uncorrected."""
    from courseware.checks.memory import projector
    from lib.part5_memory.hopfield import update_sync

    def solution(patterns):  # the notebook's my_projection
        weights = patterns.T @ torch.linalg.solve(patterns @ patterns.T, patterns)
        return weights - torch.diag(torch.diagonal(weights))

    patterns64 = torch.tensor([[1.0, 1, 1, 1, 1], [-1, 1, 1, 1, 1], [1, -1, 1, -1, 1]], dtype=torch.float64)
    assert abs(float(projector(patterns64)[0, 0]) - 1) < 1e-12
    signs = set()
    for dtype, eps_scale in ((torch.float64, 1e-15), (torch.float32, 1e-6)):
        patterns = patterns64.to(dtype)
        for weights in (solution(patterns), _zero_diagonal_of(torch.linalg.pinv(patterns) @ patterns)):
            assert weights[0].abs().max() < eps_scale and weights[:, 0].abs().max() < eps_scale
            fields = patterns @ weights  # (P, N)
            assert fields[:, 0].abs().max() < eps_scale  # 0 up to rounding
            signs.update(torch.sign(fields[:, 0]).tolist())
            tolerance = 100 * weights.shape[0] * torch.finfo(dtype).eps * weights.abs().max()  # all weights' scale
            kept = torch.where(fields > tolerance, 1.0, torch.where(fields < -tolerance, -1.0, patterns))
            assert torch.equal(kept.to(dtype), patterns)
            cue = patterns.clone()
            cue[:, 0] *= -1  # the first unit wrong, the rest right
            cue_fields = cue @ weights
            assert (cue_fields[:, 0].abs() <= tolerance).all()  # still no field: recall cannot correct it
        assert not torch.equal(update_sync(solution(patterns), patterns), patterns)
    assert {1.0, -1.0} <= signs


def _zero_diagonal_of(weights):
    return weights - torch.diag(torch.diagonal(weights))


def test_the_solutions_text_one_more_pattern_is_a_rank_one_update_of_c():
    """ex-mem-projection's solution: storing ξ changes C by r rᵀ / ‖r‖², r = ξ - C ξ (a Gram–Schmidt step),
    which needs only C (its diagonal included) and ξ."""
    from courseware.checks.memory import projection_cases, projector
    for (patterns,) in projection_cases(torch.Generator().manual_seed(1)):
        before, new = projector(patterns[:-1]), patterns[-1]
        residual = new - before @ new
        torch.testing.assert_close(projector(patterns), before + torch.outer(residual, residual) / residual.dot(residual),
                                   atol=1e-12, rtol=0)


# ---- experiment: how many patterns stay fixed points -----------------------------------------
def capacity_with_update_rule(patterns):
    """The statement read literally: for every p, store the first p patterns (float64, 1/N included)
    and test each with a synchronous update in which a unit whose field is 0 (up to rounding)
    keeps its state; return the largest p that passes."""
    largest = 0
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        weights = stored.T @ stored / patterns.shape[1]
        weights.fill_diagonal_(0.0)
        fields = stored @ weights
        updated = torch.where(fields.abs() < 1e-9, stored, torch.sign(fields))
        if torch.equal(updated, stored):
            largest = count
    return torch.tensor(largest)


def capacity_searching_down(patterns):
    """A search that stops on the named quantity: from p = P down, the first p whose first p
    patterns are all stable, unit by unit (ξ_i h_i >= 0), returned as a float."""
    for count in range(len(patterns), 0, -1):
        stored = patterns[:count]
        weights = stored.T @ stored
        weights -= torch.diag(torch.diag(weights))
        if all(bool((pattern * (weights @ pattern) >= 0).all()) for pattern in stored):
            return torch.tensor(float(count))
    return torch.tensor(0.0)


def capacity_float32_with_the_factor(patterns):
    """The book's Hebbian rule with its 1/N, in float32, compared with 0 exactly: right, because N is a
    power of 2 and every field k/N is exact."""
    patterns = patterns.float()
    largest = 0
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        weights = stored.T @ stored / patterns.shape[1]
        weights.fill_diagonal_(0.0)
        if (stored * (stored @ weights) >= 0).all():
            largest = count
    return torch.tensor(largest)


def _hebbian_fields(stored, diagonal=False):
    """The fields h = W ξ of every stored pattern (rows), W = Σ ξ ξᵀ with its diagonal set to 0 unless
    ``diagonal``, computed as (S Sᵀ) S - p S: the same whole numbers as S (Sᵀ S) with the diagonal zeroed
    (W_ii = p for ±1 patterns), in p²N operations instead of pN². The wrong answers below build on it:
    each is wrong in its stability test or its count, not in the fields."""
    fields = (stored @ stored.T) @ stored
    return fields if diagonal else fields - len(stored) * stored


def test_the_wrong_answers_fields_are_the_hebbian_fields_bit_for_bit():
    """_hebbian_fields is S W with W = Sᵀ S (diagonal zeroed, or kept), exactly: every entry is a whole
    number, so the wrong answers built on it are wrong only where they mean to be."""
    from courseware.checks.memory import hopfield_capacity_cases
    for (patterns,) in hopfield_capacity_cases(torch.Generator().manual_seed(0)):
        for count in (1, 2, 17, len(patterns)):
            stored = patterns[:count]
            weights = stored.T @ stored
            assert torch.equal(_hebbian_fields(stored, diagonal=True), stored @ weights)
            weights.fill_diagonal_(0.0)
            assert torch.equal(_hebbian_fields(stored), stored @ weights)


def capacity_stopping_at_the_first_failure(patterns):
    """The count before the first p that fails: the largest stable p only when stability never comes back."""
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        if (stored * _hebbian_fields(stored) < 0).any():
            return torch.tensor(count - 1)
    return torch.tensor(len(patterns))


def capacity_zero_field_unstable(patterns):
    """The largest p, but with a field of exactly 0 counted as unstable (ξ_i h_i > 0)."""
    largest = 0
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        if (stored * _hebbian_fields(stored) > 0).all():
            largest = count
    return torch.tensor(largest)


def capacity_zero_field_to_plus(patterns):
    """The common convention sign(0) = +1: a unit whose field is 0 is set to +1 (torch.where(h >= 0, 1, -1))."""
    largest = 0
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        if torch.equal(torch.where(_hebbian_fields(stored) >= 0, 1.0, -1.0).to(stored.dtype), stored):
            largest = count
    return torch.tensor(largest)


def capacity_zero_field_to_minus(patterns):
    """sign(0) = -1: a unit whose field is 0 is set to -1 (torch.where(h > 0, 1, -1))."""
    largest = 0
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        if torch.equal(torch.where(_hebbian_fields(stored) > 0, 1.0, -1.0).to(stored.dtype), stored):
            largest = count
    return torch.tensor(largest)


def capacity_with_diagonal(patterns):
    largest = 0
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        if (stored * _hebbian_fields(stored, diagonal=True) >= 0).all():
            largest = count
    return torch.tensor(largest)


def capacity_from_zero(patterns):
    """Counting from 0: the index of the last pattern of the largest stable set, one less than p."""
    last = -1
    for index in range(len(patterns)):
        stored = patterns[:index + 1]
        if (stored * _hebbian_fields(stored) >= 0).all():
            last = index
    return torch.tensor(last)


def capacity_quoted(patterns):
    return torch.tensor(round(0.138 * patterns.shape[1]))


@pytest.mark.parametrize("answer", [capacity_with_update_rule, capacity_searching_down,
                                    capacity_float32_with_the_factor])
def test_hopfield_capacity_accepts_counts_found_either_way(answer, capsys):
    check_hopfield_capacity(answer)
    assert capsys.readouterr().out.startswith("✓ your counts agree with the largest stable p")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (capacity_stopping_at_the_first_failure, "you stopped at the first p that fails"),
        (lambda patterns: capacity_stopping_at_the_first_failure(patterns) + 1, "the first p at which a stored"),
        (capacity_from_zero, "one less than the largest stable p"),
        (capacity_with_diagonal, "your weights keep the diagonal"),
        (capacity_zero_field_unstable, "whose field is exactly 0 as unstable"),
        (capacity_zero_field_to_plus, r"exactly 0 to \+1 \(sign\(0\) = \+1.*by the tie rule"),
        (capacity_zero_field_to_minus, r"exactly 0 to -1 \(sign\(0\) = -1.*by the tie rule"),
        (capacity_quoted, "that is 0.138 N"),
        (lambda patterns: capacity_with_update_rule(patterns) + 0.5, "are not whole numbers"),
        (lambda patterns: capacity_with_update_rule(patterns).repeat(2), "expected a scalar"),
    ],
)
def test_hopfield_capacity_rejects_wrong_counts_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_hopfield_capacity(answer)


def test_stable_prefixes_agree_with_storing_each_set_in_a_network():
    """The checker's vectorised stability test against lib.part5_memory's own network: for every p, each
    of the first p patterns is a fixed point of update_sync (whose tie rule keeps a zero field)."""
    from courseware.checks.memory import hopfield_capacity_cases, stable_prefixes
    from lib.part5_memory.hopfield import hebbian_weights, update_sync
    for (patterns,) in hopfield_capacity_cases(torch.Generator().manual_seed(0))[-3:]:
        by_network = [torch.equal(update_sync(hebbian_weights(patterns[:p]), patterns[:p]), patterns[:p])
                      for p in range(1, len(patterns) + 1)]
        assert stable_prefixes(patterns) == by_network


def test_every_draw_has_a_set_where_stability_comes_back_and_zero_fields_decide_at_either_state():
    """Stability comes back in one set; in another a zero field decides at a unit in state +1 only
    (sign(0) = -1 fails, sign(0) = +1 passes), and in a third at -1 only: so each tie convention
    fails on every draw, and the other passes somewhere, which tells their messages apart."""
    from courseware.checks.memory import hopfield_capacity, hopfield_capacity_cases, stable_prefixes
    for seed in range(10):
        cases = hopfield_capacity_cases(torch.Generator().manual_seed(seed))
        assert len(cases) == 10
        right = [int(hopfield_capacity(*case)) for case in cases]
        counts = {name: [int(hopfield_capacity(*case, **flags)) for case in cases] for name, flags in
                  (("stop", dict(stop_at_failure=True)), ("strict", dict(strict=True)),
                   ("plus", dict(zero_to=1)), ("minus", dict(zero_to=-1)))}
        assert counts["stop"][-3] != right[-3] and counts["strict"][-3] == right[-3]
        assert counts["minus"][-2] != right[-2] and counts["plus"][-2] == right[-2]
        assert counts["plus"][-1] != right[-1] and counts["minus"][-1] == right[-1]
        # and the three broken tie rules against a direct count with each rule
        for name, rule in (("strict", capacity_zero_field_unstable), ("plus", capacity_zero_field_to_plus),
                           ("minus", capacity_zero_field_to_minus)):
            assert [int(rule(*case)) for case in cases[-2:]] == counts[name][-2:], name
    # stability coming back, spelt out on one set: a p that fails below the largest stable p
    patterns = hopfield_capacity_cases(torch.Generator().manual_seed(0))[-3][0]
    stable, largest = stable_prefixes(patterns), int(hopfield_capacity(patterns))
    assert stable[largest - 1] and not all(stable[:largest])


def test_the_solutions_text_counts_below_0138_n_varying_and_sometimes_coming_back():
    """ex-mem-capacity's solution: "the counts are below 0.138 N in nearly every draw, and they vary from
    one draw of patterns to the next", and stability is not monotone in p."""
    from courseware.checks.memory import PATTERNS, hopfield_capacity, stable_prefixes
    generator = torch.Generator().manual_seed(12)
    for units in (128, 256):
        counts, comes_back = [], 0
        for _ in range(60):
            patterns = torch.randint(0, 2, (PATTERNS, units), generator=generator).double() * 2 - 1
            counts.append(int(hopfield_capacity(patterns)))
            stable = stable_prefixes(patterns)
            comes_back += not all(stable[:counts[-1]])
        assert sum(count < 0.138 * units for count in counts) >= 0.9 * len(counts), (units, counts)
        assert max(counts) - min(counts) >= 5 and max(counts) < PATTERNS, (units, counts)
        assert comes_back >= 3, (units, comes_back)


# ---- the fairness table (tests/courseware/test_exercise_fairness.py runs it on 20 seeds) ----------------
# ---- one update of a modern Hopfield network ----------------------------------------------
def modern_update_loops(patterns, states, beta):
    """State by state and pattern by pattern in Python floats, with the largest score subtracted."""
    out = torch.zeros_like(states)
    for b in range(states.shape[0]):
        scores = [beta * sum(float(x) * float(s) for x, s in zip(pattern, states[b])) for pattern in patterns]
        top = max(scores)
        weights = [math.exp(score - top) for score in scores]
        total = sum(weights)
        for mu, weight in enumerate(weights):
            out[b] += weight / total * patterns[mu]
    return out


def modern_update_float32_logsumexp(patterns, states, beta):
    """In float32, the weights as exp(score - logsumexp(score)), the paper's column form transposed."""
    X = patterns.float().T  # (N, P): the paper's X, one pattern per column
    scores = beta * (X.T @ states.float().T)  # (P, B): β Xᵀ ξ for every state ξ (a column)
    weights = torch.exp(scores - torch.logsumexp(scores, dim=0, keepdim=True))  # softmax over the patterns
    return (X @ weights).T  # (B, N)


def modern_update_einsum(patterns, states, beta):
    weights = torch.einsum("pn,bn->bp", patterns, states).mul(beta).softmax(-1)
    return torch.einsum("bp,pn->bn", weights, patterns)


def modern_softmax_over_states(patterns, states, beta):
    return torch.softmax(beta * states @ patterns.T, dim=0) @ patterns


def modern_without_beta(patterns, states, beta):
    return torch.softmax(states @ patterns.T, dim=-1) @ patterns


def modern_values_transposed(patterns, states, beta):
    return torch.softmax(beta * states @ patterns.T, dim=-1) @ patterns.T


def modern_beta_divides(patterns, states, beta):
    return torch.softmax(states @ patterns.T / beta, dim=-1) @ patterns


def modern_cosine_scores(patterns, states, beta):
    """The NTM's content addressing, with the norms divided out by hand."""
    unit_states = states / states.norm(dim=-1, keepdim=True)
    unit_patterns = patterns / patterns.norm(dim=-1, keepdim=True)
    return torch.softmax(beta * unit_states @ unit_patterns.T, dim=-1) @ patterns


def modern_to_a_fixed_point(patterns, states, beta):
    """The update repeated until no entry moves by 1e-8."""
    while True:
        new = torch.softmax(beta * states @ patterns.T, dim=-1) @ patterns
        if (new - states).abs().max() < 1e-8:
            return new
        states = new


def modern_sign_of_update(patterns, states, beta):
    return torch.sign(torch.softmax(beta * states @ patterns.T, dim=-1) @ patterns)


def test_modern_update_cases_isolate_each_slip():
    for patterns, states, beta in modern_update_cases(torch.Generator().manual_seed(7)):
        assert states.shape[0] >= 2 and abs(beta - 1) >= 0.25 and patterns.shape[1] == states.shape[1]
    cases = modern_update_cases(torch.Generator().manual_seed(7))
    assert all(p.shape[0] == p.shape[1] for p, _, _ in cases[:2])
    assert all(p.shape[0] not in (p.shape[1], s.shape[0]) for p, s, _ in cases[2:])


def test_modern_update_accepts_right_answers_and_names_wrong_ones(capsys):
    check_modern_update(modern_update_loops)
    assert "✓ your update agrees with X softmax(β Xᵀ ξ)" in capsys.readouterr().out
    assert CHECKS["check_modern_update"] is check_modern_update
    with pytest.raises(CheckFailed, match="your softmax ran over the states"):
        check_modern_update(modern_softmax_over_states)
    with pytest.raises(CheckFailed, match="you left out β"):
        check_modern_update(modern_without_beta)
    with pytest.raises(CheckFailed, match=r"averaged the columns of the patterns \(Xᵀ\)"):
        check_modern_update(modern_values_transposed)
    with pytest.raises(CheckFailed, match="you divided the scores by β"):
        check_modern_update(modern_beta_divides)
    with pytest.raises(CheckFailed, match=r"cosine similarity, softmax\(β cos\(ξ, x\)\), the NTM's"):
        check_modern_update(modern_cosine_scores)
    with pytest.raises(CheckFailed, match="you repeated the update until the states stopped moving"):
        check_modern_update(modern_to_a_fixed_point)
    with pytest.raises(CheckFailed, match="you took the sign of the update"):
        check_modern_update(modern_sign_of_update)


FAIRNESS = {
    "check_multi_head_write": {
        "right": [multi_write_loops, multi_write_two_passes_float32, multi_write_einsum],
        "wrong": [
            (interleaved_heads, "you wrote head by head, each erasing and then adding: .*against Graves et al.'s"),
            (summed_erase, "multiply the heads' erase factors"),
            (averaged_adds, "sum the adds, do not average them"),
            (first_head_only, "you wrote with the first head only"),
            (adds_before_erasures, 'you added before erasing, against Graves et al., who add each add vector "after'),
            (multi_write_in_place, "changed its argument 1"),
        ],
    },
    "check_projection_weights": {
        "right": [projection_gram_schmidt, projection_float32_pinv, projection_qr],
        "wrong": PROJECTION_WRONG,
    },
    "check_modern_update": {
        "right": [modern_update_loops, modern_update_float32_logsumexp, modern_update_einsum],
        "wrong": [
            (modern_softmax_over_states, "your softmax ran over the states"),
            (modern_without_beta, "you left out β"),
            (modern_values_transposed, r"averaged the columns of the patterns \(Xᵀ\)"),
            (modern_beta_divides, "you divided the scores by β"),
            (modern_cosine_scores, r"cosine similarity, softmax\(β cos\(ξ, x\)\)"),
            (modern_to_a_fixed_point, "you repeated the update until the states stopped moving"),
            (modern_sign_of_update, "you took the sign of the update"),
        ],
    },
    "check_hopfield_capacity": {
        "right": [capacity_with_update_rule, capacity_searching_down, capacity_float32_with_the_factor],
        "wrong": [
            (capacity_stopping_at_the_first_failure, "you stopped at the first p that fails"),
            (capacity_zero_field_unstable, "whose field is exactly 0 as unstable"),
            (capacity_zero_field_to_plus, r"exactly 0 to \+1 \(sign\(0\) = \+1.*by the tie rule"),
            (capacity_zero_field_to_minus, r"exactly 0 to -1 \(sign\(0\) = -1.*by the tie rule"),
            (capacity_with_diagonal, "your weights keep the diagonal"),
            (capacity_from_zero, "one less than the largest stable p"),
            (capacity_quoted, "that is 0.138 N"),
        ],
    },
}
