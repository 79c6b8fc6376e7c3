"""build_system: a run config → its engine (the topology plug-in gives the strategy)."""

from __future__ import annotations

from typing import Any

from rayfl.data.federated import FederatedData
from rayfl.engine.engine import Engine
from rayfl.registry import topology_of

__all__ = ["build_system"]


def build_system(config: Any, *, data: FederatedData | None = None) -> Engine:
    """Start the actors of ``config``'s run and return its engine.

    Args:
        config: The run config.
        data: A prebuilt federated dataset (default: built from ``config.data``).

    Raises:
        ValueError: If ``topology.kind`` is not a registered topology.
    """
    return Engine(config, data, strategy=topology_of(config).strategy())
