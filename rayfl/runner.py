"""run(config): build the system, loop rounds, log, evaluate, write the run directory.

This is what ``rayfl run`` and :func:`rayfl.run` call. Each round:
    1. the scheduler picks the round's clients (and subchannels/power when a
       wireless model is configured) from the eligible ones;
    2. :meth:`FLSystem.run_round` trains, sends and aggregates;
    3. every ``eval_every`` rounds (and at the last) all clients are evaluated;
    4. rows are appended to the round × client log and the progress bar updates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.algorithms.registry import algorithm_class
from rayfl.checkpoint import (
    load_checkpoint,
    plain_attributes,
    restore_attributes,
    save_checkpoint,
)
from rayfl.config import ConfigError, RunConfig, load_config, parse_overrides
from rayfl.engine import FLSystem
from rayfl.metrics import round_summary
from rayfl.plots import plot_rounds
from rayfl.results import RunLog, RunResult, load_run, make_run_dir
from rayfl.run_status import RunProgress, terminal_status
from rayfl.schedule import Schedule
from rayfl.scheduler import BUILTIN_POLICIES, Scheduler
from rayfl.system import RoundResult

__all__ = ["resume", "run"]


def _progress(enabled: bool, total: int, desc: str | None = None) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="round", dynamic_ncols=True, leave=True)


def _client_rows(
    t: int,
    n: int,
    result: Any,
    evals: list[dict[str, Any]] | None,
    epsilon: np.ndarray | None,
    nominal: np.ndarray | None,
    extra: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    by_client = {int(r["client"]): r for r in result.rows}
    nan = float("nan")
    rows = []
    for c in range(n):
        r = by_client.get(c, {})
        e = evals[c] if evals is not None else {}
        rows.append(
            {
                "round": t,
                "client": c,
                "scheduled": c in by_client,
                "subchannel": int(r.get("subchannel", -1)),
                "power": float(r.get("tx_power_w", nan)),
                "snr_db": float(r.get("snr_db", nan)),
                "delivered": bool(r.get("delivered", False)),
                "actor_failed": bool(r.get("actor_failed", False)),
                "rejected": r.get("rejected") or None,  # reason string, or None
                "train_loss": float(r.get("train_loss", nan)),
                "test_loss": float(e.get("test_loss", nan)),
                "test_acc": float(e.get("test_acc", nan)),
                "personal_acc": float(e.get("personal_acc", nan)),
                "personal_loss": float(e.get("personal_loss", nan)),
                "eval_train_loss": float(e.get("eval_train_loss", nan)),
                "eval_train_reg_loss": float(e.get("eval_train_reg_loss", nan)),
                "eval_train_pl_objective": float(e.get("eval_train_pl_objective", nan)),
                "epsilon": float(epsilon[c]) if epsilon is not None else nan,
                "epsilon_nominal": float(nominal[c]) if nominal is not None else nan,
                "bits": float(r.get("bits", 0.0)),
                "latency_s": float(r.get("latency_s", nan)),
                "energy_j": float(r.get("energy_j", nan)),
                # the algorithm's own record keys (``Algorithm.logged_metrics``)
                **{k: float(r.get(k, nan)) for k in extra},
            }
        )
    return rows


def run(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    overrides: list[str] | Mapping[str, Any] = (),
    **kw_overrides: Any,
) -> RunResult:
    """Run one experiment and return its results.

    Works inside an already-running Ray session (notebooks): the session is
    reused and left running.

    Args:
        config: YAML path, mapping, ``RunConfig`` or None (defaults).
        overrides: ``["rounds=5", "data.num_clients=100"]`` or a dotted-key mapping.
        **kw_overrides: Top-level overrides, ``rounds=5``; use ``__`` for dots
            (``data__num_clients=100``).

    Returns:
        The run directory and its metrics as pandas DataFrames.

    Raises:
        ConfigError: For an invalid config (nothing is written).

    Example:
        >>> result = rayfl.run("examples/quickstart.yaml", rounds=2)  # doctest: +SKIP
        >>> result.rounds[["round", "global_acc"]]  # doctest: +SKIP
    """
    merged = (
        dict(overrides)
        if isinstance(overrides, Mapping)
        else parse_overrides(overrides)
    )
    merged.update({k.replace("__", "."): v for k, v in kw_overrides.items()})
    cfg = load_config(config, merged)
    return _run(cfg)


class _SchedulerDriver:
    """Rounds driven by a built-in selection rule (no env)."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.system = FLSystem(cfg)
        self.scheduler = Scheduler(cfg, self.system)

    def step(self, t: int) -> tuple[Schedule, RoundResult, list[dict[str, Any]] | None]:
        schedule = self.scheduler.schedule(t)
        result = self.system.run_round(t, schedule)
        last = t == self.cfg.rounds - 1 or self.system.exhausted()
        evaluate = (t + 1) % self.cfg.eval_every == 0 or last
        return schedule, result, self.system.evaluate() if evaluate else None

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.scheduler.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.cursor = int(state["cursor"])

    def close(self) -> None:
        self.system.close()


def round_costs(rows: list[dict[str, Any]], *, wireless: bool) -> dict[str, float]:
    """Return one round's ``latency_s``, ``energy_j`` and ``bits``.

    A synchronous round lasts as long as its slowest uplink; energy and bits are
    summed over the scheduled clients' rows. Without a wireless model latency
    and energy are NaN (never measured).
    """
    nan = float("nan")
    return {
        "latency_s": max((r.get("latency_s", 0.0) for r in rows), default=0.0)
        if wireless
        else nan,
        "energy_j": float(sum(r.get("energy_j", 0.0) for r in rows))
        if wireless
        else nan,
        "bits": float(sum(r.get("bits", 0.0) for r in rows)),
    }


def policy_needs_controls(cfg: RunConfig) -> bool:
    """Whether ``cfg``'s policy needs an env exposing the algorithm's controls.

    A policy that sets per-client knobs (e.g. minmax: lr, personal_lr, lam)
    declares ``uses_controls``; ``scheduler.controls`` forces them on.
    """
    from policies.registry import policy_class

    policy = policy_class(cfg.scheduler.policy)
    return cfg.scheduler.controls or bool(getattr(policy, "uses_controls", False))


def env_policy(cfg: RunConfig, env: Any) -> Any:
    """Build ``cfg``'s policy for a reset emulate-mode env, as a run does.

    Policies that need run constants (model size, DP targets) read them from the
    env's FL system (``bind_system``); the policy is reset with ``cfg.seed``.
    """
    from policies import make_policy

    policy = make_policy(cfg.scheduler.policy, env, **cfg.scheduler.params)
    bind = getattr(policy, "bind_system", None)
    if callable(bind):
        bind(env.backend.system)
    policy.reset(seed=cfg.seed)
    return policy


class _EnvDriver:
    """Rounds driven by a policy through the scheduling env (emulate mode)."""

    def __init__(self, cfg: RunConfig) -> None:
        from envs.scheduling import WirelessFLEnv

        self.env = WirelessFLEnv(
            cfg, mode="emulate", controls=policy_needs_controls(cfg)
        )
        self.obs, _ = self.env.reset(seed=cfg.seed)
        self.system = self.env.backend.system  # type: ignore[union-attr]
        self.policy = env_policy(cfg, self.env)

    def step(self, t: int) -> tuple[Schedule, RoundResult, list[dict[str, Any]] | None]:
        action = self.policy(self.obs)
        self.obs, _, _, _, info = self.env.step(action)
        outcome = self.env.last_outcome
        assert outcome is not None
        schedule = Schedule(np.asarray(info["scheduled"], dtype=np.int64))
        return schedule, RoundResult(t, outcome.rows, outcome.delivered), outcome.evals

    def state_dict(self) -> dict[str, Any]:
        env = self.env
        return {
            "policy": plain_attributes(self.policy),
            "obs": self.obs,
            "env": {
                k: getattr(env, k)
                for k in ("round", "_loss", "_staleness", "_mean_acc")
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        restore_attributes(self.policy, state["policy"])
        self.obs = state["obs"]
        for key, value in state["env"].items():
            setattr(self.env, key, value)

    def close(self) -> None:
        self.env.close()


def _total(rows: list[dict[str, Any]], key: str) -> float | None:
    """Sum of a per-round column; None when it was never measured (no wireless)."""
    values = np.array([r[key] for r in rows], dtype=np.float64)
    return float(values.sum()) if len(values) and np.isfinite(values).all() else None


def _query(call: Callable[[], Any]) -> Any:
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


def _driver(cfg: RunConfig) -> Any:
    if cfg.topology.kind == "hierarchical":  # devices → edges → cloud (rayfl.hierarchy)
        from rayfl.hierarchy.system import HierarchicalDriver

        return HierarchicalDriver(cfg)
    policy = cfg.scheduler.policy
    if policy in BUILTIN_POLICIES and (cfg.wireless is None or policy == "all"):
        return _SchedulerDriver(cfg)
    if cfg.wireless is None:
        raise ConfigError(
            f"scheduler.policy={policy} schedules subchannels: it needs a `wireless` "
            f"section (without one, use one of {', '.join(BUILTIN_POLICIES)})"
        )
    return _EnvDriver(cfg)


def resume(run_dir: str | Path) -> RunResult:
    """Continue a run from its last checkpoint (``rayfl resume RUN_DIR``).

    The resumed run writes into the same directory; its final ``metrics.parquet``
    equals that of an uninterrupted run with the same config.

    Raises:
        FileNotFoundError: If the run has no checkpoint.
    """
    path = Path(run_dir)
    checkpoint = load_checkpoint(path)
    cfg = load_config(path / "config.yaml")
    return _run(cfg, run_dir=path, checkpoint=checkpoint)


def _run(
    cfg: RunConfig,
    *,
    run_dir: Path | None = None,
    checkpoint: dict[str, Any] | None = None,
) -> RunResult:
    if cfg.topology.kind == "d2d":  # server-free D2D (pFedWN): its own round loop
        from rayfl.d2d.runner import run_d2d

        return run_d2d(cfg, run_dir=run_dir, checkpoint=checkpoint)
    started = time.perf_counter()
    driver = _driver(cfg)
    system = driver.system
    first_round = 0
    log = RunLog(run_dir or make_run_dir(cfg.output.dir, cfg.name))
    if checkpoint is not None:
        system.load_state_dict(checkpoint["system"])
        driver.load_state_dict(checkpoint["driver"])
        log.client_rows = checkpoint["client_rows"]
        log.round_rows = checkpoint["round_rows"]
        first_round = int(checkpoint["next_round"])
    else:
        log.write_config(cfg.to_dict())
    run_dir = log.run_dir
    setup_s = time.perf_counter() - started
    bar = _progress(cfg.output.progress, cfg.rounds, desc=cfg.name)
    if bar is not None and first_round:
        bar.update(first_round)
    every = cfg.output.checkpoint_every
    logged = getattr(algorithm_class(cfg.algorithm), "logged_metrics", ())

    def write_summary(progress: RunProgress) -> None:
        if bar is not None:
            bar.close()
        final = next((r for r in reversed(log.round_rows) if "global_acc" in r), {})
        eps = (
            _query(lambda: system.uplink.epsilons(evaluate=True)[0])
            if log.round_rows
            else None
        )
        summary_doc = {
            "status": progress.status,
            **({"error": progress.error} if progress.error else {}),
            "name": cfg.name,
            "rounds_done": len(log.round_rows),
            "setup_s": setup_s,
            "total_s": time.perf_counter() - started,
            "num_clients": system.num_clients,
            "num_actors": len(system.actors),
            "placement": _query(system.placement),
            "local_updates": _query(system.local_updates),
            "model_dim": system.dim,
            "final": {k: v for k, v in final.items() if k != "round"},
            "totals": {
                "latency_s": _total(log.round_rows, "latency_s"),
                "energy_j": _total(log.round_rows, "energy_j"),
                "bits": float(sum(r["bits"] for r in log.round_rows)),
                "download_bits": float(
                    sum(r.get("download_bits", 0.0) for r in log.round_rows)
                ),
            },
            **divergence_report(log.round_rows),
            "privacy": _query(lambda: system.uplink.privacy_summary(eps)),
        }
        log.flush(summary_doc)
        if hasattr(driver, "write_extra"):  # hierarchy: edges.parquet
            if progress.status == "completed":
                driver.write_extra(run_dir)
            else:  # best effort: the summary already says what went wrong
                _query(lambda: driver.write_extra(run_dir))

    try:
        with terminal_status(run_dir, write_summary) as progress:
            if checkpoint is not None:
                progress.resume_from = first_round
            for t in range(first_round, cfg.rounds):
                progress.round = t
                t0 = time.perf_counter()
                schedule, result, evals = driver.step(t)
                epsilon, nominal = system.uplink.epsilons(evaluate=True)
                summary = round_summary(evals, system.num_test) if evals else {}
                log.client_rows += _client_rows(
                    t, system.num_clients, result, evals, epsilon, nominal, logged
                )
                rows = result.rows
                row = {
                    "round": t,
                    "num_scheduled": len(schedule.clients),
                    "num_delivered": len(result.delivered),
                    "num_rejected": int(sum(bool(r.get("rejected")) for r in rows)),
                    "round_time_s": time.perf_counter() - t0,
                    "epsilon_max": float(np.nanmax(epsilon))
                    if epsilon is not None
                    else float("nan"),
                    **round_costs(rows, wireless=cfg.wireless is not None),
                    "download_bits": float(
                        sum(r.get("download_bits", 0.0) for r in rows)
                    ),
                    # personalized downloads (FedAMP, APPLE): the slowest one's airtime
                    "downlink_latency_s": max(
                        (r.get("downlink_latency_s", 0.0) for r in rows), default=0.0
                    )
                    if cfg.wireless is not None
                    else float("nan"),
                    **summary,
                }
                if hasattr(driver, "round_extras"):  # hierarchy: energy, delay, τ_k...
                    row.update(driver.round_extras(t))
                log.round_rows.append(row)
                if bar is not None:
                    if evals:  # else the bar keeps the last evaluation, and its round
                        post = {
                            "acc": f"{row.get('eval_acc', float('nan')):.3f}",
                            "max_loss": f"{row.get('eval_max_loss', float('nan')):.3f}",
                            "eval_round": t,
                        }
                        bar.set_postfix(post, refresh=False)
                    bar.update(1)
                exhausted = getattr(system, "exhausted", None)  # flat FLSystem only
                if (
                    exhausted is not None and exhausted()
                ):  # seed 000: T0 uploads used up
                    break
                if every and (t + 1) % every == 0 and t + 1 < cfg.rounds:
                    save_checkpoint(
                        run_dir,
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
        _query(driver.close)
    if cfg.output.plots:
        plot_rounds({cfg.name: load_run(run_dir).rounds}, run_dir / "plots")
    return load_run(run_dir)
