"""The learned policy on the hierarchy: trained edge by edge, acting as it runs.

``make_rl_env`` of a hierarchical config stacks :class:`envs.rl.EdgeScores`
over ``HierarchicalFL-v0``. What a network does through that wrapper must be
what ``learned`` does per edge at run time (:class:`envs.hierarchy.scheduling.
EdgePolicies`, the builder of ``rayfl run``), or a policy would be trained on
one decision and deployed on another.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envs.hierarchy.rl import EdgeScores
from envs.hierarchy.scheduling import EdgePolicies, HierarchicalSchedulingEnv
from envs.rl import make_rl_env
from policies.learned import DEFAULT_CHECKPOINT, load_checkpoint
from rayfl.config import load_config
from tests.hierarchy.test_scheduling import TINY

HIER = {
    **TINY,
    "rounds": 4,
    "data": {**TINY["data"], "num_clients": 10},
    "topology": {**TINY["topology"], "scheduling": {"subchannels_per_edge": 2}},
    "rl": {"eval_episodes": 2, "baselines": ["random", "round_robin"]},
}


def test_the_flat_rl_env_of_the_hierarchy_passes_check_env():
    env = make_rl_env(HIER, mode="surrogate")
    assert isinstance(env.unwrapped, HierarchicalSchedulingEnv)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (10, env.observation_space.shape[1])
    assert env.action_space.shape == (10,)


def test_scores_decode_to_the_learned_policy_of_each_edge():
    env = make_rl_env(HIER, mode="surrogate", reward="loss")
    wrapper = env
    while not isinstance(wrapper, EdgeScores):
        wrapper = wrapper.env
    network, _ = load_checkpoint(None)
    runtime = EdgePolicies(wrapper.base, "learned")
    features, _ = env.reset(seed=2)
    scheduled = 0
    for _ in range(3):
        raw = wrapper.last_obs
        expected = runtime(raw)  # what `rayfl run` would schedule on this state
        action = wrapper.action(network(features))
        np.testing.assert_array_equal(action, expected)
        base = wrapper.base
        idle = np.repeat(base.sizes, base.num_subchannels)  # "idle" per entry
        scheduled += int((action != idle).sum())
        features, *_ = env.step(network(features))
    assert scheduled > 0  # the decoding did schedule devices


def test_the_features_of_many_lanes_are_each_lanes_features():
    # Arrange: three surrogate lanes a few rounds in (the same spaces as emulate)
    from envs.hierarchy.vector import HierarchicalFLVectorEnv

    venv = HierarchicalFLVectorEnv(num_envs=3, config=HIER, mode="surrogate")
    wrappers = [EdgeScores(env) for env in venv.envs]
    venv.action_space.seed(0)
    obs, _ = venv.reset(seed=4)
    for _ in range(2):
        obs, *_ = venv.step(venv.action_space.sample())
    # Act
    many = wrappers[0].observation_many(obs)
    # Assert: bit for bit each lane's own features
    for e, wrapper in enumerate(wrappers):
        lane = {c: {k: v[e] for k, v in edge.items()} for c, edge in obs.items()}
        np.testing.assert_array_equal(many[e], wrapper.observation(lane))
    venv.close()


def test_the_scores_of_many_lanes_decode_as_each_lanes_scores():
    """``action_many`` (the RL vector env's decoding) equals ``action`` lane by lane.

    On real observations of 40 lanes, edited so that some lanes tie in score,
    some in gain (the Hungarian's ties: scipy's choice), some have fewer
    eligible devices than subchannels or none, and some a closed subchannel.
    """
    from envs.hierarchy.vector import HierarchicalFLVectorEnv

    lanes = 40
    venv = HierarchicalFLVectorEnv(num_envs=lanes, config=HIER, mode="surrogate")
    wrappers = [EdgeScores(env) for env in venv.envs]
    venv.action_space.seed(0)
    obs, _ = venv.reset(seed=5)
    obs, *_ = venv.step(venv.action_space.sample())
    rng = np.random.default_rng(0)
    scores = rng.uniform(-1, 1, (lanes, 10))
    scores[:8] = np.round(scores[:8], 0)  # ties in score: the lower id first
    for edge in obs.values():
        gain, eligible = edge["channel_gain"], edge["eligible"]
        gain[8:12] = 3.0  # every matching ties
        gain[12:14, :, 1] = gain[12:14, :, 0]  # the subchannels tie
        eligible[14:18, 1:] = 0.0  # at most one eligible device
        eligible[18:20] = 0.0  # none
        gain[20:22, 0, 0] = -np.inf  # a closed subchannel
    # Act
    many = wrappers[0].action_many(obs, scores)
    # Assert: each lane's own decoding
    for e, wrapper in enumerate(wrappers):
        wrapper.last_obs = {
            c: {k: v[e] for k, v in edge.items()} for c, edge in obs.items()
        }
        np.testing.assert_array_equal(many[e], wrapper.action(scores[e]))
    # NaN scores: each lane's own decoding (which raises)
    assert (
        wrappers[0].action_many(obs, np.where(np.eye(lanes, 10) > 0, np.nan, scores))
        is None
    )
    venv.close()


def test_bad_scores_are_refused():
    env = make_rl_env(HIER, mode="surrogate")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="must be 10 finite values"):
        env.step(np.full(9, 0.5))
    with pytest.raises(ValueError, match="finite scores"):
        env.step(np.full(10, np.nan))


def test_the_rl_section_is_accepted_on_the_hierarchy_and_the_evaluation_runs():
    from rayfl.train_policy.evaluate import evaluate_policies

    cfg = load_config(HIER)
    assert cfg.rl is not None and cfg.rl.reward == "min_max_loss"
    table = evaluate_policies(cfg, None, episodes=2)
    assert list(table["policy"].unique()) == ["random", "round_robin"]
    assert len(table) == 4 and np.isfinite(table["return"]).all()
    # a learned network is scored beside them on the same episode seeds
    table = evaluate_policies(cfg, DEFAULT_CHECKPOINT, episodes=2, baselines=["random"])
    assert list(table["policy"].unique()) == ["learned", "random"]
