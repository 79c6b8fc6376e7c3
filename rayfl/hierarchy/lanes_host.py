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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.client import TRAIN_CHUNK
from rayfl.actors.cloud import REJECT_NON_FINITE
from rayfl.actors.lanes import LaneHost
from rayfl.actors.restart import needs_state
from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
from rayfl.exactsum import ExactSum, group_running_sums
from rayfl.learning.aggregate import PartialSum, partial_sum
from rayfl.privacy.clip import clip_scale
from rayfl.seeding import normal_rows, rng_for_many, rng_reseeded

__all__ = [
    "HierLaneActor",
    "HierLaneHost",
    "PackedSums",
    "SegmentJob",
    "job_sums",
    "pack_jobs",
    "pack_sums",
    "unpack_jobs",
    "weight_total",
]


@dataclass(frozen=True)
class SegmentJob:
    """One lane's subnet c on one host for one segment (``train_segment``'s arguments).

    Attributes:
        lane: The lane (run) index.
        row: The row of the job's start model w̄_c in the call's start models.
        edge: The edge c.
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


#: Jobs as arrays (cheap to send): ints (jobs, 7) lane, row, edge, period, steps,
#: equal_weights, clip given; floats (jobs, 3) lr, clip_norm, noise_std; the
#: clients of every job in order, and each job's count.
PackedJobs = tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.float64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
]


def pack_jobs(jobs: list[SegmentJob]) -> PackedJobs:
    """Return ``jobs`` as arrays (:data:`PackedJobs`; :func:`unpack_jobs` inverts)."""
    ints = np.array(
        [
            (
                j.lane,
                j.row,
                j.edge,
                j.period,
                j.steps,
                j.equal_weights,
                j.clip_norm is not None,
            )
            for j in jobs
        ],
        dtype=np.int64,
    ).reshape(-1, 7)
    floats = np.array(
        [
            (j.lr, 0.0 if j.clip_norm is None else j.clip_norm, j.noise_std)
            for j in jobs
        ],
        dtype=np.float64,
    ).reshape(-1, 3)
    clients = np.array([i for j in jobs for i in j.clients], dtype=np.int64)
    counts = np.array([len(j.clients) for j in jobs], dtype=np.int64)
    return ints, floats, clients, counts


def unpack_jobs(packed: PackedJobs) -> list[SegmentJob]:
    """Return the jobs :func:`pack_jobs` packed (the same values)."""
    ints, floats, clients, counts = packed
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]]
    return [
        SegmentJob(
            lane,
            row,
            edge,
            period,
            clients[first:end].tolist(),
            lr,
            steps,
            clip if has_clip else None,
            std,
            bool(equal),
        )
        for (lane, row, edge, period, steps, equal, has_clip), (
            lr,
            clip,
            std,
        ), first, end in zip(ints.tolist(), floats.tolist(), starts, ends, strict=True)
    ]


def _job_rngs(
    jobs: list[SegmentJob], seeds: list[int], purpose: str
) -> list[list[np.random.Generator]]:
    """Each job's devices' (lane seed, purpose, period, device) generators.

    All seeded in one :func:`rayfl.seeding.rng_for_many` call.
    """
    sizes = [len(job.clients) for job in jobs]
    rngs = iter(
        rng_for_many(
            np.repeat(np.asarray(seeds, np.int64), sizes),
            purpose,
            rounds=np.repeat([job.period for job in jobs], sizes),
            clients=[c for job in jobs for c in job.clients],
        )
        if sum(sizes)
        else []
    )
    return [[next(rngs) for _ in range(n)] for n in sizes]


class HierLaneHost(LaneHost):
    """A :class:`LaneHost` with the hierarchy's segment training (module docstring)."""

    @needs_state
    def train_segment_lanes(
        self, edge_vectors: npt.NDArray[np.float32], packed: PackedJobs
    ) -> tuple[list[list[dict[str, Any]]], PackedSums]:
        """Train every job's devices in stacked calls; clip, noise and sum each job.

        Args:
            edge_vectors: The jobs' start models w̄_c, float32 (rows, dim)
                (``job.row`` picks a job's).
            packed: The (lane, edge) shares of the segment on this host
                (:func:`pack_jobs`).

        Returns:
            Per job, in order, its devices' records; and the jobs' exact sums
            of their accepted uploads, packed (:meth:`PackedSums.unpack`: None
            for a job whose every upload was rejected).
        """
        jobs = unpack_jobs(packed)
        seeds = [self.lanes[job.lane].setup.seed for job in jobs]
        batch = _job_rngs(jobs, seeds, "batch")
        spans: list[list[ClientContext]] = []
        for job, rngs in zip(jobs, batch, strict=True):
            self._enter(job.lane)
            start = edge_vectors[job.row]
            controls = {"lr": float(job.lr)}
            spans.append(
                [
                    self._context(job.period, start, c, controls, 0.0, rng=rng)
                    for c, rng in zip(job.clients, rngs, strict=True)
                ]
            )
        updates = self._train(jobs, spans)
        noisy = [job for job in jobs if job.noise_std > 0]
        sizes = [len(job.clients) for job in noisy]
        noise = rng_reseeded(  # one draw per device of the noisy jobs, in order
            np.repeat(
                [s for s, j in zip(seeds, jobs, strict=True) if j.noise_std > 0], sizes
            ).astype(np.int64),
            "hier_device_noise",
            rounds=np.repeat([job.period for job in noisy], sizes).astype(np.int64),
            clients=np.array([c for job in noisy for c in job.clients], np.int64),
        )
        plain = self._plain_uploads(jobs)
        out, vectors, weights = [], [], []
        for job, span in zip(jobs, spans, strict=True):
            self._enter(job.lane)
            records: list[dict[str, Any]] = []
            done = updates[id(span)]
            if plain and all(u.support is None for u in done):
                vectors.append(self._plain_records(span, done, records))
            else:
                bundle = self._send_chunk(job.period, span, done, records)
                vectors.append([p.to_dense() for p in bundle.payloads])
            weights.append([u.weight for u in done])
            out.append(records)
        parts = reduce_jobs(jobs, out, vectors, weights, noise)
        return out, pack_sums(parts)

    def _plain_uploads(self, jobs: list[SegmentJob]) -> bool:
        """Whether every job's uploads leave as trained (no stage, no re-encoding)."""
        runs = [self.lanes[lane] for lane in {job.lane for job in jobs}]
        return all(
            not run.stages
            and run.setup.client_noise_std is None
            and type(run.algorithm).encode_upload is Algorithm.encode_upload
            and type(run.algorithm).payload_metrics is Algorithm.payload_metrics
            for run in runs
        )

    def _plain_records(
        self,
        span: list[ClientContext],
        updates: list[ClientUpdate],
        records: list[dict[str, Any]],
    ) -> list[npt.NDArray[np.float32]]:
        """``_send_chunk`` of dense uploads without uplink stage: records, vectors.

        The same records as :meth:`ClientHost._upload` (a dense payload of
        32·d bits) without building the payloads.
        """
        vectors = []
        for ctx, update in zip(span, updates, strict=True):
            ctx.state["local_updates"] = ctx.state.get("local_updates", 0) + 1
            vector = np.asarray(update.vector, dtype=np.float32).reshape(-1)
            bits = float(32 * len(vector))
            records.append(
                {
                    "client": ctx.client,
                    **update.metrics,
                    "payload_bits": bits,
                    "bits": bits,
                }
            )
            vectors.append(vector)
        return vectors

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


def reduce_jobs(
    jobs: list[SegmentJob],
    records: list[list[dict[str, Any]]],
    vectors: list[list[npt.NDArray[np.float32]]],
    weights: list[list[float]],
    rngs: Iterator[np.random.Generator],
) -> list[tuple[list[npt.NDArray[np.float32]], list[float]]]:
    """Clip and noise every job's uploads (``DeviceHost.train_segment``), all at once.

    Per upload, :func:`rayfl.privacy.clip.clip_by_l2_norm`'s numbers (its
    norm by ``np.dot`` row by row, the same scale and float32 cast) and
    ``normal(0, σ)``'s noise (:func:`rayfl.seeding.normal_rows`), bit for bit; the records get ``update_norm``, ``clip_scale``,
    ``device_noise_std`` and, for a non-finite upload, ``rejected``.

    Args:
        jobs: The jobs.
        records: Per job, its devices' records (updated in place).
        vectors: Per job, its uploads (float32 rows).
        weights: Per job, their weights.
        rngs: Yields each noisy job's devices' (seed, "hier_device_noise",
            period, device) generators in turn (jobs, then devices, in order).

    Returns:
        Per job, the accepted (finite) rows and their weights, for :func:`job_sums`.
    """
    counts = [len(v) for v in vectors]
    if not sum(counts):
        return [([], []) for _ in jobs]
    rows = np.array([v for vs in vectors for v in vs])  # float32 unless staged
    job = np.repeat(np.arange(len(jobs)), counts)
    clip = np.array(
        [np.nan if j.clip_norm is None else float(j.clip_norm) for j in jobs]
    )[job]
    flat_records = [rec for recs in records for rec in recs]
    clipped = np.flatnonzero(~np.isnan(clip))
    if len(clipped):
        wide = rows[clipped].astype(np.float64)
        norms = np.array([np.sqrt(np.dot(x, x)) for x in wide])
        scale = clip_scale(norms, clip_norm=clip[clipped])
        rows[clipped] = (wide * scale[:, None]).astype(np.float32)
        pairs = zip(
            clipped.tolist(), norms.tolist(), clip[clipped].tolist(), strict=True
        )
        for r, norm, c in pairs:
            flat_records[r]["update_norm"] = norm
            flat_records[r]["clip_scale"] = min(1.0, c / norm) if norm > 0 else 1.0
    std = np.array([float(j.noise_std) for j in jobs])[job]
    noisy = np.flatnonzero(std > 0)
    if len(noisy):
        noise = normal_rows(rngs, std[noisy], rows.shape[1])
        rows[noisy] = (rows[noisy] + noise).astype(np.float32)
    finite: npt.NDArray[np.bool_] = np.all(np.isfinite(rows), axis=1)
    out: list[tuple[list[npt.NDArray[np.float32]], list[float]]] = []
    first = 0
    for j, (spec, count) in enumerate(zip(jobs, counts, strict=True)):
        kept_rows, kept = [], []
        for i in range(count):
            r = first + i
            rec = flat_records[r]
            rec["device_noise_std"] = float(std[r])
            if not finite[r]:
                rec["rejected"] = REJECT_NON_FINITE
                continue
            kept_rows.append(rows[r])
            kept.append(1.0 if spec.equal_weights else float(weights[j][i]))
        out.append((kept_rows, kept))
        first += count
    return out


def job_sums(
    parts: list[tuple[list[npt.NDArray[np.float32]], list[float]]],
) -> list[PartialSum | None]:
    """Each job's :func:`partial_sum` of its rows (None: no row), all jobs at once.

    The running float64 sums of every job go through
    :func:`rayfl.exactsum.group_running_sums` together; a job whose running sum
    is exact keeps it as its ``exact64`` (what :func:`partial_sum`'s fast path
    keeps), any other goes to :func:`partial_sum`. Same values either way.
    """
    return pack_sums(parts).unpack()


@dataclass(frozen=True)
class PackedSums:
    """Jobs' partial sums as a host returns them: the exact ones in one array.

    One float64 array pickles and crosses the object store as one buffer; a
    list of :class:`ExactSum` costs a Python object and an array per job.

    Attributes:
        rows: The ``exact64`` of the jobs that have one, float64 (F, dim).
        at: Per job, its row in ``rows``; -1: no row (see ``others``).
        weights: Per job with a row, Σ w exactly; None for the others.
        counts: Per job, its number of uploads.
        others: The jobs summed on the limb path (job → its sum).
    """

    rows: npt.NDArray[np.float64]
    at: list[int]
    weights: list[Fraction | None]
    counts: list[int]
    others: dict[int, PartialSum]

    def unpack(self) -> list[PartialSum | None]:
        """Each job's sum (None: no upload); an exact one's ``exact64`` is a row view."""
        out: list[PartialSum | None] = []
        for j, (k, weight) in enumerate(zip(self.at, self.weights, strict=True)):
            if weight is None:  # the limb path's sum, or no upload
                out.append(self.others.get(j))
            else:
                out.append(ExactSum(None, 0, weight, self.counts[j], self.rows[k]))
        return out


def pack_sums(
    parts: list[tuple[list[npt.NDArray[np.float32]], list[float]]],
) -> PackedSums:
    """:func:`job_sums`, packed (:class:`PackedSums`)."""
    n = len(parts)
    at, counts = [-1] * n, [len(rows) for rows, _ in parts]
    totals: list[Fraction | None] = [None] * n
    others: dict[int, PartialSum] = {}
    full = [i for i, (rows, _) in enumerate(parts) if rows]
    if not full:
        return PackedSums(np.zeros((0, 0)), at, totals, counts, others)
    count = np.array([len(parts[i][0]) for i in full], np.int64)
    # np.array of equal rows is np.stack without a per-row expand_dims (~10x faster)
    stacked = np.array([r for i in full for r in parts[i][0]]).astype(np.float32)
    flat = np.array([w for i in full for w in parts[i][1]], np.float64)
    sums, exact = group_running_sums(
        np.repeat(np.arange(len(full)), count), count, stacked, flat
    )
    exact &= np.isfinite(sums).all(axis=1)
    kept: list[int] = []
    for g, i in enumerate(full):
        rows, ws = parts[i]
        if exact[g] and np.isfinite(ws).all():
            at[i], totals[i] = len(kept), weight_total(ws)
            kept.append(g)
        else:
            others[i] = partial_sum(np.stack(rows), ws)
    return PackedSums(sums[kept], at, totals, counts, others)


def weight_total(values: Sequence[float | Fraction]) -> Fraction:
    """Return the exact sum of floats or fractions, as a ``Fraction``.

    ``sum(Fraction(float(v)) ...)``'s value; integer values (the sample counts
    or ones of the uploads' weights) are summed as ints.

    Example:
        >>> weight_total([1.0, 2.0, Fraction(1, 2)])
        Fraction(7, 2)
    """
    total = 0
    for v in values:
        if isinstance(v, Fraction):
            if v.denominator != 1:
                break
            total += v.numerator
        elif float(v).is_integer():
            total += int(v)
        else:
            break
    else:
        return Fraction(total)
    return sum(
        (v if isinstance(v, Fraction) else Fraction(float(v)) for v in values),
        Fraction(0),
    )


HierLaneActor: Any = ray.remote(HierLaneHost)
"""``HierLaneHost`` as a Ray actor class."""
