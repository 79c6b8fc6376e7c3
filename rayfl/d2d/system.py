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
    4. Hook for personalized baselines (Per-FedAvg, FedAMP, issue 10): any
       algorithm registered in ``rayfl.algorithms.registry`` runs with
       ``method: federated``; the target's reported model is
       ``algorithm.eval_vectors(global, state)["personal"]`` when the algorithm
       keeps one, else the group's global model. Algorithms with
       ``personalized_downloads`` (FedAMP, APPLE) keep one group server per
       target in the target's actor (``D2DClientHost._group_server``), which
       sends each member its own download; they read all N clients' uploads, so
       the runner allows them with ``participants: all`` only.
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

from rayfl.actors.cloud import REJECT_ACTOR_LOST, LinkOutcome
from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.config import RunConfig
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.em import EMState
from rayfl.d2d.host import D2DClientActor
from rayfl.d2d.selection import Selection, make_layout, select_neighbors
from rayfl.d2d.snapshot import pack_sources, pull_distinct, unpack_sources
from rayfl.data.federated import FederatedData, build_federated
from rayfl.seeding import rng_for
from rayfl.session import RaySession
from rayfl.system import initial_vector
from rayfl.wireless.d2d import d2d_round_delivery

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

    # ------------------------------------------------------------------ links
    def deliveries(
        self, round: int, target: int, senders: list[int]
    ) -> dict[int, bool]:
        """Return which senders' models reach ``target`` in ``round`` (link_model)."""
        topo = self.topology
        if topo.link_model == "ideal" or not senders:
            return {s: True for s in senders}
        rng = rng_for(self.config.seed, "d2d_link", round=round + 1, client=target)
        if topo.link_model == "bernoulli":
            error = self.selections[target].error_probability
            draws = rng.random(self.num_clients)
            return {s: bool(draws[s] >= error[s]) for s in senders}
        forced = np.full(self.num_clients, -1, dtype=np.int64)
        sel = self.selections[target]
        forced[list(sel.neighbors)] = list(sel.subchannel)
        ok, _ = d2d_round_delivery(
            self.layout.path_gain,
            target,
            tx_power_w=topo.tx_power_w,
            noise_power_w=self.layout.noise_power_w,
            sinr_threshold=topo.sinr_threshold,
            fading_threshold=topo.fading_threshold,
            rayleigh_factor=topo.rayleigh_factor,
            num_subchannels=topo.num_subchannels,
            rng=rng,
            subchannel=forced,
        )
        return {s: bool(ok[s]) for s in senders}

    # ------------------------------------------------------------------ rounds
    def run_round(self, round: int) -> list[dict[str, Any]]:
        """Run one round of ``topology.method``; return one record per client."""
        method = self.topology.method
        if method == "federated":
            return self._federated_round(round)
        return self._pfedwn_round(round, local_only=method == "local")

    def _by_actor(self, clients: list[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for c in sorted(clients):
            out.setdefault(int(self.actor_of[c]), []).append(c)
        return out

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
        for a, clients in self._by_actor(senders).items():
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
                dicts, sources = self._sources(t, usable)
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
            dicts, sources = self._sources(t, usable)
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
        self._snapshot()

    def _snapshot(self) -> None:
        """Remember each actor's state (a ref, never pulled) if actors may restart.

        Waits until the snapshots exist (the actors are idle between rounds), so
        an actor dying early in the next round still has one.
        """
        assert self.pool is not None
        if self.config.ray.max_actor_restarts == 0:
            return
        refs = [actor.get_state.remote() for actor in self.pool.actors]
        ray.wait(refs, num_returns=len(refs), fetch_local=False)
        for a, ref in enumerate(refs):
            self.pool.remember_state(a, ref)

    def _sources(self, target: int, clients: list[int]) -> tuple[list[Any], list[int]]:
        """Distinct refs holding the clients' models, and each client's index."""
        dicts: list[Any] = []
        sources = []
        for m in clients:
            ref = self.last_source[(target, m)]
            for i, d in enumerate(dicts):
                if d is ref:
                    sources.append(i)
                    break
            else:
                sources.append(len(dicts))
                dicts.append(ref)
        return dicts, sources

    def _federated_round(self, round: int) -> list[dict[str, Any]]:
        from rayfl.algorithms.registry import algorithm_class

        personalized = algorithm_class(self.config.algorithm).personalized_downloads
        agg_calls = []
        arrived: dict[int, list[int]] = {}
        train_records = []
        for t in self.targets:
            members = self.members[t]
            uploads = []
            refs: dict[int, Any] = {}
            if personalized:  # FedAMP, APPLE: the target's server sends each its own
                refs = ray.get(  # type: ignore[assignment]
                    self.actors[int(self.actor_of[t])].group_download_refs.remote(
                        round, t, self.global_refs[t], members, self.num_clients
                    )
                )
            for a, clients in self._by_actor(members).items():
                extra = (
                    {"downloads": {c: refs[c] for c in clients}} if personalized else {}
                )
                rec, bundle, _ = (
                    self.actors[a]
                    .train.options(num_returns=3)
                    .remote(round, self.global_refs[t], clients, None, **extra)
                )
                train_records.append(rec)
                uploads.append(bundle)
            others = [m for m in members if m != t]
            ok = self.deliveries(round, t, others)
            arrived[t] = [m for m in others if ok[m]]
            link = LinkOutcome(
                np.asarray(members, dtype=np.int64),
                np.zeros(len(members)),
                np.array([m == t or ok[m] for m in members]),
            )
            new_ref, record = (
                self.actors[int(self.actor_of[t])]
                .aggregate_group.options(num_returns=2)
                .remote(round, t, self.global_refs[t], link, *uploads)
            )
            self.global_refs[t] = new_ref
            agg_calls.append(record)
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
        nan = float("nan")
        primary = (
            "post_train_acc"
            if self.topology.method == "local"
            or self.topology.primary == "post_training"
            else "post_agg_acc"
        )
        by_target = {int(r["client"]): r for r in target_rows}
        losses: dict[int, list[float]] = {}
        for r in train_rows:
            losses.setdefault(int(r["client"]), []).append(float(r["train_loss"]))
        delivered = {m for ms in arrived.values() for m in ms}
        # reasons the targets refused an arrived model (non-finite), per client
        refused = {
            int(m): why for r in target_rows for m, why in r.get("rejected", {}).items()
        }
        refused.update(dict.fromkeys(lost, REJECT_ACTOR_LOST))
        selected = {m for t in self.targets for m in self.selections[t].neighbors}
        bits = 32.0 * self.dim
        rows = []
        for c in range(self.num_clients):
            tr = by_target.get(c, {})
            sent = c in senders
            rows.append(
                {
                    "round": round,
                    "client": c,
                    "role": "target"
                    if c in by_target
                    else "neighbor"
                    if sent
                    else "idle",
                    "scheduled": sent or c in by_target,
                    "selected": c in selected,
                    "delivered": c in delivered,
                    "rejected": refused.get(c),
                    "train_loss": float(
                        np.mean(losses[c]) if c in losses else tr.get("train_loss", nan)
                    ),
                    "test_acc": float(tr.get(primary, nan)),
                    "test_loss": float(tr.get(primary.replace("acc", "loss"), nan)),
                    "post_agg_acc": float(tr.get("post_agg_acc", nan)),
                    "post_train_acc": float(tr.get("post_train_acc", nan)),
                    "bits": bits if sent and c not in lost else 0.0,
                }
            )
        return rows

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
        pairs = sorted(zip(neighbors, subchannel, strict=True))
        new = tuple(int(m) for m, _ in pairs)
        if len(set(new)) != len(new) or target in new:
            raise ValueError(
                f"neighbors of target {target} must be distinct other clients, "
                f"got {list(neighbors)}"
            )
        if any(not 0 <= m < self.num_clients for m in new):
            raise ValueError(f"neighbor ids must be in 0..{self.num_clients - 1}")
        old = self.selections[target]
        self.selections[target] = Selection(
            target, new, tuple(int(f) for _, f in pairs), old.error_probability
        )
        if new == old.neighbors:
            return
        self.em[target] = self.em[target].reselect(old.neighbors, new)
        self.members[target] = self._members(target)

    # ------------------------------------------------------------------ report
    def selection_report(self) -> dict[str, Any]:
        """Return the layout, each target's neighbors, P^err and EM trajectory."""
        return {
            "positions_m": self.layout.positions_m.round(3).tolist(),
            "targets": {
                str(t): {
                    "neighbors": list(self.selections[t].neighbors),
                    "subchannel": list(self.selections[t].subchannel),
                    "error_probability": self.selections[t]
                    .error_probability.round(6)
                    .tolist(),
                    "em_weights": self.em[t].history,
                    "em_loglik": self.em[t].loglik,
                    "em_converged_round": self.em[t].converged_round,
                    "members": self.members[t],
                }
                for t in self.targets
            },
        }

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
        targets = list(self.global_refs)
        vectors, index = pull_distinct([self.global_refs[t] for t in targets])
        return {
            "clients": {int(c): v for s in states for c, v in s["clients"].items()},
            "servers": {int(t): v for s in states for t, v in s["servers"].items()},
            "global": {
                "targets": np.asarray(targets, dtype=np.int64),
                "vectors": np.stack(vectors),
                "index": np.asarray(index, dtype=np.int64),
            },
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
        g = state["global"]
        put = [ray.put(np.asarray(v, dtype=np.float32)) for v in g["vectors"]]
        self.global_refs = {
            int(t): put[int(i)] for t, i in zip(g["targets"], g["index"], strict=True)
        }
        self.em = {int(t): EMState.from_state(em) for t, em in state["em"].items()}
        for t, sel in state["selections"].items():
            old = self.selections[int(t)]
            self.selections[int(t)] = Selection(
                int(t),
                tuple(int(m) for m in sel["neighbors"]),
                tuple(int(f) for f in sel["subchannel"]),
                old.error_probability,
            )
            self.members[int(t)] = self._members(int(t))
        self.last_source = unpack_sources(state["last_source"])
        self._snapshot()

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
