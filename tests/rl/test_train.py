"""PPO on the surrogate env (RLlib new API stack), tiny budgets.

Skipped without the `rl` extra (`pip install -e '.[rl]'`); `make test` installs it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rayfl.train_policy import rllib_available

pytestmark = pytest.mark.skipif(
    not rllib_available(),
    reason="RLlib not installed: pip install -e '.[rl]' (ray[rllib]==2.60.0)",
)

TINY = {
    "name": "tiny",
    "rounds": 5,
    "data": {"dataset": "digits", "num_clients": 5, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 2},
    "output": {"progress": False, "plots": False},
    "rl": {
        "train_batch_size": 40,
        "minibatch_size": 20,
        "num_epochs": 2,
        "hidden": [8],
        "iterations": 1,
        "eval_episodes": 1,
        "baselines": ["random"],
    },
}


@pytest.fixture(scope="module")
def algo(ray_session):
    from rayfl.config import load_config
    from rayfl.train_policy import build_algorithm

    cfg = load_config(TINY)
    algo = build_algorithm(cfg, cfg.rl)
    yield algo
    algo.stop()


def _observations(count=6):
    from envs.rl import make_rl_env

    env = make_rl_env(TINY, mode="surrogate")
    obs, _ = env.reset(seed=0)
    raws, feats = [env.get_wrapper_attr("last_obs")], [obs]
    for _ in range(count - 1):
        obs, *_ = env.step(np.linspace(-1, 1, 5))
        raws.append(env.get_wrapper_attr("last_obs"))
        feats.append(obs)
    return raws, np.stack(feats)


def _deterministic_scores(algo, features):
    import torch

    module = algo.get_module()
    with torch.no_grad():
        out = module.forward_inference({"obs": torch.as_tensor(features)})
    loc, _ = out["action_dist_inputs"].chunk(2, dim=-1)
    return loc.numpy()


def test_one_ppo_iteration_updates_the_policy(algo):
    from rayfl.rl.module import export_arrays

    before = export_arrays(algo.get_module())
    result = algo.train()
    # the env runners receive the learner's new weights before their next sample
    algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group)
    after = export_arrays(algo.get_module())
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 40
    assert np.isfinite(result["learners"]["default_policy"]["entropy"])
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def test_checkpoint_round_trip_gives_identical_actions(algo, tmp_path):
    from policies.learned import LearnedPolicy, select_top_k
    from rayfl.config import load_config
    from rayfl.train_policy import build_algorithm, export_policy

    # Arrange
    raws, features = _observations()
    algo.save_to_path(str(tmp_path / "checkpoint"))
    export_policy(algo, tmp_path / "policy", {})
    cfg = load_config(TINY)
    restored = build_algorithm(cfg, cfg.rl)
    # Act
    restored.restore_from_path(str(tmp_path / "checkpoint"))
    original = _deterministic_scores(algo, features)
    again = _deterministic_scores(restored, features)
    restored.stop()
    from envs.star.scheduling import WirelessFLEnv

    spaces_env = WirelessFLEnv(TINY, mode="surrogate")
    exported = LearnedPolicy(
        spaces_env.observation_space,
        spaces_env.action_space,
        checkpoint=tmp_path / "policy",
    )
    # Assert: RLlib restore is exact; numpy export equal to float tolerance and
    # gives the same schedules
    np.testing.assert_array_equal(original, again)
    for raw, loc in zip(raws, original, strict=True):
        np.testing.assert_allclose(exported.scores(raw), loc, rtol=1e-4, atol=1e-5)
        chosen = select_top_k(loc, raw["eligible"] > 0.5, 2)
        action = exported(raw)
        assert sorted(action[action < 5].tolist()) == sorted(chosen.tolist())


def test_train_policy_writes_the_run_and_resumes(ray_session, tmp_path):
    from rayfl.train_policy import train_policy

    config = {**TINY, "output": {**TINY["output"], "dir": str(tmp_path)}}
    run_dir = train_policy(config, verbose=False)
    for name in (
        "config.yaml",
        "progress.csv",
        "checkpoint",
        "policy/policy.npz",
        "evaluation.csv",
        "plots/learning_curve.png",
    ):
        assert (run_dir / name).exists(), name
    assert set(pd.read_csv(run_dir / "evaluation.csv")["policy"]) == {
        "learned",
        "random",
    }
    resumed = train_policy(resume=run_dir, overrides=["rl.iterations=2"], verbose=False)
    progress = pd.read_csv(resumed / "progress.csv")
    assert resumed == run_dir and progress["iteration"].tolist() == [1, 2]


#: TINY in emulate mode with 2 lanes per env runner (2-round FL runs, 1 local step).
LANES = [
    "rounds=2",
    "algorithm.local_steps=1",
    "rl.mode=emulate",
    "rl.num_envs_per_env_runner=2",
    "rl.train_batch_size=8",
    "rl.minibatch_size=8",
    "rl.num_epochs=1",
    "rl.iterations=2",
    "rl.eval_episodes=0",
]


def test_emulate_mode_trains_on_lanes_of_shared_hosts(
    ray_session, tmp_path, monkeypatch
):
    import json

    from envs.rl_vector import RLVectorEnv
    from rayfl.train_policy import train_policy

    # Arrange: record the actions every lanes env is stepped with
    shapes = []
    step = RLVectorEnv.step

    def spy(self, actions):
        shapes.append(np.shape(actions))
        return step(self, actions)

    monkeypatch.setattr(RLVectorEnv, "step", spy)
    config = {**TINY, "output": {**TINY["output"], "dir": str(tmp_path)}}
    # Act: two PPO iterations (the env runner is the driver's: the spy sees it)
    run_dir = train_policy(config, LANES, verbose=False)
    # Assert: both iterations sampled env steps, from 2 lanes of 5 clients
    progress = pd.read_csv(run_dir / "progress.csv")
    assert progress["iteration"].tolist() == [1, 2]
    assert (progress["env_steps"] >= 8).all()
    meta = json.loads((run_dir / "policy" / "policy.json").read_text())
    assert meta["mode"] == "emulate" and meta["env_steps"] >= 16
    assert len(shapes) >= 8 and set(shapes) == {(2, 5)}
