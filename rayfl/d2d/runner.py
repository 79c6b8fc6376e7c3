"""run_d2d(config): the round loop of a ``topology: {kind: d2d}`` run.

Called by :func:`rayfl.runner.run` (and so ``rayfl run``) when the topology is
``d2d``. It writes the usual run directory (``config.yaml``, ``metrics.parquet``
with one row per round × client, ``rounds.parquet``, ``summary.json``,
``plots/``); D2D-specific columns: ``role`` (target / neighbor / idle),
``selected``, ``post_agg_acc``, ``post_train_acc``. ``rounds.parquet`` has
``target_acc`` (mean over targets of the primary accuracy, spec A6),
``target_post_train_acc`` and ``target_post_agg_acc``; ``summary.json`` has
``target_acc_max`` (the paper's metric: max over rounds) and the selection and
EM report of :meth:`D2DSystem.selection_report`.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.config import RunConfig
from rayfl.results import RunLog, RunResult, load_run, make_run_dir
from rayfl.run_status import RunProgress, terminal_status

__all__ = ["run_d2d"]


def _check(cfg: RunConfig) -> None:
    from rayfl.d2d.config import check_d2d_run

    check_d2d_run(cfg)


def _env_driver(system: Any) -> Any:
    """Per-round selection through the D2DNeighbor-v0 env (``selection_via: env``).

    Returns a callable running the next round: the ``topology.policy`` of each
    target acts on the env's observation and the env steps ``system``.
    """
    from envs.d2d import D2DNeighborEnv, make_selection_policies, policy_action

    env = D2DNeighborEnv(mode="emulate", system=system)
    state = {"obs": env.reset(seed=system.config.seed)[0]}
    policies = make_selection_policies(env)

    def step() -> list[dict[str, Any]]:
        action = policy_action(env, policies, state["obs"])
        state["obs"], _, _, _, info = env.step(action)
        return info["rows"]  # type: ignore[no-any-return]

    return step


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    values = np.array([r[key] for r in rows if r["role"] == "target"], float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def run_d2d(cfg: RunConfig, *, run_dir: Path | None = None) -> RunResult:
    """Run a D2D experiment and write its run directory.

    Args:
        cfg: A validated config with ``topology.kind == "d2d"``.
        run_dir: Directory to write into (default: a fresh one).

    Returns:
        The run directory and its metrics.
    """
    from rayfl.d2d.system import D2DSystem

    _check(cfg)
    started = time.perf_counter()
    system = D2DSystem(cfg)
    log = RunLog(run_dir or make_run_dir(cfg.output.dir, cfg.name))
    log.write_config(cfg.to_dict())
    bar = None
    if cfg.output.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.rounds, unit="round", dynamic_ncols=True)

    def write_summary(progress: RunProgress) -> None:
        if bar is not None:
            bar.close()
        accs = [r["target_acc"] for r in log.round_rows]
        finite = [a for a in accs if np.isfinite(a)]
        try:
            report = system.selection_report()
        except Exception:  # after a failure: keep the status, drop the report
            report = None
        summary = {
            "status": progress.status,
            **({"error": progress.error} if progress.error else {}),
            "name": cfg.name,
            "topology": "d2d",
            "method": cfg.topology.method,  # type: ignore[union-attr]
            "rounds_done": len(log.round_rows),
            "total_s": time.perf_counter() - started,
            "num_clients": system.num_clients,
            "num_actors": len(system.actors),
            "model_dim": system.dim,
            "target_acc_max": max(finite) if finite else None,
            "target_acc_final": accs[-1] if accs else None,
            "final": dict(log.round_rows[-1]) if log.round_rows else {},
            "totals": {"bits": float(sum(r["bits"] for r in log.round_rows))},
            "d2d": report,
        }
        log.flush(summary)

    try:
        with terminal_status(log.run_dir, write_summary) as progress:
            step = _env_driver(system) if cfg.topology.selection_via == "env" else None  # type: ignore[union-attr]
            for t in range(cfg.rounds):
                progress.round = t
                t0 = time.perf_counter()
                rows = step() if step is not None else system.run_round(t)
                log.client_rows += rows
                row = {
                    "round": t,
                    "num_scheduled": int(sum(r["role"] == "neighbor" for r in rows)),
                    "num_delivered": int(sum(r["delivered"] for r in rows)),
                    "round_time_s": time.perf_counter() - t0,
                    "bits": float(sum(r["bits"] for r in rows)),
                    "target_acc": _mean(rows, "test_acc"),
                    "target_post_agg_acc": _mean(rows, "post_agg_acc"),
                    "target_post_train_acc": _mean(rows, "post_train_acc"),
                    "global_acc": _mean(rows, "test_acc"),
                    "eval_acc": _mean(rows, "test_acc"),
                }
                log.round_rows.append(row)
                if bar is not None:
                    bar.set_postfix(
                        {"target_acc": f"{row['target_acc']:.3f}"}, refresh=False
                    )
                    bar.update(1)
    finally:
        with contextlib.suppress(Exception):  # after a lost actor: status says why
            system.close()
    if cfg.output.plots:
        from rayfl.plots import plot_rounds

        plot_rounds({cfg.name: load_run(log.run_dir).rounds}, log.run_dir / "plots")
    return load_run(log.run_dir)
