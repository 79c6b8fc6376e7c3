"""Age-based: largest staleness first, ties by lower id, among eligible clients."""

from __future__ import annotations

import numpy as np

from policies.age_based import AgeBasedPolicy
from tests.policies.helpers import make_spaces, observation


def test_picks_the_stalest_eligible_clients():
    # Arrange: client 4 is the stalest but ineligible
    staleness = np.array([2.0, 9.0, 0.0, 7.0, 50.0, 7.0])
    obs = observation(
        np.zeros((6, 3)), eligible=[1, 1, 1, 1, 0, 1], staleness=staleness
    )
    policy = AgeBasedPolicy(*make_spaces(6, 3))
    # Act
    action = policy(obs)
    # Assert: 1 (9 rounds), then the tie 3 vs 5 (7 rounds) -> both fit
    assert sorted(action.tolist()) == [1, 3, 5]


def test_ties_go_to_the_lower_id():
    obs = observation(np.zeros((5, 2)), staleness=np.array([4.0, 4.0, 4.0, 1.0, 4.0]))
    action = AgeBasedPolicy(*make_spaces(5, 2))(obs)
    assert sorted(action.tolist()) == [0, 1]


def test_matches_chosen_clients_to_their_best_subchannels():
    gain_db = np.array([[-90.0, -60.0], [-60.0, -90.0], [0.0, 0.0]])
    obs = observation(gain_db, staleness=np.array([5.0, 5.0, 0.0]))
    np.testing.assert_array_equal(AgeBasedPolicy(*make_spaces(3, 2))(obs), [1, 0])
