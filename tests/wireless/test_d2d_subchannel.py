"""Best-of-F sub-channel choice and per-round D2D delivery (seed_003 §2.3, A8)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rayfl.wireless.d2d import best_subchannel, d2d_round_delivery


def test_best_subchannel_picks_argmax_and_applies_threshold():
    fading = np.array([[0.5, 3.0, 1.0], [0.1, 0.2, 0.3], [9.0, 1.0, 1.0]])
    channel, on = best_subchannel(fading, fading_threshold=1.5)
    np.testing.assert_array_equal(channel, [1, 2, 0])
    np.testing.assert_array_equal(on, [True, False, True])


@pytest.mark.parametrize("num_subchannels", [1, 4, 14])
def test_isolated_link_success_matches_closed_form(num_subchannels):
    # Arrange: two nodes, no interferer. Success iff max_f h̃² ≥ max(β², γσ²/(Pĥ²)),
    # so P(success) = 1 − (1 − e^{−x/Γ})^F with x that maximum.
    gain = np.array([[0.0, 1e-9], [1e-9, 0.0]])
    power, noise, gamma_th, beta, rayleigh = 0.2, 1e-10, 5.0, 1.0, 2.0
    x = max(beta**2, gamma_th * noise / (power * 1e-9))
    expected = 1 - (1 - math.exp(-x / rayleigh)) ** num_subchannels
    # Act
    successes = [
        d2d_round_delivery(
            gain,
            1,
            tx_power_w=power,
            noise_power_w=noise,
            sinr_threshold=gamma_th,
            fading_threshold=beta,
            rayleigh_factor=rayleigh,
            num_subchannels=num_subchannels,
            rng=np.random.default_rng(seed),
        )[0][0]
        for seed in range(4000)
    ]
    # Assert: 4 standard errors
    stderr = math.sqrt(expected * (1 - expected) / 4000)
    assert abs(np.mean(successes) - expected) < 4 * stderr


def test_co_channel_interferer_lowers_sinr_only_on_its_subchannel():
    # Arrange: node 0 and 1 forced on sub-channel 0, node 2 on sub-channel 1
    gain = np.full((4, 4), 1e-8)
    np.fill_diagonal(gain, 0.0)
    kwargs = dict(
        tx_power_w=1.0,
        noise_power_w=1e-12,
        sinr_threshold=1.0,
        fading_threshold=0.0,
        rayleigh_factor=1.0,
        num_subchannels=2,
    )
    # Act
    _, sinr = d2d_round_delivery(
        gain, 3, rng=np.random.default_rng(0), subchannel=[0, 0, 1, -1], **kwargs
    )
    fading = np.random.default_rng(0).exponential(1.0, size=(4, 2))
    # Assert: same draws as the function's own
    p = 1e-8 * np.array([fading[0, 0], fading[1, 0], fading[2, 1]])
    np.testing.assert_allclose(
        sinr[:3], [p[0] / (1e-12 + p[1]), p[1] / (1e-12 + p[0]), p[2] / 1e-12]
    )
    assert sinr[3] == 0.0
