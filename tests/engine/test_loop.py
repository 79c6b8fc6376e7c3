"""run_rounds on an in-memory System: cadence, early stop, checkpoints, resume.

No Ray: the fake system below records what the loop asks of it, so each test
checks one rule of the loop against the rule written out by hand.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np
import pandas as pd
import pytest

from rayfl.engine.loop import LoopSettings, restore, run_rounds
from rayfl.rundir.checkpoint import load_checkpoint
from rayfl.rundir.results import RunLog
from rayfl.rundir.stream import read_metrics
from rayfl.schedule import Schedule
from rayfl.system import Decider, RoundResult

N = 3


class _Ledger:
    def epsilons(self, evaluate: bool = False):
        return np.full(N, 0.5), None


class FakeSystem:
    """Schedules whoever the decider names; budgets run out after ``budget`` rounds."""

    num_units = 1

    def __init__(self, budget: int | None = None) -> None:
        self.num_clients = N
        self.num_test = np.ones(N, dtype=np.int64)
        self.uplink = _Ledger()
        self.budget = budget
        self.rounds_run: list[int] = []
        self.evaluated: list[int] = []
        self.observed: list[int] = []
        self.model = 0.0

    def observe(self, t: int):
        self.observed.append(t)
        return (
            {"eligible": np.ones(N, np.float32), "round": np.array([t], np.float32)},
        )

    def run_round(self, t: int, decision) -> RoundResult:
        (schedule,) = decision
        self.rounds_run.append(t)
        self.model += float(len(schedule.clients))
        rows = [
            {"client": int(c), "bits": 8.0, "delivered": True, "train_loss": 1.0}
            for c in schedule.clients
        ]
        return RoundResult(t, rows, [int(c) for c in schedule.clients], {"tau": t})

    def exhausted(self) -> bool:
        return self.budget is not None and len(self.rounds_run) >= self.budget

    def evaluate(self):
        self.evaluated.append(self.rounds_run[-1])
        return [
            {"client": c, "test_loss": self.model, "test_acc": 0.5} for c in range(N)
        ]

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model = float(state["model"])


class CyclingDecider:
    """Client t mod N each round; counts its decisions (its state)."""

    def __init__(self, observes: bool = False) -> None:
        self.observes = observes
        self.count = 0
        self.seen: list[Any] = []

    def decide(self, t, observation):
        self.seen.append(observation)
        self.count += 1
        return Schedule.of([t % N])

    def state_dict(self):
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = int(state["count"])


def _run(tmp_path, system, decider, **settings):
    log = RunLog(tmp_path)
    done = run_rounds(system, [decider], log, LoopSettings(**settings))
    return log, done


def _client_rows(log):
    """The round × client rows the loop streamed to disk (rayfl.rundir.stream)."""
    return read_metrics(log.run_dir).to_dict("records")


def test_the_fakes_satisfy_the_protocols():
    assert isinstance(CyclingDecider(), Decider)


def test_evaluates_every_k_rounds_and_at_the_last(tmp_path):
    system = FakeSystem()
    log, done = _run(tmp_path, system, CyclingDecider(), rounds=7, eval_every=3)
    assert done == 7
    assert system.evaluated == [2, 5, 6]
    acc = [r.get("global_acc") for r in log.round_rows]
    assert [a is not None for a in acc] == [t in (2, 5, 6) for t in range(7)]


def test_evaluate_every_round_overrides_eval_every(tmp_path):
    system = FakeSystem()
    _run(
        tmp_path,
        system,
        CyclingDecider(),
        rounds=4,
        eval_every=3,
        evaluate_every_round=True,
    )
    assert system.evaluated == [0, 1, 2, 3]


def test_spent_budgets_end_the_run_after_an_evaluated_round(tmp_path):
    system = FakeSystem(budget=2)
    log, done = _run(tmp_path, system, CyclingDecider(), rounds=10, eval_every=5)
    assert done == 2 and system.rounds_run == [0, 1]
    assert system.evaluated == [1]
    assert log.client_rows == []  # streamed to disk, not held by the driver
    assert len(_client_rows(log)) == 2 * N


def test_rows_carry_the_round_and_the_topology_extras(tmp_path):
    log, _ = _run(tmp_path, FakeSystem(), CyclingDecider(), rounds=3, eval_every=1)
    assert [r["tau"] for r in log.round_rows] == [0, 1, 2]
    assert [r["num_scheduled"] for r in log.round_rows] == [1, 1, 1]
    rows = _client_rows(log)
    scheduled = [(r["round"], r["client"]) for r in rows if r["scheduled"]]
    assert scheduled == [(0, 0), (1, 1), (2, 2)]
    assert all(r["epsilon"] == 0.5 for r in rows)


def test_observes_only_for_deciders_that_read_observations(tmp_path):
    blind, system = CyclingDecider(observes=False), FakeSystem()
    _run(tmp_path / "a", system, blind, rounds=2, eval_every=1)
    assert system.observed == [] and blind.seen == [None, None]
    seeing, system = CyclingDecider(observes=True), FakeSystem()
    _run(tmp_path / "b", system, seeing, rounds=2, eval_every=1)
    assert system.observed == [0, 1]
    assert [float(o["round"][0]) for o in seeing.seen] == [0.0, 1.0]


def test_resume_from_a_checkpoint_equals_the_uninterrupted_run(tmp_path):
    # Arrange: a 6-round run checkpointing every 2 rounds keeps the round-4 state
    full, _ = _run(
        tmp_path / "full",
        FakeSystem(),
        CyclingDecider(),
        rounds=6,
        eval_every=2,
        checkpoint_every=2,
    )
    checkpoint = load_checkpoint(tmp_path / "full")
    assert checkpoint["next_round"] == 4
    # Act: a fresh system and decider continue from it, in a copy of the run
    # directory (a resume writes where the run did: its streamed rounds are there)
    shutil.copytree(tmp_path / "full", tmp_path / "again")
    system, decider = FakeSystem(), CyclingDecider()
    log = RunLog(tmp_path / "again")
    start = restore(checkpoint, system, [decider], log)
    run_rounds(
        system, [decider], log, LoopSettings(rounds=6, eval_every=2), start=start
    )
    # Assert
    assert start == 4 and decider.count == 6
    assert system.rounds_run == [4, 5]

    for mine, reference in (
        (log.round_rows, full.round_rows),
        (_client_rows(log), _client_rows(full)),
    ):
        pd.testing.assert_frame_equal(
            pd.DataFrame(mine).drop(columns="round_time_s", errors="ignore"),
            pd.DataFrame(reference).drop(columns="round_time_s", errors="ignore"),
        )


def test_restore_refuses_a_checkpoint_of_another_unit_count(tmp_path):
    _run(
        tmp_path,
        FakeSystem(),
        CyclingDecider(),
        rounds=4,
        eval_every=2,
        checkpoint_every=2,
    )
    checkpoint = load_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="2 decision units"):
        restore(checkpoint, FakeSystem(), [CyclingDecider()] * 2, RunLog(tmp_path))
