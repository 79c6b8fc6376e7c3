#!/usr/bin/env python3
"""Issue 47's research table: one row per scenario, from attempts.csv.

The attempts trained with a real budget (``env_steps`` ≥ ``--min-steps``,
500,000 by default) and scored against every heuristic tuned for itself
(``rayfl bench policies --self-tune all``: the reference is the best row of
that benchmark, a ``<policy>_tuned`` row or ``constant_tuned``). Per scenario
it keeps the attempt with the best mean difference to that reference and
corrects its paired t-test p for the number of budget attempts made on the
scenario (Bonferroni: p × attempts, capped at 1). The verdict is ``beats
the best`` (difference > 0 and corrected p < 0.05), ``loses to the best``
(difference < 0 and corrected p < 0.05) or ``no significant difference``.

Usage:
    python docs/rl/rl_result/budget_table.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SCENARIOS = (
    "star-small",
    "star-small-shadowed",
    "hierarchical-small-nodp",
    "d2d-small",
)
COLUMNS = [
    "scenario",
    "attempt",
    "attempts",
    "env_steps",
    "train_lr",
    "reference",
    "reference_return",
    "policy_return",
    "diff",
    "ci_low",
    "ci_high",
    "p",
    "p_bonferroni",
    "wins",
    "diff_rr",
    "p_rr",
    "verdict",
]


def table(attempts: pd.DataFrame, min_steps: int) -> pd.DataFrame:
    """One row per scenario of :data:`SCENARIOS` that has a budget attempt."""
    budget = attempts[attempts["env_steps"] >= min_steps]
    rows = []
    for scenario in SCENARIOS:
        mine = budget[budget["scenario"] == scenario]
        if mine.empty:
            continue
        best = mine.loc[mine["diff"].idxmax()]
        p_bonf = min(1.0, float(best["p"]) * len(mine))
        significant = p_bonf < 0.05
        verdict = "no significant difference"
        if significant:
            verdict = "beats the best" if best["diff"] > 0 else "loses to the best"
        rows.append(
            {
                **{k: best[k] for k in COLUMNS if k in best.index},
                "attempts": len(mine),
                "p_bonferroni": p_bonf,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def main() -> None:
    """Read attempts.csv, write budget_table.csv."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--attempts", default=str(HERE / "attempts.csv"))
    p.add_argument("--min-steps", type=int, default=500_000)
    p.add_argument("--out", default=str(HERE / "budget_table.csv"))
    args = p.parse_args()
    out = table(pd.read_csv(args.attempts), args.min_steps)
    out.to_csv(args.out, index=False)
    print(f"wrote {args.out} ({len(out)} scenarios)")


if __name__ == "__main__":
    main()
