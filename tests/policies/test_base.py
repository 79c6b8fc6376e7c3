"""Policy base class: space validation, actions, seeding, observation checks."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from policies.base import Policy
from tests.policies.helpers import make_spaces, observation


class FirstEligible(Policy):
    """Test double: the first K eligible ids, in order."""

    def schedule(self, obs):
        eligible = np.flatnonzero(self.eligible_mask(obs))[: self.num_subchannels]
        assignment = np.full(self.num_subchannels, self.num_clients, np.int64)
        assignment[: eligible.size] = eligible
        return assignment


class Broken(Policy):
    """Test double that schedules client 0 twice."""

    def schedule(self, obs):
        return np.zeros(self.num_subchannels, np.int64)


def test_reads_sizes_from_spaces():
    observation_space, action_space = make_spaces(7, 3, power_levels=5)
    policy = FirstEligible(observation_space, action_space)
    assert (policy.num_clients, policy.num_subchannels) == (7, 3)
    assert policy.num_power_levels == 5


def test_dict_action_has_max_power_and_no_controls():
    # Arrange
    observation_space, action_space = make_spaces(4, 2, power_levels=3)
    action_space = spaces.Dict(
        {**action_space.spaces, "controls": spaces.Box(0.0, 1.0, (4,))}
    )
    policy = FirstEligible(observation_space, action_space)
    # Act
    action = policy(observation(np.zeros((4, 2))))
    # Assert
    assert set(action) == {"assignment", "power"}
    np.testing.assert_array_equal(action["assignment"], [0, 1])
    np.testing.assert_array_equal(action["power"], [2, 2])


def test_dict_action_without_power():
    observation_space, action_space = make_spaces(4, 2, power_levels=3)
    action_space = spaces.Dict({"assignment": action_space["assignment"]})
    action = FirstEligible(observation_space, action_space)(
        observation(np.zeros((4, 2)))
    )
    assert set(action) == {"assignment"} and action_space.contains(action)


def test_plain_action_is_array_in_space():
    observation_space, action_space = make_spaces(4, 2)
    action = FirstEligible(observation_space, action_space)(
        observation(np.zeros((4, 2)), eligible=[0, 0, 1, 0])
    )
    np.testing.assert_array_equal(action, [2, 4])
    assert action_space.contains(action)


def test_reset_seeds_own_generator_not_global():
    # Arrange
    observation_space, action_space = make_spaces(4, 2)
    policy = FirstEligible(observation_space, action_space)
    state = np.random.get_state()[1].copy()  # noqa: NPY002 (checks global is untouched)
    # Act
    policy.reset(seed=5)
    first = policy.np_random.random(3)
    policy.reset(seed=5)
    second = policy.np_random.random(3)
    # Assert
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002


def test_broken_rule_is_caught():
    observation_space, action_space = make_spaces(4, 2)
    with pytest.raises(ValueError, match="client 0 is on subchannels"):
        Broken(observation_space, action_space)(observation(np.zeros((4, 2))))


def test_unknown_parameter_raises():
    observation_space, action_space = make_spaces(4, 2)
    with pytest.raises(TypeError, match="window"):
        FirstEligible(observation_space, action_space, window=3)


def _obs_space(**overrides):
    observation_space, _ = make_spaces(4, 2)
    return spaces.Dict({**observation_space.spaces, **overrides})


BAD_SPACES = [
    (
        spaces.Box(0, 1, (4, 2)),
        spaces.MultiDiscrete([5, 5]),
        "must be a gymnasium Dict",
    ),
    (
        spaces.Dict({"eligible": spaces.Box(0, 1, (4,))}),
        spaces.MultiDiscrete([5, 5]),
        "needs a Box under 'channel_gain'",
    ),
    (
        _obs_space(channel_gain=spaces.Box(0, 1, (8,))),
        spaces.MultiDiscrete([5, 5]),
        "must be \\(N, K\\)",
    ),
    (
        _obs_space(eligible=spaces.Box(0, 1, (3,))),
        spaces.MultiDiscrete([5, 5]),
        "'eligible'\\] has shape",
    ),
    (_obs_space(), spaces.MultiDiscrete([4, 4]), "MultiDiscrete\\(\\[5\\] \\* 2\\)"),
    (_obs_space(), spaces.MultiDiscrete([5, 5, 5]), "MultiDiscrete\\(\\[5\\] \\* 2\\)"),
    (_obs_space(), spaces.Discrete(5), "assignment space must be"),
    (
        _obs_space(),
        spaces.Dict({"power": spaces.MultiDiscrete([3, 3])}),
        "keys must be 'assignment'",
    ),
    (
        _obs_space(),
        spaces.Dict(
            {
                "assignment": spaces.MultiDiscrete([5, 5]),
                "speed": spaces.Discrete(2),
            }
        ),
        "keys must be 'assignment'",
    ),
    (
        _obs_space(),
        spaces.Dict(
            {
                "assignment": spaces.MultiDiscrete([5, 5]),
                "power": spaces.MultiDiscrete([3, 4]),
            }
        ),
        "'power'\\] must be MultiDiscrete",
    ),
]


@pytest.mark.parametrize(
    ("observation_space", "action_space", "message"),
    BAD_SPACES,
    ids=[
        "obs not Dict",
        "no gains",
        "gains 1-D",
        "eligible shape",
        "nvec",
        "K mismatch",
        "Discrete",
        "no assignment",
        "extra key",
        "unequal power levels",
    ],
)
def test_bad_spaces_raise_clear_error(observation_space, action_space, message):
    with pytest.raises(ValueError, match=message):
        FirstEligible(observation_space, action_space)


def test_observation_with_wrong_shape_names_the_key():
    observation_space, action_space = make_spaces(4, 2)
    policy = FirstEligible(observation_space, action_space)
    with pytest.raises(ValueError, match="'channel_gain'\\] has shape \\(4, 3\\)"):
        policy(observation(np.zeros((4, 3))))
    with pytest.raises(ValueError, match="no key 'eligible'"):
        policy({"channel_gain": np.zeros((4, 2))})
