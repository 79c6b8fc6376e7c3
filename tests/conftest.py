"""Shared fixtures: one Ray session per test module (2 CPUs at most)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "1")


@pytest.fixture(scope="module")
def ray_session():
    import ray

    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            logging_level="ERROR",
            runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
        )
    yield
    ray.shutdown()
