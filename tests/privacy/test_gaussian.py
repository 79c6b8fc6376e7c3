from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import rdp

from rayfl.privacy.gaussian import (
    accountant_noise_multiplier,
    add_gaussian_noise,
    dp_ditto_noise_std,
    h2fdp_noise_std,
    h2fdp_sensitivity,
    sparse_dp_noise_std,
)


@pytest.mark.parametrize("noise_std", [0.01, 0.7, 25.0], ids=lambda s: f"sigma={s}")
def test_noise_empirical_std_matches_configured(noise_std: float) -> None:
    # Arrange
    draws = 1_000_000
    vector = np.full(draws, 3.0, dtype=np.float32)
    # Act
    noisy = add_gaussian_noise(
        vector, noise_std=noise_std, rng=np.random.default_rng(0)
    )
    noise = noisy.astype(np.float64) - 3.0
    # Assert: sd of the sample std ~ sigma/sqrt(2n), of the mean sigma/sqrt(n); 5 sd
    np.testing.assert_allclose(noise.std(), noise_std, rtol=5 / math.sqrt(2 * draws))
    np.testing.assert_allclose(noise.mean(), 0.0, atol=5 * noise_std / math.sqrt(draws))
    assert noisy.dtype == np.float32


def test_zero_noise_returns_copy_and_negative_raises() -> None:
    vector = np.array([1.0, 2.0], dtype=np.float32)
    out = add_gaussian_noise(vector, noise_std=0.0, rng=np.random.default_rng(0))
    assert out.tolist() == [1.0, 2.0] and out is not vector
    with pytest.raises(ValueError, match="noise_std must be finite and >= 0, got -1.0"):
        add_gaussian_noise(vector, noise_std=-1.0, rng=np.random.default_rng(0))


# Seed 001 §5 "Noise magnitudes for sanity checks": |D_n| = 2625, N = 20, delta = 0.01.
DP_DITTO_TABLE = [
    (20.0, 1.0, 10, 3.27e-2, 7.3e-3),
    (20.0, 1.0, 30, 5.66e-2, 1.27e-2),
    (20.0, 1.0, 80, 9.25e-2, 2.07e-2),
    (20.0, 10.0, 10, 3.27e-3, 7.3e-4),
    (20.0, 10.0, 30, 5.66e-3, 1.27e-3),
    (20.0, 10.0, 80, 9.25e-3, 2.07e-3),
    (20.0, 100.0, 10, 3.27e-4, None),
    (20.0, 100.0, 30, 5.66e-4, None),
    (20.0, 100.0, 80, 9.25e-4, None),
    (10.0, 100.0, 10, 1.64e-4, None),
    (10.0, 100.0, 30, 2.83e-4, None),
    (10.0, 100.0, 80, 4.62e-4, None),
]


@pytest.mark.parametrize(
    ("clip_norm", "epsilon", "num_rounds", "sigma_u", "sigma_global"),
    DP_DITTO_TABLE,
    ids=[f"C={c:g}-eps={e:g}-T={t}" for c, e, t, _, _ in DP_DITTO_TABLE],
)
def test_dp_ditto_noise_std_matches_spec_hand_values(
    clip_norm: float,
    epsilon: float,
    num_rounds: int,
    sigma_u: float,
    sigma_global: float | None,
) -> None:
    # Act
    value = dp_ditto_noise_std(
        clip_norm=clip_norm,
        dataset_size=2625,
        num_rounds=num_rounds,
        num_clients=20,
        epsilon=epsilon,
        delta=0.01,
    )
    # Assert: the spec prints 3 significant digits
    np.testing.assert_allclose(value, sigma_u, rtol=6e-3)
    if sigma_global is not None:
        np.testing.assert_allclose(value / math.sqrt(20), sigma_global, rtol=1e-2)


def test_h2fdp_noise_std_hand_value_and_trusted_edge_factor() -> None:
    # Arrange: c2 = 1.5, q = 0.027, Delta = 2*eta*tau*G = 2*0.1*5*1 = 1, L = 200
    device_sensitivity = h2fdp_sensitivity(
        learning_rate=0.1, local_steps=5, grad_bound=1.0
    )
    edge_sensitivity = h2fdp_sensitivity(
        learning_rate=0.1, local_steps=5, grad_bound=1.0, subnet_size=8
    )
    # Act
    device = h2fdp_noise_std(
        sensitivity=device_sensitivity,
        sample_rate=0.027,
        releases=200,
        epsilon=1.0,
        delta=1e-5,
    )
    edge = h2fdp_noise_std(
        sensitivity=edge_sensitivity,
        sample_rate=0.027,
        releases=200,
        epsilon=1.0,
        delta=1e-5,
    )
    # Assert: 1.5 * 0.027 * 1 * sqrt(200 ln 1e5) = 1.94339 by hand; trusted edge / s_c
    np.testing.assert_allclose(
        device, 1.5 * 0.027 * math.sqrt(200 * 11.512925465), rtol=1e-9
    )
    np.testing.assert_allclose(device, 1.94339, rtol=1e-5)
    np.testing.assert_allclose(edge, device / 8, rtol=1e-12)


def test_sparse_dp_noise_std_hand_value() -> None:
    # sigma_hat * sqrt(s) * C / |b| = 0.6 * 0.5 * 1.0 / 8 (seed 002 eq. 9)
    value = sparse_dp_noise_std(
        noise_multiplier=0.6, clip_norm=1.0, keep_fraction=0.25, batch_size=8
    )
    np.testing.assert_allclose(value, 0.0375, rtol=1e-12)


def _independent_rdp_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    accountant = rdp.RdpAccountant()
    accountant.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)),
            steps,
        )
    )
    return float(accountant.get_epsilon(delta))


def test_accountant_multiplier_matches_published_rdp_value() -> None:
    # notes/anchors_fl_frameworks.md §4.1-4.2: q=0.01, T=100, eps=8, delta=1e-5:
    # z = 0.5009
    # (Opacus and dp-accounting RDP agree).
    z = accountant_noise_multiplier(
        epsilon=8.0, delta=1e-5, sample_rate=0.01, steps=100
    )
    np.testing.assert_allclose(z, 0.5009, rtol=2e-4)
    np.testing.assert_allclose(
        _independent_rdp_epsilon(z, 0.01, 100, 1e-5), 8.0, rtol=1e-3
    )


def test_accountant_multiplier_q1_is_gaussian_composition() -> None:
    # Arrange: k Gaussian releases of multiplier z = one release of z/sqrt(k);
    # RDP is an upper bound, so its z exceeds the exact analytic-Gaussian z.
    exact = math.sqrt(10) * dp_accounting.get_sigma_gaussian(2.0, 1e-5)
    # Act
    z = accountant_noise_multiplier(epsilon=2.0, delta=1e-5, sample_rate=1.0, steps=10)
    # Assert: closed form for RDP of the Gaussian, alpha k / (2 z^2), converted like
    # dp-accounting, minimised on a fine grid of orders
    orders = np.linspace(1.01, 200, 200_000)
    eps = (
        orders * 10 / (2 * z**2)
        + np.log((orders - 1) / orders)
        - (math.log(1e-5) + np.log(orders)) / (orders - 1)
    ).min()
    assert z > exact
    np.testing.assert_allclose(eps, 2.0, rtol=5e-3)


@pytest.mark.slow
def test_accountant_multiplier_pld_matches_published_value() -> None:
    # notes/anchors_fl_frameworks.md §4.2: PLD sigma = 0.4645 (about 30 s).
    z = accountant_noise_multiplier(
        epsilon=8.0, delta=1e-5, sample_rate=0.01, steps=100, accountant="pld"
    )
    np.testing.assert_allclose(z, 0.4645, rtol=1e-3)


@pytest.mark.slow
def test_accountant_multiplier_pld_q1_matches_analytic_gaussian() -> None:
    exact = math.sqrt(10) * dp_accounting.get_sigma_gaussian(2.0, 1e-5)
    z = accountant_noise_multiplier(
        epsilon=2.0, delta=1e-5, sample_rate=1.0, steps=10, accountant="pld"
    )
    np.testing.assert_allclose(z, exact, rtol=1e-3)
