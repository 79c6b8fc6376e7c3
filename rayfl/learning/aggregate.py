"""Aggregation of client vectors (pure numpy).

FedAvg's sample-size weighted average (McMahan et al. 2017, Algorithm 1):
w ← Σ_k (n_k / Σ_j n_j) w_k over the clients whose update arrived.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["weighted_mean"]


def weighted_mean(
    vectors: npt.NDArray[np.float32], weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float32]:
    """Return Σ_k w_k v_k / Σ_k w_k, summed in row order (deterministic).

    Args:
        vectors: Stacked client vectors, float32 (m, dim), m ≥ 1.
        weights: Non-negative weights (m,), not all zero.

    Returns:
        The weighted mean, float32 (dim,).

    Raises:
        ValueError: If there is no row or the weights sum to zero.

    Example:
        >>> weighted_mean(np.array([[0.0, 2.0], [4.0, 6.0]], np.float32),
        ...               np.array([1.0, 3.0])).tolist()
        [3.0, 5.0]
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    weights = np.asarray(weights, dtype=np.float64)
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError(f"need a non-empty (m, dim) stack, got shape {vectors.shape}")
    total = weights.sum()
    if not total > 0:
        raise ValueError(f"aggregation weights must sum to > 0, got {weights.tolist()}")
    out = np.zeros(vectors.shape[1], dtype=np.float64)
    for w, v in zip(weights / total, vectors, strict=False):
        out += w * v
    return out.astype(np.float32)
