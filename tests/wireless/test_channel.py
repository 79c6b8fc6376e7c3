"""Oracle tests for rayfl.wireless.channel.

Oracles: hand values, link-budget numbers printed in the specs (seed_000 §2.5,
seed_002 §5.5 link budget table) and moments of the fading distributions.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from scipy import stats

import rayfl.wireless.channel as channel_module
from rayfl.wireless.channel import (
    WirelessChannel,
    fading_power_gain,
    noise_power_w,
    path_loss_db,
    place_clients,
    shannon_rate_bps,
    snr_linear,
)
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.units import db_to_linear, dbm_to_w, linear_to_db, w_to_dbm


def test_noise_power_of_table_1_is_minus_109_dbm() -> None:
    # Act: -169 dBm/Hz over 1 MHz (seed_000 §2.5: "-109 dBm ≈ 1.259e-14 W").
    noise_w = noise_power_w(noise_psd_dbm_hz=-169.0, bandwidth_hz=1e6)
    # Assert
    np.testing.assert_allclose(w_to_dbm(noise_w), -109.0, atol=1e-9)
    np.testing.assert_allclose(noise_w, 1.259e-14, rtol=1e-3)


@pytest.mark.parametrize(
    ("distance_m", "ref_db", "exponent", "expected_db"),
    [
        (1.0, 30.0, 2.8, 30.0),
        (10.0, 30.0, 2.8, 58.0),
        (100.0, 30.0, 2.8, 86.0),
        (1000.0, 0.0, 2.0, 60.0),
    ],
    ids=["1m", "10m", "100m", "1km-free-space-exponent"],
)
def test_path_loss_hand_values(
    distance_m: float, ref_db: float, exponent: float, expected_db: float
) -> None:
    # Act
    loss_db = path_loss_db(distance_m, ref_db=ref_db, exponent=exponent)
    # Assert
    np.testing.assert_allclose(loss_db, expected_db, atol=1e-12)


@pytest.mark.parametrize(
    ("distance_m", "mean_snr_db"),
    [(10.0, 74.0), (50.0, 54.4), (100.0, 46.0)],
    ids=["10m", "50m", "100m"],
)
def test_mean_snr_matches_seed_000_verified_values(
    distance_m: float, mean_snr_db: float
) -> None:
    # Arrange: Table I numbers; E[g] = 1 so the mean SNR is the no-fading SNR.
    gain = db_to_linear(-path_loss_db(distance_m, ref_db=30.0, exponent=2.8))
    noise_w = noise_power_w(noise_psd_dbm_hz=-169.0, bandwidth_hz=1e6)
    # Act
    snr = snr_linear(tx_power_w=dbm_to_w(23.0), gain_linear=gain, noise_power_w=noise_w)
    # Assert (spec values are rounded to 0.1 dB)
    np.testing.assert_allclose(linear_to_db(snr), mean_snr_db, atol=0.05)


@pytest.mark.parametrize(
    ("distance_m", "tx_power_dbm", "rate_bps"),
    [
        (5.0, 30.0, 476e3),
        (38.0, 30.0, 310e3),
        (70.7, 30.0, 260e3),
        (5.0, 23.0, 441e3),
        (38.0, 23.0, 276e3),
        (70.7, 23.0, 225e3),
    ],
    ids=["5m-30dBm", "38m-30dBm", "71m-30dBm", "5m-23dBm", "38m-23dBm", "71m-23dBm"],
)
def test_rate_matches_seed_002_link_budget_table(
    distance_m: float, tx_power_dbm: float, rate_bps: float
) -> None:
    # Arrange: PL = 128.1 + 37.6 log10(d/km) = 15.3 + 37.6 log10(d/m); B = 15 kHz.
    gain = db_to_linear(-path_loss_db(distance_m, ref_db=15.3, exponent=3.76))
    snr = snr_linear(
        tx_power_w=dbm_to_w(tx_power_dbm),
        gain_linear=gain,
        noise_power_w=float(dbm_to_w(-107.0)),
    )
    # Act
    rate = shannon_rate_bps(bandwidth_hz=15e3, snr_linear=snr)
    # Assert (table values are rounded to 1 kb/s)
    np.testing.assert_allclose(rate, rate_bps, rtol=3e-3)


@pytest.mark.parametrize(
    ("snr", "rate_bps"),
    [(0.0, 0.0), (1.0, 1e6), (3.0, 2e6), (255.0, 8e6)],
    ids=["snr0", "snr1", "snr3", "snr255"],
)
def test_shannon_rate_hand_values(snr: float, rate_bps: float) -> None:
    # Act
    rate = shannon_rate_bps(bandwidth_hz=1e6, snr_linear=snr)
    # Assert
    np.testing.assert_allclose(rate, rate_bps, rtol=1e-12, atol=1e-9)


def test_rayleigh_power_gain_is_unit_exponential() -> None:
    # Arrange
    rng = np.random.default_rng(1)
    # Act
    gain = fading_power_gain(1_000_000, kind="rayleigh", rng=rng)
    # Assert: E[g] = 1 (std of the mean 1e-3) and P(g > 1) = e^-1.
    np.testing.assert_allclose(gain.mean(), 1.0, atol=5e-3)
    np.testing.assert_allclose(np.mean(gain > 1.0), np.exp(-1.0), atol=5 * 4.8e-4)


def test_rician_power_gain_moments() -> None:
    # Arrange: K = 10 dB; E[g] = 1 and Var[g] = (1 + 2K)/(1 + K)^2 (textbook).
    rng = np.random.default_rng(2)
    k_linear = 10.0
    # Act
    gain = fading_power_gain(1_000_000, kind="rician", rician_k_db=10.0, rng=rng)
    # Assert
    np.testing.assert_allclose(gain.mean(), 1.0, atol=5e-3)
    np.testing.assert_allclose(
        gain.var(), (1 + 2 * k_linear) / (1 + k_linear) ** 2, rtol=2e-2
    )


def test_no_fading_is_exactly_one() -> None:
    gain = fading_power_gain((3, 4), kind="none", rng=np.random.default_rng(0))
    np.testing.assert_array_equal(gain, np.ones((3, 4)))


def test_unknown_fading_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="rayleigh"):
        fading_power_gain(3, kind="nakagami", rng=np.random.default_rng(0))  # type: ignore[arg-type]


def test_place_clients_is_uniform_in_distance() -> None:
    # Act
    distances = place_clients(
        20_000, distance_min_m=10.0, distance_max_m=100.0, rng=np.random.default_rng(3)
    )
    # Assert: support and a Kolmogorov-Smirnov test against U[10, 100].
    assert distances.min() >= 10.0 and distances.max() <= 100.0
    assert stats.kstest(distances, stats.uniform(10.0, 90.0).cdf).pvalue > 1e-3


def test_place_clients_rejects_empty_range() -> None:
    with pytest.raises(ValueError, match="distance_min_m"):
        place_clients(
            3, distance_min_m=50, distance_max_m=50, rng=np.random.default_rng()
        )


def test_channel_geometry_is_fixed_and_fading_redrawn() -> None:
    # Arrange
    channel = WirelessChannel(WirelessConfig(), 20, np.random.default_rng(4))
    # Act
    first = channel.realize(np.random.default_rng(5))
    second = channel.realize(np.random.default_rng(6))
    # Assert
    assert first.gain_linear.shape == (20, 10) and first.gain_linear.dtype == np.float64
    assert first.snr_db.shape == (20, 10) and first.downlink_snr_db.shape == (20,)
    np.testing.assert_array_equal(first.distances_m, second.distances_m)
    assert not np.allclose(first.gain_linear, second.gain_linear)
    assert not first.gain_linear.flags.writeable


def test_channel_is_deterministic_for_a_seed() -> None:
    # Arrange
    config = WirelessConfig()
    # Act
    states = [
        WirelessChannel(config, 8, np.random.default_rng(7)).realize(
            np.random.default_rng(8)
        )
        for _ in range(2)
    ]
    # Assert
    np.testing.assert_array_equal(states[0].snr_db, states[1].snr_db)


def test_channel_without_fading_matches_link_budget() -> None:
    # Arrange: SNR[dB] = 23 dBm - PL(d) + 109 dB (seed_000 §2.5 numbers).
    channel = WirelessChannel(
        WirelessConfig(fading="none"), 5, np.random.default_rng(9)
    )
    # Act
    state = channel.realize(np.random.default_rng(10))
    # Assert
    expected_db = 23.0 - (30.0 + 28.0 * np.log10(state.distances_m)) + 109.0
    np.testing.assert_allclose(
        state.snr_db, np.repeat(expected_db[:, None], 10, 1), atol=1e-9
    )
    np.testing.assert_allclose(state.downlink_snr_db, expected_db + 7.0, atol=1e-9)


def test_channel_mean_gain_over_rounds_equals_path_loss() -> None:
    # Arrange
    channel = WirelessChannel(WirelessConfig(), 4, np.random.default_rng(11))
    rng = np.random.default_rng(12)
    # Act
    gains = np.stack([channel.realize(rng).gain_linear for _ in range(2_000)])
    # Assert: 20,000 Exp(1) draws per client, std of the mean 0.007.
    path_gain = 10 ** (-(30.0 + 28.0 * np.log10(channel.distances_m)) / 10)
    np.testing.assert_allclose(gains.mean(axis=(0, 2)) / path_gain, 1.0, atol=0.035)


def test_docstring_examples() -> None:
    result = doctest.testmod(channel_module)
    assert result.attempted > 0 and result.failed == 0
