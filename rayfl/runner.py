"""run(config): config → system → deciders → the round loop → the run directory.

This is what ``rayfl run`` and :func:`rayfl.run` call. It builds the system
(``rayfl.engine.build_system``), one decider per decision unit (a built-in
selection rule or a registered policy), and hands both to
``rayfl.engine.loop.run_rounds``, which each round:
    1. asks each decider for its unit's schedule (from the unit's observation);
    2. runs the round (:meth:`rayfl.engine.Engine.run_round`);
    3. evaluates every ``eval_every`` rounds, at the last round and when the
       upload budgets are spent (every round for a registered policy);
    4. appends the round × client and per-round rows, and checkpoints.
:func:`resume` continues a run through the same loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rayfl.algorithms.registry import algorithm_class
from rayfl.checkpoint import load_checkpoint
from rayfl.config import ConfigError, RunConfig, load_config, parse_overrides
from rayfl.engine import build_system
from rayfl.engine.deciders import PolicyDecider
from rayfl.engine.loop import LoopSettings, restore, run_rounds
from rayfl.engine.rows import (
    divergence_report,
    query,
    round_costs,
    summary_document,
)
from rayfl.plots import plot_rounds
from rayfl.results import RunLog, RunResult, load_run, make_run_dir
from rayfl.run_status import RunProgress, terminal_status
from rayfl.schedule import Schedule
from rayfl.scheduler import BUILTIN_POLICIES, Scheduler
from rayfl.star.actions import StarActions

__all__ = ["divergence_report", "env_policy", "resume", "round_costs", "run"]


def _progress(enabled: bool, total: int, desc: str | None = None) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="round", dynamic_ncols=True, leave=True)


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
    return _bound_policy(cfg, env, env.backend.system)


def _bound_policy(cfg: RunConfig, spaces: Any, system: Any) -> Any:
    """``cfg``'s policy for ``spaces`` (an env), bound to ``system``, reset."""
    from policies import make_policy

    policy = make_policy(cfg.scheduler.policy, spaces, **cfg.scheduler.params)
    bind = getattr(policy, "bind_system", None)
    if callable(bind):
        bind(system)
    policy.reset(seed=cfg.seed)
    return policy


class _SchedulerDecider:
    """A built-in selection rule (``rayfl.scheduler``) as the star's decider."""

    observes = False

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def decide(self, t: int, observation: Any) -> Schedule:
        return self.scheduler.schedule(t)

    def state_dict(self) -> dict[str, Any]:
        return {"cursor": self.scheduler.cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scheduler.cursor = int(state["cursor"])


def _uses_builtin(cfg: RunConfig) -> bool:
    """Whether the star run is scheduled by ``rayfl.scheduler`` (no env policy)."""
    policy = cfg.scheduler.policy
    if policy in BUILTIN_POLICIES and (cfg.wireless is None or policy == "all"):
        return True
    if cfg.wireless is None:
        raise ConfigError(
            f"scheduler.policy={policy} schedules subchannels: it needs a `wireless` "
            f"section (without one, use one of {', '.join(BUILTIN_POLICIES)})"
        )
    return False


def _make_deciders(cfg: RunConfig, system: Any) -> list[Any]:
    """Return the star's one decider: a built-in rule or a registered policy.

    A registered policy gets the scheduling env's spaces (an env object built
    for its spaces only: it never starts actors) and the env's action rules.
    """
    if _uses_builtin(cfg):
        return [_SchedulerDecider(Scheduler(cfg, system))]
    from envs.scheduling import WirelessFLEnv

    spaces = WirelessFLEnv(cfg, mode="emulate", controls=policy_needs_controls(cfg))
    actions = StarActions.of(spaces)
    return [PolicyDecider(_bound_policy(cfg, spaces, system), actions.to_schedule)]


def _build(cfg: RunConfig) -> tuple[Any, list[Any], LoopSettings]:
    """Return the run's system, its deciders and the loop settings."""
    settings = LoopSettings(
        rounds=cfg.rounds,
        eval_every=cfg.eval_every,
        checkpoint_every=cfg.output.checkpoint_every or 0,
        wireless=cfg.wireless is not None,
        logged=tuple(getattr(algorithm_class(cfg.algorithm), "logged_metrics", ())),
    )
    if cfg.topology.kind == "hierarchical":  # devices → edges → cloud, a unit per edge
        from rayfl.hierarchy.deciders import edge_policies

        system = build_system(cfg)
        try:
            deciders = [
                PolicyDecider(policy, rules.to_schedule)
                for policy, rules in edge_policies(cfg, system)
            ]
        except BaseException:
            system.close()
            raise
        return system, deciders, settings
    builtin = _uses_builtin(cfg)  # a config error before Ray starts
    system = build_system(cfg)
    try:
        deciders = _make_deciders(cfg, system)
    except BaseException:
        system.close()
        raise
    # policies read test metrics every round (the scheduling env's behaviour)
    return system, deciders, replace(settings, evaluate_every_round=not builtin)


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


def _on_round(bar: Any) -> Any:
    """The progress-bar callback: the last evaluation and its round, one tick."""
    if bar is None:
        return None

    def update(t: int, row: dict[str, Any], evals: list[Any] | None) -> None:
        if evals:  # else the bar keeps the last evaluation, and its round
            post = {
                "acc": f"{row.get('eval_acc', float('nan')):.3f}",
                "max_loss": f"{row.get('eval_max_loss', float('nan')):.3f}",
                "eval_round": t,
            }
            bar.set_postfix(post, refresh=False)
        bar.update(1)

    return update


def _summary_writer(
    cfg: RunConfig, system: Any, log: RunLog, bar: Any, started: float, setup_s: float
) -> Callable[[RunProgress], None]:
    """Return the ``terminal_status`` callback writing summary.json and extras."""

    def write_summary(progress: RunProgress) -> None:
        if bar is not None:
            bar.close()
        doc = summary_document(
            system,
            log.round_rows,
            name=cfg.name,
            status=progress.status,
            error=progress.error,
            setup_s=setup_s,
            total_s=time.perf_counter() - started,
        )
        log.flush(doc)
        if progress.status == "completed":
            system.write_extra(log.run_dir)
        else:  # best effort: the summary already says what went wrong
            query(lambda: system.write_extra(log.run_dir))

    return write_summary


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
    system, deciders, settings = _build(cfg)
    log = RunLog(run_dir or make_run_dir(cfg.output.dir, cfg.name))
    try:
        start = 0
        if checkpoint is not None:
            start = restore(checkpoint, system, deciders, log)
        else:
            log.write_config(cfg.to_dict())
        bar = _progress(cfg.output.progress, cfg.rounds, desc=cfg.name)
        if bar is not None and start:
            bar.update(start)
        setup_s = time.perf_counter() - started
        write = _summary_writer(cfg, system, log, bar, started, setup_s)
        with terminal_status(log.run_dir, write) as progress:
            if checkpoint is not None:
                progress.resume_from = start
            run_rounds(
                system,
                deciders,
                log,
                settings,
                start=start,
                progress=progress,
                on_round=_on_round(bar),
            )
    finally:
        query(system.close)
    if cfg.output.plots:
        plot_rounds({cfg.name: load_run(log.run_dir).rounds}, log.run_dir / "plots")
    return load_run(log.run_dir)
