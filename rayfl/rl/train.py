"""``rayfl train-policy``: PPO (RLlib, new API stack) on the scheduling env.

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
       clipping are off, since only the ranking of the scores matters.
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

import itertools
import json
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from rayfl.config import RunConfig, load_config
from rayfl.results import atomic_write, make_run_dir
from rayfl.rl.config import RLConfig

__all__ = [
    "INSTALL_HINT",
    "RLlibScoresEnv",
    "check_env_runner_resources",
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
EVAL_SEED = 10_000


#: Modules the ``ray[rllib]`` extra brings (``ray.rllib`` itself ships with every
#: ray wheel and half-imports without them; checkpoints need ``ormsgpack``).
RLLIB_MODULES = ("ray.rllib", "tree", "lz4", "ormsgpack")


def rllib_available() -> bool:
    """Return True if RLlib and the dependencies of ``ray[rllib]`` are installed."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(m) is not None for m in RLLIB_MODULES)
    except (ImportError, ValueError):
        return False


# ------------------------------------------------------------------ config → env
def _env_creator(env_config: Mapping[str, Any]) -> Any:
    from envs.rl import make_rl_env

    return make_rl_env(
        env_config["config"],
        mode=env_config["mode"],
        reward=env_config["reward"],
        reward_scale=env_config["reward_scale"],
        partition_seeds=env_config.get("partition_seeds"),
        partition_every=env_config.get("partition_every", 1),
        partition_offset=_partition_offset(env_config),
    )


class RLlibScoresEnv(gym.Wrapper):
    """The env every RLlib EnvRunner builds: ``make_rl_env`` of its env config.

    RLlib calls the class with its ``EnvContext`` (the ``env_config`` of
    :func:`build_algorithm` plus the runner's ``worker_index``).

    Args:
        env_config: ``config`` (the run config as a dict), ``mode``,
            ``reward``, ``reward_scale``, ``partition_seeds``,
            ``partition_every``.
    """

    def __init__(self, env_config: Mapping[str, Any]) -> None:
        super().__init__(_env_creator(env_config))


#: Envs this process built (RLlib's new stack gives every vector copy of an
#: EnvRunner the same EnvContext, without a ``vector_index``).
_ENVS_BUILT = itertools.count()


def _partition_offset(env_config: Mapping[str, Any]) -> int:
    """Index of the first partition seed of a new env copy.

    EnvRunner i (0 = the driver's) of R remote ones gives its j-th env copy the
    offset j·(R + 1) + i, so all copies start on different partitions while
    there are enough ``partition_seeds``.
    """
    worker = int(getattr(env_config, "worker_index", 0) or 0)
    runners = int(getattr(env_config, "num_workers", 0) or 0)
    return next(_ENVS_BUILT) * (runners + 1) + worker


# ------------------------------------------------------------------ networks
def build_algorithm(cfg: RunConfig, rl: RLConfig) -> Any:
    """Return the RLlib PPO algorithm for ``cfg`` with the ``rl`` settings."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from policies.learned import resolve_checkpoint
    from rayfl.rl.module import ScoreRLModule

    model_config: dict[str, Any] = {
        "hidden": list(rl.hidden),
        "initial_log_std": rl.initial_log_std,
    }
    if rl.init_from:
        model_config["init_from"] = str(resolve_checkpoint(rl.init_from).resolve())
        model_config["reset_log_std"] = rl.reset_log_std
    env_config = {
        "config": cfg.to_dict(),
        "mode": rl.mode,
        "reward": rl.reward,
        "reward_scale": rl.reward_scale,
        "partition_seeds": rl.partition_seeds,
        "partition_every": rl.partition_every,
    }
    config = (
        PPOConfig()
        .environment(
            RLlibScoresEnv,
            env_config=env_config,
            normalize_actions=False,
            clip_actions=False,
        )
        .env_runners(
            num_env_runners=rl.num_env_runners,
            num_cpus_per_env_runner=rl.num_cpus_per_env_runner,
            # each emulate-mode env copy is a whole FL system on Ray: one per runner
            num_envs_per_env_runner=(
                rl.num_envs_per_env_runner if rl.mode == "surrogate" else 1
            ),
        )
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=rl.train_batch_size,
            minibatch_size=rl.minibatch_size,
            num_epochs=rl.num_epochs,
            lr=rl.lr,
            gamma=rl.gamma,
            lambda_=rl.gae_lambda,
            clip_param=rl.clip_param,
            entropy_coeff=rl.entropy_coeff,
            vf_loss_coeff=rl.vf_loss_coeff,
            vf_clip_param=1e6,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ScoreRLModule, model_config=model_config
            )
        )
        .debugging(seed=cfg.seed, log_level="ERROR")
    )
    return config.build_algo()


def check_env_runner_resources(cfg: RunConfig, rl: RLConfig) -> None:
    """Raise if the Ray session cannot hold the remote EnvRunners.

    Called before Ray starts (a local session: ``ray.num_cpus``, else the
    machine's cores) and again once connected (the cluster's total CPUs).

    Raises:
        ValueError: If ``rl.num_env_runners × rl.num_cpus_per_env_runner``
            exceeds the CPUs available to the session.
    """
    import os

    import ray

    needed = rl.num_env_runners * rl.num_cpus_per_env_runner
    if needed == 0:
        return
    if ray.is_initialized():
        total = float(ray.cluster_resources().get("CPU", 0.0))
        where = "the Ray cluster has"
    elif cfg.ray.address is None and not os.environ.get("RAY_ADDRESS"):
        total = float(cfg.ray.num_cpus or os.cpu_count() or 1)
        where = "the local Ray session gets (ray.num_cpus)"
    else:
        return  # a cluster not connected yet: checked once connected
    if needed > total + 1e-9:
        raise ValueError(
            f"rl.num_env_runners={rl.num_env_runners} × "
            f"rl.num_cpus_per_env_runner={rl.num_cpus_per_env_runner:g} needs "
            f"{needed:g} Ray CPUs but {where} {total:g}: lower "
            "rl.num_env_runners, give each runner a fraction "
            "(rl.num_cpus_per_env_runner=0.5) or add CPUs/nodes"
        )


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


def export_policy(algo: Any, out: Path, meta: dict[str, Any]) -> None:
    """Write ``out/policy.npz`` and ``out/policy.json`` from the learner's module."""
    from policies.features import FEATURE_NAMES
    from policies.learned import FORMAT, FORMAT_VERSION
    from rayfl.rl.module import export_arrays

    module = algo.get_module()
    arrays = export_arrays(module)
    info = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "features": list(FEATURE_NAMES),
        "hidden": [
            int(a.shape[1])
            for k, a in sorted(arrays.items())
            if k[:4] == "pi_w" and k[4:].isdigit()
        ],
        **meta,
    }
    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.savez(tmp / "policy.npz", **arrays)
    (tmp / "policy.json").write_text(json.dumps(info, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


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
        "elapsed_s": elapsed,
        "cpu_s": cpu_s,
    }


def train_policy(
    config: str | Path | Mapping[str, Any] | RunConfig | None = None,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    resume: str | Path | None = None,
    verbose: bool = True,
) -> Path:
    """Train the learned scheduler with PPO; return the run directory.

    Args:
        config: Run config with an optional ``rl`` section (defaults otherwise).
        overrides: ``key.path=value`` overrides, e.g. ``rl.iterations=5``.
        resume: A previous run directory: restore its checkpoint and continue
            up to ``rl.iterations`` (``config`` is then read from it).
        verbose: Print one line per iteration.

    Raises:
        ImportError: Without RLlib (the message says how to install it).
        FileNotFoundError: If ``resume`` has no checkpoint.
        ValueError: If the Ray session has fewer CPUs than the remote
            EnvRunners reserve (``check_env_runner_resources``).
    """
    if not rllib_available():
        raise ImportError(INSTALL_HINT)
    from rayfl.session import RaySession

    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / "checkpoint" / "rayfl_state.json").is_file():
            raise FileNotFoundError(f"{run_dir}: no checkpoint/ to resume from")
        cfg = load_config(run_dir / "config.yaml", overrides)
    else:
        cfg = load_config(config, overrides)
    if cfg.wireless is None:
        raise ValueError("rayfl train-policy needs a config with a `wireless` section")
    rl = cfg.rl or RLConfig()
    cfg = cfg.model_copy(update={"rl": rl})
    check_env_runner_resources(cfg, rl)
    session = RaySession(cfg.ray)  # RLlib puts its config in the object store
    import torch

    torch.set_num_threads(1)  # DESIGN.md: one torch thread per process
    rows: list[dict[str, Any]] = []
    try:
        check_env_runner_resources(cfg, rl)
        algo = build_algorithm(cfg, rl)
        start = 0
        if resume is not None:
            state = json.loads(
                (run_dir / "checkpoint" / "rayfl_state.json").read_text()
            )
            algo.restore_from_path(str((run_dir / "checkpoint").resolve()))
            start = int(state["iteration"])
            rows = pd.read_csv(run_dir / "progress.csv").to_dict("records")[:start]
        else:
            run_dir = make_run_dir(cfg.output.dir, f"train-{cfg.name}")
        atomic_write(run_dir / "config.yaml", lambda p: p.write_text(_yaml(cfg)))
        placement = env_runner_placement(algo)
        if placement:
            text = json.dumps(placement, indent=2) + "\n"
            atomic_write(run_dir / "env_runners.json", lambda p: p.write_text(text))
        meta = {
            "mode": rl.mode,
            "reward": rl.reward,
            "num_clients": cfg.data.num_clients,
            "num_subchannels": cfg.wireless.num_subchannels,
            "config": cfg.name,
        }
        elapsed = float(rows[-1]["elapsed_s"]) if rows else 0.0
        cpu_before = float(rows[-1].get("cpu_s", 0.0)) if rows else 0.0
        cpu_start = time.process_time()
        steps_before = _lifetime_steps(None)
        if verbose:
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
        iteration = start
        for iteration in range(start + 1, rl.iterations + 1):
            t0 = time.perf_counter()
            result = algo.train()
            seconds = time.perf_counter() - t0
            elapsed += seconds
            lifetime = _lifetime_steps(result)
            steps = lifetime - steps_before if steps_before is not None else lifetime
            steps_before = lifetime
            cpu_s = cpu_before + time.process_time() - cpu_start
            row = _row(result, iteration, seconds, steps, elapsed, cpu_s)
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
                export_policy(
                    algo, run_dir / "policy", {**meta, "iterations": iteration}
                )
            if out_of_time:
                break
        _save_checkpoint(algo, run_dir, iteration)
        export_policy(algo, run_dir / "policy", {**meta, "iterations": iteration})
        algo.stop()
        if rl.eval_episodes:
            table = evaluate_policies(
                cfg, run_dir / "policy", episodes=rl.eval_episodes
            )
            _write_evaluation(run_dir, table, verbose=verbose)
        _plot(run_dir)
    finally:
        session.close()
    return run_dir


def _lifetime_steps(result: Mapping[str, Any] | None) -> float | None:
    if result is None:
        return None
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


# ------------------------------------------------------------------ evaluation
def evaluate_policies(
    cfg: RunConfig,
    checkpoint: str | Path | None,
    *,
    episodes: int,
    baselines: Sequence[str] | None = None,
    mode: str | None = None,
    partition_seeds: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Score the learned policy and the baselines on the same episode seeds.

    Args:
        cfg: Run config (its ``rl`` section gives mode, reward and baselines).
        checkpoint: The learned policy to load (None: skip it).
        episodes: Episodes per policy, seeds 10000, 10001, ….
        baselines: Registered policies to score too (default ``rl.baselines``).
        mode: Env mode (default ``rl.mode``).
        partition_seeds: Data partitions to evaluate on (default
            ``rl.partition_seeds``, else the one of ``cfg.seed``): episode i
            runs on partition ``partition_seeds[i % len(partition_seeds)]``,
            the same for every policy. The partitions are built one at a time.

    Returns:
        One row per (policy, episode): ``partition`` (its data seed),
        ``return`` (unscaled env reward summed over the episode) and
        ``final_reward``.
    """
    import gymnasium as gym

    from envs.episode import run_episode
    from envs.scheduling import WirelessFLEnv
    from policies import make_policy
    from rayfl.compare import sort_by_policy

    rl = cfg.rl or RLConfig()
    names = list(rl.baselines if baselines is None else baselines)
    seeds = list(
        partition_seeds
        if partition_seeds is not None
        else (rl.partition_seeds or [cfg.seed])
    )
    if not seeds:
        raise ValueError("partition_seeds must name at least one partition")
    policies = [(n, {}) for n in names]
    if checkpoint is not None:
        policies.insert(0, ("learned", {"checkpoint": str(checkpoint)}))
    rows = []
    for index, partition in enumerate(seeds):
        mine = [e for e in range(episodes) if e % len(seeds) == index]
        if not mine:
            continue
        env = gym.wrappers.TimeLimit(
            WirelessFLEnv(
                cfg.model_copy(update={"seed": int(partition)}),
                mode=mode or rl.mode,
                reward=rl.reward,
            ),
            max_episode_steps=cfg.rounds,
        )
        try:
            for name, params in policies:
                policy = make_policy(name, env, **params)
                for episode in mine:
                    policy.reset(seed=episode)
                    result = run_episode(env, policy, seed=EVAL_SEED + episode)
                    rows.append(
                        {
                            "policy": name,
                            "episode": episode,
                            "partition": int(partition),
                            "return": result.total_reward,
                            "final_reward": result.final_reward,
                        }
                    )
        finally:
            env.close()
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return sort_by_policy(table, [name for name, _ in policies], then=["episode"])


def _write_evaluation(run_dir: Path, table: pd.DataFrame, *, verbose: bool) -> None:
    from rayfl.compare import markdown_table

    atomic_write(run_dir / "evaluation.csv", lambda p: table.to_csv(p, index=False))
    summary = (
        table.groupby("policy", sort=False)["return"]
        .agg(["mean", "std", "count"])
        .reset_index()
        .rename(
            columns={"mean": "return_mean", "std": "return_std", "count": "episodes"}
        )
    )
    text = markdown_table(summary)
    atomic_write(run_dir / "evaluation.md", lambda p: p.write_text(text + "\n"))
    if verbose:
        print("\nevaluation (same episode seeds, deterministic learned policy):")
        print(text)


# ------------------------------------------------------------------ plots
def _plot(run_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    progress = pd.read_csv(run_dir / "progress.csv")
    evaluation = (
        pd.read_csv(run_dir / "evaluation.csv")
        if (run_dir / "evaluation.csv").is_file()
        else None
    )
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(
        progress["iteration"], progress["episode_return_mean"], label="PPO (training)"
    )
    if evaluation is not None:
        means = evaluation.groupby("policy", sort=False)["return"].mean()
        for i, (name, value) in enumerate(means.items()):
            ax.axhline(
                value,
                ls="--",
                lw=1,
                color=f"C{i + 1}",
                label=f"{name} (eval{', deterministic' if name == 'learned' else ''})",
            )
    ax.set_xlabel("PPO iteration")
    ax.set_ylabel("mean episode return")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "learning_curve.png", dpi=120)
    plt.close(fig)
    if evaluation is not None:
        stats = evaluation.groupby("policy", sort=False)["return"].agg(["mean", "std"])
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.bar(
            stats.index,
            stats["mean"],
            yerr=stats["std"].fillna(0),
            capsize=4,
            color=[f"C{i}" for i in range(len(stats))],
        )
        ax.set_ylabel("episode return (mean ± std)")
        ax.tick_params(axis="x", rotation=30)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "evaluation.png", dpi=120)
        plt.close(fig)
