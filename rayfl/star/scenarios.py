"""The star's scenarios of ``rayfl bench policies`` (:meth:`Star.scenarios`).

Plain run configs (dicts): the 8×8 digits shipped with scikit-learn for the
small and medium sizes, synthetic federated data for the large one.
``star-small-shadowed`` breaks the channel-greedy heuristics: 10 dB log-normal
shadowing and a 300 m cell make a few clients' channels always bad, and very
non-IID data (Dirichlet α = 0.1) makes starving them expensive.
``star-small-mobile`` is a world that moves (issue 48): random-waypoint
mobility at 1–3 m/s with 5 s rounds, shadowing that decorrelates over 20 m,
time-correlated fading (ρ = 0.86), devices on for 6 rounds and off for 3 on
average, per-client CPU speeds and a round deadline that drops about a
quarter of the uploads (examples/mobile_star.yaml's world).
"""

from __future__ import annotations

from typing import Any

__all__ = ["MOBILE", "SHADOWED", "scenarios"]

#: What ``star-small-shadowed`` stresses.
SHADOWED = "10 dB shadowing, 300 m cell, Dirichlet α = 0.1 (see module docstring)"

#: What ``star-small-mobile`` stresses.
MOBILE = "mobility, correlated fading, devices that come and go, stragglers (issue 48)"

#: ``star-small-mobile``'s moving world (examples/mobile_star.yaml's).
MOVING_WORLD: dict[str, Any] = {
    "round_duration_s": 5.0,
    "mobility": "random_waypoint",
    "mobility_speed_min_mps": 1.0,
    "mobility_speed_max_mps": 3.0,
    "shadowing_std_db": 8.0,
    "shadowing_decorrelation_m": 20.0,
    "fading_dynamics": "gauss_markov",
    "fading_correlation": 0.86,
    "availability": "markov",
    "mean_on_rounds": 6,
    "mean_off_rounds": 3,
    "cpu_frequency_distribution": "lognormal",
    "cpu_frequency_sigma": 0.6,
    "round_deadline_s": 0.012,
}


def _star(
    name: str,
    n: int,
    k: int,
    rounds: int,
    *,
    alpha: float | None = None,
    shadowing_db: float | None = None,
    distance_max_m: float = 150,
    world: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A star run of ``n`` clients on ``k`` subchannels for ``rounds`` rounds."""
    wireless: dict[str, Any] = {
        "num_subchannels": k,
        "distance_min_m": 10,
        "distance_max_m": distance_max_m,
        "effects": "bit_flip",
    }
    if shadowing_db is not None:
        wireless["shadowing_std_db"] = shadowing_db
    wireless.update(world or {})
    return {
        "name": name,
        "seed": 0,
        "rounds": rounds,
        "data": {
            "dataset": "synthetic" if n > 100 else "digits",
            "num_clients": n,
            "partition": "dirichlet",
            "alpha": alpha if alpha is not None else (0.3 if n <= 20 else 1.0),
            "min_partition_size": 5,
        },
        "model": {"kind": "mlr"},
        "algorithm": {
            "kind": "fedavg",
            "local_epochs": 1,
            "batch_size": 16,
            "lr": 0.05,
        },
        "scheduler": {"policy": "round_robin"},
        "wireless": wireless,
        "output": {"progress": False, "plots": False},
        "rl": {"reward": "min_max_loss"},
    }


def scenarios() -> dict[str, tuple[str, dict[str, Any], str]]:
    """The star's scenarios: name → (size, config, what it breaks or "")."""
    shadowed = _star(
        "star-small-shadowed",
        20,
        4,
        20,
        alpha=0.1,
        shadowing_db=10.0,
        distance_max_m=300,
    )
    return {
        "star-small": ("small", _star("star-small", 10, 3, 20), ""),
        "star-medium": ("medium", _star("star-medium", 50, 10, 30), ""),
        "star-large": ("large", _star("star-large", 200, 20, 40), ""),
        "star-small-shadowed": ("small", shadowed, SHADOWED),
        "star-small-mobile": (
            "small",
            _star(
                "star-small-mobile", 20, 4, 20, distance_max_m=200, world=MOVING_WORLD
            ),
            MOBILE,
        ),
    }
