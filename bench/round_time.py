"""Seconds per FedAvg round: rayfl vs a plain single-process PyTorch loop.

Workload (issue 2): real Fashion-MNIST, 100 clients × 600 train samples (iid),
MLP 784-200-10, batch 32, one local epoch, lr 0.05, all clients every round, no
channel effects, no DP. Both sides train the same clients on the same data in
the same process run; the ratio rayfl / plain is what to compare across machines.

Run:  .venv/bin/python bench/round_time.py [--rounds 5] [--cpus 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import ray
import torch

from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.learning.models import FlatModel, build_model
from rayfl.learning.train import local_sgd
from rayfl.schedule import Schedule
from rayfl.system import FLSystem, initial_vector

CONFIG = {
    "name": "bench",
    "data": {
        "dataset": "fashion_mnist",
        "num_clients": 100,
        "partition": "iid",
        "pool": "all",
        "test_fraction": 1 / 7,
    },
    "model": {"kind": "mlp", "hidden": [200]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 32, "lr": 0.05},
    "scheduler": {"policy": "all"},
    "output": {"progress": False, "plots": False},
}


def plain_round(
    fm: FlatModel, data, start: np.ndarray, lr: float, rounds: int
) -> float:
    """Seconds per round of the plain per-client loop on one thread."""
    torch.set_num_threads(1)
    times = []
    vector = start
    for t in range(rounds):
        t0 = time.perf_counter()
        total = np.zeros_like(vector, dtype=np.float64)
        weight = 0.0
        for c in range(data.num_clients):
            x, y = data.train(c)
            res = local_sgd(
                fm,
                vector,
                x,
                y,
                lr=lr,
                batch_size=32,
                local_epochs=1,
                rng=np.random.default_rng([t, c]),
            )
            total += len(y) * (res.vector - vector)
            weight += len(y)
        vector = (vector + total / weight).astype(np.float32)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()
    cfg = load_config(CONFIG, {"rounds": args.rounds + 1})
    data = build_federated(cfg.data, seed=cfg.seed)
    print(
        f"clients: {data.num_clients}, train samples/client: "
        f"{int(np.median(data.num_train))}, model: MLP 784-200-10"
    )

    ray.init(
        num_cpus=args.cpus,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    t0 = time.perf_counter()
    system = FLSystem(cfg, data=data)
    setup_s = time.perf_counter() - t0
    everyone = Schedule.of(np.arange(data.num_clients))
    times = []
    for t in range(args.rounds + 1):  # round 0 warms up
        t1 = time.perf_counter()
        system.run_round(t, everyone)
        times.append(time.perf_counter() - t1)
    rayfl_s = float(np.median(times[1:]))
    system.close()
    ray.shutdown()

    fm = FlatModel(
        build_model("mlp", input_shape=data.input_shape, num_classes=10, hidden=(200,))
    )
    start = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    plain_s = plain_round(fm, data, start, 0.05, args.rounds)
    print(f"rayfl setup (actors): {setup_s:.2f} s")
    print(
        f"rayfl  s/round: {rayfl_s:.3f}  ({args.cpus} CPUs, {len(system.groups)} actors)"
    )
    print(f"plain  s/round: {plain_s:.3f}  (1 thread, same clients, same data)")
    print(f"ratio rayfl/plain: {rayfl_s / plain_s:.3f}")


if __name__ == "__main__":
    main()
