#!/usr/bin/env python3
"""Add one training attempt to docs/rl/rl_result/attempts.csv (issue 34).

An attempt is a policy trained with ``rayfl train-policy`` and scored by
``rayfl bench policies --mode emulate`` beside every heuristic on held-out
seeds. Its row joins the run's training record (``policy/policy.json``:
``env_steps``, ``iterations``; ``progress.csv``: wall time) with the
benchmark's paired comparison of the policy's return to the best heuristic
(``summary.csv``: mean difference, 95% t-CI, paired t-test p, wins/losses),
and the same comparison with round robin (``*_rr``, from ``episodes.csv``,
with :func:`rayfl.benchmarks.policies.stats.paired`); ``train_lr`` is FedAvg's
``lr`` the policy was trained at (the run's ``config.yaml``), ``eval_overrides``
the benchmark's ``--set`` (``runs.csv``; ``{}``: the scenario as registered).
A row with the same ``attempt`` name is replaced.

Usage:
    python docs/rl/rl_result/attempts.py --attempt emulate_scratch \
        --run docs/rl/rl_result/emulate_scratch --bench docs/rl/rl_result/bench \
        --policy learned_emulate --init-from none
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pandas as pd
import yaml

from rayfl.benchmarks.policies.stats import paired

HERE = Path(__file__).resolve().parent
COLUMNS = [
    "attempt",
    "scenario",
    "policy",
    "mode",
    "reward",
    "encoding",
    "init_from",
    "train_lr",
    "eval_overrides",
    "env_steps",
    "iterations",
    "train_wall_s",
    "heldout_seeds",
    "reference",
    "reference_return",
    "policy_return",
    "diff",
    "ci_low",
    "ci_high",
    "p",
    "wins",
    "losses",
    "diff_rr",
    "ci_low_rr",
    "ci_high_rr",
    "p_rr",
    "wins_rr",
]


def row(args: argparse.Namespace) -> dict[str, object]:
    """The attempt's row from its run directory and the benchmark summary."""
    run = Path(args.run)
    meta = json.loads((run / "policy" / "policy.json").read_text())
    scenario = args.scenario or meta["config"]
    with (run / "progress.csv").open(newline="") as f:
        progress = list(csv.DictReader(f))
    with (Path(args.bench) / "summary.csv").open(newline="") as f:
        summary = [
            r
            for r in csv.DictReader(f)
            if r["mode"] == "emulate" and r["scenario"] == scenario
        ]
    mine = next((r for r in summary if r["policy"] == args.policy), None)
    if mine is None:
        raise SystemExit(f"--policy: {args.policy!r} not in {args.bench}/summary.csv")
    ref = next(r for r in summary if r["policy"] == mine["best_heuristic"])
    rr = _vs_round_robin(Path(args.bench) / "episodes.csv", args.policy)
    config = yaml.safe_load((run / "config.yaml").read_text())
    return {
        "attempt": args.attempt,
        "scenario": scenario,
        "policy": args.policy,
        "mode": meta["mode"],
        "reward": meta["reward"],
        "encoding": args.encoding,
        "init_from": args.init_from,
        "train_lr": config["algorithm"]["lr"],
        "eval_overrides": _overrides(Path(args.bench) / "runs.csv", scenario),
        "env_steps": meta["env_steps"],
        "iterations": meta["iterations"],
        "train_wall_s": round(float(progress[-1]["elapsed_s"]), 1),
        "heldout_seeds": mine["seeds"],
        "reference": mine["best_heuristic"],
        "reference_return": ref["return_mean"],
        "policy_return": mine["return_mean"],
        "diff": mine["diff_vs_best_mean"],
        "ci_low": mine["diff_vs_best_ci_low"],
        "ci_high": mine["diff_vs_best_ci_high"],
        "p": mine["p_vs_best"],
        "wins": mine["wins_vs_best"],
        "losses": mine["losses_vs_best"],
        "diff_rr": rr["diff_mean"],
        "ci_low_rr": rr["diff_ci_low"],
        "ci_high_rr": rr["diff_ci_high"],
        "p_rr": rr["p_value"],
        "wins_rr": rr["wins"],
    }


def _overrides(path: Path, scenario: str) -> str:
    """The benchmark's ``--set`` overrides of ``scenario`` (``{}`` if none)."""
    runs = pd.read_csv(path)
    runs = runs[(runs["scenario"] == scenario) & (runs["mode"] == "emulate")]
    if "overrides" not in runs or runs["overrides"].isna().all():
        return "{}"
    return str(runs["overrides"].dropna().iloc[0])


def _vs_round_robin(path: Path, policy: str) -> dict[str, float | int]:
    """Paired difference of ``policy``'s return to round robin's (emulate mode).

    NaN where the topology has no ``round_robin`` (D2D's neighbour choice).
    """
    episodes = pd.read_csv(path)
    episodes = episodes[episodes["mode"] == "emulate"]
    table = episodes.pivot_table(index="seed", columns="policy", values="return")
    if "round_robin" not in table:
        nan = float("nan")
        keys = ("diff_mean", "diff_ci_low", "diff_ci_high", "p_value", "wins")
        return dict.fromkeys(keys, nan)
    return paired(table[policy].to_numpy(), table["round_robin"].to_numpy())


def main() -> None:
    """Parse the flags, then write attempts.csv with the attempt's row."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--attempt", required=True, help="name of the attempt")
    p.add_argument("--run", required=True, help="dir with policy/ and progress.csv")
    p.add_argument("--bench", required=True, help="rayfl bench policies --out dir")
    p.add_argument("--policy", required=True, help="its label in the benchmark")
    p.add_argument("--init-from", default="none", help="what training started from")
    p.add_argument(
        "--scenario",
        default=None,
        help="the benchmark's scenario (default: the training config's name)",
    )
    p.add_argument(
        "--encoding",
        default="flat per-client features, top-K + Hungarian",
        help="observation/action encoding",
    )
    p.add_argument("--out", default=str(HERE / "attempts.csv"))
    args = p.parse_args()
    out = Path(args.out)
    rows: list[dict[str, object]] = []
    if out.is_file():
        with out.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["attempt"] != args.attempt]
    rows.append(row(args))
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out} ({len(rows)} attempts)")


if __name__ == "__main__":
    main()
