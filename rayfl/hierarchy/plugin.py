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
        "single": "envs.hierarchy.scheduling:HierarchicalSchedulingEnv",
        "flat": "envs.hierarchy.flat:HierarchicalFLFlatEnv",
        "rl_scores": "envs.hierarchy.rl:EdgeScores",
        "surrogate": "envs.hierarchy.surrogate:HierarchicalSurrogate",
        "policies": "envs.hierarchy.scheduling:EdgePolicies",
        "multiagent": "envs.hierarchy.multiagent:HierarchicalEdgesParallelEnv",
    }

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.hierarchy.round import HierarchicalRound

        return HierarchicalRound()

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL
    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """Each edge decides on its own K_e subchannels (top K_e scores)."""
        k = cfg.topology.scheduling.subchannels_per_edge
        return {"selection": "top_k", "num_subchannels": k}

    # ------------------------------------------------------------- benchmarks
