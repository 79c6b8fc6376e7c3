"""PettingZoo parallel envs: one agent per edge, one per D2D target (issue 34).

PettingZoo's own ``parallel_api_test`` (every warning an error), then what the
agents' actions and rewards mean, checked against the base env's info.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from pettingzoo.test import parallel_api_test  # noqa: E402

from envs.d2d.multiagent import D2DTargetsParallelEnv  # noqa: E402
from envs.hierarchy.multiagent import HierarchicalEdgesParallelEnv  # noqa: E402
from policies.features import NUM_FEATURES  # noqa: E402

ENVS = {
    "hierarchy": HierarchicalEdgesParallelEnv,
    "d2d": D2DTargetsParallelEnv,
}


@pytest.mark.parametrize("kind", ENVS)
def test_parallel_api_test_passes_without_warnings(kind):
    env = ENVS[kind]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=30)
    env.close()


def test_one_agent_per_edge_sharing_the_global_reward():
    env = HierarchicalEdgesParallelEnv()
    base = env.hierarchy
    assert env.possible_agents == [f"edge_{c}" for c in range(len(base.sizes))]
    obs, _ = env.reset(seed=0)
    for c, agent in enumerate(env.possible_agents):
        assert obs[agent].shape == (base.sizes[c] * NUM_FEATURES,)
        assert env.action_space(agent).shape == (base.sizes[c],)
    # Act: every edge prefers its device 1 then 0
    actions = {}
    for c, agent in enumerate(env.agents):
        scores = np.full(base.sizes[c], -1.0, dtype=np.float32)
        scores[[1, 0]] = [1.0, 0.5]
        actions[agent] = scores
    _, rewards, _, truncated, infos = env.step(actions)
    # Assert: each edge scheduled exactly those two devices (K_e = 2)
    expected = sorted(int(m) for r in base.rules for m in r.members[:2])
    assert infos["edge_0"]["scheduled"] == expected
    assert len(set(rewards.values())) == 1
    np.testing.assert_allclose(
        rewards["edge_0"], -max(base.scores.test_loss), rtol=1e-12
    )
    assert not any(truncated.values())
    with pytest.raises(ValueError, match="no action for live agent 'edge_1'"):
        env.step({"edge_0": actions["edge_0"]})


def test_one_agent_per_d2d_target_with_its_own_reward():
    env = D2DTargetsParallelEnv()
    base = env.d2d
    n = base.num_nodes
    obs, _ = env.reset(seed=1)
    assert env.possible_agents == [f"target_{t}" for t in range(n)]
    assert base.targets == tuple(range(n))
    # Act: target 0 takes no neighbor (all scores negative); the others rank by id
    actions = {a: np.linspace(1.0, 0.1, n).astype(np.float32) for a in env.agents}
    actions["target_0"] = np.full(n, -1.0, dtype=np.float32)
    _, rewards, _, _, infos = env.step(actions)
    info = infos["target_0"]
    # Assert: target 0 selected nobody; target 1 took the F lowest other ids
    assert info["neighbors"][0] == []
    f = base.num_subchannels
    assert info["neighbors"][1] == [s for s in range(n) if s != 1][:f]
    for t in range(n):  # min_max_loss of one model: minus its own test loss
        np.testing.assert_allclose(
            rewards[f"target_{t}"], -info["test_loss"][t], rtol=1e-12
        )
    assert len(set(rewards.values())) > 1


def test_episode_ends_for_every_agent_after_config_rounds():
    env = HierarchicalEdgesParallelEnv(overrides=["rounds=3"])
    env.reset(seed=0)
    steps = 0
    while env.agents:
        actions = {a: env.action_space(a).sample() for a in env.agents}
        _, _, terminated, truncated, _ = env.step(actions)
        steps += 1
    assert steps == 3 and all(truncated.values()) and not any(terminated.values())
    with pytest.raises(RuntimeError, match="call reset"):
        env.step({})


@pytest.mark.parametrize("kind", ENVS)
def test_render_modes(kind):
    env = ENVS[kind](render_mode="ansi")
    env.reset(seed=0)
    env.step({a: env.action_space(a).sample() for a in env.agents})
    assert "schedule:" in env.render()
    image_env = ENVS[kind](render_mode="rgb_array")
    image_env.reset(seed=0)
    image = image_env.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
