"""A lost device actor in a hierarchical run: its updates are lost, like packets.

The device actors live in the engine's ``ActorPool``: a device actor that dies
mid-round loses its devices' updates for the segments it missed (``rejected =
actor_lost``, not delivered) and the edges aggregate the uploads that arrived;
a restarted actor serves the next round. An actor killed for good ends the run
``failed`` with a checkpoint to resume from (as the star).
"""

import json

import numpy as np
import pandas as pd
import pytest
import ray

import rayfl
from rayfl.config import load_config
from rayfl.engine import build_system
from rayfl.hierarchy.round import HierarchicalRound
from rayfl.rundir.status import RunFailed
from rayfl.schedule import Schedule
from tests.ray_faults import kill_until_restarted

CFG = {
    "name": "hier-faults",
    "rounds": 4,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 2,
        "tau": 2,
        "local_period": 2,
        "dp": {"enabled": False, "grad_bound": None},
        "lr": {"mode": "constant"},
    },
}
#: Every device in every round: edge 0 holds devices 0-1, edge 1 devices 2-3.
EVERYONE = (Schedule.of([0, 1]), Schedule.of([2, 3]))


@pytest.mark.slow
def test_a_restarted_device_actor_loses_that_round_only(ray_session):
    # Arrange: 4 devices on 2 actors (0-1, 2-3), every device in every round
    system = build_system(load_config(CFG))
    try:
        system.run_round(0, EVERYONE)
        # Act: kill the actor hosting devices 0 and 1 (Ray restarts it)
        kill_until_restarted(system.actors[0])
        lost = system.run_round(1, EVERYONE)
        after = system.run_round(2, EVERYONE)
        evals = system.evaluate()
        counts = system.local_updates()
    finally:
        system.close()
    # Assert: devices 0 and 1 lost round 1 (recorded why), the others delivered
    rows = {r["client"]: r for r in lost.rows}
    assert [rows[c].get("rejected") for c in (0, 1)] == ["actor_lost"] * 2
    assert not rows[0]["delivered"] and not rows[1]["delivered"]
    assert rows[0]["actor_failed"] and not rows[2].get("actor_failed", False)
    assert lost.delivered == [2, 3]
    # the restarted actor serves the next round; the global model stays finite
    assert after.delivered == [0, 1, 2, 3]
    assert np.isfinite([e["test_loss"] for e in evals]).all()
    assert counts[0] == counts[1] < counts[2] == counts[3] == 3


@pytest.mark.slow
def test_a_device_actor_lost_for_good_fails_cleanly_and_resumes(
    ray_session, tmp_path, monkeypatch
):
    # Arrange: no restarts, a checkpoint every round; before round 2 the actor
    # hosting devices 0 and 1 is killed for good
    original = HierarchicalRound.run_global_round

    def kill_then_run(self, k, *args, **kwargs):
        if k == 2:
            ray.kill(self.actors[0], no_restart=True)
        return original(self, k, *args, **kwargs)

    monkeypatch.setattr(HierarchicalRound, "run_global_round", kill_then_run)
    overrides = {
        "output.dir": str(tmp_path),
        "ray.max_actor_restarts": 0,
        "output.checkpoint_every": 1,
    }
    # Act
    with pytest.raises(RunFailed):
        rayfl.run(CFG, overrides)
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    # Assert: failed in round 2 with a checkpoint at round 2; resuming completes
    assert summary["status"] == "failed" and summary["error"]["round"] == 2
    assert summary["error"]["resume_from"] == 2
    assert pd.read_parquet(run_dir / "rounds.parquet")["round"].tolist()[:2] == [0, 1]
    monkeypatch.setattr(HierarchicalRound, "run_global_round", original)
    resumed = rayfl.resume(run_dir)
    assert resumed.summary["status"] == "completed"
    assert resumed.rounds["round"].tolist() == [0, 1, 2, 3]
    assert resumed.summary["local_updates"] == [4, 4, 4, 4]
