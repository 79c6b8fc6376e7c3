"""``gym.make_vec("WirelessFL-Flat-v0", num_envs=E)``: lane e is ``gym.make`` of the id.

The oracle is ``gym.make("WirelessFL-Flat-v0")`` itself, one env replayed per
lane: lane e of the vector env, reset with seed s + e and given the same
scores, must return the same flat observations, rewards and episode ends, across
a NEXT_STEP autoreset (the step after a lane's end resets it, its action
unused). Equal to float32 rounding where evaluation enters in emulate mode
(the lanes evaluate all clients in one forward pass), as in
tests/envs/test_rl_vector.py.
"""

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  # registers the ids
from envs.d2d.flat import D2DNeighborFlatEnv
from envs.star.flat import WirelessFLFlatVectorEnv

ENV_ID = "WirelessFL-Flat-v0"
#: A tiny star (4 clients, 2 subchannels, 2-round episodes): 4 steps cross an
#: episode end and its autoreset.
TINY = ["data.num_clients=4", "wireless.num_subchannels=2", "rounds=2"]
SEED, LANES, STEPS = 5, 2, 4
RTOL, ATOL = 1e-5, 2e-5


def _vector_trace(mode):
    venv = gym.make_vec(ENV_ID, num_envs=LANES, mode=mode, overrides=TINY)
    assert isinstance(venv.unwrapped, WirelessFLFlatVectorEnv)
    rng = np.random.default_rng(0)
    actions = [rng.uniform(-1, 1, size=venv.action_space.shape) for _ in range(STEPS)]
    try:
        obs, _ = venv.reset(seed=SEED)
        assert venv.observation_space.contains(obs)
        trace = [(obs, None, None, None)]
        for action in actions:
            obs, reward, terminated, truncated, _ = venv.step(action)
            assert venv.observation_space.contains(obs)
            trace.append((obs, reward, terminated, truncated))
    finally:
        venv.close()
    return actions, trace


def _single_trace(env, lane, actions):
    obs, _ = env.reset(seed=SEED + lane)
    trace, ended = [(obs, None, None, None)], False
    for action in actions:
        if ended:  # NEXT_STEP autoreset: this step begins the next episode
            obs, _ = env.reset()
            reward, terminated, truncated = 0.0, False, False
        else:
            obs, reward, terminated, truncated, _ = env.step(action[lane])
        trace.append((obs, reward, terminated, truncated))
        ended = terminated or truncated
    return trace


def _check(mode):
    actions, vector = _vector_trace(mode)
    # the episode of 2 rounds ends at step 2 in both lanes; step 3 resets
    assert vector[2][3].all() and not vector[3][3].any()
    assert not np.array_equal(vector[1][0][0], vector[1][0][1])  # lanes differ
    env = gym.make(ENV_ID, mode=mode, overrides=TINY)
    try:
        for lane in range(LANES):
            single = _single_trace(env, lane, actions)
            for step, (v, s) in enumerate(zip(vector, single, strict=True)):
                where = f"{mode} lane {lane} step {step}"
                np.testing.assert_allclose(
                    v[0][lane], s[0], rtol=RTOL, atol=ATOL, err_msg=where
                )
                if step:
                    np.testing.assert_allclose(
                        v[1][lane], s[1], rtol=RTOL, err_msg=where
                    )
                    assert (v[2][lane], v[3][lane]) == (s[2], s[3]), where
    finally:
        env.close()


def test_emulate_lane_e_is_gym_make_with_seed_plus_e(ray_session):
    _check("emulate")


def test_default_make_vec_is_surrogate_lanes_equal_to_gym_make():
    venv = gym.make_vec(ENV_ID, num_envs=3)
    try:
        assert venv.unwrapped.lanes.mode == "surrogate"
        obs, _ = venv.reset(seed=0)
        assert obs.shape == (3, 10 * 12) and venv.observation_space.contains(obs)
        _, rewards, *_ = venv.step(venv.action_space.sample())
        assert rewards.shape == (3,) and np.isfinite(rewards).all()
    finally:
        venv.close()
    _check("surrogate")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"render_mode": "ansi"}, r"^the WirelessFL-Flat-v0 lanes do not render"),
        ({"num_envs": 0}, r"^num_envs must be >= 1, got 0$"),
        (
            {"config": D2DNeighborFlatEnv.default_config, "overrides": ()},
            r"^WirelessFLFlatVectorEnv needs topology\.kind=star",
        ),
    ],
    ids=["render", "num-envs", "topology"],
)
def test_bad_arguments_are_one_line_errors(kwargs, message):
    args = {"num_envs": 2, "overrides": TINY, **kwargs}
    with pytest.raises(ValueError, match=message) as error:
        WirelessFLFlatVectorEnv(**args)
    assert "\n" not in str(error.value)
