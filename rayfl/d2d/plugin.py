"""D2D as a topology plug-in (:class:`rayfl.topology.TopologyPlugin`)."""

from __future__ import annotations

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
        "single": "envs.d2d.neighbor:D2DNeighborEnv",
        "flat": "envs.d2d.flat:D2DNeighborFlatEnv",
        "rl_base": "envs.d2d.rl:target_env",
        "surrogate": "envs.d2d.surrogate:D2DSurrogateBackend",
        "multiagent": "envs.d2d.multiagent:D2DTargetsParallelEnv",
    }

    # ------------------------------------------------------------ engine, runner
    def strategy(self) -> Any:
        """Return a new engine strategy."""
        from rayfl.d2d.round import D2DRound

        return D2DRound()

    # -------------------------------------------------------------------- config

    # ------------------------------------------------------------ envs and RL
    rl_options = frozenset({"neighbor_cost"})

    def rl_meta(self, cfg: Any) -> dict[str, Any]:
        """A target takes every eligible positive score, at most F neighbors."""
        return {
            "selection": "positive",
            "num_subchannels": cfg.topology.num_subchannels,
        }

    # ------------------------------------------------------------- benchmarks
