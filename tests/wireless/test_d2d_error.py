"""Analytic D2D link error probability (pFedWN, spec seed_003 §2.3, §6.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.selection import make_layout, select_neighbors
from rayfl.wireless.d2d import free_space_reference_loss_db
from rayfl.wireless.d2d_error import (
    collision_probability,
    interference_moments,
    link_error_probability,
    monte_carlo_link_error,
    rayleigh_tail_moments,
    thermal_noise_w,
)

NOISE_W = thermal_noise_w(bandwidth_hz=100e6)
REF = 10 ** (-free_space_reference_loss_db(carrier_frequency_hz=2.4e9) / 10)


def received_w(distance_m: float) -> float:
    """P ĥ² at distance d with Table I values (0.2 W, α_s = 3, d_0 = 1 m)."""
    return 0.2 * REF * distance_m**-3


@pytest.mark.parametrize(("beta", "gamma"), [(2.0, 2.0), (0.5, 1.0), (3.0, 4.0)])
def test_tail_moments_match_numerical_integrals(beta, gamma):
    # Arrange
    def pdf(x):
        return 2 * x / gamma * math.exp(-(x**2) / gamma)

    # Act
    i3, i5 = rayleigh_tail_moments(fading_threshold=beta, rayleigh_factor=gamma)
    # Assert
    np.testing.assert_allclose(
        i3, integrate.quad(lambda x: x**2 * pdf(x), beta, np.inf)[0], rtol=1e-9
    )
    np.testing.assert_allclose(
        i5, integrate.quad(lambda x: x**4 * pdf(x), beta, np.inf)[0], rtol=1e-9
    )


def test_collision_probability_matches_simulated_best_subchannel():
    # Arrange: r picks its best of F sub-channels, sends only above β; P(on f = 0)
    rng = np.random.default_rng(0)
    fading = rng.exponential(2.0, size=(400_000, 14))
    best = fading.argmax(axis=1)
    sends = fading.max(axis=1) >= 4.0
    # Act
    simulated = np.mean(sends & (best == 0))
    analytic = collision_probability(
        fading_threshold=2.0, rayleigh_factor=2.0, num_subchannels=14
    )
    # Assert
    np.testing.assert_allclose(simulated, analytic, atol=4e-3 * 0.25)


SPEC_TABLE = {  # spec seed_003 §6.4: 9 interferers at 15 m, d_s = 10..30 m
    5: [0.0002, 0.0090, 0.0449, 0.0880, 0.1154],
    10: [0.0021, 0.0352, 0.0894, 0.1204, 0.1313],
    15: [0.0067, 0.0599, 0.1107, 0.1294, 0.1341],
}


@pytest.mark.parametrize("sinr_threshold", sorted(SPEC_TABLE), ids=lambda g: f"g{g}")
def test_error_probability_reproduces_spec_table(sinr_threshold):
    # Act
    values = [
        link_error_probability(
            signal_gain_w=received_w(d),
            interferer_gain_w=[received_w(15.0)] * 9,
            sinr_threshold=sinr_threshold,
            noise_power_w=NOISE_W,
        )
        for d in (10.0, 15.0, 20.0, 25.0, 30.0)
    ]
    # Assert
    np.testing.assert_allclose(values, SPEC_TABLE[sinr_threshold], atol=1e-3)
    assert max(values) <= math.exp(-2.0) + 1e-12


def test_interference_moments_of_spec_check_point():
    # Spec §6.4: 9 interferers at 10 m give Ẽ = 8.981e-9 W, D̃ = 6.462e-17 W²
    # (with c = 3e8; we use c = 299 792 458 m/s, 0.14 % lower power).
    mean, var = interference_moments(
        [received_w(10.0)] * 9,
        fading_threshold=2.0,
        rayleigh_factor=2.0,
        num_subchannels=14,
    )
    np.testing.assert_allclose(mean, 8.981e-9, rtol=3e-3)
    np.testing.assert_allclose(var, 6.462e-17, rtol=6e-3)


def test_gated_interference_has_the_bernoulli_moments():
    # Arrange: I = Σ g_r h_r² 1[h_r ≥ β] B_r, B_r ~ Bernoulli(p_r)
    rng = np.random.default_rng(1)
    gains = np.array([received_w(d) for d in (8.0, 12.0, 20.0, 30.0)])
    p = collision_probability(
        fading_threshold=2.0, rayleigh_factor=2.0, num_subchannels=14
    )
    h2 = rng.exponential(2.0, size=(1_000_000, 4))
    on = rng.random((1_000_000, 4)) < p
    draws = np.sum(gains * h2 * (on & (h2 >= 4.0)), axis=1)
    # Act
    mean, var = interference_moments(
        gains,
        fading_threshold=2.0,
        rayleigh_factor=2.0,
        num_subchannels=14,
        interference_var="bernoulli",
    )
    # Assert
    np.testing.assert_allclose(draws.mean(), mean, rtol=0.03)
    np.testing.assert_allclose(draws.var(), var, rtol=0.06)


@pytest.mark.parametrize("variance", ["paper", "bernoulli"])
@pytest.mark.parametrize("distance_m", [12.0, 20.0, 28.0])
def test_monte_carlo_agrees_with_the_integral(distance_m, variance):
    # Arrange
    kwargs = dict(
        signal_gain_w=received_w(distance_m),
        interferer_gain_w=[received_w(d) for d in (9.0, 14.0, 18.0, 25.0, 33.0)],
        sinr_threshold=10.0,
        noise_power_w=NOISE_W,
        interference_var=variance,
    )
    # Act
    analytic = link_error_probability(**kwargs)
    simulated = monte_carlo_link_error(
        **kwargs, rng=np.random.default_rng(2), num_samples=400_000
    )
    # Assert: within 4 standard errors
    stderr = math.sqrt(max(analytic * (1 - analytic), 1e-6) / 400_000)
    assert abs(simulated - analytic) < 4 * stderr + 1e-4


def test_no_interferer_guard_matches_closed_form():
    # P_err = ∫_β^edge pdf = e^{−β²/Γ} − e^{−edge²/Γ}, edge² = γ σ² / (P ĥ²)
    signal = received_w(400.0)  # far: the SNR edge lies above β
    edge2 = 5.0 * NOISE_W / signal
    expected = math.exp(-4.0 / 2.0) - math.exp(-edge2 / 2.0)
    value = link_error_probability(
        signal_gain_w=signal,
        interferer_gain_w=[],
        sinr_threshold=5.0,
        noise_power_w=NOISE_W,
    )
    assert edge2 > 4.0
    np.testing.assert_allclose(value, expected, rtol=1e-8)


def test_max_of_f_pdf_selects_fewer_than_single():
    kwargs = dict(
        signal_gain_w=received_w(18.0),
        interferer_gain_w=[received_w(15.0)] * 9,
        sinr_threshold=5.0,
        noise_power_w=NOISE_W,
    )
    single = link_error_probability(**kwargs)
    best = link_error_probability(**kwargs, pdf="max_of_F")
    assert best > single


@pytest.mark.parametrize(
    ("sinr_threshold", "expected"), [(5, 4.0), (10, 3.0), (15, 2.0)], ids=str
)
def test_mean_selected_neighbors_over_100_layouts(sinr_threshold, expected):
    # Arrange: 11 nodes uniform in 50 x 50 m², random target, ε = 0.05
    topology = D2DTopologyConfig(sinr_threshold=sinr_threshold, epsilon=0.05)
    # Act
    counts = []
    for seed in range(100):
        layout = make_layout(topology, 11, seed=seed)
        (selection,) = select_neighbors(layout, topology, seed=seed)
        counts.append(len(selection.neighbors))
        direct = np.flatnonzero(selection.error_probability < 0.05)
        assert set(direct) == set(selection.neighbors)
    # Assert: the paper's 4 / 3 / 2 selected neighbors (Table II cases)
    assert abs(np.mean(counts) - expected) <= 0.5, np.mean(counts)
