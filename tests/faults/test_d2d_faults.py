"""Fault injection in D2D runs: resume equals the uninterrupted run.

Each scenario kills one node host — a selected neighbor's while it trains, the
target's while the target is evaluated (``target_round``: aggregate, evaluate,
train, evaluate), for good or restarted by Ray — or fails the driver, in round 1
of a run that saves a checkpoint every round. The run ends ``failed``;
``rayfl.resume`` continues from round 1 and every result (metrics, rounds, the
selection/EM report) equals the uninterrupted run's bit for bit.

A target host that Ray restarts must refuse the evaluation round until its
state is back (``rayfl.actors.restart``): before this suite, ``target_round``
ran on the restarted host's empty state and the run went on silently from ω⁰.
"""

from __future__ import annotations

import pytest

import rayfl
from rayfl.d2d.round import D2DRound
from tests.configs import TINY_D2D
from tests.faults.scenarios import (
    assert_same_run,
    at_round,
    during_gather,
    fail_then_resume,
    kill_for_good,
    sigkill_driver_then_resume,
    tables,
)
from tests.ray_faults import kill_until_restarted

CFG = {
    **TINY_D2D,
    "name": "d2d-faults",
    "rounds": 3,
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False, "checkpoint_every": 1},
    "topology": {**TINY_D2D["topology"], "epsilon": 0.5},
}
AT = 1  # the round the fault hits


@pytest.fixture(scope="module")
def reference(ray_session, tmp_path_factory):
    """The uninterrupted run's results."""
    result = rayfl.run(CFG, {"output.dir": str(tmp_path_factory.mktemp("ref"))})
    return tables(result.run_dir)


def _neighbor_host(engine):
    """An actor hosting selected neighbors of target 0 but not the target."""
    neighbors = set(engine.selections[0].neighbors)
    hosts = [
        a
        for a, group in enumerate(engine.groups)
        if 0 not in group and neighbors & set(group)
    ]
    assert hosts, f"no actor of neighbors only: {engine.groups}, {neighbors}"
    return engine.actors[hosts[0]]


def _kill_target_host_at_evaluation(monkeypatch, kill):
    original = D2DRound._targets_round

    def patched(self, round, *args, **kwargs):
        if round == AT:
            kill(self.engine.actors[int(self.engine.actor_of[0])])
        return original(self, round, *args, **kwargs)

    monkeypatch.setattr(D2DRound, "_targets_round", patched)


def _driver_fails(engine):
    raise RuntimeError("the driver died")  # what a SIGKILL leaves: a checkpoint


SCENARIOS = {
    "neighbor_host_in_training": lambda mp: during_gather(
        mp, AT, lambda e: kill_for_good(_neighbor_host(e))
    ),
    "target_host_in_evaluation": lambda mp: _kill_target_host_at_evaluation(
        mp, kill_for_good
    ),
    "target_host_restarted_in_evaluation": lambda mp: _kill_target_host_at_evaluation(
        mp, kill_until_restarted
    ),
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


@pytest.mark.slow  # two driver processes, each starting its own Ray
def test_resume_after_the_driver_is_sigkilled_equals_the_uninterrupted_run(
    reference, tmp_path
):
    # Arrange and Act: the driver killed once a checkpoint exists, then resumed
    run_dir = sigkill_driver_then_resume(CFG, tmp_path)
    # Assert
    assert_same_run(tables(run_dir), reference)
