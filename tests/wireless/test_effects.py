"""Tests for rayfl.wireless.effects.

Oracles: the binomial laws of i.i.d. Bernoulli bit errors (the per-bit flip rate is
the BER; an element fails with 1 − (1 − e)^R, eq. (14) of seed_000; it has >= 2 flips
with 1 − (1 − e)^R − R·e·(1 − e)^(R−1)), counted on 1e6 elements and checked within
5 binomial standard deviations; hand-computed link values for ``uplink_round``.
"""

from __future__ import annotations

import doctest
import time

import numpy as np
import pytest
from scipy import stats

import rayfl.wireless.effects as effects_module
from rayfl.wireless.channel import ChannelState, WirelessChannel
from rayfl.wireless.config import WirelessConfig
from rayfl.wireless.effects import drop_packets, flip_bits, uplink_round

NUM_ELEMENTS = 1_000_000
NUM_BITS = 16


def _half_and_half(low: float, high: float) -> np.ndarray:
    ber = np.full(NUM_ELEMENTS, low)
    ber[NUM_ELEMENTS // 2 :] = high
    return ber


def _assert_binomial_count(observed: float, probabilities: np.ndarray) -> None:
    """Observed count of independent events with these probabilities, within 5σ."""
    mean = probabilities.sum()
    std = np.sqrt(np.sum(probabilities * (1 - probabilities)))
    np.testing.assert_allclose(observed, mean, atol=5 * std + 1e-9)


BER_CASES = {
    "scalar-1e-6": 1e-6,
    "scalar-1e-3": 1e-3,
    "scalar-dense-0.2": 0.2,
    "per-element-sparse": _half_and_half(1e-4, 1e-2),
    "per-element-dense": _half_and_half(0.1, 0.3),
}


@pytest.fixture(scope="module")
def codes() -> np.ndarray:
    return np.random.default_rng(30).integers(
        0, 2**NUM_BITS, size=NUM_ELEMENTS, dtype=np.uint16
    )


@pytest.mark.parametrize("ber", list(BER_CASES.values()), ids=list(BER_CASES))
def test_flip_statistics_match_independent_bernoulli_bits(
    codes: np.ndarray, ber: float | np.ndarray
) -> None:
    # Arrange
    per_element = np.broadcast_to(np.asarray(ber, dtype=np.float64), codes.shape)
    # Act
    received = flip_bits(
        codes,
        bits_per_element=NUM_BITS,
        bit_error_rate=ber,
        rng=np.random.default_rng(31),
    )
    # Assert
    flipped = np.bitwise_xor(received, codes)
    flips_per_element = np.bitwise_count(flipped)
    element_error = 1 - (1 - per_element) ** NUM_BITS  # eq. (14)
    single_flip = NUM_BITS * per_element * (1 - per_element) ** (NUM_BITS - 1)
    _assert_binomial_count(np.count_nonzero(flipped), element_error)
    _assert_binomial_count(
        np.count_nonzero(flips_per_element >= 2), element_error - single_flip
    )
    for bit in range(NUM_BITS):
        _assert_binomial_count(np.count_nonzero((flipped >> bit) & 1), per_element)


def test_number_of_flips_in_corrupted_elements_is_truncated_binomial(
    codes: np.ndarray,
) -> None:
    # Arrange: e = 0.05 gives many multi-bit errors.
    ber = 0.05
    # Act
    received = flip_bits(
        codes,
        bits_per_element=NUM_BITS,
        bit_error_rate=ber,
        rng=np.random.default_rng(32),
    )
    # Assert: chi-square of the flip-count histogram against Binomial(16, 0.05).
    counts = np.bincount(np.bitwise_count(received ^ codes), minlength=NUM_BITS + 1)
    expected = stats.binom.pmf(np.arange(NUM_BITS + 1), NUM_BITS, ber) * NUM_ELEMENTS
    keep = expected > 20
    observed = np.append(counts[keep], counts[~keep].sum())
    expected_bins = np.append(expected[keep], expected[~keep].sum())
    _, p_value = stats.chisquare(
        observed, expected_bins * observed.sum() / expected_bins.sum()
    )
    assert p_value > 1e-4


def test_flip_bits_never_touches_bits_above_r_nor_the_input() -> None:
    # Arrange: uint32 codes with high bits set; read-only like Ray's object store.
    codes = np.full(100_000, 0xABCD0000 + 0x1234, dtype=np.uint32)
    codes.flags.writeable = False
    # Act
    received = flip_bits(
        codes, bits_per_element=16, bit_error_rate=0.3, rng=np.random.default_rng(33)
    )
    # Assert
    assert received.dtype == np.uint32 and received.flags.writeable
    np.testing.assert_array_equal(received >> 16, codes >> 16)
    assert np.all(codes == 0xABCD1234)
    assert np.any(received != codes)


def test_flip_bits_is_deterministic_and_zero_ber_copies(codes: np.ndarray) -> None:
    # Act
    first = flip_bits(
        codes, bits_per_element=16, bit_error_rate=1e-3, rng=np.random.default_rng(34)
    )
    second = flip_bits(
        codes, bits_per_element=16, bit_error_rate=1e-3, rng=np.random.default_rng(34)
    )
    clean = flip_bits(
        codes, bits_per_element=16, bit_error_rate=0.0, rng=np.random.default_rng(34)
    )
    # Assert
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(clean, codes)
    assert clean is not codes


def test_flip_bits_is_fast_for_a_million_elements_at_small_ber(
    codes: np.ndarray,
) -> None:
    # Arrange
    rng = np.random.default_rng(35)
    # Act
    start = time.perf_counter()
    flip_bits(codes, bits_per_element=16, bit_error_rate=1e-5, rng=rng)
    elapsed_s = time.perf_counter() - start
    # Assert: building a 1e6 × 16 Bernoulli matrix alone takes ~0.15 s.
    assert elapsed_s < 0.1


@pytest.mark.parametrize(
    ("codes", "kwargs", "match"),
    [
        (np.zeros(4, dtype=np.int16), {"bits_per_element": 8}, "unsigned"),
        (np.zeros(4, dtype=np.uint16), {"bits_per_element": 17}, "bits_per_element"),
        (
            np.zeros(4, dtype=np.uint8),
            {"bits_per_element": 8, "bit_error_rate": 1.5},
            "bit_error_rate",
        ),
        (
            np.zeros(4, dtype=np.uint8),
            {"bits_per_element": 8, "bit_error_rate": [0.1, 0.2]},
            "bit_error_rate",
        ),
    ],
    ids=["signed", "too-many-bits", "ber-above-1", "ber-bad-shape"],
)
def test_flip_bits_rejects_bad_input(
    codes: np.ndarray, kwargs: dict, match: str
) -> None:
    arguments = {"bit_error_rate": 0.1, **kwargs}
    with pytest.raises(ValueError, match=match):
        flip_bits(codes, rng=np.random.default_rng(0), **arguments)


def test_drop_packets_hand_values_and_rate() -> None:
    # Arrange
    per = np.full(200_000, 0.3)
    # Act
    delivered = drop_packets(
        per.size, packet_error_rate=per, rng=np.random.default_rng(36)
    )
    certain = drop_packets(
        2, packet_error_rate=[0.0, 1.0], rng=np.random.default_rng(37)
    )
    # Assert
    _assert_binomial_count(np.count_nonzero(~delivered), per)
    assert certain.tolist() == [True, False]


def test_drop_packets_rejects_wrong_shape() -> None:
    with pytest.raises(ValueError, match="packet_error_rate"):
        drop_packets(3, packet_error_rate=[0.1, 0.2], rng=np.random.default_rng(0))


def _hand_state() -> ChannelState:
    gain = np.array([[1e-9, 1.5e-9], [2e-9, 2e-9], [3e-9, 1e-9]])
    return ChannelState(
        distances_m=np.array([10.0, 20.0, 30.0]),
        gain_linear=gain,
        gain_db=10 * np.log10(gain),
        snr_db=10 * np.log10(gain / 1e-10),
        downlink_snr_db=np.zeros(3),
        tx_power_w=1.0,
        noise_power_w=1e-10,
        bandwidth_hz=1e6,
    )


def test_uplink_round_hand_values() -> None:
    # Arrange: client 2 on subchannel 0 at 0.1 W: SNR = 0.1·3e-9/1e-10 = 3;
    # client 0 on subchannel 1 at 1 W: SNR = 15. B = 1 MHz → 2 and 4 Mbit/s.
    config = WirelessConfig(
        qam_order=4,
        cpu_cycles_per_sample=1e6,
        cpu_frequency_hz=1e9,
        effective_capacitance=2e-28,
        snr_threshold_db=10.0,
        max_latency_s=1.5,  # between the transmission times 2 s and 1 s
    )
    # Act
    outcome = uplink_round(
        _hand_state(),
        client=[2, 0],
        subchannel=[0, 1],
        tx_power_w=[0.1, 1.0],
        payload_bits=4e6,
        num_samples=1000,
        bits_per_element=16,
        config=config,
    )
    # Assert
    ber = stats.norm.sf(np.sqrt(2 * np.array([3.0, 15.0])))  # 4-QAM: Q(sqrt(2γ))
    np.testing.assert_allclose(outcome.snr_db, 10 * np.log10([3.0, 15.0]), rtol=1e-12)
    np.testing.assert_allclose(outcome.rate_bps, [2e6, 4e6], rtol=1e-12)
    np.testing.assert_allclose(outcome.bit_error_rate, ber, rtol=1e-10)
    np.testing.assert_allclose(
        outcome.element_error_probability, 1 - (1 - ber) ** 16, rtol=1e-9
    )
    np.testing.assert_allclose(
        outcome.packet_error_rate, 1 - (1 - ber) ** 4e6, rtol=1e-6
    )
    np.testing.assert_allclose(outcome.transmit_time_s, [2.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(outcome.latency_s, [3.0, 2.0], rtol=1e-12)
    # energy: 0.1 W·2 s + 0.1 J compute; 1 W·1 s + 0.1 J (2e-28·1e9·1e18/2 = 0.1 J)
    np.testing.assert_allclose(outcome.energy_j, [0.3, 1.1], rtol=1e-12)
    assert outcome.outage.tolist() == [True, False]
    assert outcome.deadline_missed.tolist() == [True, False]


def test_uplink_round_at_max_power_reproduces_state_snr() -> None:
    # Arrange
    channel = WirelessChannel(WirelessConfig(), 20, np.random.default_rng(38))
    state = channel.realize(np.random.default_rng(39))
    client = np.array([3, 7, 11, 19])
    subchannel = np.array([9, 0, 4, 2])
    # Act
    outcome = uplink_round(
        state,
        client=client,
        subchannel=subchannel,
        tx_power_w=state.tx_power_w,
        payload_bits=16 * 7_850,
        num_samples=600,
        bits_per_element=16,
        config=WirelessConfig(),
    )
    # Assert
    np.testing.assert_allclose(
        outcome.snr_db, state.snr_db[client, subchannel], rtol=1e-12
    )
    assert outcome.latency_s.shape == (4,) and not outcome.deadline_missed.any()


@pytest.mark.parametrize(
    ("client", "subchannel", "tx_power_w", "match"),
    [
        ([0, 1], [1, 1], 0.5, "subchannel 1 is scheduled twice"),
        ([0, 0], [0, 1], 0.5, "client 0 is scheduled twice"),
        ([3], [0], 0.5, "client must be in 0..2"),
        ([0], [2], 0.5, "subchannel must be in 0..1"),
        ([0, 1], [0, 1], [0.5, 2.0], "tx_power_w must be in"),
        ([0, 1], [0], 0.5, "equal length"),
    ],
    ids=[
        "dup-subchannel",
        "dup-client",
        "client-range",
        "subchannel-range",
        "power",
        "shape",
    ],
)
def test_uplink_round_rejects_bad_schedule(
    client: list[int], subchannel: list[int], tx_power_w: object, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        uplink_round(
            _hand_state(),
            client=client,
            subchannel=subchannel,
            tx_power_w=tx_power_w,
            payload_bits=1e6,
            num_samples=1,
            bits_per_element=16,
            config=WirelessConfig(),
        )


def test_docstring_examples() -> None:
    result = doctest.testmod(effects_module)
    assert result.attempted > 0 and result.failed == 0
