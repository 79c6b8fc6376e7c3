"""Data-weighted round robin: turns in proportion to data size, among eligible clients."""

from __future__ import annotations

import numpy as np
import pytest

from policies.data_weighted import DataWeightedPolicy
from tests.policies.helpers import make_spaces, observation, scheduled


def _turns(policy, obs, rounds: int) -> np.ndarray:
    n = obs["data_size"].shape[0]
    turns = np.zeros(n, int)
    for _ in range(rounds):
        chosen = scheduled(policy(obs))
        turns[chosen[chosen < n]] += 1
    return turns


def test_turns_follow_the_data_share_within_one_of_the_closed_form():
    # Arrange: 5 clients, K = 2; shares 0.4, 0.3, 0.15, 0.1, 0.05
    data = np.array([400.0, 300.0, 150.0, 100.0, 50.0])
    obs = observation(np.zeros((5, 2)), data_size=data)
    policy = DataWeightedPolicy(*make_spaces(5, 2))
    rounds = 200
    # Act
    turns = _turns(policy, obs, rounds)
    # Assert: T · K · D_n / Σ D (deficit round robin keeps |error| ≤ 1)
    expected = rounds * 2 * data / data.sum()
    assert np.all(np.abs(turns - expected) <= 1.0), (turns, expected)
    assert turns.sum() == rounds * 2


def test_power_zero_gives_equal_turns():
    data = np.array([900.0, 10.0, 10.0, 80.0])
    obs = observation(np.zeros((4, 1)), data_size=data)
    turns = _turns(DataWeightedPolicy(*make_spaces(4, 1), power=0.0), obs, 40)
    np.testing.assert_array_equal(turns, [10, 10, 10, 10])


def test_ineligible_clients_earn_no_credit_and_are_never_chosen():
    data = np.array([100.0, 1000.0, 100.0])
    obs = observation(np.zeros((3, 1)), eligible=[1, 0, 1], data_size=data)
    policy = DataWeightedPolicy(*make_spaces(3, 1))
    turns = _turns(policy, obs, 10)
    assert turns[1] == 0 and turns.tolist() == [5, 0, 5]
    assert policy.credit[1] == 0.0


def test_reset_clears_the_credit():
    obs = observation(np.zeros((3, 1)), data_size=np.array([5.0, 1.0, 1.0]))
    policy = DataWeightedPolicy(*make_spaces(3, 1))
    first = [int(scheduled(policy(obs))[0]) for _ in range(7)]
    policy.reset(seed=0)
    assert not policy.credit.any()
    assert [int(scheduled(policy(obs))[0]) for _ in range(7)] == first


@pytest.mark.parametrize("power", [-1.0, float("nan"), float("inf")])
def test_rejects_a_bad_power(power):
    with pytest.raises(ValueError, match="power must be finite and >= 0"):
        DataWeightedPolicy(*make_spaces(3, 1), power=power)
