"""Aggregation speed: the exact sum against the former 64-bit fixed point.

Workload: m = 100 client updates of d ≈ 1e5 parameters (an MLP 784-128-10 on
Fashion-MNIST-shaped data has d = 101,770), float32, weights = sample counts
(100..600). Two update distributions: N(0, 1e-3²) (typical SGD deltas) and the
real deltas of one local epoch (600 samples, batch 32, lr 0.05) from a common
start, so the tiny and zero entries of a trained layer are included.

Paths, interleaved over repeats (best time kept):
- ``fixed``: the former aggregation (each weighted row rounded to a multiple of
  2⁻³² and added as int64; overflows at 2³⁰, wraps below);
- ``exact``: :func:`rayfl.learning.aggregate.partial_sum` then ``mean()``.

For scale, the time of one client's local epoch is printed, and the ratio of a
round's CPU time (100 such local epochs + one aggregation) new/old. In a run the
client actors pre-reduce their own clients in parallel, so the server's share
is smaller still.
The machine may be shared: compare ratios, not seconds.

Run:  .venv/bin/python bench/aggregate_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from rayfl.learning.aggregate import partial_sum
from rayfl.learning.models import FlatModel, build_model, init_parameters
from rayfl.learning.train import local_sgd


def fixed_point_mean(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The former aggregation (64-bit fixed point, 2⁻³² resolution), for timing."""
    scale = float(2**32)
    total = np.zeros(rows.shape[1], dtype=np.int64)
    for weight, row in zip(weights, rows, strict=True):
        scaled = weight * row.astype(np.float64)
        if np.abs(scaled).max(initial=0.0) >= float(2**30):
            raise OverflowError("≥ 2^30")
        total += np.rint(scaled * scale).astype(np.int64)
    return (total / scale / weights.sum()).astype(np.float32)


def trained_deltas(m: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """Return m real one-epoch deltas of an MLP (d = 101,770) and seconds per client."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    module = build_model("mlp", input_shape=(784,), num_classes=10, hidden=(128,))
    init_parameters(module, torch.Generator().manual_seed(seed))
    model = FlatModel(module)
    start = model.vector()
    x = rng.random((600, 784), dtype=np.float32)
    y = rng.integers(0, 10, 600)
    deltas = []
    t0 = time.perf_counter()
    for k in range(min(m, 4)):  # four real deltas, the rest are perturbed copies
        res = local_sgd(
            model, start, x, y, lr=0.05, batch_size=32, rng=np.random.default_rng(k)
        )
        deltas.append(np.asarray(res.vector, np.float32) - start)
    per_client = (time.perf_counter() - t0) / len(deltas)
    base = np.stack(deltas)
    out = base[np.arange(m) % len(base)] * (1.0 + 1e-3 * rng.standard_normal((m, 1)))
    return out.astype(np.float32), per_client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clients", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    m = args.clients
    weights = rng.integers(100, 601, m).astype(np.float64)
    real, per_client = trained_deltas(m)
    workloads = {
        "normal(0, 1e-3)": (rng.standard_normal((m, real.shape[1])) * 1e-3).astype(
            np.float32
        ),
        "trained MLP deltas": real,
    }
    print(f"d = {real.shape[1]}, m = {m}; one client's local epoch: {per_client:.3f} s")
    print(f"{'workload':22s} {'fixed s':>9s} {'exact s':>9s} {'exact/fixed':>12s}")
    for name, rows in workloads.items():
        best = {"fixed": np.inf, "exact": np.inf}
        for _ in range(args.repeats):
            t = time.perf_counter()
            a = fixed_point_mean(rows, weights)
            best["fixed"] = min(best["fixed"], time.perf_counter() - t)
            t = time.perf_counter()
            b = partial_sum(rows, weights).mean()
            best["exact"] = min(best["exact"], time.perf_counter() - t)
        diff = float(np.abs(a - b).max())
        train = m * per_client  # one round's local training, CPU seconds
        round_ratio = (train + best["exact"]) / (train + best["fixed"])
        print(
            f"{name:22s} {best['fixed']:9.4f} {best['exact']:9.4f} "
            f"{best['exact'] / best['fixed']:12.2f}   (max |Δ| {diff:.2g}; "
            f"round incl. {m} local epochs: ×{round_ratio:.3f})"
        )


if __name__ == "__main__":
    main()
