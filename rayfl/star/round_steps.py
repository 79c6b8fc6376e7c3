"""The steps of one star round shared by the engine and its lockstep lanes.

:class:`rayfl.star.round.StarRound` (one run on Ray) and
:class:`rayfl.star.lanes.StarLanes` (many runs in lockstep over shared hosts) run
the same round: start a run from its seed (:func:`star_setup`), split the
schedule by host (:func:`actor_share`), turn the hosts' payload sizes into the
round's link outcome (:func:`round_link`), build the per-client rows
(:func:`round_rows`) and record the releases and the clients' history
(:func:`settle_round`). Only where the cloud's aggregation runs differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.actors.cloud import REJECT_ACTOR_LOST
from rayfl.actors.setup import ActorSetup
from rayfl.algorithms.registry import algorithm_class
from rayfl.observation import ObservationTracker
from rayfl.schedule import Schedule
from rayfl.system import RoundResult
from rayfl.uplink import UplinkModel

__all__ = ["actor_share", "round_link", "round_rows", "settle_round", "star_setup"]


def star_setup(
    cfg: Any,
    *,
    num_train: npt.ArrayLike,
    dim: int,
    input_shape: tuple[int, ...],
    num_classes: int,
) -> tuple[UplinkModel, ActorSetup]:
    """Return the uplink model and the actors' setup of a star run (its seed).

    The star's engine and its lockstep lanes (:mod:`rayfl.star.lanes`) start
    every run from this.

    Args:
        cfg: The run config (its seed keys the uplink's draws).
        num_train: (N,) training samples of each client.
        dim: Model dimension.
        input_shape: Shape of one sample.
        num_classes: Number of classes.
    """
    uplink = UplinkModel(cfg, num_train=num_train, model_dim=dim)
    personalized = algorithm_class(cfg.algorithm).personalized_downloads
    setup = ActorSetup.from_config(
        cfg,
        input_shape=input_shape,
        num_classes=num_classes,
        noise_std=uplink.noise_std,
        server_noise_std=uplink.server_noise_std,
        reduce_in_actor=cfg.ray.reduce_in_actor
        and uplink.per_client_effects is False
        and not personalized,
        client_noise_std=None
        if uplink.client_noise_std is None
        else tuple(float(s) for s in uplink.client_noise_std),
    )
    return uplink, setup


def actor_share(
    actor_of: npt.NDArray[np.int64],
    schedule: Schedule,
    order: npt.NDArray[np.int64],
    clients: npt.NDArray[np.int64],
    actor: int,
) -> tuple[list[int], dict[str, list[float]]]:
    """Return host ``actor``'s scheduled clients (ascending) and their controls.

    Args:
        actor_of: (N,) host index of each client.
        schedule: The round's schedule.
        order: The stable argsort of ``schedule.clients``.
        clients: ``schedule.clients[order]``.
        actor: The host.
    """
    mask = actor_of[clients] == actor
    controls = {
        k: np.asarray(v)[order][mask].tolist() for k, v in schedule.controls.items()
    }
    return clients[mask].tolist(), controls


def round_link(
    uplink: UplinkModel,
    t: int,
    schedule: Schedule,
    clients: npt.NDArray[np.int64],
    records: dict[int, dict[str, Any]],
) -> tuple[dict[int, dict[str, Any]], Any]:
    """Return the link rows and outcome of round ``t`` for the payloads' sizes.

    Args:
        uplink: Channel and ledger.
        t: Round index.
        schedule: The round's schedule.
        clients: The scheduled clients, ascending (the payload sizes' order).
        records: Each scheduled client's record from its host (``bits``).
    """
    bits = np.array([records[int(c)]["bits"] for c in clients], dtype=np.float64)
    return uplink.link(t, schedule, bits)


def round_rows(
    schedule: Schedule,
    records: dict[int, dict[str, Any]],
    link_rows: dict[int, dict[str, Any]],
    server: dict[str, Any],
    lost: set[int],
) -> list[dict[str, Any]]:
    """Return one row per scheduled client, in schedule order.

    Args:
        schedule: The round's schedule.
        records: Each client's record from its host.
        link_rows: Each client's link row (SNR, latency...).
        server: The aggregation's record (``delivered``, ``reasons``).
        lost: Clients whose host died mid-round.
    """
    delivered = set(server["delivered"])
    reasons = server["reasons"]
    rows = []
    for c in schedule.clients:
        row = {**records[int(c)], **link_rows.get(int(c), {})}
        row["delivered"] = int(c) in delivered
        # why the server refused the update (None: accepted or lost on the air)
        row["rejected"] = reasons.get(
            int(c), REJECT_ACTOR_LOST if int(c) in lost else None
        )
        rows.append(row)
    return rows


def settle_round(
    uplink: UplinkModel,
    tracker: ObservationTracker | None,
    t: int,
    schedule: Schedule,
    rows: list[dict[str, Any]],
    server: dict[str, Any],
    lost: set[int],
) -> RoundResult:
    """Record round ``t``'s releases in the ledger and its rows in the tracker.

    With ``wireless.round_deadline_s`` the round's ``rounds.parquet`` row gets
    ``num_stragglers``: the scheduled uploads that missed the deadline.

    Args:
        uplink: Channel and ledger.
        tracker: The clients' history (None: not started yet).
        t: Round index.
        schedule: The round's schedule.
        rows: :func:`round_rows`.
        server: The aggregation's record (``delivered``).
        lost: Clients whose host died mid-round (no release).
    """
    uplink.record_releases([c for c in schedule.clients if int(c) not in lost])
    extras: dict[str, Any] = {}
    wireless = uplink.sections.wireless
    if wireless is not None and wireless.round_deadline_s is not None:
        # the uploads that missed the round deadline (lost, counted as releases)
        extras["num_stragglers"] = int(sum(bool(r.get("straggler")) for r in rows))
    result = RoundResult(t, rows, sorted(set(server["delivered"])), extras)
    if tracker is not None:
        tracker.record(rows, result.delivered)
    return result
