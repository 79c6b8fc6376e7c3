"""Round robin: cyclic order over eligible ids, K per round (Yang et al. 2020)."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_index_order_gives_subchannel_i_to_the_ith_chosen_client():
    # Arrange: the gains would make best_gain swap clients 0 and 1
    gain_db = np.array([[-90.0, -60.0], [-60.0, -90.0], [0.0, 0.0]])
    policy = RoundRobinPolicy(*make_spaces(3, 2), subchannels="index")
    # Act
    first = policy(observation(gain_db)).tolist()
    second = policy(observation(gain_db)).tolist()
    # Assert: cyclic order 0, 1 | 2, 0; subchannel k holds the k-th of them
    assert first == [0, 1]
    assert second == [2, 0]


def test_index_order_leaves_the_last_subchannels_idle_when_few_are_eligible():
    policy = RoundRobinPolicy(*make_spaces(5, 3), subchannels="index")
    gain_db = np.random.default_rng(0).normal(-80.0, 10.0, (5, 3))
    action = policy(observation(gain_db, eligible=[0, 0, 1, 0, 1]))
    assert action.tolist() == [2, 4, 5]


def test_default_is_best_gain_matching():
    # Arrange: random gains; the default must equal the explicit best_gain rule
    gain_db = np.random.default_rng(1).normal(-80.0, 10.0, (8, 4))
    default = RoundRobinPolicy(*make_spaces(8, 4))
    explicit = RoundRobinPolicy(*make_spaces(8, 4), subchannels="best_gain")
    index = RoundRobinPolicy(*make_spaces(8, 4), subchannels="index")
    # Act
    a, b, c = (p(observation(gain_db)) for p in (default, explicit, index))
    # Assert: same clients each way, best_gain maximises Σ gain over them
    assert default.subchannels == "best_gain"
    np.testing.assert_array_equal(a, b)
    assert sorted(a.tolist()) == sorted(c.tolist()) == [0, 1, 2, 3]
    total = lambda act: gain_db[act, np.arange(4)].sum()  # noqa: E731
    assert total(a) > total(c)


def test_unknown_subchannel_rule_is_refused():
    with pytest.raises(ValueError, match="subchannels must be one of"):
        RoundRobinPolicy(*make_spaces(3, 2), subchannels="gain")
