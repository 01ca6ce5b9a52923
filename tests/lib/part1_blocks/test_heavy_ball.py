"""lib.part1_blocks.heavy_ball against references: torch.linalg.eigvals of the iteration
matrix, the rates measured on runs of lib's and torch's SGD, a brute-force grid search."""

import math

import pytest
import torch

from lib.part1_blocks.heavy_ball import (
    direction_rates,
    gd_optimum,
    iteration_matrix,
    measured_rates,
    polyak_optimum,
    steps_per_e_fold,
)
from lib.part1_blocks.optim import SGD, SURFACES, trajectory

QUADRATIC = torch.tensor([1.0, 20.0], dtype=torch.float64)  # the chapter's curvatures


def spectral_radius(curvatures, lr, beta):
    return torch.linalg.eigvals(iteration_matrix(curvatures, lr, beta)).abs().max(-1).values


def test_iteration_matrix_is_one_step_of_torch_sgd():
    torch.manual_seed(0)
    curvatures = torch.rand(5, dtype=torch.float64) * 10 + 0.1
    lr, beta = 0.07, 0.6
    w = torch.randn(5, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=lr, momentum=beta)
    buffer = torch.zeros(5, dtype=torch.float64)
    for _ in range(6):
        state = torch.stack([buffer, w.detach().clone()], -1)  # (D, 2)
        optimizer.zero_grad()
        (0.5 * (curvatures * w**2).sum()).backward()
        optimizer.step()
        predicted = (iteration_matrix(curvatures, lr, beta) @ state[..., None])[..., 0]
        buffer = optimizer.state[w]["momentum_buffer"].clone()
        assert torch.allclose(predicted[:, 0], buffer, atol=1e-14)
        assert torch.allclose(predicted[:, 1], w.detach(), atol=1e-14)


@pytest.mark.parametrize("seed", range(5))
def test_closed_form_is_the_spectral_radius(seed):
    generator = torch.Generator().manual_seed(seed)
    curvatures = torch.rand(50, generator=generator, dtype=torch.float64) * 30 + 0.01
    lr = float(torch.rand((), generator=generator, dtype=torch.float64)) * 0.3
    for beta in (0.0, 0.3, 0.7, 0.95):
        closed = direction_rates(curvatures, lr, beta)
        assert torch.allclose(closed, spectral_radius(curvatures, lr, beta), atol=1e-7)


def test_gradient_descent_is_beta_zero():
    curvatures = torch.linspace(0.5, 30, 40, dtype=torch.float64)
    for lr in (0.01, 0.05, 0.09, 0.2):
        assert torch.allclose(direction_rates(curvatures, lr, 0.0), (1 - lr * curvatures).abs())


@pytest.mark.parametrize(
    "lr, beta", [(0.09, 0.0), (2 / 21, 0.0), (0.05, 0.5), (0.02, 0.9), (0.15, 0.3), (0.135, 0.3)]
)
def test_measured_decay_of_lib_and_torch_sgd_is_the_closed_form(lr, beta):
    path = trajectory(SGD, SURFACES["quadratic"], 1000, lr=lr, momentum=beta)
    torch_path = trajectory(torch.optim.SGD, SURFACES["quadratic"], 1000, lr=lr, momentum=beta)
    closed = direction_rates(QUADRATIC, lr, beta)
    for run in (path, torch_path):
        assert torch.allclose(measured_rates(run), closed, rtol=1e-4, atol=0)


def test_at_polyaks_optimum_the_roots_are_double_and_the_fit_runs_slightly_high():
    lr, beta, rate = polyak_optimum(QUADRATIC)
    # both directions sit on the edge of the complex region: a double root ±√β
    trace = 1 + beta - lr * QUADRATIC
    assert torch.allclose(trace**2, torch.full_like(trace, 4 * beta), atol=1e-12)
    assert torch.allclose(
        direction_rates(QUADRATIC, lr, beta), torch.tensor(rate, dtype=torch.float64)
    )
    measured = measured_rates(trajectory(SGD, SURFACES["quadratic"], 1000, lr=lr, momentum=beta))
    # the error is (a + b t) ρ^t: the fitted rate is above ρ, by less than 0.5%
    assert ((measured > rate) & (measured < 1.005 * rate)).all()


def test_measured_rate_of_a_known_sequence():
    t = torch.arange(300, dtype=torch.float64)[:, None]
    errors = torch.cat([0.9**t, 3 * 0.7**t * torch.cos(1.3 * t + 0.4)], dim=1)  # (300, 2)
    assert torch.allclose(
        measured_rates(errors), torch.tensor([0.9, 0.7], dtype=torch.float64), rtol=2e-3
    )


def brute_force(curvatures, betas):
    """The (worst rate, lr, beta) of a grid with the smallest worst-direction spectral
    radius, from torch.linalg.eigvals of every matrix R on the grid, built here."""
    lr, beta = torch.meshgrid(
        torch.linspace(0.0005, 0.25, 500, dtype=torch.float64),
        torch.tensor(betas, dtype=torch.float64),
        indexing="ij",
    )  # (500, B) each
    lr, beta, curvature = lr[..., None], beta[..., None], curvatures  # (500, B, 1), (D,)
    matrix = torch.stack(
        [
            torch.stack(
                [beta.expand(-1, -1, len(curvatures)), curvature.expand_as(lr * curvature)], -1
            ),
            torch.stack([(-lr * beta).expand(-1, -1, len(curvatures)), 1 - lr * curvature], -1),
        ],
        -2,
    )  # (500, B, D, 2, 2)
    worst = torch.linalg.eigvals(matrix).abs().amax(dim=(-1, -2))  # (500, B)
    i, j = divmod(int(worst.argmin()), worst.shape[1])
    return float(worst[i, j]), float(lr[i, j, 0]), float(beta[i, j, 0])


def test_grid_search_finds_polyaks_optimum():
    lr, beta, rate = polyak_optimum(QUADRATIC)
    found_rate, found_lr, found_beta = brute_force(QUADRATIC, torch.linspace(0, 0.9, 181).tolist())
    assert abs(found_lr - lr) < 0.002 and abs(found_beta - beta) < 0.006
    assert rate <= found_rate < rate + 0.01  # nothing on the grid beats the closed form


def test_grid_search_finds_gradient_descents_optimum():
    lr, rate = gd_optimum(QUADRATIC)
    found_rate, found_lr, _ = brute_force(QUADRATIC, [0.0])
    assert abs(found_lr - lr) < 0.001 and rate <= found_rate < rate + 0.001
    assert math.isclose(rate, 19 / 21) and math.isclose(lr, 2 / 21)


def test_speed_up_grows_like_root_kappa():
    for kappa in (10.0, 100.0, 1e4):
        curvatures = torch.tensor([1.0, kappa], dtype=torch.float64)
        gd = steps_per_e_fold(torch.tensor(gd_optimum(curvatures)[1], dtype=torch.float64))
        heavy = steps_per_e_fold(torch.tensor(polyak_optimum(curvatures)[2], dtype=torch.float64))
        # -1/ln((x-1)/(x+1)) lies within 1/x of x/2 (x = κ or √κ)
        assert abs(gd - kappa / 2) < 1 / kappa + 1e-9
        assert abs(heavy - math.sqrt(kappa) / 2) < 1 / math.sqrt(kappa) + 1e-9


@pytest.mark.parametrize(
    "bad, message",
    [
        (torch.tensor([1.0, -2.0]), "all of them positive"),
        (torch.tensor([]), "at least one number"),
        (torch.tensor([1.0, math.inf]), "be finite"),
        (torch.tensor([1.0, math.nan]), "be finite"),
    ],
)
def test_bad_curvatures_are_named(bad, message):
    with pytest.raises(ValueError, match=f"curvatures must.*{message}"):
        direction_rates(bad, 0.1, 0.5)


def test_bad_rate_and_start_are_named():
    with pytest.raises(ValueError, match="rate must lie in"):
        steps_per_e_fold(torch.tensor([1.2]))
    with pytest.raises(ValueError, match="start must leave at least 5 rows.*start=1 with 5"):
        measured_rates(torch.ones(5, 2), start=1)
    assert measured_rates(0.5 ** torch.arange(5.0).unsqueeze(1), start=0).shape == (1,)
    with pytest.raises(ValueError, match="errors must stay within"):
        measured_rates(torch.zeros(10, 2, dtype=torch.float64))
