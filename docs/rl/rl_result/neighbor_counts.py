#!/usr/bin/env python3
"""Whom a D2D target takes a model from: per-round choices over emulated episodes.

The D2D counterpart of ``schedule_counts.py`` (issue 48). Plays ``--policies``
(registered names, or ``learned=PATH``) on the emulation of a registered D2D
scenario, one episode per held-out seed, and writes one row per (seed, policy,
round): the neighbours the target took, how many arrived, and what the target
observed of them when it chose — distance, P^err, whether they were among its
three nearest nodes that round — beside the same means over every candidate.
A second file, ``<out>_summary.csv``, has one row per policy: neighbours per
round, the share of rounds with none, the delivery rate (arrived / chosen),
the chosen neighbours' mean distance and P^err against the candidates', and
the share of choices among the three nearest. ``--from CSV`` rewrites the
summary of an earlier run without playing.

Usage:
    python docs/rl/rl_result/neighbor_counts.py --scenario d2d-small-mobile \
        --seeds 1000:1020 \
        --policies random_neighbors,learned=docs/rl/rl_result/d2d_small_mobile/policy \
        --out docs/rl/rl_result/bench_d2d_small_mobile/neighbor_counts.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rayfl.benchmarks import parse_seeds
from rayfl.benchmarks.policies import build_policy, make_env
from rayfl.benchmarks.policies.scenarios import scenario_config
from rayfl.config import load_config, parse_overrides

NEAREST = 3


def episode(env: Any, policy: Any, seed: int) -> list[dict[str, float]]:
    """One episode's rows: the target's choice each round (module docstring)."""
    obs, _ = env.reset(seed=seed)
    policy.reset(seed=seed)
    (target,) = env.targets  # the scenarios draw one target per seed
    rows, done, t = [], False, 0
    while not done:
        distance = np.asarray(obs["distance_m"], float)
        error = np.asarray(obs["error_probability"], float)
        candidates = np.flatnonzero(np.arange(len(distance)) != target)
        nearest = set(candidates[np.argsort(distance[candidates])[:NEAREST]])
        obs, _, terminated, truncated, info = env.step(policy(obs))
        chosen = list(info["neighbors"][target])
        arrived = list(info["delivered"][target])
        rows.append(
            {
                "round": t,
                "chosen": len(chosen),
                "arrived": len(arrived),
                "chosen_distance_m": distance[chosen].mean() if chosen else np.nan,
                "chosen_error": error[chosen].mean() if chosen else np.nan,
                "chosen_nearest": sum(c in nearest for c in chosen),
                "candidate_distance_m": distance[candidates].mean(),
                "candidate_error": error[candidates].mean(),
                "test_loss": float(info["test_loss"][target]),
            }
        )
        done, t = terminated or truncated, t + 1
    return rows


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per policy (module docstring)."""
    out = []
    for policy, g in rows.groupby("policy", sort=False):
        took = g["chosen"].sum()
        out.append(
            {
                "policy": policy,
                "seeds": g["seed"].nunique(),
                "neighbors_per_round": g["chosen"].mean(),
                "rounds_without_neighbor": (g["chosen"] == 0).mean(),
                "delivery_rate": g["arrived"].sum() / took if took else np.nan,
                "chosen_distance_m": np.average(
                    g["chosen_distance_m"].fillna(0), weights=g["chosen"]
                )
                if took
                else np.nan,
                "candidate_distance_m": g["candidate_distance_m"].mean(),
                "chosen_error": np.average(
                    g["chosen_error"].fillna(0), weights=g["chosen"]
                )
                if took
                else np.nan,
                "candidate_error": g["candidate_error"].mean(),
                "nearest_share": g["chosen_nearest"].sum() / took if took else np.nan,
            }
        )
    return pd.DataFrame(out)


def main() -> None:
    """Play every policy on every seed; write the per-round rows and the summary."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", required=True)
    p.add_argument("--seeds", default="1000:1005")
    p.add_argument("--policies", default="", help="name or learned=PATH, ...")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", required=True)
    p.add_argument("--from", dest="source", default=None, help="summarize this CSV")
    args = p.parse_args()
    summary_path = Path(args.out).with_name(Path(args.out).stem + "_summary.csv")
    if args.source:
        summarize(pd.read_csv(args.source)).to_csv(summary_path, index=False)
        print(f"wrote {summary_path}")
        return
    from rayfl.cluster.session import RaySession

    base = {"ray": {"num_cpus": 2, "object_store_memory_mb": 150}}
    cfg = load_config(scenario_config(args.scenario), base | parse_overrides(args.set))
    specs = []
    for item in (s.strip() for s in args.policies.split(",") if s.strip()):
        name, _, path = item.partition("=")
        specs.append((name, name, {"checkpoint": path} if path else {}))
    rows = []
    session = RaySession(cfg.ray)
    try:
        for seed in parse_seeds(args.seeds):
            env = make_env(cfg.model_copy(update={"seed": seed}), "emulate")
            try:
                for spec in specs:
                    env.reset(seed=seed)
                    policy = build_policy(env, cfg, spec, "emulate")
                    for row in episode(env, policy, seed):
                        rows.append({"seed": seed, "policy": spec[0]} | row)
            finally:
                env.close()
    finally:
        session.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(args.out, index=False)
    summarize(pd.DataFrame(rows)).to_csv(summary_path, index=False)
    print(f"wrote {args.out} and {summary_path}")


if __name__ == "__main__":
    main()
