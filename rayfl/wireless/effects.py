"""Channel effects on what the server receives, and the per-round uplink summary.

Server-side stage 1 of the uplink ("channel errors → aggregate → server noise"):

1. ``uplink_round``: per-client SNR, rate, BER, error probabilities, latency, energy.
2. ``flip_bits`` corrupts quantized payloads bit by bit (effects ``"bit_flip"``).
3. ``drop_packets`` draws which uploads arrive (effects ``"packet_loss"``).

Symbol table (paper symbol → code name):

| Symbol        | Code name                       | Source                    |
|---------------|---------------------------------|---------------------------|
| ũ_n (indices) | ``codes``                       | seed_000 eq. (8), §2.6    |
| e_{n,k,L}     | ``bit_error_rate``              | seed_000 eq. (13)         |
| R             | ``bits_per_element``            | seed_000 §2.1             |
| ρ_{n,L}       | ``element_error_probability``   | seed_000 eq. (14)         |
| s_{n,i}       | elements whose mask is non-zero | seed_000 eq. (15)         |
| c_{n,k}       | (``client``, ``subchannel``)    | seed_000 §2.1             |

Implementation details:
    1. Bit errors are i.i.d. Bernoulli(e) on the R low bits of each level index, as
       recommended in seed_000 [AMBIG-1]; an element is corrupted with probability
       exactly eq. (14) and stays inside the quantizer range.
    2. For small BER, draw the corrupted elements first (binomial count, positions
       without replacement), then each mask given >= 1 flip: its lowest flipped bit
       from the truncated geometric law, the bits above it i.i.d. Bernoulli(e).
    3. ``uplink_round`` reports outage and deadline misses as flags, not in the PER.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rayfl.wireless.channel import ChannelState, shannon_rate_bps, snr_linear
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.cost import transmission_time_s, uplink_energy_j, uplink_latency_s
from rayfl.wireless.modulation import (
    element_error_probability,
    outage,
    packet_error_rate,
    qam_bit_error_rate,
)
from rayfl.wireless.units import linear_to_db

__all__ = ["UplinkOutcome", "drop_packets", "flip_bits", "uplink_round"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
UIntArray = npt.NDArray[np.unsignedinteger]

_DENSE_ELEMENT_ERROR = 0.25  # above this mean ρ, draw the R bit planes directly


def _conditional_masks(
    bit_error_rate: FloatArray, count: int, num_bits: int, rng: np.random.Generator
) -> npt.NDArray[np.uint64]:
    """Draw ``count`` R-bit masks of i.i.d. Bernoulli(e) bits, given >= 1 set bit."""
    ber = np.broadcast_to(np.asarray(bit_error_rate, dtype=np.float64), (count,))
    element_error = element_error_probability(ber, bits_per_element=num_bits)
    with np.errstate(divide="ignore"):  # e = 1 gives log1p(-1) = -inf, first bit 0
        first = np.floor(np.log1p(-rng.random(count) * element_error) / np.log1p(-ber))
    first = np.minimum(first, num_bits - 1).astype(np.uint64)[:, None]
    position = np.arange(num_bits, dtype=np.uint64)
    above = (rng.random((count, num_bits)) < ber[:, None]) & (position > first)
    bits = np.where(above | (position == first), np.uint64(1) << position, np.uint64(0))
    return np.asarray(np.bitwise_or.reduce(bits, axis=1), dtype=np.uint64)


def flip_bits(
    codes: npt.ArrayLike,
    *,
    bits_per_element: int,
    bit_error_rate: float | npt.ArrayLike,
    rng: np.random.Generator,
) -> UIntArray:
    """Flip each of the R low bits of each code independently with probability e.

    Args:
        codes: Quantized level indices, any shape, unsigned integer dtype. Never
            mutated (it may be a read-only array from Ray's object store).
        bits_per_element: R, number of low bits that travel, 1..8·itemsize.
        bit_error_rate: BER e in [0, 1]: a scalar, or an array of the shape of
            ``codes`` (one BER per element, e.g. several clients concatenated).
        rng: Source of randomness.

    Returns:
        A new array, same shape and dtype as ``codes``, with the bits flipped.

    Raises:
        ValueError: If the dtype, R or the BER is invalid.
    """
    source, num_bits = np.asarray(codes), bits_per_element
    if source.dtype.kind != "u":
        raise ValueError(f"codes must be unsigned integers, got {source.dtype}")
    max_bits = 8 * source.dtype.itemsize
    if not 1 <= bits_per_element <= max_bits:
        raise ValueError(
            f"bits_per_element must be in 1..{max_bits}, got {bits_per_element}"
        )
    ber = np.asarray(bit_error_rate, dtype=np.float64)
    if ber.ndim and ber.shape != source.shape:
        raise ValueError(
            f"bit_error_rate must be scalar or {source.shape}, got {ber.shape}"
        )
    if not np.all((ber >= 0) & (ber <= 1)):
        raise ValueError("bit_error_rate must lie in [0, 1]")
    received = np.array(source, copy=True, order="C")
    flat, ber_flat, size = received.reshape(-1), ber.reshape(-1), received.size
    if size == 0 or not np.any(ber > 0):
        return received
    element_error = element_error_probability(ber_flat, bits_per_element=num_bits)
    if float(np.mean(element_error)) > _DENSE_ELEMENT_ERROR:
        for bit in range(num_bits):
            flipped = (rng.random(size) < ber_flat).astype(source.dtype)
            flat ^= np.left_shift(flipped, bit, dtype=source.dtype)
        return received
    if ber.ndim == 0:
        num_errors = int(rng.binomial(size, float(element_error[0])))
        positions = rng.choice(size, size=num_errors, replace=False)
        selected_ber = ber_flat
    else:
        positions = np.flatnonzero(rng.random(size) < element_error)
        selected_ber = ber_flat[positions]
    masks = _conditional_masks(selected_ber, positions.size, num_bits, rng)
    flat[positions] ^= masks.astype(source.dtype)
    return received


def drop_packets(
    num_clients: int, *, packet_error_rate: npt.ArrayLike, rng: np.random.Generator
) -> BoolArray:
    """Draw which uploads arrive: client n is lost with probability PER_n.

    Args:
        num_clients: N, number of uploads.
        packet_error_rate: PER per upload in [0, 1], shape (N,).
        rng: Source of randomness (one uniform per upload).

    Returns:
        ``delivered``, shape (N,), bool.

    Example:
        >>> drop_packets(2, packet_error_rate=[0.0, 1.0],
        ...     rng=np.random.default_rng(0)).tolist()
        [True, False]
    """
    per = np.asarray(packet_error_rate, dtype=np.float64)
    if per.shape != (num_clients,):
        raise ValueError(
            f"packet_error_rate must have shape ({num_clients},), got {per.shape}"
        )
    if np.any((per < 0) | (per > 1)):
        raise ValueError("packet_error_rate must lie in [0, 1]")
    return rng.random(num_clients) >= per


@dataclass(frozen=True)
class UplinkOutcome:
    """Per-scheduled-client result of one uplink round; every field has shape (m,).

    Attributes:
        client: int64, client index n.
        subchannel: int64, subchannel index k.
        snr_db: float64, SNR γ in dB, eq. (12).
        rate_bps: float64, Shannon rate in bit/s, eq. (11).
        bit_error_rate: float64, BER e, eq. (13).
        element_error_probability: float64, ρ = 1 − (1 − e)^R, eq. (14).
        packet_error_rate: float64, 1 − (1 − e)^payload_bits.
        outage: bool, SNR below ``snr_threshold_db`` (the upload should be lost).
        transmit_time_s: float64, payload_bits / rate.
        latency_s: float64, computation + transmission time.
        energy_j: float64, transmit + computation energy.
        deadline_missed: bool, transmission time above ``max_latency_s`` τ_max
            (False if unset). τ_max bounds the transmission delay, as constraint
            C5 of seed_000 (r ≥ payload/τ_max) does; computation is not counted.
    """

    client: IntArray
    subchannel: IntArray
    snr_db: FloatArray
    rate_bps: FloatArray
    bit_error_rate: FloatArray
    element_error_probability: FloatArray
    packet_error_rate: FloatArray
    outage: BoolArray
    transmit_time_s: FloatArray
    latency_s: FloatArray
    energy_j: FloatArray
    deadline_missed: BoolArray


def _check_indices(name: str, index: IntArray, upper: int) -> None:
    bad = index[(index < 0) | (index >= upper)]
    if bad.size:
        raise ValueError(f"{name} must be in 0..{upper - 1}, got {int(bad[0])}")
    if index.size > 1:  # the smallest repeated value, as np.unique would find
        ordered = np.sort(index)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if repeated.size:
            raise ValueError(f"{name} {int(repeated[0])} is scheduled twice")


def _checked_uplinks(
    state: ChannelState,
    client: npt.ArrayLike,
    subchannel: npt.ArrayLike,
    tx_power_w: npt.ArrayLike,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Return the scheduled (client, subchannel, power) as arrays, checked.

    Raises:
        ValueError: If an index is out of range or repeated, or a power is invalid.
    """
    client_index = np.asarray(client, dtype=np.int64)
    subchannel_index = np.asarray(subchannel, dtype=np.int64)
    if client_index.ndim != 1 or client_index.shape != subchannel_index.shape:
        raise ValueError(
            "client and subchannel must be 1-D of equal length, got shapes "
            f"{client_index.shape} and {subchannel_index.shape}"
        )
    _check_indices("client", client_index, state.num_clients)
    _check_indices("subchannel", subchannel_index, state.num_subchannels)
    shape = client_index.shape
    power_w = np.broadcast_to(np.asarray(tx_power_w, dtype=np.float64), shape)
    too_high = (power_w <= 0) | (power_w > state.tx_power_w * (1 + 1e-9))
    if np.any(too_high):
        raise ValueError(
            f"tx_power_w must be in (0, {state.tx_power_w:g}] W, got "
            f"{power_w[too_high][0]:g} for client {int(client_index[too_high][0])}"
        )
    return client_index, subchannel_index, power_w


def _latency_and_energy(
    config: WirelessConfig,
    power_w: npt.NDArray[np.float64],
    bits: npt.NDArray[np.float64],
    rate: npt.NDArray[np.float64],
    transmit_s: npt.NDArray[np.float64],
    num_samples: npt.ArrayLike,
    cpu_frequency_hz: npt.ArrayLike | None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Return the round's latency (s) and energy (J) per client (seed_002 §2.6-2.7)."""
    frequency_hz = (
        config.cpu_frequency_hz if cpu_frequency_hz is None else cpu_frequency_hz
    )
    latency = uplink_latency_s(
        payload_bits=bits,
        rate_bps=rate,
        num_samples=num_samples,
        cpu_cycles_per_sample=config.cpu_cycles_per_sample,
        cpu_frequency_hz=frequency_hz,
    )
    energy = uplink_energy_j(
        tx_power_w=power_w,
        transmit_time_s=transmit_s,
        effective_capacitance=config.effective_capacitance,
        cpu_cycles_per_sample=config.cpu_cycles_per_sample,
        num_samples=num_samples,
        cpu_frequency_hz=frequency_hz,
    )
    return latency, energy


def uplink_round(
    state: ChannelState,
    *,
    client: npt.ArrayLike,
    subchannel: npt.ArrayLike,
    tx_power_w: npt.ArrayLike,
    payload_bits: npt.ArrayLike,
    num_samples: npt.ArrayLike,
    bits_per_element: int,
    config: WirelessConfig,
    cpu_frequency_hz: npt.ArrayLike | None = None,
) -> UplinkOutcome:
    """Evaluate the uplink of the m scheduled clients in one channel realization.

    Chains eqs. (11)–(14) of Zhao et al. (seed_000 §2.5) with the latency and energy
    of Wei et al. (seed_002 §2.6–2.7). One client per subchannel and one subchannel
    per client (constraints C2–C3 of seed_000).

    Args:
        state: Channel realization of the round.
        client: (m,) int, scheduled client indices, distinct, in 0..N-1.
        subchannel: (m,) int, their subchannels, distinct, in 0..K-1.
        tx_power_w: (m,) or scalar float, transmit power in W, in (0, P^th].
        payload_bits: (m,) or scalar, uplink payload size in bits.
        num_samples: (m,) or scalar, samples processed in local training.
        bits_per_element: R, bits per quantized element.
        config: Wireless parameters (QAM order, CPU model, thresholds).
        cpu_frequency_hz: (m,) or scalar CPU frequency in Hz; default from config.

    Returns:
        The per-client outcome; every field has shape (m,).

    Raises:
        ValueError: If an index is out of range or repeated, or a power is invalid.
    """
    client_index, subchannel_index, power_w = _checked_uplinks(
        state, client, subchannel, tx_power_w
    )
    shape = client_index.shape
    bits = np.broadcast_to(np.asarray(payload_bits, dtype=np.float64), shape)
    gain = state.gain_linear[client_index, subchannel_index]
    snr = snr_linear(
        tx_power_w=power_w, gain_linear=gain, noise_power_w=state.noise_power_w
    )
    snr_db = linear_to_db(snr)
    rate = shannon_rate_bps(bandwidth_hz=state.bandwidth_hz, snr_linear=snr)
    ber = qam_bit_error_rate(snr, qam_order=config.qam_order)
    transmit_s = transmission_time_s(payload_bits=bits, rate_bps=rate)
    latency, energy = _latency_and_energy(
        config, power_w, bits, rate, transmit_s, num_samples, cpu_frequency_hz
    )
    element_error = element_error_probability(ber, bits_per_element=bits_per_element)
    max_latency_s = np.inf if config.max_latency_s is None else config.max_latency_s
    return UplinkOutcome(
        client=client_index,
        subchannel=subchannel_index,
        snr_db=snr_db,
        rate_bps=rate,
        bit_error_rate=ber,
        element_error_probability=element_error,
        packet_error_rate=packet_error_rate(ber, payload_bits=bits),
        outage=outage(snr_db, threshold_db=config.snr_threshold_db),
        transmit_time_s=transmit_s,
        latency_s=np.broadcast_to(latency, shape).astype(np.float64),
        energy_j=np.broadcast_to(energy, shape).astype(np.float64),
        deadline_missed=np.broadcast_to(transmit_s > max_latency_s, shape).copy(),
    )
