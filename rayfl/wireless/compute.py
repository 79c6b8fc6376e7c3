"""Devices that compute at different speeds, and a round deadline on compute + airtime.

Groundwork of issue 48, not yet read by the engine (the cost model,
:mod:`rayfl.wireless.cost`, takes one ``wireless.cpu_frequency_hz`` for every
client, and ``wireless.max_latency_s`` bounds airtime only, WPFL's C5).

| symbol | code | meaning |
|---|---|---|
| f_i ~ F | :func:`cpu_frequencies` | client i's CPU frequency, drawn once per client, keyed by (seed, i) |
| d_i = d^lo_i + d^tx_i | :func:`deadline_misses` | compute plus upload time of client i's round |
| d_i > D | :func:`deadline_misses` | a straggler: its upload misses the round deadline D |

Distributions of f_i (``kind``, parameters): ``constant`` (``value``),
``uniform`` (``low``, ``high``), ``lognormal`` (``median``, ``sigma``: ln f_i
~ N(ln median, sigma²)).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from rayfl.seeding import rng_for

__all__ = ["FREQUENCY_DISTRIBUTIONS", "cpu_frequencies", "deadline_misses"]

#: Each distribution of f_i and its parameters.
FREQUENCY_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "uniform": ("low", "high"),
    "lognormal": ("median", "sigma"),
}


def _check(kind: str, params: Mapping[str, float]) -> None:
    if kind not in FREQUENCY_DISTRIBUTIONS:
        raise ValueError(
            f"kind must be one of {', '.join(FREQUENCY_DISTRIBUTIONS)}, got {kind!r}"
        )
    names = FREQUENCY_DISTRIBUTIONS[kind]
    if set(params) != set(names):
        raise ValueError(f"{kind} takes {', '.join(names)}; got {', '.join(params)}")
    values = {k: float(v) for k, v in params.items()}
    if not all(np.isfinite(v) for v in values.values()):
        raise ValueError(f"{kind}'s parameters must be finite, got {values}")
    positive = [k for k in ("value", "low", "median") if k in values]
    if any(values[k] <= 0 for k in positive) or values.get("sigma", 0.0) < 0:
        raise ValueError(f"{kind}'s frequencies must be > 0 and sigma >= 0: {values}")
    if kind == "uniform" and values["high"] < values["low"]:
        raise ValueError(f"uniform needs low <= high, got {values}")


def cpu_frequencies(
    seed: int, clients: Sequence[int], kind: str, **params: float
) -> npt.NDArray[np.float64]:
    """Return f_i (cycles/s) of ``clients``: one draw per client, keyed by (seed, i).

    A client's frequency does not depend on which other clients are drawn
    (packing-independent).

    Example:
        >>> cpu_frequencies(0, [0, 1], "constant", value=1e9).tolist()
        [1000000000.0, 1000000000.0]
    """
    _check(kind, params)
    out = np.empty(len(clients))
    for row, client in enumerate(clients):
        if kind == "constant":
            out[row] = params["value"]
            continue
        draw = rng_for(seed, "cpu_frequency", client=int(client))
        if kind == "uniform":
            out[row] = draw.uniform(params["low"], params["high"])
        else:
            out[row] = params["median"] * np.exp(
                params["sigma"] * draw.standard_normal()
            )
    return out


def deadline_misses(
    compute_s: ArrayLike, airtime_s: ArrayLike, deadline_s: float
) -> npt.NDArray[np.bool_]:
    """Return which uploads miss the round deadline: compute + airtime > ``deadline_s``.

    An upload that ends exactly at the deadline arrives.

    Example:
        >>> deadline_misses([1.0, 2.0], [0.5, 0.5], 2.0).tolist()
        [False, True]
    """
    if not deadline_s > 0:
        raise ValueError(f"deadline_s must be > 0, got {deadline_s}")
    total = np.asarray(compute_s, dtype=np.float64) + np.asarray(
        airtime_s, dtype=np.float64
    )
    if np.isnan(total).any() or (total < 0).any():
        raise ValueError("compute_s and airtime_s must be >= 0")
    return total > deadline_s
