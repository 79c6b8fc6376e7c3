"""The learned policy on D2D: trained on D2DNeighbor-v0 (surrogate) by train-policy,
then driving the env's emulate mode and a ``rayfl run`` with the same choices."""

from __future__ import annotations

import json

import pytest

from rayfl.train_policy import rllib_available
from tests.d2d.test_d2d_round import BASE
from tests.rl.tiny_training import TINY_RL, assert_trained, train_tiny

TINY_D2D = {
    **BASE,
    "name": "tiny-d2d",
    "topology": {"kind": "d2d", "target": 0, "num_subchannels": 2},
    "rl": {**TINY_RL, "train_batch_size": 24, "baselines": ["random_neighbors"]},
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not rllib_available(), reason="RLlib not installed"),
]


@pytest.fixture(scope="module")
def trained(ray_session, tmp_path_factory):
    return train_tiny(TINY_D2D, tmp_path_factory.mktemp("train"))


def test_train_policy_trains_on_the_d2d_surrogate(trained):
    assert_trained(trained, TINY_D2D, num_clients=6, num_subchannels=2)
    meta = json.loads((trained / "policy" / "policy.json").read_text())
    assert meta["selection"] == "positive"  # it picks how many neighbours


def test_learned_drives_the_emulate_env_and_a_run_alike(trained, tmp_path):
    import rayfl
    from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action
    from policies.learned import select_top_k

    # Arrange: the env on the real engine, the trained policy per target
    params = {"checkpoint": str(trained)}
    env = D2DNeighborEnv(TINY_D2D, mode="emulate")
    chosen = []
    try:
        obs, _ = env.reset()
        (policy,) = make_selection_policies(env, "learned", params)
        for _ in range(TINY_D2D["rounds"]):
            # Act
            action = policy_action(env, [policy], obs)
            scores, eligible = policy.scores(obs), obs["eligible"] > 0.5
            want = select_top_k(scores, eligible, 2, positive=True)
            obs, _, _, _, info = env.step(action)
            # Assert: the (at most) two best positive-scored candidates are M_n
            assert info["neighbors"][0] == sorted(want.tolist())
            chosen.append(info["neighbors"][0])
    finally:
        env.close()
    # Act: the same policy in a run that re-selects through the env every round
    config = {
        **TINY_D2D,
        "topology": {
            **TINY_D2D["topology"],
            "selection_via": "env",
        },
        "scheduler": {"policy": "learned", "params": params},
        "output": {**TINY_D2D["output"], "dir": str(tmp_path)},
    }
    result = rayfl.run(config)
    # Assert: the run selected what the env selected, round by round
    metrics = result.metrics
    got = [
        sorted(metrics[(metrics["round"] == t) & metrics["selected"]]["client"])
        for t in range(TINY_D2D["rounds"])
    ]
    assert got == chosen
    assert result.summary["status"] == "completed"
