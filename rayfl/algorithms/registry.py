"""Registry of algorithms: ``algorithm.kind`` → ``"module:Class"``, imported lazily."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the classes import torch; validating a config must not
    from rayfl.algorithms.base import Algorithm
    from rayfl.algorithms.config import LocalTrainingConfig

__all__ = ["ALGORITHMS", "algorithm_class", "algorithm_controls", "make_algorithm"]

ALGORITHMS: dict[str, str] = {
    "fedavg": "rayfl.algorithms.fedavg:FedAvg",
    "fedprox": "rayfl.algorithms.fedprox:FedProx",
    "ditto": "rayfl.algorithms.ditto:Ditto",
    "pfedme": "rayfl.algorithms.pfedme:PFedMe",
    "perfedavg": "rayfl.algorithms.perfedavg:PerFedAvg",
    "fedamp": "rayfl.algorithms.fedamp:FedAMP",
    "fedala": "rayfl.algorithms.fedala:FedALA",
    "apple": "rayfl.algorithms.apple:APPLE",
    "wpfl": "rayfl.algorithms.wpfl:Wpfl",
    "sparse_dp": "rayfl.algorithms.sparse_dp:SparseDP",
}


def algorithm_class(config: LocalTrainingConfig) -> type[Algorithm]:
    """Return the class named by ``config.kind``.

    Raises:
        ValueError: For an unknown kind, listing the known ones.
    """
    try:
        entry = ALGORITHMS[config.kind]
    except KeyError:
        raise ValueError(
            f"algorithm.kind must be one of {', '.join(sorted(ALGORITHMS))}; "
            f"got {config.kind!r}"
        ) from None
    module, name = entry.split(":")
    cls: type[Algorithm] = getattr(importlib.import_module(module), name)
    return cls


def algorithm_controls(config: LocalTrainingConfig) -> dict[str, tuple[float, float]]:
    """Return the per-client controls the algorithm declares (name → range)."""
    return dict(algorithm_class(config).controls)


def make_algorithm(config: LocalTrainingConfig) -> Algorithm:
    """Build the algorithm named by ``config.kind``."""
    return algorithm_class(config)(config)
