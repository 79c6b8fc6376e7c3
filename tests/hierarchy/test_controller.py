"""Algorithm 1 Part II: the nested line search against brute-force enumeration."""

import numpy as np
import pytest

from rayfl.hierarchy.controller import ControlProblem, brute_force, solve, step_size


def _problem(rng, n=4, tau_max=8, s_max=6, **kw):
    sizes = rng.integers(1, s_max + 1, size=n)
    trusted = rng.random(n) < 0.5
    base = dict(
        trusted=trusted,
        sizes=sizes,
        energy_j=rng.uniform(1e-3, 1e-2, size=n),
        time_s=rng.uniform(1e-3, 3e-2, size=n),
        backhaul_energy_j=float(rng.uniform(0, 2e-2)),
        backhaul_delay_s=float(rng.uniform(0, 5e-3)),
        remaining_steps=int(rng.integers(1, 200)),
        tau_max=tau_max,
        num_local=int(rng.integers(0, 4)),
        nu_scale=float(10 ** rng.uniform(-4, 0)),
        edge_constant=float(rng.uniform(1, 2)),
        device_constant=float(rng.uniform(1, 2)),
        alpha_energy=float(10 ** rng.uniform(-1, 1)),
        alpha_delay=float(10 ** rng.uniform(-1, 1)),
        alpha_dp=float(10 ** rng.uniform(-1, 1)),
        energy_ref=float(rng.uniform(0.01, 1)),
        delay_ref=float(rng.uniform(0.01, 1)),
        nu_ref=float(rng.uniform(0.01, 1)),
    )
    base.update(kw)
    return ControlProblem(**base)


@pytest.mark.parametrize("seed", range(40))
def test_nested_line_search_finds_the_exhaustive_optimum(seed):
    # Arrange: random small grids (τ_max ≤ 8, s_c ≤ 6), random weights
    rng = np.random.default_rng(seed)
    problem = _problem(rng)
    # Act
    nested = solve(problem)
    exhaustive = brute_force(problem)
    # Assert: same argmin value (and same point, ties aside)
    v_nested = problem.objective(nested[0], max(nested[1], 1), max(nested[2], 1))
    v_best = problem.objective(
        exhaustive[0], max(exhaustive[1], 1), max(exhaustive[2], 1)
    )
    assert v_nested == pytest.approx(v_best, rel=1e-12)
    assert nested == exhaustive


def test_trade_offs_follow_the_paper():
    # Fig. 8: ↑α_1 (energy) → longer τ, fewer devices; ↑α_3 (DP) → shorter τ, more.
    rng = np.random.default_rng(0)
    common = dict(
        trusted=np.array([True, False, True, False]),
        sizes=np.full(4, 10),
        energy_j=np.full(4, 5e-3),
        time_s=np.full(4, 2e-2),
        backhaul_energy_j=1.6e-2,
        backhaul_delay_s=5e-3,
        remaining_steps=4000,
        tau_max=40,
        num_local=3,
        nu_scale=1e-3,
        edge_constant=1.5,
        device_constant=1.5,
    )
    del rng
    low = solve(
        ControlProblem(**common, alpha_energy=0.1, alpha_delay=0.0, alpha_dp=1.0)
    )
    high = solve(
        ControlProblem(**common, alpha_energy=10.0, alpha_delay=0.0, alpha_dp=1.0)
    )
    assert high[0] >= low[0] and high[1] + high[2] <= low[1] + low[2]
    assert (high[0], high[1] + high[2]) != (low[0], low[1] + low[2])


def test_nu_is_monotone():
    # spec §8: ↑τ ⇒ ↑ν; ↑s ⇒ ↓ν; more trusted clusters ⇒ ↓ν
    p = _problem(
        np.random.default_rng(1),
        n=4,
        num_local=3,
        sizes=np.full(4, 6),
        trusted=np.array([True, False, False, False]),
    )
    nu = lambda tau, s, prob=p: prob.terms(tau, s, s)[2]  # noqa: E731
    assert nu(8, 3) > nu(4, 3)
    assert nu(8, 5) < nu(8, 3)
    more = ControlProblem(
        **{**p.__dict__, "trusted": np.array([True, True, True, False])}
    )
    assert more.terms(8, 3, 3)[2] < p.terms(8, 3, 3)[2]


def test_step_size_rule():
    # γ = min{1/τ, 1/K_g}/β̂, η_k = γ/√(k+1) (Sec. 5.1)
    assert step_size(k=0, tau_prev=20, num_global=200, beta_hat=2.0) == pytest.approx(
        1 / 400
    )
    assert step_size(k=3, tau_prev=40, num_global=10, beta_hat=1.0) == pytest.approx(
        1 / 80
    )
