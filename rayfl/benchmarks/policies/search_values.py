"""The values a tuning search tries: the grid, its extensions, the range's limit.

:mod:`rayfl.benchmarks.policies.tuning` tunes a knob on the training seeds
by these values, in order: :func:`constant_grid` (0.2, 0.5, 1, 2 × the
configured value, clipped to the knob's range); with ``search="extend"``,
:func:`next_value` past an edge that holds the best, up to
:data:`MAX_EXTENSIONS` times; then, for a policy's own parameter still best
at an edge, :func:`edge_limit`, the range's limit itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "CONSTANT_GRID",
    "MAX_EXTENSIONS",
    "constant_grid",
    "edge_limit",
    "next_value",
    "round_value",
]

#: Multiples of the configured value tried by ``constant_tuned``.
CONSTANT_GRID = (1.0, 0.2, 0.5, 2.0)
#: Most values ``search="extend"`` adds past the grid's edge (×2 each: the
#: best of 2× can move to 32× the configured value, clipped to the range).
MAX_EXTENSIONS = 4


def constant_grid(configured: float, low: float, high: float) -> list[float]:
    """The values ``constant_tuned`` tries: :data:`CONSTANT_GRID` × ``configured``.

    Clipped to [``low``, ``high``], without repeats, the configured value first
    (a tie keeps it).

    Example:
        >>> constant_grid(0.05, 0.0, 1.0)
        [0.05, 0.01, 0.025, 0.1]
    """
    return sorted(
        {round_value(np.clip(f * configured, low, high)) for f in CONSTANT_GRID},
        key=lambda v: (v != round_value(configured), v),
    )


def round_value(value: float) -> float:
    """``value`` to 12 significant digits (0.2 × 0.05 is 0.01, not 0.010000000000000002)."""
    return float(f"{float(value):.12g}")


def next_value(
    tried: Sequence[float], best: float, low: float, high: float
) -> float | None:
    """The value ``search="extend"`` tries next, or None when ``best`` is tuned.

    ``best`` at the top of ``tried`` and below ``high``: 2 × ``best`` (clipped);
    at the bottom and above ``low``: ``best`` / 2 (clipped). Otherwise (a worse
    value on each side, or the range's limit) None.

    Example:
        >>> next_value([0.01, 0.025, 0.05, 0.1], 0.1, 0.0, 1.0)
        0.2
        >>> next_value([0.01, 0.025, 0.05, 0.1], 0.05, 0.0, 1.0) is None
        True
    """
    ordered = sorted(tried)
    if best >= ordered[-1] and best < high:
        value = round_value(min(2.0 * best, high))
    elif best <= ordered[0] and best > low:
        value = round_value(max(best / 2.0, low))
    else:
        return None
    return None if value in ordered else value


def edge_limit(
    tried: Sequence[float], best: float, low: float, high: float
) -> float | None:
    """The range limit to try when the extensions end with ``best`` at an edge.

    After :data:`MAX_EXTENSIONS` steps of ×2 (÷2) the best value can still sit
    at the edge of what was tried, short of the knob's range limit (÷2 never
    reaches 0): a random neighbour probability of 0.00625 is not local
    training, p = 0. The search then tries the limit itself, if finite and not
    tried. None when ``best`` has a tried value on both sides, or the limit
    is infinite or already tried.

    Example:
        >>> edge_limit([0.00625, 0.0125, 0.5], 0.00625, 0.0, 1.0)
        0.0
        >>> edge_limit([0.1, 0.5, 1.0], 0.5, 0.0, 1.0) is None
        True
        >>> edge_limit([1.0, 20.0], 20.0, 1.0, float("inf")) is None
        True
    """
    ordered = sorted(tried)
    if best <= ordered[0] and best > low:
        limit = low
    elif best >= ordered[-1] and best < high:
        limit = high
    else:
        return None
    if not np.isfinite(limit) or limit in ordered:
        return None
    return float(limit)
