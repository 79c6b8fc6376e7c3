"""A failure while a run is set up (actor creation, data, Ray start-up) ends
``failed`` with a run directory, ``error.txt`` and a one-screen message; the run's
Ray processes are all gone afterwards.

The actor is killed the way Ray's memory monitor kills one: SIGKILL to its
worker process, right after it started (``ray.max_actor_restarts=0``, so it is
lost for good; with restarts it comes back and the run goes on).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest
import ray
import yaml

import rayfl
from rayfl.rundir.status import RunFailed

BASE = {
    "name": "setup",
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"local_steps": 2, "batch_size": 16, "lr": 0.1},
    "ray": {"num_cpus": 2, "clients_per_actor": 2, "max_actor_restarts": 0},
    "output": {"progress": False, "plots": False, "checkpoint_every": 1},
}
RAYFL = [sys.executable, "-m", "rayfl.cli"]


def kill_first_actor_at_start(monkeypatch) -> None:
    """SIGKILL the worker process of client actor 0 as soon as it is created."""
    from rayfl.actors.pool import ActorPool

    launch = ActorPool._launch

    class Killing:
        def __init__(self, actor_class):
            self.actor_class = actor_class

        def options(self, **options):
            made = self.actor_class.options(**options)

            class Remote:
                @staticmethod
                def remote(*args, **kwargs):
                    handle = made.remote(*args, **kwargs)
                    if options["name"].endswith("-0"):
                        pid = ray.get(handle.__ray_call__.remote(lambda s: os.getpid()))
                        os.kill(pid, signal.SIGKILL)
                    return handle

            return Remote()

    def killing(self, actor_class, *args, **kwargs):
        return launch(self, Killing(actor_class), *args, **kwargs)

    monkeypatch.setattr(ActorPool, "_launch", killing)


def _only_run_dir(root):
    dirs = [p for p in root.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.mark.slow  # a run whose actor is killed while it starts
@pytest.mark.usefixtures("ray_session")
def test_an_actor_killed_during_set_up_ends_failed_with_error_txt(
    tmp_path, monkeypatch, capsys
):
    from rayfl.cli import main

    # Arrange
    kill_first_actor_at_start(monkeypatch)
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(BASE))
    out = tmp_path / "runs"
    # Act
    code = main(["run", str(cfg_path), f"output.dir={out}"])
    # Assert: exit 1, a one-screen message without a traceback
    err = capsys.readouterr().err
    err = err[err.index("rayfl: run failed") :]  # after Ray's own log lines
    assert code == 1, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 6, err
    assert err.startswith("rayfl: run failed during set-up: ActorDiedError: ")
    run_dir = _only_run_dir(out)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    error = summary["error"]
    assert (error["phase"], error["round"], error["resume_from"]) == (
        "setup",
        None,
        None,
    )
    assert error["type"] == "ActorDiedError"
    assert error["traceback"] == "error.txt"
    assert "ActorDiedError" in (run_dir / "error.txt").read_text()
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["name"] == "setup"
    # --debug prints the traceback as well
    assert main(["--debug", "run", str(cfg_path), f"output.dir={out}"]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.slow  # three runs
@pytest.mark.usefixtures("ray_session")
def test_a_resume_whose_set_up_fails_keeps_the_run_resumable(tmp_path, monkeypatch):
    # Arrange: a finished run with a checkpoint, resumed with an actor killed in
    # the set-up
    done = rayfl.run(BASE, {"output.dir": str(tmp_path)})
    run_dir = done.run_dir
    checkpoint = json.loads((run_dir / "checkpoint" / "round.json").read_text())
    (run_dir / "error.txt").write_text("an earlier attempt's traceback")
    kill_first_actor_at_start(monkeypatch)
    # Act
    with pytest.raises(RunFailed) as info:
        rayfl.resume(run_dir)
    # Assert: failed, resumable from the checkpoint; the earlier summary kept
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["error"]["phase"] == "setup"
    assert summary["error"]["resume_from"] == checkpoint["next_round"]
    assert summary["final"] == done.summary["final"]
    assert "ActorDiedError" in (run_dir / "error.txt").read_text()
    assert (run_dir / "error.1.txt").read_text() == "an earlier attempt's traceback"
    resume = f"rayfl resume {run_dir} (from round {checkpoint['next_round']})"
    assert resume in str(info.value)
    # and it resumes once the actors can start, to the same numbers
    monkeypatch.undo()
    resumed = rayfl.resume(run_dir)
    assert resumed.summary["status"] == "completed"
    pd.testing.assert_frame_equal(resumed.metrics, done.metrics)


def test_bad_input_in_set_up_still_writes_nothing(tmp_path):
    from rayfl.cluster.resources import bad_input
    from rayfl.data.datasets import DatasetError

    assert bad_input(DatasetError("x")) and bad_input(FileNotFoundError("x"))
    assert not bad_input(ValueError("a bug")) and not bad_input(RuntimeError("x"))


# --------------------------------------------------------------------------
# In its own process: Ray start-up failures, and no Ray process left behind

DRIVER = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, {tests!r})
    import pytest
    from rayfl.cluster.watchdog import descendants, start_time
    from rayfl.actors.pool import ActorPool
    from test_setup_failure import kill_first_actor_at_start

    record = {record!r}
    launch = ActorPool._launch

    def recording(self, *args, **kwargs):  # the Ray processes of this run
        try:
            return launch(self, *args, **kwargs)
        finally:
            me = os.getpid()
            procs = [(p, start_time(p)) for p in descendants({{me}}) - {{me}}]
            with open(record, "w") as f:
                json.dump([p for p in procs if p[1] is not None], f)

    ActorPool._launch = recording
    patch = pytest.MonkeyPatch()
    kill_first_actor_at_start(patch)
    from rayfl.cli import main
    sys.exit(main(["run", {config!r}, "output.dir=" + {out!r}]))
    """
)


def _alive(procs):
    from rayfl.cluster.watchdog import start_time

    return [(p, s) for p, s in procs if start_time(p) == s]


@pytest.mark.slow  # a subprocess starting its own Ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_set_up_failure_in_its_own_process_leaves_no_ray_process(tmp_path):
    # Arrange: `rayfl run` with its own local Ray; actor 0 killed at start
    cfg_path = tmp_path / "cfg.yaml"
    cfg_path.write_text(yaml.safe_dump(BASE))
    record, out = tmp_path / "pids.json", tmp_path / "runs"
    script = DRIVER.format(
        tests=os.path.dirname(__file__),
        record=str(record),
        config=str(cfg_path),
        out=str(out),
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # Act
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        start_new_session=True,
    )
    # Assert: failed with its run directory, a one-screen message
    err = proc.stderr[proc.stderr.find("rayfl: run failed") :]
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert err.startswith("rayfl: run failed during set-up: ActorDiedError"), err
    assert "Traceback" not in err
    run_dir = _only_run_dir(out)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    assert (run_dir / "error.txt").is_file()
    # every Ray process the run started (GCS, raylet, agents, workers) is gone
    procs = [tuple(p) for p in json.loads(record.read_text())]
    assert len(procs) >= 4, procs
    deadline = time.monotonic() + 60
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(procs), _alive(procs)
