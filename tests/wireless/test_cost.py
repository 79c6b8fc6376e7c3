"""Oracle tests for rayfl.wireless.cost: hand values and seed_002's printed numbers."""

from __future__ import annotations

import doctest
import warnings

import numpy as np
import pytest

import rayfl.wireless.cost as cost_module
from rayfl.wireless.cost import (
    computation_energy_j,
    computation_latency_s,
    transmission_time_s,
    uplink_energy_j,
    uplink_latency_s,
)


def test_uplink_latency_hand_value() -> None:
    # Arrange: 1000 samples × 1e6 cycles at 1 GHz = 1 s; 1 Mbit at 1 Mbit/s = 1 s.
    # Act
    latency = uplink_latency_s(
        payload_bits=1e6,
        rate_bps=1e6,
        num_samples=1000,
        cpu_cycles_per_sample=1e6,
        cpu_frequency_hz=1e9,
    )
    # Assert
    np.testing.assert_allclose(latency, 2.0, rtol=1e-12)


@pytest.mark.parametrize(
    ("rate_bps", "expected_s"),
    [(476e3, 112.0), (260e3, 205.0)],
    ids=["5m", "corner"],
)
def test_transmission_time_matches_seed_002_mnist_upload(
    rate_bps: float, expected_s: float
) -> None:
    # Arrange: seed_002 §5.5: "1.663 M params × 32 bits = 53.2 Mbit takes 112–205 s".
    payload_bits = 53.2e6
    # Act
    time_s = transmission_time_s(payload_bits=payload_bits, rate_bps=rate_bps)
    # Assert (the spec rounds to 1 s)
    np.testing.assert_allclose(time_s, expected_s, atol=0.6)


@pytest.mark.parametrize(
    ("cpu_frequency_hz", "expected_j"),
    [(1.2e9, 1.7), (2.4e9, 6.9)],
    ids=["1.2GHz", "2.4GHz"],
)
def test_computation_energy_matches_seed_002_ambig_5(
    cpu_frequency_hz: float, expected_j: float
) -> None:
    # Arrange: seed_002 [AMBIG-5]: χ = 2e-28, Φ = 2e5, τ·|D| = 60,000 gives 1.7–6.9 J.
    # Act
    energy = computation_energy_j(
        effective_capacitance=2e-28,
        cpu_cycles_per_sample=2e5,
        num_samples=60_000,
        cpu_frequency_hz=cpu_frequency_hz,
    )
    # Assert (the spec prints two significant digits)
    np.testing.assert_allclose(energy, expected_j, atol=0.05)


def test_computation_latency_matches_seed_002_range() -> None:
    # Arrange: seed_002 §5.5: "d^lo ≈ 5–10 s with τ·|D_i| = 60,000" at 1.2–2.4 GHz.
    # Act
    latency = computation_latency_s(
        num_samples=60_000,
        cpu_cycles_per_sample=2e5,
        cpu_frequency_hz=np.array([2.4e9, 1.2e9]),
    )
    # Assert
    np.testing.assert_allclose(latency, [5.0, 10.0], rtol=1e-12)


def test_uplink_energy_is_vectorized_over_clients() -> None:
    # Arrange: client 0: 0.2 W × 2 s = 0.4 J, no compute;
    # client 1: 1 W × 0.5 s + 1e-28 × 1e9 cycles × (1e9)^2 / 2 = 0.5 + 0.05 J.
    # Act
    energy = uplink_energy_j(
        tx_power_w=np.array([0.2, 1.0]),
        transmit_time_s=np.array([2.0, 0.5]),
        effective_capacitance=np.array([0.0, 1e-28]),
        cpu_cycles_per_sample=1e9,
        num_samples=np.array([1, 1]),
        cpu_frequency_hz=1e9,
    )
    # Assert
    assert energy.shape == (2,)
    np.testing.assert_allclose(energy, [0.4, 0.55], rtol=1e-12)


def test_zero_rate_gives_infinite_latency_and_empty_payload_zero_time() -> None:
    # Act
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        time_s = transmission_time_s(
            payload_bits=np.array([1e6, 0.0]), rate_bps=np.array([0.0, 0.0])
        )
    # Assert
    assert time_s.tolist() == [np.inf, 0.0]


def test_docstring_examples() -> None:
    result = doctest.testmod(cost_module)
    assert result.attempted > 0 and result.failed == 0
