"""Compact per-actor client state: one float32 array per state vector name.

A client actor hosts M virtual clients; algorithms keep per-client state (Ditto's
personal model, counters) through ``ctx.state``, a mapping. Stored as a dict of
dicts, M personal models are M separate arrays (plus a dict each); here every
vector-valued entry ``name`` lives in row r of one ``(M, dim)`` float32 array
allocated on first use, and only other values (counters, small objects) live in a
per-client dict. Algorithms see the same mapping interface either way.

Implementation details:
    1. A value is stored in the shared array when it is a 1-D float32 array of
       the array's width (the first such value fixes the width); anything else
       (ints, floats, other shapes or dtypes) goes to the per-client dict.
    2. Reading a stored vector returns a read-only view of its row: the store is
       updated only through assignment (``state[name] = vector`` copies the row),
       so a view held by the caller is never written behind its back by the
       algorithm, and an algorithm writing in place gets an error, not silent
       aliasing. A later assignment to the same name changes what an old view
       shows; algorithms assign fresh vectors and read them back, as Ditto does.
    3. Snapshots and checkpoints use the dict-of-dicts format
       ``{client: {name: value}}`` with copied vectors (:meth:`ClientStateStore.export`),
       so the format on disk and the driver's fault-restore path do not depend
       on this layout and old checkpoints load.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["ClientState", "ClientStateStore"]


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
        return store.other[row][key]

    def __setitem__(self, key: str, value: Any) -> None:
        store, row = self._store, self._row
        if store.accepts(key, value):
            store.other[row].pop(key, None)
            store.arrays[key][row] = value
            store.present[key][row] = True
        else:
            self._drop_vector(key)
            store.other[row][key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self._drop_vector(key)
        self._store.other[self._row].pop(key, None)

    def _drop_vector(self, key: str) -> None:
        present = self._store.present.get(key)
        if present is not None:
            present[self._row] = False

    def __iter__(self) -> Iterator[str]:
        store, row = self._store, self._row
        yield from (k for k, p in store.present.items() if p[row])
        yield from store.other[row]

    def __len__(self) -> int:
        store, row = self._store, self._row
        return sum(int(p[row]) for p in store.present.values()) + len(store.other[row])

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
        self.rows = {c: i for i, c in enumerate(self.clients)}
        self.arrays: dict[str, npt.NDArray[np.float32]] = {}
        self.present: dict[str, npt.NDArray[np.bool_]] = {}
        self.other: list[dict[str, Any]] = [{} for _ in self.clients]

    def accepts(self, key: str, value: Any) -> bool:
        """Whether ``value`` goes to the shared array of ``key`` (allocating it)."""
        if not (
            isinstance(value, np.ndarray)
            and value.dtype == np.float32
            and value.ndim == 1
        ):
            return False
        if key not in self.arrays:
            self.arrays[key] = np.zeros((len(self.clients), value.size), np.float32)
            self.present[key] = np.zeros(len(self.clients), bool)
        return self.arrays[key].shape[1] == value.size

    def __getitem__(self, client: int) -> ClientState:
        return ClientState(self, self.rows[int(client)])

    def __iter__(self) -> Iterator[int]:
        return iter(self.clients)

    def __len__(self) -> int:
        return len(self.clients)

    def export(self) -> dict[int, dict[str, Any]]:
        """Return ``{client: {name: value}}`` for clients with state (vectors copied)."""
        out = {}
        for c in self.clients:
            state = self[c]
            if len(state):
                out[c] = {
                    k: np.array(v) if isinstance(v, np.ndarray) else v
                    for k, v in state.items()
                }
        return out

    def load(self, state: Mapping[int, Mapping[str, Any]]) -> None:
        """Replace everything with an :meth:`export` (ids not hosted are ignored)."""
        self.arrays.clear()
        self.present.clear()
        self.other = [{} for _ in self.clients]
        for c, values in state.items():
            if int(c) in self.rows:
                target = self[int(c)]
                for k, v in values.items():
                    target[k] = v

    def nbytes(self) -> int:
        """Bytes held by the shared arrays (the per-client dicts are small)."""
        return sum(a.nbytes for a in self.arrays.values())
