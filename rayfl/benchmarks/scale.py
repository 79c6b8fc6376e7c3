"""Scale: 10,000 clients with MLR, one round of all clients, against the goals below.

Goals: ≤ 10 s per round, ≤ 8 GB total RSS, ≤ 15 s of Ray-side start-up.
Data: Fashion-MNIST split iid over N clients (7 samples each at N = 10,000).

Run:  rayfl bench scale [--clients 10000] [--trainer auto|vectorized] [--algorithm ditto]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import ray

from rayfl.config import load_config
from rayfl.engine import Engine
from rayfl.schedule import Schedule


def total_rss_gb() -> float:
    """RSS of this process and all its descendants (Ray's processes), from /proc."""
    from pathlib import Path

    parent = {}
    rss = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":", 1) for line in (d / "status").read_text().splitlines()
            )
        except OSError:
            continue
        parent[int(d.name)] = int(fields["PPid"])
        rss[int(d.name)] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    import os

    mine = {os.getpid()}
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in mine} - mine
        grew = bool(more)
        mine |= more
    return sum(rss.get(p, 0) for p in mine) / 2**30


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table (``argv``: its command-line flags)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=10_000)
    parser.add_argument("--trainer", default="auto")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument(
        "--algorithm",
        default="fedavg",
        choices=["fedavg", "ditto"],
        help="ditto keeps a personal model per client in the actors' state",
    )
    args = parser.parse_args(argv)
    cfg = load_config(
        {
            "data": {
                "dataset": "fashion_mnist",
                "num_clients": args.clients,
                "partition": "iid",
            },
            "model": {"kind": "mlr"},
            "algorithm": {
                "kind": args.algorithm,
                "batch_size": 32,
                "lr": 0.05,
                "trainer": args.trainer,
            },
            "output": {"progress": False},
        }
    )
    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, logging_level="ERROR")  # type: ignore[arg-type]  # Ray stubs: a level name works
    t1 = time.perf_counter()
    system = Engine(cfg)
    t2 = time.perf_counter()
    everyone = Schedule.of(np.arange(args.clients))
    times = []
    for t in range(2):
        s = time.perf_counter()
        system.run_round(t, everyone)
        times.append(time.perf_counter() - s)
    s = time.perf_counter()
    system.evaluate()
    eval_s = time.perf_counter() - s
    rss = total_rss_gb()
    state_bytes = sum(ray.get([a.state_nbytes.remote() for a in system.actors]))
    print(
        f"clients: {args.clients}, actors: {len(system.actors)}, "
        f"algorithm: {args.algorithm}, trainer: {args.trainer}"
    )
    print(f"ray.init: {t1 - t0:.1f} s; data + actors: {t2 - t1:.1f} s")
    print(f"round of all clients: {times[0]:.2f} s (first), {times[1]:.2f} s (second)")
    print(f"evaluation of all clients: {eval_s:.2f} s")
    print(f"total RSS (driver + Ray processes): {rss:.2f} GB")
    print(
        f"memory per client: {rss * 2**30 / args.clients / 1024:.0f} KiB (RSS / clients); "
        f"client state held in the actors: {state_bytes / args.clients / 1024:.1f} KiB "
        "per client"
    )
    system.close()
    ray.shutdown()


if __name__ == "__main__":
    main()
