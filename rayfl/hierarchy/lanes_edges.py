"""The edges of the hierarchy's lanes on the driver, as columns over (lane, edge) pairs.

``EdgeHost.aggregate`` of every (lane, edge) pair of one segment at once. The
device hosts return their jobs' exact sums packed (:class:`PackedSums`); the
driver keeps them as columns (:class:`EdgeSums`: per job its pair, its row of
the hosts' concatenated sums, its weight and upload count) and averages every
pair with a few numpy calls, without one Python object per job or pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from rayfl.exactsum import ExactSum, group_running_sums, plain_divisions
from rayfl.hierarchy.edge import apply_sums
from rayfl.hierarchy.lanes_host import PackedSums, weight_total
from rayfl.learning.aggregate import PartialSum
from rayfl.seeding import normal_into, rng_reseeded

if TYPE_CHECKING:
    from rayfl.hierarchy.lanes_round import LaneRound, LaneRun

__all__ = ["EdgeSums", "aggregate_edges", "edge_means"]

_EXACT_INT = 2**53  # integers below this are float64s


@dataclass
class EdgeSums:
    """One segment's host sums of every (lane, edge) pair, as columns over jobs.

    The jobs are the hosts' in host order, each host's in its reply's order, so
    a pair's jobs come in the order ``EdgeHost`` adds its host sums.

    Attributes:
        rows: Every host's ``PackedSums.rows``, concatenated, float64 (F, dim).
        pair: Per job, its (lane, edge) pair, int64.
        row: Per job, its row in ``rows``; -1: none (see ``others``), int64.
        weights: Per job with a row, Σ w exactly; None for the others.
        counts: Per job, its uploads, int64.
        others: Job → its sum on the limb path (a job absent: no upload).
    """

    rows: npt.NDArray[np.float64]
    pair: npt.NDArray[np.int64]
    row: npt.NDArray[np.int64]
    weights: list[Fraction | None]
    counts: npt.NDArray[np.int64]
    others: dict[int, PartialSum]

    @classmethod
    def from_replies(
        cls,
        jobs: Sequence[Sequence[tuple[int, int, int]]],
        packs: Sequence[PackedSums],
        lanes: Sequence[int],
        num_edges: int,
    ) -> EdgeSums:
        """Columns of the hosts' replies.

        Args:
            jobs: Per host, each job's (lane, call index, edge).
            packs: Per host, its jobs' packed sums.
            lanes: The lanes in pair order: lane ``lanes[i]``'s edge c is pair
                i·num_edges + c.
            num_edges: The edges per lane.
        """
        position = {e: i for i, e in enumerate(lanes)}
        rows, pair, row, weights, counts = [], [], [], [], []
        others: dict[int, PartialSum] = {}
        base = first = 0
        for mine, packed in zip(jobs, packs, strict=True):
            at = np.asarray(packed.at, np.int64)
            row.append(np.where(at >= 0, at + base, -1))
            pair.append(
                np.array([position[e] * num_edges + c for e, _, c in mine], np.int64)
            )
            weights += packed.weights
            counts.append(np.asarray(packed.counts, np.int64))
            others.update({first + j: s for j, s in packed.others.items()})
            if len(packed.rows):
                rows.append(packed.rows)
                base += len(packed.rows)
            first += len(at)
        dim = max((r.shape[1] for r in rows), default=0)
        return cls(
            np.concatenate(rows) if rows else np.zeros((0, dim)),
            np.concatenate(pair) if pair else np.zeros(0, np.int64),
            np.concatenate(row) if row else np.zeros(0, np.int64),
            weights,
            np.concatenate(counts) if counts else np.zeros(0, np.int64),
            others,
        )

    def parts(self, jobs: Sequence[int]) -> list[PartialSum | None]:
        """The sums of ``jobs``, in order (None: no upload), for ``apply_sums``."""
        out: list[PartialSum | None] = []
        for j in jobs:
            weight = self.weights[j]
            if weight is None:  # the limb path's sum, or no upload
                out.append(self.others.get(j))
            else:
                rows = self.rows[self.row[j]]
                out.append(ExactSum(None, 0, weight, int(self.counts[j]), rows))
        return out


def edge_means(
    sums: EdgeSums, models: npt.NDArray[np.float32]
) -> tuple[npt.NDArray[np.float32], list[int]]:
    """Each pair's ``apply_sums(models[pair], its parts)``: model + exact mean, uploads.

    A pair whose parts all hold a float64 row is summed by
    :func:`rayfl.exactsum.group_running_sums` with all such pairs; when that sum
    is exact and its division plain, model + sum / Σw in float32 is
    ``apply_sums``' value. Every other pair (a limb-path part, no upload, an
    inexact sum) goes to ``apply_sums`` itself.

    Args:
        sums: The segment's host sums (:class:`EdgeSums`).
        models: Each pair's w̄_c, float32 (pairs, dim).

    Returns:
        The new models, float32 (pairs, dim), and each pair's upload count.
    """
    num = len(models)
    new = np.array(models, dtype=np.float32)
    counts: list[int | None] = [None] * num
    has_row = sums.row >= 0
    slow = np.zeros(num, dtype=bool)
    limb = [j for j, s in sums.others.items() if s is not None and s.count > 0]
    slow[sums.pair[np.asarray(limb, np.int64)]] = True
    fast = (np.bincount(sums.pair[has_row], minlength=num) > 0) & ~slow
    jobs = np.flatnonzero(has_row & fast[sums.pair])
    if len(jobs):
        jobs = jobs[np.argsort(sums.pair[jobs], kind="stable")]
        pairs, group, count = np.unique(
            sums.pair[jobs], return_inverse=True, return_counts=True
        )
        totals, exact = group_running_sums(
            group, count, sums.rows[sums.row[jobs]], np.ones(len(jobs))
        )
        divisors = _weight_totals([sums.weights[j] for j in jobs.tolist()], count)
        fine = exact & plain_divisions(totals, divisors) & (divisors > 0)
        at = pairs[fine]
        if not fine.all():  # (else no copies of the (pairs, dim) sums)
            totals, divisors = totals[fine], divisors[fine]
        with np.errstate(over="ignore"):
            mean = np.divide(totals, divisors[:, None], out=totals).astype(np.float32)
            if len(at) == num:  # every pair, in order: in place
                new += mean
            else:
                new[at] += mean
        starts = np.cumsum(count) - count
        uploads = np.add.reduceat(sums.counts[jobs], starts)[fine]
        for k, n in zip(at.tolist(), uploads.tolist(), strict=True):
            counts[k] = n
    rest = [k for k, n in enumerate(counts) if n is None]
    if rest:
        order = np.argsort(sums.pair, kind="stable")
        ks = np.array(rest, np.int64)
        bounds = np.searchsorted(sums.pair[order], np.stack([ks, ks + 1])).tolist()
        for k, a, b in zip(rest, *bounds, strict=True):
            parts = sums.parts(order[a:b].tolist())
            new[k], counts[k] = apply_sums(models[k], tuple(parts))
    return new, [int(n or 0) for n in counts]


def _weight_totals(
    weights: Sequence[Fraction | None], count: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """float(Σ w) of each group of ``count`` consecutive weights, exactly summed.

    Integer weights whose sums stay below 2⁵³ are summed as int64 (the same
    floats as ``float(weight_total(...))``); any other group by
    :func:`weight_total`.
    """
    ints = [w.numerator for w in weights if w is not None and w.denominator == 1]
    bound = _EXACT_INT // max(1, int(count.max(initial=1)))
    if len(ints) == len(weights) and all(abs(v) < bound for v in ints):
        starts = np.cumsum(count) - count
        totals = np.add.reduceat(np.array(ints, np.int64), starts)
        return totals.astype(np.float64)
    ends = np.cumsum(count).tolist()
    groups = (weights[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True))
    return np.array(
        [float(weight_total([w for w in g if w is not None])) for g in groups],
        np.float64,
    )


def aggregate_edges(
    j: int,
    lanes: Sequence[tuple[LaneRound, LaneRun]],
    edge_models: npt.NDArray[np.float32],
    sums: EdgeSums,
) -> None:
    """Run every edge of the lanes' segment j (``EdgeHost.aggregate``) in place.

    All (lane, edge) pairs at once, with ``EdgeHost.aggregate``'s numbers: the
    exact sum of the edge's host sums divided by their exact weight, added to
    w̄_c in float32 (:func:`edge_means`), then the trusted edge's noise from
    (lane seed, "hier_edge_noise", period, edge).

    Args:
        j: The segment.
        lanes: Each lane's round (its edge records are appended) and run.
        edge_models: Each lane's w̄_c, float32 (lanes, C, dim), replaced by the
            new ones.
        sums: The host sums; pair i·C + c is lane i's edge c.
    """
    num_edges, dim = edge_models.shape[1:]
    periods, stds = [], []
    for done, _ in lanes:
        plan, is_global = done.plan, j == len(done.plan.segments) - 1
        periods.append(done.sent.periods[j][0])
        stds += [
            plan.stds.std(c, edge=True, is_global=is_global) for c in range(num_edges)
        ]
    new, counts = edge_means(sums, edge_models.reshape(-1, dim))
    std = np.hypot(np.array(stds, np.float64), 0.0)
    noisy = np.flatnonzero(std > 0).tolist()
    edges = [run.edges for _, run in lanes]
    rngs = rng_reseeded(  # used in ``noisy``'s order, one draw each
        [edges[k // num_edges][k % num_edges].seed for k in noisy],
        "hier_edge_noise",
        rounds=[periods[k // num_edges] for k in noisy],
        clients=[edges[k // num_edges][k % num_edges].edge for k in noisy],
    )
    norms = np.zeros(len(std))
    noise = np.empty(dim)
    for k, scale in zip(noisy, std[noisy].tolist(), strict=True):
        # the draw, its norm and the float32 sum one row at a time, in cache
        normal_into(next(rngs), scale, noise)
        norms[k] = np.sqrt(noise.dot(noise))  # np.linalg.norm's
        new[k] = new[k] + noise
    edge_models[...] = new.reshape(edge_models.shape)
    for k, (s, norm, n) in enumerate(
        zip(std.tolist(), norms.tolist(), counts, strict=True)
    ):
        i, c = divmod(k, num_edges)
        lanes[i][0].edges.append(
            {
                "edge": edges[i][c].edge,
                "period": int(periods[i]),
                "uploads": n,
                "edge_noise_std": s,
                "edge_noise_norm": norm,
            }
        )
