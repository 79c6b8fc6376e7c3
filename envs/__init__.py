"""Gymnasium environments over the rayfl engine (registered on import)."""

from gymnasium.envs.registration import register

__all__ = ["ENV_IDS"]

ENV_IDS = ("WirelessFL-v0", "HierarchicalFL-v0", "D2DNeighbor-v0")

register(
    id="WirelessFL-v0",
    entry_point="envs.scheduling:WirelessFLEnv",
)

# devices → edges → cloud: per-edge subchannel scheduling (rayfl.hierarchy, issue 8)
register(
    id="HierarchicalFL-v0",
    entry_point="envs.hierarchical:HierarchicalSchedulingEnv",
)

# one D2D target's neighbour selection (rayfl.d2d, issue 9)
register(
    id="D2DNeighbor-v0",
    entry_point="envs.d2d:D2DNeighborEnv",
)
