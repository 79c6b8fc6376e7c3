"""Square M-QAM bit error rate, per-element and per-packet error probabilities.

Implements eqs. (13)–(14) of Zhao et al. 2025 (spec seed_000 §2.5); eq. (13) is the
approximation of Cho & Yoon (IEEE Trans. Commun., 2002) cited there as [38].

Symbol table (paper symbol → code name):

| Symbol            | Code name                      | Unit / shape     |
|-------------------|--------------------------------|------------------|
| M_ω               | ``qam_order``                  | –                |
| γ_{n,k,L}         | ``snr_linear``                 | –, any shape     |
| e_{n,k,L}         | ``bit_error_rate``             | –, any shape     |
| R                 | ``bits_per_element``           | bits             |
| ρ_{n,L}           | ``element_error_probability``  | –, any shape     |
| γ_th              | ``threshold_db``               | dB               |

Implementation details:
    1. Eq. (13) is implemented exactly as printed: γ multiplies log2 M, so γ acts as
       Eb/N0 (seed_000 §2.5 "Implement it exactly as written").
    2. 1 − (1 − e)^R is computed as −expm1(R·log1p(−e)), which stays accurate when
       e·R is far below machine epsilon.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "element_error_probability",
    "outage",
    "packet_error_rate",
    "qam_bit_error_rate",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _q_function(x: FloatArray) -> FloatArray:
    """Gaussian tail Q(x) = 0.5·erfc(x/√2)."""
    # Imported here: the cloud and client actors import this module (through
    # ``effects.flip_bits``) but never compute a BER; scipy costs them start-up.
    from scipy.special import erfc

    return np.asarray(0.5 * erfc(x / np.sqrt(2.0)), dtype=np.float64)


def qam_bit_error_rate(snr_linear: npt.ArrayLike, *, qam_order: int) -> FloatArray:
    """Compute the square M-QAM BER of eq. (13) of Zhao et al. (seed_000 §2.5).

    e = [(2√M − 2)/(√M·log2 √M)] · Q(sqrt(3·γ·log2 M/(M − 1))).

    Args:
        snr_linear: Linear SNR γ >= 0, any shape.
        qam_order: M, a power of 4 (4, 16, 64, 256, ...).

    Returns:
        Bit error rate in [0, 0.5], same shape, float64.

    Raises:
        ValueError: If ``qam_order`` is not a power of 4 >= 4.

    Example:
        >>> float(qam_bit_error_rate(0.0, qam_order=4))
        0.5
    """
    bits_per_symbol = int(np.log2(qam_order)) if qam_order > 1 else 0
    if qam_order < 4 or 2**bits_per_symbol != qam_order or bits_per_symbol % 2:
        raise ValueError(
            f"qam_order must be a power of 4 (4, 16, 64, 256, 1024), got {qam_order}"
        )
    snr = np.asarray(snr_linear, dtype=np.float64)
    sqrt_order = np.sqrt(qam_order)
    prefactor = (2.0 * sqrt_order - 2.0) / (sqrt_order * np.log2(sqrt_order))
    argument = np.sqrt(3.0 * snr * bits_per_symbol / (qam_order - 1))
    return np.asarray(prefactor * _q_function(argument), dtype=np.float64)


def _one_minus_power(
    bit_error_rate: npt.ArrayLike, exponent: npt.ArrayLike
) -> FloatArray:
    """Return 1 − (1 − e)^n via expm1/log1p."""
    ber = np.asarray(bit_error_rate, dtype=np.float64)
    if np.any((ber < 0) | (ber > 1)):
        raise ValueError("bit_error_rate must lie in [0, 1]")
    with np.errstate(divide="ignore"):
        log_success = np.log1p(-ber)
    exponent_array = np.asarray(exponent, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        product = exponent_array * log_success
    # 0 bits times log(0) = -inf is nan; zero bits never fail.
    product = np.where(exponent_array == 0, 0.0, product)
    return -np.expm1(product)


def element_error_probability(
    bit_error_rate: npt.ArrayLike, *, bits_per_element: int
) -> FloatArray:
    """Compute ρ = 1 − (1 − e)^R, eq. (14) of Zhao et al. (seed_000 §2.5).

    The probability that at least one of the R bits of a quantized element flips.

    Args:
        bit_error_rate: BER e in [0, 1], any shape.
        bits_per_element: R, bits per quantized element, >= 1.

    Returns:
        Per-element error probability, same shape, float64.

    Example:
        >>> float(element_error_probability(0.5, bits_per_element=2))
        0.75
    """
    if bits_per_element < 1:
        raise ValueError(f"bits_per_element must be >= 1, got {bits_per_element}")
    return _one_minus_power(bit_error_rate, bits_per_element)


def packet_error_rate(
    bit_error_rate: npt.ArrayLike, *, payload_bits: npt.ArrayLike
) -> FloatArray:
    """Compute PER = 1 − (1 − e)^bits: a packet fails if any of its bits flips.

    Same form as eq. (14) of Zhao et al. (seed_000 §2.5) with R replaced by the
    payload size; no channel coding is modelled.

    Args:
        bit_error_rate: BER e in [0, 1], any shape.
        payload_bits: Payload size in bits, >= 0, broadcastable against the BER.

    Returns:
        Packet error rate, broadcast shape, float64.

    Example:
        >>> float(packet_error_rate(0.5, payload_bits=3))
        0.875
    """
    if np.any(np.asarray(payload_bits) < 0):
        raise ValueError("payload_bits must be >= 0")
    return _one_minus_power(bit_error_rate, payload_bits)


def outage(snr_db: npt.ArrayLike, *, threshold_db: float | None) -> BoolArray:
    """Flag links in outage: SNR strictly below the threshold.

    Args:
        snr_db: SNR in dB, any shape.
        threshold_db: Outage threshold γ_th in dB; None means no outage.

    Returns:
        Boolean mask, same shape, True where the link is in outage.

    Example:
        >>> outage([0.0, 10.0], threshold_db=5.0).tolist()
        [True, False]
    """
    snr = np.asarray(snr_db, dtype=np.float64)
    if threshold_db is None:
        return np.zeros(snr.shape, dtype=bool)
    return snr < threshold_db
