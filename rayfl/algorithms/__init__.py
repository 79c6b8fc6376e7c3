"""FL algorithms: one recipe per module, built by name through a registry.

The names below are imported on first use, so validating a config (which reads
``rayfl.algorithms.config``) imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rayfl.algorithms.base import Algorithm, ClientContext, ClientUpdate
    from rayfl.algorithms.registry import ALGORITHMS, make_algorithm

__all__ = ["ALGORITHMS", "Algorithm", "ClientContext", "ClientUpdate", "make_algorithm"]


def __getattr__(name: str) -> Any:
    if name in ("Algorithm", "ClientContext", "ClientUpdate"):
        from rayfl.algorithms import base

        return getattr(base, name)
    if name in ("ALGORITHMS", "make_algorithm"):
        from rayfl.algorithms import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'rayfl.algorithms' has no attribute {name!r}")
