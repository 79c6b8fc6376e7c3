"""StarLanes: E star runs (lanes) stepping in lockstep over shared client hosts.

One :class:`rayfl.engine.Engine` runs one FL run: a round costs three
sequential actor round trips (train, aggregate, evaluate) whatever its size,
which for a small system is nearly all of its time. StarLanes runs E runs of
the same config — differing only in their seeds — on one set of
:class:`rayfl.actors.lanes.LaneHost` actors holding the data once:

1. ``run``: one ``train_lanes`` call per host trains the scheduled clients of
   every lane in one stacked trainer call (:mod:`rayfl.actors.lanes`);
2. the driver turns each lane's payload sizes into its link outcome
   (:func:`rayfl.star.round_steps.round_link`) and aggregates the lane's
   uploads with its own :class:`rayfl.actors.cloud.ServerHost` — the cloud
   actor's code, run here: plain numpy on a few vectors;
3. one ``evaluate_lanes`` call per host evaluates every client of every lane.

Each lane's numbers are those of an ``Engine`` run with the lane's seed: the
same round steps (:mod:`rayfl.star.round_steps`), the same host code, and
trainers whose result for a client does not depend on its stack partners
(:func:`check_lanes` refuses the configs where that does not hold).

Example:
    >>> lanes = StarLanes(load_config(cfg), num_lanes=8)  # doctest: +SKIP
    >>> for lane in range(8):
    ...     lanes.restart(lane, seed=lane)
    >>> lanes.observe(0, 0)["channel_gain"].shape  # evaluates all 8 at once
    (10, 4)
    >>> out = lanes.run({lane: (0, schedule) for lane in range(8)})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.cloud import ServerHost
from rayfl.actors.lanes import LANE_ALGORITHMS, LaneActor, LaneJob
from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.cluster.session import RaySession
from rayfl.data.federated import FederatedData, build_federated
from rayfl.observation import ObservationTracker
from rayfl.schedule import Schedule
from rayfl.star.config import StarTopologyConfig
from rayfl.star.round import star_observation
from rayfl.star.round_steps import (
    actor_share,
    round_link,
    round_rows,
    settle_round,
    star_setup,
)
from rayfl.system import EvalRow, Observation, RoundResult, initial_vector
from rayfl.uplink import UplinkModel

__all__ = ["LaneBatch", "StarLanes", "check_lanes"]


def check_lanes(config: Any) -> None:
    """Raise ``ValueError`` naming why ``config``'s runs cannot share lane hosts.

    The lanes need a star (``topology.kind: star``) whose algorithm trains each
    client from its context alone (:data:`rayfl.actors.lanes.LANE_ALGORITHMS`,
    with a trainer that does not stack a host's clients differently from a
    lone client's: ``algorithm.trainer`` not ``vectorized``) and that evaluates
    every client (``eval_clients`` unset).
    """
    kind = config.algorithm.kind
    if not isinstance(config.topology, StarTopologyConfig):  # the star's section
        raise ValueError(f"lanes need topology.kind=star, got {config.topology.kind}")
    if kind not in LANE_ALGORITHMS:
        raise ValueError(
            f"lanes need algorithm.kind in {', '.join(LANE_ALGORITHMS)} (a client "
            f"update that reads its context only), got {kind!r}"
        )
    if getattr(config.algorithm, "trainer", "auto") == "vectorized":
        raise ValueError(
            "lanes need algorithm.trainer auto, autograd or fast, got 'vectorized' "
            "(it trains a lone client differently from a stacked one)"
        )
    if config.eval_clients is not None:
        raise ValueError(
            f"lanes need eval_clients unset (every client evaluated), got "
            f"{config.eval_clients}"
        )


@dataclass
class _Lane:
    """One lane's run on the driver: its config (seed), uplink, ω^t and server."""

    config: Any
    uplink: UplinkModel
    server: ServerHost
    vector: npt.NDArray[np.float32]
    #: The clients' history, started from the first evaluation.
    tracker: ObservationTracker | None = None
    #: The clients' evaluations of ``vector`` (None: not evaluated yet).
    evals: list[EvalRow] | None = None


@dataclass
class LaneBatch:
    """Lanes of one round in flight (:meth:`StarLanes.start` → settle → finish)."""

    rounds: dict[int, tuple[int, Schedule]]
    #: Refs of the restarts sent with it (waited on before its replies).
    resets: list[Any]
    jobs: list[list[LaneJob]] = field(default_factory=list)
    train_refs: list[Any] = field(default_factory=list)
    results: dict[int, RoundResult] = field(default_factory=dict)
    evaluated: list[int] = field(default_factory=list)
    eval_refs: list[Any] = field(default_factory=list)


class StarLanes:
    """E star runs of one config in lockstep (see the module docstring).

    Args:
        config: The run config shared by the lanes (their seeds are set by
            :meth:`restart`).
        num_lanes: E, the number of lanes (>= 1).
        data: A prebuilt federated dataset (default: built from ``config.data``
            with ``config.seed``, like an ``Engine``).

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
        self.lanes: list[_Lane | None] = [None] * self.num_lanes
        self._pending: dict[int, ActorSetup] = {}
        #: Lanes started and not finished (:meth:`start`, :meth:`finish`).
        self._in_flight: set[int] = set()
        self.session = RaySession(config.ray)
        try:
            self._build(data)
        except BaseException:
            self.close()
            raise

    def _build(self, data: FederatedData | None) -> None:
        cfg = self.config
        self.data = (
            data if data is not None else build_federated(cfg.data, seed=cfg.seed)
        )
        self.num_clients = self.data.num_clients
        self.num_train = np.asarray(self.data.num_train, dtype=np.int64)
        self.input_shape = tuple(self.data.input_shape)
        self.dim = len(initial_vector(cfg, self.input_shape, self.data.num_classes))
        _, setup = self._setup(cfg)
        per_round = cfg.scheduler.clients_per_round
        self.pool = ActorPool.start(
            LaneActor,
            self.data,
            setup,
            ray_settings=cfg.ray,
            dim=self.dim,
            role="lanes",
            memory_hints={
                "state_vectors_per_client": 0,
                "uploads": self.num_lanes
                * (self.num_clients if per_round is None else int(per_round)),
            },
        )

    def _setup(self, cfg: Any) -> tuple[UplinkModel, ActorSetup]:
        return star_setup(
            cfg,
            num_train=self.num_train,
            dim=self.dim,
            input_shape=self.input_shape,
            num_classes=self.data.num_classes,
        )

    def _lane(self, lane: int) -> _Lane:
        run = self.lanes[lane]
        if run is None:
            raise RuntimeError(f"lane {lane} has not been restarted yet")
        return run

    # ------------------------------------------------------------------ runs
    def restart(self, lane: int, seed: int) -> None:
        """Start a new run with ``seed`` in ``lane`` (same data, new ω⁰, channel...).

        The hosts get the new setup with the next call to them (all restarts
        since the last call in one message per host).
        """
        cfg = self.config.model_copy(update={"seed": int(seed)})
        uplink, setup = self._setup(cfg)
        vector = initial_vector(cfg, self.input_shape, self.data.num_classes)
        self.lanes[lane] = _Lane(cfg, uplink, ServerHost(setup), vector)
        self._pending[lane] = setup

    def run_config(self, lane: int) -> Any:
        """Return ``lane``'s run config (the shared config with the lane's seed)."""
        return self._lane(lane).config

    def uplink(self, lane: int) -> UplinkModel:
        """Return ``lane``'s uplink model (channel, ledger)."""
        return self._lane(lane).uplink

    def observe(self, lane: int, t: int) -> Observation:
        """Return ``lane``'s star observation of round ``t``.

        The first call after a restart evaluates the clients for their initial
        losses: with every other lane that awaits an evaluation, in one call.
        """
        run = self._lane(lane)
        if run.tracker is None:
            evals = self.evaluations([lane])[lane]
            run.tracker = ObservationTracker(
                self.num_clients, [e["eval_train_loss"] for e in evals]
            )
        return star_observation(run.uplink, run.tracker, self.num_train, t)

    def evaluations(self, lanes: list[int]) -> dict[int, list[EvalRow]]:
        """Return the clients' evaluations of each lane's current model, by client.

        Every lane whose model has not been evaluated yet is evaluated, in one
        call per host, including lanes not asked for (they would be next).
        """
        resets = self._send_restarts()
        todo = [e for e, run in enumerate(self.lanes) if run and run.evals is None]
        if todo:
            got = self._get(resets + self._submit_evaluate(todo))
            self._store_evals(todo, got[len(resets) :])
        elif resets:
            self._get(resets)
        return {lane: list(self._lane(lane).evals or []) for lane in lanes}

    def run(
        self, rounds: dict[int, tuple[int, Schedule]]
    ) -> dict[int, tuple[RoundResult, list[EvalRow]]]:
        """Run one round in each given lane, then evaluate its clients.

        The lanes go in two halves, so that the driver links and aggregates
        one half while the hosts train or evaluate the other::

            hosts:  train A | train B | evaluate A | evaluate B
            driver:         | conclude A | conclude B |

        A caller with work of its own per lane (the vector env) can interleave
        it with the hosts' by calling :meth:`start`, :meth:`settle` and
        :meth:`finish` itself, as this method does.

        Args:
            rounds: lane → (its round index t, its schedule).

        Returns:
            lane → (the round's result, every client's evaluation after it).
        """
        lanes = list(rounds)
        half = (len(lanes) + 1) // 2
        chunks = [c for c in (lanes[:half], lanes[half:]) if c]
        batches = [self.start({e: rounds[e] for e in chunk}) for chunk in chunks]
        for i, batch in enumerate(batches):
            self.settle(batch, evaluate_waiting=i == 0)
        out: dict[int, tuple[RoundResult, list[EvalRow]]] = {}
        for batch in batches:
            out.update(self.finish(batch))
        return out

    def start(self, rounds: dict[int, tuple[int, Schedule]]) -> LaneBatch:
        """Submit one round of each given lane to the hosts (training starts).

        Args:
            rounds: lane → (its round index t, its schedule).

        Returns:
            The batch, for :meth:`settle` then :meth:`finish`.
        """
        batch = LaneBatch(dict(rounds), self._send_restarts())
        self._in_flight.update(rounds)
        batch.jobs, batch.train_refs = self._submit_train(
            ray.put(self._vectors()), list(rounds), rounds
        )
        return batch

    def settle(self, batch: LaneBatch, *, evaluate_waiting: bool = False) -> None:
        """Link and aggregate ``batch``'s lanes as their training ends; submit their evaluation.

        Args:
            batch: From :meth:`start`.
            evaluate_waiting: Also evaluate the lanes restarted since the last
                call and not in any batch (they would be evaluated next).
        """
        self._get(batch.resets)
        got: dict[int, list[Any]] = {lane: [] for lane in batch.rounds}
        for mine, reply in zip(batch.jobs, self._get(batch.train_refs), strict=True):
            for job, out in zip(mine, reply, strict=True):
                got[job.lane].append(out)
        for lane, (t, schedule) in batch.rounds.items():
            batch.results[lane] = self._conclude(lane, t, schedule, got[lane])
        todo = list(batch.rounds)
        if evaluate_waiting:
            todo += [
                e
                for e, run in enumerate(self.lanes)
                if run and run.evals is None and e not in self._in_flight
            ]
        batch.evaluated = todo
        batch.eval_refs = self._submit_evaluate(todo)

    def finish(self, batch: LaneBatch) -> dict[int, tuple[RoundResult, list[EvalRow]]]:
        """Return ``batch``'s lanes' results and evaluations (waits for the hosts).

        Args:
            batch: From :meth:`start`, settled by :meth:`settle`.

        Returns:
            lane → (the round's result, every client's evaluation after it).
        """
        self._store_evals(batch.evaluated, self._get(batch.eval_refs))
        self._in_flight.difference_update(batch.rounds)
        return {
            lane: (batch.results[lane], list(self._lane(lane).evals or []))
            for lane in batch.rounds
        }

    def _submit_train(
        self, vectors: Any, lanes: list[int], rounds: dict[int, tuple[int, Schedule]]
    ) -> tuple[list[list[LaneJob]], list[Any]]:
        """Submit ``lanes``' round to the hosts; return each call's jobs and refs."""
        assert self.pool is not None
        pool = self.pool
        jobs: list[list[LaneJob]] = [[] for _ in pool.actors]
        for lane in lanes:
            self._lane(lane)
            t, schedule = rounds[lane]
            order = np.argsort(schedule.clients, kind="stable")
            clients = schedule.clients[order]
            for a in np.unique(pool.actor_of[clients]).tolist():
                mine, controls = actor_share(pool.actor_of, schedule, order, clients, a)
                jobs[a].append(LaneJob(lane, t, mine, controls))
        called = [a for a, mine in enumerate(jobs) if mine]
        refs = [pool.actors[a].train_lanes.remote(vectors, jobs[a]) for a in called]
        return [jobs[a] for a in called], refs

    def _submit_evaluate(self, lanes: list[int]) -> list[Any]:
        """Submit the evaluation of ``lanes``' current models to every host."""
        assert self.pool is not None
        vectors = ray.put(self._vectors())
        return [a.evaluate_lanes.remote(vectors, lanes) for a in self.pool.actors]

    def _store_evals(self, lanes: list[int], batches: list[Any]) -> None:
        """Keep each lane's evaluation rows (every host's), sorted by client."""
        for i, lane in enumerate(lanes):
            rows = [row for batch in batches for row in batch[i]]
            self._lane(lane).evals = sorted(rows, key=lambda r: r["client"])

    def _conclude(
        self, lane: int, t: int, schedule: Schedule, replies: list[Any]
    ) -> RoundResult:
        """Link, aggregate and record ``lane``'s round from its hosts' replies."""
        run = self._lane(lane)
        records = {int(r["client"]): r for recs, _ in replies for r in recs}
        clients = np.sort(schedule.clients, kind="stable")
        link_rows, link = round_link(run.uplink, t, schedule, clients, records)
        run.vector, server = run.server.aggregate(
            t, run.vector, link, *[uploads for _, uploads in replies]
        )
        run.evals = None
        rows = round_rows(schedule, records, link_rows, server, set())
        return settle_round(run.uplink, run.tracker, t, schedule, rows, server, set())

    def _send_restarts(self) -> list[Any]:
        """Send the hosts the lanes restarted since the last call (refs to wait on).

        Ray runs an actor's calls from one caller in order: the setups reach
        each host before the calls submitted after this.
        """
        if not self._pending:
            return []
        assert self.pool is not None
        pending, self._pending = self._pending, {}
        return [a.reset_lanes.remote(pending) for a in self.pool.actors]

    @staticmethod
    def _get(refs: list[Any]) -> list[Any]:
        return list(ray.get(refs)) if refs else []

    def _vectors(self) -> npt.NDArray[np.float32]:
        """Every lane's ω, float32 (E, dim) (zeros for a lane never started)."""
        out = np.zeros((self.num_lanes, self.dim), dtype=np.float32)
        for lane, run in enumerate(self.lanes):
            if run is not None:
                out[lane] = run.vector
        return out

    def close(self) -> None:
        """Kill the hosts and stop Ray if these lanes started it."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.session.close()
