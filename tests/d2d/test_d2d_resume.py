"""D2D checkpoints: resume is bit-identical, and a lost actor is handled.

A D2D run that fails (an exception, or an actor lost for good) after a
checkpoint and is then resumed with ``rayfl.resume`` must end with the same
``metrics.parquet``, ``rounds.parquet`` (timing aside) and selection/EM report
as the uninterrupted run. A neighbor's actor that dies and restarts loses that
round's models (``rejected = actor_lost``) and gets its state back.
"""

import json

import numpy as np
import pandas as pd
import pytest
import ray

import rayfl
from rayfl.config import load_config
from rayfl.d2d.round import D2DRound
from rayfl.engine import build_system
from rayfl.rundir.checkpoint import load_checkpoint
from rayfl.rundir.status import RunFailed
from rayfl.seeding import rng_for
from tests.configs import TINY_D2D
from tests.ray_faults import kill_until_restarted

BASE = {
    **TINY_D2D,
    "name": "d2d-resume",
    "rounds": 4,
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
}

CASES = {
    # every node a target; lossy links; a lost model is replaced by the last one
    # received (each target keeps a model per neighbor: the hardest state)
    "pfedwn_stale_bernoulli": {
        "topology.target": "all",
        "topology.link_model": "bernoulli",
        "topology.on_loss": "stale",
        "topology.epsilon": 0.5,
    },
    # FedAvg over each target's group, the target's actor aggregating
    "federated": {"topology.method": "federated", "topology.link_model": "bernoulli"},
    # neighbors re-selected every round by a seeded policy (its generator state)
    "env_random_neighbors": {
        "topology.selection_via": "env",
        "scheduler.policy": "random_neighbors",
    },
}


def _only_run_dir(root):
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir


def _tables(run_dir):
    metrics = pd.read_parquet(run_dir / "metrics.parquet")
    rounds = pd.read_parquet(run_dir / "rounds.parquet").drop(columns="round_time_s")
    report = json.loads((run_dir / "summary.json").read_text())["d2d"]
    return metrics, rounds, report


def _fail_at(monkeypatch, at_round, action):
    original = D2DRound.run_method_round

    def patched(self, t, *args, **kwargs):
        if t == at_round:
            action(self)
        return original(self, t, *args, **kwargs)

    monkeypatch.setattr(D2DRound, "run_method_round", patched)
    return original


def _lost_links(report, seed, rounds):
    """Count (round, target, neighbor) models the Bernoulli links dropped."""
    lost = 0
    for t, block in report["targets"].items():
        error = np.asarray(block["error_probability"])
        for r in range(rounds):
            draws = rng_for(seed, "d2d_link", round=r + 1, client=int(t)).random(
                len(error)
            )
            lost += sum(draws[m] < error[m] for m in block["neighbors"])
    return lost


def _raise(system):
    raise RuntimeError("injected")


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_resumed_d2d_run_equals_the_uninterrupted_run(
    ray_session, tmp_path, monkeypatch, case
):
    # Arrange: the reference run, then the same run failing in round 3
    # after a checkpoint at round 2
    overrides = {**CASES[case], "output.checkpoint_every": 2}
    reference = rayfl.run(BASE, {**overrides, "output.dir": str(tmp_path / "ref")})
    original = _fail_at(monkeypatch, 3, _raise)
    with pytest.raises(RunFailed):
        rayfl.run(BASE, {**overrides, "output.dir": str(tmp_path / "cut")})
    run_dir = _only_run_dir(tmp_path / "cut")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"]["resume_from"] == 2
    state = load_checkpoint(run_dir)["system"]
    monkeypatch.setattr(D2DRound, "run_method_round", original)
    # Act
    resumed = rayfl.resume(run_dir)
    # Assert: every column (timing aside) and the EM report are identical
    assert resumed.summary["status"] == "completed"
    got, want = _tables(run_dir), _tables(reference.run_dir)
    pd.testing.assert_frame_equal(got[0], want[0])
    pd.testing.assert_frame_equal(got[1], want[1])
    assert got[2] == want[2]
    if case == "pfedwn_stale_bernoulli":  # the case exercises what it claims
        assert _lost_links(want[2], BASE["seed"], 4) > 0, "raise epsilon"
        pairs = state["last_source"]["pairs"]
        assert len(pairs) > len(state["last_source"]["models"])  # shared, once
    if case == "federated":
        assert len(state["group_global"]["vectors"]) == 1  # one target's global model


@pytest.mark.slow
def test_d2d_actor_lost_for_good_fails_cleanly_and_resumes(
    ray_session, tmp_path, monkeypatch
):
    # Arrange: no restarts, a checkpoint every round; before round 2 runs, the
    # actor hosting the target (clients 0 and 1) is killed for good
    overrides = {
        "ray.max_actor_restarts": 0,
        "output.checkpoint_every": 1,
        "topology.link_model": "bernoulli",
    }
    reference = rayfl.run(BASE, {**overrides, "output.dir": str(tmp_path / "ref")})
    original = _fail_at(
        monkeypatch, 2, lambda s: ray.kill(s.engine.actors[0], no_restart=True)
    )
    # Act
    with pytest.raises(RunFailed) as info:
        rayfl.run(BASE, {**overrides, "output.dir": str(tmp_path / "cut")})
    run_dir = _only_run_dir(tmp_path / "cut")
    summary = json.loads((run_dir / "summary.json").read_text())
    # Assert: failed in round 2 with rounds 0-1 kept, and resumable from round 2
    assert summary["status"] == "failed"
    assert summary["error"]["round"] == 2
    assert "Actor" in summary["error"]["type"]  # RayActorError / ActorDiedError
    assert summary["error"]["resume_from"] == 2
    assert f"rayfl resume {run_dir}" in str(info.value)
    rounds = pd.read_parquet(run_dir / "rounds.parquet")
    assert rounds["round"].tolist() == [0, 1]
    monkeypatch.setattr(D2DRound, "run_method_round", original)
    resumed = rayfl.resume(run_dir)
    assert resumed.summary["status"] == "completed"
    assert resumed.rounds["round"].tolist() == [0, 1, 2, 3]
    got, want = _tables(run_dir), _tables(reference.run_dir)
    pd.testing.assert_frame_equal(got[0], want[0])
    pd.testing.assert_frame_equal(got[1], want[1])


@pytest.mark.slow
def test_a_dead_neighbor_host_loses_its_models_for_one_round(ray_session):
    # Arrange: target 0 on actor 0; find an actor hosting only selected neighbors
    cfg = load_config(BASE, {"topology.epsilon": 0.5, "ray.max_actor_restarts": 1})
    with build_system(cfg) as system:
        neighbors = set(system.selections[0].neighbors)
        victims = [
            a
            for a, group in enumerate(system.groups)
            if 0 not in group and neighbors & set(group)
        ]
        assert victims, f"no actor of neighbors only: {system.groups}, {neighbors}"
        victim = victims[0]
        hosted = sorted(neighbors & set(system.groups[victim]))
        system.run_round(0, system.decision())
        # Act: kill it (it restarts, its state lost); round 1 runs after that
        kill_until_restarted(system.actors[victim])
        rows = {r["client"]: r for r in system.run_round(1, system.decision()).rows}
        after = {r["client"]: r for r in system.run_round(2, system.decision()).rows}
        states = ray.get([a.get_state.remote() for a in system.actors])
    # Assert: its neighbors' models were lost in round 1 only, with the reason
    for c in hosted:
        assert rows[c]["rejected"] == "actor_lost" and not rows[c]["delivered"]
        assert rows[c]["bits"] == 0.0 and np.isnan(rows[c]["train_loss"])
        assert after[c]["rejected"] is None and np.isfinite(after[c]["train_loss"])
    others = neighbors - set(hosted)
    assert all(rows[c]["rejected"] is None for c in others)
    assert np.isfinite(rows[0]["post_agg_acc"])  # the target went on
    # the restarted actor got its clients' state of round 0 back: 2 updates, not 1
    updates = {c: s["local_updates"] for st in states for c, s in st["clients"].items()}
    assert all(updates[c] == 2 for c in hosted)
    assert all(updates[c] == 3 for c in others)
