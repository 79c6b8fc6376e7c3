"""D2D as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rayfl.d2d.config import D2DTopologyConfig
from rayfl.observation import CORE_KEYS, EXTRA_KEYS
from rayfl.topology import TopologyPlugin

__all__ = ["D2D"]


class D2D(TopologyPlugin):
    """Server-free device-to-device personalized FL (pFedWN)."""

    name = "d2d"
    config = D2DTopologyConfig
    default_policy = "channel_threshold"
    removed_fields = ("policy", "policy_params")
    observation_keys = (*CORE_KEYS, *EXTRA_KEYS)
    action_parts = frozenset({"assignment"})
    envs = {
        "single": "envs.d2d:D2DNeighborEnv",
    }

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.d2d.round import D2DRound

        return D2DRound()

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL

    # ------------------------------------------------------------- benchmarks
    untrained_params = {"selection": "positive"}  # how D2D policies are trained

    def scenarios(self) -> Mapping[str, tuple[Any, ...]]:
        """Return D2D's benchmark scenarios (:mod:`rayfl.d2d.scenarios`)."""
        from rayfl.d2d.scenarios import scenarios

        return scenarios()
