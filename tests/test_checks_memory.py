"""The checkers of chapter 12: right answers pass however they are written; wrong ones fail
with a message that says what is wrong."""
import pytest
import torch

from lib.checks import CHECKS, CheckFailed, check_hebbian_weights, check_hopfield_capacity, check_ntm_write


def test_the_checks_are_registered():
    assert CHECKS["check_ntm_write"] is check_ntm_write
    assert CHECKS["check_hebbian_weights"] is check_hebbian_weights


# ---- NTM write --------------------------------------------------------------------------
def write_broadcasting(memory, weights, erase, add):
    w = weights.unsqueeze(-1)  # (B, N, 1)
    return memory * (1 - w * erase.unsqueeze(1)) + w * add.unsqueeze(1)


def write_einsum(memory, weights, erase, add):
    erase_matrix = torch.einsum("bn,bd->bnd", weights, erase)  # w_i e for every slot
    add_matrix = torch.einsum("bn,bd->bnd", weights, add)
    return memory - memory * erase_matrix + add_matrix


def write_loops(memory, weights, erase, add):
    out = memory.clone()
    for b in range(memory.shape[0]):
        for i in range(memory.shape[1]):
            out[b, i] = memory[b, i] * (1 - weights[b, i] * erase[b]) + weights[b, i] * add[b]
    return out


@pytest.mark.parametrize("answer", [write_broadcasting, write_einsum, write_loops])
def test_ntm_write_accepts_right_answers_written_differently(answer, capsys):
    check_ntm_write(answer)
    assert capsys.readouterr().out == (
        "✓ the erase-then-add write agrees with lib.memory.ntm.write on 20 fresh random cases\n"
    )


def w_(weights):
    return weights.unsqueeze(-1)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda m, w, e, a: (m + w_(w) * a[:, None]) * (1 - w_(w) * e[:, None]), "you added before erasing"),
        (lambda m, w, e, a: m * (1 - e[:, None]) + w_(w) * a[:, None], "your erase ignores the weights"),
        (lambda m, w, e, a: m * (1 - w_(w) * e[:, None]), "you erased but did not add"),
        (lambda m, w, e, a: m + w_(w) * a[:, None], "you added but did not erase"),
        (lambda m, w, e, a: m * (1 - w_(w) * e[:, None]) + a[:, None], "your add ignores the weights"),
        (lambda m, w, e, a: m * w_(w) * e[:, None] + w_(w) * a[:, None], r"keeps M_i \(1 - w_i e\)"),
        (lambda m, w, e, a: write_broadcasting(m, w, e, a) + 0.01, "differs from M ⊙ \\(1 − w eᵀ\\) \\+ w aᵀ"),
        (lambda m, w, e, a: write_broadcasting(m, w, e, a)[0], "your memory has shape"),
        (lambda m, w, e, a: m * (1 - w * e) + w * a, "your function raised RuntimeError"),
        (lambda m, w, e, a: write_broadcasting(m, w, e, a).tolist(), "must return a torch.Tensor; it returned list"),
    ],
)
def test_ntm_write_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_ntm_write(answer)


# ---- Hebbian weights --------------------------------------------------------------------
def hebbian_outer_products(patterns):
    n = patterns.shape[1]
    weights = sum(torch.outer(p, p) for p in patterns) / n
    return weights - torch.diag(torch.diag(weights))


def hebbian_matmul(patterns):
    weights = patterns.T @ patterns / patterns.shape[1]
    weights.fill_diagonal_(0)
    return weights


@pytest.mark.parametrize("answer", [hebbian_outer_products, hebbian_matmul])
def test_hebbian_accepts_right_answers_written_differently(answer, capsys):
    check_hebbian_weights(answer)
    assert capsys.readouterr().out.startswith("✓ Hebbian weights agree with lib.memory.hopfield")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda p: p.T @ p / p.shape[1], "your diagonal is .*, not 0"),
        (lambda p: hebbian_matmul(p) * p.shape[1], "you did not divide by N"),
        (lambda p: hebbian_matmul(p) * p.shape[1] / p.shape[0], "you divided by P"),
        (lambda p: p @ p.T / p.shape[1], "patterns @ patterns.T compares patterns"),
        (lambda p: hebbian_matmul(p) * 0.5, "differ from \\(1/N\\) Σ ξ ξᵀ"),
    ],
)
def test_hebbian_rejects_wrong_answers_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_hebbian_weights(answer)


def test_a_stub_is_told_to_write_its_body():
    def stub(patterns):
        raise NotImplementedError("hint")

    with pytest.raises(CheckFailed, match="still raises NotImplementedError"):
        check_hebbian_weights(stub)


# ---- experiment: how many patterns stay fixed points -----------------------------------------
def capacity_with_update_rule(patterns):
    """Store more and more patterns; stop when one is no longer a fixed point of a synchronous update
    in which a unit whose field is exactly 0 keeps its state (float64, 1/N included)."""
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        weights = stored.T @ stored / patterns.shape[1]
        weights.fill_diagonal_(0.0)
        fields = stored @ weights
        updated = torch.where(fields.abs() < 1e-9, stored, torch.sign(fields))
        if not torch.equal(updated, stored):
            return torch.tensor(count - 1)
    return torch.tensor(len(patterns))


def capacity_by_overlaps_as_float(patterns):
    """The same count from the overlaps, as a float: ξ_νi h_i = Σ_μ ξ_μi ξ_νi (ξ_μ·ξ_ν) - p."""
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]  # (p, N)
        overlaps = stored @ stored.T  # (p, p)
        agreement = torch.einsum("mi,ni,mn->ni", stored, stored, overlaps) - count  # (p, N): diagonal removed
        if (agreement < 0).any():
            return torch.tensor(float(count - 1))
    return torch.tensor(float(len(patterns)))


@pytest.mark.parametrize("answer", [capacity_with_update_rule, capacity_by_overlaps_as_float])
def test_hopfield_capacity_accepts_counts_found_either_way(answer, capsys):
    check_hopfield_capacity(answer)
    assert capsys.readouterr().out.startswith("✓ your counts agree with adding patterns one at a time")


def with_diagonal(patterns):
    for count in range(1, len(patterns) + 1):
        stored = patterns[:count]
        if (stored * (stored @ (stored.T @ stored)) < 0).any():
            return torch.tensor(count - 1)
    return torch.tensor(len(patterns))


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda patterns: capacity_with_update_rule(patterns) + 1, "the first count at which a stored pattern"),
        (with_diagonal, "your weights keep the diagonal"),
        (lambda patterns: torch.tensor(round(0.138 * patterns.shape[1])), "that is 0.138 N"),
        (lambda patterns: capacity_with_update_rule(patterns) + 0.5, "are not whole numbers"),
        (lambda patterns: capacity_with_update_rule(patterns).repeat(2), "expected a scalar"),
    ],
)
def test_hopfield_capacity_rejects_wrong_counts_saying_why(answer, message):
    with pytest.raises(CheckFailed, match=message):
        check_hopfield_capacity(answer)


def test_counting_a_zero_field_as_unstable_is_named_when_it_changes_the_count():
    from lib.checks.memory import hopfield_capacity, hopfield_capacity_cases
    cases = [case for case in hopfield_capacity_cases(torch.Generator().manual_seed(3), trials=40)
             if hopfield_capacity(*case, strict=True) != hopfield_capacity(*case)]
    assert cases, "no drawn case has a zero field at the capacity"
    with pytest.raises(CheckFailed, match="whose field is exactly 0 as unstable"):
        check_hopfield_capacity.judge(cases, [hopfield_capacity(*case, strict=True) for case in cases])
