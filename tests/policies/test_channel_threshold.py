"""channel_threshold: pFedWN's neighbor selection P_s^err < ε as a policy."""

from __future__ import annotations

import numpy as np
import pytest

from policies import make_policy
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.selection import make_layout, selection_observation, selection_spaces


def d2d_observation(seed: int, sinr_threshold: float = 5.0):
    topology = D2DTopologyConfig(sinr_threshold=sinr_threshold, target=0)
    layout = make_layout(topology, 11, seed=seed)
    obs, error = selection_observation(layout, 0, topology, seed=seed)
    return obs, error


@pytest.mark.parametrize("epsilon", [0.01, 0.05, 0.1, 0.2])
def test_selects_exactly_the_neighbors_below_epsilon(epsilon):
    # Arrange
    spaces = selection_spaces(11, 14)
    policy = make_policy("channel_threshold", spaces, epsilon=epsilon)
    for seed in range(10):
        obs, error = d2d_observation(seed)
        # Act
        action = policy(obs)
        # Assert
        assert spaces[1].contains(action)
        chosen = sorted(int(a) for a in action if a < 11)
        expected = [s for s in range(1, 11) if error[s] < epsilon]
        assert chosen == expected
        assert 0 not in chosen  # the target never selects itself


def test_every_neighbor_is_selected_above_the_error_bound():
    # P_err ≤ e^{−β²/Γ} = 0.135, so ε = 0.2 selects all 10 neighbors.
    policy = make_policy("channel_threshold", selection_spaces(11, 14), epsilon=0.2)
    obs, _ = d2d_observation(3)
    assert sorted(int(a) for a in policy(obs) if a < 11) == list(range(1, 11))


def test_selected_neighbors_get_their_best_distinct_subchannels():
    policy = make_policy("channel_threshold", selection_spaces(11, 14), epsilon=0.2)
    obs, _ = d2d_observation(4)
    action = np.asarray(policy(obs))
    used = action[action < 11]
    assert np.unique(used).size == used.size
    total = sum(obs["channel_gain"][s, f] for f, s in enumerate(action) if s < 11)
    # The matching is at least as good as any single-sub-channel greedy order.
    greedy = 0.0
    free = set(range(14))
    for s in used:
        f = max(free, key=lambda k: obs["channel_gain"][s, k])
        free.remove(f)
        greedy += obs["channel_gain"][s, f]
    assert total >= greedy - 1e-3


def test_max_neighbors_keeps_the_most_reliable():
    policy = make_policy(
        "channel_threshold", selection_spaces(11, 14), epsilon=0.2, max_neighbors=2
    )
    obs, error = d2d_observation(5)
    chosen = sorted(int(a) for a in policy(obs) if a < 11)
    order = [s for s in np.argsort(error, kind="stable") if s != 0]
    assert chosen == sorted(int(s) for s in order[:2])


def test_other_policies_run_on_the_selection_observation():
    spaces = selection_spaces(11, 14)
    obs, _ = d2d_observation(6)
    for name in ("random", "best_channel"):
        action = make_policy(name, spaces)(obs)
        assert spaces[1].contains(action)
        assert 0 not in [int(a) for a in action if a < 11]


def test_bad_epsilon_raises():
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="epsilon"):
            make_policy("channel_threshold", selection_spaces(3, 2), epsilon=bad)


def test_epsilon_zero_selects_no_neighbour():
    """ε = 0 is the range's limit the self-tuning tries: the target trains alone."""
    obs_space, action_space = selection_spaces(3, 2)
    policy = make_policy("channel_threshold", (obs_space, action_space), epsilon=0.0)
    obs = obs_space.sample()
    obs["eligible"] = np.array([0, 1, 1], dtype=np.float32)
    obs["error_probability"] = np.array([1, 0, 0], dtype=np.float32)
    assert (policy(obs) == 3).all()  # every sub-channel idle
