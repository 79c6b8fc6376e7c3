"""metrics.parquet says why an update was refused (``rejected``), in all topologies.

A learning rate of 1e30 makes every local model non-finite after a few steps:
the server (flat), the edge's devices (hierarchical) and the targets (D2D) must
refuse those updates and record ``non_finite``, not a lost packet.
"""

from __future__ import annotations

import pandas as pd
import pytest

import rayfl
from rayfl.config import load_config
from rayfl.runner import _run

BASE = {
    "name": "diverged",
    "rounds": 1,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 30,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_steps": 5, "batch_size": 16, "lr": 0.05},
    "ray": {"num_cpus": 2},
    "output": {"progress": False, "plots": False},
}
TOPOLOGIES = {
    "flat": {},
    "hierarchical": {
        "topology": {
            "kind": "hierarchical",
            "num_edges": 2,
            "tau": 2,
            "local_period": 2,
            "dp": {"enabled": False, "grad_bound": None},
            "lr": {"mode": "constant"},
        }
    },
    "d2d": {"topology": {"kind": "d2d", "target": 0, "epsilon": 0.2}},
}


@pytest.mark.parametrize("kind", sorted(TOPOLOGIES))
def test_non_finite_updates_are_recorded_as_rejected(ray_session, tmp_path, kind):
    cfg = load_config({**BASE, **TOPOLOGIES[kind]}, {"output.dir": str(tmp_path)})
    # lr = 1e30 makes every update non-finite at once. Validation caps lr at 1e3
    # (where a real run diverges more slowly), so the validated config is copied
    # with lr = 1e30 and run without re-validation.
    algorithm = cfg.algorithm.model_copy(update={"lr": 1e30})
    result = _run(cfg.model_copy(update={"algorithm": algorithm}))
    m = pd.read_parquet(result.run_dir / "metrics.parquet")
    assert "rejected" in m.columns
    if kind == "d2d":  # neighbors send, the target refuses what arrived
        refused = m[m.delivered & (m.role == "neighbor")]
    else:
        refused = m[m.scheduled]
        assert not refused.delivered.any()  # refused, so not aggregated
    assert len(refused) > 0
    assert (refused.rejected == "non_finite").all()


def test_accepted_updates_have_no_reason(ray_session, tmp_path):
    cfg = {**BASE, "algorithm": {**BASE["algorithm"], "lr": 0.05}}
    result = rayfl.run(cfg, {"output.dir": str(tmp_path)})
    m = pd.read_parquet(result.run_dir / "metrics.parquet")
    assert m[m.scheduled].delivered.all()
    assert m.rejected.isna().all()
