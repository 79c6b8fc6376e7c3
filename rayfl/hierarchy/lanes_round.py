"""One lane's global round on the driver: its run state, plan, cloud, settling.

The driver side of :class:`rayfl.hierarchy.lanes.HierLanes` (the edges are in
:mod:`rayfl.hierarchy.lanes_edges`), the code of
``HierarchicalRound`` and of the cloud actor applied to one lane's
run state (:class:`LaneRun`) — or, for the cloud's average, to every lane at
once as numpy over (lane × edge × dim).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.hierarchy.accounting import Prices, RoundRecords, settle_round
from rayfl.hierarchy.control import learning_rate
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.edge import EdgeHost
from rayfl.hierarchy.interval import Interval
from rayfl.hierarchy.lanes_ledger import LaneLedger
from rayfl.hierarchy.scheduling import EdgeScheduling, upload_fading
from rayfl.hierarchy.submit import Plan, Sent, make_plan
from rayfl.hierarchy.topology import Topology
from rayfl.pcg_columns import exponential_rows
from rayfl.schedule import Schedule
from rayfl.system import EvalRow, RoundResult

__all__ = [
    "LaneRound",
    "LaneRun",
    "LaneScheduling",
    "Shared",
    "cloud_average",
    "draw_tables",
    "eval_rows",
    "next_key",
    "plan_round",
    "price_lanes",
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
    "hier_subchannel_fading", key, i); every device of every pair is drawn in
    one :func:`rayfl.pcg_columns.exponential_rows` call (numpy's draws, bit for
    bit). A pair whose table exists is skipped.
    """
    todo = [(s, k) for s, k in dict.fromkeys(todo) if k not in s._tables]
    if not todo:
        return
    devices = [np.concatenate(s.subnets) for s, _ in todo]
    sizes = [len(d) for d in devices]
    widths = [
        max(s.num_subchannels) if s.config.frequency_selective else 1 for s, _ in todo
    ]
    draws = exponential_rows(
        np.repeat([s.seed for s, _ in todo], sizes),
        "hier_subchannel_fading",
        rounds=np.repeat([k for _, k in todo], sizes),
        clients=np.concatenate(devices),
        size=max(widths),
    )
    first = 0
    for (s, k), order in zip(todo, devices, strict=True):
        rows = draws[first : first + len(order)]
        first += len(order)
        table = np.full((len(s.num_train), max(s.num_subchannels)), np.nan)
        at = 0
        for members, k_e in zip(s.subnets, s.num_subchannels, strict=True):
            mine = rows[at : at + len(members)]
            at += len(members)
            # frequency-flat: one draw per device, on every subchannel
            table[members, :k_e] = (
                mine[:, :k_e] if s.config.frequency_selective else mine[:, :1]
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


def eval_rows(
    groups: list[list[int]], batches: list[Any], devices: int
) -> list[list[EvalRow]]:
    """Each lane's rows (``client``, ``test_loss``, ``test_acc``), by device.

    Args:
        groups: Each host's devices (``ActorPool.groups``).
        batches: Each host's ``evaluate_columns`` reply: (loss, acc), (lanes,
            its devices) each; none when no lane was evaluated.
        devices: N.
    """
    if not batches:  # nothing was submitted
        return []
    loss, acc = np.zeros((2, len(batches[0][0]), devices))
    for group, (host_loss, host_acc) in zip(groups, batches, strict=True):
        loss[:, group], acc[:, group] = host_loss, host_acc
    return [
        [
            {"client": i, "test_loss": a, "test_acc": b}
            for i, (a, b) in enumerate(zip(lo, ac, strict=True))
        ]
        for lo, ac in zip(loss.tolist(), acc.tolist(), strict=True)
    ]


def next_key(run: LaneRun, plan: Plan) -> tuple[LaneScheduling, int]:
    """``run``'s scheduling and the fading key of its observation after ``plan``.

    The draws are keyed by (seed, key, device), so drawing them early (the
    memo keeps them) changes nothing but when the driver spends the time.
    """
    first = run.interval.period_index + len(plan.segments)
    return run.scheduling, int(run.scheduling.fading_key(plan.k + 1, first))


def price_lanes(
    shared: Shared, rounds: Sequence[tuple[LaneRun, LaneRound]]
) -> list[Prices]:
    """Each lane's uploads' (time_s, energy_j), priced in one ``cost.uploads`` call.

    ``device_rows``' prices of each lane's round (elementwise: the same numbers
    lane by lane): the fading of each priced upload (``upload_fading``: the
    lane's table of the call's key, at the device's subchannel), in call order.
    """
    devices: list[int] = []
    fading: list[npt.NDArray[np.float64]] = []
    sizes = []
    for run, done in rounds:
        plan, sch = done.plan, run.scheduling
        first = len(devices)
        for (c, p, mine, _), recs in zip(
            done.sent.device_calls, done.devices, strict=True
        ):
            if recs is None:
                continue
            devices += mine
            if plan.subchannel is None:
                fading.append(
                    upload_fading(
                        sch,
                        None,
                        seed=run.config.seed,
                        k=plan.k,
                        edge=c,
                        period=p,
                        devices=mine,
                    )
                )
            else:
                table = sch.draw(sch.fading_key(plan.k, p))
                fading.append(table[mine, [plan.subchannel[i] for i in mine]])
        sizes.append(len(devices) - first)
    if not devices:
        return [(np.zeros(0), np.zeros(0)) for _ in rounds]
    time_s, energy_j = shared.cost.uploads(devices, np.concatenate(fading))
    ends = np.cumsum(sizes)
    return [
        (time_s[end - n : end], energy_j[end - n : end])
        for end, n in zip(ends.tolist(), sizes, strict=True)
    ]


def settle_lane(
    shared: Shared, run: LaneRun, done: LaneRound, prices: Prices | None = None
) -> RoundResult:
    """``HierarchicalRound._settle`` of one lane's round (no edge rows kept).

    ``prices``: the round's uploads priced by :func:`price_lanes` (None: here).
    """
    plan, cfg = done.plan, shared.config
    rows, _, extras = settle_round(
        RoundRecords(plan, done.sent, done.devices, done.edges, [], prices),
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
