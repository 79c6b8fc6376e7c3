"""Scheduling env and policy speed: env steps per second, policy decision times.

Prints:
  1. surrogate-mode env steps per second (default small system, random actions,
     and the N=1000, K=100 system), on one core;
  2. decision time of each registered policy for N=1000 clients, K=100
     subchannels (median of 20 calls on observations of the real env).

Run:  rayfl bench env
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rayfl.registry import ENVS, PARTICIPANT_RULES, POLICIES, load, make_policy

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


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print its table (``argv``: its command-line flags)."""
    env_class = load(ENVS["star"])  # WirelessFL-v0's class
    small = env_class(mode="surrogate")
    print(f"surrogate env, N=10 K=4:      {steps_per_second(small, 3000):8.0f} steps/s")
    big = env_class(mode="surrogate", overrides=BIG)
    print(f"surrogate env, N=1000 K=100:  {steps_per_second(big, 300):8.0f} steps/s")
    obs, _ = big.reset(seed=0)
    print("policy decision time at N=1000, K=100 (median of 20 calls):")
    for name in [n for n in POLICIES if n not in PARTICIPANT_RULES]:
        policy = make_policy(name, big)
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
