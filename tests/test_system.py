"""End-to-end runs on a 2-CPU Ray session (shared by this module)."""

import numpy as np
import pandas as pd
import pytest
import ray

import rayfl
from rayfl.system import pack_clients

# All tests here use the shared Ray session (tests/conftest.py): the module then runs
# with the other Ray modules instead of starting Ray again at its first Ray test.
pytestmark = pytest.mark.usefixtures("ray_session")

BASE = {
    "name": "t",
    "rounds": 3,
    "data": {
        "dataset": "digits",
        "num_clients": 6,
        "partition": "dirichlet",
        "alpha": 1.0,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlp", "hidden": [16]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 16, "lr": 0.1},
    "scheduler": {"policy": "random", "clients_per_round": 4},
    "output": {"progress": False, "plots": False},
}


def test_pack_clients_covers_all():
    groups = pack_clients(7, 3)
    assert groups == [[0, 1, 2], [3, 4, 5], [6]]


def test_same_metrics_whatever_the_packing(ray_session, tmp_path):
    # Arrange / Act
    one = rayfl.run(BASE, {"ray.clients_per_actor": 1, "output.dir": str(tmp_path)})
    auto = rayfl.run(
        BASE, {"ray.clients_per_actor": "auto", "output.dir": str(tmp_path)}
    )
    # Assert: identical round × client logs (DESIGN.md determinism rule)
    assert one.summary["num_actors"] == 6 and auto.summary["num_actors"] == 2
    pd.testing.assert_frame_equal(one.metrics, auto.metrics)
    assert one.metrics["scheduled"].sum() == 3 * 4
    assert (one.run_dir / "metrics.parquet").is_file()
    # the user's Ray session is reused and left running
    assert ray.is_initialized()


@pytest.mark.slow  # two runs for a weak property
def test_different_seed_changes_results(ray_session, tmp_path):
    a = rayfl.run(BASE, {"seed": 1, "rounds": 1, "output.dir": str(tmp_path)})
    b = rayfl.run(BASE, {"seed": 2, "rounds": 1, "output.dir": str(tmp_path)})
    assert not np.allclose(a.metrics["test_loss"], b.metrics["test_loss"])


def test_fedavg_learns_digits_and_writes_run_dir(ray_session, tmp_path):
    result = rayfl.run(
        BASE,
        {
            "rounds": 8,
            "scheduler.policy": "all",
            "data.partition": "iid",
            "output.dir": str(tmp_path),
            "output.plots": True,
            "eval_every": 4,
        },
    )
    rounds = result.rounds.dropna(subset=["global_acc"])
    assert list(rounds["round"]) == [3, 7]
    assert rounds["global_acc"].iloc[-1] > 0.85
    assert result.summary["status"] == "completed"
    for name in (
        "config.yaml",
        "metrics.parquet",
        "rounds.parquet",
        "summary.json",
        "plots/eval_acc.png",
    ):
        assert (result.run_dir / name).is_file(), name
    m = result.metrics
    assert len(m) == 8 * 6
    assert set(m.columns) >= {
        "round",
        "client",
        "scheduled",
        "delivered",
        "train_loss",
        "test_loss",
        "test_acc",
        "epsilon",
        "bits",
        "latency_s",
    }
    # every scheduled client's update was delivered on ideal links
    assert m.loc[m.scheduled, "delivered"].all()


def test_round_robin_cycles_through_clients(ray_session, tmp_path):
    result = rayfl.run(
        BASE,
        {
            "rounds": 3,
            "scheduler.policy": "round_robin",
            "scheduler.clients_per_round": 2,
            "output.dir": str(tmp_path),
        },
    )
    m = result.metrics
    picked = [sorted(m[(m["round"] == t) & m.scheduled]["client"]) for t in range(3)]
    assert picked == [[0, 1], [2, 3], [4, 5]]


@pytest.mark.slow  # the FedAvg packing test stays in the default suite
def test_ditto_personal_models_are_packing_independent(ray_session, tmp_path):
    cfg = {
        **BASE,
        "algorithm": {"kind": "ditto", "lam": 0.5, "batch_size": 16, "lr": 0.1},
        "rounds": 2,
    }
    one = rayfl.run(cfg, {"ray.clients_per_actor": 1, "output.dir": str(tmp_path)})
    packed = rayfl.run(cfg, {"ray.clients_per_actor": 3, "output.dir": str(tmp_path)})
    pd.testing.assert_frame_equal(one.metrics, packed.metrics)
    assert one.metrics["personal_acc"].notna().all()
    assert "personal_acc" in one.rounds and "var_train_loss" in one.rounds
