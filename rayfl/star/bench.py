"""The star's side of ``rayfl bench policies``: what ``constant_tuned`` tunes, how a policy is built.

Called by the hooks of :class:`rayfl.star.plugin.Star` (imported when called:
the plug-in module stays light).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayfl.star.context import config_context, star_context

__all__ = ["bench_policy", "tunable_constants"]


def tunable_constants(cfg: Any) -> dict[str, tuple[float, float, float]]:
    """The algorithm's per-client controls (FedAvg: ``lr``): {name: (configured, low, high)}.

    The benchmark holds them constant over clients and rounds (the env's
    ``controls`` action).
    """
    from rayfl.algorithms.registry import algorithm_controls

    return {
        name: (float(getattr(cfg.algorithm, name)), low, high)
        for name, (low, high) in algorithm_controls(cfg.algorithm).items()
    }


def bench_policy(
    env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
) -> Any:
    """Policy ``name`` with the star's context: the built system's in emulate mode, the config's otherwise."""
    from rayfl.registry import build_policy

    context = (
        star_context(env.unwrapped.backend.system)
        if mode == "emulate"
        else config_context(cfg)
    )
    return build_policy(name, env, params=params, context=context)
