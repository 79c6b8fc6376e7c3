#!/usr/bin/env python3
"""Who a policy schedules: per-client counts over emulated episodes (issue 34).

Plays ``--policies`` (registered names, or ``learned=PATH``) on the emulation of
a registered scenario, one episode per held-out seed, and writes one row per
(seed, policy, client): rounds scheduled, uploads delivered, the client's mean
channel gain over the episode (dB, mean over rounds and subchannels: what the
policy observes), its data size and its test loss at the last round. Read it to
see *how* a learned schedule differs from round robin, not only by how much.
A second file, ``<out>_summary.csv``, has one row per policy: clients never
scheduled in an episode (mean, min, max over seeds), the most turns one client
got, the delivery rate, the mean over seeds of Spearman's ρ between a client's
turns and its data size, its mean gain and (in a moving world, issue 48) the
share of rounds it was reachable, the share of uploads lost as stragglers,
and the mean data size of the clients never scheduled and of the others. ``--from CSV`` rewrites the summary
of an earlier run without playing.

Usage:
    python docs/rl/rl_result/schedule_counts.py --scenario star-small-shadowed \
        --set algorithm.lr=0.2 --seeds 1000:1005 \
        --policies round_robin,learned=policies/checkpoints/learned_star_small_shadowed \
        --out docs/rl/rl_result/bench_shadowed_lr02/schedule_counts.csv
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


def episode(env, policy, seed: int) -> dict[str, np.ndarray]:
    """One episode's per-client counts, mean gain and last test loss."""
    obs, _ = env.reset(seed=seed)
    policy.reset(seed=seed)
    n = len(obs["loss"])
    scheduled, delivered, gains = np.zeros(n), np.zeros(n), []
    late, online = np.zeros(n), []
    done, info = False, {}
    while not done:
        gains.append(np.asarray(obs["channel_gain"], float).mean(axis=1))
        online.append(np.asarray(obs.get("available", np.ones(n)), float))
        obs, _, terminated, truncated, info = env.step(policy(obs))
        scheduled[np.asarray(info["scheduled"], int)] += 1
        delivered[np.asarray(info["delivered"], int)] += 1
        late[np.asarray(info.get("stragglers", []), int)] += 1
        done = terminated or truncated
    return {
        "scheduled": scheduled,
        "delivered": delivered,
        "stragglers": late,
        "available_share": np.mean(online, axis=0),
        "mean_gain": np.mean(gains, axis=0),
        "data_size": np.asarray(obs["data_size"], float),
        "last_loss": np.asarray(info["test_loss"], float),
    }


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per policy: how its turns spread over the clients (module doc)."""
    out = []
    for policy, g in rows.groupby("policy", sort=False):
        never = (g["scheduled"] == 0).groupby(g["seed"]).sum()

        def rho(col: str, g: pd.DataFrame = g) -> float:
            if col not in g:  # an earlier run's CSV
                return float("nan")
            per_seed = [
                x["scheduled"].corr(x[col], method="spearman")
                for _, x in g.groupby("seed")
                if x["scheduled"].nunique() > 1
            ]
            return float(np.mean(per_seed)) if per_seed else float("nan")

        skipped = g["scheduled"] == 0
        out.append(
            {
                "policy": policy,
                "seeds": g["seed"].nunique(),
                "clients": int(g.groupby("seed").size().iloc[0]),
                "never_scheduled_mean": never.mean(),
                "never_scheduled_min": never.min(),
                "never_scheduled_max": never.max(),
                "max_turns": g["scheduled"].max(),
                "delivery_rate": g["delivered"].sum() / g["scheduled"].sum(),
                "spearman_turns_data": rho("data_size"),
                "spearman_turns_gain": rho("mean_gain"),
                "spearman_turns_available": rho("available_share"),
                "straggler_rate": g["stragglers"].sum() / g["scheduled"].sum()
                if "stragglers" in g
                else float("nan"),
                "data_size_never": g.loc[skipped, "data_size"].mean(),
                "data_size_scheduled": g.loc[~skipped, "data_size"].mean(),
            }
        )
    return pd.DataFrame(out)


def policy_spec(item: str) -> tuple[str, str, dict[str, Any]]:
    """(label, name, params) of ``name``, ``learned=PATH`` or ``name@key=value;...``.

    The last form sets a heuristic's own parameters, e.g. the values a
    ``--self-tune`` bench chose (its runs.csv); it is labelled ``<name>_tuned``.

    Example:
        >>> policy_spec("random_neighbors@probability=0.00625")
        ('random_neighbors_tuned', 'random_neighbors', {'probability': 0.00625})
    """
    if "@" in item:
        name, _, pairs = item.partition("@")
        params = {}
        for pair in pairs.split(";"):
            key, _, value = pair.partition("=")
            params[key] = float(value)
        return f"{name}_tuned", name, params
    name, _, path = item.partition("=")
    return name, name, {"checkpoint": path} if path else {}


def client_rows(env, policy, seed: int) -> list[dict[str, float]]:
    """One episode's rows, one per client (:func:`episode`)."""
    got = episode(env, policy, seed)
    return [
        {"client": client} | {k: float(v[client]) for k, v in got.items()}
        for client in range(len(got["scheduled"]))
    ]


def main(rows_of=client_rows, summarize=summarize, doc: str = __doc__) -> None:
    """Play every policy on every seed; write the rows and their summary.

    ``rows_of(env, policy, seed)`` gives one episode's rows and ``summarize``
    their per-policy summary (``neighbor_counts.py`` passes its own).
    """
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--scenario", required=True)
    p.add_argument("--seeds", default="1000:1005")
    p.add_argument(
        "--policies", default="", help="name, learned=PATH or name@key=value, ..."
    )
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
    specs = [policy_spec(s.strip()) for s in args.policies.split(",") if s.strip()]
    rows = []
    session = RaySession(cfg.ray)
    try:
        for seed in parse_seeds(args.seeds):
            env = make_env(cfg.model_copy(update={"seed": seed}), "emulate")
            try:
                for spec in specs:
                    env.reset(seed=seed)
                    policy = build_policy(env, cfg, spec, "emulate")
                    for row in rows_of(env, policy, seed):
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
