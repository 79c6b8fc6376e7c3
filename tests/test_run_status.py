"""Every run ends with a terminal status: completed, failed or interrupted.

Exercised on the three round loops (flat, hierarchical, D2D), with an exception
in a round, a client actor killed for good, and SIGTERM to a ``rayfl run``
process. Each checks ``summary.json`` (strict JSON), the rounds kept, and the
error block.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import ray
import yaml

import rayfl
from rayfl.rundir.status import RunFailed, RunInterrupted

BASE = {
    "name": "status",
    "rounds": 4,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2},
    "output": {"progress": False, "plots": False},
}
RAYFL = [sys.executable, "-m", "rayfl.cli"]


def _no_constants(name):
    raise ValueError(f"summary.json holds the non-JSON constant {name}")


def _summary(run_dir):
    text = (run_dir / "summary.json").read_text()
    return json.loads(text, parse_constant=_no_constants)


def _only_run_dir(root):
    dirs = [p for p in root.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _fail_at(monkeypatch, cls, method, at_round, error=RuntimeError):
    original = getattr(cls, method)

    def patched(self, t, *args, **kwargs):
        if t == at_round:
            raise error("boom in round")
        return original(self, t, *args, **kwargs)

    monkeypatch.setattr(cls, method, patched)


def test_exception_in_a_round_ends_failed_with_rounds_kept(
    ray_session, tmp_path, monkeypatch
):
    from rayfl.engine import Engine

    # Arrange: round 2 of 4 raises
    _fail_at(monkeypatch, Engine, "run_round", 2)
    # Act
    with pytest.raises(RunFailed) as info:
        rayfl.run(BASE, {"output.dir": str(tmp_path)})
    # Assert: status, error block, traceback file, the two rounds done
    run_dir = _only_run_dir(tmp_path)
    summary = _summary(run_dir)
    assert summary["status"] == "failed"
    error = summary["error"]
    assert (error["type"], error["message"], error["round"]) == (
        "RuntimeError",
        "boom in round",
        2,
    )
    assert error["resume_from"] is None  # no checkpoint_every
    assert "boom in round" in (run_dir / error["traceback"]).read_text()
    assert summary["rounds_done"] == 2
    assert pd.read_parquet(run_dir / "rounds.parquet")["round"].tolist() == [0, 1]
    assert len(pd.read_parquet(run_dir / "metrics.parquet")) == 2 * 4
    assert info.value.status == "failed" and "round 2" in str(info.value)


def test_ctrl_c_in_a_round_ends_interrupted(ray_session, tmp_path, monkeypatch):
    from rayfl.engine import Engine

    _fail_at(monkeypatch, Engine, "run_round", 1, error=KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt) as info:  # still a KeyboardInterrupt
        rayfl.run(BASE, {"output.dir": str(tmp_path)})
    assert isinstance(info.value, RunInterrupted)
    summary = _summary(_only_run_dir(tmp_path))
    assert summary["status"] == "interrupted"
    assert summary["error"]["message"] == "the driver received SIGINT (Ctrl-C)"
    assert summary["error"]["round"] == 1 and summary["rounds_done"] == 1


def test_hierarchical_loop_ends_failed(ray_session, tmp_path, monkeypatch):
    from rayfl.hierarchy.round import HierarchicalRound

    _fail_at(monkeypatch, HierarchicalRound, "run_global_round", 1)
    topology = {
        "kind": "hierarchical",
        "num_edges": 2,
        "tau": 2,
        "local_period": 2,
        "dp": {"enabled": False, "grad_bound": None},
        "lr": {"mode": "constant"},
    }
    with pytest.raises(RunFailed):
        rayfl.run({**BASE, "topology": topology}, {"output.dir": str(tmp_path)})
    summary = _summary(_only_run_dir(tmp_path))
    assert summary["status"] == "failed" and summary["error"]["round"] == 1
    assert summary["rounds_done"] == 1


def test_d2d_loop_ends_failed(ray_session, tmp_path, monkeypatch):
    from rayfl.d2d.round import D2DRound

    _fail_at(monkeypatch, D2DRound, "run_method_round", 1)
    cfg = {
        **BASE,
        "data": {"dataset": "digits", "num_clients": 6, "partition": "iid"},
        "algorithm": {"kind": "fedavg", "lr": 0.1, "batch_size": 16},
        "topology": {"kind": "d2d", "target": 0, "epsilon": 0.2},
    }
    with pytest.raises(RunFailed):
        rayfl.run(cfg, {"output.dir": str(tmp_path)})
    summary = _summary(_only_run_dir(tmp_path))
    assert summary["status"] == "failed" and summary["error"]["round"] == 1
    assert summary["rounds_done"] == 1


def test_completed_run_says_completed(ray_session, tmp_path):
    result = rayfl.run(BASE, {"output.dir": str(tmp_path), "rounds": 2})
    summary = _summary(result.run_dir)
    assert summary["status"] == "completed" and "error" not in summary
    assert summary["rounds_without_update"] == 0 and summary["warnings"] == []


def test_actor_lost_for_good_fails_cleanly_and_resumes(
    ray_session, tmp_path, monkeypatch
):
    from rayfl.engine import Engine

    # Arrange: no restarts, a checkpoint every round; before round 2 runs, the
    # actor hosting clients 0 and 1 is killed for good (a real kill)
    original = Engine.run_round

    def kill_then_run(self, t, schedule):
        if t == 2:
            ray.kill(self.actors[0], no_restart=True)
        return original(self, t, schedule)

    monkeypatch.setattr(Engine, "run_round", kill_then_run)
    overrides = {
        "output.dir": str(tmp_path),
        "ray.max_actor_restarts": 0,
        "output.checkpoint_every": 1,
    }
    # Act
    with pytest.raises(RunFailed) as info:
        rayfl.run(BASE, overrides)
    run_dir = _only_run_dir(tmp_path)
    summary = _summary(run_dir)
    # Assert: failed in round 2, rounds 0-1 (and the lost round 2) kept, resumable
    assert summary["status"] == "failed"
    assert summary["error"]["round"] == 2
    assert "Actor" in summary["error"]["type"]  # RayActorError / ActorDiedError
    assert summary["error"]["resume_from"] == 2
    assert f"rayfl resume {run_dir}" in str(info.value)
    rounds = pd.read_parquet(run_dir / "rounds.parquet")
    assert rounds["round"].tolist()[:2] == [0, 1]
    monkeypatch.setattr(Engine, "run_round", original)
    resumed = rayfl.resume(run_dir)
    assert resumed.summary["status"] == "completed"
    assert resumed.rounds["round"].tolist() == [0, 1, 2, 3]
    assert resumed.summary["local_updates"] == [4, 4, 4, 4]
    # the first attempt's traceback is kept, but not as the current error.txt
    assert not (run_dir / "error.txt").exists()
    assert "Actor" in (run_dir / "error.1.txt").read_text()


@pytest.mark.slow  # a subprocess run; Ctrl-C and the one-screen message stay in the default suite
def test_sigterm_ends_interrupted_with_one_screen_message(tmp_path):
    # Arrange: a long run in its own process; wait until round 1 is checkpointed
    cfg_path = tmp_path / "cfg.yaml"
    cfg = {
        **BASE,
        "rounds": 10_000,
        "output": {**BASE["output"], "checkpoint_every": 1},
    }
    cfg_path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [*RAYFL, "run", str(cfg_path), f"output.dir={out}"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if list(out.glob("*/checkpoint/round.json")):
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read()
        # Act
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Assert: exit 130, a few lines without a traceback, status interrupted
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 8, err
    assert "interrupted" in err and "rayfl resume" in err
    summary = _summary(_only_run_dir(out))
    assert summary["status"] == "interrupted"
    assert summary["error"]["message"] == "the driver received SIGTERM"
    assert summary["rounds_done"] >= 1
    assert summary["error"]["resume_from"] >= 1


def test_cli_failed_run_is_one_screen_exit_1(
    ray_session, tmp_path, monkeypatch, capsys
):
    from rayfl.cli import main
    from rayfl.engine import Engine

    _fail_at(monkeypatch, Engine, "run_round", 1)
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(BASE))
    args = ["run", str(cfg_path), f"output.dir={tmp_path / 'runs'}"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 8, err
    assert "run failed in round 1: RuntimeError: boom in round" in err
    assert "error.txt" in err
    # --debug adds the traceback
    assert main(["--debug", *args]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_divergence_report_counts_rounds_with_only_rejected_uploads():
    from rayfl.runner import divergence_report

    rows = [
        {"num_scheduled": 4, "num_delivered": 4, "num_rejected": 0},
        {"num_scheduled": 4, "num_delivered": 0, "num_rejected": 4},  # diverged
        {"num_scheduled": 4, "num_delivered": 0, "num_rejected": 0},  # all lost
        {"num_scheduled": 0, "num_delivered": 0, "num_rejected": 0},  # nobody
        {"num_scheduled": 4, "num_delivered": 0, "num_rejected": 2},  # diverged
    ]
    report = divergence_report(rows)
    assert report["rounds_without_update"] == 3
    assert report["diverged_rounds"] == 2
    assert report["warnings"] and report["warnings"][0].startswith(
        "diverged: 2 of 5 rounds delivered no update"
    )
    assert divergence_report(rows[:1])["warnings"] == []


def _write(run_dir):
    def write(progress):
        doc = {"status": progress.status, "error": progress.error}
        (run_dir / "summary.json").write_text(json.dumps(doc))

    return write


def test_terminal_status_unwraps_an_actor_side_exception(tmp_path):
    from ray.exceptions import RayTaskError

    from rayfl.rundir.status import terminal_status

    inner = OverflowError("a weighted update reaches 1e12")
    outer = RayTaskError("ClientHost.train", "remote traceback", inner)
    with (
        pytest.raises(RunFailed) as info,
        terminal_status(tmp_path, _write(tmp_path)) as progress,
    ):
        progress.round = 3
        raise outer
    error = _summary(tmp_path)["error"]
    assert error["type"] == "OverflowError"
    assert error["message"] == "a weighted update reaches 1e12"
    assert error["round"] == 3
    assert info.value.__cause__ is outer


def test_terminal_status_keeps_the_status_when_the_summary_fails(tmp_path):
    from rayfl.rundir.status import terminal_status

    def broken(progress):
        raise OSError("disk full")

    with pytest.raises(RunFailed), terminal_status(tmp_path, broken) as progress:
        progress.round = 0
        raise ValueError("first failure")
    summary = _summary(tmp_path)
    assert summary["status"] == "failed"
    assert summary["error"]["message"] == "first failure"
    assert summary["summary_error"] == "OSError: disk full"


def test_a_new_failure_keeps_every_earlier_traceback(tmp_path):
    from rayfl.rundir.status import terminal_status

    for attempt in range(3):
        with pytest.raises(RunFailed), terminal_status(tmp_path, _write(tmp_path)):
            raise ValueError(f"failure {attempt}")
    assert "failure 2" in (tmp_path / "error.txt").read_text()
    assert "failure 0" in (tmp_path / "error.1.txt").read_text()
    assert "failure 1" in (tmp_path / "error.2.txt").read_text()
    with terminal_status(tmp_path, _write(tmp_path)):
        pass
    assert _summary(tmp_path)["status"] == "completed"
    assert not (tmp_path / "error.txt").exists()
    assert "failure 2" in (tmp_path / "error.3.txt").read_text()
