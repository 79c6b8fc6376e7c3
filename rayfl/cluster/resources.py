"""Resource guard: estimate a run's memory before starting it, refuse what cannot fit.

The estimate (per node kind of memory, bytes):

| part | estimate |
|------|----------|
| client actor process | 400 MiB (Python + torch, measured: DESIGN.md) + 4 model-sized float32 buffers (parameters, gradients, scratch) |
| client state | ``state_vectors_per_client`` × dim × 4 per hosted client |
| object store | the federated dataset once + the global model + one upload per scheduled client |

CPUs are reserved for all of a run's client actors at once (:func:`reserve_cpus`,
a placement group), so runs sharing a cluster wait for each other, with a
message and a timeout, instead of each holding part of what it needs.

Implementation details:
    1. Only gross misfits are refused: the estimate must exceed the cluster's
       memory (``ray.cluster_resources()["memory"]``) or object store; the error
       suggests a ``ray.clients_per_actor`` that fits when packing can help.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACTOR_BASE_BYTES",
    "MemoryEstimate",
    "ResourceError",
    "bad_input",
    "check_fits",
    "estimate_memory",
    "placed",
    "release_cpus",
    "reserve_cpus",
]

ACTOR_BASE_BYTES = 400 * 2**20

#: This process's live reservations: placement group id → (group, CPUs).
_HELD: dict[Any, tuple[Any, float]] = {}


class ResourceError(RuntimeError):
    """The requested run cannot fit the cluster; the message says what to change."""


def bad_input(error: BaseException) -> bool:
    """Whether ``error`` is the user's input refused, not a failure of the run.

    A config, dataset or name error of rayfl (its ``ValueError`` subclasses), a
    missing file, or resources the run cannot have (``ResourceError``): these
    print one line and write no run directory.
    """
    if isinstance(error, (ResourceError, FileNotFoundError)):
        return True
    return isinstance(error, ValueError) and type(error).__module__.startswith("rayfl")


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated memory of a run, in bytes.

    Attributes:
        actors: Heap memory of all client actors.
        object_store: Object store use (data, models, uploads).
        per_actor: Heap of one client actor.
    """

    actors: int
    object_store: int
    per_actor: int


def estimate_memory(
    *,
    num_clients: int,
    clients_per_actor: int,
    dim: int,
    data_bytes: int,
    state_vectors_per_client: int = 1,
    uploads: int | None = None,
) -> MemoryEstimate:
    """Return the memory estimate of a run (see the module table).

    Example:
        >>> e = estimate_memory(num_clients=4, clients_per_actor=2, dim=1000,
        ...                     data_bytes=10**6)
        >>> # ``uploads``: uploads of one round in the store (default: all N)
        >>> e.per_actor - ACTOR_BASE_BYTES  # 4 buffers + 2 states of 1000 floats
        24000
    """
    num_actors = math.ceil(num_clients / clients_per_actor)
    model = 4 * dim
    per_actor = (
        ACTOR_BASE_BYTES
        + 4 * model
        + clients_per_actor * state_vectors_per_client * model
    )
    store = data_bytes + model + (num_clients if uploads is None else uploads) * model
    return MemoryEstimate(num_actors * per_actor, store, per_actor)


def check_fits(
    estimate: MemoryEstimate,
    *,
    memory_bytes: float,
    object_store_bytes: float,
    num_clients: int,
    clients_per_actor: int,
) -> None:
    """Raise :class:`ResourceError` when the estimate exceeds the cluster.

    Args:
        estimate: From :func:`estimate_memory`.
        memory_bytes: Memory the cluster offers to actors.
        object_store_bytes: Its object store capacity.
        num_clients: N.
        clients_per_actor: The packing M asked for.
    """
    gib = 2**30
    if estimate.object_store > object_store_bytes:
        raise ResourceError(
            f"the run needs about {estimate.object_store / gib:.1f} GiB of object store "
            f"(dataset + one upload per client) but the cluster has "
            f"{object_store_bytes / gib:.1f} GiB: raise ray.object_store_memory_mb, "
            "use fewer clients or a smaller model"
        )
    if estimate.actors > memory_bytes:
        fitting = max(1, int(memory_bytes // estimate.per_actor))
        suggestion = math.ceil(num_clients / fitting)
        hint = (
            f"; pack more clients per actor: ray.clients_per_actor={suggestion}"
            if suggestion > clients_per_actor
            else ""
        )
        raise ResourceError(
            f"{math.ceil(num_clients / clients_per_actor)} client actors need about "
            f"{estimate.actors / gib:.1f} GiB but the cluster offers "
            f"{memory_bytes / gib:.1f} GiB{hint}"
        )


def reserve_cpus(
    num_actors: int,
    cpus_per_actor: float,
    *,
    timeout_s: float | None,
    poll_s: float = 2.0,
    report_every_s: float = 60.0,
) -> Any:
    """Reserve the CPUs of a run's actors at once (a Ray placement group).

    All-or-nothing: a run never holds some of its actors while waiting for the
    rest, so runs sharing a cluster queue instead of deadlocking. Bundles are
    spread over nodes where possible (``SPREAD``, as the actors were before).
    While the cluster is busy a message says what the run waits for.

    Args:
        num_actors: Actors to place (one bundle each).
        cpus_per_actor: CPUs of each bundle (may be fractional).
        timeout_s: Give up after this many seconds (``ray.reserve_timeout_s``);
            None waits for ever (still reporting).
        poll_s: Seconds between checks.
        report_every_s: Seconds between two waiting messages.

    Returns:
        The ready placement group; release it with :func:`release_cpus`.

    Raises:
        ResourceError: If the CPUs are not free within ``timeout_s``, or at once
            when this process's own reservations (another run or env it has not
            closed) leave the cluster too few CPUs: waiting could never end.
    """
    import ray
    from ray.util.placement_group import placement_group

    total = num_actors * cpus_per_actor
    _refuse_self_deadlock(total, float(ray.cluster_resources().get("CPU", 0.0)))
    pg = placement_group([{"CPU": cpus_per_actor}] * num_actors, strategy="SPREAD")
    started = time.monotonic()
    reported = -math.inf
    while True:
        waited = time.monotonic() - started
        step = (
            poll_s if timeout_s is None else max(0.0, min(poll_s, timeout_s - waited))
        )
        ready, _ = ray.wait([pg.ready()], timeout=step)
        if ready:
            _HELD[pg.id] = (pg, total)
            return pg
        waited = time.monotonic() - started
        if timeout_s is not None and waited >= timeout_s:
            release_cpus(pg)
            raise ResourceError(
                f"gave up after {waited:.0f} s waiting for {total:g} CPUs on the "
                f"cluster ({_free_cpus()}): other runs hold them. Wait for them to "
                "finish, or raise ray.reserve_timeout_s (null: wait for ever)"
            )
        if waited - reported >= report_every_s:
            reported = waited
            limit = "" if timeout_s is None else f"; giving up after {timeout_s:g} s"
            print(
                f"rayfl: waiting for {total:g} CPUs on the cluster: "
                f"{num_actors} actor(s) of {cpus_per_actor:g} CPU; {_free_cpus()}"
                f"{limit} (ray.reserve_timeout_s)",
                flush=True,
            )


def caller_cpus() -> float:
    """CPUs Ray assigned to the calling worker: an actor's own, 0 in a driver."""
    import ray

    try:
        assigned = ray.get_runtime_context().get_assigned_resources()
    except AssertionError:  # "only available when the process is a worker"
        return 0.0
    return float(assigned.get("CPU", 0.0))


def run_cpus(limit: float | None = None) -> float:
    """The CPUs a run's client actors reserve in total.

    ``limit`` (``ray.run_cpus``) when set; else the cluster's CPUs less those
    Ray assigned to the calling worker. A run started inside a Ray actor (an
    RLlib EnvRunner hosting an emulate-mode env) could otherwise wait for ever
    for the CPUs its own host holds.

    Raises:
        ResourceError: If the calling actor holds every CPU of the cluster.
    """
    import ray

    if limit is not None:
        return float(limit)
    cluster = float(ray.cluster_resources().get("CPU", 0.0))
    own = caller_cpus()
    if cluster - own <= 1e-9:
        raise ResourceError(
            f"the calling Ray actor holds {own:g} of the cluster's {cluster:g} CPUs, "
            "so none are left for the run's client actors: give the caller fewer "
            "CPUs (rl.num_cpus_per_env_runner for RLlib EnvRunners) or add CPUs"
        )
    return cluster - own


def release_cpus(pg: Any) -> None:
    """Release a reservation of :func:`reserve_cpus` (no-op if Ray is down)."""
    if pg is None:
        return
    _HELD.pop(pg.id, None)
    try:
        import ray
        from ray.util.placement_group import remove_placement_group
    except ImportError:  # a close at interpreter exit: the session went with it
        return
    if ray.is_initialized():
        with contextlib.suppress(Exception):  # already removed, or cluster gone
            remove_placement_group(pg)


def _refuse_self_deadlock(total: float, cluster_cpus: float) -> None:
    """Raise if this process's own reservations keep ``total`` CPUs from fitting.

    While this process waits it cannot release what it holds, so if the cluster
    without those CPUs is too small the wait could only end by timing out.
    """
    from ray.util import placement_group_table

    for key, (pg, _) in list(_HELD.items()):  # drop groups of an earlier session
        try:
            alive = placement_group_table(pg).get("state") == "CREATED"
        except Exception:  # noqa: BLE001 - unknown to this cluster
            alive = False
        if not alive:
            del _HELD[key]
    held = sum(cpus for _, cpus in _HELD.values())
    if held > 0 and total > cluster_cpus - held + 1e-9:
        raise ResourceError(
            f"this process already holds {held:g} of the cluster's "
            f"{cluster_cpus:g} CPUs for another run or env that is still open, "
            f"so {total:g} more can never be free while it waits. Close the "
            "other one first (env.close(), or leave its `with` block), or give "
            "Ray more CPUs (ray.num_cpus)"
        )
    own = caller_cpus()
    if total > cluster_cpus - own + 1e-9:
        raise ResourceError(
            f"the run's client actors need {total:g} CPUs but the cluster has "
            f"{cluster_cpus:g}, of which the calling Ray actor holds {own:g}: lower "
            "ray.run_cpus or add CPUs"
        )


def placed(pg: Any, index: int) -> Any:
    """Return the scheduling strategy of actor ``index`` in reservation ``pg``."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    return PlacementGroupSchedulingStrategy(
        placement_group=pg, placement_group_bundle_index=index
    )


def _free_cpus() -> str:
    """Return "x of y CPUs free" for messages."""
    import ray

    free = ray.available_resources().get("CPU", 0.0)
    total = ray.cluster_resources().get("CPU", 0.0)
    return f"{free:g} of {total:g} CPUs free"
