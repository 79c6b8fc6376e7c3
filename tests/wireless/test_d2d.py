"""Oracle tests for rayfl.wireless.d2d: hand geometry, the Friis constant of
seed_003 §2.3, a 3-node SINR worked by hand and a brute-force SINR loop."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import rayfl.wireless.d2d as d2d_module
from rayfl.wireless.d2d import (
    d2d_gain_linear,
    d2d_sinr_linear,
    free_space_reference_loss_db,
    pairwise_distances_m,
    place_nodes_square,
)


def test_pairwise_distances_of_a_3_4_5_triangle() -> None:
    # Act
    distances = pairwise_distances_m([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0]])
    # Assert
    expected = [[0.0, 3.0, 5.0], [3.0, 0.0, 4.0], [5.0, 4.0, 0.0]]
    np.testing.assert_allclose(distances, expected, atol=1e-12)


def test_friis_reference_loss_at_2_4_ghz_matches_seed_003() -> None:
    # Act: seed_003 §2.3: (λ_w/4π)² = 9.8946e-5, i.e. −40.05 dB at 1 m.
    loss_db = free_space_reference_loss_db(carrier_frequency_hz=2.4e9)
    # Assert (the spec used λ_w = 0.125 m instead of c/f_c = 0.1249 m)
    np.testing.assert_allclose(loss_db, 40.05, atol=0.01)


def test_gain_clamps_to_reference_distance_and_zeroes_self_links() -> None:
    # Arrange
    distances = np.array([[0.0, 0.5, 10.0], [0.5, 0.0, 2.0], [10.0, 2.0, 0.0]])
    # Act
    gain = d2d_gain_linear(distances, ref_db=40.0, exponent=3.0)
    # Assert: d = 0.5 m is clamped to 1 m; (1/10)^3 and (1/2)^3 below 1e-4.
    expected = 1e-4 * np.array([[0, 1, 1e-3], [1, 0, 0.125], [1e-3, 0.125, 0]])
    np.testing.assert_allclose(gain, expected, rtol=1e-12)


def _three_nodes_on_a_line() -> np.ndarray:
    # A at 0 m, B at 10 m, C at 30 m; exponent 2, 0 dB at 1 m.
    positions = np.array([[0.0, 0.0], [10.0, 0.0], [30.0, 0.0]])
    return d2d_gain_linear(pairwise_distances_m(positions), ref_db=0.0, exponent=2.0)


def test_three_node_sinr_worked_by_hand() -> None:
    # Arrange: A and C transmit 1 W, noise 1e-3 W; g_AB = 1/100, g_CB = 1/400,
    # g_AC = 1/900.
    gain = _three_nodes_on_a_line()
    # Act
    sinr = d2d_sinr_linear(
        gain_linear=gain,
        tx_power_w=1.0,
        transmitting=[True, False, True],
        noise_power_w=1e-3,
    )
    # Assert
    np.testing.assert_allclose(sinr[0, 1], 0.01 / (1e-3 + 1 / 400), rtol=1e-12)
    np.testing.assert_allclose(sinr[2, 1], (1 / 400) / (1e-3 + 0.01), rtol=1e-12)
    # At C only A's signal arrives (C's own gain is 0): no interference.
    np.testing.assert_allclose(sinr[0, 2], (1 / 900) / 1e-3, rtol=1e-12)
    np.testing.assert_array_equal(sinr[1], [0.0, 0.0, 0.0])


def test_three_node_sinr_on_separate_subchannels_has_no_interference() -> None:
    # Act
    sinr = d2d_sinr_linear(
        gain_linear=_three_nodes_on_a_line(),
        tx_power_w=1.0,
        transmitting=[True, False, True],
        noise_power_w=1e-3,
        subchannel=[0, 0, 1],
    )
    # Assert
    np.testing.assert_allclose(sinr[0, 1], 0.01 / 1e-3, rtol=1e-12)
    np.testing.assert_allclose(sinr[2, 1], (1 / 400) / 1e-3, rtol=1e-12)


@pytest.mark.parametrize(
    "num_subchannels", [1, 3], ids=["one-channel", "three-channels"]
)
def test_sinr_matches_brute_force_loop(num_subchannels: int) -> None:
    # Arrange
    rng = np.random.default_rng(40)
    positions = place_nodes_square(7, side_m=50.0, rng=rng)
    fading = rng.exponential(2.0, size=(7, 7))
    gain = d2d_gain_linear(
        pairwise_distances_m(positions),
        ref_db=40.05,
        exponent=3.0,
        fading_power_gain=fading,
    )
    power = rng.uniform(0.1, 0.3, size=7)
    active = rng.random(7) < 0.6
    channel = rng.integers(0, num_subchannels, size=7)
    noise_w = 4.002e-13
    expected = np.zeros((7, 7))
    for i in range(7):
        for j in range(7):
            if not active[i]:
                continue
            interference = sum(
                power[k] * gain[k, j]
                for k in range(7)
                if k != i and active[k] and channel[k] == channel[i]
            )
            expected[i, j] = power[i] * gain[i, j] / (noise_w + interference)
    # Act
    sinr = d2d_sinr_linear(
        gain_linear=gain,
        tx_power_w=power,
        transmitting=active,
        noise_power_w=noise_w,
        subchannel=channel,
    )
    # Assert
    np.testing.assert_allclose(sinr, expected, rtol=1e-9)


def test_place_nodes_square_stays_inside() -> None:
    positions = place_nodes_square(1000, side_m=50.0, rng=np.random.default_rng(41))
    assert positions.shape == (1000, 2)
    assert positions.min() >= 0.0 and positions.max() <= 50.0


def test_sinr_rejects_wrong_shapes() -> None:
    with pytest.raises(ValueError, match="transmitting"):
        d2d_sinr_linear(
            gain_linear=np.zeros((3, 3)),
            tx_power_w=1.0,
            transmitting=[True, False],
            noise_power_w=1.0,
        )


def test_docstring_examples() -> None:
    result = doctest.testmod(d2d_module)
    assert result.attempted > 0 and result.failed == 0
