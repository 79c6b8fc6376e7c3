"""A 2,000-client MLR round runs in the default suite (issue 12)."""

import time

import numpy as np

from rayfl.config import load_config
from rayfl.engine import Engine
from rayfl.schedule import Schedule


def test_two_thousand_client_round(ray_session):
    cfg = load_config(
        {
            "data": {
                "dataset": "synthetic",
                "num_clients": 2000,
                "max_samples_per_client": 60,
            },
            "model": {"kind": "mlr"},
            "algorithm": {"batch_size": 16, "lr": 0.05},
        }
    )
    system = Engine(cfg)
    try:
        start = time.perf_counter()
        result = system.run_round(0, Schedule.of(np.arange(2000)))
        elapsed = time.perf_counter() - start
        assert len(result.delivered) == 2000
        assert system.local_updates() == [1] * 2000
        # The bound (generous on purpose: CI machines are noisy; the
        # benchmark bench/scale.py measures the real number).
        assert elapsed < 30, elapsed
    finally:
        system.close()
