"""Reproduce DP-SparFL's scheduler comparison and λ (V) sweep (spec seed_002 §7).

Runs ``examples/sparse_dp_lyapunov.yaml`` (real Fashion-MNIST, 20 clients,
Dirichlet(0.2), N = 5 channels) under four schedulers — ``lyapunov`` (DP-SparFL),
``random``, ``round_robin`` and ``delay_min``, the baselines with s = 1 — and
DP-SparFL over a log grid of V; writes a table (markdown + CSV) and plots of
accuracy vs rounds, cumulative delay vs rounds, accuracy vs cumulative delay and
final accuracy vs V.

Usage (the defaults are what the README reports; shrink them on a busy machine):

    python examples/reproduce_sparse_dp.py --rounds 40 --seeds 0 \
        --v-grid 5,50,500 --v-rounds 25 --out runs/reproduce_sparse_dp
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

CONFIG = Path(__file__).with_name("sparse_dp_lyapunov.yaml")


def model_dim(cfg: Any) -> int:
    """Return abs(w) of the configured model on 28×28 inputs, 10 classes."""
    from rayfl.learning.models import ModelSpec, build_model

    module = build_model(
        cfg.model.kind, input_shape=(1, 28, 28), num_classes=10, hidden=cfg.model.hidden
    )
    return ModelSpec.of(module).dim


def policy_overrides(policy: str, dim: int) -> dict[str, Any]:
    """Config overrides for one scheduler (baselines: s = 1, the same link model)."""
    out: dict[str, Any] = {"scheduler.policy": policy}
    if policy == "delay_min":
        # Same link model as the engine: dense 32·abs(w) up and down; the compute
        # term τ·abs(b)·Φ/f (≈ 0.03 s) is left out of its ranking.
        out["scheduler.params"] = {"payload_bits": 32 * dim, "local_steps": 0}
    elif policy != "lyapunov":
        out["scheduler.params"] = {}
    return out


def run_one(
    overrides: dict[str, Any], rounds: int, seed: int, out: Path
) -> pd.DataFrame:
    """Run one config and return its per-round table with cumulative delay."""
    import rayfl

    result = rayfl.run(
        str(CONFIG),
        {**overrides, "rounds": rounds, "seed": seed, "output.dir": str(out)},
    )
    rounds_df = result.rounds.copy()
    rounds_df["cum_delay_s"] = rounds_df["latency_s"].cumsum()
    metrics = result.metrics
    sched = metrics[metrics["scheduled"]]
    rounds_df["mean_bits"] = sched.groupby("round")["bits"].mean().values
    rounds_df["run_dir"] = str(result.run_dir)
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    rounds_df.attrs["privacy"] = summary.get("privacy", {})
    return rounds_df


def acc_at_delay(df: pd.DataFrame, budget_s: float) -> float:
    """Best accuracy reached before the cumulative delay passes ``budget_s``."""
    within = df[df["cum_delay_s"] <= budget_s + 1e-9]
    return float(within["global_acc"].max()) if len(within) else float("nan")


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and the V sweep; write table and plots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", default="0", help="comma list, e.g. 0,1,2")
    parser.add_argument("--policies", default="lyapunov,random,round_robin,delay_min")
    parser.add_argument("--v-grid", default="5,50,500", help="'' skips the sweep")
    parser.add_argument("--v-rounds", type=int, default=25)
    parser.add_argument("--out", default="runs/reproduce_sparse_dp")
    parser.add_argument(
        "--ray-address", default=None, help="join a running Ray session ('auto')"
    )
    args = parser.parse_args(argv)

    import ray

    from rayfl.config import load_config

    if args.ray_address:
        ray.init(address=args.ray_address, logging_level="ERROR")
    elif not ray.is_initialized():  # one session for every run (faster start-up)
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dim = model_dim(load_config(str(CONFIG)))
    seeds = [int(s) for s in args.seeds.split(",") if s]
    frames = []
    for policy in [p for p in args.policies.split(",") if p]:
        for seed in seeds:
            df = run_one(policy_overrides(policy, dim), args.rounds, seed, out)
            df["policy"], df["seed"] = policy, seed
            frames.append(df)
            print(policy, seed, "final acc", df["global_acc"].iloc[-1], flush=True)
    runs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frames:
        runs.to_csv(out / "rounds.csv", index=False)
    sweep = []
    for v in [float(x) for x in args.v_grid.split(",") if x]:
        for seed in seeds:
            df = run_one(
                {"scheduler.policy": "lyapunov", "scheduler.params": {"V": v}},
                args.v_rounds,
                seed,
                out,
            )
            sweep.append(
                {
                    "V": v,
                    "seed": seed,
                    "final_acc": float(df["global_acc"].iloc[-1]),
                    "best_acc": float(df["global_acc"].max()),
                    "cum_delay_s": float(df["cum_delay_s"].iloc[-1]),
                    "mean_bits": float(df["mean_bits"].mean()),
                }
            )
            print("V", v, seed, sweep[-1], flush=True)
    sweep_df = pd.DataFrame(sweep)
    if len(sweep_df):
        sweep_df.to_csv(out / "v_sweep.csv", index=False)
    if frames:
        write_table(runs, sweep_df, out, dim)
        plot(runs, sweep_df, out)
    elif len(sweep_df):
        (out / "table.md").write_text(markdown(sweep_df) + "\n")
        print(markdown(sweep_df))
        plot_sweep(sweep_df, out)


def write_table(runs: pd.DataFrame, sweep: pd.DataFrame, out: Path, dim: int) -> None:
    """Markdown table: final accuracy, cumulative delay, accuracy at equal delay."""
    ends = runs.groupby(["policy", "seed"])["cum_delay_s"].max()
    budget = float(ends.min())  # the smallest total delay of any run
    rows = []
    for (policy, seed), df in runs.groupby(["policy", "seed"], sort=False):
        rows.append(
            {
                "policy": policy,
                "seed": seed,
                "rounds": len(df),
                "final_acc": df["global_acc"].iloc[-1],
                "best_acc": df["global_acc"].max(),
                f"acc_at_{budget:.0f}s": acc_at_delay(df, budget),
                "cum_delay_s": df["cum_delay_s"].iloc[-1],
                "mean_round_s": df["latency_s"].mean(),
                "mean_upload_bits": df["mean_bits"].mean(),
                "dense_bits": 32 * dim,
            }
        )
    table = pd.DataFrame(rows)
    table.to_csv(out / "table.csv", index=False)
    summary = equal_delay_summary(runs, budget)
    summary.to_csv(out / "equal_delay.csv", index=False)
    text = (
        markdown(table) + "\n\nMean over seeds (± sample std):\n\n" + markdown(summary)
    )
    if len(sweep):
        text += "\n\n" + markdown(sweep)
    (out / "table.md").write_text(text + "\n")
    print(text)


def equal_delay_summary(runs: pd.DataFrame, budget: float) -> pd.DataFrame:
    """Per policy, mean ± std over seeds of the accuracy at equal cumulative delay.

    The budgets are 25/50/75/100% of ``budget`` (the smallest total delay of any
    run), so every run is compared on the same delay axis, as in the paper's
    "accuracy vs cumulative delay" claim.
    """
    fractions = (0.25, 0.5, 0.75, 1.0)
    rows = []
    for policy, by_policy in runs.groupby("policy", sort=False):
        row: dict[str, Any] = {"policy": policy, "seeds": by_policy["seed"].nunique()}
        for f in fractions:
            accs = [acc_at_delay(df, f * budget) for _, df in by_policy.groupby("seed")]
            row[f"acc@{f * budget:.0f}s"] = (
                f"{np.nanmean(accs):.4f} ± {np.nanstd(accs, ddof=1):.4f}"
                if len(accs) > 1
                else f"{accs[0]:.4f}"
            )
        finals = by_policy.groupby("seed")["global_acc"].last()
        delays = by_policy.groupby("seed")["cum_delay_s"].last()
        row["final_acc"] = f"{finals.mean():.4f}"
        row["total_delay_s"] = f"{delays.mean():.1f}"
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame) -> str:
    """Render a DataFrame as a markdown table (4 significant digits)."""

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float | np.floating) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |"]
    lines.append("|" + "---|" * len(df.columns))
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.values]
    return "\n".join(lines)


def plot(runs: pd.DataFrame, sweep: pd.DataFrame, out: Path) -> None:
    """Seed means: accuracy (± std) and delay vs rounds, accuracy at equal delay, vs V."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4 if len(sweep) else 3, figsize=(18, 4))
    ends = runs.groupby(["policy", "seed"])["cum_delay_s"].max()
    starts = runs.groupby(["policy", "seed"])["cum_delay_s"].min()
    grid = np.linspace(float(starts.max()), float(ends.min()), 60)
    for policy, by_policy in runs.groupby("policy", sort=False):
        seeds = by_policy["seed"].nunique()
        label = f"{policy} ({seeds} seed{'s' if seeds > 1 else ''})"
        per_round = by_policy.groupby("round")[["global_acc", "cum_delay_s"]]
        mean, std = per_round.mean(), per_round.std(ddof=1).fillna(0.0)
        (line,) = axes[0].plot(mean.index, mean["global_acc"], label=label)
        axes[0].fill_between(
            mean.index,
            mean["global_acc"] - std["global_acc"],
            mean["global_acc"] + std["global_acc"],
            color=line.get_color(),
            alpha=0.15,
        )
        axes[1].plot(mean.index, mean["cum_delay_s"], color=line.get_color())
        # best accuracy reached within each delay budget, averaged over seeds
        curves = [
            [acc_at_delay(df, b) for b in grid] for _, df in by_policy.groupby("seed")
        ]
        axes[2].plot(grid, np.nanmean(curves, axis=0), color=line.get_color())
    axes[0].set(xlabel="round", ylabel="test accuracy", title="accuracy vs rounds")
    axes[1].set(xlabel="round", ylabel="cumulative delay [s]", title="delay vs rounds")
    axes[2].set(
        xlabel="cumulative delay budget [s]",
        ylabel="best accuracy within budget",
        title="accuracy at equal delay (seed mean)",
    )
    axes[0].legend(fontsize=7)
    if len(sweep):
        mean = sweep.groupby("V")["final_acc"].mean()
        axes[3].semilogx(mean.index, mean.values, "o-")
        axes[3].set(xlabel="V (λ)", ylabel="final accuracy", title="accuracy vs V")
    fig.tight_layout()
    fig.savefig(out / "sparse_dp.png", dpi=120)
    print("plots:", out / "sparse_dp.png", np.nan if runs.empty else "")


def plot_sweep(sweep: pd.DataFrame, out: Path) -> None:
    """Final accuracy, cumulative delay and mean upload size vs V (seed means)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean = sweep.groupby("V")[["final_acc", "best_acc", "cum_delay_s", "mean_bits"]]
    mean = mean.mean()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    axes[0].semilogx(mean.index, mean["final_acc"], "o-", label="final")
    axes[0].semilogx(mean.index, mean["best_acc"], "s--", label="best")
    axes[0].set(xlabel="V (λ)", ylabel="test accuracy", title="accuracy vs V")
    axes[0].legend(fontsize=8)
    axes[1].semilogx(mean.index, mean["cum_delay_s"], "o-")
    axes[1].set(xlabel="V (λ)", ylabel="cumulative delay [s]", title="delay vs V")
    axes[2].semilogx(mean.index, mean["mean_bits"] / 1e3, "o-")
    axes[2].set(xlabel="V (λ)", ylabel="mean upload [kbit]", title="upload size vs V")
    fig.tight_layout()
    fig.savefig(out / "v_sweep.png", dpi=120)
    plt.close(fig)
    print("plots:", out / "v_sweep.png")


if __name__ == "__main__":
    main()
