"""The smoke subset's own checks (``make test-quick``): run, resume, env, topologies.

One Ray session for the module. With the tests marked ``quick`` elsewhere
(start-up imports, CLI errors and help, compare's one-line errors and partial
rows) this is what ``make test-quick`` runs; tracking, the warm session and the
quickstart under every star policy run in the full suite only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import rayfl
from tests.configs import TINY_D2D

pytestmark = pytest.mark.quick
ROOT = Path(__file__).resolve().parents[1]

STAR = {
    "name": "smoke",
    "rounds": 3,
    "eval_every": 1,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 5, "batch_size": 16, "lr": 0.1},
    "scheduler": {"policy": "round_robin", "clients_per_round": 2},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False, "checkpoint_every": 1},
}


def test_interrupted_run_resumes_to_the_uninterrupted_metrics(
    ray_session, tmp_path, monkeypatch
):
    import rayfl.runner

    # Arrange: Ctrl-C after round 1's callback (its checkpoint is on disk)
    real = rayfl.runner._on_round

    def interrupting(bar):
        def stop(t, row, evals):
            if t == 1:
                raise KeyboardInterrupt

        return stop

    monkeypatch.setattr(rayfl.runner, "_on_round", interrupting)
    from rayfl.rundir.status import RunInterrupted

    with pytest.raises(RunInterrupted) as stopped:
        rayfl.run(STAR, {"output.dir": str(tmp_path / "cut")})
    monkeypatch.setattr(rayfl.runner, "_on_round", real)
    (run_dir,) = (tmp_path / "cut").iterdir()
    # Act
    resumed = rayfl.resume(run_dir)
    reference = rayfl.run(STAR, {"output.dir": str(tmp_path / "ref")})
    # Assert
    assert stopped.value.status == "interrupted"
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    pd.testing.assert_frame_equal(resumed.metrics, reference.metrics)
    assert len(reference.rounds) == 3


def test_env_passes_the_checker_and_a_policy_drives_it():
    from gymnasium.utils.env_checker import check_env

    from envs.star.scheduling import WirelessFLEnv
    from rayfl.registry import make_policy

    env = WirelessFLEnv(ROOT / "examples" / "quickstart.yaml", mode="surrogate")
    check_env(env, skip_render_check=True)
    policy = make_policy("best_channel", env)
    obs, _ = env.reset(seed=0)
    rewards = []
    for _ in range(3):
        action = policy(obs)
        assert env.action_space.contains(action)
        obs, reward, *_ = env.step(action)
        rewards.append(reward)
    assert np.isfinite(rewards).all()


def test_a_hierarchical_run_schedules_each_edge_with_a_policy(ray_session, tmp_path):
    from tests.configs import DIGITS_8

    cfg = {
        "name": "smoke-hier",
        "rounds": 2,
        "data": DIGITS_8,
        "model": {"kind": "mlr"},
        "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
        "scheduler": {"policy": "round_robin"},
        "topology": {
            "kind": "hierarchical",
            "num_edges": 2,
            "tau": 2,
            "local_period": 1,
            "edge_eval": False,
            "dp": {"epsilon": 1.0},
            "scheduling": {"subchannels_per_edge": 2},
        },
        "ray": {"num_cpus": 2},
        "output": {"progress": False, "plots": False, "dir": str(tmp_path)},
    }
    result = rayfl.run(cfg)
    per_round = result.metrics.groupby("round")["scheduled"].sum()
    assert result.summary["status"] == "completed"
    assert per_round.tolist() == [4, 4]  # 2 edges x 2 subchannels


def test_a_d2d_run_selects_neighbors_with_a_policy(ray_session, tmp_path):
    cfg = {
        **TINY_D2D,
        "name": "smoke-d2d",
        "scheduler": {"policy": "random_neighbors"},
        "output": {**TINY_D2D["output"], "dir": str(tmp_path)},
    }
    result = rayfl.run(cfg)
    assert result.summary["status"] == "completed"
    assert len(result.rounds) == 2


def test_make_test_quick_collects_every_file_holding_quick_tests():
    # `make test-quick` names the files to collect (QUICK_TESTS): a quick test
    # in a file it does not name would silently never run there.
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    (line,) = [x for x in makefile.splitlines() if x.startswith("QUICK_TESTS =")]
    named = set(line.split("=", 1)[1].split())
    marked = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "mark.quick" in path.read_text()
    }
    assert named == marked
