"""The RL lanes env on the hierarchy and D2D: lane e is ``make_rl_env`` alone (issue 47).

``envs.rl_vector.make_rl_vector_env`` is every plug-in's ``lanes`` env: the
topology's vector env (its emulate lanes) behind the plug-in's ``rl_scores``
decoding and features, lane by lane. The oracle is ``make_rl_env`` with the
same config, seed s + e and the same score actions, through the autoreset
after a 3-round episode. The lanes evaluate in one batched forward pass where
the env alone evaluates client by client (float32 rounding, see
tests/envs/test_hierarchy_lanes.py and tests/envs/test_d2d_lanes.py); the
features' z-scores amplify that rounding, hence rtol 1e-4, atol 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from envs.rl import make_rl_env
from envs.rl_vector import make_rl_vector_env
from rayfl.config import load_config
from rayfl.registry import topology_of

pytestmark = pytest.mark.usefixtures("ray_session")

LANES, STEPS, SEED = 2, 4, 3
OVERRIDES = ["rounds=3"]


def _assert_str_keys(infos):
    for key, value in infos.items():
        assert isinstance(key, str), key
        if isinstance(value, dict):
            _assert_str_keys(value)


def _close(a, b, where):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=where)


@pytest.mark.parametrize(
    "config",
    [
        # the small hierarchy (digits): the same topology and lanes as
        # rl_hierarchical.yaml, without its Fashion-MNIST data (~2x faster)
        "examples/rl_hierarchical_small.yaml",
        # slow (45 s): the D2D lanes' own oracle runs in the default suite
        pytest.param("examples/rl_d2d.yaml", marks=pytest.mark.slow),
    ],
)
def test_each_rl_lane_equals_make_rl_env_alone(config):
    reward = load_config(config).rl.reward
    assert topology_of(load_config(config)).envs["lanes"].startswith("envs.rl_vector")
    venv = make_rl_vector_env(
        config, num_envs=LANES, mode="emulate", reward=reward, overrides=OVERRIDES
    )
    rng = np.random.default_rng(0)
    actions = [
        rng.uniform(-1, 1, size=venv.action_space.shape).astype(np.float32)
        for _ in range(STEPS)
    ]
    try:
        obs, infos = venv.reset(seed=SEED)
        trace, all_infos = [(obs,)], [infos]
        for a in actions:
            *step, infos = venv.step(a)
            trace.append(tuple(step))
            all_infos.append(infos)
    finally:
        venv.close()
    for infos in all_infos:  # RLlib's vector envs want str keys at every depth
        _assert_str_keys(infos)
    ended = np.array([t[2] | t[3] for t in trace[1:]])
    assert ended.any(axis=0).all(), "every lane should end an episode (autoreset)"
    for e in range(LANES):
        env = make_rl_env(config, mode="emulate", reward=reward, overrides=OVERRIDES)
        try:
            obs, _ = env.reset(seed=SEED + e)
            _close(obs, trace[0][0][e], f"lane {e} reset")
            done = False
            for t, action in enumerate(actions):
                if done:  # NEXT_STEP autoreset: reward 0, the reset's obs
                    obs, _ = env.reset()
                    reward_, terminated, truncated = 0.0, False, False
                else:
                    obs, reward_, terminated, truncated, _ = env.step(action[e])
                got = trace[t + 1]
                _close(obs, got[0][e], f"lane {e} step {t} obs")
                _close(reward_, got[1][e], f"lane {e} step {t} reward")
                assert (terminated, truncated) == (got[2][e], got[3][e])
                done = terminated or truncated
        finally:
            env.close()


def test_the_rl_lanes_refuse_what_the_topology_lanes_refuse():
    config = load_config("examples/rl_hierarchical.yaml")
    topology = config.topology.model_copy(
        update={"control": config.topology.control.model_copy(update={"enabled": True})}
    )
    controlled = config.model_copy(update={"topology": topology})
    with pytest.raises(ValueError, match="control"):
        make_rl_vector_env(controlled, num_envs=2, mode="emulate")
