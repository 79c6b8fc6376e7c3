"""An actor told to exit while Python runs a weakref callback exits, quietly.

Ray's worker main loop installs a SIGTERM handler that raises ``SystemExit(1)``
(Ray's own graceful exit). The raylet sends SIGTERM to a worker's process
group as soon as the worker disconnects — which ``ray.kill`` makes it do while
its Python may still be running (Ray 2.60's raylet.out: "DisconnectClient:
sending SIGTERM to pgid=..." a few ms after "Received KillLocalActor"; this is
Ray's process-group cleanup, ``RAY_process_group_cleanup_enabled``) — and to a
job's workers when the job ends (the driver disconnects, a session stops).
rayfl kills its actors with ``ray.kill`` after every run, every benchmark
episode. Python runs the handler at the next bytecode of the main thread: when
that is inside a weakref callback or a ``__del__`` (the garbage collector runs
them at any allocation), Python cannot propagate the exception. It passes it to
:data:`sys.unraisablehook`, whose default prints "Exception ignored in ...
Traceback ... SystemExit: 1" to the worker's stderr, and carries on: Ray
forwards those lines to the driver's console (``log_to_driver``) — a traceback
under a command that succeeded, a second screen under a failed run's one-line
error (issue 45) — and the worker outlives its raylet
(``rayfl.cluster.session._stop_leftovers``).

:func:`quiet_exit`, called by each rayfl actor's constructor, installs an
unraisable hook in the actor's process that does what the swallowed
``SystemExit`` meant to do: it flushes stdout and stderr and ends the process
with the exit's code, printing nothing. Every other unraisable exception goes
to the hook that was there before (printed as ever), and a ``SystemExit``
raised where it can propagate still takes Ray's graceful path.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

__all__ = ["quiet_exit"]


def _exit_code(exc: BaseException | None) -> int:
    code = getattr(exc, "code", 1)
    return code if isinstance(code, int) else 1


def _hook(previous: Any) -> Any:
    def unraisable(info: Any) -> None:
        if info.exc_type is not None and issubclass(info.exc_type, SystemExit):
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(_exit_code(info.exc_value))
        previous(info)

    unraisable.rayfl_quiet_exit = True  # type: ignore[attr-defined]
    return unraisable


def quiet_exit() -> bool:
    """In a Ray actor's constructor: a swallowed ``SystemExit`` ends the process quietly.

    Does nothing outside a Ray worker process (a host built in the driver, as
    tests do), or when already installed.

    Returns:
        Whether the hook is installed in this process.
    """
    try:
        from ray._private.worker import WORKER_MODE, global_worker

        in_worker = getattr(global_worker, "mode", None) == WORKER_MODE
    except (ImportError, AttributeError):  # Ray's internals moved: leave Ray's default
        in_worker = False
    if not in_worker:
        return False
    if not getattr(sys.unraisablehook, "rayfl_quiet_exit", False):
        sys.unraisablehook = _hook(sys.unraisablehook)
    return True
