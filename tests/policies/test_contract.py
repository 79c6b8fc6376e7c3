"""Contract of every registered policy (STYLE §34): valid actions on sampled obs.

Here: every policy that assigns subchannels, on the star's observation table;
the client-set rules and every declared topology are in test_topologies.py.

No shipped policy may idle a subchannel while at least K clients are eligible
(``Policy.allows_idle`` is False for all of them, except minmax, which idles only
subchannels its optional rate constraint C5 closes, and deadline_max_weight,
which idles only with a round deadline; both are off here); with fewer
eligible clients than subchannels, every eligible client is scheduled.
"""

from __future__ import annotations

import numpy as np
import pytest

from policies import POLICIES, make_policy
from policies.registry import policy_class
from tests.policies.helpers import make_spaces, sample_observation, scheduled

SHAPES = [(20, 10), (5, 10), (1, 1), (1000, 100)]
ACTION_KINDS = [None, 4]  # plain MultiDiscrete; Dict with L = 4 power levels
NUM_OBSERVATIONS = 100
#: Lyapunov solves a mixed-integer program per call (≈ 0.15 s at N = 20): fewer
#: observations keep the default suite under its 15-minute budget.
FEWER = {"lyapunov": 20}
#: The policies whose action is a subchannel assignment.
ASSIGNING = sorted(n for n in POLICIES if "assignment" in policy_class(n).action_parts)


@pytest.mark.parametrize("power_levels", ACTION_KINDS, ids=["multidiscrete", "dict"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"N{n}-K{k}" for n, k in SHAPES])
@pytest.mark.parametrize("name", ASSIGNING)
def test_actions_respect_the_contract(name, shape, power_levels):
    # Arrange
    num_clients, num_subchannels = shape
    observation_space, action_space = make_spaces(*shape, power_levels)
    observation_space.seed(1)
    rng = np.random.default_rng(2)
    policy = make_policy(name, (observation_space, action_space))
    policy.reset(seed=3)
    for _ in range(FEWER.get(name, NUM_OBSERVATIONS)):
        obs = sample_observation(observation_space, rng)
        # Act
        action = policy(obs)
        # Assert
        assert action_space.contains(action), action
        assignment = scheduled(action)
        used = assignment[assignment < num_clients]
        assert np.unique(used).size == used.size, f"client twice: {assignment}"
        assert np.all(obs["eligible"][used] == 1), f"ineligible scheduled: {assignment}"
        num_eligible = int(obs["eligible"].sum())
        if not policy.allows_idle:
            assert used.size == min(num_eligible, num_subchannels)
        elif name == "channel_threshold":  # eligible clients below ε, all if they fit
            reliable = obs["eligible"] * (obs["error_probability"] < 0.05)
            assert used.size == min(int(reliable.sum()), num_subchannels)
        else:  # minmax: idles only pairs that miss its rate constraint (C5)
            assert used.size <= min(num_eligible, num_subchannels)
        if power_levels is not None:
            assert set(action) == {"assignment", "power"}
            np.testing.assert_array_equal(action["power"], power_levels - 1)


@pytest.mark.parametrize("name", ASSIGNING)
def test_no_eligible_client_idles_every_subchannel(name):
    # Arrange
    observation_space, action_space = make_spaces(6, 3)
    obs = sample_observation(observation_space, np.random.default_rng(0))
    obs["eligible"][:] = 0
    policy = make_policy(name, (observation_space, action_space))
    # Act
    action = policy(obs)
    # Assert
    np.testing.assert_array_equal(action, [6, 6, 6])


@pytest.mark.parametrize("name", ASSIGNING)
def test_same_seed_same_actions(name):
    # Arrange
    observation_space, action_space = make_spaces(20, 5)
    observation_space.seed(0)
    rng = np.random.default_rng(0)
    observations = [sample_observation(observation_space, rng) for _ in range(10)]
    first = make_policy(name, (observation_space, action_space))
    second = make_policy(name, (observation_space, action_space))
    first.reset(seed=7)
    second.reset(seed=7)
    # Act
    actions_first = [first(obs) for obs in observations]
    actions_second = [second(obs) for obs in observations]
    # Assert
    np.testing.assert_array_equal(actions_first, actions_second)
