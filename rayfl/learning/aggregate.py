"""Aggregation of client vectors (pure numpy), exact whatever the grouping.

FedAvg's sample-size weighted average (McMahan et al. 2017, Algorithm 1):
w ← Σ_k (n_k / Σ_j n_j) w_k over the clients whose update arrived.

The sum Σ_k n_k·w_k is exact (:mod:`rayfl.exactsum`): each weighted row is
taken in float64 and added exactly, as integers, so a client actor may
pre-reduce its own clients into a :class:`PartialSum` and the server add the
partial sums, and the result is bit-for-bit the same as summing every client at
the server, whatever the packing (DESIGN.md determinism rule). Any finite
update is summed without overflow or wrap-around; the exact sum is rounded once
to float64, divided by Σ n_k and cast to float32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rayfl.exactsum import ExactSum, exact_sum

__all__ = ["PartialSum", "partial_sum", "weighted_mean"]

PartialSum = ExactSum
"""Σ_k w_k v_k (exact) and Σ_k w_k over a set of clients; ``+`` adds exactly."""


def partial_sum(vectors: npt.NDArray[np.float32], weights: npt.ArrayLike) -> PartialSum:
    """Return the exact :class:`PartialSum` of the weighted rows w_k·v_k.

    Args:
        vectors: Stacked client vectors, float32 (m, dim); m may be 0.
        weights: Non-negative weights (m,).

    Returns:
        The partial sum.

    Raises:
        ValueError: If a weighted row is not finite (the server rejects such
            uploads before summing).

    Example:
        >>> s = partial_sum(np.array([[9e8], [9e8], [9e8]], np.float32), [1, 1, 1])
        >>> s.mean().tolist(), float(s.weight), s.count
        ([900000000.0], 3.0, 3)
    """
    return exact_sum(np.asarray(vectors, dtype=np.float32), weights)


def weighted_mean(
    vectors: npt.NDArray[np.float32], weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float32]:
    """Return Σ_k w_k v_k / Σ_k w_k (exact sum, grouping-independent).

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
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError(f"need a non-empty (m, dim) stack, got shape {vectors.shape}")
    return partial_sum(vectors, weights).mean()
