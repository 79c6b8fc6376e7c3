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
from rayfl.privacy.pipeline import build_client_stages

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
        """Evaluate every hosted client's models in each of ``lanes``.

        Args:
            global_vectors: ω of every lane, float32 (E, dim), row = lane.
            lanes: The lanes to evaluate.

        Returns:
            Per lane, in order: :meth:`ClientHost.evaluate`'s rows.
        """
        out = []
        for lane in lanes:
            self._enter(lane)
            out.append(ClientHost.evaluate(self, global_vectors[lane]))
        return out


LaneActor: Any = ray.remote(LaneHost)
"""``LaneHost`` as a Ray actor class."""
