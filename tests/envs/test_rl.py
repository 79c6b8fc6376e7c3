"""The flat RL view of the scheduling env (envs.rl): Gymnasium contract, decoding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.rl import make_rl_env
from policies.features import NUM_FEATURES

SMALL = ["data.num_clients=6", "wireless.num_subchannels=3", "rounds=5"]


@pytest.fixture(scope="module")
def env():
    env = make_rl_env(None, mode="surrogate", overrides=SMALL)
    yield env
    env.close()


def test_spaces_are_plain_boxes(env):
    assert env.observation_space.shape == (6, NUM_FEATURES)
    assert env.action_space.shape == (6,)


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_check_env_through_the_wrappers(env):
    # gymnasium's checker on the wrapped env (what an RL library sees)
    check_env(env, skip_render_check=True, skip_close_check=True)


def test_random_agent_rollout_ends_by_truncation_with_finite_rewards(env):
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    rewards, truncated, steps = [], False, 0
    while not truncated:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert not terminated
        assert len(set(info["scheduled"])) == len(info["scheduled"]) == 3
        rewards.append(reward)
        steps += 1
    assert steps == 5 and np.isfinite(rewards).all()


def test_same_seed_same_rollout(env):
    def rollout(seed):
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for t in range(5):
            obs, reward, *_ = env.step(np.sin(np.arange(6) * (t + 1)))
            out += [obs, reward]
        return out

    first, second, other = rollout(3), rollout(3), rollout(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_scores_pick_top_k_and_subchannels_maximise_total_gain(env):
    # Arrange
    env.reset(seed=1)
    raw = env.unwrapped._get_obs()
    scores = np.array([0.1, 0.9, -0.3, 0.8, 0.85, 0.0])
    # Act
    assignment = env.get_wrapper_attr("action")(scores)
    # Assert: clients {1, 4, 3}; the matching beats every other permutation
    assert sorted(assignment.tolist()) == [1, 3, 4]
    gain = raw["channel_gain"].astype(np.float64)
    best = max(
        sum(gain[c, k] for k, c in enumerate(p))
        for p in itertools.permutations([1, 3, 4])
    )
    total = sum(gain[c, k] for k, c in enumerate(assignment))
    np.testing.assert_allclose(total, best, rtol=1e-9)


def test_scores_outside_the_box_are_ranked_and_nan_rejected(env):
    env.reset(seed=0)
    decode = env.get_wrapper_attr("action")
    big = decode(np.array([5.0, -7.0, 3.0, 0.0, 0.0, 9.0]))
    assert sorted(big.tolist()) == [0, 2, 5]
    with pytest.raises(ValueError, match="finite scores"):
        decode(np.full(6, np.nan))


def test_reward_scale_multiplies_rewards():
    plain = make_rl_env(None, mode="surrogate", overrides=SMALL)
    scaled = make_rl_env(None, mode="surrogate", reward_scale=0.1, overrides=SMALL)
    rewards = []
    for env in (plain, scaled):
        env.reset(seed=0)
        rewards.append(env.step(np.arange(6.0))[1])
    np.testing.assert_allclose(rewards[1], 0.1 * rewards[0], rtol=1e-6)
