"""Shared fixtures: one Ray session (2 CPUs at most) shared by the modules using it.

Ray in the tests
----------------
A test that needs Ray requests the ``ray_session`` fixture. Its first use starts
a local session (:data:`RAY_INIT_ARGS`); the session is then *kept* for the next
module that requests it, instead of being stopped and started again for each
module (a start-up costs 5-10 s on 2 cores).

Which tests see Ray running is the same as with one session per module: a test
sees Ray running if and only if it, or an earlier test of its module, requested
``ray_session``. Two automatic steps keep that true in any module order:

* at the start of each module (:func:`_ray_off_unless_module_starts_with_it`),
  Ray is shut down unless the module's first test requests ``ray_session``. So a
  test that starts its own Ray (``rayfl.run`` without the fixture, ``RaySession``,
  ``ray.init`` with other arguments, a ``ray start`` cluster) or asserts that Ray
  is off finds it off, as before;
* at the end of a module using ``ray_session`` (:func:`_keep_only_a_clean_session`),
  the session is kept only if it is still the shared one and holds nothing of the
  module's: no live actor, no placement group, all CPUs free. Otherwise it is shut
  down, and the next module starts a fresh one.

To run a module with Ray off although an earlier module left the shared session
running, do nothing: its first test does not request ``ray_session``. To have a
module's tests share the session, request ``ray_session`` in its first test (or
``pytestmark = pytest.mark.usefixtures("ray_session")``).

Modules are run in file order, except that the modules using ``ray_session`` run
last, together (:func:`pytest_collection_modifyitems`), so one session serves all
of them.

In parallel (``make test`` runs ``pytest -n 2 --dist loadfile``, pytest-xdist)
each worker process runs whole modules, in that same order, and has its own
shared session: the rules above hold within each worker. Every session here is
started with ``address="local"`` (a new local Ray, never one another worker or a
``ray start`` left running), on ports Ray picks free.
"""

from __future__ import annotations

import gc
import os
import pathlib
import time
from typing import Any

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "1")

#: The ``ray.init`` arguments of the shared session (tests/golden/record.py's
#: ``start_ray`` uses the same ones).
RAY_INIT_ARGS: dict[str, Any] = {
    "address": "local",  # never join a cluster another process left running
    "num_cpus": 2,
    "include_dashboard": False,
    "logging_level": "ERROR",
}
# The workers' one thread each (OMP_NUM_THREADS=1) comes from the environment
# the raylet inherits (rayfl.cluster.session._worker_environment), as in rayfl's own
# sessions: a job runtime_env would make Ray's pre-started workers unusable.

#: The job id of the shared session while it runs (None: not started, or stopped).
_SHARED: dict[str, str | None] = {"job": None}
#: Starts of the shared session, and why a module's session was not kept.
_STARTS: list[str] = []
_NOT_KEPT: list[str] = []


def _job_id() -> str | None:
    """Return the job id of the running Ray session, or None when Ray is off."""
    import ray

    if not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_job_id()


def _shared_session_running() -> bool:
    """Return True when Ray runs and is the session :func:`_start_shared` started."""
    job = _job_id()
    return job is not None and job == _SHARED["job"]


def _shutdown() -> None:
    """Shut Ray down (whoever started it) and forget the shared session."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    _SHARED["job"] = None


def _start_shared(module: str) -> None:
    """Start the shared session unless a Ray session is already running.

    A session a test of the module started itself is used as it is (as before),
    and stopped at the end of the module.
    """
    import ray

    from rayfl.cluster.session import _init_with_retries, _worker_environment

    if ray.is_initialized():
        return
    # Retried like rayfl's own start-up: a busy machine can time out Ray's wait.
    with _worker_environment():
        _init_with_retries(ray.init, **RAY_INIT_ARGS)
    _SHARED["job"] = _job_id()
    _STARTS.append(module)


#: Every actor state but DEAD (ray.util.state's ActorState).
_LIVE_ACTOR_STATES = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING")


def _leftovers(wait: float = 3.0) -> list[str]:
    """Return what a module left in the shared session (empty: nothing).

    Actors whose handles are gone die asynchronously: this waits up to ``wait``
    seconds for them to go.
    """
    import ray
    from ray._private.state import actors
    from ray.util import placement_group_table

    gc.collect()
    deadline = time.monotonic() + wait
    while True:
        # Asked state by state: the whole actor table also holds the dead actors
        # of every earlier module, which grows over a long shared session.
        found = [
            f"actor {info.get('Name') or info.get('ActorClassName')} {info['State']}"
            for state in _LIVE_ACTOR_STATES
            for info in actors(actor_state_name=state).values()
        ]
        found += [
            f"placement group {pg_id}"
            for pg_id, pg in placement_group_table().items()
            if pg.get("state") != "REMOVED"
        ]
        free = ray.available_resources().get("CPU", 0.0)
        total = ray.cluster_resources().get("CPU", 0.0)
        if free < total:
            found.append(f"{total - free:g} CPU in use")
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _keep_only_a_clean_session(module: str) -> None:
    """End of a module using Ray: keep the shared session only if it is clean."""
    if not _shared_session_running():
        reason = ["not the shared session"] if _job_id() else []
    else:
        reason = _leftovers()
    if reason:
        _NOT_KEPT.append(f"{module}: {', '.join(reason[:3])}")
    if reason or not _shared_session_running():
        _shutdown()


@pytest.fixture(scope="module")
def ray_session(request):
    """A local 2-CPU Ray session for this module, shared with later modules."""
    _start_shared(request.node.nodeid)
    yield
    _keep_only_a_clean_session(request.node.nodeid)


#: Each module's first test in run order, by module node id.
_FIRST_TEST: dict[str, pytest.Item] = {}


def _module_id(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _starts_with_ray(items: list[pytest.Item]) -> bool:
    return "ray_session" in getattr(items[0], "fixturenames", ())


def _by_module(items: list[pytest.Item]) -> list[list[pytest.Item]]:
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(_module_id(item), []).append(item)
    return list(modules.values())


def _ray_group(items: list[pytest.Item]) -> int:
    """0: no test requests ``ray_session``; 1: a later test does; 2: the first."""
    if _starts_with_ray(items):
        return 2
    return int(any("ray_session" in getattr(i, "fixturenames", ()) for i in items))


def pytest_configure(config):
    """Keep the module order below under pytest-xdist's ``--dist loadfile``.

    By default xdist sends the files largest first (``--loadscope-reorder``),
    which mixed modules not using Ray among those using it: each worker then
    stopped and restarted its shared session about ten times.
    """
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)  # after -m/-k deselection
def pytest_collection_modifyitems(session, config, items):
    """Run the modules using ``ray_session`` last, together.

    The modules not using Ray run first, then those starting Ray at a later
    test, then those starting with it (so one session serves the last two
    groups); each group in file order. Within a module the order is unchanged.
    """
    modules = sorted(_by_module(items), key=_ray_group)  # stable: file order kept
    items[:] = [item for module in modules for item in module]


def pytest_collection_finish(session):
    """Record each module's first test of the final run order."""
    _FIRST_TEST.clear()
    _FIRST_TEST.update({_module_id(m[0]): m[0] for m in _by_module(session.items)})


@pytest.fixture(scope="module", autouse=True)
def _ray_off_unless_module_starts_with_it(request):
    """Shut Ray down before a module whose first test does not request it.

    Also when the running session is not the shared one (a test started it
    with its own arguments and left it running).
    """
    import ray

    if ray.is_initialized():
        first = _FIRST_TEST.get(request.node.nodeid)
        wanted = first is not None and "ray_session" in first.fixturenames
        if not (wanted and _shared_session_running()):
            _shutdown()
    yield


@pytest.fixture(scope="session", autouse=True)
def _ray_off_at_the_end():
    """Shut the shared session down after the last test."""
    yield
    _shutdown()


#: Under pytest-xdist, the controller's copy of each worker's ``_STARTS`` and
#: ``_NOT_KEPT`` (sent back in ``workeroutput`` when the worker finishes).
_WORKERS: dict[str, tuple[list[str], list[str]]] = {}


def pytest_testnodedown(node, error):
    """(xdist controller) Keep what a finished worker says of its Ray session."""
    output = getattr(node, "workeroutput", {})
    if "ray_starts" in output:
        worker = getattr(getattr(node, "gateway", None), "id", "worker")
        _WORKERS[worker] = (output["ray_starts"], output["ray_not_kept"])


def pytest_terminal_summary(terminalreporter):
    """Say how often the shared Ray session started, and why it was not kept."""
    reports = dict(_WORKERS)
    if _STARTS:
        reports[""] = (_STARTS, _NOT_KEPT)
    for worker, (starts, not_kept) in sorted(reports.items()):
        where = f" ({worker})" if worker else ""
        terminalreporter.write_line(
            f"shared Ray session{where}: {len(starts)} start(s), "
            f"{len(not_kept)} module(s) ended with a session not kept"
        )
        for line in not_kept:
            terminalreporter.write_line(f"  not kept after {line}")


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    """Remember the run's exit status for ``pytest_unconfigure``.

    An xdist worker also sends its Ray session's record to the controller.
    """
    _EXIT_STATUS.append(int(exitstatus))
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["ray_starts"] = list(_STARTS)
        output["ray_not_kept"] = list(_NOT_KEPT)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Leave without the interpreter's teardown, keeping pytest's exit status.

    Once in ten fresh-clone CI runs (session 5) the process segfaulted at exit
    after every test had passed and the summary was printed (native teardown of
    Ray/torch), turning a green run red. Every result is reported by now.
    """
    import sys

    if not _EXIT_STATUS:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])


@pytest.fixture
def ray_tmp():
    """A short private Ray temp dir for a subprocess that starts its own Ray.

    Short: Ray's socket paths must stay under 108 bytes. With
    :func:`tests.subprocesses.isolated_env` its session directories are the
    test's alone.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rft") as path:
        yield pathlib.Path(path)
