"""Local DP FedAvg on Fashion-MNIST: accuracy versus ε, over several seeds.

Runs ``examples/dp_fedavg_fmnist.yaml`` (100 clients, MLR, C = 1, δ = 1e-5, 30
rounds, every client in every round; each client clips its update to C and adds
N(0, (z·2C)²) noise, z calibrated by the RDP accountant at sensitivity Δ = 2C and
q = 1 so that a client spends exactly ε) once per (ε, seed), and writes one row per
run to ``--csv`` (default ``docs/dp_fedavg/sweep.csv``):

| column | meaning |
|---|---|
| ``epsilon`` | the target ε (``inf``: no noise) |
| ``seed`` | the run's seed (data split, initial model, noise) |
| ``final_acc`` | global model's test accuracy after the last round |
| ``max_test_loss`` | largest client test loss of the global model after the last round |
| ``jain_train_loss`` | Jain's index of the clients' training losses after the last round |
| ``epsilon_max`` | largest per-client ε the accountant reports at the end (at δ) |
| ``noise_multiplier`` | z (noise std σ = z·Δ with Δ = 2C); 0 without noise |
| ``wall_s`` | that run's wall time in seconds |

Runs already in the CSV are skipped when the script is run again (``--fresh``
starts over). One Ray session serves every run.

Example:
    python examples/dp_fedavg_sweep.py --seeds 0 1 2 --num-cpus 1
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BASE_CONFIG = HERE / "dp_fedavg_fmnist.yaml"
FIELDS = (
    "epsilon",
    "seed",
    "final_acc",
    "max_test_loss",
    "jain_train_loss",
    "epsilon_max",
    "noise_multiplier",
    "wall_s",
)


def eps_label(value: float | None) -> str:
    """Return the CSV label of a target ε (``inf`` for no noise).

    Example:
        >>> eps_label(None), eps_label(4.0)
        ('inf', '4')
    """
    return "inf" if value is None or math.isinf(value) else f"{value:g}"


def row_of(epsilon: float | None, seed: int, summary: dict[str, Any], wall_s: float):
    """Return the CSV row of one run from its ``summary.json`` content."""
    final = summary.get("final", {})
    privacy = summary.get("privacy") or {}
    z = privacy.get("noise_multiplier")
    return {
        "epsilon": eps_label(epsilon),
        "seed": seed,
        "final_acc": final.get("eval_acc"),
        "max_test_loss": final.get("eval_max_loss"),
        "jain_train_loss": final.get("jain_train_loss"),
        "epsilon_max": privacy.get("epsilon_max", math.inf)
        if epsilon is not None
        else math.inf,
        "noise_multiplier": 0.0 if epsilon is None or z is None else z,
        "wall_s": round(wall_s, 1),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Return the script's flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--epsilons",
        nargs="+",
        default=["1", "4", "16", "inf"],
        help="target ε values; 'inf' runs without noise",
    )
    parser.add_argument("--num-cpus", type=int, default=1, help="Ray CPUs")
    parser.add_argument("--csv", default="docs/dp_fedavg/sweep.csv")
    parser.add_argument("--out", default="runs/dp_fedavg_sweep", help="run dirs")
    parser.add_argument("--fresh", action="store_true", help="ignore the CSV")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the missing (ε, seed) pairs and append their rows to the CSV."""
    args = parse_args(argv)
    epsilons = [None if e == "inf" else float(e) for e in args.epsilons]
    path = Path(args.csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    if args.fresh and path.exists():
        path.unlink()
    done = set()
    if path.exists():
        with path.open() as f:
            done = {(r["epsilon"], int(r["seed"])) for r in csv.DictReader(f)}
    todo = [
        (e, s) for s in args.seeds for e in epsilons if (eps_label(e), s) not in done
    ]
    if not todo:
        print(f"nothing to run: every (ε, seed) is in {path}")
        return

    import ray

    import rayfl

    ray.init(
        address="local",
        num_cpus=args.num_cpus,
        include_dashboard=False,
        logging_level="ERROR",
    )
    try:
        for epsilon, seed in todo:
            started = time.perf_counter()
            result = rayfl.run(
                BASE_CONFIG,
                {
                    "seed": seed,
                    "privacy.epsilon": epsilon,
                    "sweep": {},
                    "name": f"dp-fedavg-eps{eps_label(epsilon)}-s{seed}",
                    "output.dir": args.out,
                    "output.plots": False,
                    "output.progress": False,
                },
            )
            row = row_of(epsilon, seed, result.summary, time.perf_counter() - started)
            new = not path.exists()
            with path.open("a", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=FIELDS)
                if new:
                    writer.writeheader()
                writer.writerow(row)
            print(row, flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
