"""`rayfl compare` and config sweeps on a 2-CPU Ray session."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import rayfl.compare.variants
from rayfl.compare.variants import compare, markdown_table, sweep
from rayfl.config import ConfigError, load_config

BASE = {
    "name": "c",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 6, "partition": "iid"},
    "model": {"kind": "mlr"},
    "wireless": {"num_subchannels": 3},
    "output": {"progress": False, "plots": True},
}


def test_compare_policies_writes_table_and_overlaid_plots(ray_session, tmp_path):
    table, out = compare(
        BASE, ["round_robin", "best_channel"], {"output.dir": str(tmp_path)}
    )
    assert list(table["policy"]) == ["round_robin", "best_channel"]
    assert table["final_acc"].between(0, 1).all()
    assert (table["total_latency_s"] > 0).all() and (table["total_bits"] > 0).all()
    assert (out / "table.csv").is_file() and (out / "table.md").is_file()
    assert (out / "plots" / "eval_acc.png").is_file()
    saved = pd.read_csv(out / "table.csv")
    cols = ["policy", "final_acc", "max_test_loss", "total_latency_s"]
    pd.testing.assert_frame_equal(saved[cols], table[cols], check_dtype=False)
    # round robin over 6 clients with K=3 schedules clients 0-2 then 3-5
    run_dir = next(Path(out).glob("c-round_robin-*"))
    m = pd.read_parquet(run_dir / "metrics.parquet")
    assert sorted(m[(m["round"] == 1) & m.scheduled]["client"]) == [3, 4, 5]


@pytest.mark.slow  # two runs; test_sweep_gives_each_value_to_one_run is the fast one
def test_sweep_runs_each_value(ray_session, tmp_path):
    cfg = load_config(
        BASE,
        {
            "output.dir": str(tmp_path),
            "sweep": {"algorithm.lr": [0.01, 0.5]},
            "wireless": None,
        },
    )
    table, _ = sweep(cfg)
    assert list(table["variant"]) == ["algorithm.lr=0.01", "algorithm.lr=0.5"]
    assert table["final_acc"].iloc[1] > table["final_acc"].iloc[0]


class _NoRay:
    """Stands in for RaySession: the runs below are fakes."""

    def __init__(self, config):
        pass

    def close(self):
        pass


def test_sweep_gives_each_value_to_one_run(tmp_path, monkeypatch):
    # Arrange: ``run`` records each run's overrides and returns a small result
    seen: list[dict] = []

    def fake_run(base, extra):
        seen.append(extra)
        lr = extra["algorithm.lr"]
        summary = {
            "final": {"eval_acc": lr, "eval_max_loss": 1.0},
            "totals": {"latency_s": 1.0, "energy_j": 1.0, "bits": 8.0},
        }
        rounds = pd.DataFrame({"round": [0, 1], "eval_acc": [0.0, lr]})
        run_dir = Path(extra["output.dir"]) / extra["name"]
        return SimpleNamespace(summary=summary, run_dir=run_dir, rounds=rounds)

    monkeypatch.setattr(rayfl.compare.variants, "RaySession", _NoRay)
    monkeypatch.setattr(rayfl.compare.variants, "run", fake_run)
    cfg = load_config(
        BASE,
        {
            "output.dir": str(tmp_path),
            "sweep": {"algorithm.lr": [0.01, 0.5], "rounds": [1, 2]},
        },
    )
    # Act
    table, out = sweep(cfg)
    # Assert: one run per grid point, in order, each with its values and no sweep
    grid = [(0.01, 1), (0.01, 2), (0.5, 1), (0.5, 2)]
    assert [(e["algorithm.lr"], e["rounds"]) for e in seen] == grid
    assert all(e["sweep"] == {} and e["output.dir"] == str(out) for e in seen)
    assert len({e["name"] for e in seen}) == 4
    assert list(table["variant"]) == [
        f"algorithm.lr={lr}, rounds={r}" for lr, r in grid
    ]
    assert table["final_acc"].tolist() == [0.01, 0.01, 0.5, 0.5]
    assert (out / "table.csv").is_file()


def test_compare_validates_every_variant_before_running(tmp_path):
    with pytest.raises(ConfigError):
        compare(BASE, ["round_robin"], {"output.dir": str(tmp_path), "rounds": 0})
    assert list(tmp_path.iterdir()) == []


def test_markdown_table():
    text = markdown_table(pd.DataFrame({"p": ["a", "b"], "x": [1.23456, 2.0]}))
    assert text.splitlines() == ["| p | x |", "|---|---|", "| a | 1.235 |", "| b | 2 |"]


def test_policy_entries_carry_their_own_parameters():
    from rayfl.compare.variants import policy_variant

    base = load_config(
        {
            "wireless": {"num_subchannels": 2},
            "scheduler": {"policy": "proportional_fair", "params": {"window": 3}},
        }
    )
    assert policy_variant(base, "random") == ("random", {"scheduler.policy": "random"})
    name, extra = policy_variant(base, "learned:checkpoint=runs/x:temperature=0.5")
    assert name == "learned"
    assert extra["scheduler.params"] == {
        "window": 3,
        "checkpoint": "runs/x",
        "temperature": 0.5,
    }
    with pytest.raises(ValueError, match="name:key=value"):
        policy_variant(base, "learned:checkpoint")
