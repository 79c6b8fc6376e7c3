"""Per-client uplink latency and energy: local computation plus transmission.

Implements the communication and computation models of Wei et al. 2023, Sec. III-A and
III-B (spec seed_002 §2.6–2.7; the paper writes them inline, without eq. numbers):

- computation latency d^lo = τ·abs(D_i)·Φ_i / f_i,
- transmission latency d^up = Z_i / C_{i,j}^up,
- transmission energy E^co = P_i·d^up,
- computation energy E^cp = χ_i·τ·abs(D_i)·Φ_i·f_i²/2 (Dinh et al., ref. [29] there).

All functions are vectorized: every argument broadcasts (typically shape (m,) over the
scheduled clients).

Symbol table (paper symbol → code name):

| Symbol          | Code name                   | Unit        |
|-----------------|-----------------------------|-------------|
| τ·abs(D_i)      | ``num_samples``             | samples     |
| Φ_i             | ``cpu_cycles_per_sample``   | cycles      |
| f_i             | ``cpu_frequency_hz``        | cycles/s    |
| χ_i (κ)         | ``effective_capacitance``   | –           |
| Z_i             | ``payload_bits``            | bits        |
| C_{i,j}^up      | ``rate_bps``                | bit/s       |
| P_i             | ``tx_power_w``              | W           |
| d^up            | ``transmit_time_s``         | s           |
| d^lo + d^up     | ``latency_s``               | s           |
| E^co + E^cp     | ``energy_j``                | J           |

Implementation details:
    1. ``num_samples`` is the number of samples processed in the round, τ·abs(D_i) in
       the paper's formula; callers that count mini-batch steps pass τ·abs(b)
       (seed_002 [AMBIG-8]).
    2. The downlink latency d^do of seed_002 §2.8 is not included: these are uplink
       costs. A zero rate gives an infinite transmission time (no warning).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.wireless.channel import noise_power_w, shannon_rate_bps, snr_linear
from rayfl.wireless.units import dbm_to_w

__all__ = [
    "computation_energy_j",
    "computation_latency_s",
    "transmission_time_s",
    "uplink_airtime_s",
    "uplink_energy_j",
    "uplink_latency_s",
]

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike


def computation_latency_s(
    *,
    num_samples: ArrayLike,
    cpu_cycles_per_sample: ArrayLike,
    cpu_frequency_hz: ArrayLike,
) -> FloatArray:
    """Compute the local training time d^lo = τ·abs(D_i)·Φ_i/f_i (seed_002 §2.7).

    Args:
        num_samples: Samples processed this round (τ·abs(D_i)), >= 0.
        cpu_cycles_per_sample: Φ_i, CPU cycles per sample, > 0.
        cpu_frequency_hz: f_i, CPU frequency in cycles/s, > 0.

    Returns:
        Latency in s, broadcast shape, float64.

    Example:
        >>> float(computation_latency_s(
        ...     num_samples=100, cpu_cycles_per_sample=1e6, cpu_frequency_hz=1e9))
        0.1
    """
    cycles = np.asarray(num_samples, dtype=np.float64) * np.asarray(
        cpu_cycles_per_sample, dtype=np.float64
    )
    return cycles / np.asarray(cpu_frequency_hz, dtype=np.float64)


def transmission_time_s(*, payload_bits: ArrayLike, rate_bps: ArrayLike) -> FloatArray:
    """Compute the uplink transmission time d^up = Z_i / C^up (seed_002 §2.6).

    Args:
        payload_bits: Z_i, bits sent, >= 0.
        rate_bps: Uplink rate in bit/s, >= 0 (0 gives inf for a non-empty payload).

    Returns:
        Time in s, broadcast shape, float64.

    Example:
        >>> float(transmission_time_s(payload_bits=2e6, rate_bps=1e6))
        2.0
    """
    bits = np.asarray(payload_bits, dtype=np.float64)
    rate = np.asarray(rate_bps, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        time_s = bits / rate
    return np.where(bits == 0, 0.0, time_s)


def uplink_airtime_s(
    gain_linear: ArrayLike,
    *,
    payload_bits: ArrayLike,
    bandwidth_hz: float,
    noise_psd_dbm_hz: float,
    tx_power_dbm: float,
) -> FloatArray:
    """Return the uplink airtime d^up = Z / (B·log2(1 + P·g/(N0·B))) at gain g.

    The chain of :func:`rayfl.wireless.effects.uplink_round` (SNR, Shannon
    rate, transmission time) from link constants, for a scheduler that
    predicts a gain (the star's context hands it to policies).

    Example:
        >>> float(uplink_airtime_s(1.0, payload_bits=2e6, bandwidth_hz=1e6,
        ...     noise_psd_dbm_hz=-60.0, tx_power_dbm=0.0))
        2.0
    """
    snr = snr_linear(
        tx_power_w=float(dbm_to_w(tx_power_dbm)),
        gain_linear=gain_linear,
        noise_power_w=noise_power_w(
            noise_psd_dbm_hz=noise_psd_dbm_hz, bandwidth_hz=bandwidth_hz
        ),
    )
    rate = shannon_rate_bps(bandwidth_hz=bandwidth_hz, snr_linear=snr)
    return transmission_time_s(payload_bits=payload_bits, rate_bps=rate)


def uplink_latency_s(
    *,
    payload_bits: ArrayLike,
    rate_bps: ArrayLike,
    num_samples: ArrayLike,
    cpu_cycles_per_sample: ArrayLike,
    cpu_frequency_hz: ArrayLike,
) -> FloatArray:
    """Compute the client's round latency d^lo + d^up (seed_002 §2.6–2.8).

    Args:
        payload_bits: Z_i, bits sent, >= 0.
        rate_bps: Uplink rate in bit/s, >= 0.
        num_samples: Samples processed this round (τ·abs(D_i)), >= 0.
        cpu_cycles_per_sample: Φ_i, CPU cycles per sample, > 0.
        cpu_frequency_hz: f_i, CPU frequency in cycles/s, > 0.

    Returns:
        Latency in s, broadcast shape, float64.

    Example:
        >>> float(uplink_latency_s(payload_bits=1e6, rate_bps=1e6, num_samples=10,
        ...     cpu_cycles_per_sample=1e8, cpu_frequency_hz=1e9))
        2.0
    """
    compute_s = computation_latency_s(
        num_samples=num_samples,
        cpu_cycles_per_sample=cpu_cycles_per_sample,
        cpu_frequency_hz=cpu_frequency_hz,
    )
    return compute_s + transmission_time_s(payload_bits=payload_bits, rate_bps=rate_bps)


def computation_energy_j(
    *,
    effective_capacitance: ArrayLike,
    cpu_cycles_per_sample: ArrayLike,
    num_samples: ArrayLike,
    cpu_frequency_hz: ArrayLike,
) -> FloatArray:
    """Compute the CPU energy E^cp = χ_i·τ·abs(D_i)·Φ_i·f_i²/2 (seed_002 §2.7).

    Args:
        effective_capacitance: χ_i, effective switched capacitance, >= 0.
        cpu_cycles_per_sample: Φ_i, CPU cycles per sample, > 0.
        num_samples: Samples processed this round (τ·abs(D_i)), >= 0.
        cpu_frequency_hz: f_i, CPU frequency in cycles/s, > 0.

    Returns:
        Energy in J, broadcast shape, float64.

    Example:
        >>> round(float(computation_energy_j(effective_capacitance=2e-28,
        ...     cpu_cycles_per_sample=1e9, num_samples=1, cpu_frequency_hz=1e9)), 12)
        0.1
    """
    frequency = np.asarray(cpu_frequency_hz, dtype=np.float64)
    cycles = np.asarray(num_samples, dtype=np.float64) * np.asarray(
        cpu_cycles_per_sample, dtype=np.float64
    )
    capacitance = np.asarray(effective_capacitance, dtype=np.float64)
    return capacitance * cycles * frequency**2 / 2.0


def uplink_energy_j(
    *,
    tx_power_w: ArrayLike,
    transmit_time_s: ArrayLike,
    effective_capacitance: ArrayLike,
    cpu_cycles_per_sample: ArrayLike,
    num_samples: ArrayLike,
    cpu_frequency_hz: ArrayLike,
) -> FloatArray:
    """Compute the client's round energy E^co + E^cp (seed_002 §2.6–2.7, C6).

    E^co = P_i·d^up is the transmit energy; E^cp = χ_i·τ·abs(D_i)·Φ_i·f_i²/2.

    Args:
        tx_power_w: P_i, transmit power in W, >= 0.
        transmit_time_s: d^up, transmission time in s, >= 0.
        effective_capacitance: χ_i, effective switched capacitance, >= 0.
        cpu_cycles_per_sample: Φ_i, CPU cycles per sample, > 0.
        num_samples: Samples processed this round (τ·abs(D_i)), >= 0.
        cpu_frequency_hz: f_i, CPU frequency in cycles/s, > 0.

    Returns:
        Energy in J, broadcast shape, float64.

    Example:
        >>> float(uplink_energy_j(tx_power_w=0.5, transmit_time_s=2.0,
        ...     effective_capacitance=0.0, cpu_cycles_per_sample=1.0,
        ...     num_samples=1, cpu_frequency_hz=1.0))
        1.0
    """
    transmit_j = np.asarray(tx_power_w, dtype=np.float64) * np.asarray(
        transmit_time_s, dtype=np.float64
    )
    compute_j = computation_energy_j(
        effective_capacitance=effective_capacitance,
        cpu_cycles_per_sample=cpu_cycles_per_sample,
        num_samples=num_samples,
        cpu_frequency_hz=cpu_frequency_hz,
    )
    return transmit_j + compute_j
