"""The star's side of ``rayfl bench policies``: what ``constant_tuned`` tunes, how a policy is built.

Called by the hooks of :class:`rayfl.star.plugin.Star` (imported when called:
the plug-in module stays light).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from rayfl.observation import LinkConstants
from rayfl.star.context import StarContext, star_context

__all__ = ["bench_policy", "config_context", "tunable_constants"]


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


def config_context(cfg: Any, model_dim: int = 1) -> StarContext:
    """The star's context from its config alone (no FL system built).

    The link constants of ``wireless`` and the algorithm's ``control_names``;
    the model size is ``model_dim`` and the DP constants are left unset (what
    ``rayfl.compare.config_context`` gives a comparison).
    """
    from rayfl.algorithms.registry import algorithm_controls

    wireless = cfg.wireless
    link = None
    if wireless is not None:
        names = [f.name for f in fields(LinkConstants) if hasattr(wireless, f.name)]
        link = LinkConstants(**{n: getattr(wireless, n) for n in names})
    return StarContext(
        topology="star",
        seed=int(cfg.seed),
        rounds=int(cfg.rounds),
        model_dim=model_dim,
        link=link,
        control_names=tuple(algorithm_controls(cfg.algorithm)),
    )


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
