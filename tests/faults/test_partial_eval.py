"""Evaluation never shrinks silently: a failed host is retried, then flagged.

A client-host actor that dies while the clients are evaluated is restored and
asked once more (``ActorPool.evaluate_all``): when the retry succeeds the run's
metrics equal the uninterrupted run's; when it fails too, the clients' rows say
``eval_failed``, the round says ``partial_eval`` with its ``eval_clients``
count, its fairness aggregates are NaN (never computed over the survivors), and
``summary.json`` and a :class:`PartialEvaluationWarning` say so.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import rayfl
from rayfl.actors.pool import ActorPool
from rayfl.engine.rows import PartialEvaluationWarning
from rayfl.metrics import weighted_mean_of
from rayfl.star.round import StarRound
from tests.ray_faults import kill_until_restarted

CFG = {
    "name": "partial-eval",
    "rounds": 2,
    "data": {
        "dataset": "digits",
        "num_clients": 4,
        "partition": "dirichlet",
        "alpha": 0.5,
        "min_partition_size": 20,
    },
    "model": {"kind": "mlr"},
    "algorithm": {"kind": "fedavg", "local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False},
}
#: The evaluation aggregates of ``rounds.parquet`` (the columns a partial
#: round may change).
FAIRNESS = ("max_loss", "worst10_loss", "min_acc", "jain_acc", "jain_train_loss")


def _run_dir(root):
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture(scope="module")
def reference(ray_session, tmp_path_factory):
    """The uninterrupted run."""
    return rayfl.run(CFG, {"output.dir": str(tmp_path_factory.mktemp("ref"))})


def _kill_host_at_evaluation(monkeypatch, *, at_round, twice):
    """Kill host 0 (clients 0, 1) as round ``at_round``'s evaluation starts.

    ``twice``: kill it again once it has been restored for the retry.
    """
    evaluate, restore = StarRound.evaluate, ActorPool.restore_failed
    calls = {"evaluate": 0}

    def killing_evaluate(self, engine):
        calls["evaluate"] += 1
        if calls["evaluate"] == at_round + 1:  # one evaluation per round
            kill_until_restarted(engine.pool.actors[0])
            calls["armed"] = twice
        return evaluate(self, engine)

    def killing_restore(self, **kwargs):
        retrying = bool(self.to_restore)  # the restore before the retry
        restore(self, **kwargs)
        if retrying and calls.pop("armed", False):
            kill_until_restarted(self.actors[0])

    monkeypatch.setattr(StarRound, "evaluate", killing_evaluate)
    monkeypatch.setattr(ActorPool, "restore_failed", killing_restore)


@pytest.mark.slow
def test_a_host_failing_twice_marks_the_round_partial(reference, tmp_path, monkeypatch):
    # Arrange: host 0 dies as round 1 is evaluated, and again on the retry
    _kill_host_at_evaluation(monkeypatch, at_round=1, twice=True)
    # Act
    with pytest.warns(PartialEvaluationWarning, match="round 1: 2 of 4 clients"):
        result = rayfl.run(CFG, {"output.dir": str(tmp_path)})
    summary = json.loads((result.run_dir / "summary.json").read_text())
    rounds, want = result.rounds.set_index("round"), reference.rounds.set_index("round")
    m = result.metrics.set_index(["round", "client"])
    ref = reference.metrics.set_index(["round", "client"])
    # Assert: round 1 marked partial, with the right count, in every file
    assert summary["status"] == "completed"
    assert rounds["partial_eval"].tolist() == [False, True]
    assert rounds["eval_clients"].tolist() == [4, 2]
    assert summary["partial_eval_rounds"] == [1]
    assert any(
        "partial evaluation" in w and "round 1: 2 of 4" in w
        for w in summary["warnings"]
    )
    assert m["eval_failed"].xs(1).tolist() == [True, True, False, False]
    assert not m["eval_failed"].xs(0).any()
    assert m.loc[(1, 0), ["test_loss", "test_acc"]].isna().all()
    # the survivors' scores are the uninterrupted run's; the fairness metrics of
    # the partial round are NaN, never the survivors' (which look fairer)
    pd.testing.assert_frame_equal(
        m.loc[[(1, 2), (1, 3)], ["test_loss", "test_acc"]],
        ref.loc[[(1, 2), (1, 3)], ["test_loss", "test_acc"]],
    )
    assert rounds.loc[1, list(FAIRNESS)].isna().all()
    assert np.isfinite(want.loc[1, list(FAIRNESS)].to_numpy(float)).all()
    # the accuracy covers the evaluated clients, weighted by their test sizes
    survivors = ref.xs(1).loc[[2, 3], "test_acc"]
    assert rounds.loc[1, "global_acc"] == pytest.approx(
        weighted_mean_of(survivors, _test_sizes()[2:]), rel=1e-12
    )
    # round 0 (not interrupted) is the uninterrupted run's, column for column
    pd.testing.assert_series_equal(
        rounds.loc[0].drop("round_time_s"), want.loc[0].drop("round_time_s")
    )


def _test_sizes():
    from rayfl.config import load_config
    from rayfl.data.federated import build_federated

    cfg = load_config(CFG)
    return np.asarray(build_federated(cfg.data, seed=cfg.seed).num_test)


@pytest.mark.slow
def test_a_host_restarted_during_evaluation_is_retried_to_the_same_metrics(
    reference, tmp_path, monkeypatch
):
    # Arrange: host 0 dies as round 1 is evaluated; Ray restarts it
    _kill_host_at_evaluation(monkeypatch, at_round=1, twice=False)
    # Act
    result = rayfl.run(CFG, {"output.dir": str(tmp_path)})
    # Assert: clients 0 and 1 were evaluated on the second try; every metric
    # equals the uninterrupted run's (bit for bit)
    rounds = result.rounds.drop(columns="round_time_s")
    assert rounds["eval_retried"].tolist() == [0, 2]
    assert not rounds["partial_eval"].any()
    assert not result.summary["partial_eval_rounds"]
    pd.testing.assert_frame_equal(result.metrics, reference.metrics)
    pd.testing.assert_frame_equal(
        rounds.drop(columns="eval_retried"),
        reference.rounds.drop(columns=["round_time_s", "eval_retried"]),
    )
