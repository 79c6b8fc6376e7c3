"""The hierarchy's lane host: every lane's segment of its devices in one call.

:class:`HierLaneHost` is a :class:`rayfl.actors.lanes.LaneHost` (per-lane run
state, shared data and model, batched evaluation) that adds
:meth:`HierLaneHost.train_segment_lanes`, the lanes' version of
:meth:`rayfl.hierarchy.device.DeviceHost.train_segment`: one call trains, for
every (lane, edge) job, the job's devices from the lane's edge model w̄_c in one
stacked ``client_update_many`` call, then post-processes each job as a device
actor does (clip the accumulated step to η·steps·G, add the untrusted edge's
device noise from (seed, "hier_device_noise", period, device), pre-reduce the
job's uploads into one exact sum).

A job's numbers are those of ``DeviceHost.train_segment`` with the same
arguments: the same contexts (batch order keyed by the lane setup's seed), the
same uplink stages, and a FedAvg/FedProx trainer whose result for a device does
not depend on its stack partners (:mod:`rayfl.actors.lanes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.client import TRAIN_CHUNK
from rayfl.actors.cloud import REJECT_NON_FINITE
from rayfl.actors.lanes import LaneHost
from rayfl.actors.messages import Uploads
from rayfl.actors.restart import needs_state
from rayfl.algorithms.base import ClientContext, ClientUpdate
from rayfl.learning.aggregate import PartialSum, partial_sum
from rayfl.privacy.clip import clip_by_l2_norm
from rayfl.seeding import rng_for

__all__ = ["HierLaneActor", "HierLaneHost", "SegmentJob"]


@dataclass(frozen=True)
class SegmentJob:
    """One lane's subnet c on one host for one segment (``train_segment``'s arguments).

    Attributes:
        lane: The lane (run) index.
        row: The lane's row in the call's edge models.
        edge: The edge c (row of the lane's edge models).
        period: Global aggregation-period index (keys batches and noise).
        clients: The subnet's participants hosted here, ascending.
        lr: η_k.
        steps: SGD steps of the segment.
        clip_norm: Clip of the accumulated step (η·steps·G) or None.
        noise_std: σ of every device of the job (0 under a trusted edge).
        equal_weights: ρ = 1/s_c (True) or by sample count.
    """

    lane: int
    row: int
    edge: int
    period: int
    clients: list[int]
    lr: float
    steps: int
    clip_norm: float | None
    noise_std: float
    equal_weights: bool


class HierLaneHost(LaneHost):
    """A :class:`LaneHost` with the hierarchy's segment training (module docstring)."""

    @needs_state
    def train_segment_lanes(
        self, edge_vectors: npt.NDArray[np.float32], jobs: list[SegmentJob]
    ) -> list[tuple[list[dict[str, Any]], PartialSum | None]]:
        """Train every job's devices in stacked calls; clip, noise and sum each job.

        Args:
            edge_vectors: w̄_c of the jobs' lanes, float32 (rows, C, dim).
            jobs: The (lane, edge) shares of the segment on this host.

        Returns:
            Per job, in order: its devices' records and the exact sum of its
            accepted uploads (None when every upload was rejected).
        """
        spans: list[list[ClientContext]] = []
        for job in jobs:
            self._enter(job.lane)
            start = edge_vectors[job.row, job.edge]
            controls = {"lr": float(job.lr)}
            spans.append(
                [
                    self._context(job.period, start, client, controls, 0.0)
                    for client in job.clients
                ]
            )
        updates = self._train(jobs, spans)
        out = []
        for job, span in zip(jobs, spans, strict=True):
            self._enter(job.lane)
            records: list[dict[str, Any]] = []
            bundle = self._send_chunk(job.period, span, updates[id(span)], records)
            out.append(self._reduce(job, records, bundle))
        return out

    def _train(
        self, jobs: list[SegmentJob], spans: list[list[ClientContext]]
    ) -> dict[int, list[ClientUpdate]]:
        """Train the spans' contexts, all jobs of one step count in one stack.

        Returns:
            ``id(span)`` → the span's updates, in order.
        """
        out: dict[int, list[ClientUpdate]] = {}
        for steps in sorted({job.steps for job in jobs}):
            mine = [s for j, s in zip(jobs, spans, strict=True) if j.steps == steps]
            contexts = [ctx for span in mine for ctx in span]
            # the lanes share the algorithm section; its trainer reads contexts only
            trainer = self.lanes[jobs[0].lane].algorithm
            cfg = trainer.config
            trainer.config = cfg.model_copy(update={"local_steps": int(steps)})
            try:
                updates: list[ClientUpdate] = []
                for first in range(0, len(contexts), TRAIN_CHUNK):
                    updates += trainer.client_update_many(
                        contexts[first : first + TRAIN_CHUNK]
                    )
            finally:
                trainer.config = cfg
            done = 0
            for span in mine:
                out[id(span)] = updates[done : done + len(span)]
                done += len(span)
        return out

    def _reduce(
        self, job: SegmentJob, records: list[dict[str, Any]], bundle: Uploads
    ) -> tuple[list[dict[str, Any]], PartialSum | None]:
        """Clip, noise and pre-reduce one job's uploads (``DeviceHost.train_segment``)."""
        rows, weights = [], []
        std = float(job.noise_std)
        for i, (client, payload) in enumerate(
            zip(job.clients, bundle.payloads, strict=True)
        ):
            vector = payload.to_dense()
            rec = records[i]
            if job.clip_norm is not None:
                vector, norm = clip_by_l2_norm(vector, clip_norm=float(job.clip_norm))
                rec["update_norm"] = float(norm)
                rec["clip_scale"] = (
                    float(min(1.0, job.clip_norm / norm)) if norm > 0 else 1.0
                )
            if std > 0:
                rng = rng_for(
                    self.setup.seed,
                    "hier_device_noise",
                    round=job.period,
                    client=client,
                )
                vector = (vector + rng.normal(0.0, std, size=vector.shape)).astype(
                    np.float32
                )
            rec["device_noise_std"] = std
            if not np.all(np.isfinite(vector)):
                rec["rejected"] = REJECT_NON_FINITE
                continue
            rows.append(vector)
            weights.append(1.0 if job.equal_weights else float(bundle.weights[i]))
        if not rows:
            return records, None
        return records, partial_sum(np.stack(rows), weights)


HierLaneActor: Any = ray.remote(HierLaneHost)
"""``HierLaneHost`` as a Ray actor class."""
