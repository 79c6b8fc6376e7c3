"""docs/rl/rl_result/neighbor_counts.py's summary and the policy specs it shares."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).resolve().parents[2] / "docs" / "rl" / "rl_result"


def _load(name: str):
    sys.path.insert(0, str(HERE))  # neighbor_counts imports schedule_counts
    try:
        spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(HERE))


def test_summary_weights_each_round_by_the_neighbours_taken():
    # Arrange: policy a takes 2 then 0 neighbours; b takes 1 each round
    counts = _load("neighbor_counts")
    rows = pd.DataFrame(
        [
            ("a", 0, 2, 1, 10.0, 0.02, 2, 20.0, 0.1, 0, 0.4, 0.1, 2.0),
            ("a", 1, 0, 0, np.nan, np.nan, 0, 30.0, 0.2, 0, np.nan, 0.1, 1.0),
            ("b", 0, 1, 1, 40.0, 0.3, 0, 20.0, 0.1, 0, 0.1, 0.1, 2.0),
            ("b", 1, 1, 0, 20.0, 0.1, 1, 30.0, 0.2, 1, 0.3, 0.1, 0.5),
        ],
        columns=[
            "policy",
            "round",
            "chosen",
            "arrived",
            "chosen_distance_m",
            "chosen_error",
            "chosen_nearest",
            "candidate_distance_m",
            "candidate_error",
            "chosen_kept",
            "chosen_em_weight",
            "candidate_em_weight",
            "test_loss",
        ],
    ).assign(seed=1000)
    # Act
    got = counts.summarize(rows).set_index("policy")
    # Assert: by hand
    assert got.loc["a", "neighbors_per_round"] == 1.0
    assert got.loc["a", "rounds_without_neighbor"] == 0.5
    assert got.loc["a", "delivery_rate"] == 0.5
    assert got.loc["a", "chosen_distance_m"] == 10.0
    assert got.loc["a", "nearest_share"] == 1.0
    assert got.loc["b", "chosen_distance_m"] == pytest.approx(30.0)
    assert got.loc["b", "chosen_error"] == pytest.approx(0.2)
    assert got.loc["b", "candidate_distance_m"] == pytest.approx(25.0)
    assert got.loc["b", "nearest_share"] == 0.5
    assert got.loc["b", "kept_share"] == 0.5
    assert got.loc["a", "chosen_em_weight"] == pytest.approx(0.4)
    assert got.loc["b", "chosen_em_weight"] == pytest.approx(0.2)
    assert got.loc["a", "final_test_loss"] == 1.0
    assert got.loc["b", "final_test_loss"] == 0.5


def test_policy_specs_name_learned_and_tuned_forms():
    counts = _load("schedule_counts")
    assert counts.policy_spec("round_robin") == ("round_robin", "round_robin", {})
    assert counts.policy_spec("learned=run/policy") == (
        "learned",
        "learned",
        {"checkpoint": "run/policy"},
    )
    assert counts.policy_spec("minmax@mu=2;lr=0.5") == (
        "minmax_tuned",
        "minmax",
        {"mu": 2.0, "lr": 0.5},
    )


def test_summary_counts_the_chosen_that_miss_the_deadline():
    # Arrange: 3 neighbours taken over two rounds, one of them late
    counts = _load("neighbor_counts")
    base = {
        "policy": "a",
        "seed": 1000,
        "arrived": 0,
        "chosen_distance_m": 1.0,
        "chosen_error": 0.0,
        "chosen_nearest": 0,
        "candidate_distance_m": 1.0,
        "candidate_error": 0.0,
        "chosen_kept": 0,
        "chosen_em_weight": 0.0,
        "candidate_em_weight": 0.0,
        "test_loss": 1.0,
    }
    rows = pd.DataFrame(
        [
            {
                **base,
                "round": 0,
                "chosen": 2,
                "chosen_late": 1,
                "candidate_late": 0.5,
                "chosen_compute_s": 0.02,
                "candidate_compute_s": 0.01,
                "candidate_away": 0.2,
            },
            {
                **base,
                "round": 1,
                "chosen": 1,
                "chosen_late": 0,
                "candidate_late": 0.3,
                "chosen_compute_s": 0.005,
                "candidate_compute_s": 0.01,
                "candidate_away": 0.4,
            },
        ]
    )
    # Act
    got = counts.summarize(rows).set_index("policy").loc["a"]
    # Assert: by hand
    assert got["late_share"] == pytest.approx(1 / 3)
    assert got["candidate_late_share"] == pytest.approx(0.4)
    assert got["chosen_compute_s"] == pytest.approx((2 * 0.02 + 0.005) / 3)
    assert got["candidate_away_share"] == pytest.approx(0.3)
    # a CSV from before the devices: NaN, not an error
    old = counts.summarize(rows.drop(columns=["chosen_late", "candidate_late"]))
    assert np.isnan(old["late_share"].iloc[0])
