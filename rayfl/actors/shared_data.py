"""The run's dataset, shared with restartable client actors by name.

Ray re-runs an actor's constructor with its original arguments when the actor
restarts (``ray.max_actor_restarts``), so a constructor argument that lives in the
object store — the dataset's object ref, or any object ref or actor handle inside
an argument — must still exist then, and Ray reports that risk on every actor
started with ``max_restarts > 0``. Client actors therefore take a
:class:`SharedData`, which holds only the *name* of a :class:`DataHolder` actor; the
holder keeps the dataset's object ref for the whole run. The constructor fetches
the dataset through it (zero-copy from the object store), on the first start and
after every restart alike.

The holder can be an actor the run starts anyway (the star's cloud holds it,
:class:`HoldsData`): a separate holder is one more worker process to start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray

from rayfl.actors.quiet_exit import quiet_exit

if TYPE_CHECKING:  # the holder's process imports nothing of the dataset's
    from rayfl.data.federated import FederatedData

__all__ = ["DataHolder", "HoldsData", "SharedData", "hold_data", "share_data"]


class HoldsData:
    """Mixin of an actor that keeps the dataset's object ref for the run.

    :meth:`SharedData.get` asks the named actor for it (:meth:`data_ref`); the
    ref sits in a list, so the actor never fetches the dataset itself.
    """

    _held: list[Any]

    def hold(self, refs: list[Any]) -> None:
        """Keep ``refs`` (the dataset's object ref first) alive."""
        self._held = list(refs)

    def data_ref(self) -> Any:
        """Return the dataset's object ref."""
        return self._held[0]


class _Holder(HoldsData):
    """An actor that only holds the refs (the body of :data:`DataHolder`)."""

    def __init__(self, refs: list[Any]) -> None:
        quiet_exit()
        self.hold(refs)


DataHolder = ray.remote(num_cpus=0)(_Holder)
"""Actor holding the dataset's object ref for the run (no CPU)."""


@dataclass(frozen=True)
class SharedData:
    """A plain-value handle to a dataset kept by a named :data:`DataHolder` actor.

    Attributes:
        holder: Name of the holder actor (in the run's Ray namespace).
    """

    holder: str

    def get(self, wait_s: float = 120.0) -> FederatedData:
        """Fetch the dataset (call inside an actor; waits for the holder).

        Args:
            wait_s: How long to wait for the holder's name to be registered
                (it may be created just after the actor calling this).
        """
        deadline = time.monotonic() + wait_s
        while True:
            try:
                holder = ray.get_actor(self.holder)
                break
            except ValueError:  # not registered (yet)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        data: FederatedData = ray.get(ray.get(holder.data_ref.remote()))  # type: ignore[assignment]  # Ray stubs: untyped ref
        return data


def hold_data(data: FederatedData) -> list[Any]:
    """Put ``data`` in the object store; return what a holder keeps (``[ref]``).

    Pass the list to a :class:`HoldsData` actor's constructor or ``hold``: a ref
    inside a list is handed over as is, never fetched.
    """
    return [ray.put(data)]


def share_data(data: FederatedData, name: str) -> tuple[SharedData, Any]:
    """Put ``data`` in the object store behind a named holder actor.

    Args:
        data: The federated dataset.
        name: A name unique in the Ray namespace, e.g. ``rayfl-<run id>-data``.

    Returns:
        The :class:`SharedData` to pass to actor constructors, and the holder's
        handle: keep it for the whole run (``ray.kill`` it when closing).
    """
    holder = DataHolder.options(name=name).remote(hold_data(data))
    return SharedData(name), holder
