"""One round of a federated baseline on a D2D network (``method: federated``).

Each target's group (the target and its neighbors, or every client with
``participants: all``) runs the ``algorithm`` section with the target's actor as
the aggregator: the members train on the group's global model
(``ClientHost.train``), the D2D links decide which uploads arrive, and the
target's actor aggregates them (``ServerHost.aggregate``). Algorithms with
``personalized_downloads`` (FedAMP, APPLE) first get each member's own download
from the target's group server (``D2DClientHost._group_server``); they read
all N clients' uploads, so they run with ``participants: all`` only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.cloud import LinkOutcome

__all__ = ["by_actor", "group_round"]


def by_actor(
    clients: list[int], actor_of: npt.NDArray[np.int64]
) -> dict[int, list[int]]:
    """Group ``clients`` (ascending) by the index of the actor hosting them."""
    out: dict[int, list[int]] = {}
    for c in sorted(clients):
        out.setdefault(int(actor_of[c]), []).append(c)
    return out


def group_round(
    actors: list[Any],
    actor_of: npt.NDArray[np.int64],
    *,
    round: int,
    target: int,
    global_ref: Any,
    members: list[int],
    delivered: dict[int, bool],
    personalized: bool,
) -> tuple[Any, Any, list[Any]]:
    """Start one target's group round on the actors (nothing is pulled).

    Args:
        actors: The node-hosting actors.
        actor_of: Actor index of each client.
        round: Round index t.
        target: The target n (its actor aggregates).
        global_ref: The group's global model.
        members: The group's clients, ascending (the target included).
        delivered: Member (other than the target) → whether its upload arrives.
        personalized: Whether each member downloads its own model (FedAMP, APPLE).

    Returns:
        The group's new global model ref, the ref of the target's round record
        and the refs of the members' training records.
    """
    host = actors[int(actor_of[target])]
    downloads: dict[int, Any] = {}
    if personalized:  # FedAMP, APPLE: the target's server sends each its own
        downloads = ray.get(
            host.group_download_refs.remote(
                round, target, global_ref, members, len(actor_of)
            )
        )
    uploads, train_records = [], []
    for a, clients in by_actor(members, actor_of).items():
        extra = (
            {"downloads": {c: downloads[c] for c in clients}} if personalized else {}
        )
        record, bundle, _ = (
            actors[a]
            .train.options(num_returns=3)
            .remote(round, global_ref, clients, None, **extra)
        )
        train_records.append(record)
        uploads.append(bundle)
    link = LinkOutcome(
        np.asarray(members, dtype=np.int64),
        np.zeros(len(members)),
        np.array([m == target or delivered[m] for m in members]),
    )
    new_ref, record = host.aggregate_group.options(num_returns=2).remote(
        round, target, global_ref, link, *uploads
    )
    return new_ref, record, train_records
