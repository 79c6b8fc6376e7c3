"""Sampled evaluation: which clients an evaluation reads, and its standard errors.

With ``eval_clients: K`` an evaluation reads a uniform sample of K of the N
clients (without replacement), drawn from ``rng_for(seed, "eval_sample",
round=t)`` where t is the round the evaluation follows, so the same seed
evaluates the same clients whatever the packing (issue 37: evaluation costs
O(K), not O(N)). The per-round aggregates are then estimates; their standard
errors go to ``rounds.parquet`` as ``<metric>_se``.

Implementation details:

1. ``global_acc``/``global_loss`` are test-size weighted means Σ w_i x_i / Σ w_i;
   over a uniform sample this is a ratio estimator, whose standard error is
   sqrt(n / (n − 1) · Σ w_i² (x_i − x̄)²) / Σ w_i, times the finite-population
   correction sqrt(1 − n / N) (Cochran, *Sampling Techniques*, §6.4).
2. ``mean_acc``/``mean_loss`` (unweighted) get s / sqrt(n) · sqrt(1 − n / N).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rayfl.seeding import rng_for

__all__ = ["eval_sample", "sampled_standard_errors"]


def eval_sample(
    seed: int, round: int, num_clients: int, size: int | None
) -> npt.NDArray[np.int64] | None:
    """Return the ascending ids an evaluation after round ``round`` reads.

    None when every client is evaluated (``size`` None or ≥ ``num_clients``).

    Example:
        >>> eval_sample(0, 3, 10, 4).tolist() == eval_sample(0, 3, 10, 4).tolist()
        True
        >>> eval_sample(0, 3, 10, None) is None
        True
    """
    if size is None or size >= num_clients:
        return None
    rng = rng_for(seed, "eval_sample", round=max(int(round), 0))
    return np.sort(rng.choice(num_clients, size, replace=False)).astype(np.int64)


def _ratio_se(x: npt.NDArray[np.float64], w: npt.NDArray[np.float64]) -> float:
    ok = np.isfinite(x)
    x, w = x[ok], w[ok]
    n = len(x)
    if n < 2 or w.sum() <= 0:
        return float("nan")
    mean = float(np.sum(w * x) / np.sum(w))
    var = n / (n - 1) * float(np.sum(w**2 * (x - mean) ** 2))
    return float(np.sqrt(var) / np.sum(w))


def sampled_standard_errors(
    evals: Sequence[dict[str, Any]],
    weights: npt.ArrayLike,
    num_clients: int,
) -> dict[str, float]:
    """Return the standard errors of a sampled evaluation's aggregates.

    Args:
        evals: The sampled clients' evaluation records.
        weights: Their test sizes (the weights of ``global_*``).
        num_clients: N, the population size (finite-population correction).

    Returns:
        ``global_acc_se``, ``global_loss_se``, ``mean_acc_se``, ``mean_loss_se``
        and ``eval_clients`` (the sample size).

    Example:
        >>> out = sampled_standard_errors(
        ...     [{"test_acc": a, "test_loss": 1 - a} for a in (0.0, 1.0)], [1, 1], 10**6)
        >>> round(out["mean_acc_se"], 3), out["eval_clients"]
        (0.5, 2.0)
    """
    w = np.asarray(weights, dtype=np.float64)
    n = len(evals)
    fpc = float(np.sqrt(max(0.0, 1.0 - n / max(num_clients, 1))))
    out: dict[str, float] = {"eval_clients": float(n)}
    for key, name in (("test_acc", "acc"), ("test_loss", "loss")):
        x = np.array([e.get(key, np.nan) for e in evals], dtype=np.float64)
        finite = x[np.isfinite(x)]
        out[f"global_{name}_se"] = _ratio_se(x, w) * fpc
        out[f"mean_{name}_se"] = (
            float(finite.std(ddof=1) / np.sqrt(len(finite))) * fpc
            if len(finite) >= 2
            else float("nan")
        )
    return out
