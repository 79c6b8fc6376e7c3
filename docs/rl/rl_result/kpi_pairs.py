#!/usr/bin/env python3
"""Paired differences of every KPI between two policies of a benchmark run (issue 34).

``rayfl bench policies`` pairs each policy's *return* with the best heuristic's;
this reads its ``episodes.csv`` and pairs every KPI (``return``,
``max_client_loss``, ``jain``, ``accuracy``, ``energy_j``, ``latency_s``) of
``--policy`` with ``--reference`` seed by seed (mean difference, 95% t-CI,
paired t-test p, wins/losses: :func:`rayfl.benchmarks.policies.stats.paired`;
a "win" is a larger value, whether or not larger is better for that KPI).

Usage:
    python docs/rl/rl_result/kpi_pairs.py --bench docs/rl/rl_result/bench_shadowed_lr02 \
        --policy learned_shadowed --reference round_robin
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from rayfl.benchmarks.policies.stats import paired

KPIS = ("return", "max_client_loss", "jain", "accuracy", "energy_j", "latency_s")


def main() -> None:
    """Write the KPI pairs of ``--policy`` against ``--reference`` as a CSV."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", required=True, help="rayfl bench policies --out dir")
    p.add_argument("--policy", required=True)
    p.add_argument("--reference", required=True)
    p.add_argument("--out", default=None, help="default: BENCH/kpi_pairs.csv")
    args = p.parse_args()
    bench = Path(args.bench)
    episodes = pd.read_csv(bench / "episodes.csv")
    rows = []
    for kpi in KPIS:
        wide = episodes.pivot(index="seed", columns="policy", values=kpi)
        if args.policy not in wide or args.reference not in wide:
            raise SystemExit(
                f"kpi_pairs: {args.policy} or {args.reference} not in {bench}"
            )
        both = wide[[args.policy, args.reference]].dropna()
        stats = paired(both[args.policy].to_numpy(), both[args.reference].to_numpy())
        rows.append(
            {
                "kpi": kpi,
                "policy": args.policy,
                "reference": args.reference,
                "seeds": len(both),
                "policy_mean": both[args.policy].mean(),
                "reference_mean": both[args.reference].mean(),
                **stats,
            }
        )
    out = Path(args.out) if args.out else bench / "kpi_pairs.csv"
    pd.DataFrame(rows).to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
