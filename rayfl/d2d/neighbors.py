"""Step 1 of a pFedWN round: the selected neighbors train and send their models.

A model is never pulled by the driver: each sender's entry is the ref of its
actor's call result (a dict ``{client: vector}`` shared by the clients of one
call), forwarded to the targets' actors.
"""

from __future__ import annotations

from typing import Any

from rayfl.actors.pool import ActorPool

__all__ = ["neighbors_train"]


def neighbors_train(
    pool: ActorPool,
    *,
    round: int,
    senders: list[int],
    keep_personal: set[int],
    init_ref: Any,
) -> tuple[dict[int, Any], list[dict[str, Any]], set[int]]:
    """Train every sender's local model one local run (or send its personal one).

    Args:
        pool: The node actors.
        round: Round index t.
        senders: Clients that send a model this round.
        keep_personal: Senders that send their current personal model instead
            of training (targets, with ``neighbor_model: personalized``).
        init_ref: ω⁰, a client's first model.

    Returns:
        Each sender's model ref, the training records, and the senders whose
        actor died during the call (their models are lost this round, like a
        lost packet).
    """
    refs: dict[int, Any] = {}
    calls, called, who = [], [], []
    for a, clients in pool.by_actor(sorted(senders)).items():
        local = [c for c in clients if c not in keep_personal]
        sent = [c for c in clients if c not in local]
        if local:
            rec, models = (
                pool.actors[a]
                .train_models.options(num_returns=2)
                .remote(round, local, "local", init_ref)
            )
            calls.append(rec)
            called.append(a)
            who.append((local, True))
            refs.update(dict.fromkeys(local, models))
        if sent:
            current = pool.actors[a].current_models.remote(sent, "personal", init_ref)
            calls.append(current)
            called.append(a)
            who.append((sent, False))
            refs.update(dict.fromkeys(sent, current))
    results = pool.gather(calls, called)
    rows: list[dict[str, Any]] = []
    lost: set[int] = set()
    for (clients, trained), result in zip(who, results, strict=True):
        if result is None:  # the actor died: like a lost packet
            lost.update(clients)
        elif trained:
            rows += result
    return refs, rows, lost
