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

from collections.abc import Callable
from typing import Any

import numpy as np
import ray

from rayfl.actors.cloud import LinkOutcome

__all__ = ["federated_round"]


def _group_round(
    pool: Any, round: int, target: int, global_ref: Any, members: list[int], **kw: Any
) -> tuple[Any, Any, list[Any]]:
    """Start one target's group round (nothing pulled): new global, records refs.

    ``kw``: ``delivered`` (member → its upload arrives), ``personalized``.
    """
    host = pool.actors[int(pool.actor_of[target])]
    downloads: dict[int, Any] = {}
    if kw["personalized"]:  # FedAMP, APPLE: the target's server sends each its own
        downloads = ray.get(
            host.group_download_refs.remote(
                round, target, global_ref, members, len(pool.actor_of)
            )
        )
    uploads, train_records = [], []
    for a, clients in pool.by_actor(sorted(members)).items():
        extra = (
            {"downloads": {c: downloads[c] for c in clients}}
            if kw["personalized"]
            else {}
        )
        record, bundle, _ = (
            pool.actors[a]
            .train.options(num_returns=3)
            .remote(round, global_ref, clients, None, **extra)
        )
        train_records.append(record)
        uploads.append(bundle)
    link = LinkOutcome(
        np.asarray(members, dtype=np.int64),
        np.zeros(len(members)),
        np.array([m == target or kw["delivered"][m] for m in members]),
    )
    new_ref, record = host.aggregate_group.options(num_returns=2).remote(
        round, target, global_ref, link, *uploads
    )
    return new_ref, record, train_records


def federated_round(
    pool: Any,
    *,
    round: int,
    members: dict[int, list[int]],
    global_refs: dict[int, Any],
    links: Callable[[int, list[int]], dict[int, bool]],
    personalized: bool,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[int, list[int]], dict]:
    """Run every target's group round; wait for the records.

    Args:
        pool: The node actors.
        round: Round index t.
        members: Target → its group (ascending, the target included).
        global_refs: Target → its group's global model.
        links: ``links(target, senders)`` → which senders' uploads arrive.
        personalized: Whether each member downloads its own model (FedAMP, APPLE).

    Returns:
        The targets' round records, the members' training records, target →
        the members whose upload arrived, and target → its new global model.
    """
    agg_calls, train_records = [], []
    arrived: dict[int, list[int]] = {}
    new_refs: dict[int, Any] = {}
    for t, group in members.items():
        others = [m for m in group if m != t]
        ok = links(t, others)
        arrived[t] = [m for m in others if ok[m]]
        new_refs[t], record, trained = _group_round(
            pool,
            round,
            t,
            global_refs[t],
            group,
            delivered=ok,
            personalized=personalized,
        )
        agg_calls.append(record)
        train_records += trained
    target_rows = list(ray.get(agg_calls))
    records = [r for batch in ray.get(train_records) for r in batch]
    return target_rows, records, arrived, new_refs
