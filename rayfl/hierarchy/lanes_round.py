"""One lane's global round on the driver: its run state, plan, edges, cloud, settling.

The driver side of :class:`rayfl.hierarchy.lanes.HierLanes`, the code of
``HierarchicalRound`` and of the edge and cloud actors applied to one lane's
run state (:class:`LaneRun`) — or, for the cloud's average, to every lane at
once as numpy over (lane × edge × dim).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.accounting import RoundRecords, settle_round
from rayfl.hierarchy.control import learning_rate
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.edge import EdgeHost
from rayfl.hierarchy.interval import Interval
from rayfl.hierarchy.lanes_ledger import LaneLedger
from rayfl.hierarchy.scheduling import EdgeScheduling, upload_fading
from rayfl.hierarchy.submit import Plan, Sent, make_plan
from rayfl.hierarchy.topology import Topology
from rayfl.schedule import Schedule
from rayfl.seeding import rng_for_many
from rayfl.system import EvalRow, RoundResult

__all__ = [
    "LaneRound",
    "LaneRun",
    "LaneScheduling",
    "Shared",
    "aggregate_edges",
    "cloud_average",
    "draw_tables",
    "plan_round",
    "settle_lane",
]


class LaneScheduling(EdgeScheduling):
    """:class:`EdgeScheduling` that keeps the fading it drew (same draws).

    A round's observation draws every device's fading of the round's key; its
    settling prices the uploads with the same draws (``upload_fading``). The
    draws of one key are kept as one table (device × K_e, padded with NaN)
    drawn at once (:meth:`draw`), and the gains are read off it.
    """

    def reset(self) -> None:
        """Clear the per-device history (and start the fading memo)."""
        super().reset()
        self._tables: dict[int, npt.NDArray[np.float64]] = {}

    def draw(self, key: int) -> npt.NDArray[np.float64]:
        """Return abs(u_{i,k})² of every device for fading key ``key`` (I, max K_e).

        Row i holds ``EdgeScheduling.fading(key, i, K_e)`` of device i's edge
        in its first K_e columns; drawn once per key.
        """
        table = self._tables.get(int(key))
        if table is None:
            draw_tables([(self, int(key))])
            table = self._tables[int(key)]
        return table

    def fading(
        self, key: int, device: int, num_subchannels: int
    ) -> npt.NDArray[np.float64]:
        """``EdgeScheduling.fading``, drawn once per key (:meth:`draw`)."""
        return self.draw(key)[int(device), : int(num_subchannels)]

    def gains_db(self, c: int, key: int) -> npt.NDArray[np.float64]:
        """``EdgeScheduling.gains_db`` off the key's table (same values)."""
        members = self.subnets[c]
        fading = self.draw(key)[members, : self.num_subchannels[c]]
        return self.large_scale_db[members, None] + 10 * np.log10(fading)


def draw_tables(todo: list[tuple[LaneScheduling, int]]) -> None:
    """Draw the fading tables of many (lane scheduling, key) pairs at once.

    ``EdgeScheduling.fading``'s draws: device i's generator is (lane seed,
    "hier_subchannel_fading", key, i), all seeded in one
    :func:`rayfl.seeding.rng_for_many` call; a pair whose table exists is
    skipped.
    """
    todo = [(s, k) for s, k in dict.fromkeys(todo) if k not in s._tables]
    if not todo:
        return
    devices = [np.concatenate(s.subnets) for s, _ in todo]
    sizes = [len(d) for d in devices]
    rngs = iter(
        rng_for_many(
            np.repeat([s.seed for s, _ in todo], sizes),
            "hier_subchannel_fading",
            rounds=np.repeat([k for _, k in todo], sizes),
            clients=np.concatenate(devices),
        )
    )
    for s, k in todo:
        table = np.full((len(s.num_train), max(s.num_subchannels)), np.nan)
        selective = s.config.frequency_selective
        for members, k_e in zip(s.subnets, s.num_subchannels, strict=True):
            for device in members.tolist():
                rng = next(rngs)
                table[device, :k_e] = (
                    rng.exponential(1.0, size=k_e)
                    if selective
                    else rng.exponential(1.0)
                )
        s._tables[k] = table


@dataclass(frozen=True)
class Shared:
    """What every lane shares: the config, subnets, cost model, data sizes, DP."""

    config: Any
    topology: Topology
    cost: CostModel
    num_train: npt.NDArray[np.int64]
    num_test: npt.NDArray[np.int64]
    dp_enabled: bool
    #: q of eq. 15 (``HierarchicalRound.sample_rate``).
    sample_rate: float


@dataclass
class LaneRun:
    """One lane's run on the driver: config (seed), ω, schedule, ledger, edges."""

    config: Any
    vector: npt.NDArray[np.float32]
    interval: Interval
    ledger: LaneLedger
    scheduling: LaneScheduling
    edges: list[EdgeHost]
    #: The devices' evaluations of ``vector`` (None: not evaluated yet).
    evals: list[EvalRow] | None = None


@dataclass
class LaneRound:
    """One lane's global round in flight: plan, calls, records, edge records."""

    plan: Plan
    sent: Sent
    devices: list[list[dict[str, Any]] | None]
    edges: list[dict[str, Any]]


def plan_round(
    shared: Shared, run: LaneRun, k: int, schedules: Sequence[Schedule]
) -> Plan:
    """``HierarchicalRound._plan`` of ``run``: S_c^k, η_k, segments, noise stds."""
    cfg, it = shared.config, run.interval
    chosen, subchannel = run.scheduling.participants_of(
        tuple(schedules), it.participants
    )
    eta = learning_rate(
        cfg.topology,
        k=k,
        base_lr=cfg.algorithm.lr,
        beta_hat=it.beta_hat,
        tau=it.tau,
        num_global=cfg.rounds,
    )
    return make_plan(
        k,
        chosen,
        subchannel=subchannel,
        topo=cfg.topology,
        interval=it,
        eta=eta,
        dp_enabled=shared.dp_enabled,
        trusted=shared.topology.trusted,
        num_global=cfg.rounds,
        sample_rate=shared.sample_rate,
    )


def aggregate_edges(
    j: int,
    done: LaneRound,
    run: LaneRun,
    edge_models: npt.NDArray[np.float32],
    sums: dict[int, list[Any]],
) -> None:
    """Run every edge of ``run``'s segment j (``EdgeHost.aggregate``) in place.

    Args:
        j: The segment.
        done: The lane's round (its edge records are appended).
        run: The lane's run (its edges).
        edge_models: The lane's w̄_c, float32 (C, dim), replaced by the new ones.
        sums: Edge → the exact sums of its devices' uploads, by host.
    """
    plan = done.plan
    p = done.sent.periods[j][0]
    is_global = j == len(plan.segments) - 1
    for c, edge in enumerate(run.edges):
        std = plan.stds.std(c, edge=True, is_global=is_global)
        edge_models[c], rec = edge.aggregate(
            p, edge_models[c], std, 0.0, *sums.get(c, [])
        )
        done.edges.append(rec)


def cloud_average(
    shared: Shared, plans: Sequence[Plan], edge_models: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """Every lane's w̄^(t_{k+1}) = Σ_c ϱ_c v_c / Σ_c ϱ_c (``HierCloudHost``'s sums).

    Args:
        shared: The lanes' shared part (weighting, data sizes).
        plans: Each lane's plan (its S_c^k weigh the edges by data size).
        edge_models: v_c of each lane, float32 (L, C, dim), rows as ``plans``.

    Returns:
        The new global models, float32 (L, dim).
    """
    num_edges = edge_models.shape[1]
    if shared.config.topology.weighting == "equal":
        w = np.ones((len(plans), num_edges))
    else:
        w = np.array(
            [[float(shared.num_train[list(m)].sum()) for m in p.chosen] for p in plans]
        )
    total = np.zeros((len(plans), edge_models.shape[2]), dtype=np.float64)
    for c in range(num_edges):  # edge-id order, as the cloud actor adds
        total += w[:, c, None] * edge_models[:, c].astype(np.float64)
    return (total / w.sum(axis=1)[:, None]).astype(np.float32)


def settle_lane(shared: Shared, run: LaneRun, done: LaneRound) -> RoundResult:
    """``HierarchicalRound._settle`` of one lane's round (no edge rows kept)."""
    plan, cfg = done.plan, shared.config
    rows, _, extras = settle_round(
        RoundRecords(plan, done.sent, done.devices, done.edges, []),
        topo=cfg.topology,
        trusted=shared.topology.trusted,
        cost=shared.cost,
        fading_of=lambda c, p, mine: upload_fading(
            run.scheduling,
            plan.subchannel,
            seed=run.config.seed,
            k=plan.k,
            edge=c,
            period=p,
            devices=mine,
        ),
        interval=run.interval,
        ledger=run.ledger,
        num_train=shared.num_train,
        num_test=shared.num_test,
        dp_enabled=shared.dp_enabled,
        num_global=cfg.rounds,
    )
    run.scheduling.observe(plan.chosen, rows)
    delivered = sorted(r["client"] for r in rows if r["delivered"])
    return RoundResult(plan.k, rows, delivered, extras)
