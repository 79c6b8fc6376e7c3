"""Round robin with constant WPFL controls on the learned policy's evaluation episodes.

Does the learned policy win by adapting its controls per client and round, or
would a better constant setting do as well? This scores ``round_robin`` on the
same 20 held-out episodes (seeds 10000-10019, emulate mode) that
``rayfl train-policy examples/rl_wpfl_controls.yaml`` scored the learned policy
on, with the configured controls replaced by constants.

Run (from the repository root, ~8 min on 2 cores):
    python docs/rl/wpfl_controls/dev_scripts/constant_controls.py
Writes docs/rl/wpfl_controls/constant_controls.csv.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rayfl.config import load_config
from rayfl.train_policy.evaluate import evaluate_policies

ROOT = Path(__file__).resolve().parents[4]
#: (lr, personal_lr, lam): the configured values, about the learned policy's
#: mean (η_F 0.045, η_P 0.035, λ 0.35), then smaller λ down to local training.
SETTINGS = [
    (0.05, 0.05, 0.5),
    (0.045, 0.035, 0.35),
    (0.05, 0.05, 0.2),
    (0.05, 0.035, 0.1),
    (0.05, 0.05, 0.0),
]


def main() -> None:
    """Score every setting and write the CSV."""
    tables = []
    for lr, personal_lr, lam in SETTINGS:
        cfg = load_config(
            ROOT / "examples" / "rl_wpfl_controls.yaml",
            {
                "algorithm.lr": lr,
                "algorithm.personal_lr": personal_lr,
                "algorithm.lam": lam,
                "rl.controls": False,
            },
        )
        table = evaluate_policies(cfg, None, episodes=20, baselines=["round_robin"])
        table["policy"] = f"round_robin lr={lr} personal_lr={personal_lr} lam={lam}"
        tables.append(table)
        print(table.groupby("policy")["return"].agg(["mean", "std"]), flush=True)
    out = ROOT / "docs" / "rl" / "wpfl_controls" / "constant_controls.csv"
    pd.concat(tables).to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
