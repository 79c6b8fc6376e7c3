"""Device availability read from a trace file, in the FedScale style.

Groundwork of issue 48 (``clients.availability: trace``), not yet read by the
engine. FedScale (Lai et al. 2022) replays when real phones were reachable
from per-device lists of active and inactive times; here a trace is a CSV
with one row per interval in which a client is reachable:

```
client,start,end
0,0,7
0,12,31
1,3,50
```

| symbol | code | meaning |
|---|---|---|
| i | ``client`` | the client id, an integer in [0, N) |
| [a, b) | ``start``, ``end`` | rounds a ≤ t < b in which client i is reachable (integers, 0 ≤ a < b) |
| N | ``num_clients`` | the run's number of clients |
| P | ``period_rounds`` | if set, round t reads the trace at t mod P (a daily trace replayed) |

A client may have several intervals; overlapping ones merge. Other columns
are ignored. :func:`read_trace` raises ``ValueError`` naming the file and line
for a missing column, a value that is not a non-negative integer, end ≤ start,
a client id outside [0, N), or (with P) an interval ending after P.

The sample trace ``examples/availability_trace.csv`` (20 clients × 50 rounds)
was written by ``python -m rayfl.wireless.availability_trace
examples/availability_trace.csv``: the on/off chain of
:class:`rayfl.wireless.dynamics.OnOffAvailability` with seed 0, mean on 8
rounds and mean off 4 rounds (:func:`sample_trace`).

Implementation details:
    1. Times are in rounds, not seconds, since the engine's clock is the round;
       a trace in seconds converts by dividing by the round's duration.
    2. A client absent from the trace is never reachable by default (no
       interval recorded, no time online); ``absent="always"`` makes such
       clients always reachable instead, for a trace that lists only the
       devices that come and go. :attr:`AvailabilityTrace.missing` lists them.
    3. Without P, every client is unreachable after its last interval.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from rayfl.wireless.dynamics import OnOffAvailability

__all__ = [
    "TRACE_COLUMNS",
    "AvailabilityTrace",
    "main",
    "read_trace",
    "sample_trace",
    "trace_from_series",
]

#: The columns a trace must have, in the order they are written.
TRACE_COLUMNS = ("client", "start", "end")

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class AvailabilityTrace:
    """The reachable intervals [start, end) of each client, in rounds.

    Args:
        num_clients: N; client ids are in [0, N).
        client: (M,) the client of each interval.
        start: (M,) its first round.
        end: (M,) the round after its last.
        absent: ``"never"`` or ``"always"``: whether a client with no interval
            is reachable (Implementation details 2).
        period_rounds: P, or None for a trace that is not replayed.

    Example:
        >>> trace = AvailabilityTrace(3, np.array([0, 2]), np.array([0, 1]),
        ...                           np.array([2, 3]))
        >>> trace.available(1).tolist(), trace.missing.tolist()
        ([True, False, True], [1])
    """

    num_clients: int
    client: IntArray
    start: IntArray
    end: IntArray
    absent: Literal["never", "always"] = "never"
    period_rounds: int | None = None

    def __post_init__(self) -> None:
        problem = _interval_problem(self)
        if problem is not None:
            raise ValueError(problem[1])

    @property
    def missing(self) -> IntArray:
        """The client ids in [0, N) with no interval, sorted."""
        return np.setdiff1d(np.arange(self.num_clients), self.client)

    def available(
        self, t: int, clients: Sequence[int] | None = None
    ) -> npt.NDArray[np.bool_]:
        """Return which clients are reachable in round t.

        Args:
            t: The round, ≥ 0.
            clients: The ids asked (any subset, in any order); all N if None.

        Returns:
            (len(clients),) or (N,) bool.
        """
        if t < 0:
            raise ValueError(f"round must be >= 0, got {t}")
        at = t % self.period_rounds if self.period_rounds else t
        out = np.zeros(self.num_clients, dtype=bool)
        if self.absent == "always":
            out[self.missing] = True
        out[self.client[(self.start <= at) & (at < self.end)]] = True
        return out if clients is None else out[np.asarray(clients, dtype=np.int64)]

    def write_csv(self, path: str | Path) -> None:
        """Write the trace as ``client,start,end`` rows sorted by client and start."""
        order = np.lexsort((self.start, self.client))
        rows = np.stack([self.client, self.start, self.end], axis=1)[order]
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(TRACE_COLUMNS)
            writer.writerows(rows.tolist())


def _interval_problem(trace: AvailabilityTrace | _Unchecked) -> tuple[int, str] | None:
    """The first bad interval's row (−1: no row) and message, or None if valid."""
    if trace.num_clients < 1:
        return -1, f"num_clients must be >= 1, got {trace.num_clients}"
    if trace.absent not in ("never", "always"):
        return -1, f"absent must be 'never' or 'always', got {trace.absent!r}"
    if trace.period_rounds is not None and trace.period_rounds < 1:
        return -1, f"period_rounds must be >= 1, got {trace.period_rounds}"
    if not len(trace.client) == len(trace.start) == len(trace.end):
        return -1, "client, start and end must have the same length"
    checks = [
        (trace.start < 0, "start must be >= 0"),
        (trace.end <= trace.start, "end must be > start"),
        (
            (trace.client < 0) | (trace.client >= trace.num_clients),
            f"client must be in [0, {trace.num_clients}) (num_clients)",
        ),
    ]
    if trace.period_rounds is not None:
        too_late = trace.end > trace.period_rounds
        checks.append((too_late, f"end must be <= period_rounds {trace.period_rounds}"))
    for bad, message in checks:
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            values = (
                f"client={trace.client[k]}, start={trace.start[k]}, end={trace.end[k]}"
            )
            return k, f"{message}, got {values}"
    return None


def _integer(text: str | None, column: str, where: str) -> int:
    value = (text or "").strip()
    if not (value.isascii() and value.isdigit()):
        raise ValueError(
            f"{where}: {column} must be a non-negative integer (rounds), got {text!r}"
        )
    return int(value)


def read_trace(
    path: str | Path,
    *,
    num_clients: int,
    absent: Literal["never", "always"] = "never",
    period_rounds: int | None = None,
) -> AvailabilityTrace:
    """Read a ``client,start,end`` CSV trace (module docstring).

    Raises:
        ValueError: If the file is malformed; the message names the file, the
            line and the rule broken.
    """
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        columns = [c.strip() for c in reader.fieldnames or []]
        lacking = [c for c in TRACE_COLUMNS if c not in columns]
        if lacking:
            raise ValueError(
                f"{path}: the trace needs columns {', '.join(TRACE_COLUMNS)}; "
                f"missing {', '.join(lacking)} (header: {', '.join(columns) or 'none'})"
            )
        reader.fieldnames = columns
        rows: list[list[int]] = []
        lines: list[int] = []
        for record in reader:
            at = f"{path}:{reader.line_num}"
            rows.append([_integer(record[c], c, at) for c in TRACE_COLUMNS])
            lines.append(reader.line_num)
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    client, start, end = (table[:, k].copy() for k in range(3))
    unchecked = _Unchecked(int(num_clients), client, start, end, absent, period_rounds)
    problem = _interval_problem(unchecked)
    if problem is not None:
        index, message = problem
        where = f"{path}:{lines[index]}" if index >= 0 else f"{path}"
        raise ValueError(f"{where}: {message}")
    return AvailabilityTrace(
        int(num_clients), client, start, end, absent, period_rounds
    )


@dataclass(frozen=True)
class _Unchecked:
    """The fields of an :class:`AvailabilityTrace`, to locate its first problem."""

    num_clients: int
    client: IntArray
    start: IntArray
    end: IntArray
    absent: str
    period_rounds: int | None


def trace_from_series(on: npt.ArrayLike) -> AvailabilityTrace:
    """Turn a (T, N) bool series of reachability into its intervals.

    Example:
        >>> trace = trace_from_series([[True, False], [True, True], [False, True]])
        >>> trace.client.tolist(), trace.start.tolist(), trace.end.tolist()
        ([0, 1], [0, 1], [2, 3])
    """
    series = np.asarray(on, dtype=bool)
    if series.ndim != 2:
        raise ValueError(f"on must be (rounds, clients), got shape {series.shape}")
    padded = np.zeros((series.shape[0] + 2, series.shape[1]), dtype=np.int8)
    padded[1:-1] = series
    change = np.diff(padded, axis=0)  # +1 at a start, −1 at an end (round index)
    client, start = np.nonzero(change.T == 1)  # sorted by client, then round
    end = np.nonzero(change.T == -1)[1]
    return AvailabilityTrace(
        series.shape[1],
        client.astype(np.int64),
        start.astype(np.int64),
        end.astype(np.int64),
    )


def sample_trace(
    seed: int = 0,
    num_clients: int = 20,
    num_rounds: int = 50,
    *,
    mean_on: float = 8.0,
    mean_off: float = 4.0,
) -> AvailabilityTrace:
    """Return the trace of an on/off chain over ``num_rounds`` rounds.

    The chain is :class:`rayfl.wireless.dynamics.OnOffAvailability` of
    clients 0..N−1 with this seed and means.
    """
    chain = OnOffAvailability(
        seed, range(num_clients), mean_on=mean_on, mean_off=mean_off
    )
    return trace_from_series([chain.available(t) for t in range(num_rounds)])


def main(argv: Sequence[str] | None = None) -> None:
    """Write :func:`sample_trace` to a CSV file (the shipped sample's command)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("path", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-clients", type=int, default=20)
    parser.add_argument("--num-rounds", type=int, default=50)
    parser.add_argument("--mean-on", type=float, default=8.0)
    parser.add_argument("--mean-off", type=float, default=4.0)
    args = parser.parse_args(argv)
    trace = sample_trace(
        args.seed,
        args.num_clients,
        args.num_rounds,
        mean_on=args.mean_on,
        mean_off=args.mean_off,
    )
    trace.write_csv(args.path)


if __name__ == "__main__":
    main()
