"""What a hierarchical global round records: device rows, the ledger, edge rows.

:func:`settle_round` turns a round's small records into its rows once they are
back (driver side, no Ray, called by ``rayfl.hierarchy.round.HierarchicalRound``)
through four keyword-only helpers:

- :func:`device_rows`: one row per participating device (mean train loss over
  its segments, sums of bits, upload time and energy; ``delivered`` and the
  ``rejected`` reason), plus each edge's upload energy/delay and the devices
  whose upload an edge did not get (refused, or lost with a dead actor);
- :func:`record_ledger`: one observer-ledger release per segment and subnet, at
  the noise multiplier the code enforces (``rayfl.hierarchy.dp``);
- :func:`edge_rows`: one ``edges.parquet`` row per edge (trust, participants,
  subnet accuracy, noise, energy, delay);
- :func:`round_extras`: the round's ``rounds.parquet`` columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rayfl.actors.cloud import REJECT_ACTOR_LOST
from rayfl.hierarchy.config import TopologyConfig
from rayfl.hierarchy.cost import CostModel
from rayfl.hierarchy.dp import release_noise_multiplier
from rayfl.hierarchy.interval import Interval
from rayfl.hierarchy.submit import Plan, Sent

__all__ = [
    "ReleaseLedger",
    "RoundRecords",
    "device_rows",
    "edge_rows",
    "record_ledger",
    "round_extras",
    "settle_round",
]


class ReleaseLedger(Protocol):
    """What a round records its releases in (``ObserverLedger``, a lane's ledger)."""

    nominal_epsilon: float

    def record(
        self, clients: list[int], *, trusted: bool, noise_multiplier: float
    ) -> None:
        """Charge one release of ``clients`` to the observers who see it."""


#: ``(edge c, period p, devices) -> fading power of each device's upload``.
FadingOf = Callable[[int, int, list[int]], npt.NDArray[np.float64]]

#: (time_s, energy_j) of a round's priced uploads, in call order.
Prices = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]


def _new_row(client: int) -> dict[str, Any]:
    return {
        "client": client,
        "loss_sum": 0.0,
        "n": 0,
        "bits": 0.0,
        "latency_s": 0.0,
        "energy_j": 0.0,
        "delivered": True,
    }


def _price(
    calls: Sequence[tuple[int, int, list[int], Any]],
    records: Sequence[list[dict[str, Any]] | None],
    fading_of: FadingOf,
    cost: CostModel,
) -> Prices:
    """Return every priced upload's (time_s, energy_j), all at once.

    Elementwise: the same numbers as call by call.
    """
    priced = [
        (mine, fading_of(c, p, mine))
        for (c, p, mine, _), recs in zip(calls, records, strict=True)
        if recs is not None
    ]
    if not priced:
        return np.zeros(0), np.zeros(0)
    return cost.uploads(
        [i for mine, _ in priced for i in mine],
        np.concatenate([fading for _, fading in priced]),
    )


def device_rows(
    *,
    calls: Sequence[tuple[int, int, list[int], Any]],
    records: Sequence[list[dict[str, Any]] | None],
    fading_of: FadingOf,
    cost: CostModel,
    subchannel: dict[int, int] | None,
    upload_count: npt.NDArray[np.int64],
    num_edges: int,
    prices: Prices | None = None,
) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray, list[set[int]]]:
    """Return the device rows, each edge's upload energy and delay, the refused.

    Args:
        calls: ``(edge, period, devices, _)`` of each device-actor call.
        records: Each call's records; None when its actor died (the uploads
            are lost: ``rejected = actor_lost``, not delivered, not priced).
        fading_of: The fading of each upload of a call.
        cost: Prices the uploads (time, energy).
        subchannel: Each device's subchannel this round, or None.
        upload_count: Segments trained per device; incremented in place.
        num_edges: Number of edges.
        prices: The (time_s, energy_j) of every priced upload (the calls with
            records, in order) when the caller priced them already (the
            values of ``cost.uploads`` of ``fading_of``'s fading).

    Returns:
        Rows sorted by device, upload energy (J) and delay (s) per edge, and
        per edge the devices whose upload it did not aggregate.
    """
    rows: dict[int, dict[str, Any]] = {}
    energy = np.zeros(num_edges)
    delay = np.zeros(num_edges)
    refused: list[set[int]] = [set() for _ in range(num_edges)]
    all_time_s, all_energy_j = prices or _price(calls, records, fading_of, cost)
    first = 0
    for (c, _p, mine, _), recs in zip(calls, records, strict=True):
        if recs is None:  # the actor died: these uploads are lost (packet loss)
            for i in mine:
                row = rows.setdefault(i, _new_row(i))
                row.update(delivered=False, rejected=REJECT_ACTOR_LOST)
                row["actor_failed"] = True
                refused[c].add(i)
            continue
        time_s = all_time_s[first : first + len(mine)]
        energy_j = all_energy_j[first : first + len(mine)]
        first += len(mine)
        energy[c] += energy_j.sum()
        delay[c] += time_s.sum()
        # Python floats (tolist) are the float() of each element, made at once
        for rec, t_s, e_j in zip(recs, time_s.tolist(), energy_j.tolist(), strict=True):
            i = int(rec["client"])
            if i not in rows:
                rows[i] = _new_row(i)
            row = rows[i]
            row["loss_sum"] += float(rec.get("train_loss", np.nan))
            row["n"] += 1
            row["bits"] += float(rec.get("bits", 0.0))
            row["latency_s"] += t_s
            row["energy_j"] += e_j
            if rec.get("rejected"):  # a reason: the device's update was refused
                row["delivered"] = False
                row["rejected"] = rec["rejected"]
                refused[c].add(i)
            if subchannel is not None:
                row["subchannel"] = subchannel[i]
            upload_count[i] += 1
    out = []
    for i in sorted(rows):
        r = rows.pop(i)
        n, loss = r.pop("n"), r.pop("loss_sum")
        r["train_loss"] = loss / n if n else float("nan")  # n = 0: all lost
        out.append(r)
    return out, energy, delay, refused


def record_ledger(
    *,
    ledger: ReleaseLedger,
    chosen: Sequence[list[int]],
    refused: Sequence[set[int]],
    trusted: npt.NDArray[np.bool_],
    stds: Any,
    steps: Sequence[int],
    local_at_global: bool,
    equal_weights: bool,
    num_train: npt.NDArray[np.int64],
    learning_rate: float,
    grad_bound: float | None,
    dp_enabled: bool,
) -> None:
    """Record one release per segment and subnet in ``ledger``.

    z is the noise multiplier at the sensitivity the code enforces
    (``rayfl.privacy.sensitivity``); without DP z = 0 (ε = ∞ for every
    observer). The extra ``local_at_global`` aggregation is post-processing
    (``rayfl.hierarchy.dp`` item 5) and records nothing.

    Args:
        ledger: The observer ledger.
        chosen: Participants of each subnet.
        refused: Devices of each subnet whose upload the edge did not get.
        trusted: Trust flag of each edge.
        stds: The interval's noise stds (``rayfl.hierarchy.dp.stream_stds``).
        steps: SGD steps of each segment.
        local_at_global: Whether a global-only release follows the segments.
        equal_weights: ρ = 1/s_c (True) or by sample count.
        num_train: Training samples per device.
        learning_rate: η_k.
        grad_bound: G, the per-step gradient bound (None: unclipped).
        dp_enabled: Whether noise is added at all.
    """
    for c, members in enumerate(chosen):
        if not members:
            continue
        # A trusted edge averages the uploads it accepted: a refused upload
        # leaves fewer members, so each remaining one weighs more (conservative:
        # a device refused in any segment counts as absent from every one).
        kept = [i for i in members if i not in refused[c]] or list(members)
        if equal_weights:
            max_weight = 1.0 / len(kept)
        else:
            sizes = num_train[kept].astype(np.float64)
            max_weight = float(sizes.max() / sizes.sum())
        for j, segment_steps in enumerate(steps):
            is_global = j == len(steps) - 1 and not local_at_global
            z = release_noise_multiplier(
                stds.std(c, edge=bool(trusted[c]), is_global=is_global),
                learning_rate=learning_rate,
                steps=int(segment_steps),
                grad_bound=grad_bound,
                max_weight=max_weight if trusted[c] else 1.0,
            )
            ledger.record(
                members,
                trusted=bool(trusted[c]),
                noise_multiplier=z if dp_enabled else 0.0,
            )


def edge_rows(
    *,
    k: int,
    trusted: npt.NDArray[np.bool_],
    participants: npt.NDArray[np.int64],
    stds: Any,
    edge_records: Sequence[dict[str, Any]],
    edge_evals: Sequence[tuple[int, list[dict[str, Any]] | None]],
    num_test: npt.NDArray[np.int64],
    energy: np.ndarray,
    delay: np.ndarray,
) -> list[dict[str, Any]]:
    """Return round ``k``'s ``edges.parquet`` rows, one per edge.

    Args:
        k: Global round.
        trusted: Trust flag of each edge.
        participants: s_c^k of each edge.
        stds: The interval's noise stds.
        edge_records: The edges' aggregation records of the round.
        edge_evals: ``(edge, evaluation records)`` of the subnet models (None:
            the actor died during the evaluation; the edge's
            ``subnet_acc``/``subnet_loss`` then cover its other devices and
            ``subnet_partial_eval`` is true).
        num_test: Test samples per device (weights the subnet accuracy).
        energy: Energy (J) per edge, uploads and backhaul hop.
        delay: Delay (s) per edge, uploads and backhaul hop.
    """
    n_edges = len(trusted)
    noise_by_edge = np.zeros(n_edges)
    for rec in edge_records:
        noise_by_edge[rec["edge"]] += rec["edge_noise_norm"] ** 2
    acc = {c: [0.0, 0.0, 0.0] for c in range(n_edges)}
    # an edge whose subnet evaluation lost an actor's devices: flagged, never a
    # silently smaller subnet
    partial = {c for c, evals in edge_evals if evals is None}
    for c, evals in edge_evals:
        for e in evals or ():
            w = float(num_test[int(e["client"])])
            acc[c][0] += w * e["test_acc"]
            acc[c][1] += w * e["test_loss"]
            acc[c][2] += w
    nan = float("nan")
    return [
        {
            "round": k,
            "edge": c,
            "trusted": bool(trusted[c]),
            "participants": int(participants[c]),
            "subnet_acc": acc[c][0] / acc[c][2] if acc[c][2] else nan,
            "subnet_loss": acc[c][1] / acc[c][2] if acc[c][2] else nan,
            "subnet_partial_eval": c in partial,
            "edge_noise_norm": float(math.sqrt(noise_by_edge[c])),
            "edge_noise_std_local": float(stds.edge_local[c]),
            "edge_noise_std_global": float(stds.edge_global[c]),
            "device_noise_std_local": float(stds.device_local[c]),
            "device_noise_std_global": float(stds.device_global[c]),
            "energy_j": float(energy[c]),
            "delay_s": float(delay[c]),
        }
        for c in range(n_edges)
    ]


def round_extras(
    *,
    plan: Plan,
    interval: Interval,
    trusted: npt.NDArray[np.bool_],
    energy: npt.NDArray[np.float64],
    delay: npt.NDArray[np.float64],
    local_at_global: bool,
) -> dict[str, Any]:
    """Return the round's ``rounds.parquet`` columns (τ_k, η_k, s, costs, σ)."""
    s_now, stds = plan.participants, plan.stds
    nan = float("nan")
    return {
        "tau": int(interval.tau),
        "local_period": int(interval.period),
        "num_local_aggregations": len(plan.segments) - 1 + int(local_at_global),
        "eta": float(plan.eta),
        "s_trusted_mean": float(s_now[trusted].mean()) if trusted.any() else nan,
        "s_untrusted_mean": float(s_now[~trusted].mean()) if (~trusted).any() else nan,
        "energy_j": float(energy.sum()),
        "latency_s": float(delay.sum()),
        "sigma_device_local": float(stds.device_local.max()),
        "sigma_device_global": float(stds.device_global.max()),
        "sigma_edge_local": float(stds.edge_local.max()),
        "sigma_edge_global": float(stds.edge_global.max()),
        "beta_hat": float(interval.beta_hat),
        "steps_done": int(interval.steps_done),
    }


@dataclass(frozen=True)
class RoundRecords:
    """One round's plan, its submitted calls and the small records they returned.

    Attributes:
        plan: The round's plan (``rayfl.hierarchy.submit.Plan``).
        sent: The submitted calls (``rayfl.hierarchy.submit.Sent``).
        devices: Each device call's records (None: its actor died).
        edges: The edges' aggregation records.
        evals: ``(edge, evaluation records)`` of the subnet models.
        prices: The uploads' (time_s, energy_j) if priced already
            (:func:`device_rows`), else None.
    """

    plan: Plan
    sent: Sent
    devices: Sequence[list[dict[str, Any]] | None]
    edges: Sequence[dict[str, Any]]
    evals: Sequence[tuple[int, list[dict[str, Any]] | None]]
    prices: Prices | None = None


def settle_round(
    records: RoundRecords,
    *,
    topo: TopologyConfig,
    trusted: npt.NDArray[np.bool_],
    cost: CostModel,
    fading_of: FadingOf,
    interval: Interval,
    ledger: ReleaseLedger,
    num_train: npt.NDArray[np.int64],
    num_test: npt.NDArray[np.int64],
    dp_enabled: bool,
    num_global: int,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Return a round's device rows, edge rows, extras; update ledger and interval.

    Args:
        records: The round's plan, calls and records.
        topo: The ``topology`` section.
        trusted: Trust flag of each edge (C,).
        cost: Prices the uploads and the backhaul hop.
        fading_of: The fading of each upload of a call.
        interval: The interval schedule.
        ledger: The observer ledger.
        num_train: Training samples per device.
        num_test: Test samples per device.
        dp_enabled: Whether any noise is added.
        num_global: K_g, global rounds of the run.
    """
    plan = records.plan
    rows, energy, delay, refused = device_rows(
        calls=records.sent.device_calls,
        records=records.devices,
        fading_of=fading_of,
        cost=cost,
        subchannel=plan.subchannel,
        upload_count=interval.local_update_count,
        num_edges=len(trusted),
        prices=records.prices,
    )
    hop_energy, hop_delay = cost.global_hop()
    energy, delay = energy + hop_energy, delay + hop_delay
    record_ledger(
        ledger=ledger,
        chosen=plan.chosen,
        refused=refused,
        trusted=trusted,
        stds=plan.stds,
        steps=[steps for _, steps in records.sent.periods],
        local_at_global=topo.local_at_global,
        equal_weights=topo.weighting == "equal",
        num_train=num_train,
        learning_rate=plan.eta,
        grad_bound=topo.dp.grad_bound,
        dp_enabled=dp_enabled,
    )
    if dp_enabled:
        ledger.nominal_epsilon = topo.dp.epsilon * math.sqrt((plan.k + 1) / num_global)
    edges = edge_rows(
        k=plan.k,
        trusted=trusted,
        participants=plan.participants,
        stds=plan.stds,
        edge_records=records.edges,
        edge_evals=records.evals,
        num_test=num_test,
        energy=energy,
        delay=delay,
    )
    interval.steps_done += interval.tau
    extras = round_extras(
        plan=plan,
        interval=interval,
        trusted=trusted,
        energy=energy,
        delay=delay,
        local_at_global=topo.local_at_global,
    )
    return rows, edges, extras
