"""The vector env (envs.star.vector): lane e is the single WirelessFL-v0 env.

The oracle is the single env itself (an Engine run per episode on its own
actors): lane e of the vector env, reset with seed s + e and given the same
actions, must return the same observations, rewards and episode ends, across
an autoreset (NEXT_STEP: the step after the end resets the lane, seed drawn
from the lane's own generator as the single env's ``reset()`` draws it). Bit
for bit except what evaluation measures (to float32 rounding, see EVALUATED).
"""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import envs  # noqa: F401  (registers the ids)
from envs.star.vector import WirelessFLVectorEnv
from rayfl.runner import env_policy
from rayfl.star.context import star_context

#: A small star (4 clients, 2 subchannels, 2-round episodes) keeps the test quick.
SMALL = ["data.num_clients=4", "wireless.num_subchannels=2", "rounds=2"]
SEED, STEPS, LANES = 10, 4, 2


def _vector_trace(mode):
    venv = gym.make_vec(
        "WirelessFL-v0",
        num_envs=LANES,
        vectorization_mode="vector_entry_point",
        mode=mode,
        overrides=SMALL,
    )
    venv.action_space.seed(0)
    actions = [venv.action_space.sample() for _ in range(STEPS)]
    contexts = []
    try:
        obs, _ = venv.reset(seed=SEED)
        if mode == "emulate":  # what a policy built for the lane reads
            contexts = [star_context(env.backend.system) for env in venv.envs]
            scheduler = venv.config.scheduler.model_copy(
                update={"policy": "best_channel"}
            )
            cfg = venv.config.model_copy(update={"scheduler": scheduler})
            assert type(env_policy(cfg, venv.envs[0])).__name__ == "BestChannelPolicy"
        trace = [(obs, None, None, None)]
        for action in actions:
            obs, reward, terminated, truncated, _ = venv.step(action)
            trace.append((obs, reward, terminated, truncated))
    finally:
        venv.close()
    _CONTEXTS[mode] = contexts
    return actions, trace


#: Each lane's policy context after the first reset, by mode (emulate only).
_CONTEXTS: dict = {}


def _single_traces(mode, actions):
    """Each lane's trace from one single env (one engine, reset per lane)."""
    env = gym.make("WirelessFL-v0", mode=mode, overrides=SMALL)
    traces = []
    try:
        for lane in range(LANES):
            obs, _ = env.reset(seed=SEED + lane)
            if mode == "emulate":
                want = star_context(env.unwrapped.backend.system)
                assert _CONTEXTS[mode][lane] == want, f"lane {lane}'s policy context"
            trace = [(obs, None, None, None)]
            ended = False
            for action in actions:
                if ended:  # NEXT_STEP autoreset: the lane resets, its action unused
                    obs, _ = env.reset()
                    reward, terminated, truncated = 0.0, False, False
                else:
                    obs, reward, terminated, truncated, _ = env.step(action[lane])
                trace.append((obs, reward, terminated, truncated))
                ended = terminated or truncated
            traces.append(trace)
    finally:
        env.close()
    return traces


#: Observation keys that come from evaluating the clients (the losses measured
#: at reset): the lanes evaluate all clients in one forward pass, equal to the
#: per-client evaluation to float32 rounding (rayfl.learning.segment_eval).
EVALUATED = {"loss"}
RTOL = 1e-6


def _assert_lane_matches(vector, single, lane):
    for step, ((v_obs, v_r, v_te, v_tr), (obs, r, te, tr)) in enumerate(
        zip(vector, single, strict=True)
    ):
        for key in obs:
            where = f"lane {lane} step {step} {key}"
            if key in EVALUATED:
                np.testing.assert_allclose(v_obs[key][lane], obs[key], rtol=RTOL)
            else:  # channel, ledger, history: bit for bit
                np.testing.assert_array_equal(v_obs[key][lane], obs[key], where)
        if step:  # the reward is a test loss: evaluated
            np.testing.assert_allclose(v_r[lane], r, rtol=RTOL)
            assert (v_te[lane], v_tr[lane]) == (te, tr), f"lane {lane} step {step}"


@pytest.mark.parametrize("mode", ["emulate", "surrogate"])
def test_each_lane_is_the_single_env_across_an_autoreset(mode, ray_session):
    # Arrange / Act: the vector env first (its actors end before the single env's)
    actions, vector = _vector_trace(mode)
    # Assert: an autoreset happened (rounds=2: steps 1-2 play, step 3 resets)
    assert vector[2][3].all() and not vector[3][3].any()
    assert not np.array_equal(
        vector[1][0]["channel_gain"][0], vector[1][0]["channel_gain"][1]
    )
    for lane, single in enumerate(_single_traces(mode, actions)):
        _assert_lane_matches(vector, single, lane)


def test_registered_as_the_vector_entry_point_with_batched_spaces():
    venv = gym.make_vec(
        "WirelessFL-v0",
        num_envs=3,
        vectorization_mode="vector_entry_point",
        mode="surrogate",
    )
    single = gym.make("WirelessFL-v0", mode="surrogate")
    assert isinstance(venv.unwrapped, WirelessFLVectorEnv)
    assert venv.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert venv.single_action_space == single.action_space
    assert venv.action_space.shape == (3, *single.action_space.shape)
    assert venv.observation_space["channel_gain"].shape == (
        3,
        *single.observation_space["channel_gain"].shape,
    )
    obs, info = venv.reset(seed=0)
    assert venv.observation_space.contains(obs)
    assert info["round"].tolist() == [0, 0, 0]
    venv.close()


@pytest.mark.parametrize(
    "num_envs",
    [0, -2, 1.5, "4", True],
    ids=["zero", "negative", "float", "str", "bool"],
)
def test_bad_num_envs_is_a_one_line_error(num_envs):
    with pytest.raises(ValueError, match=r"^num_envs must be") as error:
        WirelessFLVectorEnv(num_envs=num_envs, mode="surrogate")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ("algorithm.kind=ditto", r"lanes need algorithm\.kind in fedavg, fedprox"),
        ("algorithm.trainer=vectorized", r"lanes need algorithm\.trainer"),
        ("eval_clients=2", r"lanes need eval_clients unset"),
    ],
    ids=["algorithm", "trainer", "eval-sample"],
)
def test_a_config_the_lanes_cannot_share_is_refused_before_any_actor(override, reason):
    # emulate mode only: no Ray session is needed to refuse it
    with pytest.raises(ValueError, match=reason) as error:
        WirelessFLVectorEnv(num_envs=2, overrides=[override])
    assert "\n" not in str(error.value)
    # the surrogate has no actors to share: the same config is fine there
    WirelessFLVectorEnv(num_envs=2, mode="surrogate", overrides=[override]).close()


def test_seed_list_must_name_every_lane():
    venv = WirelessFLVectorEnv(num_envs=2, mode="surrogate")
    with pytest.raises(ValueError, match="2 seeds"):
        venv.reset(seed=[1, 2, 3])
    with pytest.raises(RuntimeError, match="reset"):
        WirelessFLVectorEnv(num_envs=2, mode="surrogate").step(np.zeros((2, 4), int))
