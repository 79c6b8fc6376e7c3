"""``results.csv``, ``reductions.csv`` and the report of examples/reproduce_h2fdp.py.

From the per-round ``curves.csv`` rows: one summary row per (variant, seed),
the energy / delay saved by adaptive control (the paper's Fig. 5), and
``table.md`` with ``accuracy_vs_rounds.png`` and ``energy_delay.png``. The
script re-exports ``summarise``, ``reductions`` and the constants.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

PAPER_FIG5 = {  # F-MNIST reductions of H2FDP(ctrl) vs each baseline (spec §7)
    "energy": {"h2fdp": 25.1, "hfl_dp": 46.2, "pedpfl": 71.5},
    "delay": {"h2fdp": 24.9, "hfl_dp": 43.2, "pedpfl": 51.3},
}
CONTROL_METHODS = ("h2fdp_ctrl", "h2fdp_noctrl", "hfl_dp", "pedpfl")


def _reached(hit: pd.DataFrame, tag: str) -> dict[str, float]:
    """Energy, delay and round (1-based) at the first row of ``hit`` (NaN if none)."""
    first = hit.iloc[0] if len(hit) else None
    suffix = "_low" if tag else ""
    return {
        f"energy_to_{tag}target_j": np.nan
        if first is None
        else float(first["energy_j_cum"]),
        f"delay_to_{tag}target_s": np.nan
        if first is None
        else float(first["delay_s_cum"]),
        f"round_reached{suffix}": np.nan
        if first is None
        else float(first["round"] + 1),
    }


def summarise(
    curves: pd.DataFrame, target: float, low_target: float = 0.70
) -> pd.DataFrame:
    """One row per (variant, seed) of ``curves`` (see the module docstring).

    Args:
        curves: Per-round rows as written to ``curves.csv``.
        target: Accuracy for the ``*_to_target`` columns (NaN if never reached).
        low_target: Accuracy for the ``*_to_low_target`` columns.

    Returns:
        The ``results.csv`` table, in the order the runs appear in ``curves``.
    """
    recs = []
    for (_, _), d in curves.groupby(["seed", "variant"], sort=False):
        d = d.sort_values("round")
        last = d.iloc[-1]
        evals = d.dropna(subset=["global_acc"])
        hit = evals[evals["global_acc"] >= target]
        low = evals[evals["global_acc"] >= low_target]
        first = d.iloc[0]
        s = d[["s_trusted", "s_untrusted"]].to_numpy(dtype=float)
        recs.append(
            {
                "seed": int(last["seed"]),
                "variant": last["variant"],
                "method": last["method"],
                "eps": last["eps"],
                "fraction": last["fraction"],
                "rounds": int(last["rounds"]),
                "final_acc": float(evals["global_acc"].iloc[-1]),
                "energy_j": float(last["energy_j_cum"]),
                "delay_s": float(last["delay_s_cum"]),
                **_reached(hit, ""),
                "mean_tau": float(d["tau"].mean()),
                "mean_s": float(np.nanmean(s)) if np.isfinite(s).any() else np.nan,
                "sigma_device_local_r0": float(first["sigma_device_local"]),
                "sigma_edge_local_r0": float(first["sigma_edge_local"]),
                "epsilon_max": float(last["epsilon_max"]),
                "target_acc": target,
                **_reached(low, "low_"),
                "low_target_acc": low_target,
                "wall_s": float(last["wall_s"]),
            }
        )
    res = pd.DataFrame(recs)
    res["acc_gain_vs_p0"] = np.nan
    h = res["method"] == "h2fdp"
    base = res[h & (res["fraction"] == 0)].set_index(["seed", "eps"])["final_acc"]
    keys = pd.MultiIndex.from_frame(res.loc[h, ["seed", "eps"]])
    res.loc[h, "acc_gain_vs_p0"] = (
        res.loc[h, "final_acc"].to_numpy() - base.reindex(keys).to_numpy()
    )
    return res


def reductions(results: pd.DataFrame) -> pd.DataFrame:
    """Energy / delay saved by adaptive control, per seed (the paper's Fig. 5).

    Args:
        results: The ``results.csv`` table.

    Returns:
        One row per (seed, baseline, metric, basis): ``reduction_pct`` =
        100·(1 − H2FDP(ctrl) / baseline) of the same seed, with basis ``total``
        (the whole run), ``to_target`` or ``to_low_target`` (until the target
        or the low target accuracy; NaN if either run never reaches it), next
        to the paper's F-MNIST value (which is to 75 %).
    """
    recs = []
    for seed, d in results.groupby("seed", sort=False):
        d = d.set_index("variant")
        if "h2fdp_ctrl" not in d.index:
            continue
        ctrl = d.loc["h2fdp_ctrl"]
        for base, key in (
            ("h2fdp_noctrl", "h2fdp"),
            ("hfl_dp", "hfl_dp"),
            ("pedpfl", "pedpfl"),
        ):
            if base not in d.index:
                continue
            for metric, unit in (("energy", "j"), ("delay", "s")):
                for basis, col in (
                    ("total", f"{metric}_{unit}"),
                    ("to_target", f"{metric}_to_target_{unit}"),
                    ("to_low_target", f"{metric}_to_low_target_{unit}"),
                ):
                    recs.append(
                        {
                            "seed": seed,
                            "vs": base,
                            "metric": metric,
                            "basis": basis,
                            "reduction_pct": 100 * (1 - ctrl[col] / d.loc[base, col]),
                            "paper_fmnist_pct": PAPER_FIG5[metric][key],
                        }
                    )
    return pd.DataFrame(recs)


def _md(df: pd.DataFrame, index: bool = True, fmt: str = "{:.4g}") -> str:
    """Markdown table without the optional ``tabulate`` dependency."""
    d = df.reset_index() if index else df
    cells = [
        [fmt.format(v) if isinstance(v, float) else str(v) for v in row]
        for row in d.itertuples(index=False)
    ]
    head = "| " + " | ".join(map(str, d.columns)) + " |"
    rule = "|" + "---|" * len(d.columns)
    return "\n".join([head, rule, *("| " + " | ".join(c) + " |" for c in cells)])


def _pm(values: pd.Series) -> str:
    """``mean ± std`` (sample std over seeds; the mean alone for one seed)."""
    v = values.dropna()
    if v.empty:
        return "n/a"
    if len(v) == 1:
        return f"{v.iloc[0]:.4g}"
    return f"{v.mean():.4g} ± {v.std(ddof=1):.2g}"


def write_report(
    curves: pd.DataFrame, results: pd.DataFrame, args: argparse.Namespace, out: Path
) -> None:
    """Write and print ``table.md``; draw ``accuracy_vs_rounds.png`` and ``energy_delay.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = sorted(results["seed"].unique())
    lines = [
        f"# H2FDP on Fashion-MNIST: {args.rounds} global rounds, "
        f"seeds {', '.join(map(str, seeds))} (mean ± std)\n"
    ]
    if not args.skip_sweep:
        _report_sweep(curves, results, args, out, lines, plt)
    ctrl = results[results["variant"].isin(CONTROL_METHODS)]
    if "h2fdp_ctrl" in set(ctrl["variant"]):
        lines.append(
            f"## Energy and delay (ε={args.control_eps:g}, "
            f"p_c={args.control_fraction:g}; Fig. 5)\n"
        )
        cols = [
            "final_acc",
            "energy_j",
            "delay_s",
            "energy_to_target_j",
            "delay_to_target_s",
            "round_reached",
            "mean_tau",
            "mean_s",
        ]
        by = ctrl.groupby("variant", sort=False)
        cost = pd.DataFrame({c: by[c].apply(_pm) for c in cols})
        lines.append(_md(cost) + "\n")
        mean = by[cols].mean()
        red = reductions(results)
        by_red = red.groupby(["vs", "metric", "basis"], sort=False)
        table = by_red["reduction_pct"].apply(_pm).unstack("basis")
        table["paper_F-MNIST_%"] = (
            by_red["paper_fmnist_pct"].first().unstack("basis")["total"]
        )
        lines.append("### Reductions by adaptive control (%, per seed, mean ± std)\n")
        lines.append(_md(table) + "\n")
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
        for ax, col, unit in (
            (axes[0], "energy_j", "J"),
            (axes[1], "delay_s", "s"),
        ):
            ax.bar(
                mean.index,
                mean[col],
                yerr=by[col].std(ddof=1).reindex(mean.index).fillna(0),
            )
            ax.set(ylabel=f"total {col.split('_')[0]} ({unit})")
            ax.tick_params(axis="x", rotation=20)
        fig.tight_layout()
        fig.savefig(out / "energy_delay.png", dpi=120)
    lines.append(
        "\nWall time per run (s, mean over seeds): "
        + json.dumps(
            {
                k: round(float(v), 1)
                for k, v in results.groupby("variant", sort=False)["wall_s"]
                .mean()
                .items()
            },
            ensure_ascii=False,
        )
        + "\n"
    )
    (out / "table.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _report_sweep(curves, results, args, out, lines, plt) -> None:
    """Accuracy vs rounds per ε (Figs. 4/9) and the final-accuracy table (Fig. 6)."""
    evals = curves.dropna(subset=["global_acc"])
    mean = evals.groupby(["variant", "round"], sort=False)["global_acc"].mean()
    ncols = min(3, len(args.eps))
    nrows = -(-len(args.eps) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False
    )
    for ax in axes.flat[len(args.eps) :]:
        ax.set_visible(False)
    hfl = mean.get("hfl (no DP)")
    for ax, eps in zip(axes.flat, args.eps, strict=False):
        for frac in args.fractions:
            label = f"h2fdp p={frac:g} eps={eps:g}"
            if label in mean.index.get_level_values(0):
                d = mean.loc[label]
                ax.plot(d.index + 1, d.to_numpy(), label=f"p_c={frac:g}")
        if hfl is not None:
            ax.plot(hfl.index + 1, hfl.to_numpy(), "k--", label="HFL (no DP)")
        ax.set(
            title=f"ε = {eps:g}",
            xlabel="global round k",
            ylabel="test accuracy",
            ylim=(0, 0.9),
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "accuracy_vs_rounds.png", dpi=120)
    lines.append("## Final test accuracy (trusted fraction × ε)\n")
    acc = results.groupby("variant", sort=False)["final_acc"]
    table = {
        f"p_c={frac:g}": {
            f"ε={eps:g}": _pm(acc.get_group(label)) if label in acc.groups else "n/a"
            for eps in args.eps
            for label in [f"h2fdp p={frac:g} eps={eps:g}"]
        }
        for frac in args.fractions
    }
    lines.append(_md(pd.DataFrame(table).T) + "\n")
    if "hfl (no DP)" in acc.groups:
        lines.append(f"HFL without DP: {_pm(acc.get_group('hfl (no DP)'))}\n")
