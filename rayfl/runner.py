"""run(config): config → system → deciders → the round loop → the run directory.

This is what ``rayfl run`` and :func:`rayfl.run` call. It builds the system
(``rayfl.engine.build_system``), one decider per decision unit (a registered
policy, built by ``rayfl.registry.build_policy`` with the run's context; the
topology plug-in's ``deciders`` hook, :mod:`rayfl.topology`), and
hands both to ``rayfl.engine.loop.run_rounds``, which each round:
    1. asks each decider for its unit's schedule (from the unit's observation);
    2. runs the round (:meth:`rayfl.engine.Engine.run_round`);
    3. evaluates every ``eval_every`` rounds, at the last round and when the
       upload budgets are spent (every round for a policy that assigns
       subchannels);
    4. appends the round × client and per-round rows, and checkpoints.
:func:`resume` continues a run through the same loop.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rayfl.algorithms.registry import algorithm_class
from rayfl.config import RunConfig, load_config, parse_overrides
from rayfl.engine import build_system
from rayfl.engine.deciders import PolicyDecider
from rayfl.engine.loop import LoopSettings, restore, run_rounds
from rayfl.engine.rows import (
    divergence_report,
    query,
    round_costs,
    summary_document,
)
from rayfl.registry import topology_of
from rayfl.rundir.atomic import DiskFullError
from rayfl.rundir.checkpoint import load_checkpoint
from rayfl.rundir.plots import plot_rounds
from rayfl.rundir.results import RunLog, RunResult, load_run, make_run_dir
from rayfl.rundir.status import RunProgress, setup_status, terminal_status
from rayfl.rundir.stream import ClientSummary
from rayfl.rundir.tracking import Tracker

__all__ = ["divergence_report", "env_policy", "resume", "round_costs", "run"]


def _progress(enabled: bool, total: int, desc: str | None = None) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="round", dynamic_ncols=True, leave=True)


def run(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
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
        RunFailed: If the run fails, in a round or in its set-up (Ray start-up,
            data loading, actor creation): the run directory holds
            ``summary.json`` with status ``failed`` and ``error.txt``.
        RunInterrupted: On Ctrl-C or SIGTERM (a KeyboardInterrupt).

    Example:
        >>> result = rayfl.run("examples/quickstart.yaml", rounds=2)  # doctest: +SKIP
        >>> result.rounds[["round", "global_acc"]]  # doctest: +SKIP
    """
    return _run(resolve_config(config, overrides, kw_overrides))


def resolve_config(
    config: str | Path | Mapping[str, Any] | RunConfig | None,
    overrides: Iterable[str] | Mapping[str, Any],
    kw_overrides: Mapping[str, Any],
) -> RunConfig:
    """Return the run config of :func:`run`'s arguments (validated).

    Raises:
        ConfigError: For an invalid config.
    """
    merged = (
        dict(overrides)
        if isinstance(overrides, Mapping)
        else parse_overrides(overrides)
    )
    merged.update({k.replace("__", "."): v for k, v in kw_overrides.items()})
    return load_config(config, merged)


def env_policy(cfg: RunConfig, env: Any) -> Any:
    """Build ``cfg``'s policy for a reset emulate-mode env, as a run does.

    The policy gets the run constants of the env's system as its context and
    is reset with ``cfg.seed`` (the topology plug-in's ``env_policy`` hook).
    """
    return topology_of(cfg).env_policy(cfg, env)


#: Makes a run's system from its config: ``build_system`` (a new one, closed
#: by the run), or a warm session's (:mod:`rayfl.notebook`, kept open).
SystemSource = Callable[[RunConfig], Any]


def _or_close(system: Any, make: Callable[[], list[Any]], owned: bool) -> list[Any]:
    """Return ``make()``, the run's deciders; close ``system`` (if owned) on error."""
    try:
        return make()
    except BaseException:
        if owned:
            system.close()
        raise


def _build(
    cfg: RunConfig, source: SystemSource | None = None
) -> tuple[Any, list[Any], LoopSettings]:
    """Return the run's system, its deciders and the loop settings.

    The topology plug-in (:mod:`rayfl.topology`) gives one decider per
    decision unit (``deciders``) and changes the settings read from the config
    where its loop differs (``loop_settings``). ``source`` (a warm session's)
    provides the system instead of ``build_system``; the run then never closes it.
    """
    plugin = topology_of(cfg)
    settings = LoopSettings(
        rounds=cfg.rounds,
        eval_every=cfg.eval_every,
        checkpoint_every=cfg.output.checkpoint_every or 0,
        wireless=cfg.wireless is not None,
        logged=tuple(getattr(algorithm_class(cfg.algorithm), "logged_metrics", ())),
    )
    system = build_system(cfg) if source is None else source(cfg)
    deciders = _or_close(
        system,
        lambda: plugin.deciders(cfg, system, PolicyDecider),
        source is None,
    )
    return system, deciders, plugin.loop_settings(cfg, settings)


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
    """Return the ``terminal_status`` callback writing summary.json (and extras).

    A topology with its own summary (the plug-in's ``summary`` hook, e.g.
    D2D's ``target_acc_max`` and selection report) writes no extra files.
    """
    plugin = topology_of(cfg)

    def write_summary(progress: RunProgress) -> None:
        if bar is not None:
            bar.close()
        common: dict[str, Any] = {
            "name": cfg.name,
            "status": progress.status,
            "error": progress.error,
            "total_s": time.perf_counter() - started,
        }
        own = plugin.summary(system, log.round_rows, **common)
        if own is not None:
            log.flush(own)
            return
        log.flush(summary_document(system, log.round_rows, setup_s=setup_s, **common))
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
    source: SystemSource | None = None,
) -> RunResult:
    """Run ``cfg`` (from ``checkpoint`` into ``run_dir`` when resuming).

    ``source`` provides the system (a warm session's); the run then leaves it
    open. By default the run builds its own and closes it.
    """
    started = time.perf_counter()
    log = RunLog(run_dir) if run_dir is not None else None
    system: Any = None
    tracker: Any = None

    def open_run_dir() -> Path:  # a new run's directory: made once, with its config
        nonlocal log
        if log is None:
            log = RunLog(make_run_dir(cfg.output.dir, cfg.name))
            log.write_config(cfg.to_dict())
        return log.run_dir

    resume_from = None if checkpoint is None else int(checkpoint["next_round"])
    try:
        # a failure before the first round (Ray start-up, data, actors) ends
        # `failed` with its run directory, as one in a round does
        with setup_status(open_run_dir, resume_from=resume_from):
            system, deciders, settings = _build(cfg, source)
            open_run_dir()
            assert log is not None
            many = system.num_clients > cfg.output.client_rows_max
            if settings.client_summary and many:
                log.summary = ClientSummary(system.num_clients)  # results_stream
            start = (
                0 if checkpoint is None else restore(checkpoint, system, deciders, log)
            )
        tracker = Tracker.for_run(
            cfg, log.run_dir
        )  # output.loggers (rayfl.rundir.tracking)
        bar = _progress(cfg.output.progress, cfg.rounds, desc=cfg.name)
        if bar is not None and start:
            bar.update(start)
        setup_s = time.perf_counter() - started
        write = _summary_writer(cfg, system, log, bar, started, setup_s)
        with terminal_status(log.run_dir, write) as progress:
            progress.resume_from = resume_from
            run_rounds(
                system,
                deciders,
                log,
                settings,
                start=start,
                progress=progress,
                on_round=tracker.chain(_on_round(bar)),
            )
    finally:
        if tracker is not None:
            tracker.close()
        if system is not None and source is None:
            query(system.close)
    if cfg.output.plots:
        _plot(cfg, log.run_dir)
    return load_run(log.run_dir)


def _plot(cfg: Any, run_dir: Path) -> None:
    """Draw the run's plots (and its topology's); a full disk leaves them out with a warning."""
    try:
        plot_rounds({cfg.name: load_run(run_dir).rounds}, run_dir / "plots")
        topology_of(cfg).plots(cfg, run_dir / "plots")
    except DiskFullError as error:
        print(f"rayfl: warning: plots not written: {error}", file=sys.stderr)
