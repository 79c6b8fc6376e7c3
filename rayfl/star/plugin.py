"""The star as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from collections.abc import Mapping
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
    capabilities = frozenset({"keeps_warm", "fits_surrogate"})

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.star.round import StarRound

        return StarRound()

    # -------------------------------------------------------------------- config
    rl_features = frozenset({"controls"})

    def check_scheduler(self, cfg: Any) -> None:
        """Subchannel policies need a ``wireless`` section; K is read or refused."""
        from rayfl.star.run_checks import check_star_scheduler

        check_star_scheduler(cfg, self.name)

    def policy_parts(self, cfg: Any) -> frozenset[str]:
        """The client set, or the subchannels (+ power, controls) with a channel."""
        from rayfl.star.run_checks import star_policy_parts

        return star_policy_parts(cfg)

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
    bench_parts = frozenset({"assignment", "controls"})  # the env exposes the controls
    bench_env_options = {"controls": True}

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return the star's benchmark scenarios (:mod:`rayfl.star.scenarios`)."""
        from rayfl.star.scenarios import scenarios

        return scenarios()

    def tunable_constants(self, cfg: Any) -> dict[str, tuple[float, float, float]]:
        """Return the algorithm's per-client controls (:mod:`rayfl.star.bench`)."""
        from rayfl.star.bench import tunable_constants

        return tunable_constants(cfg)

    def bench_policy(
        self, env: Any, cfg: Any, name: str, params: Mapping[str, Any], mode: str
    ) -> Any:
        """Build policy ``name`` with the star's context (:mod:`rayfl.star.bench`)."""
        from rayfl.star.bench import bench_policy

        return bench_policy(env, cfg, name, params, mode)
