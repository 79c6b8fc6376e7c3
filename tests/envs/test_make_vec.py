"""``gym.make_vec(id, num_envs=4)`` for every registered id (issue 47).

``WirelessFL-v0``, ``HierarchicalFL-v0`` and ``D2DNeighbor-v0`` have vector entry
points (emulate lanes on shared client, device or node hosts: ``envs.star.vector``,
``envs.hierarchy.vector``, ``envs.d2d.vector``); the ``*-Flat-v0`` ids default to
the surrogate; ``WirelessFL-Flat-v0`` has its own lanes env (``envs.star.flat``), the
other two vectorize as Gymnasium's ``SyncVectorEnv``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_make_vec_gives_four_lanes_that_reset_and_step(ray_session, env_id):
    venv = gym.make_vec(env_id, num_envs=4)
    try:
        obs, _ = venv.reset(seed=0)
        for _ in range(2):
            obs, rewards, terminated, truncated, _ = venv.step(
                venv.action_space.sample()
            )
            assert np.shape(rewards) == (4,) and np.isfinite(rewards).all()
            assert np.shape(terminated) == np.shape(truncated) == (4,)
        assert venv.observation_space.contains(obs)
    finally:
        venv.close()
