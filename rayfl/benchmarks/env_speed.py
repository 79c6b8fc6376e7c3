"""Scheduling env and policy speed: env steps per second, policy decision times.

``rayfl bench env`` (``--mode surrogate``, the default) prints:
  1. surrogate-mode env steps per second (default small system, random actions,
     and the N=1000, K=100 system), on one core;
  2. decision time of each registered policy for N=1000 clients, K=100
     subchannels (median of 20 calls on observations of the real env).

``rayfl bench env --mode emulate`` measures, in one process and one Ray session
(2 CPUs), the emulate-mode steps per second of the default ``WirelessFL-v0``
(digits, N=10, K=4, MLP [32], FedAvg) as one env and as the vector env
(``envs.star.vector``, E lanes in lockstep over shared actors) for each ``--lanes``
E, the surrogate-mode ``WirelessFL-v0`` as one env, and the vector env (emulate
lanes) of every other topology that has one (``HierarchicalFL-v0``,
``D2DNeighbor-v0``, default configs) for each E, all with random actions and
episodes ending (and resetting) inside the timed steps, and writes ``--csv``
(default docs/performance/env_emulate.csv): one row per env with
``steps_per_s`` (env steps: one lane's step counts one), ``ratio`` (over the
single emulate env's steps per second of the same run) and ``vs_surrogate``
(over ``surrogate_steps_per_s``: for a vector row, the mean of the surrogate
env's rate timed just before and just after it, since the machine's speed
drifts within a run; for the other rows, the ``surrogate`` row's). The ``trainer-bound`` rows are no
env: the steps per second E star lanes would reach if their hosts' training
and test evaluation were all the work, split perfectly over 2 cores
(:mod:`rayfl.benchmarks.trainer_bound`; ``seconds`` is that work's CPU time
halved). ``--scenario NAME`` adds the vector env of a ``rayfl bench policies``
scenario (its topology's vector env on its config: e.g. ``d2d-small-mobile``,
the moving D2D world with every device model on) for each E, as the rows
``NAME-vector``.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from rayfl.benchmarks import bench_parser
from rayfl.benchmarks.trainer_bound import trainer_bound
from rayfl.registry import (
    POLICIES,
    build_policy,
    client_set_only,
    load,
    topology_names,
    topology_of,
)

BIG = [
    "data.dataset=synthetic",
    "data.num_clients=1000",
    "wireless.num_subchannels=100",
    "model.kind=mlr",
]


def steps_per_second(env: Any, steps: int) -> float:
    """Return random-action env steps per second over ``steps`` steps."""
    env.reset(seed=0)
    env.action_space.seed(0)
    t0 = time.perf_counter()
    for _ in range(steps):
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated:
            env.reset()
    return steps / (time.perf_counter() - t0)


FIELDS = [
    "repeat",
    "env",
    "lanes",
    "steps",
    "seconds",
    "steps_per_s",
    "ratio",
    "vs_surrogate",
    "surrogate_steps_per_s",
    "load_1m",
]


def timed_steps(env: Any, steps: int, *, vector: bool) -> tuple[int, float]:
    """Return (env steps, seconds) of ``steps`` random-action steps after a warm-up.

    A single env is reset when its episode ends (inside the timed loop, as the
    vector env's autoreset is); a vector step counts one env step per lane.
    """
    env.reset(seed=0)
    env.action_space.seed(0)
    for _ in range(2):
        env.step(env.action_space.sample())
    t0 = time.perf_counter()
    for _ in range(steps):
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        if not vector and (terminated or truncated):
            env.reset()
    seconds = time.perf_counter() - t0
    return steps * (int(env.num_envs) if vector else 1), seconds


def emulate(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Measure the single emulate env and the vector env; return the CSV rows.

    Each repeat times the single env, then each vector env, in turn; a row's
    ``ratio`` is against the single env of its own repeat.
    """
    from rayfl.cluster.session import RaySession
    from rayfl.config import RayConfig

    session = RaySession(RayConfig(num_cpus=2, object_store_memory_mb=300))
    rows: list[dict[str, Any]] = []
    try:
        for repeat in range(args.repeats):
            rows += _one_repeat(args, repeat)
    finally:
        session.close()
    return rows


def _default_env(role: str = "single") -> str:
    """The default topology's (the first registered: the star's) env in ``role``."""
    return topology_of(topology_names()[0]).envs[role]


def _one_repeat(args: argparse.Namespace, repeat: int) -> list[dict[str, Any]]:
    single = load(_default_env())()  # WirelessFL-v0 defaults: emulate
    try:
        steps, seconds = timed_steps(single, args.steps, vector=False)
    finally:
        single.close()
    rows = [_row(repeat, "single", 1, steps, seconds)]
    surrogate = load(_default_env())(mode="surrogate")
    steps, seconds = timed_steps(surrogate, 20 * args.steps, vector=False)
    rows.append(_row(repeat, "surrogate", 1, steps, seconds))
    for lanes in args.lanes:  # the star lanes' hosts' arithmetic alone: a bound
        rate = trainer_bound(surrogate.unwrapped.config, lanes)
        rows.append(_row(repeat, "trainer-bound", lanes, lanes, lanes / rate))
    beside = [rows[1]["steps_per_s"]]

    def bracket(row: dict[str, Any]) -> None:
        """Time the surrogate again; the row's reference: the mean of both sides."""
        count, secs = timed_steps(surrogate, 10 * args.steps, vector=False)
        beside.append(count / secs)
        row["surrogate_steps_per_s"] = round((beside[-2] + beside[-1]) / 2, 2)

    for i, (name, role) in enumerate(_vector_envs()):
        # the default topology's (the first registered) rows keep the plain label
        label = "vector" if i == 0 else f"{name}-vector"
        for lanes in args.lanes:
            env = load(topology_of(name).envs[role])(num_envs=lanes)
            try:
                steps, seconds = timed_steps(env, args.vector_steps, vector=True)
            finally:
                env.close()
            rows.append(_row(repeat, label, lanes, steps, seconds))
            bracket(rows[-1])
    rows += scenario_rows(
        args.scenario, args.lanes, args.vector_steps, repeat, after=bracket
    )
    base = rows[0]["steps_per_s"]
    for row in rows:
        reference = row.setdefault("surrogate_steps_per_s", rows[1]["steps_per_s"])
        row["ratio"] = round(row["steps_per_s"] / base, 2)
        row["vs_surrogate"] = round(row["steps_per_s"] / reference, 2)
        print(
            f"repeat {repeat} {row['env']:17s} E={row['lanes']:3d}: "
            f"{row['steps_per_s']:8.1f} steps/s  x{row['ratio']:.2f} one emulate "
            f"env, x{row['vs_surrogate']:.2f} the surrogate beside it",
            flush=True,
        )
    return rows


def scenario_rows(
    names: list[str],
    lanes: list[int],
    steps: int,
    repeat: int,
    *,
    after: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Time each scenario's vector env (its topology's, on its config) at each E.

    Rows ``<scenario>-vector`` without ``ratio``/``vs_surrogate`` (the caller
    adds them); ``after(row)`` runs after each. Needs a Ray session.
    """
    rows = []
    for name, (scenario, role) in zip(names, _scenario_envs(names), strict=True):
        for e in lanes:
            env = load(role)(num_envs=e, config=scenario.config)
            try:
                count, seconds = timed_steps(env, steps, vector=True)
            finally:
                env.close()
            rows.append(_row(repeat, f"{name}-vector", e, count, seconds))
            if after is not None:
                after(rows[-1])
    return rows


def _scenario_envs(names: list[str]) -> list[tuple[Any, str]]:
    """(scenario, its topology's vector env entry point) per name.

    Raises:
        ValueError: For an unknown scenario, or one whose topology has no
            vector env.
    """
    from rayfl.benchmarks.policies.scenarios import scenario_config, scenarios

    known, out = scenarios(), []
    for name in names:
        if name not in known:
            scenario_config(name)  # raises, listing the known names
        scenario = known[name]
        role = topology_of(scenario.topology).envs.get("vector")
        if role is None:
            raise ValueError(
                f"scenario {name!r}: topology {scenario.topology!r} has no vector env"
            )
        out.append((scenario, role))
    return out


def _vector_envs() -> list[tuple[str, str]]:
    """(topology, role) of every registered topology with a vector env (emulate lanes)."""
    return [
        (name, "vector")
        for name in topology_names()
        if "vector" in topology_of(name).envs
    ]


def _row(
    repeat: int, env: str, lanes: int, steps: int, seconds: float
) -> dict[str, Any]:
    return {
        "repeat": repeat,
        "env": env,
        "lanes": lanes,
        "steps": steps,
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds, 2),
        "load_1m": round(os.getloadavg()[0], 1),
    }


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """Write ``rows`` to ``path`` (a temp file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``rayfl bench env``."""
    p = bench_parser("env", __doc__)
    p.add_argument(
        "--mode",
        choices=("surrogate", "emulate"),
        default="surrogate",
        help="surrogate: surrogate-mode steps/s and policy decision times; emulate: "
        "the emulation's single env and vector envs, written to --csv "
        "(default surrogate)",
    )
    p.add_argument(
        "--lanes",
        type=int,
        nargs="+",
        default=[16, 64, 128, 256],
        help="E of the vector env (emulate; default 16 64 128 256)",
    )
    p.add_argument(
        "--steps", type=int, default=50, help="timed steps of the single env"
    )
    p.add_argument(
        "--vector-steps", type=int, default=25, help="timed steps of each vector env"
    )
    p.add_argument(
        "--repeats", type=int, default=1, help="measurements of every env, in turn"
    )
    p.add_argument(
        "--scenario",
        nargs="+",
        default=[],
        metavar="NAME",
        help="emulate: also time these scenarios' vector envs (rows NAME-vector; "
        "e.g. d2d-small-mobile; the names of rayfl bench policies --scenario)",
    )
    p.add_argument(
        "--csv",
        default="docs/performance/env_emulate.csv",
        help="CSV of --mode emulate (default docs/performance/env_emulate.csv)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table (``argv``: its command-line flags)."""
    parser_ = parser()
    args = parser_.parse_args(argv)
    if min(args.lanes) < 1 or min(args.steps, args.vector_steps, args.repeats) < 1:
        parser_.error("--lanes, --steps, --vector-steps and --repeats must be >= 1")
    if args.scenario and args.mode != "emulate":
        parser_.error("--scenario times vector envs: it needs --mode emulate")
    try:
        _scenario_envs(args.scenario)
    except ValueError as exc:
        parser_.error(str(exc))
    if args.mode == "emulate":
        write_csv(emulate(args), Path(args.csv))
        print(f"wrote {args.csv}")
        return
    env_class = load(_default_env())  # WirelessFL-v0's class
    small = env_class(mode="surrogate")
    print(f"surrogate env, N=10 K=4:      {steps_per_second(small, 3000):8.0f} steps/s")
    big = env_class(mode="surrogate", overrides=BIG)
    print(f"surrogate env, N=1000 K=100:  {steps_per_second(big, 300):8.0f} steps/s")
    obs, _ = big.reset(seed=0)
    print("policy decision time at N=1000, K=100 (median of 20 calls):")
    for name in [n for n in POLICIES if not client_set_only(n)]:
        policy = build_policy(name, big)
        policy.reset(seed=0)
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            action = policy(obs)
            times.append(time.perf_counter() - t0)
            assert big.action_space.contains(action)
        print(f"  {name:18s} {1e3 * np.median(times):7.2f} ms")


if __name__ == "__main__":
    main()
