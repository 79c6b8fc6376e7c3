"""The hierarchy as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from collections.abc import Mapping
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

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
    bench_parts = frozenset({"assignment"})  # the env schedules subchannels
    capabilities = frozenset({"tunes_config"})  # constant_tuned sets config values

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return the hierarchy's benchmark scenarios (:mod:`rayfl.hierarchy.scenarios`)."""
        from rayfl.hierarchy.scenarios import scenarios

        return scenarios()

    def tunable_constants(self, cfg: Any) -> dict[str, tuple[float, float, float]]:
        """Return the configured step size's key (:mod:`rayfl.hierarchy.bench`)."""
        from rayfl.hierarchy.bench import tunable_constants

        return tunable_constants(cfg)

    def bench_policy(
        self, env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
    ) -> Any:
        """Build one policy ``name`` per edge (:mod:`rayfl.hierarchy.bench`)."""
        from rayfl.hierarchy.bench import bench_policy

        return bench_policy(env, name, params)
