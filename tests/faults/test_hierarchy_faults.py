"""Fault injection in hierarchical runs: resume equals the uninterrupted run.

Each scenario kills one actor — a device host, an edge server — or fails the
driver, during training or during evaluation, in round 1 of a run that saves a
checkpoint every round. The run ends ``failed``; ``rayfl.resume`` continues from
round 1 and every result (metrics, rounds, edges, summary) equals the
uninterrupted run's bit for bit. A device host that Ray restarts during the
evaluation is retried and the run needs no resume at all.
"""

from __future__ import annotations

import pytest

import rayfl
from rayfl.hierarchy.round import HierarchicalRound
from tests.faults.scenarios import (
    assert_same_run,
    at_round,
    during_gather,
    fail_then_resume,
    kill_for_good,
    only_run_dir,
    sigkill_driver_then_resume,
    tables,
)
from tests.ray_faults import kill_until_restarted

CFG = {
    "name": "hier-faults",
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False, "checkpoint_every": 1},
    "topology": {
        "kind": "hierarchical",
        "num_edges": 2,
        "tau": 2,
        "local_period": 2,
        "dp": {"enabled": False, "grad_bound": None},
        "lr": {"mode": "constant"},
    },
}
AT = 1  # the round the fault hits


@pytest.fixture(scope="module")
def reference(ray_session, tmp_path_factory):
    """The uninterrupted run's results."""
    result = rayfl.run(CFG, {"output.dir": str(tmp_path_factory.mktemp("ref"))})
    return tables(result.run_dir)


def _kill_at_evaluation(monkeypatch, kill):
    original = HierarchicalRound.evaluate
    calls = {"n": 0}

    def patched(self, engine):
        calls["n"] += 1
        if calls["n"] == AT + 1:  # one evaluation per round
            kill(engine.pool.actors[0])
        return original(self, engine)

    monkeypatch.setattr(HierarchicalRound, "evaluate", patched)


def _driver_fails(engine):
    raise RuntimeError("the driver died")  # what a SIGKILL leaves: a checkpoint


SCENARIOS = {
    "device_host_in_training": lambda mp: during_gather(
        mp, AT, lambda e: kill_for_good(e.pool.actors[0])
    ),
    "edge_server_in_training": lambda mp: during_gather(
        mp, AT, lambda e: kill_for_good(e.strategy.edges[0])
    ),
    "device_host_in_evaluation": lambda mp: _kill_at_evaluation(mp, kill_for_good),
    "driver": lambda mp: at_round(mp, AT, _driver_fails),
}


@pytest.mark.parametrize(
    "scenario",
    [pytest.param(s, marks=(pytest.mark.slow,), id=s) for s in SCENARIOS],
)
def test_resume_after_a_fault_equals_the_uninterrupted_run(
    reference, tmp_path, monkeypatch, scenario
):
    # Arrange: the fault, patched into round 1
    SCENARIOS[scenario](monkeypatch)
    run_dir = fail_then_resume(CFG, {}, tmp_path, AT)
    monkeypatch.undo()
    # Act
    resumed = rayfl.resume(run_dir)
    # Assert
    assert resumed.summary["status"] == "completed"
    assert_same_run(tables(run_dir), reference)


@pytest.mark.slow
def test_a_device_host_restarted_in_evaluation_is_retried(
    reference, tmp_path, monkeypatch
):
    # Arrange: the host of devices 0, 1 dies as round 1 is evaluated; Ray
    # restarts it
    _kill_at_evaluation(monkeypatch, kill_until_restarted)
    # Act
    result = rayfl.run(CFG, {"output.dir": str(tmp_path)})
    # Assert: devices 0, 1 were evaluated on the second try; nothing else
    # differs from the uninterrupted run (the host got its devices' state back)
    assert result.rounds["eval_retried"].tolist() == [0, 2, 0]
    assert not result.rounds["partial_eval"].any()
    got = tables(only_run_dir(tmp_path))
    got["rounds"] = got["rounds"].drop(columns="eval_retried")
    want = {**reference, "rounds": reference["rounds"].drop(columns="eval_retried")}
    assert_same_run(got, want)


@pytest.mark.slow  # two driver processes, each starting its own Ray
def test_resume_after_the_driver_is_sigkilled_equals_the_uninterrupted_run(
    reference, tmp_path
):
    # Arrange and Act: the driver killed once a checkpoint exists, then resumed
    run_dir = sigkill_driver_then_resume(CFG, tmp_path)
    # Assert
    assert_same_run(tables(run_dir), reference)
