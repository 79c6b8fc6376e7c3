"""RaySession retries Ray's start-up timeout, and only that error; a failed
attempt leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rayfl.cluster import session
from rayfl.cluster.watchdog import descendants, start_time


class _FlakyInit:
    def __init__(self, failures: int, message: str) -> None:
        self.failures, self.message, self.calls = failures, message, []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            raise Exception(self.message)


@pytest.fixture(autouse=True)
def _no_sleep_or_shutdown(monkeypatch):
    monkeypatch.setattr(session.time, "sleep", lambda s: None)
    monkeypatch.setattr(session.ray, "shutdown", lambda: None)


def test_startup_timeout_is_retried_with_the_same_arguments():
    init = _FlakyInit(2, "The current node timed out during startup. This could ...")
    session._init_with_retries(init, attempts=3, num_cpus=2)
    assert init.calls == [{"num_cpus": 2}] * 3


def test_gives_up_after_the_last_attempt():
    init = _FlakyInit(5, "The current node timed out during startup.")
    with pytest.raises(Exception, match="timed out during startup"):
        session._init_with_retries(init, attempts=2)
    assert len(init.calls) == 2


def test_other_errors_are_not_retried():
    init = _FlakyInit(1, "bad argument")
    with pytest.raises(Exception, match="bad argument"):
        session._init_with_retries(init, attempts=3)
    assert len(init.calls) == 1


# --------------------------------------------------------------------------
# A failed attempt's processes are stopped (Linux: read from /proc)

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the process tree in /proc"
)


def _alive(procs):
    return [(p, s) for p, s in procs if start_time(p) == s]


class _SpawningInit:
    """Each call starts a process tree (as ray.init starts GCS, raylet...); the
    first ``failures`` calls then time out as Ray's start-up wait does."""

    def __init__(self, failures: int) -> None:
        self.failures, self.trees = failures, []

    def __call__(self, **kwargs):
        tree = subprocess.Popen(["bash", "-c", "sleep 60 & sleep 60 & wait"])
        deadline = time.monotonic() + 30  # bash and its two sleeps (busy host)
        while len(descendants({tree.pid})) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.trees.append([(p, start_time(p)) for p in descendants({tree.pid})])
        if len(self.trees) <= self.failures:
            raise Exception("The current node timed out during startup.")


@linux_only
def test_a_timed_out_attempt_is_stopped_before_the_retry():
    # Arrange: a process of ours started before the attempts, which must survive
    bystander = subprocess.Popen(["sleep", "60"])
    init = _SpawningInit(failures=1)
    try:
        # Act
        session._init_with_retries(init, attempts=3)
        # Assert: the first attempt's tree (bash and its two sleeps) is gone,
        # the successful attempt's tree and the bystander are untouched
        first, second = init.trees
        assert len(first) == 3 and len(second) == 3
        assert _alive(first) == []
        assert len(_alive(second)) == 3
        assert bystander.poll() is None
    finally:
        for pid, _ in [p for tree in init.trees for p in _alive(tree)]:
            os.kill(pid, signal.SIGKILL)
        bystander.kill()
        bystander.wait()


@linux_only
def test_the_last_failed_attempt_is_stopped_too():
    init = _SpawningInit(failures=5)
    with pytest.raises(Exception, match="timed out during startup"):
        session._init_with_retries(init, attempts=2)
    assert len(init.trees) == 2
    assert [_alive(tree) for tree in init.trees] == [[], []]


@linux_only
def test_stop_new_processes_spares_older_children_and_reaps():
    older = subprocess.Popen(["sleep", "60"])
    before = session._child_processes()
    newer = subprocess.Popen(["sleep", "60"])
    try:
        stopped = session._stop_new_processes(before)
        assert stopped == [newer.pid]
        assert newer.wait(timeout=10) is not None  # killed
        assert older.poll() is None
    finally:
        for p in (older, newer):
            p.kill()
            p.wait()


RETRY_DRIVER = textwrap.dedent(
    """
    import json, os, time
    import ray._private.services as services
    from rayfl.cluster import session
    from rayfl.cluster.watchdog import descendants, start_time
    from rayfl.config import RayConfig

    first = []
    get_node = services.get_node

    def timing_out(*args, **kwargs):  # the first attempt's wait runs out
        if not first:
            time.sleep(2)  # let the raylet start its agents
            me = os.getpid()
            first.extend((p, start_time(p)) for p in descendants({me}) - {me})
            raise Exception("The current node timed out during startup.")
        return get_node(*args, **kwargs)

    services.get_node = timing_out
    session.time.sleep = lambda s: None
    ray_session = session.RaySession(RayConfig(num_cpus=1))
    time.sleep(1)
    left = [(p, s) for p, s in first if s is not None and start_time(p) == s]
    print(json.dumps({"first": first, "left": left}), flush=True)
    ray_session.close()
    """
)


@pytest.mark.slow  # starts Ray twice in a subprocess
@linux_only
def test_a_real_ray_start_up_timeout_leaves_nothing_of_the_first_attempt():
    # Arrange / Act: Ray's first start-up wait "times out" (its processes are
    # running by then); RaySession retries
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", RETRY_DRIVER],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        start_new_session=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Assert: the first attempt had started Ray's processes (GCS, raylet, ...);
    # none of them was alive once the second attempt had started
    assert len(report["first"]) >= 3, report
    assert report["left"] == [], report
