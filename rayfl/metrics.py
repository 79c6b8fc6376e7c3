"""Fairness and performance metrics over clients (pure numpy).

| quantity | formula | source |
|----------|---------|--------|
| Jain's index | J = (Σ x_n)² / (N · Σ x_n²) | Jain, Chiu & Hawe 1984; spec seed_000 §6.4 |
| worst-q mean | mean of the ⌈qN⌉ worst values | "worst 10%" of the papers' fairness plots |
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["jain_index", "round_summary", "weighted_mean_of", "worst_fraction_mean"]


def jain_index(values: npt.ArrayLike) -> float:
    """Return Jain's fairness index (Σx)² / (N·Σx²) of non-negative values.

    NaN entries are ignored. Equal values give 1; one non-zero value among N gives
    1/N. All zeros give 1 (perfectly equal) by convention.

    Args:
        values: Per-client non-negative values (N,).

    Returns:
        J in [1/N, 1]; NaN when no value is finite.

    Raises:
        ValueError: If a value is negative.

    Example:
        >>> jain_index([1.0, 1.0, 1.0, 1.0])
        1.0
        >>> jain_index([1.0, 0.0, 0.0, 0.0])
        0.25
        >>> round(jain_index([1.0, 2.0, 3.0]), 6)  # 36 / (3 * 14)
        0.857143
    """
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return float("nan")
    if np.any(x < 0):
        raise ValueError(f"Jain's index needs non-negative values, got min {x.min()}")
    squares = float(np.sum(x * x))
    if squares == 0.0:
        return 1.0
    return float(np.sum(x) ** 2 / (len(x) * squares))


def worst_fraction_mean(
    values: npt.ArrayLike, *, fraction: float = 0.1, higher_is_worse: bool = True
) -> float:
    """Return the mean of the worst ⌈fraction·N⌉ finite values.

    Example:
        >>> worst_fraction_mean(np.arange(20.0), fraction=0.1)  # mean of 19, 18
        18.5
        >>> worst_fraction_mean(np.arange(20.0), fraction=0.1, higher_is_worse=False)
        0.5
    """
    x = np.asarray(values, dtype=np.float64)
    x = np.sort(x[np.isfinite(x)])
    if len(x) == 0:
        return float("nan")
    k = max(1, math.ceil(fraction * len(x)))
    worst = x[-k:] if higher_is_worse else x[:k]
    return float(worst.mean())


def weighted_mean_of(values: npt.ArrayLike, weights: npt.ArrayLike) -> float:
    """Return the weighted mean of the finite values (NaN if none).

    Example:
        >>> weighted_mean_of([1.0, 0.0, float("nan")], [3, 1, 5])
        0.75
    """
    x = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(x) & (w > 0)
    if not ok.any():
        return float("nan")
    return float(np.sum(x[ok] * w[ok]) / np.sum(w[ok]))


def round_summary(
    evals: Sequence[dict[str, Any]], num_test: npt.ArrayLike
) -> dict[str, float]:
    """Summarise one evaluation of all clients into per-round aggregates.

    Args:
        evals: One record per client, by client id (``test_loss``, ``test_acc``,
            ``eval_train_loss``, optionally ``personal_loss``/``personal_acc``).
        num_test: Test-split sizes (N,), the weights of the global accuracy.

    Returns:
        ``global_acc``/``global_loss`` (test-size weighted over all clients' test
        splits), ``mean_acc``, ``min_acc``, ``worst10_acc``, ``max_loss``,
        ``mean_loss``, ``worst10_loss``, ``jain_acc``, ``jain_train_loss`` (Jain's
        index of the evaluated models' train losses, spec seed_000 §6.4),
        ``var_train_loss`` (their variance, seed_001 Definition 1),
        ``jain_train_reg_loss``/``jain_train_pl_objective`` when the records
        carry Ditto's regularised PL train losses (``eval_train_reg_loss``,
        ``eval_train_pl_objective``), and the
        ``personal_*`` counterparts when present (also ``personal_mean_acc``,
        the unweighted mean, and ``personal_worst10_acc``). ``eval_acc``/
        ``eval_max_loss``/``eval_mean_acc``/``eval_worst10_acc``/``eval_jain_acc``
        are the personal values when present, else the global ones.
    """
    w = np.asarray(num_test, dtype=np.float64)
    acc = np.array([e["test_acc"] for e in evals], dtype=np.float64)
    loss = np.array([e["test_loss"] for e in evals], dtype=np.float64)

    def column(key: str) -> npt.NDArray[np.float64]:
        return np.array([e.get(key, np.nan) for e in evals], dtype=np.float64)

    train_loss = column("eval_train_loss")
    out = {
        "global_acc": weighted_mean_of(acc, w),
        "global_loss": weighted_mean_of(loss, w),
        "mean_acc": float(np.nanmean(acc)),
        "min_acc": float(np.nanmin(acc)),
        "worst10_acc": worst_fraction_mean(acc, higher_is_worse=False),
        "mean_loss": float(np.nanmean(loss)),
        "max_loss": float(np.nanmax(loss)),
        "worst10_loss": worst_fraction_mean(loss),
        "jain_acc": jain_index(acc),
        "jain_train_loss": jain_index(train_loss),
        # Fairness of seed 001 (Definition 1): variance (ddof=0) of the clients'
        # train losses of their evaluated (personal, if any) models.
        "var_train_loss": (
            float(np.nanvar(train_loss))
            if np.isfinite(train_loss).any()
            else float("nan")
        ),
    }
    # Regularised PL training losses (Ditto family, ``Ditto.eval_train_objectives``).
    for key in ("reg_loss", "pl_objective"):
        vals = column(f"eval_train_{key}")
        if np.isfinite(vals).any():
            out[f"jain_train_{key}"] = jain_index(vals)
    if evals and "personal_acc" in evals[0]:
        p_acc = np.array([e["personal_acc"] for e in evals], dtype=np.float64)
        p_loss = np.array([e["personal_loss"] for e in evals], dtype=np.float64)
        out.update(
            personal_acc=weighted_mean_of(p_acc, w),
            personal_min_acc=float(np.nanmin(p_acc)),
            personal_max_loss=float(np.nanmax(p_loss)),
            personal_jain_acc=jain_index(p_acc),
            personal_mean_acc=float(np.nanmean(p_acc)),
            personal_worst10_acc=worst_fraction_mean(p_acc, higher_is_worse=False),
        )
    out["eval_acc"] = out.get("personal_acc", out["global_acc"])
    # Per-client accuracy of the evaluated models (personal, else global): the
    # unweighted mean, the worst 10 % and Jain's index (PFL baselines' table).
    out["eval_mean_acc"] = out.get("personal_mean_acc", out["mean_acc"])
    out["eval_worst10_acc"] = out.get("personal_worst10_acc", out["worst10_acc"])
    out["eval_jain_acc"] = out.get("personal_jain_acc", out["jain_acc"])
    out["eval_max_loss"] = out.get("personal_max_loss", out["max_loss"])
    return out
