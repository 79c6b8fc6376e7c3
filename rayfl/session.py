"""Ray lifecycle: reuse, connect or start — and only stop what we started.

DESIGN.md: reuse an initialized session (notebooks), connect with
``ray.address: auto`` on a cluster, otherwise start a local one; never call
``ray.shutdown()`` on a session the user started.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import ray

from rayfl.config import RayConfig

__all__ = ["RaySession"]

#: Local start-up attempts. Ray waits a hard-coded 30 s for its raylet; on a
#: loaded 2-core machine that wait can run out although nothing is wrong.
START_ATTEMPTS = 3
_STARTUP_TIMEOUT = "timed out during startup"


def _init_with_retries(
    init: Callable[..., Any], attempts: int = START_ATTEMPTS, **kwargs: Any
) -> None:
    """Call ``init(**kwargs)``; retry when Ray's start-up wait runs out.

    Only Ray's start-up timeout is retried (after ``ray.shutdown()`` to clear the
    half-started node, with a growing pause); any other error propagates.
    """
    for attempt in range(1, attempts + 1):
        try:
            init(**kwargs)
            return
        except Exception as error:  # Ray raises a bare Exception here
            if _STARTUP_TIMEOUT not in str(error) or attempt == attempts:
                raise
            ray.shutdown()
            print(
                f"rayfl: Ray start-up timed out (machine busy?); retry {attempt}/"
                f"{attempts - 1}"
            )
            time.sleep(5.0 * attempt)


class RaySession:
    """A handle on the Ray session a run uses.

    Args:
        config: The ``ray`` config section.

    Attributes:
        started_here: True when this object started Ray (and so stops it).
    """

    def __init__(self, config: RayConfig) -> None:
        self.started_here = False
        if ray.is_initialized():
            return
        kwargs: dict[str, object] = {
            "include_dashboard": False,
            "logging_level": "ERROR",
            "log_to_driver": True,
            "configure_logging": True,
        }
        address = config.address
        if address is None and os.environ.get("RAY_ADDRESS"):
            # ray.init() would follow RAY_ADDRESS anyway: say so instead of starting
            # a "local" session that is in fact a cluster.
            address = os.environ["RAY_ADDRESS"]
            print(
                f"rayfl: connecting to RAY_ADDRESS={address} (unset it for a local run)"
            )
        if address is not None:
            ray.init(address=address, **kwargs)
        else:
            # Workers import torch: keep each to one thread (DESIGN.md).
            env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            os.environ.setdefault("RAY_DEDUP_LOGS", "1")
            _init_with_retries(
                ray.init,
                num_cpus=config.num_cpus,
                object_store_memory=(
                    config.object_store_memory_mb * 2**20
                    if config.object_store_memory_mb
                    else None
                ),
                runtime_env={"env_vars": env},
                **kwargs,
            )
        self.started_here = True

    @staticmethod
    def num_cpus() -> float:
        """Return the CPUs of the cluster (at least 1)."""
        return max(1.0, float(ray.cluster_resources().get("CPU", 1.0)))

    def close(self) -> None:
        """Shut Ray down if (and only if) this object started it."""
        if self.started_here and ray.is_initialized():
            ray.shutdown()
        self.started_here = False
