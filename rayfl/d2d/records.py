"""The records of a D2D run: its rows, ``summary.json`` and the selection report.

``metrics.parquet`` columns of a D2D run: ``round``, ``client``, ``role``
(target / neighbor / idle), ``scheduled``, ``selected``, ``delivered``,
``rejected``, ``train_loss``, ``test_acc`` and ``test_loss`` (the target's
primary metric), ``post_agg_acc``, ``post_train_acc`` and ``bits``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rayfl.actors.cloud import REJECT_ACTOR_LOST
from rayfl.d2d.config import D2DTopologyConfig
from rayfl.d2d.em import EMState
from rayfl.d2d.selection import D2DLayout, Selection
from rayfl.system import RoundResult

__all__ = ["client_rows", "round_records", "selection_report", "summary_document"]

_NAN = float("nan")


def _primary(topology: D2DTopologyConfig) -> str:
    """The target's reported accuracy column (``topology.primary``)."""
    if topology.method == "local" or topology.primary == "post_training":
        return "post_train_acc"
    return "post_agg_acc"


def client_rows(
    round: int,
    *,
    topology: D2DTopologyConfig,
    num_clients: int,
    dim: int,
    selections: dict[int, Selection],
    target_rows: list[dict[str, Any]],
    train_rows: list[dict[str, Any]],
    arrived: dict[int, list[int]],
    senders: list[int],
    lost: set[int],
    dropped: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """Return one row per client of round ``round``.

    Args:
        round: Round index t.
        topology: The D2D topology section.
        num_clients: N.
        dim: Model size (a sent model costs 32 · dim bits).
        selections: Each target's selection M_n.
        target_rows: The targets' round records (accuracies, refusals).
        train_rows: The senders' training records.
        arrived: Target → neighbors whose model arrived.
        senders: Clients that sent a model this round.
        lost: Senders whose actor died this round.
        dropped: Senders that delivered nothing, and why (``unavailable``,
            ``straggler``: :mod:`rayfl.d2d.devices`).
    """
    primary = _primary(topology)
    by_target = {int(r["client"]): r for r in target_rows}
    losses: dict[int, list[float]] = {}
    for r in train_rows:
        losses.setdefault(int(r["client"]), []).append(float(r["train_loss"]))
    delivered = {m for ms in arrived.values() for m in ms}
    # reasons the targets refused an arrived model (non-finite), per client
    refused = {
        int(m): why for r in target_rows for m, why in r.get("rejected", {}).items()
    }
    refused.update(dropped or {})
    refused.update(dict.fromkeys(lost, REJECT_ACTOR_LOST))
    selected = {m for s in selections.values() for m in s.neighbors}
    bits = 32.0 * dim
    rows = []
    for c in range(num_clients):
        tr = by_target.get(c, {})
        sent = c in senders
        role = "target" if c in by_target else "neighbor" if sent else "idle"
        rows.append(
            {
                "round": round,
                "client": c,
                "role": role,
                "scheduled": sent or c in by_target,
                "selected": c in selected,
                "delivered": c in delivered,
                "rejected": refused.get(c),
                "train_loss": float(
                    np.mean(losses[c]) if c in losses else tr.get("train_loss", _NAN)
                ),
                "test_acc": float(tr.get(primary, _NAN)),
                "test_loss": float(tr.get(primary.replace("acc", "loss"), _NAN)),
                "post_agg_acc": float(tr.get("post_agg_acc", _NAN)),
                "post_train_acc": float(tr.get("post_train_acc", _NAN)),
                "bits": bits if sent and c not in lost else 0.0,
            }
        )
    return rows


def selection_report(
    layout: D2DLayout,
    selections: dict[int, Selection],
    em: dict[int, EMState],
    members: dict[int, list[int]],
) -> dict[str, Any]:
    """Return the layout, each target's neighbors, P^err and EM trajectory."""
    return {
        "positions_m": layout.positions_m.round(3).tolist(),
        "targets": {
            str(t): {
                "neighbors": list(selections[t].neighbors),
                "subchannel": list(selections[t].subchannel),
                "error_probability": selections[t].error_probability.round(6).tolist(),
                "em_weights": em[t].history,
                "em_loglik": em[t].loglik,
                "em_converged_round": em[t].converged_round,
                "members": members[t],
            }
            for t in layout.targets
        },
    }


def _target_mean(rows: list[dict[str, Any]], key: str) -> float:
    values = np.array([r[key] for r in rows if r["role"] == "target"], float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else _NAN


def round_records(
    result: RoundResult, elapsed_s: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return a D2D round's ``metrics.parquet`` rows and its ``rounds.parquet`` row.

    The round row has ``target_acc`` (mean over targets of the primary
    accuracy), ``target_post_agg_acc`` and ``target_post_train_acc``;
    ``global_acc`` and ``eval_acc`` repeat ``target_acc`` (the columns the
    shared plots read).

    Args:
        result: The round's result (its rows: :func:`client_rows`).
        elapsed_s: Wall time of the round (``round_time_s``).
    """
    rows = result.rows
    target_acc = _target_mean(rows, "test_acc")
    return rows, {
        "round": result.round,
        "num_scheduled": int(sum(r["role"] == "neighbor" for r in rows)),
        "num_delivered": int(sum(r["delivered"] for r in rows)),
        "round_time_s": elapsed_s,
        "bits": float(sum(r["bits"] for r in rows)),
        "target_acc": target_acc,
        "target_post_agg_acc": _target_mean(rows, "post_agg_acc"),
        "target_post_train_acc": _target_mean(rows, "post_train_acc"),
        "global_acc": target_acc,
        "eval_acc": target_acc,
    }


def summary_document(
    system: Any,
    round_rows: list[dict[str, Any]],
    *,
    name: str,
    status: str,
    error: str | None,
    total_s: float,
) -> dict[str, Any]:
    """Return ``summary.json`` of a D2D run (``target_acc_max``: the paper's metric).

    The ``d2d`` block is the selection and EM report (``system.summary()``),
    None when it cannot be read after a failure.
    """
    accs = [r["target_acc"] for r in round_rows]
    finite = [a for a in accs if np.isfinite(a)]
    try:
        report = system.summary()
    except Exception:  # after a failure: keep the status, drop the report
        report = None
    return {
        "status": status,
        **({"error": error} if error else {}),
        "name": name,
        "topology": "d2d",
        "method": system.config.topology.method,
        "rounds_done": len(round_rows),
        "total_s": total_s,
        "num_clients": system.num_clients,
        "num_actors": len(system.actors),
        "model_dim": system.dim,
        "target_acc_max": max(finite) if finite else None,
        "target_acc_final": accs[-1] if accs else None,
        "final": dict(round_rows[-1]) if round_rows else {},
        "totals": {"bits": float(sum(r["bits"] for r in round_rows))},
        "d2d": report,
        "privacy": _adjacency(system.config),
    }


def _adjacency(config: Any) -> dict[str, str]:
    """Return summary.json's ``privacy`` block of a D2D run: its adjacency."""
    from rayfl.privacy.sensitivity import adjacency

    claim = adjacency(config)
    return {"adjacency": claim.relation, "adjacency_reason": claim.reason}
