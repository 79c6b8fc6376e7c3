#!/usr/bin/env python3
"""Before and after the surrogate benchmark got the run's model size (session 31).

Reads each star scenario's surrogate episodes written before the fix
(``docs/rl/bench/<size>_surrogate/episodes.csv``) and after it
(``docs/rl/bench/surrogate_context_fix/<scenario>/episodes.csv``, from
``rayfl bench policies --scenario <scenario> --mode surrogate --seeds 1000:1010
--policies lyapunov,delay_min,minmax --out docs/rl/bench/surrogate_context_fix/<scenario>``)
and writes ``compare.csv`` beside this script: the mean return per (scenario,
policy) before and after, over the same seeds.

Usage:
    python docs/rl/bench/surrogate_context_fix/compare.py
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
SIZES = {
    "star-small": "small",
    "star-small-shadowed": "small",
    "star-medium": "medium",
    "star-large": "large",
}


def main() -> None:
    """Write compare.csv (module docstring)."""
    rows = []
    for scenario, size in SIZES.items():
        old = pd.read_csv(BENCH / f"{size}_surrogate" / "episodes.csv")
        new = pd.read_csv(HERE / scenario / "episodes.csv")
        old = old[old["scenario"] == scenario]
        both = old.merge(new, on=["policy", "seed"], suffixes=("_before", "_after"))
        for policy, g in both.groupby("policy", sort=True):
            rows.append(
                {
                    "scenario": scenario,
                    "policy": policy,
                    "seeds": len(g),
                    "return_before": g["return_before"].mean(),
                    "return_after": g["return_after"].mean(),
                    "diff": (g["return_after"] - g["return_before"]).mean(),
                }
            )
    pd.DataFrame(rows).to_csv(HERE / "compare.csv", index=False)


if __name__ == "__main__":
    main()
