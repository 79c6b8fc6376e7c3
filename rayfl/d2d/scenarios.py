"""D2D's scenarios of ``rayfl bench policies`` (:meth:`D2D.scenarios`).

Plain run configs (dicts): the 8×8 digits shipped with scikit-learn, or
synthetic federated data for the large size. Each has |F| = max(3, N // 3)
sub-channels, fewer than the N − 1 candidate neighbours, so a top-K rule has
to choose. ``d2d-small-shadowed`` breaks the heuristics with a 15 dB SINR
threshold that only a few neighbours meet (Dirichlet α = 0.1 data).
``d2d-small-mobile`` is d2d-small whose nodes move (issue 48,
:mod:`rayfl.d2d.motion`): random waypoint at pedestrian speeds (1–3 m/s) in
the 50 m square with 5 s rounds (≈ 10 m a round, a leg of ≈ 26 m every few
rounds), so which neighbours are close, and their P^err, change during a run;
Bernoulli links of round t's P^err make it matter. Its devices are
``star-small-mobile``'s (:data:`MOBILE`, :mod:`rayfl.d2d.devices`): links
fade with memory (ρ = 0.86 a round, so a lost link tends to stay lost), nodes
come and go (on 6 rounds, away 3 on average), and CPU frequencies are
log-normal (median 2.4 GHz, σ = 0.6) under a 12 ms deadline on local
training plus airtime, which the nodes with the most data usually miss.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MOBILE", "MOVING_NODES", "scenarios"]

#: What ``d2d-small-mobile`` stresses.
MOBILE = "mobility, correlated fading, nodes that come and go, stragglers (issue 48)"

#: ``d2d-small-mobile``'s moving world (topology fields; the star's values).
MOVING_NODES: dict[str, Any] = {
    "mobility": "random_waypoint",
    "round_duration_s": 5.0,
    "mobility_speed_min_mps": 1.0,
    "mobility_speed_max_mps": 3.0,
    "link_model": "bernoulli",
    "fading_dynamics": "gauss_markov",
    "fading_correlation": 0.86,
    "availability": "markov",
    "mean_on_rounds": 6,
    "mean_off_rounds": 3,
    "cpu_frequency_distribution": "lognormal",
    "cpu_frequency_sigma": 0.6,
    "round_deadline_s": 0.012,
}


def _d2d(
    name: str,
    n: int,
    rounds: int,
    *,
    alpha: float | None = None,
    sinr_threshold: float = 5,
    world: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A D2D run of ``n`` devices for ``rounds`` rounds (``world``: topology fields)."""
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
            **(world or {}),
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
        "d2d-small-mobile": (
            "small",
            _d2d("d2d-small-mobile", 11, 20, world=MOVING_NODES),
            MOBILE,
        ),
    }
