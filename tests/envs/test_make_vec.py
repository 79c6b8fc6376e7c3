"""``gym.make_vec(id, num_envs=4)`` for every registered id (issue 47).

``WirelessFL-v0`` has a vector entry point (emulate lanes on shared client
actors); the ``*-Flat-v0`` ids and ``D2DNeighbor-v0`` default to the surrogate
and vectorize as Gymnasium's ``SyncVectorEnv``. ``HierarchicalFL-v0`` defaults
to the emulation and has no lanes yet: four separate engines cannot share a
2-CPU session (a one-line ``ResourceError`` after the first engine started),
so it is left out until the hierarchy's lanes land.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs

#: Emulate by default, without lanes (issue 47).
NO_LANES_YET = {"HierarchicalFL-v0"}


@pytest.mark.parametrize("env_id", [i for i in envs.ENV_IDS if i not in NO_LANES_YET])
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
