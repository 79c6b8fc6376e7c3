"""Compare policies over several seeds: mean ± std table and bar plots.

``rayfl compare CONFIG --policies a,b --seeds 0,1,2`` runs :func:`rayfl.compare.variants.compare`
once per seed (``seed`` overridden: data partition, channel, model init and
policy draws all change) in one Ray session and writes
``<output.dir>/compare-seeds-<name>-<timestamp>/``:

| file | content |
|------|---------|
| ``table_all.csv`` | one row per (seed, policy): the columns of ``rayfl compare`` |
| ``summary.csv`` / ``summary.md`` | per policy: mean and std (ddof = 1) over seeds of each metric |
| ``plots/compare_seeds.png`` | bars of mean ± std of final accuracy, max client test loss and Jain's index |

``--fast`` (:func:`fast_table`) gives the same table columns without full runs:
per seed it builds ONE FL system (the scheduling env, emulate mode) and runs
every policy on it in turn, restarting the live actors between policies
(``Engine.restart``, ≈ 0.05 s) instead of starting a run per policy (≈ 15 s
of actor start-up and data shipping each). Each policy episode is the run
``rayfl run`` makes with that seed — same data partition, run seed, model
init, channel and noise draws — so the final metrics are equal (a test checks
this against full runs); what it does not write is each run's directory
(metrics.parquet, checkpoints, plots). Use it to evaluate schedulers over tens
of seeds; it needs a ``wireless`` section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.cluster.session import RaySession
from rayfl.compare.progress import RowLog
from rayfl.compare.variants import (
    compare,
    compare_algorithms,
    load_base,
    markdown_table,
)
from rayfl.config import RunConfig, load_config
from rayfl.rundir.results import atomic_write, make_run_dir

__all__ = [
    "PLOTTED",
    "PLOTTED_ALGORITHMS",
    "compare_seeds",
    "fast_table",
    "pretty_summary",
    "summarise",
]

#: Metrics drawn in the bar plot (column of ``rayfl compare``, label).
PLOTTED = (
    ("final_acc", "final global accuracy"),
    ("max_test_loss", "max client test loss"),
    ("jain_train_loss", "Jain's index (train losses)"),
)
#: Metrics drawn for ``--algorithms``: the clients' personalized test accuracy.
PLOTTED_ALGORITHMS = (
    ("mean_personal_acc", "mean personalized accuracy"),
    ("worst10_personal_acc", "worst-10 % personalized accuracy"),
    ("jain_personal_acc", "Jain's index (personalized accuracy)"),
)


def _label(table: pd.DataFrame) -> str:
    """The column naming a compared variant: ``policy`` or ``algorithm``."""
    return "policy" if "policy" in table.columns else "algorithm"


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Return mean and std over seeds of every numeric column, per policy.

    The variants are named by the ``policy`` column, or by ``algorithm`` when
    the table has no ``policy`` column (``rayfl compare --algorithms``).

    Example:
        >>> t = pd.DataFrame({"policy": ["a", "a"], "seed": [0, 1], "x": [1.0, 3.0]})
        >>> summarise(t).to_dict("records")
        [{'policy': 'a', 'seeds': 2, 'x_mean': 2.0, 'x_std': 1.4142135623730951}]
    """
    numeric = [
        c
        for c in table.columns
        if c not in ("policy", "algorithm", "seed")
        and pd.api.types.is_numeric_dtype(table[c])
    ]
    grouped = table.groupby(_label(table), sort=False)
    out = grouped["seed"].count().rename("seeds").to_frame()
    for column in numeric:
        out[f"{column}_mean"] = grouped[column].mean()
        out[f"{column}_std"] = grouped[column].std(ddof=1)
    return out.reset_index()


def compare_seeds(
    config: str | Path | Mapping[str, Any] | RunConfig,
    policies: Sequence[str],
    seeds: Sequence[int],
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    fast: bool = False,
    algorithms: bool = False,
    csv: str | Path | None = None,
) -> tuple[pd.DataFrame, Path]:
    """Run ``rayfl compare`` for each seed; return the summary and its directory.

    Args:
        config: The run config (a ``wireless`` section for ``fast``).
        policies: ``--policies`` entries (``name[:key=value...]``), or
            ``algorithm.kind`` names with ``algorithms``.
        seeds: Config seeds, one comparison each.
        overrides: Config overrides for every run.
        fast: Run the policies on one FL system per seed (:func:`fast_table`)
            instead of one full run per (policy, seed).
        algorithms: Compare FL algorithms (:func:`rayfl.compare.variants.compare_algorithms`,
            ``rayfl compare --algorithms``) instead of policies.
        csv: Also write the per-seed table, without run directories, here.

    ``table_all.csv`` (and ``csv``) hold every finished (seed, policy) row as
    soon as it finishes, and a progress bar counts the runs.

    Raises:
        ValueError: If ``seeds`` is empty, or for ``fast`` with ``algorithms``.
        CompareFailed: A run failed or was interrupted (the rows done are kept).
    """
    if not seeds:
        raise ValueError("compare --seeds needs at least one seed")
    if fast and algorithms:
        raise ValueError("compare --fast compares policies, not --algorithms")
    base = load_base(config, overrides)
    out = make_run_dir(base.output.dir, f"compare-seeds-{base.name}")
    plain = [Path(csv)] if csv else []
    log = RowLog(
        [out / "table_all.csv", *plain],
        total=len(seeds) * len(policies),
        desc=f"compare {base.name}",
        progress=base.output.progress,
        without_run_dir=plain,
    )
    session = RaySession(base.ray)
    tables = []
    try:
        with log.guard():
            if fast:
                tables.append(fast_table(base, policies, seeds, log=log))
            else:
                run = compare_algorithms if algorithms else compare
                for seed in seeds:
                    log.context = {"seed": int(seed)}
                    table, _ = run(
                        base,
                        policies,
                        {"seed": int(seed), "output.dir": str(out)},
                        log=log,
                    )
                    tables.append(table.assign(seed=int(seed)))
    finally:
        session.close()
    full = pd.concat(tables, ignore_index=True)
    summary = summarise(full.drop(columns=["run_dir"], errors="ignore"))
    atomic_write(out / "table_all.csv", lambda p: full.to_csv(p, index=False))
    for path in plain:
        atomic_write(
            path,
            lambda p: full.drop(columns=["run_dir"], errors="ignore").to_csv(
                p, index=False
            ),
        )
    atomic_write(out / "summary.csv", lambda p: summary.to_csv(p, index=False))
    text = markdown_table(pretty_summary(summary))
    atomic_write(out / "summary.md", lambda p: p.write_text(text + "\n"))
    _plot(summary, out / "plots" / "compare_seeds.png")
    return summary, out


def fast_table(
    base: RunConfig,
    policies: Sequence[str],
    seeds: Sequence[int],
    *,
    log: RowLog | None = None,
) -> pd.DataFrame:
    """Final metrics of every (policy, seed) from one FL system per seed.

    Args:
        base: The run config (needs ``wireless``); ``seed`` is set per seed.
        policies: ``--policies`` entries (``name[:key=value...]``).
        seeds: Config seeds (data partition and run seed, as in full runs).
        log: Takes each row as it finishes and shows the progress (default: a
            bar only).

    Returns:
        One row per (seed, policy) with the columns of ``rayfl compare`` except
        ``run_dir``, plus ``seed``.

    Raises:
        ValueError: Without a ``wireless`` section, or for an unknown policy.
    """
    from rayfl.compare.variants import sort_by_policy
    from rayfl.registry import load, topology_of

    if base.wireless is None:
        raise ValueError(
            "compare --fast drives policies through the scheduling env: "
            "the config needs a `wireless` section"
        )
    specs = _fast_specs(base, policies)
    labels = [label for label, *_ in specs]
    own = log is None
    if log is None:
        log = RowLog(
            [],
            total=len(seeds) * len(specs),
            desc="compare --fast",
            progress=base.output.progress,
        )
    first = len(log.rows)
    for seed in seeds:
        log.context = {"seed": int(seed)}
        cfg = base.model_copy(update={"seed": int(seed)})
        make_env = load(topology_of(cfg).envs["single"])
        for controls in sorted({c for *_, c in specs}):
            env = make_env(cfg, mode="emulate", controls=controls)
            try:
                for label, extra, needs in specs:
                    if needs != controls:
                        continue
                    log.describe(f"seed {seed}, {label}")
                    row = _fast_episode(env, load_config(cfg, extra), int(seed))
                    log.add({"policy": label, **row})
            finally:
                env.close()
    if own:
        log.close()
    rows = pd.DataFrame(log.rows[first:])
    return sort_by_policy(rows, labels, first=["seed"])


def _fast_specs(
    base: RunConfig, policies: Sequence[str]
) -> list[tuple[str, dict[str, Any], bool]]:
    """Return (label as in ``compare``, its overrides, needs controls) per policy."""
    from rayfl.compare.variants import check_policy_builds, policy_variant
    from rayfl.star.deciders import policy_needs_controls

    variants = [(spec, *policy_variant(base, spec)) for spec in policies]
    names = [name for _, name, _ in variants]
    specs = []
    for spec, name, extra in variants:
        label = spec if names.count(name) > 1 else name
        cfg = load_config(base, extra)
        check_policy_builds(cfg)  # every policy, before the first episode
        specs.append((label, extra, policy_needs_controls(cfg)))
    return specs


def _fast_episode(env: Any, cfg: RunConfig, seed: int) -> dict[str, Any]:
    """Run one episode of ``cfg``'s policy on ``env``; return its final metrics."""
    import numpy as np

    from rayfl.metrics import round_summary
    from rayfl.registry import load
    from rayfl.runner import env_policy, round_costs

    # reset first: env_policy binds the reset env's FL system
    obs, _ = env.reset(seed=seed)
    policy = env_policy(cfg, env)
    totals = dict.fromkeys(("latency_s", "energy_j", "bits"), 0.0)

    def add_costs(stepped: Any) -> None:
        out = stepped.last_outcome
        assert out is not None
        for key, value in round_costs(out.rows, wireless=True).items():
            totals[key] += value

    run_episode = load("envs.episode:run_episode")
    run_episode(env, policy, first_obs=obs, max_steps=cfg.rounds, on_step=add_costs)
    out = env.last_outcome
    assert out is not None
    final = round_summary(out.evals or [], env.backend.system.num_test)
    eps, _ = env.backend.uplink.epsilons(evaluate=True)
    return {
        "final_acc": final.get("eval_acc"),
        "max_test_loss": final.get("eval_max_loss"),
        "jain_train_loss": final.get("jain_train_loss"),
        "total_latency_s": totals["latency_s"],
        "total_energy_j": totals["energy_j"],
        "total_bits": totals["bits"],
        "epsilon_max": None if eps is None else float(np.max(eps)),
    }


def pretty_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Return ``metric: "mean ± std"`` columns for the markdown table."""
    out = summary[[_label(summary), "seeds"]].copy()
    for column in summary.columns:
        if column.endswith("_mean"):
            name = column[: -len("_mean")]
            std = summary[f"{name}_std"].fillna(0.0)
            out[name] = [
                f"{m:.4g} ± {s:.2g}" for m, s in zip(summary[column], std, strict=True)
            ]
    return out


def _plot(summary: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plotted = PLOTTED if _label(summary) == "policy" else PLOTTED_ALGORITHMS
    metrics = [(c, label) for c, label in plotted if f"{c}_mean" in summary]
    if not metrics:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.6))
    axes = [axes] if len(metrics) == 1 else list(axes)
    colors = [f"C{i}" for i in range(len(summary))]
    for ax, (column, label) in zip(axes, metrics, strict=True):
        ax.bar(
            summary[_label(summary)],
            summary[f"{column}_mean"],
            yerr=summary[f"{column}_std"].fillna(0.0),
            capsize=4,
            color=colors,
        )
        ax.set_title(f"{label}\n(mean ± std, {int(summary['seeds'].max())} seeds)")
        ax.tick_params(axis="x", rotation=40)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
