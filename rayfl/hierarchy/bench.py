"""The hierarchy's side of ``rayfl bench policies``: what ``constant_tuned`` tunes, how a policy is built.

Called by the hooks of :class:`rayfl.hierarchy.plugin.Hierarchy` (imported
when called: the plug-in module stays light). The hierarchy's env schedules
subchannels only (no per-device controls), so ``constant_tuned`` tunes a
config value: the configured step size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["bench_policy", "tunable_constants"]


def tunable_constants(cfg: Any) -> dict[str, tuple[float, float, float]]:
    """The configured step size as a dotted config key: {key: (configured, low, high)}.

    ``topology.lr.gamma`` in ``lr.mode: manual`` (η_k = γ/√(k+1)),
    ``algorithm.lr`` in ``constant``; nothing in ``theory`` (the paper's rule
    sets η_k). The range is the algorithm's ``lr`` control's.
    """
    from rayfl.algorithms.registry import algorithm_controls

    low, high = algorithm_controls(cfg.algorithm).get("lr", (0.0, 1.0))
    lr: Any = getattr(cfg.topology, "lr", None)
    if lr is not None and lr.mode == "manual":
        return {"topology.lr.gamma": (float(lr.gamma), low, high)}
    if lr is not None and lr.mode == "constant":
        return {"algorithm.lr": (float(cfg.algorithm.lr), low, high)}
    return {}


def bench_policy(env: Any, name: str, params: Mapping[str, Any]) -> Any:
    """One policy ``name`` per edge, driving the env as one (the ``policies`` env)."""
    from rayfl.registry import load, topology_of

    edge_policies = load(topology_of(env.unwrapped.config).envs["policies"])
    return edge_policies(env.unwrapped, name, **params)
