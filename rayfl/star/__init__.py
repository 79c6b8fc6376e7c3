"""The star topology: N clients, one cloud, one wireless uplink (``StarRound``).

Imports are lazy, so the plug-in (:mod:`rayfl.star.plugin`) and the config
section load without torch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["StarRound", "star_observation"]

_LAZY = {
    "StarRound": "rayfl.star.round",
    "star_observation": "rayfl.star.round",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(name)
