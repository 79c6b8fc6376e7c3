"""Contract tests of the scheduling env (STYLE.md §34)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the ids)
from envs.star.scheduling import WirelessFLEnv
from envs.wrappers import FlattenAction

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")


def _rollout(env, seed, steps=5):
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    trace = [obs]
    for _ in range(steps):
        obs, reward, *_ = env.step(env.action_space.sample())
        trace.append((obs, reward))
    return trace


def _equal(a, b):
    if isinstance(a, dict):
        return all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"controls": True, "overrides": ["wireless.power_levels=3"]}],
    ids=["multidiscrete", "dict-power-controls"],
)
def test_surrogate_passes_env_checker_and_is_deterministic(kwargs):
    env = WirelessFLEnv(mode="surrogate", **kwargs)
    check_env(env, skip_render_check=True)
    assert _equal(_rollout(env, 3), _rollout(env, 3))
    assert not _equal(_rollout(env, 3), _rollout(env, 4))


def test_registered_id_and_time_limit():
    env = gym.make("WirelessFL-v0", mode="surrogate")
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        assert not terminated
    assert steps == 20


def test_step_rejects_bad_actions_with_named_subchannel():
    env = WirelessFLEnv(mode="surrogate")
    env.reset(seed=0)
    n = env.num_clients
    with pytest.raises(ValueError, match="subchannel 2: client 99"):
        env.step(np.array([0, 1, 99, n]))
    with pytest.raises(ValueError, match="one per subchannel"):
        env.step(np.array([0, 1]))


def test_duplicate_client_keeps_lowest_subchannel_and_observations_update():
    env = WirelessFLEnv(mode="surrogate")
    obs, _ = env.reset(seed=0)
    n = env.num_clients
    _, _, _, _, info = env.step(np.array([3, 3, 5, n]))
    schedule = env.backend.uplink  # ledger counts what was sent
    assert info["scheduled"] == [3, 5]
    assert schedule.upload_count()[[3, 5]].tolist() == [1, 1]
    obs, *_ = env.step(np.array([n, n, n, n]))
    assert obs["staleness"][3] == 1 and obs["staleness"][0] == 2
    assert obs["round"][0] == 2


def test_max_uploads_makes_clients_ineligible_and_terminates():
    env = WirelessFLEnv(mode="surrogate", overrides=["privacy.max_uploads=1"])
    obs, _ = env.reset(seed=0)
    n = env.num_clients
    masks = env.action_masks()
    assert masks.shape == (4, n + 1) and masks.all()
    terminated = False
    for start in range(0, n, 4):
        ids = list(range(start, min(start + 4, n)))
        obs, _, terminated, _, info = env.step(np.array(ids + [n] * (4 - len(ids))))
    assert terminated and not obs["eligible"].any()
    _, _, _, _, info = env.step(np.array([0, 1, n, n]))
    assert info["ignored"] == [0, 1] and info["scheduled"] == []


def test_rewards_and_surrogate_speed():
    env = WirelessFLEnv(mode="surrogate", reward="latency")
    env.reset(seed=0)
    _, reward, *_ = env.step(np.array([0, 1, 2, 3]))
    assert reward < 0
    _, reward, *_ = env.step(np.array([10, 10, 10, 10]))
    assert reward == 0.0


def test_wrappers():
    env = FlattenAction(
        WirelessFLEnv(mode="surrogate", overrides=["wireless.power_levels=2"])
    )
    assert env.action_space.shape == (8,)
    env.reset(seed=0)
    env.step(env.action_space.sample())
    with pytest.raises(ValueError, match="HungarianTopK"):
        FlattenAction(WirelessFLEnv(mode="surrogate", controls=True))


@pytest.mark.usefixtures("ray_session")
def test_emulate_mode_passes_env_checker_and_trains():
    env = WirelessFLEnv(mode="emulate")
    try:
        check_env(env, skip_render_check=True)
        obs, _ = env.reset(seed=1)
        assert _equal(_rollout(env, 1, steps=2), _rollout(env, 1, steps=2))
        n = env.num_clients
        rewards = []
        env.reset(seed=1)
        for t in range(4):
            ids = [(4 * t + i) % n for i in range(4)]
            obs, reward, _, _, info = env.step(np.array(ids))
            rewards.append(reward)
            assert sorted(info["delivered"]) == sorted(ids)
            assert (info["latency_s"][ids] > 0).all()
        assert rewards[-1] > rewards[0]  # max test loss falls as FedAvg trains
    finally:
        env.close()


def test_participants_action_is_a_client_set_on_the_first_subchannels():
    env = WirelessFLEnv(mode="surrogate", participants=True)
    check_env(env, skip_render_check=True)
    n = env.num_clients
    assert env.num_subchannels == 4 and env.action_space == gym.spaces.MultiBinary(n)
    env.reset(seed=0)
    chosen = np.zeros(n, dtype=np.int8)
    chosen[[1, 2, 4, 6, 9]] = 1  # five clients, four subchannels
    obs, _, _, _, info = env.step(chosen)
    assert info["scheduled"] == [1, 2, 4, 6] and info["ignored"] == [9]
    assert env.backend.uplink.upload_count().nonzero()[0].tolist() == [1, 2, 4, 6]
    assert obs["staleness"][9] == 1 and obs["round"][0] == 1
    with pytest.raises(ValueError, match=f"participants must be {n} zeros or ones"):
        env.step(np.full(n, 2))
    mask = env.action_masks()  # one entry per client, like the MultiBinary action
    assert mask.shape == (n,) and mask.dtype == bool
    np.testing.assert_array_equal(mask, env.backend.uplink.eligible())
