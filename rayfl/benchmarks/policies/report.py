"""The files ``rayfl bench policies`` writes: CSVs, Markdown tables, plots.

See :mod:`rayfl.benchmarks.policies` for the list; the statistics are
:mod:`rayfl.benchmarks.policies.stats`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rayfl.benchmarks.policies.stats import KPIS, summarise, surrogate_check
from rayfl.registry import LEARNED_POLICY
from rayfl.rundir.results import atomic_write

__all__ = ["merge_outputs", "plot_scenario", "pretty", "pretty_check", "write_outputs"]


def write_outputs(
    episodes: pd.DataFrame, runs: pd.DataFrame, out: Path
) -> pd.DataFrame:
    """Write the CSVs, Markdown tables and plots; return the summary."""
    from rayfl.compare.variants import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(episodes)
    check = surrogate_check(episodes)
    for name, table in (("episodes", episodes), ("summary", summary), ("runs", runs)):
        _write_csv(out / f"{name}.csv", table)
    text = markdown_table(pretty(summary))
    atomic_write(out / "summary.md", lambda p: p.write_text(text + "\n"))
    if not check.empty:
        atomic_write(
            out / "surrogate_check.csv", lambda p: check.to_csv(p, index=False)
        )
        check_text = markdown_table(pretty_check(check))
        atomic_write(
            out / "surrogate_check.md", lambda p: p.write_text(check_text + "\n")
        )
    for scenario, group in summary.groupby("scenario", sort=False):
        plot_scenario(group, out / f"{scenario}.png")
    return summary


def merge_outputs(sources: list[str], out: Path) -> pd.DataFrame:
    """Write the outputs of the union of earlier runs' ``episodes.csv``/``runs.csv``.

    Each source is an ``--out`` directory, optionally ``DIR:MODE`` to take
    only that mode's episodes (e.g. the emulate episodes of one run with the
    surrogate episodes of another: the emulation does not read the
    surrogate's constants), or seed chunks of one study. ``merged_from.txt``
    names the sources.

    Raises:
        ValueError: If a source lacks its CSVs, names an unknown mode, or two
            sources have the same (scenario, mode, policy, seed) episode.
    """
    episodes, runs = [], []
    for source in sources:
        path, _, mode = source.partition(":")
        d = Path(path)
        if not (d / "episodes.csv").is_file() or not (d / "runs.csv").is_file():
            raise ValueError(f"--merge: no episodes.csv and runs.csv in {d}")
        if mode not in ("", "surrogate", "emulate"):
            raise ValueError(
                f"--merge: DIR:MODE takes mode surrogate or emulate, got {mode!r}"
            )
        e, r = pd.read_csv(d / "episodes.csv"), pd.read_csv(d / "runs.csv")
        episodes.append(e[e["mode"] == mode] if mode else e)
        runs.append(r[r["mode"] == mode] if mode else r)
    if not sources:
        raise ValueError("--merge: give at least one directory")
    merged = pd.concat(episodes, ignore_index=True)
    key = ["scenario", "mode", "policy", "seed"]
    twice = merged[merged.duplicated(key)]
    if not twice.empty:
        first = twice.iloc[0]
        raise ValueError(
            "--merge: two sources have the episode "
            f"{dict(zip(key, (first[k] for k in key), strict=True))}"
        )
    summary = write_outputs(merged, pd.concat(runs, ignore_index=True), out)
    names = "\n".join(sources)
    atomic_write(out / "merged_from.txt", lambda p: p.write_text(names + "\n"))
    return summary


def _write_csv(path: Path, table: pd.DataFrame) -> None:
    atomic_write(path, lambda p: table.to_csv(p, index=False))


def _pm(mean: float, low: float, high: float, digits: int = 3) -> str:
    if not np.isfinite(mean):
        return "–"
    if not np.isfinite(low):
        return f"{mean:.{digits}g}"
    return f"{mean:.{digits}g} ± {(high - low) / 2:.2g}"


def pretty(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as a readable table: mean ± CI half-width, wins/losses/ties."""
    table = summary[["scenario", "mode", "policy", "seeds"]].copy()
    for kpi in ("return", *KPIS):
        table[kpi] = [
            _pm(m, lo, hi)
            for m, lo, hi in zip(
                summary[f"{kpi}_mean"],
                summary[f"{kpi}_ci_low"],
                summary[f"{kpi}_ci_high"],
                strict=True,
            )
        ]
    table["vs best heuristic"] = [
        f"{m:+.3g} [{lo:+.2g}, {hi:+.2g}]" if np.isfinite(lo) else f"{m:+.3g}"
        for m, lo, hi in zip(
            summary["diff_vs_best_mean"],
            summary["diff_vs_best_ci_low"],
            summary["diff_vs_best_ci_high"],
            strict=True,
        )
    ]
    table["W/L/T"] = [
        f"{w}/{lo}/{t}"
        for w, lo, t in zip(
            summary["wins_vs_best"],
            summary["losses_vs_best"],
            summary["ties_vs_best"],
            strict=True,
        )
    ]
    table["best"] = summary["best_heuristic"]
    return table


def pretty_check(check: pd.DataFrame) -> pd.DataFrame:
    """The surrogate check as a readable table."""
    table = check[["scenario", "policy", "reference"]].copy()
    table["return surrogate"] = check["return_surrogate"].map("{:.3f}".format)
    table["return emulate"] = check["return_emulate"].map("{:.3f}".format)
    table["error"] = check["return_error"].map("{:+.3f}".format)
    for mode in ("surrogate", "emulate"):
        table[f"diff {mode} [95% CI]"] = [
            f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            for m, lo, hi in zip(
                check[f"diff_{mode}"],
                check[f"diff_{mode}_ci_low"],
                check[f"diff_{mode}_ci_high"],
                strict=True,
            )
        ]
    table["same sign"] = check["same_sign"]
    table["spearman"] = check["spearman"].map("{:.2f}".format)
    table["fit"] = check["fit_for_training"]
    return table


def plot_scenario(summary: pd.DataFrame, path: Path) -> None:
    """Bars of each policy's mean return with its 95% CI, one panel per mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(summary["mode"].unique())
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes, strict=True):
        sub = summary[summary["mode"] == mode]
        mean = sub["return_mean"].to_numpy()
        err = np.nan_to_num((sub["return_ci_high"] - sub["return_ci_low"]) / 2)
        colors = ["C3" if p.startswith(LEARNED_POLICY) else "C0" for p in sub["policy"]]
        ax.bar(sub["policy"], mean, yerr=err, capsize=3, color=colors)
        ax.set_title(f"{sub['scenario'].iloc[0]} ({mode})")
        ax.set_ylabel("episode return (mean ± 95% CI)")
        ax.tick_params(axis="x", rotation=60)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
