"""A moving world's features (issue 48): the RL-ready ids and the learned policy see them.

Surrogate mode only (no Ray): the columns ``available``, ``channel_age_share``
and ``compute_z`` follow the observation keys of :mod:`rayfl.star.moving`,
in the flat id, the features of E lanes at once, the bounded map and the
learned policy's checkpoints.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.rl import ClientFeatures
from envs.star.scheduling import WirelessFLEnv
from envs.wrappers import BOUNDED_FEATURES, bounded_features
from policies.features import (
    FEATURE_NAMES,
    MOVING_FEATURES,
    client_features,
    client_features_many,
    feature_names,
)
from policies.learned import LearnedPolicy, initial_arrays, load_checkpoint
from rayfl.config import load_config
from rayfl.registry import topology_of
from tests.star.test_moving_world import EVERY_MODEL

DEADLINE = ["wireless.round_deadline_s=0.02"]


def _obs(overrides: list[str], steps: int = 3) -> list[dict[str, np.ndarray]]:
    env = WirelessFLEnv(mode="surrogate", overrides=overrides)
    obs, _ = env.reset(seed=3)
    seen = [obs]
    for _ in range(steps):
        obs, *_ = env.step(env.action_space.sample())
        seen.append(obs)
    return seen


def _zscore(x: np.ndarray) -> np.ndarray:
    return np.clip((x - x.mean()) / (x.std() + 1e-6), -5.0, 5.0)


def test_feature_names_follow_the_observed_keys() -> None:
    # Arrange: the three worlds' observation spaces
    plain = WirelessFLEnv(mode="surrogate").observation_space.spaces
    deadline = WirelessFLEnv(mode="surrogate", overrides=DEADLINE)
    everything = WirelessFLEnv(mode="surrogate", overrides=EVERY_MODEL)
    # Assert: twelve core columns, then the moving ones in the documented order
    assert feature_names(plain) == FEATURE_NAMES
    assert feature_names(deadline.observation_space.spaces) == (
        *FEATURE_NAMES,
        "compute_z",
    )
    assert feature_names(everything.observation_space.spaces) == (
        *FEATURE_NAMES,
        "available",
        "channel_age_share",
        "compute_z",
    )


def test_the_moving_columns_equal_their_closed_forms() -> None:
    # Arrange: observations of a world with every model on
    names = feature_names(MOVING_FEATURES.values())
    for obs in _obs(EVERY_MODEL, steps=4):
        table = client_features(obs, names).astype(np.float64)
        t = float(obs["round"][0])
        # Assert: the core columns are unchanged, the new ones are the table's
        np.testing.assert_array_equal(table[:, :12], client_features(obs))
        np.testing.assert_array_equal(table[:, 12], obs["available"] > 0.5)
        np.testing.assert_allclose(
            table[:, 13], np.clip(obs["channel_age"] / (t + 1.0), 0, 1), rtol=1e-6
        )
        expected = _zscore(obs["compute_time_s"].astype(np.float64))
        np.testing.assert_allclose(table[:, 14], expected, rtol=1e-5, atol=1e-6)
    # the ages do grow somewhere (the check above is not all zeros)
    assert any(o["channel_age"].max() > 0 for o in _obs(EVERY_MODEL, steps=6))


def test_the_batched_features_equal_each_lanes() -> None:
    # Arrange: four observations of the moving world stacked as E = 4 lanes
    seen = _obs(EVERY_MODEL, steps=3)
    names = feature_names(seen[0])
    stacked = {k: np.stack([o[k] for o in seen]) for k in seen[0]}
    # Act
    many = client_features_many(stacked, names)
    # Assert: lane by lane the one-observation features
    assert many.shape == (4, 10, 15)
    for e, obs in enumerate(seen):
        np.testing.assert_allclose(many[e], client_features(obs, names), atol=1e-6)


def test_a_missing_key_and_a_foreign_name_are_refused() -> None:
    obs = _obs([], steps=0)[0]
    with pytest.raises(ValueError, match="compute_time_s"):
        client_features(obs, (*FEATURE_NAMES, "compute_z"))
    with pytest.raises(ValueError, match="feature names must be"):
        client_features(obs, (*FEATURE_NAMES, "weather"))
    with pytest.raises(ValueError, match="feature names must be"):
        client_features(obs, FEATURE_NAMES[1:])


def test_the_flat_id_exposes_the_moving_columns_bounded() -> None:
    # Arrange: the RL-ready id over a moving world
    env = gym.make("WirelessFL-Flat-v0", overrides=EVERY_MODEL)
    names = env.unwrapped.inner.feature_names
    width = len(names)
    obs, _ = env.reset(seed=0)
    # Assert: 15 columns a client, in [-1, 1]; the available column is the key's
    assert width == 15 and env.observation_space.shape == (10 * width,)
    base = env.unwrapped.base
    for _ in range(4):
        online = base.backend.uplink.available(base.round)
        rows = obs.reshape(10, width)
        assert np.abs(obs).max() <= 1.0
        np.testing.assert_array_equal(rows[:, names.index("available")], online)
        obs, *_ = env.step(env.action_space.sample())
    env.close()


def test_bounded_features_map_the_moving_columns() -> None:
    # Arrange: extremes in each moving column
    names = feature_names(MOVING_FEATURES.values())
    table = np.zeros((3, len(names)))
    table[:, 12] = [0.0, 1.0, 1.0]
    table[:, 13] = [0.0, 0.5, 1.0]
    table[:, 14] = [-5.0, 0.0, 2.5]
    # Act
    out = bounded_features(table, names).reshape(table.shape)
    # Assert: unit, unit and z (divided by 5)
    assert [BOUNDED_FEATURES[f] for f in names[12:]] == ["unit", "unit", "z"]
    np.testing.assert_array_equal(out[:, 12], [0.0, 1.0, 1.0])
    np.testing.assert_array_equal(out[:, 13], [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(out[:, 14], [-1.0, 0.0, 0.5])
    with pytest.raises(ValueError, match=r"\(N, 15\)"):
        bounded_features(table[:, :12], names)


def test_the_learned_policy_reads_its_checkpoints_features(tmp_path) -> None:
    # Arrange: a checkpoint trained on the moving world's 15 columns
    env = WirelessFLEnv(mode="surrogate", overrides=EVERY_MODEL)
    names = feature_names(env.observation_space.spaces)
    arrays = initial_arrays([8], seed=1, features=len(names))
    arrays["pi_w_out"] = np.zeros_like(arrays["pi_w_out"])
    arrays["pi_w_out"][:, 0] = 1.0
    np.savez(tmp_path / "policy.npz", **arrays)
    meta = {"format": "rayfl-score-mlp", "features": list(names), "env_steps": 10}
    (tmp_path / "policy.json").write_text(json.dumps(meta))
    network, _ = load_checkpoint(tmp_path)
    policy = LearnedPolicy(env.observation_space, env.action_space, tmp_path)
    obs, _ = env.reset(seed=1)
    # Act
    scores = policy.scores(obs)
    # Assert: the scores are the network's on the 15 columns, ineligible never chosen
    assert network.features == names
    np.testing.assert_allclose(scores, network(client_features(obs, names)))
    action = np.asarray(policy(obs))
    chosen = action[action < 10]
    assert obs["eligible"][chosen].all()
    # a static world lacks the keys: a clear refusal, not a shape error
    plain = WirelessFLEnv(mode="surrogate")
    static = LearnedPolicy(plain.observation_space, plain.action_space, tmp_path)
    with pytest.raises(ValueError, match="moving world"):
        static.scores(plain.reset(seed=0)[0])
    # an unknown feature list is refused at load
    (tmp_path / "policy.json").write_text(
        json.dumps({**meta, "features": [*FEATURE_NAMES, "weather"]})
    )
    with pytest.raises(ValueError, match="trained on other features"):
        load_checkpoint(tmp_path)


def test_the_untrained_baseline_and_the_training_meta_see_the_moving_columns() -> None:
    # Arrange: the star's config with every model on
    cfg = load_config("examples/mobile_star.yaml")
    env = WirelessFLEnv(mode="surrogate", overrides=EVERY_MODEL)
    # Act
    untrained = LearnedPolicy(env.observation_space, env.action_space, untrained=True)
    keys = topology_of(cfg).rl_meta(cfg)["observation_keys"]
    # Assert: 15 inputs; the export would list the same columns as the env's
    assert untrained.network.layers[0][0].shape[0] == 15
    assert feature_names(keys) == ClientFeatures(env).feature_names
    assert (
        topology_of(load_config("examples/rl_star_small.yaml")).rl_meta(
            load_config("examples/rl_star_small.yaml")
        )["observation_keys"]
        == []
    )
