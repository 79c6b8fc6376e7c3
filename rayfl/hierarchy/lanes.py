"""HierLanes: E hierarchical FL runs (lanes) stepping in lockstep over shared hosts.

An ``Engine`` with :class:`rayfl.hierarchy.round.HierarchicalRound` runs one
H2FDP run on device actors, one edge actor per subnet and a cloud actor. HierLanes
runs E runs of the same config — differing only in their seeds — on one set of
:class:`rayfl.hierarchy.lanes_host.HierLaneHost` actors holding the data once,
and runs the edges' and the cloud's code on the driver. One lockstep global
round is:

1. per segment, one ``train_segment_lanes`` call per host trains the
   participants of every (lane, edge) from the lane's edge model w̄_c (one
   stacked trainer call), clips, noises and pre-reduces them as a device actor;
   the driver then aggregates every (lane, edge) as
   :meth:`rayfl.hierarchy.edge.EdgeHost.aggregate` does, all pairs as columns
   (:func:`rayfl.hierarchy.lanes_edges.aggregate_edges`);
2. the cloud's average (eq. 14) of every lane, as numpy over (lane × edge);
3. one ``evaluate_columns`` call per host evaluates every device's test split
   in every lane (the env reads no train-split loss), while the driver
   settles each lane's round (rows, costs, ledger, the edges' observation
   history: :func:`rayfl.hierarchy.accounting.settle_round`).

Each lane's numbers are those of ``HierarchicalSchedulingEnv`` run alone with
the lane's seed (tests/envs/test_hierarchy_lanes.py): the initial model, batch
order, device and edge noise and the fading keyed by the lane's seed.

Refused (:func:`check_lanes`, one-line ``ValueError``): algorithms other than
:data:`rayfl.actors.lanes.LANE_ALGORITHMS`, ``algorithm.trainer: vectorized``,
adaptive control (``topology.control.enabled``: τ_k and s_c^k would differ per
lane), ``topology.lr.mode: theory`` (β̂ is measured on the device actors) and
``topology.local_at_global``. The subnet evaluations of ``edge_eval`` (only
``edges.parquet`` reads them) are not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.lanes import LANE_ALGORITHMS
from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.cluster.session import RaySession
from rayfl.data.federated import FederatedData, build_federated
from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.edge import EdgeHost
from rayfl.hierarchy.interval import Interval
from rayfl.hierarchy.lanes_edges import EdgeSums, aggregate_edges
from rayfl.hierarchy.lanes_host import HierLaneActor, SegmentJob, pack_jobs
from rayfl.hierarchy.lanes_ledger import LedgerColumns
from rayfl.hierarchy.lanes_observe import observe_lanes
from rayfl.hierarchy.lanes_round import (
    LaneRound,
    LaneRun,
    LaneScheduling,
    Shared,
    cloud_average,
    draw_tables,
    eval_rows,
    next_key,
    plan_round,
    price_lanes,
    settle_lane,
)
from rayfl.hierarchy.scheduling import OBS_KEYS
from rayfl.hierarchy.submit import Plan, Sent
from rayfl.hierarchy.topology import build_topology
from rayfl.registry import policy_class, topology_of
from rayfl.schedule import Schedule
from rayfl.system import EvalRow, RoundResult, initial_vector

__all__ = ["HierLanes", "check_lanes"]


def check_lanes(config: Any) -> None:
    """Raise a one-line ``ValueError`` naming why ``config``'s runs cannot be lanes."""
    topo = config.topology
    if not isinstance(topo, TopologyConfig):  # the hierarchy's section
        raise ValueError(f"lanes need topology.kind=hierarchical, got {topo.kind}")
    kind = config.algorithm.kind
    if kind not in LANE_ALGORITHMS:
        raise ValueError(
            f"hierarchy lanes need algorithm.kind in {', '.join(LANE_ALGORITHMS)}, "
            f"got {kind!r}"
        )
    if getattr(config.algorithm, "trainer", "auto") == "vectorized":
        raise ValueError("hierarchy lanes need algorithm.trainer other than vectorized")
    if topo.control.enabled:
        raise ValueError("hierarchy lanes need topology.control.enabled false")
    if topo.lr.mode == "theory":
        raise ValueError("hierarchy lanes need topology.lr.mode constant or manual")
    if topo.local_at_global:
        raise ValueError("hierarchy lanes need topology.local_at_global false")


class HierLanes:
    """E hierarchical runs of one config in lockstep (see the module docstring).

    Args:
        config: The run config shared by the lanes (seeds set by :meth:`restart`).
        num_lanes: E (>= 1).
        data: A prebuilt federated dataset (default: built like an ``Engine``).

    Raises:
        ValueError: If ``num_lanes`` < 1 or :func:`check_lanes` refuses ``config``.
    """

    def __init__(
        self, config: Any, num_lanes: int, data: FederatedData | None = None
    ) -> None:
        if int(num_lanes) < 1:
            raise ValueError(f"num_lanes must be >= 1, got {num_lanes}")
        check_lanes(config)
        self.config, self.num_lanes = config, int(num_lanes)
        self.pool: ActorPool | None = None
        self.lanes: list[LaneRun | None] = [None] * self.num_lanes
        self._pending: dict[int, ActorSetup] = {}
        #: Lanes played by the last :meth:`run` → their next global round (their
        #: observations are made together when the first is asked for).
        self._to_observe: dict[int, int] = {}
        #: Lane → (k, its edges' observations of round k) made in advance.
        self._observed: dict[int, tuple[int, list[dict[str, np.ndarray]]]] = {}
        self.session = RaySession(config.ray)
        try:
            self._build(data)
        except BaseException:
            self.close()
            raise

    def _build(self, data: FederatedData | None) -> None:
        cfg = self.config
        topo = cfg.topology
        self.data = (
            data if data is not None else build_federated(cfg.data, seed=cfg.seed)
        )
        self.num_clients = n = self.data.num_clients
        self.num_train = np.asarray(self.data.num_train, dtype=np.int64)
        self.num_test = np.asarray(self.data.num_test, dtype=np.int64)
        self.input_shape = tuple(self.data.input_shape)
        self.dim = len(initial_vector(cfg, self.input_shape, self.data.num_classes))
        # the subnets and trust flags of the shared config's seed (an env's restart
        # keeps them, as it keeps the device hosts' setup)
        self.topology = build_topology(topo, n, cfg.seed)
        self.setup = ActorSetup.from_config(
            cfg,
            input_shape=self.input_shape,
            num_classes=self.data.num_classes,
            reduce_in_actor=False,
        )
        self.pool = ActorPool.start(
            HierLaneActor,
            self.data,
            self.setup,
            ray_settings=cfg.ray,
            dim=self.dim,
            role="lanes",
            memory_hints={"state_vectors_per_client": 0, "uploads": self.num_lanes * n},
        )
        self.shared = Shared(
            config=cfg,
            topology=self.topology,
            cost=CostModel(
                topo.cost,
                distance_m=self.topology.distance_m,
                model_dim=self.dim,
                backhaul=topo.baseline != "pedpfl",
            ),
            num_train=self.num_train,
            num_test=self.num_test,
            dp_enabled=topo.dp.enabled and topo.baseline != "hfl",
            sample_rate=topo.dp.calibration_sample_rate
            or min(1.0, cfg.algorithm.batch_size / float(self.num_train.mean())),
        )
        #: Every lane's observer ledgers (release-history states).
        self.ledgers = LedgerColumns(self.num_lanes, n, delta=topo.dp.delta)
        agent = cfg.scheduler.policy == topology_of(cfg).default_policy
        self.needed_keys = (
            OBS_KEYS if agent else policy_class(cfg.scheduler.policy).required_keys
        )

    def _lane(self, lane: int) -> LaneRun:
        run = self.lanes[lane]
        if run is None:
            raise RuntimeError(f"lane {lane} has not been restarted yet")
        return run

    # ------------------------------------------------------------------ runs
    def restart(self, lane: int, seed: int) -> None:
        """Start a new run with ``seed`` in ``lane`` (same data and subnets)."""
        cfg = self.config.model_copy(update={"seed": int(seed)})
        topo, n = cfg.topology, self.num_clients
        scheduling = LaneScheduling(
            topo.scheduling,
            cost=topo.cost,
            seed=int(seed),
            subnets=self.topology.subnets,
            distance_m=self.topology.distance_m,
            num_train=self.num_train,
            needed_keys=self.needed_keys,
        )
        ledger = self.ledgers.lane(lane)
        self._to_observe.pop(lane, None)
        self._observed.pop(lane, None)
        self.lanes[lane] = LaneRun(
            cfg,
            initial_vector(cfg, self.input_shape, self.data.num_classes),
            Interval.start(topo, sizes=self.topology.sizes, num_clients=n),
            ledger,
            scheduling,
            [
                EdgeHost(c, int(seed), bool(t))
                for c, t in enumerate(self.topology.trusted)
            ],
        )
        # the lane's devices: empty state, batch order and noise of its seed
        self._pending[lane] = replace(self.setup, seed=int(seed))

    def run_config(self, lane: int) -> Any:
        """Return ``lane``'s run config (the shared one before its first restart)."""
        run = self.lanes[lane]
        return self.config if run is None else run.config

    def observations(self, lane: int, k: int) -> list[dict[str, np.ndarray]]:
        """Return each edge's observation of ``lane``'s global round k.

        ``HierarchicalRound.scheduling_observations`` of the lane's run; a lane
        without any loss yet is evaluated first (with every lane waiting).
        """
        if self._to_observe.get(lane) == k:
            self._observe_played()
        made = self._observed.pop(lane, None)
        if made is not None and made[0] == k:
            return made[1]
        run = self._lane(lane)
        sch = run.scheduling
        if "loss" in sch.needed_keys and np.isnan(sch.loss).all():
            evals = self.evaluations([lane])[lane]
            sch.loss = np.array([r["test_loss"] for r in evals])
        eps = None
        if "privacy_spent" in sch.needed_keys and self.shared.dp_enabled:
            eps = run.ledger.epsilons()[0]
        return sch.observations(
            k,
            run.interval.period_index,
            run.interval.participants,
            upload_count=run.interval.local_update_count,
            privacy_spent=eps,
        )

    def _observe_played(self) -> None:
        """Make the observations of every lane the last :meth:`run` played, at once.

        A lane that still has no loss to show (and needs one) is left to
        :meth:`observations`' own path (it evaluates first).
        """
        waiting, self._to_observe = self._to_observe, {}
        lanes = [
            e
            for e in waiting
            if not (
                "loss" in self.needed_keys
                and np.isnan(self._lane(e).scheduling.loss).all()
            )
        ]
        if not lanes:
            return
        eps = None
        if "privacy_spent" in self.needed_keys and self.shared.dp_enabled:
            eps = self.ledgers.epsilons(lanes)
        made = observe_lanes(
            [self._lane(e) for e in lanes], [waiting[e] for e in lanes], eps
        )
        for e, obs in zip(lanes, made, strict=True):
            self._observed[e] = (waiting[e], obs)

    def evaluations(self, lanes: list[int]) -> dict[int, list[EvalRow]]:
        """Return every device's ``test_loss``/``test_acc`` of each lane's global model.

        Every lane not evaluated yet is evaluated, in one call per host.
        """
        if not self._pending and all(self._lane(e).evals is not None for e in lanes):
            return {lane: list(self._lane(lane).evals or []) for lane in lanes}
        resets = self._send_restarts()
        todo = [e for e, run in enumerate(self.lanes) if run and run.evals is None]
        got = self._get(resets + self._submit_evaluate(todo))
        self._store_evals(todo, got[len(resets) :])
        return {lane: list(self._lane(lane).evals or []) for lane in lanes}

    def run(
        self, rounds: dict[int, tuple[int, Sequence[Schedule]]]
    ) -> dict[int, RoundResult]:
        """Run one global round in each given lane, then evaluate every device.

        The lanes go in two halves, so that the driver runs one half's edges
        and cloud while the hosts train or evaluate the other::

            hosts:  train A | train B          | evaluate A, B
            driver:         | edges, settle A  | edges, settle B

        Args:
            rounds: lane → (its global round k, one schedule per edge).

        Returns:
            lane → the round's result (rows, delivered, extras), as
            ``HierarchicalRound.run_global_round``'s.
        """
        resets = self._send_restarts()
        for e in rounds:  # their observations made in advance are past
            self._observed.pop(e, None)
            self._to_observe.pop(e, None)
        plans = {
            e: plan_round(self.shared, self._lane(e), k, schedules)
            for e, (k, schedules) in rounds.items()
        }
        out = {e: LaneRound(p, Sent(edge_refs=[]), [], []) for e, p in plans.items()}
        edge_models = np.zeros(
            (self.num_lanes, len(self.topology.subnets), self.dim), dtype=np.float32
        )
        for e in plans:
            edge_models[e] = self._lane(e).vector
        self._get(resets)
        lanes = list(out)
        half = (len(lanes) + 1) // 2
        halves = [{e: out[e] for e in h} for h in (lanes[:half], lanes[half:]) if h]
        count = max((len(p.segments) for p in plans.values()), default=0)
        flying = [self._submit_segment(0, h, edge_models) for h in halves if count]
        # the fading of each lane's next observation, while the hosts train
        draw_tables([next_key(self._lane(e), p) for e, p in plans.items()])
        evals: list[tuple[list[int], list[Any]]] = []
        results: dict[int, RoundResult] = {}
        for j in range(count):
            for i, part in enumerate(halves):
                self._edges(j, part, edge_models, flying[i])
                if j + 1 < count:
                    flying[i] = self._submit_segment(j + 1, part, edge_models)
                    continue
                self._cloud(list(part), plans, edge_models)
                evals.append((list(part), self._submit_evaluate(list(part))))
                priced = price_lanes(
                    self.shared, [(self._lane(e), done) for e, done in part.items()]
                )
                for (e, done), prices in zip(part.items(), priced, strict=True):
                    run = self._lane(e)  # while the hosts train the next half
                    run.interval.period_index += len(done.plan.segments)
                    results[e] = settle_lane(self.shared, run, done, prices)
                    self._to_observe[e] = done.plan.k + 1
        waiting = [e for e, run in enumerate(self.lanes) if run and run.evals is None]
        waiting = [e for e in waiting if e not in out]  # restarted, not played
        evals.append((waiting, self._submit_evaluate(waiting)))
        for todo, refs in evals:
            self._store_evals(todo, self._get(refs))
        return results

    # ------------------------------------------------------------- the round
    def _submit_segment(
        self, j: int, out: dict[int, LaneRound], edge_models: npt.NDArray[np.float32]
    ) -> tuple[list[int], list[list[tuple[int, int, int]]], list[Any]]:
        """Submit segment j of ``out``'s lanes: one call per host with jobs.

        Returns:
            The hosts called, each host's (lane, call index, edge) per job, and
            the calls' refs.
        """
        assert self.pool is not None
        topo = self.config.topology
        g, equal = topo.dp.grad_bound, topo.weighting == "equal"
        actor_of = self.pool.actor_of.tolist()
        jobs: list[list[SegmentJob]] = [[] for _ in self.pool.actors]
        where: list[list[tuple[int, int, int]]] = [[] for _ in self.pool.actors]
        # segment 0 starts every edge of a lane from the lane's global model:
        # one row per lane; later segments one row per (lane, edge)
        per_edge = len(self.topology.subnets) if j else 1
        for row, (e, done) in enumerate(out.items()):
            plan = done.plan
            if j >= len(plan.segments):
                continue
            steps = plan.segments[j]
            p = self._lane(e).interval.period_index + j
            done.sent.periods.append((p, steps))
            is_global = j == len(plan.segments) - 1
            clip = None if g is None else plan.eta * steps * g
            for c, members in enumerate(plan.chosen):
                std = plan.stds.std(c, edge=False, is_global=is_global)
                split: dict[int, list[int]] = {}  # host → its members, in order
                for i in members:
                    split.setdefault(actor_of[i], []).append(i)
                for a in sorted(split):
                    mine = split[a]
                    where[a].append((e, len(done.devices), c))
                    done.sent.device_calls.append((c, p, mine, None))
                    done.devices.append(None)
                    jobs[a].append(
                        SegmentJob(
                            e,
                            row * per_edge + (c if j else 0),
                            c,
                            p,
                            mine,
                            plan.eta,
                            steps,
                            clip,
                            std,
                            equal,
                        )
                    )
        called = [a for a, mine in enumerate(jobs) if mine]
        starts = edge_models[list(out)] if j else edge_models[list(out), 0]
        models = ray.put(starts.reshape(-1, self.dim))
        actors = self.pool.actors
        refs = [
            actors[a].train_segment_lanes.remote(models, pack_jobs(jobs[a]))
            for a in called
        ]
        return called, [where[a] for a in called], refs

    def _edges(
        self,
        j: int,
        out: dict[int, LaneRound],
        edge_models: npt.NDArray[np.float32],
        submitted: tuple[list[int], list[list[tuple[int, int, int]]], list[Any]],
    ) -> None:
        """Take segment j's replies; run every (lane, edge)'s aggregation (``EdgeHost``)."""
        _, where, refs = submitted
        replies = self._get(refs)
        for mine, (records_of, _) in zip(where, replies, strict=True):
            for (e, i, _), records in zip(mine, records_of, strict=True):
                out[e].devices[i] = records
        todo = [e for e, done in out.items() if j < len(done.plan.segments)]
        packs = [packed for _, packed in replies]
        sums = EdgeSums.from_replies(where, packs, todo, edge_models.shape[1])
        models = edge_models[todo]
        aggregate_edges(j, [(out[e], self._lane(e)) for e in todo], models, sums)
        edge_models[todo] = models

    def _cloud(
        self,
        lanes: list[int],
        plans: dict[int, Plan],
        edge_models: npt.NDArray[np.float32],
    ) -> None:
        """Give ``lanes`` their new global model (:func:`cloud_average`)."""
        new = cloud_average(self.shared, [plans[e] for e in lanes], edge_models[lanes])
        for i, e in enumerate(lanes):
            run = self._lane(e)
            run.vector, run.evals = new[i], None

    # ------------------------------------------------------------- the hosts
    def _submit_evaluate(self, lanes: list[int]) -> list[Any]:
        """Submit the evaluation of ``lanes``' current models to every host."""
        if not lanes:
            return []
        assert self.pool is not None
        vectors = np.zeros((self.num_lanes, self.dim), dtype=np.float32)
        vectors[lanes] = np.stack([self._lane(lane).vector for lane in lanes])
        ref = ray.put(vectors)
        return [  # the env reads no train-split loss
            a.evaluate_columns.remote(ref, lanes, train_split=False)
            for a in self.pool.actors
        ]

    def _store_evals(self, lanes: list[int], batches: list[Any]) -> None:
        """Keep each lane's evaluation rows (every host's columns), by device."""
        assert self.pool is not None
        rows = eval_rows(self.pool.groups, batches, len(self.num_test))
        for lane, mine in zip(lanes, rows, strict=True):
            self._lane(lane).evals = mine

    def _send_restarts(self) -> list[Any]:
        """Send the hosts the lanes restarted since the last call (refs to wait on)."""
        if not self._pending:
            return []
        assert self.pool is not None
        pending, self._pending = self._pending, {}
        return [a.reset_lanes.remote(pending) for a in self.pool.actors]

    @staticmethod
    def _get(refs: list[Any]) -> list[Any]:
        return list(ray.get(refs)) if refs else []

    def close(self) -> None:
        """Kill the hosts and stop Ray if these lanes started it."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.session.close()
