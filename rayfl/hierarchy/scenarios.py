"""The hierarchy's scenarios of ``rayfl bench policies`` (:meth:`Hierarchy.scenarios`).

Plain run configs (dicts) on the 8×8 digits shipped with scikit-learn.
``hierarchical-small-skewed`` breaks the heuristics: pathological non-IID data
(one class per device) and devices up to 600 m from their edge (very unequal
links). ``hierarchical-small-nodp`` is ``hierarchical-small`` without DP: at
ε = 1 the emulated model does not learn (test losses near 27 nats), so the
surrogate check of the hierarchy runs there.
"""

from __future__ import annotations

from typing import Any

__all__ = ["scenarios"]


def _hierarchical(
    name: str,
    n: int,
    edges: int,
    k_edge: int,
    rounds: int,
    *,
    classes_per_client: int = 3,
    dp: bool = True,
    distance_max_m: float | None = None,
) -> dict[str, Any]:
    """A hierarchy of ``n`` devices under ``edges`` edges, ``k_edge`` subchannels each."""
    topology: dict[str, Any] = {
        "kind": "hierarchical",
        "num_edges": edges,
        "trusted_fraction": 0.5,
        "tau": 4,
        "local_period": 2,
        "dp": {"epsilon": 1.0, "delta": 1.0e-5, **({} if dp else {"enabled": False})},
        "scheduling": {"subchannels_per_edge": k_edge},
    }
    if distance_max_m is not None:
        topology["cost"] = {"distance_max_m": distance_max_m}
    return {
        "name": name,
        "seed": 0,
        "rounds": rounds,
        "data": {
            "dataset": "digits",
            "num_clients": n,
            "partition": "pathological",
            "classes_per_client": classes_per_client,
        },
        "model": {"kind": "mlr"},
        "algorithm": {"kind": "fedavg", "batch_size": 16, "lr": 0.05},
        "topology": topology,
        "output": {"progress": False, "plots": False},
        "rl": {"reward": "min_max_loss"},
    }


def scenarios() -> dict[str, tuple[str, dict[str, Any], str]]:
    """The hierarchy's scenarios: name → (size, config, what it breaks or "")."""
    skewed = _hierarchical(
        "hierarchical-small-skewed",
        20,
        4,
        2,
        20,
        classes_per_client=1,
        distance_max_m=600.0,
    )
    return {
        "hierarchical-small": (
            "small",
            _hierarchical("hierarchical-small", 20, 4, 2, 20),
            "",
        ),
        "hierarchical-medium": (
            "medium",
            _hierarchical("hierarchical-medium", 60, 6, 3, 30),
            "",
        ),
        "hierarchical-large": (
            "large",
            _hierarchical("hierarchical-large", 200, 10, 4, 40),
            "",
        ),
        "hierarchical-small-skewed": (
            "small",
            skewed,
            "one class per device, devices up to 600 m from their edge",
        ),
        "hierarchical-small-nodp": (
            "small",
            _hierarchical("hierarchical-small-nodp", 20, 4, 2, 20, dp=False),
            "",
        ),
    }
