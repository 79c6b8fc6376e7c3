"""build_system: a run config → its engine (the one dispatch on ``topology.kind``)."""

from __future__ import annotations

from typing import Any

from rayfl.d2d.round import D2DRound
from rayfl.data.federated import FederatedData
from rayfl.engine.engine import Engine
from rayfl.hierarchy.round import HierarchicalRound
from rayfl.star.round import StarRound

__all__ = ["STRATEGIES", "build_system"]

#: ``topology.kind`` → strategy class.
STRATEGIES: dict[str, type[Any]] = {
    "flat": StarRound,
    "hierarchical": HierarchicalRound,
    "d2d": D2DRound,
}


def build_system(config: Any, *, data: FederatedData | None = None) -> Engine:
    """Start the actors of ``config``'s run and return its engine.

    Args:
        config: The run config.
        data: A prebuilt federated dataset (default: built from ``config.data``).

    Raises:
        ValueError: If ``topology.kind`` has no engine strategy.
    """
    kind = config.topology.kind
    if kind not in STRATEGIES:
        raise ValueError(
            f"topology.kind={kind} has no engine strategy yet; "
            f"engine strategies: {', '.join(sorted(STRATEGIES))}"
        )
    return Engine(config, data, strategy=STRATEGIES[kind]())
