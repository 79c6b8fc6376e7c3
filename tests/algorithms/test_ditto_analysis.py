"""Seed 001's analysis: Theorem 1 bound, T*, fairness R(λ), λ* (spec §4)."""

import dataclasses
import doctest
import math
from types import SimpleNamespace

import numpy as np
import pytest

from rayfl.algorithms import ditto_analysis as da
from rayfl.algorithms.ditto_analysis import LinearModelParams, TheoryParams

# ε_L ≠ ε_G with a U-shaped bound and a bracket T' below t_max.
U_SHAPED = TheoryParams(mu=2.0, smoothness=100.0, epsilon=10.0)
PARAMS = [
    TheoryParams(),
    U_SHAPED,
    TheoryParams(mu=5.0, smoothness=50.0, lam=0.8, epsilon=1.0, lr_personal=0.02),
    TheoryParams(mu=1.5, smoothness=20.0, lam=1.9, lr_global=0.05, epsilon=30.0),
]
IDS = ["defaults", "u-shaped", "lam=0.8", "lam=1.9"]


def _equal_contraction(p):
    # Choose η_L so that ε_L = ε_G exactly (the eq. 15 case).
    k = da.bound_constants(p)
    rate = p.mu + (1 - p.mu / 2) * p.lam - 1
    return dataclasses.replace(p, lr_personal=(1 - k.eps_global) / rate)


@pytest.mark.parametrize("p", PARAMS, ids=IDS)
@pytest.mark.parametrize("rounds", [1, 5, 20, 80])
def test_closed_form_14_equals_recursion(p, rounds):
    np.testing.assert_allclose(
        da.convergence_bound_closed_form(rounds, p),
        da.convergence_bound(rounds, p),
        rtol=1e-9,
    )


@pytest.mark.parametrize("rounds", [1, 5, 20, 80])
def test_closed_form_15_equals_recursion_when_contractions_match(rounds):
    p = _equal_contraction(U_SHAPED)
    k = da.bound_constants(p)
    assert abs(k.eps_personal - k.eps_global) < 1e-12
    np.testing.assert_allclose(
        da.convergence_bound_closed_form(rounds, p),
        da.convergence_bound(rounds, p),
        rtol=1e-9,
    )


@pytest.mark.parametrize("p", PARAMS, ids=IDS)
def test_coefficient_form_16b_and_curve_equal_recursion(p):
    h = da.bound_coefficients(p)
    k = da.bound_constants(p)
    t = np.arange(0, 61)
    form = (
        (h["H1"] + h["H2"] * t) * k.eps_personal**t
        + (h["H3"] + h["H4"] * t) * k.eps_global**t
        + h["H5"] * t
        + h["H6"]
    )
    direct = np.array([da.convergence_bound(int(v), p) for v in t])
    np.testing.assert_allclose(form, direct, rtol=1e-9)
    np.testing.assert_allclose(da.bound_curve(p, 60), direct, rtol=1e-12)
    assert direct[0] == p.initial_personal_gap  # h(0) = H1 + H3 + H6 = Ψ2


def test_linear_lower_bound_17_lies_below_the_bound():
    p = U_SHAPED
    t_up = da.rounds_upper_bound(p)
    h5 = da.bound_coefficients(p)["H5"]
    t = np.arange(0, 2000)
    low = p.initial_personal_gap + h5 * (t - t_up)  # h_Low(T') = h(0)
    assert np.all(da.bound_curve(p, 1999) >= low - 1e-12)


@pytest.mark.parametrize(
    ("k", "r"), [(-1.0, math.exp(-1.0)), (-3.0, 0.9), (2.0, 0.5)], ids=str
)
def test_min_linear_geometric_against_a_fine_grid(k, r):
    t = np.linspace(0, 400, 400_001)
    grid = np.min(k * t * r**t)
    np.testing.assert_allclose(da.min_linear_geometric(k, r), min(grid, 0.0), atol=1e-8)


@pytest.mark.parametrize(
    "p",
    [
        U_SHAPED,
        TheoryParams(),
        TheoryParams(epsilon=math.inf),
        TheoryParams(lam=0.0, mu=1.5),
    ],
    ids=["bracketed", "defaults", "no-noise", "lam=0"],
)
def test_t_star_search_equals_exhaustive_evaluation(p):
    # Arrange: exhaustive oracle over T = 1..t_max with the plain recursion
    t_max = 400
    exhaustive = np.array([da.convergence_bound(t, p) for t in range(1, t_max + 1)])
    # Act
    found = da.optimal_rounds(p, t_max)
    # Assert
    assert found["t_star"] == int(np.argmin(exhaustive)) + 1
    np.testing.assert_allclose(found["bound"], exhaustive.min(), rtol=1e-12)


def test_bracket_is_used_and_t_star_is_interior():
    found = da.optimal_rounds(U_SHAPED, 10_000)
    assert found["bracketed"]
    assert 1 < found["t_star"] < found["t_upper"] < 10_000


def test_no_noise_or_no_personal_pull_has_no_interior_optimum():
    assert da.optimal_rounds(TheoryParams(epsilon=math.inf), 300)["t_star"] == 300
    assert da.rounds_upper_bound(TheoryParams(lam=0.0, mu=1.5)) is None


@pytest.mark.parametrize(
    ("clip_norm", "epsilon", "rounds", "sigma_u"),
    [
        (20, 1, 10, 3.27e-2),
        (20, 10, 30, 5.66e-3),
        (20, 1, 80, 9.25e-2),
        (10, 100, 30, 2.83e-4),
    ],
    ids=["C20-e1-T10", "C20-e10-T30", "C20-e1-T80", "C10-e100-T30"],
)
def test_noise_std_matches_the_spec_table(clip_norm, epsilon, rounds, sigma_u):
    # Spec §5 table (|D_n| = 2625, N = 20, δ = 0.01): σ_u = sqrt(σ_z²/N).
    p = TheoryParams(clip_norm=clip_norm, epsilon=epsilon)
    got = math.sqrt(float(da.summed_noise_var(p, rounds)) / 20)
    np.testing.assert_allclose(got, sigma_u, rtol=2e-3)


def test_phi_l_is_lemma_2_closed_form():
    p = TheoryParams(clip_norm=10.0, epsilon=5.0, dim=100, smoothness=3.0)
    ds = 2 * 10.0 / 2625
    want = ds**2 * 3.0 * 100 * math.log(100) / (20**2 * 25.0)
    np.testing.assert_allclose(da.bound_constants(p).phi, want, rtol=1e-12)


# ----------------------------------------------------------------- fairness
LIN = LinearModelParams()
KW = {"dim": 7850, "num_clients": 20}


def _sz2(p, rounds):
    return float(da.summed_noise_var(p, rounds))


@pytest.mark.parametrize("formula", ["paper", "corrected"])
@pytest.mark.parametrize("epsilon", [1.0, 10.0, 100.0])
def test_lambda_star_solves_cubic_32_and_minimises_r(formula, epsilon):
    # Arrange
    lin = dataclasses.replace(LIN, formula=formula)
    sz2 = _sz2(TheoryParams(epsilon=epsilon), 30)
    # Act
    lam, alpha = da.optimal_lambda(lin, summed_noise_var=sz2, **KW)
    # Assert: plug back into the cubic, and brute-force R over a fine λ grid
    cubic = da.fairness_derivative(lin, summed_noise_var=sz2, **KW)
    scale = np.max(np.abs(cubic.coef))
    assert 0.0 < alpha < 1.0
    assert abs(cubic(alpha)) < 1e-9 * scale
    grid = np.linspace(0.0, 2.0, 200_001)
    risk = da.fairness_risk(grid, lin, summed_noise_var=sz2, **KW)
    np.testing.assert_allclose(lam, grid[np.argmin(risk)], atol=2e-5)
    np.testing.assert_allclose(
        da.alpha0_of_lambda(lam, samples=lin.samples, rho=lin.rho), alpha, rtol=1e-9
    )


def test_cubic_32_is_written_as_in_the_paper():
    # Eq. 32 literally: 4d s a + 8G1 s (S1 − S2 a)² a − 8 S2 G1 (σw² + a² s)(S1 − S2 a)
    # − 4 S2 (G2 − G1²)(S1 − S2 a)³, with s = σ_z²/N².
    lin = LinearModelParams(g1=3.0, g2=11.0)
    d, n, sz2 = 50, 4, 0.7
    sw2, s1, s2 = da.fairness_constants(lin, num_clients=n)
    s = sz2 / n**2
    a = np.linspace(-0.5, 1.5, 9)
    m = s1 - s2 * a
    literal = (
        4 * d * s * a
        + 8 * 3.0 * s * m**2 * a
        - 8 * s2 * 3.0 * (sw2 + a**2 * s) * m
        - 4 * s2 * (11.0 - 9.0) * m**3
    )
    cubic = da.fairness_derivative(lin, dim=d, num_clients=n, summed_noise_var=sz2)
    assert cubic.degree() == 3
    np.testing.assert_allclose(cubic(a), literal, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("formula", ["paper", "corrected"])
def test_cubic_is_the_derivative_of_r_in_alpha0(formula):
    # Central differences of R(λ(α0)) (eq. 31) against the polynomial.
    lin = dataclasses.replace(LIN, formula=formula)
    sz2 = _sz2(TheoryParams(epsilon=10.0), 50)
    a, h = np.linspace(0.05, 0.95, 7), 1e-6

    def r(alpha0):
        lam = da.lambda_of_alpha0(alpha0, samples=lin.samples, rho=lin.rho)
        return da.fairness_risk(lam, lin, summed_noise_var=sz2, **KW)

    numeric = (r(a + h) - r(a - h)) / (2 * h)
    cubic = da.fairness_derivative(lin, summed_noise_var=sz2, **KW)
    np.testing.assert_allclose(cubic(a), numeric, rtol=1e-5)


def test_lambda_star_decreases_with_the_noise_corollary_1():
    sz2 = np.geomspace(1e-6, 1e2, 25)
    lams = [da.optimal_lambda(LIN, summed_noise_var=float(v), **KW)[0] for v in sz2]
    assert np.all(np.diff(lams) <= 1e-12)
    assert lams[-1] < 0.5 * lams[0]


def test_lambda_alpha0_maps_are_inverse():
    lam = np.linspace(0, 2, 11)
    a = da.alpha0_of_lambda(lam, samples=30, rho=7.0)
    np.testing.assert_allclose(
        da.lambda_of_alpha0(a, samples=30, rho=7.0), lam, atol=1e-12
    )
    assert np.all(np.diff(a) > 0)


def test_expected_alpha_moments_match_monte_carlo():
    # Oracle: simulate û_n = u_n* + noise under (22)-(25) and measure G1, G2.
    lin = LinearModelParams(rho=4.0, noise_var=2.0, prior_var=0.3)
    d, n = 40, 6
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(3000):
        omega = rng.normal(size=d)
        u_hat = omega + rng.normal(scale=math.sqrt(0.3 + 2.0 / 4.0), size=(n, d))
        draws.append(da.alpha_moments(u_hat))
    g1, g2 = np.mean(draws, axis=0)
    want = da.expected_alpha_moments(lin, dim=d, num_clients=n)
    np.testing.assert_allclose((g1, g2), want, rtol=0.03)


def test_fairness_variance_is_population_variance():
    assert da.fairness_variance([1.0, 2.0, 3.0, 6.0]) == pytest.approx(3.5)


def test_joint_search_equals_exhaustive_pairs():
    # (33): for each T, λ(T) from the cubic, then h(T, λ(T)) by plain recursion.
    p, t_max = dataclasses.replace(U_SHAPED, lam=0.05), 120
    found = da.joint_search(p, LIN, t_max)
    pairs = []
    for t in range(1, t_max + 1):
        lam = da.optimal_lambda(
            LIN, summed_noise_var=_sz2(p, t), dim=p.dim, num_clients=p.num_clients
        )[0]
        pairs.append((da.convergence_bound(t, p, lam), t, lam))
    best = min(pairs)
    assert found["t"] == best[1]
    np.testing.assert_allclose(
        [found["bound"], found["lam"]], [best[0], best[2]], rtol=1e-10
    )
    np.testing.assert_allclose(
        found["bound_curve"][1:], [q[0] for q in pairs], rtol=1e-10
    )


def test_tune_reports_t_star_lambda_star_and_curves():
    out = da.tune({"t_max": 150, "rounds": 30, "mu": 2.0, "epsilon": 10.0})
    assert out["t_star"] == da.optimal_rounds(U_SHAPED, 150)["t_star"]
    assert out["bound"].shape == out["lambda_curve"].shape == (151,)
    assert np.all(out["lower_bound"] <= out["bound"] + 1e-12)
    assert 0 <= out["lambda_star"] <= 2 and 1 <= out["joint_t"] <= 150
    assert out["warnings"] == []
    with pytest.raises(ValueError, match="unknown tune-ditto input"):
        da.tune({"lamda": 0.1})


def test_inputs_from_run_config_and_assumption_warnings():
    cfg = SimpleNamespace(
        rounds=30,
        data=SimpleNamespace(num_clients=20),
        privacy=SimpleNamespace(epsilon=None, delta=0.01, clip_norm=20.0),
        algorithm=SimpleNamespace(lr=0.005, personal_lr=0.01, lam=0.1),
    )
    inputs = da.inputs_from_run_config(cfg)
    assert inputs["epsilon"] == math.inf and inputs["lr_personal"] == 0.01
    assert da.tune({**inputs, "t_max": 40})["t_star"] == 40
    bad = da.check_assumptions(TheoryParams(mu=0.5, lr_global=0.5))
    assert any("eta_G" in w for w in bad) and any("mu" in w for w in bad)


def test_docstring_examples():
    assert doctest.testmod(da).failed == 0
