"""D2DRound: the engine strategy of a server-free D2D run (one round of its method).

A D2D run is ``rayfl.engine.Engine`` with this strategy, driven by
``rayfl.engine.loop.run_rounds`` (``rayfl.runner``). Its decision units are
the targets: each round's decision holds one schedule per target, the neighbors
M_n and their sub-channels (:mod:`rayfl.d2d.deciders`).

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
``algorithm`` section over each target's group (:mod:`rayfl.d2d.federated`).

Implementation details:
    1. EM phases overlap training (``two_phase``): rounds keep aggregating with
       the current π while EM runs, and π is frozen once the stopping rule fires
       or after ``em_max_rounds``, so every method gets the same number of rounds
       and local epochs [A4].
    2. When some models are lost, the E/M step runs on the arrived ones and
       updates only their π entries (keeping their total mass).
    3. Link draws of round t come from (seed, "d2d_link", round t + 1, target),
       on round t's layout when the nodes move (``topology.mobility``,
       :mod:`rayfl.d2d.motion`).
    4. Personalized baselines (Per-FedAvg, FedAMP...) run with ``method:
       federated`` (:mod:`rayfl.d2d.federated`); the target reports
       ``algorithm.eval_vectors(global, state)["personal"]`` when the algorithm
       keeps one, else the group's global model.
    5. Each round's decision re-selects M_n (:meth:`D2DRound.set_selection`):
       ``selection_via: once`` repeats the t = 0 selection, ``env`` asks the
       policy every round.
    6. Actor failure (pFedWN and local): a neighbor whose actor dies while
       training loses its model that round, like a lost packet (``delivered``
       false, ``rejected = actor_lost``); at the end of the round the restarted
       actor gets the state of its clients at the end of the previous round. A
       target's actor lost (also while the target is evaluated: a restarted host
       refuses ``target_round`` until its state is back, never evaluating or
       training from empty state), any actor lost in a federated baseline, or an
       actor that cannot restart fails the round (the run ends ``failed`` and
       ``rayfl resume`` continues from the last checkpoint; tests/faults).
    7. :meth:`D2DRound.state_dict` is plain data (:mod:`rayfl.d2d.snapshot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import ray
from scipy.special import logsumexp

from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.em import EMState
from rayfl.d2d.federated import federated_round
from rayfl.d2d.host import D2DClientActor
from rayfl.d2d.links import deliveries
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.neighbors import neighbors_train
from rayfl.d2d.records import client_rows, selection_report
from rayfl.d2d.selection import (
    Selection,
    make_layout,
    pi_vector,
    record_round,
    reselect,
    round_observation,
    select_neighbors,
    selection_observation,
)
from rayfl.d2d.snapshot import distinct_refs, load_state, save_state, snapshot_actors
from rayfl.observation import ObservationTracker
from rayfl.schedule import Schedule
from rayfl.system import Decision, EvalRow, Observation, RoundResult

__all__ = ["D2DRound"]


class D2DRound:
    """The layout, selections and per-target state of one D2D run (a strategy).

    ``engine`` owns the session, the data, ω⁰ (``engine.global_ref``, every
    client's first model) and the pool of :class:`D2DClientActor`; this object
    owns the rest. Its public methods are readable on the engine
    (``system.selections``, ``system.set_selection(...)``).
    """

    kind: ClassVar[str] = "d2d"

    def build(self, engine: Any) -> None:
        """Draw the layout and the t = 0 selections, then start the node actors."""
        if not isinstance(engine.config.topology, D2DTopologyConfig):
            raise ValueError("D2DRound needs topology.kind=d2d")
        self.engine = engine
        self._draw(engine)
        engine.pool = ActorPool.start(
            D2DClientActor,
            engine.data,
            self._setup(engine),
            ray_settings=engine.config.ray,
            dim=engine.dim,
            role="nodes",
        )

    def _setup(self, engine: Any) -> ActorSetup:
        return ActorSetup.from_config(
            engine.config,
            input_shape=tuple(engine.data.input_shape),
            num_classes=engine.data.num_classes,
        )

    def _draw(self, engine: Any) -> None:
        """Layout, selections (t = 0), π, groups and models of ``engine.config``."""
        cfg = engine.config
        self.topology: D2DTopologyConfig = cfg.topology
        self.init_ref = engine.global_ref
        self.layout = make_layout(self.topology, engine.num_clients, seed=cfg.seed)
        self.data_size = engine.data.num_train
        self.motion = D2DMotion(
            self.topology,
            self.layout,
            seed=cfg.seed,
            data_size=self.data_size,
            model_bits=32.0 * engine.dim,
            local_epochs=cfg.algorithm.local_epochs,
        )
        self.selections: dict[int, Selection] = {
            s.target: s
            for s in select_neighbors(
                self.layout,
                self.topology,
                seed=cfg.seed,
                data_size=self.data_size,
                name=cfg.scheduler.policy,
                params=cfg.scheduler.params,
                motion=self.motion,
            )
        }
        self.targets = list(self.layout.targets)
        self.first_obs: dict[int, Observation] = {}  # t = 0, made by observe
        n = engine.num_clients
        self.history = {t: ObservationTracker(n) for t in self.targets}
        self.arrived: dict[int, list[int]] = {t: [] for t in self.targets}
        self.em = {t: EMState(self.selections[t].neighbors) for t in self.targets}
        # Federated baselines: each target's group and its global model ref.
        self.members = {t: self.members_of(t) for t in self.targets}
        self.global_refs = {t: self.init_ref for t in self.targets}
        # Last ref that carried each (target, neighbor) model (on_loss: stale).
        self.last_source: dict[tuple[int, int], Any] = {}

    def restart(self, engine: Any, seed: int) -> None:
        """Start over for ``engine.config`` (new seed) on the same actors and data."""
        setup = self._setup(engine)
        ray.get([a.reset.remote(setup) for a in engine.pool.actors])
        self._draw(engine)
        self._after_round()

    def num_units(self, engine: Any) -> int:
        """One decision unit per target."""
        return len(self.targets)

    def observe(self, engine: Any, t: int) -> tuple[Observation, ...]:
        """Return each target's observation before round ``t``.

        :func:`rayfl.d2d.selection.round_observation`, the observation of
        ``D2DNeighbor-v0``.
        """
        seed = engine.config.seed
        if not self.first_obs:
            self.first_obs = {
                t: selection_observation(
                    self.layout, t, self.topology, seed=seed, motion=self.motion
                )[0]
                for t in self.targets
            }
        return tuple(
            round_observation(
                self.layout,
                self.first_obs[target],
                self.history[target],
                pi_vector(
                    engine.num_clients,
                    self.selections[target].neighbors,
                    self.em_weights(target),
                )
                if t > 0
                else None,
                self.topology,
                data_size=self.data_size,
                seed=seed,
                round=t,
                motion=self.motion,
            )
            for target in self.targets
        )

    def decision(self) -> Decision:
        """Return the current selections as a decision (one schedule per target)."""
        return tuple(
            Schedule(
                np.asarray(self.selections[t].neighbors, dtype=np.int64),
                np.asarray(self.selections[t].subchannel, dtype=np.int64),
            )
            for t in self.targets
        )

    def round(self, engine: Any, t: int, decision: Decision) -> RoundResult:
        """Set each target's M_n from ``decision`` (one per target) and run round ``t``.

        The result's rows are the ``metrics.parquet`` rows of every client
        (:func:`rayfl.d2d.records.client_rows`).
        """
        for target, schedule in zip(self.targets, decision, strict=True):
            self.set_selection(
                target,
                tuple(int(c) for c in schedule.clients),
                tuple(int(f) for f in schedule.subchannel),
            )
        rows = self.run_method_round(t)
        train_loss = {int(r["client"]): r["train_loss"] for r in rows}
        for target in self.targets:
            record_round(
                self.history[target],
                target=target,
                chosen=self.selections[target].neighbors,
                arrived=self.arrived[target],
                train_loss=train_loss,
            )
        return RoundResult(t, rows, [int(r["client"]) for r in rows if r["delivered"]])

    def exhausted(self, engine: Any) -> bool:
        """Never: D2D has no upload budget."""
        return False

    def evaluate(self, engine: Any) -> list[EvalRow] | None:
        """None: the targets are evaluated inside the round."""
        return None

    def placement(self, engine: Any) -> dict[str, Any]:
        """Return the node of every node-hosting actor."""
        return {"client_actors": engine.pool.placement()}

    def summary(self, engine: Any) -> dict[str, Any]:
        """Return the selection and EM report (the ``d2d`` block of summary.json)."""
        return self.selection_report()

    def write_extra(self, engine: Any, run_dir: Path) -> None:
        """Nothing: the D2D report is in summary.json."""

    def close(self, engine: Any) -> None:
        """Nothing to kill beyond the pool (the engine closes it)."""

    def members_of(self, target: int) -> list[int]:
        """Return ``target``'s group of a federated baseline (``participants``)."""
        if self.topology.participants == "all":
            return list(range(self.engine.num_clients))
        return sorted({target, *self.selections[target].neighbors})

    def deliveries(
        self, round: int, target: int, senders: list[int]
    ) -> dict[int, bool]:
        """Return which senders' models reach ``target`` in ``round`` (link_model).

        The links of round t are those of round t's layout (:mod:`rayfl.d2d.motion`).
        """
        layout, error = self.motion.links(round, target)
        state = self.motion.link_state(round, target)
        if state is not None:  # away or late: reported in the rows
            for s in senders:
                why = state.reason(s)
                if why is not None:
                    self.dropped[s] = why
        return deliveries(
            self.topology,
            layout,
            self.selections[target],
            senders,
            round=round,
            seed=self.engine.config.seed,
            error=error,
            state=state,
        )

    def run_method_round(self, round: int) -> list[dict[str, Any]]:
        """Run one round of ``topology.method``; return one record per client."""
        method = self.topology.method
        self.dropped: dict[int, str] = {}  # sender → why it delivered nothing
        if method == "federated":
            return self._federated_round(round)
        return self._pfedwn_round(round, local_only=method == "local")

    def _pfedwn_round(self, round: int, *, local_only: bool) -> list[dict[str, Any]]:
        senders = sorted(
            {m for t in self.targets for m in self.selections[t].neighbors}
        )
        if local_only:
            senders = []
        personal = self.topology.neighbor_model == "personalized"
        refs, neighbor_rows, lost = neighbors_train(
            self.engine.pool,
            round=round,
            senders=senders,
            keep_personal=set(self.targets) if personal else set(),
            init_ref=self.init_ref,
        )
        arrived: dict[int, list[int]] = {}
        for t in self.targets:
            neighbors = [] if local_only else list(self.selections[t].neighbors)
            ok = self.deliveries(round, t, neighbors)
            arrived[t] = [m for m in neighbors if ok[m] and m not in lost]
            for m in arrived[t]:
                self.last_source[(t, m)] = refs[m]
        self.arrived = arrived
        self._em_round(round, arrived, local_only=local_only)
        target_rows = self._targets_round(round, arrived, local_only=local_only)
        self._after_round()
        return self._rows(round, target_rows, neighbor_rows, arrived, senders, lost)

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
                    self.engine.actors[int(self.engine.actor_of[t])].em_update.remote(
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
                self.engine.actors[int(self.engine.actor_of[t])].target_round.remote(
                    round, t, usable, sources, weights, alpha, self.init_ref, *dicts
                )
            )
        return list(ray.get(calls))

    def _after_round(self) -> None:
        """Give restarted actors their last snapshot back; snapshot every actor.

        An actor that cannot restart raises here (the run fails in this round).
        """
        assert self.engine.pool is not None
        self.engine.pool.restore_failed()
        snapshot_actors(
            self.engine.pool,
            max_actor_restarts=self.engine.config.ray.max_actor_restarts,
        )

    def _federated_round(self, round: int) -> list[dict[str, Any]]:
        from rayfl.algorithms.registry import algorithm_class

        algorithm = algorithm_class(self.engine.config.algorithm)
        target_rows, records, arrived, self.global_refs = federated_round(
            self.engine.pool,
            round=round,
            members={t: self.members[t] for t in self.targets},
            global_refs=self.global_refs,
            links=lambda t, senders: self.deliveries(round, t, senders),
            personalized=algorithm.personalized_downloads,
        )
        self.arrived = arrived
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
            num_clients=self.engine.num_clients,
            dim=self.engine.dim,
            selections=self.selections,
            target_rows=target_rows,
            train_rows=train_rows,
            arrived=arrived,
            senders=senders,
            lost=lost,
            dropped=self.dropped,
        )

    def set_selection(
        self, target: int, neighbors: tuple[int, ...], subchannel: tuple[int, ...]
    ) -> None:
        """Replace ``target``'s selected neighbors M_n from the next round on.

        An unchanged set only updates the sub-channels. A changed set keeps π
        of the neighbors that stay, gives each new neighbor 1/abs(M_n),
        renormalises, and restarts EM (unfrozen).

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
            old, neighbors, subchannel, num_clients=self.engine.num_clients
        )
        if self.selections[target].neighbors == old.neighbors:
            return
        self.em[target] = self.em[target].reselect(
            old.neighbors, self.selections[target].neighbors
        )
        self.members[target] = self.members_of(target)

    def selection_report(self) -> dict[str, Any]:
        """Return the layout, each target's neighbors, P^err and EM trajectory."""
        return selection_report(self.layout, self.selections, self.em, self.members)

    def state_dict(self, engine: Any) -> dict[str, Any]:
        """Return the run's state as plain data (:func:`~rayfl.d2d.snapshot.save_state`)."""
        return save_state(self, engine)

    def load_state_dict(self, engine: Any, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (:func:`~rayfl.d2d.snapshot.load_state`)."""
        load_state(self, engine, state)

    def em_weights(self, target: int) -> npt.NDArray[np.float64]:
        """Return the current π of ``target`` over its selected neighbors."""
        return np.exp(self.em[target].log_pi)
