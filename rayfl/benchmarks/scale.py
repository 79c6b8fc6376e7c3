"""Scale: memory and round time against the population size.

Two modes:

- ``rayfl bench scale -- --clients N``: the issue's table — Fashion-MNIST split
  iid over N clients (``data.population: partition``), MLR, one round of all
  clients; prints round, evaluation, set-up time and total RSS.
- ``rayfl bench scale -- --sweep --csv docs/performance/scale.csv``: resampled
  Fashion-MNIST populations of N = 10^4, 10^5, 10^6 clients (20 samples each,
  drawn from the shared pool by seed), K = 100 and 1,000 participants per
  round, MLR and the MLP 784-200-10; per (model, N, K): median round time,
  evaluation of K sampled clients (``eval_clients``), set-up time, total RSS,
  bytes per client and the ratio of the round time to the same K-client round
  at N = 10^4. Also one round of all 30,000 clients of the issue's table.

``bytes_per_client`` is the marginal memory of a client: (RSS at N − RSS at
N = 10^4) / (N − 10^4), same model, after the same rounds; the data pool is
shared, so this is the memory per client beyond its data.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import ray

from rayfl.benchmarks import bench_parser
from rayfl.config import load_config
from rayfl.engine import Engine
from rayfl.schedule import Schedule

POPULATIONS = (10_000, 100_000, 1_000_000)
PER_ROUND = (100, 1_000)
MODELS = ("mlr", "mlp")
FIELDS = (
    "model",
    "population",
    "clients",
    "k",
    "rounds",
    "setup_s",
    "round_s",
    "eval_s",
    "rss_gb",
    "bytes_per_client",
    "round_ratio_vs_1e4",
    "repeat",
)


def total_rss_gb() -> float:
    """RSS of this process and all its descendants (Ray's processes), from /proc."""
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
    mine = {os.getpid()}
    grew = True
    while grew:
        more = {p for p, pp in parent.items() if pp in mine} - mine
        grew = bool(more)
        mine |= more
    return sum(rss.get(p, 0) for p in mine) / 2**30


def _config(model: str, clients: int, *, resampled: bool, k: int) -> Any:
    data: dict[str, Any] = {
        "dataset": "fashion_mnist",
        "num_clients": clients,
        "partition": "iid",
    }
    if resampled:
        data |= {"population": "resampled", "samples_per_client": 20}
    return load_config(
        {
            "data": data,
            "model": {"kind": model, "hidden": [200]},
            "algorithm": {"kind": "fedavg", "batch_size": 32, "lr": 0.05},
            "scheduler": {"policy": "random", "clients_per_round": k},
            "eval_clients": k,
            "output": {"progress": False},
        }
    )


def _rounds(system: Engine, k: int, rounds: int) -> float:
    """Run ``rounds`` rounds of ``k`` random clients; return the median time."""
    rng = np.random.default_rng(k)
    times = []
    for t in range(rounds):
        clients = np.sort(rng.choice(system.num_clients, k, replace=False))
        start = time.perf_counter()
        system.run_round(t, Schedule.of(clients))
        times.append(time.perf_counter() - start)
    return float(np.median(times[1:] if len(times) > 1 else times))


def _evaluate(system: Engine, k: int) -> float:
    system.config = system.config.model_copy(update={"eval_clients": k})
    start = time.perf_counter()
    evals = system.evaluate()
    assert evals is not None and len(evals) == min(k, system.num_clients)
    return time.perf_counter() - start


def measure(model: str, clients: int, rounds: int) -> list[dict[str, Any]]:
    """Build one population; run each K of :data:`PER_ROUND`; one row per K."""
    start = time.perf_counter()
    system = Engine(_config(model, clients, resampled=True, k=max(PER_ROUND)))
    setup_s = time.perf_counter() - start
    rows = []
    try:
        for k in PER_ROUND:
            round_s = _rounds(system, k, rounds)
            eval_s = _evaluate(system, k)
            rows.append(
                {
                    "model": model,
                    "population": "resampled",
                    "clients": clients,
                    "k": k,
                    "rounds": rounds,
                    "setup_s": setup_s,
                    "round_s": round_s,
                    "eval_s": eval_s,
                    "rss_gb": total_rss_gb(),
                }
            )
    finally:
        system.close()
    return rows


def all_clients_round(clients: int) -> dict[str, Any]:
    """One round of all ``clients`` (Fashion-MNIST split iid), MLR: the issue's row."""
    start = time.perf_counter()
    system = Engine(_config("mlr", clients, resampled=False, k=clients))
    setup_s = time.perf_counter() - start
    try:
        round_s = _rounds(system, clients, 1)
        eval_s = _evaluate(system, clients)
        rss = total_rss_gb()
    finally:
        system.close()
    return {
        "model": "mlr",
        "population": "partition",
        "clients": clients,
        "k": clients,
        "rounds": 1,
        "setup_s": setup_s,
        "round_s": round_s,
        "eval_s": eval_s,
        "rss_gb": rss,
    }


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Fill ``bytes_per_client`` and ``round_ratio_vs_1e4`` against N = 10^4 rows."""
    base = {
        (r["model"], r["k"]): r
        for r in rows
        if r["population"] == "resampled" and r["clients"] == POPULATIONS[0]
    }
    for r in rows:
        ref = base.get((r["model"], r["k"]))
        r["repeat"] = 0
        if r["population"] != "resampled" or ref is None:
            r["bytes_per_client"] = r["round_ratio_vs_1e4"] = float("nan")
            continue
        extra = r["clients"] - ref["clients"]
        r["bytes_per_client"] = (
            (r["rss_gb"] - ref["rss_gb"]) * 2**30 / extra if extra else float("nan")
        )
        r["round_ratio_vs_1e4"] = r["round_s"] / ref["round_s"]


def sweep(args: argparse.Namespace) -> None:
    """Measure every (model, N, K) and write the CSV."""
    rows: list[dict[str, Any]] = []
    for model in args.models:  # a fresh Ray session each: RSS of one population
        for clients in args.populations:
            with _session(args.cpus):
                rows += measure(model, clients, args.rounds)
            print(rows[-2:], flush=True)
    if args.all_clients:
        with _session(args.cpus):
            rows.append(all_clients_round(args.all_clients))
        print(rows[-1], flush=True)
    add_ratios(rows)
    path = Path(args.csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)
    print(f"wrote {path}")


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench scale``."""
    p = bench_parser("scale", __doc__)
    p.add_argument(
        "--clients",
        type=int,
        default=10_000,
        help="clients of the one-round table (without --sweep; default 10000)",
    )
    p.add_argument("--cpus", type=int, default=2, help="Ray CPUs (default 2)")
    p.add_argument(
        "--sweep", action="store_true", help="the population sweep, written to --csv"
    )
    p.add_argument(
        "--csv",
        default="docs/performance/scale.csv",
        help="CSV the sweep writes (default docs/performance/scale.csv)",
    )
    p.add_argument(
        "--rounds", type=int, default=10, help="rounds per sweep point (default 10)"
    )
    p.add_argument(
        "--models",
        nargs="+",
        default=list(MODELS),
        help=f"models of the sweep (default: {' '.join(MODELS)})",
    )
    p.add_argument(
        "--populations",
        nargs="+",
        type=int,
        default=list(POPULATIONS),
        help="population sizes N of the sweep (default: "
        f"{' '.join(str(n) for n in POPULATIONS)})",
    )
    p.add_argument(
        "--all-clients",
        type=int,
        default=30_000,
        help="also one round of all these Fashion-MNIST clients (0: skip)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (``argv``: its command-line flags)."""
    args = parser().parse_args(argv)
    if args.sweep:
        sweep(args)
        return
    with _session(args.cpus):
        row = all_clients_round(args.clients)
    print(
        f"clients: {row['clients']} (MLR, Fashion-MNIST iid, one round of "
        f"all); set-up {row['setup_s']:.1f} s; round {row['round_s']:.2f} s; "
        f"evaluation {row['eval_s']:.2f} s; total RSS {row['rss_gb']:.2f} GB"
    )


@contextlib.contextmanager
def _session(cpus: int) -> Iterator[None]:
    """A local Ray session of ``cpus`` CPUs for one measurement."""
    ray.init(
        num_cpus=cpus,
        include_dashboard=False,
        logging_level="ERROR",  # type: ignore[arg-type]  # Ray stubs: a level name works
        object_store_memory=1500 * 2**20,
    )
    try:
        yield
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
