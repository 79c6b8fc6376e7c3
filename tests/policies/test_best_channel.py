"""Best channel: the eligible matching of maximal Σ gain [dB], vs brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from policies.assignment import assign_subchannels
from policies.best_channel import BestChannelPolicy
from tests.policies.helpers import make_spaces, observation

SMALL = [(3, 2), (4, 3), (5, 5), (6, 3), (2, 4)]


def brute_force_total(gain_db: np.ndarray, eligible: np.ndarray) -> float:
    """Best Σ gain over every way to put distinct eligible clients on subchannels."""
    clients = list(np.flatnonzero(eligible))
    num_subchannels = gain_db.shape[1]
    used = min(len(clients), num_subchannels)
    return max(
        sum(gain_db[c, k] for c, k in zip(chosen, subchannels, strict=True))
        for subchannels in itertools.combinations(range(num_subchannels), used)
        for chosen in itertools.permutations(clients, used)
    )


@pytest.mark.parametrize("shape", SMALL, ids=[f"N{n}-K{k}" for n, k in SMALL])
def test_equals_brute_force_optimum(shape):
    # Arrange
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    policy = BestChannelPolicy(*make_spaces(*shape))
    for _ in range(25):
        gain_db = rng.normal(-80.0, 12.0, shape)
        eligible = rng.random(shape[0]) < 0.8
        eligible[rng.integers(shape[0])] = True
        # Act
        action = policy(observation(gain_db, eligible=eligible))
        # Assert
        achieved = sum(gain_db[c, k] for k, c in enumerate(action) if c < shape[0])
        np.testing.assert_allclose(
            achieved, brute_force_total(gain_db, eligible), rtol=1e-12
        )


def test_prefers_strong_pairs_over_greedy_choice():
    # Greedy per subchannel would put client 0 on subchannel 0 (-60) and then
    # client 1 on 1 (-100): total -160. The optimum is 1 on 0, 0 on 1: -131.
    gain_db = np.array([[-60.0, -61.0], [-70.0, -100.0]])
    action = BestChannelPolicy(*make_spaces(2, 2))(observation(gain_db))
    np.testing.assert_array_equal(action, [1, 0])


def test_large_instance_equals_unfiltered_hungarian():
    # Arrange: N = 1000, K = 100, path loss x Rayleigh, 80 % eligible
    rng = np.random.default_rng(42)
    distance_km = rng.uniform(0.001, 0.0707, 1000)
    gain_db = -(128.1 + 37.6 * np.log10(distance_km))[:, None] + 10 * np.log10(
        rng.exponential(1.0, (1000, 100))
    )
    eligible = rng.random(1000) < 0.8
    policy = BestChannelPolicy(*make_spaces(1000, 100))
    # Act
    action = policy(observation(gain_db, eligible=eligible))
    unfiltered = assign_subchannels(
        gain_db.astype(np.float32), np.flatnonzero(eligible), idle=1000, prefilter=False
    )
    # Assert
    np.testing.assert_array_equal(action, unfiltered)
