"""The hierarchy as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from typing import Any

from rayfl.hierarchy.config import TopologyConfig
from rayfl.observation import CORE_KEYS
from rayfl.topology import TopologyPlugin

__all__ = ["Hierarchy"]


class Hierarchy(TopologyPlugin):
    """Devices → edge servers → cloud with hierarchical DP (H2FDP)."""

    name = "hierarchical"
    config = TopologyConfig
    default_policy = "uniform"
    removed_fields = ("scheduling.policy", "scheduling.params")
    observation_keys = CORE_KEYS
    action_parts = frozenset({"participants", "assignment"})
    envs = {
        "single": "envs.hierarchical:HierarchicalSchedulingEnv",
    }

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.hierarchy.round import HierarchicalRound

        return HierarchicalRound()

    def context(self, cfg: Any, system: Any = None) -> Any:
        """Return edge 0's context (:func:`rayfl.hierarchy.deciders.edge_context`)."""
        from rayfl.hierarchy.deciders import edge_context

        return edge_context(cfg, system)

    def deciders(self, cfg: Any, system: Any, policy_decider: Any) -> list[Any]:
        """Return one decider per edge (:func:`rayfl.hierarchy.deciders.edge_policies`)."""
        from rayfl.hierarchy.deciders import edge_policies

        return [
            policy_decider(policy, rules.to_schedule)
            for policy, rules in edge_policies(cfg, system)
        ]

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
