"""The terminal status of a run: ``completed``, ``failed`` or ``interrupted``.

Every round loop (:func:`rayfl.runner.run`, every topology) runs its rounds inside
:func:`terminal_status`, which guarantees that ``summary.json`` ends with one of

| status | when |
|--------|------|
| ``completed`` | every round ran (or the run stopped early by design, e.g. a T0 cap) |
| ``failed`` | an exception in a round: a bug, a diverged computation that raised, a client or server actor lost for good |
| ``interrupted`` | Ctrl-C (SIGINT) or SIGTERM |

A ``failed`` or ``interrupted`` summary has an ``error`` block: ``type``,
``message``, ``round`` (the round it happened in), ``traceback`` (the file of the
run directory holding the full traceback, ``error.txt``) and ``resume_from``
(the round a ``rayfl resume RUN_DIR`` continues from, or None without a
checkpoint). ``metrics.parquet`` and ``rounds.parquet`` hold every round
completed before it. When a failed run is resumed, the earlier attempt's
``error.txt`` is renamed ``error.1.txt`` (then ``error.2.txt``, …) before the
rounds start, so ``error.txt`` only ever belongs to the status in
``summary.json``. The run then raises :class:`RunFailed` (or
:class:`RunInterrupted`, a KeyboardInterrupt); the ``rayfl``
command prints it in a few lines and exits with code 1 (failed) or 130
(interrupted).
"""

from __future__ import annotations

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

__all__ = [
    "RunFailed",
    "RunInterrupted",
    "RunProgress",
    "json_safe",
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
        if self.run_dir is None:
            return str(error.get("message", status))
        e = self.error
        where = f" in round {e['round']}" if e.get("round") is not None else ""
        lines = [f"run {status}{where}: {e.get('type')}: {e.get('message')}"]
        if e.get("traceback"):
            lines.append(f"traceback: {self.run_dir / e['traceback']}")
        lines.append(f"run directory: {self.run_dir} (rounds done are kept)")
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


def _on_sigterm(signum: int, frame: Any) -> None:
    raise RunInterrupted()


def _describe(
    exc: BaseException, progress: RunProgress, traceback_file: str | None
) -> dict[str, Any]:
    if isinstance(exc, RunInterrupted):
        message = "the driver received SIGTERM"
        if exc.run_dir is not None:  # a nested run's end: keep its own message
            message = str(exc.error.get("message"))
    elif isinstance(exc, KeyboardInterrupt):
        message = "the driver received SIGINT (Ctrl-C)"
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


@contextmanager
def terminal_status(
    run_dir: Path, write_summary: Callable[[RunProgress], None]
) -> Iterator[RunProgress]:
    """Run a round loop so that it always ends with a terminal status.

    Inside the block SIGTERM raises :class:`RunInterrupted` (on the main
    thread; the previous handler is restored afterwards). When the block ends,
    ``progress.status`` is set and ``write_summary(progress)`` is called; if
    that fails too, a minimal ``summary.json`` with the status and error is
    written instead. An exception is then re-raised as :class:`RunFailed`, an
    interrupt as :class:`RunInterrupted` (a KeyboardInterrupt), chained to the
    original.

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
    progress = RunProgress()
    installed = threading.current_thread() is threading.main_thread()
    previous: Any = signal.signal(signal.SIGTERM, _on_sigterm) if installed else None
    failure: BaseException | None = None
    try:
        try:
            yield progress
            progress.status = "completed"
        except (KeyboardInterrupt, SystemExit) as e:
            progress.status = "interrupted"
            progress.error = _describe(e, progress, None)
            failure = e
        except Exception as e:
            progress.status = "failed"
            text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
            try:
                (Path(run_dir) / ERROR_FILE).write_text(text)
                tb_file: str | None = ERROR_FILE
            except OSError:
                tb_file = None
            progress.error = _describe(e, progress, tb_file)
            failure = e
        try:
            write_summary(progress)
        except Exception as e:  # the summary itself failed: keep the status at least
            if failure is None:
                progress.status = "failed"
                progress.error = _describe(e, progress, None)
                failure = e
            doc = {
                "status": progress.status,
                "error": progress.error,
                "summary_error": f"{type(e).__name__}: {e}",
            }
            text = json.dumps(json_safe(doc), indent=2, allow_nan=False)
            (Path(run_dir) / "summary.json").write_text(text)
    finally:
        if installed:
            signal.signal(
                signal.SIGTERM, previous if previous is not None else signal.SIG_DFL
            )
    if failure is not None:
        assert progress.error is not None
        if progress.status == "interrupted":
            raise RunInterrupted(run_dir, progress.status, progress.error) from failure
        raise RunFailed(run_dir, progress.status, progress.error) from failure
