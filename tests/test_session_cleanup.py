"""Ray's leftovers (issue 45): a session rayfl starts leaves no session directory.

Each test runs in a subprocess with its own ``RAY_TMPDIR``, so that rayfl
starts (and closes) its own sessions, and only the test's own session
directories are looked at. Also: an unreachable ``ray.address`` fails in one
line instead of hanging.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rayfl.cluster.address import ClusterUnreachable, check_reachable, host_port
from tests.subprocesses import isolated_env

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import rayfl
    from rayfl.engine import Engine
    from rayfl.rundir.status import RunFailed

    out, mode = sys.argv[1], sys.argv[2]
    base = {
        "rounds": 1,
        "data": {"dataset": "digits", "num_clients": 4, "partition": "iid"},
        "model": {"kind": "mlr"},
        "algorithm": {"local_steps": 1, "batch_size": 16, "lr": 0.1},
        "ray": {"num_cpus": 2, "clients_per_actor": 2, "object_store_memory_mb": 128},
        "output": {"progress": False, "plots": False, "dir": out},
    }
    report = {}
    if mode == "runs":
        for i in range(3):
            rayfl.run({**base, "name": f"ok{i}"})
        def boom(self, *args, **kwargs):
            raise RuntimeError("boom in round")
        Engine.run_round = boom
        try:
            rayfl.run({**base, "name": "failed"})
        except RunFailed as e:
            report["message"] = str(e)
            report["error_txt"] = (e.run_dir / "error.txt").read_text()
        def setup_boom(self, *args, **kwargs):  # after Ray started, before round 0
            raise RuntimeError("boom in set-up")
        Engine._put_initial = setup_boom
        try:
            rayfl.run({**base, "name": "setup"})
        except RunFailed as e:
            report["setup_message"] = str(e)
    elif mode == "keep_logs":
        rayfl.run({**base, "name": "kept", "ray": {**base["ray"], "keep_logs": True}})
    elif mode == "users_session":
        import ray
        ray.init(address="local", num_cpus=2, include_dashboard=False,
                 logging_level="ERROR", object_store_memory=128 * 2**20)
        rayfl.run({**base, "name": "users"})
        report["still_on"] = ray.is_initialized()
    print(json.dumps(report))
    """
)


def _run(mode: str, ray_tmp: Path, out: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out), mode],
        capture_output=True,
        text=True,
        timeout=600,
        env=isolated_env(ray_tmp),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _sessions(ray_tmp: Path) -> list[Path]:
    return sorted((ray_tmp / "ray").glob("session_2*"))


def test_three_runs_leave_no_session_dir_and_failed_ones_are_kept(tmp_path, ray_tmp):
    # Act: 3 runs that complete, 1 that fails in its first round, 1 in its set-up
    report = _run("runs", ray_tmp, tmp_path / "runs")
    # Assert: only the failed runs' session directories are left, each named
    left = _sessions(ray_tmp)
    assert len(left) == 2, left
    assert (left[0] / "logs").is_dir()
    assert f"Ray session logs: {left[0]}" in report["message"]
    assert f"{left[0]}/logs" in report["error_txt"]
    assert "boom in round" in report["error_txt"]
    assert "boom in set-up" in report["setup_message"]
    assert f"Ray session logs: {left[1]}" in report["setup_message"]
    latest = ray_tmp / "ray" / "session_latest"
    assert not latest.is_symlink() or latest.exists()  # never dangling


def test_keep_logs_keeps_the_session_dir(tmp_path, ray_tmp):
    _run("keep_logs", ray_tmp, tmp_path / "runs")
    assert len(_sessions(ray_tmp)) == 1


def test_a_users_own_session_is_never_touched(tmp_path, ray_tmp):
    report = _run("users_session", ray_tmp, tmp_path / "runs")
    assert report["still_on"] is True
    assert len(_sessions(ray_tmp)) == 1  # the user's, still there


@pytest.mark.parametrize("address", ["127.0.0.1:1", "no-such-host.invalid:1"])
def test_unreachable_address_fails_in_one_line(tmp_path, address):
    # Arrange
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        "rounds: 1\n"
        "data: {dataset: digits, num_clients: 4, partition: iid}\n"
        "model: {kind: mlr}\n"
        "output: {progress: false, plots: false}\n"
    )
    env = isolated_env(tmp_path)
    # Act: the timeout only guards against the old hang
    proc = subprocess.run(
        [sys.executable, "-m", "rayfl.cli", "run", str(cfg),
         f"ray.address={address}", f"output.dir={tmp_path / 'runs'}"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    # Assert: rc 2, one short line naming the address, no traceback, no run dir
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 300, proc.stderr
    assert lines[0].startswith(f"rayfl: cannot reach the Ray cluster at {address} (")
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_host_port_and_check_reachable():
    assert host_port("auto") is None and host_port("ray://h:10001") == ("h", 10001)
    assert host_port("10.0.0.1:6379") == ("10.0.0.1", 6379)
    check_reachable("auto")  # left to Ray
    with pytest.raises(ClusterUnreachable, match=r"at 127\.0\.0\.1:1 \("):
        check_reachable("127.0.0.1:1")


def test_address_local_starts_a_local_session_with_the_configs_cpus_and_store(
    monkeypatch,
):
    # Arrange: record what RaySession would start, without starting Ray
    import ray

    import rayfl.cluster.session as session
    from rayfl.config import RayConfig

    started: dict = {}
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # `local` must not follow it
    monkeypatch.setattr(
        session, "_init_keeping_sigterm", lambda init, **kw: started.update(kw)
    )
    monkeypatch.setattr(session, "_start_watchdog", lambda node: None)
    monkeypatch.setattr(session, "session_dir_of", lambda node: None)
    monkeypatch.setattr(session, "check_reachable", lambda a: pytest.fail(a))
    config = RayConfig(
        address="local", num_cpus=1, object_store_memory_mb=100, local_processes="full"
    )
    # Act
    ray_session = session.RaySession(config)
    # Assert: a local start with the config's CPUs and store (both were ignored)
    assert ray_session.started_here
    assert started["num_cpus"] == 1
    assert started["object_store_memory"] == 100 * 2**20
    assert started["address"] == "local"
