"""Every registered id works with ``gym.make(id)``; the ``*-Flat-v0`` ids take SB3 as is.

Issue 34 ("Every RL library welcome"): the flat ids pass Stable-Baselines3's
env checker with every warning an error and train PPO for a few thousand steps
on the surrogate; every id is made without arguments, accepts ``render_mode``
("ansi" text and "rgb_array" images of the round's gains and schedule), and a
client named twice in an action is listed in ``info["ignored"]``. Emulate-mode
runs (Ray) are ``slow``.
"""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env as gym_check_env

import envs
from envs.flat import DEFAULT_MODE, DEFAULT_REWARD, FlatFLEnv
from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from envs.render import CELL_PIXELS
from envs.wrappers import BOUNDED_FEATURES, bounded_features
from policies.features import (
    FEATURE_NAMES,
    MOVING_FEATURES,
    NUM_FEATURES,
    client_features,
)

FLAT_IDS = [i for i in envs.ENV_IDS if "-Flat-" in i]
#: The default mode of the ids registered before the flat ones (kept: tests,
#: docs and benchmarks build them with these defaults).
LEGACY_MODE = {
    "WirelessFL-v0": "emulate",
    "HierarchicalFL-v0": "emulate",
    "D2DNeighbor-v0": "surrogate",
}


def _base(env: gym.Env):
    inner = env.unwrapped
    return inner.base if isinstance(inner, FlatFLEnv) else inner


def _make_surrogate(env_id: str, **kwargs):
    """``gym.make`` in surrogate mode (no Ray), whatever the id's default."""
    if LEGACY_MODE.get(env_id) == "emulate":
        kwargs["mode"] = "surrogate"
    return gym.make(env_id, **kwargs)


def _valid_action(env: gym.Env, rng: np.random.Generator):
    """A sample of the action space (the legacy D2D id refuses the target itself)."""
    action = env.action_space.sample()
    base = _base(env)
    if env.unwrapped is base and base.topology_kind == "d2d":
        action = np.full_like(action, base.num_nodes)
        action[0] = rng.choice(
            [s for s in range(base.num_nodes) if s != base.targets[0]]
        )
    return action


def test_the_ids_are_the_legacy_ones_and_one_flat_id_per_topology():
    assert set(envs.ENV_IDS) == {*LEGACY_MODE, *FLAT_IDS}
    assert sorted(FLAT_IDS) == [
        "D2DNeighbor-Flat-v0",
        "HierarchicalFL-Flat-v0",
        "WirelessFL-Flat-v0",
    ]


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_gym_make_without_arguments_works_for_every_registered_id(env_id):
    # Act
    env = gym.make(env_id)
    try:
        # Assert
        base = _base(env)
        assert base.mode == LEGACY_MODE.get(env_id, DEFAULT_MODE)
        assert env.action_space.contains(env.action_space.sample())
        if base.mode == "emulate":
            return  # reset starts Ray: the slow test below steps these
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        obs, reward, *_ = env.step(_valid_action(env, np.random.default_rng(0)))
        assert env.observation_space.contains(obs) and math.isfinite(reward)
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [(i, {}) for i, m in LEGACY_MODE.items() if m == "emulate"]
    + [(i, {"mode": "emulate"}) for i in FLAT_IDS],
    ids=lambda v: v if isinstance(v, str) else ("emulate" if v else "default"),
)
def test_the_emulate_mode_steps_on_every_default_system(env_id, kwargs):
    env = gym.make(env_id, **kwargs)
    try:
        obs, _ = env.reset(seed=0)
        obs, reward, *_ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and math.isfinite(reward)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", FLAT_IDS)
def test_flat_ids_share_one_default_mode_and_reward_and_bounded_spaces(env_id):
    env = gym.make(env_id)
    base = _base(env)
    assert (base.mode, base.reward_kind) == (DEFAULT_MODE, DEFAULT_REWARD)
    for space in (env.observation_space, env.action_space):
        assert isinstance(space, spaces.Box) and len(space.shape) == 1
        assert space.dtype == np.float32
        assert (space.low == -1).all() and (space.high == 1).all()
    assert env.observation_space.shape == (env.action_space.shape[0] * NUM_FEATURES,)
    # a rollout stays inside the bounds and its features vary (not a constant)
    obs, _ = env.reset(seed=3)
    seen = [obs]
    for _ in range(15):
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        seen.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    table = np.stack(seen)
    assert np.abs(table).max() <= 1.0
    assert (table.std(axis=0) > 0).mean() > 0.3
    env.close()


@pytest.mark.parametrize("env_id", FLAT_IDS)
def test_flat_ids_pass_gymnasiums_checker_and_replay_a_seed(env_id):
    env = gym.make(env_id)
    gym_check_env(env.unwrapped, skip_render_check=True)
    actions = [env.action_space.sample() for _ in range(4)]

    def rollout():
        record = [env.reset(seed=11)[0]]
        for action in actions:
            obs, reward, *_ = env.step(action)
            record += [obs, np.float32(reward)]
        return record

    first, second = rollout(), rollout()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    env.close()


def test_bounded_features_map_each_column_into_minus_one_one():
    # Arrange: the features of a real observation, with extremes added
    env = _make_surrogate("WirelessFL-v0")
    obs, _ = env.reset(seed=0)
    features = client_features(obs)
    features[0, FEATURE_NAMES.index("data_share")] = 1e9
    # Act
    out = bounded_features(features).reshape(features.shape)
    # Assert: every column has a map; the maps are the documented ones
    assert list(BOUNDED_FEATURES) == [*FEATURE_NAMES, *MOVING_FEATURES]
    assert np.abs(out).max() <= 1.0
    for j, name in enumerate(FEATURE_NAMES):
        x = features[:, j].astype(np.float64)
        expected = {"unit": x, "z": x / 5.0, "squash": x / (1.0 + x)}[
            BOUNDED_FEATURES[name]
        ]
        np.testing.assert_allclose(out[:, j], expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="features must have shape"):
        bounded_features(np.zeros((3, NUM_FEATURES + 1)))


@pytest.fixture
def one_torch_thread():
    """SB3's tiny MLP on one thread: faster on a busy 2-core machine."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize(
    "env_id",
    # The hierarchy's PPO is the slowest (~100 s on a busy machine): slow suite.
    [
        pytest.param(i, marks=pytest.mark.slow) if i.startswith("Hierarchical") else i
        for i in FLAT_IDS
    ],
)
def test_sb3_checker_warns_nothing_and_ppo_runs_a_few_thousand_steps(env_id):
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env
    from stable_baselines3.common.env_util import make_vec_env

    env = gym.make(env_id)
    # Act 1: the checker, every warning an error
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env, warn=True)
    # Act 2: PPO on the surrogate, 2048 steps over 4 copies of gym.make(env_id)
    vec_env = make_vec_env(env_id, n_envs=4, seed=0)
    model = sb3.PPO(
        "MlpPolicy",
        vec_env,
        n_steps=512,
        batch_size=256,
        n_epochs=2,
        seed=0,
        device="cpu",
    )
    model.learn(total_timesteps=2048)
    # Assert: it sampled and finished episodes, and its parameters stayed finite
    assert model.num_timesteps >= 2048
    assert len(model.ep_info_buffer) >= 4
    assert all(math.isfinite(e["r"]) for e in model.ep_info_buffer)
    params = [p.detach().numpy() for p in model.policy.parameters()]
    assert all(np.isfinite(p).all() for p in params)
    action, _ = model.predict(env.reset(seed=1)[0], deterministic=True)
    assert env.action_space.contains(action)
    vec_env.close()
    env.close()


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_render_modes_show_the_gains_and_the_rounds_schedule(env_id):
    rng = np.random.default_rng(0)
    text_env = _make_surrogate(env_id, render_mode="ansi")
    image_env = _make_surrogate(env_id, render_mode="rgb_array")
    try:
        for env in (text_env, image_env):
            env.reset(seed=0)
            env.step(_valid_action(env, rng))
        # Act
        text, image = text_env.render(), image_env.render()
        # Assert: one * per scheduled cell; an HxWx3 uint8 image of the table
        base = _base(text_env)
        gain, labels = base._gain_table(base.frame_obs)
        lines = text.splitlines()
        assert len(lines) == len(labels) + 3 and lines[-1].startswith("schedule: ")
        table = "\n".join(lines[2:-1])  # the title explains the "*"
        assert table.count("*") == len(base.marks) > 0
        assert lines[-1].count("->sc") == len(base.marks)
        assert isinstance(image, np.ndarray) and image.dtype == np.uint8
        rows, cols = _base(image_env)._gain_table(_base(image_env).frame_obs)[0].shape
        assert image.shape == (rows * CELL_PIXELS, cols * CELL_PIXELS, 3)
        red = np.all(image == [230, 20, 20], axis=-1)
        assert red.any() and image.std() > 0
    finally:
        text_env.close()
        image_env.close()


@pytest.mark.parametrize("env_id", ["WirelessFL-v0", "WirelessFL-Flat-v0"])
def test_gymnasium_checker_with_render_and_a_bad_render_mode(env_id):
    env = _make_surrogate(env_id, render_mode="rgb_array")
    gym_check_env(env.unwrapped, skip_render_check=False)
    assert env.unwrapped.render() is not None
    with pytest.raises(ValueError, match="render_mode must be one of ansi, rgb_array"):
        type(env.unwrapped)(mode="surrogate", render_mode="human3d")


def test_star_reports_a_client_named_twice_in_ignored():
    env = _make_surrogate("WirelessFL-v0")
    env.reset(seed=0)
    n = env.unwrapped.num_clients
    # Act: client 3 on subchannels 0 and 2, client 5 on 1, subchannel 3 idle
    _, _, _, _, info = env.step(np.array([3, 5, 3, n]))
    # Assert: scheduled once, on its first subchannel; the repeat is reported
    assert info["scheduled"] == [3, 5] and info["ignored"] == [3]
    assert env.unwrapped.marks == [(3, 0), (5, 1)]
    _, _, _, _, info = env.step(np.array([1, 2, 4, 6]))
    assert info["ignored"] == []


def test_hierarchy_reports_a_device_named_twice_in_ignored():
    env = _make_surrogate("HierarchicalFL-v0")
    env.reset(seed=0)
    base: HierarchicalSchedulingEnv = env.unwrapped
    first, second = base.rules[0].members[:2]
    idle = [len(r.members) for r in base.rules]
    # Act: edge 0 names its device 0 on both subchannels; edge 1 devices 1 and 0
    action = [0, 0, 1, 0, idle[2], idle[2]]
    _, _, _, _, info = env.step(np.array(action))
    # Assert
    assert info["ignored"] == [int(first)]
    assert int(first) in info["scheduled"] and int(second) not in info["scheduled"]
    assert len(info["scheduled"]) == 3


def test_every_gym_id_is_the_env_of_a_topology_plugin():
    from rayfl.registry import topology_names, topology_of

    plugins = [topology_of(n) for n in topology_names()]
    roles = {p.envs[r] for p in plugins for r in ("single", "flat")}
    assert {gym.spec(i).entry_point for i in envs.ENV_IDS} == roles
