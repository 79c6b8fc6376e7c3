"""Models behind object refs, as arrays for a checkpoint, and back.

The D2D driver holds models only as object refs: each target's global model
(federated baselines) and the last model received from each neighbor
(``last_source``, reused with ``on_loss: stale``). Many refs are shared — every
target starts from ω⁰; one training call's ref holds the models of all the
clients of one actor, and a neighbor's model reaches several targets — so each
distinct ref is pulled once and each distinct model stored once.

Size of a D2D checkpoint: about (N + T + T·abs(M_n)) · dim float32 at most, the
last term only with ``on_loss: stale`` (every target keeps a model per
neighbor) and shrinking when neighbors are shared between targets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.d2d.em import EMState
from rayfl.d2d.selection import reselect

__all__ = [
    "distinct_refs",
    "load_state",
    "pack_globals",
    "pack_sources",
    "pull_distinct",
    "save_state",
    "snapshot_actors",
    "unpack_globals",
    "unpack_sources",
]


def pull_distinct(refs: list[Any]) -> tuple[list[Any], list[int]]:
    """Pull each distinct object ref once; return the values and each ref's index.

    Example:
        ``pull_distinct([r1, r2, r1])`` is ``([v1, v2], [0, 1, 0])``.
    """
    distinct: dict[Any, int] = {}
    index = [distinct.setdefault(r, len(distinct)) for r in refs]
    return list(ray.get(list(distinct))), index


def pack_sources(sources: dict[tuple[int, int], Any], dim: int) -> dict[str, Any]:
    """Return ``{(target, neighbor): ref to {client: vector}}`` as arrays.

    Returns:
        ``pairs`` (K, 2) int64, sorted; ``models`` (D, dim) float32, one row
        per distinct (ref, neighbor); ``index`` (K,): each pair's row;
        ``bundle`` (D,): the distinct ref each row came from (rows of one ref
        are put back as one dict).
    """
    pairs = sorted(sources)
    bundles, which = pull_distinct([sources[p] for p in pairs])
    models: list[npt.NDArray[np.float32]] = []
    bundle_of: list[int] = []
    index: list[int] = []
    seen: dict[tuple[int, int], int] = {}
    for (_, m), b in zip(pairs, which, strict=True):
        if (b, m) not in seen:
            seen[(b, m)] = len(models)
            models.append(np.asarray(bundles[b][m], dtype=np.float32))
            bundle_of.append(b)
        index.append(seen[(b, m)])
    return {
        "pairs": np.asarray(pairs, dtype=np.int64).reshape(-1, 2),
        "models": np.stack(models) if models else np.zeros((0, dim), np.float32),
        "bundle": np.asarray(bundle_of, dtype=np.int64),
        "index": np.asarray(index, dtype=np.int64),
    }


def unpack_sources(saved: dict[str, Any]) -> dict[tuple[int, int], Any]:
    """Invert :func:`pack_sources`: put one ``{client: vector}`` dict per bundle."""
    pairs = np.asarray(saved["pairs"], dtype=np.int64).reshape(-1, 2).tolist()
    index = np.asarray(saved["index"], dtype=np.int64).tolist()
    bundle = np.asarray(saved["bundle"], dtype=np.int64).tolist()
    dicts: dict[int, dict[int, npt.NDArray[np.float32]]] = {}
    for (_, m), i in zip(pairs, index, strict=True):
        dicts.setdefault(bundle[i], {})[m] = np.asarray(
            saved["models"][i], dtype=np.float32
        )
    refs = {b: ray.put(d) for b, d in dicts.items()}
    return {(t, m): refs[bundle[i]] for (t, m), i in zip(pairs, index, strict=True)}


def pack_globals(refs: dict[int, Any]) -> dict[str, Any]:
    """Return ``{target: ref to its group's global model}`` as arrays.

    Returns:
        ``targets`` (T,) int64, ``vectors`` (D, dim) float32, one row per
        distinct ref, and ``index`` (T,): each target's row.
    """
    targets = list(refs)
    vectors, index = pull_distinct([refs[t] for t in targets])
    return {
        "targets": np.asarray(targets, dtype=np.int64),
        "vectors": np.stack(vectors),
        "index": np.asarray(index, dtype=np.int64),
    }


def unpack_globals(saved: dict[str, Any]) -> dict[int, Any]:
    """Invert :func:`pack_globals`: one ref per distinct saved model."""
    put = [ray.put(np.asarray(v, dtype=np.float32)) for v in saved["vectors"]]
    return {
        int(t): put[int(i)]
        for t, i in zip(saved["targets"], saved["index"], strict=True)
    }


def distinct_refs(refs: list[Any]) -> tuple[list[Any], list[int]]:
    """Return the distinct refs (by identity, in first-seen order) and each one's index.

    Example:
        ``distinct_refs([r1, r2, r1])`` is ``([r1, r2], [0, 1, 0])``.
    """
    out: list[Any] = []
    index = []
    for ref in refs:
        i = next((k for k, d in enumerate(out) if d is ref), len(out))
        if i == len(out):
            out.append(ref)
        index.append(i)
    return out, index


def snapshot_actors(pool: Any, *, max_actor_restarts: int) -> None:
    """Remember each actor's state in ``pool`` (a ref, never pulled) if it may restart.

    Waits until the snapshots exist (the actors are idle between rounds), so an
    actor dying early in the next round still has one; an actor restarted after
    a failure gets its snapshot back (``ActorPool.restore_failed``).
    """
    if max_actor_restarts == 0:
        return
    refs = [actor.get_state.remote() for actor in pool.actors]
    ray.wait(refs, num_returns=len(refs), fetch_local=False)
    for a, ref in enumerate(refs):
        pool.remember_state(a, ref)


def save_state(strategy: Any, engine: Any) -> dict[str, Any]:
    """Return a D2D run's state as plain data, for a checkpoint (pulls models).

    Keys: ``clients`` (every client's models and counters, from the actors),
    ``servers`` (the group servers of FedAMP/APPLE, by target), ``group_global``
    (each target's global model of a federated baseline), ``em`` (π, its
    trajectory, log-likelihoods, frozen flag and convergence round per
    target), ``selections`` (M_n and sub-channels per target, which
    ``selection_via: env`` changes), ``last_source`` (the last model
    received from each neighbor, reused with ``on_loss: stale``) and
    ``history`` (each target's observation history).
    Size: see the module docstring.
    """
    assert engine.pool is not None
    states = ray.get([a.get_state.remote() for a in engine.pool.actors])
    return {
        "clients": {int(c): v for s in states for c, v in s["clients"].items()},
        "servers": {int(t): v for s in states for t, v in s["servers"].items()},
        "group_global": pack_globals(strategy.global_refs),
        "em": {t: strategy.em[t].state_dict() for t in strategy.targets},
        "selections": {
            t: {
                "neighbors": list(strategy.selections[t].neighbors),
                "subchannel": list(strategy.selections[t].subchannel),
            }
            for t in strategy.targets
        },
        "last_source": pack_sources(strategy.last_source, engine.dim),
        "history": {t: strategy.history[t].state_dict() for t in strategy.targets},
    }


def load_state(strategy: Any, engine: Any, state: dict[str, Any]) -> None:
    """Restore a :func:`save_state` into ``strategy`` (any actor packing).

    Models go back to the actors hosting their clients; the driver-side
    models are put into the object store again, one ref per saved group.
    """
    assert engine.pool is not None
    clients, servers = state["clients"], state["servers"]
    ray.get(
        [
            actor.set_state.remote(
                {
                    "clients": {c: clients[c] for c in group if c in clients},
                    "servers": {t: servers[t] for t in group if t in servers},
                }
            )
            for actor, group in zip(engine.pool.actors, engine.pool.groups, strict=True)
        ]
    )
    strategy.global_refs = unpack_globals(state["group_global"])
    strategy.em = {int(t): EMState.from_state(em) for t, em in state["em"].items()}
    for t, sel in state["selections"].items():
        strategy.selections[int(t)] = reselect(
            strategy.selections[int(t)],
            tuple(sel["neighbors"]),
            tuple(sel["subchannel"]),
            num_clients=engine.num_clients,
        )
        strategy.members[int(t)] = strategy.members_of(int(t))
    strategy.last_source = unpack_sources(state["last_source"])
    for t, history in state.get("history", {}).items():
        strategy.history[int(t)].load_state_dict(history)
    snapshot_actors(
        engine.pool, max_actor_restarts=engine.config.ray.max_actor_restarts
    )
