"""Round robin: cyclic order over eligible ids, K per round (Yang et al. 2020)."""

from __future__ import annotations

import numpy as np

from policies.round_robin import RoundRobinPolicy
from tests.policies.helpers import make_spaces, observation


def rounds(policy, obs, count):
    return [sorted(policy(obs).tolist()) for _ in range(count)]


def test_cycles_in_k_sized_chunks():
    # Arrange
    policy = RoundRobinPolicy(*make_spaces(7, 3))
    obs = observation(np.zeros((7, 3)))
    # Act
    chosen = rounds(policy, obs, 5)
    # Assert
    # Assert: 0..6 in chunks of 3, wrapping around (sorted within a round)
    assert chosen == [[0, 1, 2], [3, 4, 5], [0, 1, 6], [2, 3, 4], [0, 5, 6]]


def test_skips_ineligible_clients():
    # Arrange: clients 1 and 4 may not upload
    policy = RoundRobinPolicy(*make_spaces(6, 2))
    obs = observation(np.zeros((6, 2)), eligible=[1, 0, 1, 1, 0, 1])
    # Act
    chosen = rounds(policy, obs, 4)
    # Assert
    assert chosen == [[0, 2], [3, 5], [0, 2], [3, 5]]


def test_fewer_eligible_than_subchannels_schedules_all_of_them():
    policy = RoundRobinPolicy(*make_spaces(5, 3))
    action = policy(observation(np.zeros((5, 3)), eligible=[0, 1, 0, 0, 0]))
    assert sorted(action.tolist()) == [1, 5, 5]


def test_reset_restarts_the_cycle():
    # Arrange
    policy = RoundRobinPolicy(*make_spaces(5, 2))
    obs = observation(np.zeros((5, 2)))
    policy(obs)
    # Act
    policy.reset()
    # Assert
    assert sorted(policy(obs).tolist()) == [0, 1]


def test_chosen_clients_get_their_best_subchannels():
    # Arrange: client 0 is far better on subchannel 1, client 1 on subchannel 0
    gain_db = np.array([[-90.0, -60.0], [-60.0, -90.0], [0.0, 0.0]])
    policy = RoundRobinPolicy(*make_spaces(3, 2))
    # Act / Assert
    np.testing.assert_array_equal(policy(observation(gain_db)), [1, 0])
