"""The session directory of a Ray session rayfl started: removed when it closes.

Ray writes each local session's logs, sockets and spilled objects to a
session directory under its temp dir (``/tmp/ray/session_<date>_<pid>``, or
under ``RAY_TMPDIR``) and never removes it: a sweep of thousands of runs
filled ``/tmp`` (issue 45). :class:`rayfl.cluster.session.RaySession` removes the
directory of a session it started when it closes, once its processes are
stopped, unless ``ray.keep_logs`` is set or a run in it failed: then the
directory stays, and the failure names it (:func:`keep_for_failure`, called by
:mod:`rayfl.rundir.status`; the console line and ``error.txt`` say where). A
session closed while a failure propagates (a run's set-up
failed, the engine closes it before the run learns of it) keeps it too. A
session rayfl reuses or connects to is never touched.

Ray's ``session_latest`` symlink, when it points at the removed directory, is
removed too (never left dangling); when another session replaced it since, it
is left alone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import ray

__all__ = [
    "current_session_dir",
    "keep_for_failure",
    "kept_for_failure",
    "kept_while_failing",
    "remove_session_dir",
    "session_dir_of",
]

#: Session directories of sessions rayfl started, that a failed run asked to keep.
_KEPT: set[str] = set()
#: (exception, path): the directory a session closed while ``exception`` propagated
#: kept (:func:`kept_while_failing`), so that the failure can name it.
_CLOSED_FAILING: tuple[BaseException, str] | None = None


def session_dir_of(node: Any) -> str | None:
    """The session directory of Ray ``node`` (None if unknown: Ray's internals moved)."""
    try:
        path = node.get_session_dir_path()
    except Exception:
        return None
    return str(path) if path else None


def current_session_dir() -> str | None:
    """The session directory of the Ray session this process is connected to, or None.

    None when Ray is off or the driver has no local node (a ``ray://`` client).
    """
    if not ray.is_initialized():
        return None
    node = getattr(ray._private.worker, "_global_node", None)
    return session_dir_of(node) if node is not None else None


def keep_for_failure(error: BaseException | None = None) -> str | None:
    """A run failed: keep the current session's directory; its path (None if unknown).

    Only a session rayfl started is ever removed; this marks it kept. The path
    is returned for any session (a user's too), so the failure can say where
    the workers' logs are. With Ray already stopped (a set-up failure closes
    the session before the error reaches the run), the path is that of the
    session kept while ``error`` propagated, if any.
    """
    path = current_session_dir()
    if path is not None:
        _KEPT.add(path)
        return path
    if _CLOSED_FAILING is not None and _CLOSED_FAILING[0] in _chain(error):
        return _CLOSED_FAILING[1]
    return None


def _chain(error: BaseException | None, depth: int = 8) -> list[BaseException]:
    """``error`` and the exceptions it was raised from or during (a few)."""
    out: list[BaseException] = []
    while error is not None and len(out) < depth and error not in out:
        out.append(error)
        error = error.__cause__ or error.__context__
    return out


def kept_while_failing(error: BaseException, path: str) -> None:
    """A session closed while ``error`` propagated kept its directory ``path``."""
    global _CLOSED_FAILING
    _CLOSED_FAILING = (error, path)


def kept_for_failure(path: str) -> bool:
    """Whether a failed run asked to keep session directory ``path``."""
    return path in _KEPT


def remove_session_dir(path: str) -> bool:
    """Remove a stopped session's directory and a ``session_latest`` link to it.

    Returns:
        Whether the directory is gone.
    """
    directory = Path(path)
    if not directory.name.startswith("session_") or directory.is_symlink():
        return False  # never remove anything but a session directory
    shutil.rmtree(directory, ignore_errors=True)
    latest = directory.parent / "session_latest"
    with contextlib.suppress(OSError):
        if latest.is_symlink() and os.path.realpath(latest) == os.path.realpath(
            directory
        ):
            latest.unlink()
    _KEPT.discard(path)
    return not directory.exists()
