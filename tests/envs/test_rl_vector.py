"""The RL vector env (envs.rl_vector): lane e is ``make_rl_env`` of the same seed.

The oracle is ``make_rl_env`` itself, one env per lane (an Engine run per
episode on its own actors, in emulate mode): lane e of the vector env, reset
with seed s + e and given the same scores, must return the same features,
rewards and episode ends, across NEXT_STEP autoresets (the step after the end
resets the lane, its action unused) and, with ``partition_seeds``, across
partition changes. Equal to float32 rounding where evaluation enters (the
lanes evaluate all clients in one forward pass), as in tests/envs/test_vector.py.
"""

import numpy as np
import pytest

from envs.rl import make_rl_env
from envs.rl_vector import RLVectorEnv, make_rl_vector_env

#: A small star (4 clients, 2 subchannels, 1-round episodes): every other step
#: is an autoreset, which keeps the emulate test quick.
SMALL = ["data.num_clients=4", "wireless.num_subchannels=2", "rounds=1"]
SEED, LANES = 10, 2
#: The features' loss columns come from evaluations: float32 rounding, which
#: the features' normalisation across clients turns into ~1e-6 absolute.
RTOL, ATOL = 1e-5, 2e-5


def _vector_trace(mode, steps, **kwargs):
    venv = make_rl_vector_env(num_envs=LANES, mode=mode, reward_scale=0.5, **kwargs)
    rng = np.random.default_rng(0)
    actions = [rng.normal(size=venv.action_space.shape) for _ in range(steps)]
    partitions = []
    try:
        obs, info = venv.reset(seed=SEED)
        assert venv.observation_space.contains(obs)
        trace = [(obs, None, None, None)]
        partitions.append(venv.current)
        for action in actions:
            obs, reward, terminated, truncated, info = venv.step(action)
            trace.append((obs, reward, terminated, truncated))
            partitions.append(venv.current)
    finally:
        venv.close()
    return actions, trace, partitions


def _single_traces(mode, actions, **kwargs):
    """Each lane's trace from ``make_rl_env`` (NEXT_STEP autoreset).

    Without partitions one env serves every lane (a reset with the lane's
    seed starts its run afresh); ``DataPartitions`` counts episodes, so with
    partitions each lane gets its own env.
    """
    traces, partitions = [], []
    shared = None if "partition_seeds" in kwargs else _rl_env(mode, kwargs)
    try:
        for lane in range(LANES):
            env = shared or _rl_env(mode, kwargs)
            try:
                trace, seen = _play(env, lane, actions)
            finally:
                if env is not shared:
                    env.close()
            traces.append(trace)
            partitions.append(seen)
    finally:
        if shared is not None:
            shared.close()
    return traces, partitions


def _rl_env(mode, kwargs):
    return make_rl_env(None, mode=mode, reward_scale=0.5, **kwargs)


def _play(env, lane, actions):
    obs, info = env.reset(seed=SEED + lane)
    trace, seen = [(obs, None, None, None)], [info.get("partition_seed")]
    ended = False
    for action in actions:
        if ended:
            obs, info = env.reset()
            reward, terminated, truncated = 0.0, False, False
            seen.append(info.get("partition_seed"))
        else:
            obs, reward, terminated, truncated, _ = env.step(action[lane])
            seen.append(seen[-1])
        trace.append((obs, reward, terminated, truncated))
        ended = terminated or truncated
    return trace, seen


def _assert_lane_matches(vector, single, lane):
    for step, ((v_obs, v_r, v_te, v_tr), (obs, r, te, tr)) in enumerate(
        zip(vector, single, strict=True)
    ):
        where = f"lane {lane} step {step}"
        np.testing.assert_allclose(
            v_obs[lane], obs, rtol=RTOL, atol=ATOL, err_msg=where
        )
        if step:
            np.testing.assert_allclose(v_r[lane], r, rtol=RTOL, err_msg=where)
            assert (v_te[lane], v_tr[lane]) == (te, tr), where


def _check(mode, steps, extra=(), **kwargs):
    kwargs["overrides"] = [*SMALL, *extra]
    actions, vector, v_partitions = _vector_trace(mode, steps, **kwargs)
    singles, s_partitions = _single_traces(mode, actions, **kwargs)
    # an autoreset happened (1-round episodes: step 1 ends, step 2 resets)
    assert vector[1][3].all() and not vector[2][3].any()
    assert not np.array_equal(vector[1][0][0], vector[1][0][1])  # lanes differ
    for lane, single in enumerate(singles):
        _assert_lane_matches(vector, single, lane)
        assert s_partitions[lane] == v_partitions
    return v_partitions


@pytest.mark.parametrize(
    "mode",
    # emulate: ~30 s on a busy 2-core machine (actor start-ups dominate)
    ["surrogate", pytest.param("emulate", marks=pytest.mark.slow)],
)
def test_each_lane_is_make_rl_env_across_an_autoreset(mode, ray_session):
    assert _check(mode, steps=3) == [None] * 4


def test_lanes_change_partition_together_as_make_rl_env_does():
    partitions = _check(
        "surrogate", steps=7, partition_seeds=[3, 4, 5], partition_every=2
    )
    # lockstep episodes 0-1 on seed 3, 2-3 on 4; each 1 step + 1 autoreset
    assert partitions == [3, 3, 3, 3, 4, 4, 4, 4]


@pytest.mark.slow
def test_emulate_lanes_change_partition_as_make_rl_env_does(ray_session):
    # two partitions' client actors live at once: one CPU each
    partitions = _check(
        "emulate",
        steps=5,
        extra=["ray.run_cpus=1"],
        partition_seeds=[3, 4],
    )
    assert partitions == [3, 3, 4, 4, 3, 3]


def test_partition_offset_is_set_before_the_first_reset_only():
    venv = RLVectorEnv(2, mode="surrogate", overrides=SMALL, partition_seeds=[3, 4])
    venv.set_partition_offset(1)
    venv.reset(seed=0)
    assert venv.current == 4
    with pytest.raises(RuntimeError, match="before the first reset"):
        venv.set_partition_offset(0)
    venv.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, r"^num_envs must be >= 1, got 0$"),
        ({"partition_every": 0}, r"^partition_every must be >= 1"),
        ({"partition_seeds": []}, r"^partition_seeds must name"),
        ({"overrides": ["algorithm.kind=ditto"]}, r"^lanes need algorithm\.kind"),
    ],
    ids=["num-envs", "every", "no-seeds", "lanes-refuse"],
)
def test_bad_arguments_are_one_line_errors(kwargs, message):
    args = {"num_envs": 2, "overrides": SMALL, **kwargs}
    with pytest.raises(ValueError, match=message) as error:
        make_rl_vector_env(**args)
    assert "\n" not in str(error.value)


def test_step_before_reset_is_refused():
    venv = RLVectorEnv(2, mode="surrogate", overrides=SMALL)
    with pytest.raises(RuntimeError, match="reset"):
        venv.step(np.zeros(venv.action_space.shape))


def test_the_star_scores_of_many_lanes_decode_as_each_lanes_scores():
    """``HungarianTopK.action_many`` equals ``action`` lane by lane (the star).

    40 surrogate lanes of a 10-client, 3-subchannel star, edited so that some
    lanes tie in score or gain, have fewer eligible clients than subchannels,
    or a closed subchannel; ``positive`` selection is left to each lane.
    """
    from envs.rl import HungarianTopK
    from envs.star.vector import WirelessFLVectorEnv

    lanes = 40
    venv = WirelessFLVectorEnv(
        num_envs=lanes,
        mode="surrogate",
        overrides=["data.num_clients=10", "wireless.num_subchannels=3"],
    )
    venv.action_space.seed(0)
    obs, _ = venv.reset(seed=3)
    rng = np.random.default_rng(1)
    scores = rng.uniform(-1, 1, (lanes, 10))
    scores[:8] = np.round(scores[:8], 0)  # ties in score: the lower id first
    obs["channel_gain"][8:12] = 3.0  # every matching ties
    obs["eligible"][12:16, 2:] = 0.0  # two eligible clients
    obs["channel_gain"][16:18, 0, 0] = -np.inf  # a closed subchannel
    wrappers = [HungarianTopK(env) for env in venv.envs]
    # Act
    many = wrappers[0].action_many(obs, scores)
    # Assert
    assert many is not None
    for e, wrapper in enumerate(wrappers):
        wrapper.last_obs = {k: v[e] for k, v in obs.items()}
        np.testing.assert_array_equal(many[e], wrapper.action(scores[e]))
    # what it leaves to each lane's decoder: NaN scores, positive selection
    bad = np.where(np.eye(lanes, 10) > 0, np.nan, scores)
    assert wrappers[0].action_many(obs, bad) is None
    assert HungarianTopK(venv.envs[0], positive=True).action_many(obs, scores) is None
    venv.close()
