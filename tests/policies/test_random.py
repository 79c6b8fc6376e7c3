"""Random scheduling: reproducible under reset(seed), uniform over clients."""

from __future__ import annotations

import numpy as np
from scipy import stats

from policies.random import RandomPolicy
from tests.policies.helpers import make_spaces, observation


def test_reproducible_under_reset_seed():
    # Arrange
    policy = RandomPolicy(*make_spaces(30, 5))
    obs = observation(np.zeros((30, 5)))
    # Act
    policy.reset(seed=11)
    first = [policy(obs) for _ in range(20)]
    policy.reset(seed=11)
    second = [policy(obs) for _ in range(20)]
    policy.reset(seed=12)
    other = [policy(obs) for _ in range(20)]
    # Assert
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, other)


def test_clients_and_subchannels_are_uniform():
    # Arrange: 10 clients, client 9 ineligible, 3 subchannels, 9000 rounds
    policy = RandomPolicy(*make_spaces(10, 3))
    policy.reset(seed=0)
    obs = observation(np.zeros((10, 3)), eligible=[1] * 9 + [0])
    rounds = 9000
    # Act
    actions = np.array([policy(obs) for _ in range(rounds)])
    # Assert: 9 eligible clients, each in 3/9 of the rounds; chi-square test
    counts = np.bincount(actions.ravel(), minlength=10)
    assert counts[9] == 0
    expected = np.full(9, rounds * 3 / 9)
    chi2 = float(((counts[:9] - expected) ** 2 / expected).sum())
    assert chi2 < stats.chi2.ppf(0.999, df=8)
    # client 0 uses each subchannel equally often
    on_subchannel = np.bincount(np.nonzero(actions == 0)[1], minlength=3)
    expected_sub = np.full(3, on_subchannel.sum() / 3)
    chi2_sub = float(((on_subchannel - expected_sub) ** 2 / expected_sub).sum())
    assert chi2_sub < stats.chi2.ppf(0.999, df=2)
