"""rayfl.benchmarks.trainer_bound: the star lanes' training-and-evaluation bound runs."""

import math

from rayfl.benchmarks.trainer_bound import trainer_bound
from rayfl.registry import load


def test_trainer_bound_is_a_finite_rate_that_scales_with_cores() -> None:
    env = load("envs.star.scheduling:WirelessFLEnv")(
        mode="surrogate", overrides=["data.num_clients=6"]
    )
    cfg = env.unwrapped.config  # the default env's config (digits, MLP), N = 6
    one = trainer_bound(cfg, 3, cores=1, repeats=1)
    assert math.isfinite(one) and one > 0
    # cores only divides the CPU time: 4 cores give about 4x one core's bound
    # (two separate timings of a few ms: a wide band, never wall-clock exact)
    four = trainer_bound(cfg, 3, cores=4, repeats=3)
    assert 1.0 < four / one < 16.0
