"""The quantized, noisy broadcast (seed 000 eq. 7, 13-14, 18)."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.wireless.channel import WirelessChannel
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.downlink import (
    downlink_bit_error_rate,
    quantize_global,
    receive_broadcast,
)
from rayfl.wireless.modulation import qam_bit_error_rate


def test_quantize_global_is_round_to_nearest_on_the_c_grid() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-25.0, 25.0, 10_000)
    q = quantize_global(x, clip_norm=20.0, bits=16)
    step = 40.0 / 65535
    inside = np.abs(x) <= 20.0
    # |error| ≤ Δ_G/2 = β_G·C inside the range (eq. 7), saturation outside
    assert np.max(np.abs(q[inside] - x[inside])) <= step / 2 + 1e-5
    np.testing.assert_allclose(q[~inside], np.sign(x[~inside]) * 20.0, rtol=1e-6)
    # the levels are −C + iΔ
    i = (q.astype(np.float64) + 20.0) / step
    np.testing.assert_allclose(i, np.round(i), atol=0.01)


def test_error_free_broadcast_is_the_quantized_model_exactly() -> None:
    q = quantize_global(np.linspace(-3, 3, 101), clip_norm=3.0, bits=16)
    received, wrong = receive_broadcast(
        q, clip_norm=3.0, bits=16, bit_error_rate=0.0, rng=np.random.default_rng(1)
    )
    assert wrong == 0
    np.testing.assert_array_equal(received, q)


@pytest.mark.parametrize("ber", [1e-4, 3e-3, 0.05], ids=["1e-4", "3e-3", "5e-2"])
def test_wrong_elements_follow_eq_14(ber: float) -> None:
    d, bits, clip = 200_000, 16, 20.0
    q = quantize_global(
        np.random.default_rng(2).normal(0, 1, d), clip_norm=clip, bits=bits
    )
    received, wrong = receive_broadcast(
        q, clip_norm=clip, bits=bits, bit_error_rate=ber, rng=np.random.default_rng(3)
    )
    rho = 1 - (1 - ber) ** bits  # eq. 14, closed form
    sd = np.sqrt(d * rho * (1 - rho))
    assert abs(wrong - d * rho) < 5 * sd + 1
    assert wrong == int(np.count_nonzero(received != q))
    assert np.all(np.abs(received) <= clip + 1e-5)  # corrupted values stay in range


def test_downlink_ber_uses_the_bs_power() -> None:
    cfg = WirelessConfig()
    channel = WirelessChannel(cfg, 8, np.random.default_rng(4))
    state = channel.realize(np.random.default_rng(5))
    ber = downlink_bit_error_rate(state, qam_order=256)
    # independent: P_BS = 30 dBm = 1 W, σ0² = N0·B, gain = PL(d)·g from the state's
    # SNR at 23 dBm on subchannel 0 would differ; rebuild from the distances.
    snr = 10 ** (state.downlink_snr_db / 10)
    np.testing.assert_allclose(ber, qam_bit_error_rate(snr, qam_order=256))
    noise_w = 10 ** ((-169 - 30) / 10) * 1e6
    path_gain = 1e-3 * state.distances_m**-2.8
    fading = snr * noise_w / (1.0 * path_gain)
    assert np.all(fading > 0) and 0.01 < float(np.mean(fading)) < 10  # Exp(1) draws
