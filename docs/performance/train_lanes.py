"""Env steps per second of ``rayfl train-policy`` in emulate mode: one FL run vs E lanes.

Runs ``train_policy`` (PPO, RLlib, the env runner in the driver) on the small
default system of ``WirelessFL-v0`` (digits, N = 10, K = 4, MLP [32], FedAvg,
20-round episodes) in emulate mode, once per ``--lanes`` E and repeat, all in
one process and one Ray session (2 CPUs): E = 1 is one FL run per env runner
(``envs.rl.make_rl_env``), E > 1 the lanes env (``envs.star.rl_vector``, E FL runs
in lockstep on one set of client hosts). Writes ``--csv`` (default
docs/performance/train_lanes.csv), one row per (repeat, E):

* ``steps_per_s``: env steps over the wall time of PPO iterations 2 to
  ``--iterations`` (sampling and the PPO update, as ``progress.csv``'s
  ``env_steps_per_s``; iteration 1 holds the client actors' start-up and is
  reported apart as ``first_iteration_s``);
* ``ratio``: ``steps_per_s`` over E = 1's of the same repeat.

Usage: ``python docs/performance/train_lanes.py --lanes 1 16 --repeats 1``.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

FIELDS = [
    "repeat",
    "lanes",
    "train_batch_size",
    "timed_iterations",
    "env_steps",
    "seconds",
    "steps_per_s",
    "ratio",
    "first_iteration_s",
    "load_1m",
]


def one_run(lanes: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Train once with E = ``lanes``; return the row (without ``ratio``)."""
    from envs.star.scheduling import DEFAULT_CONFIG
    from rayfl.train_policy import train_policy

    overrides = [
        "rl.mode=emulate",
        f"rl.num_envs_per_env_runner={lanes}",
        f"rl.iterations={args.iterations}",
        f"rl.train_batch_size={args.batch}",
        f"rl.minibatch_size={min(128, args.batch)}",
        "rl.eval_episodes=0",
        f"output.dir={out}",
    ]
    run_dir = train_policy(dict(DEFAULT_CONFIG), overrides, verbose=False)
    progress = pd.read_csv(run_dir / "progress.csv")
    timed = progress.iloc[1:]
    steps, seconds = float(timed["env_steps"].sum()), float(timed["iteration_s"].sum())
    return {
        "lanes": lanes,
        "train_batch_size": args.batch,
        "timed_iterations": len(timed),
        "env_steps": int(steps),
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds, 2),
        "first_iteration_s": round(float(progress["iteration_s"].iloc[0]), 2),
        "load_1m": round(os.getloadavg()[0], 1),
    }


def main(argv: list[str] | None = None) -> None:
    """Measure every E in turn per repeat; write the CSV."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lanes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--batch", type=int, default=640, help="rl.train_batch_size")
    parser.add_argument("--csv", default="docs/performance/train_lanes.csv")
    args = parser.parse_args(argv)
    if args.lanes[0] != 1 or args.iterations < 2:
        parser.error("--lanes must start with 1 (the reference) and --iterations >= 2")
    from rayfl.cluster.session import RaySession
    from rayfl.config import RayConfig

    session = RaySession(RayConfig(num_cpus=2, object_store_memory_mb=300))
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for repeat in range(args.repeats):
                mine = [
                    {"repeat": repeat, **one_run(e, args, Path(tmp))}
                    for e in args.lanes
                ]
                for row in mine:
                    row["ratio"] = round(row["steps_per_s"] / mine[0]["steps_per_s"], 2)
                    print(
                        f"repeat {repeat} E={row['lanes']:3d}: {row['steps_per_s']:7.1f} "
                        f"env steps/s  x{row['ratio']:.2f}  (load {row['load_1m']})",
                        flush=True,
                    )
                rows += mine
    finally:
        session.close()
    path = Path(args.csv)
    tmp_csv = path.with_suffix(".csv.tmp")
    with tmp_csv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    tmp_csv.replace(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
