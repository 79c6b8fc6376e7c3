from __future__ import annotations

import numpy as np
import pytest

from rayfl.compression.quantize import (
    code_dtype,
    dequantize,
    quantize,
    quantize_codes,
    quantize_step,
    uplink_range,
)


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 12, 16], ids=lambda b: f"R={b}")
def test_deterministic_error_at_most_half_step(bits: int) -> None:
    # Arrange
    rng = np.random.default_rng(0)
    lo, hi = -3.5, 2.0
    values = rng.uniform(lo, hi, size=20_000)
    step = (hi - lo) / (2**bits - 1)  # seed 000 eq. 6, by hand
    # Act
    decoded = dequantize(
        quantize_codes(values, lo=lo, hi=hi, bits=bits), lo=lo, hi=hi, bits=bits
    )
    # Assert: |error| <= step/2 plus float32 rounding of the decoded level
    float32_slack = 2.0 * np.finfo(np.float32).eps * max(abs(lo), abs(hi))
    assert np.max(np.abs(decoded - values)) <= step / 2 + float32_slack


@pytest.mark.parametrize("bits", [1, 3, 8], ids=lambda b: f"R={b}")
def test_stochastic_rounding_is_unbiased_within_clt_bound(bits: int) -> None:
    # Arrange
    rng = np.random.default_rng(1)
    lo, hi = -1.0, 1.0
    values = rng.uniform(lo, hi, size=64)
    draws = 20_000
    step = (hi - lo) / (2**bits - 1)
    # Act
    codes = quantize_codes(np.tile(values, draws), lo=lo, hi=hi, bits=bits, rng=rng)
    decoded = dequantize(codes, lo=lo, hi=hi, bits=bits).astype(np.float64)
    mean = decoded.reshape(draws, values.size).mean(axis=0)
    # Assert: per-draw error is Bernoulli on two levels, std <= step/2; 5-sigma CLT
    bound = 5.0 * (step / 2.0) / np.sqrt(draws)
    np.testing.assert_allclose(mean, values, rtol=0, atol=bound)
    assert np.max(np.abs(decoded.reshape(draws, -1) - values)) < step + 1e-6


def test_hand_computed_levels_and_saturation() -> None:
    # Arrange: R = 2 over [0, 3] has levels 0, 1, 2, 3 (step 1)
    values = np.array([-5.0, 0.4, 0.6, 1.5, 2.49, 3.0, 9.0])
    # Act
    codes = quantize_codes(values, lo=0.0, hi=3.0, bits=2)
    # Assert: round half up, clamped outside the range
    assert codes.tolist() == [0, 0, 1, 2, 2, 3, 3]
    assert dequantize(codes, lo=0.0, hi=3.0, bits=2).tolist() == [0, 0, 1, 2, 2, 3, 3]


@pytest.mark.parametrize(
    ("bits", "dtype"),
    [
        (1, np.uint8),
        (8, np.uint8),
        (9, np.uint16),
        (16, np.uint16),
        (17, np.uint32),
        (32, np.uint32),
    ],
    ids=["R=1", "R=8", "R=9", "R=16", "R=17", "R=32"],
)
def test_codes_are_unsigned_and_use_r_bits(bits: int, dtype: type) -> None:
    # Arrange
    values = np.linspace(-1.0, 1.0, 101)
    # Act
    codes = quantize_codes(values, lo=-1.0, hi=1.0, bits=bits)
    # Assert
    assert code_dtype(bits) == np.dtype(dtype)
    assert codes.dtype == np.dtype(dtype)
    assert int(codes.min()) == 0
    assert int(codes.max()) == 2**bits - 1


def test_uplink_range_is_clip_plus_three_sigma() -> None:
    # Arrange / Act
    lo, hi = uplink_range(clip_norm=7.0, noise_std=0.016)
    # Assert: A_L = C + 3 sigma_DP, seed 000 eq. 6
    np.testing.assert_allclose([lo, hi], [-7.048, 7.048], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        quantize_step(lo=lo, hi=hi, bits=16), 14.096 / 65535, rtol=1e-12
    )


def test_degenerate_range_decodes_to_lo() -> None:
    # Arrange / Act
    payload = quantize(np.full(5, 2.5), lo=2.5, hi=2.5, bits=4)
    # Assert
    assert payload.codes is not None and payload.codes.tolist() == [0] * 5
    np.testing.assert_allclose(payload.to_dense(), np.full(5, 2.5), rtol=0, atol=0)


def test_quantize_payload_bits_and_values_match_codes() -> None:
    # Arrange
    values = np.linspace(-1.0, 1.0, 10)
    # Act
    payload = quantize(values, lo=-1.0, hi=1.0, bits=16)
    # Assert
    assert payload.payload_bits == 16 * 10
    np.testing.assert_allclose(
        payload.values,
        dequantize(payload.codes, lo=-1.0, hi=1.0, bits=16),
        rtol=0,
        atol=0,
    )


def test_invalid_range_and_bits_raise() -> None:
    with pytest.raises(ValueError, match="lo <= hi"):
        quantize_codes([0.0], lo=1.0, hi=0.0, bits=4)
    with pytest.raises(ValueError, match=r"bits must be in \[1, 32\], got 33"):
        code_dtype(33)
