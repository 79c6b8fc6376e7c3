"""The run's records: ``metrics.parquet`` / ``rounds.parquet`` rows and summary fields.

- :func:`client_rows`: one ``metrics.parquet`` row per client and round;
- :func:`round_row`: one ``rounds.parquet`` row per round (counts, costs,
  ε, the evaluation summary, the topology's ``RoundResult.extras``);
- :func:`evaluation_summary`: a round's evaluation aggregates, marked
  ``partial_eval`` (fairness aggregates NaN) when clients' evaluations are
  missing, and :func:`evaluation_report`, the summary's account of such rounds;
- :func:`summary_document`: ``summary.json`` of a finished (or failed) run,
  with :func:`divergence_report` and per-column totals.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from rayfl.eval_sample import sampled_standard_errors
from rayfl.metrics import round_summary
from rayfl.system import EvalRow, RoundResult

__all__ = [
    "PartialEvaluationWarning",
    "client_rows",
    "divergence_report",
    "evaluation_report",
    "evaluation_summary",
    "privacy_block",
    "query",
    "round_costs",
    "round_row",
    "summary_document",
    "total",
]

_NAN = float("nan")
#: ``metrics.parquet`` columns read from a client's evaluation record.
_EVAL_KEYS = (
    "test_loss",
    "test_acc",
    "personal_acc",
    "personal_loss",
    "eval_train_loss",
    "eval_train_reg_loss",
    "eval_train_pl_objective",
)
#: Aggregates that rank or spread the clients (fairness): over a subset of the
#: clients they look fairer than the run was, so a partial round reports NaN.
_FAIRNESS_KEYS = (
    "min_acc",
    "worst10_acc",
    "max_loss",
    "worst10_loss",
    "jain_acc",
    "jain_train_loss",
    "var_train_loss",
    "jain_train_reg_loss",
    "jain_train_pl_objective",
    "personal_min_acc",
    "personal_max_loss",
    "personal_jain_acc",
    "personal_worst10_acc",
    "eval_worst10_acc",
    "eval_jain_acc",
    "eval_max_loss",
)


class PartialEvaluationWarning(RuntimeWarning):
    """A round's evaluation missed clients (their host failed, and again on the retry)."""


def client_rows(
    t: int,
    n: int,
    result: RoundResult,
    evals: list[EvalRow] | None,
    epsilon: np.ndarray | None,
    extra: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """Return round ``t``'s ``metrics.parquet`` rows, one per client 0..n−1.

    Args:
        t: Round index.
        n: Number of clients.
        result: The round's records (scheduled clients only).
        evals: Every client's evaluation record, or None (not evaluated).
        epsilon: Each client's ε spent, or None (no accountant). A paper
            formula's ε is not a column: it goes to ``summary.json``
            (``privacy.paper_epsilon_per_client``), so it cannot be read as spent.
        extra: The algorithm's own record keys (``Algorithm.logged_metrics``).
    """
    by_client = {int(r["client"]): r for r in result.rows}
    # by id: a sampled evaluation (``eval_clients``) covers some clients only
    evaluated = {int(e["client"]): e for e in evals} if evals is not None else {}
    rows = []
    for c in range(n):
        r = by_client.get(c, {})
        e = evaluated.get(c, {})
        rows.append(
            {
                "round": t,
                "client": c,
                "scheduled": c in by_client,
                "subchannel": int(r.get("subchannel", -1)),
                "power": float(r.get("tx_power_w", _NAN)),
                "snr_db": float(r.get("snr_db", _NAN)),
                "delivered": bool(r.get("delivered", False)),
                "actor_failed": bool(r.get("actor_failed", False)),
                "rejected": r.get("rejected") or None,  # reason string, or None
                "eval_failed": bool(e.get("eval_failed", False)),
                "train_loss": float(r.get("train_loss", _NAN)),
                **{k: float(e.get(k, _NAN)) for k in _EVAL_KEYS},
                "epsilon": float(epsilon[c]) if epsilon is not None else _NAN,
                "bits": float(r.get("bits", 0.0)),
                "latency_s": float(r.get("latency_s", _NAN)),
                "energy_j": float(r.get("energy_j", _NAN)),
                **{k: float(r.get(k, _NAN)) for k in extra},
            }
        )
    return rows


def round_costs(rows: list[dict[str, Any]], *, wireless: bool) -> dict[str, float]:
    """Return one round's ``latency_s``, ``energy_j`` and ``bits``.

    A synchronous round lasts as long as its slowest uplink; energy and bits are
    summed over the scheduled clients' rows. Without a wireless model latency
    and energy are NaN (never measured).
    """
    return {
        "latency_s": max((r.get("latency_s", 0.0) for r in rows), default=0.0)
        if wireless
        else _NAN,
        "energy_j": float(sum(r.get("energy_j", 0.0) for r in rows))
        if wireless
        else _NAN,
        "bits": float(sum(r.get("bits", 0.0) for r in rows)),
    }


def round_row(
    result: RoundResult,
    *,
    evals: list[EvalRow] | None,
    num_test: np.ndarray,
    epsilon: np.ndarray | None,
    wireless: bool,
    elapsed_s: float,
) -> dict[str, Any]:
    """Return the ``rounds.parquet`` row of one round.

    Args:
        result: The round's records.
        evals: Every client's evaluation, or None.
        num_test: Test samples per client (weights of the evaluation summary).
        epsilon: Each client's ε spent, or None.
        wireless: Whether a wireless model prices the uplinks.
        elapsed_s: Wall time of the round (``round_time_s``).
    """
    rows = result.rows
    return {
        "round": result.round,
        "num_scheduled": len(rows),
        "num_delivered": len(result.delivered),
        "num_rejected": int(sum(bool(r.get("rejected")) for r in rows)),
        "round_time_s": elapsed_s,
        "epsilon_max": float(np.nanmax(epsilon)) if epsilon is not None else _NAN,
        **round_costs(rows, wireless=wireless),
        "download_bits": float(sum(r.get("download_bits", 0.0) for r in rows)),
        # personalized downloads (FedAMP, APPLE): the slowest one's airtime
        "downlink_latency_s": max(
            (r.get("downlink_latency_s", 0.0) for r in rows), default=0.0
        )
        if wireless
        else _NAN,
        **evaluation_summary(evals, num_test, round=result.round),
        **result.extras,
    }


def evaluation_summary(
    evals: list[EvalRow] | None, num_test: np.ndarray, *, round: int = -1
) -> dict[str, Any]:
    """Return a round's evaluation aggregates, never silently over a subset.

    A client whose evaluation is missing (``eval_failed``: its host failed, was
    restarted and retried once, and failed again) makes the round
    ``partial_eval``: ``eval_clients`` counts the clients evaluated, the
    accuracy and loss means cover those clients only, and the fairness
    aggregates (max/worst-10 % loss, min/worst-10 % accuracy, Jain's indices,
    train-loss variance) are NaN; a :class:`PartialEvaluationWarning` says so.

    Args:
        evals: Every client's evaluation record, or None (not evaluated).
        num_test: Test samples per client (weights of the global accuracy).
        round: The round (for the warning).

    A sampled evaluation (``eval_clients: K`` in the config) has K records;
    its aggregates are over the sample, with standard errors (``*_se``).

    Returns:
        ``eval_clients``, ``partial_eval``, ``eval_retried`` (clients evaluated
        on the second try, their host restarted) and, when evaluated,
        :func:`rayfl.metrics.round_summary`'s aggregates.
    """
    if not evals:
        return {"eval_clients": 0, "partial_eval": False, "eval_retried": 0}
    missing = sum(bool(e.get("eval_failed")) for e in evals)
    out: dict[str, Any] = {
        **_evaluation_summary(evals, num_test),
        "eval_clients": len(evals) - missing,
        "partial_eval": bool(missing),
        "eval_retried": sum(bool(e.get("eval_retried")) for e in evals),
    }
    if missing:
        out.update({k: _NAN for k in _FAIRNESS_KEYS if k in out})
        warnings.warn(
            f"round {round}: {missing} of {len(evals)} clients could not be "
            "evaluated (their actor failed twice); the round's accuracy and loss "
            "cover the other clients only, its fairness metrics are NaN",
            PartialEvaluationWarning,
            stacklevel=2,
        )
    return out


def evaluation_report(
    round_rows: list[dict[str, Any]], num_clients: int
) -> dict[str, Any]:
    """Return the summary fields of rounds whose evaluation missed clients.

    Args:
        round_rows: The ``rounds.parquet`` rows so far.
        num_clients: N, the clients every evaluation should cover.

    Returns:
        ``partial_eval_rounds`` (the rounds marked ``partial_eval``) and
        ``warnings``: ``partial evaluation: P of E evaluated rounds missed
        clients whose actor failed (round r: k of N clients, ...)...``.
    """
    evaluated = [
        r for r in round_rows if r.get("eval_clients") or r.get("partial_eval")
    ]
    partial = [r for r in evaluated if r.get("partial_eval")]
    warnings_ = []
    if partial:
        detail = ", ".join(
            f"round {r['round']}: {r['eval_clients']} of {num_clients} clients"
            for r in partial[:5]
        )
        warnings_.append(
            f"partial evaluation: {len(partial)} of {len(evaluated)} evaluated "
            f"rounds missed clients whose actor failed ({detail}); their "
            "fairness metrics are NaN and their accuracy covers the evaluated "
            "clients only (rounds.parquet: partial_eval, eval_clients)"
        )
    return {
        "partial_eval_rounds": [int(r["round"]) for r in partial],
        "warnings": warnings_,
    }


def _evaluation_summary(evals: list[EvalRow], num_test: np.ndarray) -> dict[str, Any]:
    """``round_summary`` of the evaluated clients (+ standard errors if sampled)."""
    if len(evals) == len(num_test):
        return round_summary(evals, num_test)
    weights = np.asarray(num_test)[[int(e["client"]) for e in evals]]
    return round_summary(evals, weights) | sampled_standard_errors(
        evals, weights, len(num_test)
    )


def total(rows: list[dict[str, Any]], key: str) -> float | None:
    """Sum of a per-round column; None when it was never measured (no wireless)."""
    values = np.array([r[key] for r in rows], dtype=np.float64)
    return float(values.sum()) if len(values) and np.isfinite(values).all() else None


def query(call: Callable[[], Any]) -> Any:
    """``call()``, or None when it fails (a summary field of a failed run).

    After a failure the system may have lost an actor, so a summary field read
    from the actors (placement, local update counts...) becomes None instead of
    hiding the run's error behind a second one.
    """
    try:
        return call()
    except Exception:
        return None


def divergence_report(round_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the summary fields that make a diverged run visibly diverged.

    A round "delivered no update" when clients were scheduled but none of their
    updates reached the model (lost packets, dead actors, or uploads rejected by
    the server for being non-finite or out of range — ``num_rejected``). When
    rejected uploads left one or more rounds without any update, ``warnings``
    says ``diverged: N of T rounds delivered no update (uploads rejected as
    non-finite or out of range)``.

    Returns:
        ``rounds_without_update``, ``diverged_rounds`` and ``warnings``.
    """
    empty = [
        r
        for r in round_rows
        if r.get("num_scheduled", 0) and not r.get("num_delivered")
    ]
    rejected = [r for r in empty if r.get("num_rejected", 0)]
    warnings = []
    if rejected:
        warnings.append(
            f"diverged: {len(rejected)} of {len(round_rows)} rounds delivered no "
            "update (uploads rejected as non-finite or out of range); lower "
            "algorithm.lr or clip the updates"
        )
    return {
        "rounds_without_update": len(empty),
        "diverged_rounds": len(rejected),
        "warnings": warnings,
    }


def _reports(round_rows: list[dict[str, Any]], num_clients: int) -> dict[str, Any]:
    """:func:`divergence_report` and :func:`evaluation_report`, warnings joined."""
    divergence = divergence_report(round_rows)
    evaluation = evaluation_report(round_rows, num_clients)
    return {
        **divergence,
        **evaluation,
        "warnings": divergence["warnings"] + evaluation["warnings"],
    }


def summary_document(
    system: Any,
    round_rows: list[dict[str, Any]],
    *,
    name: str,
    status: str,
    error: str | None,
    setup_s: float,
    total_s: float,
) -> dict[str, Any]:
    """Return ``summary.json``: status, timing, placement, final metrics, totals, ε.

    Fields read from the actors become None when they fail (:func:`query`).
    """
    final: dict[str, Any] = next(
        (r for r in reversed(round_rows) if "global_acc" in r), {}
    )
    eps = (
        query(lambda: system.uplink.epsilons(evaluate=True)[0]) if round_rows else None
    )
    return {
        "status": status,
        **({"error": error} if error else {}),
        "name": name,
        "rounds_done": len(round_rows),
        "setup_s": setup_s,
        "total_s": total_s,
        "num_clients": system.num_clients,
        "num_actors": len(system.actors),
        "placement": query(system.placement),
        "local_updates": query(system.local_updates),
        "model_dim": system.dim,
        "final": {k: v for k, v in final.items() if k != "round"},
        "totals": {
            "latency_s": total(round_rows, "latency_s"),
            "energy_j": total(round_rows, "energy_j"),
            "bits": float(sum(r["bits"] for r in round_rows)),
            "download_bits": float(
                sum(r.get("download_bits", 0.0) for r in round_rows)
            ),
        },
        **_reports(round_rows, system.num_clients),
        "privacy": query(lambda: privacy_block(system, eps)),
    }


def privacy_block(system: Any, eps: Any) -> dict[str, Any]:
    """Return summary.json's ``privacy``: the ledger's block and the adjacency.

    ``adjacency`` and ``adjacency_reason`` come from
    :func:`rayfl.privacy.sensitivity.adjacency` (what the run's server side
    sees decides which neighbouring datasets the ε is for).
    """
    from rayfl.privacy.sensitivity import adjacency

    claim = adjacency(system.config)
    uplink = getattr(system, "uplink", None)
    block = {} if uplink is None else dict(uplink.privacy_summary(eps))
    return {**block, "adjacency": claim.relation, "adjacency_reason": claim.reason}
