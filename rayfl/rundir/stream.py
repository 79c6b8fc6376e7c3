"""Streaming run results: round × client rows on disk as rounds finish (issue 37).

The driver never holds every client-round:

- :class:`RowStream` writes each finished round's ``metrics.parquet`` rows to
  ``metrics.parts/round-<t>.parquet`` (temporary name, then rename), so a run
  killed mid-way leaves its finished rounds readable (:func:`read_metrics`);
  at the end :meth:`RowStream.finish` merges the parts into
  ``metrics.parquet``, one row group per round, reading one part at a time.
- :class:`ClientSummary` replaces the per-round rows of a population above
  ``output.client_rows_max`` clients: one row per client in ``clients.parquet``
  (rounds scheduled and delivered, bits sent, last train loss, last evaluation),
  updated in O(K) per round from the round's records.

Implementation details:

1. Parts are keyed by round; a resumed run drops the parts of rounds at or
   after its checkpoint's ``next_round`` (:meth:`RowStream.truncate`), which
   it runs again. A run that failed merged its parts when it wrote its
   summary: its resume splits ``metrics.parquet`` back into the parts of the
   rounds before the checkpoint (:meth:`RowStream.reopen`).
2. Columns may be all-null in one round and typed in another (``rejected``):
   the merged file's schema is the parts' schemas unified with type promotion.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rayfl.rundir.atomic import atomic_write

__all__ = ["PARTS_DIR", "ClientSummary", "RowStream", "read_clients", "read_metrics"]

#: The directory of a run's per-round parts (gone once the run has finished).
PARTS_DIR = "metrics.parts"
CLIENTS_FILE = "clients.parquet"


def _table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pandas(pd.DataFrame(list(rows)), preserve_index=False)


class RowStream:
    """The round × client rows of a run, one Parquet part per finished round.

    Args:
        run_dir: The run directory.
    """

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir) / PARTS_DIR

    def append(self, t: int, rows: Sequence[dict[str, Any]]) -> None:
        """Write round ``t``'s rows as its part (nothing for no rows)."""
        if rows:
            table = _table(rows)
            atomic_write(
                self.dir / f"round-{int(t):09d}.parquet",
                lambda tmp: pq.write_table(table, tmp),
            )

    def parts(self) -> list[Path]:
        """Return the parts written so far, by round."""
        return sorted(self.dir.glob("round-*.parquet")) if self.dir.is_dir() else []

    def truncate(self, next_round: int) -> None:
        """Drop the parts of rounds ≥ ``next_round`` (a resumed run redoes them)."""
        for part in self.parts():
            if int(part.stem.split("-")[1]) >= next_round:
                part.unlink()

    def reopen(self, path: Path, next_round: int) -> None:
        """Split a merged ``path`` back into parts, the rounds before ``next_round``.

        A run that stopped with an error (or a signal) merged its parts into
        ``metrics.parquet`` when it wrote its summary; its resume needs the
        rounds before its checkpoint as parts again, or the final merge would
        hold the resumed rounds only. Nothing to do when parts exist (a killed
        run) or no merged file does.
        """
        path = Path(path)
        if self.parts() or not path.is_file():
            return
        table = pq.read_table(path)
        if table.num_rows == 0 or "round" not in table.column_names:
            return
        rounds = np.asarray(table["round"].to_numpy(zero_copy_only=False))
        for t in np.unique(rounds[rounds < next_round]):
            self._write_part(int(t), table.filter(pa.array(rounds == t)))

    def _write_part(self, t: int, part: pa.Table) -> None:
        atomic_write(
            self.dir / f"round-{t:09d}.parquet", lambda tmp: pq.write_table(part, tmp)
        )

    def finish(self, path: Path, rows: Sequence[dict[str, Any]] = ()) -> None:
        """Merge the parts (then ``rows``) into ``path``, a row group each.

        Memory: one part at a time. The parts directory is removed afterwards.
        """
        parts = self.parts()
        extra = [_table(rows)] if rows else []
        schemas = [pq.read_schema(p) for p in parts] + [t.schema for t in extra]
        schema = pa.unify_schemas(
            [s.remove_metadata() for s in schemas], promote_options="permissive"
        )

        def conform(table: pa.Table) -> pa.Table:
            columns = [
                table[f.name].cast(f.type)
                if f.name in table.column_names
                else pa.nulls(len(table), f.type)
                for f in schema
            ]
            return pa.Table.from_arrays(columns, schema=schema)

        def write(tmp: Path) -> None:
            with pq.ParquetWriter(tmp, schema) as writer:
                for part in parts:
                    writer.write_table(conform(pq.read_table(part)))
                for table in extra:
                    writer.write_table(conform(table))

        atomic_write(Path(path), write)
        shutil.rmtree(self.dir, ignore_errors=True)


def read_metrics(run_dir: str | Path) -> pd.DataFrame:
    """Return a run's round × client rows (its finished rounds' if it was killed).

    ``metrics.parquet``, or the parts of a run that stopped before merging them.
    """
    path = Path(run_dir)
    if (path / "metrics.parquet").is_file():
        return pd.read_parquet(path / "metrics.parquet")
    parts = RowStream(path).parts()
    if not parts:
        return pd.DataFrame()
    return pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)


def read_clients(run_dir: str | Path) -> pd.DataFrame | None:
    """Return a run's per-client summary (``clients.parquet``), or None."""
    path = Path(run_dir) / CLIENTS_FILE
    return pd.read_parquet(path) if path.is_file() else None


_COUNTS = ("rounds_scheduled", "rounds_delivered")
_LAST = ("train_loss", "test_loss", "test_acc")


class ClientSummary:
    """One row per client of a large population, updated in O(K) per round.

    Columns: ``client``, ``rounds_scheduled``, ``rounds_delivered``, ``bits``,
    ``last_round`` (last scheduled), ``train_loss`` (its last), ``test_loss``/
    ``test_acc`` (its last evaluation, NaN if never evaluated),
    ``last_evaluated``.

    Args:
        num_clients: N.
    """

    def __init__(self, num_clients: int) -> None:
        n = int(num_clients)
        self.columns: dict[str, np.ndarray] = {
            "rounds_scheduled": np.zeros(n, np.int32),
            "rounds_delivered": np.zeros(n, np.int32),
            "bits": np.zeros(n, np.float64),
            "last_round": np.full(n, -1, np.int32),
            "last_evaluated": np.full(n, -1, np.int32),
            **{k: np.full(n, np.nan, np.float32) for k in _LAST},
        }

    def update(
        self,
        t: int,
        records: Sequence[dict[str, Any]],
        evals: Sequence[dict[str, Any]] | None,
    ) -> None:
        """Add round ``t``'s records (scheduled clients) and evaluations."""
        c = self.columns
        if records:
            ids = np.array([int(r["client"]) for r in records], np.int64)
            c["rounds_scheduled"][ids] += 1
            c["rounds_delivered"][ids] += np.array(
                [bool(r.get("delivered", False)) for r in records], np.int32
            )
            c["bits"][ids] += np.array([float(r.get("bits", 0.0)) for r in records])
            c["last_round"][ids] = t
            c["train_loss"][ids] = [float(r.get("train_loss", np.nan)) for r in records]
        if evals:
            ids = np.array([int(e["client"]) for e in evals], np.int64)
            for key in ("test_loss", "test_acc"):
                c[key][ids] = [float(e.get(key, np.nan)) for e in evals]
            c["last_evaluated"][ids] = t

    def state_dict(self) -> dict[str, np.ndarray]:
        """Return the columns (checkpoints)."""
        return {k: v.copy() for k, v in self.columns.items()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state_dict`."""
        self.columns = {k: np.asarray(v).copy() for k, v in state.items()}

    def write(self, run_dir: Path) -> None:
        """Write ``clients.parquet`` (atomically)."""
        n = len(self.columns["bits"])
        frame = pd.DataFrame({"client": np.arange(n), **self.columns})
        table = pa.Table.from_pandas(frame, preserve_index=False)
        atomic_write(
            Path(run_dir) / CLIENTS_FILE, lambda tmp: pq.write_table(table, tmp)
        )
