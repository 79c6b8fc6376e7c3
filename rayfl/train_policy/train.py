"""``rayfl train-policy``: PPO (RLlib, new API stack) on the scheduling env.

The star's ``WirelessFL-v0``; for a ``topology.kind: hierarchical`` config,
``HierarchicalFL-v0`` (all devices are the rows, each edge schedules its own
block: ``envs.hierarchy.rl.EdgeScores``); for a ``topology.kind: d2d`` config with one
target, ``D2DNeighbor-v0`` (the candidate neighbors are the rows).

Read top to bottom (STYLE §17): config → env → networks → training loop (log,
checkpoint) → export → evaluation against the heuristics → plots.

The run directory ``<output.dir>/train-<name>-<timestamp>/`` holds:

| file | content |
|------|---------|
| ``config.yaml`` | the resolved config, ``rl`` section included |
| ``progress.csv`` | one row per PPO iteration: mean episode return, entropy, env steps/s… |
| ``checkpoint/`` | the RLlib algorithm (resume with ``--resume RUN_DIR``) |
| ``env_runners.json`` | with ``rl.num_env_runners`` > 0: each remote EnvRunner's index, Ray node id, host and pid |
| ``policy/`` | ``policy.npz`` + ``policy.json``: the exported numpy policy, what ``scheduler.policy=learned scheduler.params.checkpoint=RUN_DIR`` loads |
| ``evaluation.csv`` / ``evaluation.md`` | per-episode and mean ± std returns of the learned policy and the baselines on the same seeds |
| ``plots/learning_curve.png``, ``plots/evaluation.png`` | the two figures |

Implementation details:
    1. Environment: :func:`envs.rl.make_rl_env` (per-client features, score
       actions decoded by top-K + Hungarian); RLlib's action normalisation and
       clipping are off, since only the ranking of the scores matters. In
       emulate mode with ``rl.num_envs_per_env_runner`` = E > 1, each runner
       steps E such envs in lockstep on one set of client hosts
       (:class:`envs.rl_vector.RLVectorEnv`; star configs the lanes can share,
       :func:`rayfl.star.lanes.check_lanes`); its lanes share one data
       partition at a time.
    2. The RLlib checkpoint and the exported policy are written every
       ``rl.checkpoint_every`` iterations and at the end, each by writing a new
       directory and renaming it over the old one.
    3. Evaluation scores every policy on the unwrapped env with episode seeds
       10000 + i, with the deterministic learned policy — the numbers the
       "learned vs random" margin is read from.
    4. Remote EnvRunners (``rl.num_env_runners`` = R > 0) are Ray actors of
       ``rl.num_cpus_per_env_runner`` CPUs each, placed by Ray's scheduler on
       any node of the session (a cluster: ``ray.address``); the learner stays
       in the driver. The env is given to RLlib as a class,
       :class:`RLlibScoresEnv`, not as a name in Ray Tune's env registry: that
       registry keys its entries by the job id of the first Ray connection of
       the process, so a second ``train_policy`` on a cluster (a new job) left
       the runners unable to find the env by name. The class is pickled by
       reference, so every node must import ``rayfl``, ``envs`` and
       ``policies`` (the same install or ``PYTHONPATH``). The run
       checks that the session has R × that many CPUs before building the
       algorithm (RLlib would otherwise wait for the actors forever) and
       records where each runner ran in ``env_runners.json``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rayfl.config import RunConfig, load_config
from rayfl.registry import topology_of
from rayfl.rl.config import RLConfig
from rayfl.rundir.results import atomic_write, make_run_dir
from rayfl.train_policy.algorithm import (
    RLlibScoresEnv,
    build_algorithm,
    check_env_runner_resources,
    check_lanes_config,
)
from rayfl.train_policy.evaluate import (
    evaluate_policies,
    plot_training,
    write_evaluation,
)
from rayfl.train_policy.export import export_policy, policy_meta, trained_meta
from rayfl.train_policy.timing import LearnerClock

__all__ = [
    "INSTALL_HINT",
    "RLlibScoresEnv",
    "TrainingFailed",
    "check_env_runner_resources",
    "check_iteration",
    "env_runner_placement",
    "evaluate_policies",
    "rllib_available",
    "train_policy",
]

INSTALL_HINT = (
    "rayfl train-policy needs RLlib, an optional extra: "
    "pip install -e '.[rl]'  (ray[rllib] pins gymnasium 1.2.2; use a separate venv "
    "if you want to keep another gymnasium)"
)


#: Modules the ``ray[rllib]`` extra brings (``ray.rllib`` itself ships with every
#: ray wheel and half-imports without them; checkpoints need ``ormsgpack``).
RLLIB_MODULES = ("ray.rllib", "tree", "lz4", "ormsgpack")


class TrainingFailed(RuntimeError):
    """PPO stopped sampling: an iteration with no env steps, or every runner lost.

    ``rayfl train-policy`` prints the message on one line and exits with code 1;
    no policy is exported for the failed iteration.
    """


def check_iteration(
    result: Mapping[str, Any], *, iteration: int, steps: float, num_env_runners: int
) -> None:
    """Raise :class:`TrainingFailed` if iteration ``iteration`` did not train.

    Two failures are caught: the iteration sampled no env steps (its returns are
    NaN and the update learns nothing), and, with remote EnvRunners, none of
    them is healthy after RLlib's own restarts (RLlib's fault-tolerance stats
    ``fault_tolerance.num_healthy_workers``), e.g. after Ray's memory monitor
    killed them.

    Args:
        result: The result dict of ``Algorithm.train()``.
        iteration: The iteration's number (1-based), for the message.
        steps: Env steps the iteration sampled.
        num_env_runners: ``rl.num_env_runners`` (0: sampling in the driver).

    Raises:
        TrainingFailed: With a one-line reason.

    Example:
        >>> check_iteration({}, iteration=1, steps=40, num_env_runners=0)
        >>> try:
        ...     check_iteration({}, iteration=3, steps=0, num_env_runners=0)
        ... except TrainingFailed as e:
        ...     print(str(e)[:35])
        PPO iteration 3 sampled 0 env steps
    """
    healthy = (result.get("fault_tolerance") or {}).get("num_healthy_workers")
    lost = num_env_runners > 0 and healthy is not None and int(healthy) == 0
    if lost:
        restarts = (result.get("fault_tolerance") or {}).get(
            "num_remote_worker_restarts", "?"
        )
        raise TrainingFailed(
            f"PPO iteration {iteration}: all {num_env_runners} env runners are lost "
            f"(0 healthy after {restarts} restarts; killed by Ray's memory monitor?) "
            f"and it sampled {steps:g} env steps; stopping: lower "
            "rl.num_env_runners or free memory, then resume with --resume RUN_DIR"
        )
    if not steps > 0:
        raise TrainingFailed(
            f"PPO iteration {iteration} sampled {steps:g} env steps; stopping "
            "(env runners lost or the env never finished a step; see the Ray "
            "logs), resume with --resume RUN_DIR once fixed"
        )


def rllib_available() -> bool:
    """Return True if RLlib and the dependencies of ``ray[rllib]`` are installed."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(m) is not None for m in RLLIB_MODULES)
    except (ImportError, ValueError):
        return False


def _where_am_i(runner: Any) -> dict[str, Any]:
    """Where an EnvRunner actor runs (called inside it)."""
    import os
    import socket

    import ray

    return {
        "worker_index": int(getattr(runner, "worker_index", -1)),
        "node_id": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def env_runner_placement(algo: Any) -> list[dict[str, Any]]:
    """Return, for each remote EnvRunner of ``algo``, its index, node id, host, pid.

    Asked of the runners themselves (``foreach_env_runner``), so it reports the
    nodes the actors really run on. Empty without remote runners.
    """
    group = getattr(algo, "env_runner_group", None)
    if group is None or group.num_remote_env_runners() == 0:
        return []
    rows = group.foreach_env_runner(_where_am_i, local_env_runner=False)
    return sorted(rows, key=lambda r: r["worker_index"])


def _save_checkpoint(algo: Any, run_dir: Path, iteration: int) -> None:
    target = run_dir / "checkpoint"
    tmp = run_dir / "checkpoint.new"
    shutil.rmtree(tmp, ignore_errors=True)
    algo.save_to_path(str(tmp.resolve()))
    (tmp / "rayfl_state.json").write_text(json.dumps({"iteration": iteration}))
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


# ------------------------------------------------------------------ training loop
def _row(
    result: Mapping[str, Any],
    iteration: int,
    seconds: float,
    steps: float,
    elapsed: float,
    cpu_s: float,
    learn_s: float,
) -> dict[str, Any]:
    runners = result.get("env_runners", {})
    learner = result.get("learners", {}).get("default_policy", {})
    return {
        "iteration": iteration,
        "episode_return_mean": float(runners.get("episode_return_mean", np.nan)),
        "episodes": int(runners.get("num_episodes", 0) or 0),
        "entropy": float(learner.get("entropy", np.nan)),
        "vf_explained_var": float(learner.get("vf_explained_var", np.nan)),
        "env_steps": steps,
        "env_steps_per_s": steps / max(seconds, 1e-9),
        "iteration_s": seconds,
        "learn_s": learn_s,  # the PPO update's share (rayfl.train_policy.timing)
        "elapsed_s": elapsed,
        "cpu_s": cpu_s,
    }


def train_policy(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    resume: str | Path | None = None,
    verbose: bool = True,
    torch_threads: int = 1,
) -> Path:
    """Train the learned scheduler with PPO; return the run directory.

    Args:
        config: Run config with an optional ``rl`` section (defaults otherwise).
        overrides: ``key.path=value`` overrides, e.g. ``rl.iterations=5``.
        resume: A previous run directory: restore its checkpoint and continue
            up to ``rl.iterations`` (``config`` is then read from it).
        verbose: Print one line per iteration.
        torch_threads: Torch threads of this process (the PPO update runs here).

    Raises:
        ImportError: Without RLlib (the message says how to install it).
        FileNotFoundError: If ``resume`` has no checkpoint.
        ValueError: If the Ray session has fewer CPUs than the remote
            EnvRunners reserve (``check_env_runner_resources``).
        TrainingFailed: If an iteration sampled no env steps or every remote
            EnvRunner was lost (:func:`check_iteration`); the run directory
            keeps the progress and the last checkpoint before it.
    """
    if not rllib_available():
        raise ImportError(INSTALL_HINT)
    from rayfl.cluster.session import RaySession

    cfg = _training_config(config, overrides, resume)
    rl: RLConfig = cfg.rl  # type: ignore[assignment]
    check_lanes_config(cfg, rl)
    check_env_runner_resources(cfg, rl)
    session = RaySession(cfg.ray)  # RLlib puts its config in the object store
    import torch

    torch.set_num_threads(torch_threads)  # DESIGN.md: one per process by default
    try:
        check_env_runner_resources(cfg, rl)
        algo = build_algorithm(cfg, rl)
        run_dir, rows = _open_run(algo, cfg, resume)
        meta = policy_meta(cfg, rl)
        placement = _record_placement(algo, run_dir)
        if verbose:
            _announce(run_dir, rl, meta, placement)
        try:
            iteration = _iterate(algo, rl, run_dir, rows, meta, verbose=verbose)
        except TrainingFailed:
            algo.stop()
            raise
        _save_checkpoint(algo, run_dir, iteration)
        export_policy(algo, run_dir / "policy", trained_meta(meta, iteration, rows))
        algo.stop()
        if rl.eval_episodes:
            table = evaluate_policies(
                cfg,
                run_dir / "policy",
                episodes=rl.eval_episodes,
                csv=run_dir / "evaluation.csv",
            )
            write_evaluation(run_dir, table, verbose=verbose)
        plot_training(run_dir, rl.reward_scale)
    finally:
        session.close()
    return run_dir


def _training_config(
    config: str | Path | Mapping[str, Any] | RunConfig | None,
    overrides: Sequence[str] | Mapping[str, Any],
    resume: str | Path | None,
) -> RunConfig:
    """The run's config (a resumed run's own), with an ``rl`` section."""
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / "checkpoint" / "rayfl_state.json").is_file():
            raise FileNotFoundError(f"{run_dir}: no checkpoint/ to resume from")
        cfg = load_config(run_dir / "config.yaml", overrides)
    else:
        cfg = load_config(config, overrides)
    topology_of(cfg).check_train(cfg)
    return cfg.model_copy(update={"rl": cfg.rl or RLConfig()})


def _open_run(
    algo: Any, cfg: RunConfig, resume: str | Path | None
) -> tuple[Path, list[dict[str, Any]]]:
    """A new run directory, or the resumed one restored; its progress rows."""
    rows: list[dict[str, Any]] = []
    if resume is not None:
        run_dir = Path(resume)
        state = json.loads((run_dir / "checkpoint" / "rayfl_state.json").read_text())
        algo.restore_from_path(str((run_dir / "checkpoint").resolve()))
        start = int(state["iteration"])
        rows = pd.read_csv(run_dir / "progress.csv").to_dict("records")[:start]
    else:
        run_dir = make_run_dir(cfg.output.dir, f"train-{cfg.name}")
    atomic_write(run_dir / "config.yaml", lambda p: p.write_text(_yaml(cfg)))
    return run_dir, rows


def _record_placement(algo: Any, run_dir: Path) -> list[dict[str, Any]]:
    """Write ``env_runners.json`` when there are remote runners; return them."""
    placement = env_runner_placement(algo)
    if placement:
        text = json.dumps(placement, indent=2) + "\n"
        atomic_write(run_dir / "env_runners.json", lambda p: p.write_text(text))
    return placement


def _announce(
    run_dir: Path, rl: RLConfig, meta: dict[str, Any], placement: list[dict[str, Any]]
) -> None:
    print(
        f"training in {run_dir} ({rl.mode}, N={meta['num_clients']}, "
        f"K={meta['num_subchannels']}, reward {rl.reward})"
    )
    if placement:
        nodes = {r["node_id"] for r in placement}
        print(
            f"{len(placement)} remote env runners on {len(nodes)} Ray "
            f"node(s): {', '.join(sorted(n[:8] for n in nodes))}"
        )


def _iterate(
    algo: Any,
    rl: RLConfig,
    run_dir: Path,
    rows: list[dict[str, Any]],
    meta: dict[str, Any],
    *,
    verbose: bool,
) -> int:
    """Train from ``len(rows)`` to ``rl.iterations`` (or the time budget).

    Appends one progress row per iteration to ``rows`` and ``progress.csv``,
    checkpoints and exports every ``rl.checkpoint_every`` iterations; returns
    the last iteration.
    """
    start = len(rows)
    elapsed = float(rows[-1]["elapsed_s"]) if rows else 0.0
    cpu_before = float(rows[-1].get("cpu_s", 0.0)) if rows else 0.0
    cpu_start = time.process_time()
    steps_before: float | None = None
    iteration = start
    clock = LearnerClock(algo)
    for iteration in range(start + 1, rl.iterations + 1):
        t0 = time.perf_counter()
        result = algo.train()
        seconds = time.perf_counter() - t0
        elapsed += seconds
        lifetime = _lifetime_steps(result)
        steps = lifetime - steps_before if steps_before is not None else lifetime
        steps_before = lifetime
        cpu_s = cpu_before + time.process_time() - cpu_start
        check_iteration(
            result,
            iteration=iteration,
            steps=steps,
            num_env_runners=rl.num_env_runners,
        )
        row = _row(result, iteration, seconds, steps, elapsed, cpu_s, clock.lap())
        rows.append(row)
        atomic_write(
            run_dir / "progress.csv",
            lambda p: pd.DataFrame(rows).to_csv(p, index=False),
        )
        if verbose:
            print(
                f"iter {iteration:4d}  return {row['episode_return_mean']:9.3f}  "
                f"entropy {row['entropy']:7.3f}  "
                f"{row['env_steps_per_s']:7.1f} steps/s  "
                f"({elapsed:6.0f} s wall, {cpu_s:6.0f} s CPU)",
                flush=True,
            )
        out_of_time = rl.time_budget_s is not None and elapsed >= rl.time_budget_s
        if iteration % rl.checkpoint_every == 0 or out_of_time:
            _save_checkpoint(algo, run_dir, iteration)
            export_policy(algo, run_dir / "policy", trained_meta(meta, iteration, rows))
        if out_of_time:
            break
    return iteration


def _lifetime_steps(result: Mapping[str, Any]) -> float:
    runners = result.get("env_runners", {})
    value = runners.get(
        "num_env_steps_sampled_lifetime", result.get("num_env_steps_sampled_lifetime")
    )
    return (
        float(value)
        if value is not None
        else float(runners.get("num_env_steps_sampled", 0.0))
    )


def _yaml(cfg: RunConfig) -> str:
    import yaml

    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
