"""Oracle tests for rayfl.wireless.modulation.

Oracles: scipy's normal tail for Q, the textbook Rayleigh-average BER of 4-QAM
0.5·(1 − sqrt(γ̄/(1+γ̄))), the constants of eq. (13) printed in seed_000 §2.5, its
Rayleigh-averaged error probabilities (seed_000 §2.5 [VERIFIED]) and exact rationals.
"""

from __future__ import annotations

import doctest
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

import rayfl.wireless.modulation as modulation_module
from rayfl.wireless.modulation import (
    element_error_probability,
    outage,
    packet_error_rate,
    qam_bit_error_rate,
)


@pytest.mark.parametrize("snr", [0.1, 1.0, 4.0, 10.0], ids=["0.1", "1", "4", "10"])
def test_4qam_ber_is_gaussian_tail_of_sqrt_2snr(snr: float) -> None:
    # Arrange: for M = 4, eq. (13) reduces to Q(sqrt(2γ)) (Gray-coded QPSK).
    expected = stats.norm.sf(np.sqrt(2.0 * snr))
    # Act
    ber = qam_bit_error_rate(snr, qam_order=4)
    # Assert
    np.testing.assert_allclose(ber, expected, rtol=1e-12)


@pytest.mark.parametrize(
    "snr", [1.0, 30.0, 100.0, 300.0], ids=["1", "30", "100", "300"]
)
def test_256qam_ber_matches_printed_constants(snr: float) -> None:
    # Arrange: seed_000 §2.5: "prefactor is 0.46875 and the argument sqrt(0.09412·γ)".
    expected = 0.46875 * stats.norm.sf(np.sqrt(0.09412 * snr))
    # Act
    ber = qam_bit_error_rate(snr, qam_order=256)
    # Assert (0.09412 is rounded to 4 significant digits)
    np.testing.assert_allclose(ber, expected, rtol=2e-3)


@pytest.mark.parametrize("mean_snr", [0.5, 3.0, 30.0], ids=["-3dB", "4.8dB", "14.8dB"])
def test_rayleigh_average_4qam_ber_matches_closed_form(mean_snr: float) -> None:
    # Arrange: average the AWGN BER over exponential SNR draws.
    rng = np.random.default_rng(20)
    snr = mean_snr * rng.exponential(size=1_000_000)
    closed_form = 0.5 * (1.0 - np.sqrt(mean_snr / (1.0 + mean_snr)))
    # Act
    samples = qam_bit_error_rate(snr, qam_order=4)
    # Assert: within 5 standard errors of the Monte-Carlo mean.
    standard_error = samples.std() / np.sqrt(samples.size)
    np.testing.assert_allclose(samples.mean(), closed_form, atol=5 * standard_error)


@pytest.mark.parametrize("mean_snr", [10.0, 1000.0], ids=["10dB", "30dB"])
def test_rayleigh_average_256qam_ber_monte_carlo_vs_quadrature(mean_snr: float) -> None:
    # Arrange
    rng = np.random.default_rng(21)
    samples = qam_bit_error_rate(
        mean_snr * rng.exponential(size=1_000_000), qam_order=256
    )

    def integrand(x: float) -> float:
        prefactor = (2 * 16 - 2) / (16 * 4)  # (2√M − 2)/(√M log2 √M), M = 256
        tail = stats.norm.sf(np.sqrt(3 * x * 8 / 255))
        return float(prefactor * tail * np.exp(-x / mean_snr) / mean_snr)

    # Act
    average, _ = integrate.quad(integrand, 0.0, np.inf, limit=200)
    # Assert
    standard_error = samples.std() / np.sqrt(samples.size)
    np.testing.assert_allclose(samples.mean(), average, atol=5 * standard_error)


@pytest.mark.parametrize(
    ("distance_m", "expected"),
    [(50.0, 9e-5), (100.0, 6e-4)],
    ids=["50m", "100m"],
)
def test_rayleigh_average_element_error_matches_seed_000(
    distance_m: float, expected: float
) -> None:
    # Arrange: seed_000 §2.5 [VERIFIED]: E[ρ_L] over Rayleigh fading with Table I.
    mean_snr = 10 ** ((23.0 - 30.0 - 28.0 * np.log10(distance_m) + 109.0) / 10)

    def integrand(x: float) -> float:
        ber = qam_bit_error_rate(mean_snr * x, qam_order=256)
        return float(element_error_probability(ber, bits_per_element=16) * np.exp(-x))

    breaks = [0.0, 1e-6, 1e-4, 1e-2, 1.0, np.inf]
    # Act
    average = sum(
        integrate.quad(integrand, lo, hi, limit=200)[0]
        for lo, hi in zip(breaks[:-1], breaks[1:], strict=True)
    )
    # Assert (the spec prints one significant digit)
    np.testing.assert_allclose(average, expected, rtol=0.1)


def test_ber_is_decreasing_in_snr_and_starts_at_half_prefactor() -> None:
    # Act
    ber = qam_bit_error_rate(np.logspace(-3, 4, 200), qam_order=256)
    # Assert
    assert np.all(np.diff(ber) <= 0)
    np.testing.assert_allclose(qam_bit_error_rate(0.0, qam_order=256), 0.234375)


@pytest.mark.parametrize("qam_order", [2, 8, 32, 100], ids=["2", "8", "32", "100"])
def test_non_square_qam_is_rejected(qam_order: int) -> None:
    with pytest.raises(ValueError, match="power of 4"):
        qam_bit_error_rate(1.0, qam_order=qam_order)


@pytest.mark.parametrize(
    ("ber", "bits"),
    [(Fraction(1, 2), 2), (Fraction(1, 1000), 16), (Fraction(1, 10**20), 16)],
    ids=["half-2bits", "1e-3-16bits", "1e-20-16bits"],
)
def test_element_error_probability_equals_exact_rational(
    ber: Fraction, bits: int
) -> None:
    # Arrange: exact 1 − (1 − e)^R in rational arithmetic.
    exact = float(1 - (1 - ber) ** bits)
    # Act
    result = element_error_probability(float(ber), bits_per_element=bits)
    # Assert
    np.testing.assert_allclose(result, exact, rtol=1e-12)


def test_packet_error_rate_vectorized_and_exact() -> None:
    # Arrange
    ber = np.array([0.0, 1e-9, 0.5, 1.0, 0.3])
    bits = np.array([10, 1_000_000, 3, 2, 0])
    with localcontext() as context:
        context.prec = 60  # exact enough decimal arithmetic as the oracle
        exact = [
            float(1 - (1 - Decimal(float(b))) ** int(n))
            for b, n in zip(ber, bits, strict=True)
        ]
    # Act
    result = packet_error_rate(ber, payload_bits=bits)
    # Assert
    np.testing.assert_allclose(result, exact, rtol=1e-9, atol=0)


def test_error_probability_rejects_out_of_range_ber() -> None:
    with pytest.raises(ValueError, match="bit_error_rate"):
        element_error_probability(1.5, bits_per_element=16)


@pytest.mark.parametrize(
    ("threshold_db", "expected"),
    [(None, [False, False, False]), (5.0, [True, False, False])],
    ids=["no-threshold", "5dB"],
)
def test_outage_flags_snr_strictly_below_threshold(
    threshold_db: float | None, expected: list[bool]
) -> None:
    # Act
    flags = outage(np.array([-3.0, 5.0, 20.0]), threshold_db=threshold_db)
    # Assert
    assert flags.tolist() == expected


def test_docstring_examples() -> None:
    result = doctest.testmod(modulation_module)
    assert result.attempted > 0 and result.failed == 0
