"""Resource guard: estimate a run's memory before starting it, refuse what cannot fit.

The estimate (per node kind of memory, bytes):

| part | estimate |
|------|----------|
| client actor process | 400 MiB (Python + torch, measured: DESIGN.md) + 4 model-sized float32 buffers (parameters, gradients, scratch) |
| client state | ``state_vectors_per_client`` × dim × 4 per hosted client |
| object store | the federated dataset once + the global model + one upload per scheduled client |

Implementation details:
    1. Only gross misfits are refused: the estimate must exceed the cluster's
       memory (``ray.cluster_resources()["memory"]``) or object store; the error
       suggests a ``ray.clients_per_actor`` that fits when packing can help.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "ACTOR_BASE_BYTES",
    "MemoryEstimate",
    "ResourceError",
    "check_fits",
    "estimate_memory",
]

ACTOR_BASE_BYTES = 400 * 2**20


class ResourceError(RuntimeError):
    """The requested run cannot fit the cluster; the message says what to change."""


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
) -> MemoryEstimate:
    """Return the memory estimate of a run (see the module table).

    Example:
        >>> e = estimate_memory(num_clients=4, clients_per_actor=2, dim=1000,
        ...                     data_bytes=10**6)
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
    store = data_bytes + model + num_clients * model
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
