"""HierarchicalRound: the engine's strategy for devices → edge servers → cloud.

One engine round (``rayfl.engine.Engine.run_round``) is one global round k.

Algorithm 2 of H2FDP (spec §3.1), with Algorithm 1's controller (§3.2) when
``topology.control.enabled``. Global round k (interval T_k of τ_k SGD steps):

    1. pick S_c^k (s_c^k devices per subnet, seeded) and η_k; compute every
       noise std of the interval (``rayfl.hierarchy.dp``);
    2. split τ_k into segments [m_k]·K + [τ_k − K m_k]; for each segment, every
       client actor trains its participants of subnet c from w̄_c and uploads one
       exact sum (untrusted: noised per device, in the actor); the edge
       adds its subnet noise when trusted and returns w̄_c;
    3. the last segment's edge output is v_c (the global aggregation replaces
       the local one, spec A3); the cloud averages the v_c (eq. 14) and every
       edge and device restarts from w̄^(t_{k+1});
    4. energy and delay of every upload (``rayfl.hierarchy.cost``), the observer
       ledger, edge-level metrics; with control, solve problem P for τ_{k+1},
       s_T, s_U (``rayfl.hierarchy.controller``).

The devices live in the engine's ``ActorPool`` (packing, memory check, CPU
reservation, names and restarts as for every topology); the edges and the cloud
are this strategy's own actors. Only ObjectRefs cross actors: the driver submits the whole round's calls
(devices → edge → devices → … → cloud) without waiting, then gets the small
records once per round.

Implementation details:
    1. Edges run with ``num_cpus=0`` and are pinned (soft node affinity) to the
       node of the client actor hosting most of their devices.
    2. With one edge, τ = m, no noise and ``weighting: data_size`` the run is the
       flat FedAvg run bit for bit (tests/hierarchy/test_system.py).
    3. Under control K_ℓ is fixed to the configured ⌈τ_0/m⌉ − 1 and
       m_k = max(1, ⌊τ_k/(K_ℓ + 1)⌋) (spec §8).
    4. PEDPFL: one aggregator, no local aggregation (m = τ) and no backhaul
       hop (spec §6, the choice drives the Fig. 5 gaps).
    5. How a scheduling action maps onto the hierarchy (DESIGN.md env/policy):
       each edge owns its own band, so the action space is the concatenation of
       per-edge actions ("device j of subnet c on subchannel k of edge c"); the
       participant set S_c^k is where such an action enters. Default
       (``scheduling.policy: uniform``): the seeded uniform choice of s_c^k
       devices (spec §2.5), capped at ``subchannels_per_edge`` when set. Any
       registered policy: one instance per edge on the flat env's observation
       table, its action mapped to S_c^k and to each device's subchannel, whose
       fading then prices the uploads (``rayfl.hierarchy.scheduling``);
       ``run_global_round(k, actions)`` takes the actions from outside
       (``envs.hierarchical``; build the engine with
       ``HierarchicalRound(external_actions=True)``).
    6. Attributes the engine does not define (``run_global_round``, ``reset``,
       ``edges``, ``cost``, ``tau``...) are readable on the engine itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.checkpoint import plain_attributes, restore_attributes
from rayfl.hierarchy.accounting import device_rows, edge_rows, record_ledger
from rayfl.hierarchy.cloud import HierCloudServer
from rayfl.hierarchy.config import HierSchedulingConfig
from rayfl.hierarchy.controller import ControlProblem, solve, step_size
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.device import DeviceActor
from rayfl.hierarchy.dp import ObserverLedger, stream_stds
from rayfl.hierarchy.edge import EdgeServer
from rayfl.hierarchy.scheduling import EdgeScheduling
from rayfl.hierarchy.topology import Topology, build_topology
from rayfl.seeding import rng_for
from rayfl.system import Decision, EvalRow, Observation, RoundResult, initial_vector

__all__ = ["HierarchicalRound", "segments"]


def segments(tau: int, period: int, num_local: int | None = None) -> list[int]:
    """Return the SGD steps between aggregations in one interval.

    Args:
        tau: τ_k.
        period: m_k.
        num_local: K_ℓ cap (None: as many as fit, ⌈τ/m⌉ − 1).

    Returns:
        [m]·K + [τ − K m] with K = min(K_ℓ, ⌈τ/m⌉ − 1).

    Example:
        >>> segments(20, 5), segments(7, 5), segments(3, 1, num_local=1)
        ([5, 5, 5, 5], [5, 2], [1, 2])
    """
    k = math.ceil(tau / period) - 1
    if num_local is not None:
        k = min(k, num_local)
    return [period] * k + [tau - k * period]


@dataclass(frozen=True)
class _Plan:
    """Global round k's choices: S_c^k, η_k, the segments, the noise stds."""

    k: int
    chosen: list[list[int]]
    participants: np.ndarray  # s_c^k, int64 (C,)
    eta: float
    segments: list[int]
    stds: Any  # rayfl.hierarchy.dp.stream_stds


@dataclass
class _Sent:
    """The round's submitted calls (refs only) and the edge models' refs."""

    edge_refs: list[Any]
    device_calls: list[tuple[int, int, list[int], Any]] = field(default_factory=list)
    actors: list[int] = field(default_factory=list)  # actor of each device call
    edge_calls: list[Any] = field(default_factory=list)
    periods: list[tuple[int, int]] = field(default_factory=list)  # (p, steps)


class HierarchicalRound:
    """The hierarchical topology as an engine strategy (``rayfl.system.Topology``).

    Args:
        external_actions: Per-edge actions may come from the caller of
            :meth:`run_global_round` (an env); rounds called without actions
            fall back to ``scheduling.policy``.

    Example:
        >>> system = build_system(load_config("examples/h2fdp.yaml"))  # doctest: +SKIP
        >>> result = system.run_round(0, (Schedule.of([]),))  # doctest: +SKIP
    """

    kind: ClassVar[str] = "hierarchical"

    def __init__(self, *, external_actions: bool = False) -> None:
        self.external_actions = external_actions
        self.engine: Any = None
        self.edges: list[Any] = []

    # ------------------------------------------------------------------ engine
    # What the engine owns (config, data, ω, the pool), read through it.
    @property
    def config(self) -> Any:
        """The run config (the engine's)."""
        return self.engine.config

    @property
    def global_ref(self) -> Any:
        """The ref of w̄ (the engine's)."""
        return self.engine.global_ref

    @global_ref.setter
    def global_ref(self, ref: Any) -> None:
        self.engine.global_ref = ref

    @property
    def actors(self) -> list[Any]:
        """The device-hosting actors (``engine.pool.actors``)."""
        return self.engine.pool.actors

    @property
    def groups(self) -> list[list[int]]:
        """Device ids of each actor (``engine.pool.groups``)."""
        return self.engine.pool.groups

    @property
    def actor_of(self) -> np.ndarray:
        """Actor index of each device (``engine.pool.actor_of``)."""
        return self.engine.pool.actor_of

    @property
    def num_clients(self) -> int:
        """N, the number of devices."""
        return int(self.engine.num_clients)

    @property
    def num_train(self) -> np.ndarray:
        """Training samples per device."""
        return self.engine.num_train

    @property
    def num_test(self) -> np.ndarray:
        """Test samples per device."""
        return self.engine.num_test

    @property
    def dim(self) -> int:
        """Model dimension."""
        return int(self.engine.dim)

    # ------------------------------------------------------------------ build
    def build(self, engine: Any) -> None:
        """Start the device actors (on ``engine.pool``), the edges and the cloud."""
        self.engine = engine
        cfg = engine.config
        topo = cfg.topology
        self.topology = build_topology(topo, engine.num_clients, cfg.seed)
        self.edge_of = self.topology.edge_of()
        self.setup = ActorSetup(
            config=cfg,
            input_shape=tuple(engine.data.input_shape),
            num_classes=engine.data.num_classes,
            reduce_in_actor=False,
        )
        engine.pool = ActorPool.start(
            DeviceActor,
            engine.data,
            self.setup,
            ray_settings=cfg.ray,
            dim=engine.dim,
            role="devices",
        )
        self._start_servers()
        mean_train = float(self.num_train.mean())
        #: q of eq. 15 only (sets σ, never the ledger, which uses q = 1).
        self.sample_rate = topo.dp.calibration_sample_rate or min(
            1.0, cfg.algorithm.batch_size / mean_train
        )
        self.dp_enabled = topo.dp.enabled and topo.baseline != "hfl"
        self.cost = CostModel(
            topo.cost,
            distance_m=self.topology.distance_m,
            model_dim=self.dim,
            backhaul=topo.baseline != "pedpfl",
        )
        self._build_scheduling()
        self._reset_schedule()

    def _start_servers(self) -> None:
        """Start one edge per subnet (on its devices' home node) and the cloud."""
        cfg = self.config
        nodes = self.engine.pool.nodes
        self.edges = []
        for c, members in enumerate(self.topology.subnets):
            home = int(np.bincount(self.actor_of[list(members)]).argmax())
            self.edges.append(
                EdgeServer.options(
                    num_cpus=0,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(
                        nodes[home], soft=True
                    ),
                ).remote(c, cfg.seed, bool(self.topology.trusted[c]))
            )
        self.cloud = HierCloudServer.options(num_cpus=0).remote(self.setup)
        self.edge_nodes: list[str] = ray.get([e.ping.remote() for e in self.edges])
        self.cloud_node: str = ray.get(self.cloud.ping.remote())

    def restart(self, engine: Any, seed: int) -> None:
        """Start over for ``engine.config`` (new seed) on the same actors.

        The subnets and trust flags drawn at build are kept (as the data
        partition is); the edges redraw their noise from the new seed.
        """
        ray.get([e.reset.remote(int(seed)) for e in self.edges])
        self._build_scheduling()
        self._reset_schedule()

    def _build_scheduling(self) -> None:
        """Build the per-edge policies of ``topology.scheduling`` (module detail 5)."""
        cfg = self.config
        topo = cfg.topology
        self.edge_scheduling: EdgeScheduling | None = None
        self.round_subchannel: dict[int, int] | None = None
        if topo.scheduling.uses_policy or self.external_actions:
            self.edge_scheduling = EdgeScheduling(
                topo.scheduling,
                cost=topo.cost,
                seed=cfg.seed,
                subnets=self.topology.subnets,
                distance_m=self.topology.distance_m,
                num_train=self.num_train,
                build_policies=topo.scheduling.uses_policy,
            )

    def reset(
        self,
        *,
        trusted: np.ndarray | None = None,
        dp_enabled: bool | None = None,
        epsilon: float | None = None,
        control: bool | None = None,
        scheduling: HierSchedulingConfig | None = None,
    ) -> None:
        """Start over from w⁰ on the same actors and data (sweeps, tests).

        Actor start-up dominates small runs, so a sweep over trust, ε or control
        reuses the actors: the schedule, ledger and logs restart, batches and
        noise are redrawn from the same keys (same seed ⇒ same run as a fresh
        system with that config).

        Args:
            trusted: New trust flags per edge (N,), or None to keep.
            dp_enabled: Turn DP on/off, or None to keep.
            epsilon: New ``topology.dp.epsilon``, or None to keep.
            control: Turn the controller on/off, or None to keep.
            scheduling: New ``topology.scheduling`` section (policy, K_e), or
                None to keep.
        """
        cfg = self.config
        topo = cfg.topology
        if epsilon is not None:
            topo = topo.model_copy(
                update={"dp": topo.dp.model_copy(update={"epsilon": float(epsilon)})}
            )
        if control is not None:
            topo = topo.model_copy(
                update={"control": topo.control.model_copy(update={"enabled": control})}
            )
        if scheduling is not None:
            topo = topo.model_copy(update={"scheduling": scheduling})
        self.engine.config = cfg.model_copy(update={"topology": topo})
        if scheduling is not None:
            self._build_scheduling()
        if trusted is not None:
            self.topology = Topology(
                self.topology.subnets,
                np.asarray(trusted, bool),
                self.topology.distance_m,
            )
        if dp_enabled is not None:
            self.dp_enabled = bool(dp_enabled)
        data = self.engine.data
        vector = initial_vector(self.config, tuple(data.input_shape), data.num_classes)
        self.global_ref = ray.put(vector)
        self._reset_schedule()

    def _reset_schedule(self) -> None:
        topo = self.config.topology
        self.tau = topo.tau
        self.period = topo.tau if topo.baseline == "pedpfl" else topo.local_period
        self.num_local = (
            len(segments(self.tau, self.period)) - 1 + int(topo.local_at_global)
        )
        self.participants = self.topology.sizes.copy()
        self.steps_done = 0
        self.period_index = 0
        self.beta_hat = float("nan")
        self.uplink = ObserverLedger(
            self.num_clients, delta=topo.dp.delta, strict=topo.dp.strict_accounting
        )
        self.control_refs = None
        self.edge_rows = []
        self.local_update_count = np.zeros(self.num_clients, dtype=np.int64)
        if getattr(self, "edge_scheduling", None) is not None:
            self.edge_scheduling.reset()

    def placement(self, engine: Any) -> dict[str, Any]:
        """Return where the actors run (device actors, edges, cloud)."""
        nodes = engine.pool.nodes
        return {
            "client_actors": engine.pool.placement(),
            "edges": [
                {"node": node, "clients": list(s), "trusted": bool(t)}
                for node, s, t in zip(
                    self.edge_nodes,
                    self.topology.subnets,
                    self.topology.trusted,
                    strict=True,
                )
            ],
            "edges_on_home_node": sum(
                node == nodes[int(np.bincount(self.actor_of[list(s)]).argmax())]
                for node, s in zip(self.edge_nodes, self.topology.subnets, strict=True)
            ),
            "cloud": self.cloud_node,
            "num_nodes": len(set(nodes) | set(self.edge_nodes) | {self.cloud_node}),
        }

    # ------------------------------------------------------------------ round
    def learning_rate(self, k: int) -> float:
        """Return η_k for the configured mode."""
        lr = self.config.topology.lr
        if lr.mode == "constant":
            return float(self.config.algorithm.lr)
        if lr.mode == "manual" or not np.isfinite(self.beta_hat) or self.beta_hat <= 0:
            return lr.gamma / math.sqrt(k + 1)
        return step_size(
            k=k,
            tau_prev=self.tau,
            num_global=self.config.rounds,
            beta_hat=self.beta_hat,
        )

    def scheduling_observations(self, k: int) -> list[dict[str, np.ndarray]]:
        """Return each edge's observation for global round k (policy path)."""
        sch = self.edge_scheduling
        if sch is None:
            raise RuntimeError("topology.scheduling.policy is uniform: no observations")
        if "loss" in sch.needed_keys and np.isnan(sch.loss).all():
            sch.loss = np.array([r["test_loss"] for r in self.evaluate(self.engine)])
        eps = None
        if "privacy_spent" in sch.needed_keys and self.dp_enabled:
            eps = self.uplink.epsilons()[0]
        return sch.observations(
            k,
            self.period_index,
            self.participants,
            upload_count=self.local_update_count,
            privacy_spent=eps,
        )

    def _choose_participants(
        self, k: int, actions: list[Any] | None = None
    ) -> list[list[int]]:
        self.round_subchannel = None
        sch = self.edge_scheduling
        if sch is not None and (actions is not None or sch.policies):
            if actions is None:
                actions = sch.decide(self.scheduling_observations(k))
            chosen, self.round_subchannel = sch.to_participants(
                actions, self.participants
            )
            return chosen
        if actions is not None:
            raise ValueError(
                "actions need topology.scheduling.policy (or external_actions=True)"
            )
        cap = self.config.topology.scheduling.subchannels_per_edge
        out = []
        for c, members in enumerate(self.topology.subnets):
            s = int(min(self.participants[c], len(members)))
            if cap is not None:
                s = min(s, cap)
            if s >= len(members):
                out.append(list(members))
                continue
            rng = rng_for(self.config.seed, "hier_participants", round=k, client=c)
            out.append(
                sorted(int(i) for i in rng.choice(members, size=s, replace=False))
            )
        return out

    def run_global_round(
        self, k: int, actions: list[Any] | None = None
    ) -> tuple[RoundResult, dict[str, Any]]:
        """Run interval k (τ_k steps, local and global aggregations).

        Args:
            k: Global round index.
            actions: One flat-env action per edge (``rayfl.hierarchy.scheduling``);
                None: ``topology.scheduling.policy`` decides.

        Returns:
            The per-device rows (as the flat engine's) and the round's extras
            (energy, delay, τ_k, s, η_k, noise stds...).
        """
        plan = self._plan(k, actions)
        self.engine.pool.restore_failed()  # restarted device actors get their state
        sent = self._submit_segments(plan)
        previous = self.global_ref
        edge_evals = self._global_step(plan, sent)
        # one wait per round: all small records (a dead actor's come back None)
        pool = self.engine.pool
        device_records = pool.gather([d[3] for d in sent.device_calls], sent.actors)
        edge_records = ray.get(sent.edge_calls)
        evals = pool.gather([r for _, r, _ in edge_evals], [a for *_, a in edge_evals])
        result, extras = self._settle(
            plan,
            sent,
            device_records=device_records,
            edge_records=edge_records,
            edge_evals=[(c, e) for (c, _, _), e in zip(edge_evals, evals, strict=True)],
        )
        self._control(k, previous, plan.chosen)
        return result, extras

    def _plan(self, k: int, actions: list[Any] | None) -> _Plan:
        """Choose S_c^k, η_k, the segments and every noise std of interval k."""
        cfg = self.config
        topo = cfg.topology
        chosen = self._choose_participants(k, actions)
        s_now = np.array([len(p) for p in chosen], dtype=np.int64)
        eta = self.learning_rate(k)
        plan_local = (
            None
            if not topo.control.enabled
            else self.num_local - int(topo.local_at_global)
        )
        stds = stream_stds(
            topo.dp,
            enabled=self.dp_enabled,
            trusted=self.topology.trusted,
            participants=s_now,
            learning_rate=eta,
            tau=self.tau,
            period=self.period,
            num_global=cfg.rounds,
            num_local=self.num_local,
            sample_rate=self.sample_rate,
            batch_size=cfg.algorithm.batch_size,
        )
        segs = segments(self.tau, self.period, plan_local)
        return _Plan(k, chosen, s_now, eta, segs, stds)

    def _submit_segments(self, plan: _Plan) -> _Sent:
        """Submit every segment's device training and edge aggregation (no wait)."""
        topo = self.config.topology
        trusted = self.topology.trusted
        stds = plan.stds
        sent = _Sent(edge_refs=[self.global_ref] * len(self.edges))
        for j, steps in enumerate(plan.segments):
            p = self.period_index
            self.period_index += 1
            sent.periods.append((p, steps))
            is_global = j == len(plan.segments) - 1 and not topo.local_at_global
            new_refs = []
            for c in range(len(plan.chosen)):
                device_std = 0.0
                if not trusted[c]:
                    device_std = (
                        stds.device_global[c] if is_global else stds.device_local[c]
                    )
                sums = self._submit_devices(plan, sent, c, p, steps, device_std)
                edge_std = 0.0
                if trusted[c]:
                    edge_std = stds.edge_global[c] if is_global else stds.edge_local[c]
                new, rec = (
                    self.edges[c]
                    .aggregate.options(num_returns=2)
                    .remote(p, sent.edge_refs[c], float(edge_std), 0.0, *sums)
                )
                new_refs.append(new)
                sent.edge_calls.append(rec)
            sent.edge_refs = new_refs
        if topo.local_at_global:  # spec A3 option: a global-only release on top
            self._submit_global_only(plan, sent)
        return sent

    def _submit_devices(
        self, plan: _Plan, sent: _Sent, c: int, p: int, steps: int, std: float
    ) -> list[Any]:
        """Submit subnet c's segment to each actor hosting its participants."""
        members = plan.chosen[c]
        g = self.config.topology.dp.grad_bound
        equal = self.config.topology.weighting == "equal"
        sums = []
        for a in np.unique(self.actor_of[members]) if members else []:
            mine = [i for i in members if self.actor_of[i] == a]
            recs, fixed = (
                self.actors[a]
                .train_segment.options(num_returns=2)
                .remote(
                    p,
                    sent.edge_refs[c],
                    mine,
                    plan.eta,
                    steps,
                    None if g is None else plan.eta * steps * g,
                    [float(std)] * len(mine),
                    equal,
                )
            )
            sent.device_calls.append((c, p, mine, recs))
            sent.actors.append(int(a))
            # wrapped: the edge fetches it, so a lost actor is a lost upload
            sums.append([fixed])
        return sums

    def _submit_global_only(self, plan: _Plan, sent: _Sent) -> None:
        """Submit the ``local_at_global`` release: each edge noises its v_c."""
        p = self.period_index
        self.period_index += 1
        stds = plan.stds
        new_refs = []
        for c in range(len(self.edges)):
            if self.topology.trusted[c]:
                std, extra = stds.edge_global[c], 0.0
            else:
                std, extra = (
                    0.0,
                    stds.device_global[c] / math.sqrt(max(plan.participants[c], 1)),
                )
            new, rec = (
                self.edges[c]
                .aggregate.options(num_returns=2)
                .remote(p, sent.edge_refs[c], float(std), float(extra))
            )
            new_refs.append(new)
            sent.edge_calls.append(rec)
        sent.edge_refs = new_refs

    def _global_step(self, plan: _Plan, sent: _Sent) -> list[tuple[int, Any, int]]:
        """Submit the cloud's average of the v_c (eq. 14) and the subnet evaluations.

        Returns:
            ``(edge, evaluation ref, actor)`` of each subnet evaluation call.
        """
        topo = self.config.topology
        if topo.weighting == "equal":
            weights = [1.0] * len(self.edges)
        else:
            weights = [float(self.num_train[list(m)].sum()) for m in plan.chosen]
        self.global_ref = self.cloud.global_aggregate.remote(weights, *sent.edge_refs)
        edge_evals = []
        if topo.edge_eval:
            for c, members in enumerate(self.topology.subnets):
                for a in np.unique(self.actor_of[list(members)]):
                    mine = [i for i in members if self.actor_of[i] == a]
                    ref = self.actors[a].evaluate.remote(sent.edge_refs[c], mine)
                    edge_evals.append((c, ref, int(a)))
        return edge_evals

    def _fading(self, k: int, c: int, p: int, mine: list[int]) -> np.ndarray:
        """Return the fading of each upload of ``mine`` (subnet c, period p)."""
        sch, subch = self.edge_scheduling, self.round_subchannel
        if sch is not None and subch is not None:  # the assigned subchannel's
            key = sch.fading_key(k, p)
            return np.array(
                [sch.fading(key, i, sch.num_subchannels[c])[subch[i]] for i in mine]
            )
        seed = self.config.seed
        return np.array(
            [
                rng_for(seed, "hier_fading", round=p, client=i).exponential(1.0)
                for i in mine
            ]
        )

    def _settle(
        self,
        plan: _Plan,
        sent: _Sent,
        *,
        device_records: list[Any],
        edge_records: list[dict[str, Any]],
        edge_evals: list[tuple[int, Any]],
    ) -> tuple[RoundResult, dict[str, Any]]:
        """Turn the round's records into rows, ledger releases, edge rows, extras."""
        topo = self.config.topology
        trusted = self.topology.trusted
        rows, energy, delay, refused = device_rows(
            calls=sent.device_calls,
            records=device_records,
            fading_of=lambda c, p, mine: self._fading(plan.k, c, p, mine),
            cost=self.cost,
            subchannel=self.round_subchannel,
            upload_count=self.local_update_count,
            num_edges=len(self.edges),
        )
        hop_energy, hop_delay = self.cost.global_hop()
        energy += hop_energy
        delay += hop_delay
        record_ledger(
            ledger=self.uplink,
            chosen=plan.chosen,
            refused=refused,
            trusted=trusted,
            stds=plan.stds,
            steps=[steps for _, steps in sent.periods],
            local_at_global=topo.local_at_global,
            equal_weights=topo.weighting == "equal",
            num_train=self.num_train,
            learning_rate=plan.eta,
            grad_bound=topo.dp.grad_bound,
            dp_enabled=self.dp_enabled,
        )
        if self.dp_enabled:
            self.uplink.nominal_epsilon = topo.dp.epsilon * math.sqrt(
                (plan.k + 1) / self.config.rounds
            )
        self.edge_rows += edge_rows(
            k=plan.k,
            trusted=trusted,
            participants=plan.participants,
            stds=plan.stds,
            edge_records=edge_records,
            edge_evals=edge_evals,
            num_test=self.num_test,
            energy=energy,
            delay=delay,
        )
        self.steps_done += self.tau
        extras = self._extras(plan, energy=energy, delay=delay)
        if self.edge_scheduling is not None:
            self.edge_scheduling.observe(plan.chosen, rows)
        delivered = sorted(r["client"] for r in rows if r["delivered"])
        return RoundResult(plan.k, rows, delivered), extras

    def _extras(
        self, plan: _Plan, *, energy: np.ndarray, delay: np.ndarray
    ) -> dict[str, Any]:
        """Return the round's ``rounds.parquet`` columns (τ_k, η_k, s, costs, σ)."""
        trusted = self.topology.trusted
        s_now, stds = plan.participants, plan.stds
        nan = float("nan")
        local_at_global = self.config.topology.local_at_global
        return {
            "tau": int(self.tau),
            "local_period": int(self.period),
            "num_local_aggregations": len(plan.segments) - 1 + int(local_at_global),
            "eta": float(plan.eta),
            "s_trusted_mean": float(s_now[trusted].mean()) if trusted.any() else nan,
            "s_untrusted_mean": float(s_now[~trusted].mean())
            if (~trusted).any()
            else nan,
            "energy_j": float(energy.sum()),
            "latency_s": float(delay.sum()),
            "sigma_device_local": float(stds.device_local.max()),
            "sigma_device_global": float(stds.device_global.max()),
            "sigma_edge_local": float(stds.edge_local.max()),
            "sigma_edge_global": float(stds.edge_global.max()),
            "beta_hat": float(self.beta_hat),
            "steps_done": int(self.steps_done),
        }

    # ------------------------------------------------------------------ control
    def _control(self, k: int, previous: Any, chosen: list[list[int]]) -> None:
        """Algorithm 1 lines 33–35: estimate β̂, then solve P for the next interval."""
        cfg = self.config
        topo = cfg.topology
        if topo.lr.mode == "theory":
            self._estimate_smoothness(previous, chosen)
        if not topo.control.enabled:
            return
        ctl = topo.control
        dp = topo.dp
        trusted = self.topology.trusted
        sizes = self.topology.sizes
        n = len(sizes)
        e_dev = np.array(
            [self.cost.expected_energy_j[list(m)].mean() for m in self.topology.subnets]
        )
        t_dev = np.array(
            [self.cost.expected_time_s[list(m)].mean() for m in self.topology.subnets]
        )
        hop_e, hop_d = self.cost.global_hop()
        model_dim = ctl.model_dim or self.dim
        eps = dp.epsilon / 2 if dp.strict_accounting else dp.epsilon
        g = dp.grad_bound or 1.0
        nu_scale = (
            4
            * model_dim
            * self.sample_rate**2
            * g**2
            * math.log(1 / dp.delta)
            / (n**2 * eps**2)
        )
        total_steps = cfg.rounds * topo.tau
        base = ControlProblem(
            trusted=trusted,
            sizes=sizes,
            energy_j=e_dev,
            time_s=t_dev,
            backhaul_energy_j=hop_e,
            backhaul_delay_s=hop_d,
            remaining_steps=max(1, total_steps - self.steps_done),
            tau_max=ctl.tau_max,
            num_local=self.num_local - int(topo.local_at_global),
            nu_scale=nu_scale,
            edge_constant=dp.edge_constant,
            device_constant=dp.device_constant,
            alpha_energy=ctl.alpha_energy,
            alpha_delay=ctl.alpha_delay,
            alpha_dp=ctl.alpha_dp,
        )
        if self.control_refs is None:  # normalisers at (τ_0, full s), k = 0
            ref = base.__class__(**{**base.__dict__, "remaining_steps": total_steps})
            e0, d0, nu0 = ref.terms(topo.tau, int(sizes.max()), int(sizes.max()))
            if ctl.normalize_costs:
                self.control_refs = (e0, d0, nu0)
            else:
                self.control_refs = (1.0, 1.0, nu0 / (e0 + d0))
        e_ref, d_ref, nu_ref = self.control_refs
        problem = base.__class__(
            **{
                **base.__dict__,
                "energy_ref": e_ref,
                "delay_ref": d_ref,
                "nu_ref": nu_ref,
            }
        )
        tau, s_t, s_u = solve(problem)
        self.tau = int(tau)
        self.period = max(1, self.tau // (problem.num_local + 1))
        self.participants = np.where(trusted, s_t, s_u).astype(np.int64)

    def _estimate_smoothness(self, previous: Any, chosen: list[list[int]]) -> None:
        """Set β̂ to the largest smoothness estimate of up to 4 participants per actor."""
        calls, called = [], []
        for a, group in enumerate(self.groups):
            part = [i for i in group if any(i in m for m in chosen)][:4]
            if part:
                calls.append(
                    self.actors[a].smoothness.remote(previous, self.global_ref, part)
                )
                called.append(a)
        values = [
            v
            for v in self.engine.pool.gather(calls, called)
            if v is not None and v > 0  # None: the actor died
        ]
        if values:
            self.beta_hat = float(max(values))

    # ------------------------------------------------------------------ eval
    def evaluate(self, engine: Any) -> list[EvalRow]:
        """Evaluate the global model on every device's test split, by id.

        Devices of an actor that fails during evaluation get NaN metrics.
        """
        pool = engine.pool
        pool.restore_failed()
        refs = [a.evaluate.remote(self.global_ref) for a in pool.actors]
        batches = pool.gather(refs, list(range(len(pool.actors))))
        nan = float("nan")
        rows = []
        for a, batch in enumerate(batches):
            if batch is None:
                batch = [
                    {"client": c, "test_loss": nan, "test_acc": nan}
                    for c in pool.groups[a]
                ]
            rows += batch
        return sorted(rows, key=lambda r: r["client"])

    def local_updates(self, engine: Any) -> list[int]:
        """Return the number of local segments each device trained."""
        return self.local_update_count.tolist()

    # ------------------------------------------------------------------ Topology
    def num_units(self, engine: Any) -> int:
        """One unit: the edges' participants are chosen inside the round."""
        return 1

    def observe(self, engine: Any, t: int) -> tuple[Observation, ...]:
        """No observation: ``topology.scheduling`` decides inside the round."""
        return ({},)

    def exhausted(self, engine: Any) -> bool:
        """Never: the hierarchy has no upload budget."""
        return False

    def round(self, engine: Any, t: int, decision: Decision) -> RoundResult:
        """Run global round ``t`` (the decision is unused: see :meth:`observe`)."""
        result, extras = self.run_global_round(t)
        return RoundResult(t, result.rows, result.delivered, extras)

    def summary(self, engine: Any) -> dict[str, Any]:
        """The hierarchy adds nothing to ``summary.json`` (edges.parquet holds it)."""
        return {}

    def write_extra(self, engine: Any, run_dir: Path) -> None:
        """Write ``edges.parquet`` (one row per global round × edge)."""
        from rayfl.results import _write_parquet

        if self.edge_rows:
            _write_parquet(Path(run_dir) / "edges.parquet", self.edge_rows)

    def state_dict(self, engine: Any) -> dict[str, Any]:
        """Return the run state for a checkpoint (the engine adds ``global``)."""
        return {
            "ledger": self.uplink.state_dict(),
            "schedule": {
                "tau": self.tau,
                "period": self.period,
                "participants": self.participants.tolist(),
                "steps_done": self.steps_done,
                "period_index": self.period_index,
                "beta_hat": self.beta_hat,
                "control_refs": self.control_refs,
                "local_update_count": self.local_update_count.tolist(),
            },
            "edge_rows": list(self.edge_rows),
            **(
                {"scheduling": self._scheduling_state()}
                if self.edge_scheduling is not None
                else {}
            ),
        }

    def _scheduling_state(self) -> dict[str, Any]:
        """The edge scheduling state, policies reduced to their plain-data attributes."""
        assert self.edge_scheduling is not None
        state = self.edge_scheduling.state_dict()
        return {**state, "policies": [plain_attributes(p) for p in state["policies"]]}

    def load_state_dict(self, engine: Any, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the engine restores ``global``)."""
        self.uplink.load_state_dict(state["ledger"])
        s = state["schedule"]
        self.tau, self.period = int(s["tau"]), int(s["period"])
        self.participants = np.asarray(s["participants"], dtype=np.int64)
        self.steps_done, self.period_index = (
            int(s["steps_done"]),
            int(s["period_index"]),
        )
        self.beta_hat = float(s["beta_hat"])
        self.control_refs = s["control_refs"]
        self.local_update_count = np.asarray(s["local_update_count"], dtype=np.int64)
        self.edge_rows = list(state["edge_rows"])
        if self.edge_scheduling is not None and "scheduling" in state:
            saved = state["scheduling"]
            policies = self.edge_scheduling.policies  # rebuilt from the config
            for policy, attributes in zip(policies, saved["policies"], strict=True):
                restore_attributes(policy, attributes)
            self.edge_scheduling.load_state_dict({**saved, "policies": policies})

    def close(self, engine: Any) -> None:
        """Kill the edges and the cloud (the engine closes the pool)."""
        for edge in self.edges:
            ray.kill(edge)
        if hasattr(self, "cloud"):
            ray.kill(self.cloud)
        self.edges = []
