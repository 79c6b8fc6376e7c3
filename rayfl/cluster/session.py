"""Ray lifecycle: reuse, connect or start — and only stop what we started.

DESIGN.md: reuse an initialized session (notebooks), connect with
``ray.address: auto`` on a cluster, otherwise start a local one; never call
``ray.shutdown()`` on a session the user started.

A local session started here is watched by a small process
(:mod:`rayfl.cluster.watchdog`): if the driver dies without closing it (SIGKILL, out
of memory), the watchdog terminates that session's Ray processes, so none are
left behind. Sessions rayfl reuses or connects to are never watched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ray

from rayfl.cluster.address import check_reachable
from rayfl.cluster.config import RayConfig
from rayfl.cluster.files import (
    kept_for_failure,
    kept_while_failing,
    remove_session_dir,
    session_dir_of,
)

__all__ = ["RaySession"]

#: Local start-up attempts. Ray waits a hard-coded 30 s for its raylet; on a
#: loaded 2-core machine that wait can run out although nothing is wrong.
START_ATTEMPTS = 3
_STARTUP_TIMEOUT = "timed out during startup"


def _init_with_retries(
    init: Callable[..., Any], attempts: int = START_ATTEMPTS, **kwargs: Any
) -> None:
    """Call ``init(**kwargs)``; retry when Ray's start-up wait runs out.

    Only Ray's start-up timeout is retried (with a growing pause); any other
    error propagates. A failed attempt leaves the processes it started running
    (Ray raises before it records its node, so ``ray.shutdown()`` does not know
    them): they are stopped (:func:`_stop_new_processes`) before the next
    attempt, and before any error propagates.
    """
    for attempt in range(1, attempts + 1):
        before = _child_processes()
        try:
            init(**kwargs)
            return
        except Exception as error:  # Ray raises a bare Exception here
            ray.shutdown()
            _stop_new_processes(before)
            if _STARTUP_TIMEOUT not in str(error) or attempt == attempts:
                raise
            print(
                f"rayfl: Ray start-up timed out (machine busy?); retry {attempt}/"
                f"{attempts - 1}"
            )
            time.sleep(5.0 * attempt)


def _child_processes() -> set[tuple[int, int]]:
    """Return (pid, start time) of every process below this one (Linux; else empty)."""
    if not sys.platform.startswith("linux"):
        return set()
    from rayfl.cluster.watchdog import descendants

    me = os.getpid()
    return _with_start_times(descendants({me}) - {me})


def _with_start_times(pids: set[int]) -> set[tuple[int, int]]:
    """(pid, start time) of each of ``pids`` still alive: a pid never reused."""
    from rayfl.cluster.watchdog import start_time

    return {(pid, s) for pid in pids if (s := start_time(pid)) is not None}


def _stop_new_processes(before: set[tuple[int, int]]) -> list[int]:
    """Stop the processes below this one that are not in ``before``; their pids.

    These are what a failed ``ray.init`` started (GCS, raylet, agents, the
    dashboard, the log monitor...). Each gets SIGTERM, then SIGKILL after a
    grace period (Ray's agents may ignore SIGTERM), together with every process
    naming their session directory; each is identified by (pid, start time),
    so a recycled pid is never signalled. Direct children are reaped.
    """
    new = sorted(_child_processes() - before)
    if not new:
        return []
    from rayfl.cluster.watchdog import teardown

    sessions = {
        match.group(1)
        for pid, _ in new
        for match in [_SESSION_DIR.search(_command_line(pid))]
        if match is not None
    }
    stopped = set(teardown(new, ""))
    for session_dir in sessions:
        stopped |= teardown([], session_dir)
    for pid in stopped:  # a child of ours stays a zombie until waited for
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return sorted(stopped)


_SESSION_DIR = re.compile(r"(/\S*?/session_\d{4}-\d\d-\d\d_[\d_-]+)")


def _command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


class RaySession:
    """A handle on the Ray session a run uses.

    Args:
        config: The ``ray`` config section.

    Attributes:
        started_here: True when this object started Ray (and so stops it).
        watchdog: The watchdog process of a local session started here, or None.
    """

    def __init__(self, config: RayConfig) -> None:
        self.started_here = False
        self.watchdog: subprocess.Popen[bytes] | None = None
        #: The local node started by ``local_processes: lean`` (None otherwise).
        self.node: Any = None
        #: The session directory of a local session started here (removed on
        #: close unless kept: :mod:`rayfl.cluster.files`), else None.
        self.session_dir: str | None = None
        self.keep_logs = bool(getattr(config, "keep_logs", False))
        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "logging_level": "ERROR",
            "log_to_driver": True,
            "configure_logging": True,
        }
        address = config.address
        if address is None and os.environ.get("RAY_ADDRESS"):
            # ray.init() would follow RAY_ADDRESS anyway: say so instead of starting
            # a "local" session that is in fact a cluster.
            address = os.environ["RAY_ADDRESS"]
            print(
                f"rayfl: connecting to RAY_ADDRESS={address} (unset it for a local run)"
            )
        if address is not None and address != "local":
            check_reachable(address)  # else ray.init retries for minutes
            ray.init(address=address, **kwargs)
        else:
            os.environ.setdefault("RAY_DEDUP_LOGS", "1")
            # address="local" (given, or for None): a new local session, even
            # where `ray start` left a cluster on this machine (ray.init() would
            # try to join that one, and refuse num_cpus); RAY_ADDRESS is not read.
            store = (
                config.object_store_memory_mb * 2**20
                if config.object_store_memory_mb
                else None
            )
            lean = config.local_processes == "lean"
            # lean: rayfl starts the node itself; full: ray.init starts it
            init, where = (
                (self._start_lean, {}) if lean else (ray.init, {"address": "local"})
            )
            with _worker_environment(lean):
                _init_keeping_sigterm(
                    init,
                    num_cpus=config.num_cpus,
                    object_store_memory=store,
                    **where,
                    **kwargs,
                )
            self.watchdog = _start_watchdog(self.node)
            self.session_dir = session_dir_of(
                self.node or ray._private.worker._global_node
            )
        self.started_here = True

    def _start_lean(
        self,
        *,
        num_cpus: int | None,
        object_store_memory: int | None,
        include_dashboard: bool,
        **connect: Any,
    ) -> None:
        """Start a local Ray node without monitor and dashboard head; connect to it.

        ``ray.init(address="local")`` starts the same node plus two Python
        processes a local run does not use: the autoscaler's monitor (nothing to
        scale on one machine) and the dashboard's head process, which, with the
        dashboard off, serves only Ray's usage statistics, the job-submission
        and the state API (``ray list ...``). ``ray.init`` waits for that head
        to come up (about 1.5-2.5 s on 2 cores) before it starts the raylet.
        Ray's own ``Node`` class starts the node (as ``ray.init`` does inside),
        then ``ray.init`` connects to it; :meth:`close` stops it.
        """
        parts = _lean_parts()
        if parts is None:  # Ray's internals moved: start what ray.init starts
            ray.init(
                address="local",
                num_cpus=num_cpus,
                object_store_memory=object_store_memory,
                include_dashboard=include_dashboard,
                **connect,
            )
            return
        node_class, params_class = parts
        params = params_class(
            num_cpus=num_cpus,
            object_store_memory=object_store_memory,
            include_dashboard=include_dashboard,
            no_monitor=True,
        )
        self.node = node_class(
            params,
            head=True,
            shutdown_at_exit=False,
            spawn_reaper=True,
            ray_init_cluster=True,
        )
        try:
            ray.init(address=self.node.address, **connect)
        except BaseException:
            self._stop_node()
            raise

    def _stop_node(self) -> None:
        node, self.node = self.node, None
        if node is not None:
            node.kill_all_processes(check_alive=False, allow_graceful=True, wait=True)

    def close(self) -> None:
        """Shut Ray down if (and only if) this object started it.

        A close at interpreter exit (the garbage collector closing an env left
        open) cannot import anything: it stops there, quietly, and the
        watchdog stops what the session left.
        """
        try:
            self._close()
        except ImportError:
            if sys.meta_path is not None:
                raise

    def _close(self) -> None:
        if self.watchdog is not None:  # a clean exit: the watchdog's job is done
            self.watchdog.terminate()
            self.watchdog.wait()
            self.watchdog = None
        tree = self._process_tree() if self.started_here else []
        if self.started_here and ray.is_initialized():
            ray.shutdown()
        if self.started_here:
            self._stop_node()
            _stop_leftovers(tree)
            self._remove_session_dir()
        self.started_here = False

    def _remove_session_dir(self) -> None:
        """Remove the stopped session's directory unless kept (``keep_logs``, a failure)."""
        path, self.session_dir = self.session_dir, None
        if path is None or self.keep_logs or kept_for_failure(path):
            return
        error = _failing()  # closed as a failure propagates: the run will say where
        if error is not None:
            kept_while_failing(error, path)
            return
        remove_session_dir(path)

    def _process_tree(self) -> list[tuple[int, int]]:
        """(pid, start time) of the local node's processes and all below them.

        Below the raylet are the workers: :func:`_stop_leftovers` stops any of
        them that outlive the session.
        """
        node = self.node or getattr(ray._private.worker, "_global_node", None)
        if node is None or not sys.platform.startswith("linux"):
            return []
        from rayfl.cluster.watchdog import descendants

        roots = {p.process.pid for ps in node.all_processes.values() for p in ps}
        return sorted(_with_start_times(descendants(roots)))


def _failing() -> BaseException | None:
    """The exception propagating through the caller that means a failed run, or None.

    An interrupt (Ctrl-C, SIGTERM) is not a failure, nor is input rayfl refuses
    (:func:`rayfl.cluster.resources.bad_input`: a config error, resources the run
    cannot have).
    """
    from rayfl.cluster.resources import bad_input

    error = sys.exc_info()[1]
    if error is None or not isinstance(error, Exception) or bad_input(error):
        return None
    return error


def _stop_leftovers(tree: list[tuple[int, int]], wait_s: float = 2.0) -> list[int]:
    """Stop what is left of a stopped session's ``tree`` after ``wait_s``; their pids.

    A worker that gets the raylet's SIGTERM while Python runs a weakref
    callback swallows the ``SystemExit`` (Python prints "Exception ignored in
    ... SystemExit: 1") and lives on, its raylet gone, holding its memory
    (seen: a data holder alive 84 min after its benchmark ended). Such
    processes get SIGTERM again, then SIGKILL (:func:`rayfl.cluster.watchdog.teardown`).
    """
    from rayfl.cluster.watchdog import start_time, teardown

    def alive() -> list[tuple[int, int]]:
        return [(p, s) for p, s in tree if start_time(p) == s]

    deadline = time.monotonic() + wait_s
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive()
    return sorted(teardown(left, "")) if left else []


#: What the lean start uses of Ray's internal ``Node`` and ``RayParams``.
_NODE_ARGS = (
    "ray_params",
    "head",
    "shutdown_at_exit",
    "spawn_reaper",
    "ray_init_cluster",
)
_PARAMS_ARGS = ("num_cpus", "object_store_memory", "include_dashboard", "no_monitor")


def _lean_parts() -> tuple[type, type] | None:
    """(node class, ``RayParams``) of the lean start, or None if Ray's internals moved.

    The node class is Ray's ``Node`` less the dashboard's head process (unless
    the dashboard is asked for). None, with a warning, when this Ray lacks what
    the lean start calls (``ray._private`` is not a public API): the session
    then starts as ``ray.init(address="local")`` does.
    """
    import inspect
    import warnings

    try:
        from ray._private.node import Node
        from ray._private.parameter import RayParams

        node_args = inspect.signature(Node.__init__).parameters
        params_args = inspect.signature(RayParams.__init__).parameters
        missing = [a for a in _NODE_ARGS if a not in node_args]
        missing += [a for a in _PARAMS_ARGS if a not in params_args]
        if not callable(getattr(Node, "start_api_server", None)):
            missing.append("Node.start_api_server")
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        missing = [f"{type(exc).__name__}: {exc}"]
    if missing:
        warnings.warn(
            f"ray.local_processes=lean: this Ray ({ray.__version__}) lacks "
            f"{', '.join(missing)}; starting the full local session instead",
            RuntimeWarning,
            stacklevel=3,
        )
        return None

    class LeanNode(Node):
        def start_api_server(self, *args: Any, **kwargs: Any) -> Any:
            include = kwargs.get("include_dashboard", args[0] if args else None)
            if include:
                return super().start_api_server(*args, **kwargs)
            return None

    return LeanNode, RayParams


#: Workers import torch: keep each to one thread (DESIGN.md).
WORKER_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
#: ``local_processes: lean`` also runs the workers at the driver's priority
#: (Ray's default is nice +15: a worker starting an actor then waits behind
#: every other process, Ray's own agents included).
LEAN_ENV = {"RAY_worker_niceness": "0"}


@contextlib.contextmanager
def _worker_environment(lean: bool = False) -> Iterator[None]:
    """Set :data:`WORKER_ENV` (and :data:`LEAN_ENV` if ``lean``) while a local Ray starts.

    The raylet started by ``ray.init`` inherits it, and so does every worker it
    starts, its pre-started idle workers included. A job ``runtime_env`` with
    the same variables would make those idle workers unusable (an actor then
    waits for a new worker process started for that runtime env). The
    driver's own values are put back afterwards.
    """
    env = {**WORKER_ENV, **(LEAN_ENV if lean else {})}
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _init_keeping_sigterm(init: Callable[..., Any], **kwargs: Any) -> None:
    """:func:`_init_with_retries`, keeping the caller's SIGTERM handler.

    ``ray.init`` replaces the driver's SIGTERM handler by one calling
    ``sys.exit``; a handler the caller installed (a run's, which ends it
    ``interrupted`` and names the signal) is put back. Without one (the
    default action), Ray's stays.
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        _init_with_retries(init, **kwargs)
    finally:
        if callable(previous):
            signal.signal(signal.SIGTERM, previous)


def _start_watchdog(node: Any = None) -> subprocess.Popen[bytes] | None:
    """Start the watchdog of the local session just started (None off Linux).

    It runs in its own session (process group), so a signal sent to the
    driver's group does not take it down with the driver.

    Args:
        node: The Ray ``Node`` that started the session's processes (default:
            the one ``ray.init`` started).
    """
    if not sys.platform.startswith("linux"):
        return None
    from rayfl.cluster.watchdog import start_time

    try:
        if node is None:
            node = ray._private.worker._global_node  # the local node just started
        pids = [p.process.pid for ps in node.all_processes.values() for p in ps]
        session_dir = node.get_session_dir_path()
    except Exception:  # Ray internals moved: run without the watchdog
        return None
    processes = [(pid, start) for pid in pids if (start := start_time(pid)) is not None]
    spec = {
        "driver": [os.getpid(), start_time(os.getpid())],
        "processes": processes,
        "session_dir": session_dir,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "rayfl.cluster.watchdog", json.dumps(spec)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
