"""One 2-CPU Ray session for the golden cases, started as the recording started it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_session():
    """The recording's Ray session (``record.start_ray``: retries a slow start-up)."""
    import ray

    from tests.golden.record import start_ray

    start_ray()
    yield
    ray.shutdown()
