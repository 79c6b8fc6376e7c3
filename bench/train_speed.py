"""Local-training speed: per-client loop vs vectorized, and a loop step vs arithmetic.

Workload (issue 12 items 1 and 6): random data shaped like Fashion-MNIST (1×28×28,
10 classes) held in one array with clients as row slices (as ``FederatedData``
gives them), batch 32, one local epoch, lr 0.05, one torch thread. Paths, all in
the same process run, interleaved over repeats (best time kept):

- ``loop``: ``local_sgd`` per client (autograd), the reference;
- ``fast``: ``fast_local_sgd`` per client (hand-written MLR/MLP step);
- ``vectorized``: ``local_sgd_many`` (matmul kernel for MLR/MLP, vmap for CNN);
- ``vmap``: ``local_sgd_many(kernel="vmap")`` for MLR/MLP.

The second table profiles one step of the loop: measured ms per step against the
step's arithmetic (FLOPs from ``torch.utils.flop_counter`` / peak ``torch.mm``
rate measured here). The machine may be shared: compare ratios, not seconds.

Run:  .venv/bin/python bench/train_speed.py [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from rayfl.learning.models import FlatModel, build_model, init_parameters
from rayfl.learning.train import LocalTrainResult, local_sgd
from rayfl.learning.vectorized import choose_path, fast_local_sgd, local_sgd_many

SHAPE = (1, 28, 28)
LR = 0.05
# (kind, clients, samples per client, batch size)
WORKLOADS = [
    ("mlr", 10, 600, 32),
    ("mlr", 100, 600, 32),
    ("mlr", 1000, 60, 32),
    ("mlr", 100, 600, 128),
    ("mlp", 2, 600, 32),
    ("mlp", 10, 600, 32),
    ("mlp", 100, 600, 32),
    ("mlp", 10, 600, 128),
    ("cnn", 10, 200, 32),
]
QUICK = [("mlr", 10, 600, 32), ("mlp", 10, 600, 32), ("cnn", 4, 64, 32)]


def make_model(kind: str) -> FlatModel:
    """Build the bench's model (MLP 784-200-10) with a fixed initialisation."""
    fm = FlatModel(build_model(kind, input_shape=SHAPE, num_classes=10, hidden=(200,)))
    init_parameters(fm.module, torch.Generator().manual_seed(0))
    return fm


def make_data(
    clients: int, samples: int, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random Fashion-MNIST-shaped data, one array, clients as row slices."""
    rng = np.random.default_rng(seed)
    x = rng.random((clients * samples, *SHAPE), dtype=np.float32)
    y = rng.integers(0, 10, clients * samples)
    return [
        (x[i * samples : (i + 1) * samples], y[i * samples : (i + 1) * samples])
        for i in range(clients)
    ]


def peak_gflops() -> float:
    """Best fp32 ``torch.mm`` rate of 2048×2048 matrices on this thread, GFLOP/s."""
    a = torch.rand(2048, 2048)
    torch.mm(a, a)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        torch.mm(a, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * 2048**3 / best / 1e9


def step_flops(fm: FlatModel, batch_size: int) -> float:
    """FLOPs of one autograd SGD step (forward + backward) on one batch."""
    x = torch.rand(batch_size, *SHAPE)
    y = torch.randint(0, 10, (batch_size,))
    with FlopCounterMode(display=False) as counter:
        loss = F.cross_entropy(fm.module(x), y)
        torch.autograd.grad(loss, fm.params)
    return float(counter.get_total_flops())


def paths(
    kind: str, data: list[tuple[np.ndarray, np.ndarray]], batch_size: int
) -> dict[str, Callable[[], list[np.ndarray]]]:
    """The timed paths of one workload; each returns the trained vectors."""
    fm = make_model(kind)
    start = fm.vector()
    starts = np.tile(start, (len(data), 1))

    def rngs() -> list[np.random.Generator]:
        return [np.random.default_rng(i) for i in range(len(data))]

    def loop(fn: Callable[..., LocalTrainResult]) -> Callable[[], list[np.ndarray]]:
        def run() -> list[np.ndarray]:
            return [
                fn(fm, start, x, y, lr=LR, batch_size=batch_size, rng=r).vector
                for (x, y), r in zip(data, rngs(), strict=True)
            ]

        return run

    def many(kernel: str) -> Callable[[], list[np.ndarray]]:
        def run() -> list[np.ndarray]:
            res = local_sgd_many(
                fm,
                starts,
                data,
                lr=LR,
                batch_size=batch_size,
                rngs=rngs(),
                kernel=kernel,
            )
            return [r.vector for r in res]

        return run

    out = {"loop": loop(local_sgd)}
    if kind != "cnn":
        out["fast"] = loop(fast_local_sgd)
    out["vectorized"] = many("auto")
    if kind != "cnn":
        out["vmap"] = many("vmap")
    return out


def main() -> None:
    """Time every workload's paths and print the two tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny workloads")
    args = parser.parse_args()
    torch.set_num_threads(1)
    workloads = QUICK if args.quick else WORKLOADS
    runs = {w: paths(w[0], make_data(w[1], w[2]), w[3]) for w in workloads}
    best: dict[tuple, dict[str, float]] = {w: {} for w in workloads}
    diff: dict[tuple, float] = {}
    peaks = [peak_gflops()]
    for w, fns in runs.items():  # warm-up and equality check
        ref = np.stack(fns["loop"]())
        diff[w] = max(float(np.abs(np.stack(f()) - ref).max()) for f in fns.values())
    for _ in range(args.repeats):
        for w, fns in runs.items():
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                seconds = time.perf_counter() - t0
                best[w][name] = min(best[w].get(name, float("inf")), seconds)
        peaks.append(peak_gflops())
    peak = max(peaks)

    cols = ["fast", "vectorized", "vmap"]
    print(f"threads=1  epochs=1  lr={LR}  repeats={args.repeats} (best kept)")
    head = " | ".join(f"{c} s (ratio)" for c in cols)
    print(f"| model | clients × samples | B | loop s | {head} | max abs Δ | rule |")
    print("|" + "---|" * 9)
    for (kind, m, n, batch), times in best.items():
        base = times["loop"]
        cells = " | ".join(
            f"{times[c]:.3f} ({times[c] / base:.2f})" if c in times else "—"
            for c in cols
        )
        rule = choose_path(kind, make_model(kind).spec.dim, batch, m)
        delta = diff[(kind, m, n, batch)]
        print(
            f"| {kind} | {m} × {n} | {batch} | {base:.3f} | {cells} | {delta:.1e} "
            f"| {rule} |"
        )

    print(f"\npeak fp32 torch.mm (2048², 1 thread): {peak:.1f} GFLOP/s")
    print(
        "| model | B | FLOPs/step | arithmetic ms | loop ms/step (× arith) "
        "| fast ms/step (× arith) |"
    )
    print("|---|---|---|---|---|---|")
    seen: set[str] = set()
    for (kind, m, n, batch), times in best.items():
        if kind in seen or batch != 32:
            continue
        seen.add(kind)
        steps = m * -(-n // batch)
        flops = step_flops(make_model(kind), batch)
        arith = flops / (peak * 1e9) * 1e3
        step_cells = []
        for name in ("loop", "fast"):
            if name in times:
                per_step = times[name] / steps * 1e3
                step_cells.append(f"{per_step:.3f} ({per_step / arith:.1f}×)")
            else:
                step_cells.append("—")
        print(
            f"| {kind} | {batch} | {flops / 1e6:.1f} M | {arith:.3f} | "
            + " | ".join(step_cells)
            + " |"
        )


if __name__ == "__main__":
    main()
