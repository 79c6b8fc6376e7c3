"""ActorPool: the client-hosting actors of one run, for every topology.

Each topology hosts its clients (star clients, hierarchy devices, D2D nodes) in
M-client actors started the same way::

    pool = ActorPool.start(ClientActor, data, setup, ray=cfg.ray, dim=dim,
                           role="clients")
    pool.groups        # [[0, 1], [2, 3], ...]: the clients of each actor
    pool.actor_of      # (N,) actor index of each client
    pool.actors        # Ray actor handles; pool.nodes: their node ids
    pool.by_actor(clients)            # {actor: [its clients among ``clients``]}
    pool.gather(refs, actor_ids)      # ray.get; a dead actor's result -> None
    pool.remember_state(a, state_ref) # the latest client-state snapshot of actor a
    pool.restore_failed()             # before the next call: restarted actors
                                      # get their clients' state back
    pool.evaluate_all(submit, keys)   # every client's evaluation, a failed host
                                      # retried once (rows marked eval_failed)
    pool.placement(); pool.close()

What ``start`` does, identically for every topology: packs the clients
(``ray.clients_per_actor``, ``auto`` = ⌈N / CPUs⌉), checks the run fits in
memory (``rayfl.cluster.resources.check_fits``), shares the data by a named holder
actor (restarted actors re-read it; a caller whose own actor holds it, as the
star's cloud does, passes ``shared`` and no holder is started), reserves all actors' CPUs at once, starts
the actors with names ``rayfl-<run_id>-<role>-<a>`` and
``max_restarts = ray.max_actor_restarts``, and pings each (fails fast; learns its
node). An actor class must take ``(shared_data, client_ids, *args)`` (the ids a
``range`` when contiguous, as packed; else a list) and have
``ping()``; ``set_state(state)`` is needed for :meth:`restore_failed`.

Actor failure is packet loss: :meth:`gather` turns a dead actor's results into
None and marks the actor; the caller records its clients' updates as lost, and
:meth:`restore_failed` hands the restarted actor the last state snapshot its
caller remembered (:meth:`remember_state`).

Evaluation never shrinks silently (:meth:`evaluate_all`): a host that fails
while evaluating is restored and asked once more; a client still without an
evaluation gets NaN scores and ``eval_failed = True``, which
``rayfl.engine.rows.round_row`` turns into a round marked ``partial_eval``.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.restart import LOST_CALL
from rayfl.actors.shared_data import SharedData, share_data
from rayfl.cluster.resources import (
    check_fits,
    estimate_memory,
    placed,
    release_cpus,
    reserve_cpus,
    run_cpus,
)
from rayfl.data.federated import FederatedData

__all__ = [
    "ActorPool",
    "RaySettings",
    "kill_actors",
    "pack_clients",
    "resolve_clients_per_actor",
]


def kill_actors(*handles: Any) -> None:
    """``ray.kill`` each actor handle (None: skipped) while Ray is up.

    After Ray has shut down (a close at interpreter exit, from the garbage
    collector) the actors are gone with their session, and ``ray.kill`` would
    start a new one.
    """
    if not ray.is_initialized():
        return
    for handle in handles:
        if handle is not None:
            ray.kill(handle)


class RaySettings(Protocol):
    """The fields of the ``ray`` config section the pool reads."""

    clients_per_actor: int | str
    max_actor_restarts: int
    reserve_timeout_s: float
    run_cpus: float | None


def pack_clients(num_clients: int, clients_per_actor: int) -> list[list[int]]:
    """Split client ids 0..N−1 into contiguous groups of at most M.

    Example:
        >>> pack_clients(5, 2)
        [[0, 1], [2, 3], [4]]
    """
    return [
        list(range(s, min(s + clients_per_actor, num_clients)))
        for s in range(0, num_clients, clients_per_actor)
    ]


def _as_range(group: list[int]) -> list[int] | range:
    """Return ``group`` as a ``range`` when contiguous (as ``pack_clients`` makes).

    A host's client ids are a constructor argument: as a list, 50,000 ids pickle
    to ~250 KB, which Ray keeps in the object store (a restart then depends on
    it, see ``shared_data``); a range pickles to a few bytes whatever its size.
    """
    if group and group == list(range(group[0], group[-1] + 1)):
        return range(group[0], group[-1] + 1)
    return group


def resolve_clients_per_actor(setting: int | str, num_clients: int, cpus: float) -> int:
    """Return M: ``setting``, or ⌈N / max(1, cpus)⌉ for ``"auto"`` (one actor a CPU)."""
    if setting == "auto":
        return max(1, math.ceil(num_clients / max(1.0, cpus)))
    return int(setting)


@dataclass
class ActorPool:
    """The client-hosting actors of one run (see the module docstring).

    Attributes:
        actors: Ray actor handles, one per group.
        groups: Client ids hosted by each actor.
        actor_of: Actor index of each client, int64 (N,).
        nodes: Node id of each actor.
        run_id: The run's short id (in actor names).
        data_holder: The named actor holding the dataset's object ref (None when
            the caller's own actor holds it, ``start(shared=...)``).
        reservation: The CPU reservation (placement group) or None.
        state_refs: Latest client-state snapshot ref per actor (never pulled).
        to_restore: Actors that died and must get their state back.
    """

    actors: list[Any]
    groups: list[list[int]]
    actor_of: npt.NDArray[np.int64]
    nodes: list[str] = field(default_factory=list)
    run_id: str = ""
    data_holder: Any = None
    reservation: Any = None
    state_refs: dict[int, Any] = field(default_factory=dict)
    to_restore: set[int] = field(default_factory=set)

    @classmethod
    def start(
        cls,
        actor_class: Any,
        data: FederatedData,
        *args: Any,
        ray_settings: RaySettings,
        dim: int,
        role: str = "clients",
        run_id: str | None = None,
        memory_hints: dict[str, int] | None = None,
        shared: SharedData | None = None,
        before_ping: Callable[[], None] | None = None,
    ) -> ActorPool:
        """Pack, check, reserve and start one actor per group; ping them all.

        Args:
            actor_class: A ``@ray.remote`` class taking ``(shared, group, *args)``.
            data: The federated dataset (shared by name with the actors).
            *args: Further constructor arguments (e.g. the ``ActorSetup``).
            ray_settings: The ``ray`` config section.
            dim: Model dimension (for the memory check).
            role: Name part of the actors (``clients``, ``devices``, ``nodes``).
            run_id: Short id in actor names (default: a fresh one).
            memory_hints: ``state_vectors_per_client`` and ``uploads`` (per round)
                for the memory check (``rayfl.cluster.resources.estimate_memory``).
            shared: Where the actors fetch ``data``: a named actor of the
                caller's that holds it for the whole run
                (:class:`rayfl.actors.shared_data.HoldsData`). Default: the pool
                starts a holder actor of its own.
            before_ping: Called once the actors are created, before the pool
                waits for them (e.g. to create that holder: the actors wait
                for it by name).

        Raises:
            rayfl.cluster.resources.ResourceError: If the run cannot fit in memory or
                the CPUs cannot be reserved in time.
        """
        n = data.num_clients
        cpus = run_cpus(ray_settings.run_cpus)
        per_actor = resolve_clients_per_actor(ray_settings.clients_per_actor, n, cpus)
        groups = pack_clients(n, per_actor)
        _check_memory(
            data,
            num_clients=n,
            clients_per_actor=per_actor,
            dim=dim,
            **(memory_hints or {}),
        )
        actor_of = np.empty(n, dtype=np.int64)
        for a, group in enumerate(groups):
            actor_of[group] = a
        pool = cls([], groups, actor_of, run_id=run_id or uuid.uuid4().hex[:8])
        try:
            pool._launch(
                actor_class, data, args, ray_settings, role, cpus, shared, before_ping
            )
        except BaseException:
            pool.close()
            raise
        return pool

    def _launch(
        self,
        actor_class: Any,
        data: FederatedData,
        args: tuple[Any, ...],
        settings: RaySettings,
        role: str,
        cpus: float,
        shared: SharedData | None,
        before_ping: Callable[[], None] | None = None,
    ) -> None:
        actor_cpus = min(1.0, cpus / len(self.groups))
        # The actors fetch the data by the holder's name (kept for the whole run), so
        # a restarted actor re-reads it without object-store constructor arguments.
        if shared is None:
            shared, self.data_holder = share_data(data, f"rayfl-{self.run_id}-data")
        # All actors' CPUs at once (no deadlock between runs sharing a cluster);
        # SPREAD places client actors across nodes first (multi-node clusters).
        self.reservation = reserve_cpus(
            len(self.groups), actor_cpus, timeout_s=settings.reserve_timeout_s
        )
        self.actors = [
            actor_class.options(
                name=f"rayfl-{self.run_id}-{role}-{a}",
                num_cpus=actor_cpus,
                max_restarts=settings.max_actor_restarts,
                scheduling_strategy=placed(self.reservation, a),
            ).remote(shared, _as_range(group), *args)
            for a, group in enumerate(self.groups)
        ]
        if before_ping is not None:
            before_ping()
        # Fail fast (and clearly) if an actor cannot start; learn where each landed.
        self.nodes = list(ray.get([a.ping.remote() for a in self.actors]))

    # ------------------------------------------------------------------ routing
    def by_actor(self, clients: npt.ArrayLike) -> dict[int, list[int]]:
        """Return ``{actor: its clients among clients}`` in actor order.

        Example:
            ``pool.by_actor([3, 0, 1])`` with groups ``[[0, 1], [2, 3]]`` is
            ``{0: [0, 1], 1: [3]}`` (clients keep their order within an actor).
        """
        ids = np.asarray(clients, dtype=np.int64).reshape(-1)
        owners = self.actor_of[ids]
        return {int(a): ids[owners == a].tolist() for a in np.unique(owners)}

    # ------------------------------------------------------------------ faults
    def gather(self, refs: list[Any], actor_ids: list[int]) -> list[Any]:
        """``ray.get`` the refs; a dead actor's result becomes None (and is noted).

        Args:
            refs: One object ref per call.
            actor_ids: The actor each ref was submitted to.
        """
        try:
            return list(ray.get(refs))
        except LOST_CALL:
            pass
        out = []
        for ref, a in zip(refs, actor_ids, strict=True):  # failure path only
            try:
                out.append(ray.get(ref))
            except LOST_CALL:  # dead, or restarted and not yet given its state back
                out.append(None)
                self.to_restore.add(a)
        return out

    def remember_state(self, actor: int, state_ref: Any) -> None:
        """Keep ``state_ref`` as actor ``actor``'s latest client-state snapshot."""
        self.state_refs[actor] = state_ref

    def restore_failed(self, *, tries: int = 5, wait_s: float = 1.0) -> None:
        """Give restarted actors back their clients' state (waits for the restart).

        An actor still restarting can answer ``ActorUnavailableError`` (seen
        under heavy load); ``set_state`` is idempotent, so it is sent again,
        ``tries`` times at most, ``wait_s`` apart.
        """
        for attempt in range(tries):
            if not self.to_restore:
                return
            pending = [
                self.actors[a]
                .set_state.options(max_task_retries=-1)
                .remote(self.state_refs.get(a, {}))
                for a in sorted(self.to_restore)
            ]
            try:
                ray.get(pending)
            except ray.exceptions.ActorUnavailableError:
                if attempt == tries - 1:
                    raise
                time.sleep(wait_s)
            else:
                self.to_restore.clear()

    def evaluate_all(
        self,
        submit: Callable[[Any, list[int] | None], Any],
        keys: Sequence[str],
        asked: dict[int, list[int]] | None = None,
    ) -> list[dict[str, Any]]:
        """Evaluate every (or every asked) client on its host; retry a failed host once.

        1. restore the hosts that failed before (:meth:`restore_failed`) and
           submit ``submit(actor, clients)`` to every host asked;
        2. a host whose call failed (dead, or restarted without its state) is
           restored and called once more; its rows then carry
           ``eval_retried = True``;
        3. a host failing again leaves its clients with NaN ``keys`` and
           ``eval_failed = True``; it stays marked for restoring, so the next
           call to the actors restores it.

        A host that cannot restart (dead for good) raises in step 2, as in a
        training round: the run fails and ``rayfl resume`` re-runs the round
        from the last checkpoint, evaluation included.

        Args:
            submit: ``submit(actor, clients) -> ref`` of a list of per-client
                records (each with ``client``); ``clients`` None: all its clients.
            keys: The score keys a missing client gets as NaN.
            asked: ``{actor: clients}`` to evaluate (:meth:`by_actor` of a
                sample), or None: every client of every host.

        Returns:
            One record per client asked, sorted by client id.
        """
        self.restore_failed()
        plan: dict[int, list[int] | None] = (
            dict.fromkeys(range(len(self.actors))) if asked is None else dict(asked)
        )
        ids = list(plan)
        got = self.gather([submit(self.actors[a], plan[a]) for a in ids], ids)
        batches = dict(zip(ids, got, strict=True))
        failed = [a for a in ids if batches[a] is None]
        if failed:
            self.restore_failed()  # a host that cannot restart fails the run here
            again = [submit(self.actors[a], plan[a]) for a in failed]
            for a, batch in zip(failed, self.gather(again, failed), strict=True):
                if batch is not None:
                    batches[a] = [{**row, "eval_retried": True} for row in batch]
        nan = float("nan")
        rows: list[dict[str, Any]] = []
        for a in ids:
            batch = batches[a]
            if batch is None:
                some = plan[a]
                clients = self.groups[a] if some is None else some
                batch = [
                    {"client": c, **dict.fromkeys(keys, nan), "eval_failed": True}
                    for c in clients
                ]
            rows += batch
        return sorted(rows, key=lambda r: r["client"])

    # ------------------------------------------------------------------ the rest
    def placement(self) -> list[dict[str, Any]]:
        """Return the node and first/last client of each actor."""
        return [
            {"node": node, "clients": [group[0], group[-1]]}
            for node, group in zip(self.nodes, self.groups, strict=True)
        ]

    def close(self) -> None:
        """Kill the actors and the data holder; release the CPU reservation."""
        kill_actors(*self.actors, self.data_holder)
        self.data_holder = None
        self.actors = []
        release_cpus(self.reservation)
        self.reservation = None


def _check_memory(
    data: FederatedData,
    *,
    num_clients: int,
    clients_per_actor: int,
    dim: int,
    **hints: int,
) -> None:
    """Refuse, before any actor starts, a run that cannot fit (rayfl.cluster.resources)."""
    resources = ray.cluster_resources()
    check_fits(
        estimate_memory(
            num_clients=num_clients,
            clients_per_actor=clients_per_actor,
            dim=dim,
            data_bytes=data.x.nbytes + data.y.nbytes,
            **hints,
        ),
        memory_bytes=resources.get("memory", float("inf")),
        object_store_bytes=resources.get("object_store_memory", float("inf")),
        num_clients=num_clients,
        clients_per_actor=clients_per_actor,
    )
