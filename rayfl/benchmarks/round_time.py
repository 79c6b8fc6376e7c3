"""Seconds per FedAvg round: rayfl vs a plain single-process PyTorch loop.

Workload (issue 2): real Fashion-MNIST, 100 clients × 600 train samples (iid),
MLP 784-200-10, batch 32, one local epoch, lr 0.05, all clients every round, no
channel effects, no DP. Both sides train the same clients on the same data in
the same process run; the ratio rayfl / plain is what to compare across machines.

Run:  rayfl bench round-time [--rounds 5] [--cpus 2]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import ray
import torch

from rayfl.benchmarks import bench_parser
from rayfl.config import load_config
from rayfl.data.federated import build_federated
from rayfl.engine import Engine
from rayfl.schedule import Schedule
from rayfl.system import initial_vector

#: The workload of ``examples/bench_fedavg_mlp.yaml`` (a test keeps them equal).
CONFIG = {
    "name": "bench-fedavg-mlp",
    "eval_every": 10,
    "data": {
        "dataset": "fashion_mnist",
        "num_clients": 100,
        "partition": "iid",
        "pool": "all",
        "test_fraction": 0.142857,
    },
    "model": {"kind": "mlp", "hidden": [200]},
    "algorithm": {"kind": "fedavg", "local_epochs": 1, "batch_size": 32, "lr": 0.05},
    "scheduler": {"policy": "all"},
}


def plain_round(data: Any, start: np.ndarray, lr: float, rounds: int) -> float:
    """Seconds per round of a plain PyTorch loop over the clients, on one thread.

    Idiomatic PyTorch, no rayfl code: an ``nn.Sequential`` MLP, ``torch.optim.SGD``,
    a fresh permutation per epoch, ``zero_grad / backward / step``.
    """
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(784, 200),
        torch.nn.ReLU(),
        torch.nn.Linear(200, 10),
    )
    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    vector = torch.from_numpy(start.copy())
    times = []
    for t in range(rounds):
        t0 = time.perf_counter()
        total = torch.zeros_like(vector, dtype=torch.float64)
        weight = 0
        for c in range(data.num_clients):
            x, y = data.train(c)
            xt, yt = torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y))
            torch.nn.utils.vector_to_parameters(vector, params)
            opt = torch.optim.SGD(params, lr=lr)
            perm = torch.from_numpy(np.random.default_rng([t, c]).permutation(len(yt)))
            for i in range(0, len(yt), 32):
                idx = perm[i : i + 32]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
                opt.step()
            local = torch.nn.utils.parameters_to_vector(params).detach()
            total += len(yt) * (local - vector).double()
            weight += len(yt)
        vector = (vector + total / weight).float()
        times.append(time.perf_counter() - t0)
    assert sum(sizes) == len(start)
    return float(np.median(times))


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench round-time``."""
    p = bench_parser("round-time", __doc__)
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="timed rounds of each side, after one warm-up round (default 5)",
    )
    p.add_argument("--cpus", type=int, default=2, help="Ray CPUs (default 2)")
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table (``argv``: its command-line flags)."""
    args = parser().parse_args(argv)
    cfg = load_config(CONFIG, {"rounds": args.rounds + 1, "output.progress": False})
    data = build_federated(cfg.data, seed=cfg.seed)
    print(
        f"clients: {data.num_clients}, train samples/client: "
        f"{int(np.median(data.num_train))}, model: MLP 784-200-10"
    )

    ray.init(
        num_cpus=args.cpus,
        include_dashboard=False,
        logging_level="ERROR",  # type: ignore[arg-type]  # Ray stubs: a level name works
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    t0 = time.perf_counter()
    system = Engine(cfg, data=data)
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

    start = initial_vector(cfg, tuple(data.input_shape), data.num_classes)
    plain_s = plain_round(data, start, 0.05, args.rounds)
    print(f"rayfl setup (actors): {setup_s:.2f} s")
    print(
        f"rayfl  s/round: {rayfl_s:.3f}  ({args.cpus} CPUs, {len(system.groups)} actors)"
    )
    print(f"plain  s/round: {plain_s:.3f}  (1 thread, same clients, same data)")
    print(f"ratio rayfl/plain: {rayfl_s / plain_s:.3f}")


if __name__ == "__main__":
    main()
