"""``ray.local_processes``: what a local session started by rayfl runs, and that it all stops."""

from __future__ import annotations

import os
import sys
import time

import pytest
import ray

from rayfl.cluster.session import RaySession
from rayfl.cluster.watchdog import descendants, start_time
from rayfl.config import RayConfig

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc"
)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _session_processes(session: RaySession) -> list[tuple[int, int | None]]:
    node = session.node or ray._private.worker._global_node
    pids = {p.process.pid for ps in node.all_processes.values() for p in ps}
    return [(p, start_time(p)) for p in descendants(pids)]


def _alive(procs: list[tuple[int, int | None]]) -> list[tuple[int, int | None]]:
    return [(p, s) for p, s in procs if s is not None and start_time(p) == s]


@ray.remote
def _worker_niceness() -> int:
    return os.nice(0)


def _start(
    local_processes: str,
) -> tuple[RaySession, list[tuple[int, int | None]], int]:
    assert not ray.is_initialized()
    session = RaySession(RayConfig(num_cpus=1, local_processes=local_processes))
    assert session.started_here
    niceness = ray.get(_worker_niceness.remote())
    procs = _session_processes(session)
    return session, procs, niceness


def _monitors(procs: list[tuple[int, int | None]]) -> list[int]:
    return [p for p, _ in procs if "autoscaler/_private/monitor.py" in _cmdline(p)]


def _dashboard_heads(procs: list[tuple[int, int | None]]) -> list[int]:
    return [p for p, _ in procs if "dashboard/dashboard.py" in _cmdline(p)]


def _stop(session: RaySession, procs: list[tuple[int, int | None]]) -> None:
    session.close()
    assert not ray.is_initialized()
    deadline = time.monotonic() + 30
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [(p, _cmdline(p)[:80]) for p, _ in _alive(procs)]
    assert not left, f"processes of the closed session left: {left}"


def test_a_lean_session_runs_no_monitor_nor_dashboard_head_and_stops_all():
    session, procs, niceness = _start("lean")
    try:
        commands = " ".join(_cmdline(p) for p, _ in procs)
        assert "gcs_server" in commands and "raylet" in commands
        assert _monitors(procs) == []
        assert _dashboard_heads(procs) == []
        assert niceness == os.nice(0)  # Ray's default would be +15
        assert session.watchdog is not None  # watches the lean node's processes
    finally:
        _stop(session, procs)


@pytest.mark.slow
def test_a_full_session_runs_the_monitor_dashboard_head_and_nice_workers():
    # the contrast: the checks above can see a monitor and Ray's worker niceness
    session, procs, niceness = _start("full")
    try:
        assert len(_monitors(procs)) == 1
        assert len(_dashboard_heads(procs)) == 1
        assert niceness == os.nice(0) + 15
    finally:
        _stop(session, procs)


def test_lean_falls_back_to_the_full_start_when_ray_internals_moved(monkeypatch):
    # ray._private is not a public API: a Ray whose Node/RayParams lack what the
    # lean start calls gets the full local session, with a warning, not a crash
    import rayfl.cluster.session as session_module

    monkeypatch.setattr(
        session_module, "_PARAMS_ARGS", (*session_module._PARAMS_ARGS, "no_such_arg")
    )
    with pytest.warns(RuntimeWarning, match="lacks no_such_arg"):
        session, procs, _ = _start("lean")
    try:
        assert session.node is None  # ray.init started the node
        assert len(_monitors(procs)) == 1  # what ray.init(address="local") starts
        assert ray.get(_worker_niceness.remote()) is not None
    finally:
        _stop(session, procs)


def test_the_lean_node_skips_only_the_dashboard_head(monkeypatch):
    from rayfl.cluster.session import _lean_parts

    parts = _lean_parts()
    assert parts is not None  # this Ray has what the lean start calls
    node_class, _ = parts
    calls = []

    class Probe(node_class):
        def __init__(self) -> None:  # no processes: only the override is probed
            pass

    def spy(self, *args, **kwargs):
        calls.append(kwargs)

    monkeypatch.setattr(node_class.__mro__[1], "start_api_server", spy)  # Ray's Node
    Probe().start_api_server(include_dashboard=False, raise_on_failure=False)
    assert calls == []
    Probe().start_api_server(include_dashboard=True, raise_on_failure=True)
    assert calls == [{"include_dashboard": True, "raise_on_failure": True}]


@ray.remote
class _Worker:
    def pid(self) -> int:
        return os.getpid()


def test_close_hands_the_sessions_workers_to_the_leftover_check(monkeypatch):
    # a worker that swallows the raylet's SIGTERM (its SystemExit raised inside
    # a weakref callback) outlives the session: close() checks every process
    # that was below the node, workers included (seen once, not reproducible)
    import rayfl.cluster.session as session_module

    seen: list[list[tuple[int, int]]] = []
    real = session_module._stop_leftovers
    monkeypatch.setattr(
        session_module, "_stop_leftovers", lambda tree: seen.append(tree) or real(tree)
    )
    session, procs, _ = _start("lean")
    pid = ray.get(_Worker.remote().pid.remote())
    _stop(session, procs)
    assert len(seen) == 1
    assert pid in {p for p, _ in seen[0]}


def test_leftovers_get_sigterm_then_sigkill():
    import subprocess

    from rayfl.cluster.session import _stop_leftovers

    deaf = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
            " print('ready', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert deaf.stdout is not None and deaf.stdout.readline() == b"ready\n"
        start = start_time(deaf.pid)
        assert start is not None
        assert _stop_leftovers([(deaf.pid, start)], wait_s=0.2) == [deaf.pid]
        assert deaf.wait(timeout=30) == -9  # SIGTERM ignored, then SIGKILL
        assert _stop_leftovers([(deaf.pid, start)], wait_s=0.2) == []  # gone
    finally:
        deaf.kill()
