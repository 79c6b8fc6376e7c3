"""The terminal status of a run: ``completed``, ``failed`` or ``interrupted``.

Every round loop (:func:`rayfl.runner.run`, every topology) runs its rounds inside
:func:`terminal_status`, which guarantees that ``summary.json`` ends with one of

| status | when |
|--------|------|
| ``completed`` | every round ran (or the run stopped early by design, e.g. a T0 cap) |
| ``failed`` | an exception in a round: a bug, a diverged computation that raised, a client or server actor lost for good, a full disk; or in the set-up (:func:`setup_status`: Ray start-up, data loading, actor creation) |
| ``interrupted`` | Ctrl-C (SIGINT) or SIGTERM (``error.message`` names the signal) |

A ``failed`` or ``interrupted`` summary has an ``error`` block: ``type``,
``message``, ``round`` (the round it happened in; None in the set-up, where
``phase`` is ``setup``), ``traceback`` (the file of the run directory holding
the full traceback, ``error.txt``) and ``resume_from`` (the round a ``rayfl
resume RUN_DIR`` continues from, or None without a checkpoint). ``metrics.parquet``
and ``rounds.parquet`` hold every round completed before it. Every file is
written atomically: a full disk leaves the last complete version of each file
(and the last checkpoint), never a truncated one. When a failed run is resumed, the earlier attempt's
``error.txt`` is renamed ``error.1.txt`` (then ``error.2.txt``, …) before the
rounds start, so ``error.txt`` only ever belongs to the status in
``summary.json``. The run then raises :class:`RunFailed` (or
:class:`RunInterrupted`, a KeyboardInterrupt); the ``rayfl``
command prints it in a few lines and exits with code 1 (failed) or 130
(interrupted).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.cluster.resources import bad_input
from rayfl.rundir.atomic import atomic_write, disk_full

__all__ = [
    "RunFailed",
    "RunInterrupted",
    "RunProgress",
    "interrupt_signals",
    "json_safe",
    "setup_status",
    "signal_message",
    "terminal_status",
]

ERROR_FILE = "error.txt"
"""Name of the file of the run directory holding a failed run's traceback."""


def _retire_previous_error(run_dir: Path) -> None:
    """Rename an earlier attempt's ``error.txt`` to the first free ``error.N.txt``."""
    current = Path(run_dir) / ERROR_FILE
    if not current.exists():
        return
    n = 1
    while (Path(run_dir) / f"error.{n}.txt").exists():
        n += 1
    current.rename(Path(run_dir) / f"error.{n}.txt")


class _RunEnded:
    """What a failed or interrupted run tells its caller (mixin of the two errors).

    Attributes:
        run_dir: The run directory (``summary.json`` has the status and error);
            None for a bare SIGTERM not yet caught by :func:`terminal_status`.
        status: ``failed`` or ``interrupted``.
        error: The summary's ``error`` block (type, message, round, traceback file,
            resume_from).
    """

    run_dir: Path | None
    status: str
    error: dict[str, Any]

    def _setup(self, run_dir: Path | None, status: str, error: dict[str, Any]) -> str:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.status = status
        self.error = dict(error)
        e = self.error
        setup = e.get("phase") == "setup"
        where = " during set-up" if setup else ""
        if e.get("round") is not None:
            where = f" in round {e['round']}"
        if self.run_dir is None:
            if not setup:
                return str(error.get("message", status))
            return f"run {status}{where}: {e.get('message')}"
        lines = [f"run {status}{where}: {e.get('type')}: {e.get('message')}"]
        if e.get("traceback"):
            lines.append(f"traceback: {self.run_dir / e['traceback']}")
        if e.get("summary"):
            lines.append(str(e["summary"]))
        if e.get("ray_logs"):
            lines.append(f"Ray session logs: {e['ray_logs']}")
        kept = "" if setup else " (rounds done are kept)"
        lines.append(f"run directory: {self.run_dir}{kept}")
        if e.get("resume_from") is not None:
            lines.append(
                f"continue it with: rayfl resume {self.run_dir} "
                f"(from round {e['resume_from']})"
            )
        return "\n".join(lines)


class RunFailed(_RunEnded, RuntimeError):
    """A run ended ``failed``: an exception in a round (chained as ``__cause__``).

    Attributes:
        run_dir: The run directory (``summary.json`` has the status and error).
        status: ``failed``.
        error: The summary's ``error`` block.
    """

    def __init__(self, run_dir: Path, status: str, error: dict[str, Any]) -> None:
        super().__init__(self._setup(run_dir, status, error))


class RunInterrupted(_RunEnded, KeyboardInterrupt):
    """A run ended ``interrupted`` (Ctrl-C or SIGTERM); still a KeyboardInterrupt.

    Also what SIGTERM raises in the driver while a run is on (then without a
    run directory yet), so loops that stop on Ctrl-C stop on SIGTERM too.

    Attributes:
        run_dir: The run directory, or None when raised by the signal itself.
        status: ``interrupted``.
        error: The summary's ``error`` block.
    """

    def __init__(
        self,
        run_dir: Path | None = None,
        status: str = "interrupted",
        error: dict[str, Any] | None = None,
    ) -> None:
        error = error or {"type": "RunInterrupted", "message": "SIGTERM"}
        super().__init__(self._setup(run_dir, status, error))


@dataclass
class RunProgress:
    """What the round loop tells :func:`terminal_status` as it goes.

    Attributes:
        round: The round being run (None before the first).
        resume_from: The next round of the last checkpoint written (None: none).
        status: Set by :func:`terminal_status` when the loop ends.
        error: The ``error`` block of a failed or interrupted run.
    """

    round: int | None = None
    resume_from: int | None = None
    status: str = "running"
    error: dict[str, Any] | None = field(default=None)


def json_safe(value: Any) -> Any:
    """Return ``value`` as strict JSON data: NaN and ±inf become None.

    Numpy scalars and arrays become Python numbers and lists; tuples become
    lists; anything else unknown becomes its ``str``.

    Example:
        >>> json_safe({"a": float("nan"), "b": [1.0, float("inf")], "c": np.int64(3)})
        {'a': None, 'b': [1.0, None], 'c': 3}
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")

RESERVE_FILE = ".rayfl-reserve"
"""Ballast file of a running run: removed when the disk fills, to make room for
``summary.json`` and ``error.txt`` (see :func:`terminal_status`)."""
RESERVE_BYTES = 64 * 1024

#: Signals that end a run ``interrupted`` (besides SIGINT, Python's own).
INTERRUPT_SIGNALS = (signal.SIGTERM,)


def signal_message(signum: int) -> str:
    """Return the ``error.message`` of a run ended by signal ``signum``.

    Example:
        >>> signal_message(signal.SIGTERM), signal_message(signal.SIGINT)
        ('the driver received SIGTERM', 'the driver received SIGINT (Ctrl-C)')
    """
    name = signal.Signals(signum).name
    return f"the driver received {name}" + (
        " (Ctrl-C)" if signum == signal.SIGINT else ""
    )


@contextmanager
def interrupt_signals() -> Iterator[list[int]]:
    """Inside the block SIGTERM raises :class:`RunInterrupted` (main thread only).

    Yields the list of the signals received, newest last: Ray turns any
    KeyboardInterrupt raised while it waits (``ray.get``) into a bare
    KeyboardInterrupt, so the exception alone cannot say which signal came.
    The previous handlers are restored afterwards.
    """
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        raise RunInterrupted(
            error={"type": "RunInterrupted", "message": signal_message(signum)}
        )

    installed = threading.current_thread() is threading.main_thread()
    previous = {
        s: signal.signal(s, on_signal) for s in (INTERRUPT_SIGNALS if installed else ())
    }
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def _describe(
    exc: BaseException,
    progress: RunProgress,
    traceback_file: str | None,
    received: list[int] | None = None,
) -> dict[str, Any]:
    if isinstance(exc, RunInterrupted) and exc.run_dir is not None:
        message = str(exc.error.get("message"))  # a nested run's end: keep it
    elif isinstance(exc, (KeyboardInterrupt, SystemExit)) and received:
        message = signal_message(received[-1])
        exc = RunInterrupted()
    elif isinstance(exc, RunInterrupted):
        message = str(exc.error.get("message"))
    elif isinstance(exc, KeyboardInterrupt):
        message = signal_message(signal.SIGINT)
    else:
        cause = getattr(exc, "cause", None)  # ray.exceptions.RayTaskError: the
        if isinstance(cause, Exception):  # exception raised inside the actor
            exc = cause
        text = _ANSI.sub("", str(exc)).strip()
        message = text.splitlines()[0][:500] if text else ""
    return {
        "type": type(exc).__name__,
        "message": message,
        "round": progress.round,
        "traceback": traceback_file,
        "resume_from": progress.resume_from,
    }


def _failed(run_dir: Path, exc: BaseException, progress: RunProgress) -> dict[str, Any]:
    """The error block of a run failed with ``exc``; writes ``error.txt``.

    The Ray session's directory (the workers' logs) is kept
    (:func:`rayfl.cluster.files.keep_for_failure`) and named in both.
    """
    from rayfl.cluster.files import keep_for_failure

    ray_logs = keep_for_failure(exc)
    error = _describe(exc, progress, _write_error_file(run_dir, exc, ray_logs))
    return {**error, "ray_logs": ray_logs} if ray_logs else error


def _write_error_file(
    run_dir: Path, exc: BaseException, ray_logs: str | None = None
) -> str | None:
    """Write ``exc``'s traceback to ``error.txt`` (atomically); its name, or None.

    ``ray_logs``: the Ray session directory kept for this failure (a last line).
    """
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if ray_logs:
        text += f"\nRay session logs (the workers' stdout/stderr): {ray_logs}/logs\n"
    try:
        atomic_write(Path(run_dir) / ERROR_FILE, lambda p: p.write_text(text))
    except OSError:
        return None
    return ERROR_FILE


def _reserve_space(run_dir: Path) -> None:
    """Write the ballast file (best effort; none if the disk is full already)."""
    path = Path(run_dir) / RESERVE_FILE
    try:
        path.write_bytes(bytes(RESERVE_BYTES))
    except OSError:
        path.unlink(missing_ok=True)


def _release_space(run_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (Path(run_dir) / RESERVE_FILE).unlink(missing_ok=True)


def _write_status(
    run_dir: Path, progress: RunProgress, summary_error: BaseException | None
) -> bool:
    """Write the status and error block into ``summary.json``; False if impossible.

    The other fields of an existing ``summary.json`` (an earlier attempt's)
    are kept. Written atomically; never raises for a disk that stays full.
    """
    path = Path(run_dir) / "summary.json"
    doc: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        old = json.loads(path.read_text())
        doc = old if isinstance(old, dict) else {}
    doc.update(status=progress.status, error=progress.error)
    if summary_error is not None:
        doc["summary_error"] = f"{type(summary_error).__name__}: {summary_error}"
    text = json.dumps(json_safe(doc), indent=2, allow_nan=False)
    try:
        atomic_write(path, lambda p: p.write_text(text))
    except OSError:
        return False
    return True


def _end(
    run_dir: Path,
    progress: RunProgress,
    write_summary: Callable[[RunProgress], None],
    failure: BaseException | None,
) -> BaseException | None:
    """Write ``summary.json`` (the fallback if ``write_summary`` fails); the failure."""
    try:
        write_summary(progress)
        return failure
    except Exception as e:  # the summary itself failed: keep the status at least
        _release_space(run_dir)
        if failure is None:
            progress.status = "failed"
            progress.error = _describe(e, progress, _write_error_file(run_dir, e))
            failure = e
        elif progress.status == "failed" and not (progress.error or {}).get(
            "traceback"
        ):  # error.txt did not fit before the ballast was released
            assert progress.error is not None
            progress.error["traceback"] = _write_error_file(run_dir, failure)
        if not _write_status(run_dir, progress, e) and progress.error is not None:
            progress.error["summary"] = f"summary.json not written: {e}"
        return failure


@contextmanager
def terminal_status(
    run_dir: Path, write_summary: Callable[[RunProgress], None]
) -> Iterator[RunProgress]:
    """Run a round loop so that it always ends with a terminal status.

    Inside the block SIGTERM raises :class:`RunInterrupted` (on the main
    thread; the previous handler is restored afterwards). When the block ends,
    ``progress.status`` is set and ``write_summary(progress)`` is called; if
    that fails too (a full disk), a minimal ``summary.json`` with the status
    and error is written instead, in the room kept by a 64 KiB ballast file
    (``.rayfl-reserve``, removed then, and at the end). Every file is written
    atomically, so a full disk leaves no truncated file. An exception is then
    re-raised as :class:`RunFailed`, an interrupt as :class:`RunInterrupted`
    (a KeyboardInterrupt), chained to the original.

    Args:
        run_dir: The run directory (``error.txt`` is written there on failure).
        write_summary: Writes ``summary.json`` (and the Parquet logs) from the
            rows done so far; reads ``progress.status`` and ``progress.error``.

    Yields:
        The :class:`RunProgress` the loop updates (``round``, ``resume_from``).

    Raises:
        RunFailed: If the loop raised.
        RunInterrupted: If the loop was interrupted (SIGINT, SIGTERM).
    """
    _retire_previous_error(run_dir)
    _reserve_space(run_dir)
    progress = RunProgress()
    failure: BaseException | None = None
    try:
        with interrupt_signals() as received:
            try:
                yield progress
                progress.status = "completed"
            except (KeyboardInterrupt, SystemExit) as e:
                progress.status = "interrupted"
                progress.error = _describe(e, progress, None, received)
                failure = e
            except Exception as e:
                progress.status = "failed"
                if disk_full(e, Path(run_dir)) is not None:
                    _release_space(run_dir)
                progress.error = _failed(run_dir, e, progress)
                failure = e
            failure = _end(run_dir, progress, write_summary, failure)
    finally:
        _release_space(run_dir)
    if failure is not None:
        assert progress.error is not None
        if progress.status == "interrupted":
            raise RunInterrupted(run_dir, progress.status, progress.error) from failure
        raise RunFailed(run_dir, progress.status, progress.error) from failure


@contextmanager
def setup_status(
    open_run_dir: Callable[[], Path], *, resume_from: int | None = None
) -> Iterator[None]:
    """Make a failure while a run is set up end ``failed``, with its run directory.

    Actor creation, data loading and Ray start-up run inside this block. An
    exception there (other than refused input,
    :func:`~rayfl.cluster.resources.bad_input`, re-raised as is) gets the run
    directory (``open_run_dir()`` makes it for a new run), its traceback in
    ``error.txt`` and ``summary.json`` with status ``failed`` and an error
    block whose ``phase`` is ``setup``, then is raised as :class:`RunFailed`.
    Ctrl-C or SIGTERM raise :class:`RunInterrupted` (no run directory is made).

    Args:
        open_run_dir: Returns the run directory, making it if needed.
        resume_from: The checkpoint's next round, for a resumed run.

    Raises:
        RunFailed: If the set-up raised.
        RunInterrupted: If it was interrupted.
    """
    with interrupt_signals() as received:
        try:
            yield
        except (KeyboardInterrupt, SystemExit) as e:
            error = _describe(e, RunProgress(), None, received)
            raise RunInterrupted(
                None, "interrupted", {**error, "phase": "setup"}
            ) from e
        except Exception as e:
            if bad_input(e):
                raise
            run_dir = open_run_dir()
            _retire_previous_error(run_dir)
            progress = RunProgress(resume_from=resume_from, status="failed")
            progress.error = {**_failed(run_dir, e, progress), "phase": "setup"}
            if not _write_status(run_dir, progress, None):
                progress.error["summary"] = "summary.json not written (disk full?)"
            raise RunFailed(run_dir, "failed", progress.error) from e
