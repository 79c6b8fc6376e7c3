"""Steps/s of ``D2DNeighbor-v0`` emulate: one env vs the D2D lanes (issue 47).

Run: ``PYTHONPATH=. .venv/bin/python bench/d2d_lanes_speed.py [--profile]``.
One Ray session (2 CPUs) for all three: one ``D2DNeighborEnv`` (30 steps), then
:func:`envs.d2d.vector.lanes_env` at E = 64 and E = 256 (20 lockstep steps),
random actions from seeded action spaces, default config. Reset time is not
counted; the driver's CPU time per lockstep step is printed too (the
machine's load does not inflate it as much as the wall time). ``--profile`` prints the cProfile top of the E = 256 steps.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import ray


def _single(steps: int) -> float:
    from envs.d2d.neighbor import D2DNeighborEnv

    env = D2DNeighborEnv(mode="emulate")
    env.reset(seed=0)
    env.action_space.seed(0)
    start = time.perf_counter()
    for _ in range(steps):
        env.step(env.action_space.sample())
    seconds = time.perf_counter() - start
    env.close()
    return steps / seconds


def _lanes(num_envs: int, steps: int, profile: bool) -> float:
    from envs.d2d.vector import lanes_env

    venv = lanes_env(num_envs)
    venv.reset(seed=0)
    venv.action_space.seed(0)
    actions = [venv.action_space.sample() for _ in range(steps)]
    prof = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    for action in actions:
        venv.step(action)
    if prof:
        prof.disable()
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    print(f"  E={num_envs}: driver CPU {1e3 * cpu / steps:.0f} ms per lockstep step")
    venv.close()
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return num_envs * steps / seconds


def main(argv: list[str]) -> None:
    """Print the three rates (steps/s)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print(f"single env, 30 steps: {_single(30):.1f} steps/s", flush=True)
        for num_envs in (64, 256):
            rate = _lanes(num_envs, 20, "--profile" in argv and num_envs == 256)
            print(f"lanes E={num_envs}, 20 steps: {rate:.1f} steps/s", flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
