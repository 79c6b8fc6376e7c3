"""run_d2d(config): the round loop of a ``topology: {kind: d2d}`` run.

Called by :func:`rayfl.runner.run` (and so ``rayfl run``) when the topology is
``d2d``. It writes the usual run directory (``config.yaml``, ``metrics.parquet``
with one row per round × client, ``rounds.parquet``, ``summary.json``,
``plots/``); D2D-specific columns: ``role`` (target / neighbor / idle),
``selected``, ``post_agg_acc``, ``post_train_acc``. ``rounds.parquet`` has
``target_acc`` (mean over targets of the primary accuracy, spec A6),
``target_post_train_acc`` and ``target_post_agg_acc``; ``summary.json`` has
``target_acc_max`` (the paper's metric: max over rounds) and the selection and
EM report of :meth:`D2DSystem.selection_report`. With
``output.checkpoint_every`` it checkpoints like the other topologies, and
``rayfl resume RUN_DIR`` continues the run.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.checkpoint import plain_attributes, restore_attributes, save_checkpoint
from rayfl.config import RunConfig
from rayfl.results import RunLog, RunResult, load_run, make_run_dir
from rayfl.run_status import RunProgress, terminal_status

__all__ = ["run_d2d"]


def _check(cfg: RunConfig) -> None:
    from rayfl.d2d.config import check_d2d_run

    check_d2d_run(cfg)


class _OnceSelection:
    """Rounds with the selection made at build (``selection_via: once``)."""

    def __init__(self, system: Any) -> None:
        self.system = system

    def step(self, t: int) -> list[dict[str, Any]]:
        """Run round ``t``; return one row per client."""
        return self.system.run_round(t)  # type: ignore[no-any-return]

    def state_dict(self) -> dict[str, Any]:
        """Nothing to keep: the selections are in the system's state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


class _EnvSelection:
    """Per-round selection through the D2DNeighbor-v0 env (``selection_via: env``).

    Each round the ``topology.policy`` of each target acts on the env's
    observation and the env steps the system.
    """

    def __init__(self, system: Any) -> None:
        from envs.d2d import D2DNeighborEnv, make_selection_policies

        self.env = D2DNeighborEnv(mode="emulate", system=system)
        self.obs = self.env.reset(seed=system.config.seed)[0]
        self.policies = make_selection_policies(self.env)

    def step(self, t: int) -> list[dict[str, Any]]:
        """Run round ``t`` with the policies' selections; return the rows."""
        from envs.d2d import policy_action

        action = policy_action(self.env, self.policies, self.obs)
        self.obs, _, _, _, info = self.env.step(action)
        return info["rows"]  # type: ignore[no-any-return]

    def state_dict(self) -> dict[str, Any]:
        """The env's per-round observation inputs and the policies' plain state."""
        env = self.env
        return {
            "round": env.round,
            "em_weight": env._em,
            "selected": env._selected,
            "loss": env._loss,
            "acc": env._acc,
            "policies": [plain_attributes(p) for p in self.policies],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` on the freshly reset env and policies."""
        env = self.env
        env.round = int(state["round"])
        env._em, env._selected = state["em_weight"], state["selected"]
        env._loss, env._acc = state["loss"], state["acc"]
        for policy, saved in zip(self.policies, state["policies"], strict=True):
            restore_attributes(policy, saved)
        self.obs = env._get_obs()


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    values = np.array([r[key] for r in rows if r["role"] == "target"], float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def run_d2d(
    cfg: RunConfig,
    *,
    run_dir: Path | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> RunResult:
    """Run a D2D experiment and write its run directory.

    With ``output.checkpoint_every = k`` the run saves a checkpoint every k rounds
    (``rayfl.checkpoint``: the system's :meth:`D2DSystem.state_dict`, the
    selection policies' state and the rows so far); ``rayfl resume RUN_DIR``
    continues from it, bit-identically to an uninterrupted run.

    Args:
        cfg: A validated config with ``topology.kind == "d2d"``.
        run_dir: Directory to write into (default: a fresh one).
        checkpoint: A loaded checkpoint of ``run_dir`` to continue from.

    Returns:
        The run directory and its metrics.
    """
    from rayfl.d2d.system import D2DSystem

    _check(cfg)
    started = time.perf_counter()
    system = D2DSystem(cfg)
    try:
        driver: Any = (
            _EnvSelection(system)
            if cfg.topology.selection_via == "env"  # type: ignore[union-attr]
            else _OnceSelection(system)
        )
    except BaseException:
        system.close()
        raise
    log = RunLog(run_dir or make_run_dir(cfg.output.dir, cfg.name))
    first_round = 0
    if checkpoint is not None:
        system.load_state_dict(checkpoint["system"])
        driver.load_state_dict(checkpoint["driver"])
        log.client_rows = checkpoint["client_rows"]
        log.round_rows = checkpoint["round_rows"]
        first_round = int(checkpoint["next_round"])
    else:
        log.write_config(cfg.to_dict())
    every = cfg.output.checkpoint_every
    bar = None
    if cfg.output.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=cfg.rounds, unit="round", dynamic_ncols=True)
        bar.update(first_round)

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
            if checkpoint is not None:
                progress.resume_from = first_round
            for t in range(first_round, cfg.rounds):
                progress.round = t
                t0 = time.perf_counter()
                rows = driver.step(t)
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
                if every and (t + 1) % every == 0 and t + 1 < cfg.rounds:
                    save_checkpoint(
                        log.run_dir,
                        {
                            "next_round": t + 1,
                            "system": system.state_dict(),
                            "driver": driver.state_dict(),
                            "client_rows": log.client_rows,
                            "round_rows": log.round_rows,
                        },
                    )
                    progress.resume_from = t + 1
    finally:
        with contextlib.suppress(Exception):  # after a lost actor: status says why
            system.close()
    if cfg.output.plots:
        from rayfl.plots import plot_rounds

        plot_rounds({cfg.name: load_run(log.run_dir).rounds}, log.run_dir / "plots")
    return load_run(log.run_dir)
