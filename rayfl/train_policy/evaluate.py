"""Evaluation and figures of a ``rayfl train-policy`` run.

:func:`evaluate_policies` scores the learned policy and the baselines on the
same episode seeds (10000 + i) and data partitions; :func:`write_evaluation`
writes ``evaluation.csv`` / ``evaluation.md``; :func:`plot_training` draws
``plots/learning_curve.png`` and ``plots/evaluation.png``. The env of the run's
topology (star, hierarchical: one policy per edge, D2D) and the policies are
found by name through
:mod:`rayfl.registry`, so this module imports neither ``envs`` nor ``policies``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.config import RunConfig
from rayfl.registry import LEARNED_POLICY, build_policy, load, topology_of
from rayfl.rl.config import RLConfig
from rayfl.rundir.results import atomic_write

__all__ = [
    "EVAL_SEED",
    "SCHEDULE_ONLY",
    "ScheduleOnly",
    "env_policy_params",
    "evaluate_policies",
    "plot_training",
    "write_evaluation",
]

EVAL_SEED = 10_000


def evaluate_policies(
    cfg: RunConfig,
    checkpoint: str | Path | None,
    *,
    episodes: int,
    baselines: Sequence[str] | None = None,
    mode: str | None = None,
    partition_seeds: Sequence[int] | None = None,
    csv: Path | None = None,
    allow_untrained: bool = False,
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
        csv: Rewritten after every episode with the rows so far (a progress
            bar counts the episodes; a failure keeps the finished rows).
        allow_untrained: Evaluate a checkpoint that sampled 0 env steps
            (``policy.json``'s ``env_steps``); refused by default.

    With ``rl.controls`` the learned policy is also scored without its
    controls (row ``learned_schedule_only``: its schedule, the configured
    controls), as the baselines run.

    Raises:
        ValueError: If ``checkpoint`` sampled 0 env steps and not
            ``allow_untrained``.

    Returns:
        One row per (policy, episode): ``partition`` (its data seed),
        ``return`` (unscaled env reward summed over the episode) and
        ``final_reward``.

    Raises:
        CompareFailed: An episode failed or was interrupted (rows kept in ``csv``).
    """
    from rayfl.compare.progress import RowLog
    from rayfl.compare.variants import sort_by_policy

    rl = cfg.rl or RLConfig()
    seeds = list(
        partition_seeds
        if partition_seeds is not None
        else (rl.partition_seeds or [cfg.seed])
    )
    if not seeds:
        raise ValueError("partition_seeds must name at least one partition")
    names = rl.baselines if baselines is None else baselines
    policies = _policy_list(names, checkpoint, rl, allow_untrained=allow_untrained)
    log = RowLog(
        [csv] if csv else [],
        total=episodes * len(policies),
        desc="evaluate policies",
        progress=cfg.output.progress,
    )
    with log.guard():
        _evaluate(cfg, seeds, episodes, policies, mode or rl.mode, log)
    table = pd.DataFrame(log.rows)
    if table.empty:
        return table
    return sort_by_policy(table, [name for name, _ in policies], then=["episode"])


def _evaluate(
    cfg: RunConfig,
    seeds: list[Any],
    episodes: int,
    policies: list[tuple[str, dict[str, Any]]],
    mode: str,
    log: Any,
) -> None:
    """Run every (partition, policy, episode) of :func:`evaluate_policies`."""
    run_episode = load("envs.episode:run_episode")
    for index, partition in enumerate(seeds):
        mine = [e for e in range(episodes) if e % len(seeds) == index]
        if not mine:
            continue
        env = _episode_env(cfg, int(partition), mode)
        try:
            for name, params in policies:
                policy = _policy_for(cfg, env, name, params)
                for episode in mine:
                    log.describe(f"{name}, episode {episode}")
                    policy.reset(seed=episode)
                    result = run_episode(env, policy, seed=EVAL_SEED + episode)
                    log.add(
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


def _policy_list(
    baselines: Sequence[str],
    checkpoint: str | Path | None,
    rl: RLConfig,
    *,
    allow_untrained: bool,
) -> list[tuple[str, dict[str, Any]]]:
    """(name, params) of every evaluated policy: the learned ones first."""
    policies: list[tuple[str, dict[str, Any]]] = [(n, {}) for n in baselines]
    if checkpoint is not None:
        if not allow_untrained:  # before any env is built
            load("policies.learned:check_trained")(checkpoint)
        learned: dict[str, Any] = {"checkpoint": str(checkpoint)}
        if allow_untrained:
            learned["allow_untrained"] = True
        if rl.controls:  # its schedule with the configured controls: who vs how
            policies.insert(0, (SCHEDULE_ONLY, learned))
        policies.insert(0, (LEARNED_POLICY, learned))
    return policies


def _episode_env(cfg: RunConfig, partition: int, mode: str) -> Any:
    """The env of the run's topology on data partition ``partition``."""
    rl = cfg.rl or RLConfig()
    plugin = topology_of(cfg)
    make_env = load(plugin.envs["single"])
    # the rl options the topology's env takes (controls, neighbor_cost), when set
    options = {k: getattr(rl, k) for k in plugin.rl_features if getattr(rl, k, None)}
    return make_env(  # truncated after cfg.rounds
        cfg.model_copy(update={"seed": partition}),
        mode=mode,
        reward=rl.reward,
        **options,
    )


def _policy_for(cfg: RunConfig, env: Any, name: str, params: dict[str, Any]) -> Any:
    """Policy ``name`` for ``env`` (the topology's ``policies`` env: one per edge…)."""
    plugin = topology_of(cfg)
    if "policies" in plugin.envs:
        return load(plugin.envs["policies"])(env.unwrapped, name, **params)
    if name == SCHEDULE_ONLY:
        return ScheduleOnly(build_policy(LEARNED_POLICY, env, params=params))
    return build_policy(name, env, params=env_policy_params(name, env, params))


def env_policy_params(name: str, env: Any, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` plus what a run would give policy ``name`` on a bare star env.

    A policy built on an env, not by a run, gets no context: the algorithm's
    ``control_names`` (which ``minmax`` needs to fill the action's
    ``controls``) are read from the env here, unless given.
    """
    from rayfl.registry import policy_parameters

    names = getattr(env.unwrapped, "control_names", None)
    if names and "control_names" in policy_parameters(name):
        return {"control_names": tuple(names), **params}
    return params


#: The row of a learned policy with controls run without them (``rl.controls``).
SCHEDULE_ONLY = "learned_schedule_only"


class ScheduleOnly:
    """A policy's actions without their ``controls`` part.

    The env then applies the configured controls, so the evaluation separates
    what a learned policy gains by whom it schedules from what it gains by the
    controls it sets (the baselines set none).
    """

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def reset(self, seed: int | None = None) -> None:
        """Reset the wrapped policy."""
        self.policy.reset(seed=seed)

    def __call__(self, obs: Any) -> Any:
        """The wrapped policy's action, ``controls`` dropped."""
        action = self.policy(obs)
        if isinstance(action, dict):
            return {k: v for k, v in action.items() if k != "controls"}
        return action


def write_evaluation(run_dir: Path, table: pd.DataFrame, *, verbose: bool) -> None:
    """Write ``evaluation.csv`` and the mean ± std table ``evaluation.md``."""
    from rayfl.compare.variants import markdown_table

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


def plot_training(run_dir: Path, reward_scale: float = 1.0) -> None:
    """Draw the learning curve and, after an evaluation, the evaluation bars.

    The training returns (PPO's, times ``rl.reward_scale``) are divided by
    ``reward_scale``, so they share the evaluation's unscaled axis.
    """
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
        progress["iteration"],
        progress["episode_return_mean"] / reward_scale,
        label="PPO (training)",
    )
    if evaluation is not None:
        means = evaluation.groupby("policy", sort=False)["return"].mean()
        for i, (name, value) in enumerate(means.items()):
            ax.axhline(
                value,
                ls="--",
                lw=1,
                color=f"C{i + 1}",
                label=f"{name} (eval{', deterministic' if name == LEARNED_POLICY else ''})",
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
