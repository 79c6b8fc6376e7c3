"""Seed 000's Dithering baseline: subtractive dithered quantization (spec §5.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rayfl.compression.dithering import (
    DitheredPayload,
    decode_indices,
    dither_draws,
    dither_encode,
    encode_indices,
    index_widths,
    level_offsets,
)
from rayfl.compression.effective_bits import effective_bits_of_lengths
from rayfl.seeding import rng_for
from rayfl.wireless.effects import flip_bits

B, C = 0.05, 3.0


def _encode(x, *, b=B, seed=0, round=1, client=2):
    return dither_encode(
        x, laplace_scale=b, clip_norm=C, seed=seed, round=round, client=client
    )


@pytest.mark.parametrize("level", [0.0, 0.37, -2.9], ids=["zero", "mid", "edge"])
def test_error_is_laplace_b_whatever_x(level):
    # Oracle: scipy's Laplace(0, b). The law must not depend on x (subtractive
    # dither), so a constant x at 0, mid-range and near the clip edge all pass.
    x = np.full(60_000, level)
    error = _encode(x).values.astype(np.float64) - x
    assert stats.kstest(error, stats.laplace(scale=B).cdf).pvalue > 1e-3
    assert abs(error.mean()) < 5 * math.sqrt(2) * B / math.sqrt(x.size)
    assert error.var() == pytest.approx(2 * B**2, rel=0.05)


def test_error_is_uncorrelated_with_x():
    x = np.random.default_rng(5).uniform(-C, C, 60_000)
    error = _encode(x).values.astype(np.float64) - x
    assert abs(np.corrcoef(x, error)[0, 1]) < 0.02


def test_server_value_is_x_plus_the_shared_dither_noise():
    # Rebuild Δ and u from the shared key, as the server would, and decode by hand.
    x = np.random.default_rng(0).uniform(-1.0, 1.0, 1000)
    payload = _encode(x, seed=7, round=4, client=3)
    rng = rng_for(7, "dither", round=4, client=3)
    gamma = rng.gamma(2.0, B, size=x.size)
    step = 2 * gamma
    u = (rng.random(x.size) - 0.5) * step
    k = np.floor((x + u) / step + 0.5)
    np.testing.assert_allclose(payload.values, k * step - u, rtol=0, atol=1e-6)
    noise = k * step - u - x
    assert np.all(np.abs(noise) <= gamma + 1e-12)  # U(−Δ/2, Δ/2) given Δ
    offsets = np.floor(C / step + 1).astype(np.int64)
    np.testing.assert_array_equal(payload.codes, (k + offsets).astype(np.uint32))


def test_bit_count_matches_log2_of_the_levels_by_hand():
    # C = 3: steps 4, 1, 0.3, 0.01 → K = 1, 4, 11, 301 → 3, 9, 23, 603 levels
    steps = np.array([4.0, 1.0, 0.3, 0.01])
    assert level_offsets(steps, clip_norm=C).tolist() == [1, 4, 11, 301]
    by_hand = [math.ceil(math.log2(2 * k + 1)) for k in (1, 4, 11, 301)]
    assert by_hand == [2, 4, 5, 10]
    assert index_widths(steps, clip_norm=C).tolist() == by_hand
    # = 1 sign bit + ⌈log2(K + 1)⌉ magnitude bits
    assert by_hand == [1 + math.ceil(math.log2(k + 1)) for k in (1, 4, 11, 301)]
    payload = _encode(np.linspace(-C, C, 7))
    steps, _ = payload.draws()
    expected = sum(math.ceil(math.log2(2 * math.floor(C / s + 1) + 1)) for s in steps)
    assert payload.payload_bits == expected


def test_every_code_fits_its_width_and_extremes_decode_in_range():
    x = np.array([-C, C, 0.0] * 2000)
    payload = _encode(x)
    assert np.all(payload.codes < (1 << payload.widths.astype(np.int64)))
    steps, _ = payload.draws()
    assert np.all(np.abs(payload.values - x) <= steps / 2 + 1e-6)


def test_a_bit_error_moves_a_value_by_a_power_of_two_times_its_step():
    x = np.random.default_rng(2).uniform(-1.0, 1.0, 5000)
    payload = _encode(x)
    steps, _ = payload.draws()
    width = payload.widths.astype(np.int64)
    bit = np.random.default_rng(3).integers(0, width)  # one bit inside each index
    flipped = payload.with_codes(payload.codes ^ (1 << bit).astype(np.uint32))
    moved = (flipped.values.astype(np.float64) - payload.values) / steps
    np.testing.assert_allclose(np.abs(moved), 2.0**bit, rtol=1e-5)


def test_bits_above_the_width_are_not_sent():
    payload = _encode(np.zeros(100))
    high = payload.codes | (np.uint32(1) << payload.widths.astype(np.uint32))
    np.testing.assert_array_equal(payload.with_codes(high).values, payload.values)


def test_channel_flips_each_sent_bit_with_the_ber():
    # Through the engine's flip_bits: elements hit w.p. 1 − (1 − e)^{w_i} (eq. 14).
    x = np.random.default_rng(4).uniform(-1.0, 1.0, 200_000)
    payload = _encode(x, b=0.01)
    ber = 2e-3
    received = payload.with_codes(
        flip_bits(
            payload.codes,
            bits_per_element=payload.bits_per_element,
            bit_error_rate=ber,
            rng=np.random.default_rng(9),
        )
    )
    hit = np.count_nonzero(received.codes != payload.codes)
    expected = float(np.sum(1 - (1 - ber) ** payload.widths.astype(float)))
    assert abs(hit - expected) < 5 * math.sqrt(expected)
    # longer strings take more errors: the paper's account of Dithering's loss
    short = _encode(x, b=1.0)
    assert short.payload_bits < payload.payload_bits


def test_same_key_same_payload_other_key_other_payload():
    x = np.random.default_rng(6).uniform(-1.0, 1.0, 500)
    a, b = _encode(x), _encode(x)
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.values, b.values)
    assert not np.array_equal(_encode(x, round=2).values, a.values)


def test_pure_functions_round_trip_and_reject_unclipped_values():
    rng = np.random.default_rng(0)
    steps, dither = dither_draws(4, laplace_scale=B, clip_norm=C, rng=rng)
    x = np.array([0.1, -0.2, 2.9, -3.0])
    codes = encode_indices(x, steps, dither, clip_norm=C)
    assert np.all(
        np.abs(decode_indices(codes, steps, dither, clip_norm=C) - x) <= steps
    )
    with pytest.raises(ValueError, match="clip the model first"):
        encode_indices(x * 2, steps, dither, clip_norm=C)
    with pytest.raises(ValueError, match="laplace_scale"):
        dither_draws(4, laplace_scale=0.0, clip_norm=C, rng=rng)


def test_effective_bits_of_dithered_indices():
    lengths = [0, 0, 2, 2]  # |k| = 0, 0, 2, 3
    e = effective_bits_of_lengths(lengths, fallback_bits=6.0)
    assert e.quantization_bits == 2.0  # 1 sign + mean(0, 0, 2, 2)
    assert e.overhead_bits == 2 * (4 + 2) / 4  # two runs of a width code + run length
    assert e.bits_per_parameter == 5.0


def test_payload_rejects_missing_widths():
    with pytest.raises(ValueError, match="widths"):
        DitheredPayload(
            dim=2,
            values=np.zeros(2, np.float32),
            codes=np.zeros(2, np.uint32),
            lo=-1.0,
            hi=1.0,
        )
