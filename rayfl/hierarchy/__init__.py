"""Hierarchical FL with hierarchical DP (H2FDP, spec seed_004).

Devices → edge servers → cloud, each tier a Ray actor. Modules: ``config``
(the ``topology`` section), ``topology`` (subnets, trust), ``dp`` (σ per stream,
observer ledger), ``cost`` (energy/delay), ``controller`` (Algorithm 1),
``edge``/``device``/``cloud`` (actors), ``round`` (the engine strategy).
Imports are lazy so edge actors stay numpy-only.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["HierarchicalRound", "TopologyConfig"]

_LAZY = {
    "TopologyConfig": "rayfl.hierarchy.config",
    "HierarchicalRound": "rayfl.hierarchy.round",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(name)
