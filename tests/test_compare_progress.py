"""``rayfl compare`` keeps every finished row on disk and fails in one line (issue 35)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

import rayfl.compare.variants
from rayfl import cli

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "name": "tiny",
    "rounds": 2,
    "eval_every": 1,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "scheduler": {"policy": "round_robin"},
    "wireless": {"num_subchannels": 2},
    "ray": {"num_cpus": 1, "object_store_memory_mb": 150},
    "output": {"progress": False, "plots": False},
}


class _NoRay:
    """Stands in for RaySession: these tests never start Ray."""

    def __init__(self, config):
        pass

    def close(self):
        pass


def _failing_run(fail_at: int):
    """A fake ``rayfl.runner.run`` whose ``fail_at``-th call (1-based) raises."""
    calls = []

    def run(base, extra):
        calls.append(extra.get("scheduler.policy", "?"))
        if len(calls) == fail_at:
            raise RuntimeError("actor died\n  Traceback of 30 lines that must not show")
        run_dir = Path(extra["output.dir"]) / f"{extra['name']}-{len(calls)}"
        summary = {
            "final": {"eval_acc": 0.1 * len(calls), "eval_max_loss": 2.0},
            "totals": {"latency_s": 1.0, "energy_j": 1.0, "bits": 8.0},
        }
        rounds = pd.DataFrame({"round": [0, 1], "eval_acc": [0.0, 0.1]})
        return SimpleNamespace(summary=summary, run_dir=run_dir, rounds=rounds)

    return run


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setattr(rayfl.compare.variants, "RaySession", _NoRay)
    monkeypatch.setattr("rayfl.compare.seeds.RaySession", _NoRay)
    path = tmp_path / "tiny.yaml"
    path.write_text(
        yaml.safe_dump({**TINY, "output": {**TINY["output"], "dir": str(tmp_path)}})
    )
    return path


pytestmark = pytest.mark.quick


def test_a_failing_second_run_keeps_the_first_row_and_prints_one_line(
    config, monkeypatch, capsys
):
    # Arrange
    monkeypatch.setattr(rayfl.compare.variants, "run", _failing_run(fail_at=2))
    # Act
    code = cli.main(
        ["compare", str(config), "--policies", "random,round_robin,best_channel"]
    )
    # Assert
    err = capsys.readouterr().err.strip().splitlines()
    (table,) = config.parent.glob("compare-tiny-*/table.csv")
    rows = pd.read_csv(table)
    assert code == 1
    assert rows["policy"].tolist() == ["random"]
    assert rows["final_acc"].tolist() == pytest.approx([0.1])
    assert len(err) == 1, err
    assert "compare: failed: RuntimeError: actor died after 1 of 3 runs" in err[0]
    assert str(table) in err[0]
    assert "Traceback" not in err[0]


def test_debug_prints_the_traceback_too(config, monkeypatch, capsys):
    monkeypatch.setattr(rayfl.compare.variants, "run", _failing_run(fail_at=1))
    code = cli.main(["--debug", "compare", str(config), "--policies", "random"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback (most recent call last)" in err
    assert err.strip().splitlines()[-1].startswith("rayfl: compare: failed")


def test_seeds_write_each_finished_row_to_table_all_and_csv(
    config, monkeypatch, capsys, tmp_path
):
    # Arrange: seed 0's two runs finish, seed 1's first fails
    monkeypatch.setattr(rayfl.compare.variants, "run", _failing_run(fail_at=3))
    csv = tmp_path / "out" / "per_seed.csv"
    # Act
    code = cli.main(
        ["compare", str(config), "--policies", "random,round_robin"]
        + ["--seeds", "0,1", "--csv", str(csv)]
    )
    # Assert
    (table_all,) = config.parent.glob("compare-seeds-tiny-*/table_all.csv")
    every = pd.read_csv(table_all)
    mine = pd.read_csv(csv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert every[["policy", "seed"]].values.tolist() == [
        ["random", 0],
        ["round_robin", 0],
    ]
    assert "run_dir" in every.columns and "run_dir" not in mine.columns
    assert mine.drop(columns=["seed"]).columns[0] == "policy" and len(mine) == 2
    assert len(err) == 1 and "after 2 of 4 runs" in err[0]


@pytest.mark.slow
def test_ctrl_c_mid_compare_keeps_the_finished_rows(tmp_path):
    # A real `rayfl compare` in a subprocess, interrupted once its first row is on
    # disk; the rows it finished are in table.csv and it exits with 130.
    path = tmp_path / "tiny.yaml"
    path.write_text(
        yaml.safe_dump({**TINY, "output": {**TINY["output"], "dir": str(tmp_path)}})
    )
    policies = "random,round_robin,best_channel,proportional_fair,minmax,age_based"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rayfl.cli",
            "compare",
            str(path),
            "--policies",
            policies,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600  # a generous bound on a busy machine
    tables: list[Path] = []
    while time.monotonic() < deadline and process.poll() is None:
        tables = list(tmp_path.glob("compare-tiny-*/table.csv"))
        if tables:
            break
        time.sleep(0.2)
    assert tables, "no row written"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=300)
    rows = pd.read_csv(tables[0])
    assert 1 <= len(rows) < 6
    assert rows["policy"].tolist() == policies.split(",")[: len(rows)]
    assert process.returncode == 130, err
    assert "interrupted after" in err.strip().splitlines()[-1]


def _broken_main(argv):
    raise ValueError("no data at /nowhere\nsecond line of a long message")


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_reproduce_scripts_fail_in_one_line(monkeypatch, capsys, debug):
    from rayfl.compare.progress import script_main

    monkeypatch.setattr(
        sys, "argv", ["reproduce_x.py", "--seeds", "0", *(["--debug"] if debug else [])]
    )
    seen = []
    code = script_main(lambda argv: seen.append(argv) or _broken_main(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert seen == [["--seeds", "0"]]  # --debug is the wrapper's, not the script's
    assert err[-1].startswith("reproduce_x.py: failed: ValueError: no data at /nowhere")
    assert ("Traceback (most recent call last):" in err) == debug
    assert len(err) == 1 or debug


def test_reproduce_scripts_use_the_bar_and_the_one_line_errors():
    for script in sorted((ROOT / "examples").glob("reproduce_*.py")):
        text = script.read_text()
        assert "progress_bar(" in text, script.name
        assert "sys.exit(script_main(main))" in text, script.name


def test_runs_without_a_row_count_as_done_and_grow_the_total(tmp_path):
    from rayfl.compare.progress import CompareFailed, RowLog

    log = RowLog([tmp_path / "rows.csv"], total=3, desc="runs", progress=False)
    with pytest.raises(CompareFailed) as caught, log.guard():
        log.tick()
        log.tick()
        log.add({"run": 1})
        log.tick()  # one past the plan: the total grows to 4
        raise RuntimeError("boom")

    assert log.total == 4
    assert caught.value.done == 4 and caught.value.kept == 1
    assert "after 4 of 4 runs; the 1 finished row(s)" in str(caught.value)
