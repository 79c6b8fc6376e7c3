"""The lane host: one group of clients, hosted for many runs stepping in lockstep.

A *lane* is one FL run (one episode of the scheduling env) on the shared
federated data; :class:`rayfl.star.lanes.StarLanes` steps E lanes in lockstep.
A :class:`LaneHost` is a :class:`rayfl.actors.client.ClientHost` whose run state
— the setup (seed), the clients' state, the algorithm bound to the seed, the
uplink stages — is kept per lane and swapped in (:meth:`LaneHost._enter`); the
data and the torch model do not depend on the run and are shared. One round of
all lanes is one call, :meth:`LaneHost.train_lanes`:

1. every lane's contexts (each with its own ω^t, seed-keyed batch order and
   state) are built and trained in **one** ``algorithm.client_update_many``
   call, :data:`~rayfl.actors.client.TRAIN_CHUNK` clients at a time;
2. each lane's updates then go through that lane's uplink stages, with the
   lane's seed, and are bundled (or pre-reduced) as
   :meth:`ClientHost.train <rayfl.actors.client.ClientHost.train>` would.

Step 1 is where the speed comes from, and it keeps each lane's numbers those of
a run of its own only because the trainers of :data:`LANE_ALGORITHMS` train each
client from its context alone: FedAvg's vectorized trainer gives a client
bit-identical parameters whatever clients share its stack
(:mod:`rayfl.learning.vectorized`, Implementation details 9).
:meth:`LaneHost.evaluate_lanes` evaluates every lane's clients with one batched
forward pass: equal to the per-client evaluation to float32 rounding (it never feeds
back into training).

Implementation details:
    1. A host restarted by Ray has lost its lanes: every lane call raises
       :class:`~rayfl.actors.restart.StateLost` until :meth:`reset_lanes`
       (the lanes have no snapshots to restore; their runs must restart).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.client import TRAIN_CHUNK, ClientHost
from rayfl.actors.messages import Uploads
from rayfl.actors.restart import StateLost, needs_state, state_restored
from rayfl.actors.setup import ActorSetup
from rayfl.actors.state import ClientStateStore
from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.algorithms.registry import make_algorithm
from rayfl.learning.segment_eval import evaluate_segments_many
from rayfl.privacy.pipeline import build_client_stages
from rayfl.seeding import rng_for_many

__all__ = ["LANE_ALGORITHMS", "LaneActor", "LaneHost", "LaneJob"]

#: Algorithms whose client update reads its context only (no per-run state in
#: the algorithm object, no stack-partner effect): the lanes may share one call.
LANE_ALGORITHMS = ("fedavg", "fedprox")


@dataclass(frozen=True)
class LaneJob:
    """One lane's share of a lockstep round on one host.

    Attributes:
        lane: The lane (run) index.
        round: The lane's round index t.
        clients: Its scheduled clients hosted here, ascending.
        controls: Per-client knobs, name → one value per entry of ``clients``.
    """

    lane: int
    round: int
    clients: list[int]
    controls: dict[str, list[float]]


@dataclass
class _LaneRun:
    """A lane's run state on a host (what :meth:`ClientHost.reset` renews)."""

    setup: ActorSetup
    state: ClientStateStore
    algorithm: Algorithm
    stages: list[Any]
    client_stages: dict[float, list[Any]]


class LaneHost(ClientHost):
    """A :class:`ClientHost` for E lanes (see the module docstring).

    Args:
        data: The federated dataset, or where to fetch it (as ``ClientHost``).
        clients: Ids of the virtual clients hosted here.
        setup: A setup of the shared config (its seed is not used by the lanes).
    """

    def __init__(self, data: Any, clients: Any, setup: ActorSetup) -> None:
        super().__init__(data, clients, setup)
        self.lanes: dict[int, _LaneRun] = {}
        #: The hosted clients' splits stacked for evaluation (built on first use).
        self._eval_data: tuple[Any, Any, Any] | None = None
        #: Their test splits only (the columnar lanes' evaluation after a round).
        self._test_data: tuple[Any, Any, Any] | None = None

    def reset_lanes(self, setups: dict[int, ActorSetup]) -> None:
        """Start a new run in each given lane: its setup (seed), empty client state."""
        for lane, setup in setups.items():
            algorithm = make_algorithm(setup.algorithm)
            algorithm.bind(privacy=setup.privacy, seed=setup.seed)
            stages = build_client_stages(
                setup.privacy,
                setup.compression,
                noise_std=setup.noise_std,
                layer_offsets=self.model.spec.offsets,
            )
            self.lanes[int(lane)] = _LaneRun(
                setup, ClientStateStore(self.clients), algorithm, stages, {}
            )
        state_restored(self)

    def _enter(self, lane: int) -> _LaneRun:
        """Make ``lane``'s run state the host's own (for the inherited methods)."""
        run = self.lanes.get(lane)
        if run is None:
            raise StateLost(f"LaneHost: lane {lane} has not been reset on this host")
        self.setup, self.state, self.algorithm = run.setup, run.state, run.algorithm
        self.stages, self._client_stages = run.stages, run.client_stages
        return run

    @needs_state
    def train_lanes(
        self, global_vectors: npt.NDArray[np.float32], jobs: list[LaneJob]
    ) -> list[tuple[list[dict[str, Any]], Uploads]]:
        """Train every job's clients in one stacked call; run each lane's uplink.

        Args:
            global_vectors: ω^t of every lane, float32 (E, dim), row = lane.
            jobs: The lanes' shares of the round on this host (each non-empty).

        Returns:
            Per job, in order: its clients' records and their uploads bundle.
        """
        spans: list[list[ClientContext]] = []
        rngs = iter(
            rng_for_many(
                [self._enter(j.lane).setup.seed for j in jobs for _ in j.clients],
                "batch",
                rounds=[job.round for job in jobs for _ in job.clients],
                clients=[client for job in jobs for client in job.clients],
            )
        )
        for job in jobs:
            self._enter(job.lane)
            vector = global_vectors[job.lane]
            spans.append(
                [
                    self._context(
                        job.round,
                        vector,
                        client,
                        {k: float(v[i]) for k, v in job.controls.items()},
                        0.0,
                        rng=next(rngs),
                    )
                    for i, client in enumerate(job.clients)
                ]
            )
        contexts = [ctx for span in spans for ctx in span]
        # the lanes share the algorithm section; its trainer reads contexts only
        trainer = self.lanes[jobs[0].lane].algorithm if jobs else self.algorithm
        updates: list[ClientUpdate] = []
        for first in range(0, len(contexts), TRAIN_CHUNK):
            updates += trainer.client_update_many(contexts[first : first + TRAIN_CHUNK])
        out = []
        done = 0
        for job, span in zip(jobs, spans, strict=True):
            self._enter(job.lane)
            records: list[dict[str, Any]] = []
            mine = updates[done : done + len(span)]
            done += len(span)
            out.append((records, self._send_chunk(job.round, span, mine, records)))
        return out

    @needs_state
    def evaluate_lanes(
        self, global_vectors: npt.NDArray[np.float32], lanes: list[int]
    ) -> list[list[dict[str, float]]]:
        """Evaluate every hosted client's model in each of ``lanes``.

        The rows are :meth:`ClientHost.evaluate`'s for the algorithms of
        :data:`LANE_ALGORITHMS` (no personal models), to float32 rounding: one
        batched forward pass over every lane's model and every hosted client's
        test and train split
        (:func:`rayfl.learning.segment_eval.evaluate_segments_many`, its
        module's Implementation details 1).

        Args:
            global_vectors: ω of every lane, float32 (E, dim), row = lane.
            lanes: The lanes to evaluate.

        Returns:
            Per lane, in order: one row per hosted client (``test_loss``,
            ``test_acc``, ``eval_train_loss``).
        """
        if self._eval_data is None:
            self._eval_data = _stacked_splits(self.data, self.clients)
        x, y, bounds = self._eval_data
        losses, accs = evaluate_segments_many(
            self.model, global_vectors[lanes], x, y, bounds
        )
        out = []
        for lane, loss, acc in zip(lanes, losses, accs, strict=True):
            run = self._enter(lane)
            rows = []
            for i, client in enumerate(self.clients):
                row = {
                    "client": client,
                    "test_loss": float(loss[2 * i]),
                    "test_acc": float(acc[2 * i]),
                    "eval_train_loss": float(loss[2 * i + 1]),
                }
                row.update(
                    run.algorithm.eval_train_objectives(
                        row["eval_train_loss"], self.state[client]
                    )
                )
                rows.append(row)
            out.append(rows)
        return out

    @needs_state
    def train_columns(
        self,
        global_vectors: npt.NDArray[np.float32],
        lanes: npt.NDArray[np.int64],
        rounds: npt.NDArray[np.int64],
        clients: npt.NDArray[np.int64],
    ) -> tuple[
        npt.NDArray[np.float32], npt.NDArray[np.float64], npt.NDArray[np.float64]
    ]:
        """Train one client per row, of row i's lane and round, in one stacked call.

        The columnar lanes' round (:mod:`rayfl.star.columns`): for the configs
        it accepts (no uplink stage: no privacy noise, no compression) a
        client's upload is its update as trained, so the host returns the
        updates stacked instead of per-lane bundles.

        Args:
            global_vectors: ω^t of every lane, float32 (E, dim), row = lane.
            lanes: (J,) the lane of each row.
            rounds: (J,) its round index t.
            clients: (J,) the client, hosted here.

        Returns:
            ``(updates, weights, train_loss)``: float32 (J, dim), float64 (J,)
            and (J,), row i the client of row i.
        """
        seeds = [self._enter(lane).setup.seed for lane in lanes.tolist()]
        rngs = rng_for_many(seeds, "batch", rounds=rounds, clients=clients)
        contexts = []
        for lane, t, client, rng in zip(
            lanes.tolist(), rounds.tolist(), clients.tolist(), rngs, strict=True
        ):
            self._enter(lane)
            contexts.append(
                self._context(t, global_vectors[lane], client, {}, 0.0, rng=rng)
            )
        trainer = self.lanes[int(lanes[0])].algorithm if len(lanes) else self.algorithm
        updates: list[ClientUpdate] = []
        for first in range(0, len(contexts), TRAIN_CHUNK):
            updates += trainer.client_update_many(contexts[first : first + TRAIN_CHUNK])
        for ctx in contexts:
            ctx.state["local_updates"] = ctx.state.get("local_updates", 0) + 1
        dim = self.model.spec.dim
        stack = np.zeros((len(updates), dim), np.float32)
        for i, update in enumerate(updates):
            stack[i] = update.vector
        weights = np.array([u.weight for u in updates], dtype=np.float64)
        losses = np.array(
            [u.metrics.get("train_loss", np.nan) for u in updates], dtype=np.float64
        )
        return stack, weights, losses

    @needs_state
    def evaluate_columns(
        self,
        global_vectors: npt.NDArray[np.float32],
        lanes: list[int],
        *,
        train_split: bool,
    ) -> tuple[npt.NDArray[np.float64], ...]:
        """Evaluate every hosted client in each of ``lanes``, as arrays.

        :meth:`evaluate_lanes`'s numbers without the rows: (L, hosted clients)
        ``test_loss`` and ``test_acc``, and ``eval_train_loss`` when
        ``train_split`` (only the first observation of an episode reads it).
        """
        split = 2 if train_split else 1
        if self._eval_data is None:
            self._eval_data = _stacked_splits(self.data, self.clients)
        if self._test_data is None:
            self._test_data = _stacked_splits(self.data, self.clients, train=False)
        x, y, bounds = self._eval_data if train_split else self._test_data
        losses, accs = evaluate_segments_many(
            self.model, global_vectors[lanes], x, y, bounds
        )
        out = (losses[:, 0::split], accs[:, 0::split])
        return out + (losses[:, 1::2],) if train_split else out


def _stacked_splits(
    data: Any, clients: list[int], *, train: bool = True
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Return every client's test then train split (or test only), and the boundaries."""
    xs, ys = [], []
    for client in clients:
        splits = (
            (data.test(client), data.train(client)) if train else (data.test(client),)
        )
        for x, y in splits:
            xs.append(np.asarray(x))
            ys.append(np.asarray(y))
    bounds = np.concatenate([[0], np.cumsum([len(y) for y in ys])]).astype(np.int64)
    return np.concatenate(xs), np.concatenate(ys), bounds


LaneActor: Any = ray.remote(LaneHost)
"""``LaneHost`` as a Ray actor class."""
