"""Checkpoint/resume: a run killed at round k and resumed equals an uninterrupted one."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

import rayfl

CFG = {
    "name": "ckpt",
    "rounds": 6,
    "eval_every": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlp", "hidden": [32]},
    "algorithm": {"local_steps": 150, "batch_size": 32, "lr": 0.05},
    "scheduler": {"policy": "round_robin", "clients_per_round": 2},
    "privacy": {"mechanism": "gaussian", "clip_norm": 1.0, "noise_multiplier": 0.5},
    "ray": {"num_cpus": 2},
    "output": {"progress": False, "plots": False, "checkpoint_every": 2},
}
RAYFL = [sys.executable, "-m", "rayfl.cli"]


@pytest.mark.slow  # two subprocess runs; tests/engine/test_loop.py resumes in the default suite
def test_resume_after_driver_kill_equals_uninterrupted_run(ray_session, tmp_path):
    # Arrange: a run in its own process, killed once a checkpoint exists
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(CFG))
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*RAYFL, "run", str(cfg_path), f"output.dir={out}"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 240
    marker = None
    while time.time() < deadline and proc.poll() is None:
        found = list(out.glob("*/checkpoint/round.json"))
        if found and json.loads(found[0].read_text())["next_round"] >= 2:
            marker = found[0]
            break
        time.sleep(0.05)
    assert marker is not None, proc.stderr.read().decode() if proc.stderr else ""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    run_dir = marker.parent.parent
    killed_at = json.loads(marker.read_text())["next_round"]
    assert killed_at < CFG["rounds"]
    # Act: resume in a fresh process, and run the same config uninterrupted here
    done = subprocess.run(
        [*RAYFL, "resume", str(run_dir)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reference = rayfl.run(CFG, {"output.dir": str(tmp_path / "ref")})
    # Assert
    resumed = pd.read_parquet(run_dir / "metrics.parquet")
    pd.testing.assert_frame_equal(resumed, reference.metrics)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"


def test_resume_without_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint_every"):
        rayfl.resume(tmp_path)
