"""Compact per-actor client state: one column per state name, clients as rows.

A client actor hosts M virtual clients; algorithms keep per-client state (Ditto's
personal model, counters) through ``ctx.state``, a mapping. Stored as a dict of
dicts, M clients are M dicts and M separate arrays; here every vector-valued
entry ``name`` lives in row r of one ``(M, dim)`` float32 array allocated on
first use, every int or float entry in one ``(M,)`` int64 or float64 column, and
only other values (other shapes, dtypes, objects) live in a sparse per-client
dict. Algorithms see the same mapping interface either way (issue 37: a client
is a row in per-host columns, not a Python object).

Implementation details:
    1. A value is stored in the shared array when it is a 1-D float32 array of
       the array's width (the first such value fixes the width); a Python
       ``int`` (not ``bool``) goes to an int64 column and a Python ``float`` to
       a float64 column, read back as ``int`` / ``float``; anything else goes
       to the per-client dict.
    2. Reading a stored vector returns a read-only view of its row: the store is
       updated only through assignment (``state[name] = vector`` copies the row),
       so a view held by the caller is never written behind its back by the
       algorithm, and an algorithm writing in place gets an error, not silent
       aliasing. A later assignment to the same name changes what an old view
       shows; algorithms assign fresh vectors and read them back, as Ditto does.
    3. Checkpoints use the dict-of-dicts format ``{client: {name: value}}`` with
       copied vectors (:meth:`ClientStateStore.export`), so the format on disk
       does not depend on this layout and old checkpoints load. The per-round
       snapshot a driver keeps for fault recovery is columnar
       (:meth:`ClientStateStore.snapshot`: a copy of the columns, no Python
       object per client); :meth:`ClientStateStore.load` takes either.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["ClientState", "ClientStateStore", "StateSnapshot"]


class ClientState(MutableMapping[str, Any]):
    """The state mapping of one hosted client (a row of a :class:`ClientStateStore`)."""

    def __init__(self, store: ClientStateStore, row: int) -> None:
        self._store = store
        self._row = row

    def __getitem__(self, key: str) -> Any:
        store, row = self._store, self._row
        if key in store.arrays and store.present[key][row]:
            view = store.arrays[key][row]
            view.flags.writeable = False
            return view
        if key in store.scalars and store.present[key][row]:
            return store.scalars[key][row].item()
        return store.other.get(row, {})[key]

    def __setitem__(self, key: str, value: Any) -> None:
        store, row = self._store, self._row
        column = store.column_for(key, value)
        if column is not None:
            store.drop_other(row, key)
            column[row] = value
            store.present[key][row] = True
        else:
            self._drop_vector(key)
            store.other.setdefault(row, {})[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._drop_vector(key)
        self._store.drop_other(self._row, key)

    def _drop_vector(self, key: str) -> None:
        present = self._store.present.get(key)
        if present is not None:
            present[self._row] = False

    def __iter__(self) -> Iterator[str]:
        store, row = self._store, self._row
        yield from (k for k, p in store.present.items() if p[row])
        yield from store.other.get(row, {})

    def __len__(self) -> int:
        store, row = self._store, self._row
        present = sum(int(p[row]) for p in store.present.values())
        return present + len(store.other.get(row, {}))

    def __repr__(self) -> str:
        return f"ClientState({dict(self)!r})"


class ClientStateStore(Mapping[int, ClientState]):
    """Per-client state of the clients one actor hosts, held compactly.

    Args:
        clients: Ids of the hosted clients (row order).

    Example:
        >>> store = ClientStateStore([4, 9])
        >>> store[9]["personal"] = np.ones(3, np.float32)
        >>> store[9]["steps"] = 2
        >>> store.arrays["personal"].shape, store[4].get("personal") is None
        ((2, 3), True)
        >>> store.export()[9]["steps"]
        2
    """

    def __init__(self, clients: list[int]) -> None:
        self.clients = [int(c) for c in clients]
        self.client_ids = np.asarray(self.clients, dtype=np.int64)
        self.client_ids.flags.writeable = False
        self.rows = {c: i for i, c in enumerate(self.clients)}
        self.arrays: dict[str, npt.NDArray[np.float32]] = {}
        self.scalars: dict[str, npt.NDArray[Any]] = {}
        self.present: dict[str, npt.NDArray[np.bool_]] = {}
        #: row → its values that fit no column (sparse: most rows have none).
        self.other: dict[int, dict[str, Any]] = {}

    def column_for(self, key: str, value: Any) -> npt.NDArray[Any] | None:
        """Return the column that stores ``value`` under ``key`` (allocating it).

        None when the value goes to the per-client dict (Implementation details 1).
        """
        m = len(self.clients)
        if isinstance(value, np.ndarray):
            if value.dtype != np.float32 or value.ndim != 1 or key in self.scalars:
                return None
            if key not in self.arrays:
                self.arrays[key] = np.zeros((m, value.size), np.float32)
                self.present[key] = np.zeros(m, bool)
            array = self.arrays[key]
            return array if array.shape[1] == value.size else None
        kind = _SCALAR_KINDS.get(type(value))
        if kind is None or key in self.arrays:
            return None
        if key not in self.scalars:
            self.scalars[key] = np.zeros(m, kind)
            self.present[key] = np.zeros(m, bool)
        column = self.scalars[key]
        return column if column.dtype == kind else None

    def drop_other(self, row: int, key: str) -> None:
        """Remove ``key`` from row ``row``'s per-client dict (if there)."""
        values = self.other.get(row)
        if values is not None:
            values.pop(key, None)
            if not values:
                del self.other[row]

    def __getitem__(self, client: int) -> ClientState:
        return ClientState(self, self.rows[int(client)])

    def __iter__(self) -> Iterator[int]:
        return iter(self.clients)

    def __len__(self) -> int:
        return len(self.clients)

    def rows_with_state(self) -> list[int]:
        """Return the rows holding any value, ascending (O(M) numpy, O(rows) Python)."""
        has = np.zeros(len(self.clients), bool)
        for present in self.present.values():
            has |= present
        return sorted(set(np.flatnonzero(has).tolist()) | set(self.other))

    def export(self) -> dict[int, dict[str, Any]]:
        """Return ``{client: {name: value}}`` for clients with state (vectors copied)."""
        out = {}
        for row in self.rows_with_state():
            c = self.clients[row]
            out[c] = {
                k: np.array(v) if isinstance(v, np.ndarray) else v
                for k, v in self[c].items()
            }
        return out

    def snapshot(self) -> StateSnapshot:
        """Return a columnar copy of the whole store (cheap; no object per client)."""
        return StateSnapshot(
            clients=self.client_ids,  # read-only, shared
            arrays={k: v.copy() for k, v in self.arrays.items()},
            scalars={k: v.copy() for k, v in self.scalars.items()},
            present={k: v.copy() for k, v in self.present.items()},
            other={self.clients[r]: copy.deepcopy(v) for r, v in self.other.items()},
        )

    def load(self, state: StateSnapshot | Mapping[int, Mapping[str, Any]]) -> None:
        """Replace everything with a :meth:`snapshot` or an :meth:`export`.

        Ids not hosted here are ignored (another packing of the same clients).
        """
        self.arrays.clear()
        self.scalars.clear()
        self.present.clear()
        self.other = {}
        if isinstance(state, StateSnapshot):
            if np.array_equal(state.clients, self.client_ids):  # same host: columns
                self.arrays.update({k: v.copy() for k, v in state.arrays.items()})
                self.scalars.update({k: v.copy() for k, v in state.scalars.items()})
                self.present.update({k: v.copy() for k, v in state.present.items()})
                self.other = {
                    self.rows[c]: copy.deepcopy(v) for c, v in state.other.items()
                }
                return
            state = state.as_dict()
        for c, values in state.items():
            if int(c) in self.rows:
                target = self[int(c)]
                for k, v in values.items():
                    target[k] = v

    def nbytes(self) -> int:
        """Bytes held by the value columns (not counting presence masks and dicts)."""
        columns = [*self.arrays.values(), *self.scalars.values()]
        return sum(a.nbytes for a in columns)


_SCALAR_KINDS: dict[type, type] = {int: np.int64, float: np.float64}


@dataclass(frozen=True)
class StateSnapshot:
    """A columnar copy of a :class:`ClientStateStore` (fault-recovery snapshots).

    Attributes:
        clients: The hosted client ids (row order).
        arrays: Vector columns ``(M, width)``.
        scalars: Int64 / float64 columns ``(M,)``.
        present: Per name, which rows hold a value.
        other: client id → its values that fit no column.
    """

    clients: npt.NDArray[np.int64]
    arrays: dict[str, npt.NDArray[np.float32]]
    scalars: dict[str, npt.NDArray[Any]]
    present: dict[str, npt.NDArray[np.bool_]]
    other: dict[int, dict[str, Any]]

    def as_dict(self) -> dict[int, dict[str, Any]]:
        """Return the ``{client: {name: value}}`` form (for another packing)."""
        store = ClientStateStore(self.clients.tolist())
        store.load(self)
        return store.export()
