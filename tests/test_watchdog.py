"""A SIGKILLed driver leaves no Ray processes behind (rayfl.cluster.watchdog)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rayfl.cluster.session import RaySession
from rayfl.cluster.watchdog import descendants, start_time, teardown
from rayfl.config import RayConfig

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the watchdog reads /proc"
)


def _alive(procs):
    return [(p, s) for p, s in procs if start_time(p) == s]


def _wait_gone(procs, timeout):
    deadline = time.monotonic() + timeout
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(procs)


def test_teardown_kills_a_process_tree_and_only_it():
    tree = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 & wait"])
    other = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.3)
        members = descendants({tree.pid})
        assert len(members) == 3  # bash and its two sleeps
        procs = [(p, start_time(p)) for p in members]
        teardown([(tree.pid, start_time(tree.pid))], "")
        tree.wait(timeout=10)
        assert not _wait_gone(procs, 10)
        assert other.poll() is None  # not in the tree: untouched
        # a recycled pid (other start time) is never signalled
        teardown([(other.pid, start_time(other.pid) + 1)], "")
        time.sleep(0.3)
        assert other.poll() is None
    finally:
        for p in (tree, other):
            p.kill()
            p.wait()


def test_a_session_rayfl_did_not_start_is_not_watched(ray_session):
    session = RaySession(RayConfig())
    assert not session.started_here and session.watchdog is None
    session.close()
    import ray

    assert ray.is_initialized()  # the user's session stays up


DRIVER = textwrap.dedent(
    """
    import json, os, time
    import ray
    from rayfl.config import RayConfig
    from rayfl.cluster.session import RaySession

    session = RaySession(RayConfig(num_cpus=1))

    @ray.remote
    def where():
        return os.getpid()

    worker = ray.get(where.remote())
    node = session.node or ray._private.worker._global_node  # lean or full start
    pids = [p.process.pid for ps in node.all_processes.values() for p in ps]
    print(json.dumps({"pids": pids + [worker], "watchdog": session.watchdog.pid}),
          flush=True)
    time.sleep(600)
    """
)


@pytest.mark.slow
def test_sigkilled_driver_leaves_no_ray_processes():
    # Arrange: a driver that started its own local session, and a worker
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        line = driver.stdout.readline()
        assert line, "the driver did not start Ray"
        info = json.loads(line)
        ray_procs = [(p, start_time(p)) for p in descendants(set(info["pids"]))]
        watchdog = (info["watchdog"], start_time(info["watchdog"]))
        assert len(_alive(ray_procs)) >= 5  # gcs, raylet, agents, the worker...
        # Act: kill the driver process alone (its children are orphaned)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=10)
        # Assert: the watchdog tears the session down, then exits
        left = _wait_gone(ray_procs, 60)
        assert not left, f"Ray processes left: {left}"
        assert not _wait_gone([watchdog], 10)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
