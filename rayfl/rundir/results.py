"""The run directory: resolved config, Parquet logs, summary — written atomically.

Layout of ``<output.dir>/<name>-<timestamp>/`` (DESIGN.md "Outputs of a run"):

| file | content |
|------|---------|
| ``config.yaml`` | the resolved config |
| ``metrics.parquet`` | one row per round × client |
| ``rounds.parquet`` | one row per round (global acc, max loss, Jain's index...) |
| ``summary.json`` | status (completed / failed / interrupted), final numbers, timings, per-client ε (strict JSON: NaN/inf as null) |
| ``error.txt`` | the traceback of a failed run (an earlier attempt's, after ``rayfl resume``, is kept as ``error.1.txt``, ``error.2.txt``, …) |
| ``plots/*.png`` | accuracy, loss and fairness curves |

Every file is written to a temporary name in the same directory and renamed
(:func:`rayfl.rundir.atomic.atomic_write`), so a reader never sees a half-written file;
a full disk raises :class:`rayfl.rundir.atomic.DiskFullError`, one line naming the file
and the space left.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from rayfl.rundir.atomic import atomic_write, disk_full
from rayfl.rundir.status import json_safe
from rayfl.rundir.stream import ClientSummary, RowStream, read_clients, read_metrics

__all__ = [
    "RunLog",
    "RunResult",
    "atomic_write",
    "load_run",
    "make_run_dir",
    "safe_name",
]


_UNSAFE = re.compile(r"[^A-Za-z0-9._+=,@-]+")


def safe_name(name: str) -> str:
    """Return ``name`` as one safe path component (a run directory's prefix).

    Every character outside letters, digits and ``._+=,@-`` (so every ``/``,
    backslash, space and control character) becomes ``_``; leading dots are
    dropped, so the result is never ``..``, hidden or absolute; at most 100
    characters are kept.

    Example:
        >>> safe_name("../../etc/x"), safe_name("/abs/name"), safe_name("a b:c")
        ('_.._etc_x', '_abs_name', 'a_b_c')
    """
    out = _UNSAFE.sub("_", str(name)).lstrip(".")[:100]
    return out or "run"


def make_run_dir(root: str | Path, name: str) -> Path:
    """Create and return a fresh ``root/name-YYYYmmdd-HHMMSS[-k]`` directory.

    ``name`` is made one safe path component (:func:`safe_name`), so the run
    directory is always directly inside ``root``.

    Raises:
        DiskFullError: If the disk is full.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{safe_name(name)}-{stamp}"
    path, k = base, 1
    while True:
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            k += 1
            path = base.with_name(f"{base.name}-{k}")
        except OSError as error:
            full = disk_full(error, path / "config.yaml")
            if full is None:
                raise
            raise full from error


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    table = pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
    atomic_write(path, lambda tmp: pq.write_table(table, tmp))


class RunLog:
    """Accumulates a run's rows and writes the run directory's files.

    Args:
        run_dir: The run directory (created by :func:`make_run_dir`).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.client_rows: list[dict[str, Any]] = []
        self.round_rows: list[dict[str, Any]] = []
        #: Finished rounds' client rows, on disk (rayfl.rundir.stream).
        self.stream = RowStream(self.run_dir)
        #: Per-client summary replacing the rows of a large population, or None.
        self.summary: ClientSummary | None = None

    def add_client_rows(self, t: int, rows: list[dict[str, Any]]) -> None:
        """Stream round ``t``'s ``metrics.parquet`` rows to disk (not kept here)."""
        self.stream.append(t, rows)

    def write_config(self, config: dict[str, Any]) -> None:
        """Write ``config.yaml`` (the resolved config)."""
        text = yaml.safe_dump(config, sort_keys=False)
        atomic_write(self.run_dir / "config.yaml", lambda p: p.write_text(text))

    def flush(self, summary: dict[str, Any]) -> None:
        """Write ``metrics.parquet``, ``rounds.parquet`` and ``summary.json``."""
        if self.stream.parts():  # merge the streamed rounds (+ rows kept here)
            self.stream.finish(self.run_dir / "metrics.parquet", self.client_rows)
        else:
            _write_parquet(self.run_dir / "metrics.parquet", self.client_rows)
        if self.summary is not None:
            self.summary.write(self.run_dir)
        _write_parquet(self.run_dir / "rounds.parquet", self.round_rows)
        # strict JSON: NaN/inf are written as null (json_safe)
        text = json.dumps(json_safe(summary), indent=2, allow_nan=False)
        atomic_write(self.run_dir / "summary.json", lambda p: p.write_text(text))


@dataclass
class RunResult:
    """A finished (or loaded) run.

    Attributes:
        run_dir: Its directory.
        metrics: Round × client rows.
        rounds: Per-round aggregates.
        summary: Final numbers.
        clients: One summary row per client (populations above
            ``output.client_rows_max``), else None.
    """

    run_dir: Path
    metrics: pd.DataFrame
    rounds: pd.DataFrame
    summary: dict[str, Any]
    clients: pd.DataFrame | None = None

    def table(
        self,
        columns: tuple[str, ...] = (
            "round",
            "global_acc",
            "eval_acc",
            "max_loss",
            "jain_train_loss",
            "num_delivered",
            "epsilon_max",
            "round_time_s",
        ),
    ) -> str:
        """Return the per-round table as text (evaluated rounds only)."""
        df = self.rounds.dropna(subset=["global_acc"])
        cols = [c for c in columns if c in df.columns]
        return df[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}")


def load_run(run_dir: str | Path) -> RunResult:
    """Load a run directory written by :class:`RunLog`.

    Raises:
        FileNotFoundError: If the directory has no ``summary.json``.
    """
    path = Path(run_dir)
    if not (path / "summary.json").is_file():
        raise FileNotFoundError(f"{path} is not a finished rayfl run (no summary.json)")
    summary = json.loads((path / "summary.json").read_text())
    if summary.get("status") == "finished":  # written before "completed"
        summary["status"] = "completed"
    rounds = path / "rounds.parquet"
    return RunResult(
        path,
        read_metrics(path),
        pd.read_parquet(rounds) if rounds.is_file() else pd.DataFrame(),
        summary,
        read_clients(path),
    )
