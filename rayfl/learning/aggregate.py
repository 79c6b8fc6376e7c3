"""Aggregation of client vectors (pure numpy), exact whatever the grouping.

FedAvg's sample-size weighted average (McMahan et al. 2017, Algorithm 1):
w ← Σ_k (n_k / Σ_j n_j) w_k over the clients whose update arrived.

Sums are taken in 64-bit fixed point: each weighted row n_k·v_k is rounded to a
multiple of 2⁻³² and added as an integer. Integer addition is associative, so a
client actor may pre-reduce its own clients into a :class:`PartialSum` and the
server add the partial sums, and the result is bit-for-bit the same as summing
every client at the server, whatever the packing (DESIGN.md determinism rule).

Implementation details:
    1. Resolution 2⁻³² ≈ 2.3e-10 per weighted row; a float32 mean of updates
       of magnitude 1e-4 weighted by 600 samples is resolved to ~4e-9 relative,
       finer than float32's own 6e-8.
    2. Range: |n_k·v_k| < 2³⁰ per element so that up to 2³² rows cannot
       overflow; larger values raise ``OverflowError`` (a diverged client — the
       server rejects non-finite updates before they get here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["FIXED_POINT_SCALE", "PartialSum", "partial_sum", "weighted_mean"]

FIXED_POINT_SCALE = float(2**32)
_LIMIT = float(2**30)


@dataclass(frozen=True)
class PartialSum:
    """Σ_k w_k v_k in fixed point, and Σ_k w_k, over a set of clients.

    Attributes:
        total: int64 (dim,), Σ_k round(w_k v_k · 2³²).
        weight: Σ_k w_k.
        count: Number of rows summed.
    """

    total: npt.NDArray[np.int64]
    weight: float
    count: int

    def __add__(self, other: PartialSum) -> PartialSum:
        return PartialSum(
            self.total + other.total,
            self.weight + other.weight,
            self.count + other.count,
        )

    def mean(self) -> npt.NDArray[np.float32]:
        """Return the weighted mean Σ w v / Σ w as float32.

        Raises:
            ValueError: If the weights sum to zero.
        """
        if not self.weight > 0:
            raise ValueError(f"aggregation weights must sum to > 0, got {self.weight}")
        return (self.total / FIXED_POINT_SCALE / self.weight).astype(np.float32)


def partial_sum(vectors: npt.NDArray[np.float32], weights: npt.ArrayLike) -> PartialSum:
    """Return the fixed-point :class:`PartialSum` of weighted rows.

    Args:
        vectors: Stacked client vectors, float32 (m, dim); m may be 0.
        weights: Non-negative weights (m,).

    Returns:
        The partial sum.

    Raises:
        OverflowError: If some |w·v| ≥ 2³⁰.

    Example:
        >>> s = partial_sum(np.array([[0.5, 1.0]], np.float32), [2.0])
        >>> (s.total.tolist(), s.weight)
        ([4294967296, 8589934592], 2.0)
    """
    rows = np.asarray(vectors, dtype=np.float32)
    w = np.asarray(weights, dtype=np.float64)
    total = np.zeros(rows.shape[1] if rows.ndim == 2 else 0, dtype=np.int64)
    for weight, row in zip(w, rows, strict=True):
        scaled = weight * row.astype(np.float64)
        if np.abs(scaled).max(initial=0.0) >= _LIMIT:
            raise OverflowError(
                f"a weighted update reaches {np.abs(scaled).max():.3g} ≥ 2^30: "
                "the client diverged"
            )
        total += np.rint(scaled * FIXED_POINT_SCALE).astype(np.int64)
    return PartialSum(total, float(w.sum()), len(w))


def weighted_mean(
    vectors: npt.NDArray[np.float32], weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float32]:
    """Return Σ_k w_k v_k / Σ_k w_k (fixed-point sum, grouping-independent).

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
