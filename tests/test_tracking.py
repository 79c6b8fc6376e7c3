"""``output.loggers`` (TensorBoard, MLflow) and ``rayfl runs`` (issue 35)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rayfl import cli
from rayfl.config import ConfigError, load_config
from rayfl.rundir.runs import runs_table
from rayfl.rundir.tracking import Tracker

TINY = {
    "name": "tracked",
    "rounds": 3,
    "eval_every": 1,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "scheduler": {"policy": "round_robin", "clients_per_round": 2},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False},
}


def _scalars(folder: Path) -> dict[str, dict[int, float]]:
    """Read TensorBoard event files with the record format itself (not our writer).

    A record is: uint64 length, uint32 crc, ``length`` bytes of an ``Event``
    protobuf, uint32 crc.
    """
    from tensorboardX.proto import event_pb2

    found: dict[str, dict[int, float]] = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    found.setdefault(value.tag, {})[event.step] = value.simple_value
    return found


def _mlflow_run(run_dir: Path):
    import os

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
    (experiment,) = [e for e in client.search_experiments() if e.name == "tracked"]
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run


@pytest.fixture(scope="module")
def tracked_run(ray_session, tmp_path_factory):
    pytest.importorskip("tensorboardX")
    pytest.importorskip("mlflow")
    import rayfl

    out = tmp_path_factory.mktemp("runs")
    return rayfl.run(
        {
            **TINY,
            "output": {
                **TINY["output"],
                "dir": str(out),
                "loggers": ["tensorboard", "mlflow"],
            },
        }
    )


def test_tensorboard_event_files_hold_every_rounds_metrics(tracked_run):
    scalars = _scalars(tracked_run.run_dir / "tensorboard")
    expected = tracked_run.rounds.set_index("round")["global_acc"]
    assert sorted(scalars["global_acc"]) == list(expected.index)  # steps = rounds
    np.testing.assert_allclose(
        [scalars["global_acc"][r] for r in expected.index], expected, rtol=1e-6
    )


def test_mlflow_run_has_the_config_and_per_round_metrics(tracked_run):
    client, run = _mlflow_run(tracked_run.run_dir)
    history = client.get_metric_history(run.info.run_id, "global_acc")
    expected = tracked_run.rounds.set_index("round")["global_acc"]
    assert run.info.status == "FINISHED"
    assert run.info.run_name == tracked_run.run_dir.name
    assert run.data.params["data.dataset"] == "digits"
    assert run.data.params["rounds"] == "3"
    assert {m.step: m.value for m in history} == pytest.approx(expected.to_dict())


def test_rayfl_runs_lists_the_run_and_writes_csv(tracked_run, tmp_path, capsys):
    root = tracked_run.run_dir.parent
    csv = tmp_path / "runs.csv"
    code = cli.main(["runs", str(root), "--csv", str(csv)])
    printed = capsys.readouterr().out
    table = pd.read_csv(csv)
    summary = json.loads((tracked_run.run_dir / "summary.json").read_text())
    assert code == 0 and tracked_run.run_dir.name in printed
    (row,) = table.to_dict("records")
    assert row["status"] == "completed" and row["rounds"] == "3/3"
    assert row["final_acc"] == pytest.approx(summary["final"]["eval_acc"])
    assert row["time_s"] == pytest.approx(summary["total_s"])


def _fake_run(path: Path, summary: dict | None, rounds: int = 5) -> None:
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump({"name": "x", "rounds": rounds}))
    if summary is not None:
        (path / "summary.json").write_text(json.dumps(summary))


def test_runs_table_reads_every_run_under_the_folder(tmp_path):
    # Arrange: a finished DP run, a failed one, one still running, one in a compare/
    _fake_run(
        tmp_path / "a-1",
        {
            "status": "completed",
            "rounds_done": 5,
            "total_s": 12.5,
            "final": {"eval_acc": 0.8, "eval_max_loss": 1.2},
            "privacy": {"epsilon_max": 3.5},
        },
    )
    _fake_run(
        tmp_path / "b-2",
        {
            "status": "failed",
            "rounds_done": 2,
            "total_s": 3.0,
            "final": {"eval_acc": 0.4},
        },
    )
    _fake_run(tmp_path / "c-3", None)
    _fake_run(
        tmp_path / "compare-x" / "d-4",
        {"status": "completed", "rounds_done": 5, "final": {"target_acc": 0.9}},
    )
    # Act
    table = runs_table(tmp_path).set_index("run")
    # Assert
    assert list(table.index) == ["a-1", "b-2", "c-3", "compare-x/d-4"]
    assert table["status"].tolist() == ["completed", "failed", "running?", "completed"]
    assert table["rounds"].tolist() == ["5/5", "2/5", "0/5", "5/5"]
    assert table.loc[
        "a-1", ["final_acc", "max_loss", "epsilon", "time_s"]
    ].tolist() == [0.8, 1.2, 3.5, 12.5]
    assert table.loc["compare-x/d-4", "final_acc"] == 0.9  # D2D: the target's
    assert np.isnan(table.loc["b-2", "epsilon"])


def test_runs_of_a_missing_folder_is_a_one_line_error(tmp_path, capsys):
    assert cli.main(["runs", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"rayfl runs: no directory {tmp_path / 'nope'}"
    )


def test_an_unknown_logger_or_a_missing_extra_is_a_config_error(monkeypatch):
    with pytest.raises(ConfigError, match="output.loggers"):
        load_config(TINY, ["output.loggers=[wandb]"])
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "mlflow" else real(name, *a),
    )
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[mlflow\]'"):
        load_config(TINY, ["output.loggers=[mlflow]"])


def test_a_tracker_without_loggers_adds_nothing(tmp_path):
    def inner(t, row, evals):
        return None

    tracker = Tracker([], tmp_path, {})
    assert tracker.chain(inner) is inner
    tracker.close()
    assert list(tmp_path.iterdir()) == []
