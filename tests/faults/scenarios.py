"""Fault scenarios of the hierarchy and D2D fault tests (tests/faults/test_*.py).

A scenario kills one actor (or the driver) at round ``at`` of a run that saves a
checkpoint every round, expects the run to end ``failed`` with a checkpoint to
resume from, resumes it and compares every file with the uninterrupted run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import ray

import rayfl
from rayfl.engine.engine import Engine
from rayfl.rundir.status import RunFailed


def kill_for_good(actor: Any, timeout_s: float = 60.0) -> None:
    """``ray.kill(actor, no_restart=True)``, then wait until calls to it fail.

    ``ray.kill`` returns before the actor dies; a call sent right after could
    still run on the old process and the fault would be missed.
    """
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_call__.remote(lambda self: None), timeout=5)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            pass
        time.sleep(0.1)
    raise AssertionError("the actor did not die")


def only_run_dir(root: Path) -> Path:
    """The one run directory under ``root``."""
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir


def tables(run_dir: Path) -> dict[str, Any]:
    """Every result of a run directory, timing aside."""
    out: dict[str, Any] = {
        "metrics": pd.read_parquet(run_dir / "metrics.parquet"),
        "rounds": pd.read_parquet(run_dir / "rounds.parquet").drop(
            columns="round_time_s"
        ),
    }
    edges = run_dir / "edges.parquet"
    if edges.exists():
        out["edges"] = pd.read_parquet(edges)
    summary = json.loads((run_dir / "summary.json").read_text())
    out["final"] = {k: v for k, v in summary["final"].items() if k != "round_time_s"}
    for key in ("d2d", "local_updates", "privacy", "warnings"):
        out[key] = summary.get(key)
    return out


def assert_same_run(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Bit-identical results (``pd.testing`` compares floats exactly here)."""
    assert got.keys() == want.keys()
    for key in got:
        if isinstance(got[key], pd.DataFrame):
            pd.testing.assert_frame_equal(got[key], want[key], check_exact=True)
        else:
            assert got[key] == want[key], key


def at_round(
    monkeypatch: pytest.MonkeyPatch, at: int, action: Callable[[Engine], None]
) -> None:
    """Run ``action(engine)`` when round ``at`` starts (before its calls)."""
    original = Engine.run_round

    def patched(self: Engine, round: int, decision: Any) -> Any:
        if round == at:
            action(self)
        return original(self, round, decision)

    monkeypatch.setattr(Engine, "run_round", patched)


def during_gather(
    monkeypatch: pytest.MonkeyPatch, at: int, action: Callable[[Engine], None]
) -> None:
    """Run ``action(engine)`` in round ``at`` while its actor calls are in flight.

    The first ``ActorPool.gather`` of the round (the training results) runs
    ``action`` before it waits.
    """
    from rayfl.actors.pool import ActorPool

    original_round, original_gather = Engine.run_round, ActorPool.gather
    box: dict[str, Any] = {}

    def patched_round(self: Engine, round: int, decision: Any) -> Any:
        if round == at:
            box["engine"] = self
        try:
            return original_round(self, round, decision)
        finally:
            box.pop("engine", None)

    def patched_gather(self: Any, refs: list[Any], actor_ids: list[int]) -> Any:
        engine = box.pop("engine", None)
        if engine is not None:
            action(engine)
        return original_gather(self, refs, actor_ids)

    monkeypatch.setattr(Engine, "run_round", patched_round)
    monkeypatch.setattr(ActorPool, "gather", patched_gather)


def fail_then_resume(
    config: dict[str, Any], overrides: dict[str, Any], out: Path, at: int
) -> Path:
    """Run ``config`` (its fault patched in), expect failure at ``at``; resume.

    The caller must have undone its patches by the time this returns: the
    resume runs on ``monkeypatch.undo()`` called here.
    """
    with pytest.raises(RunFailed):
        rayfl.run(config, {**overrides, "output.dir": str(out)})
    run_dir = only_run_dir(out)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed", summary
    assert summary["error"]["round"] == at, summary["error"]
    assert summary["error"]["resume_from"] == at, summary["error"]
    return run_dir


def sigkill_driver_then_resume(config: dict[str, Any], out: Path) -> Path:
    """Run ``config`` in its own process, SIGKILL it after a checkpoint, resume it.

    Returns:
        The run directory, resumed to completion by ``rayfl resume`` in a
        fresh process.
    """
    import os
    import signal
    import subprocess
    import sys

    import yaml

    cfg_path = out / "cfg.yaml"
    out.mkdir(parents=True, exist_ok=True)
    cfg_path.write_text(yaml.safe_dump(config))
    rayfl_cli = [sys.executable, "-m", "rayfl.cli"]
    proc = subprocess.Popen(
        [*rayfl_cli, "run", str(cfg_path), f"output.dir={out / 'runs'}"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 300
    marker = None
    while time.time() < deadline and proc.poll() is None:
        found = list((out / "runs").glob("*/checkpoint/round.json"))
        if found and json.loads(found[0].read_text())["next_round"] >= 1:
            marker = found[0]
            break
        time.sleep(0.02)
    assert marker is not None, proc.stderr.read().decode() if proc.stderr else ""
    assert proc.poll() is None, "the run ended before the kill: make it longer"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    run_dir = marker.parent.parent
    done = subprocess.run(
        [*rayfl_cli, "resume", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return run_dir
