"""HierarchicalRound: the engine's strategy for devices → edge servers → cloud.

One engine round (``rayfl.engine.Engine.run_round``) is one global round k.

Algorithm 2 of H2FDP (spec §3.1), with Algorithm 1's controller (§3.2) when
``topology.control.enabled``. Global round k (interval T_k of τ_k SGD steps):

    1. take S_c^k from the decision (one schedule per edge, at most s_c^k
       devices) and pick η_k; compute every noise std of the interval
       (``rayfl.hierarchy.dp``);
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
    1. Edges take no CPU and sit on their devices' node (``servers``).
    2. With one edge, τ = m, no noise and ``weighting: data_size`` the run is the
       flat FedAvg run bit for bit (tests/hierarchy/test_system.py).
    3. Under control K_ℓ is fixed to the configured ⌈τ_0/m⌉ − 1 and
       m_k = max(1, ⌊τ_k/(K_ℓ + 1)⌋) (spec §8).
    4. PEDPFL: one aggregator, no local aggregation (m = τ) and no backhaul
       hop (spec §6, the choice drives the Fig. 5 gaps).
    5. Each edge is a decision unit: :meth:`observe` gives its band's
       observation (``rayfl.hierarchy.scheduling``) and the decision holds its
       schedule, made by its policy (``rayfl.hierarchy.deciders``; ``uniform``
       by default, the paper's seeded choice of s_c^k devices); an assigned
       subchannel's fading prices the upload. ``run_global_round(k, schedules)``
       also takes an env's per-edge schedules (``external_actions=True``).
    6. Attributes the engine does not define (``run_global_round``, ``reset``,
       ``edges``, ``cost``, ``interval``...) are readable on the engine itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import ray

from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.hierarchy.accounting import RoundRecords, settle_round
from rayfl.hierarchy.config import HierSchedulingConfig
from rayfl.hierarchy.control import estimate_smoothness, learning_rate, next_interval
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.deciders import edge_policies
from rayfl.hierarchy.device import DeviceActor, evaluate_devices
from rayfl.hierarchy.dp import ObserverLedger
from rayfl.hierarchy.interval import Interval
from rayfl.hierarchy.scheduling import OBS_KEYS, EdgeScheduling, upload_fading
from rayfl.hierarchy.servers import Servers
from rayfl.hierarchy.submit import Plan, RoundCalls, make_plan, segments
from rayfl.hierarchy.topology import build_topology
from rayfl.registry import policy_class, topology_of
from rayfl.system import Decision, EvalRow, Observation, RoundResult

__all__ = ["HierarchicalRound", "segments"]


class HierarchicalRound:
    """The hierarchical topology as an engine strategy (``rayfl.system.RoundStrategy``).

    Args:
        external_actions: An env's agent gives the per-edge actions
            (:meth:`run_global_round`).
        observed_keys: The observation keys the deciders read (the costly
            ``loss`` and ``privacy_spent`` are filled only when listed). None:
            the configured policy's ``required_keys``; with
            ``external_actions`` and the topology's default policy (no policy
            named: the env's agent decides), every key.

    Example:
        >>> system = build_system(load_config("examples/h2fdp.yaml"))  # doctest: +SKIP
        >>> everyone = tuple(map(Schedule.of, system.edge_scheduling.subnets))  # doctest: +SKIP
        >>> result = system.run_round(0, everyone)  # doctest: +SKIP
    """

    kind: ClassVar[str] = "hierarchical"

    def __init__(
        self,
        *,
        external_actions: bool = False,
        observed_keys: Iterable[str] | None = None,
    ) -> None:
        self.external_actions = external_actions
        self.observed_keys = None if observed_keys is None else tuple(observed_keys)
        self.engine: Any = None
        self.servers: Servers | None = None
        self._policies: list[Any] | None = None  # built when a script needs them

    # ------------------------------------------------------------------ engine
    # What the engine owns (config, data, ω, the pool), read through it
    # (``num_train``, ``dim``... are read as ``self.engine.num_train``).
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
    def edges(self) -> list[Any]:
        """The edge server actors, one per subnet."""
        return [] if self.servers is None else self.servers.edges

    @property
    def cloud(self) -> Any:
        """The cloud actor."""
        return None if self.servers is None else self.servers.cloud

    # ------------------------------------------------------------------ build
    def build(self, engine: Any) -> None:
        """Start the device actors (on ``engine.pool``), the edges and the cloud."""
        self.engine = engine
        cfg = engine.config
        topo = cfg.topology
        self.topology = build_topology(topo, engine.num_clients, cfg.seed)
        self.edge_of = self.topology.edge_of()
        self.setup = ActorSetup.from_config(
            cfg,
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
        self.servers = Servers.start(self.topology, engine.pool, self.setup, cfg.seed)
        #: q of eq. 15 only (sets σ, never the ledger, which uses q = 1).
        self.sample_rate = topo.dp.calibration_sample_rate or min(
            1.0, cfg.algorithm.batch_size / float(engine.num_train.mean())
        )
        self.dp_enabled = topo.dp.enabled and topo.baseline != "hfl"
        self.cost = CostModel(
            topo.cost,
            distance_m=self.topology.distance_m,
            model_dim=self.engine.dim,
            backhaul=topo.baseline != "pedpfl",
        )
        self._build_scheduling()
        self._reset_schedule()

    def restart(self, engine: Any, seed: int) -> None:
        """Start over for ``engine.config`` (new seed) on the same actors.

        The subnets and trust flags drawn at build are kept (as the data
        partition is); the devices start from empty state with the new seed
        (batch order, device noise), the edges redraw their noise from it.
        """
        assert self.servers is not None  # started in build()
        self.setup = replace(self.setup, seed=int(seed))
        ray.get([a.reset.remote(self.setup) for a in engine.pool.actors])
        self.servers.reset(seed)
        self._build_scheduling()
        self._reset_schedule()

    def _build_scheduling(self) -> None:
        """Build the edges' bands and observations (``rayfl.hierarchy.scheduling``)."""
        cfg = self.config
        topo = cfg.topology
        needed = self.observed_keys
        if needed is None:  # the configured policy's keys; an env's agent: all
            agent = cfg.scheduler.policy == topology_of(cfg).default_policy
            if self.external_actions and agent:
                needed = OBS_KEYS
            else:
                needed = policy_class(cfg.scheduler.policy).required_keys
        self.edge_scheduling = EdgeScheduling(
            topo.scheduling,
            cost=topo.cost,
            seed=cfg.seed,
            subnets=self.topology.subnets,
            distance_m=self.topology.distance_m,
            num_train=self.engine.num_train,
            needed_keys=needed,
        )

    def reset(
        self,
        *,
        trusted: np.ndarray | None = None,
        dp_enabled: bool | None = None,
        epsilon: float | None = None,
        control: bool | None = None,
        scheduling: HierSchedulingConfig | None = None,
        scheduler: Any = None,  # a rayfl.config.SchedulerConfig
    ) -> None:
        """Change the config, then :meth:`restart` with the same seed (sweeps, tests).

        A sweep over trust, ε or control reuses the actors (start-up dominates
        small runs); w⁰, batches and noise are redrawn from the same keys, so
        the same seed gives the run of a fresh system with that config.

        Args:
            trusted: New trust flags per edge (N,), or None to keep.
            dp_enabled: Turn DP on/off, or None to keep.
            epsilon: New ``topology.dp.epsilon``, or None to keep.
            control: Turn the controller on/off, or None to keep.
            scheduling: New ``topology.scheduling`` section (K_e, fading), or
                None to keep.
            scheduler: New ``scheduler`` section (the edges' policy), or None
                to keep.
        """
        topo = self.config.topology.changed(
            epsilon=epsilon, control=control, scheduling=scheduling
        )
        update: dict[str, Any] = {"topology": topo}
        if scheduler is not None:
            update["scheduler"] = scheduler
        self.engine.config = self.config.model_copy(update=update)
        if trusted is not None:
            self.topology = replace(self.topology, trusted=np.asarray(trusted, bool))
        if dp_enabled is not None:
            self.dp_enabled = bool(dp_enabled)
        self.engine.restart(self.config.seed)  # w⁰, the edges' seed, the bands

    def _reset_schedule(self) -> None:
        topo, n = self.config.topology, self.engine.num_clients
        self.interval = Interval.start(topo, sizes=self.topology.sizes, num_clients=n)
        dp = topo.dp
        self.uplink = ObserverLedger(n, delta=dp.delta, strict=dp.strict_accounting)
        self.edge_rows: list[dict[str, Any]] = []
        self.edge_scheduling.reset()
        self._policies = None

    def placement(self, engine: Any) -> dict[str, Any]:
        """Return where the actors run (device actors, edges, cloud)."""
        assert self.servers is not None  # started in build()
        return self.servers.placement(engine.pool, self.topology)

    # ------------------------------------------------------------------ round
    def learning_rate(self, k: int) -> float:
        """Return η_k for the configured mode."""
        return learning_rate(
            self.config.topology,
            k=k,
            base_lr=self.config.algorithm.lr,
            beta_hat=self.interval.beta_hat,
            tau=self.interval.tau,
            num_global=self.config.rounds,
        )

    def scheduling_observations(self, k: int) -> list[dict[str, np.ndarray]]:
        """Return each edge's observation for global round k (the units')."""
        sch = self.edge_scheduling
        if "loss" in sch.needed_keys and np.isnan(sch.loss).all():
            sch.loss = np.array([r["test_loss"] for r in self.evaluate(self.engine)])
        eps = None
        if "privacy_spent" in sch.needed_keys and self.dp_enabled:
            eps = self.uplink.epsilons()[0]
        return sch.observations(
            k,
            self.interval.period_index,
            self.interval.participants,
            upload_count=self.interval.local_update_count,
            privacy_spent=eps,
        )

    def _decision(self, k: int, actions: Sequence[Any] | None) -> Decision:
        """Return round k's decision: the given schedules, or the own policies'."""
        if actions is not None:
            return tuple(actions)
        if self._policies is None:
            self._policies = edge_policies(self.config, self.engine)
        observations = self.scheduling_observations(k)
        return tuple(
            rules.to_schedule(policy(obs))[0]
            for (policy, rules), obs in zip(self._policies, observations, strict=True)
        )

    def run_global_round(
        self, k: int, actions: Sequence[Any] | None = None
    ) -> tuple[RoundResult, dict[str, Any]]:
        """Run interval k (τ_k steps, local and global aggregations).

        Args:
            k: Global round index.
            actions: The decision (one ``Schedule`` per edge: the engine's, or
                an env's agent's through ``rayfl.hierarchy.deciders.EdgeActions``),
                or None: ``scheduler.policy`` decides, one instance per
                edge built for this round's caller (scripts).

        Returns:
            The per-device rows (as the flat engine's) and the round's extras
            (energy, delay, τ_k, s, η_k, noise stds...).
        """
        plan = self._plan(k, actions)
        self.engine.pool.restore_failed()  # restarted device actors get their state
        calls = self._calls()
        sent = calls.submit_segments(
            plan, global_ref=self.global_ref, first_period=self.interval.period_index
        )
        self.interval.period_index += len(plan.segments) + int(
            self.config.topology.local_at_global
        )
        previous = self.global_ref
        if self.config.topology.weighting == "equal":
            weights = [1.0] * len(self.edges)
        else:
            weights = [float(self.engine.num_train[list(m)].sum()) for m in plan.chosen]
        self.global_ref, edge_evals = calls.global_step(sent, weights)
        # one wait per round: all small records (a dead actor's come back None)
        pool = self.engine.pool
        device_records = pool.gather([d[3] for d in sent.device_calls], sent.actors)
        edge_records = ray.get(sent.edge_calls)
        evals = pool.gather([r for _, r, _ in edge_evals], [a for *_, a in edge_evals])
        result = self._settle(
            plan,
            RoundRecords(
                plan,
                sent,
                devices=device_records,
                edges=edge_records,
                evals=[(c, e) for (c, _, _), e in zip(edge_evals, evals, strict=True)],
            ),
        )
        self._control(k, previous, plan.chosen)
        return result, result.extras

    def _plan(self, k: int, actions: Sequence[Any] | None) -> Plan:
        """Take S_c^k from the decision; choose η_k, the segments, the noise stds."""
        chosen, subchannel = self.edge_scheduling.participants_of(
            self._decision(k, actions), self.interval.participants
        )
        return make_plan(
            k,
            chosen,
            subchannel=subchannel,
            topo=self.config.topology,
            interval=self.interval,
            eta=self.learning_rate(k),
            dp_enabled=self.dp_enabled,
            trusted=self.topology.trusted,
            num_global=self.config.rounds,
            sample_rate=self.sample_rate,
        )

    def _calls(self) -> RoundCalls:
        """Return who this round calls (after the pool restored lost actors)."""
        return RoundCalls(
            topology=self.config.topology,
            edges=self.edges,
            cloud=self.cloud,
            actors=self.actors,
            actor_of=self.engine.actor_of,
            trusted=self.topology.trusted,
            subnets=self.topology.subnets,
        )

    def _settle(self, plan: Plan, records: RoundRecords) -> RoundResult:
        """Turn the round's records into rows, ledger releases, edge rows, extras."""
        rows, edges, extras = settle_round(
            records,
            topo=self.config.topology,
            trusted=self.topology.trusted,
            cost=self.cost,
            fading_of=lambda c, p, mine: upload_fading(
                self.edge_scheduling,
                plan.subchannel,
                seed=self.config.seed,
                k=plan.k,
                edge=c,
                period=p,
                devices=mine,
            ),
            interval=self.interval,
            ledger=self.uplink,
            num_train=self.engine.num_train,
            num_test=self.engine.num_test,
            dp_enabled=self.dp_enabled,
            num_global=self.config.rounds,
        )
        self.edge_rows += edges
        self.edge_scheduling.observe(plan.chosen, rows)
        delivered = sorted(r["client"] for r in rows if r["delivered"])
        return RoundResult(plan.k, rows, delivered, extras)

    # ------------------------------------------------------------------ control
    def _control(self, k: int, previous: Any, chosen: list[list[int]]) -> None:
        """Algorithm 1 lines 33–35: estimate β̂, then solve P for the next interval."""
        topo = self.config.topology
        if topo.lr.mode == "theory":
            beta_hat = estimate_smoothness(
                self.engine.pool, previous, self.global_ref, chosen
            )
            if beta_hat is not None:
                self.interval.beta_hat = beta_hat
        if not topo.control.enabled:
            return
        it = self.interval
        it.tau, it.period, it.participants, it.control_refs = next_interval(
            topo,
            topology=self.topology,
            cost=self.cost,
            num_global=self.config.rounds,
            model_dim=self.engine.dim,
            sample_rate=self.sample_rate,
            steps_done=self.interval.steps_done,
            num_local=self.interval.num_local,
            control_refs=self.interval.control_refs,
        )

    # ------------------------------------------------------------------ eval
    def evaluate(self, engine: Any) -> list[EvalRow]:
        """Evaluate the global model on every device's test split, by id."""
        return evaluate_devices(engine.pool, self.global_ref)

    def local_updates(self, engine: Any) -> list[int]:
        """Return the number of local segments each device trained."""
        return self.interval.local_update_count.tolist()

    # ------------------------------------------------------------ RoundStrategy
    def num_units(self, engine: Any) -> int:
        """One decision unit per edge."""
        return len(self.topology.subnets)

    def observe(self, engine: Any, t: int) -> tuple[Observation, ...]:
        """Return each edge's observation (``rayfl.hierarchy.scheduling``)."""
        return tuple(self.scheduling_observations(t))

    def exhausted(self, engine: Any) -> bool:
        """Never: the hierarchy has no upload budget."""
        return False

    def round(self, engine: Any, t: int, decision: Decision) -> RoundResult:
        """Run global round ``t`` with one schedule per edge."""
        result, _ = self.run_global_round(t, decision)
        return result

    def summary(self, engine: Any) -> dict[str, Any]:
        """The hierarchy adds nothing to ``summary.json`` (edges.parquet holds it)."""
        return {}

    def write_extra(self, engine: Any, run_dir: Path) -> None:
        """Write ``edges.parquet`` (one row per global round × edge)."""
        from rayfl.rundir.results import _write_parquet

        if self.edge_rows:
            _write_parquet(Path(run_dir) / "edges.parquet", self.edge_rows)

    def state_dict(self, engine: Any) -> dict[str, Any]:
        """Return the run state for a checkpoint (the engine adds ``global``)."""
        return {
            "ledger": self.uplink.state_dict(),
            "schedule": self.interval.state_dict(),
            "edge_rows": list(self.edge_rows),
            "scheduling": self.edge_scheduling.state_dict(),
        }

    def load_state_dict(self, engine: Any, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the engine restores ``global``)."""
        self.uplink.load_state_dict(state["ledger"])
        self.interval.load_state_dict(state["schedule"])
        self.edge_rows = list(state["edge_rows"])
        self.edge_scheduling.load_state_dict(state["scheduling"])

    def close(self, engine: Any) -> None:
        """Kill the edges and the cloud (the engine closes the pool)."""
        if self.servers is not None:
            self.servers.close()
