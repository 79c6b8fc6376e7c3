"""Sparsification of an uplink vector: random Bernoulli mask or top-k.

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| s_i^t (seed 002 §2.3) | ``keep_fraction`` | probability p that a coordinate is kept |
| m_i^t (seed 002 §2.3) | ``Payload.indices`` | positions of kept coordinates |
| abs(w) | ``dim`` | number of coordinates d |

Implementation details:

1. Random sparsification draws an i.i.d. Bernoulli(p) keep-mask, one draw per
   coordinate, as seed 002 §2.3 prescribes ("NOT an exact-k selection"); the
   number kept is Binomial(d, p), so its mean is p·d.
2. By default kept values are rescaled by 1/p (carried as ``Payload.scale``) so
   the decoded vector is unbiased: E[decoded] = x. Seed 002 itself sums sparse
   updates without rescaling (§2.2-2.3); ``rescale=False`` reproduces that.
3. Top-k keeps exactly k = max(1, ⌈p·d⌉) coordinates of largest magnitude (ties
   broken by ``numpy.argpartition``), with no rescaling; it is deterministic and
   biased.
4. The mask is data-independent (random) and costs no privacy (seed 002 §2.3);
   top-k looks at the values and therefore must come after the DP noise.
5. ``sparsify_fraction`` defaults to 1 (dense), the choice of seed 002
   [AMBIG-17] for the baselines.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from rayfl.compression.payload import Payload


def _check_fraction(keep_fraction: float) -> None:
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")


def random_sparsify(
    vector: npt.ArrayLike,
    *,
    keep_fraction: float,
    rng: np.random.Generator,
    rescale: bool = True,
) -> Payload:
    """Keep each coordinate independently with probability p (seed 002 §2.3).

    Args:
        vector: Dense vector x, shape (d,), float.
        keep_fraction: p in (0, 1].
        rng: Generator for the Bernoulli(p) keep-mask.
        rescale: Decode kept values scaled by 1/p, so E[decoded] = x.

    Returns:
        A sparse payload: kept float32 values, int32 indices (ascending) and
        ``scale`` = 1/p (or 1.0 without rescaling).

    Raises:
        ValueError: If p is outside (0, 1].

    Example:
        >>> import numpy as np
        >>> p = random_sparsify(np.ones(4), keep_fraction=1.0,
        ...                     rng=np.random.default_rng(0))
        >>> p.to_dense().tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    _check_fraction(keep_fraction)
    x = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    keep = rng.random(x.shape[0]) < keep_fraction
    indices = np.flatnonzero(keep).astype(np.int32)
    return Payload(
        dim=int(x.shape[0]),
        values=x[indices],
        indices=indices,
        scale=1.0 / keep_fraction if rescale else 1.0,
    )


def topk_count(dim: int, keep_fraction: float) -> int:
    """Return k = max(1, ⌈p·d⌉), the number of coordinates top-k keeps.

    Args:
        dim: d, number of coordinates (≥ 1).
        keep_fraction: p in (0, 1].

    Returns:
        k, an integer in [1, d].

    Example:
        >>> topk_count(10, 0.25)
        3
    """
    _check_fraction(keep_fraction)
    # round() first so that e.g. 0.3 * 10 = 3.0000000000000004 gives 3, not 4.
    return min(dim, max(1, math.ceil(round(keep_fraction * dim, 9))))


def topk_sparsify(vector: npt.ArrayLike, *, keep_fraction: float) -> Payload:
    """Keep the k = ⌈p·d⌉ coordinates of largest magnitude, without rescaling.

    Args:
        vector: Dense vector x, shape (d,), float.
        keep_fraction: p in (0, 1].

    Returns:
        A sparse payload with k float32 values and int32 indices (ascending),
        ``scale`` = 1.0.

    Raises:
        ValueError: If p is outside (0, 1].

    Example:
        >>> topk_sparsify([0.1, -3.0, 2.0, 0.5], keep_fraction=0.5).indices.tolist()
        [1, 2]
    """
    x = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
    k = topk_count(int(x.shape[0]), keep_fraction)
    if k >= x.shape[0]:
        indices = np.arange(x.shape[0], dtype=np.int32)
    else:
        part = np.argpartition(np.abs(x), x.shape[0] - k)[x.shape[0] - k :]
        indices = np.sort(part).astype(np.int32)
    return Payload(dim=int(x.shape[0]), values=x[indices], indices=indices)
