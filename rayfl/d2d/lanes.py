"""D2DLanes: E D2D (pFedWN) runs stepping in lockstep over shared node hosts.

One ``D2DNeighbor-v0`` env in emulate mode drives a whole D2D engine: a round
costs several sequential actor round trips (neighbors train, E/M, target round)
whatever its size, nearly all of its time for a small system. D2DLanes runs E
runs of the same config — differing only in their seeds — on one set of
:class:`rayfl.d2d.lanes_host.D2DLaneHost` actors holding the data once. One
lockstep round of every lane is two calls per host:

1. ``train_local``: each host trains every (lane, selected neighbor) pair it
   hosts in one stacked trainer call;
2. the driver decides each lane's deliveries (``link_model``, the lane's seed)
   and its E/M step (``em_mode``, π frozen or not), then ``target_lanes``: each
   host runs the target round (E/M, eq. 1, evaluate, train, evaluate) of every
   lane whose target it hosts, reading the neighbors' models from the step-1
   replies (object refs forwarded, never pulled by the driver).

Each lane's numbers are those of a D2D engine run (:mod:`rayfl.d2d.round`) with
the lane's seed, to float32 rounding (:mod:`rayfl.d2d.lanes_host`,
Implementation details 1): the same layout, selections, π bookkeeping
(:class:`~rayfl.d2d.em.EMState`), link draws and batch orders — and, when
the nodes move (``topology.mobility``), the same round-t layouts and P^err
(each lane's :class:`~rayfl.d2d.motion.D2DMotion`, keyed by its seed).

Refused (:func:`check_d2d_lanes`, a one-line ``ValueError``): ``topology.method``
other than ``pfedwn``; ``topology.target: all``; ``on_loss: stale`` with a lossy
link (``link_model`` not ``ideal``); models other than the built-in ``mlr`` and
``mlp`` (the batched E/M forward pass). Not kept: the per-client rows of the
engine (``metrics.parquet``), checkpoints and actor-failure recovery (a host
Ray restarts refuses lane calls until the lanes restart).

Example:
    >>> lanes = D2DLanes(load_config(cfg), num_lanes=8)  # doctest: +SKIP
    >>> layouts = [lanes.restart(e, seed=e) for e in range(8)]
    >>> out = lanes.run({e: (0, selections[e]) for e in range(8)})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.pool import ActorPool
from rayfl.actors.setup import ActorSetup
from rayfl.cluster.session import RaySession
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.devices import device_keys
from rayfl.d2d.em import EMState
from rayfl.d2d.lane_runs import LaneRun, check_d2d_lanes, first_selection
from rayfl.d2d.lanes_host import D2DLaneActor, TargetJob
from rayfl.d2d.links import deliveries
from rayfl.d2d.motion import D2DMotion
from rayfl.d2d.records import _primary
from rayfl.d2d.selection import (
    D2DLayout,
    make_layout,
    pi_vector,
    reselect,
    selection_spaces,
)
from rayfl.data.federated import FederatedData, build_federated
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.segment_eval import evaluate_segments_many
from rayfl.system import initial_vector

__all__ = ["D2DLaneBatch", "D2DLaneOutcome", "D2DLanes", "check_d2d_lanes"]

#: Target → (its neighbors M_n ascending, the sub-channel of each).
Selections = dict[int, tuple[tuple[int, ...], tuple[int, ...]]]


@dataclass
class D2DLaneOutcome:
    """What one lane's round returns (the fields of ``envs.d2d.backends.D2DOutcome``)."""

    test_loss: dict[int, float]
    test_acc: dict[int, float]
    delivered: dict[int, list[int]]
    em_weight: dict[int, npt.NDArray[np.float64]]
    train_loss: dict[int, float]


@dataclass
class D2DLaneBatch:
    """A lockstep round in flight (:meth:`D2DLanes.start` → :meth:`D2DLanes.finish`).

    Attributes:
        resets: Refs of the restarts sent with it.
        loss_refs: The ``train_local`` calls' loss refs.
        where: (lane, neighbor) → (``train_local`` call, row).
        jobs: Each ``target_lanes`` call's jobs.
        target_refs: Those calls' refs.
    """

    resets: list[Any]
    loss_refs: list[Any]
    where: dict[tuple[int, int], tuple[int, int]]
    jobs: list[list[TargetJob]]
    target_refs: list[Any]


class D2DLanes:
    """E D2D runs of one config in lockstep (see the module docstring).

    Args:
        config: The run config shared by the lanes (seeds set by :meth:`restart`).
        num_lanes: E (>= 1).
        data: A prebuilt federated dataset (default: from ``config.data`` and
            ``config.seed``, like an engine).

    Raises:
        ValueError: If ``num_lanes`` < 1 or :func:`check_d2d_lanes` refuses ``config``.
    """

    def __init__(
        self, config: Any, num_lanes: int, data: FederatedData | None = None
    ) -> None:
        if int(num_lanes) < 1:
            raise ValueError(f"num_lanes must be >= 1, got {num_lanes}")
        check_d2d_lanes(config)
        self.config, self.num_lanes = config, int(num_lanes)
        self.topology: D2DTopologyConfig = config.topology
        self.lanes: list[LaneRun | None] = [None] * self.num_lanes
        self._pending: dict[int, tuple[int, npt.NDArray[np.float32]]] = {}
        #: Lanes whose ω⁰ awaits its evaluation: lane → (loss, acc) to fill.
        self._initial: dict[int, tuple[dict[int, float], dict[int, float]]] = {}
        self.pool: ActorPool | None = None
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
        self.data_size = self.data.num_train
        #: The target policies' spaces, shared by the restarts (one policy at a time).
        self._spaces = selection_spaces(
            self.num_clients, self.topology.num_subchannels, device_keys(self.topology)
        )
        shape, classes = tuple(self.data.input_shape), self.data.num_classes
        self.dim = len(initial_vector(cfg, shape, classes))
        self.model = FlatModel(
            build_model(
                cfg.model.kind,
                input_shape=shape,
                num_classes=classes,
                hidden=cfg.model.hidden,
            )
        )
        setup = ActorSetup.from_config(cfg, input_shape=shape, num_classes=classes)
        slot = min(cfg.algorithm.batch_size, int(np.max(self.data.num_train)))
        self.pool = ActorPool.start(
            D2DLaneActor,
            self.data,
            setup,
            self.num_lanes,
            slot,
            ray_settings=cfg.ray,
            dim=self.dim,
            role="nodes",
            memory_hints={"state_vectors_per_client": self.num_lanes},
        )

    def _lane(self, lane: int) -> LaneRun:
        run = self.lanes[lane]
        if run is None:
            raise RuntimeError(f"lane {lane} has not been restarted yet")
        return run

    # ------------------------------------------------------------------ runs
    def restart(self, lane: int, seed: int) -> D2DLayout:
        """Start a new run with ``seed`` in ``lane``; return its layout.

        The layout, the t = 0 selection and ω⁰ are the engine's for that seed
        (:meth:`rayfl.d2d.round.D2DRound.build`); the hosts get the restart with
        the next call to them.
        """
        cfg = self.config.model_copy(update={"seed": int(seed)})
        layout = make_layout(self.topology, self.num_clients, seed=int(seed))
        motion = D2DMotion(
            self.topology,
            layout,
            seed=int(seed),
            data_size=self.data_size,
            model_bits=32.0 * self.dim,
            local_epochs=cfg.algorithm.local_epochs,
        )
        selection, first = first_selection(
            cfg, layout, self.data_size, self._spaces, motion
        )
        init = initial_vector(cfg, tuple(self.data.input_shape), self.data.num_classes)
        self.lanes[lane] = LaneRun(
            int(seed),
            layout,
            selection,
            EMState(selection.neighbors),
            init,
            first,
            motion,
        )
        self._pending[lane] = (int(seed), init)
        return layout

    def first_observation(self, lane: int) -> dict[str, npt.NDArray[np.float32]]:
        """``lane``'s t = 0 observation of its target (a copy): the CCM draw."""
        return {k: v.copy() for k, v in self._lane(lane).first.items()}

    def initial(self, lane: int) -> tuple[dict[int, float], dict[int, float]]:
        """Loss and accuracy of ``lane``'s ω⁰ on its target's test split, filled later.

        Returns two empty dicts that :meth:`evaluate_initial` fills (target →
        value): every lane restarted since is evaluated in one batched pass.
        """
        loss: dict[int, float] = {}
        acc: dict[int, float] = {}
        self._initial[lane] = (loss, acc)
        return loss, acc

    def evaluate_initial(self) -> None:
        """Fill the dicts of :meth:`initial`: one batched evaluation per target client."""
        wanted, self._initial = self._initial, {}
        by_target: dict[int, list[int]] = {}
        for lane in wanted:
            by_target.setdefault(self._lane(lane).target, []).append(lane)
        for target, lanes in by_target.items():
            x, y = self.data.test(target)
            vectors = np.stack([self._lane(e).init for e in lanes])
            loss, acc = evaluate_segments_many(self.model, vectors, x, y, [0, len(y)])
            for i, lane in enumerate(lanes):
                wanted[lane][0][target] = float(loss[i, 0])
                wanted[lane][1][target] = float(acc[i, 0])

    def set_selection(
        self, lane: int, neighbors: tuple[int, ...], subchannel: tuple[int, ...]
    ) -> None:
        """Replace ``lane``'s M_n (:meth:`rayfl.d2d.round.D2DRound.set_selection`)."""
        run = self._lane(lane)
        old = run.selection
        run.selection = reselect(
            old, neighbors, subchannel, num_clients=self.num_clients
        )
        if run.selection.neighbors != old.neighbors:
            run.em = run.em.reselect(old.neighbors, run.selection.neighbors)

    def run(
        self, rounds: dict[int, tuple[int, Selections]]
    ) -> dict[int, D2DLaneOutcome]:
        """Set each given lane's M_n and run one pFedWN round of it.

        A caller with per-lane work of its own (the vector env) can overlap it
        with the hosts' by calling :meth:`start` for several groups of lanes,
        then :meth:`finish` for each, as this method does for one group.

        Args:
            rounds: lane → (its round index t, target → (M_n, sub-channels)).

        Returns:
            lane → its round's outcome.
        """
        return self.finish(self.start(rounds))

    def start(self, rounds: dict[int, tuple[int, Selections]]) -> D2DLaneBatch:
        """Set the lanes' M_n and submit their round to the hosts (two calls per host).

        Args:
            rounds: lane → (its round index t, target → (M_n, sub-channels)).

        Returns:
            The round in flight, for :meth:`finish`.
        """
        assert self.pool is not None
        resets = self._send_restarts()
        for lane, (_, selections) in rounds.items():
            for target, (neighbors, subchannel) in selections.items():
                if target != self._lane(lane).target:
                    raise ValueError(f"client {target} is not lane {lane}'s target")
                self.set_selection(lane, tuple(neighbors), tuple(subchannel))
        loss_refs, model_refs, where = self._submit_train(rounds)
        jobs: list[list[TargetJob]] = [[] for _ in self.pool.actors]
        for lane, (t, _) in rounds.items():
            job = self._target_job(lane, t, where)
            jobs[int(self.pool.actor_of[job.target])].append(job)
        called = [a for a, mine in enumerate(jobs) if mine]
        target_refs = [
            self.pool.actors[a].target_lanes.remote(jobs[a], *model_refs)
            for a in called
        ]
        return D2DLaneBatch(
            resets, loss_refs, where, [jobs[a] for a in called], target_refs
        )

    def finish(self, batch: D2DLaneBatch) -> dict[int, D2DLaneOutcome]:
        """Wait for a :meth:`start`'s round; fold π; return lane → its outcome."""
        if batch.resets:
            ray.get(batch.resets)
        losses = ray.get(batch.loss_refs)
        replies = ray.get(batch.target_refs)
        out: dict[int, D2DLaneOutcome] = {}
        for jobs, reply in zip(batch.jobs, replies, strict=True):
            for i, job in enumerate(jobs):
                out[job.lane] = self._conclude(job, reply, i, losses, batch.where)
        return out

    def _submit_train(
        self, rounds: dict[int, tuple[int, Selections]]
    ) -> tuple[list[Any], list[Any], dict[tuple[int, int], tuple[int, int]]]:
        """Submit every lane's neighbors' local runs, one call per host.

        Returns:
            The loss refs and model refs of the calls, and (lane, client) →
            (call index, row).
        """
        assert self.pool is not None
        per: list[tuple[list[int], list[int], list[int]]] = [
            ([], [], []) for _ in self.pool.actors
        ]
        actor_of = self.pool.actor_of
        for lane, (t, _) in rounds.items():
            for m in self._lane(lane).selection.neighbors:
                lanes, clients, ts = per[int(actor_of[m])]
                lanes.append(lane)
                clients.append(m)
                ts.append(t)
        loss_refs: list[Any] = []
        model_refs: list[Any] = []
        where: dict[tuple[int, int], tuple[int, int]] = {}
        for a, (lanes, clients, ts) in enumerate(per):
            if not lanes:
                continue
            call = len(model_refs)
            for row, (lane, m) in enumerate(zip(lanes, clients, strict=True)):
                where[(lane, m)] = (call, row)
            loss, models = (
                self.pool.actors[a]
                .train_local.options(num_returns=2)
                .remote(lanes, clients, ts)
            )
            loss_refs.append(loss)
            model_refs.append(models)
        return loss_refs, model_refs, where

    def _target_job(
        self, lane: int, t: int, where: dict[tuple[int, int], tuple[int, int]]
    ) -> TargetJob:
        """The lane's deliveries and E/M decision (``D2DRound._em_round``'s rule)."""
        run = self._lane(lane)
        topo, sel = self.topology, run.selection
        neighbors = list(sel.neighbors)
        layout, error = run.motion.links(t, run.target)
        ok = deliveries(
            topo,
            layout,
            sel,
            neighbors,
            round=t,
            seed=run.seed,
            error=error,
            state=run.motion.link_state(t, run.target),
        )
        usable = [m for m in neighbors if ok[m]]
        idx = [neighbors.index(m) for m in usable]
        run_em = not run.em.frozen or topo.em_mode == "online"
        steps = (
            topo.em_steps_per_round if run_em and usable and len(neighbors) > 1 else 0
        )
        return TargetJob(
            lane,
            t,
            run.target,
            usable,
            [where[(lane, m)] for m in usable],
            idx,
            np.array(run.em.log_pi, dtype=np.float64),
            steps,
            float(topo.alpha),
        )

    def _conclude(
        self,
        job: TargetJob,
        reply: dict[str, Any],
        i: int,
        losses: list[npt.NDArray[np.float64]],
        where: dict[tuple[int, int], tuple[int, int]],
    ) -> D2DLaneOutcome:
        """Fold the E/M result into π; return the lane's outcome."""
        run = self._lane(job.lane)
        step = reply["em"][i]
        if step is not None:
            run.em.apply(
                job.idx,
                step[0],
                float(step[1]),
                round=job.round,
                topology=self.topology,
            )
        primary = _primary(self.topology)
        loss_key = primary.replace("acc", "loss")
        target = run.target
        train_loss = {
            m: float(losses[where[(job.lane, m)][0]][where[(job.lane, m)][1]])
            for m in run.selection.neighbors
        }
        train_loss[target] = float(reply["train_loss"][i])
        return D2DLaneOutcome(
            {target: float(reply[loss_key][i])},
            {target: float(reply[primary][i])},
            {target: list(job.neighbors)},
            {
                target: pi_vector(
                    self.num_clients, run.selection.neighbors, np.exp(run.em.log_pi)
                )
            },
            train_loss,
        )

    def _send_restarts(self) -> list[Any]:
        """Send the hosts the lanes restarted since the last call (refs to wait on)."""
        if not self._pending:
            return []
        assert self.pool is not None
        pending, self._pending = self._pending, {}
        return [a.reset_lanes.remote(pending) for a in self.pool.actors]

    def close(self) -> None:
        """Kill the hosts and stop Ray if these lanes started it."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self.session.close()
