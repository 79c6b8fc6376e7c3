"""Streaming results: finished rounds on disk, per-client summary (issue 37)."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rayfl.rundir.results import RunLog, load_run, make_run_dir
from rayfl.rundir.stream import PARTS_DIR, ClientSummary, RowStream, read_metrics


def _rows(t, n, rejected=None):
    return [
        {"round": t, "client": c, "test_acc": 0.1 * c, "rejected": rejected}
        for c in range(n)
    ]


def test_parts_are_readable_before_the_merge_and_merge_in_row_groups(tmp_path):
    log = RunLog(make_run_dir(tmp_path, "x"))
    log.add_client_rows(0, _rows(0, 3))  # "rejected" all null in round 0
    log.add_client_rows(1, _rows(1, 3, rejected="not_finite"))
    assert log.client_rows == []  # the driver keeps nothing
    partial = read_metrics(log.run_dir)  # what a killed run leaves
    assert partial["round"].tolist() == [0, 0, 0, 1, 1, 1]
    log.round_rows = [{"round": 0}, {"round": 1}]
    log.flush({"status": "completed"})
    assert not (log.run_dir / PARTS_DIR).exists()
    import pyarrow.parquet as pq

    assert pq.ParquetFile(log.run_dir / "metrics.parquet").num_row_groups == 2
    loaded = load_run(log.run_dir)
    pd.testing.assert_frame_equal(
        loaded.metrics, pd.DataFrame(_rows(0, 3) + _rows(1, 3, "not_finite"))
    )
    assert loaded.clients is None


def test_a_resumed_run_drops_the_rounds_it_runs_again(tmp_path):
    stream = RowStream(tmp_path)
    for t in range(4):
        stream.append(t, _rows(t, 2))
    stream.truncate(2)
    assert read_metrics(tmp_path)["round"].unique().tolist() == [0, 1]


def test_client_summary_is_per_client_and_o_of_k(tmp_path):
    summary = ClientSummary(1_000_000)
    records = [
        {"client": 5, "delivered": True, "bits": 10.0, "train_loss": 0.5},
        {"client": 9, "delivered": False, "bits": 4.0, "train_loss": 0.7},
    ]
    summary.update(0, records, [{"client": 9, "test_acc": 0.25, "test_loss": 2.0}])
    summary.update(1, records[:1], None)
    c = summary.columns
    assert c["rounds_scheduled"][[5, 9, 0]].tolist() == [2, 1, 0]
    assert c["rounds_delivered"][[5, 9]].tolist() == [2, 0]
    assert c["bits"][5] == 20.0 and c["last_round"][9] == 0
    assert c["test_acc"][9] == 0.25 and np.isnan(c["test_acc"][5])
    assert sum(v.nbytes for v in c.values()) / 1_000_000 < 64  # bytes a client
    summary.write(tmp_path)
    frame = pd.read_parquet(tmp_path / "clients.parquet")
    assert len(frame) == 1_000_000 and frame.loc[5, "rounds_scheduled"] == 2


def _tree(pid):
    """The pids of ``pid``'s descendants (from /proc)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    mine, grew = {pid}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in mine} - mine
        grew, mine = bool(more), mine | more
    return mine - {pid}


@pytest.mark.slow  # a run of 10^5 clients in a subprocess (Ray start-up): ~1-2 min
def test_killed_run_of_a_large_population_keeps_finished_rounds(tmp_path):
    script = textwrap.dedent(
        f"""
        from rayfl.runner import run
        run({{
            "rounds": 10000,
            "eval_every": 10000,
            "data": {{"dataset": "digits", "num_clients": 100000,
                      "population": "resampled", "samples_per_client": 4}},
            "model": {{"kind": "mlr"}},
            "scheduler": {{"policy": "random", "clients_per_round": 20}},
            "ray": {{"object_store_memory_mb": 300, "num_cpus": 2}},
            "output": {{"dir": "{tmp_path}", "progress": False, "plots": False}},
        }})
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    driver = subprocess.Popen([sys.executable, "-c", script], env=env)
    try:
        deadline = time.monotonic() + 600
        parts: list[Path] = []
        while len(parts) < 3 and time.monotonic() < deadline:
            assert driver.poll() is None, "the run ended before it was killed"
            time.sleep(1)
            parts = sorted(tmp_path.glob("*/metrics.parts/round-*.parquet"))
        assert len(parts) >= 3, "no rounds streamed in time"
    finally:
        children = _tree(driver.pid)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        for pid in children:  # the Ray processes this run started
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (run_dir,) = [p.parent.parent for p in parts[:1]]
    metrics = read_metrics(run_dir)
    finished = sorted(metrics["round"].unique())
    assert finished == list(range(len(finished))) and len(finished) >= 3
    per_round = metrics.groupby("round")["client"].count()
    assert (per_round == 100_000).all()
    assert (metrics.groupby("round")["scheduled"].sum() == 20).all()
