"""run_rounds: the one round loop, for fresh and resumed runs of every topology.

Each round::

    obs = system.observe(t)                 # only when a decider reads it
    decision = tuple(d.decide(t, o) for d, o in zip(deciders, obs))
    result = system.run_round(t, decision)
    stop = system.exhausted()               # T0 / budgets spent
    evals = system.evaluate() if due else None
    log rows (rayfl.engine.rows); stop → break; checkpoint when due

Evaluation is due every ``eval_every`` rounds, at the last round, at the round
that exhausts the budgets, and every round when ``evaluate_every_round`` is set
(policy-driven star runs, whose policies read the test metrics today).

Client rows stream to disk as rounds finish (``RunLog.add_client_rows``,
``rayfl.rundir.stream``); a population above ``output.client_rows_max`` gets a
per-client summary (``log.summary``) instead of rows.

A checkpoint holds ``{next_round, system, deciders, client_rows, round_rows}``
(plain data, ``rayfl.rundir.checkpoint``; ``client_rows`` holds only rows not streamed,
and ``client_summary`` the summary's columns); :func:`restore` loads one into a freshly
built system and deciders and returns the round to continue from.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rayfl.engine.rows import client_rows, round_row
from rayfl.rundir.checkpoint import save_checkpoint
from rayfl.rundir.results import RunLog
from rayfl.system import Decider, Decision, EvalRow, RoundResult, System

__all__ = ["LoopSettings", "restore", "run_rounds"]


@dataclass(frozen=True)
class LoopSettings:
    """How the loop runs a run's rounds.

    Attributes:
        rounds: T, the number of rounds of the run.
        eval_every: Evaluate every this many rounds (and at the last).
        evaluate_every_round: Evaluate every round whatever ``eval_every``.
        checkpoint_every: Save a checkpoint every this many rounds (0: never).
        wireless: Whether a wireless model prices the uplinks (cost columns).
        logged: The algorithm's own record keys (``metrics.parquet`` columns).
        records: A topology's own row format, ``records(result, elapsed_s) ->
            (metrics rows, rounds row)`` (D2D); None: the shared columns of
            :mod:`rayfl.engine.rows`.
        client_summary: Whether a population above ``output.client_rows_max``
            gets a per-client summary instead of client rows
            (``rayfl.rundir.stream.ClientSummary``).
    """

    rounds: int
    eval_every: int = 1
    evaluate_every_round: bool = False
    checkpoint_every: int = 0
    wireless: bool = False
    logged: tuple[str, ...] = ()
    records: (
        Callable[[RoundResult, float], tuple[list[dict[str, Any]], dict[str, Any]]]
        | None
    ) = None
    client_summary: bool = True

    def evaluation_due(self, t: int, stop: bool) -> bool:
        """Whether round ``t`` ends with an evaluation."""
        return (
            self.evaluate_every_round
            or (t + 1) % self.eval_every == 0
            or t == self.rounds - 1
            or stop
        )

    def checkpoint_due(self, t: int) -> bool:
        """Whether a checkpoint follows round ``t``."""
        every = self.checkpoint_every
        return bool(every) and (t + 1) % every == 0 and t + 1 < self.rounds


def decide(system: System, deciders: Sequence[Decider], t: int) -> Decision:
    """Return round ``t``'s decision: each unit's decider on its observation."""
    if any(d.observes for d in deciders):
        observations: Sequence[Any] = system.observe(t)
    else:
        observations = [None] * len(deciders)
    return tuple(d.decide(t, o) for d, o in zip(deciders, observations, strict=True))


def run_rounds(
    system: System,
    deciders: Sequence[Decider],
    log: RunLog,
    settings: LoopSettings,
    *,
    start: int = 0,
    progress: Any = None,
    on_round: Callable[[int, dict[str, Any], list[EvalRow] | None], None] | None = None,
) -> int:
    """Run rounds ``start``..T−1 (or until the budgets are spent); return rounds run.

    Args:
        system: The run's system.
        deciders: One decider per unit of ``system``.
        log: The run log: rows are appended to ``log.client_rows`` and
            ``log.round_rows``; checkpoints go to ``log.run_dir``.
        settings: Rounds, evaluation and checkpoint cadence.
        start: First round (``next_round`` of a checkpoint).
        progress: A ``rayfl.rundir.status.RunProgress`` to keep current, or None.
        on_round: Called after each round with ``(t, rounds row, evals)``.
    """
    done = 0
    for t in range(start, settings.rounds):
        if progress is not None:
            progress.round = t
        t0 = time.perf_counter()
        result = system.run_round(t, decide(system, deciders, t))
        stop = system.exhausted()  # seed 000: T0 uploads used up
        evals = system.evaluate() if settings.evaluation_due(t, stop) else None
        rows, row = _records(system, settings, t, result, evals, t0, log)
        log.add_client_rows(t, rows)  # streamed to disk (rayfl.rundir.stream)
        log.round_rows.append(row)
        done += 1
        if on_round is not None:
            on_round(t, row, evals)
        if stop:
            break
        if settings.checkpoint_due(t):
            _save(system, deciders, log, t + 1)
            if progress is not None:
                progress.resume_from = t + 1
    return done


def _records(
    system: System,
    settings: LoopSettings,
    t: int,
    result: RoundResult,
    evals: list[EvalRow] | None,
    t0: float,
    log: RunLog,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Return round ``t``'s ``metrics.parquet`` rows and ``rounds.parquet`` row.

    A population with a per-client summary (``log.summary``) gets no rows: the
    summary takes the round's records, O(participants).
    """
    if settings.records is not None:
        return settings.records(result, time.perf_counter() - t0)
    epsilon, _ = system.uplink.epsilons(evaluate=True)  # type: ignore[attr-defined]
    if log.summary is not None:
        log.summary.update(t, result.rows, evals)
        rows: list[dict[str, Any]] = []
    else:
        rows = client_rows(
            t, system.num_clients, result, evals, epsilon, settings.logged
        )
    row = round_row(
        result,
        evals=evals,
        num_test=system.num_test,
        epsilon=epsilon,
        wireless=settings.wireless,
        elapsed_s=time.perf_counter() - t0,
    )
    return rows, row


def _save(system: System, deciders: Sequence[Decider], log: RunLog, nxt: int) -> None:
    save_checkpoint(
        log.run_dir,
        {
            "next_round": nxt,
            "system": system.state_dict(),
            "deciders": [d.state_dict() for d in deciders],
            "client_rows": log.client_rows,  # streamed: parts on disk, not here
            "round_rows": log.round_rows,
            **({"client_summary": log.summary.state_dict()} if log.summary else {}),
        },
    )


def restore(
    checkpoint: dict[str, Any],
    system: System,
    deciders: Sequence[Decider],
    log: RunLog,
) -> int:
    """Load ``checkpoint`` into a rebuilt system, deciders and log; return next round.

    Raises:
        ValueError: If the checkpoint holds a different number of deciders.
    """
    saved = checkpoint.get("deciders", [])
    if len(saved) != len(deciders):
        raise ValueError(
            f"the checkpoint holds {len(saved)} decider states; this run has "
            f"{len(deciders)} decision units"
        )
    system.load_state_dict(checkpoint["system"])
    for decider, state in zip(deciders, saved, strict=True):
        decider.load_state_dict(state)
    log.client_rows = checkpoint["client_rows"]
    log.round_rows = checkpoint["round_rows"]
    nxt = int(checkpoint["next_round"])
    log.stream.truncate(nxt)  # the rounds after the checkpoint run again
    if not log.client_rows:  # streamed rows: a failed run merged them at its end
        log.stream.reopen(log.run_dir / "metrics.parquet", nxt)
    if log.summary is not None and "client_summary" in checkpoint:
        log.summary.load_state_dict(checkpoint["client_summary"])
    return nxt
