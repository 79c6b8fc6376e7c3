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
    """Policy ``name`` with the star's context: the env's system or surrogate model.

    In emulate mode the built system's; in surrogate mode the surrogate
    backend's (its model size, uplink and upload bits, as the surrogate
    charges them), so a policy that reads the link's ``upload_bits`` (e.g.
    ``deadline_max_weight``'s airtime) sees the run's model, not a size of 1.
    The config's (:func:`config_context`) only for a backend with neither.
    """
    from rayfl.registry import build_policy

    backend = env.unwrapped.backend
    if mode == "emulate":
        context = star_context(backend.system)
    elif hasattr(backend, "dim") and hasattr(backend, "uplink"):
        context = star_context(backend)
    else:
        context = config_context(cfg)
    return build_policy(name, env, params=params, context=context)
