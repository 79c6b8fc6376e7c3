"""The registered scenarios of ``rayfl bench policies``: per topology, three sizes.

Each scenario is a run config (a dict, loaded by :func:`rayfl.config.load_config`)
plus what it is for. Data are the 8×8 digits shipped with scikit-learn (small,
offline, fast in emulate mode) or, for the large star, synthetic federated data.
One scenario per topology is built to break the heuristics' assumptions:

| scenario | what breaks |
|----------|-------------|
| ``star-small-shadowed`` | heterogeneous links: 10 dB log-normal shadowing per client and a 300 m cell make a few clients' channels always bad, so channel-greedy rules (``best_channel``, ``minmax``'s Σρ matching) starve them while fairness-blind rules (``round_robin``) schedule them into deep fades with bit errors; very non-IID data (Dirichlet α = 0.1) makes starving a client expensive |
| ``hierarchical-small-skewed`` | pathological non-IID (one class per device) and devices up to 600 m from their edge (very unequal links) |
| ``d2d-small-shadowed`` | a 15 dB SINR threshold that only a few neighbours meet (Dirichlet α = 0.1 data) |

``hierarchical-small-nodp`` is ``hierarchical-small`` without DP: at ε = 1 the
emulated model does not learn (test losses near 27 nats), so the surrogate
check of the hierarchy runs here.

Sizes: small (N ≈ 10-20), medium (N ≈ 50-60), large (N = 200; D2D 101). D2D
scenarios have |F| = max(3, N // 3) sub-channels, fewer than the N − 1
candidate neighbours, so a top-K rule has to choose.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SCENARIOS", "Scenario", "scenario_config", "scenarios_for"]

SIZES = ("small", "medium", "large")
TOPOLOGIES = ("star", "hierarchical", "d2d")


@dataclass(frozen=True)
class Scenario:
    """One benchmark scenario.

    Attributes:
        name: Registered name, ``<topology>-<size>[-variant]``.
        topology: ``star``, ``hierarchical`` or ``d2d``.
        size: ``small``, ``medium`` or ``large``.
        config: The run config (a plain dict).
        breaks: What it stresses beyond the heuristics' assumptions ("" if none).
    """

    name: str
    topology: str
    size: str
    config: dict[str, Any] = field(repr=False)
    breaks: str = ""


def _star(name: str, n: int, k: int, rounds: int, **extra: Any) -> dict[str, Any]:
    dataset = "synthetic" if n > 100 else "digits"
    cfg: dict[str, Any] = {
        "name": name,
        "seed": 0,
        "rounds": rounds,
        "data": {
            "dataset": dataset,
            "num_clients": n,
            "partition": "dirichlet",
            "alpha": 0.3 if n <= 20 else 1.0,
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
        "wireless": {
            "num_subchannels": k,
            "distance_min_m": 10,
            "distance_max_m": 150,
            "effects": "bit_flip",
        },
        "output": {"progress": False, "plots": False},
        "rl": {"reward": "min_max_loss"},
    }
    return _merge(cfg, extra)


def _hierarchical(
    name: str, n: int, edges: int, k_edge: int, rounds: int, **extra: Any
) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": name,
        "seed": 0,
        "rounds": rounds,
        "data": {
            "dataset": "digits",
            "num_clients": n,
            "partition": "pathological",
            "classes_per_client": 3,
        },
        "model": {"kind": "mlr"},
        "algorithm": {"kind": "fedavg", "batch_size": 16, "lr": 0.05},
        "topology": {
            "kind": "hierarchical",
            "num_edges": edges,
            "trusted_fraction": 0.5,
            "tau": 4,
            "local_period": 2,
            "dp": {"epsilon": 1.0, "delta": 1.0e-5},
            "scheduling": {"subchannels_per_edge": k_edge},
        },
        "output": {"progress": False, "plots": False},
        "rl": {"reward": "min_max_loss"},
    }
    return _merge(cfg, extra)


def _d2d(name: str, n: int, rounds: int, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "name": name,
        "seed": 0,
        "rounds": rounds,
        "data": {
            "dataset": "synthetic" if n > 100 else "digits",
            "num_clients": n,
            "partition": "dirichlet",
            "alpha": 0.3 if n > 20 else 0.1,
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
            "sinr_threshold": 5,
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
    return _merge(cfg, extra)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


_SHADOWED = "10 dB shadowing, 300 m cell, Dirichlet α = 0.1 (see module docstring)"

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("star-small", "star", "small", _star("star-small", 10, 3, 20)),
        Scenario("star-medium", "star", "medium", _star("star-medium", 50, 10, 30)),
        Scenario("star-large", "star", "large", _star("star-large", 200, 20, 40)),
        Scenario(
            "star-small-shadowed",
            "star",
            "small",
            _star(
                "star-small-shadowed",
                20,
                4,
                20,
                data={"alpha": 0.1},
                wireless={"shadowing_std_db": 10.0, "distance_max_m": 300},
            ),
            breaks=_SHADOWED,
        ),
        Scenario(
            "hierarchical-small",
            "hierarchical",
            "small",
            _hierarchical("hierarchical-small", 20, 4, 2, 20),
        ),
        Scenario(
            "hierarchical-medium",
            "hierarchical",
            "medium",
            _hierarchical("hierarchical-medium", 60, 6, 3, 30),
        ),
        Scenario(
            "hierarchical-large",
            "hierarchical",
            "large",
            _hierarchical("hierarchical-large", 200, 10, 4, 40),
        ),
        Scenario(
            "hierarchical-small-skewed",
            "hierarchical",
            "small",
            _hierarchical(
                "hierarchical-small-skewed",
                20,
                4,
                2,
                20,
                data={"classes_per_client": 1},
                topology={"cost": {"distance_max_m": 600.0}},
            ),
            breaks="one class per device, devices up to 600 m from their edge",
        ),
        Scenario(
            "hierarchical-small-nodp",
            "hierarchical",
            "small",
            _hierarchical(
                "hierarchical-small-nodp",
                20,
                4,
                2,
                20,
                topology={"dp": {"enabled": False}},
            ),
        ),
        Scenario("d2d-small", "d2d", "small", _d2d("d2d-small", 11, 20)),
        Scenario("d2d-medium", "d2d", "medium", _d2d("d2d-medium", 31, 30)),
        Scenario("d2d-large", "d2d", "large", _d2d("d2d-large", 101, 40)),
        Scenario(
            "d2d-small-shadowed",
            "d2d",
            "small",
            _d2d(
                "d2d-small-shadowed",
                11,
                20,
                data={"alpha": 0.1, "min_partition_size": 10},
                topology={"sinr_threshold": 15},
            ),
            breaks="SINR threshold 15 dB: few neighbours qualify",
        ),
    ]
}


def scenario_config(name: str) -> dict[str, Any]:
    """Return a copy of scenario ``name``'s config.

    Raises:
        ValueError: For an unknown name (the message lists the known ones).
    """
    if name not in SCENARIOS:
        raise ValueError(
            f"--scenario must be one of {', '.join(SCENARIOS)}; got {name!r}"
        )
    return copy.deepcopy(SCENARIOS[name].config)


def scenarios_for(topology: str = "all", size: str = "all") -> list[Scenario]:
    """The registered scenarios of ``topology`` and ``size`` (``all``: every one).

    Raises:
        ValueError: For an unknown topology or size.
    """
    if topology not in (*TOPOLOGIES, "all"):
        raise ValueError(
            f"--topology must be one of {', '.join(TOPOLOGIES)}, all; got {topology!r}"
        )
    if size not in (*SIZES, "all"):
        raise ValueError(f"--size must be one of {', '.join(SIZES)}, all; got {size!r}")
    return [
        s
        for s in SCENARIOS.values()
        if topology in ("all", s.topology) and size in ("all", s.size)
    ]
