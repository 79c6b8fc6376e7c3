"""D2D's scenarios of ``rayfl bench policies`` (:meth:`D2D.scenarios`).

Plain run configs (dicts): the 8×8 digits shipped with scikit-learn, or
synthetic federated data for the large size. Each has |F| = max(3, N // 3)
sub-channels, fewer than the N − 1 candidate neighbours, so a top-K rule has
to choose. ``d2d-small-shadowed`` breaks the heuristics with a 15 dB SINR
threshold that only a few neighbours meet (Dirichlet α = 0.1 data).
"""

from __future__ import annotations

from typing import Any

__all__ = ["scenarios"]


def _d2d(
    name: str,
    n: int,
    rounds: int,
    *,
    alpha: float | None = None,
    sinr_threshold: float = 5,
) -> dict[str, Any]:
    """A D2D run of ``n`` devices for ``rounds`` rounds."""
    return {
        "name": name,
        "seed": 0,
        "rounds": rounds,
        "data": {
            "dataset": "synthetic" if n > 100 else "digits",
            "num_clients": n,
            "partition": "dirichlet",
            "alpha": alpha if alpha is not None else (0.3 if n > 20 else 0.1),
            "min_partition_size": 10,
        },
        "model": {"kind": "mlr"},
        "algorithm": {
            "kind": "fedavg",
            "local_epochs": 1,
            "batch_size": 16,
            "lr": 0.05,
        },
        "topology": {
            "kind": "d2d",
            # |F| < candidates: top-K rules must choose (|F| >= N − 1 selects all)
            "num_subchannels": max(3, n // 3),
            "method": "pfedwn",
            "target": "random",
            "sinr_threshold": sinr_threshold,
            "epsilon": 0.05,
            "alpha": 0.9,
            "em_mode": "two_phase",
            "link_model": "ideal",
            "selection_via": "env",
        },
        "scheduler": {"policy": "channel_threshold"},
        "output": {"progress": False, "plots": False},
        "rl": {"reward": "min_max_loss"},
    }


def scenarios() -> dict[str, tuple[str, dict[str, Any], str]]:
    """D2D's scenarios: name → (size, config, what it breaks or "")."""
    shadowed = _d2d("d2d-small-shadowed", 11, 20, alpha=0.1, sinr_threshold=15)
    return {
        "d2d-small": ("small", _d2d("d2d-small", 11, 20), ""),
        "d2d-medium": ("medium", _d2d("d2d-medium", 31, 30), ""),
        "d2d-large": ("large", _d2d("d2d-large", 101, 40), ""),
        "d2d-small-shadowed": (
            "small",
            shadowed,
            "SINR threshold 15 dB: few neighbours qualify",
        ),
    }
