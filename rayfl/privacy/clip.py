"""L2 clipping of a flat model vector, the sensitivity-bounding half of the DP step.

Clipping scales the vector by min(1, C/‖u‖₂), i.e. u ← u / max(1, ‖u‖₂/C)
(seed 000 eq. 2; seed 001 eq. 5), with a guard against a zero norm.

Symbol table:

| paper symbol | code name | meaning |
|---|---|---|
| C (seed 000/001), √s·C (seed 002 eq. 8), G (seed 004) | ``clip_norm`` | threshold |
| ‖u‖₂ | ``norm`` | L2 norm before clipping |
| layer boundaries | ``offsets`` | start index of each layer, plus d |

Implementation details:

1. The specs clip the whole flattened vector (seed 000 §2.4, seed 001 §2.4
   [ASSUMPTION: flat, not per-layer]); that is the default.
2. Per-layer clipping (``offsets`` given) clips each of the L layers to C/√L, so
   the whole vector still has norm ≤ C and the sensitivity is unchanged (the
   equal split used by Opacus' per-layer clipping). No spec requires it.
3. Norms are computed in float64; the scale uses max(norm, tiny) so a zero
   vector is returned unchanged instead of dividing by zero.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

_TINY = float(np.finfo(np.float64).tiny)


def clip_scale(
    norm: npt.ArrayLike, *, clip_norm: float | npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Return the clip factor min(1, C/max(‖u‖, tiny)), seed 000 eq. 2.

    Args:
        norm: L2 norm(s) ‖u‖₂ ≥ 0, any shape.
        clip_norm: C > 0, or one C per norm (broadcast against ``norm``).

    Returns:
        Factor(s) in (0, 1], float64, same shape as ``norm``.

    Example:
        >>> clip_scale([0.0, 1.0, 4.0], clip_norm=2.0).tolist()
        [1.0, 1.0, 0.5]
    """
    norms = np.asarray(norm, dtype=np.float64)
    with np.errstate(over="ignore"):  # C/tiny overflows to inf; min(1, inf) = 1
        return np.minimum(1.0, clip_norm / np.maximum(norms, _TINY))


def clip_by_l2_norm(
    vector: npt.ArrayLike,
    *,
    clip_norm: float,
    offsets: npt.ArrayLike | None = None,
) -> tuple[npt.NDArray[np.float32], float]:
    """Clip a flat vector to L2 norm ≤ C (whole vector, or per layer).

    Args:
        vector: Flat model vector u, shape (d,), float.
        clip_norm: C > 0, same unit as the vector.
        offsets: Optional layer boundaries, shape (L + 1,), int, increasing from
            0 to d: layer l is ``vector[offsets[l]:offsets[l + 1]]``. Each layer
            is clipped to C/√L.

    Returns:
        (clipped, norm): the clipped float32 vector, shape (d,), and the L2 norm
        of the whole input vector before clipping (float).

    Raises:
        ValueError: If C ≤ 0 or the offsets do not partition [0, d].

    Example:
        >>> clipped, norm = clip_by_l2_norm([3.0, 4.0], clip_norm=1.0)
        >>> clipped.tolist(), norm
        ([0.6000000238418579, 0.800000011920929], 5.0)
    """
    if not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}")
    x = np.asarray(vector, dtype=np.float64).reshape(-1)
    if offsets is None:
        norm = float(np.sqrt(np.dot(x, x)))
        scale = float(clip_scale(norm, clip_norm=clip_norm))
        return (x * scale).astype(np.float32), norm
    bounds = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if (
        bounds.size < 2
        or bounds[0] != 0
        or bounds[-1] != x.shape[0]
        or np.any(np.diff(bounds) < 0)
    ):
        raise ValueError(
            f"offsets must increase from 0 to len(vector)={x.shape[0]}, got "
            f"{bounds.tolist()}"
        )
    # One sum per layer (not differences of a cumulative sum, which cancel to 0
    # for a layer that follows a much larger one and would leave it unclipped).
    squares = np.array(
        [np.dot(x[a:b], x[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    )
    layer_norms = np.sqrt(squares)
    num_layers = bounds.size - 1
    scales = clip_scale(layer_norms, clip_norm=clip_norm / np.sqrt(num_layers))
    per_element = np.repeat(scales, np.diff(bounds))
    norm = float(np.sqrt(squares.sum()))
    return (x * per_element).astype(np.float32), norm
