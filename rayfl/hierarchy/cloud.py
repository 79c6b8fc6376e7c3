"""The hierarchy's cloud actor: the flat ``CloudServer`` plus the global average.

w̄^(t_{k+1}) = Σ_c ϱ_c v_c (eq. 14): the cloud averages the edges' v_c in
float64, in edge-id order, and returns float32. With one edge the result is v_0
exactly (a float32 vector times an integer weight and divided back is exact in
float64), so a one-edge hierarchy reproduces the flat engine bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import ray

from rayfl.actors.cloud import ServerHost

__all__ = ["HierCloudHost", "HierCloudServer"]


class HierCloudHost(ServerHost):
    """``ServerHost`` extended with the global aggregation of edge models."""

    def global_aggregate(
        self, weights: list[float], *edge_models: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """Return Σ_c ϱ_c v_c / Σ_c ϱ_c (eq. 14).

        Args:
            weights: ϱ_c per edge (equal or subnet sample counts).
            *edge_models: v_c per edge, float32 (dim,), edge-id order.

        Returns:
            The new global model, float32.
        """
        w = np.asarray(weights, dtype=np.float64)
        total = np.zeros(len(edge_models[0]), dtype=np.float64)
        for weight, v in zip(w, edge_models, strict=True):
            total += weight * np.asarray(v, dtype=np.float64)
        return (total / w.sum()).astype(np.float32)


# Any: Ray's stubs give the handle's methods no .remote
HierCloudServer: Any = ray.remote(HierCloudHost)
"""``HierCloudHost`` as a Ray actor class."""
