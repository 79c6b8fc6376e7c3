"""Compare policies over several seeds: mean ± std table and bar plots.

``rayfl compare CONFIG --policies a,b --seeds 0,1,2`` runs :func:`rayfl.compare.compare`
once per seed (``seed`` overridden: data partition, channel, model init and
policy draws all change) in one Ray session and writes
``<output.dir>/compare-seeds-<name>-<timestamp>/``:

| file | content |
|------|---------|
| ``table_all.csv`` | one row per (seed, policy): the columns of ``rayfl compare`` |
| ``summary.csv`` / ``summary.md`` | per policy: mean and std (ddof = 1) over seeds of each metric |
| ``plots/compare_seeds.png`` | bars of mean ± std of final accuracy, max client test loss and Jain's index |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.compare import compare, markdown_table
from rayfl.config import RunConfig, load_config, parse_overrides
from rayfl.results import atomic_write, make_run_dir
from rayfl.session import RaySession

__all__ = ["PLOTTED", "compare_seeds", "pretty_summary", "summarise"]

#: Metrics drawn in the bar plot (column of ``rayfl compare``, label).
PLOTTED = (
    ("final_acc", "final global accuracy"),
    ("max_test_loss", "max client test loss"),
    ("jain_train_loss", "Jain's index (train losses)"),
)


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Return mean and std over seeds of every numeric column, per policy.

    Example:
        >>> t = pd.DataFrame({"policy": ["a", "a"], "seed": [0, 1], "x": [1.0, 3.0]})
        >>> summarise(t).to_dict("records")
        [{'policy': 'a', 'seeds': 2, 'x_mean': 2.0, 'x_std': 1.4142135623730951}]
    """
    numeric = [
        c
        for c in table.columns
        if c not in ("policy", "seed") and pd.api.types.is_numeric_dtype(table[c])
    ]
    grouped = table.groupby("policy", sort=False)
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
) -> tuple[pd.DataFrame, Path]:
    """Run ``rayfl compare`` for each seed; return the summary and its directory.

    Raises:
        ValueError: If ``seeds`` is empty.
    """
    if not seeds:
        raise ValueError("compare --seeds needs at least one seed")
    extra = (
        dict(overrides)
        if isinstance(overrides, Mapping)
        else parse_overrides(overrides)
    )
    base = load_config(config, extra)
    out = make_run_dir(base.output.dir, f"compare-seeds-{base.name}")
    session = RaySession(base.ray)
    tables = []
    try:
        for seed in seeds:
            table, _ = compare(
                base, policies, {"seed": int(seed), "output.dir": str(out)}
            )
            tables.append(table.assign(seed=int(seed)))
    finally:
        session.close()
    full = pd.concat(tables, ignore_index=True)
    summary = summarise(full.drop(columns=["run_dir"]))
    atomic_write(out / "table_all.csv", lambda p: full.to_csv(p, index=False))
    atomic_write(out / "summary.csv", lambda p: summary.to_csv(p, index=False))
    text = markdown_table(pretty_summary(summary))
    atomic_write(out / "summary.md", lambda p: p.write_text(text + "\n"))
    _plot(summary, out / "plots" / "compare_seeds.png")
    return summary, out


def pretty_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Return ``metric: "mean ± std"`` columns for the markdown table."""
    out = summary[["policy", "seeds"]].copy()
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

    metrics = [(c, label) for c, label in PLOTTED if f"{c}_mean" in summary]
    if not metrics:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.6))
    axes = [axes] if len(metrics) == 1 else list(axes)
    colors = [f"C{i}" for i in range(len(summary))]
    for ax, (column, label) in zip(axes, metrics, strict=True):
        ax.bar(
            summary["policy"],
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
