"""The Lyapunov policy's virtual queues and actions (spec seed_002 §4.3, Sec. V-B)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from policies import make_policy
from tests.policies.helpers import make_spaces, sample_observation, scheduled


def controls_spaces(num_clients: int, num_subchannels: int, levels: int = 4):
    """The env's Dict action space with power levels and one control (sparsity)."""
    observation_space, action_space = make_spaces(num_clients, num_subchannels, levels)
    parts = dict(action_space.spaces)
    parts["controls"] = spaces.Box(0.0, 1.0, (num_clients, 1), np.float32)
    return observation_space, spaces.Dict(parts)


@pytest.mark.parametrize("mode", ["as_printed", "lower_bound"])
def test_queues_follow_their_update_equations(mode):
    # Arrange: 8 clients, 3 channels, fixed β and d^Avg
    observation_space, action_space = controls_spaces(8, 3)
    beta = np.linspace(0.1, 0.6, 8)
    policy = make_policy(
        "lyapunov",
        (observation_space, action_space),
        model_dim=20_000,
        beta=beta.tolist(),
        d_avg_s=2.0,
        fairness_queue=mode,
    )
    policy.reset(seed=0)
    rng = np.random.default_rng(1)
    q_fa, q_de = np.zeros(8), 0.0
    for _ in range(25):
        obs = sample_observation(observation_space, rng)
        obs["eligible"][:] = (rng.random(8) < 0.8).astype(np.float32)
        # Act
        action = policy(obs)
        if not policy._last:
            continue
        served, available, delay = policy._last
        # Assert: the decision is what the queue update will see
        assignment = scheduled(action)
        np.testing.assert_array_equal(
            np.flatnonzero(served), np.sort(assignment[assignment < 8])
        )
        # Independent recursion, spec §3 step 7 (and [AMBIG-3] for lower_bound)
        step = served - beta if mode == "as_printed" else beta - served
        q_fa = np.where(available, np.maximum(q_fa + step, 0.0), q_fa)
        q_de = max(q_de + delay - 2.0, 0.0)
        policy.update_queues(served, available, delay)
        policy._last = None  # applied here instead of at the next call
        np.testing.assert_allclose(policy.fairness_queue_values, q_fa, atol=1e-12)
        np.testing.assert_allclose(policy.delay_queue_value, q_de, atol=1e-9)


def test_delay_queue_pushes_sparsification():
    # Arrange: a backlog of delay makes the policy sparsify
    observation_space, action_space = controls_spaces(10, 5)
    obs = sample_observation(observation_space, np.random.default_rng(0))
    obs["eligible"][:] = 1
    policy = make_policy(
        "lyapunov", (observation_space, action_space), model_dim=1_663_370, d_avg_s=1.0
    )
    policy.reset(seed=0)
    # Act
    dense = policy(obs)["controls"][:, 0]
    policy.reset(seed=0)
    policy.d_avg_s = 1.0
    policy.delay_queue_value = 50.0
    policy._last = None
    sparse = policy(obs)
    # Assert: empty queue → s = 1; a large Q^de → s < 1, within [s^th, 1]
    chosen = scheduled(sparse)
    s = sparse["controls"][chosen, 0]
    assert np.all(dense == 1.0)
    assert np.all((s >= 0.1 - 1e-6) & (s <= 1.0)) and s.min() < 1.0


def test_actions_carry_controls_inside_the_space():
    # Arrange
    observation_space, action_space = controls_spaces(20, 5)
    policy = make_policy("lyapunov", (observation_space, action_space), V=5.0)
    policy.reset(seed=2)
    rng = np.random.default_rng(3)
    for _ in range(10):
        obs = sample_observation(observation_space, rng)
        # Act
        action = policy(obs)
        # Assert
        assert action_space.contains(action)
        used = scheduled(action)
        used = used[used < 20]
        assert used.size == min(int(obs["eligible"].sum()), 5)


def test_bad_parameters_are_named():
    observation_space, action_space = make_spaces(4, 2)
    with pytest.raises(ValueError, match="fairness_queue"):
        make_policy("lyapunov", (observation_space, action_space), fairness_queue="x")
    with pytest.raises(ValueError, match="V must be"):
        make_policy("lyapunov", (observation_space, action_space), V=0.0)
