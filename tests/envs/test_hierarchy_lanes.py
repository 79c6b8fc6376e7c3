"""The hierarchy's lanes (issue 47): a lane's episode is the episode run alone.

:class:`envs.hierarchy.vector.HierarchicalFLVectorEnv` steps E H2FDP runs on
shared device hosts (:mod:`rayfl.hierarchy.lanes`). Lane e, given a seed and a
fixed action sequence, must return what ``HierarchicalSchedulingEnv`` returns
alone with that seed — through an autoreset inside the episode. Training,
the edges, the cloud and the accounting are the same code on the same inputs;
the evaluation is one batched forward pass instead of one per device, equal to
float32 rounding. So every compared number is checked to rtol 1e-5 (the
observations' ``loss`` before the first round and the rewards come from that
evaluation); the schedules and the ``info`` lists are checked exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from envs.hierarchy.scheduling import HierarchicalSchedulingEnv
from envs.hierarchy.vector import HierarchicalFLVectorEnv
from rayfl.config import load_config
from rayfl.hierarchy.lanes import check_lanes
from tests.hierarchy.test_scheduling import TINY

#: Two segments per global round (τ = 2, m = 1), DP on: one trusted edge (edge
#: noise) and one untrusted (device noise), 3 rounds then an autoreset.
CONFIG = {
    **TINY,
    "rounds": 3,
    "topology": {
        **TINY["topology"],
        "trusted_edges": [0],
        "scheduling": {"subchannels_per_edge": 2},
    },
}
SEEDS = [5, 11, 17]
STEPS = 5  # rounds 0-2, autoreset, round 0 of a drawn seed


def _close(a, b, where):
    np.testing.assert_allclose(
        np.asarray(a, dtype=np.float64),
        np.asarray(b, dtype=np.float64),
        rtol=1e-5,
        atol=1e-6,
        err_msg=where,
    )


def _lane_obs(obs, e):
    return {c: {k: v[e] for k, v in edge.items()} for c, edge in obs.items()}


def _compare_obs(got, want, where):
    assert got.keys() == want.keys()
    for c in want:
        assert got[c].keys() == want[c].keys()
        for key in want[c]:
            _close(got[c][key], want[c][key], f"{where} {c}/{key}")


def _alone(seed, actions):
    """The env alone: (obs, reward, terminated, truncated, info) per step."""
    env = HierarchicalSchedulingEnv(CONFIG, reward="min_max_loss")
    try:
        out = [env.reset(seed=seed)]
        done = False
        for action in actions:
            if done:  # NEXT_STEP autoreset: reward 0, the reset's obs and info
                obs, info = env.reset()
                out.append((obs, 0.0, False, False, info))
                done = False
                continue
            obs, r, term, trunc, info = env.step(action)
            out.append((obs, r, term, trunc, info))
            done = term or trunc
        return out
    finally:
        env.close()


def test_each_lane_equals_its_episode_run_alone(ray_session):
    venv = HierarchicalFLVectorEnv(num_envs=3, config=CONFIG, reward="min_max_loss")
    venv.action_space.seed(3)
    actions = [venv.action_space.sample() for _ in range(STEPS)]
    try:
        lanes = [venv.reset(seed=SEEDS)]
        lanes += [venv.step(a) for a in actions]
    finally:
        venv.close()
    scheduled = 0
    for e, seed in enumerate(SEEDS):
        alone = _alone(seed, [a[e] for a in actions])
        obs, info = lanes[0]
        _compare_obs(_lane_obs(obs, e), alone[0][0], f"lane {e} reset")
        for t in range(1, STEPS + 1):
            obs, rewards, terms, truncs, infos = lanes[t]
            w_obs, w_r, w_term, w_trunc, w_info = alone[t]
            where = f"lane {e} step {t}"
            _compare_obs(_lane_obs(obs, e), w_obs, where)
            _close(rewards[e], w_r, f"{where} reward")
            assert (bool(terms[e]), bool(truncs[e])) == (w_term, w_trunc), where
            for key, value in w_info.items():
                assert infos[f"_{key}"][e], f"{where} info {key} missing"
                got = infos[key][e]
                if key in ("scheduled", "ignored"):
                    assert list(got) == list(value), f"{where} {key}"
                else:
                    _close(got, value, f"{where} {key}")
            scheduled += len(w_info.get("scheduled", []))
    assert scheduled > 0  # devices trained, so the lanes' training was compared
    assert bool(lanes[3][3][0]) and lanes[4][1][0] == 0.0  # truncated, then reset


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"algorithm": {"kind": "scaffold"}}, "algorithm.kind"),
        ({"topology": {**CONFIG["topology"], "control": {"enabled": True}}}, "control"),
        ({"topology": {**CONFIG["topology"], "local_at_global": True}}, "local_at"),
    ],
)
def test_lanes_refuse_what_they_cannot_run_exactly(change, message):
    with pytest.raises(ValueError, match=message):
        check_lanes(load_config({**CONFIG, **change}))


def test_a_reset_seed_reaches_the_device_hosts(ray_session):
    """reset(seed=s) re-seeds the devices (batch order, device noise), not only the edges.

    A restart used to keep the build seed on the device actors, so every
    episode of an env trained on the batch orders of its first seed.
    """
    import ray

    env = HierarchicalSchedulingEnv(CONFIG)
    try:
        env.reset(seed=SEEDS[1])
        hosts = env.backend.pool.actors
        seeds = ray.get([a.__ray_call__.remote(lambda h: h.setup.seed) for a in hosts])
        assert seeds == [SEEDS[1]] * len(hosts)
    finally:
        env.close()
