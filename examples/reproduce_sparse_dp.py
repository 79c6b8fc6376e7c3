"""Reproduce DP-SparFL's scheduler comparison and λ (V) sweep.

Wei et al., "Gradient Sparsification for Efficient Wireless Federated Learning
with Differential Privacy" (arXiv:2304.04164). Runs
``examples/sparse_dp_lyapunov.yaml`` (real Fashion-MNIST, 20 clients,
Dirichlet(0.2), N = 5 channels) under four schedulers — ``lyapunov``
(DP-SparFL), ``random``, ``round_robin`` and ``delay_min``, the baselines with
s = 1 — and DP-SparFL over a log grid of V.

Outputs in ``--out`` (default ``docs/sparse_dp``):

- ``rounds.csv``: one row per (policy, seed, round): accuracy, round delay,
  cumulative delay, mean upload bits, and the run's ``wall_s``.
- ``runs.csv``: one row per (policy, seed): final / best accuracy, total delay,
  mean upload, the largest ε/ε_i of any client, ``wall_s``, and the best
  accuracy reached before the cumulative delay passes ¼, ½, ¾ and all of the
  budget B = the smallest total delay of any run (``acc_b25`` ... ``acc_b100``,
  ``budget_s`` = B): the paper's "accuracy at equal delay".
- ``v_sweep.csv``: one row per (V, seed) of the sweep.
- ``sparse_dp.png`` (seed means vs rounds and vs delay) and ``v_sweep.png``.

Runs already in ``rounds.csv`` / ``v_sweep.csv`` are skipped, so an interrupted
comparison resumes where it stopped (delete the CSVs to start over).

Usage (what docs/reproductions/sparse_dp.md reports):

    python examples/reproduce_sparse_dp.py --rounds 40 --seeds 0,1,2 --v-grid ""
    python examples/reproduce_sparse_dp.py --policies "" --seeds 0,1,2 \
        --v-grid 0.5,5,50,500,5000 --v-rounds 25

Shrink it on a busy machine: ``--rounds 5 --seeds 0 --v-grid "" --out /tmp/sdp``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rayfl.compare.progress import progress_bar, script_main

CONFIG = Path(__file__).with_name("sparse_dp_lyapunov.yaml")


def model_dim(cfg: Any) -> int:
    """Return abs(w) of the configured model on 28×28 inputs, 10 classes."""
    from rayfl.learning.models import ModelSpec, build_model

    module = build_model(
        cfg.model.kind, input_shape=(1, 28, 28), num_classes=10, hidden=cfg.model.hidden
    )
    return ModelSpec.of(module).dim


def policy_overrides(policy: str) -> dict[str, Any]:
    """Config overrides for one scheduler (baselines: s = 1, the same link model).

    ``delay_min`` takes the run's latency model from its context: dense
    32·abs(w) up and down, the wireless section's link, the compute term
    τ·abs(b)·Φ/f (the same for every client, so it does not change the ranking).
    """
    out: dict[str, Any] = {"scheduler.policy": policy}
    if policy != "lyapunov":
        out["scheduler.params"] = {}
    return out


def run_one(
    overrides: dict[str, Any], rounds: int, seed: int, out: Path, num_cpus: int
) -> pd.DataFrame:
    """Run one config and return its per-round table with cumulative delay.

    ``attrs["privacy"]`` holds the run's privacy block (summary.json) and
    ``attrs["wall_s"]`` its wall time.
    """
    import rayfl

    started = time.perf_counter()
    result = rayfl.run(
        str(CONFIG),
        {
            **overrides,
            "rounds": rounds,
            "seed": seed,
            "output.dir": str(out),
            "ray.num_cpus": num_cpus,
        },
    )
    rounds_df = result.rounds.copy()
    rounds_df["cum_delay_s"] = rounds_df["latency_s"].cumsum()
    metrics = result.metrics
    sched = metrics[metrics["scheduled"]]
    rounds_df["mean_bits"] = sched.groupby("round")["bits"].mean().values
    rounds_df["run_dir"] = str(result.run_dir)
    summary = json.loads((Path(result.run_dir) / "summary.json").read_text())
    rounds_df.attrs["privacy"] = summary.get("privacy", {})
    rounds_df.attrs["wall_s"] = round(time.perf_counter() - started, 1)
    return rounds_df


def max_budget_ratio(privacy: dict[str, Any]) -> float:
    """Largest ε/ε_i over clients (≤ 1: every client stayed within its budget)."""
    eps = privacy.get("epsilon_per_client")
    budgets = privacy.get("epsilon_budget_per_client")
    if not eps or not budgets:
        return float("nan")
    return float(np.max(np.asarray(eps) / np.asarray(budgets)))


def acc_at_delay(df: pd.DataFrame, budget_s: float) -> float:
    """Best accuracy reached before the cumulative delay passes ``budget_s``."""
    within = df[df["cum_delay_s"] <= budget_s + 1e-9]
    return float(within["global_acc"].max()) if len(within) else float("nan")


def _parse_args(
    argv: list[str] | None,
) -> tuple[argparse.Namespace, list[str], list[int], list[float]]:
    """Return the flags and the policies, seeds and V grid they list."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seeds", default="0,1,2", help="comma list, e.g. 0,1,2")
    parser.add_argument("--policies", default="lyapunov,random,round_robin,delay_min")
    parser.add_argument("--v-grid", default="5,50,500", help="'' skips the sweep")
    parser.add_argument("--v-rounds", type=int, default=25)
    parser.add_argument("--out", default="docs/sparse_dp", help="CSVs and plots")
    parser.add_argument(
        "--runs-dir",
        default="runs/reproduce_sparse_dp",
        help="directory of every run's output",
    )
    parser.add_argument("--num-cpus", type=int, default=1, help="Ray CPUs")
    parser.add_argument(
        "--ray-address", default=None, help="join a running Ray session ('auto')"
    )
    args = parser.parse_args(argv)
    allowed = ("lyapunov", "random", "round_robin", "delay_min")
    policies = [p for p in args.policies.split(",") if p]
    bad = [p for p in policies if p not in allowed]
    if bad:
        parser.error(f"--policies: unknown {', '.join(bad)}; allowed: {allowed}")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    v_grid = [float(x) for x in args.v_grid.split(",") if x]
    return args, policies, seeds, v_grid


def _finished(
    rounds_path: Path, sweep_path: Path
) -> tuple[set[tuple[str, int]], set[tuple[float, int]]]:
    """The (policy, seed) and (V, seed) runs already in the CSVs."""
    done = set()
    if rounds_path.exists():
        old = pd.read_csv(rounds_path)
        done = {
            (str(p), int(s)) for p, s in zip(old["policy"], old["seed"], strict=True)
        }
    swept = set()
    if sweep_path.exists():
        old = pd.read_csv(sweep_path)
        swept = {(float(v), int(s)) for v, s in zip(old["V"], old["seed"], strict=True)}
    return done, swept


def _init_ray(args: argparse.Namespace) -> None:
    """Join ``--ray-address`` or start one local session for every run."""
    import ray

    if args.ray_address:
        ray.init(address=args.ray_address, logging_level="ERROR")
    elif not ray.is_initialized():  # one session for every run (faster start-up)
        ray.init(  # a new local session, even where `ray start` left a cluster
            address="local",
            num_cpus=args.num_cpus,
            include_dashboard=False,
            logging_level="ERROR",
        )


def _compare(
    todo: list[tuple[str, int]],
    args: argparse.Namespace,
    runs_dir: Path,
    rounds_path: Path,
) -> None:
    """Run the scheduler comparison; append each run's rounds to ``rounds.csv``."""
    for policy, seed in progress_bar(todo, desc="sparse_dp compare"):
        df = run_one(
            policy_overrides(policy),
            args.rounds,
            seed,
            runs_dir,
            args.num_cpus,
        )
        df["policy"], df["seed"] = policy, seed
        df["max_eps_ratio"] = max_budget_ratio(df.attrs["privacy"])
        df["wall_s"] = df.attrs["wall_s"]
        cols = ["policy", "seed", "round", "global_acc", "latency_s"]
        cols += ["cum_delay_s", "mean_bits", "max_eps_ratio", "wall_s"]
        df[cols].to_csv(
            rounds_path, mode="a", header=not rounds_path.exists(), index=False
        )
        print(
            f"{policy} seed {seed}: final acc {df['global_acc'].iloc[-1]:.4f}, "
            f"delay {df['cum_delay_s'].iloc[-1]:.1f} s ({df.attrs['wall_s']:.0f} s)",
            flush=True,
        )


def _sweep(
    todo_v: list[tuple[float, int]],
    args: argparse.Namespace,
    runs_dir: Path,
    sweep_path: Path,
) -> None:
    """Run the V sweep; append one row per run to ``v_sweep.csv``."""
    for v, seed in progress_bar(todo_v, desc="sparse_dp V sweep"):
        df = run_one(
            {"scheduler.policy": "lyapunov", "scheduler.params": {"V": v}},
            args.v_rounds,
            seed,
            runs_dir,
            args.num_cpus,
        )
        row = {
            "V": v,
            "seed": seed,
            "rounds": len(df),
            "final_acc": float(df["global_acc"].iloc[-1]),
            "best_acc": float(df["global_acc"].max()),
            "cum_delay_s": float(df["cum_delay_s"].iloc[-1]),
            "mean_bits": float(df["mean_bits"].mean()),
            "max_eps_ratio": max_budget_ratio(df.attrs["privacy"]),
            "wall_s": df.attrs["wall_s"],
        }
        pd.DataFrame([row]).to_csv(
            sweep_path, mode="a", header=not sweep_path.exists(), index=False
        )
        print("V", v, seed, row, flush=True)


def _write_outputs(out: Path, dim: int, rounds_path: Path, sweep_path: Path) -> None:
    """Write runs.csv and the plots; print the tables."""
    if rounds_path.exists():
        runs = pd.read_csv(rounds_path)
        table = runs_table(runs, dim)
        table.to_csv(out / "runs.csv", index=False)
        print(markdown(table))
        print("\nMean over seeds (± sample std):\n")
        print(markdown(equal_delay_summary(runs, float(table["budget_s"].iloc[0]))))
        plot(runs, out)
    if sweep_path.exists():
        sweep = pd.read_csv(sweep_path)
        print(markdown(sweep))
        plot_sweep(sweep, out)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and the V sweep; write the CSVs and plots."""
    args, policies, seeds, v_grid = _parse_args(argv)

    import ray

    from rayfl.config import load_config

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = Path(args.runs_dir)
    dim = model_dim(load_config(str(CONFIG)))
    rounds_path, sweep_path = out / "rounds.csv", out / "v_sweep.csv"
    done, swept = _finished(rounds_path, sweep_path)
    todo = [(p, s) for p in policies for s in seeds if (p, s) not in done]
    todo_v = [(v, s) for s in seeds for v in v_grid if (v, s) not in swept]
    print(f"{len(todo)} comparison runs and {len(todo_v)} V-sweep runs to do")
    if todo or todo_v:
        _init_ray(args)
    try:
        _compare(todo, args, runs_dir, rounds_path)
        _sweep(todo_v, args, runs_dir, sweep_path)
    finally:
        if ray.is_initialized() and not args.ray_address:
            ray.shutdown()
    _write_outputs(out, dim, rounds_path, sweep_path)


def runs_table(runs: pd.DataFrame, dim: int) -> pd.DataFrame:
    """One row per (policy, seed): accuracy, delay, upload, accuracy at equal delay.

    The delay budget B is the smallest total delay of any run, so every run is
    compared on the same delay axis; ``acc_b25`` ... ``acc_b100`` are the best
    accuracies reached before the cumulative delay passes ¼ ... all of B.
    """
    ends = runs.groupby(["policy", "seed"])["cum_delay_s"].max()
    budget = float(ends.min())
    rows = []
    for (policy, seed), df in runs.groupby(["policy", "seed"], sort=False):
        rows.append(
            {
                "policy": policy,
                "seed": seed,
                "rounds": len(df),
                "final_acc": df["global_acc"].iloc[-1],
                "best_acc": df["global_acc"].max(),
                "budget_s": budget,
                **{
                    f"acc_b{int(100 * f)}": acc_at_delay(df, f * budget)
                    for f in (0.25, 0.5, 0.75, 1.0)
                },
                "cum_delay_s": df["cum_delay_s"].iloc[-1],
                "mean_round_s": df["latency_s"].mean(),
                "mean_upload_bits": df["mean_bits"].mean(),
                "dense_bits": 32 * dim,
                "max_eps_ratio": df["max_eps_ratio"].iloc[0],
                "wall_s": df["wall_s"].iloc[0],
            }
        )
    return pd.DataFrame(rows)


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


def plot(runs: pd.DataFrame, out: Path) -> None:
    """Seed means: accuracy (± std) and delay vs rounds, accuracy at equal delay."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
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
    fig.tight_layout()
    fig.savefig(out / "sparse_dp.png", dpi=120)
    plt.close(fig)
    print("plots:", out / "sparse_dp.png")


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
    sys.exit(script_main(main))
