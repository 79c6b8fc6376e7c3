"""FLUTE's published workload: LR on MNIST-shaped data, 1000 clients, 10/round, 100 rounds.

FLUTE's README reports 200 s (FLUTE) and 1814 s (Flower 1.0) on CPU. We run the
same shape on Fashion-MNIST (same 28×28×1 / 10 classes as MNIST; MNIST itself is
not installable offline here): 1000 iid clients (~52 train samples each), MLR,
10 clients per round (random), 100 rounds, batch 10, one local epoch, evaluation
only at the end. Prints start-up (Ray + actors) and the time of the 100 rounds.

Run:  rayfl bench flute
"""

from __future__ import annotations

import argparse
import time

import rayfl
from rayfl.benchmarks import bench_parser

OUT_DIR = "bench/_out"
CONFIG = {
    "name": "flute",
    "rounds": 100,
    "eval_every": 100,
    "data": {"dataset": "fashion_mnist", "num_clients": 1000, "partition": "iid"},
    "model": {"kind": "mlr"},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 10, "lr": 0.05},
    "scheduler": {"policy": "random", "clients_per_round": 10},
    "output": {"progress": False, "plots": False, "dir": OUT_DIR},
}


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench flute`` (its workload is fixed)."""
    p = bench_parser("flute", __doc__)
    p.add_argument(
        "--out",
        default=OUT_DIR,
        help=f"folder of the run directory (default {OUT_DIR})",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table (``argv``: its command-line flags)."""
    args = parser().parse_args(argv)
    t0 = time.perf_counter()
    result = rayfl.run(CONFIG, {"output.dir": args.out})
    total = time.perf_counter() - t0
    rounds_s = float(result.rounds["round_time_s"].sum())
    print(f"start-up (Ray, data, actors): {result.summary['setup_s']:.1f} s")
    print(f"100 rounds:                   {rounds_s:.1f} s")
    print(f"total wall time:              {total:.1f} s")
    print(f"final global accuracy:        {result.summary['final']['global_acc']:.4f}")


if __name__ == "__main__":
    main()
