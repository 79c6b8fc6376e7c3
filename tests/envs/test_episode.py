"""`envs.episode.run_episode`: the shared evaluation loop."""

from __future__ import annotations

import gymnasium as gym
import pytest

from envs.episode import run_episode


class _Counter(gym.Env):
    """Reward t at step t; ends after ``length`` steps; counts resets."""

    observation_space = gym.spaces.Discrete(100)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int) -> None:
        self.length, self.t, self.resets = length, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.resets = 0, self.resets + 1
        return 0, {}

    def step(self, action):
        self.t += 1
        return self.t, float(self.t), self.t >= self.length, False, {}


def test_sums_rewards_until_the_episode_ends_and_calls_on_step():
    env, seen = _Counter(4), []
    result = run_episode(env, lambda obs: 0, seed=1, on_step=lambda e: seen.append(e.t))
    assert (result.total_reward, result.final_reward, result.steps) == (10.0, 4.0, 4)
    assert seen == [1, 2, 3, 4] and env.resets == 1


def test_max_steps_and_a_caller_reset_env():
    env = _Counter(10)
    obs, _ = env.reset(seed=0)
    result = run_episode(env, lambda o: 0, first_obs=obs, max_steps=3)
    assert (result.total_reward, result.steps) == (6.0, 3)
    assert env.resets == 1  # not reset again
    with pytest.raises(ValueError, match="exactly one"):
        run_episode(env, lambda o: 0)
    with pytest.raises(ValueError, match="exactly one"):
        run_episode(env, lambda o: 0, seed=0, first_obs=obs)
    with pytest.raises(ValueError, match="max_steps"):
        run_episode(env, lambda o: 0, seed=0, max_steps=0)
