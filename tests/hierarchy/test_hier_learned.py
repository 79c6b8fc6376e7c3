"""The learned policy on the hierarchy: trained by train-policy on HierarchicalFL-v0
(surrogate), then driving a ``rayfl run`` with the choices the env makes."""

from __future__ import annotations

import pytest

from rayfl.train_policy import rllib_available
from tests.hierarchy.test_scheduling import TINY
from tests.rl.tiny_training import TINY_RL, assert_trained, train_tiny

TINY_HIER = {
    **TINY,
    "name": "tiny-hier-rl",
    "seed": 5,
    "topology": {**TINY["topology"], "scheduling": {"subchannels_per_edge": 2}},
    "rl": {**TINY_RL, "train_batch_size": 16, "baselines": ["random", "round_robin"]},
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not rllib_available(), reason="RLlib not installed"),
]


@pytest.fixture(scope="module")
def trained(ray_session, tmp_path_factory):
    return train_tiny(TINY_HIER, tmp_path_factory.mktemp("train"))


def test_train_policy_trains_on_the_hierarchical_surrogate(trained):
    assert_trained(trained, TINY_HIER, num_clients=8, num_subchannels=2)


def test_a_run_schedules_what_the_env_schedules(trained, tmp_path):
    import rayfl
    from envs.hierarchy.scheduling import EdgePolicies, HierarchicalSchedulingEnv

    params = {"checkpoint": str(trained)}
    config = {
        **TINY_HIER,
        "scheduler": {"policy": "learned", "params": params},
        "output": {**TINY_HIER["output"], "dir": str(tmp_path)},
    }
    # Arrange: the emulate env on the real engine, the trained policy per edge
    env = HierarchicalSchedulingEnv(TINY_HIER, mode="emulate", reward="energy")
    chosen = []
    try:
        obs, _ = env.reset()
        policy = EdgePolicies(env, "learned", **params)
        for _ in range(TINY_HIER["rounds"]):
            obs, _, _, _, info = env.step(policy(obs))
            chosen.append(info["scheduled"])
    finally:
        env.close()
    # Act: the same policy in a run
    result = rayfl.run(config)
    # Assert: round by round, the run scheduled the devices the env did
    metrics = result.metrics
    got = [
        sorted(metrics[(metrics["round"] == t) & metrics["scheduled"]]["client"])
        for t in range(TINY_HIER["rounds"])
    ]
    assert got == chosen and all(len(c) == 4 for c in chosen)
    assert result.summary["status"] == "completed"
