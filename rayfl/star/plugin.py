"""The star as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rayfl.observation import ACTION_PARTS, CORE_KEYS
from rayfl.star.config import StarTopologyConfig
from rayfl.topology import TopologyPlugin

__all__ = ["Star"]


class Star(TopologyPlugin):
    """N clients, one cloud, one wireless uplink (WPFL, DP-Ditto, DP-SparFL)."""

    name = "star"
    aliases = ("flat",)
    config = StarTopologyConfig
    default_policy = "all"
    observation_keys = CORE_KEYS
    action_parts = frozenset(ACTION_PARTS)
    envs = {
        "single": "envs.scheduling:WirelessFLEnv",
    }
    capabilities = frozenset({"keeps_warm"})

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.star.round import StarRound

        return StarRound()

    def context(self, cfg: Any, system: Any = None) -> Any:
        """Return the star's context (:mod:`rayfl.star.context`): of ``system``, else of ``cfg``."""
        from rayfl.star.context import config_context, star_context

        return config_context(cfg) if system is None else star_context(system)

    def deciders(self, cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
        """Return the star's one decider (:func:`rayfl.star.deciders.make_deciders`)."""
        from rayfl.star.deciders import make_deciders

        return make_deciders(cfg, system, policy_decider)

    def loop_settings(self, cfg: Any, base: Any) -> Any:
        """Evaluate every round unless the policy picks a client set (it may read the test metrics)."""
        from rayfl.star.deciders import chooses_participants

        return replace(base, evaluate_every_round=not chooses_participants(cfg))

    def check_policy_build(self, cfg: Any) -> None:
        """Build the policy on the scheduling env's spaces (:mod:`rayfl.star.deciders`)."""
        from rayfl.star.deciders import check_policy_build

        check_policy_build(cfg)

    def env_policy(self, cfg: Any, env: Any) -> Any:
        """Return the policy of a reset scheduling env (:func:`rayfl.star.deciders.env_policy`)."""
        from rayfl.star.deciders import env_policy

        return env_policy(cfg, env)

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
