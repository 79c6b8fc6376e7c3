"""Delay minimisation (seed_002 §6.3): min-max latency, against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from policies.delay_min import (
    NOISE_PSD_DBM_HZ,
    DelayMinPolicy,
    bottleneck_threshold,
    shannon_rate_bps,
)
from tests.policies.helpers import make_spaces, observation


def rate_by_hand(gain_db, tx_power_dbm=30.0, bandwidth_hz=15e3, noise_dbm=-107.0):
    """B·log2(1 + P·h/σ²) in watts, with the spec's noise power σ² = -107 dBm."""
    power_w = 10 ** ((tx_power_dbm - 30) / 10)
    noise_w = 10 ** ((noise_dbm - 30) / 10)
    return bandwidth_hz * np.log2(
        1 + power_w * 10 ** (np.asarray(gain_db) / 10) / noise_w
    )


@pytest.mark.parametrize(
    ("distance_m", "rate_kbps"),
    [(5.0, 476.0), (38.0, 310.0), (70.7, 260.0)],
    ids=["5m", "38m", "70.7m"],
)
def test_rate_matches_spec_link_budget_table(distance_m, rate_kbps):
    # Oracle: seed_002 §5.5 "Link budget sanity check" [VERIFIED], 30 dBm, 15 kHz
    path_loss_db = 128.1 + 37.6 * math.log10(distance_m / 1000)
    rate = shannon_rate_bps(
        -path_loss_db,
        bandwidth_hz=15e3,
        tx_power_dbm=30.0,
        noise_psd_dbm_hz=NOISE_PSD_DBM_HZ,
    )
    np.testing.assert_allclose(rate / 1e3, rate_kbps, rtol=0.01)


def test_default_noise_is_minus_107_dbm_over_15_khz():
    np.testing.assert_allclose(NOISE_PSD_DBM_HZ + 10 * math.log10(15e3), -107.0)


def test_latency_terms_match_hand_computation():
    # Arrange: no downlink term; one client, two subchannels
    policy = DelayMinPolicy(*make_spaces(1, 2), downlink_bits=0)
    gain_db = np.array([[-74.7, -84.8]])
    # Act
    latency = policy.latency_s(observation(gain_db, data_size=np.array([1000.0])))
    # Assert: d = τ|D|Φ/f + Z/R = 60·1000·2e5/1.8e9 + 53,227,840 / R
    local_s = 60 * 1000 * 2e5 / 1.8e9
    expected = local_s + 32 * 1_663_370 / rate_by_hand(gain_db)
    np.testing.assert_allclose(latency, expected, rtol=1e-6)


def test_downlink_term_uses_ap_power_and_wideband_gain():
    policy = DelayMinPolicy(*make_spaces(1, 2), payload_bits=1e6, local_steps=0)
    gain_db = np.array([[-70.0, -70.0]])
    latency = policy.latency_s(observation(gain_db))
    expected = 1e6 / rate_by_hand(-70.0, 23.0) + 1e6 / rate_by_hand(-70.0)
    np.testing.assert_allclose(latency, [[expected, expected]], rtol=1e-6)


def brute_force(latency: np.ndarray, eligible: np.ndarray) -> tuple[float, float]:
    """(min over assignments of the max latency, min Σ latency at that max)."""
    clients = list(np.flatnonzero(eligible))
    num_subchannels = latency.shape[1]
    used = min(len(clients), num_subchannels)
    options = [
        [latency[c, k] for c, k in zip(chosen, subchannels, strict=True)]
        for subchannels in itertools.combinations(range(num_subchannels), used)
        for chosen in itertools.permutations(clients, used)
    ]
    bottleneck = min(max(delays) for delays in options)
    return bottleneck, min(sum(d) for d in options if max(d) == bottleneck)


SMALL = [(3, 2), (5, 3), (4, 4), (6, 2), (2, 3)]


@pytest.mark.parametrize("shape", SMALL, ids=[f"N{n}-K{k}" for n, k in SMALL])
def test_minimises_round_latency_like_brute_force(shape):
    # Arrange
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    policy = DelayMinPolicy(*make_spaces(*shape))
    for _ in range(25):
        distance_km = rng.uniform(0.001, 0.0707, shape[0])
        gain_db = -(128.1 + 37.6 * np.log10(distance_km))[:, None] + 10 * np.log10(
            rng.exponential(1.0, shape)
        )
        data_size = rng.integers(300, 2100, shape[0]).astype(float)
        eligible = rng.random(shape[0]) < 0.8
        eligible[rng.integers(shape[0])] = True
        obs = observation(gain_db, eligible=eligible, data_size=data_size)
        latency = policy.latency_s(obs)
        # Act
        action = policy(obs)
        # Assert
        delays = [latency[c, k] for k, c in enumerate(action) if c < shape[0]]
        bottleneck, total = brute_force(latency, eligible)
        np.testing.assert_allclose(max(delays), bottleneck, rtol=1e-12)
        np.testing.assert_allclose(sum(delays), total, rtol=1e-9)


def test_bottleneck_differs_from_min_sum():
    # Min-sum picks (0->0, 1->1): 1 + 10 = 11, max 10; min-max picks 0->1, 1->0:
    # 6 + 6 = 12, max 6.
    latency = np.array([[1.0, 6.0], [6.0, 10.0]])
    assert bottleneck_threshold(latency, 2) == 6.0


def test_no_link_is_scheduled_only_when_needed():
    # Client 1 has no link at all (-inf dB): the only eligible client still goes.
    policy = DelayMinPolicy(*make_spaces(2, 1))
    obs = observation(np.array([[-70.0], [-np.inf]]), eligible=[0, 1])
    np.testing.assert_array_equal(policy(obs), [1])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"payload_bits": 0}, "payload_bits must be > 0"),
        ({"bandwidth_hz": -1.0}, "bandwidth_hz must be > 0"),
        ({"cpu_freq_hz": 0.0}, "cpu_freq_hz must be > 0"),
        ({"local_steps": -1}, "local_steps must be >= 0"),
        ({"downlink_bits": -5.0}, "downlink_bits must be >= 0"),
    ],
    ids=["payload", "bandwidth", "cpu", "steps", "downlink"],
)
def test_bad_parameters_raise(params, message):
    with pytest.raises(ValueError, match=message):
        DelayMinPolicy(*make_spaces(2, 1), **params)


def _star_context(downlink: bool, **training):
    from rayfl.observation import LinkConstants, SystemContext, TrainingConstants

    link = LinkConstants(
        bandwidth_hz=1e5,
        noise_psd_dbm_hz=-170.0,
        tx_power_dbm=20.0,
        bs_tx_power_dbm=33.0,
        downlink_latency=downlink,
        cpu_cycles_per_sample=1e4,
        cpu_frequency_hz=2e9,
    )
    return SystemContext(
        topology="star",
        seed=0,
        rounds=5,
        model_dim=1_000,
        link=link,
        training=TrainingConstants(**training),
    )


def test_latency_is_the_runs_latency_model_from_the_context():
    """Z = Z^do = 32·abs(w); B, N0, P, P^do, Φ, f from the link; step mode τ·abs(b)."""
    gain_db = np.array([[-80.0, -90.0], [-85.0, -75.0]])
    obs = observation(gain_db, data_size=np.array([300.0, 900.0]))
    context = _star_context(True, local_steps=6, batch_size=8)
    policy = DelayMinPolicy(*make_spaces(2, 2), context=context)
    rate = rate_by_hand(gain_db, 20.0, 1e5, -170.0 + 10 * math.log10(1e5))
    wideband_db = 10 * np.log10(np.mean(10 ** (gain_db / 10), axis=1))
    down = 32_000 / rate_by_hand(wideband_db, 33.0, 1e5, -170.0 + 50.0)
    local = 6 * 8 * 1e4 / 2e9  # the same for every client: τ·abs(b)·Φ/f
    expected = (down + local)[:, None] + 32_000 / rate
    np.testing.assert_allclose(policy.latency_s(obs), expected, rtol=1e-6)
    # no downlink in the run's round time: no downlink term; epoch mode: τ = epochs
    plain = DelayMinPolicy(
        *make_spaces(2, 2), context=_star_context(False, local_epochs=2)
    )
    local = 2 * np.array([300.0, 900.0]) * 1e4 / 2e9
    np.testing.assert_allclose(
        plain.latency_s(obs), local[:, None] + 32_000 / rate, rtol=1e-6
    )
    # a parameter passed wins over the run's, even when equal to the default
    given = DelayMinPolicy(*make_spaces(2, 2), context=context, tx_power_dbm=30.0)
    assert given.tx_power_dbm == 30.0 and policy.tx_power_dbm == 20.0


def test_a_compute_term_equal_for_all_clients_does_not_change_the_schedule():
    """The DP-SparFL reproduction ranked with the compute term left out; the run's
    τ·abs(b) adds the same delay to every client, so the schedules are equal."""
    rng = np.random.default_rng(3)
    spaces_ = make_spaces(8, 3)
    without = DelayMinPolicy(*spaces_, payload_bits=32_000, local_steps=0)
    context = _star_context(True, local_steps=60, batch_size=4)
    with_run = DelayMinPolicy(
        *spaces_,
        context=context,
        bandwidth_hz=15e3,
        tx_power_dbm=30.0,
        noise_psd_dbm_hz=NOISE_PSD_DBM_HZ,
        downlink_power_dbm=23.0,
        cycles_per_sample=2e5,
        cpu_freq_hz=1.8e9,
    )
    assert with_run.compute_samples == 240 and with_run.payload_bits == 32_000
    for _ in range(50):
        gain = rng.uniform(-110.0, -70.0, (8, 3))
        eligible = rng.random(8) < 0.8
        obs = observation(gain, eligible=eligible)
        np.testing.assert_array_equal(with_run(obs), without(obs))
