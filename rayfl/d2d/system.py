"""D2DSystem: the actors of a server-free D2D run and one round of its method.

No server actor. Client actors (:class:`~rayfl.d2d.host.D2DClientHost`, packed
1..M clients each and started by :class:`rayfl.actors.pool.ActorPool` as in the
star topology: names, ``ray.max_actor_restarts``, memory check) hold every
client's own model(s); a model goes from a neighbor's actor to its target's
actor as an ObjectRef.

One pFedWN round t (Alg. 2; spec seed_003 §3.1):
    1. every selected neighbor m trains its own (pure local) model one local run
       and "sends" it: the driver forwards the ref of its actor's result;
    2. the D2D link of round t decides which models arrive (``link_model``);
    3. while EM runs (``em_mode``), each target does E/M steps (eqs. 9–10) on its
       train split with the arrived models;
    4. each target aggregates, ω_n ← α ω_n + (1−α) Σ π_m ω_m (eq. 1), is
       evaluated, trains one local run and is evaluated again.

``method: local`` is step 4 with no neighbors. ``method: federated`` runs the
``algorithm`` section (FedAvg, FedProx, … any registered algorithm) over each
target's group with the target's actor as the aggregator: the client half is
``ClientHost.train`` and the server half ``ServerHost.aggregate``, unchanged.

Implementation details:
    1. EM phases overlap training (``two_phase``): rounds keep aggregating with
       the current π while EM runs, and π is frozen once the stopping rule fires
       or after ``em_max_rounds``, so every method gets the same number of rounds
       and local epochs [A4].
    2. When some models are lost, the E/M step runs on the arrived ones and
       updates only their π entries (keeping their total mass).
    3. Link draws of round t come from (seed, "d2d_link", round t + 1, target).
    4. Personalized baselines (Per-FedAvg, FedAMP...) run with ``method:
       federated`` (:mod:`rayfl.d2d.federated`); the target reports
       ``algorithm.eval_vectors(global, state)["personal"]`` when the algorithm
       keeps one, else the group's global model.
    5. ``set_selection`` lets a policy re-select M_n every round
       (``selection_via: env``, :mod:`envs.d2d`).
    6. Actor failure (pFedWN and local): a neighbor whose actor dies while
       training loses its model that round, like a lost packet (``delivered``
       false, ``rejected = actor_lost``); at the end of the round the restarted
       actor gets the state of its clients at the end of the previous round. A
       target's actor lost, any actor lost in a federated baseline, or an actor
       that cannot restart fails the round (the run ends ``failed`` and
       ``rayfl resume`` continues from the last checkpoint).
    7. :meth:`D2DSystem.state_dict` is plain data (``rayfl.checkpoint``): the
       models held by the actors and behind the driver's refs are pulled, each
       distinct one once (:mod:`rayfl.d2d.snapshot`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray
from scipy.special import logsumexp

from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.config import RunConfig
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.em import EMState
from rayfl.d2d.federated import by_actor, group_round
from rayfl.d2d.host import D2DClientActor
from rayfl.d2d.links import deliveries
from rayfl.d2d.records import client_rows, selection_report
from rayfl.d2d.selection import Selection, make_layout, reselect, select_neighbors
from rayfl.d2d.snapshot import (
    distinct_refs,
    pack_globals,
    pack_sources,
    snapshot_actors,
    unpack_globals,
    unpack_sources,
)
from rayfl.data.federated import FederatedData, build_federated
from rayfl.session import RaySession
from rayfl.system import initial_vector

__all__ = ["D2DSystem"]


class D2DSystem:
    """The actors, layout and per-target state of one D2D run.

    Args:
        config: The run config (``topology.kind == "d2d"``).
        data: A prebuilt federated dataset (default: built from ``config.data``).
    """

    def __init__(self, config: RunConfig, data: FederatedData | None = None) -> None:
        if not isinstance(config.topology, D2DTopologyConfig):
            raise ValueError("D2DSystem needs topology.kind=d2d")
        self.config = config
        self.topology: D2DTopologyConfig = config.topology
        self.session = RaySession(config.ray)
        self.pool: ActorPool | None = None
        try:
            self._build(data)
        except BaseException:
            self.close()
            raise

    def _build(self, data: FederatedData | None) -> None:
        cfg, topo = self.config, self.topology
        self.data = (
            data if data is not None else build_federated(cfg.data, seed=cfg.seed)
        )
        n = self.data.num_clients
        self.num_clients = n
        self.num_test = np.asarray(self.data.num_test, dtype=np.int64)
        init = initial_vector(cfg, tuple(self.data.input_shape), self.data.num_classes)
        self.dim = len(init)
        self.init_ref = ray.put(init)
        self.layout = make_layout(topo, n, seed=cfg.seed)
        self.selections: dict[int, Selection] = {
            s.target: s for s in select_neighbors(self.layout, topo, seed=cfg.seed)
        }
        self.targets = list(self.layout.targets)
        setup = ActorSetup(
            config=cfg,
            input_shape=tuple(self.data.input_shape),
            num_classes=self.data.num_classes,
        )
        self.pool = ActorPool.start(
            D2DClientActor,
            self.data,
            setup,
            ray_settings=cfg.ray,
            dim=self.dim,
            role="nodes",
        )
        self.em = {t: EMState(self.selections[t].neighbors) for t in self.targets}
        # Federated baselines: each target's group and its global model ref.
        self.members = {t: self._members(t) for t in self.targets}
        self.global_refs = {t: self.init_ref for t in self.targets}
        # Last ref that carried each (target, neighbor) model (on_loss: stale).
        self.last_source: dict[tuple[int, int], Any] = {}

    @property
    def actors(self) -> list[Any]:
        """The node-hosting actors (``pool.actors``)."""
        return self.pool.actors if self.pool is not None else []

    @property
    def groups(self) -> list[list[int]]:
        """Client ids of each actor (``pool.groups``)."""
        return self.pool.groups if self.pool is not None else []

    @property
    def actor_of(self) -> npt.NDArray[np.int64]:
        """Actor index of each client (``pool.actor_of``)."""
        assert self.pool is not None
        return self.pool.actor_of

    def _members(self, target: int) -> list[int]:
        if self.topology.participants == "all":
            return list(range(self.num_clients))
        return sorted({target, *self.selections[target].neighbors})

    def deliveries(
        self, round: int, target: int, senders: list[int]
    ) -> dict[int, bool]:
        """Return which senders' models reach ``target`` in ``round`` (link_model)."""
        return deliveries(
            self.topology,
            self.layout,
            self.selections[target],
            senders,
            round=round,
            seed=self.config.seed,
        )

    # ------------------------------------------------------------------ rounds
    def run_round(self, round: int) -> list[dict[str, Any]]:
        """Run one round of ``topology.method``; return one record per client."""
        method = self.topology.method
        if method == "federated":
            return self._federated_round(round)
        return self._pfedwn_round(round, local_only=method == "local")

    def _pfedwn_round(self, round: int, *, local_only: bool) -> list[dict[str, Any]]:
        senders = sorted(
            {m for t in self.targets for m in self.selections[t].neighbors}
        )
        if local_only:
            senders = []
        refs, neighbor_rows, lost = self._neighbors_train(round, senders)
        arrived: dict[int, list[int]] = {}
        for t in self.targets:
            neighbors = [] if local_only else list(self.selections[t].neighbors)
            ok = self.deliveries(round, t, neighbors)
            arrived[t] = [m for m in neighbors if ok[m] and m not in lost]
            for m in arrived[t]:
                self.last_source[(t, m)] = refs[m]
        self._em_round(round, arrived, local_only=local_only)
        target_rows = self._targets_round(round, arrived, local_only=local_only)
        self._after_round()
        return self._rows(round, target_rows, neighbor_rows, arrived, senders, lost)

    def _neighbors_train(
        self, round: int, senders: list[int]
    ) -> tuple[dict[int, Any], list[dict[str, Any]], set[int]]:
        """Step 1: every sender trains its local model (or sends its personal one).

        Returns:
            Each sender's model ref (a dict ``{client: vector}`` shared by the
            clients of one call), the training records, and the senders whose
            actor died during the call (their models are lost this round).
        """
        assert self.pool is not None
        targets = set(self.targets)
        personalized = self.topology.neighbor_model == "personalized"
        refs: dict[int, Any] = {}
        calls, called, who = [], [], []
        for a, clients in by_actor(senders, self.actor_of).items():
            local = [c for c in clients if not (personalized and c in targets)]
            sent = [c for c in clients if c not in local]
            if local:
                rec, models = (
                    self.actors[a]
                    .train_models.options(num_returns=2)
                    .remote(round, local, "local", self.init_ref)
                )
                calls.append(rec)
                called.append(a)
                who.append((local, True))
                refs.update(dict.fromkeys(local, models))
            if sent:
                current = self.actors[a].current_models.remote(
                    sent, "personal", self.init_ref
                )
                calls.append(current)
                called.append(a)
                who.append((sent, False))
                refs.update(dict.fromkeys(sent, current))
        results = self.pool.gather(calls, called)  # type: ignore[union-attr]
        rows: list[dict[str, Any]] = []
        lost: set[int] = set()
        for (clients, trained), result in zip(who, results, strict=True):
            if result is None:  # the actor died: like a lost packet
                lost.update(clients)
            elif trained:
                rows += result
        return refs, rows, lost

    def _usable(
        self, target: int, arrived: list[int], neighbors: list[int]
    ) -> list[int]:
        """The neighbors whose model enters the target's round (``on_loss``)."""
        if self.topology.on_loss == "stale":
            return [m for m in neighbors if (target, m) in self.last_source]
        return arrived

    def _em_round(
        self, round: int, arrived: dict[int, list[int]], *, local_only: bool
    ) -> None:
        """Step 3: E/M steps at each target whose π is not frozen (eqs. 9–10)."""
        topo = self.topology
        em_calls = {}
        for t in self.targets:
            neighbors = [] if local_only else list(self.selections[t].neighbors)
            state = self.em[t]
            usable = self._usable(t, arrived[t], neighbors)
            run_em = not state.frozen or topo.em_mode == "online"
            if run_em and len(usable) >= 1 and len(neighbors) > 1:
                idx = [neighbors.index(m) for m in usable]
                sub = state.log_pi[idx]
                dicts, sources = distinct_refs(
                    [self.last_source[(t, m)] for m in usable]
                )
                em_calls[t] = (
                    idx,
                    self.actors[int(self.actor_of[t])].em_update.remote(
                        t,
                        usable,
                        sources,
                        sub - logsumexp(sub),
                        topo.em_steps_per_round,
                        *dicts,
                    ),
                )
        results = ray.get([call for _, call in em_calls.values()])
        for (t, (idx, _)), (new_sub, loglik) in zip(
            em_calls.items(), results, strict=True
        ):
            self.em[t].apply(
                idx, new_sub, float(loglik), round=round, topology=self.topology
            )

    def _targets_round(
        self, round: int, arrived: dict[int, list[int]], *, local_only: bool
    ) -> list[dict[str, Any]]:
        """Step 4: each target aggregates (eq. 1), is evaluated, trains, is evaluated.

        A target's actor lost here fails the round (the target's model is gone).
        """
        calls = []
        for t in self.targets:
            neighbors = [] if local_only else list(self.selections[t].neighbors)
            usable = self._usable(t, arrived[t], neighbors)
            pi = np.exp(self.em[t].log_pi)
            weights = [float(pi[neighbors.index(m)]) for m in usable]
            dicts, sources = distinct_refs([self.last_source[(t, m)] for m in usable])
            alpha = 1.0 if local_only else self.topology.alpha
            calls.append(
                self.actors[int(self.actor_of[t])].target_round.remote(
                    round, t, usable, sources, weights, alpha, self.init_ref, *dicts
                )
            )
        return list(ray.get(calls))

    def _after_round(self) -> None:
        """Give restarted actors their state back; snapshot every actor's state.

        An actor that died this round restarts (``ray.max_actor_restarts``) and gets
        the snapshot of the end of the previous round; one that cannot restart
        raises here (the run fails in this round, resumable from a checkpoint).
        Snapshots are taken only when actors may restart.
        """
        assert self.pool is not None
        self.pool.restore_failed()
        snapshot_actors(
            self.pool, max_actor_restarts=self.config.ray.max_actor_restarts
        )

    def _federated_round(self, round: int) -> list[dict[str, Any]]:
        from rayfl.algorithms.registry import algorithm_class

        personalized = algorithm_class(self.config.algorithm).personalized_downloads
        agg_calls, train_records = [], []
        arrived: dict[int, list[int]] = {}
        for t in self.targets:
            others = [m for m in self.members[t] if m != t]
            ok = self.deliveries(round, t, others)
            arrived[t] = [m for m in others if ok[m]]
            self.global_refs[t], record, trained = group_round(
                self.actors,
                self.actor_of,
                round=round,
                target=t,
                global_ref=self.global_refs[t],
                members=self.members[t],
                delivered=ok,
                personalized=personalized,
            )
            agg_calls.append(record)
            train_records += trained
        target_rows = ray.get(agg_calls)
        records = [r for batch in ray.get(train_records) for r in batch]
        self._after_round()
        senders = sorted({m for t in self.targets for m in self.members[t] if m != t})
        return self._rows(round, target_rows, records, arrived, senders, set())

    def _rows(
        self,
        round: int,
        target_rows: list[dict[str, Any]],
        train_rows: list[dict[str, Any]],
        arrived: dict[int, list[int]],
        senders: list[int],
        lost: set[int],
    ) -> list[dict[str, Any]]:
        """One row per client; ``lost``: senders whose actor died this round."""
        return client_rows(
            round,
            topology=self.topology,
            num_clients=self.num_clients,
            dim=self.dim,
            selections=self.selections,
            target_rows=target_rows,
            train_rows=train_rows,
            arrived=arrived,
            senders=senders,
            lost=lost,
        )

    # ------------------------------------------------------------- selection
    def set_selection(
        self, target: int, neighbors: tuple[int, ...], subchannel: tuple[int, ...]
    ) -> None:
        """Replace ``target``'s selected neighbors M_n from the next round on.

        The hook of env-driven selection (``topology.selection_via: env``,
        :mod:`envs.d2d`): a policy re-decides M_n every round. An unchanged set
        only updates the sub-channels (so the run equals the once-at-t = 0
        selection). A changed set keeps π of the neighbors that stay, gives each
        new neighbor 1/abs(M_n), renormalises, and restarts EM (unfrozen).

        Args:
            target: A target of this run.
            neighbors: The new M_n (distinct clients, not the target), any order.
            subchannel: The sub-channel of each (same order).

        Raises:
            ValueError: On an unknown target, a repeated neighbor, the target
                itself or a client id out of range.
        """
        if target not in self.selections:
            raise ValueError(f"client {target} is not a target of this run")
        old = self.selections[target]
        self.selections[target] = reselect(
            old, neighbors, subchannel, num_clients=self.num_clients
        )
        if self.selections[target].neighbors == old.neighbors:
            return
        self.em[target] = self.em[target].reselect(
            old.neighbors, self.selections[target].neighbors
        )
        self.members[target] = self._members(target)

    def selection_report(self) -> dict[str, Any]:
        """Return the layout, each target's neighbors, P^err and EM trajectory."""
        return selection_report(self.layout, self.selections, self.em, self.members)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Return the run's state as plain data, for a checkpoint (pulls models).

        Keys: ``clients`` (every client's models and counters, from the actors),
        ``servers`` (the group servers of FedAMP/APPLE, by target), ``global``
        (each target's global model of a federated baseline), ``em`` (π, its
        trajectory, log-likelihoods, frozen flag and convergence round per
        target), ``selections`` (M_n and sub-channels per target, which
        ``selection_via: env`` changes) and ``last_source`` (the last model
        received from each neighbor, reused with ``on_loss: stale``).

        Each distinct object ref is pulled once and each distinct model stored
        once (targets sharing a global model, neighbors' models from one training
        call). Size: about (N + T + T·abs(M_n)) · dim float32 at most, the last
        term only with ``on_loss: stale`` (every target keeps a model per
        neighbor) and shrinking when neighbors are shared between targets.
        """
        assert self.pool is not None
        states = ray.get([a.get_state.remote() for a in self.pool.actors])
        return {
            "clients": {int(c): v for s in states for c, v in s["clients"].items()},
            "servers": {int(t): v for s in states for t, v in s["servers"].items()},
            "global": pack_globals(self.global_refs),
            "em": {t: self.em[t].state_dict() for t in self.targets},
            "selections": {
                t: {
                    "neighbors": list(self.selections[t].neighbors),
                    "subchannel": list(self.selections[t].subchannel),
                }
                for t in self.targets
            },
            "last_source": pack_sources(self.last_source, self.dim),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (the packing may differ from the saved run).

        Models go back to the actors hosting their clients; the driver-side
        models are put into the object store again, one ref per saved group.
        """
        assert self.pool is not None
        clients, servers = state["clients"], state["servers"]
        ray.get(
            [
                actor.set_state.remote(
                    {
                        "clients": {c: clients[c] for c in group if c in clients},
                        "servers": {t: servers[t] for t in group if t in servers},
                    }
                )
                for actor, group in zip(self.pool.actors, self.pool.groups, strict=True)
            ]
        )
        self.global_refs = unpack_globals(state["global"])
        self.em = {int(t): EMState.from_state(em) for t, em in state["em"].items()}
        for t, sel in state["selections"].items():
            self.selections[int(t)] = reselect(
                self.selections[int(t)],
                tuple(sel["neighbors"]),
                tuple(sel["subchannel"]),
                num_clients=self.num_clients,
            )
            self.members[int(t)] = self._members(int(t))
        self.last_source = unpack_sources(state["last_source"])
        snapshot_actors(
            self.pool, max_actor_restarts=self.config.ray.max_actor_restarts
        )

    def em_weights(self, target: int) -> npt.NDArray[np.float64]:
        """Return the current π of ``target`` over its selected neighbors."""
        return np.exp(self.em[target].log_pi)

    def close(self) -> None:
        """Kill the actors and stop Ray if this system started it."""
        if self.pool is not None:
            self.pool.close()
        self.session.close()

    def __enter__(self) -> D2DSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
