"""Progress and partial results of a comparison: every finished row on disk at once.

``rayfl compare``, ``rayfl train-policy``'s evaluation and the
``examples/reproduce_*.py`` scripts run many runs in a row. A :class:`RowLog`
shows a tqdm bar (runs done, ETA) and rewrites its CSV files, atomically, after
each finished run, so a failure or Ctrl-C loses nothing already computed. A
failure is re-raised as :class:`CompareFailed`, whose one-line message says how
many runs finished and where their rows are (the CLI prints it without a
traceback unless ``--debug``).

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "rows.csv"
    >>> log = RowLog([path], total=2, desc="demo", progress=False)
    >>> log.add({"policy": "a", "acc": 0.5})
    >>> path.read_text().splitlines()
    ['policy,acc', 'a,0.5']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["CompareFailed", "RowLog", "progress_bar", "script_main"]

T = TypeVar("T")


class CompareFailed(RuntimeError):
    """A comparison stopped by an error or an interruption; its rows are on disk.

    Attributes:
        done: Runs finished (those without a row, e.g. tuning runs, included).
        total: Runs planned.
        kept: Rows written (``done`` unless some runs write no row).
        paths: The CSV files holding the finished rows.
        status: ``"failed"`` or ``"interrupted"`` (Ctrl-C, SIGTERM).
    """

    def __init__(
        self,
        error: BaseException,
        done: int,
        total: int,
        paths: Sequence[Path],
        kept: int | None = None,
    ) -> None:
        self.done, self.total, self.paths = done, total, list(paths)
        self.kept = done if kept is None else kept
        interrupted = isinstance(error, KeyboardInterrupt) or (
            getattr(error, "status", None) == "interrupted"
        )
        self.status = "interrupted" if interrupted else "failed"
        what = "interrupted" if interrupted else f"failed: {_one_line(error)}"
        where = ", ".join(str(p) for p in self.paths) if self.paths else "nowhere"
        saved = (
            f"the {self.kept} finished row(s) are in {where}"
            if self.kept
            else "no row written"
        )
        super().__init__(f"{what} after {done} of {total} runs; {saved}")


def _one_line(error: BaseException) -> str:
    """``Type: first line of the message`` (Ray errors carry whole tracebacks)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def _csv_writer(table: Any) -> Callable[[Path], None]:
    """Return a writer of ``table`` as CSV (for :func:`rayfl.rundir.results.atomic_write`)."""

    def write(path: Path) -> None:
        table.to_csv(path, index=False)

    return write


class RowLog:
    """A progress bar and CSV files that hold every finished row at all times.

    Args:
        paths: CSV files rewritten (atomically) after each row; a column named
            ``run_dir`` is left out of files in ``without_run_dir``.
        total: Rows expected (the bar's total).
        desc: The bar's label.
        progress: Show the bar (``output.progress``).
        without_run_dir: Paths whose rows drop the ``run_dir`` column.
    """

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        total: int,
        desc: str,
        progress: bool = True,
        without_run_dir: Sequence[Path] = (),
    ) -> None:
        from tqdm.auto import tqdm

        self.paths = [Path(p) for p in paths]
        self.plain = {Path(p) for p in without_run_dir}
        self.rows: list[dict[str, Any]] = []
        #: Columns added to every row (e.g. ``{"seed": 1}``), set by the caller.
        self.context: dict[str, Any] = {}
        self.total = total
        #: Runs finished without a row (:meth:`tick`).
        self.ticks = 0
        self.bar = tqdm(total=total, desc=desc, unit="run", disable=not progress)

    def describe(self, text: str) -> None:
        """Show what runs now (e.g. ``seed 1, minmax``) beside the bar."""
        self.bar.set_postfix_str(text, refresh=True)

    def add(self, row: dict[str, Any]) -> None:
        """Record a finished run's row: rewrite the CSVs, advance the bar."""
        import pandas as pd

        from rayfl.rundir.results import atomic_write

        self.rows.append({**row, **self.context})
        table = pd.DataFrame(self.rows)
        for path in self.paths:
            out = (
                table.drop(columns=["run_dir"], errors="ignore")
                if (path in self.plain)
                else table
            )
            atomic_write(path, _csv_writer(out))
        self.bar.update()

    def tick(self) -> None:
        """Count a run that finished without a row (e.g. a tuning run).

        Past the planned total (a search that went on), the total grows.
        """
        self.ticks += 1
        if len(self.rows) + self.ticks > self.total:
            self.total = len(self.rows) + self.ticks
            self.bar.total = self.total
        self.bar.update()

    def close(self) -> None:
        """Close the bar."""
        self.bar.close()

    @contextmanager
    def guard(self) -> Iterator[RowLog]:
        """Re-raise any error inside as :class:`CompareFailed` (rows kept)."""
        try:
            yield self
        except CompareFailed:
            raise
        except (Exception, KeyboardInterrupt) as error:
            raise CompareFailed(
                error,
                len(self.rows) + self.ticks,
                self.total,
                self.paths,
                kept=len(self.rows),
            ) from error
        finally:
            self.close()


def progress_bar(
    items: Iterable[T] | None = None, *, total: int | None = None, desc: str = ""
) -> Any:
    """A tqdm bar counting runs (``items`` iterated, or ``total`` with ``update()``).

    The ``examples/reproduce_*.py`` scripts wrap their run loops in it.
    """
    from tqdm.auto import tqdm

    return tqdm(items, total=total, desc=desc, unit="run", dynamic_ncols=True)


def script_main(main: Callable[[list[str] | None], object]) -> int:
    """Run a script's ``main(argv)``; print an error in one line, return the exit code.

    ``--debug`` anywhere in ``sys.argv`` (or ``RAYFL_DEBUG=1``) prints the
    traceback too, as ``rayfl --debug`` does. Exit codes: 0 done, 1 failed,
    130 interrupted (Ctrl-C), 2 bad arguments (argparse's own).
    """
    import os
    import sys

    argv = sys.argv[1:]
    debug = "--debug" in argv or os.environ.get("RAYFL_DEBUG", "") not in ("", "0")
    name = Path(sys.argv[0]).name
    try:
        main([a for a in argv if a != "--debug"])
    except KeyboardInterrupt:
        print(
            f"{name}: interrupted; the finished runs are in its CSV files",
            file=sys.stderr,
        )
        return 130
    except Exception as error:
        if debug:
            import traceback

            traceback.print_exception(error, file=sys.stderr)
        print(
            f"{name}: failed: {_one_line(error)} (the finished runs are in its "
            "CSV files; --debug shows the traceback)",
            file=sys.stderr,
        )
        return 1
    return 0
