"""A round's evaluation aggregates: partial rounds flagged, fairness never over a subset."""

from __future__ import annotations

import numpy as np
import pytest

from rayfl.engine.rows import (
    PartialEvaluationWarning,
    evaluation_report,
    evaluation_summary,
)

NUM_TEST = np.array([10, 30, 20, 40])


def _evals(failed=()):
    rows = [
        {"client": c, "test_loss": loss, "test_acc": acc, "eval_train_loss": loss}
        for c, (loss, acc) in enumerate(
            [(0.9, 0.5), (0.2, 0.9), (0.4, 0.8), (0.3, 0.7)]
        )
    ]
    for c in failed:
        rows[c] = {
            "client": c,
            "test_loss": float("nan"),
            "test_acc": float("nan"),
            "eval_train_loss": float("nan"),
            "eval_failed": True,
        }
    return rows


def test_a_complete_evaluation_counts_every_client():
    out = evaluation_summary(_evals(), NUM_TEST, round=3)
    assert out["eval_clients"] == 4 and out["partial_eval"] is False
    assert out["max_loss"] == 0.9  # by hand: client 0
    assert out["global_acc"] == pytest.approx((5 + 27 + 16 + 28) / 100)


def test_a_missing_client_makes_the_round_partial_with_no_fairness_metric():
    # Arrange: client 0, the worst one, was not evaluated
    # Act
    with pytest.warns(PartialEvaluationWarning, match="round 3: 1 of 4 clients"):
        out = evaluation_summary(_evals(failed=[0]), NUM_TEST, round=3)
    # Assert: counted, flagged; the max loss is not the survivors' 0.4
    assert out["eval_clients"] == 3 and out["partial_eval"] is True
    for key in ("max_loss", "worst10_loss", "min_acc", "jain_acc", "jain_train_loss"):
        assert np.isnan(out[key]), key
    # the accuracy covers the evaluated clients only (weights 30, 20, 40)
    assert out["global_acc"] == pytest.approx((27 + 16 + 28) / 90)


def test_a_round_without_evaluation_counts_no_client():
    assert evaluation_summary(None, NUM_TEST) == {
        "eval_clients": 0,
        "partial_eval": False,
        "eval_retried": 0,
    }


def test_the_report_names_the_partial_rounds():
    rows = [
        {"round": 0, "eval_clients": 4, "partial_eval": False},
        {"round": 1, "eval_clients": 0, "partial_eval": False},  # not evaluated
        {"round": 2, "eval_clients": 2, "partial_eval": True},
    ]
    report = evaluation_report(rows, num_clients=4)
    assert report["partial_eval_rounds"] == [2]
    (warning,) = report["warnings"]
    assert "1 of 2 evaluated rounds" in warning and "round 2: 2 of 4" in warning
    assert evaluation_report(rows[:2], 4) == {"partial_eval_rounds": [], "warnings": []}


def test_an_edge_that_lost_devices_in_its_subnet_evaluation_is_flagged():
    from types import SimpleNamespace

    from rayfl.hierarchy.accounting import edge_rows

    # Arrange: edge 0's devices 0 (acc 0.5) and 1 (lost with its actor); edge 1 whole
    zeros = np.zeros(2)
    stds = SimpleNamespace(
        edge_local=zeros, edge_global=zeros, device_local=zeros, device_global=zeros
    )
    evals = [
        (0, [{"client": 0, "test_acc": 0.5, "test_loss": 1.0}]),
        (0, None),
        (1, [{"client": 2, "test_acc": 0.8, "test_loss": 0.3}]),
    ]
    # Act
    rows = edge_rows(
        k=0,
        trusted=np.array([True, True]),
        participants=np.array([2, 1]),
        stds=stds,
        edge_records=[],
        edge_evals=evals,
        num_test=NUM_TEST,
        energy=zeros,
        delay=zeros,
    )
    # Assert
    assert [r["subnet_partial_eval"] for r in rows] == [True, False]
    assert [r["subnet_acc"] for r in rows] == [0.5, 0.8]
