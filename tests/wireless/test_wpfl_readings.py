"""The WPFL paper's untried link readings: full-band broadcast noise, τ_max deadline."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rayfl.config import load_config
from rayfl.schedule import Schedule
from rayfl.uplink import UplinkModel, downlink_time_s
from rayfl.wireless.channel import WirelessChannel
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.downlink import downlink_bit_error_rate


def _state(**fields):
    channel = WirelessChannel(WirelessConfig(**fields), 20, np.random.default_rng(5))
    return channel.realize(np.random.default_rng(6))


def test_full_band_broadcast_has_k_times_the_noise():
    # Arrange: the same geometry and fading, the broadcast on B or on K·B
    sub, full = _state(), _state(downlink_band="full")
    # Act / Assert: SNR lower by 10·log10(K) = 10 dB; the uplink is untouched
    np.testing.assert_allclose(
        full.downlink_snr_db, sub.downlink_snr_db - 10.0, rtol=0, atol=1e-9
    )
    np.testing.assert_array_equal(full.snr_db, sub.snr_db)
    assert sub.downlink_bandwidth_hz == 1e6 and full.downlink_bandwidth_hz == 1e7
    # and the downlink BER grows (the noise is what the reading changes)
    ber_sub = downlink_bit_error_rate(sub, qam_order=256)
    ber_full = downlink_bit_error_rate(full, qam_order=256)
    assert np.all(ber_full >= ber_sub) and ber_full.sum() > 10 * ber_sub.sum()


def test_full_band_broadcast_time_uses_the_whole_band():
    # Arrange
    full = _state(downlink_band="full")
    clients = np.arange(3)
    # Act
    seconds = downlink_time_s(full, clients, model_bits=1e6)
    # Assert: Z / (K·B·log2(1 + SNR)) with the full-band SNR
    snr = 10.0 ** (full.downlink_snr_db[clients] / 10.0)
    np.testing.assert_allclose(seconds, 1e6 / (1e7 * np.log2(1.0 + snr)), rtol=1e-12)


def test_unknown_downlink_band_is_refused():
    with pytest.raises(ValueError, match="downlink_band"):
        WirelessConfig(downlink_band="wide")


def _uplink(max_latency_s):
    cfg = load_config(
        {
            "data": {"dataset": "digits", "num_clients": 20},
            "model": {"kind": "mlr"},
            "algorithm": {"kind": "fedavg", "local_steps": 1, "batch_size": 8},
            "wireless": {"effects": "none", "max_latency_s": max_latency_s},
            "compression": {"quantize_bits": 16, "quantize_range": "clip"},
            "privacy": {"clip_norm": 1.0},
        }
    )
    return UplinkModel(cfg, num_train=np.full(20, 50))


def test_uploads_that_miss_the_deadline_are_lost():
    # Arrange: 10 clients on subchannels 0..9, a payload of 10 Mbit
    schedule = Schedule(np.arange(10), subchannel=np.arange(10))
    bits = np.full(10, 1e7)
    rows, _ = _uplink(None).link(0, schedule, bits)
    transmit = 1e7 / np.array([rows[c]["rate_bps"] for c in range(10)])
    tau = float(np.median(transmit))
    # Act
    _, free = _uplink(None).link(0, schedule, bits)
    _, timed = _uplink(tau).link(0, schedule, bits)
    # Assert: without τ_max all arrive; with it exactly the late ones are lost
    # (late = transmission time above τ_max, as constraint C5 bounds it)
    assert free.delivered.all()
    np.testing.assert_array_equal(timed.delivered, transmit <= tau)
    assert 0 < timed.delivered.sum() < 10
    assert math.isfinite(tau)
