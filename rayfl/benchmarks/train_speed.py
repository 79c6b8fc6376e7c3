"""Env steps per second of ``rayfl train-policy`` in emulate mode, PPO updates included.

Trains PPO (RLlib, the env runner in the driver) on ``--config`` (a run config
with an ``rl`` section, e.g. examples/rl_star_small.yaml) in emulate mode, all
in one process and one Ray session (the config's ``ray`` section): per repeat
first the reference, one FL run per env runner (E = 1, the config's PPO
settings), then every ``--variant`` (``key=value`` overrides of the ``rl``
section, e.g. ``"rl.num_envs_per_env_runner=64 rl.train_batch_size=2560"``;
``torch_threads=N`` sets the learner's torch threads) on the plug-in's
``lanes`` env. A plug-in without a ``lanes`` env gets one line saying so and
the reference alone. Writes ``--csv`` (default docs/performance/train_speed.csv),
one row per (repeat, run):

* ``steps_per_s``: env steps over the wall time of the PPO iterations after
  the first ``--warmup`` (sampling and the PPO update, as ``progress.csv``'s
  ``env_steps_per_s``); iteration 1 holds the client actors' start-up and is
  reported apart as ``first_iteration_s``, and with several
  ``rl.partition_seeds`` the next ones may start the other partitions' actors;
* ``ratio``: ``steps_per_s`` over the reference's of the same repeat;
* ``learn_s``: of ``seconds``, the PPO update's (``progress.csv``'s
  ``learn_s``); the rest is sampling (env steps, RLlib's connectors and
  forward pass);
* ``return_last``: ``episode_return_mean`` of the last iteration (a sanity
  check that learning still moves, not a learning curve).

Example: ``rayfl bench train --config examples/rl_star_small.yaml --variant
"rl.num_envs_per_env_runner=16" --variant "rl.num_envs_per_env_runner=64
rl.train_batch_size=2560 rl.minibatch_size=512" --repeats 2``.
"""

from __future__ import annotations

import argparse
import csv
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from rayfl.benchmarks import BenchError, bench_parser

__all__ = ["FIELDS", "main", "parser"]

FIELDS = [
    "repeat",
    "variant",
    "lanes",
    "train_batch_size",
    "minibatch_size",
    "num_epochs",
    "hidden",
    "torch_threads",
    "timed_iterations",
    "env_steps",
    "seconds",
    "steps_per_s",
    "ratio",
    "learn_s",
    "first_iteration_s",
    "return_last",
    "load_1m",
]
#: The reference run's label in the ``variant`` column.
REFERENCE = "E=1 (reference)"
#: The CSV next to docs/performance.md.
DEFAULT_CSV = "docs/performance/train_speed.csv"


def parser() -> argparse.ArgumentParser:
    """The flags of ``rayfl bench train``."""
    p = bench_parser("train", __doc__)
    p.add_argument(
        "--config",
        default="examples/rl_star_small.yaml",
        help="run config with an rl section (default: examples/rl_star_small.yaml)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=None,
        help="space-separated overrides of one lanes run (repeatable; default: "
        "'rl.num_envs_per_env_runner=16'); torch_threads=N sets torch threads",
    )
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        help="overrides of every run, the reference included (e.g. rounds=10)",
    )
    p.add_argument("--repeats", type=int, default=1, help="repeats of the set")
    p.add_argument(
        "--iterations", type=int, default=3, help="timed PPO iterations per run"
    )
    p.add_argument(
        "--warmup", type=int, default=1, help="untimed PPO iterations first (>= 1)"
    )
    p.add_argument("--csv", default=DEFAULT_CSV, help=f"output (default {DEFAULT_CSV})")
    return p


def split_variant(text: str) -> tuple[list[str], int]:
    """A ``--variant`` → its config overrides and its torch threads.

    Example:
        >>> split_variant("rl.num_envs_per_env_runner=64 torch_threads=2")
        (['rl.num_envs_per_env_runner=64'], 2)
    """
    overrides, threads = [], 1
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep:
            raise BenchError(f"--variant items are key=value, got {item!r}")
        if key == "torch_threads":
            threads = int(value)
            if threads < 1:
                raise BenchError(f"torch_threads must be >= 1, got {threads}")
        else:
            overrides.append(item)
    return overrides, threads


def one_run(
    config: str,
    overrides: list[str],
    threads: int,
    iterations: tuple[int, int],
    out: Path,
) -> dict[str, Any]:
    """Train once; return the row without ``repeat``, ``variant``, ``ratio``.

    ``iterations`` is (warm-up, timed) PPO iterations.
    """
    from rayfl.config import load_config
    from rayfl.train_policy import train_policy

    overrides = [
        "rl.mode=emulate",
        *overrides,
        f"rl.iterations={sum(iterations)}",
        "rl.eval_episodes=0",
        f"rl.checkpoint_every={sum(iterations) + 1}",
        f"output.dir={out}",
    ]
    rl = load_config(config, overrides).rl
    run_dir = train_policy(config, overrides, verbose=False, torch_threads=threads)
    progress = pd.read_csv(run_dir / "progress.csv")
    timed = progress.iloc[iterations[0] :]
    steps, seconds = float(timed["env_steps"].sum()), float(timed["iteration_s"].sum())
    return {
        "lanes": rl.num_envs_per_env_runner,  # type: ignore[union-attr]  # set: load_config fills rl
        "train_batch_size": rl.train_batch_size,  # type: ignore[union-attr]
        "minibatch_size": rl.minibatch_size,  # type: ignore[union-attr]
        "num_epochs": rl.num_epochs,  # type: ignore[union-attr]
        "hidden": "x".join(str(h) for h in rl.hidden),  # type: ignore[union-attr]
        "torch_threads": threads,
        "timed_iterations": len(timed),
        "env_steps": int(steps),
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds, 2),
        "learn_s": round(float(timed["learn_s"].sum()), 2),
        "first_iteration_s": round(float(progress["iteration_s"].iloc[0]), 2),
        "return_last": round(float(progress["episode_return_mean"].iloc[-1]), 3),
        "load_1m": round(os.getloadavg()[0], 1),
    }


def _has_lanes(config: str, overrides: list[str]) -> bool:
    """Whether the config's topology plug-in has a ``lanes`` env (else say so)."""
    from rayfl.config import load_config
    from rayfl.registry import topology_of

    cfg = load_config(config, overrides)
    if "lanes" in topology_of(cfg).envs:
        return True
    print(
        f"topology.kind={cfg.topology.kind} has no `lanes` env yet: measuring the "
        "E = 1 reference only",
        flush=True,
    )
    return False


def _print(row: dict[str, Any]) -> None:
    learn = row["learn_s"] / max(row["seconds"], 1e-9)
    print(
        f"repeat {row['repeat']} {row['variant']:>60s}: {row['steps_per_s']:7.1f} "
        f"env steps/s  x{row['ratio']:.2f}  learner {learn:4.0%}  return "
        f"{row['return_last']:.2f}  (load {row['load_1m']})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    """Measure the reference and every variant per repeat; write the CSV."""
    args = parser().parse_args(argv)
    if args.iterations < 1 or args.warmup < 1 or args.repeats < 1:
        raise BenchError("--iterations, --warmup and --repeats must be >= 1")
    variants = args.variant or ["rl.num_envs_per_env_runner=16"]
    parsed = [split_variant(v) for v in variants]
    from rayfl.cluster.session import RaySession
    from rayfl.config import load_config

    runs = [(REFERENCE, ["rl.num_envs_per_env_runner=1"], 1)]
    if _has_lanes(args.config, list(args.set)):
        runs += [(v, o, t) for v, (o, t) in zip(variants, parsed, strict=True)]
    session = RaySession(load_config(args.config, list(args.set)).ray)
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for repeat in range(args.repeats):
                mine = []
                for label, overrides, threads in runs:
                    row = one_run(
                        args.config,
                        [*args.set, *overrides],
                        threads,
                        (args.warmup, args.iterations),
                        Path(tmp),
                    )
                    mine.append({"repeat": repeat, "variant": label, **row})
                    mine[-1]["ratio"] = round(
                        row["steps_per_s"] / mine[0]["steps_per_s"], 2
                    )
                    _print(mine[-1])
                rows += mine
    finally:
        session.close()
    _write(Path(args.csv), rows)


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_csv = path.with_suffix(".csv.tmp")
    with tmp_csv.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    tmp_csv.replace(path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
