"""Ray lifecycle: reuse, connect or start — and only stop what we started.

DESIGN.md: reuse an initialized session (notebooks), connect with
``ray.address: auto`` on a cluster, otherwise start a local one; never call
``ray.shutdown()`` on a session the user started.
"""

from __future__ import annotations

import os

import ray

from rayfl.config import RayConfig

__all__ = ["RaySession"]


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
            ray.init(
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
